"""`rlcloud sweep ...`: many runs of one experiment (seeds, a grid, a random search), compared at the end."""

from __future__ import annotations

import argparse

from rlcloud.cli._parser import EXIT_FAILURE, EXIT_OK, SET, Arg, checked, command, echo, group
from rlcloud.cli.analysis import GUARDS
from rlcloud.cli.experiment import TARGET, _cluster_from_args
from rlcloud.display import PLAIN_INTERVAL_S, sweep_table, vitals_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SWEEP = group("sweep", "Run many trials of an experiment: seeds, grids, random search.", "rlcloud sweep run FILE")

FILE = Arg(
    "file",
    metavar="FILE",
    help="a sweep spec (kind: Sweep), or an experiment spec to sweep with --seeds/--grid",
)
NAME = Arg("name", metavar="NAME", type=checked("run_name"), help="sweep name")
BUILD = (
    Arg("--seeds", metavar="N", type=int, help="seeds 1..N of every configuration"),
    Arg(
        "--grid",
        action="append",
        metavar="FIELD=V1,V2,...",
        help="sweep a field over values, e.g. --grid agent.learning_rate=1e-3,3e-4 (repeatable: every combination)",
    ),
    Arg("--max-parallel", metavar="N", type=int, help="trials running at once (default: the CPU count)"),
    Arg("--name", dest="sweep_name", metavar="NAME", help="sweep name (default: the experiment's + '-sweep')"),
)


def _parse_grid(items: list[str] | None) -> dict[str, list[Any]]:
    """--grid FIELD=V1,V2,... items; each value read as --set reads its value (the bounded reader)."""
    from rlcloud.cli._common import parse_flag_value
    from rlcloud.errors import SpecError, SpecProblem

    grid: dict[str, list[Any]] = {}
    for item in items or []:
        key, sep, values = item.partition("=")
        if not sep or not key.strip() or not values:
            raise SpecError(
                [SpecProblem("--grid", "expected FIELD=V1,V2,... such as agent.learning_rate=1e-3,3e-4", item)]
            )
        field, flag = key.strip(), f"--grid {key.strip()}"
        if field in grid:  # the second replaced the first without a word
            raise SpecError([SpecProblem(flag, "given twice: give every value in one --grid FIELD=V1,V2", item)])
        if any(not v.strip() for v in values.split(",")):
            raise SpecError([SpecProblem(flag, "an empty value: give V1,V2,... with no empty one", values)])
        grid[field] = [parse_flag_value(v, flag) for v in values.split(",")]
    return grid


def _new_sweep(args: argparse.Namespace) -> Any:
    """A Sweep from FILE (a sweep file, or an experiment file plus --seeds/--grid), not started."""
    from pathlib import Path

    from rlcloud.cli._common import blame_flags, parse_sets, set_flags
    from rlcloud.errors import SpecError, SpecProblem
    from rlcloud.specs.building import build_model
    from rlcloud.specs.loading import read_data_file
    from rlcloud.specs.sweep import SweepSpec
    from rlcloud.sweep import Sweep

    sets = parse_sets(args.set)
    raw = read_data_file(args.file)
    overrides: dict[str, Any] = {}
    if args.max_parallel is not None:
        overrides["max_parallel"] = args.max_parallel
    if args.seeds is not None:
        overrides["seeds"] = args.seeds
    grid = _parse_grid(args.grid)
    both = sorted(set(grid) & set(sets))
    if both:  # which one was meant? the grid replaced the --set without a word
        raise SpecError(
            [SpecProblem(f"--grid {both[0]}", "also given with --set: give the field's values in --grid only", None)]
        )
    given = {"seeds": args.seeds, "max_parallel": args.max_parallel, "name": args.sweep_name, "parameters": grid}
    names = {"seeds": "--seeds", "max_parallel": "--max-parallel", "name": "--name", "parameters": "--grid"}
    flags = {**set_flags(sets), **{field: names[field] for field, value in given.items() if value}}
    flags.update({f"parameters.{key}": f"--grid {key}" for key in grid})
    if args.seeds is not None or args.max_parallel is not None:  # 0 is given too
        flags.update({f: names[f] for f in ("seeds", "max_parallel") if given[f] is not None})
    with blame_flags(flags):
        # build_model: pydantic's errors become a SpecError naming the field (then the flag), never a traceback
        if isinstance(raw, dict) and raw.get("kind") == "Sweep":
            spec = SweepSpec.from_file(args.file, **overrides)
            if sets:
                spec = spec.model_copy(update={"experiment": spec.experiment.replace(**sets)})
            if grid:
                spec = build_model(SweepSpec, {**spec.model_dump(), "parameters": {**spec.parameters, **grid}})
        else:
            from rlcloud.specs import ExperimentSpec

            experiment = ExperimentSpec.from_file(Path(args.file), **sets)
            name = args.sweep_name or f"{experiment.name[:34]}-sweep"
            data = {"name": name, "experiment": experiment.model_dump(mode="json"), "parameters": grid, **overrides}
            spec = build_model(SweepSpec, data)
    return Sweep(spec, results=getattr(args, "results", None), cluster=_cluster_from_args(args))


