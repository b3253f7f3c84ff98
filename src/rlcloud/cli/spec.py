"""`rlcloud spec validate|show`: check and resolve spec files without running anything."""

from __future__ import annotations

import argparse
import sys

from rlcloud.cli._parser import EXIT_OK, EXIT_USAGE, SET, Arg, command, group

SPEC = group("spec", "Validate and show spec files.", "rlcloud spec validate FILE")


@command(
    "spec validate",
    "Check spec files; exit 2 on problems.",
    "rlcloud spec validate a.yaml b.json",
    args=[Arg("paths", nargs="+", metavar="PATH")],
)
def validate(args: argparse.Namespace) -> int:
    """Validate each file: one line OK with key fields, or the problems (exit 2)."""
    import warnings

    from rlcloud.errors import SpecError
    from rlcloud.specs import ClusterSpec, ExperimentSpec, LegacySpecWarning
    from rlcloud.specs.loading import load_spec

    failed = False
    for path in args.paths:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", LegacySpecWarning)
            try:
                spec = load_spec(path)
            except SpecError as exc:
                failed = True
                print(f"{path}: INVALID", file=sys.stderr)
                for problem in exc.problems:
                    problem_text = str(problem).removeprefix(f"{path}: ")
                    print(f"  - {problem_text}", file=sys.stderr)
                continue
        for w in caught:
            print(f"{path}: note: {w.message}", file=sys.stderr)
        if isinstance(spec, ExperimentSpec):
            stop = ", ".join(
                x
                for x in (
                    f"{spec.episodes} episodes" if spec.episodes else "",
                    f"{spec.total_timesteps} timesteps" if spec.total_timesteps else "",
                )
                if x
            )
            env = spec.environment.get("level") or spec.environment.get("type")
            print(
                f"{path}: OK experiment {spec.name}: {spec.run_mode} x{spec.num_workers}, env {env}, "
                f"agent {spec.agent.get('type')}, stop after {stop}"
            )
        elif isinstance(spec, ClusterSpec):
            gpus = f", {spec.gpus_per_node}x {spec.gpu_type.value}" if spec.gpu_type else ""
            print(
                f"{path}: OK cluster {spec.name}: {spec.num_nodes}x {spec.effective_machine_type}{gpus} "
                f"in {spec.location}{' (spot)' if spec.spot else ''}"
            )
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
