"""Many runs side by side: one row per run, statistics over seeds per configuration, one plot.

    from rlcloud import compare
    table = compare(["ppo-lr3-s1", "ppo-lr3-s2", "ppo-lr4-s1", "ppo-lr4-s2"], results="gs://bucket/rl")
    compare(table, by="config")                # n, IQM, mean, median, each with its 95% interval
    plot_runs(runs, path="compare.png")        # IQM over seeds of the return, with its interval as a band

A run is an :class:`~rlcloud.experiment.Experiment`, a run's name under ``results`` (the results root), or
a results location (a directory or ``gs://bucket/prefix/name``). Each location is listed once (a sweep's
trials in one listing) and each run's ``spec.yaml`` and ``run-summary.json`` are read, one request each,
many at a time, or taken from the local cache of what cannot have changed (:mod:`rlcloud.storage.runs`); a
run without a current summary is summarised from its records. The configurations are told apart by the spec
fields that differ between the runs (dotted paths such as ``agent.learning_rate``), seeds apart; a group of
runs that differ only in their seed is one configuration.

The per-run table needs only the client install (pandas); the statistics over seeds and the plots need the
``analysis`` extra (scipy, matplotlib).
"""

from __future__ import annotations

import functools
import logging
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rlcloud.errors import NotFoundError, SpecError, require
from rlcloud.layout import CURVES, DECISIONS, POPULATION, ProgressRecord
from rlcloud.results import is_gcs, results_location, results_root

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from rlcloud.storage.summary import Episodes

__all__ = [
    "RUN_COLUMNS",
    "SUMMARY_COLUMNS",
    "Best",
    "BudgetError",
    "RunResults",
    "best",
    "compare",
    "load_runs",
    "performance_profiles",
    "plot_runs",
    "records",
    "summarize",
    "time_to_threshold",
]

Objective = Literal["mean_return", "evaluation"]
Budgets = Literal["refuse", "common", "complete"]

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
SUMMARY_COLUMNS: tuple[str, ...] = (
    "n",
    "iqm",
    "iqm_low",
    "iqm_high",
    "mean",
    "mean_low",
    "mean_high",
    "median",
    "median_low",
    "median_high",
    "seeds_needed",
    "seeds",
    "notes",
)

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


@dataclass
class RunResults:
    """What one run's results location holds, read once: the spec of record and the run's summary (progress,
    objective, evaluation rounds, a curve: :mod:`rlcloud.storage.summary`); its training episodes as arrays
    only when something needs them (another window or budget), read then."""

    name: str
    location: str
    spec: dict[str, Any] | None
    progress: ProgressRecord | None
    #: the run's summary (run-summary.json, or built from its records where that is missing or not current)
    summary: dict[str, Any] = field(default_factory=dict)
    #: the sweep this run is a trial of, when it was named by its sweep (``compare SWEEP``)
    sweep: str | None = None
    _episodes: Episodes | None = field(default=None, repr=False)

    @property
    def seed(self) -> Any:
        """The spec's seed (None when unseeded or no spec was recorded)."""
        return (self.spec or {}).get("seed")

    @property
    def episodes(self) -> Episodes:
        """The training episodes (timestep, return, time arrays), read from metrics.jsonl on first use."""
        if self._episodes is None:
            from rlcloud.storage.runs import read_episodes

            self._episodes = read_episodes([self.location])[0]
        return self._episodes

    @property
    def episode_count(self) -> int:
        """Training episodes recorded."""
        return int(self.summary.get("episodes") or 0)

    def training_objective(self, window: int = 20, until: float | None = None) -> float:
        """Mean return of the last ``window`` training episodes (NaN before the first episode); with
        ``until``, of the last ``window`` episodes that ended by that timestep."""
        if until is None and window == self.summary.get("objective_window"):
            value = self.summary.get("objective")
            return math.nan if value is None else float(value)
        episodes = self.episodes
        returns = episodes.ret if until is None else episodes.ret[episodes.timestep <= until]
        tail = returns[-window:]
        return float(tail.mean()) if len(tail) else math.nan

    def evaluation_means(self) -> list[tuple[int, float]]:
        """``(timestep, mean return)`` of each evaluation round, in timestep order."""
        return [(int(at), float(mean)) for at, mean in self.summary.get("evaluation") or []]

    def final_evaluation(self, until: float | None = None) -> float:
        """Mean return of the last evaluation round (NaN when none ran); with ``until``, of the last round
        at or before that timestep."""
        means = [m for at, m in self.evaluation_means() if until is None or at <= until]
        return means[-1] if means else math.nan

    def curve(self, window: int) -> tuple[list[float], list[float]]:
        """(timesteps, moving mean of the last ``window`` returns): the summary's curve for its window, else
        computed from the episodes."""
        stored = self.summary.get("curve") or {}
        if stored.get("window") == window:
            return [float(t) for t in stored.get("timestep", [])], [float(v) for v in stored.get("mean_return", [])]
        from rlcloud.plotting import moving_mean

        episodes = self.episodes
        return episodes.timestep.tolist(), moving_mean(episodes.ret.tolist(), window)


# ----------------------------------------------------------------------------------------------- reading


