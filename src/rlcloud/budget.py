"""Money budgets: what a run, a sweep or a cluster has cost so far, and what to do about its budget (pure).

A spec's ``budget`` (:class:`rlcloud.specs._base.Usd`) is a hard cap. The decisions here take every input as
an argument and make no call; the in-cluster reaper (:mod:`rlcloud.gke.budgets`, run by
:mod:`rlcloud.gke.reaper` every 5 minutes, with the laptop closed) and the local supervisor
(:mod:`rlcloud.local.supervisor`) act on them:

* below 90% of the budget: nothing;
* from 90%: a warning, once (a Warning Event on Kubernetes, a log line locally);
* from 100%: stop. A run is stopped the way a pause stops it (SIGTERM with a grace period: the runner writes
  a checkpoint to the results store and exits), so nothing learned is lost and ``resume`` (with a larger
  budget) goes on from there; a sweep stops launching trials and stops its running ones the same way; a
  cluster first stops every rlcloud run on it, waits until their pods are gone (a runner's pod ends only
  after its final checkpoint is uploaded), then is deleted (:func:`decide_cluster`).

How much a run has cost (docs/contracts.md, "Budgets"):

* On Kubernetes, each pod costs its runtime (start to end, or to now) x the hourly list price of its node
  (:mod:`rlcloud.gke.prices`: machine, GPUs, boot disk) x the share of that node it requested
  (:func:`pod_share`: the largest of its CPU, memory and GPU requests over the node's allocatable amounts).
  A run's cost is the sum over its pods, every start and retry included; a node shared by two runs is paid
  by each for the share it asked for; what nobody requested (an idle node, the GKE fee) is the cluster's.
* A cluster's cost is its pools' node-hours at list price plus the GKE fee since it was created
  (:meth:`rlcloud.gke.info.ClusterInfo.cost_so_far`, as ``rlcloud cluster list`` shows it).
* On this machine, a run costs its training time (progress.json ``elapsed``, all starts together) x its
  processes x ``cpu_hour_usd`` of rlcloud.yaml (:func:`local_price_per_hour`; 0, the default: free, so a
  budget never stops a local run).

Every figure is an estimate from list prices (no discounts, no egress); the budget acts on the estimate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ANNOTATION_BUDGET",
    "ANNOTATION_BUDGET_STATE",
    "ANNOTATION_COST",
    "ANNOTATION_LEDGER",
    "ANNOTATION_STOP_REASON",
    "CLUSTER_BUDGET_LABEL",
    "WARN_FRACTION",
    "BudgetDecision",
    "ClusterBudgetDecision",
    "account",
    "budget_label",
    "decide",
    "decide_cluster",
    "figures",
    "local_price_per_hour",
    "pod_cost",
    "pod_share",
    "read_budget_label",
]

#: The share of a budget at which the owner is warned (once).
WARN_FRACTION = 0.9

#: On an rlcloud Job (experiment learner and env servers, a sweep's Job): the run's budget in USD, written by
#: ``start`` from the spec. What the in-cluster reaper enforces.
ANNOTATION_BUDGET = "rlcloud.io/budget-usd"
#: Written by the reaper on that Job: the run's cost so far (USD, an estimate), at its last look.
ANNOTATION_COST = "rlcloud.io/cost-usd"
#: Written by the reaper: ``warned`` once the 90% warning was given, ``stopped`` once it stopped the run.
ANNOTATION_BUDGET_STATE = "rlcloud.io/budget-state"
#: Written by the reaper: why it stopped the run (one line, for ``status``).
ANNOTATION_STOP_REASON = "rlcloud.io/stop-reason"
#: Written by the reaper: ``{pod uid: USD}`` of every pod the run had, so the cost of pods that are gone (a
#: pause deletes them) still counts.
ANNOTATION_LEDGER = "rlcloud.io/cost-ledger"
#: The GKE cluster label of a cluster's budget, in whole cents (label values take no '.').
CLUSTER_BUDGET_LABEL = "budget-cents"

BudgetAction = Literal["none", "warn", "stop"]
ClusterAction = Literal["none", "warn", "stop-runs", "wait", "delete"]


@dataclass(frozen=True)
class BudgetDecision:
    """What to do about one budget now, and why (one line)."""

    action: BudgetAction
    reason: str


def _usd(amount: float) -> str:
    return f"${amount:,.2f}"


def decide(cost_usd: float | None, budget_usd: float | None, *, warned: bool = False) -> BudgetDecision:
    """Nothing, warn (from :data:`WARN_FRACTION` of the budget, once) or stop (at the budget).

    Args:
        cost_usd: the cost so far, None when unknown (then nothing is done: a budget never stops a run on a
            guess).
        budget_usd: the budget, None for none.
        warned: the warning was given already.

    Returns:
        The decision and its reason.
    """
    if budget_usd is None:
        return BudgetDecision("none", "no budget")
    if cost_usd is None:
        return BudgetDecision("none", f"budget {_usd(budget_usd)}; cost so far unknown")
    used = f"~{_usd(cost_usd)} of its budget of {_usd(budget_usd)} ({100 * cost_usd / budget_usd:.0f}%)"
    if cost_usd >= budget_usd:
        return BudgetDecision("stop", f"cost so far {used}: budget reached")
    if cost_usd >= WARN_FRACTION * budget_usd and not warned:
        return BudgetDecision("warn", f"cost so far {used}: it stops at 100%")
    return BudgetDecision("none", f"cost so far {used}")


@dataclass(frozen=True)
class ClusterBudgetDecision:
    """What to do about a cluster's budget: ``stop-runs`` (suspend every running rlcloud Job), ``wait``
    (their pods are still ending: checkpoints are being written), ``delete`` (nothing runs any more)."""

    action: ClusterAction
    reason: str

    @property
    def delete(self) -> bool:
        """True when the cluster is to be deleted now."""
        return self.action == "delete"


def decide_cluster(
    cost_usd: float | None, budget_usd: float | None, *, warned: bool, running_jobs: int, live_pods: int
) -> ClusterBudgetDecision:
    """The cluster's budget step: the runs are stopped first, and the cluster goes once their pods are gone.

    Args:
        cost_usd: the cluster's cost so far (None: unknown, nothing is done).
        budget_usd: its budget (None: none).
        warned: the 90% warning was given already.
        running_jobs: rlcloud Jobs that are neither finished nor suspended.
        live_pods: rlcloud pods that are Pending or Running (a stopped runner's pod lives until its checkpoint
            is uploaded).
    """
    base = decide(cost_usd, budget_usd, warned=warned)
    if base.action != "stop":
        return ClusterBudgetDecision(base.action, base.reason)
    if running_jobs:
        return ClusterBudgetDecision("stop-runs", f"{base.reason}: stopping {running_jobs} rlcloud Job(s) first")
    if live_pods:
        return ClusterBudgetDecision(
            "wait", f"{base.reason}: waiting for {live_pods} pod(s) to checkpoint and end before deleting the cluster"
        )
    return ClusterBudgetDecision("delete", f"{base.reason}: its runs are stopped and stored")


def pod_share(requests: Mapping[str, float], allocatable: Mapping[str, float]) -> float:
    """The share of its node a pod pays for: the largest of its ``cpu``, ``memory`` and ``nvidia.com/gpu``
    requests over the node's allocatable amounts, within 0..1 (a pod that requests a node's only GPU pays for
    the node). A resource the node does not have is left out; a pod that requests nothing pays nothing."""
    shares = [
        requests.get(resource, 0.0) / allocatable[resource]
        for resource in ("cpu", "memory", "nvidia.com/gpu")
        if allocatable.get(resource, 0.0) > 0
    ]
    return min(1.0, max([0.0, *shares]))


def pod_cost(seconds: float, node_price_per_hour: float, share: float) -> float:
    """USD a pod cost: its runtime (seconds) x its node's hourly price x its share of the node."""
    return max(seconds, 0.0) / 3600 * node_price_per_hour * share


