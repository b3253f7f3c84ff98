"""Early stopping of a sweep's trials without a controller: decisions at timestep checkpoints, made from the
results store's data and recorded there, so that a sweep decides the same way on any machine.

A trial of a sweep with ``early_stopping`` gets ``RLCLOUD_EARLY_STOPPING`` (JSON: the rule's settings,
``peers``: the sweep's results location, ``trial``: its own name, ``index``: its index in the sweep). The
rule decides at fixed timesteps, its *decision points*:

* ``median``: ``grace_timesteps``, then every ``interval_timesteps``;
* ``asha``: the rungs ``grace_timesteps * reduction_factor**k``;

never at or past the trial's ``total_timesteps`` (it ends there anyway). The training loop calls the stopper
when its timestep first reaches a point (:attr:`rlcloud.runner.loop.Trainer.decision_at`), and waits for the
decision there: a trial stopped at a point stops at the same timestep on a fast and a slow machine.

**What a decision compares.** The trial's value at a point is its running mean return (the mean of its last
20 episodes) at the step that reached the point. It is compared with the values the *earlier trials* of the
sweep (lower index) recorded at the same point. Whether an earlier trial reached a point is settled by its
own records: it has a decision record there, or it ended before it (its progress says succeeded, stopped
early or failed). A decision waits until every earlier trial is settled at its point; it never depends on
which peers happen to have arrived, so it is a function of the trials' learning curves alone.
Why earlier trials only: waiting for every trial could never end when ``max_parallel`` is smaller than
the sweep (a waiting trial holds its slot; the later trials it would wait for cannot start). Trials are
started in index order, locally and by an Indexed Job (a warm pod runs ``I, I+N, ...``), so the earliest
trial that has not finished never waits and the sweep always moves on. This is Ray Tune's
``MedianStoppingRule`` and ``AsyncHyperBandScheduler`` with the order of arrival fixed to the trials'
order instead of the machine's timing: the first ``min_trials`` trials are never stopped by the median
rule (as in Ray), the first trial to reach an ASHA rung always goes on.

* ``median`` (Golovin et al., 2017): stop when the trial's best value at its points so far is below the
  median of the earlier trials' values at this point, given at least ``min_trials`` of them.
* ``asha`` (Li et al., 2020; Ray's ``_Bracket.cutoff``): go on only when the trial's value is at least the
  ``1 - 1/reduction_factor`` quantile (linear interpolation, as numpy's percentile) of the values recorded
  at this rung by the earlier trials and itself: the top 1/eta of those that reached it.

**Records.** Each decision is one object, ``<sweep>/decisions/<rule>/<point:012d>/<trial>.json`` (the value,
the decision, its reason, how many earlier trials it compared with and their median or ASHA's cutoff),
written create-only (generation 0): it is made once. A trial that finds its own record at a point (it was
killed and resumed, or its pod was replaced) takes that record instead of deciding again, even if its
retrained value differs: decisions are idempotent and survive the kill of a trial, a pod or the laptop.
A record that is not one (bad JSON, wrong types) is skipped with a warning naming it, as if that trial had
not reached the point.
What is not reproducible: a trial that *failed* counts as not having reached the points after its last
record at the moment a later trial looks; if it is retried and goes on, later decisions see it.

A stop checkpoints, records the reason (``progress.json``: state ``stopped-early``, ``stop_reason``) and
exits 0: a trial that stopped early is finished, not failed (an Indexed Job does not retry it).
"""

from __future__ import annotations

import json
import logging
import math
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rlcloud import runenv
from rlcloud.layout import DECISIONS, DONE_STATES, child
from rlcloud.runenv import RunnerEnv
from rlcloud.waiting import sleep_until

if TYPE_CHECKING:
    from rlcloud.specs.sweep import SweepSpec, Trial
    from rlcloud.storage import Store

__all__ = [
    "ENV_VAR",
    "MAX_RECORD_BYTES",
    "EarlyStopper",
    "asha_decision",
    "decision_points",
    "early_stopping_settings",
    "median_decision",
    "parse_decision",
    "percentile",
    "record_name",
]

logger = logging.getLogger(__name__)

ENV_VAR = runenv.EARLY_STOPPING

#: The most bytes of a decision record read (its peers' values: ~40 bytes each, for up to 10,000 trials).
MAX_RECORD_BYTES = 1 << 20
#: Peer states after which it reaches no further decision point: it finished, stopped early or failed.
ENDED_STATES = frozenset({*DONE_STATES, "failed"})
#: Peers' records read at once (each one request to the store).
_READ_THREADS = 16
#: While a decision waits, how often the stop flag is looked at (a SIGTERM is honoured within this).
_STOP_POLL_S = 0.25

