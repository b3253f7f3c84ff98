"""Plots of episode returns (matplotlib, imported on use; the ``analysis`` extra).

:func:`plot_returns` draws one run; :func:`plot_curves` draws several configurations, each a mean curve
with a confidence band and evaluation markers, from data :mod:`rlcloud.comparison` prepared. Pure drawing:
no results are read here.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlcloud.errors import SpecError, SpecProblem, require

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The files a plot is written to, by suffix: what matplotlib's ``savefig`` writes without a ``format``.
PLOT_FORMATS = ("png", "pdf", "svg", "svgz", "jpg", "jpeg", "eps", "ps", "tif", "tiff", "webp", "pgf")


def check_plot_path(path: str | Path, *, field: str = "path") -> Path:
    """``path`` as a plot file, checked before anything is read or drawn: its suffix names a format matplotlib
    writes (``runs.png``, not ``runs.txt``). SpecError naming ``field`` (``--plot`` in the CLI) otherwise."""
    target = Path(path)
    suffix = target.suffix.lower().lstrip(".")
    if suffix not in PLOT_FORMATS:
        raise SpecError(
            [
                SpecProblem(
                    field,
                    f"a plot is written as {', '.join('.' + f for f in PLOT_FORMATS[:3])} ... "
                    f"(one of {', '.join(PLOT_FORMATS)}), by the file's suffix",
                    str(path),
                )
            ]
        )
    return target


def _save(fig: Any, path: str | Path, field: str = "path") -> None:
    """Write ``fig`` to ``path`` (its directory made); SpecError naming ``field`` when it cannot be written."""
    target = check_plot_path(path, field=field)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(str(target))
    except OSError as exc:
        raise SpecError([SpecProblem(field, f"cannot write {target}: {exc.strerror or exc}")]) from None


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
) -> Figure:
    """Episode return against timestep: each episode, its moving mean, and evaluation means if any.

    Returns the matplotlib Figure; writes a PNG to ``path`` when given. Works headless (Agg).
    """
    # A bare Figure (no pyplot) needs no GUI backend and leaves no global state behind.
    fig: Figure = _figure_class()(figsize=(8, 4.5), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    steps = [r["timestep"] for r in records]
    returns = [float(r["return"]) for r in records]
    if records:
        ax.plot(steps, returns, ".", alpha=0.25, markersize=3, label="episode return")
        ax.plot(
            steps, moving_mean(returns, window), "-", linewidth=2, label=f"mean return over the last {window} episodes"
        )
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
        _save(fig, path)
    return fig


@dataclass
class Curve:
    """One configuration's curve: ``mean`` at timesteps ``x``, an optional band (``low``..``high``) and
    evaluation rounds as ``(timestep, mean return)``."""

    label: str
    x: list[float] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    low: list[float] | None = None
    high: list[float] | None = None
    evaluation: list[tuple[float, float]] = field(default_factory=list)
    #: the evaluation markers' legend entry when the curve has no line (e.g. "evaluation mean (n=5)")
    evaluation_label: str = "evaluation mean"


def plot_curves(
    curves: Sequence[Curve],
    *,
    title: str = "",
    ylabel: str = "return",
    band_label: str = "confidence band",
    path: str | Path | None = None,
) -> Figure:
    """Draw each curve (line, shaded band, evaluation markers in the same colour) on one axes.

    ``ylabel`` says what the curves are (e.g. "IQM over seeds of the mean return over the last 20 episodes").

    Returns the matplotlib Figure; writes a PNG to ``path`` when given. Works headless (no pyplot).
    """
    fig: Figure = _figure_class()(figsize=(9, 5), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    for index, curve in enumerate(curves):
        color = f"C{index % 10}"
        if curve.x:
            ax.plot(curve.x, curve.mean, "-", color=color, linewidth=2, label=curve.label)
        if curve.x and curve.low is not None and curve.high is not None:
            ax.fill_between(curve.x, curve.low, curve.high, color=color, alpha=0.2, linewidth=0)
        if curve.evaluation:
            xs, ys = zip(*curve.evaluation, strict=True)
            ax.plot(xs, ys, "o", color=color, markersize=6, label=None if curve.x else curve.label)
    ax.set_xlabel("timestep")
    ax.set_ylabel(ylabel, fontsize="small" if len(ylabel) > 40 else None)
    ax.set_title(title or "episode returns")
    ax.grid(True, alpha=0.3)
    if curves:
        handles, labels = ax.get_legend_handles_labels()
        note = [band_label] if any(c.low is not None for c in curves) else []
        if any(c.evaluation for c in curves):
            note.append("dots: " + "; ".join(sorted({c.evaluation_label for c in curves if c.evaluation})))
        ax.legend(handles, labels, loc="lower right", fontsize="small", title="; ".join(note) or None)
    fig.tight_layout()
    if path is not None:
        _save(fig, path)
    return fig


@functools.cache
def _figure_class() -> Any:
    """The matplotlib Figure class plus ``_repr_png_``: without pyplot, IPython's inline backend is never set up, so a
    bare Figure returned to a notebook would show as "<Figure size 800x450>" instead of the plot."""
    figure: Any = require("matplotlib.figure", "analysis", feature="plotting returns").Figure

    class ReturnsFigure(figure):  # type: ignore[misc]  # matplotlib's Figure is Any until it is imported
        def _repr_png_(self) -> bytes:
            buffer = io.BytesIO()
            self.savefig(buffer, format="png")
            return buffer.getvalue()

    return ReturnsFigure
