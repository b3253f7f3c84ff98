"""The create path of one GKE cluster: :class:`ClusterCreation`, the object that makes it and holds where it goes.

A create looks before it leaps: an existing cluster is adopted, an operation already running on it (say, from a
create that was interrupted) is waited for, a cluster left in ERROR by an earlier failure is deleted and made again.
A stockout (ZONE_RESOURCE_POOL_EXHAUSTED) is retried in an allowed fallback zone that Google says has capacity; a
capacity ladder's GPU pool is walked by :mod:`rlcloud.gke.capacity`. The handle
(:class:`rlcloud.gke.cluster.GkeCluster`) owns one creation for its lifetime, so that what a create learnt (the
GPU pool's zones, the ladder's moves, the zone it moved to) holds for the next call, e.g. ``wait()`` after
``create(wait=False)``.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any

from google.cloud import container_v1

from rlcloud.errors import CapacityError, ConflictError, PreflightError, RLCloudError
from rlcloud.gke.builders import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    build_create_cluster_request,
    build_create_node_pool_request,
)
from rlcloud.gke.capacity import CapacityLadder, ensure_laddered_pool, is_gpu_pool_name
from rlcloud.gke.errors import ClusterBusyError, classify, operation_error
from rlcloud.gke.info import ClusterInfo
from rlcloud.gke.operations import ProgressCallback
from rlcloud.gke.plan import GPU_POOL, plan_pools
from rlcloud.gke.preflight import check_cluster_spec, cluster_spec_warnings
from rlcloud.gke.reaper_setup import require_budget_enforcer
from rlcloud.gke.zones import GpuPlacement, accelerator_zones, place_gpu_pool, region_of
from rlcloud.specs.cluster import REGION_RE

if TYPE_CHECKING:
    from rlcloud.gke.cluster import GkeCluster

__all__ = ["CLEANUP_TIMEOUT", "ClusterCreation"]

log = logging.getLogger("rlcloud.gke")

ClusterStatus = container_v1.Cluster.Status
PoolStatus = container_v1.NodePool.Status
OpType = container_v1.Operation.Type
# A RECONCILING cluster serves its API and is handled like a running one (its pools are checked one by one).
_BUSY_STATES = {ClusterStatus.PROVISIONING, ClusterStatus.STOPPING}
# Cleanup after a failed create gets at least this long, even when the create used up its own timeout.
CLEANUP_TIMEOUT = 600.0


class ClusterCreation:
    """Makes ``cluster`` (a :class:`~rlcloud.gke.cluster.GkeCluster`) exist and run with every pool of its spec.

    Holds what outlives one call: the regional cluster's pinned node locations after a stockout, the GPU pool's
    placement (:mod:`rlcloud.gke.zones`) and its capacity ladder (:mod:`rlcloud.gke.capacity`); and, during a
    call of :meth:`run`, that call's settings: ``wait``, ``progress``, ``deadline``, the zones ``allowed`` for a
    stockout and those ``tried``. The cluster's location lives on the handle (its path, its operations).
    """

    def __init__(self, cluster: GkeCluster) -> None:
        self.cluster = cluster
        self.node_locations: tuple[str, ...] = ()
        self.gpu_placement: GpuPlacement | None = None
        self.ladder: CapacityLadder | None = None
        self.wait = True
        self.progress: ProgressCallback | None = None
        self.deadline = 0.0
        self.allowed: list[str] = []
        self.tried: list[str] = []

    def run(
        self,
        *,
        wait: bool,
        progress: ProgressCallback | None,
        timeout: float,
        fallback_zones: list[str] | None,
        delete_on_failure: bool,
    ) -> ClusterInfo:
        """The body of :meth:`rlcloud.gke.cluster.GkeCluster.create` (its docstring says what each argument does)."""
        c = self.cluster
        check_cluster_spec(c.spec)
        if c.spec.budget is not None:  # enforced in the cluster, or refused before anything is made
            require_budget_enforcer(c, f"cluster {c.name}", "cluster")
        for warning in cluster_spec_warnings(c.spec):
            log.warning("cluster %s: %s", c.name, warning)
        self.wait, self.progress, self.tried = wait, progress, []
        self.allowed = list(c.spec.fallback_zones if fallback_zones is None else fallback_zones)
        self.deadline = time.monotonic() + timeout
        try:
            info = self._create()
        except PreflightError:
            raise  # refused before anything was made: nothing to delete
        except BaseException:
            if delete_on_failure:
                log.warning("creating cluster %s failed or was interrupted: deleting what was made", c.name)
                c._delete_after_failure(progress)
            raise
        if wait and (c.spec.ttl is not None or c.spec.autodown is not None or c.spec.budget is not None):
            # a budget depends on the reaper (BackendError when it cannot be installed); a ttl has its fallback
            budget = c.spec.budget is not None
            try:
                c.install_reaper(required="cluster" if budget else None)
            except BaseException:
                if delete_on_failure:  # a dedicated cluster whose budget nothing would enforce goes
                    log.warning("cluster %s: its budget would not be enforced: deleting it", c.name)
                    c._delete_after_failure(progress)
                raise
        return info

    def _create(self) -> ClusterInfo:
        c = self.cluster
        replaced_error_cluster = False
        while True:
            cluster = c._find()
            error: RLCloudError | None = None
            if cluster is None:
                self.place_gpu_pool()  # a regional GPU spec no zone can hold is refused here, first
                if c.doctor and not c._project_checked:
                    # a new cluster only: an existing one is adopted as it is (its own GPUs use the quota)
                    c.check_project()
                operation = self._send_create()
                if operation is None:
                    continue  # someone else created it meanwhile: adopt it
                if not self.wait:
                    return c.info()
                finished = c._wait(operation, self.deadline, self.progress, f"create cluster {c.name}")
                error = operation_error(finished, project=c.project, action=f"create cluster {c.name}")
                if error is None:
                    continue  # re-read: pools, endpoint
            elif cluster.status in _BUSY_STATES:
                running = c._operations()
                if not self.wait and cluster.status != ClusterStatus.STOPPING:
                    return ClusterInfo.from_cluster(cluster, c.project)
                if not running:
                    c._sleep_until(self.deadline, c.poll_interval)
                    continue
                for op in running:
                    finished = c._wait(op, self.deadline, self.progress, f"wait for {op.name} on cluster {c.name}")
                    if int(finished.operation_type) == int(OpType.CREATE_CLUSTER):
                        error = operation_error(finished, project=c.project, action=f"create cluster {c.name}")
                if error is None:
                    continue
            elif cluster.status == ClusterStatus.ERROR:
                message = cluster.status_message or f"cluster {c.name} is in state ERROR"
                error = classify(message, project=c.project, action=f"create cluster {c.name}")
                if not replaced_error_cluster:
                    # Left over from an earlier failed attempt: replace it once, the cause may be gone (capacity
                    # comes back, quota gets raised); if it fails again, our own operation's error decides.
                    log.warning("cluster %s is in %s from an earlier attempt: replacing it", c.name, cluster.status)
                    replaced_error_cluster = True
                    self._check_ours(cluster)
                    self._delete_failed()
                    continue
            else:
                self._check_matches(cluster)
                if self._ensure_pools(cluster):
                    return c.info()
                continue
            self._after_failed_create(error)

    def _after_failed_create(self, error: RLCloudError | None) -> None:
        """The create failed. GKE leaves the cluster behind in ERROR: it blocks the name and costs money: delete it,
        then move to another zone on a stockout (return to try there) or raise."""
        assert error is not None
        self._delete_failed()
        if isinstance(error, CapacityError):
            zone = getattr(error, "zone", None) or self.cluster.location
            self.tried.append(zone)
            if self._move(error):
                return
            if self.allowed:
                raise CapacityError(
                    f"{error} (rlcloud tried {', '.join(self.tried)}; none of fallback_zones {self.allowed} is left "
                    "with capacity)",
                    zones_with_capacity=error.zones_with_capacity,
                ) from error
        raise error

    def place_gpu_pool(self) -> tuple[str, ...]:
        """The zones of a regional cluster's GPU pool (none for zonal or CPU-only specs): the spec's
        ``node_locations`` or one zone of the region that offers the GPU, from Compute Engine
        (:mod:`rlcloud.gke.zones`); the region's other such zones join ``allowed`` for a stockout. Raises
        SpecError, before anything is created, when no zone of the region offers the GPU."""
        c = self.cluster
        if self.gpu_placement is None:
            offered: list[str] | None = None
            why = ""
            if c.spec.is_regional and c.spec.gpus_per_node and c.spec.gpu_type is not None:
                from rlcloud.gke.doctor import API_HOST_ENV

                try:
                    credentials = None if os.environ.get(API_HOST_ENV) else c.credentials
                    offered = accelerator_zones(c.project, c.spec.gpu_type.value, credentials=credentials)
                except Exception as exc:  # any failure to ask: the spec's own zones, or a SpecError saying so
                    why = f"{type(exc).__name__}: {str(getattr(exc, 'message', None) or exc).splitlines()[0][:300]}"
                    log.warning(
                        "cluster %s: could not list the zones that offer %s: %s", c.name, c.spec.gpu_type.value, why
                    )
            self.gpu_placement = place_gpu_pool(c.spec, offered, lookup_error=why)
            if self.gpu_placement.zones and not c.spec.node_locations:
                log.info("cluster %s: GPU pool in %s", c.name, ", ".join(self.gpu_placement.zones))
        self.allowed.extend(z for z in self.gpu_placement.spares if z not in self.allowed)
        return self.gpu_placement.zones

    def _delete_failed(self) -> None:
        """Delete a cluster a create left in ERROR, but never one rlcloud did not make."""
        c = self.cluster
        current = c._find()
        if current is None or dict(current.resource_labels).get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
            return
        c.delete(wait=True, progress=self.progress, timeout=max(self.deadline - time.monotonic(), CLEANUP_TIMEOUT))

    def _send_create(self) -> Any | None:
        c = self.cluster
        request = build_create_cluster_request(
            c.spec,
            project=c.project,
            location=c.location,
            node_locations=self.node_locations,
            gpu_locations=self.gpu_placement.zones if self.gpu_placement else (),
            experiment=c.experiment,
            gpu_driver_version=c.gpu_driver_version,
            # a capacity ladder moves the GPU pool alone: it is added (and moved) by CreateNodePool
            without_pools=(GPU_POOL,) if c.spec.capacity else (),
        )
        log.info("creating GKE cluster %s in %s (project %s)", c.name, c.location, c.project)
        try:
            return c._mutate(
                lambda: c.client.create_cluster(request=request),
                self.deadline,
                self.progress,
                f"create cluster {c.name}",
            )
        except ConflictError as exc:
            if isinstance(exc, ClusterBusyError):
                raise
            return None  # ALREADY_EXISTS: a concurrent or earlier create won; adopt its cluster

    def _move(self, error: CapacityError) -> bool:
        """Pick the next zone for a stockout; True if there is one (the handle's location, or the node locations
        or the GPU pool's placement of a regional cluster, updated)."""
        c, tried = self.cluster, self.tried
        region = region_of(c.location)
        named = error.zones_with_capacity
        regional = bool(REGION_RE.match(c.spec.location))
        for zone in self.allowed:
            if zone in tried or zone == c.location:
                continue
            if regional and region_of(zone) != region:
                continue  # a regional cluster's nodes must stay in its region
            if named and region_of(zone) == region and zone not in named:
                continue  # Google said this zone of the region has no capacity either
            placement = self.gpu_placement
            if regional and placement and placement.zones and tried[-1] in placement.zones:
                if zone not in placement.spares and zone not in c.spec.node_locations:
                    continue  # the GPU pool may only go where its GPU is offered
                self.gpu_placement = GpuPlacement((zone,), tuple(z for z in placement.spares if z != zone))
            elif regional:
                self.node_locations = (zone,)
            else:
                c.location = zone
            log.warning("no capacity in %s: retrying cluster %s in %s", tried[-1], c.name, zone)
            return True
        return False

    def _pool_ladder(self, placement: tuple[str, ...]) -> CapacityLadder:
        if self.ladder is None:
            c = self.cluster
            region = region_of(c.location)
            spares = [z for z in self.allowed if region_of(z) == region and z != c.location]
            self.ladder = CapacityLadder.for_pool(c.spec, c.location, placement, spares)
        return self.ladder

    def _check_ours(self, cluster: Any) -> None:
        c = self.cluster
        if dict(cluster.resource_labels).get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
            raise ConflictError(
                f"cluster {c.name} in {c.location} exists and was not made by rlcloud (no label "
                f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}); rlcloud will not replace it. Use another name."
            )

    def _check_matches(self, cluster: Any) -> None:
        """An existing cluster must have the experiment pool the spec asks for; else ConflictError."""
        name = self.cluster.name
        want = {p.name: p for p in plan_pools(self.cluster.spec)}
        for pool in cluster.node_pools:
            plan = want.get(pool.name)
            if plan is None or plan.role != "workers":
                continue
            got_gpus = [(a.accelerator_type, a.accelerator_count) for a in pool.config.accelerators]
            want_gpus = [(plan.gpu_type, plan.gpus)] if plan.gpus else []
            if pool.config.machine_type != plan.machine_type or got_gpus != want_gpus:
                raise ConflictError(
                    f"cluster {name} exists with pool {pool.name} of {pool.config.machine_type} "
                    f"{got_gpus or 'without GPUs'}, but the spec asks for {plan.machine_type} "
                    f"{want_gpus or 'without GPUs'}: delete it first (rlcloud cluster delete -c {name}) or "
                    "use another name"
                )

    def _ensure_pools(self, cluster: Any) -> bool:
        """True when every pool of the spec exists and runs; otherwise take one step towards it."""
        c = self.cluster
        existing = {p.name: p for p in cluster.node_pools}
        for plan in plan_pools(c.spec):
            if plan.name == GPU_POOL and c.spec.capacity:
                # a capacity ladder's GPU pool: gke/capacity.py walks it (zones, then rungs)
                ladder = self._pool_ladder(self.place_gpu_pool())
                if not ensure_laddered_pool(
                    c, cluster, ladder, wait=self.wait, progress=self.progress, deadline=self.deadline
                ):
                    return False
                continue
            pool = existing.get(plan.name)
            if pool is None and plan.name == GPU_POOL:
                # a capacity ladder's pool (gpu-pool-N) is the GPU pool to a handle without the ladder too
                pool = next((p for p in cluster.node_pools if is_gpu_pool_name(p.name) and p.config.accelerators), None)
            if pool is None:
                return self._create_pool(plan.name)
            if pool.status in (PoolStatus.RUNNING, PoolStatus.RUNNING_WITH_ERROR):
                continue  # RUNNING_WITH_ERROR: serving, with some nodes missing: GKE's auto-repair is the fix
            action = f"node pool {plan.name} of cluster {c.name}"
            if pool.status == PoolStatus.ERROR:
                log.warning("%s is in %s: re-creating it", action, PoolStatus(pool.status).name)
                c._delete_pool(pool.name, self.deadline, self.progress)
                return False
            # Provisioning, reconciling or stopping: wait for whatever operation is on it.
            return c.wait_running(action, wait=self.wait, deadline=self.deadline, progress=self.progress)
        return True

    def _create_pool(self, name: str) -> bool:
        """Create the node pool ``name`` (the GPU pool moves to another zone of the region on a stockout); True
        when ``wait`` is off, False when the cluster is to be read again; raises when it cannot be made."""
        c = self.cluster
        action = f"node pool {name} of cluster {c.name}"
        pool_locations: tuple[str, ...] = self.place_gpu_pool() if name == GPU_POOL else ()
        while True:
            request = build_create_node_pool_request(
                c.spec,
                project=c.project,
                location=c.location,
                pool_name=name,
                pool_locations=pool_locations,
                gpu_driver_version=c.gpu_driver_version,
            )
            try:
                operation = c._mutate(
                    lambda request=request: c.client.create_node_pool(request=request),  # type: ignore[misc]
                    self.deadline,
                    self.progress,
                    f"create {action}",
                )
            except ConflictError as exc:
                if isinstance(exc, ClusterBusyError):
                    raise
                return False  # ALREADY_EXISTS: an earlier (retried) request landed; re-read the cluster
            if not self.wait:
                return True
            finished = c._wait(operation, self.deadline, self.progress, f"create {action}")
            error = operation_error(finished, project=c.project, action=f"create {action}")
            if error is None:
                return False
            c._delete_pool(name, self.deadline, self.progress)
            if not isinstance(error, CapacityError):
                raise error
            self.tried.append(getattr(error, "zone", None) or c.location)
            region = region_of(c.location)
            options = [
                z
                for z in self.allowed
                if z not in self.tried
                and region_of(z) == region
                and (not error.zones_with_capacity or z in error.zones_with_capacity)
            ]
            if not options:
                raise error
            log.warning("no capacity for %s in %s: retrying in %s", action, self.tried[-1], options[0])
            pool_locations = (options[0],)
