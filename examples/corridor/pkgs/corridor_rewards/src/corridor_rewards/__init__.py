"""Reward shaping for the corridor: a bonus for each step that brings the agent closer to the end."""

from __future__ import annotations

import numpy as np

__all__ = ["progress_bonus"]


def progress_bonus(before: int, after: int, width: int, scale: float = 0.05) -> float:
    """``scale`` times the fraction of the corridor gained by a step (negative for a step back)."""
    return float(scale * np.sign(after - before) / max(1, width - 1))
