"""The learner's stall watchdog (issue 30): a real runner hung in C code ends itself and resumes once restarted.

The training test runs ``python -m rlcloud.runner`` as a pod would (no supervisor): its environment blocks
forever in a lock acquire (C code, the GIL released) after a number of steps. The watchdog sees no timestep
for stall_timeout, records the stall, and the process exits 88; started again on the same work directory
(what the Job does), the runner resumes from its latest checkpoint and, the environment hanging only once,
finishes. A second stall in a row exits 89. The other tests drive the watchdog over a stand-in trainer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlcloud.runner.watchdog import (
    EXIT_STALLED,
    EXIT_STALLED_AGAIN,
    LIVENESS_SCRIPT,
    StallWatchdog,
    beat,
    heartbeat_age,
    heartbeat_path,
    liveness_command,
    on_stall_exit,
)
from tests.support.waiting import eventually

HANGING_ENV = '''
import threading
from pathlib import Path

import gymnasium
import numpy as np


class HangOnce(gymnasium.Env):
    """A corridor whose step blocks forever (a lock acquire: C code, GIL released) at step `hang_at` of the
    process, the first time only (`marker` remembers it)."""

    steps = 0

    def __init__(self, hang_at=120, marker=""):
        self.hang_at, self.marker = hang_at, Path(marker)
        self.observation_space = gymnasium.spaces.Box(0.0, 8.0, shape=(1,), dtype=np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        HangOnce.steps += 1
        if HangOnce.steps >= self.hang_at and not self.marker.exists():
            self.marker.write_text("hung")
            threading.Event().wait()  # forever
        self.pos = min(8, self.pos + int(action))
        return np.array([self.pos], dtype=np.float32), 1.0, self.pos >= 8, False, {}
'''


def _run(spec: Path, workdir: Path, log: Path, pythonpath: Path) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pythonpath), os.environ.get("PYTHONPATH", "")])}
    with open(log, "ab") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "rlcloud.runner", "--role", "single", "--spec", str(spec), "--workdir",
             str(workdir)],
            stdout=out, stderr=subprocess.STDOUT, env=env, timeout=300, check=False,
        )  # fmt: skip
    return proc.returncode


@pytest.mark.processes
@pytest.mark.training
def test_a_runner_hung_in_c_code_stalls_out_and_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "hangenv.py").write_text(HANGING_ENV)
    marker = tmp_path / "hung-once"
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "hang",
                "environment": {"type": "hangenv:HangOnce", "hang_at": 120, "marker": str(marker)},
                "agent": {"type": "ppo", "batch_size": 2},
                "run_mode": "single",
                "total_timesteps": 200,
                "max_timesteps_per_episode": 20,
                "saver_frequency": "40t",
                "stall_timeout": "20s",  # generous: a loaded 2-core machine took 16 s for the first update
            }
        )
    )
    workdir, log = tmp_path / "work", tmp_path / "runner.log"
    assert _run(spec, workdir, log, tmp_path) == EXIT_STALLED, log.read_text()
    text = log.read_text()
    assert marker.exists() and "stalled: no timestep for" in text
    assert "in step" in text and "hangenv.py" in text  # where it hung: every thread's stack
    progress = json.loads((workdir / "progress.json").read_text())
    assert progress["state"] == "stalled" and progress["stalls"] == 1 and progress["checkpoint"]
    stalled_at = progress["timestep"]
    assert not heartbeat_path(workdir, "single-0").exists() or progress["state"] == "stalled"

    # what the Job (or the supervisor) does next: the same command again, on the same work directory
    assert _run(spec, workdir, log, tmp_path) == 0, log.read_text()
    progress = json.loads((workdir / "progress.json").read_text())
    assert progress["state"] == "succeeded" and progress["timestep"] >= 200 > stalled_at
    assert "stalls" not in progress  # recovered: a later stall would be restarted again
    assert "resum" in log.read_text().split("stalled: no timestep for", 1)[1].lower()


class _Trainer:
    """What the watchdog reads of a Trainer: ``running`` and ``counters``."""

    def __init__(self) -> None:
        self.running = True
        self.counters: dict[str, Any] = {"timestep": 0, "evaluation_episode": 0}


def _watch(tmp_path: Path, trainer: _Trainer, **kwargs: Any) -> tuple[StallWatchdog, threading.Event]:
    ended = threading.Event()

    def exit_(code: int) -> None:
        ended.set()

    return StallWatchdog(trainer, 0.4, tmp_path, label="single-0", exit=exit_, **kwargs), ended


def test_a_stall_is_recorded_and_the_second_in_a_row_is_told_apart(tmp_path: Path) -> None:
    (tmp_path / "progress.json").write_text(json.dumps({"state": "running", "timestep": 3}))
    trainer = _Trainer()
    watchdog, ended = _watch(tmp_path, trainer)
    told: list[int] = []
    unhook = on_stall_exit(told.append)  # what a warm worker records the trial's exit code with
    try:
        watchdog.start()
        trainer.counters["timestep"] = 5  # one step, then nothing
        assert ended.wait(30)
    finally:
        unhook()
    assert watchdog.fired == EXIT_STALLED and told == [EXIT_STALLED]
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress["state"] == "stalled" and progress["stalls"] == 1 and progress["timestep"] == 3
    assert progress["stalled"].startswith("stalled: no timestep for")

    again, ended = _watch(tmp_path, _Trainer())  # the next process reads the stall it follows
    assert again.previous_stalls == 1
    again.trainer.counters["timestep"] = 1
    again.start()
    again.trainer.counters["timestep"] = 2
    assert ended.wait(30)
    assert again.fired == EXIT_STALLED_AGAIN
    assert json.loads((tmp_path / "progress.json").read_text())["state"] == "failed"


def test_waiting_for_env_servers_is_not_a_stall_and_stop_clears_the_heartbeat(tmp_path: Path) -> None:
    trainer = _Trainer()
    waiting = threading.Event()
    watchdog, ended = _watch(tmp_path, trainer, waiting=waiting.is_set)
    watchdog.start()
    waiting.set()  # the agent waits for a lost env server: its own timeouts bound that
    path = heartbeat_path(tmp_path, "single-0")
    # the heartbeat keeps being set while it waits
    eventually(path.exists, timeout=30, what="the heartbeat file")
    first = path.stat().st_mtime
    eventually(lambda: ended.is_set() or path.stat().st_mtime != first, timeout=30, what="a fresh heartbeat")
    assert not ended.is_set()
    watchdog.stop()
    assert not path.exists() and watchdog.fired is None


@pytest.mark.processes
def test_the_liveness_script_reads_the_newest_heartbeat(tmp_path: Path) -> None:
    """The probe's inline program: no heartbeat yet passes (starting), a fresh one passes, an old one fails
    naming its age; heartbeat_age is what the local supervisor reads, from the process's own start."""
    command = liveness_command(str(tmp_path), 30)
    assert command[:3] == ["python", "-c", LIVENESS_SCRIPT] and command[3] == str(tmp_path / ".heartbeat")

    def probe() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *command[1:]], capture_output=True, text=True, check=False)

    assert probe().returncode == 0
    path = heartbeat_path(tmp_path, "env-server-0")
    beat(path)
    assert probe().returncode == 0
    beat(path, time.time() - 100)
    failed = probe()
    assert failed.returncode == 1 and "no heartbeat for 100 s (at most 30 s)" in failed.stdout
    age = heartbeat_age(path)
    assert age is not None and age >= 100
    assert heartbeat_age(path, since=time.time() - 10) is None  # a previous process's heartbeat


