"""KubernetesBackend: experiments as Jobs on any Kubernetes cluster, over one ``ApiClient``.

Everything the backend needs is read back from the cluster (labels + the spec ConfigMap) and the
results store, so ``attach``/``status``/``logs``/``stop`` work from another machine too.

Requests per verb (constant in the number of workers; see benchmarks/k8s_submit.py):

- ``start``: GET /version and the namespace checks once per backend instance, then one create per
  object (2 for single/multi-threaded, 4 for distributed);
- ``status``: list Jobs + list Pods (+ the ConfigMap once, + Events while something is Pending);
- ``stop``: three delete-collection calls (Jobs with foreground propagation, Services, ConfigMaps),
  then Pod lists until the pods are gone.

The class is composed of its halves (the backend contract's core and its sweep capability,
rlcloud.backend): :class:`KubernetesExperiments` here (the experiment verbs), :class:`KubernetesSweeps
<rlcloud.k8s.sweeps.KubernetesSweeps>` (a sweep as one ConfigMap and ONE Indexed Job), over
:class:`KubernetesNamespace <rlcloud.k8s.namespace.KubernetesNamespace>` (the client, the namespace, the
pods' settings).

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
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from kubernetes import client as k8s
from urllib3.exceptions import HTTPError as Urllib3Error

from rlcloud.backend import ExperimentBackend, ExperimentStatus, RoleStatus
from rlcloud.errors import NotFoundError, RLCloudError, WaitTimeoutError
from rlcloud.k8s import logs as pod_logs
from rlcloud.k8s.applier import path_for
from rlcloud.k8s.builders import (
    CONFIG_KEY_RESULTS,
    CONFIG_KEY_SPEC,
    CONFIG_ROLE,
    LABEL_EXPERIMENT,
    LABEL_ROLE,
    build_workloads,
    config_map_name,
    env_server_name,
    experiment_selector,
)
from rlcloud.k8s.namespace import KubernetesNamespace
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
    measured_cost,
    overall,
    role_rank,
    role_statuses,
)
from rlcloud.k8s.status import name as object_name
from rlcloud.k8s.sweeps import KubernetesSweeps
from rlcloud.layout import LATEST, ProgressRecord
from rlcloud.roles import LEARNER, LEARNER_ROLES, Role, role_selector
from rlcloud.stored import MAX_NAME_RECORD_BYTES
from rlcloud.waiting import poll_until, sleep_until

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec
    from rlcloud.storage import Store

__all__ = ["KubernetesBackend", "KubernetesExperiments"]

logger = logging.getLogger(__name__)


class KubernetesExperiments(KubernetesNamespace, ExperimentBackend):
    """The experiment verbs: each experiment as Jobs (and a Service) in the namespace."""

    def _store(self, name: str) -> Store | None:
        """The experiment's results store (opened once per experiment: a GCS client is not cheap)."""
        if name not in self._stores:
            store = self._open_store(self._results_root(name), name)
            if store is None:
                return None
            self._stores[name] = store
        return self._stores[name]

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
            return store.read_record_bytes(LATEST, MAX_NAME_RECORD_BYTES).decode().strip() or None
        except RLCloudError:
            return None

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
        with self.applier.undo_on_failure():  # a Job refused or lost: no ConfigMap or Service left behind
            for obj in objs:
                existing = self.applier.create(obj)
                if obj.kind != "Job":
                    continue
                # a Job made just now has no status yet; one that was there has been started by its controller
                created = created or not (existing.get("status") or {}).get("startTime")
                self._update_budget(obj, existing)
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
        progress = ProgressRecord()
        store = self._store(name)
        if store is not None:
            try:
                from rlcloud.storage import read_progress

                progress = read_progress(store) or ProgressRecord()
            except RLCloudError as exc:
                logger.debug("progress of %s unreadable: %s", name, exc)
        state, message = overall(observed.jobs, roles, progress)
        found = learner(observed.jobs)
        return ExperimentStatus(
            name=name,
            state=state,
            roles=roles,
            progress=progress,
            message=message,
            backend=self.kind,
            cost_usd=measured_cost(found[1]) if found else None,
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
            sleep_until(None, window)
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
            sleep_until(started + window, self.poll_interval)

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

    def _update_budget(self, obj: Any, existing: JSON) -> None:
        """A Job that was there already gets the spec's budget (the in-cluster reaper reads it), and one stopped
        by its budget loses that mark: starting it again (with a larger budget) resumes it."""
        from rlcloud.budget import ANNOTATION_BUDGET, ANNOTATION_BUDGET_STATE, ANNOTATION_STOP_REASON

        wanted = (obj.metadata.annotations or {}).get(ANNOTATION_BUDGET)
        have = get(existing, "metadata", "annotations") or {}
        if have.get(ANNOTATION_BUDGET) == wanted and have.get(ANNOTATION_BUDGET_STATE) != "stopped":
            return
        marks = {ANNOTATION_BUDGET: wanted, ANNOTATION_BUDGET_STATE: None, ANNOTATION_STOP_REASON: None}
        self.applier.patch(
            "Job", obj.metadata.name, self.namespace, {"metadata": {"annotations": marks}}, what="update the budget"
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


class KubernetesBackend(KubernetesExperiments, KubernetesSweeps):
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
