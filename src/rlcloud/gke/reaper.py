"""The in-cluster reaper: ``python -m rlcloud.gke.reaper`` deletes its own GKE cluster when it is due.

A CronJob (:mod:`rlcloud.k8s.reaper_builders`) runs it every 5 minutes on clusters whose spec has a
``ttl``, an ``autodown`` or a ``budget``, so a cluster goes away even when no rlcloud client is running (the laptop
closed). Each run:

1. learns its project, location and cluster name from the GCE metadata server;
2. reads the cluster's labels through the Container API: ``managed-by=rlcloud`` (a cluster rlcloud did
   not create is never deleted), ``expiry`` (unix seconds, from ``ttl``) and ``autodown`` (idle seconds);
3. lists rlcloud's Jobs and pods (label ``app.kubernetes.io/managed-by=rlcloud``, experiments and sweeps
   alike) in every namespace but its own, to know whether anything runs and when the last one ended;
4. decides with :func:`decide` (pure), writes the decision into the ConfigMap ``rlcloud-reaper`` of its
   namespace (``kubectl -n rlcloud-system get configmap rlcloud-reaper -o yaml`` shows why a cluster is
   about to go), and when due asks the Container API to delete the cluster; the outcome of that request
   (requested, or refused with the error: a missing permission) goes into the ConfigMap and an Event.

The rules (docs/gke-setup.md, "Teardown inside the cluster"):

* ``ttl`` is a hard lifetime, a spending cap: once the expiry label lies in the past the cluster is
  deleted **even while experiments run**. They checkpoint to the results store and resume from their
  latest checkpoint when started again (on another cluster). A ttl that could be postponed forever by a
  stuck experiment would not cap anything.
* ``autodown`` is idle teardown: it never deletes while an rlcloud Job is unfinished (and not paused; a
  sweep suspended in a Kueue queue is waiting, not paused) or an rlcloud pod is Pending or Running. A Job
  waiting for a GPU node or for Kueue counts as running: the ttl is the cap for that. The idle time
  counts from the latest of the cluster's creation and the last activity seen (a Job started, finished,
  paused; a pod started or ended). Activity that cannot be read (the
  Kubernetes API refuses the lists) counts as running.
* A label that is no number of seconds (milliseconds, words, negative, 40 digits) acts as absent: an
  unreadable ``expiry`` never deletes the cluster (the owner sees a warning in ``rlcloud cluster list``
  and in the ConfigMap's ``problems``), an unreadable ``autodown`` never idles it out, and the other
  label still acts.
* Deleting is idempotent: a cluster already being deleted (STOPPING) or gone is left alone, and a cluster
  busy with another operation (an upgrade) is tried again on the next run.
* Money budgets (:mod:`rlcloud.gke.budgets`, decisions in :mod:`rlcloud.budget`): each run prices rlcloud's
  pods from their nodes, warns at 90% of a run's or sweep's budget and stops it (Job ``spec.suspend``: the
  runner checkpoints on SIGTERM) at 100%; a cluster over its ``budget-cents`` label has its runs stopped and
  is deleted once their pods are gone.

Environment overrides (for tests and odd set-ups): ``RLCLOUD_METADATA_HOST`` (``host:port`` of the
metadata server), ``RLCLOUD_KUBE_API`` (a Kubernetes API URL instead of the in-cluster configuration),
``RLCLOUD_GKE_EMULATOR_HOST`` (a gRPC Container API fake), ``RLCLOUD_REAPER_NAMESPACE``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlcloud.budget import ANNOTATION_BUDGET_STATE
from rlcloud.display import span
from rlcloud.timestamps import rfc3339_seconds
from rlcloud.waiting import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from rlcloud.gke.budgets import Budgets

__all__ = [
    "Activity",
    "ClusterIdentity",
    "Decision",
    "ReaperRun",
    "activity",
    "api_server_time",
    "checked_now",
    "decide",
    "main",
    "metadata_identity",
    "run_budgets_only",
    "run_once",
]

log = logging.getLogger("rlcloud.gke.reaper")

METADATA_HOST_ENV = "RLCLOUD_METADATA_HOST"
KUBE_API_ENV = "RLCLOUD_KUBE_API"
NAMESPACE_ENV = "RLCLOUD_REAPER_NAMESPACE"
DEFAULT_METADATA_HOST = "metadata.google.internal"
_METADATA_PATHS = {
    "project": "/computeMetadata/v1/project/project-id",
    "name": "/computeMetadata/v1/instance/attributes/cluster-name",
    "location": "/computeMetadata/v1/instance/attributes/cluster-location",
}
_MANAGED_SELECTOR = "app.kubernetes.io/managed-by=rlcloud"
_KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
_FINISHED_CONDITIONS = {"Complete", "Failed"}
_LIVE_PHASES = {"Pending", "Running"}


# ---------------------------------------------------------------------------------------------- decisions


@dataclass(frozen=True)
class Decision:
    """What one reaper run decided: delete the cluster or keep it, and why.

    ``due``: when the cluster would be deleted if nothing changes (unix seconds), None when never.
    """

    delete: bool
    reason: str
    due: float | None = None

    @property
    def action(self) -> str:
        """``delete`` or ``keep``."""
        return "delete" if self.delete else "keep"


def _when(seconds: float) -> str:
    return _dt.datetime.fromtimestamp(seconds, _dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def decide(
    now: float,
    *,
    created: float | None,
    expiry: float | None,
    autodown: float | None,
    last_activity: float | None,
    running: int,
    managed: bool = True,
    deleting: bool = False,
) -> Decision:
    """Whether to delete the cluster now (pure: every input is given).

    Args:
        now: the current time, unix seconds.
        created: when the cluster was created (unix seconds), None when unknown.
        expiry: the ttl's expiry (unix seconds), None without a ttl.
        autodown: the idle time after which the cluster goes (seconds), None without autodown.
        last_activity: the latest time an rlcloud workload started, ended or paused, None when none ever ran.
        running: how many rlcloud workloads run (unfinished, unpaused Jobs; Pending or Running pods).
        managed: the cluster carries ``managed-by=rlcloud``; when False it is never deleted.
        deleting: the cluster is already being deleted (STOPPING).

    Returns:
        The decision and its reason. The ttl deletes whatever runs; autodown waits for running
        workloads; unknown creation and activity times never count as idle.
    """
    if not managed:
        return Decision(False, "not made by rlcloud (no label managed-by=rlcloud): the reaper never deletes it")
    if deleting:
        return Decision(False, "already being deleted")
    if expiry is not None and now >= expiry:
        busy = (
            f"; {running} running rlcloud workload(s) stop and resume from their latest checkpoint" if running else ""
        )
        return Decision(True, f"ttl expired at {_when(expiry)}{busy}", expiry)
    if autodown is None:
        if expiry is None:
            return Decision(False, "no ttl and no autodown label: nothing to do")
        return Decision(False, f"ttl expires at {_when(expiry)} (in {span(expiry - now, 'compact')})", expiry)
    if running:
        until = f"; ttl expires at {_when(expiry)}" if expiry is not None else ""
        return Decision(False, f"{running} rlcloud workload(s) running: idle teardown postponed{until}", expiry)
    known = [t for t in (created, last_activity) if t is not None]
    if not known:
        return Decision(False, "creation time unknown and no activity seen: not counted as idle", expiry)
    idle_since = max(known)
    due = idle_since + autodown
    if expiry is not None:
        due = min(due, expiry)
    idle = now - idle_since
    since = (
        "creation" if last_activity is None or (created is not None and created >= last_activity) else "last activity"
    )
    if idle >= autodown:
        return Decision(
            True, f"idle for {span(idle, 'compact')} since {since} (autodown {span(autodown, 'compact')})", due
        )
    return Decision(
        False, f"idle for {span(idle, 'compact')} since {since}; autodown after {span(autodown, 'compact')}", due
    )


# ----------------------------------------------------------------------------------------------- activity


@dataclass(frozen=True)
class Activity:
    """What rlcloud runs in the cluster: how many workloads, and the latest start/end/pause seen."""

    running: int
    last: float | None
    running_names: tuple[str, ...] = ()


def _job_running(job: Mapping[str, Any]) -> bool:
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") in _FINISHED_CONDITIONS and condition.get("status") == "True":
            return False
    if not (job.get("spec") or {}).get("suspend"):
        return True
    # suspended: a paused experiment holds no pods and does not keep the cluster up, but a sweep waiting
    # in a Kueue queue is work to come (Kueue un-suspends it when the queue has quota); one its budget
    # stopped (rlcloud.gke.budgets) is not: it stays suspended until someone resumes it with a larger budget
    return _queue(job) is not None and not _budget_stopped(job)


def _budget_stopped(job: Mapping[str, Any]) -> bool:
    """The Job was suspended by its money budget (the reaper's ``rlcloud.io/budget-state: stopped``)."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    return annotations.get(ANNOTATION_BUDGET_STATE) == "stopped"


def _queue(job: Mapping[str, Any]) -> str | None:
    """The Kueue LocalQueue a Job was submitted to (its ``kueue.x-k8s.io/queue-name`` label), or None."""
    value = ((job.get("metadata") or {}).get("labels") or {}).get(_KUEUE_QUEUE_LABEL)
    return str(value) if value else None


def _job_times(job: Mapping[str, Any]) -> Iterable[float | None]:
    status = job.get("status") or {}
    yield rfc3339_seconds((job.get("metadata") or {}).get("creationTimestamp"))
    yield rfc3339_seconds(status.get("startTime"))
    yield rfc3339_seconds(status.get("completionTime"))
    for condition in status.get("conditions") or []:
        yield rfc3339_seconds(condition.get("lastTransitionTime"))


def _pod_times(pod: Mapping[str, Any]) -> Iterable[float | None]:
    status = pod.get("status") or {}
    yield rfc3339_seconds((pod.get("metadata") or {}).get("creationTimestamp"))
    yield rfc3339_seconds(status.get("startTime"))
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated") or {}
        yield rfc3339_seconds(terminated.get("finishedAt"))


def activity(jobs: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]], *, own_namespace: str) -> Activity:
    """Count running rlcloud workloads and find the latest activity (pure).

    Objects in ``own_namespace`` (the reaper's own Jobs and pods) are ignored: they run every 5 minutes
    and would otherwise keep every cluster busy forever.
    """
    running: list[str] = []
    times: list[float] = []

    def ours(obj: Mapping[str, Any]) -> bool:
        return (obj.get("metadata") or {}).get("namespace") != own_namespace

    for job in filter(ours, jobs):
        meta = job.get("metadata") or {}
        if _job_running(job):
            queued = (job.get("spec") or {}).get("suspend") and _queue(job)
            waiting = f" (queued in Kueue queue {queued})" if queued else ""
            running.append(f"job {meta.get('namespace')}/{meta.get('name')}{waiting}")
        times += [t for t in _job_times(job) if t is not None]
    for pod in filter(ours, pods):
        meta = pod.get("metadata") or {}
        if (pod.get("status") or {}).get("phase", "Pending") in _LIVE_PHASES:
            running.append(f"pod {meta.get('namespace')}/{meta.get('name')}")
        times += [t for t in _pod_times(pod) if t is not None]
    return Activity(len(running), max(times) if times else None, tuple(running))


