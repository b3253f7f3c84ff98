"""Money budgets enforced by the in-cluster reaper, end to end: the gRPC GKE fake (the cluster, its pools and
labels), the fake kube-apiserver and the fake kubelet (pods as processes on priced GKE nodes, the stand-in
runner checkpointing on SIGTERM). Time is the reaper's ``now``: the pods run for real, the hours are given."""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.cloud import container_v1
from kubernetes import client as k8s

from rlcloud.budget import ANNOTATION_BUDGET, ANNOTATION_BUDGET_STATE, ANNOTATION_COST
from rlcloud.gke.reaper import ClusterIdentity, Decision, run_once
from rlcloud.k8s.backend import KubernetesBackend
from tests.fakes.gke import FakeClusterManager
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet, gke_cpu_node
from tests.gke.conftest import PROJECT
from tests.k8s.conftest import make_spec
from tests.k8s.test_backend import make_backend, standin
from tests.k8s.test_kubelet import eventually

# the fake kubelet runs pods as processes (the fast lane leaves these out: CONTRIBUTING.md)
pytestmark = pytest.mark.processes

LOCATION = "us-central1-a"
H = 3600.0
NS = "rl"


def _put_cluster(fake: FakeClusterManager, labels: dict[str, str], *, created: float) -> None:
    pool = container_v1.NodePool(
        name="default-pool",
        initial_node_count=1,
        config=container_v1.NodeConfig(machine_type="e2-standard-4", disk_size_gb=100),
    )
    fake.clusters[(PROJECT, LOCATION, "rl")] = container_v1.Cluster(
        name="rl",
        location=LOCATION,
        zone=LOCATION,
        status=container_v1.Cluster.Status.RUNNING,
        create_time=_dt.datetime.fromtimestamp(created, _dt.UTC).isoformat().replace("+00:00", "Z"),
        resource_labels={"managed-by": "rlcloud", **labels},
        node_pools=[pool],
    )


@pytest.fixture
def apiserver() -> Iterator[FakeKubeApiServer]:
    with FakeKubeApiServer() as server:
        server.create_object("Namespace", {"metadata": {"name": "rlcloud-system"}})
        yield server


@pytest.fixture
def api(apiserver: FakeKubeApiServer) -> Iterator[k8s.ApiClient]:
    client = k8s.ApiClient(k8s.Configuration(host=apiserver.url))
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def kubelet(apiserver: FakeKubeApiServer, tmp_path: Path) -> Iterator[FakeKubelet]:
    # one e2-standard-4 node of the CPU pool; the stand-in "trains" for minutes unless stopped
    env = {"STANDIN_EPISODES": "100000", "STANDIN_DELAY": "0.05"}
    with FakeKubelet(
        apiserver, tmp_path / "pods", argv_rewrite=standin, extra_env=env, max_grace=10, nodes=[gke_cpu_node()]
    ) as k:
        yield k


@pytest.fixture
def backend(api: k8s.ApiClient) -> KubernetesBackend:
    return make_backend(api, NS)


def _reap(container_client: Any, api: k8s.ApiClient, now: float) -> Decision:
    identity = ClusterIdentity(PROJECT, LOCATION, "rl")
    return run_once(now=now, identity=identity, container_client=container_client, api_client=api)


def _events(apiserver: FakeKubeApiServer, namespace: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in apiserver.list_objects("Event", namespace) if e.get("reason") == reason]


def _annotations(apiserver: FakeKubeApiServer, job: str) -> dict[str, str]:
    found = apiserver.get_object("Job", job, NS)
    assert found is not None
    return dict(found["metadata"].get("annotations") or {})


def _started(apiserver: FakeKubeApiServer, kubelet: FakeKubelet, results: Path, name: str) -> float:
    """Wait until the learner runs and has written progress; when its first pod started."""
    eventually(lambda: kubelet.running(f"rlcloud.io/experiment={name}"))
    eventually(lambda: (results / name / "progress.json").exists())
    pods = apiserver.list_objects("Pod", NS, f"rlcloud.io/experiment={name}")
    times = [p["status"]["startTime"] for p in pods if (p.get("status") or {}).get("startTime")]
    return min(_dt.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in times)


