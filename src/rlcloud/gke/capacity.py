"""The capacity ladder of a GPU pool: where to try next when Google has no GPUs (or no quota) for it.

A spec's ``capacity`` (e.g. ``[spot, on-demand, flex-start]``) is a ladder of provisioning models. The GPU pool
starts on the first rung in the first zone of its placement (:mod:`rlcloud.gke.zones`). When Compute Engine
answers with a stockout (``ZONE_RESOURCE_POOL_EXHAUSTED``, ``GCE_STOCKOUT``: that zone has no such VM now) the
pool tries the spare zones the placement computed (only those Google names as having capacity, when it names
any), then the next rung. A quota error (regional: ``Insufficient regional quota ... NVIDIA_L4_GPUS``) skips the
rung's other zones, which share the region's quota, and goes to the next rung at once. Every move is logged,
priced (the hourly estimate on the new rung) and written on the new pool's nodes as the label
:data:`TRIED_LABEL`, so ``rlcloud cluster info`` shows it from any machine.

Why a node pool and not a whole cluster: GKE creates a pool in minutes but a cluster in 5-10, and one operation
at a time runs on a cluster; with a ladder the cluster is created with its CPU pool only, and the GPU pool is
added (and moved) with CreateNodePool, each request idempotent (ALREADY_EXISTS is adopted).

A flex-start pool is created empty (``--num-nodes=0``, autoscaling): Dynamic Workload Scheduler adds its nodes
when capacity exists, so creating it cannot stock out. Budgets price nodes by their labels
(:mod:`rlcloud.gke.budgets`): a move from Spot to on-demand is priced on-demand from the first node on.
Flex-start nodes are priced (in the estimate and by budgets) at on-demand list prices: Dynamic Workload
Scheduler's discount (up to 53% per GKE's flex-start page) is not in rlcloud's price table, so a budget stops
no later than it should.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlcloud.errors import CapacityError, ConflictError, QuotaExceededError, RLCloudError
from rlcloud.gke.plan import GPU_POOL
from rlcloud.specs.cluster import CapacityRung, ClusterSpec

if TYPE_CHECKING:
    from rlcloud.gke.cluster import GkeCluster

__all__ = [
    "RUNG_LABEL",
    "TRIED_LABEL",
    "CapacityLadder",
    "CapacityMove",
    "ensure_laddered_pool",
    "is_gpu_pool_name",
    "ladder_quota_check",
    "rung_hourly_cost",
    "tried_label",
]

log = logging.getLogger("rlcloud.gke")

#: Kubernetes node label of a GPU pool made after a move: the (rung, zone) steps that failed before it,
#: oldest first, e.g. ``spot-a.spot-c.on-demand-quota`` (zone letters of the cluster's region).
TRIED_LABEL = "rlcloud-capacity-tried"
#: Kubernetes node label of the GPU pool's rung (spot, on-demand or flex-start).
RUNG_LABEL = "rlcloud-capacity"
_LABEL_MAX = 63  # a Kubernetes label value holds at most 63 characters


def rung_hourly_cost(spec: ClusterSpec, rung: str) -> float | None:
    """The cluster's estimated USD per hour with its GPU pool on ``rung`` (None: a price is missing)."""
    from rlcloud.gke.prices import estimate_hourly_cost

    on_rung = spec.model_copy(update={"spot": rung == "spot", "capacity": [CapacityRung(rung)]})
    return estimate_hourly_cost(on_rung).hourly


@dataclass(frozen=True)
class CapacityMove:
    """One step down the ladder: ``rung`` in ``zone`` failed (``why``: stockout or quota); next ``to_rung`` in
    ``to_zone``, estimated at ``hourly_usd`` per hour."""

    rung: str
    zone: str
    why: str
    to_rung: str
    to_zone: str
    hourly_usd: float | None
    message: str = ""

    def line(self) -> str:
        """One line for logs, ``cluster info`` and the doctor."""
        price = f"~${self.hourly_usd:.2f}/h" if self.hourly_usd is not None else "price unknown"
        return f"{self.rung} in {self.zone}: {self.why}; now {self.to_rung} in {self.to_zone} ({price})"


def _zone_letter(zone: str) -> str:
    return zone.rsplit("-", 1)[-1] if zone else "?"


def tried_label(moves: Sequence[CapacityMove]) -> str:
    """The :data:`TRIED_LABEL` value for ``moves``: the newest steps that fit in a label, oldest first."""
    parts = [f"{m.rung}-{'quota' if m.why == 'quota' else _zone_letter(m.zone)}" for m in moves]
    while parts and len(".".join(parts)) > _LABEL_MAX:
        parts.pop(0)
    return ".".join(parts)


