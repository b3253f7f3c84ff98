"""The local sweep scheduler: a program of its own that runs a sweep's trials as a bounded pool.

``python -m rlcloud.local.sweeper --statedir DIR`` reads ``DIR/sweep.yaml`` and ``DIR/state.json``
(written by :meth:`rlcloud.local.LocalBackend.start_sweep`) and keeps up to ``max_parallel`` trials
running, each an ordinary local experiment under ``<results>/<sweep>/<trial>/`` started through the
Experiment facade (so each trial has its spec of record and history). It runs detached, so the Python
that started the sweep may exit; it ends when every trial has finished or a stop is requested.
Started again (``Sweep.start()`` after a crash or reboot), it skips trials that finished and resumes the
others from their checkpoints.

Trials get ``RLCLOUD_TRIAL`` (their HParams: rlcloud.runner.hparams) and, in a sweep with ``early_stopping``,
``RLCLOUD_EARLY_STOPPING`` (rlcloud.runner.early_stop).
Trials start warm: up to ``max_parallel`` long-lived workers run them one after another, so only a worker's
first trial pays the TensorFlow imports (:mod:`rlcloud.local.worker`; ``RLCLOUD_WARM_TRIALS=0`` turns it off).
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlcloud.layout import child
from rlcloud.local.state import read_sweep_spec, read_sweep_state, update_sweep_state
from rlcloud.local.worker import WarmPool, warm_enabled
from rlcloud.results import local_workdir
from rlcloud.runner.hparams import trial_env
from rlcloud.waiting import SYSTEM_CLOCK, Clock, StampAges

if TYPE_CHECKING:
    from rlcloud.backend import ExperimentStatus
    from rlcloud.specs.sweep import SweepSpec, Trial

__all__ = ["SweepScheduler", "failure_signature", "main", "run_sweep"]

logger = logging.getLogger(__name__)

_POLL_S = 0.25  # a finished trial frees its slot within this; each poll reads a few small files per trial

#: Between polls, how often the running trials' exit files (and the smoke trial's progress.json) are looked
#: at: a stat each, so that a finished trial's slot is refilled within this rather than within _POLL_S.
_WATCH_S = 0.02


def _signature_of(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


def _wait_for_change(paths: list[Path], timeout: float) -> None:
    """Sleep up to ``timeout`` seconds, less when one of ``paths`` appears or changes (a trial's exit code
    written, the smoke trial's progress updated): a slot is refilled at once, not at the next poll."""
    deadline = time.monotonic() + timeout
    before = [_signature_of(path) for path in paths]
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(_WATCH_S, left))
        if [_signature_of(path) for path in paths] != before:
            return


def _finished_on_record(location: str, trial: Trial) -> bool:
    """Whether the trial's results say it is done for its budget (then it is not started again)."""
    from rlcloud.errors import RLCloudError
    from rlcloud.storage import open_store, read_progress

    try:
        progress = read_progress(open_store(child(location, trial.name)))
    except RLCloudError:
        return False
    return progress is not None and progress.done_at(trial.spec.total_timesteps)


def _take_growth(
    statedir: Path, location: str, trials: list[Trial], pending: list[Trial], running: dict[str, Any]
) -> tuple[SweepSpec, list[Trial], list[Trial]]:
    """The sweep grew while this scheduler runs (:meth:`rlcloud.local.LocalBackend.grow_sweep` wrote its
    spec and asked in state.json): its trials now, and what to run: the queued ones, the new ones, the ones
    asked to run again (``rerun``) and those given a larger budget, unless running or done. Finished trials
    are never started again; the indices of the others do not change (growth only appends)."""
    sweep = read_sweep_spec(statedir)
    rerun = set(read_sweep_state(statedir).get("rerun") or [])
    before = {t.name: t for t in trials}
    queued = {t.name for t in pending}
    grown = sweep.trials()
    wanted = []
    for trial in grown:
        old = before.get(trial.name)
        asked = (
            trial.name in queued
            or old is None
            or trial.name in rerun
            or old.spec.total_timesteps != trial.spec.total_timesteps
        )
        if asked and trial.name not in running and not _finished_on_record(location, trial):
            wanted.append(trial)
    return sweep, grown, wanted