def _sweep(args: argparse.Namespace) -> Any:
    from rlcloud.sweep import Sweep

    return Sweep.attach(args.name, cluster=_cluster_from_args(args), results=getattr(args, "results", None))


@command(
    "sweep validate",
    "Check a sweep: every trial is validated as an experiment would be.",
    "rlcloud sweep validate examples/cartpole_sweep.yaml",
    args=[FILE, SET, *BUILD],
)
def validate(args: argparse.Namespace) -> int:
    """Expand the sweep into its trials and validate each; exit 2 naming the trial and field otherwise."""
    sweep = _new_sweep(args)
    sweep.validate()
    echo(f"{sweep.name}: {sweep.spec.num_trials} trials OK ({sweep.spec.configurations} configurations)")
    return EXIT_OK


@command(
    "sweep run",
    "Start a sweep and follow it to the end, then print its results.",
    "rlcloud sweep run examples/cartpole_ppo.yaml --seeds 5 --grid agent.learning_rate=1e-3,3e-4",
    args=[FILE, SET, *BUILD, *TARGET, *GUARDS],
)
def run(args: argparse.Namespace) -> int:
    """Start a sweep, show one line per trial (state, timestep, return) until all end, then the results."""
    from rlcloud.cli._common import command_line

    sweep = _new_sweep(args)
    sweep.start()
    status = _follow(sweep, quiet=args.quiet, again=command_line(args.argv))
    _print_results(sweep, args)
    return EXIT_OK if status.state == "succeeded" else EXIT_FAILURE


@command(
    "sweep start",
    "Start a sweep in the background.",
    "rlcloud sweep start examples/cartpole_sweep.yaml -c rl-t4 --results gs://my-bucket/rl",
    args=[FILE, SET, *BUILD, *TARGET],
)
def start(args: argparse.Namespace) -> int:
    """Start a sweep in the background and return."""
    sweep = _new_sweep(args)
    sweep.start()
    what = "is already running" if sweep.already_running else "started"
    echo(f"{sweep.name} {what}: {sweep.spec.num_trials} trials; results: {sweep.location}")
    from rlcloud.cli._common import command_line
    from rlcloud.cli.experiment import target_flags

    flags = target_flags(args)  # what finds it again: a --results or a cluster's flags
    status, results = (command_line(["sweep", verb, sweep.name, *flags]) for verb in ("status", "results"))
    echo(f"follow it with: {status}   |   {results}")
    return EXIT_OK


@command("sweep status", "Show each trial's state and progress.", "rlcloud sweep status lr-sweep", args=[NAME, *TARGET])
def status(args: argparse.Namespace) -> int:
    """One row per trial: parameters, seed, state, timestep, mean return, steps/s."""
    from rlcloud.cli._common import console, output_format, print_data

    observed = _sweep(args).status()
    fmt = output_format(args)
    if fmt != "table":
        print_data(observed.to_dict(), fmt)
        return EXIT_OK
    console().print(sweep_table(observed))
    return EXIT_OK


