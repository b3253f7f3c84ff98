"""The sweep capability of :class:`~rlcloud.local.backend.LocalBackend` (:class:`~rlcloud.backend.SweepCapable`).

A sweep's scheduler (``python -m rlcloud.local.sweeper``, :mod:`rlcloud.local.sweeper`) runs in the background
and keeps up to ``max_parallel`` trials running, each an ordinary local experiment under
``<results>/<sweep>/``; its state is in the sweep's ``.rlcloud-sweep`` directory (:mod:`rlcloud.local.state`).
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import signal
import subprocess
import time
from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rlcloud.backend import ExperimentBackend, ExperimentState, SweepCapable, SweepStatus, TrialStatus, trial_state
from rlcloud.errors import NotFoundError
from rlcloud.layout import SWEEP_SPEC, child
from rlcloud.local.machine import LocalMachine, code_env, keep_child, reap_children
from rlcloud.local.state import (
    POLL_S,
    SWEEP_STATE_DIR,
    RunState,
    atomic_write,
    hold_flock,
    proc_identity,
    read_sweep_spec,
    read_sweep_state,
    recorded_text,
    scheduler_alive,
    signal_group,
    update_sweep_state,
)
from rlcloud.results import is_gcs, local_workdir, results_location
from rlcloud.runenv import RunnerEnv
from rlcloud.waiting import poll_until

if TYPE_CHECKING:
    from rlcloud.specs.sweep import SweepSpec, Trial

__all__ = ["SWEEP_LOCK_TIMEOUT", "LocalSweeps", "local_parallelism"]

logger = logging.getLogger(__name__)

#: How long a sweep's start or stop waits for another one (the scheduler's part of a stop takes ~10 s).
SWEEP_LOCK_TIMEOUT = 60.0


class LocalSweeps(LocalMachine, SweepCapable):
    """Sweeps run by a background scheduler on this machine (see the module docstring)."""

    @abstractmethod
    def _trials(self, location: str) -> ExperimentBackend:
        """The backend of a sweep's trials: ordinary local experiments under ``location``."""

    def _sweep_dir(self, name: str, root: str | None = None) -> Path:
        return local_workdir(root or self.results_root, name) / SWEEP_STATE_DIR

    def start_sweep(self, sweep: SweepSpec, results: str) -> bool:
        """Start ``sweep``'s scheduler (:mod:`rlcloud.local.sweeper`) in the background; return at once.

        Trials run as local experiments under ``<results>/<sweep>/``, ``max_parallel`` at a time (default:
        the CPU count). Idempotent: False when its scheduler is running already. Started again after a
        stop or a crash, finished trials are kept and the others resume.
        """
        statedir = self._sweep_dir(sweep.name, results)
        statedir.mkdir(parents=True, exist_ok=True)
        # Two starts at the same moment must not launch two schedulers (a stop would end only one of them).
        with hold_flock(statedir / "control.lock", SWEEP_LOCK_TIMEOUT, f"another start or stop of sweep {sweep.name}"):
            return self._start_sweep_locked(sweep, results, statedir)

    def grow_sweep(self, sweep: SweepSpec, results: str, *, run: Sequence[str] = ()) -> bool:
        """Run what ``sweep`` (grown: its trials of record) has that has not run, and the trials in ``run``.

        A running scheduler is handed the grown sweep (its ``sweep.yaml`` replaced, a request in state.json it
        answers with ``grow_seen``) and queues the new trials after its others: running trials go on untouched.
        A sweep whose scheduler has ended is started again for those trials only: the ones never started, the
        ones in ``run`` and the ones given a larger budget (a stopped trial stays stopped). Finished trials are
        never retrained. Returns whether anything was handed to run.
        """
        statedir = self._sweep_dir(sweep.name, results)
        if not read_sweep_state(statedir):  # no trace here (its work directory was removed): started whole
            return self.start_sweep(sweep, results)
        with hold_flock(statedir / "control.lock", SWEEP_LOCK_TIMEOUT, f"another start or stop of sweep {sweep.name}"):
            state = read_sweep_state(statedir)
            if scheduler_alive(statedir) and not state.get("stop_requested"):
                request = int(state.get("grow_request") or 0) + 1
                atomic_write(statedir / SWEEP_SPEC, sweep.to_yaml())
                update_sweep_state(statedir, grow_request=request, rerun=list(run))

                def answered() -> bool | None:
                    if int(read_sweep_state(statedir).get("grow_seen") or 0) >= request:
                        return True
                    return False if not scheduler_alive(statedir) else None

                # the scheduler answers within a poll (it reads state.json every round) unless it ends first
                if poll_until(answered, time.monotonic() + SWEEP_LOCK_TIMEOUT, interval=POLL_S):
                    logger.info("sweep %s grew: its scheduler queued the new trials", sweep.name)
                    return True
            # the trials never started (those the growth added; after a crash mid-growth too), the ones asked
            # for, and the ones given a larger budget
            location = results_location(results, sweep.name)
            wanted = [
                t.name
                for t in sweep.trials()
                if not RunState(local_workdir(location, t.name)).exists() or t.name in run or _more_budget(location, t)
            ]
            if not wanted:
                atomic_write(statedir / SWEEP_SPEC, sweep.to_yaml())  # status and attach show the sweep grown
                return False
            return self._start_sweep_locked(sweep, results, statedir, only=wanted)

    def _start_sweep_locked(
        self, sweep: SweepSpec, results: str, statedir: Path, *, only: builtins.list[str] | None = None
    ) -> bool:
        state = read_sweep_state(statedir)
        if scheduler_alive(statedir) and not state.get("stop_requested"):
            logger.info("sweep %s is already running", sweep.name)
            return False
        location = results_location(results, sweep.name)
        atomic_write(statedir / SWEEP_SPEC, sweep.to_yaml())
        atomic_write(
            statedir / "state.json",
            json.dumps(
                {
                    "name": sweep.name,
                    "results": results if is_gcs(results) else str(Path(results).expanduser().resolve()),
                    "location": location,
                    "max_parallel": local_parallelism(sweep.max_parallel, sweep.name),
                    "started": time.time(),
                    "stop_requested": False,
                    # USD per trial-hour (the rate handed down, recorded here: the sweeper runs elsewhere)
                    "price_per_hour": self.run_price(sweep.experiment),
                    # the trials this start runs (None: every one not done): a growth's or a rerun's
                    "only": only,
                    "grow_request": int(state.get("grow_request") or 0),
                },
                indent=1,
            )
            + "\n",
        )
        command = [self.python, "-m", "rlcloud.local.sweeper", "--statedir", str(statedir.resolve())]
        env = os.environ.copy()
        env.update(self.env)
        inherited = RunnerEnv.from_env(env)
        # the trials' roles import the sweep's code: its archive under this root, else this project folder
        inherited.replace(**code_env(sweep.experiment, results, inherited)).apply_to(env)
        with open(statedir / "sweeper.log", "ab") as log:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(statedir),
                start_new_session=True,  # detached: the sweep outlives this Python
                close_fds=True,
            )
        keep_child(proc)
        update_sweep_state(statedir, **proc_identity(proc.pid, command))
        parallel = read_sweep_state(statedir).get("max_parallel")
        logger.info("started sweep %s locally: %d trials, %s at a time", sweep.name, sweep.num_trials, parallel)
        return True

    def sweep_status(self, name: str) -> SweepStatus:
        """Each trial's state and progress, and the sweep's overall state."""
        reap_children()
        statedir = self._sweep_dir(name)
        state = read_sweep_state(statedir)
        if not state:
            raise NotFoundError(f"no local sweep named {name!r} under {self.results_root}")
        sweep = read_sweep_spec(statedir)
        location = recorded_text(state, "location", statedir / "state.json")
        trials_backend = self._trials(location)
        trials: list[TrialStatus] = []
        for index, (trial_name, params, seed) in enumerate(sweep.trial_table()):
            if RunState(local_workdir(location, trial_name)).exists():
                status = trials_backend.status(trial_name)
                failed = next((r.reason for r in status.roles if r.state == "failed"), None)
                trial = TrialStatus(
                    index,
                    trial_name,
                    params,
                    seed,
                    trial_state(status.state, status.progress),
                    status.progress,
                    status.progress.stop_reason or failed,
                    restarts=status.restarts,
                )
            else:
                trial = TrialStatus(index, trial_name, params, seed, "queued")
            trials.append(trial)
        active = scheduler_alive(statedir) or any(t.state == "running" for t in trials)
        overall: ExperimentState
        message = None
        halted = state.get("halted")  # the sweeper stopped launching trials (max_failures, smoke trial)
        spent = state.get("budget_stopped")  # the sweeper stopped the sweep: its budget is spent
        if active:
            overall = "running"
            if state.get("stop_requested"):
                message = "stopping"
            elif isinstance(spent, str):
                message = f"{spent}: stopping the running trials"
            elif isinstance(halted, str):
                message = f"{halted} (the running trials go on)"
        elif isinstance(spent, str):
            overall, message = "stopped", spent
        elif isinstance(halted, str):
            overall, message = "failed", halted
        elif all(t.finished for t in trials):
            overall = "failed" if any(t.state == "failed" for t in trials) else "succeeded"
            if overall == "succeeded" and any(t.state == "stopped" for t in trials):
                # a stopped trial has more to train (Kubernetes sweeps say the same, k8s/sweeps.py)
                overall, message = "stopped", "its trials were stopped: start the sweep again to go on"
        else:
            overall = "stopped"
            if not state.get("stop_requested"):
                message = "the scheduler ended with trials queued: start the sweep again to go on"
        return SweepStatus(name=name, state=overall, trials=trials, message=message, backend=self.kind)

    def stop_sweep(self, name: str) -> None:
        """Stop the scheduler (no new trial starts) and every running trial (each checkpoints). Idempotent."""
        statedir = self._sweep_dir(name)
        state = read_sweep_state(statedir)
        if not state:
            raise NotFoundError(f"no local sweep named {name!r} under {self.results_root}")
        with hold_flock(statedir / "control.lock", SWEEP_LOCK_TIMEOUT, f"a start or stop of sweep {name}"):
            update_sweep_state(statedir, stop_requested=True)
            poll_until(lambda: True if not scheduler_alive(statedir) else None, time.monotonic() + 10, interval=POLL_S)
            pid = read_sweep_state(statedir).get("pid")
            if isinstance(pid, int) and scheduler_alive(statedir):
                signal_group(pid, signal.SIGKILL)
        location = recorded_text(state, "location", statedir / "state.json")
        trials_backend = self._trials(location)
        for trial in trials_backend.list():
            trials_backend.stop(trial)
        reap_children()

    def attach_sweep(self, name: str) -> tuple[SweepSpec, str]:
        """The spec and results root of a sweep started on this machine."""
        statedir = self._sweep_dir(name)
        state = read_sweep_state(statedir)
        if not state:
            raise NotFoundError(f"no local sweep named {name!r} under {self.results_root}")
        spec = read_sweep_spec(statedir)
        return spec, recorded_text(state, "results", statedir / "state.json")

    def list_sweeps(self) -> builtins.list[str]:
        """Names of the sweeps under the results root."""
        base = local_workdir(self.results_root, "x").parent
        if not base.is_dir():
            return []
        return sorted(p.parent.parent.name for p in base.glob(f"*/{SWEEP_STATE_DIR}/state.json"))


def _more_budget(location: str, trial: Trial) -> bool:
    """Whether ``trial`` succeeded short of its budget (one a growth gave it since: it trains on)."""
    from rlcloud.errors import RLCloudError
    from rlcloud.storage import open_store, read_progress

    try:
        progress = read_progress(open_store(child(location, trial.name)))
    except RLCloudError:
        return False
    return progress is not None and progress.done and not progress.done_at(trial.spec.total_timesteps)


def local_parallelism(requested: int | None, name: str) -> int:
    """How many trials of a local sweep run at once: ``requested``, capped by this machine's CPU count (each
    trial is a training process; a thousand at once on two cores only thrash and run out of memory), with a
    warning saying so. None: the CPU count."""
    cpus = os.cpu_count() or 1
    if requested is None:
        return cpus
    if requested > cpus:
        logger.warning(
            "sweep %s: max_parallel %d is more than this machine's %d CPU(s): running %d trial(s) at a time "
            "(a cluster runs more)",
            name,
            requested,
            cpus,
            cpus,
        )
        return cpus
    return requested
