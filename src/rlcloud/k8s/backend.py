"""KubernetesBackend: experiments as Jobs on any Kubernetes cluster, over one ``ApiClient``.

Everything the backend needs is read back from the cluster (labels + the spec ConfigMap) and the
results store, so ``attach``/``status``/``logs``/``stop`` work from another machine too.

Requests per verb (constant in the number of workers; see benchmarks/k8s_submit.py):

- ``start``: GET /version and the namespace checks once per backend instance, then one create per
  object (2 for single/multi-threaded, 4 for distributed);
- ``status``: list Jobs + list Pods (+ the ConfigMap once, + Events while something is Pending);
- ``stop``: three delete-collection calls (Jobs with foreground propagation, Services, ConfigMaps),
  then Pod lists until the pods are gone.

Pause/resume (docs/contracts.md, runner section): ``pause`` suspends the learner's Job; the Job
controller deletes its pod, the runner gets SIGTERM, writes a checkpoint to the results store and
exits 143 within the pod's grace period; once the pod is gone the env servers are suspended too.
``resume`` un-suspends them, env servers first; the new learner pod resumes from ``checkpoints/LATEST``.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubernetes import client as k8s
from urllib3.exceptions import HTTPError as Urllib3Error

from rlcloud.backend import ExperimentBackend, ExperimentState, ExperimentStatus, RoleState, RoleStatus
from rlcloud.errors import AuthError, NotFoundError, RLCloudError, SpecError, SpecProblem
from rlcloud.errors import TimeoutError as RLTimeoutError
from rlcloud.k8s.applier import Applier, RetryPolicy, path_for, translate
from rlcloud.k8s.builders import (
    CONFIG_KEY_RESULTS,
    CONFIG_KEY_SPEC,
    CONFIG_ROLE,
    ENV_SERVER_ROLE,
    JOB_COMPLETION_INDEX_ANNOTATION,
    LABEL_EXPERIMENT,
    LABEL_ROLE,
    LEARNER_GRACE_SECONDS,
    RUNNER_SERVICE_ACCOUNT,
    WORKLOAD_IDENTITY_ANNOTATION,
    build_namespace_objects,
    build_workloads,
    config_map_name,
    env_server_name,
    experiment_selector,
    results_location,
)

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec
    from rlcloud.storage import Store

__all__ = ["KubernetesBackend", "why_pending"]

logger = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "rlcloud"
_LEARNER_ROLES = ("single", "multi", "agent")
_ROLE_ORDER = {"single": 0, "multi": 0, "agent": 0, ENV_SERVER_ROLE: 1}
_MAX_REASON = 240


JSON = dict[str, Any]


@dataclass
class _Observed:
    """One read of an experiment's Jobs and Pods, as plain JSON (the API's own field names).

    Observed state is read raw, not through the client's pydantic models: deserialising 1000 pods
    into V1Pod objects costs ~2 s of CPU on every status() poll, json.loads a tenth of that.
    """

    jobs: dict[str, JSON]  # role -> Job
    pods: list[JSON]


def _get(obj: Any, *path: str) -> Any:
    """obj[path[0]][path[1]]..., or None as soon as a level is missing."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _name(obj: JSON) -> str:
    return str(_get(obj, "metadata", "name") or "")


def _labels(obj: JSON) -> dict[str, str]:
    return _get(obj, "metadata", "labels") or {}


def _phase(pod: JSON) -> str:
    return str(_get(pod, "status", "phase") or "Pending")


