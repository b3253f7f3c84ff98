"""AgentCalls (the loop's direct act/observe) learns exactly what Tensorforce's public Agent API learns.

Two agents with the same seed are driven over the same seeded CartPole environments, one as Tensorforce
builds and drives it by default (``Agent.act``/``observe``, in-graph assertions on) and one as the loop does
(:class:`AgentCalls`, ``create_tf_assertions`` off: runner/loop.py ``build_agent_kwargs``): every action,
every update count and the agents' counters must be identical, and the public API must keep working on
the directly driven agent.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rlcloud.runner.agent_calls import AgentCalls
from rlcloud.runner.compat import import_tensorforce
from rlcloud.runner.vector import BatchedVectorEnv, EnvFactory

CARTPOLE = EnvFactory({"type": "gym", "level": "CartPole-v1"})
ROWS = 4


def _agent(venv: BatchedVectorEnv, assertions: bool = True, **agent: Any) -> Any:
    tensorforce = import_tensorforce()
    return tensorforce.Agent.create(
        states=venv.states_spec,
        actions=venv.actions_spec,
        max_episode_timesteps=venv.max_episode_timesteps,
        parallel_interactions=venv.num_envs,
        config=dict(seed=7, create_tf_assertions=assertions),
        **agent,
    )


def _drive(agent: Any, direct: bool, steps: int) -> tuple[list[list[int]], list[int], list[float]]:
    venv = BatchedVectorEnv.from_factory(CARTPOLE, ROWS, seed=3)
    rows = np.arange(ROWS)
    calls = AgentCalls(agent, rows)
    assert calls.direct  # the common case: singleton states, no recorder
    actions_seen, updates, returns = [], [], []
    ep_return = np.zeros(ROWS)
    states = venv.reset()
    for _ in range(steps):
        actions = calls.act(states) if direct else np.asarray(agent.act(states=states, parallel=rows))
        actions_seen.append([int(a) for a in actions])
        states, rewards, terminals = venv.step(actions)
        if direct:
            updates.append(calls.observe(rewards, terminals))
        else:
            updates.append(int(agent.observe(reward=rewards, terminal=terminals, parallel=rows)))
        ep_return += rewards
        for row in np.flatnonzero(terminals):
            returns.append(float(ep_return[row]))
            ep_return[row] = 0.0
    venv.close()
    if direct:  # after their first calls, act and observe run as their traced graphs with flat tensors
        assert calls.flat
    return actions_seen, updates, returns


@pytest.mark.training
@pytest.mark.parametrize(
    "agent",
    [
        {"agent": "ppo", "batch_size": 4, "learning_rate": 1e-3},  # observe once per episode
        {
            "agent": "dqn",
            "memory": 2000,
            "batch_size": 16,
            "start_updating": 64,
            "update_frequency": 4,
            "exploration": 0.3,
        },  # observe every 4 timesteps
    ],
    ids=["ppo", "dqn"],
)
def test_direct_calls_make_the_same_actions_and_updates_as_the_public_api(agent: dict[str, Any]) -> None:
    steps = 300
    runs, counters = [], []
    for direct in (False, True):  # one agent at a time: Tensorforce keeps one module stack per process
        venv = BatchedVectorEnv.from_factory(CARTPOLE, ROWS, seed=3)
        tf_agent = _agent(venv, assertions=not direct, **agent)
        venv.close()
        runs.append(_drive(tf_agent, direct=direct, steps=steps))
        counters.append([tf_agent.timesteps, tf_agent.episodes, tf_agent.updates])
        if direct:  # the public API still works on the directly driven agent (evaluation uses it)
            action = tf_agent.act(states=np.zeros(4, dtype=np.float32), independent=True, deterministic=True)
            assert int(action) in (0, 1)
        tf_agent.close()
    public, direct_run = runs
    assert counters[0][2] > 0, "the run should include updates, so that learning is compared too"
    assert direct_run[0] == public[0]  # every action of every row
    assert direct_run[1] == public[1]  # updates at the same observe calls
    assert direct_run[2] == public[2]  # the same episodes
    assert counters[1] == counters[0]  # timesteps, episodes, updates


@pytest.mark.training
def test_a_recorder_or_dict_states_go_through_the_public_api(tmp_path: Any) -> None:
    venv = BatchedVectorEnv.from_factory(CARTPOLE, 2, seed=3)
    agent = _agent(venv, agent="ppo", batch_size=2, recorder=dict(directory=str(tmp_path)))
    calls = AgentCalls(agent, np.arange(2))
    assert not calls.direct
    states = venv.reset()
    actions = calls.act(states)
    assert actions.shape == (2,)
    calls.observe(np.ones(2), np.zeros(2, dtype=np.int64))
    agent.close()
    venv.close()


@pytest.mark.training
def test_act_before_observe_raises_tensorforces_error() -> None:
    venv = BatchedVectorEnv.from_factory(CARTPOLE, 2, seed=3)
    agent = _agent(venv, agent="ppo", batch_size=2)
    calls = AgentCalls(agent, np.arange(2))
    states = venv.reset()
    calls.act(states)
    with pytest.raises(Exception, match=r"preceded by agent\.observe"):
        calls.act(states)
    agent.close()
    venv.close()
