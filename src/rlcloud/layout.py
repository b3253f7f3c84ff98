"""The results layout: what one run keeps under its location (docs/contracts.md, "Results layout"), the
names and relative paths of those files, and progress.json's typed model (:class:`ProgressRecord`).

Every layer asks here; nothing else spells a name. The readers and writers over a store are in
``rlcloud.storage.client`` (metrics, evaluation, progress) and ``rlcloud.record`` (spec of record, history);
the runner writes a work directory with these names. Where a location itself is (``<root>/<name>``) is
``rlcloud.results``'s business.

The format is a contract with runners in older images: a name here never changes, and the progress model
reads what any runner wrote (fields missing, unknown ones kept and written back).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, overload

__all__ = [
    "AGENT_SUMMARIES",
    "CHECKPOINTS",
    "CHECKPOINT_STATE",
    "CLAIMS",
    "CURVES",
    "CURVE_POINTS",
    "CURVE_WINDOW",
    "DECISIONS",
    "DONE_STATES",
    "EVALUATION",
    "FINAL_STATES",
    "GROWTH",
    "HISTORY",
    "LATEST",
    "LOGS",
    "METRICS",
    "POPULATION",
    "PROGRESS",
    "RESTORED_FILES",
    "RETURNS_PLOT",
    "RUN_INDEX_FILES",
    "RUN_SUMMARY",
    "SPEC",
    "STOPPED_EARLY",
    "STUDY",
    "SUMMARIES",
    "SUMMARY_SOURCES",
    "SUMMARY_VERSION",
    "SWEEP_INDEX",
    "SWEEP_INDEX_SHARDS",
    "SWEEP_SPEC",
    "ProgressRecord",
    "as_number",
    "checkpoint_path",
    "child",
    "growth_path",
    "log_path",
    "sweep_index_path",
]

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

# ------------------------------------------------------------------------------------------------ names

#: The spec of record (rlcloud.record): the resolved ExperimentSpec of the run's first start.
SPEC = "spec.yaml"
#: A sweep's spec of record, in the sweep's location.
SWEEP_SPEC = "sweep.yaml"
#: One JSON object per start (rlcloud.record).
HISTORY = "history.jsonl"
#: A sweep's growth steps (rlcloud.record.grow_sweep_recorded), one create-only file each: see growth_path.
GROWTH = "growth"
#: The learner's latest counters (:class:`ProgressRecord`), replaced atomically.
PROGRESS = "progress.json"
#: One JSON object per training episode, appended as it ends.
METRICS = "metrics.jsonl"
#: The same for evaluation episodes.
EVALUATION = "evaluation.jsonl"
#: The directory of the complete checkpoints, one directory each.
CHECKPOINTS = "checkpoints"
#: Text: the name of the latest complete checkpoint; written last, atomically.
LATEST = f"{CHECKPOINTS}/LATEST"
#: A checkpoint's counters, in its directory.
CHECKPOINT_STATE = "state.json"
#: TensorBoard's logdir.
SUMMARIES = "summaries"
#: Tensorforce's own update summaries, forwarded into SUMMARIES by the runner; outside the logdir.
AGENT_SUMMARIES = "tensorforce-summaries"
#: Each role's stdout/stderr: ``logs/<role>-<index>.log``.
LOGS = "logs"
#: The returns plot.
RETURNS_PLOT = "returns.png"
#: A sweep's early stopper's curves: ``curves/<trial>.json``, in the sweep's location (sweeps from before
#: decisions were made at timestep checkpoints; read by nothing, skipped where a sweep is listed).
CURVES = "curves"
#: A sweep's early-stopping decisions: ``decisions/<rule>/<timestep>/<trial>.json``, in the sweep's location,
#: each written once (rlcloud.runner.early_stop).
DECISIONS = "decisions"
#: A warm sweep's trial claims: ``claims/<trial>.json`` in the sweep's location, one per trial, created once and
#: then rewritten with generation preconditions by its holder (rlcloud.storage.claims).
CLAIMS = "claims"
#: A sweep's Optuna study (``sampler: tpe``): ``study/<number:012d>.json``, create-only journal entries
#: (rlcloud.storage.journal).
STUDY = "study"
#: A population's snapshots: ``population/<trial>/ckpt-<timestep>/``, in the sweep's location, each written
#: once before the decision record that names it (rlcloud.runner.population).
POPULATION = "population"
#: The folders in a sweep's location that hold the sweep's own records, not a trial's results.
SWEEP_RECORDS = (CURVES, DECISIONS, POPULATION, CLAIMS, STUDY)
#: What a resumed runner needs besides its checkpoint: its appended records and its counters.
RESTORED_FILES = (METRICS, EVALUATION, PROGRESS)
#: Names that are always a file of a run (or of one of its checkpoints), never a folder: where a store holds
#: such a name and objects under it too (``metrics.jsonl`` and ``metrics.jsonl/inner.txt``), the file is the
#: run's and the objects under it are strays (storage.base.local_targets).
FILE_NAMES = frozenset(
    {SPEC, SWEEP_SPEC, HISTORY, PROGRESS, METRICS, EVALUATION, RETURNS_PLOT, CHECKPOINT_STATE, LATEST.rsplit("/")[-1]}
)
#: A run's summary (rlcloud.storage.summary): what the tables of many runs need, derived from SUMMARY_SOURCES,
#: written by the runner at each checkpoint and at the end. A reader that finds it missing, built from other
#: records than the stored ones, or of another SUMMARY_VERSION builds it from the records instead.
RUN_SUMMARY = "run-summary.json"
#: The records a run summary is built from (each named in it with its size and CRC32C).
SUMMARY_SOURCES = (PROGRESS, METRICS, EVALUATION)
#: The summary format's version: a summary of another version is rebuilt from the records by its reader.
SUMMARY_VERSION = 1
#: The objects a reader of many runs lists in each run's location (one listing for a whole sweep): the spec
#: of record, the summary and its sources.
RUN_INDEX_FILES = (SPEC, RUN_SUMMARY, *SUMMARY_SOURCES)
#: A sweep's index of its finished trials (rlcloud.storage.runs): ``sweep-index/<shard>.json`` in the sweep's
#: location, SWEEP_INDEX_SHARDS objects whatever the sweep's size, each holding the spec of record and summary of
#: the finished trials whose name hashes to it, with the generations they were read at. Derived and
#: checked: an entry whose generations are not the stored ones is not used.
SWEEP_INDEX = "sweep-index"
SWEEP_INDEX_SHARDS = 16
#: A summary's objective and curve: the mean return of the last CURVE_WINDOW episodes, at no more than
#: CURVE_POINTS episodes (what a plot draws; a window of another length is computed from the records).
CURVE_WINDOW = 20
CURVE_POINTS = 256


def checkpoint_path(name: str) -> str:
    """A checkpoint's directory, relative to the location: ``checkpoints/<name>``."""
    return f"{CHECKPOINTS}/{name}"


