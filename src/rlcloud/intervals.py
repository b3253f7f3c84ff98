"""Statistics over seeds and their intervals, each by a method whose coverage is measured.

Every function works along the last axis of an array (one row of seeds, or many rows at once: the
coverage benchmark ``benchmarks/interval_coverage.py`` draws 20,000 samples and computes all their intervals
in one call). numpy and scipy (the ``analysis`` extra) are imported on use.

The statistics and their intervals at a nominal 95%:

- **IQM** (interquartile mean, ``scipy.stats.trim_mean(x, 0.25)``, as rliable): the Tukey-McLaughlin
  interval of a trimmed mean (winsorized standard error, Student t with ``h - 1`` degrees of freedom where
  ``h`` values are kept), from 3 seeds.
- **median**: the order-statistic interval (``x(k)`` to ``x(n-k+1)`` with ``k`` from the binomial
  distribution): distribution-free, its coverage is at least the nominal level by construction, which needs
  6 seeds for 95% (at 5 the widest such interval, min to max, covers 93.75%).
- **mean**: the studentized (bootstrap-t) interval, from 20 seeds. Below that no interval of the mean keeps
  its promise when some seeds fail: with a failure that 1 seed in 5 hits, 5 seeds miss it 33% of the time
  and 10 seeds 11% of the time, and an interval drawn from seeds that all succeeded cannot contain the true
  mean then (measured: Student t covers 66% at n=5, 89% at n=10).

:data:`MIN_SEEDS` holds these thresholds; :func:`estimate` gives a statistic with its interval, or with no
interval and the reason. The measured coverage is in docs/concepts.md ("Intervals over seeds").

Comparisons follow rliable (Agarwal et al., 2021, "Deep RL at the edge of the statistical precipice";
``rliable.metrics`` 1.2.0): :func:`probability_of_improvement` is the Mann-Whitney U statistic divided by
``n x m`` (ties count one half), its interval a percentile bootstrap resampling each configuration's runs
independently; :func:`performance_profile` is the fraction of runs whose score is above each threshold.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Literal

from rlcloud.errors import require

__all__ = [
    "MIN_SEEDS",
    "STATISTICS",
    "Estimate",
    "estimate",
    "iqm",
    "iqm_interval",
    "mean_interval",
    "median_interval",
    "percentile_bootstrap_mean",
    "performance_profile",
    "performance_profile_interval",
    "probability_of_improvement",
    "probability_of_improvement_interval",
    "seeds_needed",
]

Statistic = Literal["iqm", "mean", "median"]
#: The statistics over seeds, in the order the tables show them.
STATISTICS: tuple[Statistic, ...] = ("iqm", "mean", "median")

#: Fewest seeds at which each statistic's interval covers at least 93% at a nominal 95% on every
#: distribution of benchmarks/interval_coverage.py (normal, two skewed, "some seeds fail"). Below it no
#: interval is given, and :data:`WHY_NO_INTERVAL` says why.
MIN_SEEDS: dict[str, int] = {"iqm": 3, "median": 6, "mean": 20, "probability_of_improvement": 10}

WHY_NO_INTERVAL: dict[str, str] = {
    "iqm": "the IQM's interval needs 3 seeds",
    "median": (
        "the median's interval needs 6 seeds: below that no order-statistic interval covers 95% "
        "(min to max covers 93.75% at 5 seeds, 87.5% at 4)"
    ),
    "mean": (
        "the mean's interval needs 20 seeds: when 1 seed in 5 fails, fewer seeds often miss the failure and "
        "no interval of the mean then covers the true mean (measured: 66% at 5 seeds, 89% at 10); "
        "the IQM's interval keeps its 95%"
    ),
    "probability_of_improvement": (
        "its percentile bootstrap needs 10 runs of each configuration (measured: 79-81% at 3, 85-89% at 5)"
    ),
}


def _np() -> Any:
    return require("numpy", "analysis", feature="statistics over seeds")


def _stats() -> Any:
    return require("scipy.stats", "analysis", feature="statistics over seeds")


# ------------------------------------------------------------------------------------------- estimators


def iqm(values: Any) -> Any:
    """Interquartile mean along the last axis: ``scipy.stats.trim_mean(values, 0.25)`` (rliable's IQM)."""
    return _stats().trim_mean(_np().asarray(values, dtype=float), 0.25, axis=-1)


def _trimmed(values: Any) -> tuple[Any, Any, int]:
    """The IQM, its Tukey-McLaughlin standard error (winsorized variance) and ``h`` (values kept)."""
    np = _np()
    data = np.sort(np.asarray(values, dtype=float), axis=-1)
    n = data.shape[-1]
    g = int(0.25 * n)  # trim_mean's cut: int(proportion * n) at each end
    h = n - 2 * g
    centre = data[..., g : n - g].mean(axis=-1)
    winsorized = data.copy()
    if g:
        winsorized[..., :g] = data[..., g : g + 1]
        winsorized[..., n - g :] = data[..., n - g - 1 : n - g]
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt((n - 1) * winsorized.var(axis=-1, ddof=1) / (h * (h - 1))) if h > 1 else np.inf + 0 * centre
    return centre, se, h


# ---------------------------------------------------------------------------------------------- intervals


def iqm_interval(values: Any, confidence_level: float = 0.95) -> tuple[Any, Any]:
    """Tukey-McLaughlin interval of the IQM along the last axis: ``IQM ± t(h-1) x SE_w``.

    ``SE_w = sqrt((n - 1) s_w^2 / (h (h - 1)))`` with ``s_w^2`` the variance of the values winsorized where
    the IQM trims them and ``h`` the number of values it keeps (Tukey and McLaughlin 1963; Wilcox,
    "Introduction to Robust Estimation", 4.4.1). Fewer than 3 values: NaN bounds.
    """
    np = _np()
    data = np.asarray(values, dtype=float)
    if data.shape[-1] < 3:
        nan = np.full(data.shape[:-1], np.nan)
        return nan, nan.copy()
    centre, se, h = _trimmed(data)
    q = _stats().t.ppf(0.5 + confidence_level / 2, h - 1)
    return centre - q * se, centre + q * se


def median_interval(values: Any, confidence_level: float = 0.95) -> tuple[Any, Any]:
    """Order-statistic interval of the median along the last axis: ``[x(k), x(n-k+1)]``.

    ``k`` is the largest rank with ``1 - 2 P(Binomial(n, 1/2) <= k - 1) >= confidence_level``: the interval
    contains the population median with at least that probability whatever the distribution. When no rank
    reaches the level (fewer than 6 values at 95%), the bounds are NaN.
    """
    np = _np()
    data = np.sort(np.asarray(values, dtype=float), axis=-1)
    n = data.shape[-1]
    k = _median_rank(n, confidence_level)
    if k is None:
        nan = np.full(data.shape[:-1], np.nan)
        return nan, nan.copy()
    return data[..., k - 1], data[..., n - k]


def _median_rank(n: int, confidence_level: float) -> int | None:
    binom = _stats().binom
    best = None
    for k in range(1, n // 2 + 1):
        if 1 - 2 * binom.cdf(k - 1, n, 0.5) >= confidence_level - 1e-12:
            best = k
    return best


def mean_interval(
    values: Any, confidence_level: float = 0.95, *, n_resamples: int = 2000, seed: int = 0
) -> tuple[Any, Any]:
    """Studentized (bootstrap-t) interval of the mean along the last axis.

    Each resample's mean is studentized by its own standard error; the interval is ``mean - q_hi x SE`` to
    ``mean - q_lo x SE`` with ``q`` the resampled t quantiles (Efron and Tibshirani 1993, 12.5). Resamples
    whose values are all equal have no standard error and are left out. Seeded: the same values give the
    same interval. Equal values give the value itself; fewer than 2 values NaN bounds.
    """
    np = _np()
    data = np.asarray(values, dtype=float)
    n = data.shape[-1]
    if n < 2:
        nan = np.full(data.shape[:-1], np.nan)
        return nan, nan.copy()
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
        picks = rng.integers(0, n, size=(len(rows), n_resamples, n))
        resampled = np.take_along_axis(np.broadcast_to(rows[:, None, :], picks.shape), picks, axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            t = (resampled.mean(axis=-1) - mean[start : start + chunk, None]) / (
                resampled.std(axis=-1, ddof=1) / math.sqrt(n)
            )
        t = np.where(np.isfinite(t), t, np.nan)
        with warnings.catch_warnings():  # a row of equal values has no t statistic (handled below)
            warnings.simplefilter("ignore", RuntimeWarning)
            upper_q[start : start + chunk] = np.nanquantile(t, 1 - alpha / 2, axis=-1)
            lower_q[start : start + chunk] = np.nanquantile(t, alpha / 2, axis=-1)
    low = np.where(se == 0, mean, mean - upper_q * se)
    high = np.where(se == 0, mean, mean - lower_q * se)
    shape = data.shape[:-1]
    return (float(low[0]), float(high[0])) if not shape else (low.reshape(shape), high.reshape(shape))


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


# ------------------------------------------------------------------------------------------ one estimate


@dataclass(frozen=True)
class Estimate:
    """A statistic over seeds: its value, and its interval or why there is none."""

    statistic: str
    value: float
    low: float
    high: float
    n: int
    note: str = ""

    @property
    def has_interval(self) -> bool:
        """Whether an interval was given (else :attr:`note` says why)."""
        return not (math.isnan(self.low) or math.isnan(self.high))


def estimate(values: Any, statistic: str = "iqm", confidence_level: float = 0.95) -> Estimate:
    """One statistic of one configuration's seeds with its interval, or NaN bounds and the reason.

    Args:
        values: the seeds' values (NaN left out).
        statistic: ``"iqm"``, ``"mean"`` or ``"median"``.
        confidence_level: of the interval; the seed thresholds (:data:`MIN_SEEDS`) were measured at 0.95.
    """
    np = _np()
    data = np.asarray(values, dtype=float)
    data = data[~np.isnan(data)]
    n = len(data)
    if statistic not in STATISTICS:
        from rlcloud.errors import SpecError

        raise SpecError(f"statistic must be one of {', '.join(STATISTICS)}, not {statistic!r}")
    if n == 0:
        return Estimate(statistic, math.nan, math.nan, math.nan, 0, "no run has a value")
    value = float({"iqm": iqm, "mean": lambda d: d.mean(), "median": np.median}[statistic](data))
    if n < MIN_SEEDS[statistic]:
        return Estimate(statistic, value, math.nan, math.nan, n, WHY_NO_INTERVAL[statistic])
    interval = {"iqm": iqm_interval, "mean": mean_interval, "median": median_interval}[statistic]
    low, high = interval(data, confidence_level)
    return Estimate(statistic, value, float(low), float(high), n)


# ----------------------------------------------------------------------------------------- comparisons


def probability_of_improvement(x: Any, y: Any) -> float:
    """P(X > Y) + P(X = Y) / 2 for a run of X against a run of Y: rliable's probability of improvement.

    The Mann-Whitney U statistic of ``x`` over ``y`` divided by ``len(x) * len(y)``, as
    ``rliable.metrics.probability_of_improvement`` computes it for one task.
    """
    np = _np()
    a = np.asarray(x, dtype=float)[..., :, None]
    b = np.asarray(y, dtype=float)[..., None, :]
    result = ((a > b) + 0.5 * (a == b)).mean(axis=(-2, -1))
    return float(result) if np.ndim(result) == 0 else result


def probability_of_improvement_interval(
    x: Any, y: Any, confidence_level: float = 0.95, *, n_resamples: int = 20_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`probability_of_improvement`, resampling ``x`` and ``y`` each
    within itself (rliable's stratified bootstrap for one task). Fewer than 2 runs on a side: NaN bounds."""
    np = _np()
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if len(a) < 2 or len(b) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    ra = a[rng.integers(0, len(a), size=(n_resamples, len(a)))]
    rb = b[rng.integers(0, len(b), size=(n_resamples, len(b)))]
    values = probability_of_improvement(ra, rb)
    alpha = 1 - confidence_level
    return float(np.quantile(values, alpha / 2)), float(np.quantile(values, 1 - alpha / 2))


def performance_profile(values: Any, thresholds: Any) -> Any:
    """Fraction of runs whose value is above each threshold (rliable's ``run_score_deviation``, one task)."""
    np = _np()
    data = np.asarray(values, dtype=float)
    return (data[None, :] > np.asarray(thresholds, dtype=float)[:, None]).mean(axis=1)


def performance_profile_interval(
    values: Any, thresholds: Any, confidence_level: float = 0.95, *, n_resamples: int = 20_000, seed: int = 0
) -> tuple[Any, Any]:
    """Percentile bootstrap interval of :func:`performance_profile` at each threshold, resampling the runs
    (rliable's ``create_performance_profile`` intervals for one task). Fewer than 2 runs: NaN bounds."""
    np = _np()
    data = np.asarray(values, dtype=float)
    taus = np.asarray(thresholds, dtype=float)
    if len(data) < 2:
        nan = np.full(len(taus), np.nan)
        return nan, nan.copy()
    rng = np.random.default_rng(seed)
    resampled = data[rng.integers(0, len(data), size=(n_resamples, len(data)))]
    fractions = (resampled[:, None, :] > taus[None, :, None]).mean(axis=-1)
    alpha = 1 - confidence_level
    return np.quantile(fractions, alpha / 2, axis=0), np.quantile(fractions, 1 - alpha / 2, axis=0)


def seeds_needed(x: Any, y: Any, *, power: float = 0.8, alpha: float = 0.05, most: int = 1000) -> int | None:
    """Seeds per configuration for a two-sided t-test at ``alpha`` to tell ``x``'s mean from ``y``'s with
    ``power``, if the true difference and spread were those observed (pooled standard deviation).

    Returns None when the observed difference is zero or more than ``most`` seeds would be needed, and 2
    when any number would do (no spread).
    """
    np = _np()
    stats = _stats()
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if len(a) < 2 or len(b) < 2:
        return None
    diff = abs(a.mean() - b.mean())
    spread = math.sqrt((a.var(ddof=1) * (len(a) - 1) + b.var(ddof=1) * (len(b) - 1)) / (len(a) + len(b) - 2))
    if diff == 0:
        return None
    if spread == 0:
        return 2
    n = np.arange(2, most + 1)
    df = 2 * n - 2
    nc = diff / (spread * np.sqrt(2.0 / n))
    crit = stats.t.ppf(1 - alpha / 2, df)
    achieved = stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc)
    enough = np.nonzero(achieved >= power)[0]
    return int(n[enough[0]]) if len(enough) else None
