"""Reading results from a store, for the Experiment facade and the CLI.

- :func:`download` mirrors a store (or a part of it) into a directory, fetching only what is missing or
  differs (size + CRC32C), each file CRC32C-verified and written atomically.
- :func:`read_metrics`, :func:`read_evaluation`, :func:`read_progress` read one object each, without
  downloading anything else; :func:`read_logs` / :func:`tail_log` read the roles' logs.
- :func:`metrics_frame` turns episode records into a pandas DataFrame with fixed columns.
- :func:`sync_tensorboard` keeps a local copy of ``summaries/`` for TensorBoard.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlcloud.errors import NotFoundError, StorageError
from rlcloud.layout import EVALUATION, LOGS, METRICS, PROGRESS, SUMMARIES, ProgressRecord, as_number, log_path
from rlcloud.storage.base import ObjectInfo, Progress, Store, crc32c_of_file, local_targets
from rlcloud.stored import MAX_RECORD_BYTES, MAX_RECORD_LINE, parse_record

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "METRIC_COLUMNS",
    "DownloadReport",
    "destinations",
    "download",
    "metrics_frame",
    "read_evaluation",
    "read_logs",
    "read_metrics",
    "read_progress",
    "sync_tensorboard",
    "tail_log",
]

logger = logging.getLogger(__name__)


@dataclass
class DownloadReport:
    """What :func:`download` did: names fetched, names already up to date, bytes fetched, names left out."""

    downloaded: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    bytes_downloaded: int = 0
    #: objects no local file can hold (a NUL, a 300-byte name, both a file and a folder...), left out
    skipped: list[str] = field(default_factory=list)


def _up_to_date(info: ObjectInfo, path: Path) -> bool:
    try:
        st = path.lstat()  # a link is never read through: the download replaces the link itself
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_size != info.size:
        return False
    return crc32c_of_file(path) == info.crc32c


def destinations(root: Path, targets: list[tuple[ObjectInfo, Path]]) -> list[tuple[ObjectInfo, Path]]:
    """``targets`` (from :func:`~rlcloud.storage.base.local_targets`) checked against the links in ``root``:
    StorageError, before anything is written, when a symbolic link in ``root`` (``logs -> /etc``) would take
    one outside it. A link in the object's own place is replaced by the file, never written through."""
    from rlcloud.storage.local import check_within

    for info, path in targets:
        try:
            check_within(root, path)
        except OSError:
            raise StorageError(
                f"not downloading {info.name} to {path}: a symbolic link in {root} leads outside it "
                "(links are never followed in a results directory); remove it or choose another destination"
            ) from None
    return list(targets)


def download(
    store: Store,
    dest: str | os.PathLike[str],
    *,
    prefix: str = "",
    progress: Progress | None = None,
) -> DownloadReport:
    """Mirror the objects under ``prefix`` into ``dest`` (same relative paths), incrementally.

    Files already in ``dest`` with the same size and CRC32C are kept; the others are downloaded
    concurrently, verified and renamed into place. Local files absent from the store are left alone. An
    object whose name no local file can have is left out with a warning naming it
    (:func:`~rlcloud.storage.base.local_targets`); the others are downloaded.
    ``progress(done_bytes, total_bytes)`` is called as files complete.
    """
    root = Path(dest)
    root.mkdir(parents=True, exist_ok=True)
    report = DownloadReport()
    todo: list[tuple[ObjectInfo, Path]] = []
    targets, skipped = local_targets(store.list(prefix), root)
    for name, reason in skipped:  # one odd name never stops the rest: each is named and left out
        logger.warning("not downloaded: %s: %s", store.describe(name), reason)
        report.skipped.append(name)
    for info, path in destinations(root, targets):
        if _up_to_date(info, path):
            report.unchanged.append(info.name)
        else:
            todo.append((info, path))
    if todo:
        store.download_files(todo, progress=progress)
    elif progress:
        progress(0, 0)
    report.downloaded = [info.name for info, _ in todo]
    report.bytes_downloaded = sum(info.size for info, _ in todo)
    return report


#: Largest episode record file read (metrics.jsonl, evaluation.jsonl): ~150 bytes an episode, so millions of
#: episodes; a planted object larger than this is refused before it is read.
MAX_METRICS_BYTES = 1 << 30


#: counters of an episode record: whole numbers, never negative except ``worker``, which is -1 for the
#: evaluation episodes the runner writes to evaluation.jsonl (runner/loop.py)
_COUNTER_FIELDS = frozenset({"episode", "timestep", "length", "worker", "at_episode", "at_timestep"})
_LOWEST = {"worker": -1}
#: measurements of an episode record: finite numbers
_MEASURE_FIELDS = frozenset({"return", "time"})


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def _episode_record(line: str) -> dict[str, Any]:
    """One line of metrics.jsonl / evaluation.jsonl as a record; ValueError saying why it is none."""
    if len(line) > MAX_RECORD_LINE:  # a record is input: bounded like every other (rlcloud.stored)
        raise ValueError(f"longer than {MAX_RECORD_LINE // 1024} KiB")
    try:
        record = json.loads(line, parse_constant=_reject_constant)
    except RecursionError as exc:
        raise ValueError("nested too deeply") from exc
    except ValueError as exc:  # torn JSON, NaN/Infinity, a 5,000-digit number
        raise ValueError(f"not a JSON record ({str(exc)[:80]})") from exc
    if not isinstance(record, dict):
        raise ValueError(f"a JSON {type(record).__name__}, not an object")
    for key in _COUNTER_FIELDS | _MEASURE_FIELDS:
        if key in record:
            lowest = _LOWEST.get(key, 0)
            number = as_number(record[key], counter=key in _COUNTER_FIELDS, lowest=lowest)
            if number is None:
                kind = f"a whole number >= {lowest}" if key in _COUNTER_FIELDS else "a finite number"
                raise ValueError(f"{key!r} is {str(record[key])[:40]!r}, not {kind}")
            record[key] = number
    return record


