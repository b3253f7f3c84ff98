"""Money budgets on this machine: training time x processes x rlcloud.yaml's cpu_hour_usd, enforced by the
learner's supervisor with the real runner (it checkpoints on SIGTERM)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rlcloud.experiment import Experiment
from rlcloud.layout import ProgressRecord
from rlcloud.local import STATE_DIR, LocalBackend
from rlcloud.local.state import POLL_S, RunState
from rlcloud.local.supervisor import training_seconds
from rlcloud.specs import ExperimentSpec
from tests.support.specs import cartpole_spec


def _spec(name: str, **overrides: object) -> ExperimentSpec:
    # never reached: the budget ends it; no periodic checkpoint: the one found is the SIGTERM's
    fixed = {"total_timesteps": 10_000_000, "saver_frequency": "10000s"}
    return cartpole_spec(name, **{**fixed, **overrides})


@pytest.mark.training
def test_a_real_local_run_is_checkpointed_and_stopped_at_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # its own rlcloud.yaml
    # $36 a CPU-hour: a cent of budget is one second of training (the runner reports every second)
    Path("rlcloud.yaml").write_text("cpu_hour_usd: 36\n", encoding="utf-8")
    results = tmp_path / "results"
    experiment = Experiment(_spec("capped", budget="0.04 USD"), results=str(results)).start()
    final = experiment.wait(timeout=300)
    assert final.state == "stopped"
    assert final.message is not None and "stopped by its budget" in final.message and "budget reached" in final.message
    progress = json.loads((results / "capped" / "progress.json").read_text())
    # stopped once 4 s of training were reported (the SIGTERM checkpoint's own time comes on top), checkpointed
    assert progress["elapsed"] >= 4.0 and progress["state"] == "stopped", progress
    assert progress["checkpoint"] and (results / "capped" / "checkpoints" / "LATEST").exists()
    # status shows the budget and the cost so far (training time x $36/h)
    vitals = experiment.status().to_dict()["vitals"]
    assert vitals["budget_usd"] == 0.04 and vitals["cost_usd"] >= 0.04 and vitals["budget_percent"] >= 100


def test_without_a_rate_local_runs_are_free_and_the_budget_never_acts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    from rlcloud.cluster import Cluster
    from rlcloud.local.backend import _budget_options

    spec = _spec("free", budget=1)
    free = Cluster.local().backend()
    assert isinstance(free, LocalBackend) and free.run_price(spec) is None and _budget_options(spec, None) == []
    Path("rlcloud.yaml").write_text("cpu_hour_usd: 0.5\n", encoding="utf-8")
    distributed = _spec("d", budget=1, run_mode="distributed", num_workers=3)
    assert free.run_price(distributed) is None  # the target read rlcloud.yaml once, and handed its rate down
    priced = Cluster.local().backend()
    assert isinstance(priced, LocalBackend) and priced.run_price(distributed) == 2.0  # the learner and 3 servers
    assert LocalBackend().run_price(distributed) == 2.0  # built directly: rlcloud.yaml's rate when asked
    price = priced.run_price(distributed)
    assert _budget_options(distributed, price) == ["--budget-usd", "1.00", "--price-per-hour", "2.0"]


@pytest.mark.processes
def test_the_supervisor_warns_once_at_90_percent_then_stops_every_role(
    make_backend: Callable[..., LocalBackend],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stand-in reports 0.05 s of training per episode: at $36 an hour and 2 processes, $0.20 lasts 10 s."""
    monkeypatch.chdir(tmp_path)
    Path("rlcloud.yaml").write_text("cpu_hour_usd: 36\n", encoding="utf-8")
    backend = make_backend(STANDIN_EPISODES="100000", STANDIN_DELAY="0.05")
    spec = _spec("capped-two", budget=0.20, run_mode="distributed", num_workers=1)
    backend.start(spec, str(tmp_path / "results"))
    final = backend.wait("capped-two", timeout=120)
    workdir = tmp_path / "results" / "capped-two"
    log = (workdir / "logs" / "agent-0.log").read_text()
    assert final.state == "stopped" and "stopped by its budget" in (final.message or ""), log
    assert log.count("agent-0 budget: cost so far") == 1 and "it stops at 100%" in log  # the warning, once
    assert "checkpointing and stopping the run" in log and "stopped: checkpoint ckpt-" in log
    assert (workdir / "checkpoints" / "LATEST").exists()
    # the env server was stopped as a stop stops it, not failed
    assert {r.role: r.state for r in final.roles} == {"agent": "succeeded", "env-server": "succeeded"}


