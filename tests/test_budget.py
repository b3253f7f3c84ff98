"""Money budgets: the spec field and its aliases, the pure decisions and cost shares (rlcloud.budget), and how
the reaper prices pods from their nodes (rlcloud.gke.budgets, pure parts)."""

from __future__ import annotations

from typing import Any

import pytest

from rlcloud.budget import (
    ClusterBudgetDecision,
    account,
    budget_label,
    decide,
    decide_cluster,
    figures,
    local_price_per_hour,
    pod_cost,
    pod_share,
    read_budget_label,
)
from rlcloud.errors import SpecError
from rlcloud.gke.budgets import node_prices, run_costs, workloads
from rlcloud.gke.builders import cluster_labels
from rlcloud.gke.prices import machine_hourly_cost
from rlcloud.specs import ClusterSpec, ExperimentSpec
from rlcloud.specs._base import Usd
from rlcloud.specs.sweep import SweepSpec

BASE: dict[str, Any] = {
    "name": "capped",
    "environment": {"type": "gym", "level": "CartPole-v1"},
    "agent": {"type": "ppo"},
    "episodes": 3,
}

# ------------------------------------------------------------------------------------------------ spec


@pytest.mark.parametrize(
    ("given", "usd"),
    [({"budget": "25 USD"}, 25.0), ({"budget": 25}, 25.0), ({"budget_usd": 25}, 25.0), ({"budget": "$12.50"}, 12.5),
     ({"budget": "7usd"}, 7.0), ({"budget": None}, None), ({}, None)],
)  # fmt: skip
def test_a_budget_is_read_in_every_documented_form(given: dict[str, Any], usd: float | None) -> None:
    spec = ExperimentSpec.from_dict({**BASE, **given})
    assert (spec.budget.amount if spec.budget else None) == usd
    # written back in its one canonical form, and read back the same
    again = ExperimentSpec.from_yaml_text(spec.to_yaml())
    assert again.budget == spec.budget
    if usd is not None:
        assert f"budget: {usd:g} USD" in spec.to_yaml()


