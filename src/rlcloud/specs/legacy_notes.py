"""How legacy import reports what it mapped: :class:`LegacySpecWarning` notes, collected while a spec file is
read (:func:`collecting_notes`) and emitted as warnings that point at the file and line of the key
(:func:`emit_notes`). The converters (rlcloud.specs.legacy, rlcloud.specs.legacy_agent) report through
:func:`_warn`.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlcloud.errors import SpecError, SpecProblem

__all__ = ["LegacyNote", "LegacySpecWarning", "collecting_notes", "emit_notes"]


class LegacySpecWarning(UserWarning):
    """A tensorforce-client setting was mapped to its rlcloud / Tensorforce 0.6 equivalent (or dropped)."""


# ------------------------------------------------------------------------------------------------ notes


@dataclass(frozen=True)
class LegacyNote:
    """One reported mapping: the key it is about (``agent.memory``) and what became of it."""

    key: str
    message: str


_NOTES: ContextVar[list[LegacyNote] | None] = ContextVar("rlcloud_legacy_notes", default=None)


def _warn(message: str, key: str = "") -> None:
    """Report a mapping: collected while a spec file is read (see :func:`collecting_notes`), else a warning.

    Outside a collection (a converter called directly) the warning points at the caller's caller, not here.
    """
    collected = _NOTES.get()
    if collected is not None:
        collected.append(LegacyNote(key or message.split(" ", 1)[0], message))
        return
    warnings.warn(message, LegacySpecWarning, stacklevel=3)


@contextmanager
def collecting_notes() -> Iterator[list[LegacyNote]]:
    """Collect the notes of the conversions run inside, instead of warning at once (nests: inner ones pass up)."""
    outer = _NOTES.get()
    notes: list[LegacyNote] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)
        if outer is not None:
            outer.extend(notes)


def _line_of(path: str, key: str) -> int:
    """The first line of ``path`` that holds the key's last part (``"memory"`` or ``memory:``), else 1."""
    name = re.sub(r"\[\d+\]$", "", key.rsplit(".", 1)[-1])
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return 1
    for pattern in (f'"{name}"', f"{name}:"):
        for number, line in enumerate(lines, 1):
            if pattern in line:
                return number
    return 1


def emit_notes(notes: list[LegacyNote], source: str | None, part_sources: Mapping[str, str] | None = None) -> None:
    """Warn once per note, as if from the spec file that holds the key (so Python shows that file and line).

    ``part_sources`` maps ``agent``/``network``/``environment``/``cluster`` to the file they were read from
    when the spec referenced one; other keys belong to ``source``.
    """
    seen: set[str] = set()
    for note in notes:
        if note.message in seen:
            continue
        seen.add(note.message)
        part = note.key.split(".", 1)[0].split("[", 1)[0]
        filename = (part_sources or {}).get(part) or source or "<spec>"
        lineno = _line_of(filename, note.key) if filename and not filename.startswith("<") else 1
        text = note.message if source is None or filename == source else f"{note.message} (in {source})"
        warnings.warn_explicit(text, LegacySpecWarning, filename, lineno, module="rlcloud.specs.legacy")


def _warn_at(key: str, message: str) -> None:
    _warn(message, key)


def _count(value: Any, field: str) -> int:
    """A whole count from a legacy number such as 1e6 (JSON floats); anything else is a SpecError."""
    number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if number and value == int(value) and value >= 1:
        return int(value)
    raise SpecError([SpecProblem(field, "must be a whole number >= 1", value)])
