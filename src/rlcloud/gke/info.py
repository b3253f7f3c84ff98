"""ClusterInfo: what GKE reports about one cluster, and the views over it (age, teardown, cost so far).

Read from a ``container_v1.Cluster`` message (:meth:`ClusterInfo.from_cluster`), never from a spec: what a
listing shows, what the reaper and ``rlcloud cluster list`` judge, and the spec an existing cluster is
found with (:meth:`ClusterInfo.to_spec`).
"""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass, field
from typing import Any

from google.cloud import container_v1

from rlcloud.display import span
from rlcloud.gke.builders import (
    AUTODOWN_LABEL,
    EXPERIMENT_LABEL,
    EXPIRY_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    read_autodown_label,
    read_expiry_label,
)
from rlcloud.gke.capacity import TRIED_LABEL, is_gpu_pool_name
from rlcloud.gke.plan import DEFAULT_POOL, GPU_POOL, PoolPlan
from rlcloud.gke.prices import CostSoFar, estimate_cost_so_far
from rlcloud.specs.cluster import REGION_RE, Autoscaling, ClusterSpec
from rlcloud.timestamps import parse_rfc3339

__all__ = ["ClusterInfo"]

ClusterStatus = container_v1.Cluster.Status


def _reservation_of(pool: Any) -> str | None:
    affinity = pool.config.reservation_affinity if pool is not None else None
    if affinity and affinity.consume_reservation_type == container_v1.ReservationAffinity.Type.SPECIFIC_RESERVATION:
        return affinity.values[0] if affinity.values else None
    return None


def _rung_of(pool: Any) -> str:
    if pool.config.flex_start:
        return "flex-start"
    return "spot" if pool.config.spot or pool.config.preemptible else "on-demand"


