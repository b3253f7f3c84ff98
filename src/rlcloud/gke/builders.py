"""Pure builders: ClusterSpec -> Container API requests (``google.cloud.container_v1`` messages).

Nothing here calls an API; :mod:`rlcloud.gke.cluster` sends what these return. Only the GKE backend
imports this module (it imports google.cloud.container_v1 at module level).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping

from google.cloud import container_v1

from rlcloud.errors import SpecError, SpecProblem, excerpt
from rlcloud.gke.plan import POOL_LABEL, PoolPlan, plan_pools
from rlcloud.specs._base import MAX_DURATION
from rlcloud.specs.cluster import LATEST_DRIVER_GPU_TYPES, ClusterSpec

__all__ = [
    "AUTODOWN_LABEL",
    "EXPERIMENT_LABEL",
    "EXPIRY_LABEL",
    "GPU_DRIVER_VERSIONS",
    "GPU_TAINT",
    "MANAGED_BY_LABEL",
    "MANAGED_BY_VALUE",
    "build_cluster",
    "build_create_cluster_request",
    "build_create_node_pool_request",
    "build_gpu_sharing",
    "build_node_pool",
    "cluster_labels",
    "cluster_path",
    "default_driver_version",
    "location_path",
    "node_pool_path",
    "operation_path",
    "read_autodown_label",
    "read_expiry_label",
]

MANAGED_BY_LABEL = "managed-by"
MANAGED_BY_VALUE = "rlcloud"
EXPERIMENT_LABEL = "experiment"
EXPIRY_LABEL = "expiry"  # unix time (seconds) after which `rlcloud cluster reap` deletes the cluster
AUTODOWN_LABEL = "autodown"  # idle seconds after which the in-cluster reaper deletes the cluster
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
GPU_DRIVER_VERSIONS = ("DEFAULT", "LATEST")
#: The taint of GPU nodes (key, value, effect), the one GKE documents and GPU pods tolerate
#: (k8s/builders.py): cloud.google.com/kubernetes-engine/docs/how-to/gpus adds it by itself only to "a GPU
#: node pool [added] to an existing cluster that already runs a non-GPU node pool", and rlcloud creates both
#: pools in one CreateCluster call, so the GPU pool carries it explicitly.
GPU_TAINT = ("nvidia.com/gpu", "present", "NO_SCHEDULE")
#: 9999-12-31T23:59:59Z, the last second a datetime holds: a larger expiry is no time (often milliseconds)
MAX_EXPIRY = 253_402_300_799
_SECONDS_RE = re.compile(r"[0-9]{1,12}")  # ASCII digits only: str.isdigit() also takes '²', int() then fails


def location_path(project: str, location: str) -> str:
    """``projects/P/locations/L`` (L may be ``-`` for every location in list calls)."""
    return f"projects/{project}/locations/{location}"


def cluster_path(project: str, location: str, name: str) -> str:
    """``projects/P/locations/L/clusters/N``."""
    return f"{location_path(project, location)}/clusters/{name}"


def node_pool_path(project: str, location: str, cluster: str, pool: str) -> str:
    """``projects/P/locations/L/clusters/N/nodePools/POOL``."""
    return f"{cluster_path(project, location, cluster)}/nodePools/{pool}"


def operation_path(project: str, location: str, operation: str) -> str:
    """``projects/P/locations/L/operations/O`` (GKE returns only the short operation name)."""
    return f"{location_path(project, location)}/operations/{operation}"


def cluster_labels(spec: ClusterSpec, *, experiment: str | None = None, now: float | None = None) -> dict[str, str]:
    """The GCE labels of the cluster: the spec's own, plus managed-by, experiment, expiry and autodown.

    ``expiry`` is ``now + ttl`` in unix seconds (label values cannot hold ':' or '+', so no ISO date);
    ``autodown`` is the idle time in seconds. The in-cluster reaper reads both from the cluster itself.
    """
    labels = dict(spec.labels)
    labels[MANAGED_BY_LABEL] = MANAGED_BY_VALUE
    if experiment:
        labels[EXPERIMENT_LABEL] = experiment
    if spec.ttl is not None:
        start = time.time() if now is None else now
        labels[EXPIRY_LABEL] = str(int(start + spec.ttl.seconds))
    if spec.autodown is not None:
        labels[AUTODOWN_LABEL] = str(spec.autodown.seconds)
    if spec.budget is not None:
        from rlcloud.budget import CLUSTER_BUDGET_LABEL, budget_label

        # the in-cluster reaper reads the budget from the cluster itself (whole cents: label values take no '.')
        labels[CLUSTER_BUDGET_LABEL] = budget_label(spec.budget.amount)
    return labels


# Machine series whose boot disk must be Hyperdisk (they take no Persistent Disk): A3 Ultra, A4, A4X, G4
# (cloud.google.com/compute/docs/accelerator-optimized-machines, "Supported disk types"; Google's GKE
# blueprint for A3 Ultra, cluster-toolkit examples/gke-a3-ultragpu, uses hyperdisk-balanced).
_HYPERDISK_ONLY = ("a3-ultragpu-", "a4-", "a4x-", "g4-")
RESERVATION_KEY = "compute.googleapis.com/reservation-name"


def default_driver_version(gpu_type: str | None) -> str:
    """The GKE-installed driver branch for ``gpu_type``: LATEST for Hopper and newer (their kernels are
    JIT-compiled from PTX by the driver: :data:`~rlcloud.specs.cluster.LATEST_DRIVER_GPU_TYPES`), else DEFAULT."""
    return "LATEST" if gpu_type in {t.value for t in LATEST_DRIVER_GPU_TYPES} else "DEFAULT"


def _read_seconds_label(labels: Mapping[str, str], key: str, maximum: int, valid: str) -> tuple[int | None, str | None]:
    raw = labels.get(key)
    if raw is None:
        return None, None
    value = raw if isinstance(raw, str) else ""
    if _SECONDS_RE.fullmatch(value) and 0 < int(value) <= maximum:
        return int(value), None
    return None, f"label {key}={excerpt(raw)} cannot be read: {valid}"


def read_expiry_label(labels: Mapping[str, str]) -> tuple[int | None, str | None]:
    """The ``expiry`` label as unix seconds, and what is wrong with it (None when it is fine or absent).

    Labels are written by anyone with access to the project, so any value may arrive: milliseconds,
    words, a negative number, 40 digits. A label that is not a unix time in seconds reads as no expiry
    (the cluster is listed with the problem and never deleted by its ttl: deleting on a guess would be
    worse than keeping a cluster that the owner can still see and fix) and never an exception, so one
    cluster's label never stops the others from being listed or reaped.
    """
    return _read_seconds_label(
        labels,
        EXPIRY_LABEL,
        MAX_EXPIRY,
        f"expected a unix time in whole seconds, ASCII digits from 1 to {MAX_EXPIRY} (year 9999; 13 digits are "
        "milliseconds); the cluster "
        "is not deleted by its ttl until the label is fixed "
        "(gcloud container clusters update NAME --update-labels expiry=SECONDS) or the cluster deleted",
    )


def read_autodown_label(labels: Mapping[str, str]) -> tuple[int | None, str | None]:
    """The ``autodown`` label as idle seconds, and what is wrong with it (None when fine or absent).

    Like :func:`read_expiry_label`: an unreadable value reads as no autodown, never an exception.
    """
    return _read_seconds_label(
        labels,
        AUTODOWN_LABEL,
        MAX_DURATION,
        f"expected idle seconds (digits only, 1 to {MAX_DURATION}); the cluster is not deleted when idle until "
        "the label is fixed",
    )


def _driver_version(value: str) -> container_v1.GPUDriverInstallationConfig.GPUDriverVersion:
    upper = value.upper()
    if upper not in GPU_DRIVER_VERSIONS:
        raise SpecError([SpecProblem("gpu_driver_version", f"must be one of {', '.join(GPU_DRIVER_VERSIONS)}", value)])
    version: container_v1.GPUDriverInstallationConfig.GPUDriverVersion = getattr(
        container_v1.GPUDriverInstallationConfig.GPUDriverVersion, upper
    )
    return version


def build_node_pool(
    plan: PoolPlan, *, gpu_driver_version: str | None = None, service_account: str | None = None
) -> container_v1.NodePool:
    """One NodePool message from a :class:`~rlcloud.gke.plan.PoolPlan`.

    GPU nodes get GKE-managed driver installation (no driver DaemonSet) and the :data:`GPU_TAINT`, so only
    pods that use a GPU land there: a system pod (kube-dns, metrics-server) on a Spot GPU node would keep it
    from scaling to zero. Nodes use the GKE metadata server so pods authenticate with Workload Identity
    rather than the node's service account.
    ``service_account``: the Google service account the nodes run as (None: GKE's default, the
    project's Compute Engine default service account). ``gpu_driver_version``: DEFAULT or LATEST (None:
    :func:`default_driver_version` of the pool's GPU type). A plan with a reservation consumes exactly it
    (SPECIFIC_RESERVATION); machine series that take no Persistent Disk boot from hyperdisk-balanced.
    """
    config = container_v1.NodeConfig(
        machine_type=plan.machine_type,
        disk_size_gb=plan.disk_size_gb,
        oauth_scopes=[CLOUD_PLATFORM_SCOPE],
        labels={POOL_LABEL: plan.role},
        metadata={"disable-legacy-endpoints": "true"},
        spot=plan.spot,
        workload_metadata_config=container_v1.WorkloadMetadataConfig(
            mode=container_v1.WorkloadMetadataConfig.Mode.GKE_METADATA
        ),
    )
    if service_account:
        config.service_account = service_account
    if plan.machine_type.startswith(_HYPERDISK_ONLY):
        config.disk_type = "hyperdisk-balanced"
    if plan.reservation:
        config.reservation_affinity = container_v1.ReservationAffinity(
            consume_reservation_type=container_v1.ReservationAffinity.Type.SPECIFIC_RESERVATION,
            key=RESERVATION_KEY,
            values=[plan.reservation],
        )
    if plan.gpus:
        accelerator = container_v1.AcceleratorConfig(
            accelerator_count=plan.gpus,
            accelerator_type=plan.gpu_type,
            gpu_driver_installation_config=container_v1.GPUDriverInstallationConfig(
                gpu_driver_version=_driver_version(gpu_driver_version or default_driver_version(plan.gpu_type))
            ),
        )
        if plan.sharing:
            accelerator.gpu_sharing_config = build_gpu_sharing(*plan.sharing)
        config.accelerators = [accelerator]
        key, value, effect = GPU_TAINT
        config.taints = [
            container_v1.NodeTaint(key=key, value=value, effect=getattr(container_v1.NodeTaint.Effect, effect))
        ]
    pool = container_v1.NodePool(
        name=plan.name,
        config=config,
        initial_node_count=plan.nodes_per_zone,
        management=container_v1.NodeManagement(auto_repair=True, auto_upgrade=True),
        locations=list(plan.locations),
    )
    if plan.flex_start:
        _flex_start(pool)
    if plan.max_nodes is not None:
        # Spot and flex-start capacity comes and goes per zone: ANY lets the autoscaler take it wherever it exists.
        policy = container_v1.NodePoolAutoscaling.LocationPolicy
        pool.autoscaling = container_v1.NodePoolAutoscaling(
            enabled=True,
            min_node_count=plan.min_nodes or 0,
            max_node_count=plan.max_nodes,
            location_policy=policy.ANY if plan.spot or plan.flex_start else policy.BALANCED,
        )
    return pool


#: GPUSharingConfig strategies by the spec's names (``GpuSharingStrategy``).
GPU_SHARING_STRATEGIES = {"time-sharing": "TIME_SHARING", "mps": "MPS"}


def build_gpu_sharing(strategy: str, clients_per_gpu: int) -> container_v1.GPUSharingConfig:
    """The ``gpuSharingConfig`` of a GPU pool's accelerator: ``clients_per_gpu`` containers share each GPU.

    GKE's "Share GPUs with multiple workloads using time-sharing" and "... using NVIDIA MPS" set exactly these
    two fields (``gpu_sharing_strategy``, ``max_shared_clients_per_gpu``); the limits (2-48 clients, the GKE
    versions) are checked by the spec (:class:`rlcloud.specs.cluster.GpuSharing`).
    """
    enum = container_v1.GPUSharingConfig.GPUSharingStrategy
    return container_v1.GPUSharingConfig(
        gpu_sharing_strategy=getattr(enum, GPU_SHARING_STRATEGIES[strategy]),
        max_shared_clients_per_gpu=clients_per_gpu,
    )


def _flex_start(pool: container_v1.NodePool) -> None:
    """A flex-start (Dynamic Workload Scheduler) GPU pool, as GKE's "Run a small batch workload with GPUs and
    flex-start" creates one: ``--flex-start --num-nodes=0 --enable-autoscaling --location-policy=ANY
    --reservation-affinity=none --no-enable-autorepair``. Flex-start is its own provisioning model: never Spot
    (``NodeConfig.spot`` stays false), nodes come when capacity does and run for at most seven days."""
    pool.config.flex_start = True
    pool.config.spot = False
    pool.config.reservation_affinity = container_v1.ReservationAffinity(
        consume_reservation_type=container_v1.ReservationAffinity.Type.NO_RESERVATION
    )
    pool.management.auto_repair = False
    pool.initial_node_count = 0


def build_cluster(
    spec: ClusterSpec,
    *,
    project: str,
    node_locations: tuple[str, ...] = (),
    gpu_locations: tuple[str, ...] = (),
    experiment: str | None = None,
    now: float | None = None,
    gpu_driver_version: str | None = None,
    extra_labels: Mapping[str, str] | None = None,
    without_pools: tuple[str, ...] = (),
) -> container_v1.Cluster:
    """The Cluster message for ``spec``: its node pools, labels and Workload Identity pool.

    ``node_locations`` restricts where every pool's nodes go (a fallback zone of a regional cluster);
    ``gpu_locations`` where the GPU pool's go (default: the spec's ``node_locations``). A regional
    cluster's GPU pool needs them: GKE's default zones may lack the GPU ("Regional clusters", Limitations).
    ``without_pools``: pools left out, to be added with CreateNodePool (a capacity ladder's GPU pool).
    """
    labels = cluster_labels(spec, experiment=experiment, now=now)
    labels.update(extra_labels or {})
    return container_v1.Cluster(
        name=spec.name,
        description=f"rlcloud cluster {spec.name}" + (f" for experiment {experiment}" if experiment else ""),
        node_pools=[
            build_node_pool(p, gpu_driver_version=gpu_driver_version, service_account=spec.service_account)
            for p in plan_pools(spec, gpu_locations=gpu_locations)
            if p.name not in without_pools
        ],
        locations=list(node_locations),
        resource_labels=labels,
        workload_identity_config=container_v1.WorkloadIdentityConfig(workload_pool=f"{project}.svc.id.goog"),
        ip_allocation_policy=container_v1.IPAllocationPolicy(use_ip_aliases=True),
    )


def build_create_cluster_request(
    spec: ClusterSpec,
    *,
    project: str,
    location: str | None = None,
    node_locations: tuple[str, ...] = (),
    gpu_locations: tuple[str, ...] = (),
    experiment: str | None = None,
    now: float | None = None,
    gpu_driver_version: str | None = None,
    without_pools: tuple[str, ...] = (),
) -> container_v1.CreateClusterRequest:
    """CreateClusterRequest for ``spec`` in ``location`` (default: ``spec.location``; zonal or regional);
    ``without_pools`` as for :func:`build_cluster`."""
    return container_v1.CreateClusterRequest(
        parent=location_path(project, location or spec.location),
        cluster=build_cluster(
            spec,
            project=project,
            node_locations=node_locations,
            gpu_locations=gpu_locations,
            experiment=experiment,
            now=now,
            gpu_driver_version=gpu_driver_version,
            without_pools=without_pools,
        ),
    )


def build_create_node_pool_request(
    spec: ClusterSpec,
    *,
    project: str,
    location: str,
    pool_name: str,
    pool_locations: tuple[str, ...] = (),
    gpu_driver_version: str | None = None,
    rung: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> container_v1.CreateNodePoolRequest:
    """CreateNodePoolRequest re-creating one of ``spec``'s pools (``pool_name``) on an existing cluster
    (``rung``: the capacity ladder's rung of the GPU pool; ``labels``: extra Kubernetes labels of its nodes)."""
    plans = {p.name: p for p in plan_pools(spec, gpu_locations=pool_locations, rung=rung)}
    if pool_name not in plans:
        raise SpecError([SpecProblem("pool_name", f"must be one of {sorted(plans)}", pool_name)])
    pool = build_node_pool(
        plans[pool_name], gpu_driver_version=gpu_driver_version, service_account=spec.service_account
    )
    pool.config.labels.update(labels or {})
    return container_v1.CreateNodePoolRequest(parent=cluster_path(project, location, spec.name), node_pool=pool)