CONTINUE = "continue"
STOP = "stop"


# ------------------------------------------------------------------------------------------ the settings


def early_stopping_settings(sweep: SweepSpec, trial: Trial, location: str) -> dict[str, Any] | None:
    """What ``RLCLOUD_EARLY_STOPPING`` holds for ``trial`` (:attr:`RunnerEnv.early_stopping`), or None when
    the sweep has no early stopping: the rule's settings, ``peers`` (the sweep's location), ``trial`` and
    ``index``."""
    if sweep.population is not None:  # the same channel: PBT's members decide at timesteps too (runner.population)
        settings = {"rule": "pbt", **sweep.population.model_dump(mode="json"), "objective": sweep.objective}
        return {**settings, "seed": sweep.sampler_seed, "peers": location, "trial": trial.name, "index": trial.index}
    if sweep.early_stopping is None:
        return None
    return {
        **sweep.early_stopping.model_dump(mode="json"),
        "peers": location,
        "trial": trial.name,
        "index": trial.index,
    }


def decision_points(rule: str, *, grace: int, interval: int = 1, eta: int = 3) -> Iterator[int]:
    """The timesteps at which ``rule`` decides, in order, endlessly (the caller bounds them): median,
    ``grace`` then every ``interval`` (never 0: nothing is known there); asha, ``grace * eta**k``."""
    if rule == "asha":
        point = max(1, grace)
        while True:
            yield point
            point *= eta
    point = grace if grace > 0 else interval
    while True:
        yield point
        point += interval


def record_name(rule: str, point: int, trial: str) -> str:
    """The decision record of ``trial`` at ``point``, relative to the sweep's location."""
    return f"{DECISIONS}/{rule}/{point:012d}/{trial}.json"


# ------------------------------------------------------------------------------------------------ the rules


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by linear interpolation between order statistics (numpy's
    default ``percentile`` method, which Ray Tune's ASHA uses)."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median_decision(
    best: float | None, peers: Mapping[str, float | None], *, point: int, min_trials: int
) -> tuple[str, str, float | None]:
    """The median stopping rule at ``point``: (``"stop"`` or ``"continue"``, why, the median compared with).

    ``best``: the trial's best value at its decision points so far (None: no episode has ended yet);
    ``peers``: the earlier trials' values at ``point`` (None where one had no episode yet: not counted).
    """
    values = [v for v in peers.values() if v is not None]
    if best is None:
        return CONTINUE, f"no episode has ended by timestep {point}: nothing to compare", None
    if len(values) < min_trials:
        return CONTINUE, f"{len(values)} earlier trial(s) at timestep {point}, fewer than min_trials {min_trials}", None
    median = statistics.median(values)
    if best < median:
        return (
            STOP,
            (
                f"best running mean return {best:.1f} is below the median {median:.1f} of {len(values)} earlier "
                f"trials at timestep {point} (median stopping rule)"
            ),
            median,
        )
    return CONTINUE, f"best running mean return {best:.1f} >= the median {median:.1f} at timestep {point}", median


def asha_decision(
    value: float | None, peers: Mapping[str, float | None], *, point: int, eta: int
) -> tuple[str, str, float | None]:
    """ASHA's promotion at the rung ``point``: go on when ``value`` is in the top 1/``eta`` of the values of
    the earlier trials that reached the rung (``peers``; None: no episode by then, not counted) and itself.
    Returns (``"stop"`` or ``"continue"``, why, the cutoff)."""
    if value is None:
        return CONTINUE, f"no episode has ended by rung {point}: nothing to compare", None
    recorded = [v for v in peers.values() if v is not None] + [value]
    cutoff = percentile(recorded, 1 - 1 / eta)
    place = f"rung {point}: running mean return {value:.1f}, cutoff {cutoff:.1f} (top 1/{eta} of {len(recorded)})"
    if value < cutoff:
        return STOP, f"not in the top 1/{eta} at {place} (ASHA)", cutoff
    return CONTINUE, f"in the top 1/{eta} at {place}", cutoff


