"""`rlcloud compare RUN...`: several runs side by side, one row per run, and per configuration over seeds."""

from __future__ import annotations

import argparse
import sys

from rlcloud.cli._parser import EXIT_OK, Arg, checked, command, echo

#: how runs that trained less than the others, and repeated seeds, are treated (compare and sweep results)
GUARDS = (
    Arg(
        "--budgets",
        choices=("refuse", "common", "complete"),
        default="refuse",
        help="runs that trained less (running, stopped early): refuse statistics (default), compare every run "
        "at the common budget, or leave the short runs out",
    ),
    Arg(
        "--allow-repeated-seeds",
        action="store_true",
        help="count two runs of one configuration with the same seed (refused by default)",
    ),
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@command(
    "compare",
    "Compare runs: the parameters that differ, the objective per run and over seeds.",
    "rlcloud compare ppo-s1 ppo-s2 ppo-lr3-s1 ppo-lr3-s2 --results gs://my-bucket/rl --plot runs.png\n"
    "  rlcloud compare rlcloud-results/lr-sweep/* -o csv",
    args=[
        Arg(
            "runs",
            nargs="+",
            metavar="RUN",
            help="run or sweep names (SWEEP, SWEEP/TRIAL; under --results), directories or gs:// locations",
        ),
        Arg(
            "--results",
            metavar="LOCATION",
            type=checked("results"),
            help="results root the run names are under: gs://bucket/prefix or a directory (default ./rlcloud-results)",
        ),
        Arg(
            "--objective",
            choices=("mean_return", "evaluation"),
            default="mean_return",
            help="mean return of the last --window training episodes (default), or of the final evaluation",
        ),
        Arg(
            "--window",
            type=int,
            default=20,
            metavar="EPISODES",
            help="episodes in the running mean of the objective and of --threshold (default 20)",
        ),
        Arg(
            "--threshold",
            type=float,
            metavar="RETURN",
            help="also the timesteps and wall time at which the running mean first reached RETURN, per run and "
            "per configuration (share of seeds that reached it; the median time, runs that never did counted "
            "as later)",
        ),
        Arg(
            "--by",
            choices=("run", "config"),
            default=None,
            help="with -o json|yaml|csv: one row per run (default; per configuration for a sweep) or per configuration",
        ),
        Arg(
            "--trials", action="store_true", help="a sweep's trials one row each too (a sweep shows its configurations)"
        ),
        Arg("--plot", metavar="FILE.png", help="also write the plot: IQM over seeds with its 95%% interval"),
        *GUARDS,
    ],
)
def compare(args: argparse.Namespace) -> int:
    """Compare runs, one row each, then each configuration over its seeds and the best one (statistics need
    rlcloud[analysis]); a sweep shows its configurations, and its trials with --trials."""
    from rlcloud.cli._common import console, output_format, print_data, shown
    from rlcloud.comparison import load_runs, plot_runs, records, run_table

    if args.plot:  # a bad --plot is found before any run is read
        from rlcloud.plotting import check_plot_path

        check_plot_path(args.plot, field="--plot")
    if args.window < 1:
        from rlcloud.errors import SpecError, SpecProblem

        raise SpecError([SpecProblem("--window", "must be a whole number >= 1", args.window)])
    loaded = load_runs(args.runs, results=args.results)
    table = run_table(
        loaded,
        objective=args.objective,
        window=args.window,
        budgets=args.budgets,
        repeated_seeds=args.allow_repeated_seeds,
        threshold=args.threshold,
    )
    sweeps = sorted({run.sweep for run in loaded if run.sweep})
    fmt = output_format(args)
    if fmt == "table":
        if args.trials or not sweeps:
            title = f"{len(loaded)} run{'s' if len(loaded) != 1 else ''} ({args.objective})"
            console().print(frame_table(table.drop(columns=["location"]), title))
        if len(loaded) > 1 or sweeps:
            one = sweeps[0] if len(sweeps) == 1 and all(run.sweep for run in loaded) else None
            print_statistics(table, title=", ".join(sweeps), sweep=one, flags=_results_flags(args))
    else:
        from rlcloud.comparison import summarize

        by = args.by or ("config" if sweeps and not args.trials else "run")
        frame = summarize(table) if by == "config" else table
        if fmt == "csv":
            print(shown(frame.to_csv(index=False)), end="")
        else:
            print_data(records(frame), fmt)
    if args.plot:
        plot_runs(loaded, path=args.plot, title=", ".join(sweeps), window=args.window)  # the table's window
        # stdout stays parseable with -o json|yaml|csv
        echo(f"wrote {args.plot}", file=sys.stdout if fmt == "table" else sys.stderr)
    return EXIT_OK


def _results_flags(args: argparse.Namespace) -> list[str]:
    """``--results ROOT`` when the command was given one: what finds a sweep again in a command it prints."""
    results = getattr(args, "results", None)
    return ["--results", str(results)] if results else []


def print_statistics(table: Any, *, title: str = "", sweep: str | None = None, flags: list[str] | None = None) -> None:
    """The configuration table (statistics over seeds with their intervals), its notes and the best
    configuration; when statistics cannot be had (no scipy, a budget choice to make) the reason, on stderr.
    ``sweep``: the one sweep compared, whose extend command the best's advice names (``flags`` find it)."""
    from rlcloud.cli._common import console
    from rlcloud.comparison import BudgetError, best, summarize
    from rlcloud.errors import MissingExtraError

    try:
        summary = summarize(table)
        found = best(table) if summary["n"].gt(0).any() else None
    except (MissingExtraError, BudgetError) as exc:  # the per-run table is still worth having: say why
        echo(f"(no statistics over seeds: {exc})", file=sys.stderr)
        return
    heading = f"{title + ': ' if title else ''}over seeds, per configuration (95% intervals)"
    console().print(frame_table(_compact(summary), heading))
    for note in summary.attrs.get("notes", []):
        echo(note)
    if found is not None and len(summary) > 1:
        if sweep is not None:
            from rlcloud.sweep import extend_advice

            found.next_step = extend_advice(sweep, found, flags)
        echo(found)


def _compact(summary: Any) -> Any:
    """The configuration table for people: each statistic and its interval in one cell ("464.3 [302.6, 625.9]";
    the value and why there is no interval, "387 (needs 3 seeds)", where there is none). JSON and CSV keep a
    column per bound and the reasons in ``notes``."""
    from rlcloud import intervals
    from rlcloud.comparison import row_reasons

    reasons = [row_reasons(notes) for notes in summary["notes"]]
    frame = summary[[*summary.attrs.get("parameters", []), "n"]].copy()
    for name in intervals.STATISTICS:
        frame[name] = [
            _with_interval(row, name, why) for (_, row), why in zip(summary.iterrows(), reasons, strict=True)
        ]
    if "at_max" in summary.columns:
        top = summary.attrs["return_bounds"][1]
        frame[f"at {top:g}"] = [
            _with_interval(row, "at_max", why, share=True)
            for (_, row), why in zip(summary.iterrows(), reasons, strict=True)
        ]
    if "reached" in summary.columns:
        for column, label in (
            ("reached", "reached"),
            ("threshold_timesteps", "timesteps to it"),
            ("threshold_wall_time", "seconds to it"),
        ):
            frame[label] = [
                _with_interval(row, column, why, share=column == "reached")
                for (_, row), why in zip(summary.iterrows(), reasons, strict=True)
            ]
    frame["seeds to separate"] = [
        _cell(needed) if needed == needed else f"({why.get('seeds_needed', '-')})"
        for needed, why in zip(summary["seeds_needed"], reasons, strict=True)
    ]
    frame["seeds"] = summary["seeds"]
    return frame


def _with_interval(row: Any, name: str, why: dict[str, str], *, share: bool = False) -> str:
    """One cell: the value and its interval, or the value and why an end is missing."""

    def shown(value: Any) -> str:
        return f"{value:.0%}" if share else _cell(value)

    value, low, high = row[name], row[f"{name}_low"], row[f"{name}_high"]
    if value != value:
        return f"({why.get(name, 'no value')})"
    if low == low and high == high:
        return f"{shown(value)} [{shown(low)}, {shown(high)}]"
    reason = why.get(name) or why.get(f"{name}_low") or why.get(f"{name}_high") or "no interval"
    if low == low:  # a censored time: the lower end is known, the upper is beyond the budget
        return f"{shown(value)} [{shown(low)}, ?] ({reason})"
    return f"{shown(value)} ({reason})"


def frame_table(frame: Any, title: str) -> Any:
    """A rich Table of a DataFrame: every value as plain text (never markup), floats to 4 digits, an empty cell
    as its reason (:func:`rlcloud.comparison.explain`: "(no evaluation round)"), never a bare NaN."""
    from rich.table import Table
    from rich.text import Text

    from rlcloud.comparison import explain

    table = Table(title=Text(title))
    for column in frame.columns:
        table.add_column(Text(str(column)), justify="right" if frame[column].dtype.kind in "iuf" else "left")
    for row in explain(frame).itertuples(index=False):
        table.add_row(*(Text(_cell(value)) for value in row))
    return table


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "-" if value != value else f"{value:.4g}"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)
