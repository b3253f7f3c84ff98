"""The work of the `rlcloud cluster ...` commands (declared in :mod:`rlcloud.cli.cluster`; loaded only when one
of them runs)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from rlcloud.cli._common import blame_flags, output_format, print_data, set_flags, shown, text
from rlcloud.cli._common import console as _console
from rlcloud.cli._parser import echo
from rlcloud.cluster import Cluster
from rlcloud.display import span
from rlcloud.errors import SpecError, SpecProblem
from rlcloud.gke.info import ClusterInfo
from rlcloud.gke.operations import ProgressCallback
from rlcloud.gke.prices import estimate_hourly_cost


def _confirm(question: str, assume_yes: bool) -> bool:
    """Ask on the terminal; without one (CI, pipes) refuse unless --yes was given."""
    if assume_yes:
        return True
    if not sys.stdin.isatty():
        raise SpecError([SpecProblem("--yes", "no terminal to confirm on: pass --yes to proceed")])
    answer = input(f"{question} [y/N] ").strip().lower()
    return answer in ("y", "yes")


def _operation_bar(args: argparse.Namespace) -> ProgressCallback | None:
    """A bar per GKE operation on stderr (its own status and progress), the same tqdm bar as in a notebook."""
    from rlcloud.gke.operations import tqdm_progress

    return None if args.quiet else tqdm_progress(file=sys.stderr)


def _gke_options(args: argparse.Namespace) -> dict[str, Any]:
    """The doctor's project and credentials: the flags, else the project config (rlcloud.yaml), else ADC.

    Clusters are resolved by the facade (:class:`rlcloud.Cluster`), by the same rule.
    """
    from rlcloud.config import google_credentials, load_project_config

    config = load_project_config()
    return {"project": args.project or config.project, "credentials": google_credentials(config)}


def _spec_from_args(args: argparse.Namespace, sets: dict[str, Any]) -> Any:
    from rlcloud.specs import ClusterSpec

    flags = {
        "name": args.name,
        "num_nodes": args.num_nodes,
        "gpus_per_node": args.gpus_per_node,
        "gpu_type": args.gpu_type,
        "machine_type": args.machine_type,
        "location": args.location,
        "spot": args.spot,
        "project": args.project,
    }
    overrides = {k: v for k, v in flags.items() if v is not None}
    return ClusterSpec.from_file(args.file, **{**overrides, **sets})


def cluster_create(args: argparse.Namespace, sets: dict[str, Any]) -> int:
    """`rlcloud cluster create -f FILE`: pre-flight (the spec's rules, then the doctor's cheap checks of the
    project unless --skip-doctor), cost estimate, confirmation, create with a progress bar."""
    from rlcloud.gke.preflight import check_cluster_spec

    with blame_flags(set_flags(sets)):
        spec = _spec_from_args(args, sets)
        check_cluster_spec(spec)  # before anything is asked or created
    console = _console()
    gpus = f", {spec.gpus_per_node}x {spec.gpu_type.value} per node" if spec.gpu_type else ""
    shape = (
        f"in {spec.location}: {spec.num_nodes}x {spec.effective_machine_type}{gpus}"
        + (" (spot)" if spec.spot else "")
        + (f", expires after {spec.ttl}" if spec.ttl else "")
        + (f", deleted after {spec.autodown} idle" if spec.autodown else "")
    )
    console.print(f"cluster [bold]{text(spec.name)}[/] {text(shape)}")
    console.print(str(estimate_hourly_cost(spec)), markup=False)
    if spec.capacity:
        from rlcloud.gke.capacity import rung_hourly_cost

        rungs = [(str(r), rung_hourly_cost(spec, str(r))) for r in spec.capacity]
        ladder = " > ".join(f"{r} ~${c:.2f}/h" if c is not None else r for r, c in rungs)
        console.print(f"capacity ladder of the GPU pool (on a stockout or quota error): {ladder}", markup=False)
    cluster = Cluster.gke(spec, project=args.project, doctor=not args.skip_doctor)
    if not args.skip_doctor and not cluster.exists():
        # before asking: a project that cannot run this cluster is refused (PreflightError, exit 2) up front
        for check in cluster.check_project():
            console.print(str(check), markup=False)
    if not _confirm("Create this cluster?", args.yes):
        console.print("nothing created")
        return 1
    info = cluster.create(wait=not args.no_wait, progress=_operation_bar(args))
    console.print(f"{info.name}: {info.status} in {info.location} (project {info.project})", markup=False)
    if cluster.reaper_note:
        console.print(cluster.reaper_note, markup=False)
    return 0


def info_row(info: ClusterInfo, now: float) -> dict[str, Any]:
    """One cluster as a JSON-ready dict (the columns of `rlcloud cluster list`); the cost is an estimate since
    creation (:meth:`ClusterInfo.cost_so_far`)."""
    cost = info.cost_so_far(now)
    return {
        "name": info.name,
        "location": info.location,
        "machine_type": info.machine_type,
        "nodes": info.num_nodes,
        "gpus_per_node": info.gpus_per_node,
        "gpu_type": info.gpu_type,
        "status": info.status,
        "age": "-" if (age := info.age(now)) is None else span(age, "compact"),
        "expiry": info.expiry.isoformat() if info.expiry else None,
        "autodown_seconds": info.autodown,
        "teardown": info.teardown(now),
        "estimated_cost_usd": cost.usd if cost else None,
        "cost_prices_date": cost.prices_date if cost else None,
        "experiment": info.experiment,
        "managed": info.managed,
        "problems": list(info.problems),
        "capacity": info.capacity or None,
        "capacity_tried": info.capacity_tried or None,
    }


def cluster_list(args: argparse.Namespace) -> int:
    """`rlcloud cluster list`: name, location, machine type, nodes, GPUs per node, status, age, ttl/autodown, and
    the estimated cost so far."""
    infos = Cluster.list(args.project, all_clusters=args.all)
    now = time.time()
    rows = [info_row(i, now) for i in infos]
    from rlcloud.cli.complete import remember_clusters

    remember_clusters(r["name"] for r in rows)  # shell completion offers these names, without asking GKE
    fmt = output_format(args)
    if fmt != "table":
        print_data(rows, fmt)
        return 0
    from rich.table import Table
    from rich.text import Text

    table = Table(show_edge=False)
    columns = ("name", "location", "machine type", "nodes", "GPUs/node", "status", "age", "teardown", "cost so far*")
    for column in columns:
        table.add_column(column)
    for r in rows:
        gpus = f"{r['gpus_per_node']}x {r['gpu_type']}" if r["gpu_type"] else "0"
        if r["capacity"]:
            # the capacity ladder's rung, and the steps that failed before it (rlcloud.gke.capacity)
            gpus += f" {r['capacity']}" + (f" (tried {r['capacity_tried']})" if r["capacity_tried"] else "")
        cost = "-" if r["estimated_cost_usd"] is None else f"~${r['estimated_cost_usd']:.2f}"
        cells = (
            r["name"], r["location"], r["machine_type"], str(r["nodes"]), gpus, r["status"], r["age"], r["teardown"],
            cost,
        )  # fmt: skip
        table.add_row(*(Text(str(cell)) for cell in cells))
    console = _console()
    console.print(table if rows else "no rlcloud clusters" + ("" if args.all else " (--all lists every cluster)"))
    if rows:
        from rlcloud.gke.prices import PRICES_DATE, PRICES_REGION

        console.print(
            f"* estimate: each pool at its initial size since creation, list prices of {PRICES_DATE} "
            f"({PRICES_REGION}); autoscaling, discounts and other regions differ",
            markup=False,
        )
    return 0


def cluster_delete(args: argparse.Namespace) -> int:
    """`rlcloud cluster delete -c NAME | --all`: list what will be deleted, ask, delete (idempotent)."""
    from rlcloud.specs import ClusterSpec

    console = _console()
    if args.all:
        targets = [
            Cluster.gke(ClusterSpec(name=i.name, location=i.location), project=i.project)
            for i in Cluster.list(args.project)
        ]
    else:
        targets = [Cluster.get(args.cluster, project=args.project, location=args.location)]
    if not targets:
        console.print("no rlcloud clusters to delete")
        return 0
    for target in targets:
        handle = target.handle
        console.print(f"will delete {handle.name} in {handle.location} (project {handle.project})", markup=False)
    if not _confirm(f"Delete {len(targets)} cluster(s)?", args.yes):
        console.print("nothing deleted")
        return 1
    for target in targets:
        name = target.spec.name
        target.delete(wait=not args.no_wait, progress=_operation_bar(args))
        console.print(f"deleted {name}", markup=False)
    return 0


def cluster_reap(args: argparse.Namespace) -> int:
    """`rlcloud cluster reap`: delete rlcloud clusters past their expiry label (after listing them)."""
    console = _console()
    expired = Cluster.reap(args.project, dry_run=True)
    if not expired:
        console.print("no expired rlcloud clusters")
        return 0
    for info in expired:
        console.print(f"expired: {info.name} in {info.location} (expiry {info.expiry})", markup=False)
    if args.dry_run or not _confirm(f"Delete {len(expired)} expired cluster(s)?", args.yes):
        console.print("nothing deleted")
        return 0
    deleted = Cluster.reap(args.project)
    console.print(f"deleted {len(deleted)} cluster(s): {', '.join(i.name for i in deleted)}", markup=False)
    return 0


def run_doctor(args: argparse.Namespace) -> int:
    """`rlcloud doctor`: every check of :class:`rlcloud.gke.doctor.Doctor`, one line each; exit 1 when one fails."""
    from rlcloud.config import load_project_config
    from rlcloud.gke.doctor import doctor_for

    config = load_project_config()
    options = _gke_options(args)
    spec = None
    if args.file:
        from rlcloud.specs import ClusterSpec

        spec = ClusterSpec.from_file(args.file)
    project = options["project"] or (spec.project if spec else None)
    if not project:
        raise SpecError([SpecProblem("--project", "no project given, in rlcloud.yaml or in the cluster spec")])
    results = args.results or config.results or ""
    checks = doctor_for(project, results, spec=spec, config=config, credentials=options["credentials"]).run()
    fmt = output_format(args)
    if fmt != "table":
        print_data([{"check": c.name, "status": c.status, "detail": c.detail, "fix": c.fix} for c in checks], fmt)
    else:
        for check in checks:
            print(shown(check))
    ok = all(c.ok for c in checks)
    if args.smoke:
        ok = _smoke(args, spec, project, results, options["credentials"]) and ok
    return 0 if ok else 1


def _smoke(args: argparse.Namespace, spec: Any, project: str, results: str, credentials: Any) -> bool:
    """`rlcloud doctor --smoke`: one tiny pod on the existing cluster, each step printed as it ends."""
    from rlcloud.smoke import smoke

    if not args.cluster and spec is None:
        raise SpecError([SpecProblem("--cluster", "--smoke runs on an existing cluster: give -c NAME or -f FILE")])
    if args.cluster:
        target = Cluster.get(args.cluster, project=project, credentials=credentials)
    else:
        target = Cluster.gke(spec, project=project, credentials=credentials, doctor=False)
        if not target.exists():
            problem = f"cluster {spec.name} does not exist: create it first (rlcloud cluster create -f {args.file})"
            raise SpecError([SpecProblem("--file", problem)])
    echo(f"smoke test on {target.describe()} (results {results or '-'}):", flush=True)
    steps = smoke(
        target,
        results,
        schedule_timeout=args.schedule_timeout,
        run_timeout=args.timeout,
        on_step=lambda step: print(shown(step), flush=True),
    )
    return all(s.ok for s in steps)
