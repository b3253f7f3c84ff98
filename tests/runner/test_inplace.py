"""Tensorforce's buffer writes made in place (runner/inplace.py) compute what Tensorforce computes alone.

Each comparison trains in two fresh processes, one with ``RLCLOUD_INPLACE_BUFFERS=0`` (Tensorforce's own
rebuild-and-assign writes) and one as the runner runs by default (in place): the same seed must give the same
actions and the same weights, bit for bit, after many updates and after the replay memory has wrapped around.
Two paths of Tensorforce's model are covered: one environment (its circular observe buffer, where experience
enters the memory every ``update_frequency`` timesteps) with the Space Invaders example's agent (image
preprocessing, convolutions, exploration), and four environments (per-episode buffers, read back at an
episode's end) with a DQN and with the README's PPO on CartPole.
"""

from __future__ import annotations

import json
import os
import textwrap
from typing import Any

import pytest

from rlcloud.runner.frames import FRAMES_VARIABLE
from rlcloud.runner.inplace import INPLACE_VARIABLE, patched_methods, rewrite_source
from tests.support.training_process import SPACE_INVADERS_SINGLE, TRAIN_STEPS, run_script

_REPORT = textwrap.dedent(
    """
    from rlcloud.runner.inplace import patched_methods

    print(json.dumps({
        "patched": patched_methods(), "actions": actions_seen.hexdigest(), "weights": weights.hexdigest(),
        "updates": int(agent.updates), "written": int(memory.buffer_index.numpy()), "capacity": memory.capacity,
        "terminal_indices": memory.terminal_indices.numpy().tolist(),
    }))
    """
)


def _run(case: dict[str, Any], inplace: bool) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if k != INPLACE_VARIABLE}
    # Frames kept as uint8 (runner/frames.py) round them, which needs the in-place writes: off on both sides
    # here, so that only the writes differ (tests/runner/test_frames.py compares the frames).
    environ[FRAMES_VARIABLE] = "0"
    if not inplace:
        environ[INPLACE_VARIABLE] = "0"
    result = run_script(TRAIN_STEPS + _REPORT, json.dumps(case), environ=environ)
    assert bool(result.pop("patched")) is inplace
    return result


CASES = {
    "space-invaders-single": SPACE_INVADERS_SINGLE,
    "cartpole-dqn-4-envs": {
        "example": "examples/space_invaders_dqn.yaml",
        "overrides": {
            "run_mode": "multi-threaded",
            "num_workers": 4,
            "execution": "batched",
            "seed": 5,
            "environment": {"type": "gym", "level": "CartPole-v1"},
            "max_timesteps_per_episode": 50,
            "agent": {
                "type": "dqn",
                "memory": 200,
                "batch_size": 16,
                "update_frequency": 4,
                "start_updating": 64,
                "exploration": 0.1,
            },
            "network": "auto",
        },
        "steps": 200,
    },
    # PPO buffers whole episodes (observe's per-episode branch) and keeps a recent memory.
    "cartpole-ppo-4-envs": {
        "example": "examples/cartpole_ppo.yaml",
        "overrides": {"num_workers": 4, "execution": "batched", "seed": 5, "max_timesteps_per_episode": 20},
        "steps": 250,
        "min_updates": 8,
    },
}


@pytest.mark.training
@pytest.mark.parametrize("kind", sorted(CASES))
def test_in_place_buffers_learn_exactly_what_tensorforce_learns(kind: str) -> None:
    rebuilt = _run(CASES[kind], inplace=False)
    inplace = _run(CASES[kind], inplace=True)
    assert rebuilt["updates"] >= CASES[kind].get("min_updates", 20)  # many updates, not only the first actions
    assert rebuilt["written"] > 2 * rebuilt["capacity"]  # the replay memory wrapped around
    assert inplace == rebuilt


@pytest.mark.training
def test_every_buffer_method_of_tensorforce_is_rewritten() -> None:
    from rlcloud.runner.compat import import_tensorforce

    import_tensorforce()
    if os.environ.get(INPLACE_VARIABLE) == "0":
        pytest.skip(f"{INPLACE_VARIABLE}=0 in this environment")
    assert patched_methods() == [
        "Queue.reset",
        "Queue.enqueue",
        "TensorforceModel.core_act",
        "TensorforceModel.core_observe",
        "TensorforceModel._nonterminal_experience",
    ]


def test_rebuild_and_assign_becomes_one_in_place_write() -> None:
    source = textwrap.dedent(
        """
        def f(self):
            value = tf.tensor_scatter_nd_update(
                tensor=self.buffers['terminal'], indices=indices, updates=two
            )
            dependencies.append(self.buffers['terminal'].assign(value=value))
            # value = tf.tensor_scatter_nd_update(tensor=x, indices=i, updates=u)
            states = tf.gather(params=x[parallel], indices=indices[:ints_end])
            rewards = self.reward_buffer[parallel, :buffer_index - batch_size]
            updates = self.terminal_indices[num_episodes: index]
        """
    )
    rewritten, writes, reads = rewrite_source(source)
    assert (writes, reads) == (1, 3)
    assert "dependencies.append(self.buffers['terminal'].scatter_nd_update(indices=indices, updates=two))" in rewritten
    assert "_rlcloud_row_gather(tf, x, parallel, indices[:ints_end])" in rewritten
    assert "_rlcloud_row_gather(tf, self.reward_buffer, parallel, tf.range(buffer_index - batch_size))" in rewritten
    assert "tf.gather(params=self.terminal_indices, indices=tf.range(num_episodes, index))" in rewritten
    assert "tensor_scatter_nd_update" not in rewritten  # comments are dropped, not rewritten
