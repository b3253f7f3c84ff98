"""The create path of a GKE cluster (moved verbatim from gke/cluster.py; shaped into its own object next)."""

from __future__ import annotations

import builtins
import logging
import os
import time
from typing import Any

from google.cloud import container_v1

from rlcloud.errors import CapacityError, ConflictError, RLCloudError
from rlcloud.gke.builders import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    build_create_cluster_request,
    build_create_node_pool_request,
)
from rlcloud.gke.capacity import CapacityLadder, CapacityMove, ensure_laddered_pool, is_gpu_pool_name
from rlcloud.gke.errors import ClusterBusyError, classify, operation_error
from rlcloud.gke.info import ClusterInfo
from rlcloud.gke.operations import ProgressCallback
from rlcloud.gke.plan import GPU_POOL, plan_pools
from rlcloud.gke.zones import GpuPlacement, accelerator_zones, place_gpu_pool
from rlcloud.specs.cluster import REGION_RE

log = logging.getLogger("rlcloud.gke")

ClusterStatus = container_v1.Cluster.Status
PoolStatus = container_v1.NodePool.Status
OpType = container_v1.Operation.Type
# A RECONCILING cluster serves its API and is handled like a running one (its pools are checked one by one).
_BUSY_STATES = {ClusterStatus.PROVISIONING, ClusterStatus.STOPPING}
# Cleanup after a failed create gets at least this long, even when the create used up its own timeout.
CLEANUP_TIMEOUT = 600.0


def _region(location: str) -> str:
    return location if REGION_RE.match(location) else location.rsplit("-", 1)[0]