@command(
    "sweep results",
    "A sweep's results: one row per trial, and per configuration over seeds.",
    "rlcloud sweep results lr-sweep -o csv --plot lr-sweep.png",
    args=[NAME, *TARGET, Arg("--plot", metavar="FILE.png", help="also write the comparison plot"), *GUARDS],
)
def results(args: argparse.Namespace) -> int:
    """Print the trials' results (table, JSON or CSV) and optionally write the comparison plot."""
    if args.plot:  # a bad --plot is found before the sweep is read
        from rlcloud.plotting import check_plot_path

        check_plot_path(args.plot, field="--plot")
    _print_results(_sweep(args), args)
    return EXIT_OK


@command(
    "sweep stop",
    "Stop a sweep: running trials checkpoint and stop.",
    "rlcloud sweep stop lr-sweep",
    args=[NAME, *TARGET],
)
def stop(args: argparse.Namespace) -> int:
    """Stop a sweep (idempotent)."""
    sweep = _sweep(args)
    if not sweep.stop():
        echo(sweep.nothing_to_do)
        return EXIT_OK
    echo(f"stopped {sweep.name}")
    return EXIT_OK


@command(
    "sweep extend",
    "Grow a sweep: more seeds or grid values, or train its best configurations further.",
    "rlcloud sweep extend lr-sweep --seeds 8",
    args=[
        NAME,
        Arg("--seeds", metavar="N", type=int, help="N seeds per configuration in all (the lowest unused are added)"),
        Arg(
            "--grid",
            action="append",
            metavar="FIELD=V1,V2,...",
            help="add values to a field of the sweep's grid, e.g. --grid agent.learning_rate=1e-4 (repeatable)",
        ),
        Arg("--top", metavar="K", type=int, help="with --total-timesteps: the K best configurations train on"),
        Arg("--total-timesteps", metavar="T", type=int, help="with --top: their new budget"),
        *TARGET,
    ],
)
def extend(args: argparse.Namespace) -> int:
    """Add trials of the same sweep (finished ones are kept as they are) or extend the best ones' budget."""
    from rlcloud.cli._common import blame_flags

    grid = _parse_grid(args.grid)
    sweep = _sweep(args)
    flags = {"seeds": "--seeds", "top": "--top", "total_timesteps": "--total-timesteps", "growth": "--grid"}
    flags.update({f"parameters.{key}": f"--grid {key}" for key in grid})
    with blame_flags(flags):
        added = sweep.extend(
            seeds=args.seeds, parameters=grid or None, top=args.top, total_timesteps=args.total_timesteps
        )
    verb = "trains on" if args.top is not None else "added"
    if not added:
        echo(f"{sweep.name} has these trials already: nothing to add ({sweep.spec.num_trials} trials)")
    else:
        shown = ", ".join(added[:8]) + (f" and {len(added) - 8} more" if len(added) > 8 else "")
        echo(f"{sweep.name}: {len(added)} trial(s) {verb}: {shown}; {sweep.spec.num_trials} trials in all")
    return EXIT_OK


@command(
    "sweep rerun",
    "Run a sweep's failed (or stopped) trials again from their last checkpoint.",
    "rlcloud sweep rerun lr-sweep --state failed",
    args=[
        NAME,
        Arg(
            "--state",
            choices=("failed", "stopped"),
            default="failed",
            help="which trials run again (default: failed)",
        ),
        *TARGET,
    ],
)
def rerun(args: argparse.Namespace) -> int:
    """Run the trials in a state again, each from its last complete checkpoint."""
    sweep = _sweep(args)
    names = sweep.rerun(args.state)
    if not names:
        echo(f"{sweep.name} has no {args.state} trial: nothing to run again")
        return EXIT_OK
    echo(f"{sweep.name}: running {len(names)} {args.state} trial(s) again: {', '.join(names[:8])}")
    return EXIT_OK


