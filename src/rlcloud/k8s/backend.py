"""KubernetesBackend: experiments as Jobs on any Kubernetes cluster, over one ``ApiClient``.

Everything the backend needs is read back from the cluster (labels + the spec ConfigMap) and the
results store, so ``attach``/``status``/``logs``/``stop`` work from another machine too.

Requests per verb (constant in the number of workers; see benchmarks/k8s_submit.py):

- ``start``: GET /version and the namespace checks once per backend instance, then one create per
  object (2 for single/multi-threaded, 4 for distributed);
- ``status``: list Jobs + list Pods (+ the ConfigMap once, + Events while something is Pending);
- ``stop``: three delete-collection calls (Jobs with foreground propagation, Services, ConfigMaps),
  then Pod lists until the pods are gone.

Sweeps (constant in the number of trials too; see benchmarks/sweep_objects.py): a sweep is a ConfigMap
and ONE Indexed Job (:func:`rlcloud.k8s.builders.build_sweep_workloads`); ``start_sweep`` reads the Job
and creates the two objects; ``sweep_status`` reads the Job and the ConfigMap and lists the pods once
(trial states from ``completedIndexes``/``failedIndexes`` and the pods: :func:`rlcloud.k8s.status.trial_states`);
``stop_sweep`` deletes the Job (foreground) and the ConfigMap, then lists pods until they are gone.

Reading the Jobs and Pods JSON into statuses is :mod:`rlcloud.k8s.status` (pure functions); following
pod logs is :mod:`rlcloud.k8s.logs`; this module holds the verbs.

Pause/resume (docs/contracts.md, runner section): ``pause`` suspends the learner's Job; the Job
controller deletes its pod, the runner gets SIGTERM, writes a checkpoint to the results store and
exits 143 within the pod's grace period; once the pod is gone the env servers are suspended too.
``resume`` un-suspends them, env servers first; the new learner pod resumes from ``checkpoints/LATEST``.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from kubernetes import client as k8s
from urllib3.exceptions import HTTPError as Urllib3Error

from rlcloud.backend import (
    ExperimentBackend,
    ExperimentState,
    ExperimentStatus,
    RoleStatus,
    SweepStatus,
    TrialState,
    TrialStatus,
    trial_state,
)
from rlcloud.errors import (
    AuthError,
    ConflictError,
    NotFoundError,
    RLCloudError,
    SpecError,
    SpecProblem,
    WaitTimeoutError,
)
from rlcloud.k8s import logs as pod_logs
from rlcloud.k8s.applier import KUEUE_API, Applier, RetryPolicy, path_for, translate
from rlcloud.k8s.builders import (
    ANNOTATION_CONFIG_HASH,
    CONFIG_KEY_RESULTS,
    CONFIG_KEY_SPEC,
    CONFIG_KEY_SWEEP,
    CONFIG_ROLE,
    KUEUE_QUEUE_LABEL,
    LABEL_EXPERIMENT,
    LABEL_ROLE,
    LABEL_SWEEP,
    LEARNER_GRACE_SECONDS,
    RUNNER_SERVICE_ACCOUNT,
    WORKLOAD_IDENTITY_ANNOTATION,
    build_namespace_objects,
    build_sweep_workloads,
    build_workloads,
    config_map_name,
    env_server_name,
    experiment_selector,
    sweep_object_name,
    sweep_selector,
)
from rlcloud.k8s.status import (
    JSON,
    Observed,
    anything_pending,
    get,
    is_live,
    is_suspended,
    job_finished,
    labels,
    learner,
    overall,
    role_rank,
    role_statuses,
    trial_states,
)
from rlcloud.k8s.status import name as object_name
from rlcloud.results import is_gcs, results_location
from rlcloud.roles import LEARNER, LEARNER_ROLES, Role, poll_until, role_selector
from rlcloud.stored import MAX_NAME_RECORD_BYTES

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec
    from rlcloud.specs.sweep import SweepSpec
    from rlcloud.storage import Store

__all__ = ["KubernetesBackend"]

logger = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "rlcloud"


class KubernetesBackend(ExperimentBackend):
    """Runs experiments as Jobs in one namespace of one cluster.

    ``api_client``: a ``kubernetes.client.ApiClient`` (see ``rlcloud.k8s.api_client_from_kubeconfig``;
    GKE hands over its own). ``image``: default container image (a spec's ``image`` wins).
    ``gpu_type``: the GKE accelerator type of the GPU nodes; the learner then requests GPUs.
    ``service_account``: the Kubernetes ServiceAccount the pods run as, created with the namespace;
    ``gcp_service_account`` annotates it for Workload Identity. ``credentials_secret``: a Secret holding
    a key file (``key.json``), mounted read-only when Workload Identity is not available.
    ``store_opener``: opens a results location (default ``rlcloud.storage.open_store``), used for
    progress, pause checkpoints and logs of pods that are gone. Results must be ``gs://`` (a pod cannot
    write to this machine's directories) unless ``local_results`` (tests whose "pods" are local
    processes, or a path every node mounts). ``queue``: a Kueue LocalQueue that sweeps are submitted to.
    ``env_server_image``: the image of env-server pods, which never use a GPU (the CPU image on a GPU
    cluster; default ``image``); a spec's ``image`` is used for every pod.
    """

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
        self._sweep_configs: dict[str, tuple[str, SweepSpec, str]] = {}  # name -> (config hash, spec, root)
        self._sweep_stores: dict[str, Store] = {}
        self._finished_progress: dict[tuple[str, str], dict[str, Any]] = {}  # (sweep, trial) -> progress

    # ------------------------------------------------------------------------------------ helpers

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
        from rlcloud.k8s.builders import build_credentials_secret

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

    def _store(self, name: str) -> Store | None:
        """The experiment's results store (opened once per experiment: a GCS client is not cheap)."""
        if name not in self._stores:
            store = self._open_store(self._results_root(name), name)
            if store is None:
                return None
            self._stores[name] = store
        return self._stores[name]

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

    def _results_root(self, name: str) -> str | None:
        if name not in self._results:
            cm = self.applier.read("ConfigMap", config_map_name(name), self.namespace)
            if cm is None:
                return None
            self._results[name] = (cm.get("data") or {}).get(CONFIG_KEY_RESULTS, "")
        return self._results[name] or None

    def _observe(self, name: str) -> Observed:
        selector = experiment_selector(name)
        jobs = self.applier.list_items("Job", self.namespace, label_selector=selector, what=f"list Jobs of {name}")
        pods = self._list_pods(name, selector)
        return Observed(jobs={labels(j).get(LABEL_ROLE, ""): j for j in jobs}, pods=pods)

    def _list_pods(self, name: str, selector: str) -> builtins.list[JSON]:
        return self.applier.list_items("Pod", self.namespace, label_selector=selector, what=f"list Pods of {name}")

    def _latest_checkpoint(self, store: Store | None) -> str | None:
        if store is None:
            return None
        try:
            return store.read_record_bytes("checkpoints/LATEST", MAX_NAME_RECORD_BYTES).decode().strip() or None
        except RLCloudError:
            return None

    # ------------------------------------------------------------------------------------ the verbs

    def start(self, spec: ExperimentSpec, results: str) -> bool:
        """Create the experiment's objects (idempotent: existing identical objects are kept; a paused
        experiment is resumed; objects that differ raise ConflictError). Returns without waiting: True when
        it created or resumed something, False when every Job was there and running already."""
        self._check_results(results, "an experiment")
        # built before anything is created: a spec the builders refuse leaves no trace in the cluster
        objs = build_workloads(
            spec,
            image=spec.image or self.image,
            namespace=self.namespace,
            results=results,
            gpu_type=self.gpu_type,
            service_account=self.service_account,
            credentials_secret=self.credentials_secret,
            kubernetes_version=self.kubernetes_version(),
            # the spec's own image is the user's (their environment code): every pod runs it
            env_server_image=None if spec.image else self.env_server_image,
        )
        self.ensure_namespace()
        suspended: list[str] = []
        created = False
        for obj in objs:
            existing = self.applier.create(obj)
            if obj.kind != "Job":
                continue
            # a Job made just now has no status yet; one that was there has been started by its controller
            created = created or not (existing.get("status") or {}).get("startTime")
            if is_suspended(existing):
                suspended.append(obj.metadata.name)
            finished = job_finished(existing)
            if finished:
                logger.warning(
                    "Job %s of %s has already %s; stop() the experiment first to run it again",
                    obj.metadata.name,
                    spec.name,
                    finished,
                )
        for job_name in suspended:  # env servers come first in objs, so they resume first
            self._set_suspend(job_name, False)
        if self._results.get(spec.name) != results:
            self._stores.pop(spec.name, None)
        self._results[spec.name] = results
        logger.info("started %s in namespace %s (%d objects)", spec.name, self.namespace, len(objs))
        return created or bool(suspended)

    def status(self, name: str) -> ExperimentStatus:
        """Per-role state (pending/running/succeeded/failed/suspended, restarts, exit code, one-line
        reason) from the Jobs and Pods, and the learner's progress.json from the results store."""
        observed = self._observe(name)
        if not observed.jobs and self._results_root(name) is None:
            raise NotFoundError(self._unknown(name))
        events = self._events(observed) if anything_pending(observed) else {}
        roles: list[RoleStatus] = []
        for role, job in sorted(observed.jobs.items(), key=lambda kv: role_rank(kv[0])):
            roles.extend(role_statuses(role, job, observed.pods, events))
        progress: dict[str, Any] = {}
        store = self._store(name)
        if store is not None:
            try:
                from rlcloud.storage import read_progress

                progress = read_progress(store) or {}
            except RLCloudError as exc:
                logger.debug("progress of %s unreadable: %s", name, exc)
        state, message = overall(observed.jobs, roles, progress)
        return ExperimentStatus(
            name=name, state=state, roles=roles, progress=progress, message=message, backend=self.kind
        )

    def wait(self, name: str, timeout: float | None = None) -> ExperimentStatus:
        """Block until the experiment finishes (watching its Jobs, re-reading the status at least every
        ``watch_window`` seconds and logging changes); rlcloud WaitTimeoutError after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last: tuple[str, str | None] | None = None
        while True:
            status = self.status(name)
            now = (status.state, status.message)
            if now != last:
                logger.info("%s: %s%s", name, status.state, f" ({status.message})" if status.message else "")
                last = now
            if status.finished:
                self._release_env_servers(name, status)
                return status
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeoutError(
                    f"experiment {name} still {status.state} after {timeout:.0f}s"
                    + (f": {status.message}" if status.message else "")
                )
            window = self.watch_window
            if deadline is not None:
                window = max(0.0, min(window, deadline - time.monotonic()))
            self._wait_for_job_change(name, window)

    def _wait_for_job_change(self, name: str, window: float) -> None:
        """Block until one of the experiment's Jobs changes (a watch) or ``window`` seconds pass.

        A finished Job is noticed at once; the status (and the pending reasons logged by wait()) is
        re-read at least every ``window`` seconds. Falls back to sleeping when the watch fails.
        """
        if window < 1:
            time.sleep(window)
            return
        selector = experiment_selector(name)
        path = path_for("Job", self.namespace)
        started = time.monotonic()
        try:
            listed = self.applier.request_json("list Jobs", "GET", path, query={"labelSelector": selector})
            version = str(listed["metadata"]["resourceVersion"])
            resp = self.applier.send(
                "GET",
                path,
                query={
                    "labelSelector": selector,
                    "watch": "true",
                    "resourceVersion": version,
                    "timeoutSeconds": str(int(window)),
                },
                timeout=(10.0, window + 10.0),
            ).response
            try:
                for chunk in resp.stream(amt=None, decode_content=False):
                    if chunk.strip():  # any event (ERROR 410 too): read the status again
                        return
            finally:
                resp.release_conn()
                resp.close()
        except (k8s.ApiException, Urllib3Error, OSError, ValueError, KeyError, TypeError) as exc:
            logger.debug("watching the Jobs of %s failed (%s); polling", name, type(exc).__name__)
            time.sleep(max(0.0, min(self.poll_interval, window - (time.monotonic() - started))))

    def _release_env_servers(self, name: str, status: ExperimentStatus) -> None:
        """The learner failed for good: its env servers would wait (up to their idle timeout) for an
        agent that never comes; suspend their Job so that no pod is left running."""
        if status.state != "failed":
            return
        env = [r for r in status.roles if r.role == Role.ENV_SERVER]
        if any(r.state in ("pending", "running") for r in env):
            logger.info("%s failed: stopping its env servers", name)
            self._set_suspend(env_server_name(name), True)

    def logs(self, name: str, follow: bool = False, roles: Sequence[str] | None = None) -> Iterator[str]:
        """Log lines as ``role-index | line``. With ``follow``, pods still Pending are waited for and
        followed as they start (retries too) until every Job has finished or is suspended. Without pods
        (finished long ago) the logs saved in the results store are shown. ``roles``: whose (default: every
        role's, the learner's only when following: one HTTP stream per followed pod; see
        :meth:`Backend.logs`)."""
        selected = role_selector(roles if roles or not follow else [LEARNER])
        observed = self._observe(name)
        if not observed.jobs and not observed.pods:
            if self._results_root(name) is None:
                raise NotFoundError(self._unknown(name))
            store = self._store(name)
            if store is not None:
                yield from pod_logs.stored_lines(store, selected)
            return
        if follow:
            yield from pod_logs.follow(
                self.applier,
                self.namespace,
                observed,
                lambda: self._observe(name),
                poll_interval=self.poll_interval,
                selected=selected,
            )
        else:
            yield from pod_logs.pod_lines(self.applier, self.namespace, observed.pods, selected)

    def pause(self, name: str) -> None:
        """Suspend the learner (it checkpoints on SIGTERM), wait until its pod is gone and the store
        shows the checkpoint, then suspend the env servers. A finished experiment is left alone."""
        observed = self._observe(name)
        found = learner(observed.jobs)
        if found is None:
            raise NotFoundError(self._unknown(name))
        role, job = found
        if job_finished(job):
            logger.info("%s has finished; nothing to pause", name)
            return
        store = self._store(name)
        before = self._latest_checkpoint(store)
        self._set_suspend(object_name(job), True)
        deadline = time.monotonic() + self.pause_timeout
        self._wait_pods_gone(name, role, deadline)

        # the runner's final sync may land just after its pod is gone
        def checkpointed() -> bool | None:
            return True if self._latest_checkpoint(store) != before else None

        if store is not None and poll_until(checkpointed, deadline, interval=self.poll_interval) is None:
            logger.warning(
                "%s: no new checkpoint appeared while pausing; resume() starts from %s",
                name,
                before or "the beginning",
            )
        env_job = observed.jobs.get(Role.ENV_SERVER)
        if env_job is not None:
            self._set_suspend(object_name(env_job), True)
            self._wait_pods_gone(name, Role.ENV_SERVER, time.monotonic() + self.pause_timeout)

    def resume(self, name: str) -> None:
        """Un-suspend the env servers, then the learner, which resumes from the latest checkpoint."""
        observed = self._observe(name)
        if not observed.jobs:
            raise NotFoundError(self._unknown(name))
        for role in (Role.ENV_SERVER, *LEARNER_ROLES):
            job = observed.jobs.get(role)
            if job is not None and is_suspended(job):
                self._set_suspend(object_name(job), False)

    def stop(self, name: str) -> None:
        """Delete every object of the experiment (Jobs with foreground propagation, so the learner
        checkpoints on SIGTERM; the Service and the spec ConfigMap) and wait until its pods are gone.
        Idempotent: stopping a stopped or unknown experiment does nothing."""
        selector = experiment_selector(name)
        # Jobs first and in the foreground: their pods get SIGTERM and the learner checkpoints
        self.applier.delete_collection("Job", self.namespace, label_selector=selector, propagation="Foreground")
        self.applier.delete_collection("Service", self.namespace, label_selector=selector)
        self.applier.delete_collection("ConfigMap", self.namespace, label_selector=selector)
        self._results.pop(name, None)
        self._stores.pop(name, None)
        self._wait_pods_gone(name, None, time.monotonic() + self.stop_timeout)

    # ------------------------------------------------------------------------------------ sweeps

    def start_sweep(self, sweep: SweepSpec, results: str) -> bool:
        """Create the sweep's ConfigMap and its ONE Indexed Job (:func:`build_sweep_workloads`) and return.

        The Job controller runs ``max_parallel`` trials at a time and retries each on its own; nothing on
        this machine needs to keep running. With a Kueue ``queue`` the Job is created suspended and Kueue
        admits it. Idempotent: a sweep whose Job exists already is left alone (False; one that has
        finished is kept as it is: stop it first to run it again, which keeps the trials that finished). A
        different sweep of the same name raises ConflictError. Three requests for a new sweep (read the
        Job, create two objects) whatever its number of trials.
        """
        self._check_results(results, "a sweep")
        # built and checked before anything is created: a refused sweep leaves no trace in the cluster
        objs = build_sweep_workloads(
            sweep,
            image=sweep.experiment.image or self.image,
            namespace=self.namespace,
            results=results,
            gpu_type=self.gpu_type,
            service_account=self.service_account,
            credentials_secret=self.credentials_secret,
            queue=self.queue,
            kubernetes_version=self.kubernetes_version(),
        )
        if self.queue:
            self._check_queue(self.queue)
        self.ensure_namespace()
        name = sweep.name
        job_name = sweep_object_name(name)
        self._forget_sweep(name)
        existing = self.applier.read("Job", job_name, self.namespace)
        if existing is not None and not get(existing, "metadata", "deletionTimestamp"):
            wanted = objs[-1].metadata.annotations[ANNOTATION_CONFIG_HASH]
            if (get(existing, "metadata", "annotations") or {}).get(ANNOTATION_CONFIG_HASH) != wanted:
                raise ConflictError(self._sweep_conflict(name))
            self._create_sweep_object(objs[0], name)  # a ConfigMap deleted by hand comes back
            finished = job_finished(existing)
            if finished:
                logger.warning("sweep %s has already %s; stop it first to run it again", name, finished)
                return False
            if is_suspended(existing) and not self.queue:
                self._set_suspend(job_name, False)  # suspended by hand: go on (under Kueue, Kueue decides)
                return True
            logger.info("sweep %s is already running", name)
            return False
        for obj in objs:  # the ConfigMap first: the pods mount it
            self._create_sweep_object(obj, name)
        logger.info(
            "started sweep %s in namespace %s: %d trials, %d at a time%s",
            name,
            self.namespace,
            sweep.num_trials,
            objs[-1].spec.parallelism,
            f", queued in Kueue queue {self.queue}" if self.queue else "",
        )
        return True

    def sweep_status(self, name: str) -> SweepStatus:
        """Each trial's state and progress, in three Kubernetes requests whatever the number of trials: the
        Job (``completedIndexes``/``failedIndexes``, conditions), the ConfigMap (the sweep spec) and one list
        of the sweep's pods. Progress comes from the results store: every call for running trials, once for
        finished ones (kept in this object)."""
        job = self.applier.read("Job", sweep_object_name(name), self.namespace)
        config = self._sweep_config(name)
        if config is None:
            if job is None:
                raise NotFoundError(self._unknown_sweep(name))
            raise NotFoundError(f"sweep {name}: its ConfigMap {sweep_object_name(name)} is gone; stop the sweep")
        sweep, _root = config
        pods = (
            self.applier.list_items(
                "Pod", self.namespace, label_selector=sweep_selector(name), what=f"list Pods of {name}"
            )
            if job is not None
            else []
        )
        table = sweep.trial_table()
        observed = trial_states(job, pods, len(table))
        progress = self._trial_progress(
            name, [(trial_name, seen.state) for (trial_name, _p, _s), seen in zip(table, observed, strict=True)]
        )
        trials: list[TrialStatus] = []
        for index, ((trial_name, params, seed), seen) in enumerate(zip(table, observed, strict=True)):
            got = progress.get(trial_name, {})
            state: TrialState
            reason = seen.reason
            if job is None:  # stopped, or deleted after ttlSecondsAfterFinished: the store knows the rest
                state = _state_on_record(got)
                reason = got.get("stop_reason") or (None if state != "stopped" else "the sweep's Job is gone")
            elif seen.state in ("succeeded", "failed", "stopped"):
                state = trial_state(seen.state, got)
                reason = got.get("stop_reason") or reason
            else:
                state = seen.state  # type: ignore[assignment]  # queued/pending/running: TrialState values
            trials.append(TrialStatus(index, trial_name, params, seed, state, got, reason, restarts=seen.restarts))
        overall_state, message = _sweep_overall(job, trials)
        return SweepStatus(name=name, state=overall_state, trials=trials, message=message, backend=self.kind)

    def stop_sweep(self, name: str) -> None:
        """Delete the sweep's Job in the foreground (running trials get SIGTERM and checkpoint; no new trial
        starts) and its ConfigMap, then wait until its pods are gone. Idempotent. Starting the sweep again
        later keeps the trials that finished and resumes the others from their checkpoints."""
        selector = sweep_selector(name)
        self.applier.delete_collection("Job", self.namespace, label_selector=selector, propagation="Foreground")
        self.applier.delete_collection("ConfigMap", self.namespace, label_selector=selector)
        self._forget_sweep(name)
        self._sweep_configs.pop(name, None)
        deadline = time.monotonic() + self.stop_timeout
        live: builtins.list[JSON] = []

        def gone() -> bool | None:
            pods = self.applier.list_items("Pod", self.namespace, label_selector=selector, what=f"list Pods of {name}")
            live[:] = [p for p in pods if is_live(p)]
            return True if not live else None

        if poll_until(gone, deadline, interval=self.poll_interval) is None:
            raise WaitTimeoutError(
                f"{len(live)} pod(s) of sweep {name} still running after the wait: "
                + ", ".join(object_name(p) for p in live[:5])
            )

    def list_sweeps(self) -> builtins.list[str]:
        """Names of the sweeps in the namespace (from their ConfigMaps)."""
        cms = self.applier.list_items(
            "ConfigMap",
            self.namespace,
            label_selector=f"{sweep_selector()},{LABEL_ROLE}={CONFIG_ROLE}",
            what="list sweeps",
        )
        return sorted({labels(cm).get(LABEL_SWEEP, "") for cm in cms} - {""})

    def attach_sweep(self, name: str) -> tuple[SweepSpec, str]:
        """The spec and results root of a sweep, rebuilt from its ConfigMap (from any machine)."""
        config = self._sweep_config(name)
        if config is None:
            raise NotFoundError(self._unknown_sweep(name))
        sweep, root = config
        return sweep, root or sweep.results or sweep.experiment.results or ""

    def _create_sweep_object(self, obj: Any, name: str) -> None:
        try:
            self.applier.create(obj)
        except ConflictError as exc:
            raise ConflictError(self._sweep_conflict(name)) from exc

    def _sweep_conflict(self, name: str) -> str:
        return (
            f"a sweep {name!r} with a different spec is in namespace {self.namespace}: stop it first "
            f"(Sweep.attach({name!r}, cluster=...).stop() or `rlcloud sweep stop {name}`; finished trials are "
            "kept), or give the new sweep another name"
        )

    def _unknown_sweep(self, name: str) -> str:
        try:
            known = self.list_sweeps()
        except RLCloudError:
            known = []
        hint = f"; sweeps there: {', '.join(known)}" if known else ""
        return f"no sweep {name!r} in namespace {self.namespace}{hint}"

    def _sweep_config(self, name: str) -> tuple[SweepSpec, str] | None:
        """The sweep spec and results root from its ConfigMap (read every time: one request; parsed once
        per version of it)."""
        cm = self.applier.read("ConfigMap", sweep_object_name(name), self.namespace)
        if cm is None:
            self._sweep_configs.pop(name, None)
            return None
        key = (get(cm, "metadata", "annotations") or {}).get(ANNOTATION_CONFIG_HASH) or get(
            cm, "metadata", "resourceVersion"
        )
        cached = self._sweep_configs.get(name)
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        data = cm.get("data") or {}
        if CONFIG_KEY_SWEEP not in data:
            raise NotFoundError(
                f"ConfigMap {sweep_object_name(name)} holds no {CONFIG_KEY_SWEEP}: not an rlcloud sweep"
            )
        from rlcloud.specs.sweep import SweepSpec

        sweep = SweepSpec.from_yaml_text(data[CONFIG_KEY_SWEEP])
        root = str(data.get(CONFIG_KEY_RESULTS) or "")
        if cached is not None:
            self._forget_sweep(name)  # another sweep of that name: its trials' progress is not this one's
        self._sweep_configs[name] = (key, sweep, root)
        return sweep, root

    def _forget_sweep(self, name: str) -> None:
        self._sweep_stores.pop(name, None)
        self._finished_progress = {k: v for k, v in self._finished_progress.items() if k[0] != name}

    def _trial_progress(self, name: str, trials: builtins.list[tuple[str, str]]) -> dict[str, dict[str, Any]]:
        """progress.json of the trials that have one to read: running ones (fresh), finished ones (once).

        ``trials``: (trial name, observed state). Reads go to the results store in parallel (each a small
        GET); none goes to the Kubernetes API.
        """
        out: dict[str, dict[str, Any]] = {}
        todo: builtins.list[tuple[str, bool]] = []
        for trial_name, state in trials:
            cached = self._finished_progress.get((name, trial_name))
            if cached is not None:
                out[trial_name] = cached
            elif state in ("running", "succeeded", "failed", "stopped"):
                todo.append((trial_name, state != "running"))
        if not todo:
            return out
        store = self._sweep_store(name)
        if store is None:
            return out

        def read(trial_name: str) -> dict[str, Any]:
            from rlcloud.storage import read_progress

            try:
                return read_progress(store.child(trial_name)) or {}
            except RLCloudError as exc:
                logger.debug("progress of %s/%s unreadable: %s", name, trial_name, exc)
                return {}

        if len(todo) == 1:
            results = [read(todo[0][0])]
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=min(16, len(todo))) as pool:
                results = list(pool.map(read, [t for t, _ in todo]))
        for (trial_name, finished), got in zip(todo, results, strict=True):
            out[trial_name] = got
            # a finished trial's progress no longer changes, but one that has none yet (its last sync still
            # on the way) is asked again next time
            if finished and got.get("state") in _FINAL_PROGRESS:
                self._finished_progress[(name, trial_name)] = got
        return out

    def _sweep_store(self, name: str) -> Store | None:
        if name not in self._sweep_stores:
            config = self._sweep_configs.get(name)
            store = self._open_store(config[2] if config is not None else None, name)
            if store is None:
                return None
            self._sweep_stores[name] = store
        return self._sweep_stores[name]

    def _check_queue(self, queue: str) -> None:
        """Refuse (SpecError on ``queue``) a Kueue LocalQueue that does not exist in the namespace, or a
        cluster without Kueue: the sweep's Job would stay suspended forever. A 403 (the identity may not
        read LocalQueues) only warns: the queue may well exist."""
        what = f"read Kueue LocalQueue {queue}"
        try:
            self.applier.request_json(what, "GET", path_for("LocalQueue", self.namespace, queue))
            return
        except k8s.ApiException as exc:
            if exc.status == 403:
                logger.warning(
                    "cannot check that Kueue LocalQueue %s exists (%s); submitting anyway", queue, exc.reason
                )
                return
            if exc.status != 404:
                raise translate(exc, what) from exc
            details = _status_details(exc)
        if details.get("name") == queue:  # the API exists, the object does not
            message = (
                f"no Kueue LocalQueue {queue!r} in namespace {self.namespace}: a sweep submitted to it would wait "
                f"suspended forever. See `kubectl -n {self.namespace} get localqueues`, create it, or leave queue "
                "empty to run without Kueue"
            )
        else:
            message = (
                f"this cluster does not serve Kueue's LocalQueues ({KUEUE_API}): install Kueue "
                "(kueue.sigs.k8s.io/docs/installation/) or leave queue empty to run without it"
            )
        raise SpecError([SpecProblem("queue", message, queue)])

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

    def list(self) -> list[str]:
        """Names of the experiments in the namespace (from their spec ConfigMaps)."""
        cms = self.applier.list_items(
            "ConfigMap",
            self.namespace,
            label_selector=f"{experiment_selector()},{LABEL_ROLE}={CONFIG_ROLE}",
            what="list experiments",
        )
        return sorted({labels(cm).get(LABEL_EXPERIMENT, "") for cm in cms} - {""})

    def attach(self, name: str) -> tuple[ExperimentSpec, str]:
        """The spec and results root of an experiment, rebuilt from its ConfigMap."""
        cm = self.applier.read("ConfigMap", config_map_name(name), self.namespace)
        if cm is None:
            raise NotFoundError(self._unknown(name))
        from rlcloud.specs import ExperimentSpec

        data = cm.get("data") or {}
        if CONFIG_KEY_SPEC not in data:
            raise NotFoundError(f"ConfigMap {config_map_name(name)} holds no {CONFIG_KEY_SPEC}: not an rlcloud spec")
        spec = ExperimentSpec.from_yaml_text(data[CONFIG_KEY_SPEC])
        results = data.get(CONFIG_KEY_RESULTS) or spec.results or ""
        self._results[name] = results
        return spec, results

    # ------------------------------------------------------------------------------------ internals

    def _unknown(self, name: str) -> str:
        try:
            known = self.list()
        except RLCloudError:
            known = []
        hint = f"; experiments there: {', '.join(known)}" if known else ""
        return f"no experiment {name!r} in namespace {self.namespace}{hint}"

    def _set_suspend(self, job_name: str, suspend: bool) -> None:
        self.applier.patch(
            "Job",
            job_name,
            self.namespace,
            {"spec": {"suspend": suspend}},
            what=f"{'suspend' if suspend else 'resume'} Job {job_name}",
        )

    def _wait_pods_gone(self, name: str, role: str | None, deadline: float) -> None:
        selector = experiment_selector(name) + (f",{LABEL_ROLE}={role}" if role else "")
        live: builtins.list[JSON] = []

        def gone() -> bool | None:
            live[:] = [p for p in self._list_pods(name, selector) if is_live(p)]
            return True if not live else None

        if poll_until(gone, deadline, interval=self.poll_interval) is None:
            raise WaitTimeoutError(
                f"{len(live)} pod(s) of {name} still running after the wait: "
                + ", ".join(object_name(p) for p in live[:5])
            )

    def _events(self, observed: Observed) -> dict[str, builtins.list[JSON]]:
        """Events of the experiment's Pods and Jobs, by object name (one list call)."""
        names = {object_name(p) for p in observed.pods} | {object_name(j) for j in observed.jobs.values()}
        try:
            items = self.applier.list_items("Event", self.namespace, what="list events")
        except RLCloudError as exc:  # events are a nicety: a status without them is still a status
            logger.debug("cannot list events: %s", exc)
            return {}
        out: dict[str, builtins.list[JSON]] = {}
        for event in items:
            involved = get(event, "involvedObject", "name")
            if involved is not None and involved in names:
                out.setdefault(involved, []).append(event)
        return out


