"""Warm trials (rlcloud.local.worker): a worker runs trials one after another, each a proper local run."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlcloud.backend import RunFacts
from rlcloud.local import STATE_DIR, LocalBackend
from rlcloud.local.worker import WarmPool
from rlcloud.specs import ExperimentSpec
from tests.support.specs import cartpole_spec


def _spec(name: str, **overrides: object) -> ExperimentSpec:
    # batches of 2 episodes: a few hundred timesteps make several updates, whose randomness must match
    agent = {"type": "ppo", "batch_size": 2, "learning_rate": 1e-3}
    fixed = {"agent": agent, "total_timesteps": 400, "saver_frequency": None, "summary_frequency": None}
    return cartpole_spec(name, **{**fixed, **overrides})


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[WarmPool]:
    statedir = tmp_path / "sweepstate"
    statedir.mkdir()
    names = ("first", "second", "cold", "long", "broken")
    warm = WarmPool(statedir, size=1, trial_dirs=[tmp_path / "results" / n for n in names])
    yield warm
    warm.close()
    backend = LocalBackend(str(tmp_path / "results"), grace_period=40)
    for name in backend.list():  # never leave processes behind, whatever the test did
        backend.stop(name)


def _episodes(workdir: Path) -> list[tuple[float, int]]:
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    return [(float(r["return"]), int(r["length"])) for r in map(json.loads, lines)]


def _worker_pid(workdir: Path) -> int:
    state = json.loads((workdir / STATE_DIR / "state.json").read_text())
    (role,) = state["roles"]
    assert role["worker"] is True
    # what `experiment list` reads instead of the trial's spec (a warm trial is one process)
    assert RunFacts.of_record(state["facts"]) is not None and state["facts"]["processes"] == 1
    return int(role["pid"])


@pytest.mark.training
def test_a_warm_trial_learns_what_a_cold_one_does(pool: WarmPool, tmp_path: Path) -> None:
    root = tmp_path / "results"
    location = str(root)
    backend = LocalBackend(location, grace_period=40)
    # the worker imports TensorFlow before its first trial (another seed and batch size), and both stay loaded
    pool.warm_up(_spec("first"), 1)
    assert pool.start(_spec("first", seed=7, agent={"type": "ppo", "batch_size": 3}), location, {})
    backend.start(_spec("cold"), location)  # its own supervisor and runner processes, meanwhile
    first = backend.wait("first", timeout=600)
    assert first.state == "succeeded", first.message
    pool.finished("first")
    assert pool.start(_spec("second"), location, {})
    assert _worker_pid(root / "second") == _worker_pid(root / "first")
    # wait() returns once the trial has ended, though its worker lives on for the next one
    second = backend.wait("second", timeout=600)
    assert second.state == "succeeded", second.message
    assert [(r.label, r.state, r.exit_code) for r in second.roles] == [("single-0", "succeeded", 0)]
    assert second.progress["state"] == "succeeded" and second.progress["timestep"] >= 400
    assert (root / "second" / "checkpoints" / "LATEST").exists()
    assert "training: 1 environment(s)" in (root / "second" / "logs" / "single-0.log").read_text()
    assert backend.wait("cold", timeout=600).state == "succeeded"

    warm, cold = _episodes(root / "second"), _episodes(root / "cold")
    assert len(cold) >= 10  # several updates of 2 episodes each
    assert warm == cold
    assert _episodes(root / "first") != cold  # a different trial learns something else


@pytest.mark.training
def test_a_stop_checkpoints_a_warm_trial_and_ends_its_worker(pool: WarmPool, tmp_path: Path) -> None:
    root = tmp_path / "results"
    location = str(root)
    backend = LocalBackend(location, grace_period=40)
    assert pool.start(_spec("long", total_timesteps=1_000_000), location, {})
    deadline = time.monotonic() + 600
    while int(backend.status("long").progress.get("timestep") or 0) == 0:
        assert time.monotonic() < deadline, "the trial never trained"
        time.sleep(0.2)
    assert backend.status("long").state == "running"
    backend.stop("long")  # what `sweep stop` does to each running trial
    status = backend.status("long")
    assert status.state == "stopped", status.message
    assert status.roles[0].exit_code == 143
    assert (root / "long" / "checkpoints" / "LATEST").exists()
    # the worker exits after a trial stopped by a signal: the sweep is being stopped
    (worker,) = pool.processes
    assert worker.wait(timeout=30) == 143

    # started again, the trial resumes from its checkpoint in a new worker
    pool.finished("long")
    checkpoint = (root / "long" / "checkpoints" / "LATEST").read_text().strip()
    assert pool.start(_spec("long", total_timesteps=1_000_000), location, {})
    assert _worker_pid(root / "long") != worker.pid
    log = root / "long" / "logs" / "single-0.log"
    deadline = time.monotonic() + 600
    while f"resumed from checkpoint {checkpoint}" not in log.read_text():
        assert time.monotonic() < deadline, "the trial never resumed"
        time.sleep(0.2)
    backend.stop("long")
    assert backend.status("long").state == "stopped"


@pytest.mark.processes
def test_a_warm_trial_that_cannot_build_its_environment_fails_with_the_reason(
    pool: WarmPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "nolicence.py").write_text(
        "import gymnasium\n\nclass Env(gymnasium.Env):\n"
        "    def __init__(self):\n        raise RuntimeError('no simulator licence')\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the worker inherits it
    location = str(tmp_path / "results")
    backend = LocalBackend(location)
    assert pool.start(_spec("broken", environment={"type": "nolicence:Env"}), location, {})
    status = backend.wait("broken", timeout=300)
    assert status.state == "failed"
    (role,) = status.roles
    assert role.exit_code == 3 and "no simulator licence" in (role.reason or ""), role
    # the worker is still there for the next trial
    assert len(pool.processes) == 1


@pytest.mark.training
def test_sweep_stop_checkpoints_the_warm_trials_and_ends_the_workers(tmp_path: Path) -> None:
    from rlcloud import Sweep
    from rlcloud.local.state import RunState, ours
    from rlcloud.specs.sweep import SweepSpec

    base = _spec("base", total_timesteps=1_000_000).model_dump(mode="json")
    spec = SweepSpec.from_dict({"name": "stopme", "experiment": base, "seeds": 3, "max_parallel": 2,
                                "smoke_timesteps": 0})  # fmt: skip
    root = tmp_path / "results"
    sweep = Sweep(spec, results=str(root)).start()
    deadline = time.monotonic() + 600
    while sum(int(t.progress.get("timestep") or 0) > 0 for t in sweep.status().trials) < 2:
        assert time.monotonic() < deadline, sweep.status().to_dict()
        time.sleep(0.2)
    running = [root / "stopme" / t.name for t in sweep.status().trials if t.state == "running"]
    workers = [(RunState(d).roles()[0].identity, d) for d in running]
    assert len({_worker_pid(d) for d in running}) == 2
    assert sweep.stop() is True  # it was running
    status = sweep.status()
    assert status.state == "stopped", status.to_dict()
    assert [t.state for t in status.trials] == ["stopped", "stopped", "queued"]
    for trial in status.trials[:2]:
        assert (root / "stopme" / trial.name / "checkpoints" / "LATEST").exists()
    deadline = time.monotonic() + 30
    while any(ours(identity, within=d) for identity, d in workers):
        assert time.monotonic() < deadline, "a worker outlived the sweep's stop"
        time.sleep(0.2)