@command("sweep list", "List the sweeps.", "rlcloud sweep list --results gs://my-bucket/rl", args=[*TARGET])
def list_(args: argparse.Namespace) -> int:
    """Names of the sweeps on the target."""
    from rlcloud.cli._common import output_format, print_data, shown
    from rlcloud.sweep import Sweep

    names = Sweep.list(cluster=_cluster_from_args(args), results=args.results)
    fmt = output_format(args)
    if fmt != "table":  # -o json|yaml|csv: rows, as `experiment list` gives
        print_data([{"name": name} for name in names], fmt)
        return EXIT_OK
    for name in names:
        print(shown(name))
    return EXIT_OK


# ------------------------------------------------------------------------------------------------ output


def _follow(sweep: Any, *, quiet: bool, again: str | None = None, interval: float = PLAIN_INTERVAL_S) -> Any:
    """Follow a sweep to the end: a live table on a terminal; otherwise a line per trial state change, and
    the sweep's figures every ``interval`` seconds (a log shows that long trials advance). Ctrl-C stops the
    sweep (its trials checkpoint) and says how to resume it: ``again``, the command that started it."""
    import sys
    import time

    from rlcloud.cli._common import console, shown

    out = console(stderr=True)
    seen: dict[str, str] = {}
    last_line = time.monotonic()
    try:
        if out.is_terminal and not quiet:
            from rich.live import Live

            status = sweep.status()
            with Live(sweep_table(status), console=out, refresh_per_second=1) as live:
                while not status.finished:
                    time.sleep(2)
                    status = sweep.status()
                    live.update(sweep_table(status))
            return status
        status = sweep.status()
        while True:
            for trial in status.trials:
                if seen.get(trial.name) != trial.state and not quiet:
                    seen[trial.name] = trial.state
                    ret = trial.progress.mean_return
                    echo(
                        f"{trial.name}: {trial.state}, timestep {trial.progress.timestep or 0}, "
                        f"return {'-' if ret is None else f'{ret:.1f}'}",
                        file=sys.stderr,
                        flush=True,
                    )
            if status.finished:
                return status
            if not quiet and time.monotonic() - last_line >= interval:
                last_line = time.monotonic()
                line = f"{status.name}: {status.state} · {status.counts_text()}{vitals_text(status.vitals)}"
                print(shown(line.replace("  ", " · ")), file=sys.stderr, flush=True)
            time.sleep(2)
            status = sweep.status()
    except KeyboardInterrupt:
        echo("interrupted: stopping the sweep (trials checkpoint first)", file=sys.stderr)
        sweep.stop()
        if again is not None:
            echo(
                f"stopped {sweep.name}; to resume it (finished trials are kept, the others resume from their"
                f" checkpoints), run the same command again: {again}",
                file=sys.stderr,
            )
        raise


def _print_results(sweep: Any, args: argparse.Namespace) -> None:
    """One row per trial, then (in a table) the configurations over their seeds and the best one."""
    from rlcloud.cli._common import console, output_format, print_data, shown

    frame = sweep.results(
        budgets=getattr(args, "budgets", "refuse"), repeated_seeds=getattr(args, "allow_repeated_seeds", False)
    )
    fmt = output_format(args)
    if fmt == "csv":
        print(shown(frame.to_csv(index=False)), end="")
    elif fmt in ("json", "yaml"):
        from rlcloud.comparison import records

        print_data(records(frame), fmt)  # NaN -> null: valid JSON
    else:
        from rlcloud.cli.analysis import frame_table, print_statistics

        console().print(frame_table(frame.drop(columns=["location"]), f"{sweep.name}: trials"))
        if len(frame):
            print_statistics(frame, title=sweep.name)
    plot = getattr(args, "plot", None)
    if plot:
        sweep.plot(plot)
        echo(f"wrote {plot}")
