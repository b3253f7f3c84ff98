"""Money budgets enforced by the in-cluster reaper, end to end: the gRPC GKE fake (the cluster, its pools and
labels), the fake kube-apiserver and the fake kubelet (pods as processes on priced GKE nodes, the stand-in
runner checkpointing on SIGTERM). Time is the reaper's ``now``: the pods run for real, the hours are given."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from google.cloud import container_v1
from kubernetes import client as k8s

from rlcloud.budget import ANNOTATION_BUDGET, ANNOTATION_BUDGET_STATE, ANNOTATION_COST
from rlcloud.gke.reaper import ClusterIdentity, Decision, run_once
from rlcloud.k8s.backend import KubernetesBackend
from rlcloud.specs import ExperimentSpec
from rlcloud.timestamps import format_rfc3339, rfc3339_seconds
from tests.fakes.gke import FakeClusterManager
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet, gke_cpu_node
from tests.support.gke import LOCATION, PROJECT
from tests.support.kubernetes import make_backend, make_spec, standin
from tests.support.waiting import eventually

# the fake kubelet runs pods as processes (the fast lane leaves these out: CONTRIBUTING.md)
pytestmark = pytest.mark.processes

H = 3600.0
NS = "rl"


@pytest.fixture
def kubelet(apiserver: FakeKubeApiServer, tmp_path: Path) -> Iterator[FakeKubelet]:
    # one e2-standard-4 node of the CPU pool; the stand-in "trains" for minutes unless stopped
    env = {"STANDIN_EPISODES": "100000", "STANDIN_DELAY": "0.05"}
    with FakeKubelet(
        apiserver, tmp_path / "pods", argv_rewrite=standin, extra_env=env, max_grace=10, nodes=[gke_cpu_node()]
    ) as k:
        yield k


@dataclass
class World:
    """A GKE cluster (the gRPC fake) with its kube-apiserver, kubelet and a Kubernetes backend over them; runs
    keep their results in ``results``, and the reaper runs at the ``now`` a test gives it."""

    fake: FakeClusterManager
    container_client: Any
    apiserver: FakeKubeApiServer
    api: k8s.ApiClient
    kubelet: FakeKubelet
    backend: KubernetesBackend
    results: Path

    def put_cluster(self, labels: dict[str, str] | None = None, *, created: float | None = None) -> None:
        """The cluster ``rl`` as GKE reports it (one e2-standard-4 pool); by default a minute old, no labels of
        its own (no budget, no ttl: it stays)."""
        pool = container_v1.NodePool(
            name="default-pool",
            initial_node_count=1,
            config=container_v1.NodeConfig(machine_type="e2-standard-4", disk_size_gb=100),
        )
        self.fake.clusters[(PROJECT, LOCATION, "rl")] = container_v1.Cluster(
            name="rl",
            location=LOCATION,
            zone=LOCATION,
            status=container_v1.Cluster.Status.RUNNING,
            create_time=format_rfc3339(time.time() - 60 if created is None else created),
            resource_labels={"managed-by": "rlcloud", **(labels or {})},
            node_pools=[pool],
        )

    def start(self, spec: ExperimentSpec) -> float:
        """Start ``spec``; wait until its learner runs and has written progress; when its first pod started."""
        self.backend.start(spec, str(self.results))
        eventually(lambda: self.acknowledged(f"rlcloud.io/experiment={spec.name}"))
        eventually(lambda: (self.results / spec.name / "progress.json").exists())
        return self.pods_started(f"rlcloud.io/experiment={spec.name}")

    def acknowledged(self, selector: str) -> list[str]:
        """Pods ``selector`` picks that run and that the apiserver shows started (``startTime``, which the
        fake kubelet writes just after it starts their process: a pod without one costs nothing yet)."""
        running = set(self.kubelet.running(selector))
        pods = self.apiserver.list_objects("Pod", NS, selector)
        return [
            p["metadata"]["name"]
            for p in pods
            if p["metadata"]["name"] in running and (p.get("status") or {}).get("startTime")
        ]

    def pods_started(self, selector: str) -> float:
        """When the first of the pods ``selector`` picks started (their ``startTime``)."""
        pods = self.apiserver.list_objects("Pod", NS, selector)
        times = [rfc3339_seconds((p.get("status") or {}).get("startTime")) for p in pods]
        return min(t for t in times if t is not None)

    def reap(self, now: float) -> Decision:
        """One reaper run at ``now``."""
        identity = ClusterIdentity(PROJECT, LOCATION, "rl")
        return run_once(now=now, identity=identity, container_client=self.container_client, api_client=self.api)

    def events(self, namespace: str, reason: str) -> list[dict[str, Any]]:
        """The Events of ``reason`` in ``namespace``."""
        return [e for e in self.apiserver.list_objects("Event", namespace) if e.get("reason") == reason]

    def annotations(self, job: str) -> dict[str, str]:
        """The annotations of the Job ``job``."""
        found = self.apiserver.get_object("Job", job, NS)
        assert found is not None
        return dict(found["metadata"].get("annotations") or {})

    def suspended(self, job: str) -> bool:
        """Whether the Job ``job`` exists and is suspended (how the reaper stops a run: its pods checkpoint)."""
        found = self.apiserver.get_object("Job", job, NS)
        assert found is not None, job
        return found["spec"].get("suspend") is True

    def reaper_record(self) -> dict[str, str]:
        """The data of the reaper's ConfigMap (what its last run decided)."""
        record = self.apiserver.get_object("ConfigMap", "rlcloud-reaper", "rlcloud-system")
        assert record is not None
        return dict(record["data"])


