"""The supervisor's moves one at a time (:class:`rlcloud.local.supervisor.Supervisor`), without a runner process:
its judgement of stalls, a watchdog's exit and the budget's warning, on a clock whose time passes only when the
test says (tests/clocks.py). The whole loop, with runners, is tested in test_lifecycle, test_stall_* and
test_budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlcloud.local import STATE_DIR
from rlcloud.local.supervisor import STALL_RESTARTS, Supervisor
from rlcloud.runner.watchdog import EXIT_STALLED, EXIT_STALLED_AGAIN, LIVENESS_MARGIN_S, beat
from tests.support.clocks import SteppingClock


def _supervisor(
    tmp_path: Path, label: str, stall_timeout: float | None = None, budget: tuple[float, float] | None = None
) -> tuple[Supervisor, SteppingClock]:
    """A supervisor of ``label`` whose runner was launched now (by a clock that moves on ``advance`` only)."""
    (tmp_path / STATE_DIR).mkdir(exist_ok=True)
    clock = SteppingClock(manual=True)
    supervisor = Supervisor(tmp_path, label, ["runner"], stall_timeout=stall_timeout, budget=budget, clock=clock.clock)
    supervisor.launched = clock.time()
    return supervisor, clock


def _report(tmp_path: Path, **fields: object) -> None:
    (tmp_path / "progress.json").write_text(json.dumps(fields), encoding="utf-8")


def test_an_env_server_stalls_once_its_own_heartbeat_is_stall_timeout_old(tmp_path: Path) -> None:
    supervisor, clock = _supervisor(tmp_path, "env-server-0", stall_timeout=10.0)
    assert supervisor.idle_seconds() is None  # no heartbeat yet: it is starting
    beat(supervisor.heartbeat, at=supervisor.launched - 100)
    assert supervisor.idle_seconds() is None  # the heartbeat of the process before this one
    beat(supervisor.heartbeat, at=supervisor.launched + 1)
    assert supervisor.idle_seconds() is None  # aged from when it was first seen, here: 0 s
    clock.advance(9.5)
    assert supervisor.idle_seconds() is None
    clock.advance(1.0)
    assert supervisor.idle_seconds() == pytest.approx(10.5)


def test_a_learners_watchdog_heartbeat_is_a_backstop_past_the_watchdogs_own_margin(tmp_path: Path) -> None:
    supervisor, clock = _supervisor(tmp_path, "single-0", stall_timeout=10.0)
    beat(supervisor.heartbeat, at=supervisor.launched + 1)
    assert supervisor.idle_seconds() is None
    clock.advance(11.0)  # the watchdog in the runner ends a stall itself (exit 88): not yet a hang
    assert supervisor.idle_seconds() is None
    clock.advance(LIVENESS_MARGIN_S)
    assert supervisor.idle_seconds() == pytest.approx(11.0 + LIVENESS_MARGIN_S)


def test_a_learner_without_a_watchdog_is_judged_from_its_own_first_running_report(tmp_path: Path) -> None:
    supervisor, clock = _supervisor(tmp_path, "single-0", stall_timeout=10.0)
    launched = supervisor.launched
    # the runner before this one reported "running": not this one's (it is still importing TensorFlow)
    _report(tmp_path, state="running", updated=launched - 5, advanced_at=launched - 500)
    clock.advance(60.0)
    assert supervisor.idle_seconds() is None and supervisor.first_report == []
    # its first report carries an advance from before it (a restore): the stall counts from the report
    _report(tmp_path, state="running", updated=launched + 61, advanced_at=launched - 50)
    assert supervisor.idle_seconds() is None and supervisor.first_report == [launched + 61]
    clock.advance(10.0)
    assert supervisor.idle_seconds() == pytest.approx(10.0)
    # a final report is no stall
    _report(tmp_path, state="succeeded", updated=launched + 62)
    assert supervisor.idle_seconds() is None


def test_a_watchdogs_second_stall_fails_the_role_with_what_it_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / STATE_DIR
    supervisor, _ = _supervisor(tmp_path, "single-0")
    _report(tmp_path, state="stalled", stalled="stalled: no timestep for 12 s (stall_timeout 10 s) at timestep 3")
    supervisor.restarts = STALL_RESTARTS  # restarted once already: no other runner is launched
    assert supervisor.runner_ended(EXIT_STALLED) == EXIT_STALLED
    why = "stalled: no timestep for 12 s (stall_timeout 10 s) at timestep 3, again after a restart"
    assert (run / "single-0.why").read_text() == why + "\n" and (run / "single-0.exit").read_text() == "88\n"
    assert f"single-0 exited with code 88 ({why})" in capsys.readouterr().out
    # the runner's own "stalled again" (89) fails it the same way, however many restarts the supervisor counted
    supervisor, _ = _supervisor(tmp_path, "single-0")
    assert supervisor.runner_ended(EXIT_STALLED_AGAIN) == EXIT_STALLED_AGAIN
    assert (run / "single-0.why").read_text() == why + "\n" and (run / "single-0.exit").read_text() == "89\n"


def test_an_exit_code_88_is_only_a_stall_for_a_learner_not_stopped(tmp_path: Path) -> None:
    run = tmp_path / STATE_DIR
    env_server, _ = _supervisor(tmp_path, "env-server-0")
    assert env_server.runner_ended(EXIT_STALLED) == EXIT_STALLED and env_server.restarts == 0
    assert not (run / "env-server-0.why").exists() and (run / "env-server-0.exit").read_text() == "88\n"
    stopped, _ = _supervisor(tmp_path, "single-0")
    stopped.received.append(15)  # a stop came: the runner's end is the stop's, never restarted
    assert stopped.runner_ended(EXIT_STALLED) == EXIT_STALLED and stopped.restarts == 0


def test_the_budget_warns_once_from_the_live_runners_report_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """$36 an hour: a cent a second. $1 of budget: the warning at 90 s of training, once."""
    supervisor, clock = _supervisor(tmp_path, "single-0", budget=(1.0, 36.0))
    assert supervisor.look_at_budget() is None  # no report yet: the cost is unknown
    _report(tmp_path, state="running", elapsed=80.0, updated=supervisor.launched + 1)
    assert supervisor.look_at_budget() is None and not supervisor.warned
    clock.advance(11.0)  # training time runs on from the report: 91 s
    assert supervisor.look_at_budget() is None and supervisor.warned
    clock.advance(1.0)
    assert supervisor.look_at_budget() is None
    out = capsys.readouterr().out
    assert out.count("single-0 budget: cost so far ~$0.91 of its budget of $1.00 (91%): it stops at 100%") == 1, out