def test_a_run_is_warned_at_90_percent_then_checkpointed_and_stopped_at_its_budget(
    fake: FakeClusterManager,
    container_client: Any,
    apiserver: FakeKubeApiServer,
    api: k8s.ApiClient,
    kubelet: FakeKubelet,
    backend: KubernetesBackend,
    tmp_path: Path,
) -> None:
    _put_cluster(fake, {}, created=time.time() - 60)  # no budget, no ttl of its own: it stays
    results = tmp_path / "results"
    backend.start(make_spec(name="capped", budget="0.10 USD"), str(results))
    assert _annotations(apiserver, "capped-single")[ANNOTATION_BUDGET] == "0.10"
    start = _started(apiserver, kubelet, results, "capped")

    # The learner asks 1 CPU and 2 GiB of a 3.92-CPU, 13 GiB e2-standard-4 node: its share is 1/3.92 of the
    # node's ~$0.148/h, ~$0.0377/h. $0.10 is 90% after ~2.4 h and 100% after ~2.65 h.
    assert not _reap(container_client, api, start + 1 * H).delete
    first = _annotations(apiserver, "capped-single")
    assert 0.036 < float(first[ANNOTATION_COST]) < 0.039 and ANNOTATION_BUDGET_STATE not in first
    assert _events(apiserver, NS, "BudgetWarning") == []

    _reap(container_client, api, start + 2.5 * H)
    assert _annotations(apiserver, "capped-single")[ANNOTATION_BUDGET_STATE] == "warned"
    (warning,) = _events(apiserver, NS, "BudgetWarning")
    assert warning["involvedObject"]["name"] == "capped-single" and "of its budget of $0.10" in warning["message"]
    _reap(container_client, api, start + 2.55 * H)
    assert len(_events(apiserver, NS, "BudgetWarning")) == 1  # once
    assert kubelet.running(), "a warning stops nothing"

    decision = _reap(container_client, api, start + 2.7 * H)
    assert not decision.delete, "a run's budget stops the run, never the cluster"
    marks = _annotations(apiserver, "capped-single")
    assert marks[ANNOTATION_BUDGET_STATE] == "stopped"
    (exceeded,) = _events(apiserver, NS, "BudgetExceeded")
    assert "budget reached" in exceeded["message"]
    job = apiserver.get_object("Job", "capped-single", NS)
    assert job is not None and job["spec"]["suspend"] is True
    # SIGTERM, grace: the runner's checkpoint is in the store and nothing runs
    eventually(lambda: not kubelet.running())
    assert (results / "capped" / "checkpoints" / "LATEST").exists()
    status = backend.status("capped")
    assert status.state == "stopped" and "budget reached" in (status.message or "")

    # a changed spec needs a stop first on Kubernetes (the spec ConfigMap is the run's); started again with a
    # larger budget, it resumes from its checkpoint in the store
    backend.stop("capped")
    backend.start(make_spec(name="capped", budget=5), str(results))
    marks = _annotations(apiserver, "capped-single")
    assert marks[ANNOTATION_BUDGET] == "5.00" and ANNOTATION_BUDGET_STATE not in marks
    eventually(lambda: kubelet.running())
    assert fake.requests_of("DeleteCluster") == []


def test_a_cluster_over_its_budget_stops_its_runs_then_is_deleted(
    fake: FakeClusterManager,
    container_client: Any,
    apiserver: FakeKubeApiServer,
    api: k8s.ApiClient,
    kubelet: FakeKubelet,
    backend: KubernetesBackend,
    tmp_path: Path,
) -> None:
    now = time.time()
    # one e2-standard-4 node (~$0.148/h) + the GKE fee ($0.10/h) for 3 h: ~$0.74 of a $0.80 budget (93%)
    _put_cluster(fake, {"budget-cents": "80"}, created=now - 3 * H)
    results = tmp_path / "results"
    backend.start(make_spec(name="on-capped-cluster"), str(results))
    _started(apiserver, kubelet, results, "on-capped-cluster")

    warned = _reap(container_client, api, now)
    assert not warned.delete
    (event,) = _events(apiserver, "rlcloud-system", "BudgetWarning")
    assert "this cluster's cost so far" in event["message"]
    assert kubelet.running(), "a warning stops nothing"

    # 40 minutes later: over the budget. The run is suspended, its pod checkpoints and ends, then the
    # cluster is deleted in the same reaper run
    decision = _reap(container_client, api, now + 40 * 60)
    assert decision.delete and decision.reason.startswith("budget: ")
    assert not kubelet.running()
    assert (results / "on-capped-cluster" / "checkpoints" / "LATEST").exists()
    job = apiserver.get_object("Job", "on-capped-cluster-single", NS)
    assert job is not None and job["spec"]["suspend"] is True
    assert len(fake.requests_of("DeleteCluster")) == 1
    record = apiserver.get_object("ConfigMap", "rlcloud-reaper", "rlcloud-system")
    assert record is not None and "runs are stopped and stored" in record["data"]["budget_cluster"]


