"""A run's files in its work directory: records written atomically, JSONL records read back and truncated on
resume, and which checkpoints can be restored (rlcloud.runner.loop's module docstring says when)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlcloud.layout import CHECKPOINT_STATE, CHECKPOINTS, LATEST

__all__ = ["CheckpointError", "atomic_write_text", "latest_checkpoint", "read_jsonl", "restorable_checkpoints"]

logger = logging.getLogger("rlcloud.runner.loop")


def atomic_write_text(path: Path, text: str, *, fsync: bool = False) -> None:
    """Write ``text`` to ``path`` via a temporary file and ``os.replace`` (readers never see half)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSONL file (the run's own, maybe restored from a shared store: input), each line bounded
    (rlcloud.stored); a line that is not a record (a torn last line after a crash mid-write) is skipped."""
    from rlcloud.stored import parse_record_lines

    if not path.exists():
        return []
    skipped: list[str] = []
    with open(path, "rb") as fh:
        records = parse_record_lines(fh.read(), source=path.name, skipped=skipped)
    for why in skipped:
        logger.warning("skipping %s", why)
    return records


def _truncate_jsonl(path: Path, keep: Callable[[dict[str, Any]], bool]) -> int:
    """Keep the records ``keep`` accepts (a record it cannot judge is dropped); replace the file atomically
    (tmp + fsync + rename): a crash leaves the old file or the new one, never a mix."""
    records = read_jsonl(path)
    kept = []
    for record in records:
        try:
            if isinstance(record, dict) and keep(record):
                kept.append(record)
        except (TypeError, ValueError, OverflowError):
            continue
    if path.exists() and len(kept) != len(records):
        atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in kept), fsync=True)
    return len(records) - len(kept)


def _within(record: dict[str, Any], episode_key: str, timestep_key: str, episode: int, timestep: int) -> bool:
    """Whether an episode record lies at or before (``episode``, ``timestep``): the checkpoint resumed."""
    return int(record.get(episode_key, 0)) <= episode and int(record.get(timestep_key, 0)) <= timestep


class CheckpointError(RuntimeError):
    """No checkpoint of the work directory can be restored (each one named, with why); nothing was trained."""


def restorable_checkpoints(workdir: Path) -> list[str]:
    """The complete checkpoints of ``workdir`` in the order to try them: the one LATEST names first, then
    the others newest first (the fallbacks when the latest cannot be restored)."""
    root = Path(workdir) / CHECKPOINTS
    try:
        complete = sorted(
            (p.name for p in root.iterdir() if p.name.startswith("ckpt-") and (p / CHECKPOINT_STATE).is_file()),
            reverse=True,
        )
    except OSError:
        return []
    latest = latest_checkpoint(workdir)
    return ([latest] if latest else []) + [name for name in complete if name != latest]


def latest_checkpoint(workdir: Path) -> str | None:
    """Name of the latest complete checkpoint in ``workdir`` (what LATEST names), or None."""
    latest = Path(workdir) / LATEST
    try:
        name = latest.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    if not name or not (latest.parent / name / CHECKPOINT_STATE).exists():
        logger.warning("LATEST names %r, which is not a complete checkpoint; starting fresh", name)
        return None
    return name
