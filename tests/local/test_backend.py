"""The local backend with real runner processes: start, status, wait, logs, stop, failures, attach."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlcloud.backend import RunFacts
from rlcloud.errors import NotFoundError, RLCloudError, WaitTimeoutError
from rlcloud.local import STATE_DIR, LocalBackend
from rlcloud.specs import ExperimentSpec
from tests.support.local import alive
from tests.support.specs import CARTPOLE, cartpole_spec
from tests.support.waiting import eventually


def _spec(name: str, **overrides: object) -> ExperimentSpec:
    return cartpole_spec(name, **{"total_timesteps": 1500, **overrides})


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[LocalBackend]:
    b = LocalBackend(str(tmp_path / "results"), grace_period=40)
    yield b
    for name in b.list():  # never leave processes behind, whatever the test did
        b.stop(name)


def _pids(root: Path, name: str) -> list[int]:
    state = json.loads((root / name / STATE_DIR / "state.json").read_text())
    return [r["pid"] for r in state["roles"]]


@pytest.mark.training
def test_distributed_run_start_status_wait_logs_and_attach(backend: LocalBackend, tmp_path: Path) -> None:
    root = tmp_path / "results"
    spec = _spec("local-dist", run_mode="distributed", num_workers=2)
    backend.start(spec, str(root))
    # start() returned while the runners are still starting: training goes on in the background.
    progress = root / "local-dist" / "progress.json"
    assert not progress.exists() or json.loads(progress.read_text())["state"] == "starting"
    pids = _pids(root, "local-dist")
    backend.start(spec, str(root))  # already running: nothing started twice
    assert _pids(root, "local-dist") == pids

    status = backend.status("local-dist")
    assert status.state == "running" and status.backend == "local"
    assert sorted(r.label for r in status.roles) == ["agent-0", "env-server-0", "env-server-1"]

    # Another process (a fresh backend object) sees the same experiment through the files.
    other = LocalBackend(str(root))
    assert other.list() == ["local-dist"]
    attached_spec, attached_root = other.attach("local-dist")
    assert attached_spec == spec and attached_root == str(root)
    # what `experiment list` reads instead of parsing the spec, recorded at the start: the learner and 2 servers
    state = json.loads((root / "local-dist" / STATE_DIR / "state.json").read_text())
    assert RunFacts.of_record(state["facts"]) == RunFacts.of_spec(spec) and state["facts"]["processes"] == 3

    final = other.wait("local-dist", timeout=400)
    assert final.state == "succeeded", final.message
    assert {r.label: (r.state, r.exit_code) for r in final.roles} == {
        "agent-0": ("succeeded", 0),
        "env-server-0": ("succeeded", 0),  # the agent finished the run: the servers exit by themselves
        "env-server-1": ("succeeded", 0),
    }
    assert final.progress["state"] == "succeeded" and final.progress["timestep"] >= 1500
    # the spec the roles ran with (the spec of record, <location>/spec.yaml, is Experiment.start's: rlcloud.record)
    assert (root / "local-dist" / STATE_DIR / "spec.yaml").exists()
    assert (root / "local-dist" / "checkpoints" / "LATEST").exists()

    # everything ended: follow returns; by default with the learner's lines only
    assert {line.split(" | ", 1)[0] for line in other.logs("local-dist", follow=True)} == {"agent-0"}
    lines = list(other.logs("local-dist", follow=True, roles=["learner", "env-server"]))
    labels = {line.split(" | ", 1)[0] for line in lines}
    assert labels == {"agent-0", "env-server-0", "env-server-1"}
    assert any(line.startswith("agent-0 | ") and "succeeded" in line for line in lines)
    assert any(line.startswith("env-server-1 | ") and "agent finished the run" in line for line in lines)
    for label in labels:
        assert (root / "local-dist" / "logs" / f"{label}.log").exists()

    backend.stop("local-dist")  # finished already: stop is a no-op
    assert backend.status("local-dist").state == "succeeded"


@pytest.mark.training
def test_stop_checkpoints_is_idempotent_and_start_resumes(backend: LocalBackend, tmp_path: Path) -> None:
    root = tmp_path / "results"
    spec = _spec("local-stop", total_timesteps=10_000_000)
    backend.start(spec, str(root))
    progress = root / "local-stop" / "progress.json"
    eventually(lambda: progress.exists() and json.loads(progress.read_text())["timestep"] > 300, 300, "training")
    with pytest.raises(WaitTimeoutError, match="still running"):
        backend.wait("local-stop", timeout=0.5)

    follower = backend.logs("local-stop", follow=True)
    assert next(follower).startswith("single-0 | ")

    backend.stop("local-stop")
    status = backend.status("local-stop")
    assert status.state == "stopped"
    assert status.roles[0].exit_code == 143  # SIGTERM: checkpoint, then exit
    checkpoint = (root / "local-stop" / "checkpoints" / "LATEST").read_text().strip()
    assert checkpoint and status.progress["checkpoint"] == checkpoint
    assert not any(alive(pid) for pid in _pids(root, "local-stop"))
    backend.stop("local-stop")  # idempotent
    rest = list(follower)  # following ends once every process has ended
    assert any("exited with code 143" in line for line in rest)

    stopped_at = json.loads((root / "local-stop" / "checkpoints" / checkpoint / "state.json").read_text())
    backend.resume("local-stop")  # = start() again: a finished experiment with a checkpoint resumes
    log = root / "local-stop" / "logs" / "single-0.log"
    eventually(lambda: "resumed from checkpoint" in log.read_text(), 300, "the resume")
    assert f"timestep {stopped_at['timestep']}" in log.read_text().split("resumed from checkpoint")[-1]
    backend.pause("local-stop")
    paused = backend.status("local-stop")
    assert paused.state == "paused" and paused.roles[0].state == "suspended"
    assert backend.wait("local-stop", timeout=5).state == "paused"


@pytest.mark.processes
def test_a_failing_role_fails_the_experiment_stops_the_others_and_shows_its_log(
    backend: LocalBackend, tmp_path: Path
) -> None:
    root = tmp_path / "results"
    bad = {**CARTPOLE, "no_such_option": 3}
    spec = _spec("local-bad", run_mode="distributed", num_workers=2, environment=bad)
    backend.start(spec, str(root))
    status = backend.wait("local-bad", timeout=180)
    assert status.state == "failed"
    assert status.message is not None and "no_such_option" in status.message
    assert status.message.startswith("env-server-")
    failed = [r for r in status.roles if r.state == "failed"]
    assert failed and all(r.exit_code is not None for r in status.roles)
    assert any(r.exit_code == 3 and "no_such_option" in (r.reason or "") for r in failed)
    # The agent was stopped with the experiment rather than waiting for its servers forever.
    assert not any(alive(pid) for pid in _pids(root, "local-bad"))


def test_unknown_experiments_are_not_found(backend: LocalBackend) -> None:
    with pytest.raises(NotFoundError, match="no local experiment named 'nope'"):
        backend.status("nope")
    with pytest.raises(RLCloudError):
        backend.stop("nope")
    assert backend.list() == []


@pytest.mark.processes
def test_a_supervisor_killed_with_sigkill_reads_as_failed(backend: LocalBackend, tmp_path: Path) -> None:
    root = tmp_path / "results"
    spec = _spec("local-vanish", run_mode="distributed", num_workers=1)
    backend.start(spec, str(root))
    state = json.loads((root / "local-vanish" / STATE_DIR / "state.json").read_text())
    server = next(r for r in state["roles"] if r["role"] == "env-server")
    os.killpg(server["pid"], 9)  # the whole role, supervisor included: nobody records an exit code
    eventually(lambda: backend.status("local-vanish").state == "failed", 60, "the failure")
    status = backend.status("local-vanish")
    role = next(r for r in status.roles if r.role == "env-server")
    assert role.state == "failed" and "vanished" in (role.reason or "")
    backend.stop("local-vanish")
    assert not any(alive(pid) for pid in _pids(root, "local-vanish"))


@pytest.mark.processes
def test_supervisor_command_line_runs_a_command_and_records_its_exit_code(tmp_path: Path) -> None:
    (tmp_path / STATE_DIR).mkdir()
    code = subprocess.call(
        [sys.executable, "-m", "rlcloud.local.supervisor", "--workdir", str(tmp_path),
         "--label", "env-server-0", "--", sys.executable, "-c", "raise SystemExit(7)"],
    )  # fmt: skip
    assert code == 7
    assert (tmp_path / STATE_DIR / "env-server-0.exit").read_text() == "7\n"


@pytest.mark.processes
def test_supervisor_kills_a_runner_that_ignores_sigterm_and_records_137(tmp_path: Path) -> None:
    (tmp_path / STATE_DIR).mkdir()
    stubborn = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        "print('ready', flush=True); time.sleep(120)"
    )
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "rlcloud.local.supervisor", "--workdir", str(tmp_path),
         "--label", "single-0", "--grace", "1", "--", sys.executable, "-c", stubborn],
        stdout=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    assert supervisor.stdout is not None and supervisor.stdout.readline() == b"ready\n"
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=60) == -signal.SIGKILL  # it took its whole process group down
    assert (tmp_path / STATE_DIR / "single-0.exit").read_text() == "137\n"
    supervisor.stdout.close()
    eventually(lambda: not _group_alive(supervisor.pid), 30, "the runner's own child to be killed too")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
