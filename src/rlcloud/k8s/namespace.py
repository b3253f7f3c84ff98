"""One namespace of one Kubernetes cluster: the client, the settings pods run with, and what both halves of
:class:`~rlcloud.k8s.backend.KubernetesBackend` need (the namespace's objects, the server's version, a results
store, the Job suspend switch).

The experiment verbs (:mod:`rlcloud.k8s.backend`) and the sweep verbs (:mod:`rlcloud.k8s.sweeps`) derive from
:class:`KubernetesNamespace`; it holds no verb of the backend contract itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kubernetes import client as k8s

from rlcloud.errors import AuthError, RLCloudError, SpecError, SpecProblem
from rlcloud.k8s.applier import Applier, RetryPolicy, path_for, translate
from rlcloud.k8s.builders import LEARNER_GRACE_SECONDS, RUNNER_SERVICE_ACCOUNT, WORKLOAD_IDENTITY_ANNOTATION
from rlcloud.k8s.namespace_builders import build_namespace_objects
from rlcloud.k8s.status import get
from rlcloud.results import is_gcs, results_location

if TYPE_CHECKING:
    from rlcloud.layout import ProgressRecord
    from rlcloud.specs.sweep import SweepSpec
    from rlcloud.storage import Store

__all__ = ["DEFAULT_NAMESPACE", "KubernetesNamespace"]

logger = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "rlcloud"


class KubernetesNamespace:
    """The client, the namespace and the pods' settings of a :class:`~rlcloud.k8s.backend.KubernetesBackend`
    (whose docstring describes the arguments), and the helpers its experiment and sweep verbs share."""

    kind = "kubernetes"

    def __init__(
        self,
        api_client: k8s.ApiClient | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        image: str | None = None,
        gpu_type: str | None = None,
        service_account: str = RUNNER_SERVICE_ACCOUNT,
        gcp_service_account: str | None = None,
        credentials_secret: str | None = None,
        kubernetes_version: str | None = None,
        store_opener: Callable[[str], Store] | None = None,
        retry: RetryPolicy | None = None,
        poll_interval: float = 2.0,
        pause_timeout: float = LEARNER_GRACE_SECONDS + 120.0,
        stop_timeout: float = LEARNER_GRACE_SECONDS + 60.0,
        local_results: bool = False,
        queue: str | None = None,
        env_server_image: str | None = None,
        warm_trials: bool = False,
    ) -> None:
        if api_client is None:
            from rlcloud.k8s.client import api_client_from_kubeconfig

            api_client = api_client_from_kubeconfig()
        self.api_client = api_client
        self.namespace = namespace
        self.image = image
        self.env_server_image = env_server_image
        self.gpu_type = gpu_type
        self.service_account = service_account
        self.gcp_service_account = gcp_service_account
        self.credentials_secret = credentials_secret
        self.poll_interval = poll_interval
        #: wait() watches the Jobs for this long before it reads the whole status again
        self.watch_window = max(poll_interval, 10.0)
        self.pause_timeout = pause_timeout
        self.stop_timeout = stop_timeout
        self.local_results = local_results
        self.applier = Applier(api_client, retry)
        self._kubernetes_version = kubernetes_version
        self._namespace_ready = False
        self._results: dict[str, str] = {}
        self._stores: dict[str, Store] = {}
        self._store_opener = store_opener
        #: the Kueue LocalQueue sweeps are submitted to (None: no Kueue)
        self.queue = queue
        #: a sweep's pods each run several trials in turn (rlcloud.k8s.warm), when it has more than max_parallel
        self.warm_trials = warm_trials
        self._sweep_configs: dict[str, tuple[str, SweepSpec, str]] = {}  # name -> (config hash, spec, root)
        self._sweep_stores: dict[str, Store] = {}
        self._sweep_notes: dict[str, dict[str, str]] = {}  # name -> its ConfigMap's annotations, last read
        self._finished_progress: dict[tuple[str, str], ProgressRecord] = {}  # (sweep, trial) -> progress

    def kubernetes_version(self) -> str:
        """The cluster's MAJOR.MINOR (asked once; "1.29" when the server will not say)."""
        if self._kubernetes_version is None:
            try:
                info = self.applier.version()
                minor = "".join(ch for ch in str(info.get("minor")) if ch.isdigit())
                self._kubernetes_version = f"{int(info.get('major', 1))}.{int(minor)}"
            except (RLCloudError, ValueError) as exc:  # odd servers: assume the oldest version we support
                logger.debug("cannot read the server version (%s); assuming 1.29", exc)
                self._kubernetes_version = "1.29"
        return self._kubernetes_version

    def ensure_namespace(self) -> None:
        """Create the namespace with the runner's ServiceAccount, Role and RoleBinding when missing."""
        if self._namespace_ready:
            return
        objs = build_namespace_objects(
            self.namespace, service_account=self.service_account, gcp_service_account=self.gcp_service_account
        )
        if self.applier.read("Namespace", self.namespace) is None:
            todo = objs
        else:
            sa = self.applier.read("ServiceAccount", self.service_account, self.namespace)
            todo = [] if sa is not None else objs[1:]
            wanted = self.gcp_service_account
            have = (get(sa, "metadata", "annotations") or {}).get(WORKLOAD_IDENTITY_ANNOTATION)
            if sa is not None and wanted and have != wanted:
                self.applier.patch(
                    "ServiceAccount",
                    self.service_account,
                    self.namespace,
                    {"metadata": {"annotations": {WORKLOAD_IDENTITY_ANNOTATION: wanted}}},
                    what=f"annotate ServiceAccount {self.service_account}",
                )
        for obj in todo:
            try:
                self.applier.create(obj, compare=False)
            except AuthError as exc:
                if obj.kind not in ("Role", "RoleBinding"):
                    raise
                # granting RBAC needs more rights than running Jobs; the pods do not call the API, so
                # an experiment runs without it
                logger.warning("could not create %s %s (%s); continuing without it", obj.kind, obj.metadata.name, exc)
        self._namespace_ready = True

    def install_credentials(self, key_json: bytes | str, *, name: str = "rlcloud-gcp-key") -> str:
        """Store a Google service-account key file in a Secret of the namespace (created or replaced) and
        make the pods of experiments started from now on mount it (``GOOGLE_APPLICATION_CREDENTIALS``
        holds the file's path, never the key). For clusters without Workload Identity. Returns the
        Secret's name. The key is never logged."""
        from rlcloud.k8s.namespace_builders import build_credentials_secret

        self.ensure_namespace()
        secret = build_credentials_secret(self.namespace, key_json, name=name)
        what = f"store credentials in Secret {name}"
        try:
            self.applier.request_json(what, "POST", path_for("Secret", self.namespace), body=secret)
        except k8s.ApiException as exc:
            if exc.status != 409:
                raise translate(exc, what) from None  # the request body holds the key: no chained context
            try:
                self.applier.request_json(what, "PUT", path_for("Secret", self.namespace, name), body=secret)
            except Exception as exc2:
                raise translate(exc2, what) from None
        self.credentials_secret = name
        return name

    def _open_store(self, root: str | None, name: str) -> Store | None:
        """The store at ``<root>/<name>`` (an experiment's or a sweep's), or None when there is no root or it
        cannot be opened now."""
        if not root:
            return None
        opener = self._store_opener
        if opener is None:
            from rlcloud.storage import open_store

            opener = open_store
        try:
            return opener(results_location(root, name, resolve=False))
        except RLCloudError as exc:
            logger.debug("results store of %s unavailable: %s", name, exc)
            return None

    def _check_results(self, results: str, what: str) -> None:
        if not is_gcs(results) and not self.local_results:
            raise SpecError(
                [
                    SpecProblem(
                        "results",
                        f"{what} on Kubernetes needs a gs://BUCKET[/PREFIX] results location: its pods "
                        "cannot write to a directory of this machine",
                        results,
                    )
                ]
            )

    def _set_suspend(self, job_name: str, suspend: bool) -> None:
        self.applier.patch(
            "Job",
            job_name,
            self.namespace,
            {"spec": {"suspend": suspend}},
            what=f"{'suspend' if suspend else 'resume'} Job {job_name}",
        )