@pytest.fixture
def world(
    fake: FakeClusterManager,
    container_client: Any,
    apiserver: FakeKubeApiServer,
    api_client: k8s.ApiClient,
    kubelet: FakeKubelet,
    tmp_path: Path,
) -> World:
    return World(
        fake, container_client, apiserver, api_client, kubelet, make_backend(api_client, NS), tmp_path / "results"
    )


def test_a_run_is_warned_at_90_percent_then_checkpointed_and_stopped_at_its_budget(world: World) -> None:
    world.put_cluster()  # no budget, no ttl of its own: it stays
    start = world.start(make_spec(name="capped", budget="0.10 USD"))
    assert world.annotations("capped-single")[ANNOTATION_BUDGET] == "0.10"
    kubelet, backend, results = world.kubelet, world.backend, world.results

    # The learner asks 1 CPU and 2 GiB of a 3.92-CPU, 13 GiB e2-standard-4 node: its share is 1/3.92 of the
    # node's ~$0.148/h, ~$0.0377/h. $0.10 is 90% after ~2.4 h and 100% after ~2.65 h.
    assert not world.reap(start + 1 * H).delete
    first = world.annotations("capped-single")
    assert 0.036 < float(first[ANNOTATION_COST]) < 0.039 and ANNOTATION_BUDGET_STATE not in first
    assert world.events(NS, "BudgetWarning") == []

    world.reap(start + 2.5 * H)
    assert world.annotations("capped-single")[ANNOTATION_BUDGET_STATE] == "warned"
    (warning,) = world.events(NS, "BudgetWarning")
    assert warning["involvedObject"]["name"] == "capped-single" and "of its budget of $0.10" in warning["message"]
    world.reap(start + 2.55 * H)
    assert len(world.events(NS, "BudgetWarning")) == 1  # once
    assert kubelet.running(), "a warning stops nothing"

    decision = world.reap(start + 2.7 * H)
    assert not decision.delete, "a run's budget stops the run, never the cluster"
    marks = world.annotations("capped-single")
    assert marks[ANNOTATION_BUDGET_STATE] == "stopped"
    (exceeded,) = world.events(NS, "BudgetExceeded")
    assert "budget reached" in exceeded["message"]
    assert world.suspended("capped-single")
    # SIGTERM, grace: the runner's checkpoint is in the store and nothing runs
    eventually(lambda: not kubelet.running())
    assert (results / "capped" / "checkpoints" / "LATEST").exists()
    status = backend.status("capped")
    assert status.state == "stopped" and "budget reached" in (status.message or "")

    # a changed spec needs a stop first on Kubernetes (the spec ConfigMap is the run's); started again with a
    # larger budget, it resumes from its checkpoint in the store
    backend.stop("capped")
    backend.start(make_spec(name="capped", budget=5), str(results))
    marks = world.annotations("capped-single")
    assert marks[ANNOTATION_BUDGET] == "5.00" and ANNOTATION_BUDGET_STATE not in marks
    eventually(lambda: kubelet.running())
    assert world.fake.requests_of("DeleteCluster") == []


def test_a_cluster_over_its_budget_stops_its_runs_then_is_deleted(world: World) -> None:
    now = time.time()
    # one e2-standard-4 node (~$0.148/h) + the GKE fee ($0.10/h) for 3 h: ~$0.74 of a $0.80 budget (93%)
    world.put_cluster({"budget-cents": "80"}, created=now - 3 * H)
    world.start(make_spec(name="on-capped-cluster"))

    warned = world.reap(now)
    assert not warned.delete
    (event,) = world.events("rlcloud-system", "BudgetWarning")
    assert "this cluster's cost so far" in event["message"]
    assert world.kubelet.running(), "a warning stops nothing"

    # 40 minutes later: over the budget. The run is suspended, its pod checkpoints and ends, then the
    # cluster is deleted in the same reaper run
    decision = world.reap(now + 40 * 60)
    assert decision.delete and decision.reason.startswith("budget: ")
    assert not world.kubelet.running()
    assert (world.results / "on-capped-cluster" / "checkpoints" / "LATEST").exists()
    assert world.suspended("on-capped-cluster-single")
    assert len(world.fake.requests_of("DeleteCluster")) == 1
    assert "runs are stopped and stored" in world.reaper_record()["budget_cluster"]


