"""The local supervisor under a wall clock that steps, and a restarted learner's start-up (issue 37, items 3 and 5).

Each test runs :func:`rlcloud.local.supervisor.supervise` in a process of its own (single-threaded, as the real
supervisor: :mod:`tests.local.clocked_supervisor`) with a :class:`tests.support.clocks.SteppingClock`; its runner is
a small program that writes progress.json and heartbeats as the real runner does, and waits for a ``release`` file
where the real one would be busy. The clock steps the supervisor's wall clock 2 hours forward (a laptop's sleep,
NTP) once the runner reported, lets the supervisor look again many times (the clock counts its reads), then releases
the runner: a budget must not stop it, a stall watch must not restart it. The control cases show the same watches
still act on time that really passed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlcloud.local.state import STATE_DIR
from tests.support.training_process import ROOT

pytestmark = pytest.mark.processes


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A run's work directory with its state record."""
    (tmp_path / STATE_DIR).mkdir()
    (tmp_path / STATE_DIR / "state.json").write_text(json.dumps({"roles": []}))
    return tmp_path


def _supervise(
    workdir: Path, label: str, mode: str, scenario: str, *options: str, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """The supervisor's exit code and output (its lines and its runner's)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.local.clocked_supervisor", str(workdir), label, mode, scenario, *options],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    return int(json.loads(lines[-1])["code"]), "\n".join(lines[:-1])


@pytest.mark.parametrize("price", ["100", "2.5"])
def test_a_wall_clock_step_does_not_charge_a_budget(workdir: Path, price: str) -> None:
    # $0.15 spent of $5 at $100/h (the reported case: a 2-hour step read as $200); at $2.5/h the step alone
    # would be the whole budget
    code, out = _supervise(workdir, "single-0", "budget", "step:30", "--budget", "5", price)
    assert code == 0, out
    assert "budget" not in out


def test_a_run_over_its_budget_is_still_stopped(workdir: Path) -> None:
    # the control: 200 s of training reported at $100/h is $5.56 of $5, whatever the clock did
    options = ("--budget", "5", "100", "--wall-offset", str(-2 * 3600))
    code, out = _supervise(workdir, "single-0", "budget", "none", *options, env={"CHILD_ELAPSED": "200"})
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
def test_a_wall_clock_step_is_no_stall(workdir: Path, label: str, mode: str) -> None:
    # a look for a stall every second (two reads each) besides its polls (one read each): 3 looks or more
    code, out = _supervise(workdir, label, mode, "step:25", "--stall-timeout", "1")
    assert code == 0, out
    assert "stalled" not in out
    assert len((workdir / "attempts").read_text().split()) == 1


@pytest.mark.parametrize("stale_advance", ["0", "30"])
def test_a_frozen_learners_replacement_gets_the_start_up_grace(workdir: Path, stale_advance: str) -> None:
    """SIGSTOP the learner (stall_timeout 1 s): its replacement, still starting (importing TensorFlow) long past
    the stall_timeout, is not "stalled again"; once it trains, its stall time counts from its first report, even
    when that report carries an advance from before it (``stale_advance`` s old: the agent built, a restore)."""
    env = {"CHILD_STALE_ADVANCE": stale_advance}
    code, out = _supervise(workdir, "single-0", "freeze", "replace", "--stall-timeout", "1", env=env)
    assert code == 0, out
    assert out.count("single-0 stalled: no timestep for") == 1 and "again" not in out
    assert (workdir / STATE_DIR / "single-0.restarts").read_text().strip() == "1"
    assert json.loads((workdir / "progress.json").read_text())["state"] == "succeeded"