@pytest.mark.parametrize(
    ("given", "field", "words"),
    [
        ({"budget": "25 EUR"}, "budget", "budgets are in USD"),
        ({"budget": 0}, "budget", "more than 0 USD"),
        ({"budget": -5}, "budget", "more than 0 USD"),
        ({"budget": True}, "budget", "not true/false"),
        ({"budget": "lots"}, "budget", "a number of US dollars"),
        ({"budget": 10**9}, "budget", "at most 1,000,000 USD"),
        ({"budget": 0.001}, "budget", "whole cents"),
        ({"budget": [25]}, "budget", "a number of US dollars"),
        ({"budget": 3, "budget_usd": 4}, "budget_usd", "not both"),
    ],
)
def test_a_bad_budget_is_a_spec_error_naming_the_field(given: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        ExperimentSpec.from_dict({**BASE, **given})
    (problem,) = caught.value.problems
    assert problem.field == field and words in problem.message


def test_sweeps_and_clusters_take_a_budget_too() -> None:
    experiment = ExperimentSpec.from_dict(BASE)
    assert SweepSpec(name="s", experiment=experiment, budget_usd=40).budget == Usd(40.0)  # type: ignore[call-arg]
    cluster = ClusterSpec(name="c", budget="12.5 USD")  # type: ignore[arg-type]
    assert cluster.budget == Usd(12.5)
    # the reaper reads a cluster's budget from its label, in whole cents
    assert cluster_labels(cluster)["budget-cents"] == "1250"
    assert read_budget_label(cluster_labels(cluster)) == (12.5, None)
    with pytest.raises(SpecError) as caught:
        ClusterSpec.from_dict({"name": "c", "budget": "free"})
    assert caught.value.problems[0].field == "budget"


def test_an_unreadable_budget_label_acts_as_absent() -> None:
    for raw in ("12.5", "-3", "lots", "0", "9" * 40):
        budget, problem = read_budget_label({"budget-cents": raw})
        assert budget is None and problem is not None and "not enforced" in problem
    assert read_budget_label({}) == (None, None)
    assert budget_label(0.1) == "10"


# ------------------------------------------------------------------------------------------- decisions


@pytest.mark.parametrize(
    ("cost", "budget", "warned", "action"),
    [
        (5.0, None, False, "none"),  # no budget
        (None, 10.0, False, "none"),  # cost unknown: never a stop on a guess
        (8.99, 10.0, False, "none"),
        (9.0, 10.0, False, "warn"),  # 90%
        (9.5, 10.0, True, "none"),  # warned once
        (10.0, 10.0, False, "stop"),  # 100%
        (12.0, 10.0, True, "stop"),
    ],
)
def test_decide(cost: float | None, budget: float | None, warned: bool, action: str) -> None:
    assert decide(cost, budget, warned=warned).action == action


def test_decisions_say_how_much_of_which_budget() -> None:
    assert decide(9.2, 10.0).reason == "cost so far ~$9.20 of its budget of $10.00 (92%): it stops at 100%"
    assert decide(10.4, 10.0).reason.endswith("(104%): budget reached")


def test_a_cluster_stops_its_runs_waits_for_their_pods_then_goes() -> None:
    def step(cost: float, jobs: int, pods: int) -> ClusterBudgetDecision:
        return decide_cluster(cost, 10.0, warned=True, running_jobs=jobs, live_pods=pods)

    assert step(5.0, 2, 3).action == "none"
    assert decide_cluster(9.5, 10.0, warned=False, running_jobs=2, live_pods=3).action == "warn"
    assert step(10.0, 2, 3).action == "stop-runs"
    assert step(10.0, 0, 3).action == "wait"  # suspended, still checkpointing
    final = step(10.0, 0, 0)
    assert final.delete and "runs are stopped and stored" in final.reason
    assert not decide_cluster(None, 10.0, warned=False, running_jobs=0, live_pods=0).delete


def test_a_pod_pays_for_the_largest_share_of_its_node_it_requested() -> None:
    node = {"cpu": 4.0, "memory": 16.0, "nvidia.com/gpu": 1.0}
    assert pod_share({"cpu": 1.0, "memory": 2.0}, node) == 0.25
    assert pod_share({"cpu": 1.0, "memory": 8.0}, node) == 0.5
    assert pod_share({"cpu": 1.0, "nvidia.com/gpu": 1.0}, node) == 1.0  # the node's only GPU: all of it
    assert pod_share({"cpu": 8.0}, node) == 1.0
    assert pod_share({}, node) == 0.0
    assert pod_share({"nvidia.com/gpu": 1.0}, {"cpu": 4.0}) == 0.0  # a resource the node lacks is left out
    assert pod_cost(1800, 2.0, 0.5) == 0.5
    assert pod_cost(-5, 2.0, 0.5) == 0.0


def test_the_ledger_keeps_pods_that_are_gone() -> None:
    ledger = account({}, {"a": 0.1, "b": 0.2})
    ledger = account(ledger, {"b": 0.3})  # a is gone (a pause deleted it): its cost stays
    assert ledger == {"a": 0.1, "b": 0.3}
    assert account(ledger, {"b": 0.25}) == ledger  # never less than recorded


def test_local_runs_cost_their_processes_at_the_users_rate() -> None:
    assert local_price_per_hour(0.0, 3) is None  # the default: free, no budget acts
    assert local_price_per_hour(0.05, 3) == pytest.approx(0.15)
    assert figures(4.0, 10.0) == {"budget_usd": 10.0, "budget_percent": 40.0}
    assert figures(None, 10.0) == {"budget_usd": 10.0, "budget_percent": None}


# ----------------------------------------------------------------------------------- pricing pods (pure)


def _node(name: str, machine: str, *, gpus: int = 0, spot: bool = False) -> dict[str, Any]:
    labels = {"node.kubernetes.io/instance-type": machine}
    allocatable = {"cpu": "3920m", "memory": "13Gi"}
    if gpus:
        labels["cloud.google.com/gke-accelerator"] = "nvidia-tesla-t4"
        allocatable["nvidia.com/gpu"] = str(gpus)
    if spot:
        labels["cloud.google.com/gke-spot"] = "true"
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable}}


def _pod(uid: str, node: str, requests: dict[str, str], *, start: str, end: str | None = None) -> dict[str, Any]:
    state = {"terminated": {"finishedAt": end}} if end else {"running": {}}
    return {
        "metadata": {"uid": uid, "name": uid, "namespace": "rl", "labels": {"rlcloud.io/experiment": "exp"}},
        "spec": {"nodeName": node, "containers": [{"name": "runner", "resources": {"requests": requests}}]},
        "status": {"startTime": start, "containerStatuses": [{"state": state}]},
    }