def test_a_sweep_over_its_budget_starts_no_more_trials_and_its_running_ones_checkpoint(world: World) -> None:
    from tests.support.kubernetes import make_sweep

    world.put_cluster()
    root = world.results
    sweep = make_sweep(2, max_parallel=1, budget="0.05 USD")  # 4 trials, one at a time
    world.backend.start_sweep(sweep, str(root))
    (job,) = world.apiserver.list_objects("Job", NS)
    assert job["metadata"]["annotations"][ANNOTATION_BUDGET] == "0.05"
    first = sweep.trial_table()[0][0]
    eventually(lambda: (root / "lr" / first / "progress.json").exists())
    (_pod,) = world.apiserver.list_objects("Pod", NS, "rlcloud.io/sweep=lr")
    start = world.pods_started("rlcloud.io/sweep=lr")

    # one trial pod at ~$0.0377/h: $0.05 is spent after ~1.3 h
    world.reap(start + 2 * H)
    assert world.suspended(job["metadata"]["name"])
    eventually(lambda: not world.kubelet.running())
    assert (root / "lr" / first / "checkpoints" / "LATEST").exists()
    assert len(world.kubelet.started) == 1, "no further trial started"
    status = world.backend.sweep_status("lr")
    assert status.state == "stopped" and "budget reached" in (status.message or "")
    assert status.cost_usd is not None and status.cost_usd >= 0.05
    assert len(world.events(NS, "BudgetExceeded")) == 1


def test_a_reaper_that_may_not_list_nodes_records_it_and_its_ttl_still_acts(world: World) -> None:
    # an older install's ClusterRole has no nodes: pods cannot be priced, nothing is stopped on a guess
    world.apiserver.inject_fault("GET", "/api/v1/nodes", status=403, count=100)
    now = time.time()
    world.put_cluster({"expiry": str(int(now - 60))}, created=now - H)
    world.start(make_spec(name="unpriced", budget="0.01 USD"))
    decision = world.reap(now + 10 * H)
    assert decision.delete and "ttl expired" in decision.reason
    assert not world.suspended("unpriced-single")
    record = world.reaper_record()
    assert "cannot list the nodes" in record["budget_problems"]
    assert "cost so far unknown" in record["budget_runs"]


def test_a_cluster_with_a_budget_gets_its_label_and_the_reaper(
    make_cluster: Any,
    apiserver: FakeKubeApiServer,
    api_client: k8s.ApiClient,
    fake: FakeClusterManager,
    google_apis: Any,
) -> None:
    from rlcloud.specs import ClusterSpec
    from tests.support.gke import REAPER_ROLE, REAPER_ROLE_PERMISSIONS, _wi

    gsa = f"rlcloud-reaper@{PROJECT}.iam.gserviceaccount.com"
    # the reaper's Google service account as docs/gke-setup.md step 7 makes it: the cheap checks a create with a
    # budget runs read it (a budget that could not delete the cluster refuses the create)
    google_apis.state.service_accounts[gsa] = _wi(gsa, "rlcloud-system/rlcloud-reaper")
    google_apis.state.project_policy.append({"role": REAPER_ROLE, "members": [f"serviceAccount:{gsa}"]})
    google_apis.state.custom_roles[REAPER_ROLE] = set(REAPER_ROLE_PERMISSIONS)
    cluster = make_cluster(
        ClusterSpec(name="rl", budget="40 USD"),  # type: ignore[arg-type]
        reaper_service_account=gsa,
        reaper_image="repo/runner-cpu:1",
        kube_api_client=api_client,
    )
    info = cluster.create()
    assert info.labels["budget-cents"] == "4000"
    assert "reaper installed" in cluster.reaper_note
    (role,) = apiserver.list_objects("ClusterRole")
    rules = {tuple(r["resources"]): set(r["verbs"]) for r in role["rules"]}
    assert "patch" in rules[("jobs",)] and rules[("nodes",)] == {"get", "list"}


