"""Plots of an experiment's episode returns (matplotlib, imported on use)."""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def moving_mean(values: Sequence[float], window: int) -> list[float]:
    """Mean of the last ``window`` values at each point (shorter at the start)."""
    out: list[float] = []
    total = 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def plot_returns(
    records: Sequence[dict[str, Any]],
    evaluation: Sequence[dict[str, Any]] = (),
    *,
    title: str = "",
    window: int = 20,
    path: str | Path | None = None,
) -> Any:
    """Episode return against timestep: each episode, its moving mean, and evaluation means if any.

    Returns the matplotlib Figure; writes a PNG to ``path`` when given. Works headless (Agg).
    """
    # A bare Figure (no pyplot) needs no GUI backend and leaves no global state behind.
    fig = _figure_class()(figsize=(8, 4.5), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    steps = [r["timestep"] for r in records]
    returns = [float(r["return"]) for r in records]
    if records:
        ax.plot(steps, returns, ".", alpha=0.25, markersize=3, label="episode return")
        ax.plot(steps, moving_mean(returns, window), "-", linewidth=2, label=f"mean of last {window}")
    if evaluation:
        by_step: dict[int, list[float]] = {}
        for r in evaluation:
            by_step.setdefault(int(r.get("at_timestep", r["timestep"])), []).append(float(r["return"]))
        xs = sorted(by_step)
        ax.plot(xs, [sum(by_step[x]) / len(by_step[x]) for x in xs], "o-", label="evaluation mean")
    ax.set_xlabel("timestep")
    ax.set_ylabel("return")
    ax.set_title(title or "episode returns")
    ax.grid(True, alpha=0.3)
    if records or evaluation:
        ax.legend(loc="lower right")
    fig.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(str(path))
    return fig


@functools.cache
def _figure_class() -> Any:
    """matplotlib's Figure plus ``_repr_png_``: without pyplot, IPython's inline backend is never set up, so a
    bare Figure returned to a notebook would show as "<Figure size 800x450>" instead of the plot."""
    from matplotlib.figure import Figure

    class ReturnsFigure(Figure):
        def _repr_png_(self) -> bytes:
            buffer = io.BytesIO()
            self.savefig(buffer, format="png")
            return buffer.getvalue()

    return ReturnsFigure