def sweep_index_path(shard: int) -> str:
    """A shard of a sweep's index, relative to the sweep's location: ``sweep-index/<shard>.json``."""
    return f"{SWEEP_INDEX}/{shard:02d}.json"


def log_path(label: str) -> str:
    """A role's log, relative to the location: ``logs/<role>-<index>.log``."""
    return f"{LOGS}/{label}.log"


def growth_path(step: int) -> str:
    """The file of a sweep's growth step ``step`` (1, 2, ...) in its location: ``growth/000001.json``; numbered so
    that the steps read back in order and a step's number is taken once (each file is written create-only)."""
    return f"{GROWTH}/{step:06d}.json"


def child(location: str, name: str) -> str:
    """The location of ``name`` under ``location`` (a sweep's trial, a root's experiment), spelled as the
    store spells it: ``<location>/<name>`` for a gs:// URL and a directory alike, nothing resolved."""
    return location.rstrip("/") + "/" + name


# ----------------------------------------------------------------------------------------------- states

#: progress.json's state of a sweep trial stopped by its early-stopping rule (a TrialState "stopped early").
STOPPED_EARLY = "stopped-early"
#: progress.json states after which a run's progress no longer changes.
FINAL_STATES = frozenset({"succeeded", "failed", "stopped", STOPPED_EARLY})
#: progress.json states of a run that is done: not started again (a sweep's trial) and not failed.
DONE_STATES = frozenset({"succeeded", STOPPED_EARLY})


# ----------------------------------------------------------------------------------------------- values


def as_number(value: Any, *, counter: bool, lowest: int = 0) -> int | float | None:
    """``value`` as a counter (a whole number >= ``lowest``) or a finite measurement, or None when it is neither.
    A number written as a string ("12", "3.5") is taken; bools, NaN and infinities are not."""
    if isinstance(value, str) and len(value) <= 40:
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if counter:
        if value < lowest or value != int(value):
            return None
        return int(value)
    return float(value)


def _number(value: Any) -> float | None:
    """A number as it stands (no string taken): what the status figures have always read."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _counter(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None and math.isfinite(number) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _whole(value: Any) -> int | None:
    """An int as written (no float, no bool)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class _Field(Generic[_T]):
    """A typed read of one progress.json field, named as the attribute: ``read(value)``, None when the field is
    missing or not of its type."""

    def __init__(self, read: Callable[[Any], _T | None], doc: str) -> None:
        self.read, self.__doc__ = read, doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = name

    @overload
    def __get__(self, record: None, owner: type) -> _Field[_T]: ...
    @overload
    def __get__(self, record: ProgressRecord, owner: type) -> _T | None: ...
    def __get__(self, record: ProgressRecord | None, owner: type) -> _Field[_T] | _T | None:
        return self if record is None else self.read(record.get(self.key))