def parse_decision(data: bytes, decisions: Sequence[str] = (CONTINUE, STOP)) -> dict[str, Any]:
    """A decision record from its stored bytes; ValueError saying what is wrong when it is none. Records are
    input from other processes through a shared store: every field used is checked here."""
    if len(data) > MAX_RECORD_BYTES:
        raise ValueError(f"{len(data)} bytes, more than the {MAX_RECORD_BYTES} a decision may have")
    try:
        raw = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError as exc:
        raise ValueError("nested too deeply to be a decision") from exc
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"a JSON {type(raw).__name__}, not an object")
    value = raw.get("value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ValueError(f"value {str(value)[:40]!r} is not a number")
    if raw.get("decision") not in decisions:
        raise ValueError(f"decision {str(raw.get('decision'))[:40]!r} is none of {', '.join(map(repr, decisions))}")
    point = raw.get("timestep")
    if isinstance(point, bool) or not isinstance(point, int) or point < 0:
        raise ValueError(f"timestep {str(point)[:40]!r} is not a timestep")
    return raw


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a decision may hold")


# ------------------------------------------------------------------------------------------- the stopper


class EarlyStopper:
    """One trial's decisions: the loop hook ``on_decision(timestep)`` decides at every point reached.

    ``settings``: the parsed ``RLCLOUD_EARLY_STOPPING``; ``value``: the trial's running mean return now;
    ``stop``: called with the reason when a decision says stop; ``gate``: told the next decision point (None:
    no more), the timestep at which the loop must call :meth:`on_decision`; ``hold``: called while a decision
    waits for earlier trials (keeps the run's progress and heartbeat alive); ``stopping``: True once the run
    is asked to stop (a waiting decision gives up, to be made when the trial resumes); ``total_timesteps``:
    the trial's budget (no decision at or past it); ``store``: the sweep location's Store (default: opened
    from ``settings["peers"]``); ``peers``: the names of the earlier trials (default: from the sweep of record
    in the store).
    """

    #: The rules this class decides by (rlcloud.runner.population's member decides by ``pbt``).
    RULES: tuple[str, ...] = ("median", "asha")
    #: The decisions its records may hold.
    DECISIONS: tuple[str, ...] = (CONTINUE, STOP)

    def __init__(
        self,
        settings: Mapping[str, Any],
        *,
        value: Callable[[], float | None],
        stop: Callable[[str], None],
        gate: Callable[[int | None], None] = lambda point: None,
        hold: Callable[[], None] = lambda: None,
        stopping: Callable[[], bool] = lambda: False,
        total_timesteps: int | None = None,
        store: Store | None = None,
        peers: Sequence[str] | None = None,
    ) -> None:
        self.trial = str(settings["trial"])
        self.index = int(settings.get("index", 0))
        self.location = str(settings.get("peers", ""))
        self.rule = str(settings.get("rule", "median"))
        if self.rule not in self.RULES:
            raise ValueError(f"unknown early stopping rule {self.rule!r} (median or asha)")
        self.min_trials = int(settings.get("min_trials", 3))
        self.eta = int(settings.get("reduction_factor", 3))
        self.every = float(settings.get("check_seconds", 10.0))
        self.total = total_timesteps
        self._points = decision_points(
            self.rule,
            grace=int(settings.get("grace_timesteps", 0)),
            interval=int(settings.get("interval_timesteps", 10_000)),
            eta=self.eta,
        )
        if store is None:
            from rlcloud.storage import open_store

            store = open_store(self.location)
        self.store = store
        self._value = value
        self._stop = stop
        self._gate = gate
        self._hold = hold
        self._stopping = stopping
        self._peer_names = list(peers) if peers is not None else None
        self._own: dict[int, float | None] = {}  # this trial's value at each point decided so far
        # peers' records, immutable, read once: name -> (index, value); None: not a record (skipped)
        self._peer_records: dict[str, tuple[int | None, float | None] | None] = {}
        self._done_peers: set[str] = set()  # peers that finished or stopped early: no further points
        #: the next point the loop must call :meth:`on_decision` at (None: no more decisions)
        self.next_decision: int | None = None
        #: the reason this trial was stopped (None: it was not)
        self.stopped: str | None = None
        #: True while a decision waits for earlier trials (the stall watchdog's ``waiting``)
        self.waiting = False
        #: the earlier trials the last decision waited for
        self.waiting_for: list[str] = []
        self._advance()

    @classmethod
    def from_environ(cls, **kwargs: Any) -> EarlyStopper | None:
        """The stopper ``RLCLOUD_EARLY_STOPPING`` describes, or None when the run is not such a trial."""
        settings = RunnerEnv.from_env().early_stopping
        if settings is None:
            return None
        return cls(dict(settings), **kwargs)

    def _advance(self) -> None:
        point = next(self._points)
        self.next_decision = None if self.total is not None and point >= self.total else point
        self._gate(self.next_decision)

    # -- the loop hook
    def on_decision(self, timestep: int) -> None:
        """The loop reached ``timestep`` >= :attr:`next_decision`: decide at every point up to it, in order
        (one step can pass two), waiting there while earlier trials have not settled; returns at once when
        the run is asked to stop meanwhile (the point is decided when the trial resumes)."""
        said, started = False, time.monotonic()
        try:
            while not self.step(timestep):
                self.waiting = True
                if not said:
                    said = True
                    logger.info(
                        "decision at timestep %d waits for %d earlier trial(s) to reach it: %s",
                        self.next_decision,
                        len(self.waiting_for),
                        ", ".join(self.waiting_for[:5]) + (" ..." if len(self.waiting_for) > 5 else ""),
                    )
                self._hold()
                # the store is read every check_seconds, the stop flag much more often (a SIGTERM's grace)
                next_read = time.monotonic() + self.every
                while time.monotonic() < next_read:
                    if self._stopping():
                        logger.info("stop requested while the decision at timestep %s waited", self.next_decision)
                        return
                    sleep_until(next_read, _STOP_POLL_S)
        finally:
            if said:
                logger.info("waited %.0f s for earlier trials", time.monotonic() - started)
            self.waiting = False

    def step(self, timestep: int) -> bool:
        """Decide at every point up to ``timestep`` that can be decided now, never blocking; True when none
        is left to decide there (the loop goes on), False when one waits for earlier trials
        (:attr:`waiting_for` names them). A stop decision calls ``stop`` and ends the decisions."""
        while self.stopped is None and self.next_decision is not None and timestep >= self.next_decision:
            record = self.try_decide(self.next_decision, timestep)
            if record is None:
                return False
            self._advance()
            if record["decision"] == STOP:
                self.stopped = str(record.get("reason") or "stopped by the early stopping rule")
                logger.info("stopping early: %s", self.stopped)
                self._stop(self.stopped)
        return True

    def try_decide(self, point: int, timestep: int | None = None) -> dict[str, Any] | None:
        """The decision at ``point`` if it can be made now (or was made already), else None (earlier trials
        have not settled at ``point``: :attr:`waiting_for` names them). Never blocks."""
        name = record_name(self.rule, point, self.trial)
        own = self._load(name)
        if own is not None:  # made before: by this trial before a kill, or a previous pod
            self._own[point] = _finite(own.get("value"))
            return own
        peers, unsettled = self._peers_at(point)
        self.waiting_for = unsettled
        if unsettled:
            return None
        value = _finite(self._value())
        self._own[point] = value
        if self.rule == "asha":
            decision, reason, statistic = asha_decision(value, peers, point=point, eta=self.eta)
            best = None
        else:
            known = [v for v in self._own.values() if v is not None]
            best = max(known) if known else None
            decision, reason, statistic = median_decision(best, peers, point=point, min_trials=self.min_trials)
        # what was compared, not each peer's value: those are in the peers' own records, and a record that
        # listed them would make reading a point's records grow with the square of the trials
        record: dict[str, Any] = {
            "trial": self.trial,
            "index": self.index,
            "rule": self.rule,
            "timestep": point,
            "at": timestep,
            "value": value,
            "decision": decision,
            "reason": reason,
            "compared": sum(v is not None for v in peers.values()),
            "decided": time.time(),
        }
        if best is not None:
            record["best"] = best
        if statistic is not None:
            record["cutoff" if self.rule == "asha" else "median"] = round(statistic, 6)
        return self._write(name, record)

    # -- the store
    def _write(self, name: str, record: dict[str, Any]) -> dict[str, Any]:
        from rlcloud.storage import PreconditionFailedError

        try:
            self.store.write_text(name, json.dumps(record), if_generation_match=0)
        except PreconditionFailedError:
            # made meanwhile by another process of this trial (a pod and its replacement): that one stands
            existing = self._load(name)
            if existing is not None:
                self._own[int(record["timestep"])] = _finite(existing.get("value"))
                return existing
            # what holds the name is no record (warned about): this decision stands, unrecorded
            return record
        logger.info("decision at timestep %d: %s (%s)", record["timestep"], record["decision"], record["reason"])
        return record

    def _load(self, name: str) -> dict[str, Any] | None:
        """The record ``name``, None when there is none (yet) or it is no record (warned about)."""
        from rlcloud.errors import NotFoundError, RecordError

        try:
            data = self.store.read_record_bytes(name, MAX_RECORD_BYTES)
        except NotFoundError:
            return None
        except RecordError as exc:  # larger than a record may be
            logger.warning("early stopping skips %s: %s", name, exc)
            self._peer_records[name] = None
            return None
        try:
            return parse_decision(data, self.DECISIONS)
        except ValueError as exc:
            logger.warning("early stopping skips %s: %s", name, exc)
            self._peer_records[name] = None
            return None

    def _peer(self, name: str) -> tuple[int | None, float | None] | None:
        """A peer's record ``name`` as (its index, its value), kept once read (records never change); None when
        there is none (yet) or it is no record (skipped, warned about once)."""
        if name in self._peer_records:
            return self._peer_records[name]
        record = self._load(name)
        if record is None:
            return None
        index = record.get("index")
        kept = (index if isinstance(index, int) and not isinstance(index, bool) else None, _finite(record.get("value")))
        self._peer_records[name] = kept
        return kept

    def _before(self) -> list[str] | None:
        """The earlier trials' names (from the sweep of record), or None when they cannot be known."""
        if self._peer_names is None:
            try:
                self._peer_names = _earlier_trials(self.store, self.index)
            except Exception as exc:  # decided with the records there are (warned: not reproducible)
                logger.warning("early stopping cannot read the sweep of record (%s): decisions do not wait", exc)
                return None
        return self._peer_names

    def _peers_at(self, point: int) -> tuple[dict[str, float | None], list[str]]:
        """(the earlier trials' values at ``point``, the earlier trials not settled there)."""
        prefix = record_name(self.rule, point, "x").rsplit("/", 1)[0] + "/"
        listing = {info.name.rsplit("/", 1)[-1].removesuffix(".json") for info in self.store.list(prefix)}
        names = self._before()
        if names is None:  # unknown order: the records there are, of lower index
            names = []
            for peer in sorted(listing - {self.trial}):
                found = self._peer(record_name(self.rule, point, peer))
                if found is not None and found[0] is not None and found[0] < self.index:
                    names.append(peer)
        # records never change: each is read once, the new ones side by side (a request each; at a point of a
        # sweep of a thousand trials the later ones would otherwise wait a round trip per earlier trial)
        new = [
            n
            for peer in names
            if peer in listing and (n := record_name(self.rule, point, peer)) not in self._peer_records
        ]
        if len(new) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(
                max_workers=min(_READ_THREADS, len(new)), thread_name_prefix="rlcloud-peers"
            ) as pool:
                list(pool.map(self._peer, new))
        values: dict[str, float | None] = {}
        unsettled: list[str] = []
        for peer in names:
            if peer in listing or peer in self._done_peers or self._ended(peer):
                # reached it, or ended: its record here (written before its progress says it ended) may have
                # come since the listing
                found = self._peer(record_name(self.rule, point, peer))
                if found is not None:
                    values[peer] = found[1]
                continue
            unsettled.append(peer)
        return values, unsettled

    def _ended(self, peer: str) -> bool:
        """Whether ``peer``'s progress says it ended (it reaches no further point)."""
        from rlcloud.errors import RLCloudError
        from rlcloud.storage import open_store
        from rlcloud.storage.client import read_progress

        try:
            progress = read_progress(open_store(child(self.location, peer)))
        except (RLCloudError, OSError) as exc:
            logger.debug("progress of %s: %s", peer, exc)
            return False
        state = None if progress is None else progress.state
        if state in DONE_STATES:
            self._done_peers.add(peer)  # finished for good; a failed one may be retried: looked at again
        return state in ENDED_STATES


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return round(float(value), 6)


def _earlier_trials(store: Store, index: int) -> list[str]:
    """The names of the sweep's trials before ``index``, from its sweep of record (``sweep.yaml``)."""
    from rlcloud.record import read_sweep_record, sweep_of_record
    from rlcloud.specs.sweep import SweepSpec

    record = read_sweep_record(store)
    if record is None:
        raise FileNotFoundError(f"no sweep of record in {store.describe()}")
    # with the recorded growth steps: a grown sweep's later trials have later indices (rlcloud.record)
    return sweep_of_record(store, SweepSpec.from_dict(record)).trial_names()[:index]
