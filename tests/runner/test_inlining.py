"""Tensorforce's nested functions traced inline (runner/inlining.py) compute what the nested graphs compute.

Each comparison trains in two fresh processes, one with ``RLCLOUD_INLINE_FUNCTIONS=0`` (Tensorforce's own
nested function graphs) and one as the runner runs by default (inline). With Grappler's remapper off in both,
the two must be bit for bit equal, actions and weights after many updates, for agents whose random ops
differ (PPO's subsampling, DQN's replay sampling and exploration, Gaussian sampling with exploration noise):
the same ops with the same seeds. With TensorFlow's defaults the remapper fuses a few more ops once they are
in one graph, which rounds the updates' last bits differently: the README's agent must still play the same
episodes, through the Trainer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rlcloud.runner.inlining import INLINE_VARIABLE, _signature_inputs, inline_nested_functions, is_inlining

ROOT = Path(__file__).resolve().parents[2]

_DRIVE = textwrap.dedent(
    """
    import hashlib, json, sys
    import numpy as np
    from rlcloud.runner.agent_calls import AgentCalls
    from rlcloud.runner.compat import import_tensorforce
    from rlcloud.runner.inlining import inline_nested_functions
    from rlcloud.runner.vector import BatchedVectorEnv, EnvFactory

    level, agent_spec, steps = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    tensorforce = import_tensorforce()
    import tensorflow as tf

    inlining = inline_nested_functions()  # as Trainer.setup does: RLCLOUD_INLINE_FUNCTIONS decides
    tf.config.optimizer.set_experimental_options({"remapping": False})


    class TwoActions:  # two action components: two samplings in one act, plus exploration noise on both
        states_spec = {"type": "float", "shape": (4,)}
        actions_spec = {"turn": {"type": "int", "num_values": 3},
                        "push": {"type": "float", "shape": (), "min_value": -1.0, "max_value": 1.0}}
        max_episode_timesteps = 25

        def __init__(self):
            self.rng, self.t = np.random.default_rng(3), 0

        def reset(self):
            return self.rng.normal(size=(4, 4)).astype(np.float32)

        def step(self, actions):
            self.t += 1
            rewards = (actions["turn"] == 1) - np.abs(actions["push"])
            return self.reset(), rewards.astype(np.float32), np.full(4, int(self.t % 25 == 0))


    if level == "two-actions":
        venv = TwoActions()
    else:
        venv = BatchedVectorEnv.from_factory(EnvFactory({"type": "gym", "level": level}), 4, seed=3)
    agent = tensorforce.Agent.create(
        states=venv.states_spec, actions=venv.actions_spec, max_episode_timesteps=venv.max_episode_timesteps,
        parallel_interactions=4, config=dict(seed=7, create_tf_assertions=False), **agent_spec,
    )
    calls = AgentCalls(agent, np.arange(4))
    actions_seen, states = hashlib.sha256(), venv.reset()
    for _ in range(steps):
        actions = calls.act(states)
        for value in actions.values() if isinstance(actions, dict) else [actions]:
            actions_seen.update(np.asarray(value).tobytes())
        states, rewards, terminals = venv.step(actions)
        calls.observe(rewards, terminals)
        if agent.updates == 0:
            before_update = actions_seen.hexdigest()
    weights = hashlib.sha256(b"".join(v.numpy().tobytes() for v in agent.model.trainable_variables))
    print(json.dumps({"inlining": inlining, "actions": actions_seen.hexdigest(), "weights": weights.hexdigest(),
                      "updates": int(agent.updates), "before_update": before_update}))
    """
)


def _run(code: str, args: list[str], inline: bool) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if k != INLINE_VARIABLE}
    if not inline:
        environ[INLINE_VARIABLE] = "0"
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600, env=environ, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    assert result.pop("inlining") is inline
    return result


CRITIC = {"baseline": {"type": "auto", "size": 32, "depth": 1}, "baseline_optimizer": {"optimizer": "adam"}}
AGENTS = {  # level, agent, steps of the 4 environments
    "ppo-critic": ("CartPole-v1", {"agent": "ppo", "batch_size": 2, **CRITIC}, 600),
    "dqn-replay-exploration": (
        "CartPole-v1",
        {"agent": "dqn", "memory": 2000, "batch_size": 16, "exploration": 0.1, "start_updating": 64},
        1500,
    ),
    "gaussian-exploration": ("Pendulum-v1", {"agent": "ppo", "batch_size": 2, "exploration": 0.1}, 1000),
}


@pytest.mark.training
@pytest.mark.parametrize("kind", sorted(AGENTS))
def test_inline_and_nested_graphs_compute_the_same_bits(kind: str) -> None:
    level, agent, steps = AGENTS[kind]
    args = [level, json.dumps(agent), str(steps)]
    nested = _run(_DRIVE, args, inline=False)
    inline = _run(_DRIVE, args, inline=True)
    assert nested["updates"] >= 10  # the comparison spans many updates, not only the first actions
    assert inline == nested


@pytest.mark.training
def test_two_samplings_in_one_act_keep_their_seeds() -> None:
    """Two action components: act samples twice (and adds exploration noise twice), each in a nested
    function of its own before. The actions up to the first update are equal bit for bit; the updates
    then round differently (the gradients of the two components are summed in another order)."""
    args = ["two-actions", json.dumps({"agent": "ppo", "batch_size": 2, "exploration": 0.1}), "60"]
    nested = _run(_DRIVE, args, inline=False)
    inline = _run(_DRIVE, args, inline=True)
    assert nested["updates"] >= 1 and nested["before_update"] != nested["actions"]
    assert inline["before_update"] == nested["before_update"]


@pytest.mark.training
def test_inlined_random_ops_take_the_seeds_of_their_own_graphs() -> None:
    """Random ops without a seed count their op seeds per graph: the same two functions, nested or inline,
    draw the same numbers (each function's random op gets op seed 0, the caller's two get 0 and 1)."""
    from rlcloud.runner.compat import import_tensorforce

    import_tensorforce()
    import tensorflow as tf
    from tensorforce.core import module

    before = is_inlining()

    def draws(inline: bool) -> list[list[float]]:
        inline_nested_functions(inline)
        tf.random.set_seed(11)
        first, second = (
            module.tf.function(lambda: tf.random.uniform((3,)), input_signature=(), autograph=False) for _ in "12"
        )

        @tf.function(autograph=False)
        def outer() -> Any:
            return tf.random.uniform((3,)), first(), tf.random.uniform((3,)), second()

        return [values.numpy().tolist() for values in outer()]

    try:
        nested, inline = draws(inline=False), draws(inline=True)
    finally:
        inline_nested_functions(before)
    assert inline == nested
    assert nested[1] == nested[3] == nested[0] != nested[2]


_TRAIN = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from rlcloud.runner.loop import Trainer, read_jsonl
    from rlcloud.runner.inlining import is_inlining
    from rlcloud.specs import ExperimentSpec

    spec = ExperimentSpec.from_file(Path(sys.argv[1])).replace(
        num_workers=4, total_timesteps=3000, saver_frequency=None, summary_frequency=None, evaluation=None
    )
    Trainer(spec, Path(sys.argv[2])).run()
    episodes = [{k: v for k, v in r.items() if k != "time"} for r in read_jsonl(Path(sys.argv[2]) / "metrics.jsonl")]
    print(json.dumps({"inlining": is_inlining(), "episodes": episodes}))
    """
)


