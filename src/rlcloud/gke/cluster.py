"""GkeCluster: create, find, wait for and delete one GKE cluster through the Container API.

Every call goes through a ``ClusterManagerClient`` passed in (or built from Application Default
Credentials), no gcloud or kubectl. The verbs are safe to repeat:

* ``create()`` looks before it leaps: an existing cluster is adopted, an operation already running on
  it (say, from a create that was interrupted) is waited for, a cluster left in ERROR by an earlier
  failure is deleted and made again. A stockout (ZONE_RESOURCE_POOL_EXHAUSTED) is retried in an
  allowed fallback zone that Google says has capacity.
* ``delete()`` treats "not found" as done and waits out a competing operation.
* "Cluster is running incompatible operation" (CLUSTER_ALREADY_HAS_OPERATION) is answered by waiting
  for that operation and retrying, within the caller's timeout.
"""

from __future__ import annotations

import builtins
import datetime as _dt
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from google.cloud import container_v1

from rlcloud.errors import BackendError, CapacityError, ConflictError, NotFoundError, PreflightError, RLCloudError
from rlcloud.gke.builders import (
    AUTODOWN_LABEL,
    EXPERIMENT_LABEL,
    EXPIRY_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    build_create_cluster_request,
    build_create_node_pool_request,
    cluster_path,
    location_path,
    node_pool_path,
    read_autodown_label,
    read_expiry_label,
)
from rlcloud.gke.errors import ClusterBusyError, api_errors, classify, operation_error
from rlcloud.gke.operations import ProgressCallback, wait_operation
from rlcloud.gke.plan import DEFAULT_POOL, GPU_POOL, PoolPlan, plan_pools
from rlcloud.gke.preflight import check_cluster_spec, cluster_spec_warnings
from rlcloud.gke.prices import CostEstimate, CostSoFar, estimate_cost_so_far, estimate_hourly_cost
from rlcloud.gke.zones import GpuPlacement, accelerator_zones, place_gpu_pool
from rlcloud.specs.cluster import REGION_RE, Autoscaling, ClusterSpec

__all__ = ["ClusterInfo", "GkeCluster", "GkeProject", "dedicated_cluster", "reap"]

log = logging.getLogger("rlcloud.gke")

ClusterStatus = container_v1.Cluster.Status
PoolStatus = container_v1.NodePool.Status
OpStatus = container_v1.Operation.Status
OpType = container_v1.Operation.Type
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
EMULATOR_ENV = "RLCLOUD_GKE_EMULATOR_HOST"
# A RECONCILING cluster serves its API and is handled like a running one (its pools are checked one by one).
_BUSY_STATES = {ClusterStatus.PROVISIONING, ClusterStatus.STOPPING}
# Cleanup after a failed create gets at least this long, even when the create used up its own timeout.
CLEANUP_TIMEOUT = 600.0
_T = TypeVar("_T")


def _region(location: str) -> str:
    return location if REGION_RE.match(location) else location.rsplit("-", 1)[0]


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _parse_time(text: str) -> _dt.datetime | None:
    if not text:
        return None
    try:
        return _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _reservation_of(pool: Any) -> str | None:
    affinity = pool.config.reservation_affinity if pool is not None else None
    if affinity and affinity.consume_reservation_type == container_v1.ReservationAffinity.Type.SPECIFIC_RESERVATION:
        return affinity.values[0] if affinity.values else None
    return None


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
            parts.append("ttl expired" if left <= 0 else f"ttl {_span(left)} left")
        elif EXPIRY_LABEL in self.labels:
            parts.append("ttl label unreadable")
        if self.autodown is not None:
            parts.append(f"autodown {_span(self.autodown)}")
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
        workers = next((p for p in pools if p.name == GPU_POOL), None)
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
            created=_parse_time(cluster.create_time),
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


