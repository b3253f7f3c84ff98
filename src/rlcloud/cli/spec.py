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
    "Print a spec fully resolved (--code: the files its code archive would hold, and its digest).",
    "rlcloud spec show exp.yaml --set num_workers=8",
    args=[
        Arg("path", metavar="PATH"),
        SET,
        Arg("--code", action="store_true", help="list what code: packs (and leaves out), its size and digest"),
    ],
)
def show(args: argparse.Namespace) -> int:
    """Print the resolved spec (files referenced inline, defaults filled) as YAML, or JSON with -o json."""
    from rlcloud.cli._common import blame_flags, output_format, parse_sets, set_flags
    from rlcloud.specs.loading import load_spec, spec_to_json, spec_to_yaml

    sets = parse_sets(args.set)
    with blame_flags(set_flags(sets)):
        spec = load_spec(args.path, **sets)
    if args.code:
        return _show_code(args, spec)
    sys.stdout.write(spec_to_json(spec) + "\n" if output_format(args, "yaml") == "json" else spec_to_yaml(spec))
    return EXIT_OK


def _show_code(args: argparse.Namespace, spec: object) -> int:
    """What the spec's code archive holds (rlcloud.codepack.pin packs it here, uploads nothing)."""
    from rlcloud.cli._common import output_format, print_data
    from rlcloud.codepack import pin
    from rlcloud.errors import SpecError, SpecProblem
    from rlcloud.specs import ExperimentSpec
    from rlcloud.specs.sweep import SweepSpec

    experiment = spec.experiment if isinstance(spec, SweepSpec) else spec
    if not isinstance(experiment, ExperimentSpec):
        raise SpecError([SpecProblem("code", "only experiments and sweeps have code", args.path)])
    _pinned, archive = pin(experiment)
    if archive is None:
        raise SpecError([SpecProblem("code", "this spec has no code: (nor has rlcloud.yaml); add code: .")])
    fmt = output_format(args, "table")
    if fmt != "table":
        print_data(
            {
                "digest": archive.digest,
                "bytes": len(archive.data),
                "files": [{"path": rel, "bytes": size} for rel, size in archive.files],
                "left_out": [{"path": rel, "why": why} for rel, why in archive.left_out],
            },
            fmt,
        )
        return EXIT_OK
    for rel, size in archive.files:
        echo(f"{size:>10}  {rel}")
    echo(f"{len(archive.files)} files, {len(archive.data)} bytes packed: {archive.digest}")
    for rel, why in archive.left_out:
        echo(f"left out: {rel} ({why})", file=sys.stderr)
    return EXIT_OK