def _location_of(run: Any, root: str) -> str:
    location = getattr(run, "location", None)
    if isinstance(location, str):  # an Experiment (or any object that knows its results location)
        return location
    if isinstance(run, os.PathLike):
        run = os.fspath(run)
    if not isinstance(run, str) or not run:
        raise SpecError(f"a run is an Experiment, a Sweep, a run name or a results location, not {run!r}")
    if is_gcs(run):
        return run.rstrip("/")
    path = Path(run).expanduser()
    if run.startswith((".", "/", "~")) or ("/" in run and path.exists()):
        return str(path.resolve())
    return results_location(root, run)  # a name: RUN, SWEEP or SWEEP/TRIAL under the results root


def _sweep_trials(run: Any) -> list[str] | None:
    """A Sweep's trial names in its own order (it stands for its started trials); None for anything else."""
    spec = getattr(run, "spec", None)
    if spec is not None and callable(getattr(run, "experiments", None)) and callable(getattr(spec, "trials", None)):
        return [name for name, _, _ in spec.trial_table()]
    return None


def load_runs(runs: Iterable[Any] | Any, *, results: str | None = None) -> list[RunResults]:
    """Read each run's results (spec of record and summary), several at a time.

    A location is listed once (a sweep's too: its trials' records in one listing) and each run's spec and
    summary are read in one request each, concurrently, or taken from the local cache of objects that
    cannot have changed (:mod:`rlcloud.storage.runs`). A run whose summary is missing or older than its
    records is summarised from its records.

    Args:
        runs: Experiments, Sweeps (each stands for its started trials), run names (``RUN``, ``SWEEP`` or
            ``SWEEP/TRIAL``, looked up under ``results``) or results locations (a sweep's location stands for
            its trials; its ``decisions/`` (or older ``curves/``) directory, as a shell's ``SWEEP/*`` lists it, is
            skipped); one run
            alone is accepted too, and runs read before (:class:`RunResults`) are returned as they are.
        results: the results root that run names are under (default: the project's, else
            ./rlcloud-results).

    Returns:
        One :class:`RunResults` per run (per trial for a sweep), in the order given.

    Raises:
        NotFoundError: a run has no results at all (no spec, progress or metrics) and is not a sweep.
    """
    from rlcloud.storage.runs import read_locations

    if isinstance(runs, str | os.PathLike) or hasattr(runs, "location"):
        runs = [runs]
    runs = list(runs)
    if runs and all(isinstance(run, RunResults) for run in runs):  # read already: a table and a plot of them
        return runs
    root = results_root(None, results) if any(isinstance(r, str) for r in runs) else (results or "")
    locations = [_location_of(run, root) for run in runs]
    if not locations:
        return []
    found = read_locations(locations, trials=[_sweep_trials(run) for run in runs])
    out: list[RunResults] = []
    for location, got in zip(locations, found, strict=True):
        if isinstance(got, NotFoundError):
            if location.rstrip("/").rsplit("/", 1)[-1] in (CURVES, DECISIONS, POPULATION):  # decisions' records
                continue
            raise got
        if isinstance(got, Exception):
            raise got
        for record in got:
            name = str((record.spec or {}).get("name") or record.location.rstrip("/").rsplit("/", 1)[-1])
            out.append(
                RunResults(name, record.location, record.spec, record.progress, record.summary, sweep=record.sweep)
            )
    return out


