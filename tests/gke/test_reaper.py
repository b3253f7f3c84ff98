"""The in-cluster reaper: its decisions as pure functions, and the program against the gRPC GKE fake, the fake
apiserver and a metadata server faked over HTTP; the install at create time."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from google.cloud import container_v1
from kubernetes import client as k8s

from rlcloud.gke import reaper
from rlcloud.gke.cluster import GkeCluster
from rlcloud.gke.reaper import ClusterIdentity, Decision, activity, decide, run_once
from rlcloud.specs import ClusterSpec
from tests.fakes.gke import FakeClusterManager
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.support.gke import LOCATION, PROJECT, metadata  # noqa: F401  (metadata: the fixture)

NOW = 1_800_000_000.0
H = 3600.0
GSA = f"rlcloud-reaper@{PROJECT}.iam.gserviceaccount.com"


# ------------------------------------------------------------------------------------------ pure decisions


@pytest.mark.parametrize(
    ("inputs", "delete", "reason"),
    [
        # never a cluster rlcloud did not make, even past its expiry and idle
        ({"managed": False, "expiry": NOW - 1, "autodown": 60}, False, "not made by rlcloud"),
        ({"deleting": True, "expiry": NOW - 1}, False, "already being deleted"),
        # the ttl is a hard cap: it deletes while experiments run
        ({"expiry": NOW - 1, "running": 2}, True, "ttl expired"),
        ({"expiry": NOW}, True, "ttl expired"),
        ({"expiry": NOW + H}, False, "ttl expires"),
        ({}, False, "no ttl and no autodown"),
        # autodown: a running experiment postpones it, however long idle the cluster was before
        ({"autodown": 1800, "running": 1}, False, "postponed"),
        ({"autodown": 1800, "created": NOW - 2 * H}, True, "idle for 2h since creation"),
        ({"autodown": 1800, "created": NOW - 2 * H, "last_activity": NOW - 600}, False, "since last activity"),
        ({"autodown": 1800, "created": NOW - 2 * H, "last_activity": NOW - 1800}, True, "since last activity"),
        ({"autodown": 1800, "created": NOW - 600, "last_activity": NOW - 5 * H}, False, "since creation"),
        ({"autodown": 1800, "created": None}, False, "creation time unknown"),
        ({"autodown": 1800, "created": NOW - 2 * H, "expiry": NOW + H}, True, "idle"),
    ],
)
def test_decide(inputs: dict[str, Any], delete: bool, reason: str) -> None:
    args: dict[str, Any] = {"created": NOW - 10 * H, "expiry": None, "autodown": None, "last_activity": None}
    args.update({"running": 0, **inputs})
    decision = decide(NOW, **args)
    assert decision.delete is delete
    assert reason in decision.reason


def test_decide_says_when_it_is_due() -> None:
    idle = decide(NOW, created=NOW - 600, expiry=None, autodown=1800, last_activity=None, running=0)
    assert idle == Decision(False, "idle for 10m since creation; autodown after 30m", NOW + 1200)
    # the ttl comes first when it is sooner
    capped = decide(NOW, created=NOW - 600, expiry=NOW + 60, autodown=1800, last_activity=None, running=0)
    assert capped.due == NOW + 60
    assert decide(NOW, created=NOW, expiry=None, autodown=None, last_activity=None, running=0).due is None


def _ts(seconds: float) -> str:
    return _dt.datetime.fromtimestamp(seconds, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _job(name: str, ns: str = "rlcloud", *, done_at: float | None = None, suspend: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {"startTime": _ts(NOW - 5 * H)}
    if done_at is not None:
        status["conditions"] = [{"type": "Complete", "status": "True", "lastTransitionTime": _ts(done_at)}]
        status["completionTime"] = _ts(done_at)
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"suspend": suspend}, "status": status}


def test_activity_counts_unfinished_unpaused_jobs_and_live_pods() -> None:
    jobs = [
        _job("done", done_at=NOW - 3 * H),
        _job("paused", suspend=True),
        _job("training"),
        _job("reaper-run", ns="rlcloud-system"),  # the reaper's own run never counts
    ]
    pods = [
        {"metadata": {"name": "p", "namespace": "rlcloud"}, "status": {"phase": "Pending"}},
        {
            "metadata": {"name": "q", "namespace": "rlcloud"},
            "status": {
                "phase": "Succeeded",
                "containerStatuses": [{"state": {"terminated": {"finishedAt": _ts(NOW - 2 * H)}}}],
            },
        },
    ]
    seen = activity(jobs, pods, own_namespace="rlcloud-system")
    assert seen.running == 2
    assert seen.running_names == ("job rlcloud/training", "pod rlcloud/p")
    assert seen.last == NOW - 2 * H
    idle = activity([_job("done", done_at=NOW - 3 * H)], [], own_namespace="rlcloud-system")
    assert (idle.running, idle.last) == (0, NOW - 3 * H)
    assert activity([], [], own_namespace="x").last is None


def _sweep_job(name: str, *, queue: str | None = "team", state: str | None = None) -> dict[str, Any]:
    """A suspended sweep Job, in a Kueue queue or not, stopped by its budget (``state``) or not."""
    job = _job(name, suspend=True)
    job["metadata"]["labels"] = {"rlcloud.io/sweep": name, **({"kueue.x-k8s.io/queue-name": queue} if queue else {})}
    if state is not None:
        job["metadata"]["annotations"] = {"rlcloud.io/budget-state": state}
    return job


@pytest.mark.parametrize(
    ("job", "busy"),
    [
        (_sweep_job("queued"), True),  # waiting for Kueue's quota: work to come
        (_sweep_job("warned", state="warned"), True),  # a warning stops nothing
        (_sweep_job("capped", state="stopped"), False),  # its budget stopped it: nothing will un-suspend it
        (_sweep_job("paused", queue=None), False),
        (_sweep_job("paused-capped", queue=None, state="stopped"), False),
    ],
)
def test_a_sweep_its_budget_stopped_is_not_activity(job: dict[str, Any], busy: bool) -> None:
    seen = activity([job], [], own_namespace="rlcloud-system")
    assert seen.running == int(busy), seen.running_names


@pytest.mark.parametrize(
    ("labels", "status", "step", "reason"),
    [
        # the cluster over its budget, its runs' pods gone: deleted though neither ttl nor autodown is due
        ({"managed-by": "rlcloud"}, "RUNNING", "delete", "budget: cost so far"),
        # its runs' pods still ending (checkpoints being written): kept this run
        ({"managed-by": "rlcloud"}, "RUNNING", "wait", "no ttl and no autodown label"),
        # a budget never deletes a cluster rlcloud did not make, nor one already going
        ({}, "RUNNING", "delete", "not made by rlcloud"),
        ({"managed-by": "rlcloud"}, "STOPPING", "delete", "already being deleted"),
    ],
)
def test_a_cluster_over_its_budget_is_deleted_once_its_runs_pods_are_gone(
    labels: dict[str, str], status: str, step: Any, reason: str
) -> None:
    from rlcloud.budget import ClusterBudgetDecision
    from rlcloud.gke.budgets import Budgets
    from rlcloud.gke.reaper import Activity, ReaperRun

    run = ReaperRun(ClusterIdentity(PROJECT, LOCATION, "rl"), None, None, "rlcloud-system", NOW, labels=labels)
    run.created = NOW - 60
    cluster = container_v1.Cluster(name="rl", status=container_v1.Cluster.Status[status])
    budgets = Budgets(ClusterBudgetDecision(step, "cost so far ~$10.20 of its budget of $10.00: budget reached"), {})
    decision = run.decide(cluster, Activity(0, None), budgets)
    assert decision.delete is (step == "delete" and reason.startswith("budget")) and reason in decision.reason
    if decision.delete:
        assert decision.due == NOW


# ------------------------------------------------------------------------------------------ the program


def _put_cluster(fake: FakeClusterManager, labels: dict[str, str], *, created: float = NOW - 10 * H) -> None:
    fake.clusters[(PROJECT, LOCATION, "rl")] = container_v1.Cluster(
        name="rl",
        location=LOCATION,
        zone=LOCATION,
        status=container_v1.Cluster.Status.RUNNING,
        create_time=_dt.datetime.fromtimestamp(created, _dt.UTC).isoformat().replace("+00:00", "Z"),
        resource_labels=labels,
    )


def _experiment(apiserver: FakeKubeApiServer, name: str, *, done_at: float | None = None) -> None:
    if apiserver.get_object("Namespace", "rlcloud") is None:
        apiserver.create_object("Namespace", {"metadata": {"name": "rlcloud"}})
    labels = {"app.kubernetes.io/managed-by": "rlcloud", "rlcloud.io/experiment": name}
    body = {
        "metadata": {"name": name, "namespace": "rlcloud", "labels": labels},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}},
    }
    apiserver.create_object("Job", body, "rlcloud")
    if done_at is not None:
        condition = {"type": "Complete", "status": "True", "lastTransitionTime": _ts(done_at)}
        apiserver.update_status("Job", name, "rlcloud", {"conditions": [condition], "completionTime": _ts(done_at)})


def _deletes(fake: FakeClusterManager) -> list[Any]:
    return fake.requests_of("DeleteCluster")


Run = Callable[..., Decision]


@pytest.fixture
def run(fake: FakeClusterManager, container_client: Any, apiserver: FakeKubeApiServer) -> Iterator[Run]:
    api = k8s.ApiClient(k8s.Configuration(host=apiserver.url))

    def once(now: float = NOW, **options: Any) -> Decision:
        identity = ClusterIdentity(PROJECT, LOCATION, "rl")
        return run_once(now=now, identity=identity, container_client=container_client, api_client=api, **options)

    try:
        yield once
    finally:
        api.close()


def _record(apiserver: FakeKubeApiServer) -> dict[str, str]:
    config_map = apiserver.get_object("ConfigMap", "rlcloud-reaper", "rlcloud-system")
    assert config_map is not None
    return dict(config_map["data"])


def test_deletes_an_expired_cluster_even_while_an_experiment_runs(
    fake: FakeClusterManager, apiserver: FakeKubeApiServer, run: Run
) -> None:
    _put_cluster(fake, {"managed-by": "rlcloud", "expiry": str(int(NOW - 60))})
    _experiment(apiserver, "still-training")
    decision = run()
    assert decision.delete and "ttl expired" in decision.reason
    assert len(_deletes(fake)) == 1
    record = _record(apiserver)
    assert record["decision"] == "delete" and record["running"] == "1"
    assert record["outcome"].startswith("delete requested")
    (event,) = apiserver.list_objects("Event", "rlcloud-system")
    assert event["reason"] == "ClusterDelete" and "ttl expired" in event["message"]
    # idempotent: the next run finds the cluster STOPPING and sends no second delete
    assert run(NOW + 300).reason == "already being deleted"
    assert len(_deletes(fake)) == 1
    assert _record(apiserver)["decision"] == "keep"


def test_deletes_an_idle_cluster(fake: FakeClusterManager, apiserver: FakeKubeApiServer, run: Run) -> None:
    _put_cluster(fake, {"managed-by": "rlcloud", "autodown": "1800"})
    _experiment(apiserver, "finished", done_at=NOW - 3600)
    decision = run()
    assert decision.delete and "idle for 1h since last activity" in decision.reason
    assert len(_deletes(fake)) == 1


def test_a_running_experiment_postpones_idle_teardown(
    fake: FakeClusterManager, apiserver: FakeKubeApiServer, run: Run
) -> None:
    _put_cluster(fake, {"managed-by": "rlcloud", "autodown": "1800"})
    _experiment(apiserver, "finished", done_at=NOW - 5 * H)
    _experiment(apiserver, "training")
    decision = run()
    assert not decision.delete and "postponed" in decision.reason
    assert _deletes(fake) == []
    record = _record(apiserver)
    assert record["decision"] == "keep" and "job rlcloud/training" in record["running_workloads"]
    # the experiment ends: 30 minutes later the cluster goes
    apiserver.update_status("Job", "training", "rlcloud", {"conditions": [{"type": "Complete", "status": "True",
                            "lastTransitionTime": _ts(NOW + 60)}]})  # fmt: skip
    assert not run(NOW + 600).delete
    assert run(NOW + 60 + 1800).delete
    assert len(_deletes(fake)) == 1


def test_a_queued_sweep_its_budget_stopped_lets_autodown_fire(
    fake: FakeClusterManager, apiserver: FakeKubeApiServer, run: Run
) -> None:
    _put_cluster(fake, {"managed-by": "rlcloud", "autodown": "1800"})
    _experiment(apiserver, "finished", done_at=NOW - H)
    _experiment(apiserver, "lr")
    labels = {"kueue.x-k8s.io/queue-name": "team", "rlcloud.io/sweep": "lr"}
    annotations = {"rlcloud.io/budget-usd": "5.00"}
    apiserver.patch_object("Job", "lr", "rlcloud", {"metadata": {"labels": labels, "annotations": annotations},
                           "spec": {"suspend": True}})  # fmt: skip
    assert not run().delete, "a sweep queued in Kueue is work to come"
    # the reaper (or a cluster's budget) stopped it: suspended for good, no longer activity
    annotations["rlcloud.io/budget-state"] = "stopped"
    apiserver.patch_object("Job", "lr", "rlcloud", {"metadata": {"annotations": annotations}})
    decision = run()
    assert decision.delete and "idle for 1h since last activity" in decision.reason
    assert len(_deletes(fake)) == 1


def test_never_touches_an_unlabelled_cluster(fake: FakeClusterManager, apiserver: FakeKubeApiServer, run: Run) -> None:
    # made outside rlcloud, yet carrying labels that would make it due
    _put_cluster(fake, {"expiry": str(int(NOW - 3600)), "autodown": "600"})
    decision = run()
    assert not decision.delete and "not made by rlcloud" in decision.reason
    assert _deletes(fake) == []
    assert _record(apiserver)["decision"] == "keep"


def test_unknown_activity_postpones_autodown_but_not_the_ttl(
    fake: FakeClusterManager, apiserver: FakeKubeApiServer, run: Run
) -> None:
    apiserver.inject_fault("GET", "/apis/batch/v1/jobs", status=403, count=100)
    _put_cluster(fake, {"managed-by": "rlcloud", "autodown": "1800"})
    decision = run()
    assert not decision.delete and "postponed" in decision.reason
    assert "cannot list" in _record(apiserver)["running_workloads"]
    _put_cluster(fake, {"managed-by": "rlcloud", "autodown": "1800", "expiry": str(int(NOW - 1))})
    assert run().delete
    assert len(_deletes(fake)) == 1


def test_dry_run_records_but_deletes_nothing(fake: FakeClusterManager, apiserver: FakeKubeApiServer, run: Run) -> None:
    _put_cluster(fake, {"managed-by": "rlcloud", "expiry": str(int(NOW - 60))})
    assert run(dry_run=True).delete
    assert _deletes(fake) == []
    assert _record(apiserver)["outcome"] == "dry run: nothing deleted"


def test_a_busy_cluster_is_tried_again_next_run(
    fake: FakeClusterManager, apiserver: FakeKubeApiServer, run: Run
) -> None:
    import grpc

    _put_cluster(fake, {"managed-by": "rlcloud", "expiry": str(int(NOW - 60))})
    fake.fail_next(
        "DeleteCluster",
        grpc.StatusCode.FAILED_PRECONDITION,
        "Cluster is running incompatible operation operation-123.",
        reason="CLUSTER_ALREADY_HAS_OPERATION",
    )
    assert run().delete
    assert "busy with another operation" in _record(apiserver)["outcome"]
    run(NOW + 300)
    assert fake.clusters[(PROJECT, LOCATION, "rl")].status == container_v1.Cluster.Status.STOPPING


def test_the_program_reads_its_identity_from_the_metadata_server(
    fake: FakeClusterManager,
    apiserver: FakeKubeApiServer,
    metadata: str,  # noqa: F811  # the imported fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _put_cluster(fake, {"managed-by": "rlcloud", "expiry": "1000"})  # expired long ago
    monkeypatch.setenv("RLCLOUD_METADATA_HOST", metadata)
    monkeypatch.setenv("RLCLOUD_KUBE_API", apiserver.url)
    monkeypatch.setenv("RLCLOUD_GKE_EMULATOR_HOST", fake.address)
    assert reaper.metadata_identity() == ClusterIdentity(PROJECT, LOCATION, "rl")
    assert reaper.main([]) == 0
    (request,) = _deletes(fake)
    assert request.name == f"projects/{PROJECT}/locations/{LOCATION}/clusters/rl"


def test_a_server_that_is_not_the_metadata_server_is_refused(apiserver: FakeKubeApiServer) -> None:
    from rlcloud.errors import BackendError

    # the fake apiserver answers HTTP, but not as a metadata server: the reaper must not trust it
    with pytest.raises(BackendError):
        reaper.metadata_identity(apiserver.url.removeprefix("http://"), attempts=1)


# ------------------------------------------------------------------------------------------ install at create


def test_create_installs_the_reaper_on_a_cluster_with_autodown(
    make_cluster: Callable[..., GkeCluster], apiserver: FakeKubeApiServer
) -> None:
    api = k8s.ApiClient(k8s.Configuration(host=apiserver.url))
    cluster = make_cluster(
        ClusterSpec(name="rl", autodown="30m"),
        reaper_service_account=GSA,
        reaper_image="repo/runner-cpu:1",
        kube_api_client=api,
    )
    info = cluster.create()
    assert info.autodown == 1800 and info.status == "RUNNING"
    assert "reaper installed" in cluster.reaper_note
    (cron,) = apiserver.list_objects("CronJob", "rlcloud-system")
    assert cron["spec"]["schedule"] == "*/5 * * * *"
    (sa,) = apiserver.list_objects("ServiceAccount", "rlcloud-system")
    assert sa["metadata"]["annotations"]["iam.gke.io/gcp-service-account"] == GSA
    api.close()


def test_create_without_the_reapers_identity_says_so_and_goes_on(
    make_cluster: Callable[..., GkeCluster], caplog: pytest.LogCaptureFixture
) -> None:
    cluster = make_cluster(ClusterSpec(name="rl", ttl="6h"), reaper_image="repo/runner-cpu:1")
    with caplog.at_level("WARNING", logger="rlcloud.gke"):
        info = cluster.create()
    assert info.status == "RUNNING" and info.expiry is not None
    note = cluster.reaper_note
    assert "no in-cluster reaper" in note and "\n" not in note
    assert f"reaper_service_account: rlcloud-reaper@{PROJECT}.iam.gserviceaccount.com" in note
    assert "docs/gke-setup.md" in note
    assert note in caplog.text


def test_a_reaper_install_failure_never_fails_the_create(
    make_cluster: Callable[..., GkeCluster], apiserver: FakeKubeApiServer
) -> None:
    api = k8s.ApiClient(k8s.Configuration(host=apiserver.url))
    apiserver.inject_fault(None, "rlcloud-system|clusterrole", status=403, count=100)
    cluster = make_cluster(
        ClusterSpec(name="rl", ttl="2h"), reaper_service_account=GSA, reaper_image="i:1", kube_api_client=api
    )
    assert cluster.create().status == "RUNNING"
    assert "could not be installed" in cluster.reaper_note
    api.close()


def test_no_reaper_without_ttl_or_autodown(make_cluster: Callable[..., GkeCluster]) -> None:
    cluster = make_cluster(ClusterSpec(name="rl"), reaper_service_account=GSA, reaper_image="i:1")
    cluster.create()
    assert cluster.reaper_note == ""


@pytest.mark.parametrize("bad", ["1764100000000", "never", "-60", "9" * 40, "\u00b2\u00b3", ""])
def test_an_unreadable_label_acts_as_absent_and_is_recorded(
    fake: FakeClusterManager, apiserver: FakeKubeApiServer, run: Run, bad: str
) -> None:
    # an unreadable expiry never deletes (nor crashes the run); the autodown still acts
    _put_cluster(fake, {"managed-by": "rlcloud", "expiry": bad, "autodown": "1800"})
    decision = run()
    assert decision.delete and "idle for" in decision.reason
    record = _record(apiserver)
    assert "label expiry=" in record["problems"] and "label autodown" not in record["problems"]
    # an unreadable autodown never idles it out; a good expiry still acts
    _put_cluster(fake, {"managed-by": "rlcloud", "expiry": str(int(NOW + H)), "autodown": bad})
    decision = run()
    assert not decision.delete and "ttl expires" in decision.reason
    assert "label autodown=" in _record(apiserver)["problems"]
    # both unreadable: kept, with both named
    _put_cluster(fake, {"managed-by": "rlcloud", "expiry": bad, "autodown": bad})
    assert not run().delete
    assert "label expiry=" in _record(apiserver)["problems"] and "label autodown=" in _record(apiserver)["problems"]


# ------------------------------------------------------------------------------- budgets: enforced or refused


def test_a_runs_budget_needs_no_google_identity_only_kubernetes_permissions(
    make_cluster: Callable[..., GkeCluster], apiserver: FakeKubeApiServer
) -> None:
    from rlcloud.cluster import GkeTarget

    api = k8s.ApiClient(k8s.Configuration(host=apiserver.url))
    handle = make_cluster(ClusterSpec(name="rl"), reaper_image="repo/runner-cpu:1", kube_api_client=api)
    target = GkeTarget(handle.spec, handle=handle)
    target.check_budget("experiment a", None)  # nothing to refuse: an image is all the reaper needs
    target.enforce_budget("experiment a")
    (cron,) = apiserver.list_objects("CronJob", "rlcloud-system")
    container = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "rlcloud.gke.reaper", "--runs-only"]
    (sa,) = apiserver.list_objects("ServiceAccount", "rlcloud-system")
    assert "iam.gke.io/gcp-service-account" not in (sa["metadata"].get("annotations") or {})
    assert "budgets only" in handle.reaper_note and "reaper_service_account" in handle.reaper_note
    # with the Google identity: the whole reaper (ttl, autodown, the cluster's budget too)
    handle.reaper_service_account = GSA
    target.enforce_budget("experiment a")
    (cron,) = apiserver.list_objects("CronJob", "rlcloud-system")
    assert (
        cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"][-1] == "rlcloud.gke.reaper"
    )
    api.close()


@pytest.mark.parametrize("what", ["experiment", "sweep"])
def test_a_budget_nothing_could_enforce_is_refused_before_anything_is_created(
    make_cluster: Callable[..., GkeCluster], fake: FakeClusterManager, apiserver: FakeKubeApiServer, what: str
) -> None:
    from rlcloud import Cluster, Experiment, Sweep
    from rlcloud.cluster import GkeTarget
    from rlcloud.errors import SpecError
    from tests.support.kubernetes import make_spec, make_sweep

    experiment = make_spec(name="capped", budget="5 USD")
    sweep = make_sweep(1, budget="5 USD")

    def start(cluster: Any) -> None:
        if what == "experiment":
            Experiment(experiment).start(cluster=cluster, validate=False)
        else:
            Sweep(sweep).start(cluster=cluster, validate=False)

    # a Kubernetes cluster rlcloud did not create has no reaper: refused, naming the field and what would work
    api = k8s.ApiClient(k8s.Configuration(host=apiserver.url))
    with pytest.raises(SpecError) as refused:
        start(Cluster.kubernetes(api_client=api, namespace="rl", image="repo/runner-cpu:1"))
    assert refused.value.problems[0].field == "budget" and "Cluster.gke" in str(refused.value)
    assert apiserver.list_objects("Job", "rl") == [] and apiserver.list_objects("ConfigMap", "rl") == []
    # a GKE cluster without an image for its reaper (none for the run either): refused before it is created
    handle = make_cluster(ClusterSpec(name="rl"), kube_api_client=api)
    target = GkeTarget(handle.spec, handle=handle)
    with pytest.raises(SpecError) as no_image:
        target.check_budget(f"{what} x", None)
    assert no_image.value.problems[0].field == "budget" and "`image:" in str(no_image.value)
    assert fake.requests_of("CreateCluster") == []
    api.close()


def test_a_cluster_budget_without_the_reapers_google_identity_is_refused_before_it_is_created(
    make_cluster: Callable[..., GkeCluster], fake: FakeClusterManager
) -> None:
    from rlcloud.errors import SpecError

    cluster = make_cluster(ClusterSpec(name="rl", budget="40 USD"), reaper_image="repo/runner-cpu:1")  # type: ignore[arg-type]
    with pytest.raises(SpecError) as refused:
        cluster.create()
    message = str(refused.value)
    assert refused.value.problems[0].field == "budget" and "cluster rl: its budget would not be enforced" in message
    assert f"reaper_service_account: rlcloud-reaper@{PROJECT}.iam.gserviceaccount.com" in message
    assert fake.requests_of("CreateCluster") == []


def test_a_reaper_refused_the_cluster_still_looks_at_runs_budgets(
    fake: FakeClusterManager, apiserver: FakeKubeApiServer, run: Run
) -> None:
    import grpc

    from rlcloud.errors import RLCloudError

    # the reaper's Google identity may not read the cluster (a missing grant): the runs' budgets act anyway
    _put_cluster(fake, {"managed-by": "rlcloud"})
    _experiment(apiserver, "capped")
    apiserver.patch_object("Job", "capped", "rlcloud", {"metadata": {"annotations": {"rlcloud.io/budget-usd": "1.00"}}})
    fake.fail_next("GetCluster", grpc.StatusCode.PERMISSION_DENIED, "Required 'container.clusters.get' permission")
    with pytest.raises(RLCloudError):
        run()
    record = _record(apiserver)
    assert record["decision"] == "unknown" and "capped" in record["budget_runs"]


# ------------------------------------------------------------------------------- the reaper's clock


@pytest.mark.parametrize(
    ("local", "server", "used"),
    [
        (NOW + 2 * H, NOW, NOW),  # a node clock stepped 2 hours forward: the API server's
        (NOW + 60, NOW, NOW + 60),  # within the skew allowed: its own
        (NOW - 2 * H, NOW, NOW - 2 * H),  # behind counts less, never more: its own
        (NOW + 2 * H, None, NOW + 2 * H),  # the server's clock unreadable: its own
    ],
)
def test_the_reaper_decides_with_the_api_servers_clock_when_its_own_runs_ahead(
    local: float, server: float | None, used: float
) -> None:
    assert reaper.checked_now(local, server) == used


def test_a_reaper_whose_clock_stepped_forward_does_not_end_a_ttl_early(
    fake: FakeClusterManager, container_client: Any, apiserver: FakeKubeApiServer
) -> None:
    import time

    from rlcloud.k8s.applier import Applier
    from tests.support.clocks import SteppingClock

    api = k8s.ApiClient(k8s.Configuration(host=apiserver.url))
    server = reaper.api_server_time(Applier(api))
    assert server is not None and abs(server - time.time()) < H  # the fake's Date header: its clock
    _put_cluster(fake, {"managed-by": "rlcloud", "expiry": str(int(time.time() + H))}, created=time.time() - 60)
    clock = SteppingClock()
    clock.step(2 * H)  # the reaper's node clock, 2 hours ahead: its ttl would look expired an hour ago
    identity = ClusterIdentity(PROJECT, LOCATION, "rl")
    decision = run_once(identity=identity, container_client=container_client, api_client=api, clock=clock.clock)
    assert not decision.delete and "ttl expires" in decision.reason
    assert _deletes(fake) == []
    api.close()


@pytest.mark.parametrize("dedicated", [False, True])
def test_a_budget_whose_reaper_cannot_be_installed_fails_the_create(
    make_cluster: Callable[..., GkeCluster], fake: FakeClusterManager, apiserver: FakeKubeApiServer, dedicated: bool
) -> None:
    from rlcloud.errors import BackendError

    api = k8s.ApiClient(k8s.Configuration(host=apiserver.url))
    apiserver.inject_fault(None, "rlcloud-system|clusterrole", status=403, count=100)
    spec = ClusterSpec(name="rl", budget="40 USD")  # type: ignore[arg-type]
    cluster = make_cluster(spec, reaper_service_account=GSA, reaper_image="i:1", kube_api_client=api, doctor=False)
    with pytest.raises(BackendError, match="a budget would not be enforced"):
        cluster.create(delete_on_failure=dedicated)
    # a dedicated cluster (made for one run) goes; another stays, the error saying its budget acts nowhere
    assert len(fake.requests_of("DeleteCluster")) == int(dedicated)
    api.close()