# ----------------------------------------------------------------------------------------------- identity


@dataclass(frozen=True)
class ClusterIdentity:
    """Which cluster the reaper runs in."""

    project: str
    location: str
    name: str


def metadata_identity(host: str | None = None, *, timeout: float = 5.0, attempts: int = 3) -> ClusterIdentity:
    """Project, location and cluster name from the GCE metadata server (GKE's serves them to pods too).

    ``host``: ``host[:port]`` (default ``$RLCLOUD_METADATA_HOST``, else ``metadata.google.internal``).
    Raises :class:`~rlcloud.errors.BackendError` when the server cannot be read.
    """
    from rlcloud.errors import BackendError
    from rlcloud.waiting import Backoff, retry

    host = host or os.environ.get(METADATA_HOST_ENV) or DEFAULT_METADATA_HOST
    values: dict[str, str] = {}
    for key, path in _METADATA_PATHS.items():
        url = f"http://{host}{path}"
        request = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})

        def read(url: str = url, request: urllib.request.Request = request) -> str:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                # only the metadata server answers with this header: anything else is not to be trusted
                if response.headers.get("Metadata-Flavor") != "Google":
                    raise BackendError(f"{url} did not answer as a metadata server (no Metadata-Flavor: Google)")
                return str(response.read(4096).decode("utf-8").strip())

        try:
            # a connection error is worth another try (the metadata server restarts with the node's agent)
            values[key] = retry(
                read,
                retryable=lambda exc: isinstance(exc, urllib.error.URLError | OSError),
                backoff=Backoff(0.5, 1.0),
                attempts=attempts,
            )
        except (urllib.error.URLError, OSError) as exc:
            raise BackendError(f"cannot read {url} from the metadata server: {exc}") from exc
    if not all(values.values()):
        raise BackendError(f"the metadata server gave an empty value: {sorted(k for k, v in values.items() if not v)}")
    return ClusterIdentity(project=values["project"], location=values["location"], name=values["name"])