def test_a_distributed_run_over_its_budget_stops_its_learner_first_then_its_env_servers(world: World) -> None:
    world.put_cluster()
    start = world.start(make_spec("distributed", 2, name="dist", budget=1))
    kubelet = world.kubelet
    eventually(lambda: len(world.acknowledged("rlcloud.io/experiment=dist")) == 3)
    world.reap(start + 100 * H)
    for job in ("dist-agent", "dist-env"):
        assert world.suspended(job), job
    eventually(lambda: not kubelet.running())
    assert (world.results / "dist" / "checkpoints" / "LATEST").exists()
    # the learner checkpointed and ended before the env servers were told to go
    order = [name for _, name, _ in kubelet.exits]
    assert order[0].startswith("dist-agent"), order
    cost = float(world.annotations("dist-agent")[ANNOTATION_COST])
    # 100 h of a quarter node (learner) and two eighths (env servers: 500m of 3.92 CPUs): half the node's price
    assert cost == pytest.approx(100 * 0.1477 * (1 / 3.92 + 2 * 0.5 / 3.92), rel=0.02)
    assert world.backend.status("dist").state == "stopped"


def test_a_reaper_without_a_google_identity_stops_a_run_at_its_budget(world: World) -> None:
    """``--runs-only`` (no reaper_service_account): Kubernetes permissions alone price, warn and stop a run; the
    Container API is never asked (the cluster's ttl, autodown and budget are not this reaper's job)."""
    from rlcloud.gke.reaper import run_budgets_only

    world.put_cluster()
    start = world.start(make_spec(name="capped", budget="0.10 USD"))
    decision = run_budgets_only(now=start + 2.7 * H, api_client=world.api)
    assert not decision.delete and "budgets only" in decision.reason
    assert world.suspended("capped-single")
    assert world.annotations("capped-single")[ANNOTATION_BUDGET_STATE] == "stopped"
    eventually(lambda: not world.kubelet.running())
    assert (world.results / "capped" / "checkpoints" / "LATEST").exists()
    assert world.fake.requests_of("GetCluster") == [] and world.fake.requests_of("DeleteCluster") == []
    record = world.reaper_record()
    assert record["decision"] == "keep" and "capped-single" not in record["budget_problems"]
    assert "budget reached" in record["budget_runs"]


def test_a_reaper_whose_clock_stepped_forward_charges_no_run_for_it(world: World) -> None:
    """Pods' start times are the API server's: a reaper pod whose node clock stepped 3 hours forward decides with
    the server's clock (its Date header), so a $0.10 run (~2.65 h of its node share) is not stopped for hours it
    never ran."""
    from rlcloud.gke.reaper import run_budgets_only
    from tests.support.clocks import SteppingClock

    world.put_cluster()
    world.start(make_spec(name="capped", budget="0.10 USD"))
    clock = SteppingClock()
    clock.step(3 * H)
    run_budgets_only(api_client=world.api, clock=clock.clock)
    marks = world.annotations("capped-single")
    assert ANNOTATION_BUDGET_STATE not in marks and float(marks[ANNOTATION_COST]) < 0.01
    assert not world.suspended("capped-single") and world.kubelet.running()


def test_a_queued_sweep_its_budget_stopped_lets_the_cluster_idle_out(world: World) -> None:
    """A sweep submitted to a Kueue queue (its Job created suspended, labelled with the queue; Kueue admits it by
    un-suspending it) and stopped by its budget stays suspended for good: it is no activity, so autodown fires."""
    from tests.support.kubernetes import add_local_queue, make_sweep

    world.backend.queue = "team-a"
    add_local_queue(world.apiserver, NS, "team-a")
    world.put_cluster({"autodown": "1800"}, created=time.time() - 3 * H)
    world.backend.start_sweep(make_sweep(2, max_parallel=1, budget="0.05 USD"), str(world.results))
    (job,) = world.apiserver.list_objects("Job", NS)
    name = job["metadata"]["name"]
    assert world.suspended(name) and job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    world.apiserver.patch_object("Job", name, NS, {"spec": {"suspend": False}})  # Kueue admits it
    eventually(lambda: world.acknowledged("rlcloud.io/sweep=lr"))
    start = world.pods_started("rlcloud.io/sweep=lr")

    stopped = world.reap(start + 2 * H)  # ~$0.075 of $0.05: the reaper suspends it
    assert not stopped.delete and "running" in stopped.reason
    assert world.suspended(name) and world.annotations(name)[ANNOTATION_BUDGET_STATE] == "stopped"
    eventually(lambda: not world.kubelet.running())
    # ...and the API server says so (the kubelet reports a pod's end after its process is gone)
    pods = lambda: world.apiserver.list_objects("Pod", NS, "rlcloud.io/sweep=lr")  # noqa: E731
    eventually(lambda: all((p.get("status") or {}).get("phase") not in ("Pending", "Running") for p in pods()))
    # nothing runs and nothing is queued: 30 minutes after the last pod ended, the cluster goes
    decision = world.reap(time.time() + 31 * 60)
    assert decision.delete and "idle for" in decision.reason, world.reaper_record()
    assert len(world.fake.requests_of("DeleteCluster")) == 1