def test_a_sweep_over_its_budget_starts_no_more_trials_and_its_running_ones_checkpoint(
    fake: FakeClusterManager,
    container_client: Any,
    apiserver: FakeKubeApiServer,
    api: k8s.ApiClient,
    kubelet: FakeKubelet,
    backend: KubernetesBackend,
    tmp_path: Path,
) -> None:
    from tests.k8s.test_sweep_on_k8s import make_sweep

    _put_cluster(fake, {}, created=time.time() - 60)
    root = tmp_path / "results"
    sweep = make_sweep(2, max_parallel=1, budget="0.05 USD")  # 4 trials, one at a time
    backend.start_sweep(sweep, str(root))
    (job,) = apiserver.list_objects("Job", NS)
    assert job["metadata"]["annotations"][ANNOTATION_BUDGET] == "0.05"
    first = sweep.trial_table()[0][0]
    eventually(lambda: (root / "lr" / first / "progress.json").exists())
    (pod,) = apiserver.list_objects("Pod", NS, "rlcloud.io/sweep=lr")
    start = _dt.datetime.fromisoformat(pod["status"]["startTime"].replace("Z", "+00:00")).timestamp()

    # one trial pod at ~$0.0377/h: $0.05 is spent after ~1.3 h
    _reap(container_client, api, start + 2 * H)
    job_now = apiserver.get_object("Job", job["metadata"]["name"], NS)
    assert job_now is not None and job_now["spec"]["suspend"] is True
    eventually(lambda: not kubelet.running())
    assert (root / "lr" / first / "checkpoints" / "LATEST").exists()
    assert len(kubelet.started) == 1, "no further trial started"
    status = backend.sweep_status("lr")
    assert status.state == "stopped" and "budget reached" in (status.message or "")
    assert status.cost_usd is not None and status.cost_usd >= 0.05
    assert len(_events(apiserver, NS, "BudgetExceeded")) == 1


def test_a_reaper_that_may_not_list_nodes_records_it_and_its_ttl_still_acts(
    fake: FakeClusterManager,
    container_client: Any,
    apiserver: FakeKubeApiServer,
    api: k8s.ApiClient,
    kubelet: FakeKubelet,
    backend: KubernetesBackend,
    tmp_path: Path,
) -> None:
    # an older install's ClusterRole has no nodes: pods cannot be priced, nothing is stopped on a guess
    apiserver.inject_fault("GET", "/api/v1/nodes", status=403, count=100)
    now = time.time()
    _put_cluster(fake, {"expiry": str(int(now - 60))}, created=now - H)
    results = tmp_path / "results"
    backend.start(make_spec(name="unpriced", budget="0.01 USD"), str(results))
    _started(apiserver, kubelet, results, "unpriced")
    decision = _reap(container_client, api, now + 10 * H)
    assert decision.delete and "ttl expired" in decision.reason
    job = apiserver.get_object("Job", "unpriced-single", NS)
    assert job is not None and not job["spec"].get("suspend")
    record = apiserver.get_object("ConfigMap", "rlcloud-reaper", "rlcloud-system")
    assert record is not None and "cannot list the nodes" in record["data"]["budget_problems"]
    assert "cost so far unknown" in record["data"]["budget_runs"]


def test_a_cluster_with_a_budget_gets_its_label_and_the_reaper(
    make_cluster: Any, apiserver: FakeKubeApiServer, api: k8s.ApiClient, fake: FakeClusterManager
) -> None:
    from rlcloud.specs import ClusterSpec

    gsa = f"rlcloud-reaper@{PROJECT}.iam.gserviceaccount.com"
    cluster = make_cluster(
        ClusterSpec(name="rl", budget="40 USD"),  # type: ignore[arg-type]
        reaper_service_account=gsa,
        reaper_image="repo/runner-cpu:1",
        kube_api_client=api,
    )
    info = cluster.create()
    assert info.labels["budget-cents"] == "4000"
    assert "reaper installed" in cluster.reaper_note
    (role,) = apiserver.list_objects("ClusterRole")
    rules = {tuple(r["resources"]): set(r["verbs"]) for r in role["rules"]}
    assert "patch" in rules[("jobs",)] and rules[("nodes",)] == {"get", "list"}


def test_a_distributed_run_over_its_budget_stops_its_learner_first_then_its_env_servers(
    fake: FakeClusterManager,
    container_client: Any,
    apiserver: FakeKubeApiServer,
    api: k8s.ApiClient,
    kubelet: FakeKubelet,
    backend: KubernetesBackend,
    tmp_path: Path,
) -> None:
    _put_cluster(fake, {}, created=time.time() - 60)
    results = tmp_path / "results"
    backend.start(make_spec("distributed", 2, name="dist", budget=1), str(results))
    start = _started(apiserver, kubelet, results, "dist")
    eventually(lambda: len(kubelet.running("rlcloud.io/experiment=dist")) == 3)
    _reap(container_client, api, start + 100 * H)
    for job in ("dist-agent", "dist-env"):
        found = apiserver.get_object("Job", job, NS)
        assert found is not None and found["spec"]["suspend"] is True, job
    eventually(lambda: not kubelet.running())
    assert (results / "dist" / "checkpoints" / "LATEST").exists()
    # the learner checkpointed and ended before the env servers were told to go
    order = [name for _, name, _ in kubelet.exits]
    assert order[0].startswith("dist-agent"), order
    cost = float(_annotations(apiserver, "dist-agent")[ANNOTATION_COST])
    # 100 h of a quarter node (learner) and two eighths (env servers: 500m of 3.92 CPUs): half the node's price
    assert cost == pytest.approx(100 * 0.1477 * (1 / 3.92 + 2 * 0.5 / 3.92), rel=0.02)
    assert backend.status("dist").state == "stopped"