@dataclass
class CapacityLadder:
    """Where the GPU pool goes next. ``steps``: its candidate zone sets in order (the placement's zone first,
    then the spares; ``()`` is the cluster's own zone(s)); ``location``: the cluster's location (for messages)."""

    spec: ClusterSpec
    steps: list[tuple[str, ...]]
    location: str
    rung_index: int = 0
    step_index: int = 0
    moves: list[CapacityMove] = field(default_factory=list)

    @classmethod
    def for_pool(
        cls, spec: ClusterSpec, location: str, placement: tuple[str, ...], spares: Sequence[str]
    ) -> CapacityLadder:
        """The ladder of ``spec``'s GPU pool in a cluster at ``location``: ``placement`` its zones now, ``spares``
        the other zones (of the region) that offer its GPU."""
        steps = [placement] + [(z,) for z in spares if (z,) != placement]
        return cls(spec=spec, steps=steps, location=location)

    @property
    def rungs(self) -> list[str]:
        """The rungs, in order."""
        return [str(r) for r in self.spec.capacity_ladder]

    @property
    def rung(self) -> str:
        """The rung the pool is on (or about to be created on)."""
        return self.rungs[self.rung_index]

    @property
    def locations(self) -> tuple[str, ...]:
        """The zones of the pool now (``()``: the cluster's)."""
        return self.steps[self.step_index]

    @property
    def pool_name(self) -> str:
        """The name of the pool on the current step: ``gpu-pool``, then ``gpu-pool-1``, ``gpu-pool-2``... one per
        move, so that the next pool is created while the failed one still exists (GKE leaves a failed pool in
        ERROR, and runs one operation at a time on a cluster: deleting it first would put a deletion on the
        path from a stockout to the next pool)."""
        return GPU_POOL if not self.moves else f"{GPU_POOL}-{len(self.moves)}"

    @property
    def zone(self) -> str:
        """The zones of the pool now, as text."""
        return ", ".join(self.locations) or self.location

    def advance(self, error: RLCloudError) -> bool:
        """The pool failed on the current step with ``error``: move to the next one, record and log the move.
        False when the ladder is used up (or ``error`` is no capacity or quota error: no move helps)."""
        if not isinstance(error, CapacityError | QuotaExceededError):
            return False
        quota = isinstance(error, QuotaExceededError)
        rung, zone = self.rung, self.zone
        named = [] if quota else list(getattr(error, "zones_with_capacity", []) or [])
        step = None
        if not quota:
            # the rung's other zones, those Google names first (a named zone outside our steps is no option:
            # the pool may only go where its GPU is offered)
            later = list(range(self.step_index + 1, len(self.steps)))
            if named:
                later = [i for i in later if set(self.steps[i]) & set(named)]
            step = later[0] if later else None
        if step is not None:
            self.step_index = step
        elif self.rung_index + 1 < len(self.rungs):
            self.rung_index += 1
            self.step_index = 0  # a new rung draws on other capacity (and quota): every zone again
        else:
            return False
        move = CapacityMove(
            rung=rung,
            zone=zone,
            why="quota" if quota else "stockout",
            to_rung=self.rung,
            to_zone=self.zone,
            hourly_usd=rung_hourly_cost(self.spec, self.rung),
            message=str(error)[:300],
        )
        self.moves.append(move)
        log.warning("cluster %s: GPU pool %s", self.spec.name, move.line())
        return True

    def labels(self) -> dict[str, str]:
        """The node labels of a pool created on the current step: its rung and what was tried before."""
        labels = {RUNG_LABEL: self.rung}
        if self.moves:
            labels[TRIED_LABEL] = tried_label(self.moves)
        return labels

    def exhausted(self, error: RLCloudError) -> RLCloudError:
        """The error to raise when the ladder is used up: ``error``, saying every step that was tried."""
        if not self.moves:
            return error
        tried = "; ".join(m.line() for m in self.moves)
        text = f"{error} (rlcloud's capacity ladder {' > '.join(self.rungs)} is used up: {tried})"
        if isinstance(error, QuotaExceededError):
            return QuotaExceededError(text, quota=error.quota)
        if isinstance(error, CapacityError):
            return CapacityError(text, zones_with_capacity=error.zones_with_capacity)
        return error


def is_gpu_pool_name(name: str) -> bool:
    """True for the names a capacity ladder gives its GPU pool (``gpu-pool``, ``gpu-pool-N``)."""
    suffix = name.removeprefix(GPU_POOL)
    return name.startswith(GPU_POOL) and (not suffix or (suffix[0] == "-" and suffix[1:].isdigit()))


