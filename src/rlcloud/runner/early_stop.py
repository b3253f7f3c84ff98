"""Early stopping of a sweep's trials without a controller: each trial decides for itself from its peers.

A trial of a sweep with ``early_stopping`` gets ``RLCLOUD_EARLY_STOPPING`` (JSON: the rule's settings,
``peers``: the sweep's results location, ``trial``: its own name). Every ``check_seconds`` it

1. appends ``[timestep, running mean return]`` to its own curve and writes it to
   ``<sweep location>/curves/<trial>.json`` (one small object per trial, written by that trial only);
2. lists ``curves/`` (one listing), reads the peers' curves that changed since it last looked;
3. applies the median rule (:func:`median_rule`): past the grace period, with at least ``min_trials``
   other trials that have reached its timestep, it stops when its best running mean so far is below the
   median of theirs at that timestep.

Each peer's curve is judged alone: a curve larger than :data:`MAX_CURVE_BYTES` is not read, and one
that is no curve (truncated JSON, NaN or Infinity, wrong types, more than :data:`MAX_CURVE_POINTS`
points, timesteps going backwards) is skipped with a warning naming it (once per version of it); the
rule goes on with the others. This trial's own curve is thinned to stay within the same bounds.

A stop checkpoints, records the reason (``progress.json``: state ``stopped-early``, ``stop_reason``) and
exits 0: a trial that stopped early is finished, not failed (an Indexed Job does not retry it).
"""

from __future__ import annotations

import json
import logging
import math
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rlcloud import runenv
from rlcloud.layout import CURVES
from rlcloud.runenv import RunnerEnv

if TYPE_CHECKING:
    from rlcloud.specs.sweep import SweepSpec, Trial

__all__ = [
    "CURVES_DIR",
    "ENV_VAR",
    "MAX_CURVE_BYTES",
    "MAX_CURVE_POINTS",
    "EarlyStopper",
    "early_stopping_env",
    "early_stopping_settings",
    "median_rule",
    "parse_curve",
    "value_at",
]

logger = logging.getLogger(__name__)

ENV_VAR = runenv.EARLY_STOPPING
CURVES_DIR = CURVES

Curve = Sequence[Sequence[float]]  # [[timestep, running mean], ...] in timestep order

#: the most points a curve holds (a day of checks every 10 s); this trial thins its own curve beyond it
MAX_CURVE_POINTS = 10_000
#: the most bytes of a peer's curve read (a point is at most ~40 bytes of JSON); a larger one is skipped
MAX_CURVE_BYTES = 40 * MAX_CURVE_POINTS


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a curve may hold")


def parse_curve(data: bytes) -> list[list[float]]:
    """A peer's curve from its stored bytes; ValueError saying what is wrong when it is no curve.

    A curve is a JSON list of at most :data:`MAX_CURVE_POINTS` ``[timestep, running mean]`` pairs of finite
    numbers, timesteps non-negative and never decreasing (what :meth:`EarlyStopper.check` writes). A peer's
    curve is input from another process through a shared store: every part of it is checked here.
    """
    if len(data) > MAX_CURVE_BYTES:
        raise ValueError(f"{len(data)} bytes, more than the {MAX_CURVE_BYTES} a curve may have")
    try:
        raw = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError as exc:
        raise ValueError("nested too deeply to be a curve") from exc
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(raw, list):
        raise ValueError(f"a JSON {type(raw).__name__}, not a list of [timestep, mean] points")
    if len(raw) > MAX_CURVE_POINTS:
        raise ValueError(f"{len(raw)} points, more than {MAX_CURVE_POINTS}")
    curve: list[list[float]] = []
    for i, point in enumerate(raw):
        if not (
            isinstance(point, list)
            and len(point) == 2
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in point)
        ):
            raise ValueError(f"point {i} is {str(point)[:40]}, not a [timestep, mean] pair of numbers")
        timestep, mean = float(point[0]), float(point[1])
        if not (math.isfinite(timestep) and math.isfinite(mean)) or timestep < 0:
            raise ValueError(f"point {i} {point} is not a finite, non-negative timestep with a finite mean")
        if curve and timestep < curve[-1][0]:
            raise ValueError(f"point {i}: timestep {timestep:g} comes after {curve[-1][0]:g} (going backwards)")
        curve.append([timestep, mean])
    return curve


def early_stopping_settings(sweep: SweepSpec, trial: Trial, location: str) -> dict[str, Any] | None:
    """What ``RLCLOUD_EARLY_STOPPING`` holds for ``trial`` (:attr:`RunnerEnv.early_stopping`), or None when
    the sweep has no early stopping: the rule's settings, ``peers`` (the sweep's location) and ``trial``."""
    if sweep.early_stopping is None:
        return None
    return {**sweep.early_stopping.model_dump(mode="json"), "peers": location, "trial": trial.name}


def early_stopping_env(sweep: SweepSpec, trial: Trial, location: str) -> dict[str, str]:
    """The environment a trial's runner needs for the sweep's early stopping ({} when it has none): set by
    whoever starts the trial (the local sweeper, or the runner of a sweep's pod for itself)."""
    return RunnerEnv(early_stopping=early_stopping_settings(sweep, trial, location)).to_env()


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
        # name -> (generation, curve; None when that version of it was no curve: skipped, warned about once)
        self._peers: dict[str, tuple[int, list[list[float]] | None]] = {}
        self._last = 0.0
        self.stopped: str | None = None

    @classmethod
    def from_environ(cls, *, progress: Any, stop: Any) -> EarlyStopper | None:
        """The stopper ``RLCLOUD_EARLY_STOPPING`` describes, or None when the run is not such a trial."""
        settings = RunnerEnv.from_env().early_stopping
        if settings is None:
            return None
        return cls(dict(settings), progress=progress, stop=stop)

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
        if not math.isfinite(point[1]):
            return False  # never published: a peer would (rightly) refuse the whole curve
        if not self._curve or self._curve[-1][0] < point[0]:
            self._curve.append(point)
        if len(self._curve) > MAX_CURVE_POINTS:
            self._curve = _thinned(self._curve)
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
            curve: list[list[float]] | None = None
            try:
                if info.size > MAX_CURVE_BYTES:  # never downloaded: a 47 MB curve stalled each check 45 s
                    raise ValueError(f"{info.size} bytes, more than the {MAX_CURVE_BYTES} a curve may have")
                curve = parse_curve(self.store.read_bytes(info.name))
            except ValueError as exc:
                logger.warning("early stopping skips the curve of peer %r (%s): %s", name, info.name, exc)
            except Exception as exc:  # a storage hiccup: tried again at the next check
                logger.debug("could not read %s: %s", info.name, exc)
                continue
            self._peers[name] = (info.generation, curve)
        return {name: curve for name, (_, curve) in self._peers.items() if curve is not None}


def _thinned(curve: list[list[float]]) -> list[list[float]]:
    """Every other point, keeping the last and the best (the rule compares this trial's best so far)."""
    best = max(range(len(curve)), key=lambda i: curve[i][1])
    keep = {*range(0, len(curve), 2), best, len(curve) - 1}
    return [curve[i] for i in sorted(keep)]
