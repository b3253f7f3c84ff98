"""GkeCluster: create, find, wait for and delete one GKE cluster through the Container API.

Every call goes through a ``ClusterManagerClient`` passed in (or built from Application Default
Credentials), no gcloud or kubectl. The verbs are safe to repeat:

* ``create()`` looks before it leaps (:mod:`rlcloud.gke.create`, the create path this handle owns).
* ``delete()`` treats "not found" as done and waits out a competing operation.
* "Cluster is running incompatible operation" (CLUSTER_ALREADY_HAS_OPERATION) is answered by waiting
  for that operation and retrying, within the caller's timeout.
"""

from __future__ import annotations

import builtins
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from google.cloud import container_v1

from rlcloud.config import ProjectConfig
from rlcloud.errors import BackendError, NotFoundError, PreflightError, RLCloudError
from rlcloud.gke.builders import (
    cluster_path,
    location_path,
    node_pool_path,
)
from rlcloud.gke.capacity import CapacityMove
from rlcloud.gke.create import ClusterCreation
from rlcloud.gke.errors import ClusterBusyError, api_errors, operation_error
from rlcloud.gke.info import ClusterInfo
from rlcloud.gke.operations import ProgressCallback, wait_operation
from rlcloud.gke.preflight import check_cluster_spec
from rlcloud.gke.prices import CostEstimate, estimate_hourly_cost
from rlcloud.gke.project import GkeProject
from rlcloud.gke.reaper_setup import BudgetScope, install_reaper
from rlcloud.gke.zones import region_of
from rlcloud.specs.cluster import ClusterSpec
from rlcloud.waiting import Backoff, sleep_until

if TYPE_CHECKING:
    from rlcloud.gke.doctor import Doctor

__all__ = ["GkeCluster", "dedicated_cluster", "find", "reap"]

log = logging.getLogger("rlcloud.gke")

ClusterStatus = container_v1.Cluster.Status
PoolStatus = container_v1.NodePool.Status
OpStatus = container_v1.Operation.Status
OpType = container_v1.Operation.Type
_T = TypeVar("_T")


