"""`rlcloud cluster create|list|delete|reap`: GKE clusters from the terminal.

Declarations only: the work is in :mod:`rlcloud.cli.gke`, imported when one of these commands runs.
"""

from __future__ import annotations

import argparse

from rlcloud.cli._parser import SET, Arg, OneOf, checked, command, group

CLUSTER = group("cluster", "Create, list and delete GKE clusters.", "rlcloud cluster list")
PROJECT = Arg(
    "--project",
    metavar="PROJECT",
    type=checked("project"),
    help="Google Cloud project (default: rlcloud.yaml, then ADC)",
)
LOCATION = checked("location")
YES = Arg("-y", "--yes", action="store_true", help="do not ask first")


@command(
    "cluster create",
    "Create a GKE cluster.",
    "rlcloud cluster create -f configs/clusters/t4.yaml -n my-t4 --yes",
    args=[
        Arg("-f", "--file", metavar="FILE", required=True, help="cluster spec file"),
        Arg("-n", "--name", metavar="NAME", type=checked("run_name"), help="cluster name (overrides the file)"),
        Arg("--num-nodes", metavar="N", type=checked("count"), help="number of experiment nodes (overrides the file)"),
        Arg("--gpus-per-node", metavar="N", type=checked("count"), help="GPUs per node (overrides the file)"),
        Arg(
            "--gpu-type",
            metavar="TYPE",
            type=checked("label"),
            help="GPU type: t4, l4, a100, a100-80gb, h100, h200, v100, p100, p4 or GKE's name (nvidia-tesla-t4); "
            "overrides the file",
        ),
        Arg(
            "--machine-type",
            metavar="TYPE",
            type=checked("label"),
            help="machine type, e.g. n1-standard-8 (overrides the file)",
        ),
        Arg("--location", metavar="LOCATION", type=LOCATION, help="zone or region (overrides the file)"),
        Arg("--spot", action="store_true", default=None, help="use Spot VMs (overrides the file)"),
        SET,
        PROJECT,
        Arg("-y", "--yes", action="store_true", help="do not ask before creating (the cost estimate is shown)"),
        Arg("--no-wait", action="store_true", help="return once the request is accepted"),
        Arg(
            "--skip-doctor",
            action="store_true",
            help="create without first running the cheap checks of `rlcloud doctor` (APIs, permissions, GPU "
            "quota, images)",
        ),
    ],
)
def create(args: argparse.Namespace) -> int:
    """Create a GKE cluster from a file (flags override its settings): pre-flight checks (the spec's, then the
    project's: `rlcloud doctor`'s cheap ones), the cost estimate, a confirmation, then the creation with a
    progress bar."""
    from rlcloud.cli._common import blame_flags, parse_sets
    from rlcloud.cli.gke import cluster_create

    # a bad --gpu-type / --num-nodes is the flag's fault, not the spec file's
    given = {field: flag for field, flag in _OVERRIDE_FLAGS.items() if getattr(args, field, None) is not None}
    with blame_flags(given):
        return cluster_create(args, parse_sets(args.set))


#: ClusterSpec field -> the `cluster create` flag that overrides it
_OVERRIDE_FLAGS = {
    "name": "--name",
    "num_nodes": "--num-nodes",
    "gpus_per_node": "--gpus-per-node",
    "gpu_type": "--gpu-type",
    "machine_type": "--machine-type",
    "location": "--location",
    "spot": "--spot",
    "project": "--project",
}


@command(
    "cluster list",
    "List GKE clusters.",
    "rlcloud cluster list -o json",
    args=[
        PROJECT,
        Arg("--all", action="store_true", help="also clusters not made by rlcloud"),
    ],
)
def list_(args: argparse.Namespace) -> int:
    """List the GKE clusters of the project: name, location, machine type, nodes, GPUs per node, status, age,
    expiry."""
    from rlcloud.cli.gke import cluster_list

    return cluster_list(args)


@command(
    "cluster delete",
    "Delete GKE clusters.",
    "rlcloud cluster delete -c my-t4",
    args=[
        OneOf(
            Arg("-c", "--cluster", metavar="NAME", type=checked("run_name"), help="cluster name"),
            Arg("--all", action="store_true", help="every rlcloud-managed cluster of the project"),
            required=True,
        ),
        PROJECT,
        Arg(
            "--location",
            metavar="LOCATION",
            type=LOCATION,
            help="the cluster's zone or region (default: found by name)",
        ),
        YES,
        Arg("--no-wait", action="store_true", help="return once the requests are accepted"),
    ],
)
def delete(args: argparse.Namespace) -> int:
    """Delete a GKE cluster (or --all rlcloud clusters) after listing them and asking. Idempotent."""
    from rlcloud.cli.gke import cluster_delete

    return cluster_delete(args)


@command(
    "cluster reap",
    "Delete rlcloud clusters past their expiry.",
    "rlcloud cluster reap --yes",
    args=[PROJECT, YES, Arg("--dry-run", action="store_true", help="only list what would be deleted")],
)
def reap(args: argparse.Namespace) -> int:
    """Delete the rlcloud clusters past their expiry label (after listing them and asking)."""
    from rlcloud.cli.gke import cluster_reap

    return cluster_reap(args)


@command(
    "doctor",
    "Check a Google Cloud project before anything is billed.",
    "rlcloud doctor --results gs://my-bucket/rl -f configs/clusters/t4.yaml",
    args=[
        PROJECT,
        Arg(
            "--results",
            metavar="URL",
            type=checked("results"),
            help="results root whose bucket to check (default: rlcloud.yaml)",
        ),
        Arg("-f", "--file", metavar="FILE", help="a cluster spec: its GPU quota and reaper are checked too"),
        Arg(
            "--smoke",
            action="store_true",
            help="then run one tiny pod on the cluster (-c NAME, or -f FILE's, which must exist): image pull, the "
            "results store from inside, the GPU; each step with its time and estimated cost; deletes it all",
        ),
        Arg(
            "-c",
            "--cluster",
            metavar="NAME",
            type=checked("run_name"),
            help="the existing GKE cluster --smoke runs on",
        ),
        Arg(
            "--timeout",
            metavar="SECONDS",
            type=checked("seconds"),
            default=600.0,
            help="--smoke: for its pod to run, once started (default 600)",
        ),
        Arg(
            "--schedule-timeout",
            metavar="SECONDS",
            type=checked("seconds"),
            default=1200.0,
            help="--smoke: for its pod to be scheduled and its image pulled, a GPU node added from zero "
            "(default 1200); --timeout is then for it to run",
        ),
    ],
)
def doctor(args: argparse.Namespace) -> int:
    """Check APIs, permissions, GPU quota, the results bucket, Workload Identity, the runner images and the
    reaper's identity; print OK or FAIL with the command that fixes it for each. With --smoke, then run one
    tiny pod on the cluster and print each step. Exit 1 when one fails."""
    from rlcloud.cli.gke import run_doctor

    return run_doctor(args)
