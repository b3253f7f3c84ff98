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

from rlcloud.comparison.explained import RUN_REASONS, explain, records, row_reasons
from rlcloud.comparison.plots import plot_runs
from rlcloud.comparison.runs import RunResults, load_runs
from rlcloud.comparison.statistics import (
    AT_MAX_COLUMNS,
    SUMMARY_COLUMNS,
    THRESHOLD_COLUMNS,
    Best,
    BudgetError,
    best,
    confidence_interval,
    performance_profiles,
    summarize,
)
from rlcloud.comparison.table import (
    RUN_COLUMNS,
    Budgets,
    CompareOptions,
    Objective,
    compare,
    differing_parameters,
    run_table,
    time_to_threshold,
)

# every name callers import from the package (mypy: __all__ is what it re-exports)
__all__ = [
    "AT_MAX_COLUMNS",
    "RUN_COLUMNS",
    "RUN_REASONS",
    "SUMMARY_COLUMNS",
    "THRESHOLD_COLUMNS",
    "Best",
    "BudgetError",
    "Budgets",
    "CompareOptions",
    "Objective",
    "RunResults",
    "best",
    "compare",
    "confidence_interval",
    "differing_parameters",
    "explain",
    "load_runs",
    "performance_profiles",
    "plot_runs",
    "records",
    "row_reasons",
    "run_table",
    "summarize",
    "time_to_threshold",
]
