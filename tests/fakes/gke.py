"""FakeClusterManager: a stateful gRPC fake of ``google.container.v1.ClusterManager``.

No GKE emulator exists (see /work/shared/FACTS.md). This server speaks the real gRPC protocol on
127.0.0.1, so the real ``ClusterManagerClient`` (over ``ClusterManagerGrpcTransport`` with an insecure
channel) talks to it exactly as it talks to Google:

* clusters: Create / Get / List (``locations/-`` lists every location) / Delete;
* node pools: Create / Get / List / Delete;
* operations: Get / List. Mutations return a PENDING ``Operation`` that moves to RUNNING and then
  DONE as it is polled with GetOperation (``polls_to_done`` polls); its effect (cluster RUNNING,
  node pool RUNNING, cluster gone...) lands when it is DONE. Operations carry ``progress`` metrics.
* one mutation at a time per cluster: a second one while an operation runs is refused with
  FAILED_PRECONDITION and an ``ErrorInfo`` whose reason is ``CLUSTER_ALREADY_HAS_OPERATION`` (the
  real shape: "Cluster is running incompatible operation operation-...").
* error injection: :meth:`fail_next` (any status code, optional ``ErrorInfo`` reason), with helpers
  for the real messages of quota (``GPUS_ALL_REGIONS``), API-not-enabled and missing-permission
  errors; :meth:`stockout` makes operations that need nodes in a zone end with
  ``ZONE_RESOURCE_POOL_EXHAUSTED`` naming the zones that still have capacity, as Compute Engine does.
* GPUs per zone (:mod:`tests.fakes.gce_catalog`): a node pool whose zones include one without its
  accelerator type is refused with 400 INVALID_ARGUMENT "Accelerator type ... does not exist in zone ...",
  at once, as GKE does; a regional cluster without node locations spreads its pools over three zones;
* node taints (:meth:`node_taints`): a pool's own ``config.taints``, plus the ``nvidia.com/gpu`` taint GKE
  adds by itself only to a GPU pool created on a cluster that already runs a non-GPU pool;
* transient failures of GetOperation (:meth:`interrupt_polling`): UNAVAILABLE, INTERNAL or a reset
  connection while the operation goes on in GKE; :meth:`note_on_success`: the next operation ends DONE
  with a descriptive ``status_message`` and conditions but no ``error`` (a success).
* :attr:`requests`: every request received, in order, as ``(method, request message)``.

It is a test double: validation is only as deep as rlcloud's tests need.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import re
import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.cloud import container_v1
from google.cloud.container_v1.services.cluster_manager.transports import ClusterManagerGrpcTransport
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from tests.fakes.gce_catalog import default_zones, offers

__all__ = ["FakeClusterManager", "Stockout", "gke_version", "pool_rung"]

SERVICE = "google.container.v1.ClusterManager"
Op = container_v1.Operation
ClusterStatus = container_v1.Cluster.Status
PoolStatus = container_v1.NodePool.Status

_CLUSTER_RE = re.compile(r"^projects/([^/]+)/locations/([^/]+)/clusters/([^/]+)$")
_POOL_RE = re.compile(r"^projects/([^/]+)/locations/([^/]+)/clusters/([^/]+)/nodePools/([^/]+)$")
_PARENT_RE = re.compile(r"^projects/([^/]+)/locations/([^/]+)$")
_OP_RE = re.compile(r"^projects/([^/]+)/locations/([^/]+)/operations/([^/]+)$")
_REGION_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")


class _Abort(Exception):
    """Raised inside a handler to end the call with a status (and optional ErrorInfo)."""

    def __init__(self, code: grpc.StatusCode, message: str, reason: str | None = None, domain: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.domain = domain or "container.googleapis.com"


@dataclass
class Stockout:
    """Compute Engine has no capacity in ``zone`` for ``accelerator`` (None: for any node)."""

    zone: str
    zones_with_capacity: list[str]
    accelerator: str | None = None
    #: only pools on this capacity rung ("spot", "on-demand"; None: any): Spot and on-demand VMs come from
    #: different capacity, so one may stock out where the other does not
    rung: str | None = None
    #: how Compute Engine words it: ZONE_RESOURCE_POOL_EXHAUSTED (with details) or GCE_STOCKOUT
    code: str = "ZONE_RESOURCE_POOL_EXHAUSTED"


@dataclass
class _Injected:
    method: str
    code: grpc.StatusCode
    message: str
    reason: str | None
    domain: str
    times: int


@dataclass
class _PendingOp:
    op: Op
    project: str
    cluster_key: tuple[str, str, str]
    polls: int = 0
    on_done: Callable[[], None] | None = None
    error: str | None = None  # the operation ends DONE with this error
    on_error: Callable[[], None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _region_of(location: str) -> str:
    return location if _REGION_RE.match(location) else location.rsplit("-", 1)[0]


# ----------------------------------------------------------------- capacity ladder and GPU sharing (issue 42)


def pool_rung(pool: container_v1.NodePool) -> str:
    """The provisioning model of ``pool``'s nodes: flex-start, spot (or preemptible) or on-demand."""
    if pool.config.flex_start:
        return "flex-start"
    return "spot" if pool.config.spot or pool.config.preemptible else "on-demand"


