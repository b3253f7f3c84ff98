"""How a sweep names and tells apart its trials: values as short text (``lr3e-4--bs10--seed2``), the keys that
make two trials the same, and the lists of trial names in messages (rlcloud.specs.sweep builds on them)."""

from __future__ import annotations

import itertools
import json
import math
import re
from typing import Any

from rlcloud.specs._base import MAX_NAME_LENGTH

__all__ = [
    "abbreviate",
    "label_part",
    "numbered",
    "pair_key",
    "round_sampled",
    "value_key",
    "value_text",
    "which_trials",
]


def round_sampled(value: Any) -> Any:
    """Sampled floats to 4 significant digits: readable names, and the same value on every machine."""
    return float(f"{value:.4g}") if isinstance(value, float) else value


def value_text(value: Any) -> str:
    """A parameter value as a trial name and a table show it: ``3e-4``, ``0.001``, ``true``."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)  # inf, -inf, nan: no mantissa to shorten (the agent's checks refuse them later)
        if value != 0 and not 1e-2 <= abs(value) < 1e5:
            mantissa, exponent = f"{value:.3e}".split("e")
            return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"  # 3e-4, not 3.000e-04
        return f"{value:g}"
    return str(value)


def abbreviate(key: str) -> str:
    """A parameter's short name in trial names: ``agent.learning_rate`` -> ``lr``, ``seed`` -> ``seed``."""
    last = key.rsplit(".", 1)[-1].lower()
    words = [w for w in re.split(r"[_\-]+", last) if w]
    if len(words) > 1:
        return "".join(w[0] for w in words)  # learning_rate -> lr, batch_size -> bs
    return last[:10]


def label_part(text: str) -> str:
    """``text`` as part of a DNS-1123 label (``0.001`` -> ``0p001``)."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower().replace(".", "p").replace("+", "")).strip("-")


def which_trials(names: list[str], of: int) -> str:
    """``trial A``, ``trials A, B, C``, ``trials A, B, C and 5 more`` or ``every trial (8)``."""
    if len(names) == of and of > 1:
        return f"every trial ({of})"
    if len(names) == 1:
        return f"trial {names[0]}"
    shown = ", ".join(names[:3])
    return f"trials {shown}" + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def numbered(name: str, index: int, taken: set[str]) -> str:
    """``name`` numbered by trial ``index`` (``-7``, else ``-7-1``, ...): the first such name not ``taken``."""
    for extra in itertools.count():
        suffix = f"-{index}" if extra == 0 else f"-{index}-{extra}"
        candidate = name[: MAX_NAME_LENGTH - len(suffix)].rstrip("-") + suffix
        if candidate not in taken:
            return candidate
    raise AssertionError("unreachable")  # itertools.count() never ends


def value_key(value: Any) -> str:
    """A value as the key that tells trials apart (1 and 1.0 differ, as their experiments' specs may)."""
    if isinstance(value, bool | int | float | str) or value is None:
        return f"{type(value).__name__}:{value!r}"
    return json.dumps([type(value).__name__, value], sort_keys=True, default=str)


def pair_key(config: dict[str, Any], seed: int) -> tuple[Any, ...]:
    """What makes a trial: its parameter values and its seed (the same pair is never run twice)."""
    return (*((k, value_key(v)) for k, v in sorted(config.items())), seed)
