"""Many runs side by side: one row per run, statistics over seeds per configuration, one plot.

    from rlcloud import compare
    table = compare(["ppo-lr3-s1", "ppo-lr3-s2", "ppo-lr4-s1", "ppo-lr4-s2"], results="gs://bucket/rl")
    compare(table, by="config")                # n, mean, IQM and a 95% bootstrap CI per configuration
    plot_runs(runs, path="compare.png")        # mean return over seeds with its confidence band

A run is an :class:`~rlcloud.experiment.Experiment`, a run's name under ``results`` (the results root), or
a results location (a directory or ``gs://bucket/prefix/name``). Each run is read from its own store:
``spec.yaml``, ``progress.json``, ``metrics.jsonl`` and ``evaluation.jsonl``, four reads and nothing else,
several runs at a time. The configurations are told apart by the spec fields that differ between the runs
(dotted paths such as ``agent.learning_rate``), seeds apart; a group of runs that differ only in their seed
is one configuration.

The per-run table needs only the client install (pandas); the statistics over seeds and the plots need the
``analysis`` extra (scipy, matplotlib).
"""

from __future__ import annotations

import logging
import math
import os
import sys
import types
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rlcloud.errors import NotFoundError, SpecError, StorageError, require
from rlcloud.results import is_gcs, results_location, results_root

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "RUN_COLUMNS",
    "SUMMARY_COLUMNS",
    "RunResults",
    "compare",
    "load_runs",
    "plot_runs",
    "records",
    "summarize",
]

Objective = Literal["mean_return", "evaluation"]

#: The per-run columns after ``run`` and the differing parameters (``compare()``'s table), in order.
RUN_COLUMNS: tuple[str, ...] = (
    "seed",
    "state",
    "timesteps",
    "episodes",
    "objective",
    "final_evaluation",
    "wall_time",
    "steps_per_second",
    "location",
)
#: The statistics columns after the parameters (``summarize()``'s table), in order.
SUMMARY_COLUMNS: tuple[str, ...] = ("n", "mean", "iqm", "ci_low", "ci_high", "seeds")

# Spec fields that make two runs different configurations: what is learned and for how long. Where the
# results went, the resources, schedules and descriptions do not change a run's outcome; the seed is a
# column of its own and is what a configuration's runs are grouped over.
_CONFIG_FIELDS = (
    "environment",
    "agent",
    "network",
    "run_mode",
    "num_workers",
    "num_parameter_servers",
    "max_timesteps_per_episode",
    "repeat_actions",
    "deterministic",
    "episodes",
    "total_timesteps",
)
logger = logging.getLogger(__name__)
_READ_THREADS = 16  # concurrent run reads: gs:// latency, not bandwidth, is what many small reads cost


@dataclass
class RunResults:
    """What one run's results location holds, read once: the spec of record, progress and episodes."""

    name: str
    location: str
    spec: dict[str, Any] | None
    progress: dict[str, Any] | None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    evaluation: list[dict[str, Any]] = field(default_factory=list)

    @property
    def seed(self) -> Any:
        """The spec's seed (None when unseeded or no spec was recorded)."""
        return (self.spec or {}).get("seed")

    def training_objective(self, window: int = 20) -> float:
        """Mean return of the last ``window`` training episodes (NaN before the first episode)."""
        returns = [float(r["return"]) for r in self.metrics if "return" in r]
        return sum(returns[-window:]) / len(returns[-window:]) if returns else math.nan

    def evaluation_means(self) -> list[tuple[int, float]]:
        """``(timestep, mean return)`` of each evaluation round, in timestep order."""
        rounds: dict[int, list[float]] = {}
        for r in self.evaluation:
            if "return" in r:
                at = r.get("at_timestep", r.get("timestep", 0))
                rounds.setdefault(int(at), []).append(float(r["return"]))
        return [(at, sum(v) / len(v)) for at, v in sorted(rounds.items())]

    def final_evaluation(self) -> float:
        """Mean return of the last evaluation round (NaN when none ran)."""
        means = self.evaluation_means()
        return means[-1][1] if means else math.nan


