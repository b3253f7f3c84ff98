"""Checkpoints leave out the per-environment episode buffers (rlcloud.runner.saving) and restore the rest.

A DQN agent on 2 CartPole environments: with several environments Tensorforce buffers each one's episode
(``states_buffer``: parallel_interactions x max_episode_timesteps states), which its restore discards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlcloud.runner.loop import Trainer
from rlcloud.specs import ExperimentSpec

DQN = {"type": "dqn", "memory": 200, "batch_size": 8, "start_updating": 50, "learning_rate": 1e-3}
EPISODE_STATE = ("states_buffer", "actions_buffer", "auxiliaries_buffer", "buffer_index", "episode_length")


def make_spec(**overrides: Any) -> ExperimentSpec:
    fields: dict[str, Any] = dict(
        name="cartpole-dqn",
        environment={"type": "gym", "level": "CartPole-v1"},
        agent=DQN,
        seed=3,
        run_mode="multi-threaded",
        num_workers=2,
        max_timesteps_per_episode=100,  # several environments: memory >= 2 x this (Tensorforce)
        total_timesteps=400,
    )
    fields.update(overrides)
    return ExperimentSpec(**fields)


def variables(agent: Any) -> dict[str, np.ndarray]:
    return {v.name: v.numpy() for v in agent.model.variables}


class CaptureVariables:
    """A hook that records every variable of the live agent at each checkpoint."""

    def __init__(self) -> None:
        self.trainer: Trainer | None = None
        self.captured: dict[str, dict[str, np.ndarray]] = {}
        self.unsaved: set[str] = set()

    def on_checkpoint(self, name: str) -> None:
        assert self.trainer is not None
        self.captured[name] = variables(self.trainer.agent)
        model = self.trainer.agent.model
        self.unsaved = {v.name for v in model.variables if getattr(v, "is_saved", True) is False}


@pytest.mark.training
def test_checkpoint_leaves_out_episode_buffers_and_restores_everything_else(tmp_path: Path) -> None:
    import tensorflow as tf

    hook = CaptureVariables()
    first = Trainer(make_spec(), tmp_path, hooks=hook)
    hook.trainer = first
    result = first.run()
    assert result.checkpoint is not None
    saved = hook.captured[result.checkpoint]
    directory = tmp_path / "checkpoints" / result.checkpoint
    assert sorted(p.name for p in directory.iterdir() if p.name != "state.json")[-2:] == ["agent.json", "checkpoint"]

    stored = {name for name, _ in tf.train.list_variables(tf.train.latest_checkpoint(str(directory)))}
    top = {n.split("/")[1] for n in stored if n.startswith("agent/")}
    assert not top & set(EPISODE_STATE), "episode buffers were written"
    assert not [n for n in stored if "/parent/" in n], "the model was written again under another path"
    assert any(n.startswith("agent/memory/buffers/states/") for n in stored), "the replay memory is missing"
    assert any(".OPTIMIZER_SLOT" in n for n in stored), "the optimizer state is missing"
    # the buffers held something worth leaving out: episodes were in flight when the run stopped
    assert saved["agent/buffer-index:0"].any()

    second = Trainer(make_spec(total_timesteps=600), tmp_path)
    second.setup()
    restored = variables(second.agent)
    assert restored.keys() == saved.keys()
    # Tensorforce marks the episode state (and its summaries' step counters) is_saved=False
    episode_state = hook.unsaved
    assert {"agent/buffer-index:0", "agent/states-buffer:0", "agent/actions-buffer:0"} <= episode_state
    for name, value in saved.items():
        if name in episode_state:
            continue
        np.testing.assert_array_equal(restored[name], value, err_msg=name)
    # what was left out starts empty, as Tensorforce's restore would have made it anyway
    assert not restored["agent/buffer-index:0"].any()
    assert saved["agent/memory/buffer-index:0"] > 0  # the replay memory came back, not an empty one
    assert second.run().timesteps >= 600
