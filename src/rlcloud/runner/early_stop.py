"""Early stopping of a sweep's trials without a controller: each trial decides for itself from its peers.

A trial of a sweep with ``early_stopping`` gets ``RLCLOUD_EARLY_STOPPING`` (JSON: the rule's settings,
``peers``: the sweep's results location, ``trial``: its own name). Every ``check_seconds`` it

1. appends ``[timestep, running mean return]`` to its own curve and writes it to
   ``<sweep location>/curves/<trial>.json`` (one small object per trial, written by that trial only);
2. lists ``curves/`` (one listing), reads the peers' curves that changed since it last looked;
3. applies the median rule (:func:`median_rule`): past the grace period, with at least ``min_trials``
   other trials that have reached its timestep, it stops when its best running mean so far is below the
   median of theirs at that timestep.

A stop checkpoints, records the reason (``progress.json``: state "stopped-early", ``stop_reason``) and
exits 0: a trial that stopped early is finished, not failed (an Indexed Job does not retry it).
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlcloud.specs.sweep import SweepSpec, Trial

__all__ = ["CURVES_DIR", "ENV_VAR", "EarlyStopper", "early_stopping_env", "median_rule", "value_at"]

logger = logging.getLogger(__name__)

ENV_VAR = "RLCLOUD_EARLY_STOPPING"
CURVES_DIR = "curves"

Curve = Sequence[Sequence[float]]  # [[timestep, running mean], ...] in timestep order


def early_stopping_env(sweep: SweepSpec, trial: Trial, location: str) -> dict[str, str]:
    """The environment a trial's runner needs for the sweep's early stopping ({} when it has none): set by
    whoever starts the trial (the local sweeper, or the runner of a sweep's pod for itself)."""
    if sweep.early_stopping is None:
        return {}
    settings = {**sweep.early_stopping.model_dump(mode="json"), "peers": location, "trial": trial.name}
    return {ENV_VAR: json.dumps(settings)}


def value_at(curve: Curve, timestep: float) -> float | None:
    """The running mean a curve had at ``timestep`` (its last point at or before it), or None."""
    found = None
    for t, value in curve:
        if t > timestep:
            break
        found = value
    return found


def median_rule(own: Curve, peers: Mapping[str, Curve], *, grace_timesteps: int, min_trials: int) -> str | None:
    """The median stopping rule: the reason to stop now, or None to go on.

    ``own``: this trial's curve; ``peers``: the other trials' curves. Only peers that have trained at least
    as far as this trial count; the comparison is at this trial's latest timestep.
    """
    if not own:
        return None
    timestep = own[-1][0]
    if timestep < grace_timesteps:
        return None
    values = [v for curve in peers.values() if curve and curve[-1][0] >= timestep for v in [value_at(curve, timestep)]]
    others = [v for v in values if v is not None]
    if len(others) < min_trials:
        return None
    median = statistics.median(others)
    best = max(value for _, value in own)
    if best < median:
        return (
            f"best running mean return {best:.1f} is below the median {median:.1f} of {len(others)} other "
            f"trials at timestep {int(timestep)} (median stopping rule)"
        )
    return None


class EarlyStopper:
    """Loop hook (``on_tick``) that publishes this trial's curve and stops it by the median rule.

    ``settings``: the parsed ``RLCLOUD_EARLY_STOPPING``; ``progress``: a callable giving (timestep, mean
    return) now; ``stop``: called with the reason when the rule says stop. ``store``: the sweep location's
    Store (default: opened from ``settings["peers"]``).
    """

    def __init__(self, settings: Mapping[str, Any], *, progress: Any, stop: Any, store: Any = None) -> None:
        self.trial = str(settings["trial"])
        self.grace = int(settings.get("grace_timesteps", 0))
        self.min_trials = int(settings.get("min_trials", 3))
        self.every = float(settings.get("check_seconds", 10.0))
        if store is None:
            from rlcloud.storage import open_store

            store = open_store(str(settings["peers"]))
        self.store = store
        self._progress = progress
        self._stop = stop
        self._curve: list[list[float]] = []
        self._peers: dict[str, tuple[int, list[list[float]]]] = {}  # name -> (generation, curve)
        self._last = 0.0
        self.stopped: str | None = None

    @classmethod
    def from_environ(cls, *, progress: Any, stop: Any) -> EarlyStopper | None:
        """The stopper ``RLCLOUD_EARLY_STOPPING`` describes, or None when the run is not such a trial."""
        text = os.environ.get(ENV_VAR)
        if not text:
            return None
        return cls(json.loads(text), progress=progress, stop=stop)

    def on_tick(self) -> None:
        """Called about once a second by the loop: check every ``check_seconds``."""
        now = time.monotonic()
        if self.stopped is not None or now - self._last < self.every:
            return
        self._last = now
        self.check()

    def on_finish(self, state: str) -> None:
        """Publish the final point, so that later trials compare against the whole curve."""
        if self.stopped is None:
            self._publish()

    def check(self) -> str | None:
        """Publish this trial's curve, read the peers', and stop when the rule says so; returns the reason."""
        if not self._publish():
            return None
        reason = median_rule(self._curve, self._read_peers(), grace_timesteps=self.grace, min_trials=self.min_trials)
        if reason is not None:
            self.stopped = reason
            logger.info("stopping early: %s", reason)
            self._stop(reason)
        return reason

    def _publish(self) -> bool:
        timestep, mean = self._progress()
        if mean is None:
            return False
        point = [float(timestep), round(float(mean), 4)]
        if not self._curve or self._curve[-1][0] < point[0]:
            self._curve.append(point)
        try:
            self.store.write_text(f"{CURVES_DIR}/{self.trial}.json", json.dumps(self._curve))
        except Exception as exc:  # a storage hiccup must not end the run; the next check tries again
            logger.warning("could not publish the curve of %s: %s", self.trial, exc)
            return False
        return True

    def _read_peers(self) -> dict[str, list[list[float]]]:
        try:
            listing = self.store.list(f"{CURVES_DIR}/")
        except Exception as exc:
            logger.warning("could not list the sweep's curves: %s", exc)
            listing = []
        for info in listing:
            name = info.name.rsplit("/", 1)[-1].removesuffix(".json")
            if name == self.trial or self._peers.get(name, (None,))[0] == info.generation:
                continue  # finished peers never change: each is read once
            try:
                curve = json.loads(self.store.read_text(info.name))
            except Exception as exc:
                logger.debug("could not read %s: %s", info.name, exc)
                continue
            self._peers[name] = (info.generation, curve)
        return {name: curve for name, (_, curve) in self._peers.items()}
