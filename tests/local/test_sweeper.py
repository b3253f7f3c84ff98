"""The local sweep scheduler's moves one at a time (:class:`rlcloud.local.sweeper.SweepScheduler`), with no trial
started: the smoke trial, fail-fast on ``max_failures``, and what the sweep's state.json then says. Real sweeps,
with trials, are tested in tests/test_sweep.py and tests/test_sweep_growth.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlcloud import ExperimentStatus, SweepSpec
from rlcloud.backend import RoleStatus
from rlcloud.layout import SWEEP_SPEC, ProgressRecord
from rlcloud.local.state import read_sweep_state, update_sweep_state
from rlcloud.local.sweeper import SweepScheduler

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _scheduler(tmp_path: Path, max_parallel: int = 4, **fields: Any) -> SweepScheduler:
    """A scheduler of the sweep ``s`` (CartPole PPO, 5 seeds) as its start leaves the sweep's state directory."""
    data: dict[str, Any] = {"name": "s", "experiment": "cartpole_ppo.yaml", "seeds": 5, **fields}
    spec = SweepSpec.from_dict(data, base_dir=EXAMPLES)
    statedir = tmp_path / "statedir"
    statedir.mkdir(parents=True)
    (statedir / SWEEP_SPEC).write_text(spec.to_yaml(), encoding="utf-8")
    update_sweep_state(statedir, location=str(tmp_path / "results" / "s"), max_parallel=max_parallel)
    return SweepScheduler(statedir)


def _failed(name: str, line: str = "RuntimeError: no simulator licence") -> ExperimentStatus:
    role = RoleStatus("single", 0, "failed", exit_code=3, reason=f"exit code 3: {line}")
    return ExperimentStatus(name, "failed", [role])


def test_a_fresh_sweeps_first_trial_is_its_smoke_trial_and_max_failures_start_beside_it(tmp_path: Path) -> None:
    scheduler = _scheduler(tmp_path, max_failures=2)
    assert scheduler.smoke_trial == "seed1" and scheduler.smoke == 300 and scheduler.beside_smoke == 2
    assert [t.name for t in scheduler.pending] == ["seed1", "seed2", "seed3", "seed4", "seed5"]
    update_sweep_state(scheduler.statedir, failures={"exit code 1: x": ["seed9"]}, halted="the last start's")
    scheduler.start()  # it clears the last start's record
    assert (
        read_sweep_state(scheduler.statedir)["failures"] == {}
        and read_sweep_state(scheduler.statedir)["halted"] is None
    )
    # one trial at a time: nothing starts beside it, so there is no smoke phase
    assert _scheduler(tmp_path / "serial", max_parallel=1).smoke_trial is None


def test_the_smoke_trial_that_trains_lets_the_others_start(tmp_path: Path) -> None:
    scheduler = _scheduler(tmp_path, max_failures=2)
    scheduler.running = {"seed1": None, "seed2": None}  # their slots (look_at reads no backend of these)
    scheduler.look_at("seed1", ExperimentStatus("seed1", "running", progress=ProgressRecord(timestep=299)))
    assert scheduler.smoke_trial == "seed1"
    scheduler.look_at("seed1", ExperimentStatus("seed1", "running", progress=ProgressRecord(timestep=300)))
    assert scheduler.smoke_trial is None and scheduler.halted is None and list(scheduler.running) == ["seed1", "seed2"]
    assert not scheduler.halt()


def test_a_failed_smoke_trial_halts_the_launches_and_the_state_says_why(tmp_path: Path) -> None:
    scheduler = _scheduler(tmp_path, max_failures=2)
    scheduler.pending = scheduler.pending[1:]  # it was launched
    scheduler.running = {"seed1": None}
    scheduler.look_at("seed1", _failed("seed1"))
    assert scheduler.smoke_trial is None and scheduler.running == {}
    signature = "exit code 3: RuntimeError: no simulator licence"
    assert scheduler.failures == {signature: ["seed1"]}
    assert read_sweep_state(scheduler.statedir)["failures"] == {signature: ["seed1"]}
    assert scheduler.halt() and scheduler.pending == []
    halted = read_sweep_state(scheduler.statedir)["halted"]
    assert halted == (
        "stopped launching trials: the first trial (seed1) failed before training 300 timesteps (smoke_timesteps): "
        f"{signature}; 4 left queued"
    )


def test_max_failures_of_one_kind_stop_the_launches_and_other_kinds_do_not(tmp_path: Path) -> None:
    scheduler = _scheduler(tmp_path, max_failures=2, smoke_timesteps=0)
    assert scheduler.smoke_trial is None
    scheduler.pending = scheduler.pending[3:]
    scheduler.running = {"seed1": None, "seed2": None, "seed3": None}
    scheduler.look_at("seed1", _failed("seed1"))
    scheduler.look_at("seed2", _failed("seed2", "MemoryError"))
    assert not scheduler.halt() and len(scheduler.pending) == 2  # two kinds, one each
    scheduler.look_at("seed3", _failed("seed3"))
    assert scheduler.halt() and scheduler.pending == [] and scheduler.running == {}
    assert read_sweep_state(scheduler.statedir)["halted"] == (
        "stopped launching trials: 2 trials failed the same way (seed1, seed3), max_failures is 2: "
        "exit code 3: RuntimeError: no simulator licence; 2 left queued"
    )


def test_a_growth_queues_the_new_trials_and_those_asked_to_rerun_unless_running(tmp_path: Path) -> None:
    scheduler = _scheduler(tmp_path, max_failures=2)
    scheduler.pending = []  # every trial was launched; two still run
    scheduler.running = {"seed1": None, "seed2": None}
    scheduler.failures = {"exit code 3: boom": ["seed3"]}
    grown = SweepSpec.from_dict({"name": "s", "experiment": "cartpole_ppo.yaml", "seeds": 7}, base_dir=EXAMPLES)
    (scheduler.statedir / SWEEP_SPEC).write_text(grown.to_yaml(), encoding="utf-8")
    update_sweep_state(scheduler.statedir, grow_request=1, rerun=["seed2", "seed3"])
    scheduler.take_growth(1, rerun=True)
    assert [t.name for t in scheduler.pending] == ["seed3", "seed6", "seed7"]
    assert len(scheduler.trials) == 7 and scheduler.failures == {} and scheduler.grow_seen == 1
    assert read_sweep_state(scheduler.statedir)["grow_seen"] == 1