def _with_episodes(loaded: Sequence[RunResults]) -> None:
    """Read the episodes of the runs that have not had them yet, concurrently (not one run after another)."""
    from rlcloud.storage.runs import read_episodes

    todo = [run for run in loaded if run._episodes is None]
    for run, episodes in zip(todo, read_episodes([run.location for run in todo]), strict=True):
        run._episodes = episodes


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
    budgets: Budgets = "refuse",
    repeated_seeds: bool = False,
    threshold: float | None = None,
) -> pd.DataFrame:
    """Compare runs: one row per run, or with ``by="config"`` one row per configuration over its seeds.

    Args:
        runs: Experiments, run names (under ``results``) or results locations (directories or gs:// URLs);
            or a table this function returned before (then only the grouping is done).
        results: the results root for run names (default: the project's, else ./rlcloud-results).
        objective: what "objective" is: ``"mean_return"`` the mean return of the last ``window`` training
            episodes, ``"evaluation"`` the mean return of the last evaluation round (as in a SweepSpec).
        window: training episodes in the ``"mean_return"`` objective and in the running mean that
            ``threshold`` is reached by.
        by: ``"run"`` for the per-run table, ``"config"`` for :func:`summarize` of it.
        confidence_level: of the intervals with ``by="config"``.
        budgets: what to do with runs that trained less than the others (still running, stopped early,
            failed, or short of their spec's ``total_timesteps``): ``"refuse"`` (default) flags them
            (``attrs["short_runs"]``) and refuses statistics over seeds that would average them with full
            runs; ``"common"`` takes every run's objective at the common budget (the fewest timesteps any run
            reached); ``"complete"`` leaves the short runs out (``attrs["left_out"]``).
        repeated_seeds: allow a configuration to hold two runs with the same seed (refused by default: the
            same seed twice counts one outcome twice).
        threshold: a return to reach: adds ``threshold_timesteps`` and ``threshold_wall_time``, when the mean
            return of the last ``window`` episodes first reached it (NaN: never, a censored run), and with
            ``by="config"`` the share of seeds that reached it and the median time over seeds
            (:func:`summarize`).

    Returns:
        By run: ``run`` (the run's name), the parameters that differ between the runs (dotted spec fields,
        e.g. ``agent.learning_rate``), then :data:`RUN_COLUMNS`. ``table.attrs`` holds
        ``parameters`` (those column names), ``objective`` and ``return_bounds`` (the environment's, when
        known: :func:`rlcloud.intervals.return_bounds`). By config: see :func:`summarize`.

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
        table = run_table(
            load_runs(runs, results=results),
            objective=objective,
            window=window,
            budgets=budgets,
            repeated_seeds=repeated_seeds,
            threshold=threshold,
        )
    if by == "config":
        return summarize(table, confidence_level=confidence_level)
    if by != "run":
        raise SpecError(f"by must be 'run' or 'config', not {by!r}")
    return table


def run_table(
    loaded: Sequence[RunResults],
    *,
    objective: Objective = "mean_return",
    window: int = 20,
    budgets: Budgets = "refuse",
    repeated_seeds: bool = False,
    threshold: float | None = None,
) -> pd.DataFrame:
    """The per-run table of :func:`compare` for runs already read with :func:`load_runs` (``budgets``,
    ``repeated_seeds`` and ``threshold`` as there)."""
    import pandas as pd

    if budgets not in ("refuse", "common", "complete"):
        raise SpecError(f"budgets must be 'refuse', 'common' or 'complete', not {budgets!r}")
    params = differing_parameters([run.spec for run in loaded])
    parameters = list(params[0]) if params else []
    reached = [_reached(run) for run in loaded]
    short = [_short(run, steps, reached, parameters) for run, steps in zip(loaded, reached, strict=True)]
    common = min(reached) if reached else 0
    if (budgets == "common" and any(short)) or any(window != run.summary.get("objective_window") for run in loaded):
        _with_episodes(loaded)  # the objective at another budget or window: from the episodes, read together
    rows = []
    left_out = []
    for run, values, steps, why in zip(loaded, params, reached, short, strict=True):
        if why and budgets == "complete":
            left_out.append(f"{run.name} ({why})")
            continue
        progress = ProgressRecord.of(run.progress)
        episodes = progress.episode if "episode" in progress else run.episode_count
        wall = run.summary.get("wall_time")
        wall_time = math.nan if wall is None else float(wall)
        speed = progress.steps_per_second
        if speed is None and wall_time > 0:
            speed = steps / wall_time
        until = common if budgets == "common" and any(short) else None
        final_evaluation = run.final_evaluation(until)
        value = final_evaluation if objective == "evaluation" else run.training_objective(window, until)
        rows.append(
            {
                "run": run.name,
                **values,
                "seed": run.seed,
                "state": progress.state or "unknown",
                "timesteps": int(steps or 0),
                "episodes": int(episodes or 0),
                "objective": value,
                "final_evaluation": final_evaluation,
                "wall_time": wall_time,
                "steps_per_second": math.nan if speed is None else float(speed),
                "location": run.location,
            }
        )
    table = _explained_frame(pd.DataFrame(rows, columns=["run", *parameters, *RUN_COLUMNS]))
    table.attrs["parameters"] = parameters
    table.attrs["objective"] = objective
    table.attrs["budgets"] = budgets
    table.attrs["repeated_seeds"] = repeated_seeds
    table.attrs["short_runs"] = [f"{run.name} ({why})" for run, why in zip(loaded, short, strict=True) if why]
    table.attrs["left_out"] = left_out
    if budgets == "common" and any(short):
        table.attrs["common_budget"] = int(common)
    table.attrs["return_bounds"] = _return_bounds(loaded)
    if threshold is not None:
        _add_time_to_threshold(table, loaded, threshold, window, common if budgets == "common" and any(short) else None)
    return table


def _return_bounds(loaded: Sequence[RunResults]) -> tuple[float, float] | None:
    """The episode return bounds every run shares (:func:`rlcloud.intervals.return_bounds`; the widest when
    they differ), None when any run's environment has none known."""
    from rlcloud.intervals import return_bounds

    found = [
        return_bounds((r.spec or {}).get("environment"), (r.spec or {}).get("max_timesteps_per_episode"))
        for r in loaded
    ]
    known = [b for b in found if b is not None]
    if not found or len(known) < len(found):
        return None
    return (min(b[0] for b in known), max(b[1] for b in known))


def _add_time_to_threshold(
    table: pd.DataFrame, loaded: Sequence[RunResults], threshold: float, window: int, until: float | None
) -> None:
    """Per run, the timestep and wall time at which the mean return of the last ``window`` episodes first
    reached ``threshold`` (NaN: not reached by the run's last episode, or by ``until``)."""
    by_name = {run.name: run for run in loaded}
    _with_episodes([by_name[name] for name in table["run"]])  # every run's episodes, read together
    steps, times = [], []
    for name in table["run"]:
        at = time_to_threshold(by_name[name].episodes, threshold, window=window, until=until)
        steps.append(at[0])
        times.append(at[1])
    table["threshold_timesteps"] = steps
    table["threshold_wall_time"] = times
    table.attrs["threshold"] = float(threshold)
    table.attrs["threshold_window"] = window


