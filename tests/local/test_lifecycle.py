"""Local lifecycle: one runner per run, and every process accounted for (issue 13).

Most tests run the real supervisor with a stand-in runner (tests/local/standin.py, milliseconds to start);
the ``training`` ones run the real runner.
"""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlcloud.cli import main
from rlcloud.errors import ConflictError
from rlcloud.experiment import Experiment
from rlcloud.local import STATE_DIR, LocalBackend
from rlcloud.local import backend as backend_module
from rlcloud.local.machine import CHILDREN
from rlcloud.local.state import RunState, try_flock
from rlcloud.local.supervisor import EXIT_DUPLICATE
from rlcloud.runner.lifeline import PARENT_ENV
from tests.support.local import _episodes, _runners, _workdir, alive
from tests.support.specs import cartpole_spec
from tests.support.waiting import eventually


def _supervisor(workdir: Path) -> int:
    state = json.loads((workdir / STATE_DIR / "state.json").read_text())
    return int(state["roles"][0]["pid"])


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler installed for ``signum`` (its SigCgt mask in /proc): the
    observable moment a signal can be sent to it and be handled, however loaded the machine is."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(mask, 16) >> (signum - 1) & 1)


def _progress(workdir: Path) -> int:
    try:
        return int(json.loads((workdir / "progress.json").read_text()).get("episode", 0))
    except (OSError, ValueError):
        return 0


# ------------------------------------------------------------------------------ one runner per run


@pytest.mark.processes
def test_starts_at_the_same_moment_in_threads_launch_one_runner(
    make_backend: Callable[..., LocalBackend], tmp_path: Path
) -> None:
    spec = cartpole_spec("race")
    backends = [make_backend(STANDIN_EPISODES="40", STANDIN_DELAY="0.02") for _ in range(4)]
    barrier = threading.Barrier(len(backends))
    started: list[bool] = []

    def start(b: LocalBackend) -> None:
        barrier.wait()
        started.append(b.start(spec, str(tmp_path / "results")))

    threads = [threading.Thread(target=start, args=(b,)) for b in backends]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(started) == [False, False, False, True]
    final = backends[0].wait("race", timeout=60)
    assert final.state == "succeeded", final.message
    workdir = _workdir(tmp_path, "race")
    assert len(_runners(workdir)) == 1
    assert _episodes(workdir) == list(range(1, 41))  # each episode once


@pytest.mark.processes
def test_starts_at_the_same_moment_in_processes_launch_one_runner(tmp_path: Path, standin_python: Path) -> None:
    root = tmp_path / "results"
    spec_file = tmp_path / "race.yaml"
    spec_file.write_text(cartpole_spec("race-procs").to_yaml())
    ready = tmp_path / "ready"
    ready.mkdir()
    # every process imports rlcloud first, says so, and starts once all three have (a barrier, not a clock)
    code = textwrap.dedent(f"""\
        import os, sys, time
        from pathlib import Path
        from rlcloud.local import LocalBackend
        from rlcloud.specs import ExperimentSpec
        spec = ExperimentSpec.from_file({str(spec_file)!r})
        b = LocalBackend({str(root)!r}, grace_period=5, python={str(standin_python)!r},
                         env={{"STANDIN_EPISODES": "40", "STANDIN_DELAY": "0.02"}})
        Path({str(ready)!r}, sys.argv[1]).touch()
        while len(os.listdir({str(ready)!r})) < 3:
            time.sleep(0.001)
        print(b.start(spec, {str(root)!r}))
    """)
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(i)], stdout=subprocess.PIPE, text=True) for i in range(3)
    ]
    outputs = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
    assert outputs == ["False", "False", "True"]
    backend = LocalBackend(str(root))
    try:
        assert backend.wait("race-procs", timeout=60).state == "succeeded"
    finally:
        backend.stop("race-procs")
    assert len(_runners(root / "race-procs")) == 1
    assert _episodes(root / "race-procs") == list(range(1, 41))