def gke_version(text: str) -> tuple[int, ...]:
    """``1.32.2-gke.1652000`` -> (1, 32, 2, 1652000), for comparing GKE versions."""
    return tuple(int(n) for n in re.findall(r"[0-9]+", text))


#: GKE's minimum versions (Standard clusters): time-sharing 1.23.7-gke.1400 ("Share GPUs with multiple workloads
#: using time-sharing", Requirements), MPS 1.27.7-gke.1088000 ("... using NVIDIA MPS", Requirements), flex-start
#: GPUs 1.32.2-gke.1652000 ("About GPU obtainability with flex-start", Requirements).
_SHARING_MIN_VERSION = {
    container_v1.GPUSharingConfig.GPUSharingStrategy.TIME_SHARING: "1.23.7-gke.1400",
    container_v1.GPUSharingConfig.GPUSharingStrategy.MPS: "1.27.7-gke.1088000",
}
_FLEX_START_MIN_VERSION = "1.32.2-gke.1652000"
#: Compute Engine "About Flex-start VMs": all accelerator-optimized machine types except A4X and G4
_FLEX_START_MACHINES = re.compile(r"^(a2|a3|a4|g2)-")


def _check_sharing_and_flex_start_rules(cluster: container_v1.Cluster, pool: container_v1.NodePool) -> None:
    version = gke_version(cluster.current_master_version or "1.33.5-gke.1000")
    for acc in pool.config.accelerators:
        sharing = acc.gpu_sharing_config
        if not sharing or not (sharing.gpu_sharing_strategy or sharing.max_shared_clients_per_gpu):
            continue
        if not sharing.gpu_sharing_strategy:
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "gpu_sharing_strategy must be set with gpuSharingConfig.")
        # GKE caps sharing at 48 containers per physical GPU (ComputeClass gpuSharing: 2-48)
        if not 2 <= sharing.max_shared_clients_per_gpu <= 48:
            raise _Abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"max_shared_clients_per_gpu must be between 2 and 48, got {sharing.max_shared_clients_per_gpu}.",
            )
        needed = _SHARING_MIN_VERSION[sharing.gpu_sharing_strategy]
        if version < gke_version(needed):
            raise _Abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"GPU sharing strategy {sharing.gpu_sharing_strategy.name} requires GKE version {needed} or later.",
            )
    if not pool.config.flex_start:
        return
    if version < gke_version(_FLEX_START_MIN_VERSION):
        raise _Abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"Flex-start requires GKE version {_FLEX_START_MIN_VERSION} or later."
        )
    if pool.config.spot or pool.config.preemptible:
        # flex-start is a provisioning model of its own, exclusive of Spot ("About Flex-start VMs")
        raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "Flex-start cannot be used together with Spot VMs.")
    if not _FLEX_START_MACHINES.match(pool.config.machine_type):
        raise _Abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"Machine type {pool.config.machine_type} does not support the flex-start provisioning model.",
        )
    if not pool.autoscaling.enabled:
        # GKE's flex-start node pools are created with --enable-autoscaling --num-nodes=0
        raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "Flex-start node pools require autoscaling to be enabled.")
    affinity = pool.config.reservation_affinity.consume_reservation_type
    if affinity not in (
        container_v1.ReservationAffinity.Type.UNSPECIFIED,
        container_v1.ReservationAffinity.Type.NO_RESERVATION,
    ):
        raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "Flex-start node pools cannot consume reservations.")


def _rung_quota_message(metric: str, region: str) -> str:
    # the wording of Compute Engine's regional quota refusal as GKE relays it (see the desk check's quota note)
    return (
        f"Insufficient regional quota to satisfy request: resource \"{metric}\": request requires '1.0' and is "
        f"short '1.0'. project has a quota of '0.0' with '0.0' available. View and manage quotas at "
        f"https://console.cloud.google.com/iam-admin/quotas (region {region})."
    )