# ---------------------------------------------------------------------------------------------- one run


def _kube_api_client() -> Any:
    from kubernetes import client, config

    url = os.environ.get(KUBE_API_ENV)
    configuration = type.__call__(client.Configuration)  # never the library's global default
    if url:
        configuration.host = url
    else:
        config.load_incluster_config(client_configuration=configuration)
    return client.ApiClient(configuration=configuration)


def _record(applier: Any, namespace: str, data: dict[str, str]) -> None:
    """Write the decision into the ConfigMap (create, else merge-patch its data)."""
    from kubernetes import client as k8s

    from rlcloud.k8s.applier import path_for
    from rlcloud.k8s.reaper_builders import LABEL_COMPONENT, REAPER_COMPONENT, REAPER_CONFIG_MAP

    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": REAPER_CONFIG_MAP,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "rlcloud", LABEL_COMPONENT: REAPER_COMPONENT},
        },
        "data": data,
    }
    what = f"write ConfigMap {REAPER_CONFIG_MAP}"
    try:
        applier.request_json(what, "POST", path_for("ConfigMap", namespace), body=body)
    except k8s.ApiException as exc:
        if exc.status != 409:
            raise
        applier.request_json(
            what,
            "PATCH",
            path_for("ConfigMap", namespace, REAPER_CONFIG_MAP),
            body={"data": data},
            content_type="application/merge-patch+json",
        )