class CreatePath:
    """The create path's methods (moved verbatim)."""

    def _create(
        self, wait: bool, progress: ProgressCallback | None, deadline: float, allowed: builtins.list[str]
    ) -> ClusterInfo:
        tried: builtins.list[str] = []
        replaced_error_cluster = False
        while True:
            cluster = self._find()
            error: RLCloudError | None = None
            if cluster is None:
                self._place_gpu_pool(allowed)  # a regional GPU spec no zone can hold is refused here, first
                if self.doctor and not self._project_checked:
                    # a new cluster only: an existing one is adopted as it is (its own GPUs use the quota)
                    self.check_project()
                operation = self._send_create(deadline, progress)
                if operation is None:
                    continue  # someone else created it meanwhile: adopt it
                if not wait:
                    return self.info()
                finished = self._wait(operation, deadline, progress, f"create cluster {self.name}")
                error = operation_error(finished, project=self.project, action=f"create cluster {self.name}")
                if error is None:
                    continue  # re-read: pools, endpoint
            elif cluster.status in _BUSY_STATES:
                running = self._operations()
                if not wait and cluster.status != ClusterStatus.STOPPING:
                    return ClusterInfo.from_cluster(cluster, self.project)
                if not running:
                    self._sleep_until(deadline, self.poll_interval)
                    continue
                for op in running:
                    finished = self._wait(op, deadline, progress, f"wait for {op.name} on cluster {self.name}")
                    if int(finished.operation_type) == int(OpType.CREATE_CLUSTER):
                        error = operation_error(finished, project=self.project, action=f"create cluster {self.name}")
                if error is None:
                    continue
            elif cluster.status == ClusterStatus.ERROR:
                message = cluster.status_message or f"cluster {self.name} is in state ERROR"
                error = classify(message, project=self.project, action=f"create cluster {self.name}")
                if not replaced_error_cluster:
                    # Left over from an earlier failed attempt: replace it once, the cause may be gone (capacity
                    # comes back, quota gets raised); if it fails again, our own operation's error decides.
                    log.warning("cluster %s is in %s from an earlier attempt: replacing it", self.name, cluster.status)
                    replaced_error_cluster = True
                    self._check_ours(cluster)
                    self._delete_failed(progress, deadline)
                    continue
            else:
                self._check_matches(cluster)
                if self._ensure_pools(cluster, wait, progress, deadline, allowed, tried):
                    return self.info()
                continue

            # The create failed. GKE leaves the cluster behind in ERROR: it blocks the name and costs money.
            assert error is not None
            self._delete_failed(progress, deadline)
            if isinstance(error, CapacityError):
                zone = getattr(error, "zone", None) or self.location
                tried.append(zone)
                if self._move(error, allowed, tried):
                    continue
                if allowed:
                    raise CapacityError(
                        f"{error} (rlcloud tried {', '.join(tried)}; none of fallback_zones {allowed} is left with "
                        "capacity)",
                        zones_with_capacity=error.zones_with_capacity,
                    ) from error
            raise error

    def _place_gpu_pool(self, allowed: builtins.list[str]) -> tuple[str, ...]:
        """The zones of a regional cluster's GPU pool (none for zonal or CPU-only specs): the spec's
        ``node_locations`` or one zone of the region that offers the GPU, from Compute Engine
        (:mod:`rlcloud.gke.zones`); the region's other such zones join ``allowed`` for a stockout. Raises
        SpecError, before anything is created, when no zone of the region offers the GPU."""
        if self._gpu_placement is None:
            offered: builtins.list[str] | None = None
            why = ""
            if self.spec.is_regional and self.spec.gpus_per_node and self.spec.gpu_type is not None:
                from rlcloud.gke.doctor import API_HOST_ENV

                try:
                    credentials = None if os.environ.get(API_HOST_ENV) else self.credentials
                    offered = accelerator_zones(self.project, self.spec.gpu_type.value, credentials=credentials)
                except Exception as exc:  # any failure to ask: the spec's own zones, or a SpecError saying so
                    why = f"{type(exc).__name__}: {str(getattr(exc, 'message', None) or exc).splitlines()[0][:300]}"
                    log.warning(
                        "cluster %s: could not list the zones that offer %s: %s",
                        self.name,
                        self.spec.gpu_type.value,
                        why,
                    )
            self._gpu_placement = place_gpu_pool(self.spec, offered, lookup_error=why)
            if self._gpu_placement.zones and not self.spec.node_locations:
                log.info("cluster %s: GPU pool in %s", self.name, ", ".join(self._gpu_placement.zones))
        allowed.extend(z for z in self._gpu_placement.spares if z not in allowed)
        return self._gpu_placement.zones

    def _delete_failed(self, progress: ProgressCallback | None, deadline: float) -> None:
        """Delete a cluster a create left in ERROR, but never one rlcloud did not make."""
        current = self._find()
        if current is None or dict(current.resource_labels).get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
            return
        self.delete(wait=True, progress=progress, timeout=max(deadline - time.monotonic(), CLEANUP_TIMEOUT))

    def _send_create(self, deadline: float, progress: ProgressCallback | None) -> Any | None:
        request = build_create_cluster_request(
            self.spec,
            project=self.project,
            location=self.location,
            node_locations=self._node_locations,
            gpu_locations=self._gpu_placement.zones if self._gpu_placement else (),
            experiment=self.experiment,
            gpu_driver_version=self.gpu_driver_version,
            # a capacity ladder moves the GPU pool alone: it is added (and moved) by CreateNodePool
            without_pools=(GPU_POOL,) if self.spec.capacity else (),
        )
        log.info("creating GKE cluster %s in %s (project %s)", self.name, self.location, self.project)
        try:
            return self._mutate(
                lambda: self.client.create_cluster(request=request), deadline, progress, f"create cluster {self.name}"
            )
        except ConflictError as exc:
            if isinstance(exc, ClusterBusyError):
                raise
            return None  # ALREADY_EXISTS: a concurrent or earlier create won; adopt its cluster

    def _move(self, error: CapacityError, allowed: builtins.list[str], tried: builtins.list[str]) -> bool:
        """Pick the next zone for a stockout; True if there is one (self.location/_node_locations updated)."""
        region = _region(self.location)
        named = error.zones_with_capacity
        regional = bool(REGION_RE.match(self.spec.location))
        for zone in allowed:
            if zone in tried or zone == self.location:
                continue
            if regional and _region(zone) != region:
                continue  # a regional cluster's nodes must stay in its region
            if named and _region(zone) == region and zone not in named:
                continue  # Google said this zone of the region has no capacity either
            placement = self._gpu_placement
            if regional and placement and placement.zones and tried[-1] in placement.zones:
                if zone not in placement.spares and zone not in self.spec.node_locations:
                    continue  # the GPU pool may only go where its GPU is offered
                self._gpu_placement = GpuPlacement((zone,), tuple(z for z in placement.spares if z != zone))
            elif regional:
                self._node_locations = (zone,)
            else:
                self.location = zone
            log.warning("no capacity in %s: retrying cluster %s in %s", tried[-1], self.name, zone)
            return True
        return False

    @property
    def capacity_moves(self) -> builtins.list[CapacityMove]:
        """The capacity ladder's moves of the GPU pool made by this handle, oldest first."""
        return list(self._ladder.moves) if self._ladder else []

    def _pool_ladder(self, placement: tuple[str, ...], allowed: builtins.list[str]) -> CapacityLadder:
        if self._ladder is None:
            region = _region(self.location)
            spares = [z for z in allowed if _region(z) == region and z != self.location]
            self._ladder = CapacityLadder.for_pool(self.spec, self.location, placement, spares)
        return self._ladder

    def _check_ours(self, cluster: Any) -> None:
        if dict(cluster.resource_labels).get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
            raise ConflictError(
                f"cluster {self.name} in {self.location} exists and was not made by rlcloud (no label "
                f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}); rlcloud will not replace it. Use another name."
            )

    def _check_matches(self, cluster: Any) -> None:
        """An existing cluster must have the experiment pool the spec asks for; else ConflictError."""
        want = {p.name: p for p in plan_pools(self.spec)}
        for pool in cluster.node_pools:
            plan = want.get(pool.name)
            if plan is None or plan.role != "workers":
                continue
            got_gpus = [(a.accelerator_type, a.accelerator_count) for a in pool.config.accelerators]
            want_gpus = [(plan.gpu_type, plan.gpus)] if plan.gpus else []
            if pool.config.machine_type != plan.machine_type or got_gpus != want_gpus:
                raise ConflictError(
                    f"cluster {self.name} exists with pool {pool.name} of {pool.config.machine_type} "
                    f"{got_gpus or 'without GPUs'}, but the spec asks for {plan.machine_type} "
                    f"{want_gpus or 'without GPUs'}: delete it first (rlcloud cluster delete -c {self.name}) or "
                    "use another name"
                )

    def _ensure_pools(
        self,
        cluster: Any,
        wait: bool,
        progress: ProgressCallback | None,
        deadline: float,
        allowed: builtins.list[str],
        tried: builtins.list[str],
    ) -> bool:
        """True when every pool of the spec exists and runs; otherwise take one step towards it."""
        existing = {p.name: p for p in cluster.node_pools}
        for plan in plan_pools(self.spec):
            if plan.name == GPU_POOL and self.spec.capacity:
                # a capacity ladder's GPU pool: gke/capacity.py walks it (zones, then rungs)
                ladder = self._pool_ladder(self._place_gpu_pool(allowed), allowed)
                if not ensure_laddered_pool(self, cluster, ladder, wait=wait, progress=progress, deadline=deadline):
                    return False
                continue
            pool = existing.get(plan.name)
            if pool is None and plan.name == GPU_POOL:
                # a capacity ladder's pool (gpu-pool-N) is the GPU pool to a handle without the ladder too
                pool = next((p for p in cluster.node_pools if is_gpu_pool_name(p.name) and p.config.accelerators), None)
            if pool is not None and pool.status == PoolStatus.RUNNING:
                continue
            action = f"node pool {plan.name} of cluster {self.name}"
            if pool is not None and pool.status == PoolStatus.RUNNING_WITH_ERROR:
                continue  # serving, with some nodes missing: GKE's auto-repair is the right fix, not a re-create
            if pool is not None and pool.status == PoolStatus.ERROR:
                log.warning("%s is in %s: re-creating it", action, PoolStatus(pool.status).name)
                self._delete_pool(pool.name, deadline, progress)
                return False
            if pool is not None:
                # Provisioning, reconciling or stopping: wait for whatever operation is on it.
                if not wait:
                    return True
                running = self._operations()
                if not running:
                    self._sleep_until(deadline, self.poll_interval)
                for op in running:
                    self._wait(op, deadline, progress, f"wait for {op.name} on {action}")
                return False
            pool_locations: tuple[str, ...] = self._place_gpu_pool(allowed) if plan.name == GPU_POOL else ()
            while True:
                request = build_create_node_pool_request(
                    self.spec,
                    project=self.project,
                    location=self.location,
                    pool_name=plan.name,
                    pool_locations=pool_locations,
                    gpu_driver_version=self.gpu_driver_version,
                )
                try:
                    operation = self._mutate(
                        lambda request=request: self.client.create_node_pool(request=request),  # type: ignore[misc]
                        deadline,
                        progress,
                        f"create {action}",
                    )
                except ConflictError as exc:
                    if isinstance(exc, ClusterBusyError):
                        raise
                    return False  # ALREADY_EXISTS: an earlier (retried) request landed; re-read the cluster
                if not wait:
                    return True
                finished = self._wait(operation, deadline, progress, f"create {action}")
                error = operation_error(finished, project=self.project, action=f"create {action}")
                if error is None:
                    return False
                self._delete_pool(plan.name, deadline, progress)
                if not isinstance(error, CapacityError):
                    raise error
                tried.append(getattr(error, "zone", None) or self.location)
                region = _region(self.location)
                options = [
                    z
                    for z in allowed
                    if z not in tried
                    and _region(z) == region
                    and (not error.zones_with_capacity or z in error.zones_with_capacity)
                ]
                if not options:
                    raise error
                log.warning("no capacity for %s in %s: retrying in %s", action, tried[-1], options[0])
                pool_locations = (options[0],)
        return True
