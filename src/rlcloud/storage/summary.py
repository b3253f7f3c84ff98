"""A run's summary (``run-summary.json``): what the tables of many runs need, small, derived from the records.

The raw records (``progress.json``, ``metrics.jsonl``, ``evaluation.jsonl``) stay the truth. The runner writes a
summary of them into its work directory at each checkpoint and at the end (:class:`SummaryHook`), and the
results syncer uploads it with them, so a reader of a finished run needs one small object instead of its
episode records. A summary names the records it was built from (``sources``: each one's size and CRC32C, as a
store lists them); a reader takes it only when its ``version`` is :data:`~rlcloud.layout.SUMMARY_VERSION` and
its sources are the stored records (:func:`summary_is_current`). Otherwise (missing, older than its records,
written by another version: a run still training between two checkpoints, a run from before summaries
existed) the reader builds the same summary from the records (:func:`build_summary`).

Episodes are held as numpy arrays (:class:`Episodes`), never as a dict per episode; the summary keeps what
the tables use: the counters, the objective (mean return of the last :data:`~rlcloud.layout.CURVE_WINDOW`
episodes), the evaluation rounds, and the moving mean of the returns at no more than
:data:`~rlcloud.layout.CURVE_POINTS` episodes (what a plot draws).
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlcloud.layout import (
    CURVE_POINTS,
    CURVE_WINDOW,
    EVALUATION,
    METRICS,
    PROGRESS,
    RUN_SUMMARY,
    SUMMARY_SOURCES,
    SUMMARY_VERSION,
    ProgressRecord,
)

if TYPE_CHECKING:
    import numpy as np

    from rlcloud.storage.base import ObjectInfo

__all__ = ["Episodes", "JsonlTally", "SummaryHook", "build_summary", "summary_is_current", "write_summary"]

logger = logging.getLogger(__name__)


@dataclass
class Episodes:
    """Training episodes as columns (float64 arrays of one length): ``timestep`` at each episode's end, its
    ``ret`` (return) and ``time`` (seconds since the run's start, NaN where not recorded)."""

    timestep: np.ndarray
    ret: np.ndarray
    time: np.ndarray

    @classmethod
    def empty(cls) -> Episodes:
        """No episode."""
        import numpy as np

        return cls(np.zeros(0), np.zeros(0), np.zeros(0))

    @classmethod
    def of_records(cls, records: list[dict[str, Any]]) -> Episodes:
        """The episodes of parsed metrics.jsonl records (those with a return)."""
        import numpy as np

        rows = [
            (float(r.get("timestep", 0)), float(r["return"]), float(r.get("time", math.nan)))
            for r in records
            if "return" in r
        ]
        if not rows:
            return cls.empty()
        data = np.asarray(rows, dtype=float)
        return cls(data[:, 0].copy(), data[:, 1].copy(), data[:, 2].copy())

    def __len__(self) -> int:
        return len(self.ret)


class JsonlTally:
    """An episode record file read incrementally: each call of :meth:`update` reads only the bytes appended
    since the last one (a file that shrank is read again from its start), keeps every complete line's values
    as arrays, and the CRC32C and size of the whole file as it stands: the ``sources`` entry of a summary."""

    def __init__(self, path: Path, *, evaluation: bool = False) -> None:
        self.path = path
        self.evaluation = evaluation
        self._reset()

    def _reset(self) -> None:
        self.offset = 0  # bytes read (complete lines and the torn tail)
        self.crc = 0
        self.tail = b""  # a last line without its newline yet
        self.rows: list[tuple[float, float, float]] = []

    def update(self) -> dict[str, Any] | None:
        """Read what was appended; the file's ``{"size", "crc32c"}`` (None when it does not exist)."""
        import google_crc32c

        from rlcloud.storage.base import crc32c_text

        try:
            size = os.path.getsize(self.path)
        except OSError:
            self._reset()
            return None
        if size < self.offset:
            self._reset()
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            new = fh.read(size - self.offset)
        self.offset += len(new)
        self.crc = google_crc32c.extend(self.crc, new)
        text = self.tail + new
        cut = text.rfind(b"\n") + 1
        self.tail = text[cut:]
        for line in text[:cut].decode("utf-8", errors="replace").splitlines():
            row = _episode_row(line, self.evaluation)
            if row is not None:
                self.rows.append(row)
        return {"size": self.offset, "crc32c": crc32c_text(self.crc)}

    def episodes(self) -> Episodes:
        """The training episodes read so far."""
        import numpy as np

        if not self.rows:
            return Episodes.empty()
        data = np.asarray(self.rows, dtype=float)
        return Episodes(data[:, 0].copy(), data[:, 1].copy(), data[:, 2].copy())

    def evaluation_means(self) -> list[tuple[int, float]]:
        """``(timestep, mean return)`` of each evaluation round read so far, in timestep order."""
        return evaluation_means_of(self.rows)


def _episode_row(line: str, evaluation: bool) -> tuple[float, float, float] | None:
    """(timestep, return, time) of one line (for evaluation: at_timestep), or None for a line that is no
    episode record (judged as every reader judges it: rlcloud.storage.client)."""
    from rlcloud.storage.client import _episode_record

    line = line.strip()
    if not line:
        return None
    try:
        record = _episode_record(line)
    except ValueError:
        return None
    if "return" not in record:
        return None
    at = record.get("at_timestep", record.get("timestep", 0)) if evaluation else record.get("timestep", 0)
    return float(at), float(record["return"]), float(record.get("time", math.nan))


def evaluation_means_of(rows: list[tuple[float, float, float]]) -> list[tuple[int, float]]:
    """``(timestep, mean return)`` per evaluation round of (at_timestep, return, _) rows, in timestep order."""
    rounds: dict[int, list[float]] = {}
    for at, ret, _ in rows:
        rounds.setdefault(int(at), []).append(ret)
    return [(at, sum(v) / len(v)) for at, v in sorted(rounds.items())]


def evaluation_rows(records: list[dict[str, Any]]) -> list[tuple[float, float, float]]:
    """Parsed evaluation.jsonl records as (at_timestep, return, time) rows."""
    return [
        (float(r.get("at_timestep", r.get("timestep", 0))), float(r["return"]), math.nan)
        for r in records
        if "return" in r
    ]


def moving_curve(episodes: Episodes, window: int = CURVE_WINDOW, points: int = CURVE_POINTS) -> dict[str, Any]:
    """The moving mean of the last ``window`` returns at no more than ``points`` episodes, evenly spread and
    always the first and the last: ``{"window", "timestep": [...], "mean_return": [...]}``."""
    import numpy as np

    n = len(episodes)
    if n == 0:
        return {"window": window, "timestep": [], "mean_return": []}
    sums = np.cumsum(np.concatenate([[0.0], episodes.ret]))
    ends = np.arange(1, n + 1)
    starts = np.maximum(0, ends - window)
    smooth = (sums[ends] - sums[starts]) / (ends - starts)
    picks = np.unique(np.linspace(0, n - 1, min(points, n)).round().astype(int))
    return {
        "window": window,
        "timestep": [int(t) for t in episodes.timestep[picks]],
        "mean_return": [float(v) for v in smooth[picks]],
    }


def build_summary(
    progress: ProgressRecord | None,
    episodes: Episodes,
    evaluation: list[tuple[int, float]],
    sources: dict[str, dict[str, Any] | None],
) -> dict[str, Any]:
    """A run's summary (a JSON mapping) from its records: ``progress`` (progress.json, None when absent), its
    training ``episodes``, its ``evaluation`` rounds (``(timestep, mean return)``) and ``sources`` (for each
    of :data:`~rlcloud.layout.SUMMARY_SOURCES`, ``{"size", "crc32c"}`` of the record read, None when absent)."""
    import numpy as np

    n = len(episodes)
    tail = episodes.ret[-CURVE_WINDOW:]
    times = episodes.time[~np.isnan(episodes.time)] if n else episodes.time
    return {
        "version": SUMMARY_VERSION,
        "progress": dict(progress) if progress is not None else None,
        "episodes": n,
        "last_timestep": int(episodes.timestep[-1]) if n else None,
        "objective": float(tail.mean()) if n else None,
        "objective_window": CURVE_WINDOW,
        "wall_time": float(times.max()) if len(times) else None,
        "evaluation": [[int(at), float(mean)] for at, mean in evaluation],
        "curve": moving_curve(episodes),
        "sources": {name: sources.get(name) for name in SUMMARY_SOURCES},
    }


def summary_is_current(summary: Any, listed: dict[str, ObjectInfo]) -> bool:
    """Whether ``summary`` (a parsed run-summary.json) may stand for the records ``listed`` (the run's stored
    objects by name): written by this version, and built from exactly the stored progress.json,
    metrics.jsonl and evaluation.jsonl (sizes and CRC32C), or their absence."""
    if not isinstance(summary, dict) or summary.get("version") != SUMMARY_VERSION:
        return False
    sources = summary.get("sources")
    if not isinstance(sources, dict):
        return False
    for name in SUMMARY_SOURCES:
        want, have = sources.get(name), listed.get(name)
        if want is None or have is None:
            if want is not have:
                return False
            continue
        if not isinstance(want, dict) or want.get("size") != have.size or want.get("crc32c") != have.crc32c:
            return False
    return True


def write_summary(workdir: Path, tallies: tuple[JsonlTally, JsonlTally] | None = None) -> dict[str, Any]:
    """Build the summary of the run in ``workdir`` from its records there and write it atomically to
    ``workdir/run-summary.json``; returns it. ``tallies``: (metrics, evaluation) readers kept between calls,
    so that each call reads only what was appended."""
    from rlcloud.errors import RecordError
    from rlcloud.storage.base import crc32c_of_bytes, tmp_sibling
    from rlcloud.stored import read_record_file

    metrics, evaluation = tallies or (JsonlTally(workdir / METRICS), JsonlTally(workdir / EVALUATION, evaluation=True))
    sources: dict[str, dict[str, Any] | None] = {METRICS: metrics.update(), EVALUATION: evaluation.update()}
    progress = None
    try:
        raw = (workdir / PROGRESS).read_bytes()
        sources[PROGRESS] = {"size": len(raw), "crc32c": crc32c_of_bytes(raw)}
        value = read_record_file(workdir / PROGRESS)
        progress = ProgressRecord.clean(value, str(workdir / PROGRESS))
    except FileNotFoundError:
        sources[PROGRESS] = None
    except (OSError, RecordError) as exc:
        logger.warning("run summary without progress: %s", exc)
        sources[PROGRESS] = None
    summary = build_summary(progress, metrics.episodes(), evaluation.evaluation_means(), sources)
    target = workdir / RUN_SUMMARY
    tmp = tmp_sibling(target)
    try:
        tmp.write_text(json.dumps(summary, separators=(",", ":")) + "\n", encoding="utf-8")
        os.replace(tmp, target)  # a reader (the syncer) sees the old summary or the new one, never a part
    finally:
        tmp.unlink(missing_ok=True)
    return summary


class SummaryHook:
    """The runner's loop hook that keeps ``run-summary.json`` in its work directory: written at each
    checkpoint and at the end, before the results syncer's hook uploads the directory (it goes first in
    the chain). A failure is logged and training goes on (the readers rebuild a missing summary)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._tallies = (JsonlTally(workdir / METRICS), JsonlTally(workdir / EVALUATION, evaluation=True))

    def _write(self) -> None:
        try:
            write_summary(self.workdir, self._tallies)
        except Exception as exc:  # a summary is derived: never worth a training run
            logger.warning("could not write %s: %s", RUN_SUMMARY, exc)

    def on_checkpoint(self, name: str) -> None:
        """A checkpoint is complete: the summary as of now."""
        self._write()

    def on_finish(self, state: str) -> None:
        """Training ended (progress.json holds the final state): the final summary."""
        self._write()
