"""Vector environments: same-step autoreset, batched vs. process-parallel equality, execution choice."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from rlcloud.errors import SpecError, WorkloadError
from rlcloud.runner.vector import (
    BatchedVectorEnv,
    EnvFactory,
    ProcessVectorEnv,
    VectorEnv,
    choose_execution,
    make_vector_env,
    pool_size,
    stack_states,
    take_row,
)

CARTPOLE = {"type": "gym", "level": "CartPole-v1"}

SLOW_ENV = '''
import time
import numpy as np


class Slow:
    """A Tensorforce-style environment whose steps cost 3 ms (a stand-in for an expensive simulator)."""

    def states(self):
        return dict(type="float", shape=(1,))

    def actions(self):
        return dict(type="int", shape=(), num_values=2)

    def reset(self):
        return np.zeros(1, dtype=np.float32)

    def execute(self, actions):
        time.sleep(0.003)
        return np.ones(1, dtype=np.float32), 0, 1.0


class Broken(Slow):
    def execute(self, actions):
        raise RuntimeError("simulator exploded")
'''


@pytest.fixture
def slow_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "slowenvs.py").write_text(textwrap.dedent(SLOW_ENV))
    monkeypatch.syspath_prepend(str(tmp_path))
    # spawned workers import the class too: they inherit PYTHONPATH, not sys.path
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return "slowenvs"


def test_batched_autoreset_in_the_same_step() -> None:
    venv = BatchedVectorEnv.from_factory(EnvFactory(CARTPOLE, max_timesteps_per_episode=3), 4, seed=5)
    assert isinstance(venv, VectorEnv)
    assert venv.num_envs == 4 and venv.max_episode_timesteps == 3
    states = venv.reset()
    assert states.shape == (4, 4)
    for expected in ([0, 0, 0, 0], [0, 0, 0, 0], [2, 2, 2, 2]):
        states, rewards, terminals = venv.step(np.array([0, 1, 0, 1]))
        assert terminals.tolist() == expected
        np.testing.assert_array_equal(rewards, np.ones(4))
    # After the truncation each row already holds the first state of its next episode (|x| <= 0.05).
    assert np.all(np.abs(states) <= 0.05)
    venv.close()
    venv.close()  # idempotent


def test_rows_are_seeded_apart_and_reproducibly() -> None:
    first = BatchedVectorEnv.from_factory(EnvFactory(CARTPOLE), 3, seed=11).reset()
    again = BatchedVectorEnv.from_factory(EnvFactory(CARTPOLE), 3, seed=11).reset()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first[0], first[1])


@pytest.mark.processes
def test_processes_match_batched_exactly() -> None:
    factory = EnvFactory(CARTPOLE, max_timesteps_per_episode=20)
    batched = BatchedVectorEnv.from_factory(factory, 5, seed=3)
    processes = ProcessVectorEnv(factory, 5, num_processes=2, seed=3)
    try:
        assert processes.num_envs == 5 and processes.actions_spec == batched.actions_spec
        np.testing.assert_array_equal(processes.reset(), batched.reset())
        rng = np.random.default_rng(0)
        ended = 0
        for _ in range(60):
            actions = rng.integers(0, 2, size=5)
            expected, got = batched.step(actions), processes.step(actions)
            for a, b in zip(expected, got, strict=True):
                np.testing.assert_array_equal(a, b)
            ended += int(np.count_nonzero(got[2]))
        assert ended >= 5  # episodes ended and were reset identically on both sides
    finally:
        processes.close()
        batched.close()


@pytest.mark.processes
def test_auto_picks_processes_only_for_slow_environments(slow_module: str) -> None:
    assert choose_execution(EnvFactory(CARTPOLE)).execution == "batched"
    slow = choose_execution(EnvFactory({"class": f"{slow_module}.Slow"}), probe_steps=10)
    assert slow.execution == "processes" and slow.seconds_per_step is not None
    venv = make_vector_env(EnvFactory({"class": f"{slow_module}.Slow"}), 2, execution="auto")
    try:
        assert isinstance(venv, ProcessVectorEnv)
        venv.reset()
        _states, rewards, _terminals = venv.step(np.array([0, 1]))
        assert rewards.tolist() == [1.0, 1.0]
    finally:
        venv.close()


@pytest.mark.processes
def test_worker_errors_surface_with_their_traceback(slow_module: str) -> None:
    venv = ProcessVectorEnv(EnvFactory({"class": f"{slow_module}.Broken"}), 2, num_processes=1)
    try:
        venv.reset()
        with pytest.raises(WorkloadError, match="simulator exploded"):
            venv.step(np.array([0, 0]))
    finally:
        venv.close()


def test_bad_execution_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="execution: must be one of auto, batched, processes"):
        make_vector_env(EnvFactory(CARTPOLE), 2, execution="threads")


def test_dict_states_stack_and_rows() -> None:
    spec = {"a": {"type": "float", "shape": (2,)}, "b": {"type": "int", "shape": ()}}
    batch = stack_states([{"a": np.zeros(2), "b": 1}, {"a": np.ones(2), "b": 2}], spec)
    assert batch["a"].shape == (2, 2) and batch["b"].tolist() == [1, 2]
    assert take_row(batch, 1)["b"] == 2


def test_pool_size_one_process_per_cpu_for_computing_envs_more_for_waiting_ones() -> None:
    # computing (CPU time = wall time): one process per CPU, never more than rows
    assert pool_size(8, 2, 1.0) == 2
    assert pool_size(8, 2, None) == 2
    assert pool_size(1, 4, 1.0) == 1
    # waiting: enough processes to keep the CPUs busy, cpus / cpu_fraction, capped at one per row
    assert pool_size(8, 2, 0.5) == 4
    assert pool_size(8, 2, 0.01) == 8
    assert pool_size(64, 2, 0.1) == 20
    assert pool_size(8, 2, 0.0) == 8  # a pure wait
    assert pool_size(8, 2, 1.7) == 2  # a probe's CPU share above 1 (threads) counts as computing
    assert pool_size(8, 2, 0.95) == 2  # a computing probe measured a little under 100 %


def test_the_probe_tells_sleeping_from_computing_steps() -> None:
    costly = "rlcloud.runner.costly:CostlyCartPole"
    sleeping = choose_execution(EnvFactory({"type": costly, "step_ms": 3}), probe_steps=8)
    spinning = choose_execution(EnvFactory({"type": costly, "step_ms": 3, "mode": "spin"}), probe_steps=8)
    assert sleeping.extra["cpu_fraction"] < 0.5 < spinning.extra["cpu_fraction"]
    assert sleeping.execution == "processes"
