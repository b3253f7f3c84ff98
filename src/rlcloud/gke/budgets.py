"""Money budgets enforced inside a GKE cluster, by the reaper (:mod:`rlcloud.gke.reaper`, every 5 minutes).

The decisions are :mod:`rlcloud.budget`'s (pure); this module reads what it needs from the Kubernetes API,
prices it, and acts:

* **What a run costs**: each pod of an rlcloud Job (label ``rlcloud.io/experiment`` or ``rlcloud.io/sweep``) is
  priced from its node: the node's labels (``node.kubernetes.io/instance-type``,
  ``cloud.google.com/gke-accelerator``, ``cloud.google.com/gke-spot``) and allocatable ``nvidia.com/gpu`` give
  its hourly list price (:func:`rlcloud.gke.prices.machine_hourly_cost`), the pod's requests its share
  (:func:`rlcloud.budget.pod_share`), its start and end (or now) its runtime. The sum over the run's pods, pods
  that are gone included (a ledger of pod uid -> USD in the annotation ``rlcloud.io/cost-ledger``), is written
  on the run's budget Job (``rlcloud.io/cost-usd``).
* **A run's budget** (``rlcloud.io/budget-usd`` on its learner's or its sweep's Job, written by ``start``): at
  90% a Warning Event ``BudgetWarning`` on that Job (once: ``rlcloud.io/budget-state: warned``); at 100% the Job
  is suspended (``spec.suspend``: the Job controller deletes its pods, each runner gets SIGTERM, writes its
  checkpoint to the results store and exits within the grace period; a sweep's Indexed Job starts no further
  trial), ``rlcloud.io/budget-state: stopped`` and ``rlcloud.io/stop-reason`` say why, and a Warning Event
  ``BudgetExceeded`` is recorded. A distributed run's env servers are suspended once its learner's pods are gone.
* **A cluster's budget** (its label ``budget-cents``): the cluster's cost so far is its pools' node-hours at
  list price plus the GKE fee (:meth:`rlcloud.gke.info.ClusterInfo.cost_so_far`). At 100% every running
  rlcloud Job is suspended as above; once no rlcloud pod is left (their checkpoints are stored) the reaper
  deletes the cluster (:func:`rlcloud.budget.decide_cluster`), in the same run when the pods end within
  :data:`STOP_WAIT_SECONDS`, else in the next one.

What the reaper may do for this (docs/gke-setup.md): get/list Jobs, pods and nodes, patch Jobs, create Events.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlcloud.budget import (
    ANNOTATION_BUDGET,
    ANNOTATION_BUDGET_STATE,
    ANNOTATION_COST,
    ANNOTATION_LEDGER,
    ANNOTATION_STOP_REASON,
    BudgetDecision,
    ClusterBudgetDecision,
    account,
    decide,
    decide_cluster,
    pod_cost,
    pod_share,
    read_annotation_usd,
    read_budget_label,
)
from rlcloud.k8s.builders import LABEL_EXPERIMENT as _LABEL_EXPERIMENT
from rlcloud.k8s.builders import LABEL_ROLE as _LABEL_ROLE
from rlcloud.k8s.builders import LABEL_SWEEP as _LABEL_SWEEP
from rlcloud.roles import Role
from rlcloud.timestamps import format_rfc3339, rfc3339_seconds

__all__ = [
    "EVENT_BUDGET_EXCEEDED",
    "EVENT_BUDGET_WARNING",
    "STOP_WAIT_SECONDS",
    "BudgetReport",
    "Budgets",
    "Workload",
    "enforce_budgets",
    "enforce_run_budgets",
    "node_prices",
    "run_costs",
    "stop_workloads",
    "warning_event",
    "workloads",
]

log = logging.getLogger("rlcloud.gke.reaper")

EVENT_BUDGET_WARNING = "BudgetWarning"
EVENT_BUDGET_EXCEEDED = "BudgetExceeded"
#: How long one reaper run waits for stopped runs' pods to end (they checkpoint within their grace period,
#: k8s.builders.LEARNER_GRACE_SECONDS) before it deletes a cluster over budget; past it the next run does.
STOP_WAIT_SECONDS = 150.0

_ENV_SERVER_ROLE = Role.ENV_SERVER.value
_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
_ACCELERATOR = "cloud.google.com/gke-accelerator"
_SPOT_LABELS = ("cloud.google.com/gke-spot", "cloud.google.com/gke-preemptible")
_GPU = "nvidia.com/gpu"
#: GKE labels GPU-sharing nodes with the containers that share each GPU ("Time-sharing GPUs on GKE")
_SHARED_CLIENTS = "cloud.google.com/gke-max-shared-clients-per-gpu"
_FINISHED = {"Complete", "Failed"}

JSON = dict[str, Any]


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _quantity(value: Any) -> float:
    from kubernetes.utils import parse_quantity

    try:
        return float(parse_quantity(value))
    except (ValueError, TypeError, ArithmeticError):
        return 0.0


def _finished(job: Mapping[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") in _FINISHED and c.get("status") == "True" for c in conditions)


def _suspended(job: Mapping[str, Any]) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


def _group(obj: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(namespace, kind, name) of the run an object belongs to: an experiment or a sweep, by its labels."""
    labels = _meta(obj).get("labels") or {}
    namespace = str(_meta(obj).get("namespace") or "")
    if labels.get(_LABEL_SWEEP):
        return namespace, "sweep", str(labels[_LABEL_SWEEP])
    if labels.get(_LABEL_EXPERIMENT):
        return namespace, "experiment", str(labels[_LABEL_EXPERIMENT])
    return None