@pytest.mark.training
def test_the_runner_inlines_and_plays_the_same_episodes(tmp_path: Path) -> None:
    example = str(ROOT / "examples" / "cartpole_ppo.yaml")
    nested = _run(_TRAIN, [example, str(tmp_path / "nested")], inline=False)
    inline = _run(_TRAIN, [example, str(tmp_path / "inline")], inline=True)
    assert len(nested["episodes"]) > 50  # about ten PPO updates (every 5 episodes)
    assert inline["episodes"] == nested["episodes"]


@pytest.mark.training
def test_nested_calls_become_ops_of_the_calling_graph() -> None:
    import numpy as np

    from rlcloud.runner.compat import import_tensorforce

    tensorforce = import_tensorforce()
    before = is_inlining()

    def call_ops(inline: bool) -> int:
        inline_nested_functions(inline)
        agent = tensorforce.Agent.create(
            agent="ppo", states={"type": "float", "shape": (4,)}, actions={"type": "int", "num_values": 2},
            max_episode_timesteps=50, batch_size=2, config={"create_tf_assertions": False},
        )  # fmt: skip
        agent.act(states=np.zeros(4, dtype=np.float32))
        graph = next(iter(agent.model._act_graphs.values())).get_concrete_function().graph  # act's one trace
        agent.close()
        return sum(op.type in ("PartitionedCall", "StatefulPartitionedCall") for op in graph.get_operations())

    try:
        assert call_ops(inline=False) > 0
        assert call_ops(inline=True) == 0
    finally:
        inline_nested_functions(before)


@pytest.mark.training
def test_only_what_the_function_call_would_pass_is_inlined() -> None:
    import numpy as np
    import tensorflow as tf

    signature = [tf.TensorSpec(shape=(None, 4), dtype=tf.float32), tf.TensorSpec(shape=(), dtype=tf.int64)]

    @tf.function(autograph=False)
    def check() -> None:
        rows = tf.compat.v1.placeholder_with_default(tf.zeros((3, 4)), shape=(None, 4))
        passed = _signature_inputs(tf, signature, (rows, 2))
        assert passed is not None and passed[0] is rows and passed[1].dtype == tf.int64  # a number converts
        assert _signature_inputs(tf, signature, (rows, np.int64(2))) is not None
        assert _signature_inputs(tf, signature, (tf.zeros((3, 4)), 2)) is None  # a static shape the call hides
        assert _signature_inputs(tf, signature, (tf.cast(rows, tf.float64), 2)) is None  # another dtype
        assert _signature_inputs(tf, signature, (rows,)) is None  # an argument missing
        assert _signature_inputs(tf, None, (rows, 2)) is None  # no signature

    check.get_concrete_function()