# ----------------------------------------------------------------------------------------------- reading


def _location_of(run: Any, root: str) -> str:
    location = getattr(run, "location", None)
    if isinstance(location, str):  # an Experiment (or any object that knows its results location)
        return location
    if isinstance(run, os.PathLike):
        run = os.fspath(run)
    if not isinstance(run, str) or not run:
        raise SpecError(f"a run is an Experiment, a run name or a results location, not {run!r}")
    if is_gcs(run):
        return run.rstrip("/")
    path = Path(run).expanduser()
    if "/" in run or run.startswith("."):
        return str(path.resolve())
    return results_location(root, run)


def load_runs(runs: Iterable[Any] | Any, *, results: str | None = None) -> list[RunResults]:
    """Read each run's results (spec, progress, training and evaluation episodes), several at a time.

    Args:
        runs: Experiments, run names (looked up under ``results``) or results locations; one run alone
            is accepted too, and runs read before (:class:`RunResults`) are returned as they are.
        results: the results root that run names are under (default: the project's, else
            ./rlcloud-results).

    Returns:
        One :class:`RunResults` per run, in the order given.

    Raises:
        NotFoundError: a run has no results at all (no spec, progress or metrics).
    """
    if isinstance(runs, str | os.PathLike) or hasattr(runs, "location"):
        runs = [runs]
    runs = list(runs)
    if all(isinstance(run, RunResults) for run in runs):  # read already: a table and a plot of the same runs
        return runs
    root = results_root(None, results) if any(isinstance(r, str) for r in runs) else (results or "")
    locations = [_location_of(run, root) for run in runs]
    if not locations:
        return []
    with ThreadPoolExecutor(max_workers=min(_READ_THREADS, len(locations))) as pool:
        return list(pool.map(_read_run, locations))


def _read_run(location: str) -> RunResults:
    from rlcloud.record import read_record
    from rlcloud.storage import open_store
    from rlcloud.storage.client import read_evaluation, read_metrics, read_progress

    store = open_store(location)  # one store (one client) per run
    spec = read_record(store)
    try:
        progress = read_progress(store)
    except StorageError as exc:  # one run's unreadable progress never stops the table of many
        logger.warning("run %s: progress ignored: %s", location, exc)
        progress = None
    metrics = read_metrics(store)  # lines that are no episode record are skipped with a warning
    if spec is None and progress is None and not metrics:
        raise NotFoundError(f"no results in {location} (no spec.yaml, progress.json or metrics.jsonl)")
    name = str((spec or {}).get("name") or location.rstrip("/").rsplit("/", 1)[-1])
    return RunResults(name, location, spec, progress, metrics, read_evaluation(store))


# --------------------------------------------------------------------------------------------- the table


def differing_parameters(specs: Sequence[dict[str, Any] | None]) -> list[dict[str, Any]]:
    """For each spec, the configuration fields (dotted paths) whose values differ between the specs.

    Fields outside the configuration (name, seed, results, resources, schedules) are not compared. A
    field absent from a spec (or its default, when the field has one) is None.
    """
    from rlcloud.specs.identity import diff_specs

    dumped = [{k: v for k, v in (spec or {}).items() if k in _CONFIG_FIELDS} for spec in specs]
    if not dumped:
        return []
    first = dumped[0]
    changes = [{c.field: c for c in diff_specs(first, other)} for other in dumped]
    fields = sorted({name for run in changes for name in run if name.split(".", 1)[0] in _CONFIG_FIELDS})
    reference: dict[str, Any] = {}
    for run in changes:  # the first run's value of each field, as diff_specs saw it (defaults included)
        for name in fields:
            if name in run and name not in reference:
                reference[name] = _plain(run[name].before)
    return [{name: _plain(run[name].after) if name in run else reference[name] for name in fields} for run in changes]


