"""Statistics over seeds and their intervals, each by a method whose coverage is measured.

Every function works along the last axis of an array (one row of seeds, or many rows at once: the
coverage benchmark ``benchmarks/interval_coverage.py`` draws 20,000 samples and computes all their intervals
in one call). numpy and scipy (the ``analysis`` extra) are imported on use.

RL's returns are often not normal: capped at the environment's maximum (CartPole-v1: 500) with many seeds at
the cap, bimodal (solves / fails), discrete with ties, heavy-tailed. The benchmark measures every interval
below on all of them at n = 3, 4, 5, 10, 20 (and 6, 8, 15); an interval is given only where it covered at least
:data:`COVERAGE_FLOOR` (90%) of the time at a nominal 95% on every distribution of that family, and no
interval reaches beyond what the environment allows: its return bounds when known (:func:`return_bounds`),
else the range of the seeds themselves. The statistics and their intervals at a nominal 95%:

- **IQM** (interquartile mean, ``scipy.stats.trim_mean(x, 0.25)``, as rliable): the hull of the
  Tukey-McLaughlin interval of a trimmed mean (winsorized standard error, Student t, with one degree of
  freedom per distinct value kept less one: ties carry less information than distinct values, and without
  that returns piled at a cap covered 89%) and the percentile bootstrap's (which alone holds where a mode of
  failed seeds ends near the 25th percentile, 59-66% for Tukey-McLaughlin), from 4 seeds when the return
  bounds are known (at 3 it is the mean of 3) and 8 when not (inside the seeds' own range fewer cover
  64-93%: 87% at 6 with 30% of seeds failing). Below 6 seeds (:data:`REACH_BELOW`), where a seed sits at a
  known bound the interval reaches that bound (a seed at the cap shows mass there that a few seeds cannot
  place); where every kept seed has one value there is no interval (no spread to measure).
- **median**: the order-statistic interval (``x(k)`` to ``x(n-k+1)`` with ``k`` from the binomial
  distribution): distribution-free (capped and tied values included), its coverage is at least its level
  by construction: 95% from 6 seeds, min to max at 5 (93.75%).
- **mean**: the hull of the studentized (bootstrap-t) and Student t intervals, from 20 seeds, and only
  where the environment's returns have no known bounds (the mean of capped returns had no interval that
  kept 90%). Below 20 seeds no interval of the mean keeps its promise when some seeds fail: with a failure
  that 1 seed in 5 hits, 5 seeds miss it 33% of the time and 10 seeds 11% of the time, and an interval
  drawn from seeds that all succeeded cannot contain the true mean then (measured: Student t covers 66% at
  n=5, 89% at n=10).
- **share at a bound** (seeds whose value is the environment's maximum, or reaches a threshold): the exact
  binomial (Clopper-Pearson) interval, at least its level for every n: what is honest where returns pile
  at the cap.

:func:`estimate` gives a statistic with its interval, or with no interval and the reason. The measured
coverage is in docs/concepts.md ("Intervals over seeds").

Comparisons follow rliable (Agarwal et al., 2021, "Deep RL at the edge of the statistical precipice";
``rliable.metrics`` 1.2.0): :func:`probability_of_improvement` is the Mann-Whitney U statistic divided by
``n x m`` (ties count one half), its interval a percentile bootstrap resampling each configuration's runs
independently; :func:`performance_profile` is the fraction of runs whose score is above each threshold.
Their memory grows with the number of runs, never with its square.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rlcloud.errors import require

__all__ = [
    "COVERAGE_FLOOR",
    "MIN_SEEDS",
    "RETURN_BOUNDS",
    "STATISTICS",
    "Estimate",
    "estimate",
    "iqm",
    "iqm_interval",
    "mean_interval",
    "median_interval",
    "min_seeds",
    "percentile_bootstrap_mean",
    "performance_profile",
    "performance_profile_interval",
    "probability_of_improvement",
    "probability_of_improvement_interval",
    "return_bounds",
    "seeds_needed",
    "share_interval",
]

Statistic = Literal["iqm", "mean", "median"]
#: The statistics over seeds, in the order the tables show them.
STATISTICS: tuple[Statistic, ...] = ("iqm", "mean", "median")
#: An episode's return bounds ``(lowest, highest)``.
Bounds = tuple[float, float]

#: The least coverage, at a nominal 95%, that an interval given anywhere must have kept on every
#: distribution of benchmarks/interval_coverage.py at every n it is given.
COVERAGE_FLOOR = 0.90

#: Fewest seeds at which each statistic's interval keeps :data:`COVERAGE_FLOOR` on every distribution of
#: benchmarks/interval_coverage.py when the environment's return bounds are known; :func:`min_seeds` gives
#: the thresholds without bounds. Below them no interval is given, and :data:`WHY_NO_INTERVAL` says why.
MIN_SEEDS: dict[str, int] = {"iqm": 4, "median": 5, "mean": 20, "probability_of_improvement": 10}
#: Below this many seeds, an interval of a statistic whose seeds include one at a known return bound reaches
#: that bound: solves/fails (60% of seeds at 500) covered 59% at 5 seeds without it, 98% with; from 6 seeds
#: the IQM's hull holds without it (92.7% at worst), and intervals can separate configurations at the cap.
REACH_BELOW = 6
#: The same without known return bounds: an interval may not reach beyond the seeds' own range.
MIN_SEEDS_UNBOUNDED: dict[str, int] = {**MIN_SEEDS, "iqm": 8}

WHY_NO_INTERVAL: dict[str, str] = {
    "iqm": (
        "the IQM's interval needs 4 seeds: at 3 it trims nothing (it is the mean), and a mode that 2 seeds in 5 "
        "reach goes unseen by 3 seeds 22% of the time (measured: 86% with 40% of seeds solving)"
    ),
    "iqm-unbounded": (
        "the IQM's interval needs 8 seeds where the environment's return bounds are unknown: it may not reach "
        "beyond the seeds' own range, and fewer seeds often all miss a mode that the true IQM includes "
        "(measured: 64-76% at 3 seeds, 77-88% at 4, 82-93% at 5, 87% at 6 with 30% of seeds failing)"
    ),
    "median": (
        "the median's interval needs 5 seeds: below that no order-statistic interval covers 90% "
        "(min to max covers 87.5% at 4 seeds, 75% at 3)"
    ),
    "mean": (
        "the mean's interval needs 20 seeds: when 1 seed in 5 fails, fewer seeds often miss the failure and "
        "no interval of the mean then covers the true mean (measured: 66% at 5 seeds, 89% at 10); "
        "the IQM's interval keeps its coverage"
    ),
    "mean-capped": (
        "the environment caps its returns (rlcloud.intervals.RETURN_BOUNDS): the mean of capped returns hangs "
        "on the few seeds below the cap, and no interval of it kept 90% at 20 seeds (measured: 69-89% with "
        "80-90% of seeds at the cap, 85% in the sets where no seed reached a cap that 1 seed in 5 reaches); "
        "the IQM's and the median's intervals and the share at the maximum hold"
    ),
    "no-spread": (
        "the seeds it rests on all have one value: no spread to measure, and an interval of zero width "
        "covers the true value only by luck"
    ),
    "probability_of_improvement": (
        "its percentile bootstrap needs 10 runs of each configuration (measured: 62-83% at 3, 76-92% at 5)"
    ),
}

#: Episode returns of gymnasium environments whose reward per step is bounded and whose episodes are cut
#: at ``max_episode_steps`` (gymnasium's registrations, ``gymnasium.spec(id)``): ``(lowest reward per step,
#: highest reward per step, max_episode_steps)``. CartPole-v1 pays 1 per step for at most 500 steps.
RETURN_BOUNDS: dict[str, tuple[float, float, int]] = {
    "CartPole-v0": (1.0, 1.0, 200),
    "CartPole-v1": (1.0, 1.0, 500),
    "MountainCar-v0": (-1.0, -1.0, 200),
    "Acrobot-v1": (-1.0, 0.0, 500),
    "Pendulum-v1": (-16.2736044, 0.0, 200),  # -(pi^2 + 0.1 * 8^2 + 0.001 * 2^2) at worst per step
}


def return_bounds(environment: Any, max_timesteps_per_episode: Any = None) -> Bounds | None:
    """An episode's return bounds for an environment spec (``{type: gym, level: CartPole-v1}``), when
    :data:`RETURN_BOUNDS` knows its level; the spec's ``max_timesteps_per_episode`` shortens episodes.

    Returns None for any other environment (the seeds' own range bounds the intervals then).
    """
    if not isinstance(environment, Mapping):
        return None
    known = RETURN_BOUNDS.get(str(environment.get("level", "")))
    if known is None:
        return None
    low, high, steps = known
    if isinstance(max_timesteps_per_episode, int) and not isinstance(max_timesteps_per_episode, bool):
        steps = min(steps, max(1, max_timesteps_per_episode))
    return (min(0.0, low) * steps, max(0.0, high) * steps)


def min_seeds(statistic: str, bounds: Bounds | None) -> int:
    """Fewest seeds for ``statistic``'s interval, with or without known return bounds."""
    return (MIN_SEEDS if bounds is not None else MIN_SEEDS_UNBOUNDED)[statistic]


def _np() -> Any:
    return require("numpy", "analysis", feature="statistics over seeds")


def _stats() -> Any:
    return require("scipy.stats", "analysis", feature="statistics over seeds")


# ------------------------------------------------------------------------------------------- estimators


def iqm(values: Any) -> Any:
    """Interquartile mean along the last axis: ``scipy.stats.trim_mean(values, 0.25)`` (rliable's IQM)."""
    return _stats().trim_mean(_np().asarray(values, dtype=float), 0.25, axis=-1)


def _trimmed(values: Any) -> tuple[Any, Any, Any]:
    """The IQM, its Tukey-McLaughlin standard error (winsorized variance) and its degrees of freedom: the
    distinct values among the ``h`` it keeps, less one (at least 1)."""
    np = _np()
    data = np.sort(np.asarray(values, dtype=float), axis=-1)
    n = data.shape[-1]
    g = int(0.25 * n)  # trim_mean's cut: int(proportion * n) at each end
    h = n - 2 * g
    kept = data[..., g : n - g]
    centre = kept.mean(axis=-1)
    winsorized = data.copy()
    if g:
        winsorized[..., :g] = data[..., g : g + 1]
        winsorized[..., n - g :] = data[..., n - g - 1 : n - g]
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt((n - 1) * winsorized.var(axis=-1, ddof=1) / (h * (h - 1))) if h > 1 else np.inf + 0 * centre
    distinct = 1 + (np.diff(kept, axis=-1) > 0).sum(axis=-1)
    return centre, se, np.maximum(distinct - 1, 1)


def _within(low: Any, high: Any, data: Any, bounds: Bounds | None) -> tuple[Any, Any]:
    """Bounds cut to what the environment allows: its return bounds (reached, below REACH_BELOW seeds, where a
    seed sits at one), or the seeds' own range when the bounds are unknown. NaN stays NaN."""
    np = _np()
    if bounds is None:
        floor, ceiling = data.min(axis=-1), data.max(axis=-1)
    else:
        floor, ceiling = bounds
        if data.shape[-1] < REACH_BELOW:  # a seed at the cap shows mass there that a few seeds cannot place
            high = np.where(data.max(axis=-1) >= ceiling, ceiling, high)
            low = np.where(data.min(axis=-1) <= floor, floor, low)
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(low), low, np.maximum(low, floor)), np.where(
            np.isnan(high), high, np.minimum(high, ceiling)
        )