def ensure_laddered_pool(
    handle: GkeCluster, cluster: Any, ladder: CapacityLadder, *, wait: bool, progress: Any, deadline: float
) -> bool:
    """True when a GPU pool of the ladder runs on ``cluster``; otherwise take one step towards it and return
    False (the caller re-reads the cluster and calls again).

    Idempotent, for this process and any other: a running ladder pool (whatever its name or rung: another
    process may have moved it) is adopted; ALREADY_EXISTS means an earlier request landed; an operation in
    flight is waited for. Failed pools of the ladder (ERROR, no node) are deleted once a pool runs, or when the
    ladder is used up.
    """
    from google.cloud import container_v1

    from rlcloud.gke.builders import build_create_node_pool_request
    from rlcloud.gke.errors import ClusterBusyError, operation_error

    status = container_v1.NodePool.Status
    ours = [p for p in cluster.node_pools if is_gpu_pool_name(p.name)]
    running = [p for p in ours if p.status in (status.RUNNING, status.RUNNING_WITH_ERROR)]
    failed = [p for p in ours if p.status == status.ERROR]
    if running:
        for pool in failed:  # off the path to the running pool: now the leftovers go
            handle._delete_pool(pool.name, deadline, progress)
        return not failed
    if len(failed) < len(ours):  # provisioning, reconciling or stopping: wait for what runs on it
        return handle.wait_running(
            f"the GPU pool of {handle.spec.name}", wait=wait, deadline=deadline, progress=progress
        )
    while True:
        name = ladder.pool_name
        if any(p.name == name for p in failed):
            handle._delete_pool(name, deadline, progress)  # a failed pool of an earlier process holds the name
            return False
        request = build_create_node_pool_request(
            handle.spec,
            project=handle.project,
            location=handle.location,
            pool_name=GPU_POOL,
            pool_locations=ladder.locations,
            gpu_driver_version=handle.gpu_driver_version,
            rung=ladder.rung,
            labels=ladder.labels(),
        )
        request.node_pool.name = name
        action = f"create node pool {name} ({ladder.rung}) of cluster {handle.spec.name}"
        try:
            operation = handle._mutate(
                lambda request=request: handle.client.create_node_pool(request=request),  # type: ignore[misc]
                deadline,
                progress,
                action,
            )
        except ConflictError as exc:
            if isinstance(exc, ClusterBusyError):
                raise
            return False  # ALREADY_EXISTS: an earlier (retried) request landed; re-read the cluster
        if not wait:
            return True
        finished = handle._wait(operation, deadline, progress, action)
        error = operation_error(finished, project=handle.project, action=action)
        if error is None:
            return False  # re-read: the new pool runs, the failed ones are deleted then
        if not ladder.advance(error):
            for pool in [*failed, container_v1.NodePool(name=name)]:
                handle._delete_pool(pool.name, deadline, progress)
            raise ladder.exhausted(error)
        failed.append(container_v1.NodePool(name=name, status=status.ERROR))


def ladder_quota_check(
    spec: ClusterSpec, need: int, quota_of: Callable[[str], tuple[str, float | None]]
) -> tuple[str, str]:
    """The doctor's GPU quota verdict for a capacity ladder: ``(status, detail)``.

    ``quota_of(rung)`` gives the regional quota metric that rung draws on and its free amount (None: Compute
    does not report the metric, so it cannot tell). Spot VMs draw on the preemptible quota (or the standard one
    when the project has no preemptible quota); flex-start VMs "consume preemptible quota" (Google Cloud blog,
    "GPUs when you need them: Introducing Flex-start VMs", 2025-09-25); on-demand VMs the standard one. A rung
    without quota is no reason to refuse the cluster, since the ladder goes past it on the quota error: FAIL only
    when no rung can have the GPUs, WARN when some cannot. Each rung's estimated hourly cost is shown too.
    """
    lines, usable, unknown = [], 0, 0
    for rung in (str(r) for r in spec.capacity_ladder):
        metric, free = quota_of(rung)
        cost = rung_hourly_cost(spec, rung)
        price = f", ~${cost:.2f}/h" if cost is not None else ""
        if free is None:
            unknown += 1
            lines.append(f"{rung}: {metric} not reported by Compute (check the console){price}")
        elif free >= need:
            usable += 1
            lines.append(f"{rung}: {metric} {free:g} free{price}")
        else:
            lines.append(f"{rung}: {metric} {free:g} free, needs {need}: the ladder will pass it by{price}")
    detail = "capacity ladder " + "; ".join(lines)
    if usable == len(lines):
        return "OK", detail
    if usable or unknown:
        return "WARN", detail
    return "FAIL", detail