class _CapacityLadderFake:
    """The fake's side of issue 42, mixed into :class:`FakeClusterManager`: per-rung quota, region stockouts."""

    stockouts: list[Stockout]
    exhausted_quotas: dict[tuple[str, str], str]
    _lock: threading.RLock

    def exhaust_quota(self, region: str, rung: str, metric: str) -> None:
        """Node creation on ``rung`` (spot, on-demand, flex-start) in ``region`` fails: ``metric`` is at its limit
        (Spot VMs count against PREEMPTIBLE_* quota when the project has it, on-demand against the standard one)."""
        with self._lock:
            self.exhausted_quotas[(region, rung)] = metric

    def stockout_region(
        self, zones: list[str], accelerator: str | None, *, rung: str | None = None, code: str = "GCE_STOCKOUT"
    ) -> None:
        """Every zone of ``zones`` is out of capacity for ``accelerator`` (None: any VM) on ``rung`` (None: any),
        and Google names no zone that has some."""
        with self._lock:
            for zone in zones:
                self.stockouts.append(Stockout(zone, [], accelerator, rung, code))

    def _check_sharing_and_flex_start(self, cluster: container_v1.Cluster, pool: container_v1.NodePool) -> None:
        _check_sharing_and_flex_start_rules(cluster, pool)

    def _rung_quota_error(self, cluster: container_v1.Cluster, pool: container_v1.NodePool) -> str | None:
        if not pool.config.accelerators or (pool.config.flex_start and not pool.initial_node_count):
            # a flex-start pool asks for no VM when it is created; its requests queue for capacity and quota
            return None
        region = _region_of(cluster.location)
        metric = self.exhausted_quotas.get((region, pool_rung(pool)))
        return _rung_quota_message(metric, region) if metric else None


