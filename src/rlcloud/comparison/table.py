"""The per-run table of a comparison (``compare()``): one row per run, its objective, budget and time to threshold."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from rlcloud.comparison.explained import _explained_frame
from rlcloud.comparison.runs import RunResults, _with_episodes, load_runs
from rlcloud.comparison.statistics import summarize
from rlcloud.errors import SpecError
from rlcloud.layout import ProgressRecord

if TYPE_CHECKING:
    import pandas as pd

    from rlcloud.storage.summary import Episodes

Objective = Literal["mean_return", "evaluation"]
Budgets = Literal["refuse", "common", "complete"]


class CompareOptions(TypedDict, total=False):
    """The keyword options of :func:`compare`, as the facades pass them on (``Sweep.results(**options)``)."""

    results: str | None
    objective: Objective
    window: int
    by: Literal["run", "config"]
    confidence_level: float
    budgets: Budgets
    repeated_seeds: bool
    threshold: float | None


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
