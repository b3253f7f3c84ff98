"""FakeKubelet: a test-only Job controller + kubelet that runs pods as local processes.

It watches a :class:`~tests.fakes.kube_apiserver.FakeKubeApiServer` (in process, through its store
methods, so it does not show up in the request log) and does what the Job controller and the
kubelet would:

Job controller
    creates one Pod per wanted completion (``completionMode: Indexed``: one per index, with the
    ``batch.kubernetes.io/job-completion-index`` annotation/label, ``hostname <job>-<index>`` and the
    template's ``subdomain``), owned by the Job, at most ``parallelism`` at a time (lowest pending
    indexes first: with completions > parallelism the next index starts when one ends, and
    ``completedIndexes``/``failedIndexes`` grow as they do); replaces failed pods within ``backoffLimit`` /
    ``backoffLimitPerIndex``; applies ``podFailurePolicy`` (Ignore on a ``DisruptionTarget``
    condition, FailJob/FailIndex/Count on exit codes); honours ``suspend`` (deletes the active pods,
    the containers get SIGTERM) and ``successPolicy``; writes Job status (active, succeeded, failed,
    completedIndexes, conditions Complete/Failed/Suspended).

Kubelet
    starts each Pending pod's container as a local process: ``command`` + ``args`` with Kubernetes'
    ``$(VAR)`` expansion (``$$`` -> ``$``), ``env`` values and ``valueFrom.fieldRef`` (metadata.name,
    metadata.namespace, metadata.annotations['...'], metadata.labels['...']). ``python`` as the first
    word means this interpreter (``sys.executable``): the "image" is the test's own environment.

    Volumes are materialised per pod under ``<workdir>/<namespace>/<pod>/volumes/<volume>``: a
    ConfigMap's keys (or its ``items``) and a Secret's keys are written as files, an emptyDir is an
    empty directory. Processes cannot see the container paths, so every argument and environment
    value that starts with a ``volumeMounts[].mountPath`` is rewritten to the materialised directory
    (the longest matching mount wins). The process runs with that pod directory as its cwd.

    Networking: each pod is a process on 127.0.0.1, so the kubelet gives every pod that has a
    ``hostname`` + ``subdomain`` its own local port (``RLCLOUD_PORT`` is overridden, like a pod IP
    would differ) and passes every process ``RLCLOUD_HOST_MAP="<host>.<subdomain>=127.0.0.1:<port>,..."``
    covering all Indexed Jobs with a subdomain in the namespace (ports are allocated up front, so the
    agent knows its env servers before they start).

    stdout+stderr go to the fake's pod log (``kubectl logs``) and to ``<pod dir>/container.log``.
    Exit codes end up in the container status; a deleted pod's process gets SIGTERM, then SIGKILL
    after ``terminationGracePeriodSeconds`` (capped by ``max_grace``).

Scheduler
    with ``nodes`` (a list of :class:`FakeNode`), each Pending pod is bound to a node the way
    kube-scheduler's default filters decide, in their order (NodeUnschedulable, TaintToleration,
    NodeAffinity, NodeResourcesFit): the node's ``NoSchedule``/``NoExecute`` taints must be tolerated,
    its labels must match ``nodeSelector`` and required node affinity, and the pod's requests (a
    container's limit stands in for a missing request, as the API server defaults it) must fit the
    node's allocatable CPU, memory, ``nvidia.com/gpu`` and pod count minus what the pods bound there
    request. Among the nodes that pass, the one with the highest preferred-node-affinity weight wins
    (ties: the first in ``nodes``). A pod that fits nowhere stays Pending with ``PodScheduled=False``,
    reason ``Unschedulable`` and kube-scheduler's message (``0/2 nodes are available: 1 Insufficient
    cpu, 1 node(s) had untolerated taint {nvidia.com/gpu: present}. preemption: ...``) and a
    ``FailedScheduling`` Event; it is tried again on every pass, so :meth:`FakeKubelet.add_node` (the
    cluster autoscaler adding a node) or a pod that ends lets it start. A pod with no requests (QoS
    class BestEffort) fits every node it tolerates: this is why it never goes Pending and the cluster
    autoscaler never adds a node for it. Without ``nodes`` there is one node, ``fake-node``, that takes
    every pod (no scheduling rules), as before this scheduler existed.

Probes
    an exec ``startupProbe`` and ``livenessProbe`` are run as the kubelet runs them (period, timeout, failure
    threshold, initial delay; the command's paths rewritten like the container's; liveness only once the
    startup probe has succeeded): enough failures in a row kill the container, with ``Unhealthy`` and
    ``Killing`` Events, and under ``restartPolicy: Never`` the pod fails and its Job replaces it
    (:meth:`FakeKubelet._probe_container`).

Tests poke it with :meth:`FakeKubelet.kill` (crash a container) and :meth:`FakeKubelet.preempt`
(a node lost to preemption: DisruptionTarget condition, exit 143). ``unschedulable`` (a callback
returning a scheduler message, or None) keeps matching pods Pending with ``PodScheduled=False``.
``argv_rewrite`` swaps the container's argv before it runs (tests that need a stand-in for the
runner, i.e. a different "image").
"""

from __future__ import annotations

import calendar
import contextlib
import copy
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from kubernetes.utils import parse_quantity

from tests.fakes.kube_apiserver import ApiError, FakeKubeApiServer

__all__ = ["FakeKubelet", "FakeNode", "gke_cpu_node", "gke_gpu_node", "pod_requests", "schedule"]

