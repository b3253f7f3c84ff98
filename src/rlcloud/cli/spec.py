"""`rlcloud spec validate|show`: check and resolve spec files without running anything."""

from __future__ import annotations

import argparse
import sys

from rlcloud.cli._parser import EXIT_OK, EXIT_USAGE, SET, Arg, command, echo, group

SPEC = group("spec", "Validate and show spec files.", "rlcloud spec validate FILE")


@command(
    "spec validate",
    "Check spec files (experiment, cluster, sweep, agent, network or environment); exit 2 on problems.",
    "rlcloud spec validate a.yaml b.json --build",
    args=[
        Arg("paths", nargs="+", metavar="PATH"),
        Arg("--build", action="store_true", help="also build each agent with Tensorforce (CPU, seconds)"),
    ],
)
def validate(args: argparse.Namespace) -> int:
    """Validate each file: one line OK with key fields, or the problems (exit 2)."""
    from rlcloud.validation import validate_file

    failed = False
    for path in args.paths:
        report = validate_file(path, build=args.build)
        for note in report.notes:
            echo(f"{path}: note: {note}", file=sys.stderr)
        if report.ok:
            echo(f"{path}: OK {report.summary}")
            continue
        failed = True
        echo(f"{path}: INVALID", file=sys.stderr)
        for problem in report.problems:
            echo(f"  - {str(problem).removeprefix(f'{path}: ')}", file=sys.stderr)
    return EXIT_USAGE if failed else EXIT_OK


@command(
    "spec show",
    "Print a spec fully resolved.",
    "rlcloud spec show exp.yaml --set num_workers=8",
    args=[Arg("path", metavar="PATH"), SET],
)
def show(args: argparse.Namespace) -> int:
    """Print the resolved spec (files referenced inline, defaults filled) as YAML, or JSON with -o json."""
    from rlcloud.cli._common import blame_flags, output_format, parse_sets, set_flags
    from rlcloud.specs.loading import load_spec, spec_to_json, spec_to_yaml

    sets = parse_sets(args.set)
    with blame_flags(set_flags(sets)):
        spec = load_spec(args.path, **sets)
    sys.stdout.write(spec_to_json(spec) + "\n" if output_format(args, "yaml") == "json" else spec_to_yaml(spec))
    return EXIT_OK