# ------------------------------------------------------------------------------------------------ pricing


def node_prices(nodes: Iterable[Mapping[str, Any]]) -> dict[str, tuple[float | None, dict[str, float]]]:
    """Each node's hourly list price (None when its machine type has no price in the table) and allocatable
    ``cpu``, ``memory`` and ``nvidia.com/gpu``, by node name (pure)."""
    from rlcloud.gke.prices import machine_hourly_cost

    table: dict[str, tuple[float | None, dict[str, float]]] = {}
    for node in nodes:
        labels = _meta(node).get("labels") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        amounts = {r: _quantity(allocatable[r]) for r in ("cpu", "memory", _GPU) if r in allocatable}
        machine = labels.get(_INSTANCE_TYPE)
        price = None
        if isinstance(machine, str) and machine:
            # a time-shared (or MPS) GPU is advertised once per client (GKE's node label says how many): the
            # node still has, and is billed for, one physical GPU
            shared = _quantity(labels.get(_SHARED_CLIENTS) or 1) or 1
            gpus = int(amounts.get(_GPU, 0) // shared)
            price = machine_hourly_cost(
                machine,
                spot=any(labels.get(k) == "true" for k in _SPOT_LABELS),
                gpu_type=labels.get(_ACCELERATOR) if gpus else None,
                gpus=gpus,
            )
        table[str(_meta(node).get("name"))] = (price, amounts)
    return table


def _requests(pod: Mapping[str, Any]) -> dict[str, float]:
    """A pod's requests (a container's limit stands in for a request it lacks, as the API server defaults it)."""
    total = {"cpu": 0.0, "memory": 0.0, _GPU: 0.0}
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for resource in total:
            value = requests.get(resource, limits.get(resource))
            if value is not None:
                total[resource] += _quantity(value)
    return total


def _runtime(pod: Mapping[str, Any], now: float) -> float:
    """Seconds a pod has held its node: from its start to its containers' end, or to now."""
    status = pod.get("status") or {}
    start = rfc3339_seconds(status.get("startTime"))
    if start is None:
        return 0.0
    ends = [
        rfc3339_seconds(((c.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for c in status.get("containerStatuses") or []
    ]
    finished = [e for e in ends if e is not None]
    running = any("running" in (c.get("state") or {}) for c in status.get("containerStatuses") or [])
    end = max(finished) if finished and not running else now
    return max(0.0, min(end, now) - start)


def run_costs(
    pods: Iterable[Mapping[str, Any]],
    prices: Mapping[str, tuple[float | None, dict[str, float]]],
    now: float,
) -> tuple[dict[tuple[str, str, str], dict[str, float]], list[str]]:
    """Each run's pods' costs so far (USD by pod uid), by (namespace, kind, name), and the nodes without a price
    (pure). A pod not bound to a node (Pending) costs nothing; one on a node without a price is left out and
    its node named."""
    costs: dict[tuple[str, str, str], dict[str, float]] = {}
    unpriced: set[str] = set()
    for pod in pods:
        key = _group(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        uid = _meta(pod).get("uid") or _meta(pod).get("name")
        if key is None or not node or not uid:
            continue
        price, allocatable = prices.get(node, (None, {}))
        if price is None:
            unpriced.add(str(node))
            costs.setdefault(key, {})  # it runs, at a cost unknown
            continue
        share = pod_share(_requests(pod), allocatable)
        costs.setdefault(key, {})[str(uid)] = pod_cost(_runtime(pod, now), price, share)
    return costs, sorted(unpriced)


# ------------------------------------------------------------------------------------------------ workloads


@dataclass
class Workload:
    """One rlcloud run (an experiment, or a sweep) in the cluster: its Jobs and its budget's state."""

    namespace: str
    kind: str  # "experiment" | "sweep"
    name: str
    jobs: list[JSON] = field(default_factory=list)

    @property
    def anchor(self) -> JSON:
        """The Job that carries the budget (the learner's or the sweep's): the one annotated, else the first."""
        for job in self.jobs:
            if ANNOTATION_BUDGET in (_meta(job).get("annotations") or {}):
                return job
        return next((j for j in self.jobs if (_meta(j).get("labels") or {}).get(_LABEL_ROLE) != _ENV_SERVER_ROLE),
                    self.jobs[0])  # fmt: skip

    def annotation(self, key: str) -> str | None:
        """An annotation of the anchor Job."""
        value = (_meta(self.anchor).get("annotations") or {}).get(key)
        return value if isinstance(value, str) else None

    @property
    def budget(self) -> float | None:
        """The run's budget in USD, None without one (or an unreadable annotation)."""
        return read_annotation_usd(self.annotation(ANNOTATION_BUDGET))

    @property
    def ledger(self) -> dict[str, float]:
        """USD by pod uid as recorded by earlier runs of the reaper."""
        try:
            data = json.loads(self.annotation(ANNOTATION_LEDGER) or "{}")
        except ValueError:
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float) and v >= 0}

    @property
    def running(self) -> bool:
        """Some Job of the run is neither finished nor suspended."""
        return any(not _finished(j) and not _suspended(j) for j in self.jobs)

    @property
    def label(self) -> str:
        """``experiment ns/name`` or ``sweep ns/name``."""
        return f"{self.kind} {self.namespace}/{self.name}"


def workloads(jobs: Iterable[Mapping[str, Any]], *, own_namespace: str) -> list[Workload]:
    """Rlcloud's runs from its Jobs (the reaper's own namespace left out), in a stable order (pure)."""
    found: dict[tuple[str, str, str], Workload] = {}
    for job in jobs:
        key = _group(job)
        if key is None or key[0] == own_namespace:
            continue
        found.setdefault(key, Workload(*key)).jobs.append(dict(job))
    return [found[k] for k in sorted(found)]


# ------------------------------------------------------------------------------------------------ acting


@dataclass
class BudgetReport:
    """What one reaper run did about budgets: a line per run with a budget, the runs it warned and stopped."""

    lines: list[str] = field(default_factory=list)
    warned: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _patch_job(applier: Any, job: Mapping[str, Any], body: JSON, what: str) -> None:
    from rlcloud.k8s.applier import path_for

    meta = _meta(job)
    applier.checked_json(
        what,
        "PATCH",
        path_for("Job", str(meta.get("namespace")), str(meta.get("name"))),
        body=body,
        content_type="application/merge-patch+json",
    )


def job_event(applier: Any, job: Mapping[str, Any], reason: str, message: str, now: float) -> None:
    """A Warning Event on ``job`` (``kubectl describe job`` and ``kubectl get events`` show it)."""
    from rlcloud.k8s.applier import path_for

    meta = _meta(job)
    namespace = str(meta.get("namespace"))
    involved = {"apiVersion": "batch/v1", "kind": "Job", "name": meta.get("name"), "uid": meta.get("uid")}
    body = warning_event(namespace, f"{meta.get('name')}.budget.{int(now)}", involved, reason, message, now)
    applier.checked_json(f"record event {reason}", "POST", path_for("Event", namespace), body=body)


def warning_event(
    namespace: str, name: str, involved: Mapping[str, Any], reason: str, message: str, now: float
) -> JSON:
    """A Warning Event from the reaper (pure): ``name`` in ``namespace``, about ``involved`` (the object's
    ``apiVersion``, ``kind``, ``name`` and, for a Job, ``uid``; it is in the same namespace)."""
    stamp = format_rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {**involved, "namespace": namespace},
        "reason": reason,
        "message": message,
        "type": "Warning",
        "source": {"component": "rlcloud-reaper"},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def stop_workloads(applier: Any, runs: Iterable[Workload], reason: str, now: float) -> list[Workload]:
    """Suspend each run's learner or sweep Job (its pods get SIGTERM and checkpoint) and mark it stopped with
    ``reason``; env-server Jobs wait for :func:`release_env_servers`. Returns the runs it stopped."""
    stopped = []
    for run in runs:
        anchor = run.anchor
        for job in run.jobs:
            if _finished(job) or (_meta(job).get("labels") or {}).get(_LABEL_ROLE) == _ENV_SERVER_ROLE:
                continue
            body: JSON = {"spec": {"suspend": True}}
            if job is anchor:
                body["metadata"] = {
                    "annotations": {ANNOTATION_BUDGET_STATE: "stopped", ANNOTATION_STOP_REASON: reason[:500]}
                }
            _patch_job(applier, job, body, f"suspend Job {_meta(job).get('name')} (budget)")
        job_event(applier, anchor, EVENT_BUDGET_EXCEEDED, f"rlcloud reaper stops {run.label}: {reason}", now)
        log.warning("%s: %s: stopped (it checkpoints; resume it with a larger budget)", run.label, reason)
        stopped.append(run)
    return stopped


def release_env_servers(applier: Any, runs: Iterable[Workload]) -> None:
    """Suspend the env-server Jobs of stopped runs (after their learner's pods are gone: the learner's last
    checkpoint does not wait for an env server that is gone)."""
    for run in runs:
        for job in run.jobs:
            if _is_env(job) and not _suspended(job):
                _patch_job(applier, job, {"spec": {"suspend": True}}, f"suspend Job {_meta(job).get('name')}")


def wait_for_pods_gone(
    list_pods: Callable[[], list[JSON]],
    runs: Iterable[Workload],
    *,
    timeout: float,
    learners_only: bool = False,
    interval: float = 1.0,
) -> int:
    """Wait (at most ``timeout`` seconds) until no pod of ``runs`` (``learners_only``: no pod but an env
    server's) is live; returns how many are left."""
    from rlcloud.waiting import poll_until

    keys = {(r.namespace, r.kind, r.name) for r in runs}
    left: list[JSON] = []

    def gone() -> bool | None:
        left[:] = [
            p
            for p in list_pods()
            if _group(p) in keys
            and _live(p)
            and not (learners_only and (_meta(p).get("labels") or {}).get(_LABEL_ROLE) == _ENV_SERVER_ROLE)
        ]
        return True if not left else None

    poll_until(gone, time.monotonic() + timeout, interval=interval)
    return len(left)


def enforce_run_budgets(
    applier: Any,
    *,
    jobs: list[JSON],
    pods: list[JSON],
    nodes: list[JSON],
    now: float,
    own_namespace: str,
    dry_run: bool = False,
    list_pods: Callable[[], list[JSON]] | None = None,
    wait_seconds: float = STOP_WAIT_SECONDS,
) -> BudgetReport:
    """Price every rlcloud run, record its cost, and warn or stop those at 90% or 100% of their budget.

    ``list_pods``: lists rlcloud's pods again (to wait for a stopped distributed run's learner before its env
    servers are suspended); None: no wait, the next reaper run does it. ``dry_run`` records nothing, stops
    nothing. Returns what was done; an API error on one run is a problem recorded, the others go on.
    """
    report = BudgetReport()
    prices = node_prices(nodes)
    costs, unpriced = run_costs(pods, prices, now)
    if unpriced:
        report.problems.append(f"no list price for node(s) {', '.join(unpriced[:5])}: their pods are not counted")
    stopped: list[Workload] = []
    for run in workloads(jobs, own_namespace=own_namespace):
        key = (run.namespace, run.kind, run.name)
        ledger = account(run.ledger, costs.get(key, {}))
        # pods that run on nodes without a price, and nothing priced yet: the cost is unknown, never $0
        cost: float | None = round(sum(ledger.values()), 4) if ledger or key not in costs else None
        state = run.annotation(ANNOTATION_BUDGET_STATE)
        budget = run.budget
        decision = (
            decide(cost, budget, warned=state in ("warned", "stopped"))
            if state != "stopped"
            else BudgetDecision("none", "stopped by its budget")
        )
        if budget is not None:
            report.lines.append(f"{run.label}: {decision.reason}")
        if dry_run or (budget is None and not ledger) or (cost is None and not ledger):
            continue
        try:
            annotations: JSON = {ANNOTATION_LEDGER: json.dumps(ledger, sort_keys=True)}
            if cost is not None:
                annotations[ANNOTATION_COST] = f"{cost:.4f}"
            if decision.action == "warn":
                annotations[ANNOTATION_BUDGET_STATE] = "warned"
            if any(run.annotation(k) != v for k, v in annotations.items()):  # a finished run is not patched again
                what = f"record the cost of {run.label}"
                _patch_job(applier, run.anchor, {"metadata": {"annotations": annotations}}, what)
            if decision.action == "warn":
                message = f"rlcloud reaper: {run.label}: {decision.reason}"
                job_event(applier, run.anchor, EVENT_BUDGET_WARNING, message, now)
                log.warning("%s: %s", run.label, decision.reason)
                report.warned.append(run.label)
            elif decision.action == "stop" and run.running:
                stopped += stop_workloads(applier, [run], decision.reason, now)
                report.stopped.append(run.label)
            elif state == "stopped":
                stopped.append(run)  # stopped earlier: its env servers may still wait for release
        except Exception as exc:  # one run's refusal must not keep the others (or the cluster) unpriced
            report.problems.append(f"{run.label}: {exc}")
            log.warning("budget of %s: %s", run.label, exc)
    with_env = [r for r in stopped if any(_is_env(j) and not _suspended(j) for j in r.jobs)]
    if (
        with_env
        and list_pods is not None
        and not dry_run
        and not wait_for_pods_gone(list_pods, with_env, timeout=wait_seconds, learners_only=True)
    ):
        release_env_servers(applier, with_env)
    return report


def _is_env(job: Mapping[str, Any]) -> bool:
    return (_meta(job).get("labels") or {}).get(_LABEL_ROLE) == _ENV_SERVER_ROLE and not _finished(job)


def _live(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase", "Pending") in ("Pending", "Running")


@dataclass
class Budgets:
    """What a reaper run found and did about budgets: the cluster's step (None without a cluster budget) and
    the lines it records in its ConfigMap."""

    cluster: ClusterBudgetDecision | None
    data: dict[str, str]


def enforce_budgets(
    applier: Any,
    *,
    cluster_info: Any,
    jobs: list[JSON],
    pods: list[JSON],
    now: float,
    own_namespace: str,
    previous: Mapping[str, str],
    dry_run: bool = False,
    wait_seconds: float = STOP_WAIT_SECONDS,
) -> Budgets:
    """Every budget of one reaper run: the runs' (:func:`enforce_run_budgets`), then the cluster's.

    ``cluster_info``: the cluster (:class:`rlcloud.gke.info.ClusterInfo`: its labels and cost so far);
    ``previous``: the reaper ConfigMap's data of the last run (whether the cluster was warned). A cluster over
    its budget has its running rlcloud Jobs stopped, then this run waits up to ``wait_seconds`` for their pods
    to end; the returned decision says ``delete`` once none is left. Never raises: what failed is recorded.
    """
    problems: list[str] = []
    selector = {"labelSelector": "app.kubernetes.io/managed-by=rlcloud"}
    # one deadline for every wait of this run: the reaper's Job has RUN_DEADLINE_SECONDS in all
    deadline = time.monotonic() + wait_seconds

    def left() -> float:
        return max(0.0, deadline - time.monotonic())

    def list_pods() -> list[JSON]:
        return list(applier.checked_json("list rlcloud pods", "GET", "/api/v1/pods", query=selector).get("items") or [])

    try:
        nodes = list(applier.checked_json("list nodes", "GET", "/api/v1/nodes").get("items") or [])
    except Exception as exc:  # pods cannot be priced: runs' budgets wait, the cluster's (node pools) still acts
        problems.append(f"cannot list the nodes to price pods: {exc}")
        nodes = []
    report = enforce_run_budgets(
        applier,
        jobs=jobs,
        pods=pods,
        nodes=nodes,
        now=now,
        own_namespace=own_namespace,
        dry_run=dry_run,
        list_pods=list_pods,
        wait_seconds=left(),
    )
    problems += report.problems
    budget, label_problem = read_budget_label(getattr(cluster_info, "labels", {}) or {})
    if label_problem:
        problems.append(label_problem)
    decision = None
    cluster_line = ""
    if budget is not None:
        so_far = cluster_info.cost_so_far(now)
        decision = _cluster_step(
            applier,
            budget=budget,
            cost=so_far.usd if so_far is not None else None,
            warned=previous.get("budget_warned") == "true",
            runs=workloads(jobs, own_namespace=own_namespace),
            live_pods=sum(_live(p) for p in pods if _meta(p).get("namespace") != own_namespace),
            now=now,
            dry_run=dry_run,
            waits=(list_pods, left),
            problems=problems,
        )
        cluster_line = decision.reason
        log.log(logging.WARNING if decision.action != "none" else logging.INFO, "cluster budget: %s", cluster_line)
    warned_now = decision is not None and decision.action != "none"
    if decision is not None and decision.action == "warn" and not dry_run:
        log.warning("cluster budget: %s", decision.reason)
    data = {
        "budget_cluster": cluster_line,
        "budget_warned": "true" if warned_now or previous.get("budget_warned") == "true" else "",
        "budget_runs": json.dumps(report.lines[:50]),
        "budget_stopped": json.dumps(report.stopped[:50]),
        "budget_problems": "; ".join(problems)[:2000],
    }
    return Budgets(decision, data)


def _cluster_step(
    applier: Any,
    *,
    budget: float,
    cost: float | None,
    warned: bool,
    runs: list[Workload],
    live_pods: int,
    now: float,
    dry_run: bool,
    waits: tuple[Callable[[], list[JSON]], Callable[[], float]],
    problems: list[str],
) -> ClusterBudgetDecision:
    """The cluster's budget step (:func:`rlcloud.budget.decide_cluster`), acted on but in a ``dry_run``: over its
    budget, its running runs are stopped (``stop-runs``) and their pods waited for (``wait``), then it is decided
    again (``delete`` once none is left). ``waits``: (list rlcloud's pods, seconds left to wait for them). What
    failed goes into ``problems``."""
    running = [r for r in runs if r.running]
    decision = decide_cluster(cost, budget, warned=warned, running_jobs=len(running), live_pods=live_pods)
    if dry_run or decision.action not in ("stop-runs", "wait"):
        return decision
    list_pods, left = waits
    if decision.action == "stop-runs":
        try:
            stop_workloads(applier, running, f"the cluster's {decision.reason}", now)
            live = wait_for_pods_gone(list_pods, runs, timeout=left(), learners_only=True)
            if not live:
                release_env_servers(applier, runs)
                live = wait_for_pods_gone(list_pods, runs, timeout=left())
        except Exception as exc:
            problems.append(f"stopping the cluster's runs: {exc}")
            return decision
    else:
        with_env = [r for r in runs if any(_is_env(j) and not _suspended(j) for j in r.jobs)]
        try:
            release_env_servers(applier, with_env)
            live = wait_for_pods_gone(list_pods, runs, timeout=left())
        except Exception as exc:
            problems.append(f"waiting for the cluster's runs to stop: {exc}")
            live = 1
    return decide_cluster(cost, budget, warned=True, running_jobs=0, live_pods=live)