class FakeClusterManager(_CapacityLadderFake):
    """A stateful ClusterManager served over gRPC on 127.0.0.1 (use as a context manager).

    ``polls_to_done``: GetOperation calls an operation takes to reach DONE (the first poll after
    creation reports RUNNING); 0 makes every operation DONE in the response to the mutation itself.
    ``endpoint``/``ca_certificate`` (base64 PEM, as GKE reports it) are what clusters report once
    RUNNING; :meth:`set_master` changes them later.
    ``reject_delete_during_operation``: DeleteCluster while another operation runs on the cluster is
    refused with CLUSTER_ALREADY_HAS_OPERATION (the safe assumption for clients).
    """

    def __init__(
        self,
        *,
        polls_to_done: int = 2,
        endpoint: str = "10.0.0.1",
        ca_certificate: str = "",
        reject_delete_during_operation: bool = True,
    ) -> None:
        self.polls_to_done = polls_to_done
        self.endpoint = endpoint
        self.ca_certificate = ca_certificate
        self.reject_delete_during_operation = reject_delete_during_operation
        self.clusters: dict[tuple[str, str, str], container_v1.Cluster] = {}
        self.operations: dict[str, _PendingOp] = {}
        self.requests: list[tuple[str, Any]] = []
        self.stockouts: list[Stockout] = []
        #: the GKE version clusters are created with (the capacity and GPU sharing rules compare against it)
        self.master_version = "1.33.5-gke.1000"
        #: (region, rung) -> the quota metric that is exhausted there for that rung: see exhaust_quota
        self.exhausted_quotas: dict[tuple[str, str], str] = {}
        self._injected: list[_Injected] = []
        self._success_notes: list[str] = []
        self._auto_gpu_taint: set[tuple[str, str]] = set()  # (cluster, pool): see node_taints
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._server: grpc.Server | None = None
        self.port = 0

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> FakeClusterManager:
        """Start serving on 127.0.0.1 (a free port); returns self."""
        handlers = {
            "CreateCluster": self._rpc(self._create_cluster, container_v1.CreateClusterRequest, container_v1.Operation),
            "GetCluster": self._rpc(self._get_cluster, container_v1.GetClusterRequest, container_v1.Cluster),
            "ListClusters": self._rpc(
                self._list_clusters, container_v1.ListClustersRequest, container_v1.ListClustersResponse
            ),
            "DeleteCluster": self._rpc(self._delete_cluster, container_v1.DeleteClusterRequest, container_v1.Operation),
            "CreateNodePool": self._rpc(
                self._create_node_pool, container_v1.CreateNodePoolRequest, container_v1.Operation
            ),
            "GetNodePool": self._rpc(self._get_node_pool, container_v1.GetNodePoolRequest, container_v1.NodePool),
            "ListNodePools": self._rpc(
                self._list_node_pools, container_v1.ListNodePoolsRequest, container_v1.ListNodePoolsResponse
            ),
            "DeleteNodePool": self._rpc(
                self._delete_node_pool, container_v1.DeleteNodePoolRequest, container_v1.Operation
            ),
            "GetOperation": self._rpc(self._get_operation, container_v1.GetOperationRequest, container_v1.Operation),
            "ListOperations": self._rpc(
                self._list_operations, container_v1.ListOperationsRequest, container_v1.ListOperationsResponse
            ),
        }
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop the server (in-flight calls are cancelled)."""
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None

    def __enter__(self) -> FakeClusterManager:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> str:
        """host:port of the gRPC server."""
        return f"127.0.0.1:{self.port}"

    def client(self) -> container_v1.ClusterManagerClient:
        """A real ClusterManagerClient talking to this fake over an insecure channel."""
        channel = grpc.insecure_channel(self.address)
        return container_v1.ClusterManagerClient(transport=ClusterManagerGrpcTransport(channel=channel))

    # ----------------------------------------------------------------- test helpers

    def fail_next(
        self,
        method: str,
        code: grpc.StatusCode,
        message: str,
        *,
        reason: str | None = None,
        domain: str = "",
        times: int = 1,
    ) -> None:
        """Make the next ``times`` calls of ``method`` (e.g. "CreateCluster") fail with ``code``."""
        with self._lock:
            self._injected.append(_Injected(method, code, message, reason, domain, times))

    def fail_next_with_quota(self, method: str = "CreateCluster", quota: str = "GPUS_ALL_REGIONS") -> None:
        """RESOURCE_EXHAUSTED as Compute Engine words it when a quota is too low."""
        self.fail_next(
            method,
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"Insufficient quota to satisfy the request: Quota '{quota}' exceeded.  Limit: 0.0 globally.",
            reason="QUOTA_EXCEEDED",
            domain="compute.googleapis.com",
        )

    def fail_next_with_api_disabled(self, method: str = "CreateCluster", project_number: str = "123456789") -> None:
        """PERMISSION_DENIED as Google words it when container.googleapis.com is not enabled."""
        self.fail_next(
            method,
            grpc.StatusCode.PERMISSION_DENIED,
            f"Kubernetes Engine API has not been used in project {project_number} before or it is disabled. "
            "Enable it by visiting https://console.developers.google.com/apis/api/container.googleapis.com/"
            f"overview?project={project_number} then retry. If you enabled this API recently, wait a few "
            "minutes for the action to propagate to our systems and retry.",
            reason="SERVICE_DISABLED",
            domain="googleapis.com",
        )

    def fail_next_with_missing_permission(
        self, method: str = "CreateCluster", permission: str = "container.clusters.create", project: str = "p"
    ) -> None:
        """PERMISSION_DENIED as GKE words it when the caller lacks an IAM permission."""
        self.fail_next(
            method,
            grpc.StatusCode.PERMISSION_DENIED,
            f'Required "{permission}" permission(s) for "projects/{project}".',
            reason="IAM_PERMISSION_DENIED",
            domain="iam.googleapis.com",
        )

    def interrupt_polling(self, times: int = 1, code: grpc.StatusCode = grpc.StatusCode.INTERNAL) -> None:
        """The next ``times`` GetOperation calls fail transiently; the operations themselves go on.

        Google's API design guide ("Errors", cloud.google.com/apis/design/errors) names UNAVAILABLE,
        INTERNAL and DEADLINE_EXCEEDED as what a healthy service answers now and then; the messages are
        the ones Google's front ends send. A failed poll does not advance the operation (it never arrived).
        """
        messages = {
            grpc.StatusCode.INTERNAL: "Internal error encountered.",
            grpc.StatusCode.UNAVAILABLE: "recvmsg:Connection reset by peer",
            grpc.StatusCode.DEADLINE_EXCEEDED: "Deadline Exceeded",
        }
        self.fail_next("GetOperation", code, messages.get(code, "The service is currently unavailable."), times=times)

    def note_on_success(self, message: str) -> None:
        """The next operation created ends DONE with ``message`` as its status_message and in a condition with
        canonical code OK, and no ``error``: it succeeded.

        The Container API reference (Operation): ``error`` is "the error result of the operation in case of
        failure"; ``status_message``, ``cluster_conditions`` and ``nodepool_conditions`` are deprecated
        descriptions, so words there do not make a failure.
        """
        with self._lock:
            self._success_notes.append(message)

    def stockout(
        self, zone: str, zones_with_capacity: list[str], accelerator: str | None = None, *, rung: str | None = None
    ) -> None:
        """From now on, node creation in ``zone`` (for ``accelerator``, or any; on ``rung``, or any) fails: no
        capacity."""
        with self._lock:
            self.stockouts.append(Stockout(zone, list(zones_with_capacity), accelerator, rung))

    def clear_stockouts(self) -> None:
        """Capacity is back everywhere."""
        with self._lock:
            self.stockouts.clear()

    def set_master(self, endpoint: str, ca_certificate: str) -> None:
        """Set the endpoint and base64 CA certificate that clusters report (existing ones too)."""
        with self._lock:
            self.endpoint, self.ca_certificate = endpoint, ca_certificate
            for cluster in self.clusters.values():
                if cluster.status == ClusterStatus.RUNNING:
                    cluster.endpoint = endpoint
                    cluster.master_auth.cluster_ca_certificate = ca_certificate

    def node_taints(self, cluster: str, pool: str) -> list[tuple[str, str, str]]:
        """The taints (key, value, effect name) the nodes of ``pool`` of ``cluster`` carry.

        GKE's "Run GPUs in Standard node pools" (cloud.google.com/kubernetes-engine/docs/how-to/gpus): "If you
        add a GPU node pool to an existing cluster that already runs a non-GPU node pool, GKE automatically
        taints the GPU nodes with nvidia.com/gpu=present:NoSchedule". It says nothing of pools created with
        the cluster, so here those carry only the taints the request set.
        """
        with self._lock:
            found = next(
                (
                    p
                    for (_, _, name), c in self.clusters.items()
                    if name == cluster
                    for p in c.node_pools
                    if p.name == pool
                ),
                None,
            )
            if found is None:
                raise KeyError(f"no node pool {pool} in cluster {cluster}")
            taints = [(t.key, t.value, container_v1.NodeTaint.Effect(t.effect).name) for t in found.config.taints]
            automatic = ("nvidia.com/gpu", "present", "NO_SCHEDULE")
            if (cluster, pool) in self._auto_gpu_taint and automatic not in taints:
                taints.append(automatic)
            return taints

    def requests_of(self, method: str) -> list[Any]:
        """The requests received for ``method``, in order."""
        with self._lock:
            return [req for name, req in self.requests if name == method]

    def complete_all_operations(self) -> None:
        """Finish every pending operation now (as if much time had passed)."""
        with self._lock:
            for name, pending in list(self.operations.items()):
                while pending.op.status != Op.Status.DONE:
                    self._advance(name)

    def cluster_names(self) -> list[str]:
        """Names of all clusters the fake holds, in any state."""
        with self._lock:
            return sorted(name for (_, _, name) in self.clusters)

    # ----------------------------------------------------------------- plumbing

    def _rpc(self, fn: Callable[[Any], Any], request_type: Any, response_type: Any) -> grpc.RpcMethodHandler:
        method = fn.__name__.strip("_").title().replace("_", "")  # _create_node_pool -> CreateNodePool

        def handler(request: Any, context: grpc.ServicerContext) -> Any:
            with self._lock:
                self.requests.append((method, type(request).deserialize(type(request).serialize(request))))
                try:
                    self._maybe_inject(method)
                    response = fn(request)
                    if isinstance(response, Op) and self.polls_to_done <= 0:
                        self._advance(response.name)  # instant operations
                    return response
                except _Abort as exc:
                    error = _abort_status(exc)
            context.abort_with_status(error)

        return grpc.unary_unary_rpc_method_handler(
            handler,
            request_deserializer=request_type.deserialize,
            response_serializer=response_type.serialize,
        )

    def _maybe_inject(self, method: str) -> None:
        for injected in self._injected:
            if injected.method == method and injected.times > 0:
                injected.times -= 1
                if injected.times == 0:
                    self._injected.remove(injected)
                raise _Abort(injected.code, injected.message, injected.reason, injected.domain)

    def _new_op(
        self,
        project: str,
        location: str,
        op_type: Op.Type,
        target: str,
        cluster_key: tuple[str, str, str],
    ) -> _PendingOp:
        op_id = f"operation-{next(self._ids)}-{abs(hash(target)) % 10**8:08x}"
        op = Op(
            name=op_id,
            zone=location,
            location=location,
            operation_type=op_type,
            status=Op.Status.PENDING,
            self_link=f"https://container.googleapis.com/v1/projects/{project}/locations/{location}/operations/{op_id}",
            target_link=f"https://container.googleapis.com/v1/{target}",
            start_time=_now(),
        )
        pending = _PendingOp(op=op, project=project, cluster_key=cluster_key)
        if self._success_notes:
            pending.extra["note"] = self._success_notes.pop(0)
        self.operations[op_id] = pending
        return pending

    def _busy(self, key: tuple[str, str, str]) -> None:
        for name, pending in self.operations.items():
            if pending.cluster_key == key and pending.op.status != Op.Status.DONE:
                raise _Abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"Cluster is running incompatible operation {name}.",
                    reason="CLUSTER_ALREADY_HAS_OPERATION",
                )

    def _cluster(self, key: tuple[str, str, str]) -> container_v1.Cluster:
        cluster = self.clusters.get(key)
        if cluster is None:
            raise _Abort(
                grpc.StatusCode.NOT_FOUND,
                f"Not found: projects/{key[0]}/locations/{key[1]}/clusters/{key[2]}.",
            )
        return cluster

    @staticmethod
    def _parse(pattern: re.Pattern[str], value: str, what: str) -> tuple[str, ...]:
        match = pattern.match(value)
        if not match:
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"Invalid {what} {value!r}.")
        return match.groups()

    def _zones_of(self, cluster: container_v1.Cluster, pool: container_v1.NodePool) -> list[str]:
        if pool.locations:
            return list(pool.locations)
        if cluster.locations:
            return list(cluster.locations)
        if _REGION_RE.match(cluster.location):
            return default_zones(cluster.location)
        return [cluster.location]

    def _check_accelerators(self, cluster: container_v1.Cluster, pool: container_v1.NodePool) -> None:
        """GKE's "Regional clusters" page (Limitations): a GPU pool in a zone without its GPU fails with
        'ResponseError: code=400 ... Accelerator type "nvidia-l4" does not exist in zone europe-west3-a.'"""
        for acc in pool.config.accelerators:
            for zone in self._zones_of(cluster, pool):
                if not offers(zone, acc.accelerator_type):
                    raise _Abort(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f'Accelerator type "{acc.accelerator_type}" does not exist in zone {zone}.',
                    )

    def _check_consumption(self, pool: container_v1.NodePool) -> None:
        """How a machine type may be bought, and the boot disks it takes (issue 37: the fake accepted them all):

        * a3-highgpu-1g/2g/4g are sold only as Spot or Flex-start VMs ("Accelerator-optimized machine
          family", A3 High: cloud.google.com/compute/docs/accelerator-optimized-machines; FACTS.md round 3);
        * A3 Ultra capacity comes only through a reservation (AI Hypercomputer "Consumption options",
          cloud.google.com/ai-hypercomputer/docs/consumption-models: "For A3 Ultra, you must request
          reservations"; Spot and Flex-start cover every type but A3 Ultra);
        * A3 Ultra, A4, A4X and G4 boot from Hyperdisk only, and no A3 takes pd-standard (the same page's
          "Supported disk types"); GKE's default boot disk is pd-balanced.
        """
        config = pool.config
        machine = config.machine_type
        if not machine.startswith(("a3-", "a4-", "a4x-", "g4-")):
            return
        if re.match(r"^a3-highgpu-[124]g$", machine) and not (config.spot or config.preemptible or config.flex_start):
            raise _Abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Machine type {machine} is available only as Spot VMs or with Flex-start (node pool {pool.name}).",
            )
        reserved = config.reservation_affinity.consume_reservation_type == (
            container_v1.ReservationAffinity.Type.SPECIFIC_RESERVATION
        )
        if machine.startswith("a3-ultragpu-") and not reserved:
            raise _Abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Machine type {machine} requires a specific reservation (node pool {pool.name}): set "
                "reservationAffinity to SPECIFIC_RESERVATION.",
            )
        disk = config.disk_type or "pd-balanced"
        hyperdisk_only = machine.startswith(("a3-ultragpu-", "a4-", "a4x-", "g4-"))
        if (hyperdisk_only and not disk.startswith("hyperdisk-")) or disk in ("pd-standard", "pd-extreme"):
            raise _Abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Disk type {disk} is not supported for machine type {machine} (node pool {pool.name}).",
            )

    def _stockout_error(self, cluster: container_v1.Cluster, pool: container_v1.NodePool) -> str | None:
        accelerators = [a.accelerator_type for a in pool.config.accelerators]
        if pool.config.flex_start:
            # a flex-start pool is created empty: Dynamic Workload Scheduler adds nodes when capacity exists
            return None
        for zone in self._zones_of(cluster, pool):
            for out in self.stockouts:
                if out.zone != zone or (out.accelerator is not None and out.accelerator not in accelerators):
                    continue
                if out.rung is not None and out.rung != pool_rung(pool):
                    continue
                if out.code == "GCE_STOCKOUT":
                    return (
                        f"Google Compute Engine: Instance 'gke-{cluster.name}-{pool.name}-1a2b3c4d-x1y2' creation "
                        f"failed: GCE_STOCKOUT: The zone 'projects/{cluster.self_link.split('/')[5]}/zones/{zone}' "
                        "does not have enough resources available to fulfill the request. '(resource type:compute)'."
                    )
                machine = pool.config.machine_type or "e2-medium"
                with_gpus = "".join(
                    f" with {a.accelerator_count} {a.accelerator_type} accelerator(s)" for a in pool.config.accelerators
                )
                capacity = (
                    f" Consider trying your request in the {', '.join(out.zones_with_capacity)} zone(s), which "
                    "currently has capacity to accommodate your request."
                    if out.zones_with_capacity
                    else ""
                )
                return (
                    f"Google Compute Engine: Not all instances running in IGM after 41.2s. Expected "
                    f"{pool.initial_node_count}, running 0, transitioning {pool.initial_node_count}. Current "
                    f"errors: [ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS]: Instance "
                    f"'gke-{cluster.name}-{pool.name}-1a2b3c4d-x1y2' creation failed: The zone "
                    f"'projects/{cluster.self_link.split('/')[5]}/zones/{zone}' does not have enough resources "
                    f"available to fulfill the request.  '(resource type:compute)'. A {machine} VM instance"
                    f"{with_gpus} is currently unavailable in the {zone} zone.{capacity} Alternatively, you can "
                    "try your request again with a different VM hardware configuration or at a later time."
                )
        return None

    def _advance(self, name: str) -> None:
        pending = self.operations[name]
        op = pending.op
        if op.status == Op.Status.DONE:
            return
        pending.polls += 1
        total = max(self.polls_to_done, 1)
        op.progress = container_v1.OperationProgress(
            name=container_v1.Operation.Type(op.operation_type).name,
            status=Op.Status.RUNNING,
            metrics=[
                container_v1.OperationProgress.Metric(name="STEPS_DONE", int_value=pending.polls),
                container_v1.OperationProgress.Metric(name="STEPS_TOTAL", int_value=total),
            ],
        )
        if pending.polls < total:
            op.status = Op.Status.RUNNING
            op.detail = f"step {pending.polls} of {total}"
            return
        op.status = Op.Status.DONE
        op.detail = ""
        op.end_time = _now()
        op.progress.status = Op.Status.DONE
        if pending.error is not None:
            op.status_message = pending.error
            op.error = status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message=pending.error)
            op.cluster_conditions = [
                container_v1.StatusCondition(canonical_code=code_pb2.RESOURCE_EXHAUSTED, message=pending.error)
            ]
            if pending.on_error:
                pending.on_error()
        else:
            if "note" in pending.extra:
                op.status_message = pending.extra["note"]
                op.cluster_conditions = [
                    container_v1.StatusCondition(canonical_code=code_pb2.OK, message=pending.extra["note"])
                ]
            if pending.on_done:
                pending.on_done()

    # ----------------------------------------------------------------- clusters

    def _create_cluster(self, request: container_v1.CreateClusterRequest) -> Op:
        project, location = self._parse(_PARENT_RE, request.parent, "parent")
        cluster = container_v1.Cluster.deserialize(container_v1.Cluster.serialize(request.cluster))
        if not cluster.name:
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "Cluster.name must be provided.")
        if cluster.node_pools and (cluster.initial_node_count or cluster.node_config.machine_type):
            raise _Abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                "Cannot specify both node_pools and initial_node_count/node_config.",
            )
        pool_names = [p.name for p in cluster.node_pools]
        if len(set(pool_names)) != len(pool_names):
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"Duplicate node pool names {pool_names}.")
        for pool in cluster.node_pools:
            for acc in pool.config.accelerators:
                if acc.accelerator_count < 1 or not acc.accelerator_type:
                    raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "accelerator_count and type are required.")
                if acc.accelerator_type == "nvidia-tesla-k80":
                    raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "Accelerator type nvidia-tesla-k80 does not exist.")
        located = container_v1.Cluster(
            location=location, locations=list(cluster.locations), current_master_version=self.master_version
        )
        for pool in cluster.node_pools:
            self._check_accelerators(located, pool)
            self._check_consumption(pool)
            self._check_sharing_and_flex_start(located, pool)
        key = (project, location, cluster.name)
        if key in self.clusters:
            raise _Abort(
                grpc.StatusCode.ALREADY_EXISTS,
                f"Already exists: projects/{project}/locations/{location}/clusters/{cluster.name}.",
            )
        target = f"projects/{project}/locations/{location}/clusters/{cluster.name}"
        cluster.location = location
        cluster.zone = location
        cluster.self_link = f"https://container.googleapis.com/v1/{target}"
        cluster.create_time = _now()
        cluster.status = ClusterStatus.PROVISIONING
        cluster.id = f"{next(self._ids):032x}"
        cluster.current_master_version = self.master_version
        for pool in cluster.node_pools:
            pool.status = PoolStatus.PROVISIONING
            pool.version = cluster.current_master_version
            pool.self_link = f"{cluster.self_link}/nodePools/{pool.name}"
        self.clusters[key] = cluster
        pending = self._new_op(project, location, Op.Type.CREATE_CLUSTER, target, key)

        errors = [
            e
            for e in (
                self._stockout_error(cluster, p) or self._rung_quota_error(cluster, p) for p in cluster.node_pools
            )
            if e
        ]

        def done() -> None:
            cluster.status = ClusterStatus.RUNNING
            cluster.endpoint = self.endpoint
            cluster.master_auth.cluster_ca_certificate = self.ca_certificate
            count = 0
            for pool in cluster.node_pools:
                pool.status = PoolStatus.RUNNING
                count += pool.initial_node_count * len(self._zones_of(cluster, pool))
            cluster.current_node_count = count

        def failed() -> None:
            cluster.status = ClusterStatus.ERROR
            cluster.status_message = errors[0]
            for pool in cluster.node_pools:
                pool.status = PoolStatus.ERROR

        pending.on_done, pending.on_error = done, failed
        pending.error = errors[0] if errors else None
        return pending.op

    def _get_cluster(self, request: container_v1.GetClusterRequest) -> container_v1.Cluster:
        key = self._parse(_CLUSTER_RE, request.name, "name")
        return self._cluster(key)  # type: ignore[arg-type]

    def _list_clusters(self, request: container_v1.ListClustersRequest) -> container_v1.ListClustersResponse:
        project, location = self._parse(_PARENT_RE, request.parent, "parent")
        found = [c for (p, loc, _), c in sorted(self.clusters.items()) if p == project and location in ("-", loc)]
        return container_v1.ListClustersResponse(clusters=found)

    def _delete_cluster(self, request: container_v1.DeleteClusterRequest) -> Op:
        key = self._parse(_CLUSTER_RE, request.name, "name")
        cluster = self._cluster(key)  # type: ignore[arg-type]
        busy_with = [p for p in self.operations.values() if p.cluster_key == key and p.op.status != Op.Status.DONE]
        if busy_with and (
            self.reject_delete_during_operation or busy_with[0].op.operation_type == Op.Type.DELETE_CLUSTER
        ):
            self._busy(key)  # type: ignore[arg-type]
        cluster.status = ClusterStatus.STOPPING
        pending = self._new_op(key[0], key[1], Op.Type.DELETE_CLUSTER, request.name, key)  # type: ignore[arg-type]

        def done() -> None:
            self.clusters.pop(key, None)  # type: ignore[call-overload]

        pending.on_done = done
        return pending.op

    # ----------------------------------------------------------------- node pools

    def _create_node_pool(self, request: container_v1.CreateNodePoolRequest) -> Op:
        key = self._parse(_CLUSTER_RE, request.parent, "parent")
        cluster = self._cluster(key)  # type: ignore[arg-type]
        self._busy(key)  # type: ignore[arg-type]
        pool = container_v1.NodePool.deserialize(container_v1.NodePool.serialize(request.node_pool))
        if any(p.name == pool.name for p in cluster.node_pools):
            raise _Abort(grpc.StatusCode.ALREADY_EXISTS, f"Already exists: {request.parent}/nodePools/{pool.name}.")
        self._check_accelerators(cluster, pool)
        self._check_consumption(pool)
        self._check_sharing_and_flex_start(cluster, pool)
        pool.status = PoolStatus.PROVISIONING
        pool.self_link = f"{cluster.self_link}/nodePools/{pool.name}"
        if pool.config.accelerators and any(not p.config.accelerators for p in cluster.node_pools):
            self._auto_gpu_taint.add((cluster.name, pool.name))
        cluster.node_pools.append(pool)
        cluster.status = ClusterStatus.RECONCILING
        target = f"{request.parent}/nodePools/{pool.name}"
        pending = self._new_op(key[0], key[1], Op.Type.CREATE_NODE_POOL, target, key)  # type: ignore[arg-type]
        error = self._stockout_error(cluster, pool) or self._rung_quota_error(cluster, pool)

        def stored() -> container_v1.NodePool:
            return next(p for p in cluster.node_pools if p.name == pool.name)

        def done() -> None:
            stored().status = PoolStatus.RUNNING
            cluster.status = ClusterStatus.RUNNING

        def failed() -> None:
            stored().status = PoolStatus.ERROR
            stored().status_message = error or ""
            cluster.status = ClusterStatus.RUNNING

        pending.on_done, pending.on_error, pending.error = done, failed, error
        return pending.op

    def _pool(self, name: str) -> tuple[container_v1.Cluster, container_v1.NodePool]:
        project, location, cluster_name, pool_name = self._parse(_POOL_RE, name, "name")
        cluster = self._cluster((project, location, cluster_name))
        for pool in cluster.node_pools:
            if pool.name == pool_name:
                return cluster, pool
        raise _Abort(grpc.StatusCode.NOT_FOUND, f"Not found: {name}.")

    def _get_node_pool(self, request: container_v1.GetNodePoolRequest) -> container_v1.NodePool:
        return self._pool(request.name)[1]

    def _list_node_pools(self, request: container_v1.ListNodePoolsRequest) -> container_v1.ListNodePoolsResponse:
        key = self._parse(_CLUSTER_RE, request.parent, "parent")
        return container_v1.ListNodePoolsResponse(node_pools=list(self._cluster(key).node_pools))  # type: ignore[arg-type]

    def _delete_node_pool(self, request: container_v1.DeleteNodePoolRequest) -> Op:
        cluster, pool = self._pool(request.name)
        key = self._parse(_POOL_RE, request.name, "name")[:3]
        self._busy(key)  # type: ignore[arg-type]
        pool.status = PoolStatus.STOPPING
        cluster.status = ClusterStatus.RECONCILING
        pending = self._new_op(key[0], key[1], Op.Type.DELETE_NODE_POOL, request.name, key)  # type: ignore[arg-type]
        pool_name = pool.name

        def done() -> None:
            remaining = [p for p in cluster.node_pools if p.name != pool_name]
            del cluster.node_pools[:]
            cluster.node_pools.extend(remaining)
            cluster.status = ClusterStatus.RUNNING

        pending.on_done = done
        return pending.op

    # ----------------------------------------------------------------- operations

    def _get_operation(self, request: container_v1.GetOperationRequest) -> Op:
        project, _location, name = self._parse(_OP_RE, request.name, "name")
        pending = self.operations.get(name)
        if pending is None or pending.project != project:
            raise _Abort(grpc.StatusCode.NOT_FOUND, f"Not found: {request.name}.")
        self._advance(name)
        return pending.op

    def _list_operations(self, request: container_v1.ListOperationsRequest) -> container_v1.ListOperationsResponse:
        project, location = self._parse(_PARENT_RE, request.parent, "parent")
        found = [p.op for p in self.operations.values() if p.project == project and location in ("-", p.op.location)]
        return container_v1.ListOperationsResponse(operations=found)


def _abort_status(exc: _Abort) -> grpc.Status:
    details = []
    if exc.reason:
        info = any_pb2.Any()
        info.Pack(error_details_pb2.ErrorInfo(reason=exc.reason, domain=exc.domain))
        details.append(info)
    status = status_pb2.Status(code=exc.code.value[0], message=exc.message, details=details)
    return rpc_status.to_status(status)