def test_the_end_of_training_stops_the_judging_before_the_final_upload(tmp_path: Path) -> None:
    """on_finish (the loop's hook, called before the results syncer's final upload) ends the watch: an upload
    longer than stall_timeout is not a stall."""
    trainer = _Trainer()
    watchdog, ended = _watch(tmp_path, trainer)
    watchdog.start()
    trainer.counters["timestep"] = 7
    watchdog.on_finish("succeeded")
    assert not heartbeat_path(tmp_path, "single-0").exists()
    assert not ended.wait(2.0)  # five stall_timeouts without a step, after the end: nothing fires
    assert watchdog.fired is None
    watchdog.stop()


def test_a_wall_clock_step_is_no_stall_and_a_real_one_still_is(tmp_path: Path) -> None:
    """The watchdog measures a stall with the monotonic clock: a 2-hour forward step of the wall clock during a
    long update (no timestep for a while) is no stall; the heartbeat file states the stepped wall time (what other
    processes read); time that really passes without a timestep still ends the process."""
    from tests.support.clocks import SteppingClock

    clock = SteppingClock(manual=True)  # its monotonic time passes only when the test says
    trainer = _Trainer()
    ended = threading.Event()
    watchdog = StallWatchdog(
        trainer, 4.0, tmp_path, label="single-0", exit=lambda _code: ended.set(), clock=clock.clock
    )
    watchdog.start()
    trainer.counters["timestep"] = 1
    clock.wait_reads(clock.step(0), 4)  # it has seen the timestep
    since = clock.step(2 * 3600)
    clock.wait_reads(since, 4)  # two ticks of the watchdog after the step (it reads both clocks each)
    assert not ended.is_set() and watchdog.fired is None
    assert heartbeat_path(tmp_path, "single-0").stat().st_mtime > time.time() + 3600
    # the control: no timestep for 4 s of the monotonic clock, past the first step's grace (as long), ends it
    clock.advance(3.0)
    clock.wait_reads(clock.step(0), 4)
    assert not ended.is_set()
    clock.advance(5.5)
    assert ended.wait(60) and watchdog.fired == EXIT_STALLED
