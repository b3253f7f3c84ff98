"""The local supervisor under a wall clock that steps, and a restarted learner's start-up (issue 37, items 3 and 5).

:func:`rlcloud.local.supervisor.supervise` runs here in the test's process with a :class:`tests.clocks.SteppingClock`;
its runner is a small program (:data:`CHILD`) that writes progress.json and heartbeats as the real runner does, and
waits for the test's ``release`` file where the real one would be busy. The test steps the supervisor's wall clock
2 hours forward (a laptop's sleep, NTP), waits until the supervisor has looked again many times (the clock counts
its reads), then releases the runner: a budget must not stop it, a stall watch must not restart it. The control
cases show the same watches still act on time that really passed.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rlcloud.local.state import STATE_DIR
from rlcloud.local.supervisor import supervise
from rlcloud.runner.watchdog import HEARTBEAT_DIR
from rlcloud.waiting import poll_until
from tests.clocks import SteppingClock

pytestmark = pytest.mark.processes

#: The stand-in runner: ``CHILD WORKDIR LABEL MODE``. Every attempt appends its pid to ``attempts``.
CHILD = r"""
import json, os, signal, sys, time
from pathlib import Path

work, label, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
with open(work / "attempts", "a") as fh:
    fh.write(f"{os.getpid()}\n")
attempt = len((work / "attempts").read_text().split())
release = work / "release"
beat = work / ".heartbeat" / label
timestep = 0


def report(state, **extra):
    body = {"state": state, "updated": time.time(), "timestep": timestep, **extra}
    tmp = work / f".progress.{os.getpid()}"
    tmp.write_text(json.dumps(body))
    os.replace(tmp, work / "progress.json")


def train(until_released, elapsed=5.4, stale_advance=0.0):
    # a step every 50 ms: a report (its heartbeat advanced_at) and, with a watchdog, the heartbeat file
    global timestep
    first = True
    while not (until_released and release.exists()):
        timestep += 1
        now = time.time()
        report("running", elapsed=elapsed, advanced_at=now - (stale_advance if first else 0.0))
        first = False
        if mode in ("heartbeat", "env-server"):
            beat.parent.mkdir(exist_ok=True)
            beat.touch()
        if not until_released and timestep >= 20:
            return
        time.sleep(0.05)


if mode == "budget":  # one report, then a long update: the supervisor counts on from the report
    report("running", elapsed=float(os.environ.get("CHILD_ELAPSED", "5.4")), advanced_at=time.time())
    while not release.exists():
        time.sleep(0.05)
elif mode in ("heartbeat", "progress", "env-server"):
    train(until_released=True)
elif mode == "freeze":  # attempt 1 freezes (SIGSTOP); attempt 2 imports until released, then trains
    if attempt == 1:
        report("running", elapsed=1.0, advanced_at=time.time())
        os.kill(os.getpid(), signal.SIGSTOP)
    while not release.exists():
        time.sleep(0.05)
    report("starting")
    # the first report of training can carry an advance from before it (agent building, a restore)
    train(until_released=False, stale_advance=float(os.environ.get("CHILD_STALE_ADVANCE", "0")))