def _plain(value: Any) -> Any:
    if type(value) is object:  # diff_specs' marker for "absent from this spec"
        return None
    if isinstance(value, dict | list):
        import json

        return json.dumps(value, sort_keys=True)  # one cell, hashable for grouping
    return value


def compare(
    runs: Iterable[Any] | Any,
    *,
    results: str | None = None,
    objective: Objective = "mean_return",
    window: int = 20,
    by: Literal["run", "config"] = "run",
    confidence_level: float = 0.95,
) -> pd.DataFrame:
    """Compare runs: one row per run, or with ``by="config"`` one row per configuration over its seeds.

    Args:
        runs: Experiments, run names (under ``results``) or results locations (directories or gs:// URLs);
            or a table this function returned before (then only the grouping is done).
        results: the results root for run names (default: the project's, else ./rlcloud-results).
        objective: what "objective" is: ``"mean_return"`` the mean return of the last ``window`` training
            episodes, ``"evaluation"`` the mean return of the last evaluation round (as in a SweepSpec).
        window: training episodes in the ``"mean_return"`` objective.
        by: ``"run"`` for the per-run table, ``"config"`` for :func:`summarize` of it.
        confidence_level: of the bootstrap interval with ``by="config"``.

    Returns:
        By run: ``run`` (the run's name), the parameters that differ between the runs (dotted spec fields,
        e.g. ``agent.learning_rate``), then :data:`RUN_COLUMNS`. ``table.attrs`` holds
        ``parameters`` (those column names) and ``objective``. By config: see :func:`summarize`.

    Raises:
        NotFoundError: a run has no results.
        MissingExtraError: ``by="config"`` without scipy (the ``analysis`` extra).
    """
    import pandas as pd

    if isinstance(runs, pd.DataFrame):
        table = runs
    else:
        if objective not in ("mean_return", "evaluation"):
            raise SpecError(f"objective must be 'mean_return' or 'evaluation', not {objective!r}")
        table = run_table(load_runs(runs, results=results), objective=objective, window=window)
    if by == "config":
        return summarize(table, confidence_level=confidence_level)
    if by != "run":
        raise SpecError(f"by must be 'run' or 'config', not {by!r}")
    return table


def run_table(loaded: Sequence[RunResults], *, objective: Objective = "mean_return", window: int = 20) -> pd.DataFrame:
    """The per-run table of :func:`compare` for runs already read with :func:`load_runs`."""
    import pandas as pd

    params = differing_parameters([run.spec for run in loaded])
    parameters = list(params[0]) if params else []
    rows = []
    for run, values in zip(loaded, params, strict=True):
        progress = run.progress or {}
        last = run.metrics[-1] if run.metrics else {}
        timesteps = progress.get("timestep", last.get("timestep", 0))
        episodes = progress.get("episode", len(run.metrics))
        wall_time = max((float(r["time"]) for r in run.metrics if "time" in r), default=math.nan)
        speed = progress.get("steps_per_second")
        if speed is None and wall_time > 0:
            speed = timesteps / wall_time
        final_evaluation = run.final_evaluation()
        value = final_evaluation if objective == "evaluation" else run.training_objective(window)
        rows.append(
            {
                "run": run.name,
                **values,
                "seed": run.seed,
                "state": progress.get("state", "unknown"),
                "timesteps": int(timesteps or 0),
                "episodes": int(episodes or 0),
                "objective": value,
                "final_evaluation": final_evaluation,
                "wall_time": wall_time,
                "steps_per_second": math.nan if speed is None else float(speed),
                "location": run.location,
            }
        )
    table = pd.DataFrame(rows, columns=["run", *parameters, *RUN_COLUMNS])
    table.attrs["parameters"] = parameters
    table.attrs["objective"] = objective
    return table


def records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows as plain dicts for JSON/YAML: NaN becomes None (JSON has no NaN), numpy scalars Python's."""
    out = []
    for row in table.to_dict(orient="records"):
        out.append({str(k): _json_value(v) for k, v in row.items()})
    return out


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    item = getattr(value, "item", None)  # numpy scalars
    return _json_value(item()) if callable(item) and not isinstance(value, list | dict | str) else value