def _scalar(low: Any, high: Any) -> tuple[Any, Any]:
    np = _np()
    if np.ndim(low) == 0:
        return float(low), float(high)
    return low, high


# ---------------------------------------------------------------------------------------------- intervals


def iqm_interval(
    values: Any,
    confidence_level: float = 0.95,
    *,
    bounds: Bounds | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[Any, Any]:
    """Interval of the IQM along the last axis: the hull of the Tukey-McLaughlin interval and the percentile
    bootstrap's, within ``bounds``.

    Tukey-McLaughlin: ``IQM ± t(df) x SE_w`` with ``SE_w = sqrt((n - 1) s_w^2 / (h (h - 1)))``, ``s_w^2`` the
    variance of the values winsorized where the IQM trims them and ``h`` the number of values it keeps (Tukey
    and McLaughlin 1963; Wilcox, "Introduction to Robust Estimation", 4.4.1); ``df`` is the number of
    distinct values kept less one (``h - 1`` without ties). It assumes a density where the IQM trims: when a
    mode of failed seeds ends near the 25th percentile (30% of seeds failing) it covered 59-66%; the
    percentile bootstrap (``n_resamples``, seeded), which sees seeds cross the trimming point, covered 92%
    there, and the hull of the two keeps the better of both everywhere measured. The interval is cut to
    ``bounds`` (the environment's return bounds, reached, below :data:`REACH_BELOW` seeds, where a seed sits
    at one) or, without bounds, to the seeds' range. Fewer than 3 values, or no spread (every winsorized value
    equal): NaN bounds.
    """
    np = _np()
    data = np.asarray(values, dtype=float)
    n = data.shape[-1]
    if n < 3:
        nan = np.full(data.shape[:-1], np.nan)
        return _scalar(nan, nan.copy())
    centre, se, df = _trimmed(data)
    q = _stats().t.ppf(0.5 + confidence_level / 2, df)
    boot_low, boot_high = _bootstrap_iqm(data, confidence_level, n_resamples, seed)
    spread = se > 0
    low = np.where(spread, np.fmin(centre - q * se, boot_low), np.nan)
    high = np.where(spread, np.fmax(centre + q * se, boot_high), np.nan)
    return _scalar(*_within(low, high, data, bounds))


def _bootstrap_iqm(data: Any, confidence_level: float, n_resamples: int, seed: int) -> tuple[Any, Any]:
    """Percentile bootstrap interval of the IQM along the last axis, in chunks of bounded memory."""
    np = _np()
    n = data.shape[-1]
    flat = data.reshape(-1, n)
    rng = np.random.default_rng(seed)
    alpha = 1 - confidence_level
    low, high = np.empty(len(flat)), np.empty(len(flat))
    g = int(0.25 * n)
    chunk = max(1, 2_000_000 // (n_resamples * n))
    for start in range(0, len(flat), chunk):
        rows = flat[start : start + chunk]
        values = np.empty((len(rows), n_resamples))
        block = max(1, 2_000_000 // (len(rows) * n))  # many seeds: the resamples a block at a time too
        for first in range(0, n_resamples, block):
            picks = rng.integers(0, n, size=(len(rows), min(block, n_resamples - first), n))
            resampled = np.sort(np.take_along_axis(np.broadcast_to(rows[:, None, :], picks.shape), picks, axis=-1))
            values[:, first : first + block] = resampled[..., g : n - g].mean(axis=-1)
        low[start : start + chunk] = np.quantile(values, alpha / 2, axis=-1)
        high[start : start + chunk] = np.quantile(values, 1 - alpha / 2, axis=-1)
    return low.reshape(data.shape[:-1]), high.reshape(data.shape[:-1])


def median_interval(values: Any, confidence_level: float = 0.95) -> tuple[Any, Any]:
    """Order-statistic interval of the median along the last axis: ``[x(k), x(n-k+1)]``.

    ``k`` is the largest rank with ``1 - 2 P(Binomial(n, 1/2) <= k - 1) >= confidence_level``: the interval
    contains the population median with at least that probability whatever the distribution (ties and
    capped values included: the interval is closed). Where no rank reaches the level, min to max if that
    keeps :data:`COVERAGE_FLOOR` (5 values: 93.75%), else NaN bounds (fewer than 5 values).
    """
    np = _np()
    data = np.sort(np.asarray(values, dtype=float), axis=-1)
    n = data.shape[-1]
    k = _median_rank(n, confidence_level)
    if k is None:
        nan = np.full(data.shape[:-1], np.nan)
        return _scalar(nan, nan.copy())
    return _scalar(data[..., k - 1], data[..., n - k])


def _median_rank(n: int, confidence_level: float) -> int | None:
    binom = _stats().binom
    best = None
    for k in range(1, n // 2 + 1):
        if 1 - 2 * binom.cdf(k - 1, n, 0.5) >= confidence_level - 1e-12:
            best = k
    if best is None and n >= 1 and 1 - 2 * 0.5**n >= COVERAGE_FLOOR:
        return 1
    return best


def mean_interval(
    values: Any,
    confidence_level: float = 0.95,
    *,
    bounds: Bounds | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[Any, Any]:
    """Studentized (bootstrap-t) interval of the mean along the last axis, within ``bounds``.

    Each resample's mean is studentized by its own standard error; the interval is ``mean - q_hi x SE`` to
    ``mean - q_lo x SE`` with ``q`` the resampled t quantiles (Efron and Tibshirani 1993, 12.5). Resamples
    whose values are all equal have no standard error and are left out. Seeded: the same values give the
    same interval. The interval is the hull of that and Student t's (each alone fell under 90% on one of
    heavy-tailed and skewed returns). Cut to ``bounds`` as :func:`iqm_interval` (:func:`estimate` gives no
    interval of the mean where the returns have bounds: see ``WHY_NO_INTERVAL["mean-capped"]``). Equal
    values (no spread) or fewer than 2 values: NaN bounds.
    """
    np = _np()
    data = np.asarray(values, dtype=float)
    n = data.shape[-1]
    if n < 2:
        nan = np.full(data.shape[:-1], np.nan)
        return _scalar(nan, nan.copy())
    flat = data.reshape(-1, n)
    mean = flat.mean(axis=-1)
    se = flat.std(axis=-1, ddof=1) / math.sqrt(n)
    rng = np.random.default_rng(seed)
    alpha = 1 - confidence_level
    upper_q = np.empty(len(flat))
    lower_q = np.empty(len(flat))
    chunk = max(1, 2_000_000 // (n_resamples * n))  # bounded memory: rows x resamples x n floats at a time
    for start in range(0, len(flat), chunk):
        rows = flat[start : start + chunk]
        t = np.empty((len(rows), n_resamples))
        block = max(1, 2_000_000 // (len(rows) * n))  # many seeds: the resamples a block at a time too
        for first in range(0, n_resamples, block):
            picks = rng.integers(0, n, size=(len(rows), min(block, n_resamples - first), n))
            resampled = np.take_along_axis(np.broadcast_to(rows[:, None, :], picks.shape), picks, axis=-1)
            with np.errstate(invalid="ignore", divide="ignore"):
                t[:, first : first + block] = (resampled.mean(axis=-1) - mean[start : start + chunk, None]) / (
                    resampled.std(axis=-1, ddof=1) / math.sqrt(n)
                )
        t = np.where(np.isfinite(t), t, np.nan)
        with warnings.catch_warnings():  # a row of equal values has no t statistic (handled below)
            warnings.simplefilter("ignore", RuntimeWarning)
            upper_q[start : start + chunk] = np.nanquantile(t, 1 - alpha / 2, axis=-1)
            lower_q[start : start + chunk] = np.nanquantile(t, alpha / 2, axis=-1)
    # the hull of the bootstrap-t and Student t intervals: bootstrap-t alone covered 90.7% on heavy tails
    # (t with 2 degrees of freedom), Student t alone 89.6% on skewed returns (lognormal) at 20 seeds
    student = _stats().t.ppf(0.5 + confidence_level / 2, n - 1)
    low = np.where(se > 0, mean - np.fmax(upper_q, student) * se, np.nan)
    high = np.where(se > 0, mean - np.fmin(lower_q, -student) * se, np.nan)
    shape = data.shape[:-1]
    return _scalar(*_within(low.reshape(shape), high.reshape(shape), data, bounds))


def percentile_bootstrap_mean(
    values: Any, confidence_level: float = 0.95, *, n_resamples: int = 2000, seed: int = 0
) -> tuple[Any, Any]:
    """Percentile bootstrap interval of the mean along the last axis: what rlcloud printed before 0.2.

    Kept for the coverage benchmark (it covers 72-75% at 3 seeds, where it is the min-max of the seeds).
    """
    np = _np()
    data = np.asarray(values, dtype=float)
    n = data.shape[-1]
    flat = data.reshape(-1, n)
    rng = np.random.default_rng(seed)
    alpha = 1 - confidence_level
    low = np.empty(len(flat))
    high = np.empty(len(flat))
    chunk = max(1, 2_000_000 // (n_resamples * n))
    for start in range(0, len(flat), chunk):
        rows = flat[start : start + chunk]
        picks = rng.integers(0, n, size=(len(rows), n_resamples, n))
        means = np.take_along_axis(np.broadcast_to(rows[:, None, :], picks.shape), picks, axis=-1).mean(axis=-1)
        low[start : start + chunk] = np.quantile(means, alpha / 2, axis=-1)
        high[start : start + chunk] = np.quantile(means, 1 - alpha / 2, axis=-1)
    shape = data.shape[:-1]
    return (float(low[0]), float(high[0])) if not shape else (low.reshape(shape), high.reshape(shape))


def share_interval(successes: Any, n: Any, confidence_level: float = 0.95) -> tuple[Any, Any]:
    """Exact binomial (Clopper-Pearson) interval of a share: ``successes`` of ``n`` seeds (elementwise).

    Its coverage is at least ``confidence_level`` at every n and every true share (Clopper and Pearson 1934):
    the honest statement where returns pile at a cap or a threshold. ``n`` of 0: NaN bounds.
    """
    np = _np()
    beta = _stats().beta
    k = np.asarray(successes, dtype=float)
    total = np.asarray(n, dtype=float)
    alpha = 1 - confidence_level
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        low = np.where(k > 0, beta.ppf(alpha / 2, k, total - k + 1), 0.0)
        high = np.where(k < total, beta.ppf(1 - alpha / 2, k + 1, total - k), 1.0)
    low = np.where(total > 0, low, np.nan)
    high = np.where(total > 0, high, np.nan)
    return _scalar(low, high)


# ------------------------------------------------------------------------------------------ one estimate


@dataclass(frozen=True)
class Estimate:
    """A statistic over seeds: its value, and its interval or why there is none.

    ``note`` is the reason in full (for the notes under a table), ``short`` the same in a few words (for a
    table's cell); both are empty when there is an interval.
    """

    statistic: str
    value: float
    low: float
    high: float
    n: int
    note: str = ""
    short: str = ""

    @property
    def has_interval(self) -> bool:
        """Whether an interval was given (else :attr:`note` says why)."""
        return not (math.isnan(self.low) or math.isnan(self.high))


def estimate(
    values: Any, statistic: str = "iqm", confidence_level: float = 0.95, *, bounds: Bounds | None = None
) -> Estimate:
    """One statistic of one configuration's seeds with its interval, or NaN bounds and the reason.

    Args:
        values: the seeds' values (NaN left out).
        statistic: ``"iqm"``, ``"mean"`` or ``"median"``.
        confidence_level: of the interval; the seed thresholds (:func:`min_seeds`) were measured at 0.95.
        bounds: the environment's return bounds (:func:`return_bounds`), None when unknown.
    """
    np = _np()
    data = np.asarray(values, dtype=float)
    data = data[~np.isnan(data)]
    n = len(data)
    if statistic not in STATISTICS:
        from rlcloud.errors import SpecError

        raise SpecError(f"statistic must be one of {', '.join(STATISTICS)}, not {statistic!r}")
    if n == 0:
        return Estimate(statistic, math.nan, math.nan, math.nan, 0, "no run has a value", "no value")
    value = float({"iqm": iqm, "mean": lambda d: d.mean(), "median": np.median}[statistic](data))
    least = min_seeds(statistic, bounds)
    if statistic == "mean" and bounds is not None:
        return Estimate(statistic, value, math.nan, math.nan, n, WHY_NO_INTERVAL["mean-capped"], "capped returns")
    if n < least:
        why = WHY_NO_INTERVAL["iqm-unbounded" if statistic == "iqm" and bounds is None else statistic]
        return Estimate(statistic, value, math.nan, math.nan, n, why, f"needs {least} seeds")
    if statistic == "iqm":
        low, high = iqm_interval(data, confidence_level, bounds=bounds)
    elif statistic == "mean":
        low, high = mean_interval(data, confidence_level, bounds=bounds)
    else:
        low, high = median_interval(data, confidence_level)
    if math.isnan(low):
        return Estimate(statistic, value, math.nan, math.nan, n, WHY_NO_INTERVAL["no-spread"], "no spread")
    return Estimate(statistic, value, float(low), float(high), n)


# ----------------------------------------------------------------------------------------- comparisons


def probability_of_improvement(x: Any, y: Any) -> Any:
    """P(X > Y) + P(X = Y) / 2 for a run of X against a run of Y: rliable's probability of improvement.

    The Mann-Whitney U statistic of ``x`` over ``y`` divided by ``len(x) * len(y)``, as
    ``rliable.metrics.probability_of_improvement`` computes it for one task; along the last axis (leading
    axes are rows). Computed from the ranks of the pooled values (ties take their average rank), so memory
    grows with ``len(x) + len(y)``, never with their product.
    """
    np = _np()
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    shape = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    a = np.broadcast_to(a, (*shape, a.shape[-1]))
    b = np.broadcast_to(b, (*shape, b.shape[-1]))
    n, m = a.shape[-1], b.shape[-1]
    ranks = _stats().rankdata(np.concatenate([a, b], axis=-1), axis=-1)
    result = (ranks[..., :n].sum(axis=-1) - n * (n + 1) / 2) / (n * m)
    return float(result) if np.ndim(result) == 0 else result


def _resampled_counts(rng: Any, size: int, rows: int) -> Any:
    """How often each of ``size`` values is drawn in each of ``rows`` bootstrap resamples of ``size`` draws."""
    np = _np()
    picks = rng.integers(0, size, size=(rows, size)) + size * np.arange(rows)[:, None]
    return np.bincount(picks.ravel(), minlength=rows * size).reshape(rows, size)


#: values of one bootstrap chunk (resamples x runs): bounds the memory of the resampling intervals (~8 MB each)
_CHUNK_VALUES = 1_000_000


def probability_of_improvement_interval(
    x: Any, y: Any, confidence_level: float = 0.95, *, n_resamples: int = 20_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`probability_of_improvement`, resampling ``x`` and ``y`` each
    within itself (rliable's stratified bootstrap for one task). Fewer than 2 runs on a side: NaN bounds.

    Each resample is a count per original run; a run of ``x`` beats the resampled ``y`` by the resampled
    counts below and equal to it (cumulative counts over ``y`` sorted), so a resample costs ``len(x) +
    len(y)`` operations and memory is bounded by chunks of resamples (~40 MB whatever the runs, not the
    20,000 x n x n comparisons of a broadcast).
    """
    np = _np()
    a = np.asarray(x, dtype=float)
    b = np.sort(np.asarray(y, dtype=float))
    n, m = len(a), len(b)
    if n < 2 or m < 2:
        return math.nan, math.nan
    below = np.searchsorted(b, a, side="left")  # runs of y below each run of x, as positions in sorted y
    through = np.searchsorted(b, a, side="right")
    rng = np.random.default_rng(seed)
    values = np.empty(n_resamples)
    chunk = max(1, _CHUNK_VALUES // max(n, m))
    for start in range(0, n_resamples, chunk):
        rows = min(chunk, n_resamples - start)
        count_a = _resampled_counts(rng, n, rows)
        cumulative = np.zeros((rows, m + 1))
        np.cumsum(_resampled_counts(rng, m, rows), axis=1, out=cumulative[:, 1:])
        score = (cumulative[:, below] + cumulative[:, through]) / (2 * m)  # P(y* < a_i) + P(y* = a_i) / 2
        values[start : start + rows] = (count_a * score).sum(axis=1) / n
    alpha = 1 - confidence_level
    return float(np.quantile(values, alpha / 2)), float(np.quantile(values, 1 - alpha / 2))


def performance_profile(values: Any, thresholds: Any) -> Any:
    """Fraction of runs whose value is above each threshold (rliable's ``run_score_deviation``, one task)."""
    np = _np()
    data = np.sort(np.asarray(values, dtype=float))
    above = len(data) - np.searchsorted(data, np.asarray(thresholds, dtype=float), side="right")
    return above / len(data) if len(data) else np.full(np.shape(thresholds), np.nan)


def performance_profile_interval(
    values: Any, thresholds: Any, confidence_level: float = 0.95, *, n_resamples: int = 20_000, seed: int = 0
) -> tuple[Any, Any]:
    """Percentile bootstrap interval of :func:`performance_profile` at each threshold, resampling the runs
    (rliable's ``create_performance_profile`` intervals for one task). Fewer than 2 runs: NaN bounds.

    Each resample is a count per run; the fraction above a threshold is read off the cumulative counts of
    the sorted runs, in chunks of resamples (memory bounded, whatever the number of runs)."""
    np = _np()
    data = np.sort(np.asarray(values, dtype=float))
    taus = np.asarray(thresholds, dtype=float)
    n = len(data)
    if n < 2:
        nan = np.full(len(taus), np.nan)
        return nan, nan.copy()
    at_or_below = np.searchsorted(data, taus, side="right")
    rng = np.random.default_rng(seed)
    fractions = np.empty((n_resamples, len(taus)))
    chunk = max(1, _CHUNK_VALUES // n)
    for start in range(0, n_resamples, chunk):
        rows = min(chunk, n_resamples - start)
        cumulative = np.zeros((rows, n + 1))
        np.cumsum(_resampled_counts(rng, n, rows), axis=1, out=cumulative[:, 1:])
        fractions[start : start + rows] = 1 - cumulative[:, at_or_below] / n
    alpha = 1 - confidence_level
    return np.quantile(fractions, alpha / 2, axis=0), np.quantile(fractions, 1 - alpha / 2, axis=0)


def _spread(statistic: str, data: Any) -> float:
    """The spread that scales ``statistic``'s interval: the winsorized standard deviation for the IQM and the
    median (robust to the tails the IQM trims), the standard deviation for the mean."""
    np = _np()
    if len(data) < 2:
        return math.nan
    if statistic == "mean":
        return float(np.std(data, ddof=1))
    ordered = np.sort(data)
    g = int(0.25 * len(ordered))
    if g:
        ordered[:g] = ordered[g]
        ordered[len(ordered) - g :] = ordered[len(ordered) - g - 1]
    return float(np.std(ordered, ddof=1))


def _half_width(statistic: str, spread: float, n: Any, confidence_level: float) -> Any:
    """The half width of ``statistic``'s interval at ``n`` seeds (an array) for a sample of this spread."""
    np = _np()
    stats = _stats()
    if statistic == "iqm":
        h = n - 2 * (n // 4)
        return stats.t.ppf(0.5 + confidence_level / 2, h - 1) * spread * np.sqrt((n - 1) / (h * (h - 1)))
    if statistic == "mean":
        return stats.t.ppf(0.5 + confidence_level / 2, n - 1) * spread / np.sqrt(n)
    # the median's order-statistic interval: ~z x 1.2533 sigma / sqrt(n) (its efficiency at the normal)
    return stats.norm.ppf(0.5 + confidence_level / 2) * 1.2533 * spread / np.sqrt(n)


def seeds_needed(
    x: Any,
    y: Any,
    *,
    statistic: str = "iqm",
    confidence_level: float = 0.95,
    bounds: Bounds | None = None,
    most: int = 1000,
) -> int | None:
    """Seeds per configuration at which ``statistic``'s interval of ``x`` (the leader) would lie wholly above
    that of ``y``, if the difference and spreads stayed those observed: the same rule as "separated".

    Each interval's half width is projected from its own spread (:func:`_spread`) to n seeds. Returns None
    when ``x`` does not lead, a side has fewer than 2 seeds, or more than ``most`` seeds would be needed; the
    statistic's fewest seeds for an interval (:func:`min_seeds`) when neither side has any spread.
    """
    np = _np()
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if len(a) < 2 or len(b) < 2:
        return None
    value = {"iqm": iqm, "mean": np.mean, "median": np.median}[statistic]
    lead = float(value(a)) - float(value(b))
    least = max(min_seeds(statistic, bounds), 3)
    if lead <= 0:
        return None
    if bounds is not None and any(((v >= bounds[1]) | (v <= bounds[0])).any() for v in (a, b)):
        least = max(least, REACH_BELOW)  # below it an interval with a seed at a bound reaches the bound
    spread_a, spread_b = _spread(statistic, a), _spread(statistic, b)
    if spread_a == 0 and spread_b == 0:
        return least
    n = np.arange(least, most + 1)
    width = sum(_half_width(statistic, spread, n, confidence_level) for spread in (spread_a, spread_b))
    enough = np.nonzero(width < lead)[0]
    return int(n[enough[0]]) if len(enough) else None