class GkeCluster:
    """One GKE cluster described by a ClusterSpec.

    ``project``: the Google Cloud project (default: the spec's, then Application Default Credentials');
    ``credentials``: google-auth credentials (default: ``google.auth.default``, looked up lazily);
    ``container_client``: a ``container_v1.ClusterManagerClient`` (default: built from the credentials).
    ``experiment`` labels the cluster as made for that experiment. ``gpu_driver_version``: DEFAULT or LATEST,
    the GKE-installed driver of GPU nodes (None: LATEST for Hopper and newer GPUs, whose kernels the driver
    JIT-compiles, DEFAULT for the others). ``poll_interval``/``max_poll_interval``
    bound the operation polling backoff (seconds).

    On a spec with ``ttl`` or ``autodown``, ``create()`` installs the in-cluster reaper
    (:mod:`rlcloud.gke.reaper`): ``reaper_service_account`` is the Google service account it acts as and
    ``reaper_image`` the cpu runner image it runs (defaults: ``reaper_service_account`` and ``image`` of
    rlcloud.yaml). ``kube_api_client``: the cluster's Kubernetes ``ApiClient`` (default: built from the
    cluster's endpoint and the credentials).

    ``doctor``: before creating a cluster that does not exist yet, ``create()`` runs ``rlcloud doctor``'s cheap
    checks (:meth:`check_project`) and refuses with :class:`~rlcloud.errors.PreflightError` when one fails;
    False skips them. ``run_images``: the runner images runs on this cluster will pull, checked by them
    (default: rlcloud.yaml's ``image``, and ``gpu_image`` when the spec has GPUs).
    """

    def __init__(
        self,
        spec: ClusterSpec,
        project: str | None = None,
        credentials: Any = None,
        container_client: Any = None,
        *,
        gke_project: GkeProject | None = None,
        experiment: str | None = None,
        gpu_driver_version: str | None = None,
        poll_interval: float = 2.0,
        max_poll_interval: float = 20.0,
        reaper_service_account: str | None = None,
        reaper_image: str | None = None,
        kube_api_client: Any = None,
        doctor: bool = True,
        run_images: builtins.list[str] | None = None,
    ) -> None:
        self.spec = spec
        # The project's client, credentials and id; shared with the GkeProject that found this cluster.
        self.gke_project = gke_project or GkeProject(
            project or spec.project, credentials=credentials, container_client=container_client
        )
        self.experiment = experiment
        self.gpu_driver_version = gpu_driver_version
        self.poll_interval = poll_interval
        self.max_poll_interval = max_poll_interval
        # Where the cluster is (or will be): moves to a fallback zone after a stockout.
        self.location = spec.location
        self._node_locations: tuple[str, ...] = ()
        # Zones of a regional cluster's GPU pool (gke/zones.py), looked up when a GPU pool is first created.
        self._gpu_placement: GpuPlacement | None = None
        self.reaper_service_account = reaper_service_account
        self.reaper_image = reaper_image
        self._kube_api_client = kube_api_client
        #: what the latest create() did about the in-cluster reaper (one line; "" when it had nothing to do)
        self.reaper_note = ""
        #: run the doctor's cheap checks before creating a new cluster (:meth:`check_project`)
        self.doctor = doctor
        #: the images runs here pull, for those checks (None: rlcloud.yaml's)
        self.run_images = run_images
        self._project_checked = False

    # ------------------------------------------------------------------ plumbing (the project's)

    @property
    def name(self) -> str:
        """The cluster's name."""
        return self.spec.name

    @property
    def credentials(self) -> Any:
        """The google-auth credentials in use (Application Default Credentials unless given)."""
        return self.gke_project.credentials

    @property
    def project(self) -> str:
        """The Google Cloud project id (resolved from Application Default Credentials if not given)."""
        return self.gke_project.project

    @property
    def client(self) -> Any:
        """The project's ClusterManagerClient (see :attr:`GkeProject.client`)."""
        return self.gke_project.client

    @property
    def path(self) -> str:
        """``projects/P/locations/L/clusters/N``."""
        return cluster_path(self.project, self.location, self.name)

    # ------------------------------------------------------------------ existing clusters (GkeProject's verbs)

    @classmethod
    def get(
        cls,
        name: str,
        project: str | None = None,
        location: str | None = None,
        credentials: Any = None,
        container_client: Any = None,
        **options: Any,
    ) -> GkeCluster:
        """An existing cluster by name: ``GkeProject(project, ...).find(name, location)``."""
        return GkeProject(project, credentials=credentials, container_client=container_client).find(
            name, location, **options
        )

    @classmethod
    def list(
        cls,
        project: str | None = None,
        *,
        credentials: Any = None,
        container_client: Any = None,
        all_clusters: bool = False,
    ) -> builtins.list[ClusterInfo]:
        """The clusters of ``project``: ``GkeProject(project, ...).list(all_clusters=...)``."""
        return GkeProject(project, credentials=credentials, container_client=container_client).list(
            all_clusters=all_clusters
        )

    # ------------------------------------------------------------------ reading

    def _get(self, location: str) -> Any | None:
        from google.api_core import exceptions as gexc

        try:
            with api_errors(project=self.project, action=f"get cluster {self.name}"):
                try:
                    return self.client.get_cluster(name=cluster_path(self.project, location, self.name))
                except gexc.NotFound:
                    return None
        except NotFoundError:
            return None

    def _find(self, *, search_all: bool = False) -> Any | None:
        """The cluster message, wherever among its possible locations it is; None if it does not exist."""
        cluster = self._get(self.location)
        if cluster is not None:
            return cluster
        candidates = {self.location, self.spec.location, *self.spec.fallback_zones}
        if not search_all and candidates == {self.location}:
            return None
        with api_errors(project=self.project, action="list clusters"):
            response = self.client.list_clusters(parent=location_path(self.project, "-"))
        for cluster in response.clusters:
            where = cluster.location or cluster.zone
            if cluster.name == self.name and (search_all or where in candidates):
                self.location = where
                return cluster
        return None

    def info(self) -> ClusterInfo:
        """The cluster's observed state; NotFoundError if it does not exist."""
        cluster = self._find()
        if cluster is None:
            raise NotFoundError(f"GKE cluster {self.name!r} does not exist in {self.location} (project {self.project})")
        return ClusterInfo.from_cluster(cluster, self.project)

    def exists(self) -> bool:
        """True when the cluster exists (in any state)."""
        return self._find() is not None

    def estimate_cost(self) -> CostEstimate:
        """The hourly cost estimate of the spec (an estimate from a dated price table)."""
        return estimate_hourly_cost(self.spec)

    def preflight(self) -> None:
        """Check the spec against GCE's GPU rules without calling any API (raises SpecError)."""
        check_cluster_spec(self.spec)

    def check_project(self) -> builtins.list[Any]:
        """Run ``rlcloud doctor``'s cheap checks for this cluster (APIs, permissions, GPU quota for the spec,
        the runner images and whether the nodes may pull them: a few requests); return them, or raise
        :class:`~rlcloud.errors.PreflightError` listing each FAIL with its fix. Checked once per handle.

        The checks ask Google with this project's credentials, or the fake that ``RLCLOUD_GOOGLE_API_HOST``
        names (:mod:`rlcloud.gke.doctor`).
        """
        from rlcloud.config import load_project_config
        from rlcloud.gke.doctor import API_HOST_ENV, Doctor

        config = load_project_config()
        images = self.run_images
        if images is None:
            images = [i for i in (config.image, config.gpu_image if self.spec.gpus_per_node else None) if i]
        # a fake named by RLCLOUD_GOOGLE_API_HOST needs no credentials: do not look up ADC for it
        credentials = None if os.environ.get(API_HOST_ENV) else self.credentials
        doctor = Doctor(self.project, spec=self.spec, config=config, images=images, credentials=credentials)
        checks = doctor.run(cheap_only=True)
        failed = [c for c in checks if not c.ok]
        if failed:
            raise PreflightError(
                failed,
                project=self.project,
                how_to_skip="(`rlcloud doctor` runs every check; `cluster create --skip-doctor` or "
                "Cluster.gke(..., doctor=False) creates without them)",
            )
        self._project_checked = True
        return checks

    # ------------------------------------------------------------------ operations

    def _wait(self, operation: Any, deadline: float, progress: ProgressCallback | None, action: str) -> Any:
        return wait_operation(
            self.client,
            self.project,
            operation,
            deadline=deadline,
            poll_interval=self.poll_interval,
            max_poll_interval=self.max_poll_interval,
            progress=progress,
            action=action,
        )

    def _operations(self) -> builtins.list[Any]:
        """Unfinished operations on this cluster (or its node pools), oldest first."""
        with api_errors(project=self.project, action="list operations"):
            response = self.client.list_operations(parent=location_path(self.project, "-"))
        target = re.compile(rf"/clusters/{re.escape(self.name)}(?:/|$)")
        return [
            op
            for op in response.operations
            if int(op.status) != int(OpStatus.DONE)
            and target.search(op.target_link)
            and (op.location or op.zone) in (self.location, _region(self.location))
        ]

    def _wait_for_others(self, busy: ClusterBusyError, deadline: float, progress: ProgressCallback | None) -> None:
        """CLUSTER_ALREADY_HAS_OPERATION: wait for the running operation(s), whatever their outcome."""
        running = self._operations()
        if busy.operation:
            running = [op for op in running if op.name == busy.operation] or running
        if not running:
            # Finished between the refusal and our look: just pause before retrying.
            self._sleep_until(deadline, self.poll_interval)
        for op in running:
            log.info("cluster %s is busy with %s; waiting for it", self.name, op.name)
            self._wait(op, deadline, progress, f"wait for {op.name} on cluster {self.name}")

    def _sleep_until(self, deadline: float, seconds: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            from rlcloud.errors import WaitTimeoutError

            raise WaitTimeoutError(f"cluster {self.name}: timed out waiting for GKE")
        time.sleep(min(seconds, remaining))

    def _mutate(self, call: Callable[[], _T], deadline: float, progress: ProgressCallback | None, action: str) -> _T:
        """Send one mutation, waiting out CLUSTER_ALREADY_HAS_OPERATION until ``deadline``.

        Transient failures (UNAVAILABLE, DEADLINE_EXCEEDED: the request may or may not have landed) are
        retried with backoff: the Container API's mutations have no default retry, and a repeat is safe
        here because a duplicate create answers ALREADY_EXISTS and a duplicate delete NOT_FOUND, which
        the callers treat as success.
        """
        from google.api_core import exceptions as gexc

        pause = self.poll_interval
        while True:
            try:
                with api_errors(project=self.project, action=action):
                    return call()
            except ClusterBusyError as busy:
                self._wait_for_others(busy, deadline, progress)
            except BackendError as exc:
                if not isinstance(exc.__cause__, gexc.ServiceUnavailable | gexc.DeadlineExceeded):
                    raise
                log.warning("%s: transient error (%s), retrying", action, type(exc.__cause__).__name__)
                self._sleep_until(deadline, pause)
                pause = min(pause * 2, self.max_poll_interval)

    # ------------------------------------------------------------------ create

    def create(
        self,
        wait: bool = True,
        progress: ProgressCallback | None = None,
        timeout: float = 1800.0,
        *,
        fallback_zones: builtins.list[str] | None = None,
        delete_on_failure: bool = False,
    ) -> ClusterInfo:
        """Create the cluster (a default CPU pool, plus a GPU pool when the spec has GPUs); return its state.

        Idempotent: an existing cluster is adopted (pools it lacks are added), an operation in flight
        is waited for, an ERROR cluster from an earlier failure is replaced. ``wait=False`` returns
        once the create request is accepted (state PROVISIONING). On a stockout the cluster moves to
        the first allowed zone (``fallback_zones``, default ``spec.fallback_zones``) that Google reports
        as having capacity; without one, CapacityError names those zones. ``timeout`` bounds the whole
        call (seconds). ``delete_on_failure``: any failure or interrupt (KeyboardInterrupt included)
        deletes whatever was made — for dedicated clusters. Before a new cluster is created, the doctor's cheap
        checks run (:meth:`check_project`, unless ``doctor`` is False): a failed one raises PreflightError and
        nothing is created.
        """
        check_cluster_spec(self.spec)
        for warning in cluster_spec_warnings(self.spec):
            log.warning("cluster %s: %s", self.name, warning)
        allowed = list(self.spec.fallback_zones if fallback_zones is None else fallback_zones)
        deadline = time.monotonic() + timeout
        try:
            info = self._create(wait, progress, deadline, allowed)
        except PreflightError:
            raise  # refused before anything was made: nothing to delete
        except BaseException:
            if delete_on_failure:
                log.warning("creating cluster %s failed or was interrupted: deleting what was made", self.name)
                self._delete_after_failure(progress)
            raise
        if wait and (self.spec.ttl is not None or self.spec.autodown is not None):
            self.reaper_note = self.install_reaper()
        return info

    def install_reaper(self) -> str:
        """Install (or update) the in-cluster reaper that deletes this cluster when its ttl or autodown is due.

        Never raises: a cluster without the reaper's identity or image set up, or one whose API refuses,
        keeps today's behaviour (``rlcloud cluster reap`` acts on the expiry label) and the returned line,
        also logged as a warning, says what is missing and how to fix it.
        """
        from rlcloud.config import load_project_config

        try:
            config = load_project_config()
            account = self.reaper_service_account or config.reaper_service_account
            image = self.reaper_image or config.image
        except RLCloudError as exc:
            account = image = None
            log.debug("rlcloud.yaml unreadable for the reaper: %s", exc)
        fallback = "its ttl is enforced only by `rlcloud cluster reap`, autodown not at all"
        if not account:
            note = (
                f"cluster {self.name}: no in-cluster reaper ({fallback}): create the reaper's service account "
                "(docs/gke-setup.md#7-teardown-inside-the-cluster) and add `reaper_service_account: "
                f"rlcloud-reaper@{self.project}.iam.gserviceaccount.com` to rlcloud.yaml"
            )
        elif not image:
            note = (
                f"cluster {self.name}: no in-cluster reaper ({fallback}): no runner image to run it in: add "
                "`image: <your cpu runner image>` to rlcloud.yaml (docs/images.md)"
            )
        else:
            from rlcloud.k8s.reaper_install import install_reaper

            try:
                api = self._kube_api_client or self.kube_client()
                install_reaper(api, image=image, gcp_service_account=account)
            except Exception as exc:  # the create succeeded: a reaper problem must never undo or fail it
                note = f"cluster {self.name}: the in-cluster reaper could not be installed ({fallback}): {exc}"
            else:
                return f"cluster {self.name}: in-cluster reaper installed (namespace rlcloud-system, every 5 minutes)"
        log.warning("%s", note)
        return note

    def wait(self, timeout: float = 1800.0, progress: ProgressCallback | None = None) -> ClusterInfo:
        """Wait until the cluster (e.g. after ``create(wait=False)``) is running with all its pools.

        The same as ``create(wait=True)``: it attaches to whatever is in flight and finishes the job.
        """
        return self.create(wait=True, progress=progress, timeout=timeout)

    def _delete_after_failure(self, progress: ProgressCallback | None) -> None:
        try:
            self.delete(wait=True, progress=progress)
        except KeyboardInterrupt:
            # A second Ctrl-C: at least get the delete request in, without waiting for it.
            self.delete(wait=False)
            raise
        except RLCloudError as exc:
            log.error("could not delete cluster %s after a failed create: %s", self.name, exc)

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
            pool = existing.get(plan.name)
            if pool is not None and pool.status == PoolStatus.RUNNING:
                continue
            action = f"node pool {plan.name} of cluster {self.name}"
            if pool is not None and pool.status == PoolStatus.RUNNING_WITH_ERROR:
                continue  # serving, with some nodes missing: GKE's auto-repair is the right fix, not a re-create
            if pool is not None and pool.status == PoolStatus.ERROR:
                log.warning("%s is in %s: re-creating it", action, PoolStatus(pool.status).name)
                self._delete_pool(plan.name, deadline, progress)
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

    def _delete_pool(self, pool: str, deadline: float, progress: ProgressCallback | None) -> None:
        from google.api_core import exceptions as gexc

        name = node_pool_path(self.project, self.location, self.name, pool)
        action = f"delete node pool {pool} of cluster {self.name}"
        try:
            operation = self._mutate(lambda: self.client.delete_node_pool(name=name), deadline, progress, action)
        except NotFoundError:
            return
        except gexc.NotFound:  # pragma: no cover - api_errors translates it
            return
        self._wait(operation, deadline, progress, action)

    # ------------------------------------------------------------------ delete

    def delete(self, wait: bool = True, progress: ProgressCallback | None = None, timeout: float = 1200.0) -> None:
        """Delete the cluster. Idempotent: a cluster that does not exist (any more) counts as deleted.

        Waits out operations running on the cluster (CLUSTER_ALREADY_HAS_OPERATION) before deleting.
        ``wait=False`` returns once GKE accepted the delete.
        """
        deadline = time.monotonic() + timeout
        while True:
            cluster = self._find()
            if cluster is None:
                return
            if cluster.status == ClusterStatus.STOPPING:
                deleting = [op for op in self._operations() if int(op.operation_type) == int(OpType.DELETE_CLUSTER)]
                if not wait:
                    return
                if not deleting:
                    self._sleep_until(deadline, self.poll_interval)
                for op in deleting:
                    self._wait(op, deadline, progress, f"delete cluster {self.name}")
                continue
            log.info("deleting GKE cluster %s in %s (project %s)", self.name, self.location, self.project)
            try:
                operation = self._mutate(
                    lambda: self.client.delete_cluster(name=self.path),
                    deadline,
                    progress,
                    f"delete cluster {self.name}",
                )
            except NotFoundError:
                return
            if not wait:
                return
            finished = self._wait(operation, deadline, progress, f"delete cluster {self.name}")
            error = operation_error(finished, project=self.project, action=f"delete cluster {self.name}")
            if error is not None:
                raise error

    # ------------------------------------------------------------------ access

    def _running_cluster(self) -> Any:
        cluster = self._find()
        if cluster is None:
            raise NotFoundError(f"GKE cluster {self.name!r} does not exist in {self.location} (project {self.project})")
        if not cluster.endpoint or not cluster.master_auth.cluster_ca_certificate:
            raise NotFoundError(
                f"GKE cluster {self.name} is {ClusterStatus(cluster.status).name} and has no endpoint yet: "
                "wait for create() to finish"
            )
        return cluster

    def kube_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` for this cluster: its endpoint, CA and a self-refreshing token
        (the ``kube_api_client`` given, if any)."""
        from rlcloud.gke.kube import build_kube_client

        if self._kube_api_client is not None:
            return self._kube_api_client
        cluster = self._running_cluster()
        return build_kube_client(cluster.endpoint, cluster.master_auth.cluster_ca_certificate, self.credentials)

    @property
    def context_name(self) -> str:
        """The kubeconfig context name, as gcloud names it: gke_PROJECT_LOCATION_NAME."""
        return f"gke_{self.project}_{self.location}_{self.name}"

    def write_kubeconfig(self, path: str | Path | None = None, *, set_current: bool = True) -> Path:
        """Add this cluster to a kubeconfig (default $KUBECONFIG or ~/.kube/config) for kubectl.

        kubectl authenticates with gke-gcloud-auth-plugin; the file holds no token.
        """
        from rlcloud.gke.kube import write_kubeconfig

        cluster = self._running_cluster()
        target = path or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config"
        return write_kubeconfig(
            target,
            self.context_name,
            cluster.endpoint,
            cluster.master_auth.cluster_ca_certificate,
            set_current=set_current,
        )


@contextmanager
def dedicated_cluster(
    spec: ClusterSpec,
    project: str | None = None,
    credentials: Any = None,
    container_client: Any = None,
    *,
    experiment: str | None = None,
    progress: ProgressCallback | None = None,
    timeout: float = 1800.0,
    **options: Any,
) -> Iterator[GkeCluster]:
    """A cluster that exists only inside the ``with`` block: created on entry, deleted on exit.

    Deletion is guaranteed on every way out: normal exit, an exception, KeyboardInterrupt during the
    create's polling (the half-made cluster is deleted), or inside the block.
    """
    cluster = GkeCluster(
        spec,
        project=project,
        credentials=credentials,
        container_client=container_client,
        experiment=experiment,
        **options,
    )
    cluster.create(wait=True, progress=progress, timeout=timeout, delete_on_failure=True)
    try:
        yield cluster
    except BaseException:
        cluster._delete_after_failure(progress)  # logs a failed delete rather than hiding the original error
        raise
    cluster.delete(wait=True, progress=progress)


def reap(
    project: str | None = None,
    *,
    now: float | None = None,
    credentials: Any = None,
    container_client: Any = None,
    dry_run: bool = False,
    wait: bool = True,
    progress: ProgressCallback | None = None,
    poll_interval: float = 2.0,
) -> list[ClusterInfo]:
    """Delete every rlcloud-managed cluster of ``project`` whose expiry lies before ``now``: see
    :meth:`GkeProject.reap`."""
    return GkeProject(project, credentials=credentials, container_client=container_client).reap(
        now=now, dry_run=dry_run, wait=wait, progress=progress, poll_interval=poll_interval
    )


class GkeProject:
    """The GKE side of one Google Cloud project: its credentials, its Container API client, and the verbs
    that act across its clusters (list, find one by name, reap the expired).

    ``project``: the project id (default: Application Default Credentials'); ``credentials``:
    google-auth credentials (default: ``google.auth.default``, looked up lazily); ``container_client``: a
    ``container_v1.ClusterManagerClient`` (default: built from the credentials on first use). One client
    serves every cluster handle this object makes.
    """

    def __init__(self, project: str | None = None, *, credentials: Any = None, container_client: Any = None) -> None:
        self._project = project
        self._credentials = credentials
        self._client = container_client

    def __repr__(self) -> str:
        return f"GkeProject({self._project or '(default)'})"

    def _default_credentials(self) -> tuple[Any, str | None]:
        import google.auth

        with api_errors(action="find Google credentials"):
            credentials, project = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
        return credentials, project

    @property
    def credentials(self) -> Any:
        """The google-auth credentials in use (Application Default Credentials unless given)."""
        if self._credentials is None:
            self._credentials, found = self._default_credentials()
            self._project = self._project or found
        return self._credentials

    @property
    def project(self) -> str:
        """The Google Cloud project id (resolved from Application Default Credentials if not given)."""
        if not self._project:
            if self._credentials is None:
                _ = self.credentials
            if not self._project:
                from rlcloud.errors import AuthError

                raise AuthError(
                    "no Google Cloud project given and none found in Application Default Credentials: pass "
                    "project=..., set it in the cluster spec, or run `gcloud config set project PROJECT`"
                )
        assert self._project is not None
        return self._project

    @property
    def client(self) -> Any:
        """The ClusterManagerClient in use (built on first use when none was given).

        With ``RLCLOUD_GKE_EMULATOR_HOST=host:port`` set (like ``STORAGE_EMULATOR_HOST`` for Cloud Storage)
        it talks plain gRPC to a local ClusterManager fake instead of Google, and needs no credentials.
        """
        if self._client is None:
            emulator = os.environ.get(EMULATOR_ENV)
            if emulator:
                import grpc
                from google.cloud.container_v1.services.cluster_manager.transports import ClusterManagerGrpcTransport

                transport = ClusterManagerGrpcTransport(channel=grpc.insecure_channel(emulator))
                self._client = container_v1.ClusterManagerClient(transport=transport)
            else:
                self._client = container_v1.ClusterManagerClient(credentials=self.credentials)
        return self._client

    def _clusters(self) -> builtins.list[Any]:
        with api_errors(project=self.project, action="list clusters"):
            response = self.client.list_clusters(parent=location_path(self.project, "-"))
        return builtins.list(response.clusters)

    def list(self, *, all_clusters: bool = False) -> builtins.list[ClusterInfo]:
        """The clusters of the project in every location: rlcloud's (label managed-by=rlcloud), or all."""
        infos = [ClusterInfo.from_cluster(c, self.project) for c in self._clusters()]
        infos = [i for i in infos if all_clusters or i.managed]
        for info in infos:
            for problem in info.problems:
                log.warning("cluster %s in %s: %s", info.name, info.location, problem)
        return infos

    def cluster(self, spec: ClusterSpec, **options: Any) -> GkeCluster:
        """A handle of the cluster ``spec`` describes, sharing this project's client (nothing is called)."""
        return GkeCluster(spec, gke_project=self, **options)

    def find(self, name: str, location: str | None = None, **options: Any) -> GkeCluster:
        """An existing cluster by name, its spec read back from the cluster (``location`` None: searched in
        every location of the project). NotFoundError when there is none."""
        from google.api_core import exceptions as gexc

        found = None
        if location is not None:
            try:
                with api_errors(project=self.project, action=f"get cluster {name}"):
                    try:
                        found = self.client.get_cluster(name=cluster_path(self.project, location, name))
                    except gexc.NotFound:
                        found = None
            except NotFoundError:
                found = None
        else:
            found = next((c for c in self._clusters() if c.name == name), None)
        if found is None:
            where = f" in {location}" if location else ""
            raise NotFoundError(f"no GKE cluster named {name!r}{where} in project {self.project}")
        info = ClusterInfo.from_cluster(found, self.project)
        try:
            spec = info.to_spec()
        except ValueError:
            # Made outside rlcloud with something ClusterSpec does not model (an accelerator type newer than
            # GpuType, say): name and location are all that is needed to use or delete it.
            spec = ClusterSpec(name=info.name, location=info.location, project=info.project)
        cluster = self.cluster(spec, experiment=info.experiment, **options)
        cluster.location = info.location
        return cluster

    def reap(
        self,
        *,
        now: float | None = None,
        dry_run: bool = False,
        wait: bool = True,
        progress: ProgressCallback | None = None,
        poll_interval: float = 2.0,
    ) -> builtins.list[ClusterInfo]:
        """Delete every rlcloud-managed cluster whose expiry label lies before ``now``; return what it
        deleted. Clusters without the managed-by=rlcloud label, or without an expiry, are never touched.
        A cluster whose expiry label cannot be read (milliseconds, words...) is never deleted by it: the
        listing warns about it and the other clusters are reaped as usual.
        ``dry_run``: return what would be deleted, delete nothing."""
        expired = [i for i in self.list() if i.managed and i.expired(now)]
        if dry_run:
            return expired
        failed: builtins.list[str] = []
        for info in expired:
            log.info("reaping cluster %s in %s (expired %s)", info.name, info.location, info.expiry)
            spec = ClusterSpec(name=info.name, location=info.location)
            try:
                self.cluster(spec, poll_interval=poll_interval).delete(wait=wait, progress=progress)
            except RLCloudError as exc:  # one cluster that cannot be deleted never keeps the others billing
                log.error("could not delete expired cluster %s in %s: %s", info.name, info.location, exc)
                failed.append(f"{info.name} ({exc})")
        if failed:
            raise BackendError(
                f"could not delete {len(failed)} of {len(expired)} expired cluster(s): {'; '.join(failed)}; the "
                "others were deleted"
            )
        return expired