def _read_jsonl(store: Store, name: str) -> list[dict[str, Any]]:
    """The records of a JSON-lines file (:func:`parse_episode_records`); [] when it does not exist."""
    try:
        data = store.read_record_bytes(name, MAX_METRICS_BYTES)
    except NotFoundError:
        return []
    return parse_episode_records(data, store.describe(name))


def parse_episode_records(data: bytes, source: str) -> list[dict[str, Any]]:
    """The episode records of a JSON-lines file's content. Each line is judged alone: a line that is no
    episode record (torn by a writer mid-append, a string return, NaN or Infinity, a list) is skipped, and one
    warning naming ``source`` (so the run) says how many and why the first was; the other lines and runs are
    read as usual."""
    records: list[dict[str, Any]] = []
    skipped: list[str] = []
    lines = data.decode("utf-8", errors="replace").splitlines()
    torn_last = False
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            records.append(_episode_record(line))
        except ValueError as exc:
            skipped.append(f"line {number}: {exc}")
            torn_last = number == len(lines) and not data.endswith(b"\n")
    if torn_last and len(skipped) == 1:
        # a last line without its newline: a writer mid-append when the file was synced, not worth a warning
        logger.debug("%s: skipping a torn last line", source)
    elif skipped:
        logger.warning("%s: skipped %d line(s) that are no episode record (%s)", source, len(skipped), skipped[0])
    return records


def read_metrics(store: Store) -> list[dict[str, Any]]:
    """The training episodes recorded so far (``metrics.jsonl``), oldest first; [] when none yet."""
    return _read_jsonl(store, METRICS)


def read_evaluation(store: Store) -> list[dict[str, Any]]:
    """The evaluation episodes recorded so far (``evaluation.jsonl``); [] when none yet."""
    return _read_jsonl(store, EVALUATION)


#: The columns of a metrics DataFrame, in order (metrics.jsonl's fields); evaluation adds EVALUATION_COLUMNS.
METRIC_COLUMNS: tuple[str, ...] = ("episode", "timestep", "return", "length", "time", "worker")
EVALUATION_COLUMNS: tuple[str, ...] = ("at_episode", "at_timestep")
_INTEGER_COLUMNS = frozenset({"episode", "timestep", "length", "worker", "at_episode", "at_timestep"})


def metrics_frame(records: list[dict[str, Any]], *, evaluation: bool = False) -> pd.DataFrame:
    """Episode records as a DataFrame: the known columns first (present even with no records), then any other.

    Counters are int64 and return/time float64 when every record has them, so an empty frame and a full one
    have the same columns and types.
    """
    import pandas as pd

    columns = list(METRIC_COLUMNS) + (list(EVALUATION_COLUMNS) if evaluation else [])
    frame = pd.DataFrame.from_records(records) if records else pd.DataFrame()
    extra = [c for c in frame.columns if c not in columns]
    frame = frame.reindex(columns=columns + extra)
    for column in columns:
        values = frame[column]
        if column in _INTEGER_COLUMNS:
            if not values.isna().any():
                frame[column] = values.astype("int64")
        else:
            frame[column] = pd.to_numeric(values, errors="coerce").astype("float64")
    return frame


def read_progress(store: Store) -> ProgressRecord | None:
    """The learner's latest counters (``progress.json``), or None when it has not written any yet."""
    try:
        data = store.read_record_bytes(PROGRESS, MAX_RECORD_BYTES)
    except NotFoundError:
        return None
    # bounded (size, nesting, numbers) and a mapping, or a RecordError naming it; then each field judged
    value = parse_record(data, source=store.describe(PROGRESS))
    return ProgressRecord.clean(value, store.describe(PROGRESS))


def read_logs(store: Store) -> dict[str, str]:
    """Each role's log (``logs/<role>-<index>.log``) keyed by ``<role>-<index>``."""
    out: dict[str, str] = {}
    for info in store.list(f"{LOGS}/"):
        if not info.name.endswith(".log"):
            continue
        key = info.name[len(f"{LOGS}/") : -len(".log")]
        try:
            out[key] = store.read_bytes(info.name).decode("utf-8", errors="replace")
        except NotFoundError:
            continue
    return out


def tail_log(store: Store, role: str, offset: int = 0) -> tuple[str, int]:
    """New text of ``logs/<role>.log`` from byte ``offset``, and the offset to pass next time.

    For ``follow``-style polling: only the bytes after ``offset`` are transferred. A log that shrank
    (replaced by a restarted runner) is read again from the start.
    """
    name = log_path(role)
    info = store.stat(name)
    if info is None:
        return "", offset
    if info.size < offset:
        offset = 0
    if info.size == offset:
        return "", offset
    data = store.read_bytes(name, start=offset)
    # Cut at the last newline so a line is never split between two polls.
    cut = data.rfind(b"\n") + 1
    if cut == 0:
        return "", offset
    return data[:cut].decode("utf-8", errors="replace"), offset + cut


def sync_tensorboard(store: Store, dest: str | os.PathLike[str], *, progress: Progress | None = None) -> Path:
    """Download ``summaries/`` into ``dest`` incrementally; returns the logdir to give TensorBoard."""
    download(store, dest, prefix=f"{SUMMARIES}/", progress=progress)
    logdir = Path(dest) / SUMMARIES
    logdir.mkdir(parents=True, exist_ok=True)
    return logdir