# ---------------------------------------------------------------------------------------- over seeds


def summarize(table: pd.DataFrame, *, value: str = "objective", confidence_level: float = 0.95) -> pd.DataFrame:
    """Statistics of ``value`` over the seeds of each configuration in a :func:`compare` table.

    One row per configuration (the table's differing parameters; all runs are one configuration when none
    differ): ``n`` runs, ``mean``, ``iqm`` (interquartile mean, ``scipy.stats.trim_mean`` cutting 25% at
    each end), ``ci_low``/``ci_high`` (a percentile bootstrap interval of the mean from
    ``scipy.stats.bootstrap``, seeded, so the same table gives the same interval) and the ``seeds``. Runs
    without a value (NaN: no episode yet) are left out of the statistics. One value has no interval (NaN
    bounds); equal values have the value itself as both bounds.

    Raises:
        MissingExtraError: scipy is not installed (the ``analysis`` extra).
    """
    import pandas as pd

    stats = require("scipy.stats", "analysis", feature="statistics over seeds (compare(by='config'))")
    parameters = [p for p in table.attrs.get("parameters", []) if p in table.columns]
    groups = table.groupby(parameters, dropna=False, sort=False) if parameters else [((), table)]
    rows = []
    for key, group in groups:
        values = group[value].dropna().astype(float).to_numpy()
        low, high = confidence_interval(values, confidence_level=confidence_level)
        keys = key if isinstance(key, tuple) else (key,)
        rows.append(
            {
                **dict(zip(parameters, keys, strict=True)),
                "n": len(values),
                "mean": float(values.mean()) if len(values) else math.nan,
                "iqm": float(stats.trim_mean(values, 0.25)) if len(values) else math.nan,
                "ci_low": low,
                "ci_high": high,
                "seeds": list(group["seed"]),
            }
        )
    summary = pd.DataFrame(rows, columns=[*parameters, *SUMMARY_COLUMNS])
    summary.attrs["parameters"] = parameters
    summary.attrs["objective"] = table.attrs.get("objective", value)
    return summary