JSON = dict[str, Any]
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_FIELD_MAP = re.compile(r"^metadata\.(annotations|labels)\['(.+)'\]$")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _parse_time(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(value, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: defined variables are replaced, ``$$`` becomes ``$``, the rest stays."""

    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)

    return _VAR.sub(repl, text)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------------------------------
# nodes and the scheduler

GPU_RESOURCE = "nvidia.com/gpu"
#: the resources NodeResourcesFit compares (plus the pod count)
_FIT_RESOURCES = ("cpu", "memory", GPU_RESOURCE)
#: the taint GKE puts on GPU nodes (and rlcloud's GPU pool sets explicitly)
GPU_TAINT = {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}


@dataclass
class FakeNode:
    """A node of the fake cluster: what it can hold (allocatable), its labels and its taints."""

    name: str
    cpu: str = "4"
    memory: str = "16Gi"
    gpus: int = 0
    max_pods: int = 110  # the kubelet's default maxPods
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    unschedulable: bool = False

    def allocatable(self) -> dict[str, Decimal]:
        """The node's allocatable resources as numbers (cores, bytes, GPUs, pods)."""
        return {
            "cpu": parse_quantity(self.cpu),
            "memory": parse_quantity(self.memory),
            GPU_RESOURCE: Decimal(self.gpus),
            "pods": Decimal(self.max_pods),
        }

    def to_object(self) -> JSON:
        """The Node object a kubelet registers (``kubectl get node NAME -o yaml``)."""
        amounts = {"cpu": self.cpu, "memory": self.memory, "pods": str(self.max_pods)}
        if self.gpus:
            amounts[GPU_RESOURCE] = str(self.gpus)
        return {
            "metadata": {"name": self.name, "labels": {"kubernetes.io/hostname": self.name, **self.labels}},
            "spec": {"taints": [dict(t) for t in self.taints], "unschedulable": self.unschedulable},
            "status": {"capacity": dict(amounts), "allocatable": dict(amounts)},
        }


def gke_cpu_node(name: str = "gke-rl-default-pool-0", *, role: str = "system") -> FakeNode:
    """An e2-standard-4 node of an rlcloud GKE cluster's CPU pool (``default-pool``).

    Allocatable as GKE reserves it ("Standard cluster architecture", Node allocatable resources, in the
    GKE docs): 4 vCPU minus 80m, 16 GB minus ~2.6 GB of reservations and the 100 MiB eviction threshold.
    """
    return FakeNode(
        name,
        cpu="3920m",
        memory="13Gi",
        # node.kubernetes.io/instance-type: the well-known label every node carries (kubernetes.io/docs/reference/
        # labels-annotations-taints/#nodekubernetesioinstance-type); the reaper prices a node by it
        labels={
            "rlcloud-pool": role,
            "cloud.google.com/gke-nodepool": "default-pool",
            "node.kubernetes.io/instance-type": "e2-standard-4",
        },
    )


def gke_gpu_node(
    name: str = "gke-rl-gpu-pool-0",
    *,
    accelerator: str = "nvidia-tesla-t4",
    gpus: int = 1,
    shared_clients: int = 0,
    sharing: str = "time-sharing",
) -> FakeNode:
    """An n1-standard-4 node with ``gpus`` GPUs of rlcloud's ``gpu-pool``, tainted
    ``nvidia.com/gpu=present:NoSchedule`` as GKE taints GPU nodes ("Run GPUs in GKE Standard node pools").

    ``shared_clients`` (issue 42): a GPU-sharing node. GKE's "Time-sharing GPUs on GKE": the node carries the
    labels ``cloud.google.com/gke-max-shared-clients-per-gpu`` and ``cloud.google.com/gke-gpu-sharing-strategy``
    and "the GPU driver presents the physical GPU to the kubelet ... as multiple" GPUs: it advertises
    ``gpus x shared_clients`` ``nvidia.com/gpu``, one per container that may share them."""
    labels = {
        "rlcloud-pool": "workers",
        "cloud.google.com/gke-nodepool": "gpu-pool",
        "cloud.google.com/gke-accelerator": accelerator,
        "node.kubernetes.io/instance-type": "n1-standard-4",
    }
    if shared_clients:
        labels["cloud.google.com/gke-max-shared-clients-per-gpu"] = str(shared_clients)
        labels["cloud.google.com/gke-gpu-sharing-strategy"] = sharing
    return FakeNode(
        name,
        cpu="3920m",
        memory="12Gi",
        gpus=gpus * (shared_clients or 1),
        labels=labels,
        taints=[dict(GPU_TAINT)],
    )


def pod_requests(pod: JSON) -> dict[str, Decimal]:
    """What the scheduler counts for a pod: the sum of its containers' requests, a container's limit
    standing in for a request it does not give (the API server copies it: "Resource Management for Pods
    and Containers", kubernetes.io/docs/concepts/configuration/manage-resources-containers/)."""
    total = {r: Decimal(0) for r in _FIT_RESOURCES}
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for r in _FIT_RESOURCES:
            value = requests.get(r, limits.get(r))
            if value is not None:
                total[r] += parse_quantity(value)
    return total


def _tolerates(tolerations: list[JSON], taint: JSON) -> bool:
    """Taints and Tolerations (kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/): a
    toleration matches a taint with the same key (an empty key with Exists matches every key) and effect
    (an empty effect matches every effect), and with Equal the same value."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        operator = t.get("operator") or "Equal"
        if operator == "Exists":
            if not t.get("key") or t["key"] == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _expression_matches(expr: JSON, labels: dict[str, str]) -> bool:
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels:
        try:
            have, want = int(labels[key]), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def _term_matches(term: JSON, labels: dict[str, str]) -> bool:
    # a node selector term ANDs its expressions; an empty term matches no node
    expressions = term.get("matchExpressions") or []
    return bool(expressions) and all(_expression_matches(e, labels) for e in expressions)


def _node_affinity(pod_spec: JSON) -> JSON:
    return ((pod_spec.get("affinity") or {}).get("nodeAffinity")) or {}


def _selected(pod_spec: JSON, labels: dict[str, str]) -> bool:
    """Assigning Pods to Nodes (kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/): every
    nodeSelector label must match, and one of the required node affinity's terms (terms are ORed)."""
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    required = _node_affinity(pod_spec).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required:
        return any(_term_matches(term, labels) for term in required.get("nodeSelectorTerms") or [])
    return True


def _preference(pod_spec: JSON, labels: dict[str, str]) -> int:
    """The sum of the weights of the preferred node affinity terms the node matches (NodeAffinity score)."""
    preferred = _node_affinity(pod_spec).get("preferredDuringSchedulingIgnoredDuringExecution") or []
    return sum(int(p.get("weight", 0)) for p in preferred if _term_matches(p.get("preference") or {}, labels))


def schedule(pod: JSON, nodes: list[FakeNode], used: dict[str, dict[str, Decimal]]) -> tuple[str | None, str]:
    """Pick a node for ``pod`` as kube-scheduler's default filters and NodeAffinity score would.

    ``used``: per node name, what the pods bound there already request (``pods`` counts them). Returns
    (node name, "") or (None, the scheduler's message). The message has kube-scheduler's format
    (pkg/scheduler/framework/types.go, ``FitError.Error``): ``0/N nodes are available:`` then each
    reason with the number of nodes that gave it, sorted as strings, then the preemption result. Each
    node gives the reasons of the first filter it fails, in the default profile's order
    (kube-scheduler's default plugins: NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit).
    """
    spec = pod.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    wanted = pod_requests(pod)
    reasons: dict[str, int] = {}
    unhelpful = 0  # nodes where evicting pods cannot help (taints, selectors): "Preemption is not helpful"
    best: tuple[int, int, str] | None = None
    for order, node in enumerate(nodes):
        failed: list[str] = []
        if node.unschedulable:  # cordoned ("Safely Drain a Node", kubernetes.io/docs/tasks/administer-cluster/)
            failed = ["node(s) were unschedulable"]
        if not failed:
            for taint in node.taints:
                if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, taint):
                    failed = [f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"]
                    break
        if not failed and not _selected(spec, node.labels):
            failed = ["node(s) didn't match Pod's node affinity/selector"]
        if failed:
            unhelpful += 1
        else:
            # "How Pods with resource requests are scheduled" (Resource Management for Pods and Containers,
            # kubernetes.io/docs/concepts/configuration/manage-resources-containers/): the sum of the requests
            # of the pods on the node plus this one's must stay within its allocatable, whatever they use
            free = node.allocatable()
            have = used.get(node.name, {})
            if have.get("pods", Decimal(0)) + 1 > free["pods"]:
                failed.append("Too many pods")
            for r in _FIT_RESOURCES:
                if wanted[r] and have.get(r, Decimal(0)) + wanted[r] > free[r]:
                    failed.append(f"Insufficient {r}")
        if failed:
            for reason in failed:
                reasons[reason] = reasons.get(reason, 0) + 1
            continue
        score = (_preference(spec, node.labels), -order, node.name)
        if best is None or score[:2] > best[:2]:
            best = score
    if best is not None:
        return best[2], ""
    n = len(nodes)
    histogram = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))
    postfilter = []
    if n - unhelpful:
        postfilter.append(f"{n - unhelpful} No preemption victims found for incoming pod")
    if unhelpful:
        postfilter.append(f"{unhelpful} Preemption is not helpful for scheduling")
    return None, (
        f"0/{n} nodes are available: {histogram}. "
        f"preemption: 0/{n} nodes are available: {', '.join(sorted(postfilter))}."
    )