def time_to_threshold(
    episodes: Episodes | Sequence[dict[str, Any]], threshold: float, *, window: int = 20, until: float | None = None
) -> tuple[float, float]:
    """``(timestep, wall time)`` at which the mean return of the last ``window`` episodes first reached
    ``threshold``, from one run's episodes (:class:`~rlcloud.storage.summary.Episodes`, or ``metrics.jsonl``
    records: ``timestep``, ``return``, ``time``); ``(nan, nan)`` when it never did (by ``until``, when given).
    The mean needs ``window`` episodes: a lucky first episode is not a solved task."""
    import numpy as np

    from rlcloud.storage.summary import Episodes

    if window < 1:
        raise SpecError(f"window must be a whole number >= 1, not {window!r}")
    if not isinstance(episodes, Episodes):
        episodes = Episodes.of_records(list(episodes))
    stop = len(episodes.ret) if until is None else int(np.searchsorted(episodes.timestep, until, side="right"))
    if stop < window:
        return math.nan, math.nan
    sums = np.cumsum(episodes.ret[:stop], dtype=float)
    means = (sums[window - 1 :] - np.concatenate(([0.0], sums[: stop - window]))) / window
    reached = np.flatnonzero(means >= threshold)
    if not reached.size:
        return math.nan, math.nan
    at = int(reached[0]) + window - 1
    return float(episodes.timestep[at]), float(episodes.time[at])


def _reached(run: RunResults) -> int:
    progress = ProgressRecord.of(run.progress)
    reached = progress.timestep if "timestep" in progress else run.summary.get("last_timestep")
    return int(reached or 0)


def _short(run: RunResults, steps: int, reached: Sequence[int], parameters: Sequence[str]) -> str:
    """Why this run trained less than the others ("" when it did not). Runs that all stopped at about the
    same timestep (2%: episodes end where they end) have the same budget, whatever their state."""
    if not reached or steps >= 0.98 * max(reached):
        return ""
    state = ProgressRecord.of(run.progress).state or "unknown"
    budget = (run.spec or {}).get("total_timesteps")
    if state != "succeeded":
        return f"{state} at {steps:,} timesteps"
    if isinstance(budget, int) and steps < budget:
        return f"{steps:,} of {budget:,} timesteps"
    if "total_timesteps" not in parameters and "episodes" not in parameters:
        # succeeded on a smaller budget than the others (an episode budget, or none recorded): not comparable
        return f"{steps:,} timesteps, the longest run {max(reached):,}"
    return ""


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


#: Reasons a summary cell is empty, in a few words, per column family (the ``notes`` column holds them).
_REASON_SEP = "; "


