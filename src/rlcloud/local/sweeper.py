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

__all__ = ["failure_signature", "main", "run_sweep"]

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
    from rlcloud.local.backend import LocalBackend
    from rlcloud.record import start_recorded
    from rlcloud.storage import open_store

    sweep = read_sweep_spec(statedir)
    state = read_sweep_state(statedir)
    location = str(state["location"])
    max_parallel = int(state["max_parallel"])
    trials = sweep.trials()
    # a start that runs some trials only (a rerun of the failed ones, the trials a growth added): state "only"
    only = state.get("only")
    chosen = set(only) if isinstance(only, list) else None
    pending = [t for t in trials if (chosen is None or t.name in chosen) and not _finished_on_record(location, t)]
    grow_seen = int(state.get("grow_request") or 0)  # growth asked before this start is in its sweep.yaml
    running: dict[str, Any] = {}
    failures: dict[str, list[str]] = {}
    # a fresh sweep (no trial started yet) proves its base experiment on one trial first
    smoke = sweep.smoke_timesteps if len(pending) == len(trials) > 1 and max_parallel > 1 else 0
    smoke_trial = pending[0].name if smoke else None
    # How many trials may be launched (it included) before the smoke trial has proved the base experiment:
    # each may fail the way it would, and a broken sweep fails at most max_failures trials. Launched, not
    # running: one that fails beside it is not replaced until the smoke trial trains.
    beside_smoke = min(max_parallel, sweep.max_failures) if sweep.max_failures else max_parallel
    launched_beside_smoke = 0
    launched_at: dict[str, float] = {}  # unix time each trial of this start was handed to its runner
    update_sweep_state(statedir, failures={}, halted=None, budget_stopped=None)
    if pool is not None and pending and pool.accepts(pending[0].spec, location):
        pool.warm_up(pending[0].spec, min(len(pending), max_parallel))
    halt: str | None = None
    price = state.get("price_per_hour")
    budget = _SweepBudget(sweep, location, price if isinstance(price, int | float) else None)
    logger.info("sweep %s: %d trials (%d to run), %d at a time", sweep.name, len(trials), len(pending), max_parallel)
    if smoke_trial:
        logger.info(
            "trial %s is the smoke trial: %d at a time until it has trained %d timesteps (smoke_timesteps)",
            smoke_trial,
            beside_smoke,
            smoke,
        )
    while pending or running:
        now = read_sweep_state(statedir)
        if now.get("stop_requested"):
            logger.info("stop requested: leaving %d queued trials", len(pending))
            return 0
        asked = int(now.get("grow_request") or 0)
        if asked > grow_seen:
            # the sweep grew (rlcloud sweep extend/rerun): its new trials queue after the others
            sweep, trials, pending = _take_growth(statedir, location, trials, pending, running)
            if now.get("rerun"):
                failures, halt = {}, None  # a rerun starts afresh, as a start does: max_failures applies anew
                update_sweep_state(statedir, failures={}, halted=None)
            grow_seen = asked
            update_sweep_state(statedir, grow_seen=asked)
            logger.info("sweep %s grew: %d trials, %d queued", sweep.name, len(trials), len(pending))
        for name, backend in list(running.items()):
            try:
                status = backend.status(name)
            except Exception as exc:  # a status read failed: look again next round
                logger.warning("status of %s: %s", name, exc)
                continue
            if name == smoke_trial and (status.finished or (status.progress.timestep or 0) >= smoke):
                smoke_trial = None  # it trains (or it failed, and the sweep halts below): the others may start
                if status.state == "failed":
                    halt = f"the first trial ({name}) failed before training {smoke} timesteps (smoke_timesteps)"
                    _stop_beside_smoke(running, name, pool)
                else:
                    logger.info(
                        "trial %s trains (timestep %s): the base experiment works", name, status.progress.timestep
                    )
            if status.finished or status.state == "paused":
                logger.info("trial %s %s", name, status.state)
                del running[name]
                if pool is not None:
                    pool.finished(name)
                if status.state == "failed":
                    signature = failure_signature(status, name)
                    failures.setdefault(signature, []).append(name)
                    update_sweep_state(statedir, failures=failures)
                    logger.error("trial %s failed: %s", name, signature)
        over = budget.look(trials, pending, launched_at)
        if over is not None:
            # the budget is spent: nothing more starts, and the running trials checkpoint and stop
            logger.warning("sweep %s %s: stopping %d running trial(s)", sweep.name, over, len(running))
            update_sweep_state(statedir, budget_stopped=over)
            for name, backend in list(running.items()):
                backend.stop(name)
                if pool is not None:
                    pool.finished(name)
            pending, running = [], {}
            continue
        worst = max(failures.items(), key=lambda item: len(item[1]), default=None)
        if worst is not None and sweep.max_failures and len(worst[1]) >= sweep.max_failures:
            halt = halt or (
                f"{len(worst[1])} trials failed the same way ({', '.join(worst[1][:5])}), max_failures is "
                f"{sweep.max_failures}"
            )
        if halt and pending:
            signature = worst[0] if worst is not None else "?"
            why = f"stopped launching trials: {halt}: {signature}; {len(pending)} left queued"
            logger.error("%s", why)
            update_sweep_state(statedir, halted=why)
            pending = []
            continue
        while pending and len(running) < max_parallel and (not smoke_trial or launched_beside_smoke < beside_smoke):
            trial = pending.pop(0)
            launched_beside_smoke += 1 if smoke_trial else 0
            env = trial_env(sweep, trial, location)  # its place in the sweep, its early stopping
            backend = LocalBackend(location, env=env)
            start = partial(backend.start, trial.spec, location)
            launched_at[trial.name] = time.time()
            if pool is not None and pool.accepts(trial.spec, location):
                start = partial(pool.start, trial.spec, location, env)  # a warm worker runs it
            try:
                # like Experiment.start: each trial keeps its spec of record and start history
                start_recorded(
                    open_store(child(location, trial.name)),
                    trial.spec,
                    start,
                    where=f"local sweep {sweep.name}",
                )
            except Exception as exc:  # one trial that cannot start must not end the others
                logger.error("trial %s could not start: %s", trial.name, exc)
                failures.setdefault(f"could not start: {_VARYING.sub('#', str(exc))[:200]}", []).append(trial.name)
                if trial.name == smoke_trial:
                    smoke_trial = None
                continue
            logger.info("trial %s started (%s)", trial.name, trial.config)
            running[trial.name] = backend
        _wait_for_change(_watched(location, running, smoke_trial), _POLL_S)
    halted = read_sweep_state(statedir).get("halted")
    logger.info("sweep %s: %s", sweep.name, "halted" if halted else "every trial has finished")
    return 0


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
    ``price`` (USD per trial-hour: :func:`rlcloud.local.backend.local_run_price` at the sweep's start). Looked at
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