@pytest.mark.training
def test_a_local_sweep_over_its_budget_stops_its_trial_and_starts_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlcloud import Sweep, SweepSpec

    monkeypatch.chdir(tmp_path)
    Path("rlcloud.yaml").write_text("cpu_hour_usd: 36\n", encoding="utf-8")
    spec = SweepSpec(
        name="capped-sweep",
        experiment=_spec("base"),
        parameters={"agent.learning_rate": [1e-3, 3e-4]},
        seeds=2,
        max_parallel=1,
        budget="0.04 USD",  # type: ignore[arg-type]
    )
    sweep = Sweep(spec, results=str(tmp_path / "results")).start()
    status = sweep.wait(timeout=600)
    assert status.state == "stopped" and "stopped by its budget" in (status.message or ""), status.message
    counts = status.counts()
    assert counts == {"stopped": 1, "queued": 3}, counts
    first = status.trials[0] if status.trials[0].state == "stopped" else status.trials[1]
    assert (tmp_path / "results" / "capped-sweep" / first.name / "checkpoints" / "LATEST").exists()
    vitals = sweep.status().vitals
    assert vitals["budget_usd"] == 0.04 and vitals["budget_percent"] is not None and vitals["budget_percent"] >= 100


# ------------------------------------------------------------------ the cost runs on between two reports


def test_a_training_runners_time_runs_on_from_its_last_report() -> None:
    def seconds(state: str, elapsed: float | None, updated: float | None, now: float = 130.0) -> float | None:
        return training_seconds(ProgressRecord(state=state, elapsed=elapsed, updated=updated), now, launched=100.0)

    # its own report 10 s ago: 10 s more of training since (elapsed sums every start: a resumed runner's included)
    assert seconds("running", 50.0, 120.0) == 60.0
    # a clock read just before the report was written: never less than the report
    assert seconds("running", 50.0, 120.0, now=119.0) == 50.0
    # a report of the runner before this one (a restart, before its first report): as it is
    assert seconds("running", 50.0, 90.0) == 50.0
    # not training: TensorFlow still loading (not charged), or a final report
    assert seconds("starting", 40.0, 120.0) == 40.0
    assert seconds("stopped", 50.0, 120.0) == 50.0
    # no figures: unknown, and an unknown cost never stops a run
    assert seconds("running", None, 120.0) is None
    assert seconds("running", 50.0, None) == 50.0