#: What varies between trials that fail the same way: numbers (learning rates, timesteps, pids, ports),
#: addresses and the trial's own name. Replaced before failures are grouped.
_VARYING = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def failure_signature(status: ExperimentStatus, trial_name: str) -> str:
    """What a failed trial died of, the same for every trial that failed the same way: the exit code and the
    first line of the failure (its role's last log line), with numbers and the trial's name blanked."""
    role = next((r for r in status.roles if r.state == "failed"), None)
    code = role.exit_code if role is not None else None
    reason = (role.reason if role is not None else None) or status.message or "failed"
    line = reason.split(":", 1)[1] if reason.startswith("exit code") and ":" in reason else reason
    line = line.strip().splitlines()[0] if line.strip() else ""
    line = _VARYING.sub("#", line.replace(trial_name, "<trial>"))[:200]
    return f"exit code {code}: {line}" if code is not None else line


def _watched(location: str, running: dict[str, Any], smoke_trial: str | None) -> list[Path]:
    """The files whose change ends a trial or the smoke phase: each running trial's learner exit file, and
    the smoke trial's progress.json."""
    from rlcloud.layout import PROGRESS
    from rlcloud.local.state import RunState
    from rlcloud.roles import LEARNER_ROLES, role_label

    paths = []
    for name in running:
        run = RunState(local_workdir(location, name))
        paths += [run.exit_file(role_label(role, 0)) for role in LEARNER_ROLES]
        if name == smoke_trial:
            paths.append(run.workdir / PROGRESS)
    return paths


def run_sweep(statedir: Path, pool: WarmPool | None = None) -> int:
    """Run the sweep described in ``statedir`` to the end (or until a stop is requested); exit code.

    ``pool``: warm workers that run the trials they accept one after another (:mod:`rlcloud.local.worker`);
    without it (or for a trial it does not accept) each trial is a local run of its own processes.

    Waste is bounded two ways (``max_failures``, ``smoke_timesteps`` of the sweep): the first trial of a
    fresh sweep is its smoke trial, and no trial is launched once ``max_failures`` trials have failed with
    the same signature (:func:`failure_signature`); the sweep's state then says why. Until the smoke trial
    has trained ``smoke_timesteps`` at most ``max_failures`` trials run (it and the ones started beside it:
    on this machine a slot that waits for it costs time, not money, so they start at once rather than
    after it); if it fails before that, the others are stopped (they checkpoint, and resume when the sweep
    is started again) and none starts, so a broken base experiment fails at most ``max_failures`` times.
    """
    scheduler = SweepScheduler(statedir, pool)
    scheduler.start()
    while scheduler.pending or scheduler.running:
        if not scheduler.step():
            return 0
    halted = read_sweep_state(statedir).get("halted")
    logger.info("sweep %s: %s", scheduler.sweep.name, "halted" if halted else "every trial has finished")
    return 0


