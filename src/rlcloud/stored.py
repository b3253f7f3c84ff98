"""The bounded reader of stored records: what rlcloud reads back is input, like a spec.

A results prefix may be shared (a bucket others write to, a directory copied from elsewhere), so a run's
``spec.yaml`` of record, ``history.jsonl``, ``progress.json`` and ``metrics.jsonl``, the local backend's state
files and a sweep's records are read here, within the bounds of :mod:`rlcloud.specs.safeload` (size, nesting,
YAML aliases, number length). A record that fails them is refused with a :class:`~rlcloud.errors.RecordError`
naming the file, or, for one line of a JSON-lines record, skipped and described: never a hang, a memory
blow-up or a traceback.

Light on purpose (the local supervisor reads its run's state with it): YAML and the spec bounds are imported
only when a YAML record is read.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from rlcloud.errors import RecordError, excerpt

__all__ = [
    "MAX_NAME_RECORD_BYTES",
    "MAX_RECORD_BYTES",
    "MAX_RECORD_DEPTH",
    "MAX_RECORD_LINE",
    "MAX_RECORD_VALUES",
    "parse_record",
    "parse_record_lines",
    "read_record_file",
]

#: Largest single-object record (a spec of record, progress.json, a state file), in bytes: a spec's bound
#: (rlcloud.specs.safeload.MAX_BYTES), far above what rlcloud writes (a few KiB).
MAX_RECORD_BYTES = 256 * 1024
#: Largest record that holds one name (checkpoints/LATEST).
MAX_NAME_RECORD_BYTES = 1024
#: Longest line of a JSON-lines record (metrics.jsonl, history.jsonl); an episode record is ~150 bytes.
MAX_RECORD_LINE = 64 * 1024
#: Deepest nesting and most values of a record: a spec's bounds (rlcloud.specs.safeload).
MAX_RECORD_DEPTH = 64
MAX_RECORD_VALUES = 200_000


def _text(data: bytes | str, source: str, limit: int) -> str:
    if len(data) > limit:
        raise RecordError(f"{source}: larger than {limit // 1024} KiB, not a record rlcloud writes; not read")
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise RecordError(f"{source}: not UTF-8 text, not a record rlcloud writes") from None


def _shape_problem(value: Any) -> str | None:
    """Why ``value`` (parsed JSON: no cycles) is too deep or too large, or None (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    count = 0
    while stack:
        item, level = stack.pop()
        count += 1
        if count > MAX_RECORD_VALUES:
            return f"more than {MAX_RECORD_VALUES} values"
        if level > MAX_RECORD_DEPTH:
            return f"nested more than {MAX_RECORD_DEPTH} levels deep"
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return None


def _loads(text: str) -> tuple[Any, str | None]:
    """``json.loads`` within the bounds: (value, None) or (None, why not). NaN and Infinity are what Python
    writes for a diverged return: accepted here, judged by the record's reader."""
    try:
        value = json.loads(text)
    except RecursionError:
        return None, f"nested more than {MAX_RECORD_DEPTH} levels deep"
    except ValueError as exc:  # invalid or torn JSON, a number over Python's 4300 digits
        return None, f"invalid JSON: {excerpt(str(exc), 120, quote=False)}"
    return value, _shape_problem(value)


def parse_record(data: bytes | str, *, source: str, form: str = "json", expect: type | None = dict) -> Any:
    """Parse one stored record (``form``: "json" or "yaml") within a spec's bounds: at most
    :data:`MAX_RECORD_BYTES`, no YAML alias bomb or cycle, no deep nesting, no endless number, and (``expect``)
    of the type rlcloud writes there. :class:`~rlcloud.errors.RecordError` naming ``source`` otherwise."""
    text = _text(data, source, MAX_RECORD_BYTES)
    if form == "yaml":
        from rlcloud.errors import SpecError
        from rlcloud.specs.safeload import parse_data_text

        try:
            value = parse_data_text(text, source=source)
        except SpecError as exc:
            reason = exc.problems[0].message if exc.problems else str(exc)
            raise RecordError(f"{source}: not a record rlcloud reads ({reason})") from None
    else:
        value, why = _loads(text)
        if why is not None:
            raise RecordError(f"{source}: not a record rlcloud reads ({why})")
    if expect is not None and not isinstance(value, expect):
        what = "a mapping" if expect is dict else expect.__name__
        raise RecordError(f"{source}: holds {type(value).__name__}, expected {what}; not a record rlcloud writes")
    return value


def parse_record_lines(data: bytes | str, *, source: str, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines record (metrics.jsonl, history.jsonl), each line within the bounds
    (:data:`MAX_RECORD_LINE`, nesting, number length). A line that is not one (torn by a writer mid-append,
    planted, too deep) is skipped and described in ``skipped`` as ``"<source> line N: why"``."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    out: list[dict[str, Any]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if len(line) > MAX_RECORD_LINE:
            why: str | None = f"longer than {MAX_RECORD_LINE // 1024} KiB"
        else:
            value, why = _loads(line)
            if why is None and not isinstance(value, dict):
                why = f"holds {type(value).__name__}, not an object"
            if why is None:
                out.append(value)
        if why is not None and skipped is not None:
            skipped.append(f"{source} line {number}: {why}")
    return out


def read_record_file(path: Path, *, form: str = "json", expect: type | None = dict, follow_links: bool = False) -> Any:
    """A record of a local run directory (state.json, progress.json, sweep.yaml...) read and parsed within the
    bounds of :func:`parse_record`. Only a regular file is read, never a FIFO or a device, and never through a
    symbolic link (a link in a run directory may point anywhere) unless ``follow_links`` (a file of the user's
    own, like a kubeconfig). FileNotFoundError when it is absent; RecordError naming it otherwise."""
    source = str(path)
    nofollow = 0 if follow_links else getattr(os, "O_NOFOLLOW", 0)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | nofollow
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:  # ELOOP: a symbolic link
        reason = exc.strerror or type(exc).__name__
        raise RecordError(f"{source}: cannot read it ({reason}); a record is a regular file, not a link") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise RecordError(f"{source}: not a regular file; not a record rlcloud writes")
        raw = handle.read(MAX_RECORD_BYTES + 1)
    return parse_record(raw, source=source, form=form, expect=expect)