#: A runner that reports once, at ``ELAPSED0`` seconds of training, then spends ``SLOW`` seconds in one update
#: (no report: the first PPO update traced by TensorFlow) before it reports again; on SIGTERM it "checkpoints"
#: (writes how many reports it made and its training seconds then) and exits 143, as the runner does. With a
#: fourth argument it first says ``starting <pid>`` and waits for SIGUSR1 (TensorFlow loading, no report).
SLOW_UPDATE_RUNNER = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from pathlib import Path

    workdir, elapsed, slow = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGUSR1})  # taken by sigtimedwait below


    def report(state, elapsed, now):
        tmp = workdir / "progress.json.tmp"
        tmp.write_text(json.dumps({"state": state, "elapsed": elapsed, "updated": now}))
        tmp.replace(workdir / "progress.json")


    if len(sys.argv) > 4:
        print("starting", os.getpid(), flush=True)
        signal.sigtimedwait([signal.SIGUSR1], 60)
    reports, reported = 1, time.time()
    report("running", elapsed, reported)
    while signal.sigtimedwait([signal.SIGTERM], slow) is None:  # the update ended before any stop
        reports, elapsed, reported = reports + 1, elapsed + slow, time.time()
        report("running", elapsed, reported)
    now = time.time()
    trained = elapsed + now - reported
    (workdir / "checkpoint.json").write_text(json.dumps({"reports": reports, "elapsed": trained}))
    report("stopped", trained, now)
    sys.exit(143)
    """
)


@pytest.mark.processes
@pytest.mark.parametrize("resumed", [False, True], ids=["fresh", "resumed-after-a-crash"])
def test_the_supervisor_stops_a_run_at_its_budget_between_two_reports(tmp_path: Path, resumed: bool) -> None:
    """$3,600 an hour: $2 is 2 s of training. One report at 1.5 s, then a 60 s update: the stop comes in it.

    Resumed: the runner before crashed an hour ago at 1.85 s (its checkpoint at 1.5 s), its last report
    "running". While the new one starts, that report is taken as it is (92%: the warning), not as an hour of
    training; the new one goes on from its checkpoint's 1.5 s, and the stop still comes at 2 s.
    """
    (tmp_path / STATE_DIR).mkdir()
    RunState(tmp_path).write({"roles": []})
    runner = tmp_path / "runner.py"
    runner.write_text(SLOW_UPDATE_RUNNER, encoding="utf-8")
    command = [sys.executable, str(runner), str(tmp_path), "1.5", "60"]
    if resumed:
        stale = {"state": "running", "elapsed": 1.85, "updated": time.time() - 3600}
        (tmp_path / "progress.json").write_text(json.dumps(stale), encoding="utf-8")
        command.append("wait")
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "rlcloud.local.supervisor", "--workdir", str(tmp_path), "--label", "single-0",
         "--budget-usd", "2", "--price-per-hour", "3600", "--", *command],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert supervisor.stdout is not None
    seen = []
    if resumed:  # the new runner is let go once the supervisor judged the old report (or its end: a failure)
        for line in supervisor.stdout:
            seen.append(line)
            if "budget: cost so far" in line:
                break
        assert seen and "it stops at 100%" in seen[-1], "".join(seen)  # not stopped for the dead runner's hour
        pid = next(int(line.split()[1]) for line in seen if line.startswith("starting "))
        os.kill(pid, signal.SIGUSR1)
    rest, _ = supervisor.communicate(timeout=120)
    log = "".join(seen) + rest
    assert supervisor.returncode == 128 + signal.SIGTERM, log  # the runner's own exit code: it checkpointed
    checkpoint = json.loads((tmp_path / "checkpoint.json").read_text())
    # stopped during the slow update, before its report: before the fix the stop came with the next report,
    # at 61.5 s of training (3,075% of the budget)
    assert checkpoint["reports"] == 1, (checkpoint, log)
    # at 100%, never before, overrun by a poll (slack for this loaded machine: not the 60 s of a report)
    overrun = checkpoint["elapsed"] - 2.0
    assert 0.0 <= overrun < POLL_S + 1.0, (checkpoint, log)
    # warned once at 90%, then stopped as a stop stops a run
    assert log.count("single-0 budget: cost so far") == 1 and "it stops at 100%" in log, log
    assert log.index("it stops at 100%") < log.index("stopped by its budget") < log.index("checkpointing and stopping")
    state = RunState(tmp_path).read()
    assert state["stop_requested"] is True and "budget reached" in state["stop_reason"], state
    assert (tmp_path / STATE_DIR / "single-0.exit").read_text() == "143\n"


def test_a_local_sweeps_budget_is_not_charged_for_a_wall_clock_step(tmp_path: Path) -> None:
    """The sweep's scheduler counts a live trial's time since its last report by its own monotonic clock: a
    2-hour forward step of the wall clock (a laptop's sleep) charges nothing; time that passes does."""
    from types import SimpleNamespace

    from rlcloud.local.sweeper import _SweepBudget
    from tests.support.clocks import SteppingClock

    clock = SteppingClock(manual=True)
    now = clock.time()
    trial = tmp_path / "lr" / "lr0--seed0"
    trial.mkdir(parents=True)
    (trial / "progress.json").write_text(json.dumps({"state": "running", "elapsed": 5.4, "updated": now}))
    sweep = SimpleNamespace(name="lr", budget=SimpleNamespace(amount=5.0))
    budget = _SweepBudget(sweep, str(tmp_path / "lr"), 100.0, clock=clock.clock)  # $0.15 spent of $5 at $100/h
    trials, launched = [SimpleNamespace(name="lr0--seed0")], {"lr0--seed0": now - 10}
    assert budget.look(trials, [], launched) is None
    clock.step(2 * 3600)
    clock.advance(1.5)  # the next look (a second on)
    assert budget.look(trials, [], launched) is None and not budget.warned
    clock.advance(3600 * 0.05)  # the control: 3 minutes of training really passed: $5.15 of $5
    assert (budget.look(trials, [], launched) or "").startswith("stopped by its budget: cost so far ~$5.")