#: what the reaper's Google service account needs (docs/gke-setup.md, "Teardown inside the cluster")
REAPER_PERMISSIONS = "container.clusters.get, container.clusters.delete and container.operations.get"
#: the Event reasons of a reap attempt: the delete was requested, or it (or reading the cluster) failed
EVENT_DELETE = "ClusterDelete"
EVENT_FAILED = "ClusterDeleteFailed"
#: an error recorded in the ConfigMap and the Event is cut to this many characters
_MAX_ERROR = 600


#: the Event reason of a cluster at 90% of its budget
EVENT_BUDGET_WARNING = "BudgetWarning"


def _previous(applier: Any, namespace: str) -> dict[str, str]:
    """The data of the reaper's ConfigMap as the last run left it (empty when absent or unreadable)."""
    from rlcloud.k8s.applier import path_for
    from rlcloud.k8s.reaper_builders import REAPER_CONFIG_MAP

    try:
        found = applier.checked_json(
            "read the reaper's ConfigMap", "GET", path_for("ConfigMap", namespace, REAPER_CONFIG_MAP)
        )
    except Exception:
        return {}
    return {str(k): str(v) for k, v in (found.get("data") or {}).items()}


def _event(applier: Any, namespace: str, reason: str, message: str, now: float) -> None:
    from rlcloud.gke.budgets import warning_event
    from rlcloud.k8s.applier import path_for
    from rlcloud.k8s.reaper_builders import REAPER_CONFIG_MAP

    involved = {"apiVersion": "v1", "kind": "ConfigMap", "name": REAPER_CONFIG_MAP}
    body = warning_event(namespace, f"rlcloud-reaper.{int(now)}", involved, reason, message, now)
    applier.request_json("record the reaper's event", "POST", path_for("Event", namespace), body=body)


def _refused(exc: BaseException) -> str:
    """The outcome line of a refused call: the error, and what the reaper's identity needs when it is one."""
    from rlcloud.errors import AuthError

    text = " ".join(str(exc).split())
    if len(text) > _MAX_ERROR:
        text = text[: _MAX_ERROR - 3] + "..."
    hint = ""
    if isinstance(exc, AuthError):
        hint = (
            f"; the reaper's Google service account needs {REAPER_PERMISSIONS} "
            "(docs/gke-setup.md, Teardown inside the cluster)"
        )
    return f"refused: {text}{hint}"