def summarize(
    table: pd.DataFrame,
    *,
    value: str = "objective",
    confidence_level: float = 0.95,
    statistic: str = "iqm",
) -> pd.DataFrame:
    """Statistics of ``value`` over the seeds of each configuration in a :func:`compare` table.

    One row per configuration (the table's differing parameters; all runs are one configuration when none
    differ): ``n`` runs; the ``iqm`` (interquartile mean), ``mean`` and ``median``, each with its own
    interval (``<statistic>_low``/``<statistic>_high``, :mod:`rlcloud.intervals`: Tukey-McLaughlin for the
    IQM, order statistics for the median, bootstrap-t for the mean, each measured to cover at least 90% at
    a nominal 95% on capped, tied, bimodal, skewed and heavy-tailed returns by
    benchmarks/interval_coverage.py, and never beyond the environment's return bounds,
    ``table.attrs["return_bounds"]``, or the seeds' range when those are unknown); where the bounds are
    known, ``at_max`` (the share of seeds at the highest return, with its exact binomial interval
    ``at_max_low``/``at_max_high``); where the table has time to threshold (``compare(threshold=...)``),
    ``reached`` (the share of seeds that reached it, with its exact binomial interval) and the median over
    seeds of ``threshold_timesteps`` and ``threshold_wall_time`` with their order-statistic intervals (a
    seed that never reached it counts as later than any that did); ``seeds_needed``, the seeds per
    configuration at which this configuration's ``statistic`` interval and the best one's would no longer
    overlap at the observed difference and spreads (:func:`rlcloud.intervals.seeds_needed`: the rule
    :func:`best` calls "separated"); the ``seeds``; and ``notes``: why each empty cell of the row is empty.
    Runs without a value (NaN: no episode yet) are left out of the statistics.

    ``summary.attrs["notes"]`` has the reasons in full (the CLI prints them under the table); in a notebook
    an empty cell shows its reason, never a bare NaN.

    Raises:
        MissingExtraError: scipy is not installed (the ``analysis`` extra).
    """
    import pandas as pd

    from rlcloud import intervals

    require("scipy.stats", "analysis", feature="statistics over seeds (compare(by='config'))")
    if statistic not in intervals.STATISTICS:
        raise SpecError(f"statistic must be one of {', '.join(intervals.STATISTICS)}, not {statistic!r}")
    parameters = [p for p in table.attrs.get("parameters", []) if p in table.columns]
    _check_guards(table, parameters)
    bounds = _bounds_of(table, value)
    timed = "threshold_timesteps" in table.columns
    groups = table.groupby(parameters, dropna=False, sort=False) if parameters else [((), table)]
    rows = []
    reasons: list[dict[str, str]] = []
    notes: dict[str, str] = {}
    samples = []
    for key, group in groups:
        values = group[value].dropna().astype(float).to_numpy()
        samples.append(values)
        keys = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = {**dict(zip(parameters, keys, strict=True)), "n": len(values)}
        why: dict[str, str] = {}
        for name in intervals.STATISTICS:
            found = intervals.estimate(values, name, confidence_level, bounds=bounds)
            row[name], row[f"{name}_low"], row[f"{name}_high"] = found.value, found.low, found.high
            if found.short:
                why[name] = found.short
            if found.note and len(values):
                notes[name] = found.note
        if bounds is not None:
            at_max = int((values >= bounds[1]).sum())
            row["at_max"] = at_max / len(values) if len(values) else math.nan
            row["at_max_low"], row["at_max_high"] = intervals.share_interval(at_max, len(values), confidence_level)
            if not len(values):
                why["at_max"] = "no value"
        if timed:
            _time_to_threshold_row(group, row, why, confidence_level)
        row["seeds"] = list(group["seed"])
        rows.append(row)
        reasons.append(why)
    ranked = [r[statistic] for r in rows]
    top = max(range(len(rows)), key=lambda i: -math.inf if math.isnan(ranked[i]) else ranked[i]) if rows else 0
    for i, row in enumerate(rows):
        needed = None
        if i == top:
            reasons[i]["seeds_needed"] = f"best by {statistic}"
        elif rows[top][f"{statistic}_low"] > row[f"{statistic}_high"]:  # NaN compares False: not judged
            reasons[i]["seeds_needed"] = "separated from the best already"
        else:
            needed = intervals.seeds_needed(
                samples[top], samples[i], statistic=statistic, confidence_level=confidence_level, bounds=bounds
            )
            if needed is None:
                reasons[i]["seeds_needed"] = _why_no_seeds_needed(samples[top], samples[i], statistic)
            else:  # the projection is approximate; intervals that overlap now need more seeds than they have
                needed = max(needed, len(samples[top]) + 1, len(samples[i]) + 1)
        row["seeds_needed"] = math.nan if needed is None else needed
        row["notes"] = _REASON_SEP.join(f"{column}: {text}" for column, text in reasons[i].items())
    extra = [*(AT_MAX_COLUMNS if bounds is not None else ()), *(THRESHOLD_COLUMNS if timed else ())]
    columns = [*parameters, *SUMMARY_COLUMNS[:10], *extra, *SUMMARY_COLUMNS[10:]]
    summary = _explained_frame(pd.DataFrame(rows, columns=columns))
    summary.attrs["parameters"] = parameters
    summary.attrs["objective"] = table.attrs.get("objective", value)
    summary.attrs["statistic"] = statistic
    summary.attrs["confidence_level"] = confidence_level
    summary.attrs["return_bounds"] = bounds
    summary.attrs["notes"] = [f"no {name} interval: {why}" for name, why in notes.items()]
    if bounds is None and value in _RETURNS:
        summary.attrs["notes"].append(
            "the environment's return bounds are unknown (rlcloud.intervals.RETURN_BOUNDS): no interval reaches "
            "beyond the seeds' own range"
        )
    if table.attrs.get("left_out"):
        summary.attrs["notes"].append("left out (budgets='complete'): " + ", ".join(table.attrs["left_out"]))
    if "common_budget" in table.attrs:
        summary.attrs["notes"].append(
            f"every run compared at the common budget of {table.attrs['common_budget']:,} timesteps "
            f"(budgets='common'; shorter: {', '.join(table.attrs['short_runs'])})"
        )
    if len(rows) > 1:
        summary.attrs["notes"].append(
            f"seeds to separate (seeds_needed): seeds per configuration at which its {statistic} interval and the "
            f"best one's would no longer overlap, at the observed difference and spreads"
        )
    return summary


#: The values that are episode returns (the environment's return bounds hold for them).
_RETURNS = ("objective", "final_evaluation")
#: Columns :func:`summarize` adds after the median's when the environment's return bounds are known.
AT_MAX_COLUMNS: tuple[str, ...] = ("at_max", "at_max_low", "at_max_high")
#: Columns :func:`summarize` adds after the median's for a table with time to threshold.
THRESHOLD_COLUMNS: tuple[str, ...] = (
    "reached",
    "reached_low",
    "reached_high",
    "threshold_timesteps",
    "threshold_timesteps_low",
    "threshold_timesteps_high",
    "threshold_wall_time",
    "threshold_wall_time_low",
    "threshold_wall_time_high",
)


def _bounds_of(table: pd.DataFrame, value: str) -> tuple[float, float] | None:
    bounds = table.attrs.get("return_bounds")
    if value not in _RETURNS or bounds is None:
        return None
    return (float(bounds[0]), float(bounds[1]))


def _why_no_seeds_needed(best_values: Any, values: Any, statistic: str) -> str:
    if min(len(best_values), len(values)) < 2:
        return "fewer than 2 seeds: no spread to go by"
    from rlcloud import intervals

    if intervals.estimate(values, statistic).value >= intervals.estimate(best_values, statistic).value:
        return "no lead to separate"
    return "more than 1,000 seeds"