class GkeCluster:
    """One GKE cluster described by a ClusterSpec.

    ``project``: the Google Cloud project (default: the spec's, then Application Default Credentials');
    ``credentials``: google-auth credentials (default: ``google.auth.default``, looked up lazily);
    ``container_client``: a ``container_v1.ClusterManagerClient`` (default: built from the credentials);
    ``gke_project``: a :class:`~rlcloud.gke.project.GkeProject` to share instead (its client, credentials, id).
    ``location``: where the cluster is, when found elsewhere than the spec's (a fallback zone).
    ``experiment`` labels the cluster as made for that experiment. ``gpu_driver_version``: DEFAULT or LATEST,
    the GKE-installed driver of GPU nodes (None: LATEST for Hopper and newer GPUs, whose kernels the driver
    JIT-compiles, DEFAULT for the others). ``poll_interval``/``max_poll_interval``
    bound the operation polling backoff (seconds).

    ``config``: the project's settings (rlcloud.yaml, as :class:`rlcloud.Cluster` read it; None: none): the
    handle never reads rlcloud.yaml itself. On a spec with ``ttl`` or ``autodown``, ``create()`` installs the
    in-cluster reaper (:mod:`rlcloud.gke.reaper`): ``reaper_service_account`` is the Google service account it acts
    as and ``reaper_image`` the cpu runner image it runs (defaults: ``reaper_service_account`` and ``image`` of
    ``config``). ``kube_api_client``: the cluster's Kubernetes ``ApiClient`` (default: built from the cluster's
    endpoint and the credentials).

    ``doctor``: before creating a cluster that does not exist yet, ``create()`` runs ``rlcloud doctor``'s cheap
    checks (:meth:`check_project`) and refuses with :class:`~rlcloud.errors.PreflightError` when one fails;
    False skips them. ``run_images``: the runner images runs on this cluster will pull, checked by them
    (default: ``config``'s ``image``, and ``gpu_image`` when the spec has GPUs).
    """

    def __init__(
        self,
        spec: ClusterSpec,
        project: str | None = None,
        credentials: Any = None,
        container_client: Any = None,
        *,
        gke_project: GkeProject | None = None,
        location: str | None = None,
        experiment: str | None = None,
        gpu_driver_version: str | None = None,
        poll_interval: float = 2.0,
        max_poll_interval: float = 20.0,
        reaper_service_account: str | None = None,
        reaper_image: str | None = None,
        kube_api_client: Any = None,
        doctor: bool = True,
        run_images: builtins.list[str] | None = None,
        config: ProjectConfig | None = None,
    ) -> None:
        self.spec = spec
        #: the project's settings, handed down by the facade
        self.config = config or ProjectConfig()
        # The project's client, credentials and id; shared with the GkeProject this handle was made from.
        self.gke_project = gke_project or GkeProject(
            project or spec.project, credentials=credentials, container_client=container_client
        )
        self.experiment = experiment
        self.gpu_driver_version = gpu_driver_version
        self.poll_interval = poll_interval
        self.max_poll_interval = max_poll_interval
        # Where the cluster is (or will be): moves to a fallback zone after a stockout.
        self.location = location or spec.location
        # The create path and what it learnt (GPU pool zones, capacity ladder, pinned node locations).
        self._creation = ClusterCreation(self)
        self.reaper_service_account = reaper_service_account or self.config.reaper_service_account
        self.reaper_image = reaper_image or self.config.image
        self._kube_api_client = kube_api_client
        #: what the latest create() did about the in-cluster reaper (one line; "" when it had nothing to do)
        self.reaper_note = ""
        #: run the doctor's cheap checks before creating a new cluster (:meth:`check_project`)
        self.doctor = doctor
        #: the images runs here pull, for those checks (None: the config's)
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

    def checkup(
        self,
        results: str | None = None,
        *,
        namespace: str = "rlcloud",
        images: builtins.list[str] | None = None,
        credentials: Any = None,
    ) -> Doctor:
        """The doctor of this cluster (:func:`rlcloud.gke.doctor.doctor_for`, as ``rlcloud doctor``'s): its
        project, spec and settings (with this handle's reaper identity); ``results`` names the bucket it checks
        when it is ``gs://...``; ``images``: the runner images (None: the settings'); the
        ``credentials`` given, else those known to the project, else Application Default Credentials on first use.
        """
        from rlcloud.gke.doctor import doctor_for

        # this cluster's reaper identity is the one its checks are about
        config = self.config.model_copy(update={"reaper_service_account": self.reaper_service_account})
        return doctor_for(
            self.project,
            results,
            spec=self.spec,
            config=config,
            images=images,
            namespace=namespace,
            credentials=credentials if credentials is not None else self.gke_project.known_credentials,
        )

    def check_project(self) -> builtins.list[Any]:
        """Run ``rlcloud doctor``'s cheap checks for this cluster (APIs, permissions, GPU quota for the spec,
        the runner images and whether the nodes may pull them: a few requests); return them, or raise
        :class:`~rlcloud.errors.PreflightError` listing each FAIL with its fix. Checked once per handle.

        The checks ask Google with this project's credentials, or the fake that ``RLCLOUD_GOOGLE_API_HOST``
        names (:mod:`rlcloud.gke.doctor`).
        """
        from rlcloud.gke.doctor import API_HOST_ENV

        images = self.run_images
        if images is None:
            config = self.config
            images = [i for i in (config.image, config.gpu_image if self.spec.gpus_per_node else None) if i]
        # a fake named by RLCLOUD_GOOGLE_API_HOST needs no credentials: do not look up ADC for it
        credentials = None if os.environ.get(API_HOST_ENV) else self.credentials
        doctor = self.checkup(images=images, credentials=credentials)
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
            and (op.location or op.zone) in (self.location, region_of(self.location))
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

    def wait_running(self, on: str, *, wait: bool, deadline: float, progress: ProgressCallback | None) -> bool:
        """Something (``on``, e.g. a node pool) is provisioning, reconciling or stopping: wait for the operations
        running on this cluster and return False (look again), or return True at once when ``wait`` is off."""
        if not wait:
            return True
        running = self._operations()
        if not running:  # ended between the look and now: pause before looking again
            self._sleep_until(deadline, self.poll_interval)
        for op in running:
            self._wait(op, deadline, progress, f"wait for {op.name} on {on}")
        return False

    def _sleep_until(self, deadline: float, seconds: float) -> None:
        if not sleep_until(deadline, seconds):
            from rlcloud.errors import WaitTimeoutError

            raise WaitTimeoutError(f"cluster {self.name}: timed out waiting for GKE")

    def _mutate(self, call: Callable[[], _T], deadline: float, progress: ProgressCallback | None, action: str) -> _T:
        """Send one mutation, waiting out CLUSTER_ALREADY_HAS_OPERATION until ``deadline``.

        Transient failures (UNAVAILABLE, DEADLINE_EXCEEDED: the request may or may not have landed) are
        retried with backoff: the Container API's mutations have no default retry, and a repeat is safe
        here because a duplicate create answers ALREADY_EXISTS and a duplicate delete NOT_FOUND, which
        the callers treat as success.
        """
        from google.api_core import exceptions as gexc

        pauses = Backoff(self.poll_interval, self.max_poll_interval).pauses()
        while True:
            try:
                with api_errors(project=self.project, action=action):
                    return call()
            except ClusterBusyError as busy:
                # not a pause but a wait for the other operation, however long it takes (within deadline)
                self._wait_for_others(busy, deadline, progress)
            except BackendError as exc:
                if not isinstance(exc.__cause__, gexc.ServiceUnavailable | gexc.DeadlineExceeded):
                    raise
                log.warning("%s: transient error (%s), retrying", action, type(exc.__cause__).__name__)
                self._sleep_until(deadline, next(pauses))

    # ------------------------------------------------------------------ create

    def create(
        self,
        wait: bool = True,
        progress: ProgressCallback | None = None,
        timeout: float = 1800.0,
        *,
        fallback_zones: builtins.list[str] | None = None,
        delete_on_failure: bool = False,
        run_images: builtins.list[str] | None = None,
        experiment: str | None = None,
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
        nothing is created. ``run_images``: the images the runs about to start will pull (for those checks;
        default the handle's). ``experiment``: label a cluster without one as made for that experiment.
        """
        if run_images is not None:
            self.run_images = run_images
        if experiment is not None and self.experiment is None:
            self.experiment = experiment
        return self._creation.run(
            wait=wait,
            progress=progress,
            timeout=timeout,
            fallback_zones=fallback_zones,
            delete_on_failure=delete_on_failure,
        )

    @property
    def capacity_moves(self) -> builtins.list[CapacityMove]:
        """The capacity ladder's moves of the GPU pool made by this handle, oldest first."""
        ladder = self._creation.ladder
        return list(ladder.moves) if ladder else []

    def install_reaper(self, *, run_image: str | None = None, required: BudgetScope | None = None) -> str:
        """Install (or update) the in-cluster reaper that deletes this cluster when its ttl or autodown is due and
        enforces budgets (:func:`rlcloud.gke.reaper_setup.install_reaper`); the returned line (also
        :attr:`reaper_note`) says what it did. ``required``: a budget of runs (``runs``) or of the cluster
        (``cluster``) depends on it: BackendError when it cannot be installed; otherwise it never raises.
        ``run_image``: the image of the run about to start (the reaper runs in it when nothing else is set)."""
        self.reaper_note = install_reaper(self, run_image=run_image, required=required)
        return self.reaper_note

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


def find(gke_project: GkeProject, name: str, location: str | None = None, **options: Any) -> GkeCluster:
    """The handle of an existing cluster by name, its spec read back from the cluster (``location`` None:
    searched in every location of the project). NotFoundError when there is none. ``options`` go to
    :class:`GkeCluster`."""
    info = gke_project.lookup(name, location)
    try:
        spec = info.to_spec()
    except ValueError:
        # Made outside rlcloud with something ClusterSpec does not model (an accelerator type newer than
        # GpuType, say): name and location are all that is needed to use or delete it.
        spec = ClusterSpec(name=info.name, location=info.location, project=info.project)
    return GkeCluster(spec, gke_project=gke_project, experiment=info.experiment, location=info.location, **options)


def reap(
    project: str | None = None,
    *,
    now: float | None = None,
    credentials: Any = None,
    container_client: Any = None,
    gke_project: GkeProject | None = None,
    dry_run: bool = False,
    wait: bool = True,
    progress: ProgressCallback | None = None,
    poll_interval: float = 2.0,
) -> builtins.list[ClusterInfo]:
    """Delete every rlcloud-managed cluster of ``project`` (or ``gke_project``) whose expiry label lies before
    ``now``; return what it deleted. Clusters without the managed-by=rlcloud label, or without an expiry, are
    never touched. A cluster whose expiry label cannot be read (milliseconds, words...) is never deleted by
    it: the listing warns about it and the other clusters are reaped as usual.
    ``dry_run``: return what would be deleted, delete nothing."""
    gke_project = gke_project or GkeProject(project, credentials=credentials, container_client=container_client)
    expired = gke_project.expired(now)
    if dry_run:
        return expired
    failed: builtins.list[str] = []
    for info in expired:
        log.info("reaping cluster %s in %s (expired %s)", info.name, info.location, info.expiry)
        spec = ClusterSpec(name=info.name, location=info.location)
        try:
            GkeCluster(spec, gke_project=gke_project, poll_interval=poll_interval).delete(wait=wait, progress=progress)
        except RLCloudError as exc:  # one cluster that cannot be deleted never keeps the others billing
            log.error("could not delete expired cluster %s in %s: %s", info.name, info.location, exc)
            failed.append(f"{info.name} ({exc})")
    if failed:
        raise BackendError(
            f"could not delete {len(failed)} of {len(expired)} expired cluster(s): {'; '.join(failed)}; the "
            "others were deleted"
        )
    return expired