def account(ledger: Mapping[str, float], seen: Mapping[str, float]) -> dict[str, float]:
    """The ledger after a look at the pods: each pod's cost is the larger of what was recorded and what is seen
    now (a pod that is gone keeps its last recorded cost). Costs are kept to 1/10,000 USD."""
    merged = dict(ledger)
    for uid, cost in seen.items():
        merged[uid] = round(max(cost, merged.get(uid, 0.0)), 4)
    return merged


def local_price_per_hour(cpu_hour_usd: float, processes: int) -> float | None:
    """USD per hour of a run on this machine: ``cpu_hour_usd`` for each of its processes; None when the rate is
    0 (unset: free, no budget acts)."""
    if not cpu_hour_usd or cpu_hour_usd <= 0:
        return None
    return cpu_hour_usd * max(processes, 1)


def figures(cost_usd: float | None, budget_usd: float | None) -> dict[str, float | None]:
    """The budget's figures for status: ``budget_usd`` and ``budget_percent`` (cost over budget, null when
    either is unknown)."""
    percent = None
    if cost_usd is not None and budget_usd:
        percent = round(100 * cost_usd / budget_usd, 1)
    return {"budget_usd": budget_usd, "budget_percent": percent}


def budget_label(budget_usd: float) -> str:
    """The cluster label value of a budget: whole cents (``12.5`` -> ``"1250"``)."""
    return str(round(budget_usd * 100))


def read_budget_label(labels: Mapping[str, str]) -> tuple[float | None, str | None]:
    """A cluster's budget from its :data:`CLUSTER_BUDGET_LABEL` (USD), and what is wrong with the label.

    A label that is no number of cents acts as absent (anyone with access to the project may write one): the
    problem is returned for the record, never raised.
    """
    raw = labels.get(CLUSTER_BUDGET_LABEL)
    if raw is None:
        return None, None
    if isinstance(raw, str) and raw.isascii() and raw.isdigit() and 0 < len(raw) <= 12 and int(raw) > 0:
        return int(raw) / 100, None
    return None, f"label {CLUSTER_BUDGET_LABEL}={raw[:40]!r} is no whole number of cents: the budget is not enforced"


def read_annotation_usd(value: object) -> float | None:
    """A USD amount from an annotation (a decimal string); None when absent or unreadable."""
    if not isinstance(value, str) or len(value) > 32:
        return None
    try:
        amount = float(value)
    except ValueError:
        return None
    return amount if math.isfinite(amount) and amount >= 0 else None
