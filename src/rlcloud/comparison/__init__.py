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

# the package's names, re-exported (``x as x``: explicit for mypy); each submodule is one concern
from rlcloud.comparison.explained import (
    RUN_REASONS as RUN_REASONS,
)
from rlcloud.comparison.explained import (
    explain as explain,
)
from rlcloud.comparison.explained import (
    records as records,
)
from rlcloud.comparison.explained import (
    row_reasons as row_reasons,
)
from rlcloud.comparison.plots import (
    plot_runs as plot_runs,
)
from rlcloud.comparison.runs import (
    RunResults as RunResults,
)
from rlcloud.comparison.runs import (
    load_runs as load_runs,
)
from rlcloud.comparison.statistics import (
    AT_MAX_COLUMNS as AT_MAX_COLUMNS,
)
from rlcloud.comparison.statistics import (
    SUMMARY_COLUMNS as SUMMARY_COLUMNS,
)
from rlcloud.comparison.statistics import (
    THRESHOLD_COLUMNS as THRESHOLD_COLUMNS,
)
from rlcloud.comparison.statistics import (
    Best as Best,
)
from rlcloud.comparison.statistics import (
    BudgetError as BudgetError,
)
from rlcloud.comparison.statistics import (
    best as best,
)
from rlcloud.comparison.statistics import (
    confidence_interval as confidence_interval,
)
from rlcloud.comparison.statistics import (
    performance_profiles as performance_profiles,
)
from rlcloud.comparison.statistics import (
    summarize as summarize,
)
from rlcloud.comparison.table import (
    RUN_COLUMNS as RUN_COLUMNS,
)
from rlcloud.comparison.table import (
    Budgets as Budgets,
)
from rlcloud.comparison.table import (
    Objective as Objective,
)
from rlcloud.comparison.table import (
    compare as compare,
)
from rlcloud.comparison.table import (
    differing_parameters as differing_parameters,
)
from rlcloud.comparison.table import (
    run_table as run_table,
)
from rlcloud.comparison.table import (
    time_to_threshold as time_to_threshold,
)

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
