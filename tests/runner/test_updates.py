"""Several environments update at one environment's rate (runner/updates.py).

A DQN agent updating every 4 timesteps is driven over 4 CartPole environments as the loop drives it
(:class:`AgentCalls`, then :meth:`TimestepUpdates.catch_up` after every vector step). Tensorforce alone
updates once per episode's observe; with the catch-up it makes one update per 4 timesteps of all
environments together, from the end of the first episode on, as a single environment does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlcloud.runner.agent_calls import AgentCalls
from rlcloud.runner.compat import import_tensorforce
from rlcloud.runner.updates import TimestepUpdates
from rlcloud.runner.vector import BatchedVectorEnv, EnvFactory

CARTPOLE = EnvFactory({"type": "gym", "level": "CartPole-v1"})
FREQUENCY = 4
DQN = {
    "agent": "dqn",
    "memory": 2000,
    "batch_size": 16,
    "start_updating": 32,
    "update_frequency": FREQUENCY,
    "exploration": 0.3,
}


def _agent(venv: BatchedVectorEnv, **agent: Any) -> Any:
    return import_tensorforce().Agent.create(
        states=venv.states_spec,
        actions=venv.actions_spec,
        max_episode_timesteps=venv.max_episode_timesteps,
        parallel_interactions=venv.num_envs,
        config=dict(seed=7, create_tf_assertions=False),
        **agent,
    )


def _drive(rows: int, steps: int, enabled: bool | None, **agent: Any) -> tuple[list[tuple[int, int, int]], Any]:
    """(timesteps, episodes, updates) after every vector step, and the catch-up (None: not applied)."""
    venv = BatchedVectorEnv.from_factory(CARTPOLE, rows, seed=3)
    tf_agent = _agent(venv, **agent)
    calls = AgentCalls(tf_agent, np.arange(rows))
    updates = TimestepUpdates.for_agent(tf_agent, enabled=enabled)
    trace = []
    states = venv.reset()
    try:
        for _ in range(steps):
            states, rewards, terminals = venv.step(calls.act(states))
            calls.observe(rewards, terminals)
            if updates is not None:
                updates.catch_up()
            trace.append((int(tf_agent.timesteps), int(tf_agent.episodes), int(tf_agent.updates)))
        assert int(tf_agent.model.updates.numpy()) == trace[-1][2]  # the model counted every update
    finally:
        tf_agent.close()
        venv.close()
    return trace, updates


@pytest.mark.training
def test_four_environments_update_every_four_timesteps_after_the_first_episode() -> None:
    trace, updates = _drive(rows=4, steps=260, enabled=True, **DQN)
    assert updates is not None and updates.frequency == FREQUENCY
    first = next(i for i, (_, episodes, _) in enumerate(trace) if episodes > 0)
    assert trace[first][2] == 0  # the memory was empty until then: no update
    # from the step after the first episode reached the memory: one update per vector step of 4 timesteps
    after = trace[first + 1 :]
    assert len(after) > 100
    assert [b[2] - a[2] for a, b in zip(trace[first:], after, strict=False)] == [1] * len(after)
    assert updates.performed > 0.9 * len(after)  # most of them the catch-up's, the rest observe's own


@pytest.mark.training
def test_tensorforce_alone_updates_once_per_observe_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLCLOUD_TIMESTEP_UPDATES", "0")  # the runner variable that keeps Tensorforce's way
    trace, updates = _drive(rows=4, steps=260, enabled=None, **DQN)
    assert updates is None
    timesteps, episodes, total = trace[-1]
    assert 0 < total <= episodes  # at most one per episode's observe: far from timesteps / 4
    assert total < timesteps // FREQUENCY // 4


@pytest.mark.training
@pytest.mark.parametrize(
    ("rows", "agent"),
    [
        (1, DQN),  # one environment: Tensorforce observes every update_frequency timesteps itself
        (4, {"agent": "ppo", "batch_size": 2}),  # updates per episode: nothing to catch up
    ],
    ids=["one-environment", "episode-updates"],
)
def test_agents_whose_own_updates_keep_the_rate_get_no_catch_up(rows: int, agent: dict[str, Any]) -> None:
    venv = BatchedVectorEnv.from_factory(CARTPOLE, rows, seed=3)
    tf_agent = _agent(venv, **agent)
    try:
        assert TimestepUpdates.for_agent(tf_agent, enabled=True) is None
    finally:
        tf_agent.close()
        venv.close()


@pytest.mark.training
def test_the_training_loop_keeps_the_rate_across_a_resume(tmp_path: Path) -> None:
    """The runner's loop (four environments in one process) makes one update per 4 timesteps from the first
    episode on, and a run resumed from its checkpoint goes on at that rate."""
    from rlcloud.layout import METRICS
    from rlcloud.runner.loop import Trainer
    from rlcloud.specs import ExperimentSpec

    def spec(total: int) -> ExperimentSpec:
        return ExperimentSpec(
            name="cartpole-dqn",
            environment={"type": "gym", "level": "CartPole-v1"},
            agent={**{k: v for k, v in DQN.items() if k != "agent"}, "type": "dqn"},
            seed=3,
            run_mode="multi-threaded",
            num_workers=4,
            max_timesteps_per_episode=100,  # several environments: memory >= 2 x this (Tensorforce)
            total_timesteps=total,
        )

    class CountUpdates:
        """A hook reading the model's update counter when the run finishes (before the agent closes)."""

        trainer: Trainer
        updates = 0

        def on_finish(self, state: str) -> None:
            self.updates = int(self.trainer.agent.model.updates.numpy())

    def run(total: int) -> tuple[int, int]:
        """(updates, timesteps since the first episode ended) of a run to ``total`` timesteps."""
        hook = CountUpdates()
        hook.trainer = Trainer(spec(total), tmp_path, hooks=hook)
        result = hook.trainer.run()
        first = json.loads((tmp_path / METRICS).read_text().splitlines()[0])["timestep"]
        return hook.updates, result.timesteps - first

    updates, timesteps = run(600)
    assert abs(updates - timesteps // FREQUENCY) <= 2, (updates, timesteps)
    # resumed from the checkpoint: one vector step after the restore belongs to no schedule yet
    updates, timesteps = run(1000)
    assert abs(updates - timesteps // FREQUENCY) <= 3, (updates, timesteps)