def confidence_interval(
    values: Any, *, confidence_level: float = 0.95, n_resamples: int = 2000, seed: int = 0, axis: int = 0
) -> tuple[Any, Any]:
    """A percentile bootstrap interval of the mean along ``axis`` (``scipy.stats.bootstrap``).

    Fewer than two values: NaN bounds. Where all values are equal the interval is that value (scipy would
    warn about degenerate data and return NaN). Deterministic for a given ``seed``.
    """
    import numpy as np

    stats = require("scipy.stats", "analysis", feature="bootstrap confidence intervals")
    data = np.asarray(values, dtype=float)
    if data.shape[axis] < 2:
        shape = np.delete(np.array(data.shape), axis)
        nan = np.full(tuple(shape), np.nan)
        return (float("nan"), float("nan")) if nan.ndim == 0 else (nan, nan.copy())
    spread = np.ptp(data, axis=axis)
    with warnings.catch_warnings():
        # the equal-valued positions are handled below; scipy's warning about them is not news
        warnings.simplefilter("ignore", getattr(stats, "DegenerateDataWarning", RuntimeWarning))
        warnings.simplefilter("ignore", RuntimeWarning)
        result = stats.bootstrap(
            (data,),
            np.mean,
            axis=axis,
            vectorized=True,
            confidence_level=confidence_level,
            n_resamples=n_resamples,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    low, high = result.confidence_interval.low, result.confidence_interval.high
    mean = data.mean(axis=axis)
    low, high = np.where(spread == 0, mean, low), np.where(spread == 0, mean, high)
    if np.ndim(low) == 0:
        return float(low), float(high)
    return low, high


# ----------------------------------------------------------------------------------------------- plots


def plot_runs(
    runs: Iterable[Any] | Any,
    *,
    results: str | None = None,
    path: str | Path | None = None,
    window: int = 20,
    points: int = 200,
    confidence_level: float = 0.95,
    title: str = "",
) -> Any:
    """One curve per configuration: the mean over its seeds of the moving-mean return, with a bootstrap band.

    Each run's moving mean of the last ``window`` episode returns is interpolated onto a common grid of
    ``points`` timesteps, from the latest first episode to the end of the shortest run of the configuration
    (so every point averages every seed); the band is the ``confidence_level`` bootstrap interval of that
    mean. Evaluation rounds, where the runs have them, are markers in the curve's colour (the mean over the
    runs that evaluated at that timestep). The legend names each configuration by its differing parameters
    and its number of runs.

    Args:
        runs: as for :func:`compare`.
        results: the results root for run names.
        path: write a PNG there too.
        window: episodes in the moving mean.
        points: grid points per curve.
        confidence_level: of the band.
        title: the plot's title (default: the objective and the number of runs).

    Returns:
        The matplotlib Figure (shown inline in a notebook).

    Raises:
        MissingExtraError: matplotlib or scipy is not installed (the ``analysis`` extra).
    """
    import numpy as np

    from rlcloud.plotting import Curve, moving_mean, plot_curves

    require("matplotlib", "analysis", feature="plot_runs()")
    loaded = load_runs(runs, results=results)
    params = differing_parameters([run.spec for run in loaded])
    groups: dict[tuple[Any, ...], list[RunResults]] = {}
    labels: dict[tuple[Any, ...], str] = {}
    for run, values in zip(loaded, params, strict=True):
        key = tuple(values.values())
        groups.setdefault(key, []).append(run)
        labels[key] = ", ".join(f"{_short_field(k)}={_short_value(v)}" for k, v in values.items())
    curves: list[Curve] = []
    for key, members in groups.items():
        with_episodes = [r for r in members if r.metrics]
        label = f"{labels[key] or (members[0].name if len(groups) == 1 else 'all runs')} (n={len(members)})"
        curve = Curve(label=label)
        if with_episodes:
            # where every run has an episode: no point of the curve is a flat extrapolation of a run
            start = max(float(r.metrics[0]["timestep"]) for r in with_episodes)
            end = min(float(r.metrics[-1]["timestep"]) for r in with_episodes)
            grid = np.linspace(start, max(start, end), points)
            rows = []
            for r in with_episodes:
                steps = [float(m["timestep"]) for m in r.metrics]
                smooth = moving_mean([float(m["return"]) for m in r.metrics], window)
                rows.append(np.interp(grid, steps, smooth))
            data = np.vstack(rows)
            low, high = confidence_interval(data, confidence_level=confidence_level, axis=0)
            curve.x, curve.mean = grid.tolist(), data.mean(axis=0).tolist()
            if len(rows) > 1:
                curve.low, curve.high = np.asarray(low).tolist(), np.asarray(high).tolist()
        rounds: dict[int, list[float]] = {}
        for r in members:
            for at, mean in r.evaluation_means():
                rounds.setdefault(at, []).append(mean)
        curve.evaluation = [(at, sum(v) / len(v)) for at, v in sorted(rounds.items())]
        curves.append(curve)
    heading = title or f"mean return of the last {window} episodes over seeds ({len(loaded)} runs)"
    return plot_curves(curves, title=heading, band_label=f"{confidence_level:.0%} CI", path=path)


def _short_field(name: str) -> str:
    # agent.learning_rate reads as learning_rate in a legend; environment.level stays whole (level is vague)
    head, _, tail = name.partition(".")
    return tail if head == "agent" and tail else name


def _short_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


class _CallableModule(types.ModuleType):
    """This module, callable as :func:`compare`.

    ``rlcloud.compare`` names both this module and its main function. Python sets a package's attribute to
    the submodule whenever the submodule is first imported (``import rlcloud.compare``, or a module that
    uses it), which would replace a re-exported function depending on import order. Making the module
    itself callable gives one object either way: ``rlcloud.compare(runs)`` and
    ``rlcloud.compare.plot_runs(runs)``.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> pd.DataFrame:
        return compare(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
