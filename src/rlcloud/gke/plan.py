"""The node pools a ClusterSpec becomes, as plain data (pure; shared by the builders and the cost estimate).

Layout: without GPUs, one pool ``default-pool`` of the spec's machine type runs everything. With GPUs,
``gpu-pool`` carries the spec's machine type, GPUs, spot and autoscaling settings, and an on-demand CPU
pool ``default-pool`` of :data:`SYSTEM_MACHINE_TYPE` holds what GKE keeps off the tainted GPU nodes:
the system pods (kube-dns, metrics...) and a distributed experiment's environment servers. It
autoscales from 1 to :data:`SYSTEM_MAX_NODES` nodes per zone, so the cluster autoscaler adds nodes for
Pending env servers and removes idle ones; it stays on-demand so that env servers survive the GPU
nodes' spot preemptions.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlcloud.specs.cluster import ClusterSpec

__all__ = [
    "DEFAULT_POOL",
    "GPU_POOL",
    "POOL_LABEL",
    "REGIONAL_ZONES",
    "SYSTEM_MACHINE_TYPE",
    "SYSTEM_MAX_NODES",
    "PoolPlan",
    "plan_pools",
    "pool_zone_count",
    "zone_count",
]

DEFAULT_POOL = "default-pool"
GPU_POOL = "gpu-pool"
SYSTEM_MACHINE_TYPE = "e2-standard-4"
# Upper bound of the CPU pool of a GPU cluster, in nodes per zone (its lower bound is 1). The first
# e2-standard-4 node has roughly 3 vCPUs left after the system pods, each added one ~3.5 (only the
# DaemonSets run there), so 8 nodes fit ~28 env servers at 1 vCPU each (more at smaller requests):
# num_workers of 16-32 schedule without tuning. It also bounds what a runaway experiment can cost
# (8 x e2-standard-4, ~$1.1/hour per zone at list prices; the cost estimate shows the range) and the
# vCPUs it asks of the region's CPUS quota (32 per zone). Larger experiments: smaller env-server requests.
SYSTEM_MAX_NODES = 8
# Kubernetes node label naming the pool's role, for the k8s layer's node selectors.
POOL_LABEL = "rlcloud-pool"
# GKE spreads a regional cluster's pools over three of the region's zones by default.
REGIONAL_ZONES = 3


@dataclass(frozen=True)
class PoolPlan:
    """One node pool: sizes are per zone, as GKE counts them (a regional pool has them in each zone)."""

    name: str
    role: str  # "workers" (runs experiments) or "system"
    machine_type: str
    nodes_per_zone: int
    disk_size_gb: int
    spot: bool = False
    gpus: int = 0
    gpu_type: str | None = None
    min_nodes: int | None = None
    max_nodes: int | None = None
    locations: tuple[str, ...] = ()
    reservation: str | None = None  # the Compute Engine reservation the nodes consume
    flex_start: bool = False  # flex-start (Dynamic Workload Scheduler) nodes: the capacity ladder's rung
    #: GPU sharing (strategy, clients per GPU): GKE's gpuSharingConfig; None: one container per GPU
    sharing: tuple[str, int] | None = None

    @property
    def rung(self) -> str:
        """How this pool obtains its nodes: spot, on-demand or flex-start."""
        return "flex-start" if self.flex_start else "spot" if self.spot else "on-demand"


def zone_count(spec: ClusterSpec, locations: tuple[str, ...] = ()) -> int:
    """How many zones each pool's per-zone node count is multiplied by."""
    if locations:
        return len(locations)
    return REGIONAL_ZONES if spec.is_regional else 1


def pool_zone_count(spec: ClusterSpec, plan: PoolPlan) -> int:
    """How many zones ``plan``'s per-zone node count is multiplied by: its own zones; the one zone rlcloud
    picks for a regional cluster's GPU pool when the spec names none (so GPUs and cost do not triple); else
    the cluster's (:func:`zone_count`)."""
    if plan.locations:
        return len(plan.locations)
    if plan.gpus and spec.is_regional:
        return 1
    return zone_count(spec)


def plan_pools(spec: ClusterSpec, *, gpu_locations: tuple[str, ...] = (), rung: str | None = None) -> list[PoolPlan]:
    """The pools for ``spec`` (``gpu_locations``: zones for the worker pool, e.g. after a stockout, or the
    zones rlcloud picked for a regional cluster's GPU pool; default: the spec's ``node_locations``).

    ``rung``: the capacity ladder's rung the worker pool is on (default: the ladder's first,
    :attr:`ClusterSpec.capacity_ladder`). A flex-start pool starts empty and autoscales from 0 (GKE's flex-start
    node pools: ``--flex-start --enable-autoscaling --num-nodes=0``), up to the spec's max_nodes or num_nodes.
    """
    rung = str(rung or spec.capacity_ladder[0])
    flex = rung == "flex-start"
    sharing = (str(spec.gpu_sharing.strategy), spec.gpu_sharing.clients_per_gpu) if spec.gpu_sharing else None
    workers = PoolPlan(
        name=GPU_POOL if spec.gpus_per_node else DEFAULT_POOL,
        role="workers",
        machine_type=spec.effective_machine_type,
        nodes_per_zone=0 if flex else spec.num_nodes,
        disk_size_gb=spec.disk_size,
        spot=rung == "spot",
        gpus=spec.gpus_per_node,
        gpu_type=spec.gpu_type.value if spec.gpu_type else None,
        min_nodes=0 if flex else spec.autoscaling.min_nodes if spec.autoscaling else None,
        max_nodes=(spec.autoscaling.max_nodes if spec.autoscaling else spec.num_nodes)
        if flex
        else spec.autoscaling.max_nodes
        if spec.autoscaling
        else None,
        locations=gpu_locations or tuple(spec.node_locations),
        reservation=None if flex else spec.reservation,
        flex_start=flex,
        sharing=sharing,
    )
    if not spec.gpus_per_node:
        return [workers]
    system = PoolPlan(
        name=DEFAULT_POOL,
        role="system",
        machine_type=SYSTEM_MACHINE_TYPE,
        nodes_per_zone=1,
        disk_size_gb=50,
        min_nodes=1,
        max_nodes=SYSTEM_MAX_NODES,
    )
    return [system, workers]