def _delete_cluster(client: Any, identity: ClusterIdentity) -> tuple[str, Exception | None]:
    """Ask the Container API to delete the cluster, without waiting (this pod goes with it).

    Returns the outcome line, and the error when the request was refused (a missing permission, an API
    error): the caller records both before the run fails.
    """
    from rlcloud.errors import NotFoundError, RLCloudError
    from rlcloud.gke.builders import cluster_path
    from rlcloud.gke.errors import ClusterBusyError, api_errors

    path = cluster_path(identity.project, identity.location, identity.name)
    try:
        with api_errors(project=identity.project, action=f"delete cluster {identity.name}"):
            operation = client.delete_cluster(name=path)
    except NotFoundError:
        return "already gone", None
    except ClusterBusyError as exc:
        return f"busy with another operation, tried again on the next run ({exc})", None
    except RLCloudError as exc:
        return _refused(exc), exc
    return f"delete requested ({getattr(operation, 'name', '') or 'operation'})", None


def _record_failure(applier: Any, namespace: str, now: float, data: dict[str, str], message: str) -> None:
    """Write a failed run into the ConfigMap and an Event; a failure to record is logged, never raised."""
    try:
        _record(applier, namespace, data)
        _event(applier, namespace, EVENT_FAILED, message, now)
    except Exception as exc:
        log.warning("could not record the failure in ConfigMap %s/rlcloud-reaper: %s", namespace, exc)


#: Seconds this pod's clock may run ahead of the Kubernetes API server's before the server's is taken.
CLOCK_SKEW_S = 120.0


def api_server_time(applier: Any) -> float | None:
    """The Kubernetes API server's clock (the ``Date`` header of its ``/version`` answer, RFC 9110 section 6.6.1:
    whole seconds); None when it cannot be read."""
    import email.utils

    try:
        response = applier.send("GET", "/version", timeout=10)
        date = response.getheader("Date")
        response.read()
        return email.utils.parsedate_to_datetime(date).timestamp() if date else None
    except Exception as exc:  # no answer, no header, a malformed one: this pod's clock goes unchecked
        log.debug("cannot read the API server's clock: %s", exc)
        return None


def checked_now(local: float, server: float | None) -> float:
    """The time a reaper run prices and decides with (pure): this pod's clock, unless it runs more than
    :data:`CLOCK_SKEW_S` ahead of the API server's (a stepped node clock, a resumed VM), then the server's. Pods'
    start times are the API server's: a clock stepped 2 hours forward would charge every run 2 hours it never ran
    (and could stop it, or delete the cluster at its ttl). A clock behind counts less, never more."""
    if server is not None and local > server + CLOCK_SKEW_S:
        ahead = local - server
        log.warning("this pod's clock is %.0f s ahead of the Kubernetes API server's: deciding with its clock", ahead)
        return server
    return local


def _run_budgets(applier: Any, namespace: str, now: float, dry_run: bool) -> dict[str, str]:
    """Runs' and sweeps' budgets alone (Kubernetes calls only: :func:`rlcloud.gke.budgets.enforce_run_budgets`);
    the ConfigMap lines it leaves. Never raises: what failed is a problem recorded."""
    from rlcloud.gke.budgets import enforce_run_budgets

    query = {"labelSelector": _MANAGED_SELECTOR}

    def list_pods() -> list[Any]:
        return list(applier.checked_json("list rlcloud pods", "GET", "/api/v1/pods", query=query).get("items") or [])

    try:
        jobs = applier.checked_json("list rlcloud Jobs", "GET", "/apis/batch/v1/jobs", query=query).get("items") or []
        nodes = applier.checked_json("list nodes", "GET", "/api/v1/nodes").get("items") or []
        report = enforce_run_budgets(
            applier,
            jobs=list(jobs),
            pods=list_pods(),
            nodes=list(nodes),
            now=now,
            own_namespace=namespace,
            dry_run=dry_run,
            list_pods=list_pods,
        )
    except Exception as exc:  # recorded where a user looks: a budget that cannot act is never silent
        log.warning("runs' budgets not enforced this run: %s", exc)
        return {"budget_problems": f"runs' budgets not enforced this run: {exc}"[:_MAX_ERROR]}
    return {
        "budget_runs": json.dumps(report.lines[:50]),
        "budget_stopped": json.dumps(report.stopped[:50]),
        "budget_problems": "; ".join(report.problems)[:2000],
    }