@dataclass(frozen=True)
class ClusterInfo:
    """Observed state of a GKE cluster (what GKE reports, not what a spec asked for)."""

    name: str
    project: str
    location: str
    status: str  # PROVISIONING, RUNNING, RECONCILING, STOPPING, ERROR, DEGRADED
    machine_type: str  # of the experiment (GPU or default) pool
    num_nodes: int  # nodes now (all pools)
    gpus_per_node: int
    gpu_type: str | None
    spot: bool
    node_pools: list[str]
    created: _dt.datetime | None
    expiry: _dt.datetime | None
    labels: dict[str, str] = field(default_factory=dict)
    endpoint: str = ""
    status_message: str = ""
    disk_size: int = 0
    autoscaling: tuple[int, int] | None = None  # (min, max) nodes of the experiment pool
    nodes_per_zone: int = 0  # initial node count of the experiment pool
    #: every pool as a plan with its node count over all its zones (for the cost so far)
    pools: tuple[tuple[PoolPlan, int], ...] = ()
    reservation: str | None = None  # the reservation the experiment pool consumes
    node_locations: tuple[str, ...] = ()  # zones of the GPU pool when it sets its own
    #: what could not be read from this cluster (an expiry or autodown label that is no number of seconds):
    #: the cluster is still listed, and an unreadable label acts as absent
    problems: tuple[str, ...] = ()
    #: the GPU pool's capacity rung (spot, on-demand, flex-start; "" without GPUs) and what the capacity ladder
    #: tried before it (:data:`rlcloud.gke.capacity.TRIED_LABEL`, e.g. ``spot-a.spot-c``; "" when nothing failed)
    capacity: str = ""
    capacity_tried: str = ""

    @property
    def managed(self) -> bool:
        """True when rlcloud made this cluster (label managed-by=rlcloud)."""
        return self.labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE

    @property
    def experiment(self) -> str | None:
        """The experiment a dedicated cluster was made for (label), else None."""
        return self.labels.get(EXPERIMENT_LABEL)

    @property
    def autodown(self) -> int | None:
        """Idle seconds after which the in-cluster reaper deletes the cluster (label), else None."""
        return read_autodown_label(self.labels)[0]

    def expired(self, now: float | None = None) -> bool:
        """True when the cluster carries an expiry label that lies in the past."""
        if self.expiry is None:
            return False
        return self.expiry.timestamp() <= (time.time() if now is None else now)

    def cost_so_far(self, now: float | None = None) -> CostSoFar | None:
        """Estimated cost since creation (each pool at its initial size, list prices), None when the
        creation time is unknown. An estimate: see :mod:`rlcloud.gke.prices`."""
        age = self.age(now)
        if age is None:
            return None
        return estimate_cost_so_far(list(self.pools), age / 3600)

    def teardown(self, now: float | None = None) -> str:
        """How the cluster goes away: ``ttl 2h left``, ``autodown 30m``, both, or ``-`` (``ttl label
        unreadable`` when the expiry label is no time: see :attr:`problems`)."""
        parts = []
        if self.expiry is not None:
            left = self.expiry.timestamp() - (time.time() if now is None else now)
            parts.append("ttl expired" if left <= 0 else f"ttl {span(left, 'compact')} left")
        elif EXPIRY_LABEL in self.labels:
            parts.append("ttl label unreadable")
        if self.autodown is not None:
            parts.append(f"autodown {span(self.autodown, 'compact')}")
        elif AUTODOWN_LABEL in self.labels:
            parts.append("autodown label unreadable")
        return ", ".join(parts) or "-"

    def age(self, now: float | None = None) -> float | None:
        """Seconds since creation, if known."""
        if self.created is None:
            return None
        return (time.time() if now is None else now) - self.created.timestamp()

    @classmethod
    def from_cluster(cls, cluster: Any, project: str) -> ClusterInfo:
        """Read a ``container_v1.Cluster`` message."""
        pools = list(cluster.node_pools)
        # a capacity ladder's pool may be gpu-pool-N, next to failed ones until they are deleted: the running one
        running = (container_v1.NodePool.Status.RUNNING, container_v1.NodePool.Status.RUNNING_WITH_ERROR)
        workers = next((p for p in pools if is_gpu_pool_name(p.name) and p.status in running), None)
        workers = workers or next((p for p in pools if p.name == GPU_POOL), None)
        workers = workers or next((p for p in pools if p.config.accelerators), None)
        workers = workers or next((p for p in pools if p.name == DEFAULT_POOL), None)
        workers = workers or (pools[0] if pools else None)
        accelerators = list(workers.config.accelerators) if workers else []
        labels = dict(cluster.resource_labels)
        expiry_seconds, expiry_problem = read_expiry_label(labels)
        expiry = None if expiry_seconds is None else _dt.datetime.fromtimestamp(expiry_seconds, _dt.UTC)
        problems = tuple(p for p in (expiry_problem, read_autodown_label(labels)[1]) if p)
        try:
            status = ClusterStatus(cluster.status).name
        except ValueError:  # a state newer than this client library's enum
            status = f"UNKNOWN({int(cluster.status)})"
        autoscaling = None
        if workers is not None and workers.autoscaling.enabled:
            autoscaling = (workers.autoscaling.min_node_count, workers.autoscaling.max_node_count)
        zones = max(len(cluster.locations), 1)
        pools_info = tuple(
            (
                PoolPlan(
                    name=p.name,
                    role="workers" if p is workers else "system",
                    machine_type=p.config.machine_type,
                    nodes_per_zone=p.initial_node_count,
                    disk_size_gb=p.config.disk_size_gb,
                    spot=bool(p.config.spot or p.config.preemptible),
                    gpus=sum(a.accelerator_count for a in p.config.accelerators),
                    gpu_type=p.config.accelerators[0].accelerator_type if p.config.accelerators else None,
                ),
                p.initial_node_count * (len(p.locations) or zones),
            )
            for p in pools
        )
        return cls(
            name=cluster.name,
            project=project,
            location=cluster.location or cluster.zone,
            status=status,
            machine_type=workers.config.machine_type if workers else "",
            num_nodes=cluster.current_node_count,
            gpus_per_node=sum(a.accelerator_count for a in accelerators),
            gpu_type=accelerators[0].accelerator_type if accelerators else None,
            spot=bool(workers and (workers.config.spot or workers.config.preemptible)),
            node_pools=[p.name for p in pools],
            created=parse_rfc3339(cluster.create_time),
            expiry=expiry,
            labels=labels,
            endpoint=cluster.endpoint,
            status_message=cluster.status_message,
            disk_size=workers.config.disk_size_gb if workers else 0,
            autoscaling=autoscaling,
            nodes_per_zone=workers.initial_node_count if workers else 0,
            pools=pools_info,
            reservation=_reservation_of(workers),
            node_locations=tuple(workers.locations) if workers and accelerators else (),
            problems=problems,
            capacity=_rung_of(workers) if workers and accelerators else "",
            capacity_tried=dict(workers.config.labels).get(TRIED_LABEL, "") if workers else "",
        )

    def to_spec(self) -> ClusterSpec:
        """A ClusterSpec that describes this cluster as it is (for attaching to a cluster by name)."""
        ours = {MANAGED_BY_LABEL, EXPERIMENT_LABEL, EXPIRY_LABEL, AUTODOWN_LABEL}
        return ClusterSpec(
            name=self.name,
            project=self.project,
            location=self.location,
            machine_type=self.machine_type or None,
            num_nodes=max(self.nodes_per_zone, 1),
            disk_size=max(self.disk_size, 10),
            gpus_per_node=self.gpus_per_node,
            gpu_type=self.gpu_type,
            spot=self.spot,
            autoscaling=(
                Autoscaling(min_nodes=self.autoscaling[0], max_nodes=self.autoscaling[1]) if self.autoscaling else None
            ),
            labels={k: v for k, v in self.labels.items() if k not in ours},
            autodown=self.autodown,
            reservation=self.reservation,
            node_locations=list(self.node_locations) if REGION_RE.match(self.location) and self.gpus_per_node else [],
        )