#: progress.json's fields with a type: counters, measurements (a number or null) and texts (or null)
_PROGRESS_COUNTERS = ("timestep", "episode")
_PROGRESS_MEASURES = ("mean_return", "steps_per_second", "updated", "cpu_seconds")
_PROGRESS_TEXTS = ("state", "stop_reason", "checkpoint")


class ProgressRecord(dict[str, Any]):
    """progress.json: the learner's latest counters (docs/contracts.md lists the fields).

    A dict, so that it is what it always was to every reader (``status.progress["timestep"]``, ``-o json``)
    and keeps any field it does not know (written by a newer or an older runner) through a read and a
    write; its attributes are the typed reads, each None when the field is missing or not of its type.
    Build one from a parsed record with :meth:`clean`, write one with :meth:`to_json`.
    """

    @classmethod
    def clean(cls, value: Mapping[str, Any], source: str) -> ProgressRecord:
        """``value`` with each typed field that is not of its type (Infinity or a string timestep, a NaN
        rate, a number for a state) removed, and one warning naming ``source`` saying which: every reader
        then sees a field it can use or none, so one odd run never stops a table of many. Numbers written
        as strings are taken."""
        clean = cls(value)
        dropped = []
        for key in (*_PROGRESS_COUNTERS, *_PROGRESS_MEASURES, *_PROGRESS_TEXTS):
            if key not in clean or clean[key] is None:
                continue
            if key in _PROGRESS_TEXTS:
                ok = isinstance(clean[key], str)
            else:
                number = as_number(clean[key], counter=key in _PROGRESS_COUNTERS)
                ok = number is not None
                if ok:
                    clean[key] = number
            if not ok:
                dropped.append(f"{key}={str(clean.pop(key))[:40]!r}")
        if dropped:
            logger.warning("%s: ignored field(s) of the wrong type: %s", source, ", ".join(dropped))
        return clean

    @classmethod
    def of(cls, value: Mapping[str, Any] | None) -> ProgressRecord:
        """``value`` as a ProgressRecord: itself when it is one, else a copy (None: an empty record)."""
        return value if isinstance(value, ProgressRecord) else cls(value or {})

    def to_json(self) -> str:
        """The record as progress.json holds it: one JSON object and a newline."""
        return json.dumps(self) + "\n"

    def count(self, unit: str) -> int | None:
        """The counter ``unit`` ("timestep" or "episode", a stop condition's unit), or None."""
        return _counter(self.get(unit))

    state = _Field(_text, "The run's state: starting, running, succeeded, failed, stopped or stopped-early.")
    timestep = _Field(_counter, "Global timesteps trained.")
    episode = _Field(_counter, "Training episodes finished.")
    mean_return = _Field(_number, "The mean return of the last 20 episodes.")
    steps_per_second = _Field(_number, "This process's training rate (None before its first step).")
    updated = _Field(_number, "Unix time the record was written.")
    advanced_at = _Field(_number, "The heartbeat: unix time the timestep (or an evaluation episode) last advanced.")
    stall_timeout = _Field(_number, "The spec's stall_timeout in seconds (None from a runner before the heartbeat).")
    checkpoint = _Field(_text, "The name of the latest complete checkpoint.")
    checkpoint_at = _Field(_number, "Unix time the latest checkpoint was written.")
    elapsed = _Field(_number, "Training seconds, all starts together.")
    cpu_seconds = _Field(_number, "The runner's CPU time.")
    stop_reason = _Field(_text, "Why a sweep trial stopped early, or a warm sweep's trial failed.")
    job_uid = _Field(_text, "The uid of the Kubernetes Job whose pod wrote a failure or stall record (a warm sweep's).")
    stalls = _Field(_whole, "Stalls in a row its watchdog recorded.")
    stalled = _Field(_text, "What its watchdog found stalled (a thread's place), recorded with the stall.")
    signature = _Field(_text, "A failure record's signature (a warm sweep groups failed trials by it).")

    @property
    def heartbeat(self) -> float | None:
        """``advanced_at``, else ``updated`` (a runner from before the heartbeat): what a stall is judged by."""
        beat = self.advanced_at
        return beat if beat is not None else self.updated

    @property
    def stopped_early(self) -> bool:
        """Whether a sweep's early-stopping rule stopped the run."""
        return self.state == STOPPED_EARLY

    @property
    def done(self) -> bool:
        """Whether the run is done and not to be started again: succeeded or stopped early."""
        return self.state in DONE_STATES

    def done_at(self, total_timesteps: int | None) -> bool:
        """Whether the run is done for a budget of ``total_timesteps``: :attr:`done`, unless it succeeded short
        of that budget (a budget given since, as a sweep's ``extend --top`` does: it trains on from its
        checkpoint)."""
        if not self.done:
            return False
        short = self.state == "succeeded" and bool(total_timesteps) and (self.timestep or 0) < (total_timesteps or 0)
        return not short