def run_budgets_only(
    *,
    now: float | None = None,
    api_client: Any = None,
    namespace: str | None = None,
    dry_run: bool = False,
    clock: Clock = SYSTEM_CLOCK,
) -> Decision:
    """A reaper without a Google identity (``--runs-only``): it enforces runs' and sweeps' budgets with Kubernetes
    permissions alone (its ServiceAccount's RBAC: :mod:`rlcloud.k8s.reaper_builders`) and never reads or deletes
    the cluster. Records what it did in the ConfigMap; returns a ``keep`` decision. ``now`` (tests): the time
    to decide at; None: ``clock``'s, checked against the API server's (:func:`checked_now`)."""
    from rlcloud.k8s.applier import Applier
    from rlcloud.k8s.reaper_builders import REAPER_NAMESPACE

    namespace = namespace or os.environ.get(NAMESPACE_ENV) or REAPER_NAMESPACE
    applier = Applier(api_client or _kube_api_client())
    now = checked_now(clock.time(), api_server_time(applier)) if now is None else now
    budgets = _run_budgets(applier, namespace, now, dry_run)
    reason = (
        "runs' and sweeps' budgets only: no Google identity to read or delete the cluster (its ttl, autodown "
        "and budget are not enforced here; docs/gke-setup.md#7-teardown-inside-the-cluster)"
    )
    data = {"decision": "keep", "reason": reason, "checked": _when(now), **budgets}
    try:
        _record(applier, namespace, data)
    except Exception as exc:
        log.warning("could not record the run in ConfigMap %s/rlcloud-reaper: %s", namespace, exc)
    log.info("runs-only reaper: %s", budgets.get("budget_runs") or "no run with a budget")
    return Decision(False, reason)


def run_once(
    *,
    now: float | None = None,
    identity: ClusterIdentity | None = None,
    container_client: Any = None,
    api_client: Any = None,
    namespace: str | None = None,
    dry_run: bool = False,
    clock: Clock = SYSTEM_CLOCK,
) -> Decision:
    """One reaper run: read, decide, record, and delete the cluster when due. Returns the decision.

    ``now``: the time to decide at (tests); None: ``clock``'s, checked against the Kubernetes API server's
    (:func:`checked_now`: a node clock stepped forward never charges runs for time they did not run, nor ends a
    ttl early). Every client defaults to what a pod of the CronJob has (metadata server, Workload Identity, in-cluster
    Kubernetes configuration); tests pass fakes. ``dry_run`` records the decision but deletes nothing.

    Every attempt's outcome goes into the ConfigMap (``outcome``: "delete requested (...)", "already gone",
    "busy ...", or "refused: <error>"). When reading the cluster or a due delete is refused (say, the reaper's
    Google service account lacks ``container.clusters.delete``), the ConfigMap and a Warning Event
    (``ClusterDeleteFailed``) record the error, and the error is raised: the run fails.
    """
    from rlcloud.gke.project import GkeProject
    from rlcloud.k8s.applier import Applier
    from rlcloud.k8s.reaper_builders import REAPER_NAMESPACE

    identity = identity or metadata_identity()
    # Workload Identity: Application Default Credentials are the reaper's Google service account
    if container_client is None:
        container_client = GkeProject(identity.project).client
    applier = Applier(api_client or _kube_api_client())
    # ``now`` (tests) as given; else this pod's clock, checked against the API server's (pods' times are its)
    now = checked_now(clock.time(), api_server_time(applier)) if now is None else now
    namespace = namespace or os.environ.get(NAMESPACE_ENV) or REAPER_NAMESPACE
    return ReaperRun(identity, container_client, applier, namespace, now, dry_run).step()