def _condition(job: JSON, kind: str) -> JSON | None:
    for cond in _get(job, "status", "conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def _job_finished(job: JSON) -> str | None:
    """ "succeeded"/"failed" once the Job controller has decided, else None."""
    if _condition(job, "Complete") or _condition(job, "SuccessCriteriaMet"):
        return "succeeded"
    if _condition(job, "Failed") or _condition(job, "FailureTarget"):
        return "failed"
    return None


def _suspended(job: JSON) -> bool:
    return bool(_get(job, "spec", "suspend"))


def _pod_index(pod: JSON) -> int:
    value = (_get(pod, "metadata", "annotations") or {}).get(JOB_COMPLETION_INDEX_ANNOTATION) or _labels(pod).get(
        JOB_COMPLETION_INDEX_ANNOTATION
    )
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0


def _pod_sort_key(pod: JSON) -> tuple[bool, bool, str, str]:
    # the live pod of an index wins over its failed predecessors, a succeeded one (the last there will
    # be) too; then the newest (timestamps have one-second resolution, so this alone cannot decide)
    phase = _phase(pod)
    created = str(_get(pod, "metadata", "creationTimestamp") or "")
    return phase not in ("Succeeded", "Failed"), phase == "Succeeded", created, _name(pod)


def _live(pod: JSON) -> bool:
    """Still running or about to: not finished (a pod being deleted counts until it is gone)."""
    return _phase(pod) in ("Pending", "Running")


def _exit_code(pod: JSON) -> int | None:
    for cs in _get(pod, "status", "containerStatuses") or []:
        for state in ("state", "lastState"):
            terminated = _get(cs, state, "terminated")
            if terminated and terminated.get("exitCode") is not None:
                return int(terminated["exitCode"])
    return None


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= _MAX_REASON else line[: _MAX_REASON - 3] + "..."


def _classify_unschedulable(message: str) -> str:
    if "Insufficient nvidia.com/gpu" in message:
        return f"waiting for a GPU: no node has a free nvidia.com/gpu ({message})"
    if "untolerated taint" in message or "had taint" in message:
        return f"no node tolerates the pod: untolerated taint ({message})"
    if "node affinity/selector" in message or "didn't match Pod's node affinity" in message:
        return f"no node matches the pod's node selector, e.g. the GPU type ({message})"
    if "Insufficient cpu" in message or "Insufficient memory" in message:
        return f"not enough CPU or memory on any node ({message})"
    return f"unschedulable: {message}"


def why_pending(pod: JSON | None, events: list[JSON]) -> str:
    """One line saying why a pod (or, with ``pod=None``, a Job's missing pod) is still Pending.

    ``pod`` and ``events`` are API JSON objects. Reads the container's waiting state (image pull
    errors, config errors), the PodScheduled condition (insufficient GPU/CPU, untolerated taints,
    node selectors) and Events (the cluster autoscaler scaling up, quota refusing pod creation).
    """
    for event in events:  # Job-level: the controller could not even create the pod
        if event.get("reason") == "FailedCreate" and "exceeded quota" in (event.get("message") or ""):
            return _one_line(f"quota exceeded: {event.get('message')}")
    if pod is None:
        for event in events:
            if event.get("reason") == "FailedCreate":
                return _one_line(f"cannot create the pod: {event.get('message')}")
        return "waiting for the Job controller to create the pod"
    containers = _get(pod, "spec", "containers") or [{}]
    image = containers[0].get("image", "?")
    for cs in _get(pod, "status", "containerStatuses") or []:
        waiting = _get(cs, "state", "waiting") or {}
        reason = waiting.get("reason")
        if reason in ("ImagePullBackOff", "ErrImagePull", "InvalidImageName"):
            return _one_line(f"cannot pull image {image} ({reason}): {waiting.get('message') or ''}")
        if reason in ("CreateContainerConfigError", "CreateContainerError"):
            return _one_line(f"cannot start the container ({reason}): {waiting.get('message') or ''}")
    scale_up = any(e.get("reason") == "TriggeredScaleUp" for e in events)
    no_scale_up = next((e for e in events if e.get("reason") == "NotTriggerScaleUp"), None)
    message = None
    for cond in _get(pod, "status", "conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            message = cond.get("message") or cond.get("reason") or "not scheduled yet"
    if message is None:
        failed = [e for e in events if e.get("reason") == "FailedScheduling"]
        if failed:
            message = failed[-1].get("message") or "FailedScheduling"
    if message is not None:
        line = _classify_unschedulable(message)
        if scale_up:
            line += "; the cluster autoscaler is adding a node"
        elif no_scale_up is not None:
            line += f"; the autoscaler cannot help: {no_scale_up.get('message')}"
        return _one_line(line)
    for event in events:
        if event.get("reason") in ("FailedMount", "FailedAttachVolume"):
            return _one_line(f"cannot mount a volume: {event.get('message')}")
    if _get(pod, "spec", "nodeName"):
        return "starting: pulling the image or mounting volumes"
    return "waiting to be scheduled"


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
    processes, or a path every node mounts).
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
    ) -> None:
        if api_client is None:
            from rlcloud.k8s.client import api_client_from_kubeconfig

            api_client = api_client_from_kubeconfig()
        self.api_client = api_client
        self.namespace = namespace
        self.image = image
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
            have = (_get(sa, "metadata", "annotations") or {}).get(WORKLOAD_IDENTITY_ANNOTATION)
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
        if name in self._stores:
            return self._stores[name]
        root = self._results_root(name)
        if not root:
            return None
        opener = self._store_opener
        if opener is None:
            from rlcloud.storage import open_store

            opener = open_store
        try:
            store = opener(results_location(root, name))
        except RLCloudError as exc:
            logger.debug("results store for %s unavailable: %s", name, exc)
            return None
        self._stores[name] = store
        return store

    def _results_root(self, name: str) -> str | None:
        if name not in self._results:
            cm = self.applier.read("ConfigMap", config_map_name(name), self.namespace)
            if cm is None:
                return None
            self._results[name] = (cm.get("data") or {}).get(CONFIG_KEY_RESULTS, "")
        return self._results[name] or None

    def _observe(self, name: str) -> _Observed:
        selector = experiment_selector(name)
        jobs = self.applier.list_items("Job", self.namespace, label_selector=selector, what=f"list Jobs of {name}")
        pods = self._list_pods(name, selector)
        return _Observed(jobs={_labels(j).get(LABEL_ROLE, ""): j for j in jobs}, pods=pods)

    def _list_pods(self, name: str, selector: str) -> builtins.list[JSON]:
        return self.applier.list_items("Pod", self.namespace, label_selector=selector, what=f"list Pods of {name}")

    def _learner(self, observed: _Observed) -> tuple[str, JSON] | None:
        for role in _LEARNER_ROLES:
            if role in observed.jobs:
                return role, observed.jobs[role]
        return None

    def _latest_checkpoint(self, store: Store | None) -> str | None:
        if store is None:
            return None
        try:
            return store.read_text("checkpoints/LATEST").strip() or None
        except RLCloudError:
            return None

    # ------------------------------------------------------------------------------------ the verbs

    def start(self, spec: ExperimentSpec, results: str) -> bool:
        """Create the experiment's objects (idempotent: existing identical objects are kept; a paused
        experiment is resumed; objects that differ raise ConflictError). Returns without waiting: True when
        it created or resumed something, False when every Job was there and running already."""
        if not results.startswith("gs://") and not self.local_results:
            raise SpecError(
                [
                    SpecProblem(
                        "results",
                        "an experiment on Kubernetes needs a gs://BUCKET[/PREFIX] results location: its pods "
                        "cannot write to a directory of this machine",
                        results,
                    )
                ]
            )
        self.ensure_namespace()
        objs = build_workloads(
            spec,
            image=spec.image or self.image,
            namespace=self.namespace,
            results=results,
            gpu_type=self.gpu_type,
            service_account=self.service_account,
            credentials_secret=self.credentials_secret,
            kubernetes_version=self.kubernetes_version(),
        )
        suspended: list[str] = []
        created = False
        for obj in objs:
            existing = self.applier.create(obj)
            if obj.kind != "Job":
                continue
            # a Job made just now has no status yet; one that was there has been started by its controller
            created = created or not (existing.get("status") or {}).get("startTime")
            if _suspended(existing):
                suspended.append(obj.metadata.name)
            finished = _job_finished(existing)
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
        events = self._events(observed) if self._anything_pending(observed) else {}
        roles: list[RoleStatus] = []
        for role, job in sorted(observed.jobs.items(), key=lambda kv: _ROLE_ORDER.get(kv[0], 2)):
            roles.extend(self._role_statuses(role, job, observed.pods, events))
        progress: dict[str, Any] = {}
        store = self._store(name)
        if store is not None:
            try:
                from rlcloud.storage import read_progress

                progress = read_progress(store) or {}
            except RLCloudError as exc:
                logger.debug("progress of %s unreadable: %s", name, exc)
        state, message = self._overall(observed, roles, progress)
        return ExperimentStatus(
            name=name, state=state, roles=roles, progress=progress, message=message, backend=self.kind
        )

    def wait(self, name: str, timeout: float | None = None) -> ExperimentStatus:
        """Block until the experiment finishes (watching its Jobs, re-reading the status at least every
        ``watch_window`` seconds and logging changes); rlcloud TimeoutError after ``timeout`` seconds."""
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
                raise RLTimeoutError(
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
        env = [r for r in status.roles if r.role == ENV_SERVER_ROLE]
        if any(r.state in ("pending", "running") for r in env):
            logger.info("%s failed: stopping its env servers", name)
            self._set_suspend(env_server_name(name), True)

    def logs(self, name: str, follow: bool = False) -> Iterator[str]:
        """Every role's log lines as ``role-index | line``. With ``follow``, pods still Pending are waited
        for and followed as they start (retries too) until every Job has finished or is suspended.
        Without pods (finished long ago) the logs saved in the results store are shown."""
        observed = self._observe(name)
        if not observed.jobs and not observed.pods:
            if self._results_root(name) is None:
                raise NotFoundError(self._unknown(name))
            yield from self._stored_logs(name)
            return
        if not follow:
            for pod in sorted(observed.pods, key=self._pod_order):
                if not self._started(pod):
                    continue
                prefix = self._prefix(pod)
                what = f"read the log of pod {_name(pod)}"
                try:
                    text = self.applier.pod_log(_name(pod), self.namespace)
                except k8s.ApiException as exc:
                    if exc.status in (400, 404):  # not started after all, or gone meanwhile
                        continue
                    raise translate(exc, what) from exc
                for line in str(text).splitlines():
                    yield f"{prefix} | {line}"
            return
        yield from self._follow(name, observed)

    def pause(self, name: str) -> None:
        """Suspend the learner (it checkpoints on SIGTERM), wait until its pod is gone and the store
        shows the checkpoint, then suspend the env servers. A finished experiment is left alone."""
        observed = self._observe(name)
        learner = self._learner(observed)
        if learner is None:
            raise NotFoundError(self._unknown(name))
        role, job = learner
        if _job_finished(job):
            logger.info("%s has finished; nothing to pause", name)
            return
        store = self._store(name)
        before = self._latest_checkpoint(store)
        self._set_suspend(_name(job), True)
        deadline = time.monotonic() + self.pause_timeout
        self._wait_pods_gone(name, role, deadline)
        after = self._latest_checkpoint(store)
        while store is not None and after == before and time.monotonic() < deadline:
            time.sleep(self.poll_interval)  # the runner's final sync may land just after its pod is gone
            after = self._latest_checkpoint(store)
        if store is not None and after == before:
            logger.warning(
                "%s: no new checkpoint appeared while pausing; resume() starts from %s",
                name,
                before or "the beginning",
            )
        env_job = observed.jobs.get(ENV_SERVER_ROLE)
        if env_job is not None:
            self._set_suspend(_name(env_job), True)
            self._wait_pods_gone(name, ENV_SERVER_ROLE, time.monotonic() + self.pause_timeout)

    def resume(self, name: str) -> None:
        """Un-suspend the env servers, then the learner, which resumes from the latest checkpoint."""
        observed = self._observe(name)
        if not observed.jobs:
            raise NotFoundError(self._unknown(name))
        for role in (ENV_SERVER_ROLE, *_LEARNER_ROLES):
            job = observed.jobs.get(role)
            if job is not None and _suspended(job):
                self._set_suspend(_name(job), False)

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

    def list(self) -> list[str]:
        """Names of the experiments in the namespace (from their spec ConfigMaps)."""
        cms = self.applier.list_items(
            "ConfigMap",
            self.namespace,
            label_selector=f"{experiment_selector()},{LABEL_ROLE}={CONFIG_ROLE}",
            what="list experiments",
        )
        return sorted({_labels(cm).get(LABEL_EXPERIMENT, "") for cm in cms} - {""})

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
        while True:
            live = [p for p in self._list_pods(name, selector) if _live(p)]
            if not live:
                return
            if time.monotonic() >= deadline:
                raise RLTimeoutError(
                    f"{len(live)} pod(s) of {name} still running after the wait: "
                    + ", ".join(_name(p) for p in live[:5])
                )
            time.sleep(self.poll_interval)

    @staticmethod
    def _anything_pending(observed: _Observed) -> bool:
        if any(_phase(p) == "Pending" for p in observed.pods):
            return True
        # a Job that wants pods but has none (quota, admission): its events say why
        return any(
            not _job_finished(job) and not _suspended(job) and not _get(job, "status", "active")
            for job in observed.jobs.values()
        )

    def _events(self, observed: _Observed) -> dict[str, builtins.list[JSON]]:
        """Events of the experiment's Pods and Jobs, by object name (one list call)."""
        names = {_name(p) for p in observed.pods} | {_name(j) for j in observed.jobs.values()}
        try:
            items = self.applier.list_items("Event", self.namespace, what="list events")
        except RLCloudError as exc:  # events are a nicety: a status without them is still a status
            logger.debug("cannot list events: %s", exc)
            return {}
        out: dict[str, builtins.list[JSON]] = {}
        for event in items:
            involved = _get(event, "involvedObject", "name")
            if involved is not None and involved in names:
                out.setdefault(involved, []).append(event)
        return out

    def _role_statuses(
        self, role: str, job: JSON, pods: builtins.list[JSON], events: dict[str, builtins.list[JSON]]
    ) -> builtins.list[RoleStatus]:
        job_name = _name(job)
        job_pods = [
            p for p in pods if job_name in (_labels(p).get("batch.kubernetes.io/job-name"), _labels(p).get("job-name"))
        ]
        count = int(_get(job, "spec", "completions") or 1)
        by_index: dict[int, builtins.list[JSON]] = {}
        for pod in job_pods:
            by_index.setdefault(_pod_index(pod), []).append(pod)
        finished = _job_finished(job)
        failed_cond = _condition(job, "Failed") or _condition(job, "FailureTarget")
        completed = _parse_indexes(_get(job, "status", "completedIndexes"))
        failed_indexes = _parse_indexes(_get(job, "status", "failedIndexes"))
        job_events = events.get(job_name, [])
        out = []
        for index in range(count):
            candidates = sorted(by_index.get(index, []), key=_pod_sort_key)
            current = candidates[-1] if candidates else None
            phase = _phase(current) if current is not None else None
            restarts = sum(1 for p in candidates if p is not current and _phase(p) == "Failed")
            for p in candidates:
                restarts += sum(int(cs.get("restartCount") or 0) for cs in _get(p, "status", "containerStatuses") or [])
            exit_code = _exit_code(current) if current is not None else None
            reason: str | None = None
            state: RoleState
            if finished == "succeeded" or index in completed or phase == "Succeeded":
                state = "succeeded"
            elif finished == "failed":
                state = "failed"
                reason = (
                    _one_line(failed_cond.get("message") or failed_cond.get("reason") or "the Job failed")
                    if failed_cond
                    else None
                )
            elif index in failed_indexes:  # out of backoffLimitPerIndex: not replaced again
                state = "failed"
                reason = f"failed {restarts + 1} times (last exit code {exit_code}); not retried again"
            elif _suspended(job):
                state = "suspended"
            elif current is None:
                state = "pending"
                reason = why_pending(None, job_events)
            elif phase == "Pending":
                state = "pending"
                reason = why_pending(current, events.get(_name(current), []) + job_events)
            elif phase == "Running":
                state = "running"
            elif phase == "Failed":
                state = "pending"  # the Job controller replaces it (within the backoff budget)
                reason = f"restarting: the previous pod exited with code {exit_code}"
            else:
                state = "unknown"
            out.append(
                RoleStatus(role=role, index=index, state=state, restarts=restarts, exit_code=exit_code, reason=reason)
            )
        return out

    def _overall(
        self, observed: _Observed, roles: builtins.list[RoleStatus], progress: dict[str, Any]
    ) -> tuple[ExperimentState, str | None]:
        learner = self._learner(observed)
        if learner is None:
            # the Jobs are gone (deleted after ttlSecondsAfterFinished, or by hand): ask the store
            recorded = progress.get("state")
            if recorded in ("succeeded", "failed", "stopped"):
                return recorded, "the Jobs have been cleaned up; results are in the store"
            return "unknown", "no Jobs left for this experiment (finished long ago, or deleted)"
        role, job = learner
        finished = _job_finished(job)
        learner_status = next((r for r in roles if r.role == role), None)
        if finished == "succeeded":
            return "succeeded", None
        if finished == "failed":
            return "failed", learner_status.reason if learner_status else None
        if _suspended(job):
            return "paused", None
        if learner_status is not None and learner_status.state == "running":
            pending = next((r for r in roles if r.state == "pending" and r.reason), None)
            return "running", (f"{pending.label}: {pending.reason}" if pending else None)
        pending = next((r for r in roles if r.state == "pending" and r.reason), None)
        return "pending", (f"{pending.label}: {pending.reason}" if pending else None)

    # -- logs ----------------------------------------------------------------------------------------

    @staticmethod
    def _started(pod: JSON) -> bool:
        if _phase(pod) != "Pending":
            return True
        return any(
            _get(cs, "state", "running") or _get(cs, "state", "terminated")
            for cs in _get(pod, "status", "containerStatuses") or []
        )

    @staticmethod
    def _prefix(pod: JSON) -> str:
        return f"{_labels(pod).get(LABEL_ROLE, 'pod')}-{_pod_index(pod)}"

    @staticmethod
    def _pod_order(pod: JSON) -> tuple[int, int, str]:
        created = str(_get(pod, "metadata", "creationTimestamp") or "")
        return _ROLE_ORDER.get(_labels(pod).get(LABEL_ROLE, ""), 2), _pod_index(pod), created

    def _stored_logs(self, name: str) -> Iterator[str]:
        store = self._store(name)
        if store is None:
            return
        from rlcloud.storage import read_logs

        for label, text in sorted(read_logs(store).items()):
            for line in text.splitlines():
                yield f"{label} | {line}"

    def _follow(self, name: str, observed: _Observed) -> Iterator[str]:
        lines: queue.Queue[tuple[str, str | None]] = queue.Queue()
        stop = threading.Event()
        followed: set[str] = set()
        active: set[str] = set()
        responses: list[Any] = []
        lock = threading.Lock()

        def follow(pod_name: str, prefix: str) -> None:
            buffer = b""
            try:
                resp = self.applier.follow_log(pod_name, self.namespace).response
                with lock:
                    responses.append(resp)
                for chunk in resp.stream(amt=None, decode_content=False):
                    if stop.is_set():
                        break
                    buffer += chunk
                    *complete, buffer = buffer.split(b"\n")
                    for raw in complete:
                        lines.put((prefix, raw.decode("utf-8", errors="replace")))
                if buffer and not stop.is_set():
                    lines.put((prefix, buffer.decode("utf-8", errors="replace")))
                resp.release_conn()
            except Exception as exc:  # the pod went away, or the stream broke: the poll loop decides
                logger.debug("log stream of %s ended: %s", pod_name, type(exc).__name__)
                if isinstance(exc, k8s.ApiException) and exc.status == 400:
                    with lock:
                        followed.discard(pod_name)  # not started after all: follow it again later
            finally:
                lines.put((pod_name, None))

        try:
            while True:
                for pod in sorted(observed.pods, key=self._pod_order):
                    pod_name = _name(pod)
                    if pod_name in followed or not self._started(pod):
                        continue
                    with lock:
                        followed.add(pod_name)
                        active.add(pod_name)
                    threading.Thread(
                        target=follow, args=(pod_name, self._prefix(pod)), name=f"logs-{pod_name}", daemon=True
                    ).start()
                deadline = time.monotonic() + self.poll_interval
                while (remaining := deadline - time.monotonic()) > 0:
                    try:
                        prefix, line = lines.get(timeout=remaining)
                    except queue.Empty:
                        break
                    if line is None:
                        with lock:
                            active.discard(prefix)
                    else:
                        yield f"{prefix} | {line}"
                ended = all(_job_finished(j) or _suspended(j) for j in observed.jobs.values())
                with lock:
                    idle = not active
                if ended and idle and lines.empty():
                    return
                observed = self._observe(name)
                if not observed.jobs and not observed.pods:
                    return
        finally:
            stop.set()
            with lock:
                for resp in responses:
                    with contextlib.suppress(Exception):
                        resp.close()


def _parse_indexes(text: str | None) -> set[int]:
    """``"0-2,5"`` -> {0, 1, 2, 5} (Job status.completedIndexes)."""
    out: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.update(range(int(lo), int(hi) + 1))
        else:
            out.add(int(part))
    return out