def _status_details(exc: k8s.ApiException) -> dict[str, Any]:
    """The ``details`` of an error's Status body ({} when it has none: e.g. an API group not served)."""
    import json

    try:
        body = json.loads(exc.body or "")
    except (TypeError, ValueError):
        return {}
    details = body.get("details") if isinstance(body, dict) else None
    return details if isinstance(details, dict) else {}


#: progress.json states after which a trial's progress no longer changes
_FINAL_PROGRESS = frozenset({"succeeded", "failed", "stopped", "stopped-early"})


def _state_on_record(progress: dict[str, Any]) -> TrialState:
    """A trial's state when its sweep's Job is gone: what its progress.json says it came to."""
    recorded = progress.get("state")
    if recorded == "stopped-early":
        return "stopped early"
    if recorded in ("succeeded", "failed"):
        return recorded  # type: ignore[no-any-return]
    return "stopped"


def _sweep_overall(job: JSON | None, trials: builtins.list[TrialStatus]) -> tuple[ExperimentState, str | None]:
    """The sweep's state and a one-line message, from its Job (None: gone) and its trials."""
    failed = sum(1 for t in trials if t.state == "failed")
    if job is None:
        if trials and all(t.state in ("succeeded", "stopped early", "failed") for t in trials):
            return (
                "failed" if failed else "succeeded"
            ), "the sweep's Job has been cleaned up; results are in the store"
        return "stopped", "the sweep's Job is gone: start the sweep again to run the trials that did not finish"
    finished = job_finished(job)
    if finished == "succeeded":
        return "succeeded", None
    if finished == "failed":
        reason = next(
            (c.get("reason") for c in job.get("status", {}).get("conditions") or [] if c.get("type") == "Failed"), None
        )
        if reason == "MaxFailedIndexesExceeded":
            limit = int(job.get("spec", {}).get("maxFailedIndexes") or 0) + 1
            left = sum(1 for t in trials if t.state in ("queued", "stopped"))
            return "failed", (
                f"stopped after {failed} failed trials (max_failures {limit}): fix what they failed of "
                f"(`rlcloud sweep status` names each reason); {left} trials did not run"
            )
        return "failed", f"{failed} of {len(trials)} trials failed" if failed else None
    if is_suspended(job):
        queue = labels(job).get(KUEUE_QUEUE_LABEL)
        if queue:
            return "pending", f"waiting for Kueue to admit the sweep (queue {queue})"
        return "pending", "the sweep's Job is suspended"
    if any(t.state == "running" for t in trials):
        return "running", (f"{failed} trial(s) failed" if failed else None)
    pending = next((t for t in trials if t.state == "pending" and t.reason), None)
    return "pending", (f"{pending.name}: {pending.reason}" if pending else None)