report("succeeded", elapsed=5.4)
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """A run's work directory with its state record; the test process's signal handlers kept (supervise sets its
    own, as the program it is)."""
    (tmp_path / STATE_DIR).mkdir()
    (tmp_path / STATE_DIR / "state.json").write_text(json.dumps({"roles": []}))
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield tmp_path
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def _in_background(action: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    return thread


def _wait_for(check: Callable[[], bool], what: str) -> None:
    assert poll_until(lambda: True if check() else None, time.monotonic() + 120, interval=0.02), what


def _supervise(workdir: Path, label: str, mode: str, clock: SteppingClock, **options: object) -> int:
    command = [sys.executable, "-c", CHILD, str(workdir), label, mode]
    return supervise(workdir, label, command, grace_period=2.0, clock=clock.clock, **options)  # type: ignore[arg-type]


def _step_then_release(workdir: Path, clock: SteppingClock, started: Callable[[], bool], reads: int = 30) -> None:
    """Once ``started``, step the supervisor's wall clock 2 hours forward, let it read the clock ``reads`` times
    (its loop reads it a few times a poll, and at each look at the budget or for a stall), release the runner."""
    _wait_for(started, "the runner's first report")
    since = clock.step(2 * 3600)
    clock.wait_reads(since, reads)
    (workdir / "release").touch()


@pytest.mark.parametrize("price", [100.0, 2.5])
def test_a_wall_clock_step_does_not_charge_a_budget(
    workdir: Path, capfd: pytest.CaptureFixture[str], price: float
) -> None:
    # $0.15 spent of $5 at $100/h (the reported case: a 2-hour step read as $200); at $2.5/h the step alone
    # would be the whole budget
    clock = SteppingClock()
    helper = _in_background(lambda: _step_then_release(workdir, clock, (workdir / "progress.json").exists))
    code = _supervise(workdir, "single-0", "budget", clock, budget=(5.0, price))
    helper.join()
    out = capfd.readouterr().out
    assert code == 0, out
    assert "budget" not in out


def test_a_run_over_its_budget_is_still_stopped(
    workdir: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the control: 200 s of training reported at $100/h is $5.56 of $5, whatever the clock did
    monkeypatch.setenv("CHILD_ELAPSED", "200")
    clock = SteppingClock()
    clock.step(-2 * 3600)
    code = _supervise(workdir, "single-0", "budget", clock, budget=(5.0, 100.0))
    out = capfd.readouterr().out
    assert code == 143, out
    assert "stopped by its budget: cost so far ~$5.56 of its budget of $5.00 (111%)" in out


@pytest.mark.parametrize(
    ("label", "mode"),
    [
        ("single-0", "heartbeat"),  # a learner's heartbeat file (its watchdog's), the supervisor's backstop
        ("single-0", "progress"),  # a learner without one: progress.json's advanced_at
        ("env-server-0", "env-server"),  # an env server's heartbeat file
    ],
)
def test_a_wall_clock_step_is_no_stall(workdir: Path, capfd: pytest.CaptureFixture[str], label: str, mode: str) -> None:
    clock = SteppingClock()
    beat = workdir / HEARTBEAT_DIR / label
    started = beat.exists if mode != "progress" else (workdir / "progress.json").exists
    # a look for a stall every second (two reads each) besides its polls (one read each): 3 looks or more
    helper = _in_background(lambda: _step_then_release(workdir, clock, started, reads=25))
    code = _supervise(workdir, label, mode, clock, stall_timeout=1.0)
    helper.join()
    out = capfd.readouterr().out
    assert code == 0, out
    assert "stalled" not in out
    assert len((workdir / "attempts").read_text().split()) == 1


@pytest.mark.parametrize("stale_advance", [0.0, 30.0])
def test_a_frozen_learners_replacement_gets_the_start_up_grace(
    workdir: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, stale_advance: float
) -> None:
    """SIGSTOP the learner (stall_timeout 1 s): its replacement, still starting (importing TensorFlow) long past
    the stall_timeout, is not "stalled again"; once it trains, its stall time counts from its first report, even
    when that report carries an advance from before it (``stale_advance`` s old: the agent built, a restore)."""
    monkeypatch.setenv("CHILD_STALE_ADVANCE", str(stale_advance))
    clock = SteppingClock()
    attempts = workdir / "attempts"

    def replacement_imports_long() -> None:
        _wait_for(lambda: attempts.exists() and len(attempts.read_text().split()) == 2, "the replacement")
        # the supervisor goes on watching for 5 stall_timeouts while the replacement has not reported yet
        start = time.monotonic()
        _wait_for(lambda: clock.monotonic() - start >= 5.0, "five stall_timeouts")
        (workdir / "release").touch()

    helper = _in_background(replacement_imports_long)
    code = _supervise(workdir, "single-0", "freeze", clock, stall_timeout=1.0)
    helper.join()
    out = capfd.readouterr().out
    assert code == 0, out
    assert out.count("single-0 stalled: no timestep for") == 1 and "again" not in out
    assert (workdir / STATE_DIR / "single-0.restarts").read_text().strip() == "1"
    assert json.loads((workdir / "progress.json").read_text())["state"] == "succeeded"