def _time_to_threshold_row(group: pd.DataFrame, row: dict[str, Any], why: dict[str, str], level: float) -> None:
    """The configuration's time to threshold: the share of seeds that reached it (exact binomial interval)
    and the median over seeds of when (order-statistic interval; a seed that never reached it is later than
    every seed that did, so the median and its bounds are exact while enough seeds reached it)."""
    import numpy as np

    from rlcloud import intervals

    steps = group["threshold_timesteps"].astype(float).to_numpy()
    n = len(steps)
    reached = int(np.isfinite(steps).sum())
    row["reached"] = reached / n if n else math.nan
    row["reached_low"], row["reached_high"] = intervals.share_interval(reached, n, level)
    for column in ("threshold_timesteps", "threshold_wall_time"):
        times = np.sort(np.where(np.isnan(steps), np.inf, group[column].astype(float).to_numpy()))
        row[column] = float(np.median(times)) if n else math.nan
        low, high = intervals.median_interval(times, level) if n else (math.nan, math.nan)
        row[f"{column}_low"], row[f"{column}_high"] = low, high
        if not math.isfinite(row[column]):
            row[column] = math.nan
            why[column] = "half the seeds or more never reached it"
        elif math.isnan(low):
            why[f"{column}_low"] = f"needs {intervals.MIN_SEEDS['median']} seeds"
        if math.isinf(high):
            row[f"{column}_high"] = math.nan
            why[f"{column}_high"] = "too few seeds reached it: later than the budget"


