"""Distributed Space Invaders DQN on a GKE cluster with an NVIDIA T4: create, train, download, delete.

    uv run python examples/gke_gpu.py --project my-project --results gs://my-bucket/rlcloud
    uv run python examples/gke_gpu.py --project my-project --results gs://my-bucket/rlcloud --timesteps 200000

What it does, in order:

1. creates the cluster of rlcloud's bundled ``configs/clusters/t4.yaml`` (one n1-standard-8 Spot node with
   a T4, autoscaling 0-2, deleted by ``rlcloud cluster reap`` after its 6 h ttl if this script dies);
2. runs examples/space_invaders_dqn.yaml there: one learner pod on the GPU node and ``--workers``
   environment-server pods feeding it over TCP (run mode ``distributed``);
3. waits with a progress bar, downloads the results (metrics, checkpoints, TensorBoard events, logs);
4. stops the experiment and deletes the cluster, also after an error or Ctrl-C (``--keep-cluster`` keeps it).

Before the first run (docs/gke-setup.md): enable the Kubernetes Engine and Cloud Storage APIs, get T4 quota
(GPUS_ALL_REGIONS and NVIDIA_T4_GPUS in the region: the cluster's Spot VMs use the standard quota when the
project has no PREEMPTIBLE_NVIDIA_T4_GPUS, docs/gke-setup.md step 3), create the bucket, build and push the
runner images (docs/images.md) and name them in rlcloud.yaml (``image:`` / ``gpu_image:``). This costs money
while it runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

SPEC_FILE = Path(__file__).resolve().parent / "space_invaders_dqn.yaml"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; ``--project`` and a gs:// ``--results`` are required (pods cannot write here)."""
    parser = argparse.ArgumentParser(
        description="Create a T4 GKE cluster, train distributed DQN on Space Invaders, download, delete.",
        epilog="example: python examples/gke_gpu.py --project my-project --results gs://my-bucket/rlcloud",
    )
    parser.add_argument("--project", required=True, help="Google Cloud project id to create the cluster in")
    parser.add_argument("--results", required=True, help="results root in Cloud Storage: gs://BUCKET[/PREFIX]")
    parser.add_argument("--location", help="zone to create the cluster in (default: the cluster spec's, us-central1-a)")
    parser.add_argument("--workers", type=int, default=4, help="environment-server pods (default 4)")
    parser.add_argument("--timesteps", type=int, help="stop after this many timesteps (default: the spec's, 5M)")
    parser.add_argument(
        "--env-server-cpu",
        default="500m",
        help="CPU per environment server (default 500m: four fit the cluster's first CPU node at once)",
    )
    parser.add_argument("--dest", default=None, help="download directory (default ./rlcloud-results/NAME)")
    parser.add_argument("--keep-cluster", action="store_true", help="do not delete the cluster at the end")
    args = parser.parse_args(argv)
    if not args.results.startswith("gs://"):
        parser.error("--results must be a gs:// URL: the pods write their results to Cloud Storage")
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    return args


def make_cluster(args: argparse.Namespace) -> Any:
    """The Cluster handle for the bundled T4 spec (nothing is created yet)."""
    from importlib import resources

    from rlcloud import Cluster, ClusterSpec

    overrides = {"location": args.location} if args.location else {}
    # the T4 spec rlcloud ships (`rlcloud init` copies it to ./configs/clusters/t4.yaml)
    bundled = resources.files("rlcloud") / "configs" / "clusters" / "t4.yaml"
    spec = ClusterSpec.from_file(str(bundled), **overrides)
    return Cluster.gke(spec, project=args.project)


def make_experiment(args: argparse.Namespace) -> Any:
    """The Space Invaders experiment with the command line's overrides."""
    from rlcloud import Experiment, ExperimentSpec

    # The env servers run on the T4 cluster's CPU pool of e2-standard-4 nodes, whose first node they
    # share with the system pods. The pool autoscales (up to plan.SYSTEM_MAX_NODES per zone), but at the
    # spec's 1 CPU each some would wait minutes for an added node (and the learner with them). An Atari
    # env server needs far less than a core: 500m fits four on the first node at once.
    overrides: dict[str, Any] = {"num_workers": args.workers, "resources.env_server.cpu": args.env_server_cpu}
    if args.timesteps:
        overrides["total_timesteps"] = args.timesteps
    return Experiment(ExperimentSpec.from_file(SPEC_FILE, **overrides), results=args.results)


def main(argv: list[str] | None = None) -> int:
    """Run the example end to end; exit code 0 when training succeeded."""
    args = parse_args(argv)
    cluster = make_cluster(args)
    exp = make_experiment(args)
    status = None
    try:
        print(f"creating {cluster.describe()} in project {args.project} (about 5-10 minutes)")
        info = cluster.create(wait=True, progress=True)
        print(f"cluster {info.name}: {info.machine_type}, {info.gpus_per_node}x {info.gpu_type}, {info.status}")
        exp.start(cluster=cluster)
        print(f"started {exp.name}: {exp.spec.num_workers} env servers + 1 learner; results in {exp.location}")
        status = exp.wait(progress=True)
        target = exp.download(args.dest)
        progress = status.progress
        print(
            f"{status.state}: {progress.get('timestep')} timesteps, {progress.get('episode')} episodes, "
            f"mean return {progress.get('mean_return')}; results downloaded to {target}"
        )
    finally:
        if status is None or not status.finished:
            # an error or Ctrl-C: checkpoint and stop the pods before the cluster goes away
            try:
                exp.stop(download=False)
            except Exception as exc:  # the cluster may never have come up: nothing to stop
                print(f"could not stop {exp.name}: {exc}", file=sys.stderr)
        if args.keep_cluster:
            print(f"kept {cluster.describe()}; delete it with: rlcloud cluster delete -c {cluster.spec.name}")
        else:
            print(f"deleting {cluster.describe()}")
            cluster.delete(wait=True, progress=True)
    return 0 if status is not None and status.state == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
