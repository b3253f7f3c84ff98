"""The local sweep scheduler: a program of its own that runs a sweep's trials as a bounded pool.

``python -m rlcloud.local.sweeper --statedir DIR`` reads ``DIR/sweep.yaml`` and ``DIR/state.json``
(written by :meth:`rlcloud.local.LocalBackend.start_sweep`) and keeps up to ``max_parallel`` trials
running, each an ordinary local experiment under ``<results>/<sweep>/<trial>/`` started through the
Experiment facade (so each trial has its spec of record and history). It runs detached, so the Python
that started the sweep may exit; it ends when every trial has finished or a stop is requested.
Started again (``Sweep.start()`` after a crash or reboot), it skips trials that finished and resumes the
others from their checkpoints.

Trials of a sweep with ``early_stopping`` get ``RLCLOUD_EARLY_STOPPING`` (rlcloud.runner.early_stop).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlcloud.local.state import read_sweep_state, update_sweep_state
from rlcloud.runner.early_stop import early_stopping_env

__all__ = ["main", "run_sweep"]

logger = logging.getLogger(__name__)

_POLL_S = 0.25  # a finished trial frees its slot within this; each poll reads a few small files per trial


def _finished_on_record(location: str, name: str) -> bool:
    """Whether the trial's results say it is done (then it is not started again)."""
    from rlcloud.errors import RLCloudError
    from rlcloud.storage import open_store, read_progress

    try:
        progress = read_progress(open_store(location.rstrip("/") + "/" + name)) or {}
    except RLCloudError:
        return False
    return progress.get("state") in ("succeeded", "stopped-early")


def run_sweep(statedir: Path) -> int:
    """Run the sweep described in ``statedir`` to the end (or until a stop is requested); exit code."""
    from rlcloud.local.backend import LocalBackend
    from rlcloud.record import start_recorded
    from rlcloud.specs.sweep import SweepSpec
    from rlcloud.storage import open_store

    sweep = SweepSpec.from_yaml_text((statedir / "sweep.yaml").read_text(encoding="utf-8"))
    state = read_sweep_state(statedir)
    location = str(state["location"])
    max_parallel = int(state["max_parallel"])
    trials = sweep.trials()
    pending = [t for t in trials if not _finished_on_record(location, t.name)]
    running: dict[str, Any] = {}
    logger.info("sweep %s: %d trials (%d to run), %d at a time", sweep.name, len(trials), len(pending), max_parallel)
    while pending or running:
        if read_sweep_state(statedir).get("stop_requested"):
            logger.info("stop requested: leaving %d queued trials", len(pending))
            return 0
        for name, backend in list(running.items()):
            try:
                status = backend.status(name)
            except Exception as exc:  # a status read failed: look again next round
                logger.warning("status of %s: %s", name, exc)
                continue
            if status.finished or status.state == "paused":
                logger.info("trial %s %s", name, status.state)
                del running[name]
        while pending and len(running) < max_parallel:
            trial = pending.pop(0)
            backend = LocalBackend(location, env=early_stopping_env(sweep, trial, location))
            try:
                # like Experiment.start: each trial keeps its spec of record and start history
                start_recorded(
                    open_store(location.rstrip("/") + "/" + trial.name),
                    trial.spec,
                    lambda b=backend, t=trial: b.start(t.spec, location),  # type: ignore[misc]
                    where=f"local sweep {sweep.name}",
                )
            except Exception as exc:  # one trial that cannot start must not end the others
                logger.error("trial %s could not start: %s", trial.name, exc)
                continue
            logger.info("trial %s started (%s)", trial.name, trial.config)
            running[trial.name] = backend
        time.sleep(_POLL_S)
    logger.info("sweep %s: every trial has finished", sweep.name)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rlcloud.local.sweeper --statedir DIR``."""
    parser = argparse.ArgumentParser(prog="python -m rlcloud.local.sweeper")
    parser.add_argument("--statedir", required=True, help="the sweep's .rlcloud-sweep directory")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    statedir = Path(args.statedir)
    try:
        return run_sweep(statedir)
    finally:
        update_sweep_state(statedir, ended=time.time(), pid=None)


if __name__ == "__main__":
    sys.exit(main())