# ---------------------------------------------------------------------------------------------------
# the kubelet


@dataclass
class _Container:
    pod: str
    namespace: str
    process: subprocess.Popen[bytes]
    grace: float
    log_path: Path
    reader: threading.Thread | None = None
    deleted: bool = False
    disrupted: bool = False


@dataclass
class _JobState:
    failures_per_index: dict[int, int] = field(default_factory=dict)
    failures: int = 0
    counted: set[str] = field(default_factory=set)  # failed pods already accounted for


class FakeKubelet:
    """Runs the fake apiserver's Jobs as local processes (see the module docstring)."""

    def __init__(
        self,
        apiserver: FakeKubeApiServer,
        workdir: str | os.PathLike[str],
        *,
        namespace: str | None = None,
        extra_env: dict[str, str] | None = None,
        max_grace: float = 30.0,
        unschedulable: Callable[[JSON], str | None] | None = None,
        argv_rewrite: Callable[[list[str]], list[str]] | None = None,
        poll: float = 0.05,
        nodes: list[FakeNode] | None = None,
    ) -> None:
        self.apiserver = apiserver
        self.workdir = Path(workdir)
        self.namespace = namespace
        self.extra_env = dict(extra_env or {})
        self.max_grace = max_grace
        self.unschedulable = unschedulable
        self.argv_rewrite = argv_rewrite
        self.poll = poll
        #: the nodes pods are scheduled on (None: one node that takes every pod, no scheduling rules)
        self.nodes = list(nodes) if nodes is not None else None
        self._sched_messages: dict[tuple[str, str], str] = {}
        self._create_errors: dict[
            str, str
        ] = {}  # Job uid -> the last FailedCreate message  # (namespace, pod) -> last FailedScheduling
        self._containers: dict[tuple[str, str], _Container] = {}
        self._jobs: dict[str, _JobState] = {}  # by Job uid: a re-created Job starts afresh
        self._ports: dict[tuple[str, str], int] = {}  # (namespace, "host.subdomain") -> local port
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: (namespace, pod name, exit code) of every container that ended, in order
        self.exits: list[tuple[str, str, int]] = []
        #: (namespace, pod name) of every container started, in order
        self.started: list[tuple[str, str]] = []
        #: (namespace, pod name, output) of every failed startup or liveness probe, in order
        self.probe_failures: list[tuple[str, str, str]] = []
        #: (namespace, pod name, "startup") of every startup probe that succeeded (liveness probes then run)
        self.probe_successes: list[tuple[str, str, str]] = []

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> FakeKubelet:
        """Start reconciling in a background thread."""
        self.apiserver.graceful_pod_deletion = True
        for node in self.nodes or []:
            self._register(node)
        self._thread = threading.Thread(target=self._loop, name="fake-kubelet", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop reconciling and kill every process still running (SIGTERM, then SIGKILL)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            containers = list(self._containers.values())
        for c in containers:
            self._terminate(c, grace=min(c.grace, 5.0))
        for c in containers:
            if c.reader is not None:
                c.reader.join(timeout=5)
        self.apiserver.graceful_pod_deletion = False

    def __enter__(self) -> FakeKubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test hooks ------------------------------------------------------------------------------

    def running(self, label_selector: str | None = None) -> list[str]:
        """Names of pods whose process is alive (optionally only pods matching a label selector)."""
        wanted = None
        if label_selector is not None:
            wanted = {p["metadata"]["name"] for p in self.apiserver.list_objects("Pod", self.namespace, label_selector)}
        with self._lock:
            return sorted(
                c.pod
                for c in self._containers.values()
                if c.process.poll() is None and (wanted is None or c.pod in wanted)
            )

    def add_node(self, node: FakeNode) -> None:
        """A node joins (the cluster autoscaler added it): Pending pods are scheduled again."""
        with self._lock:
            if self.nodes is None:
                raise ValueError("this kubelet was started without nodes: it has no scheduler to add one to")
            self.nodes.append(node)
        self._register(node)

    def node_of(self, pod: str, namespace: str | None = None) -> str | None:
        """The node a pod is bound to (None: not scheduled)."""
        obj = self.apiserver.get_object("Pod", pod, namespace or self.namespace or "default")
        return None if obj is None else (obj.get("spec") or {}).get("nodeName")

    def _register(self, node: FakeNode) -> None:
        if self.apiserver.get_object("Node", node.name) is None:
            self.apiserver.create_object("Node", node.to_object())

    def kill(self, pod: str, sig: int = signal.SIGKILL) -> None:
        """Crash a pod's container (default SIGKILL: exit code 137, counted against the backoff budget)."""
        with self._lock:
            container = next(c for c in self._containers.values() if c.pod == pod)
        container.process.send_signal(sig)

    def preempt(self, pod: str) -> None:
        """Lose a pod as to preemption: DisruptionTarget condition, then SIGTERM (ignored by the Job's budget)."""
        with self._lock:
            container = next(c for c in self._containers.values() if c.pod == pod)
            container.disrupted = True
        obj = self.apiserver.get_object("Pod", pod, container.namespace)
        if obj is not None:
            status = obj.get("status", {})
            status.setdefault("conditions", []).append(
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "TerminationByKubelet",
                    "message": "node preempted (fake)",
                    "lastTransitionTime": _now(),
                }
            )
            self.apiserver.update_status("Pod", pod, container.namespace, status)
        container.process.send_signal(signal.SIGTERM)

    # -- the loop --------------------------------------------------------------------------------

    def _loop(self) -> None:
        seen = -1
        while not self._stop.is_set():
            rv = self.apiserver.wait_for_change(seen, self.poll)
            seen = rv
            try:
                self._reconcile()
            except Exception as exc:  # keep running: a test will see the symptom, print the cause
                print(f"fake kubelet: reconcile failed: {exc!r}", file=sys.stderr)
            time.sleep(self.poll)

    def _reconcile(self) -> None:
        jobs = self.apiserver.list_objects("Job", self.namespace)
        for job in jobs:
            self._reconcile_job(job)
        live_pods = {
            (p["metadata"]["namespace"], p["metadata"]["name"]): p
            for p in self.apiserver.list_objects("Pod", self.namespace)
        }
        with self._lock:
            containers = dict(self._containers)
        # pods deleted through the API (stop, suspend, GC): SIGTERM, grace period, then gone for good
        for key, c in containers.items():
            pod = live_pods.get(key)
            if (pod is None or "deletionTimestamp" in pod["metadata"]) and not c.deleted:
                c.deleted = True
                threading.Thread(target=self._terminate, args=(c,), daemon=True).start()
        # what the nodes hold (every namespace shares them); without nodes nothing is counted
        used = self._usage(self.apiserver.list_objects("Pod")) if self.nodes is not None else {}
        for key, pod in live_pods.items():
            if key in containers:
                self._check_exit(containers[key], pod)
            elif "deletionTimestamp" in pod["metadata"]:
                self.apiserver.delete_object("Pod", key[1], key[0], force=True)
            elif pod.get("status", {}).get("phase", "Pending") == "Pending" and not any(
                (cs.get("state") or {}).get("waiting") for cs in pod.get("status", {}).get("containerStatuses") or []
            ):
                self._start_pod(pod, used)

    # -- Job controller --------------------------------------------------------------------------

    def _reconcile_job(self, job: JSON) -> None:
        meta, spec = job["metadata"], job["spec"]
        ns = meta["namespace"]
        status = copy.deepcopy(job.get("status") or {})
        conditions: list[JSON] = status.setdefault("conditions", [])
        finished = any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions)
        pods = self._job_pods(job)
        state = self._jobs.setdefault(meta["uid"], _JobState())
        active = [
            p
            for p in pods
            if p.get("status", {}).get("phase", "Pending") in ("Pending", "Running")
            and "deletionTimestamp" not in p["metadata"]
        ]
        failed_indexes: set[int] = set()
        if not finished:
            finished, failed_indexes = self._count_failures(job, pods, state, conditions, active)
        suspended = bool(spec.get("suspend"))
        deadline = spec.get("activeDeadlineSeconds")
        started = _parse_time(status.get("startTime"))
        # activeDeadlineSeconds ("Jobs", Job termination and cleanup, kubernetes.io/docs/concepts/workloads/
        # controllers/job/): past it the running pods are terminated and the Job fails, DeadlineExceeded
        expired = deadline is not None and started is not None and time.time() - started >= int(deadline)
        if not finished and not suspended and expired:
            self._fail_job(ns, conditions, active, "DeadlineExceeded", "Job was active longer than specified deadline")
            finished = True
        if not finished and suspended:
            for p in active:
                self.apiserver.delete_object("Pod", p["metadata"]["name"], ns)
            _set_condition(conditions, "Suspended", "JobSuspended", "Job suspended")
            # a resumed Job's startTime is reset, and with it the activeDeadlineSeconds clock
            status.pop("startTime", None)
        elif not finished:
            self._advance(job, pods, status, active, failed_indexes)
        self._write_status(job, status, failed_indexes)

    def _job_pods(self, job: JSON) -> list[JSON]:
        meta = job["metadata"]
        return [
            p
            for p in self.apiserver.list_objects("Pod", meta["namespace"])
            if any(r.get("uid") == meta["uid"] for r in p["metadata"].get("ownerReferences") or [])
        ]

    def _fail_job(self, ns: str, conditions: list[JSON], active: list[JSON], reason: str, message: str) -> None:
        _set_condition(conditions, "FailureTarget", reason, message)
        _set_condition(conditions, "Failed", reason, message)
        for p in active:
            self.apiserver.delete_object("Pod", p["metadata"]["name"], ns)

    def _count_failures(
        self, job: JSON, pods: list[JSON], state: _JobState, conditions: list[JSON], active: list[JSON]
    ) -> tuple[bool, set[int]]:
        """Account for newly failed pods: podFailurePolicy, then the backoff budget; (finished, failed indexes)."""
        spec, ns = job["spec"], job["metadata"]["namespace"]
        for p in pods:
            if p.get("status", {}).get("phase") != "Failed" or p["metadata"]["name"] in state.counted:
                continue
            state.counted.add(p["metadata"]["name"])
            action, rule_index = self._policy_rule(spec.get("podFailurePolicy"), p)
            if action == "Ignore":
                continue
            if action == "FailJob":
                code = _container_exit(p)
                self._fail_job(
                    ns,
                    conditions,
                    active,
                    "PodFailurePolicy",
                    f"Container runner for pod {ns}/{p['metadata']['name']} failed with exit code {code} "
                    f"matching FailJob rule at index {rule_index}",
                )
                return True, set()
            index = self._index(p)
            state.failures += 1
            state.failures_per_index[index] = state.failures_per_index.get(index, 0) + 1
            if action == "FailIndex":
                state.failures_per_index[index] = 1 << 30
        per_index_limit = spec.get("backoffLimitPerIndex")
        if per_index_limit is not None:
            failed_indexes = {i for i, n in state.failures_per_index.items() if n > int(per_index_limit)}
            # "Once the number of failed indexes exceeds this number, the entire Job is marked as
            # Failed and its execution is terminated" (Kubernetes docs, Jobs: backoff limit per index)
            max_failed = spec.get("maxFailedIndexes")
            if max_failed is not None and len(failed_indexes) > int(max_failed):
                self._fail_job(
                    ns,
                    conditions,
                    active,
                    "MaxFailedIndexesExceeded",
                    "Job has exceeded the specified maximal number of failed indexes",
                )
                return True, failed_indexes
            return False, failed_indexes
        if state.failures > int(spec.get("backoffLimit", 6)):
            self._fail_job(
                ns, conditions, active, "BackoffLimitExceeded", "Job has reached the specified backoff limit"
            )
            return True, set()
        return False, set()

    def _advance(self, job: JSON, pods: list[JSON], status: JSON, active: list[JSON], failed_indexes: set[int]) -> None:
        """A running Job: complete it, fail it on its failed indexes, or start the pods it has room for."""
        spec, ns = job["spec"], job["metadata"]["namespace"]
        conditions: list[JSON] = status["conditions"]
        indexed = spec.get("completionMode") == "Indexed"
        completions = int(spec.get("completions") or 1)
        # a terminating pod still holds its index: its replacement waits (podReplacementPolicy: Failed)
        terminating = {self._index(p) for p in pods if "deletionTimestamp" in p["metadata"]}
        completed = {self._index(p) for p in pods if p.get("status", {}).get("phase") == "Succeeded"}
        if any(c["type"] == "Suspended" and c["status"] == "True" for c in conditions):
            _set_condition(conditions, "Suspended", "JobResumed", "Job resumed", "False")
        rules = (spec.get("successPolicy") or {}).get("rules") or []
        success_by_policy = any(len(completed) >= int(r.get("succeededCount", completions + 1)) for r in rules)
        wanted = set(range(completions)) if indexed else {0}
        if success_by_policy or (completed >= wanted if indexed else bool(completed)):
            if success_by_policy:
                _set_condition(conditions, "SuccessCriteriaMet", "SuccessPolicy", "Matched rules at index 0")
            for p in active:
                self.apiserver.delete_object("Pod", p["metadata"]["name"], ns)
            _set_condition(
                conditions, "Complete", "CompletionsReached" if not success_by_policy else "SuccessPolicy", ""
            )
            status["completionTime"] = _now()
        elif failed_indexes and (completed | failed_indexes) >= wanted:
            self._fail_job(ns, conditions, active, "FailedIndexes", "Job has failed indexes")
        else:
            running = {self._index(p) for p in active} | terminating
            # at most `parallelism` pods at once, the lowest pending indexes first (as the real
            # controller does); a terminating pod still counts until it is gone
            room = max(0, int(spec.get("parallelism", 1)) - len(running))
            for index in sorted(wanted - completed - running - failed_indexes)[:room]:
                self._create_pod(job, index if indexed else None)
            status.setdefault("startTime", _now())

    def _write_status(self, job: JSON, status: JSON, failed_indexes: set[int]) -> None:
        """The Job's status from its pods as they are now (pods were created or deleted above)."""
        meta = job["metadata"]
        pods = self._job_pods(job)
        phases = [p.get("status", {}).get("phase", "Pending") for p in pods]
        status["active"] = sum(1 for phase in phases if phase in ("Pending", "Running"))
        status["ready"] = phases.count("Running")
        status["succeeded"] = phases.count("Succeeded")
        status["failed"] = phases.count("Failed")
        if job["spec"].get("completionMode") == "Indexed":
            done = sorted({self._index(p) for p in pods if p.get("status", {}).get("phase") == "Succeeded"})
            status["completedIndexes"] = _format_indexes(done)
            if failed_indexes:
                status["failedIndexes"] = _format_indexes(sorted(failed_indexes))
        for key in ("active", "ready", "succeeded", "failed"):
            if not status[key]:
                del status[key]
        if not status["conditions"]:
            del status["conditions"]
        if status != (job.get("status") or {}):
            self.apiserver.update_status("Job", meta["name"], meta["namespace"], status)

    @staticmethod
    def _index(pod: JSON) -> int:
        value = (pod["metadata"].get("annotations") or {}).get(INDEX_KEY)
        return int(value) if value is not None else 0

    @staticmethod
    def _policy_rule(policy: JSON | None, pod: JSON) -> tuple[str, int | None]:
        """The action of the first podFailurePolicy rule the failed pod matches, and that rule's index (the
        Job controller's FailJob message names it); ("Count", None) when none does."""
        if not policy:
            return "Count", None
        code = _container_exit(pod)
        conditions = pod.get("status", {}).get("conditions") or []
        for index, rule in enumerate(policy.get("rules") or []):
            on_codes = rule.get("onExitCodes")
            if on_codes and code is not None:
                values = set(on_codes.get("values") or [])
                hit = code in values if on_codes.get("operator", "In") == "In" else code not in values and code != 0
                if hit:
                    return str(rule["action"]), index
            for pattern in rule.get("onPodConditions") or []:
                if any(
                    c.get("type") == pattern.get("type") and c.get("status") == pattern.get("status", "True")
                    for c in conditions
                ):
                    return str(rule["action"]), index
        return "Count", None

    def _create_pod(self, job: JSON, index: int | None) -> None:
        meta = job["metadata"]
        template = copy.deepcopy(job["spec"]["template"])
        tmeta = template.get("metadata") or {}
        suffix = secrets.token_hex(3)[:5]
        name = f"{meta['name']}-{index}-{suffix}" if index is not None else f"{meta['name']}-{suffix}"
        labels = dict(tmeta.get("labels") or {})
        # the Job controller labels its pods with the Job's uid and name ("Well-Known Labels, Annotations and
        # Taints": batch.kubernetes.io/controller-uid, batch.kubernetes.io/job-name, Kubernetes 1.27+)
        labels.update({"batch.kubernetes.io/controller-uid": meta["uid"], "batch.kubernetes.io/job-name": meta["name"]})
        annotations = dict(tmeta.get("annotations") or {})
        pod_spec = template["spec"]
        if index is not None:
            annotations[INDEX_KEY] = str(index)
            labels[INDEX_KEY] = str(index)
            pod_spec["hostname"] = f"{meta['name']}-{index}"
        body = {
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": pod_spec,
        }
        try:
            self.apiserver.create_object("Pod", body, meta["namespace"])
        except ApiError as exc:
            # as the Job controller: a refused creation (admission, quota) is a FailedCreate Event on the Job
            if self._create_errors.get(meta["uid"]) != exc.message:
                self._create_errors[meta["uid"]] = exc.message
                self.apiserver.record_event(
                    meta["namespace"], job, "FailedCreate", f"Error creating: {exc.message}", component="job-controller"
                )

    # -- kubelet ---------------------------------------------------------------------------------

    def host_port(self, host: str, namespace: str | None = None) -> int | None:
        """The local port that stands for ``host`` (``<pod hostname>.<subdomain>``), as the pods' host map says."""
        return self._host_map(namespace or self.namespace or "default").get(host)

    def _host_map(self, namespace: str) -> dict[str, int]:
        """``host.subdomain`` -> local port for every pod an Indexed Job with a subdomain will create."""
        with self._lock:
            for job in self.apiserver.list_objects("Job", namespace):
                spec = job["spec"]
                subdomain = spec["template"]["spec"].get("subdomain")
                if spec.get("completionMode") != "Indexed" or not subdomain:
                    continue
                for i in range(int(spec.get("completions") or 0)):
                    key = (namespace, f"{job['metadata']['name']}-{i}.{subdomain}")
                    if key not in self._ports:
                        self._ports[key] = _free_port()
            return {host: port for (ns, host), port in self._ports.items() if ns == namespace}

    def _usage(self, pods: list[JSON]) -> dict[str, dict[str, Decimal]]:
        """Per node: what the pods bound there and not finished request, and how many they are."""
        used: dict[str, dict[str, Decimal]] = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            have = used.setdefault(node, {"pods": Decimal(0)})
            have["pods"] += 1
            for r, amount in pod_requests(pod).items():
                have[r] = have.get(r, Decimal(0)) + amount
        return used

    def _unschedulable(self, pod: JSON, message: str) -> None:
        """Leave the pod Pending as kube-scheduler does: PodScheduled=False (Unschedulable) with its
        message, and a FailedScheduling Event each time the message changes."""
        meta = pod["metadata"]
        ns, name = meta["namespace"], meta["name"]
        status = pod.get("status") or {}
        current = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if current is None or current.get("message") != message:
            status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"] + [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastTransitionTime": _now(),
                }
            ]
            self.apiserver.update_status("Pod", name, ns, status)
        if self.nodes is not None and self._sched_messages.get((ns, name)) != message:
            self._sched_messages[(ns, name)] = message
            self.apiserver.record_event(ns, pod, "FailedScheduling", message, component="default-scheduler")

    def _start_pod(self, pod: JSON, used: dict[str, dict[str, Decimal]] | None = None) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        ns, name = meta["namespace"], meta["name"]
        node_name = self._schedule_onto(pod, used)
        if node_name is None:
            return
        # bound first, as the scheduler does before the kubelet sees the pod
        self.apiserver.patch_object("Pod", name, ns, {"spec": {"nodeName": node_name}})
        pod_dir = self.workdir / ns / name
        try:
            pod_dir.mkdir(parents=True, exist_ok=True)
            local_paths = self._mount_volumes(pod, pod_dir / "volumes")
            (container,) = spec["containers"]
            rewrite = _rewriter((m["mountPath"], local_paths[m["name"]]) for m in container.get("volumeMounts") or [])
            env = {k: rewrite(v) for k, v in self._container_env(pod, container).items()}
            argv = [expand(a, env) for a in (container.get("command") or []) + (container.get("args") or [])]
            argv = [rewrite(a) for a in argv]
            if self.argv_rewrite is not None:
                argv = self.argv_rewrite(argv)
            if argv and argv[0] in ("python", "python3"):
                argv[0] = sys.executable
            process_env = {**os.environ, **self.extra_env, **env}
            log_path = pod_dir / "container.log"
            log_file = open(log_path, "wb")  # noqa: SIM115 - closed by the reader thread
            process = subprocess.Popen(
                argv,
                cwd=pod_dir,
                env=process_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except Exception as exc:  # like CreateContainerError: the pod stays Pending with a reason
            waiting = {"waiting": {"reason": "CreateContainerError", "message": str(exc)}}
            self.apiserver.update_status(
                "Pod", name, ns, {"phase": "Pending", "containerStatuses": [_container_status(spec, False, waiting)]}
            )
            return
        grace = float(spec.get("terminationGracePeriodSeconds", 30))
        c = _Container(pod=name, namespace=ns, process=process, grace=min(grace, self.max_grace), log_path=log_path)
        c.reader = threading.Thread(target=self._pump, args=(c, log_file), name=f"log-{name}", daemon=True)
        with self._lock:
            self._containers[(ns, name)] = c
            self.started.append((ns, name))
        c.reader.start()
        self._start_probes(c, pod, rewrite, pod_dir, process_env)
        now = _now()
        self.apiserver.update_status(
            "Pod",
            name,
            ns,
            {
                "phase": "Running",
                "podIP": "127.0.0.1",
                "hostIP": "127.0.0.1",
                "startTime": now,
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                    {"type": "Ready", "status": "True", "lastTransitionTime": now},
                ],
                "containerStatuses": [_container_status(spec, True, {"running": {"startedAt": now}}, started=True)],
            },
        )

    def _schedule_onto(self, pod: JSON, used: dict[str, dict[str, Decimal]] | None) -> str | None:
        """The node the pod is bound to, or None with the pod marked unschedulable."""
        meta = pod["metadata"]
        if self.unschedulable is not None:
            message = self.unschedulable(pod)
            if message:
                self._unschedulable(pod, message)
                return None
        if self.nodes is None:
            return "fake-node"
        with self._lock:
            nodes = list(self.nodes)
        used = used if used is not None else self._usage(self.apiserver.list_objects("Pod"))
        chosen, message = schedule(pod, nodes, used)
        if chosen is None:
            self._unschedulable(pod, message)
            return None
        # this pass's later pods see the room this one takes
        have = used.setdefault(chosen, {"pods": Decimal(0)})
        have["pods"] += 1
        for r, amount in pod_requests(pod).items():
            have[r] = have.get(r, Decimal(0)) + amount
        self._sched_messages.pop((meta["namespace"], meta["name"]), None)
        return chosen

    def _mount_volumes(self, pod: JSON, volumes_dir: Path) -> dict[str, Path]:
        """Each volume as a local folder (ConfigMap and Secret keys written as files): name -> folder."""
        ns = pod["metadata"]["namespace"]
        local_paths: dict[str, Path] = {}
        for volume in pod["spec"].get("volumes") or []:
            target = volumes_dir / volume["name"]
            target.mkdir(parents=True, exist_ok=True)
            local_paths[volume["name"]] = target
            if "configMap" in volume:
                self._write_keys(target, "ConfigMap", volume["configMap"], ns, decode=False)
            elif "secret" in volume:
                src = dict(volume["secret"])
                src["name"] = src.pop("secretName")
                self._write_keys(target, "Secret", src, ns, decode=True)
        return local_paths

    def _container_env(self, pod: JSON, container: JSON) -> dict[str, str]:
        """The container's environment: its values, its fieldRefs, and the Services it can reach here."""
        spec = pod["spec"]
        env: dict[str, str] = {}
        for item in container.get("env") or []:
            if "value" in item:
                env[item["name"]] = expand(item["value"], env)
            elif "valueFrom" in item:
                env[item["name"]] = self._field(pod, item["valueFrom"])
        hosts = self._host_map(pod["metadata"]["namespace"])
        hostname, subdomain = spec.get("hostname"), spec.get("subdomain")
        if hostname and subdomain and f"{hostname}.{subdomain}" in hosts:
            env["RLCLOUD_PORT"] = str(hosts[f"{hostname}.{subdomain}"])
            env["RLCLOUD_BIND_HOST"] = "127.0.0.1"
        if hosts:
            env["RLCLOUD_HOST_MAP"] = ",".join(f"{h}=127.0.0.1:{p}" for h, p in sorted(hosts.items()))
        return env

    def _start_probes(
        self, c: _Container, pod: JSON, rewrite: Callable[[str], str], pod_dir: Path, process_env: dict[str, str]
    ) -> None:
        (container,) = pod["spec"]["containers"]
        probes = {kind: container.get(f"{kind}Probe") for kind in ("startup", "liveness")}
        if not any(probes.values()):
            return
        commands = {}
        for kind, probe in probes.items():
            command = [rewrite(a) for a in ((probe or {}).get("exec") or {}).get("command") or []]
            if command and command[0] in ("python", "python3"):
                command[0] = sys.executable
            commands[kind] = command
        threading.Thread(
            target=self._probe_container,
            args=(c, pod, probes, commands, pod_dir, process_env),
            name=f"probes-{c.pod}",
            daemon=True,
        ).start()

    def _probe_container(
        self,
        c: _Container,
        pod: JSON,
        probes: dict[str, JSON | None],
        commands: dict[str, list[str]],
        cwd: Path,
        env: dict[str, str],
    ) -> None:
        """Run a container's exec startupProbe, then its livenessProbe, as the kubelet does ("Configure
        Liveness, Readiness and Startup Probes", kubernetes.io/docs/tasks/configure-pod-container/
        configure-liveness-readiness-startup-probes/). With a startup probe, "liveness and readiness probes
        do not start until it succeeds", and their ``initialDelaySeconds`` counts from that success ("If a
        startup probe is defined, liveness and readiness probe delays do not begin until the startup probe
        has succeeded"); it is not run again after. Each probe: first after ``initialDelaySeconds`` (0),
        then every ``periodSeconds`` (10); a non-zero exit or a run longer than ``timeoutSeconds`` (1) is a
        failure (an ``Unhealthy`` Event with its output); after ``failureThreshold`` (3) failures in a row
        the container is killed (a ``Killing`` Event; SIGTERM, SIGKILL after the pod's grace period) "and
        the container is subjected to its restart policy": with ``restartPolicy: Never`` (the only one this
        fake runs; Jobs also allow OnFailure, an in-place restart it does not model) the pod fails with the
        container's exit code and its Job decides what follows. Only ``exec`` probes are modelled; the API
        server refuses other kinds of probe nowhere, so neither does this fake: a tcpSocket/httpGet probe is
        reported on stderr and not run (a startup probe of that kind is taken as succeeded)."""
        if (pod.get("spec") or {}).get("restartPolicy", "Always") != "Never":
            print(f"fake kubelet: {c.pod}: probe restarts in place are not modelled", file=sys.stderr)
            return
        for kind in ("startup", "liveness"):
            probe = probes.get(kind)
            if not probe:
                continue
            if not commands[kind]:
                print(f"fake kubelet: {c.pod}: only exec {kind} probes are run, not {sorted(probe)}", file=sys.stderr)
                continue
            if not self._run_probe(c, pod, kind, probe, commands[kind], cwd, env):
                return  # killed, or the container ended

    def _run_probe(
        self, c: _Container, pod: JSON, kind: str, probe: JSON, command: list[str], cwd: Path, env: dict[str, str]
    ) -> bool:
        """Run one probe (:meth:`_probe_container`): a startup probe until its first success (True), a
        liveness probe while the container runs; False once the container is killed for it or has ended."""
        period = max(1, int(probe.get("periodSeconds", 10)))
        timeout = max(1, int(probe.get("timeoutSeconds", 1)))
        threshold = max(1, int(probe.get("failureThreshold", 3)))
        title = kind.capitalize()
        failures = 0
        if self._stop.wait(float(probe.get("initialDelaySeconds", 0))):
            return False
        while not self._stop.is_set() and c.process.poll() is None and not c.deleted:
            try:
                done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, timeout=timeout, check=False)
                ok, output = done.returncode == 0, (done.stdout + done.stderr).decode(errors="replace").strip()
            except subprocess.TimeoutExpired:
                ok, output = False, f"command timed out after {timeout}s"
            if c.process.poll() is not None or c.deleted:
                return False
            if ok and kind == "startup":
                self.probe_successes.append((c.namespace, c.pod, kind))
                return True
            if ok:
                failures = 0
            else:
                failures += 1
                self.probe_failures.append((c.namespace, c.pod, output))
                current = self.apiserver.get_object("Pod", c.pod, c.namespace)
                if current is None:
                    return False
                self.apiserver.record_event(
                    c.namespace, current, "Unhealthy", f"{title} probe failed: {output}", component="kubelet"
                )
                if failures >= threshold:
                    name = pod["spec"]["containers"][0]["name"]
                    self.apiserver.record_event(
                        c.namespace,
                        current,
                        "Killing",
                        f"Container {name} failed {kind} probe, will be restarted",
                        type_="Normal",
                        component="kubelet",
                    )
                    self._kill_for_liveness(c)
                    return False
            self._stop.wait(period)
        return False

    def _kill_for_liveness(self, c: _Container) -> None:
        """Stop a container that failed its liveness probe: SIGTERM (and SIGCONT, as the runtime's kill does
        to a stopped process), SIGKILL after the grace period; _check_exit then records the exit."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(c.process.pid, signal.SIGTERM)
            os.killpg(c.process.pid, signal.SIGCONT)
        try:
            c.process.wait(timeout=c.grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(c.process.pid, signal.SIGKILL)
            c.process.wait()

    def _write_keys(self, target: Path, kind: str, source: JSON, namespace: str, *, decode: bool) -> None:
        import base64

        obj = self.apiserver.get_object(kind, source["name"], namespace)
        if obj is None:
            raise RuntimeError(f'{kind.lower()} "{source["name"]}" not found')
        data = dict(obj.get("data") or {})
        items = source.get("items") or [{"key": k, "path": k} for k in data]
        for item in items:
            raw = data[item["key"]]
            content = base64.b64decode(raw) if decode else raw.encode()
            path = target / item["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            if source.get("defaultMode") is not None:
                path.chmod(int(source["defaultMode"]))

    @staticmethod
    def _field(pod: JSON, source: JSON) -> str:
        ref = (source.get("fieldRef") or {}).get("fieldPath", "")
        m = _FIELD_MAP.match(ref)
        if m:
            return str((pod["metadata"].get(m.group(1)) or {}).get(m.group(2), ""))
        if ref == "metadata.name":
            return str(pod["metadata"]["name"])
        if ref == "metadata.namespace":
            return str(pod["metadata"]["namespace"])
        if ref == "status.podIP":
            return "127.0.0.1"
        raise RuntimeError(f"fake kubelet: unsupported env source {source}")

    def _pump(self, c: _Container, log_file: Any) -> None:
        assert c.process.stdout is not None
        with log_file:
            for chunk in iter(lambda: c.process.stdout.read1(65536), b""):  # type: ignore[union-attr]
                log_file.write(chunk)
                log_file.flush()
                self.apiserver.append_log(c.namespace, c.pod, chunk)
        c.process.stdout.close()
        c.process.wait()

    def _check_exit(self, c: _Container, pod: JSON) -> None:
        code = c.process.poll()
        if code is None or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            return
        if "deletionTimestamp" in pod["metadata"]:
            return  # being deleted: _terminate removes it
        if c.reader is not None:
            c.reader.join(timeout=5)  # the log is complete before the pod is reported finished
        exit_code = code if code >= 0 else 128 - code  # killed by a signal: 128 + signal number
        self.exits.append((c.namespace, c.pod, exit_code))
        status = copy.deepcopy(pod.get("status") or {})
        status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
        for cs in status.get("containerStatuses") or []:
            cs["ready"] = False
            cs["state"] = {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": "Completed" if exit_code == 0 else "Error",
                    "startedAt": cs.get("state", {}).get("running", {}).get("startedAt", _now()),
                    "finishedAt": _now(),
                }
            }
        status["conditions"] = [c2 for c2 in status.get("conditions") or [] if c2.get("type") != "Ready"] + [
            {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": _now()}
        ]
        self.apiserver.update_status("Pod", c.pod, c.namespace, status)

    def _terminate(self, c: _Container, grace: float | None = None) -> None:
        if c.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                c.process.send_signal(signal.SIGTERM)
            try:
                c.process.wait(timeout=c.grace if grace is None else grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(c.process.pid, signal.SIGKILL)
                c.process.wait()
        if c.reader is not None:
            c.reader.join(timeout=5)
        if c.deleted:
            code = c.process.returncode
            with self._lock:
                if not any(ns == c.namespace and pod == c.pod for ns, pod, _ in self.exits):
                    self.exits.append((c.namespace, c.pod, code if code >= 0 else 128 - code))
            self.apiserver.delete_object("Pod", c.pod, c.namespace, force=True)
        with self._lock:
            if self._containers.get((c.namespace, c.pod)) is c and c.deleted:
                del self._containers[(c.namespace, c.pod)]


def _container_exit(pod: JSON) -> int | None:
    for cs in pod.get("status", {}).get("containerStatuses") or []:
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated:
            return int(terminated["exitCode"])
    return None


def _rewriter(mounts: Iterable[tuple[str, Path]]) -> Callable[[str], str]:
    """A path in the container -> the local folder its volume is mounted from (the longest mount first)."""
    ordered = sorted(mounts, key=lambda m: -len(m[0]))

    def rewrite(value: str) -> str:
        for mount_path, local in ordered:
            if value == mount_path or value.startswith(mount_path.rstrip("/") + "/"):
                return str(local) + value[len(mount_path.rstrip("/")) :]
        return value

    return rewrite


def _container_status(spec: JSON, ready: bool, state: JSON, **extra: Any) -> JSON:
    """The one container's status, as the kubelet reports it."""
    container = spec["containers"][0]
    return {
        "name": container["name"],
        "ready": ready,
        "restartCount": 0,
        "image": container.get("image", ""),
        "imageID": "",
        **extra,
        "state": state,
    }


def _set_condition(conditions: list[JSON], kind: str, reason: str, message: str, value: str = "True") -> None:
    """Set a Job condition, its transition time changed only when its status changes."""
    for c in conditions:
        if c["type"] == kind:
            if c["status"] != value:
                c.update(status=value, reason=reason, message=message, lastTransitionTime=_now())
            return
    conditions.append(
        {"type": kind, "status": value, "reason": reason, "message": message, "lastTransitionTime": _now()}
    )


def _format_indexes(indexes: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5" (the Job status format)."""
    parts: list[str] = []
    start = prev = None
    for i in indexes:
        if start is None:
            start = prev = i
        elif i == prev + 1:  # type: ignore[operator]
            prev = i
        else:
            parts.append(f"{start}-{prev}" if start != prev else f"{start}")
            start = prev = i
    if start is not None:
        parts.append(f"{start}-{prev}" if start != prev else f"{start}")
    return ",".join(parts)