def _explained_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as a :class:`pandas.DataFrame` whose notebook view shows each empty cell's reason (from its
    row's ``notes``) instead of NaN; data, columns and dtypes are the frame's own."""
    explained = _explained_class()
    return explained(frame)


@functools.cache
def _explained_class() -> type[pd.DataFrame]:
    import pandas as pd  # built on first use: pandas is not imported with rlcloud

    class ExplainedFrame(pd.DataFrame):  # type: ignore[misc]  # pandas is untyped here
        """A DataFrame whose HTML view (a notebook's) shows why a cell is empty instead of NaN."""

        @property
        def _constructor(self) -> Any:
            return ExplainedFrame

        def _repr_html_(self) -> str | None:
            html: str | None = pd.DataFrame(explain(self))._repr_html_()
            return html

    # pickled as rlcloud.comparison.ExplainedFrame, which the module's __getattr__ builds in a new process
    ExplainedFrame.__module__ = __name__
    ExplainedFrame.__qualname__ = "ExplainedFrame"
    return ExplainedFrame


def __getattr__(name: str) -> Any:
    if name == "ExplainedFrame":  # built on first use (pandas); found here by pickle
        return _explained_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def row_reasons(notes: Any) -> dict[str, str]:
    """A summary row's ``notes`` as ``{column: reason}`` (a statistic's reason covers its bounds)."""
    out: dict[str, str] = {}
    if not isinstance(notes, str):
        return out
    for part in notes.split(_REASON_SEP):
        column, _, text = part.partition(": ")
        if text:
            out[column] = text
    return out


#: Why a per-run cell is empty, by column (the per-run table has no ``notes`` column).
RUN_REASONS: dict[str, str] = {
    "objective": "no episode yet",
    "final_evaluation": "no evaluation round",
    "wall_time": "no episode time",
    "steps_per_second": "not recorded",
    "seed": "unseeded",
    "threshold_timesteps": "not reached",
    "threshold_wall_time": "not reached",
}


def explain(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of a table for people: each NaN replaced by its reason in parentheses, ``"(needs 3 seeds)"``:
    in a summary the reason its row's ``notes`` gives for that column, in a per-run table the column's
    (:data:`RUN_REASONS`); other values as they are (object columns)."""
    out = frame.astype(object)
    notes = frame["notes"] if "notes" in frame.columns else [None] * len(frame)
    for i, row_notes in enumerate(notes):
        why = row_reasons(row_notes)
        for j, column in enumerate(frame.columns):
            cell = frame.iat[i, j]
            if isinstance(cell, float) and math.isnan(cell):
                base = str(column).removesuffix("_low").removesuffix("_high")
                text = why.get(str(column)) or why.get(base) or RUN_REASONS.get(str(column))
                out.iat[i, j] = f"({text})" if text else "-"
    return out


@dataclass
class Best:
    """The best configuration by a statistic over seeds, and whether its lead is outside the intervals.

    ``str(best)`` is one sentence for people; the fields are for code. The statistic that ranks is the one
    whose intervals decide ``separated`` and whose ``seeds_needed`` is given.
    """

    statistic: str
    parameters: dict[str, Any]
    value: float
    low: float
    high: float
    n: int
    #: the second-best configuration's parameters and statistic (None when there is one configuration)
    runner_up: dict[str, Any] | None = None
    runner_up_value: float = math.nan
    runner_up_low: float = math.nan
    runner_up_high: float = math.nan
    runner_up_n: int = 0
    #: True when the best's interval lies wholly above the runner-up's; None when either has no interval
    separated: bool | None = None
    #: why ``separated`` is None (which interval is missing, and why)
    why_not_judged: str = ""
    #: P(a run of the best beats a run of the runner-up), rliable's probability of improvement, with interval
    probability_of_improvement: float = math.nan
    probability_of_improvement_low: float = math.nan
    probability_of_improvement_high: float = math.nan
    #: seeds per configuration at which the two ``statistic`` intervals would no longer overlap at the
    #: observed difference and spreads; None when they are separated already or too many would be needed
    seeds_needed: int | None = None
    #: where the return bounds are known: seeds at the highest return, of n, for the best and the runner-up
    at_max: tuple[int, int] | None = None
    runner_up_at_max: tuple[int, int] | None = None
    max_return: float = math.nan
    notes: list[str] = field(default_factory=list)
    #: the command that acts on the advice (a sweep's best(): ``rlcloud sweep extend NAME --seeds N``), or None
    next_step: str | None = None

    def advice(self) -> str:
        """What would settle an unseparated lead: the one place the advice sentence is built."""
        if self.seeds_needed is None:
            return ""
        return f"~{self.seeds_needed} seeds each would separate them at this spread" + _next_step(self)

    def verdict(self) -> str:
        """Whether the lead is outside the intervals, in words (a clause of :meth:`__str__`)."""
        if self.separated is None:
            return f"the lead cannot be judged: {self.why_not_judged or 'an interval is missing'}"
        if self.separated:
            return "separated: the best's interval lies above the runner-up's"
        return "not separated: the intervals overlap"

    def __str__(self) -> str:
        def name(params: dict[str, Any] | None) -> str:
            return ", ".join(f"{k}={_short_value(v)}" for k, v in (params or {}).items()) or "the only configuration"

        def interval(low: float, high: float) -> str:
            return "no interval" if math.isnan(low) else f"95% interval {low:.4g}..{high:.4g}"

        text = f"best by {self.statistic}: {name(self.parameters)}: {self.value:.4g} "
        text += f"({interval(self.low, self.high)}, n={self.n})"
        if self.runner_up is None:
            return text
        text += (
            f"; runner-up {name(self.runner_up)}: {self.runner_up_value:.4g} "
            f"({interval(self.runner_up_low, self.runner_up_high)}, n={self.runner_up_n})"
        )
        text += "; " + self.verdict()
        if self.at_max is not None and self.runner_up_at_max is not None and self.at_max[0] + self.runner_up_at_max[0]:
            best_share, second_share = _share(*self.at_max), _share(*self.runner_up_at_max)
            text += f"; at the maximum return {self.max_return:g}: {best_share} vs {second_share}"
        if not math.isnan(self.probability_of_improvement):
            text += f"; P(improvement) {self.probability_of_improvement:.2f}"
            if math.isnan(self.probability_of_improvement_low):
                from rlcloud.intervals import MIN_SEEDS

                text += f" (no interval below {MIN_SEEDS['probability_of_improvement']} runs each)"
            else:
                text += f" ({self.probability_of_improvement_low:.2f}..{self.probability_of_improvement_high:.2f})"
        advice = self.advice()
        return text + (f"; {advice}" if advice else "")


def _share(k: int, n: int) -> str:
    """``k of n seeds (95% interval a%..b%)``: the exact binomial interval of a share."""
    from rlcloud import intervals

    low, high = intervals.share_interval(k, n)
    return f"{k} of {n} seeds ({low:.0%}..{high:.0%})"


def _next_step(found: Best) -> str:
    """What ends the advice: the command that follows it (`` (rlcloud sweep extend NAME --seeds N)``), if any."""
    return f" ({found.next_step})" if found.next_step else ""


def best(
    table: pd.DataFrame, *, statistic: str = "iqm", value: str = "objective", confidence_level: float = 0.95
) -> Best:
    """The configuration with the highest ``statistic`` over its seeds in a :func:`compare` table, and how
    sure that is: each interval, whether they are separated, the probability of improvement over the
    runner-up and, when they are not separated, the seeds that would separate them: all by ``statistic``.

    Raises:
        SpecError: no run has a value, or ``statistic`` is not one of iqm, mean, median.
    """
    from rlcloud import intervals

    summary = summarize(table, value=value, confidence_level=confidence_level, statistic=statistic)
    parameters = summary.attrs["parameters"]
    bounds = summary.attrs["return_bounds"]
    ranked = summary[summary[statistic].notna()].sort_values(statistic, ascending=False, kind="stable")
    if ranked.empty:
        raise SpecError("no run has a value of the objective yet: nothing to rank")
    samples = _samples(table, parameters, value)
    top = ranked.iloc[0]
    top_key = tuple(top[p] for p in parameters)
    found = Best(
        statistic=statistic,
        parameters={p: _json_value(top[p]) for p in parameters},
        value=float(top[statistic]),
        low=float(top[f"{statistic}_low"]),
        high=float(top[f"{statistic}_high"]),
        n=int(top["n"]),
        notes=list(summary.attrs["notes"]),
    )
    if len(ranked) < 2:
        return found
    second = ranked.iloc[1]
    second_key = tuple(second[p] for p in parameters)
    found.runner_up = {p: _json_value(second[p]) for p in parameters}
    found.runner_up_value = float(second[statistic])
    found.runner_up_low = float(second[f"{statistic}_low"])
    found.runner_up_high = float(second[f"{statistic}_high"])
    found.runner_up_n = int(second["n"])
    x, y = samples[top_key], samples[second_key]
    if not (math.isnan(found.low) or math.isnan(found.runner_up_high)):
        found.separated = bool(found.low > found.runner_up_high)
    else:
        missing = [
            f"{label} has no {statistic} interval ({row_reasons(row['notes']).get(statistic, 'none')})"
            for label, row, low in (("the best", top, found.low), ("the runner-up", second, found.runner_up_low))
            if math.isnan(low)
        ]
        found.why_not_judged = " and ".join(missing)
    if bounds is not None:
        found.max_return = bounds[1]
        found.at_max = (int((x >= bounds[1]).sum()), len(x))
        found.runner_up_at_max = (int((y >= bounds[1]).sum()), len(y))
    found.probability_of_improvement = intervals.probability_of_improvement(x, y)
    if min(len(x), len(y)) >= intervals.MIN_SEEDS["probability_of_improvement"]:
        low, high = intervals.probability_of_improvement_interval(x, y, confidence_level)
        found.probability_of_improvement_low, found.probability_of_improvement_high = low, high
    else:
        found.notes.append(f"no interval of P(improvement): {intervals.WHY_NO_INTERVAL['probability_of_improvement']}")
    if found.separated is not True and not math.isnan(second["seeds_needed"]):
        found.seeds_needed = int(second["seeds_needed"])  # the summary's figure, by the same statistic
    return found


def _samples(table: pd.DataFrame, parameters: list[str], value: str) -> dict[tuple[Any, ...], Any]:
    groups = table.groupby(parameters, dropna=False, sort=False) if parameters else [((), table)]
    out = {}
    for key, group in groups:
        keys = key if isinstance(key, tuple) else (key,)
        out[tuple(keys)] = group[value].dropna().astype(float).to_numpy()
    return out


def performance_profiles(
    table: pd.DataFrame,
    thresholds: Sequence[float] | None = None,
    *,
    value: str = "objective",
    points: int = 21,
    confidence_level: float = 0.95,
) -> pd.DataFrame:
    """Performance profiles as rliable defines them: per configuration, the fraction of its runs whose
    ``value`` is above each threshold, with a percentile bootstrap interval over the runs.

    Args:
        table: a :func:`compare` table.
        thresholds: the return thresholds (default: ``points`` evenly from the lowest value to the highest).
        value: the column profiled.
        points: thresholds when none are given.
        confidence_level: of the intervals.

    Returns:
        One row per configuration and threshold: the parameters, ``threshold``, ``fraction``, ``low``,
        ``high``, ``n``.
    """
    import numpy as np
    import pandas as pd

    from rlcloud import intervals

    parameters = [p for p in table.attrs.get("parameters", []) if p in table.columns]
    samples = _samples(table, parameters, value)
    every = np.concatenate([v for v in samples.values() if len(v)] or [np.zeros(0)])
    if thresholds is None:
        thresholds = np.linspace(every.min(), every.max(), points).tolist() if len(every) else []
    taus = np.asarray(thresholds, dtype=float)
    rows = []
    for key, values in samples.items():
        fractions = intervals.performance_profile(values, taus) if len(values) else np.full(len(taus), np.nan)
        low, high = intervals.performance_profile_interval(values, taus, confidence_level)
        for i, tau in enumerate(taus):
            rows.append(
                {
                    **dict(zip(parameters, key, strict=True)),
                    "threshold": float(tau),
                    "fraction": float(fractions[i]),
                    "low": float(low[i]),
                    "high": float(high[i]),
                    "n": len(values),
                }
            )
    frame = pd.DataFrame(rows, columns=[*parameters, "threshold", "fraction", "low", "high", "n"])
    frame.attrs["parameters"] = parameters
    return frame


class BudgetError(SpecError):
    """Runs of different budgets, or a repeated seed, would be averaged together: choose what to do."""


def _check_guards(table: pd.DataFrame, parameters: list[str]) -> None:
    short = table.attrs.get("short_runs", [])
    if short and table.attrs.get("budgets", "refuse") == "refuse":
        raise BudgetError(
            f"{len(short)} of {len(table)} runs trained less than the others: {', '.join(short)}. Averaging them "
            "with full runs compares different budgets: compare every run at the common budget "
            "(budgets='common', --budgets common) or leave the short runs out (budgets='complete', "
            "--budgets complete)"
        )
    if table.attrs.get("repeated_seeds", False) or "seed" not in table.columns:
        return
    keyed = table[table["seed"].notna()]
    columns = [*parameters, "seed"]
    repeated = keyed[keyed.duplicated(columns, keep=False)]
    if not repeated.empty:
        names = ", ".join(f"{r['run']} (seed {r['seed']})" for _, r in repeated.iterrows())
        raise BudgetError(
            f"the same seed appears twice in one configuration: {names}; one outcome would count twice. "
            "Compare distinct seeds, or allow it (repeated_seeds=True, --allow-repeated-seeds)"
        )


def confidence_interval(
    values: Any, *, confidence_level: float = 0.95, axis: int = 0, bounds: tuple[float, float] | None = None
) -> tuple[Any, Any]:
    """The IQM's interval (:func:`rlcloud.intervals.iqm_interval`) along ``axis``: the plots' bands.

    Within ``bounds`` (the environment's return bounds), or the values' own range when None. Fewer than 3
    values along the axis, or no spread: NaN bounds (no interval keeps its promise there).
    """
    import numpy as np

    from rlcloud import intervals

    data = np.moveaxis(np.asarray(values, dtype=float), axis, -1)
    low, high = intervals.iqm_interval(data, confidence_level, bounds=bounds)
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
    import numpy as np

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
        with_episodes = [r for r in members if r.episode_count]
        count = f"{len(members)} seed{'s' if len(members) != 1 else ''}"
        # one configuration: its runs differ by seed only, and "5 seeds" says what n counts
        label = f"{labels[key]} (n={len(members)})" if labels[key] else members[0].name if len(members) == 1 else count
        curve = Curve(label=label)
        smooth = [r.curve(window) for r in with_episodes]
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


def _short_field(name: str) -> str:
    # agent.learning_rate reads as learning_rate in a legend; environment.level stays whole (level is vague)
    head, _, tail = name.partition(".")
    return tail if head == "agent" and tail else name


def _short_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