@pytest.mark.processes
def test_a_start_waits_for_a_start_or_stop_under_way(
    make_backend: Callable[..., LocalBackend], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = make_backend(STANDIN_EPISODES="5")
    workdir = _workdir(tmp_path, "turns")
    (workdir / STATE_DIR).mkdir(parents=True)
    held = try_flock(RunState(workdir).control_lock)  # as a start or stop in another process holds it
    assert held is not None
    result: list[bool] = []
    caplog.set_level("INFO", logger="rlcloud.local.state")  # before the start: it may say so at once
    thread = threading.Thread(
        target=lambda: result.append(backend.start(cartpole_spec("turns"), str(tmp_path / "results")))
    )
    thread.start()
    # the start has found the lock held and waits for it (it says so), not merely slow to get there
    eventually(lambda: "waiting up to" in caplog.text, 60, "the start to wait for the lock")
    assert thread.is_alive() and not _runners(workdir)  # nothing launched while the other one acts
    os.close(held)
    thread.join(30)
    assert result == [True]
    assert backend.wait("turns", timeout=30).state == "succeeded"


@pytest.mark.processes
def test_lock_files_left_by_a_dead_run_do_not_block_a_start(
    make_backend: Callable[..., LocalBackend], tmp_path: Path
) -> None:
    """After a crash or a reboot the lock files are still there, but nobody holds them (flock)."""
    backend = make_backend(STANDIN_EPISODES="3")
    workdir = _workdir(tmp_path, "stale")
    state_dir = workdir / STATE_DIR
    state_dir.mkdir(parents=True)
    for name in ("control.lock", "single-0.lock"):
        (state_dir / name).write_text("")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    roles = [{"role": "single", "index": 0, "pid": dead.pid, "started": 0.0, "starttime": "1"}]
    (state_dir / "state.json").write_text(json.dumps({"name": "stale", "results": str(tmp_path), "roles": roles}))
    assert backend.start(cartpole_spec("stale"), str(tmp_path / "results")) is True
    assert backend.wait("stale", timeout=30).state == "succeeded"


@pytest.mark.processes
def test_a_process_still_holding_a_role_lock_blocks_a_start(
    make_backend: Callable[..., LocalBackend], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backend_module, "GROUP_KILL_MARGIN", 0)
    backend = make_backend(grace_period=1, STANDIN_EPISODES="3")
    workdir = _workdir(tmp_path, "held")
    (workdir / STATE_DIR).mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'w'); "
         "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
         str(workdir / STATE_DIR / "single-0.lock")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(ConflictError, match="single-0"):
            backend.start(cartpole_spec("held"), str(tmp_path / "results"))
        assert not _runners(workdir)
    finally:
        holder.kill()
        holder.communicate()
    assert backend.start(cartpole_spec("held"), str(tmp_path / "results")) is True  # its lock went with it


