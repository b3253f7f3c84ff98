"""Statistics over seeds per configuration (``summarize()``), the best configuration (``best()``), profiles."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlcloud.comparison.explained import _REASON_SEP, _explained_frame, _json_value, _short_value, row_reasons
from rlcloud.errors import SpecError, require

if TYPE_CHECKING:
    import pandas as pd


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
        keys = key if isinstance(key, tuple) else (key,)
        row, why, values = _config_row(
            group, dict(zip(parameters, keys, strict=True)), value, confidence_level, bounds, notes
        )
        if timed:
            _time_to_threshold_row(group, row, why, confidence_level)
        row["seeds"] = list(group["seed"])
        rows.append(row)
        reasons.append(why)
        samples.append(values)
    _add_seeds_needed(rows, reasons, samples, statistic, confidence_level, bounds)
    extra = [*(AT_MAX_COLUMNS if bounds is not None else ()), *(THRESHOLD_COLUMNS if timed else ())]
    columns = [*parameters, *SUMMARY_COLUMNS[:10], *extra, *SUMMARY_COLUMNS[10:]]
    summary = _explained_frame(pd.DataFrame(rows, columns=columns))
    summary.attrs["parameters"] = parameters
    summary.attrs["objective"] = table.attrs.get("objective", value)
    summary.attrs["statistic"] = statistic
    summary.attrs["confidence_level"] = confidence_level
    summary.attrs["return_bounds"] = bounds
    summary.attrs["notes"] = _summary_notes(table, notes, value, statistic, bounds, len(rows))
    return summary


def _config_row(
    group: pd.DataFrame,
    keys: dict[str, Any],
    value: str,
    confidence_level: float,
    bounds: tuple[float, float] | None,
    notes: dict[str, str],
) -> tuple[dict[str, Any], dict[str, str], Any]:
    """One configuration's row of :func:`summarize` (its statistics and share at the maximum return), why
    each empty cell is empty, and its values; a statistic's note for the whole table goes into ``notes``."""
    from rlcloud import intervals

    values = group[value].dropna().astype(float).to_numpy()
    row: dict[str, Any] = {**keys, "n": len(values)}
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
    return row, why, values


def _add_seeds_needed(
    rows: list[dict[str, Any]],
    reasons: list[dict[str, str]],
    samples: list[Any],
    statistic: str,
    confidence_level: float,
    bounds: tuple[float, float] | None,
) -> None:
    """Each row's ``seeds_needed`` against the best row by ``statistic``, and its ``notes`` (why each empty
    cell is empty, the reasons gathered so far included)."""
    from rlcloud import intervals

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


def _summary_notes(
    table: pd.DataFrame,
    notes: dict[str, str],
    value: str,
    statistic: str,
    bounds: tuple[float, float] | None,
    configurations: int,
) -> list[str]:
    """The reasons in full under a summary (``summary.attrs["notes"]``)."""
    out = [f"no {name} interval: {why}" for name, why in notes.items()]
    if bounds is None and value in _RETURNS:
        out.append(
            "the environment's return bounds are unknown (rlcloud.intervals.RETURN_BOUNDS): no interval reaches "
            "beyond the seeds' own range"
        )
    if table.attrs.get("left_out"):
        out.append("left out (budgets='complete'): " + ", ".join(table.attrs["left_out"]))
    if "common_budget" in table.attrs:
        out.append(
            f"every run compared at the common budget of {table.attrs['common_budget']:,} timesteps "
            f"(budgets='common'; shorter: {', '.join(table.attrs['short_runs'])})"
        )
    if configurations > 1:
        out.append(
            f"seeds to separate (seeds_needed): seeds per configuration at which its {statistic} interval and the "
            f"best one's would no longer overlap, at the observed difference and spreads"
        )
    return out


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