def test_pods_are_priced_from_their_nodes_labels() -> None:
    prices = node_prices([_node("cpu", "e2-standard-4"), _node("gpu", "n1-standard-4", gpus=1), _node("x", "zz-9")])
    assert prices["cpu"][0] == pytest.approx(machine_hourly_cost("e2-standard-4"))
    t4 = machine_hourly_cost("n1-standard-4", gpu_type="nvidia-tesla-t4", gpus=1)
    assert prices["gpu"][0] == pytest.approx(t4)
    assert prices["x"][0] is None
    spot = node_prices([_node("s", "n1-standard-4", gpus=1, spot=True)])["s"][0]
    assert spot is not None and t4 is not None and spot < t4
    now = 1_800_000_000.0 + 7200
    pods = [
        # two hours on the whole GPU node
        _pod("learner", "gpu", {"cpu": "1", "nvidia.com/gpu": "1"}, start="2027-01-15T08:00:00Z"),
        # one hour, ended, on a quarter (by memory) of the CPU node
        _pod(
            "env", "cpu", {"cpu": "500m", "memory": "3328Mi"}, start="2027-01-15T08:00:00Z", end="2027-01-15T09:00:00Z"
        ),
        _pod("unpriced", "x", {"cpu": "1"}, start="2027-01-15T08:00:00Z"),
        {**_pod("pending", "", {"cpu": "1"}, start="")},
    ]
    costs, unpriced = run_costs(pods, prices, now)
    assert unpriced == ["x"]
    run = costs[("rl", "experiment", "exp")]
    assert set(run) == {"learner", "env"}  # the pod on the unpriced node is not counted (nor given $0)
    assert run["learner"] == pytest.approx(2 * t4)
    assert run["env"] == pytest.approx(prices["cpu"][0] * 0.25)  # type: ignore[operator]


def test_runs_are_grouped_by_experiment_or_sweep_and_the_reapers_namespace_left_out() -> None:
    def job(name: str, ns: str, labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": annotations or {}}}

    jobs = [
        job("a-env-server", "rl", {"rlcloud.io/experiment": "a", "rlcloud.io/role": "env-server"}),
        job(
            "a-agent", "rl", {"rlcloud.io/experiment": "a", "rlcloud.io/role": "agent"}, {"rlcloud.io/budget-usd": "3"}
        ),
        job("s", "rl", {"rlcloud.io/sweep": "s", "rlcloud.io/role": "trial"}),
        job("reaper-1", "rlcloud-system", {"rlcloud.io/experiment": "x"}),
    ]
    found = workloads(jobs, own_namespace="rlcloud-system")
    assert [(w.kind, w.name) for w in found] == [("experiment", "a"), ("sweep", "s")]
    assert found[0].anchor["metadata"]["name"] == "a-agent" and found[0].budget == 3.0
    assert found[1].budget is None and found[1].ledger == {}


def test_a_budget_on_a_cluster_without_the_reaper_is_refused_naming_the_field() -> None:
    from kubernetes import client as k8s

    from rlcloud import Cluster
    from rlcloud.errors import SpecError

    api = k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9"))  # never called
    Cluster.local().check_budget("experiment a", None)  # its supervisor enforces it
    with pytest.raises(SpecError) as refused:
        Cluster.kubernetes(api_client=api, namespace="rl").check_budget("experiment a", None)
    (problem,) = refused.value.problems
    assert problem.field == "budget" and "experiment a: a budget is enforced on this machine and on GKE" in str(problem)
    api.close()


def test_status_shows_the_cost_so_far_against_the_budget() -> None:
    from rlcloud.backend import ExperimentStatus
    from rlcloud.display import cost_text, vitals_rows

    progress = {"state": "running", "elapsed": 3600.0, "updated": 1.0}
    status = ExperimentStatus("x", "running", progress=progress, price_per_hour=2.5, budget_usd=25.0, observed_at=2.0)
    assert ("cost so far", "~$2.50 of $25.00 budget (10%)") in vitals_rows(status)
    assert status.to_dict()["vitals"]["budget_percent"] == 10.0
    assert cost_text({"cost_usd": None, "budget_usd": 25.0}) == "unknown of $25.00 budget"
    assert cost_text({"cost_usd": 1.2, "budget_usd": None}) == "~$1.20 (estimate)"
    # the reaper's measure, when there is one, is what status shows
    measured = ExperimentStatus("x", "stopped", progress=progress, price_per_hour=2.5, budget_usd=25.0, cost_usd=26.0)
    assert ("cost so far", "~$26.00 of $25.00 budget (104%)") in vitals_rows(measured)