@pytest.mark.processes
def test_supervisor_refuses_to_start_a_second_runner_of_a_role(tmp_path: Path) -> None:
    (tmp_path / STATE_DIR).mkdir()
    held = try_flock(RunState(tmp_path).lock_file("single-0"))
    assert held is not None
    try:
        marker = tmp_path / "ran"
        result = subprocess.run(
            [sys.executable, "-m", "rlcloud.local.supervisor", "--workdir", str(tmp_path), "--label", "single-0",
             "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.close(held)
    assert result.returncode == EXIT_DUPLICATE
    assert "not starting a second one" in result.stdout
    assert not marker.exists() and not (tmp_path / STATE_DIR / "single-0.exit").exists()


# ---------------------------------------------------------------------- a supervisor killed with -9


@pytest.mark.processes
def test_a_runner_stops_after_a_checkpoint_when_its_supervisor_is_killed(
    make_backend: Callable[..., LocalBackend], tmp_path: Path
) -> None:
    backend = make_backend(STANDIN_EPISODES="100000", STANDIN_DELAY="0.05")
    spec = cartpole_spec("orphan")
    backend.start(spec, str(tmp_path / "results"))
    workdir = _workdir(tmp_path, "orphan")
    eventually(lambda: _progress(workdir) >= 3, 30, "training")
    (runner,) = _runners(workdir)
    recorded = json.loads((workdir / STATE_DIR / "single-0.runner").read_text())
    assert recorded["pid"] == runner and recorded["starttime"]
    os.kill(_supervisor(workdir), signal.SIGKILL)
    eventually(lambda: not alive(runner), backend.grace_period, "the orphaned runner to stop")
    assert (workdir / "checkpoints" / "LATEST").exists()
    assert "stopped: checkpoint" in (workdir / "logs" / "single-0.log").read_text()
    status = backend.status("orphan")
    assert status.state == "failed" and "vanished" in (status.roles[0].reason or "")

    assert backend.start(spec, str(tmp_path / "results")) is True
    eventually(lambda: len(_runners(workdir)) == 2, 30, "the new runner")
    assert [pid for pid in _runners(workdir) if alive(pid)] == _runners(workdir)[1:]  # exactly one runs
    backend.stop("orphan")
    assert not any(alive(pid) for pid in _runners(workdir))
    episodes = _episodes(workdir)
    assert len(set(episodes)) >= len(episodes) - 1  # at most the episode in flight at the kill, as for a crash


@pytest.mark.processes
def test_a_distributed_run_whose_agent_supervisor_was_killed_starts_again_with_one_set_of_roles(
    make_backend: Callable[..., LocalBackend], tmp_path: Path
) -> None:
    backend = make_backend(STANDIN_EPISODES="100000", STANDIN_DELAY="0.05")
    spec = cartpole_spec("dist-orphan", run_mode="distributed", num_workers=1)
    backend.start(spec, str(tmp_path / "results"))
    workdir = _workdir(tmp_path, "dist-orphan")
    eventually(lambda: _progress(workdir) >= 2, 30, "training")
    (agent,) = _runners(workdir)
    (server,) = _runners(workdir, "env-server")
    state = json.loads((workdir / STATE_DIR / "state.json").read_text())
    supervisor = next(r["pid"] for r in state["roles"] if r["role"] == "agent")
    os.kill(supervisor, signal.SIGKILL)
    eventually(lambda: not alive(agent), backend.grace_period, "the orphaned agent to stop")
    assert alive(server)  # nobody is left to stop it: it waits for its agent (LOCAL_IDLE_TIMEOUT)
    assert backend.status("dist-orphan").state == "failed"
    backend.stop("dist-orphan")  # ends the env server; the agent's loss stays a failure
    assert not alive(server)
    status = backend.status("dist-orphan")
    assert status.state == "failed" and "vanished" in (status.message or ""), status
    # A broken run is not "already running": what is left of it ends, and one new set of roles starts.
    assert backend.start(spec, str(tmp_path / "results")) is True
    assert not alive(server)
    eventually(lambda: len(_runners(workdir)) == 2 and len(_runners(workdir, "env-server")) == 2, 30, "new roles")
    assert [pid for pid in _runners(workdir) + _runners(workdir, "env-server") if alive(pid)] == [
        _runners(workdir)[1],
        _runners(workdir, "env-server")[1],
    ]


@pytest.mark.processes
def test_stop_finds_a_runner_whose_supervisor_was_killed(
    make_backend: Callable[..., LocalBackend], tmp_path: Path
) -> None:
    # A runner that does not stop on SIGTERM (stuck): only its recorded identity lets a stop end it.
    backend = make_backend(grace_period=2, STANDIN_EPISODES="100000", STANDIN_DELAY="0.05", STANDIN_IGNORE_TERM="1")
    spec = cartpole_spec("stuck")
    backend.start(spec, str(tmp_path / "results"))
    workdir = _workdir(tmp_path, "stuck")
    eventually(lambda: _progress(workdir) >= 2, 30, "training")
    (runner,) = _runners(workdir)
    supervisor = _supervisor(workdir)
    os.kill(supervisor, signal.SIGKILL)
    eventually(lambda: not alive(supervisor), 60, "the supervisor to die")  # its death signal is sent by then
    assert alive(runner)
    status = backend.status("stuck")
    assert status.state == "running" and "supervisor is gone" in (status.roles[0].reason or "")
    assert backend.start(spec, str(tmp_path / "results")) is False  # it still runs: no second runner
    assert _runners(workdir) == [runner]

    backend.stop("stuck")
    assert not alive(runner)
    assert backend.status("stuck").state == "stopped"
    assert backend.start(spec, str(tmp_path / "results")) is True
    eventually(lambda: len(_runners(workdir)) == 2, 30, "the new runner")


@pytest.mark.processes
def test_a_supervisor_stopped_before_its_runner_starts_never_starts_it(tmp_path: Path) -> None:
    (tmp_path / STATE_DIR).mkdir()
    marker = tmp_path / "ran"
    held = try_flock(RunState(tmp_path).lock_file("single-0"))
    assert held is not None  # the supervisor waits for the lock: signal it meanwhile
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "rlcloud.local.supervisor", "--workdir", str(tmp_path), "--label", "single-0",
         "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    # past the imports: its handler is installed (what a fixed sleep only guessed, and lost under load)
    eventually(lambda: _catches(supervisor.pid, signal.SIGTERM) or supervisor.poll() is not None, 120, "handlers")
    assert supervisor.poll() is None, supervisor.communicate()[0]
    supervisor.send_signal(signal.SIGTERM)
    os.close(held)
    out, _ = supervisor.communicate(timeout=30)
    assert supervisor.returncode == 143, out
    assert "before its runner started" in out
    assert not marker.exists()
    assert (tmp_path / STATE_DIR / "single-0.exit").read_text() == "143\n"


@pytest.mark.processes
def test_the_parent_watch_signals_a_process_whose_parent_is_gone(tmp_path: Path) -> None:
    """The fallback where no parent-death signal is armed: a thread compares getppid()."""
    child = textwrap.dedent("""\
        import sys, time
        from rlcloud.runner.lifeline import armed_death_signal, watch_parent
        assert armed_death_signal() == 0
        assert watch_parent(interval=0.1) is not None
        print("watching", flush=True)
        time.sleep(60)
        sys.exit(5)
    """)
    parent = textwrap.dedent(f"""\
        import os, subprocess, sys, time
        env = dict(os.environ, {PARENT_ENV}=str(os.getpid()))
        p = subprocess.Popen([sys.executable, "-c", {child!r}], env=env, stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline() == "watching\\n"
        print(p.pid, flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pid = int(proc.stdout.readline())
    assert alive(pid)
    proc.kill()
    proc.communicate()
    eventually(lambda: not alive(pid), 10, "the child to notice")
    # a process told its parent is one that it is not (it was re-parented already) stops at once
    gone = subprocess.run(
        [sys.executable, "-c", "from rlcloud.runner.lifeline import watch_parent; watch_parent(); import time; "
         "time.sleep(30)"],
        env={**os.environ, PARENT_ENV: "1"}, timeout=30,
    )  # fmt: skip
    assert gone.returncode == -signal.SIGTERM


# ---------------------------------------------------------------------- verbs on a finished run


def _finished_run(make_backend: Callable[..., LocalBackend], tmp_path: Path, name: str) -> LocalBackend:
    backend = make_backend(STANDIN_EPISODES="3")
    backend.start(cartpole_spec(name), str(tmp_path / "results"))
    assert backend.wait(name, timeout=30).state == "succeeded"
    return backend


@pytest.mark.processes
def test_pause_resume_and_stop_of_a_finished_run_do_nothing_and_say_so(
    make_backend: Callable[..., LocalBackend], tmp_path: Path
) -> None:
    backend = _finished_run(make_backend, tmp_path, "done")
    exp = Experiment(cartpole_spec("done"), results=str(tmp_path / "results"))
    assert exp.pause() is False
    assert exp.nothing_to_do == "done has finished (succeeded); nothing to pause"
    assert exp.status().state == "succeeded"
    assert exp.resume() is False and exp.nothing_to_do == "done has finished (succeeded); nothing to resume"
    assert exp.stop() is False and exp.nothing_to_do == "done has finished (succeeded); nothing to stop"
    seen: list[str] = []
    assert exp.wait(timeout=5, progress=lambda s: seen.append(s.state)).state == "succeeded"
    # the backend by itself does not mark it either
    backend.pause("done")
    backend.stop("done")
    assert backend.status("done").state == "succeeded"
    state = json.loads((_workdir(tmp_path, "done") / STATE_DIR / "state.json").read_text())
    assert not state["paused"] and not state["stop_requested"]
    assert len(_runners(_workdir(tmp_path, "done"))) == 1  # nothing started again


@pytest.mark.processes
def test_download_draws_no_bar_without_a_terminal_or_with_quiet(
    make_backend: Callable[..., LocalBackend], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _finished_run(make_backend, tmp_path, "done")
    capsys.readouterr()
    target = ["--results", str(tmp_path / "results")]
    for quiet in ([], ["-q"]):  # stderr here is no terminal: a bar's redraws would fill a CI log
        dest = tmp_path / f"copy{len(quiet)}"
        assert main(["experiment", "download", "done", "--dest", str(dest), *quiet, *target]) == 0
        out, err = capsys.readouterr()
        assert out == f"results of done in {dest}\n" and err == "", err
        assert (dest / "metrics.jsonl").is_file()


@pytest.mark.processes
def test_the_cli_says_a_finished_run_has_nothing_to_pause_resume_or_stop(
    make_backend: Callable[..., LocalBackend], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _finished_run(make_backend, tmp_path, "cartpole-ppo")
    capsys.readouterr()
    target = ["--results", str(tmp_path / "results")]
    assert main(["experiment", "pause", "cartpole-ppo", *target]) == 0
    assert capsys.readouterr().out.strip() == "cartpole-ppo has finished (succeeded); nothing to pause"
    assert main(["experiment", "resume", "cartpole-ppo", *target]) == 0
    assert capsys.readouterr().out.strip() == "cartpole-ppo has finished (succeeded); nothing to resume"
    assert main(["experiment", "stop", "cartpole-ppo", "--no-download", *target]) == 0
    assert capsys.readouterr().out.strip() == "cartpole-ppo has finished (succeeded); nothing to stop"
    assert main(["experiment", "status", "cartpole-ppo", *target]) == 0
    assert "succeeded" in capsys.readouterr().out


@pytest.mark.processes
def test_a_late_pause_does_not_turn_a_succeeded_run_into_a_paused_one(
    make_backend: Callable[..., LocalBackend], tmp_path: Path
) -> None:
    """A pause whose SIGTERM reaches a learner that has just finished: it exits 0, and 0 means succeeded."""
    backend = _finished_run(make_backend, tmp_path, "late")
    RunState(_workdir(tmp_path, "late")).update(stop_requested=True, paused=True)
    assert backend.status("late").state == "succeeded"
    assert backend.wait("late", timeout=5).state == "succeeded"


@pytest.mark.processes
def test_pause_resume_and_stop_of_a_running_run(
    make_backend: Callable[..., LocalBackend],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    standin_python: Path,
) -> None:
    monkeypatch.setattr(sys, "executable", str(standin_python))  # the Experiment's own backend: the stand-in
    monkeypatch.setenv("STANDIN_EPISODES", "100000")
    backend = make_backend(STANDIN_EPISODES="100000")
    backend.start(cartpole_spec("live"), str(tmp_path / "results"))
    workdir = _workdir(tmp_path, "live")
    eventually(lambda: _progress(workdir) >= 2, 30, "training")
    exp = Experiment(cartpole_spec("live"), results=str(tmp_path / "results"))
    assert exp.resume() is False and exp.nothing_to_do == "live is running already; nothing to resume"
    assert exp.pause() is True and exp.status().state == "paused"
    assert exp.pause() is False and exp.nothing_to_do == "live is paused; nothing to pause"
    assert exp.wait(timeout=5, progress=lambda s: None).state == "paused"  # a paused run does not hang a wait
    assert main(["experiment", "attach", "live", "--quiet", "--results", str(tmp_path / "results")]) == 0
    assert exp.resume() is True
    eventually(lambda: len(_runners(workdir)) == 2, 30, "the resumed runner")
    assert exp.pause() is True
    assert exp.stop() is True and exp.status().state == "stopped"  # paused, then stopped for good
    assert exp.stop() is False and exp.nothing_to_do == "live has finished (stopped); nothing to stop"
    assert not any(alive(pid) for pid in _runners(workdir))
    # each verb that acted is an event of record (the start here was the backend's own, not recorded);
    # the ones that did nothing are not
    from rlcloud.record import read_history
    from rlcloud.storage import open_store

    history = read_history(open_store(str(tmp_path / "results" / "live")))
    assert [h["event"] for h in history] == ["paused", "resumed", "paused", "stopped"]
    assert {h["where"] for h in history} == {"local"} and all(h["changes"] == [] for h in history)


# ---------------------------------------------------------------------- the CLI's start, twice


@pytest.mark.processes
def test_a_second_cli_start_says_already_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, standin_python: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "executable", str(standin_python))
    monkeypatch.setattr(Experiment, "validate", lambda self: None)  # no TensorFlow in this process
    monkeypatch.setenv("STANDIN_EPISODES", "100000")
    spec_file = tmp_path / "cartpole-ppo.yaml"
    spec_file.write_text(cartpole_spec("cartpole-ppo").to_yaml())
    target = ["--results", str(tmp_path / "results")]
    try:
        assert main(["experiment", "start", str(spec_file), *target]) == 0
        out = capsys.readouterr().out
        assert out.startswith("started cartpole-ppo (local)")
        # the commands it suggests find the experiment: they carry --results
        assert f"rlcloud experiment status cartpole-ppo --results {tmp_path / 'results'}" in out, out
        assert main(["experiment", "start", str(spec_file), *target]) == 0
        out = capsys.readouterr().out
        assert out.startswith("cartpole-ppo is already running (local); nothing was started"), out
        eventually(lambda: _runners(_workdir(tmp_path, "cartpole-ppo")), 30, "the runner")
        # each command's backend is gone, the supervisor it started runs on (as when the CLI exits):
        # collecting them warns of no running subprocess (warnings are errors here)
        gc.collect()
        assert main(["experiment", "start", str(spec_file), *target]) == 0
        assert "already running" in capsys.readouterr().out
    finally:
        assert main(["experiment", "stop", "cartpole-ppo", "--no-download", *target]) == 0
    assert capsys.readouterr().out.strip() == "stopped cartpole-ppo"
    assert len(_runners(_workdir(tmp_path, "cartpole-ppo"))) == 1
    gc.collect()


# ---------------------------------------------------------------------- the final lines of a log


@pytest.mark.processes
def test_the_log_has_its_final_lines_once_the_run_reads_finished(
    make_backend: Callable[..., LocalBackend], tmp_path: Path
) -> None:
    backend = make_backend(STANDIN_EPISODES="3")
    backend.start(cartpole_spec("tail"), str(tmp_path / "results"))
    log = _workdir(tmp_path, "tail") / "logs" / "single-0.log"
    eventually(lambda: backend.status("tail").finished, 30, "the end")
    text = log.read_text()  # read at once: the exit line is written before the exit code is recorded
    assert "succeeded: 3 episodes (summary)" in text
    assert "single-0 exited with code 0" in text
    assert [line.split(" | ", 1)[1] for line in backend.logs("tail")][-2:] == [
        "succeeded: 3 episodes (summary)",
        text.splitlines()[-1],
    ]


def test_the_log_copy_in_a_gcs_results_location_has_the_final_lines(
    make_backend: Callable[..., LocalBackend], fake_gcs: Any, gcs_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in fake_gcs.env.items():
        monkeypatch.setenv(key, value)
    root = f"gs://{gcs_bucket}/runs"
    backend = make_backend(root=root, STANDIN_EPISODES="3")
    backend.start(cartpole_spec("gcs-tail"), root)
    assert backend.wait("gcs-tail", timeout=60).state == "succeeded"
    from rlcloud.storage import open_store

    text = open_store(f"{root}/gcs-tail").read_text("logs/single-0.log")
    assert "succeeded: 3 episodes (summary)" in text
    assert "single-0 exited with code 0" in text


# ---------------------------------------------------------------------- the real runner


@pytest.mark.training
def test_the_real_runner_runs_once_and_checkpoints_when_its_supervisor_is_killed(tmp_path: Path) -> None:
    root = tmp_path / "results"
    spec = cartpole_spec("real-life", total_timesteps=10_000_000)
    backends = [LocalBackend(str(root), grace_period=60) for _ in range(2)]
    barrier = threading.Barrier(2)
    started: list[bool] = []

    def start(b: LocalBackend) -> None:
        barrier.wait()
        started.append(b.start(spec, str(root)))

    threads = [threading.Thread(target=start, args=(b,)) for b in backends]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    backend = backends[0]
    try:
        assert sorted(started) == [False, True]
        workdir = root / "real-life"
        progress = workdir / "progress.json"
        eventually(lambda: progress.exists() and json.loads(progress.read_text())["timestep"] > 200, 300, "training")
        runner = json.loads((workdir / STATE_DIR / "single-0.runner").read_text())["pid"]
        os.kill(_supervisor(workdir), signal.SIGKILL)
        eventually(lambda: not alive(runner), backend.grace_period, "the orphaned runner to checkpoint and stop")
        log = workdir / "logs" / "single-0.log"
        assert "received SIGTERM: checkpointing" in log.read_text()
        checkpoint = (workdir / "checkpoints" / "LATEST").read_text().strip()
        assert checkpoint and json.loads(progress.read_text())["checkpoint"] == checkpoint
        status = backend.status("real-life")
        assert status.state == "failed" and "vanished" in (status.roles[0].reason or "")

        assert backend.start(spec, str(root)) is True
        eventually(lambda: f"resumed from checkpoint {checkpoint}" in log.read_text(), 300, "the resume")
        second = json.loads((workdir / STATE_DIR / "single-0.runner").read_text())["pid"]
        assert second != runner and alive(second)
        resumed_at = json.loads(progress.read_text())["timestep"]
        # training again (a stop while it still starts ends it without a checkpoint or a summary)
        eventually(lambda: json.loads(progress.read_text())["timestep"] > resumed_at, 300, "training again")
        backend.stop("real-life")
        assert backend.status("real-life").state == "stopped" and not alive(second)
        tail = log.read_text().splitlines()[-3:]
        assert any("stopped:" in line and "episodes" in line for line in tail), tail  # the runner's summary
        assert "single-0 exited with code 143" in tail[-1]
        episodes = _episodes(workdir)
        assert episodes == sorted(set(episodes))  # one runner at a time: each episode once
    finally:
        for b in backends:
            b.stop("real-life")


# ---------------------------------------------------------------------- sweeps: one scheduler


@pytest.mark.processes
def test_sweep_starts_at_the_same_moment_launch_one_scheduler(tmp_path: Path) -> None:
    from rlcloud.local.state import read_sweep_state, scheduler_alive
    from rlcloud.specs.sweep import SweepSpec

    root = str(tmp_path / "results")
    trial = cartpole_spec("race-trial").model_dump(mode="json")
    sweep = SweepSpec.from_dict({"name": "race-sweep", "experiment": trial, "seeds": 1, "max_parallel": 1})
    backends = [LocalBackend(root, grace_period=5) for _ in range(3)]
    barrier = threading.Barrier(len(backends))
    started: list[bool] = []

    def start(b: LocalBackend) -> None:
        barrier.wait()
        started.append(b.start_sweep(sweep, root))

    threads = [threading.Thread(target=start, args=(b,)) for b in backends]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    statedir = tmp_path / "results" / "race-sweep" / ".rlcloud-sweep"
    pid = read_sweep_state(statedir)["pid"]
    try:
        assert sorted(started) == [False, False, True]
    finally:
        backends[0].stop_sweep("race-sweep")
        for child in list(CHILDREN):
            child.wait(30)
    assert not scheduler_alive(statedir) and not alive(pid)


# ---------------------------------------------------------------------- stalled learners (issue 30)


@pytest.mark.processes
def test_a_stalled_learner_is_restarted_once_from_its_checkpoint_and_finishes(
    make_backend: Callable[..., LocalBackend], tmp_path: Path
) -> None:
    """The stand-in hangs after episode 3 (once): its supervisor sees no timestep for stall_timeout, stops it
    (it checkpoints ckpt-3) and starts it again; the second runner resumes there and finishes."""
    backend = make_backend(STANDIN_EPISODES="6", STANDIN_HANG_AFTER="3", STANDIN_HANG_ONCE="1")
    backend.start(cartpole_spec("stall-once", stall_timeout="3s"), str(tmp_path / "results"))
    workdir = _workdir(tmp_path, "stall-once")
    final = backend.wait("stall-once", timeout=120)
    log = (workdir / "logs" / "single-0.log").read_text()
    assert final.state == "succeeded", log
    assert final.roles[0].restarts == 1 and final.restarts == 1
    assert re.search(r"single-0 stalled: no timestep for \d+ s \(stall_timeout 3 s\): restarting it", log), log
    assert "resumed from checkpoint ckpt-3" in log
    assert len(_runners(workdir)) == 2
    assert _episodes(workdir) == [1, 2, 3, 4, 5, 6]  # nothing lost, nothing twice
    assert final.to_dict()["vitals"]["restarts"] == 1


@pytest.mark.processes
def test_a_learner_that_stalls_again_after_its_restart_fails_saying_why(
    make_backend: Callable[..., LocalBackend], tmp_path: Path
) -> None:
    backend = make_backend(STANDIN_EPISODES="6", STANDIN_HANG_AFTER="2")
    backend.start(cartpole_spec("stall-twice", stall_timeout="2s"), str(tmp_path / "results"))
    final = backend.wait("stall-twice", timeout=120)
    assert final.state == "failed"
    assert final.roles[0].restarts == 1
    assert re.search(r"stalled: no timestep for \d+ s \(stall_timeout 2 s\), again", final.message or ""), final.message
    assert len(_runners(_workdir(tmp_path, "stall-twice"))) == 2
    assert not any(alive(pid) for pid in _runners(_workdir(tmp_path, "stall-twice")))


@pytest.mark.processes
def test_status_shows_a_running_learner_without_progress_as_stalled(
    make_backend: Callable[..., LocalBackend], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hung learner's heartbeat is older than its stall_timeout: status, -o json and the notebook say
    "stalled" and for how long, not "running" (its supervisor's restart is further away: 10 minutes)."""
    from rlcloud.display import display_state

    backend = make_backend(STANDIN_EPISODES="6", STANDIN_HANG_AFTER="2")
    backend.start(cartpole_spec("hung"), str(tmp_path / "results"))
    workdir = _workdir(tmp_path, "hung")
    eventually(lambda: "hanging after episode 2" in (workdir / "logs" / "single-0.log").read_text(), 30, "the hang")
    progress = json.loads((workdir / "progress.json").read_text())
    assert backend.status("hung").stalled_for is None  # 2 episodes ago is seconds, not 10 minutes
    # the heartbeat as it reads an hour later (the stand-in writes no more of it)
    progress.update(advanced_at=time.time() - 3600, stall_timeout=600)
    (workdir / "progress.json").write_text(json.dumps(progress))
    status = backend.status("hung")
    assert status.state == "running"  # what the processes say; the display and the json say more
    assert status.stalled_for is not None and status.stalled_for >= 3600
    assert display_state(status) == "stalled (60 min without progress)"
    doc = status.to_dict()
    assert doc["schema"] == 1 and doc["state"] == "stalled" and doc["vitals"]["stalled_for_s"] >= 3600
    # the facade adds the goal (300 timesteps): percent done; list and the notebook show the same
    root = str(tmp_path / "results")
    exp = Experiment.attach("hung", results=root)
    assert exp.status().vitals["percent"] == round(100 * progress["timestep"] / 300, 1)
    assert "stalled (60 min without progress)" in exp._repr_html_()
    capsys.readouterr()
    assert main(["experiment", "list", "-o", "json", "--results", root]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["state"] == "stalled (60 min without progress)" and row["percent"] == exp.status().vitals["percent"]
    assert main(["experiment", "status", "hung", "-o", "json", "--results", root]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "stalled"


# ---------------------------------------------------------------------- process state is input (issue 25)


def _starttime(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()[19]


@pytest.mark.processes
def test_a_planted_process_record_is_never_signalled_nor_shown_running(
    make_backend: Callable[..., LocalBackend], tmp_path: Path
) -> None:
    """A state.json that came from elsewhere (a download, a copy, a shared directory) names a live process of
    this machine: whatever it claims, without the proof (host, start time, a command line naming this run's
    directory, checked live) the process is not ours: status says unknown, stop and start never signal it."""
    import socket

    backend = make_backend(STANDIN_EPISODES="3")
    workdir = _workdir(tmp_path, "planted")
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        real = {"pid": victim.pid, "starttime": _starttime(victim.pid), "host": socket.gethostname()}
        named = [sys.executable, "-m", "rlcloud.local.supervisor", "--workdir", str(workdir)]
        variants: list[dict[str, Any]] = [
            {"pid": victim.pid},  # an old record, or a bare planted pid
            {**real},  # no command line
            {**real, "cmdline": [sys.executable, "-c", "import time; time.sleep(120)"]},  # the live one, not this run
            {**real, "cmdline": named},  # names the run, but the live process does not
            {**real, "cmdline": named, "host": "elsewhere"},
            {**real, "cmdline": named, "starttime": "1"},
            {**real, "cmdline": named, "pid": str(victim.pid)},
            {**real, "cmdline": "--workdir " + str(workdir)},
        ]
        (workdir / STATE_DIR).mkdir(parents=True)
        for variant in variants:
            role = {"role": "single", "index": 0, "started": 0.0, **variant}
            state = {"name": "planted", "results": str(tmp_path / "results"), "roles": [role], "stop_requested": True}
            (workdir / STATE_DIR / "state.json").write_text(json.dumps(state))
            (workdir / STATE_DIR / "single-0.runner").write_text(json.dumps(variant))
            status = backend.status("planted")
            assert status.state != "running" and all(r.state != "running" for r in status.roles), variant
            backend.stop("planted")
            assert victim.poll() is None, variant
        # A record of another machine says so; starting the run here ignores it and runs for real.
        role = {"role": "single", "index": 0, "started": 0.0, **real, "cmdline": named, "host": "elsewhere"}
        (workdir / STATE_DIR / "state.json").write_text(json.dumps({"name": "planted", "roles": [role]}))
        status = backend.status("planted")
        assert status.state == "unknown" and "elsewhere" in (status.message or "")
        assert backend.start(cartpole_spec("planted"), str(tmp_path / "results")) is True
        assert backend.wait("planted", timeout=60).state == "succeeded"
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.processes
def test_a_planted_sweep_record_is_never_signalled(tmp_path: Path) -> None:
    from rlcloud.local.state import SWEEP_STATE_DIR, scheduler_alive

    statedir = tmp_path / "results" / "planted-sweep" / SWEEP_STATE_DIR
    statedir.mkdir(parents=True)
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        import socket

        state = {
            "name": "planted-sweep",
            "location": str(tmp_path / "results" / "planted-sweep"),
            "results": str(tmp_path / "results"),
            "pid": victim.pid,
            "starttime": _starttime(victim.pid),
            "host": socket.gethostname(),
            "cmdline": [sys.executable, "-m", "rlcloud.local.sweeper", "--statedir", str(statedir)],
        }
        (statedir / "state.json").write_text(json.dumps(state))
        assert not scheduler_alive(statedir)
        LocalBackend(str(tmp_path / "results"), grace_period=1).stop_sweep("planted-sweep")
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.processes
def test_the_ps_fallback_tells_a_process_apart_where_there_is_no_proc() -> None:
    from rlcloud.local.state import _ps_facts

    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        facts = _ps_facts(victim.pid)
        assert facts is not None and facts[0] in "RS" and "time.sleep(120)" in facts[2][0]
        again = _ps_facts(victim.pid)
        assert again is not None and again[1:] == facts[1:]  # the start time is stable: it identifies the process
    finally:
        victim.kill()
        victim.wait()
    assert _ps_facts(victim.pid) is None


@pytest.mark.processes
def test_a_start_never_writes_through_a_link_in_the_run_directory(
    make_backend: Callable[..., LocalBackend], tmp_path: Path
) -> None:
    backend = make_backend(STANDIN_EPISODES="3")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "bashrc").write_text("mine\n")
    workdir = _workdir(tmp_path, "linked")
    workdir.mkdir(parents=True)
    (workdir / "logs").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConflictError, match="symbolic link"):
        backend.start(cartpole_spec("linked"), str(tmp_path / "results"))
    (workdir / "logs").unlink()
    (workdir / "logs").mkdir()
    (workdir / "logs" / "single-0.log").symlink_to(outside / "bashrc")
    assert backend.start(cartpole_spec("linked"), str(tmp_path / "results")) is True
    assert backend.wait("linked", timeout=60).state == "succeeded"
    assert (outside / "bashrc").read_text() == "mine\n" and sorted(p.name for p in outside.iterdir()) == ["bashrc"]
    assert not (workdir / "logs" / "single-0.log").is_symlink()


# ---------------------------------------------------------------------- Ctrl-C on a followed run


@pytest.mark.processes
def test_ctrl_c_on_a_followed_run_stops_it_and_says_how_to_resume(
    tmp_path: Path, standin_python: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_file = tmp_path / "live.yaml"
    spec_file.write_text(cartpole_spec("live").to_yaml())
    results = str(tmp_path / "results")
    argv = ["experiment", "run", str(spec_file), "--results", results]
    driver = (  # the CLI as a program whose runners are the stand-in; Ctrl-C is SIGINT to it alone
        f"import sys; sys.executable = {str(standin_python)!r}\n"
        f"from rlcloud.cli import main; sys.exit(main({argv!r}))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", driver],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "STANDIN_EPISODES": "100000", "STANDIN_DELAY": "0.05"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a shell's foreground job
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # the follower's first plain line: it is following now
        seen.append(line)
        if line.startswith("live: running ·"):
            break
    else:
        raise AssertionError("".join(seen))
    eventually(lambda: _progress(_workdir(tmp_path, "live")) >= 2, 30, "training")
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()
    proc.stdout.close()
    assert proc.wait(30) == 130, out
    assert "Traceback" not in out
    assert "stopping live after a checkpoint" in out
    assert "live stopped; to resume from its latest checkpoint, run the same command again:" in out  # the
    # stand-in reports no checkpoint in its progress (the real runner's "at checkpoint ckpt-...": a training test)
    assert f"rlcloud experiment run {spec_file} --results {results}" in out
    assert f"or in the background: rlcloud experiment resume live --results {results}" in out
    assert not any(alive(pid) for pid in _runners(_workdir(tmp_path, "live")))
    # the background way: resume says how to follow it, with the flags that find it
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "executable", str(standin_python))
        patch.setenv("STANDIN_EPISODES", "100000")
        assert main(["experiment", "resume", "live", "--results", results]) == 0
        try:
            assert capsys.readouterr().out == (
                f"resumed live in the background; follow it with: rlcloud attach live --results {results}\n"
            )
        finally:
            assert main(["experiment", "stop", "live", "--results", results]) == 0