@dataclass
class ReaperRun:
    """One reaper run's state, and its moves: :meth:`step` reads the cluster (:meth:`read_cluster`), its labels
    (:meth:`read_labels`) and rlcloud's activity (:meth:`read_activity`), enforces the money budgets
    (:meth:`enforce_budgets`), decides (:meth:`decide`), deletes when due (:meth:`delete`) and records what it
    did (:meth:`record`). ``applier``: a :class:`rlcloud.k8s.applier.Applier`; ``now``: unix seconds."""

    identity: ClusterIdentity
    container_client: Any
    applier: Any
    namespace: str
    now: float
    dry_run: bool = False
    labels: dict[str, str] = field(default_factory=dict)  # the cluster's, and what they say (read_labels)
    created: float | None = None
    expiry: float | None = None
    autodown: float | None = None
    problems: list[str] = field(default_factory=list)  # the labels that cannot be read
    jobs: list[Any] = field(default_factory=list)  # rlcloud's Jobs and pods, when they could be listed
    pods: list[Any] = field(default_factory=list)

    def step(self) -> Decision:
        """The whole run (:func:`run_once`)."""
        cluster = self.read_cluster()
        if cluster is None:
            return Decision(False, "cluster not found (already deleted)")
        self.read_labels(cluster)
        seen = self.read_activity()
        budgets = self.enforce_budgets(cluster)
        decision = self.decide(cluster, seen, budgets)
        outcome, error = self.delete(decision)
        self.record(decision, seen, budgets, outcome, error)
        return decision

    def read_cluster(self) -> Any:
        """The cluster from the Container API; None when it is gone. Refused: recorded, then raised."""
        from google.api_core import exceptions as gexc

        from rlcloud.errors import NotFoundError, RLCloudError
        from rlcloud.gke.builders import cluster_path
        from rlcloud.gke.errors import api_errors

        identity, now = self.identity, self.now
        path = cluster_path(identity.project, identity.location, identity.name)
        try:
            with api_errors(project=identity.project, action=f"get cluster {identity.name}"):
                return self.container_client.get_cluster(name=path)
        except (NotFoundError, gexc.NotFound):
            log.info("cluster %s is gone: nothing to do", path)
            return None
        except RLCloudError as exc:
            # without the cluster's labels nothing can be decided: say so where a user looks, then fail the run
            outcome = _refused(exc)
            log.error("cannot read cluster %s: %s", identity.name, outcome)
            # stopping a run over its budget needs Kubernetes permissions only: it goes on without the cluster
            data = {"decision": "unknown", "reason": "cannot read the cluster", "checked": _when(now),
                    "outcome": outcome, **_run_budgets(self.applier, self.namespace, now, self.dry_run)}  # fmt: skip
            message = f"rlcloud reaper cannot read this cluster: {outcome}"
            _record_failure(self.applier, self.namespace, now, data, message)
            raise

    def read_labels(self, cluster: Any) -> None:
        """The cluster's labels, its creation time, ``expiry`` and ``autodown`` (unreadable: :attr:`problems`)."""
        from rlcloud.gke.builders import read_autodown_label, read_expiry_label

        self.labels = dict(cluster.resource_labels)
        self.created = rfc3339_seconds(cluster.create_time)
        # an unreadable label acts as absent (never a crash that would stop every later run too): see
        # read_expiry_label; the problem is logged and recorded with the decision
        self.expiry, expiry_problem = read_expiry_label(self.labels)
        self.autodown, autodown_problem = read_autodown_label(self.labels)
        self.problems = [p for p in (expiry_problem, autodown_problem) if p]
        for problem in self.problems:
            log.warning("cluster %s: %s", self.identity.name, problem)

    def read_activity(self) -> Activity:
        """What rlcloud runs (:func:`activity`), from its Jobs and pods (kept for :meth:`enforce_budgets`)."""
        from rlcloud.errors import RLCloudError

        query = {"labelSelector": _MANAGED_SELECTOR}
        try:
            jobs = self.applier.checked_json("list rlcloud Jobs", "GET", "/apis/batch/v1/jobs", query=query)
            self.jobs = list(jobs.get("items") or [])
            pods = self.applier.checked_json("list rlcloud pods", "GET", "/api/v1/pods", query=query)
            self.pods = list(pods.get("items") or [])
            return activity(self.jobs, self.pods, own_namespace=self.namespace)
        except RLCloudError as exc:
            # Unknown activity counts as running: idle teardown waits, the ttl (which needs no activity) still acts.
            log.warning("cannot list rlcloud's Jobs and pods: %s", exc)
            return Activity(1, None, (f"unknown: cannot list rlcloud's Jobs and pods ({exc})",))

    def enforce_budgets(self, cluster: Any) -> Budgets:
        """Money budgets (:mod:`rlcloud.gke.budgets`): runs over theirs are stopped now; a cluster over its own
        is deleted (:meth:`decide`) once its runs are stopped and their pods gone. Never raises."""
        from rlcloud.gke.budgets import Budgets, enforce_budgets
        from rlcloud.gke.info import ClusterInfo

        try:
            return enforce_budgets(
                self.applier,
                cluster_info=ClusterInfo.from_cluster(cluster, self.identity.project),
                jobs=self.jobs,
                pods=self.pods,
                now=self.now,
                own_namespace=self.namespace,
                previous=_previous(self.applier, self.namespace),
                dry_run=self.dry_run,
            )
        except Exception as exc:  # a budget problem must never keep the ttl or autodown from acting
            log.warning("budgets not enforced this run: %s", exc)
            return Budgets(None, {"budget_problems": f"budgets not enforced this run: {exc}"[:_MAX_ERROR]})

    def decide(self, cluster: Any, seen: Activity, budgets: Budgets) -> Decision:
        """Delete or keep (:func:`decide`); a cluster over its budget with its runs' pods gone is deleted too."""
        from google.cloud import container_v1

        from rlcloud.gke.builders import MANAGED_BY_LABEL, MANAGED_BY_VALUE

        managed = self.labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE
        deleting = int(cluster.status) == int(container_v1.Cluster.Status.STOPPING)
        times = {"created": self.created, "expiry": self.expiry, "autodown": self.autodown, "last_activity": seen.last}
        decision = decide(self.now, **times, running=seen.running, managed=managed, deleting=deleting)
        over = budgets.cluster
        if over is not None and over.delete and managed and not deleting and not decision.delete:
            return Decision(True, f"budget: {over.reason}", self.now)
        return decision

    def delete(self, decision: Decision) -> tuple[str, Exception | None]:
        """Ask for the cluster's delete when it is due (not in a dry run): the outcome line, and a refusal."""
        outcome = "dry run: nothing deleted" if self.dry_run and decision.delete else ""
        error: Exception | None = None
        if decision.delete and not self.dry_run:
            outcome, error = _delete_cluster(self.container_client, self.identity)
        done = f": {outcome}" if outcome else ""
        level = logging.ERROR if error else logging.INFO
        log.log(level, "cluster %s: %s (%s)%s", self.identity.name, decision.action, decision.reason, done)
        return outcome, error

    def record(
        self, decision: Decision, seen: Activity, budgets: Budgets, outcome: str, error: Exception | None
    ) -> None:
        """Write the decision into the ConfigMap (and an Event); a refused delete is recorded, then raised."""
        applier, namespace, now = self.applier, self.namespace, self.now
        data = {
            "decision": decision.action,
            "reason": decision.reason,
            "checked": _when(now),
            "due": _when(decision.due) if decision.due is not None else "",
            "running": str(seen.running),
            "running_workloads": json.dumps(list(seen.running_names[:20])),
            "last_activity": _when(seen.last) if seen.last is not None else "",
            "outcome": outcome,
            "problems": "; ".join(self.problems),
            **budgets.data,
        }
        if error is not None:
            # the delete was due and refused: the ConfigMap and a Warning Event say why, and the run fails (a
            # failed Job of the CronJob), so a spending cap that cannot act is never silent
            message = f"rlcloud reaper could not delete this cluster ({decision.reason}): {outcome}"
            _record_failure(applier, namespace, now, data, message)
            raise error
        over = budgets.cluster
        try:
            # recorded after the delete request: the record must never stand between a due cluster and its delete
            _record(applier, namespace, data)
            if decision.delete and not self.dry_run:
                _event(applier, namespace, EVENT_DELETE, f"rlcloud reaper deletes this cluster: {decision.reason}", now)
            elif over is not None and over.action == "warn" and not self.dry_run:
                _event(applier, namespace, EVENT_BUDGET_WARNING, f"rlcloud reaper: this cluster's {over.reason}", now)
        except Exception as exc:  # any failure: the API may already be going away with the cluster
            log.warning("could not record the decision in ConfigMap %s/rlcloud-reaper: %s", namespace, exc)


def main(argv: list[str] | None = None) -> int:
    """``python -m rlcloud.gke.reaper [--dry-run]``: one run; exit 0 unless the cluster could not be read."""
    parser = argparse.ArgumentParser(prog="python -m rlcloud.gke.reaper", description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="decide and record, delete nothing")
    parser.add_argument(
        "--runs-only", action="store_true", help="no Google identity: enforce runs' and sweeps' budgets only"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    from rlcloud.errors import RLCloudError

    try:
        once = run_budgets_only if args.runs_only else run_once
        decision = once(dry_run=args.dry_run)
    except RLCloudError as exc:
        log.error("reaper run failed: %s", exc)
        return 1
    print(json.dumps({"decision": decision.action, "reason": decision.reason}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