class SweepScheduler:
    """The state of one start of a local sweep (:func:`run_sweep`), and its moves: :meth:`step` does one round.

    Each move does one thing: :meth:`start`, :meth:`take_growth` (the sweep grew), :meth:`look_at` (a running
    trial's status: the smoke trial proved the base experiment, or a trial ended), :meth:`stop_for_budget`,
    :meth:`halt` (``max_failures`` or a failed smoke trial), :meth:`launch` (one trial).
    """

    def __init__(self, statedir: Path, pool: WarmPool | None = None) -> None:
        self.statedir, self.pool = statedir, pool
        self.sweep = read_sweep_spec(statedir)
        state = read_sweep_state(statedir)
        self.location = str(state["location"])
        self.max_parallel = int(state["max_parallel"])
        self.trials = self.sweep.trials()
        # a start that runs some trials only (a rerun of the failed ones, the trials a growth added): state "only"
        only = state.get("only")
        chosen = set(only) if isinstance(only, list) else None
        self.pending = [
            t for t in self.trials if (chosen is None or t.name in chosen) and not _finished_on_record(self.location, t)
        ]
        self.grow_seen = int(state.get("grow_request") or 0)  # growth asked before this start is in its sweep.yaml
        self.running: dict[str, Any] = {}
        self.failures: dict[str, list[str]] = {}
        # a fresh sweep (no trial started yet) proves its base experiment on one trial first
        fresh = len(self.pending) == len(self.trials) > 1 and self.max_parallel > 1
        self.smoke = self.sweep.smoke_timesteps if fresh else 0
        self.smoke_trial = self.pending[0].name if self.smoke else None
        # How many trials may be launched (it included) before the smoke trial has proved the base experiment:
        # each may fail the way it would, and a broken sweep fails at most max_failures trials. Launched, not
        # running: one that fails beside it is not replaced until the smoke trial trains.
        max_failures = self.sweep.max_failures
        self.beside_smoke = min(self.max_parallel, max_failures) if max_failures else self.max_parallel
        self.launched_beside_smoke = 0
        self.launched_at: dict[str, float] = {}  # unix time each trial of this start was handed to its runner
        self.halted: str | None = None  # why no trial is launched any more
        price = state.get("price_per_hour")
        self.budget = _SweepBudget(self.sweep, self.location, price if isinstance(price, int | float) else None)

    def start(self) -> None:
        """Clear the last start's record of failures and stops, warm the pool's workers up, and say what runs."""
        update_sweep_state(self.statedir, failures={}, halted=None, budget_stopped=None)
        pool = self.pool
        if pool is not None and self.pending and pool.accepts(self.pending[0].spec, self.location):
            pool.warm_up(self.pending[0].spec, min(len(self.pending), self.max_parallel))
        logger.info("sweep %s: %d trials (%d to run), %d at a time", self.sweep.name, len(self.trials),
                    len(self.pending), self.max_parallel)  # fmt: skip
        if self.smoke_trial:
            logger.info("trial %s is the smoke trial: %d at a time until it has trained %d timesteps "
                        "(smoke_timesteps)", self.smoke_trial, self.beside_smoke, self.smoke)  # fmt: skip

    def step(self) -> bool:
        """One round: growth, the running trials' ends, the budget, a halt, launches; then a wait for a change.
        False when a stop was requested (the scheduler ends, leaving the queued trials)."""
        now = read_sweep_state(self.statedir)
        if now.get("stop_requested"):
            logger.info("stop requested: leaving %d queued trials", len(self.pending))
            return False
        if int(now.get("grow_request") or 0) > self.grow_seen:
            self.take_growth(int(now.get("grow_request") or 0), rerun=bool(now.get("rerun")))
        for name, backend in list(self.running.items()):
            try:
                status = backend.status(name)
            except Exception as exc:  # a status read failed: look again next round
                logger.warning("status of %s: %s", name, exc)
                continue
            self.look_at(name, status)
        if self.stop_for_budget() or self.halt():
            return True
        while (
            self.pending
            and len(self.running) < self.max_parallel
            and (not self.smoke_trial or self.launched_beside_smoke < self.beside_smoke)
        ):
            self.launch(self.pending.pop(0))
        _wait_for_change(_watched(self.location, self.running, self.smoke_trial), _POLL_S)
        return True

    def take_growth(self, asked: int, *, rerun: bool) -> None:
        """The sweep grew (rlcloud sweep extend/rerun, growth request ``asked``): its new trials queue after the
        others; a rerun starts afresh, as a start does (``max_failures`` applies anew)."""
        self.sweep, self.trials, self.pending = _take_growth(
            self.statedir, self.location, self.trials, self.pending, self.running
        )
        if rerun:
            self.failures, self.halted = {}, None
            update_sweep_state(self.statedir, failures={}, halted=None)
        self.grow_seen = asked
        update_sweep_state(self.statedir, grow_seen=asked)
        logger.info("sweep %s grew: %d trials, %d queued", self.sweep.name, len(self.trials), len(self.pending))

    def look_at(self, name: str, status: ExperimentStatus) -> None:
        """A running trial's status: the smoke trial trained (the others may start) or failed (the sweep halts);
        a trial that ended (or paused) frees its slot, and a failure is counted by its signature."""
        if name == self.smoke_trial and (status.finished or (status.progress.timestep or 0) >= self.smoke):
            self.smoke_trial = None  # it trains (or it failed, and the sweep halts): the others may start
            if status.state == "failed":
                self.halted = (
                    f"the first trial ({name}) failed before training {self.smoke} timesteps (smoke_timesteps)"
                )
                _stop_beside_smoke(self.running, name, self.pool)
            else:
                logger.info("trial %s trains (timestep %s): the base experiment works", name, status.progress.timestep)
        if not (status.finished or status.state == "paused"):
            return
        logger.info("trial %s %s", name, status.state)
        del self.running[name]
        if self.pool is not None:
            self.pool.finished(name)
        if status.state == "failed":
            signature = failure_signature(status, name)
            self.failures.setdefault(signature, []).append(name)
            update_sweep_state(self.statedir, failures=self.failures)
            logger.error("trial %s failed: %s", name, signature)

    def stop_for_budget(self) -> bool:
        """The budget is spent: nothing more starts, and the running trials checkpoint and stop (True)."""
        over = self.budget.look(self.trials, self.pending, self.launched_at)
        if over is None:
            return False
        logger.warning("sweep %s %s: stopping %d running trial(s)", self.sweep.name, over, len(self.running))
        update_sweep_state(self.statedir, budget_stopped=over)
        for name, backend in list(self.running.items()):
            backend.stop(name)
            if self.pool is not None:
                self.pool.finished(name)
        self.pending, self.running = [], {}
        return True

    def halt(self) -> bool:
        """``max_failures`` trials failed the same way (or the smoke trial failed): the queued trials are left
        queued, the sweep's state says why (True)."""
        worst = max(self.failures.items(), key=lambda item: len(item[1]), default=None)
        if worst is not None and self.sweep.max_failures and len(worst[1]) >= self.sweep.max_failures:
            self.halted = self.halted or (
                f"{len(worst[1])} trials failed the same way ({', '.join(worst[1][:5])}), max_failures is "
                f"{self.sweep.max_failures}"
            )
        if not (self.halted and self.pending):
            return False
        signature = worst[0] if worst is not None else "?"
        why = f"stopped launching trials: {self.halted}: {signature}; {len(self.pending)} left queued"
        logger.error("%s", why)
        update_sweep_state(self.statedir, halted=why)
        self.pending = []
        return True

    def launch(self, trial: Trial) -> None:
        """Start one trial (on a warm worker when the pool takes it), recorded as Experiment.start records a run;
        one that cannot start is a failure, and the others go on."""
        from rlcloud.local.backend import LocalBackend
        from rlcloud.record import start_recorded
        from rlcloud.storage import open_store

        location = self.location
        self.launched_beside_smoke += 1 if self.smoke_trial else 0
        env = trial_env(self.sweep, trial, location)  # its place in the sweep, its early stopping
        backend = LocalBackend(location, env=env)
        start = partial(backend.start, trial.spec, location)
        self.launched_at[trial.name] = time.time()
        if self.pool is not None and self.pool.accepts(trial.spec, location):
            start = partial(self.pool.start, trial.spec, location, env)  # a warm worker runs it
        try:
            # like Experiment.start: each trial keeps its spec of record and start history
            start_recorded(
                open_store(child(location, trial.name)), trial.spec, start, where=f"local sweep {self.sweep.name}"
            )
        except Exception as exc:  # one trial that cannot start must not end the others
            logger.error("trial %s could not start: %s", trial.name, exc)
            self.failures.setdefault(f"could not start: {_VARYING.sub('#', str(exc))[:200]}", []).append(trial.name)
            if trial.name == self.smoke_trial:
                self.smoke_trial = None
            return
        logger.info("trial %s started (%s)", trial.name, trial.config)
        self.running[trial.name] = backend


