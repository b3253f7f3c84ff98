"""One plot of many runs: per configuration, the IQM over its seeds of the mean return, with its band."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlcloud.comparison.explained import _short_value
from rlcloud.comparison.runs import RunResults, _with_episodes, load_runs
from rlcloud.comparison.statistics import confidence_interval
from rlcloud.comparison.table import _return_bounds, differing_parameters
from rlcloud.errors import require

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rlcloud.plotting import Curve


def plot_runs(
    runs: Iterable[Any] | Any,
    *,
    results: str | None = None,
    path: str | Path | None = None,
    window: int = 20,
    points: int = 200,
    confidence_level: float = 0.95,
    title: str = "",
) -> Figure:
    """One curve per configuration: the IQM over its seeds of each run's mean return over the last
    ``window`` episodes, with the IQM's interval as a band.

    Each run's moving mean of the last ``window`` episode returns is interpolated onto a common grid of
    ``points`` timesteps, from the latest first episode to the end of the shortest run of the configuration
    (so every point has every seed); the curve is the IQM over the seeds at each point (the mean of 1 or 2
    seeds), the band the ``confidence_level`` Tukey-McLaughlin interval of it (3 seeds or more: fewer have no
    interval that keeps its promise). Evaluation rounds, where the runs have them, are markers in the curve's
    colour (the mean over the runs that evaluated at that timestep; the legend gives each round's n). The
    legend names each configuration by its differing parameters and its number of seeds.

    Args:
        runs: as for :func:`compare`.
        results: the results root for run names.
        path: write a PNG there too.
        window: episodes in the moving mean.
        points: grid points per curve.
        confidence_level: of the band.
        title: the plot's title (default: the number of runs and configurations).

    Returns:
        The matplotlib Figure (shown inline in a notebook).

    Raises:
        MissingExtraError: matplotlib or scipy is not installed (the ``analysis`` extra).
    """
    from rlcloud import intervals
    from rlcloud.plotting import Curve, plot_curves

    require("matplotlib", "analysis", feature="plot_runs()")
    loaded = load_runs(runs, results=results)
    if any((run.summary.get("curve") or {}).get("window") != window for run in loaded if run.episode_count):
        _with_episodes([run for run in loaded if run.episode_count])  # curves of another window, read together
    params = differing_parameters([run.spec for run in loaded])
    bounds = _return_bounds(loaded)
    groups: dict[tuple[Any, ...], list[RunResults]] = {}
    labels: dict[tuple[Any, ...], str] = {}
    for run, values in zip(loaded, params, strict=True):
        key = tuple(values.values())
        groups.setdefault(key, []).append(run)
        labels[key] = ", ".join(f"{_short_field(k)}={_short_value(v)}" for k, v in values.items())
    curves: list[Curve] = []
    evaluated: list[int] = []  # runs behind each evaluation dot
    for key, members in groups.items():
        count = f"{len(members)} seed{'s' if len(members) != 1 else ''}"
        # one configuration: its runs differ by seed only, and "5 seeds" says what n counts
        label = f"{labels[key]} (n={len(members)})" if labels[key] else members[0].name if len(members) == 1 else count
        curve = _config_curve(Curve(label=label), members, window, points, confidence_level, bounds)
        rounds: dict[int, list[float]] = {}
        for r in members:
            for at, mean in r.evaluation_means():
                rounds.setdefault(at, []).append(mean)
        curve.evaluation = [(at, sum(v) / len(v)) for at, v in sorted(rounds.items())]
        evaluated.extend(len(v) for v in rounds.values())
        curves.append(curve)
    if evaluated:  # one legend note for all curves: the runs each evaluation dot averages
        low, high = min(evaluated), max(evaluated)
        for curve in curves:
            curve.evaluation_label = f"evaluation mean (n={low}{'' if low == high else f'-{high}'})"
    runs = f"{len(loaded)} run{'s' if len(loaded) != 1 else ''}"
    heading = title or f"{runs}, {len(groups)} configuration{'s' if len(groups) != 1 else ''}"
    return plot_curves(
        curves,
        title=heading,
        ylabel=f"IQM over seeds of the mean return over the last {window} episodes",
        band_label=f"band: {confidence_level:.0%} interval of the IQM (n >= {intervals.min_seeds('iqm', bounds)})",
        path=path,
    )


def _config_curve(
    curve: Curve,
    members: list[RunResults],
    window: int,
    points: int,
    confidence_level: float,
    bounds: tuple[float, float] | None,
) -> Curve:
    """``curve`` with one configuration's IQM over its seeds on a common grid, and its band (3 seeds or more)."""
    import numpy as np

    from rlcloud import intervals

    smooth = [r.curve(window) for r in members if r.episode_count]
    smooth = [(steps, values) for steps, values in smooth if steps]
    if smooth:
        # where every run has an episode: no point of the curve is a flat extrapolation of a run
        start = max(steps[0] for steps, _ in smooth)
        end = min(steps[-1] for steps, _ in smooth)
        grid = np.linspace(start, max(start, end), points)
        data = np.vstack([np.interp(grid, steps, values) for steps, values in smooth])
        curve.x, curve.mean = grid.tolist(), np.asarray(intervals.iqm(data.T)).tolist()
        if len(smooth) >= intervals.min_seeds("iqm", bounds):
            low, high = confidence_interval(data, confidence_level=confidence_level, axis=0, bounds=bounds)
            curve.low, curve.high = np.asarray(low).tolist(), np.asarray(high).tolist()
    return curve


def _short_field(name: str) -> str:
    # agent.learning_rate reads as learning_rate in a legend; environment.level stays whole (level is vague)
    head, _, tail = name.partition(".")
    return tail if head == "agent" and tail else name