def _stop_beside_smoke(running: dict[str, Any], smoke_trial: str, pool: WarmPool | None) -> None:
    """The smoke trial failed: stop the trials started beside it (each checkpoints; they stay in ``running``
    until their status says they ended, and run again when the sweep is started again)."""
    for name, backend in list(running.items()):
        if name == smoke_trial:
            continue
        logger.info("stopping trial %s: the smoke trial failed", name)
        try:
            backend.stop(name)
        except Exception as exc:  # it ends by itself, or the next round sees it failed
            logger.warning("stop of %s: %s", name, exc)
        if pool is not None:
            pool.finished(name)


class _SweepBudget:
    """The sweep's money budget on this machine: its trials' training time (progress.json ``elapsed``, running
    on with the wall clock between a live trial's reports: :func:`rlcloud.local.supervisor.training_seconds`) x
    ``price`` (USD per trial-hour: :meth:`rlcloud.local.machine.LocalMachine.run_price` at the sweep's start). Looked at
    about once a second; warns once at 90% (a log line) and says when the budget is spent. Each trial's reports
    are aged with :class:`~rlcloud.waiting.StampAges` on ``clock``: a step of the wall clock costs nothing."""

    def __init__(self, sweep: Any, location: str, price: float | None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.ages: dict[str, StampAges] = {}
        self.location = location
        self.price = price if price and price > 0 else None
        self.budget = sweep.budget.amount if sweep.budget is not None and self.price is not None else None
        self.warned = False
        self.next = 0.0
        self.name = sweep.name

    def look(self, trials: list[Any], pending: list[Any], launched_at: dict[str, float]) -> str | None:
        """None, or why the sweep stops: "stopped by its budget: ..." once its trials that are not ``pending``
        (running, finished, or run by an earlier start) have cost the budget. ``launched_at``: when this start
        handed each of its trials to a runner (unix time); the others' reports are taken as written."""
        if self.budget is None or self.price is None or self.clock.monotonic() < self.next:
            return None
        queued = {t.name for t in pending}
        started = [t.name for t in trials if t.name not in queued]
        from rlcloud.budget import decide
        from rlcloud.errors import RLCloudError
        from rlcloud.layout import child
        from rlcloud.local.supervisor import training_seconds
        from rlcloud.storage import open_store, read_progress

        self.next = self.clock.monotonic() + 1.0
        seconds, now = 0.0, self.clock.time()
        for name in started:
            try:
                record = read_progress(open_store(child(self.location, name)))
            except RLCloudError:
                continue
            if record is None:
                continue
            launched = launched_at.get(name)
            ages = self.ages.setdefault(name, StampAges(self.clock))
            trained = record.elapsed if launched is None else training_seconds(record, now, launched, ages=ages)
            seconds += trained or 0.0
        decision = decide(self.price * seconds / 3600, self.budget, warned=self.warned)
        if decision.action == "warn":
            self.warned = True
            logger.warning("sweep %s budget: %s", self.name, decision.reason)
        return f"stopped by its budget: {decision.reason}" if decision.action == "stop" else None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rlcloud.local.sweeper --statedir DIR``."""
    parser = argparse.ArgumentParser(prog="python -m rlcloud.local.sweeper")
    parser.add_argument("--statedir", required=True, help="the sweep's .rlcloud-sweep directory")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    statedir = Path(args.statedir)
    pool = None
    if warm_enabled():
        state = read_sweep_state(statedir)
        dirs = [local_workdir(str(state["location"]), t.name) for t in read_sweep_spec(statedir).trials()]
        pool = WarmPool(statedir, int(state.get("max_parallel") or 1), dirs)
    try:
        return run_sweep(statedir, pool)
    finally:
        if pool is not None:
            pool.close()  # each worker ends after its trial (a stop signals it: rlcloud.local.worker)
        update_sweep_state(statedir, ended=time.time(), pid=None)


if __name__ == "__main__":
    sys.exit(main())
