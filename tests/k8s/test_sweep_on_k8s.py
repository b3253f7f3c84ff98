"""Sweeps on Kubernetes: one ConfigMap + ONE Indexed Job per sweep, whatever its number of trials.

Builders (validated strictly), then KubernetesBackend against the fake apiserver (counting its requests:
the same for 10 and 1,000 trials), then the fake kubelet running the trials' pods: the stand-in runner for
the lifecycle (parallelism, FailIndex, stop), the real runner for a tiny sweep whose results land in
fake-gcs-server.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client

from rlcloud.errors import ConflictError, NotFoundError, SpecError
from rlcloud.k8s.backend import KubernetesBackend
from rlcloud.k8s.builders import KUEUE_QUEUE_LABEL, LABEL_EXPERIMENT, LABEL_SWEEP, SWEEP_RESULTS_ENV, build_workloads
from rlcloud.runner.main import SWEEP_RESULTS_ENV as RUNNER_SWEEP_RESULTS_ENV
from rlcloud.specs.sweep import SweepSpec
from tests.fakes.gcs import FakeGcsServer
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet
from tests.support.kubernetes import (
    FAST_RETRY,
    add_local_queue,
    as_dicts,
    build,
    container,
    env_of,
    make_backend,
    make_spec,
    make_sweep,
    standin,
)
from tests.support.waiting import eventually

VERSIONS = ["1.28", "1.29", "1.31", "1.33"]
JOB_PATH = "/apis/batch/v1/namespaces/rl/jobs"


# ----------------------------------------------------------------------------------------------- builders


@pytest.mark.parametrize("version", VERSIONS)
def test_10_and_1000_trials_are_the_same_two_small_objects(version: str) -> None:
    small, large = make_sweep(5), make_sweep(500)
    assert (small.num_trials, large.num_trials) == (10, 1000)
    sizes = []
    for sweep in (small, large):
        objs = build(
            sweep, gpu_type="nvidia-l4", credentials_secret="gcp-key", queue="team-a", kubernetes_version=version
        )
        assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [("ConfigMap", "lr-sweep"), ("Job", "lr-sweep")]
        for obj in objs:
            kubernetes_validate.validate(obj, f"{version}.0", strict=True)
        sizes.append(len(json.dumps(objs[0]["data"])))
        assert objs[1]["spec"]["completions"] == sweep.num_trials
    # the ConfigMap holds the grid, not its expansion: "seeds: 5" vs "seeds: 500"
    assert abs(sizes[0] - sizes[1]) <= 2 and max(sizes) < 4096, sizes


def test_the_job_runs_each_trial_in_an_indexed_pod_with_per_trial_retries() -> None:
    (cm, job) = build(make_sweep(5, max_parallel=3), kubernetes_version="1.31")
    assert SweepSpec.from_yaml_text(cm["data"]["sweep.yaml"]) == make_sweep(5, max_parallel=3)
    assert cm["data"]["results"] == "gs://bucket/runs"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == 10 and spec["parallelism"] == 3
    assert spec["backoffLimitPerIndex"] == 4 and "backoffLimit" not in spec
    assert "suspend" not in spec or spec["suspend"] is False
    rules = spec["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert rules[1]["action"] == "FailIndex" and rules[1]["onExitCodes"]["values"] == [2, 3]
    assert rules[2]["action"] == "FailIndex" and rules[2]["onExitCodes"]["values"] == [89]  # stalled again
    c = container(job)
    assert c["command"] == ["python", "-m", "rlcloud.runner"]
    assert c["args"] == [
        "--role", "single", "--index", "$(RLCLOUD_INDEX)",
        "--sweep", "/etc/rlcloud/sweep.yaml", "--workdir", "/var/lib/rlcloud/work",
    ]  # fmt: skip
    env = env_of(job)
    assert env[SWEEP_RESULTS_ENV] == "gs://bucket/runs/lr" and SWEEP_RESULTS_ENV == RUNNER_SWEEP_RESULTS_ENV
    assert "RLCLOUD_RESULTS" not in env  # each pod derives its trial's location
    assert "job-completion-index" in env["RLCLOUD_INDEX"]["fieldRef"]["fieldPath"]
    (volume,) = [v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "spec"]
    assert volume["configMap"] == {"name": "lr-sweep", "items": [{"key": "sweep.yaml", "path": "sweep.yaml"}]}
    for obj in (cm, job, job["spec"]["template"]):
        labels = obj["metadata"]["labels"]
        assert labels[LABEL_SWEEP] == "lr" and LABEL_EXPERIMENT not in labels
        assert labels["app.kubernetes.io/managed-by"] == "rlcloud"
    assert job["metadata"]["labels"]["rlcloud.io/role"] == "trial"
    assert KUEUE_QUEUE_LABEL not in job["metadata"]["labels"]


def test_the_configmap_gives_the_pods_exactly_the_sweep_that_was_validated() -> None:
    sweep = make_sweep(
        2,
        experiment={"saver_frequency": None, "summary_frequency": None, "evaluation": None},
        early_stopping={"grace_timesteps": 5},
    )
    random = SweepSpec(
        name="rs",
        experiment=make_spec(name="base"),
        parameters={"agent.learning_rate": {"loguniform": [1e-5, 1e-2]}, "agent.batch_size": [5, 10]},
        samples=5,
        seeds=[3, 7],
    )
    for spec in (sweep, random):
        (cm, _job) = build(spec)
        back = SweepSpec.from_yaml_text(cm["data"]["sweep.yaml"])
        assert back == spec  # a null saver_frequency stays null (not the 600 s default)
        assert [t.name for t in back.trials()] == [t.name for t in spec.trials()]


def test_default_parallelism_is_capped_and_multi_threaded_trials_get_the_learner_resources() -> None:
    sweep = make_sweep(
        500, experiment={"run_mode": "multi-threaded", "num_workers": 4, "resources": {"learner": {"cpu": "4"}}}
    )
    (_, job) = build(sweep, gpu_type="nvidia-tesla-t4")
    assert job["spec"]["parallelism"] == 100
    c = container(job)
    assert c["args"][:2] == ["--role", "multi"]
    assert c["resources"]["requests"] == {"cpu": "4", "memory": "2Gi", "nvidia.com/gpu": "1"}  # memory: the default
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
    (_, few) = build(make_sweep(1))
    assert few["spec"]["parallelism"] == 2  # never more pods than trials


def test_before_1_29_the_trials_share_one_budget_and_spec_errors_do_not_fail_the_sweep() -> None:
    (_, job) = build(make_sweep(5), kubernetes_version="1.28")
    spec = job["spec"]
    assert "backoffLimitPerIndex" not in spec and spec["backoffLimit"] == 4 * 10
    # FailJob would end every other trial: without FailIndex a spec error is an ordinary failure
    assert [r["action"] for r in spec["podFailurePolicy"]["rules"]] == ["Ignore"]


def test_a_kueue_queue_labels_the_job_and_creates_it_suspended() -> None:
    (cm, job) = build(make_sweep(5), queue="team-a")
    assert job["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "team-a"
    assert job["spec"]["suspend"] is True
    assert KUEUE_QUEUE_LABEL not in cm["metadata"]["labels"]
    assert KUEUE_QUEUE_LABEL not in job["spec"]["template"]["metadata"]["labels"]


def test_distributed_trials_and_mixed_run_modes_are_refused() -> None:
    with pytest.raises(SpecError, match="env-server pods"):
        build(make_sweep(2, experiment={"run_mode": "distributed", "num_workers": 2}))
    mixed = SweepSpec(
        name="modes",
        experiment=make_spec(name="base"),
        parameters={"run_mode": ["single", "multi-threaded"], "num_workers": [1]},
    )
    with pytest.raises(SpecError, match="two sweeps"):
        build(mixed)


def test_sweep_objects_never_match_an_experiments_names_or_selector() -> None:
    sweep_objs = build(make_sweep(2))
    exp_objs = as_dicts(build_workloads(make_spec(name="lr"), image="repo/rl:1", namespace="rl"))
    assert not {o["metadata"]["name"] for o in sweep_objs} & {o["metadata"]["name"] for o in exp_objs}
    assert all(LABEL_EXPERIMENT not in o["metadata"]["labels"] for o in sweep_objs)


# ------------------------------------------------------------------------------ backend, fake apiserver


@pytest.fixture
def backend(api_client: client.ApiClient) -> KubernetesBackend:
    return make_backend(api_client)


def _requests(apiserver: FakeKubeApiServer, fn: Any) -> tuple[Any, list[str]]:
    apiserver.clear_requests()
    value = fn()
    return value, [f"{r.method} {r.path}" for r in apiserver.requests]


def test_start_status_stop_make_the_same_requests_for_10_and_1000_trials(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    seen: dict[int, dict[str, list[str]]] = {}
    for seeds in (5, 500):
        backend = make_backend(api_client)
        sweep = make_sweep(seeds, name=f"s{seeds}")
        backend.ensure_namespace()
        backend.kubernetes_version()
        started, start_reqs = _requests(apiserver, lambda b=backend, s=sweep: b.start_sweep(s, str(tmp_path)))
        assert started is True
        status, status_reqs = _requests(apiserver, lambda b=backend, s=sweep: b.sweep_status(s.name))
        assert len(status.trials) == sweep.num_trials
        assert status.state == "pending" and status.counts() == {"queued": sweep.num_trials}
        _, stop_reqs = _requests(apiserver, lambda b=backend, s=sweep: b.stop_sweep(s.name))
        seen[sweep.num_trials] = {"start": start_reqs, "status": status_reqs, "stop": stop_reqs}
        assert apiserver.list_objects("Job", "rl") == [] and apiserver.list_objects("ConfigMap", "rl") == []
    small, large = seen[10], seen[1000]
    for verb in ("start", "status", "stop"):
        assert len(small[verb]) == len(large[verb]), (verb, small[verb], large[verb])
    assert len(small["start"]) == 3  # read the Job, create the ConfigMap and the Job
    assert len(small["status"]) == 3  # the Job, the ConfigMap, one list of pods
    assert [r.split(" ")[0] for r in small["stop"]] == ["DELETE", "DELETE", "GET"]


def test_start_is_idempotent_and_a_changed_sweep_is_refused(
    backend: KubernetesBackend, apiserver: FakeKubeApiServer, tmp_path: Path
) -> None:
    sweep = make_sweep(2)
    assert backend.start_sweep(sweep, str(tmp_path)) is True
    assert backend.start_sweep(sweep, str(tmp_path)) is False
    assert len(apiserver.list_objects("Job", "rl")) == 1
    with pytest.raises(ConflictError, match="stop it first"):
        backend.start_sweep(make_sweep(3), str(tmp_path))
    assert backend.list_sweeps() == ["lr"]
    assert backend.list() == []  # a sweep is not an experiment
    spec, root = backend.attach_sweep("lr")
    assert spec == sweep and root == str(tmp_path)
    backend.stop_sweep("lr")
    backend.stop_sweep("lr")  # idempotent
    with pytest.raises(NotFoundError, match="no sweep 'lr'"):
        backend.sweep_status("lr")
    with pytest.raises(NotFoundError):
        backend.attach_sweep("lr")
    assert backend.start_sweep(make_sweep(3), str(tmp_path)) is True  # after a stop: anything goes


def test_results_must_be_gcs_unless_local_results(api_client: client.ApiClient) -> None:
    backend = KubernetesBackend(api_client, namespace="rl", retry=FAST_RETRY)
    with pytest.raises(SpecError, match="a sweep on Kubernetes needs a gs://"):
        backend.start_sweep(make_sweep(2), "/tmp/results")


def test_a_queued_sweep_is_created_suspended_and_left_to_kueue(
    api_client: client.ApiClient, apiserver: FakeKubeApiServer, tmp_path: Path
) -> None:
    backend = make_backend(api_client)
    backend.queue = "team-a"
    add_local_queue(apiserver, "rl", "team-a")
    assert backend.start_sweep(make_sweep(2), str(tmp_path)) is True
    (job,) = apiserver.list_objects("Job", "rl")
    assert job["spec"]["suspend"] is True and job["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "team-a"
    assert backend.start_sweep(make_sweep(2), str(tmp_path)) is False
    assert apiserver.get_object("Job", "lr-sweep", "rl")["spec"]["suspend"] is True  # Kueue decides, not us
    status = backend.sweep_status("lr")
    assert status.state == "pending" and "Kueue" in (status.message or "")
    assert status.counts() == {"queued": 4}


def _pod(name: str, index: int, phase: str, code: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if code is not None:
        status["containerStatuses"] = [
            {"name": "runner", "ready": False, "restartCount": 0, "image": "x", "imageID": "",
             "state": {"terminated": {"exitCode": code}}}
        ]  # fmt: skip
    return {
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "rlcloud", LABEL_SWEEP: "big", "rlcloud.io/role": "trial"},
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
        },
        "spec": {"containers": [{"name": "runner", "image": "x"}]},
        "status": status,
    }


def test_status_of_1000_trials_from_completed_and_failed_indexes_in_three_requests(
    backend: KubernetesBackend, apiserver: FakeKubeApiServer, tmp_path: Path
) -> None:
    sweep = make_sweep(500, name="big")
    backend.start_sweep(sweep, str(tmp_path))
    table = sweep.trial_table()
    # what the Job controller and the runners would have left: 0-499 done, 500-599 running, 600 failed
    apiserver.update_status(
        "Job", "big-sweep", "rl", {"completedIndexes": "0-499", "failedIndexes": "600", "active": 100}
    )
    for i, phase, code in [*((i, "Running", None) for i in range(500, 600)), (600, "Failed", 2)]:
        pod = _pod(f"big-sweep-{i}-x", i, phase, code)
        apiserver.create_object("Pod", pod, "rl")
        apiserver.update_status("Pod", pod["metadata"]["name"], "rl", pod["status"])  # created Pending
    location = tmp_path / "big"
    for i, state in ((0, "succeeded"), (1, "stopped-early"), (500, "running")):
        trial_dir = location / table[i][0]
        trial_dir.mkdir(parents=True)
        (trial_dir / "progress.json").write_text(json.dumps({"state": state, "timestep": 100 + i}))
    status, reqs = _requests(apiserver, lambda: backend.sweep_status("big"))
    assert len(reqs) == 3, reqs
    assert status.counts() == {"succeeded": 499, "stopped early": 1, "running": 100, "failed": 1, "queued": 399}
    assert status.state == "running"
    assert status.trials[500].progress["timestep"] == 600
    assert status.trials[600].state == "failed" and "spec or environment error" in (status.trials[600].reason or "")
    assert (status.trials[1].params, status.trials[1].seed) == ({"agent.learning_rate": 1e-3}, 2)
    # finished trials' progress is read once; running ones every time
    (location / table[0][0] / "progress.json").write_text(json.dumps({"state": "succeeded", "timestep": -1}))
    (location / table[500][0] / "progress.json").write_text(json.dumps({"state": "running", "timestep": 7}))
    again = backend.sweep_status("big")
    assert again.trials[0].progress["timestep"] == 100 and again.trials[500].progress["timestep"] == 7


def test_status_of_an_experiment_with_1000_env_servers_is_constant_in_requests(
    backend: KubernetesBackend, apiserver: FakeKubeApiServer, tmp_path: Path
) -> None:
    counts = []
    for workers in (10, 1000):
        name = f"dist{workers}"
        backend.start(make_spec("distributed", workers, name=name), str(tmp_path))
        backend.status(name)  # the ConfigMap is read once per backend
        status, reqs = _requests(apiserver, lambda n=name: backend.status(n))
        assert len([r for r in status.roles if r.role == "env-server"]) == workers
        counts.append(len(reqs))
    assert counts[0] == counts[1] <= 3, counts


# ---------------------------------------------------------------------- the fake kubelet runs the pods


def _peak_parallel(kubelet: FakeKubelet, apiserver: FakeKubeApiServer, until: Any, timeout: float = 60) -> int:
    peak = 0
    deadline = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < deadline, "the sweep did not finish"
        live = [p for p in apiserver.list_objects("Pod", "rl") if p["status"].get("phase") in ("Pending", "Running")]
        peak = max(peak, len(live))
        time.sleep(0.02)
    return peak


@pytest.mark.processes
def test_the_job_runs_max_parallel_trials_at_a_time_and_one_bad_trial_fails_alone(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = make_backend(api_client)
    root = tmp_path / "results"
    sweep = make_sweep(3, max_parallel=2)  # 6 trials
    backend.start_sweep(sweep, str(root))
    env = {"STANDIN_EPISODES": "3", "STANDIN_DELAY": "0.1", "STANDIN_FAIL_TRIAL": "4:2"}
    with FakeKubelet(apiserver, tmp_path / "pods", argv_rewrite=standin, extra_env=env, max_grace=10) as kubelet:
        peak = _peak_parallel(kubelet, apiserver, lambda: backend.sweep_status("lr").finished)
        final = backend.sweep_status("lr")
    assert peak == 2
    assert final.state == "failed" and "1 of 6 trials failed" in (final.message or "")
    assert [t.state for t in final.trials] == ["succeeded"] * 4 + ["failed", "succeeded"]
    # FailIndex: the spec error was not retried, and the trials after it still ran
    assert [code for _, pod, code in kubelet.exits if pod.startswith("lr-sweep-4-")] == [2]
    names = [name for name, _, _ in sweep.trial_table()]
    for i, name in enumerate(names):
        progress = root / "lr" / name / "progress.json"
        assert progress.exists() == (i != 4), name
    job = apiserver.get_object("Job", "lr-sweep", "rl")
    assert job["status"]["completedIndexes"] == "0-3,5" and job["status"]["failedIndexes"] == "4"


def test_max_failed_indexes_follows_max_failures() -> None:
    (_, job) = build(make_sweep(5, max_failures=3), kubernetes_version="1.31")
    assert job["spec"]["maxFailedIndexes"] == 2  # the Job fails once failed indexes exceed it: at the 3rd
    (_, job) = build(make_sweep(5, max_failures=0), kubernetes_version="1.31")
    assert "maxFailedIndexes" not in job["spec"]
    (_, job) = build(make_sweep(5, max_failures=3), kubernetes_version="1.28")  # no per-index limits
    assert "maxFailedIndexes" not in job["spec"]


@pytest.mark.processes
def test_a_broken_sweep_stops_after_max_failures_trials(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    backend = make_backend(api_client)
    sweep = make_sweep(10, max_parallel=2, max_failures=3)  # 20 trials, each one broken
    backend.start_sweep(sweep, str(tmp_path / "results"))
    env = {"STANDIN_EPISODES": "3", "STANDIN_DELAY": "0.1", "STANDIN_FAIL_TRIAL": "all:3"}
    with FakeKubelet(apiserver, tmp_path / "pods", argv_rewrite=standin, extra_env=env, max_grace=10) as kubelet:
        eventually(lambda: backend.sweep_status("lr").finished, timeout=120)
        final = backend.sweep_status("lr")
    started = {pod.rsplit("-", 1)[0] for _, pod, _ in kubelet.exits}
    assert len(started) <= 3 + 1  # the third failure stops the Job; one more may have been running
    assert final.state == "failed"
    assert "stopped after" in (final.message or "") and "max_failures 3" in (final.message or "")
    assert final.counts()["stopped"] >= 16 and "trials did not run" in (final.message or "")
    job = apiserver.get_object("Job", "lr-sweep", "rl")
    (failed,) = [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
    assert failed["reason"] == "MaxFailedIndexesExceeded"


def test_the_api_server_refuses_max_failed_indexes_without_per_index_limits(api_client: client.ApiClient) -> None:
    job = build(make_sweep(2, max_failures=3), kubernetes_version="1.31")[1]
    del job["spec"]["backoffLimitPerIndex"]
    with pytest.raises(client.ApiException) as info:
        client.BatchV1Api(api_client).create_namespaced_job("rl", job)
    assert info.value.status == 422 and "backoffLimitPerIndex" in str(info.value.body)


@pytest.mark.processes
def test_stop_checkpoints_running_trials_and_removes_everything(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    backend = make_backend(api_client)
    root = tmp_path / "results"
    sweep = make_sweep(2, max_parallel=2)
    backend.start_sweep(sweep, str(root))
    env = {"STANDIN_EPISODES": "1000", "STANDIN_DELAY": "0.05"}
    with FakeKubelet(apiserver, tmp_path / "pods", argv_rewrite=standin, extra_env=env, max_grace=10) as kubelet:
        eventually(lambda: backend.sweep_status("lr").counts().get("running") == 2, timeout=30)
        # both trials are training (a SIGTERM before the runner's handler is installed leaves no checkpoint)
        names = [name for name, _, _ in sweep.trial_table()]
        eventually(lambda: all((root / "lr" / n / "progress.json").exists() for n in names[:2]), timeout=30)
        backend.stop_sweep("lr")
        assert kubelet.running() == []
    assert sorted(code for _, _, code in kubelet.exits) == [143, 143]
    for kind in ("Job", "ConfigMap", "Pod"):
        assert apiserver.list_objects(kind, "rl") == [], kind
    for name in names[:2]:
        assert (root / "lr" / name / "checkpoints" / "LATEST").exists()
    assert backend.list_sweeps() == []


# ------------------------------------------------------------------------------ real trials, real runner


@pytest.mark.processes
@pytest.mark.training
def test_real_trials_of_a_sweep_run_in_the_jobs_pods_and_land_in_gcs(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, gcs: FakeGcsServer, tmp_path: Path
) -> None:
    bucket = gcs.create_bucket()
    root = f"gs://{bucket}/runs"
    sweep = SweepSpec(
        name="tiny",
        experiment=make_spec(name="base", episodes=None, total_timesteps=300),
        parameters={"agent.learning_rate": [1e-3, 3e-3, 1e-2]},
        seeds=[1],
        max_parallel=2,
    )
    backend = KubernetesBackend(api_client, namespace="rl", image="rlcloud:test", retry=FAST_RETRY, poll_interval=0.5)
    assert backend.start_sweep(sweep, root) is True
    env = {**gcs.env, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "RLCLOUD_SYNC_INTERVAL": "2"}
    with FakeKubelet(apiserver, tmp_path / "pods", extra_env=env, max_grace=60) as kubelet:
        deadline = time.monotonic() + 500
        peak = 0
        status = backend.sweep_status("tiny")
        while not status.finished:
            assert time.monotonic() < deadline, status
            peak = max(peak, status.counts().get("running", 0) + status.counts().get("pending", 0))
            time.sleep(1)
            status = backend.sweep_status("tiny")
        logs = {pod: pod_log(tmp_path, pod) for _, pod in kubelet.started}
    assert status.state == "succeeded", (status, logs)
    assert peak <= 2 and len(kubelet.started) == 3
    assert [t.state for t in status.trials] == ["succeeded"] * 3
    from rlcloud.record import read_history
    from rlcloud.storage import open_store, read_metrics

    for trial in status.trials:
        store = open_store(f"{root}/tiny/{trial.name}")
        progress = json.loads(store.read_text("progress.json"))
        assert progress["state"] == "succeeded" and progress["timestep"] >= 300, (trial.name, progress)
        assert trial.progress["timestep"] == progress["timestep"]
        assert read_metrics(store)
        recorded = store.read_text("spec.yaml")
        assert f"learning_rate: {trial.params['agent.learning_rate']}" in recorded
        assert f"name: {trial.name}" in recorded
        assert [h["event"] for h in read_history(store)] == ["created"]
        assert store.exists("logs/single-0.log")
    backend.stop_sweep("tiny")
    for kind in ("Job", "ConfigMap", "Pod"):
        assert apiserver.list_objects(kind, "rl") == [], kind


def pod_log(tmp_path: Path, pod: str) -> str:
    """The tail of a pod's container log as the fake kubelet kept it (for failure messages)."""
    path = tmp_path / "pods" / "rl" / pod / "container.log"
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""


# ------------------------------------------------------------------------------------- through the facade


def test_the_sweep_facade_submits_to_the_clusters_kueue_queue(
    api_client: client.ApiClient, apiserver: FakeKubeApiServer, gcs: FakeGcsServer
) -> None:
    from rlcloud import Cluster, Sweep
    from rlcloud.cluster import GkeTarget
    from rlcloud.specs import ClusterSpec

    assert GkeTarget(ClusterSpec(name="rl-t4", queue="team-a")).queue == "team-a"
    with pytest.raises(ValueError, match="Kueue LocalQueue"):  # pydantic ValidationError
        ClusterSpec(name="rl-t4", queue="Team A")
    add_local_queue(apiserver, "rl", "team-a")
    cluster = Cluster.kubernetes(api_client=api_client, namespace="rl", queue="team-a", image="rlcloud:test")
    sweep = Sweep(make_sweep(2), results=f"gs://{gcs.create_bucket()}/runs").start(cluster=cluster)
    assert not sweep.already_running
    (job,) = apiserver.list_objects("Job", "rl")
    assert job["spec"]["suspend"] is True and job["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "team-a"
    attached = Sweep.attach("lr", cluster=cluster)
    assert attached.spec == sweep.spec and attached.location == sweep.location
    assert attached.status().counts() == {"queued": 4}
    attached.stop()
    assert apiserver.list_objects("Job", "rl") == [] and Sweep.list(cluster=cluster) == []
    with pytest.raises(SpecError, match="env-server pods"):
        Sweep(make_sweep(2, experiment={"run_mode": "distributed", "num_workers": 2}), results="gs://bkt/r").start(
            cluster=cluster
        )


def test_a_changed_sweep_is_refused_by_the_facade_before_any_kubernetes_object(
    api_client: client.ApiClient, apiserver: FakeKubeApiServer, gcs: FakeGcsServer
) -> None:
    from rlcloud import Cluster, Sweep
    from rlcloud.record import read_history
    from rlcloud.specs.identity import ChangedSweepError
    from rlcloud.storage import open_store

    cluster = Cluster.kubernetes(api_client=api_client, namespace="rl", image="rlcloud:test")
    results = f"gs://{gcs.create_bucket()}/runs"
    sweep = Sweep(make_sweep(2), results=results).start(cluster=cluster)
    assert [h["event"] for h in read_history(open_store(sweep.location))] == ["created"]
    changed = [
        make_sweep(3),  # more seeds
        make_sweep(2, experiment={"agent": {"type": "ppo", "batch_size": 5, "learning_rate": 1e-3}}),
        make_sweep(2, experiment={"network": [{"type": "dense", "size": 8}]}),
    ]
    for other in changed:  # running: refused with the fields named, not only a ConflictError
        with pytest.raises(ChangedSweepError, match="already exists"):
            Sweep(other, results=results).start(cluster=cluster)
    sweep.stop()
    assert apiserver.list_objects("Job", "rl") == []
    for other in changed:  # stopped, half finished: still refused, and nothing is created
        with pytest.raises(ChangedSweepError) as caught:
            Sweep(other, results=results).start(cluster=cluster)
        assert caught.value.changes
    assert apiserver.list_objects("Job", "rl") == [] and apiserver.list_objects("ConfigMap", "rl") == []
    # the recorded sweep itself goes on
    assert not Sweep(make_sweep(2, max_parallel=1), results=results).start(cluster=cluster).already_running
    assert [h["event"] for h in read_history(open_store(sweep.location))] == ["created", "resumed"]


# ------------------------------------------------------------------------------------ a sweep pod's runner


def test_a_sweep_pod_computes_its_trial_and_starts_it_under_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from rlcloud.record import read_history
    from rlcloud.runner import main as runner

    for var in ("RLCLOUD_RESULTS", "RLCLOUD_EARLY_STOPPING", "RLCLOUD_TRIAL"):
        monkeypatch.setenv(var, "x")  # so that what the runner sets is undone after the test
        monkeypatch.delenv(var)
    sweep = make_sweep(2, early_stopping={"grace_timesteps": 0, "min_trials": 1})
    path = tmp_path / "sweep.yaml"
    path.write_text(sweep.to_yaml())
    location = tmp_path / "results" / "lr"
    monkeypatch.setenv(SWEEP_RESULTS_ENV, str(location))

    def prepare(index: int, role: str = "single") -> Any:
        argv = ["--role", role, "--index", str(index), "--sweep", str(path), "--workdir", str(tmp_path / "w")]
        return runner._prepare_trial(runner.parse_args(argv))

    assert prepare(3, role="multi") == runner.EXIT_SPEC and not location.exists()  # nothing recorded

    trial = sweep.trial(3)
    assert prepare(3) == (trial.spec, tmp_path / "w")
    assert os.environ["RLCLOUD_RESULTS"] == f"{location}/{trial.name}"
    settings = json.loads(os.environ["RLCLOUD_EARLY_STOPPING"])
    assert settings["peers"] == str(location) and settings["trial"] == trial.name and settings["index"] == 3
    hparams = json.loads(os.environ["RLCLOUD_TRIAL"])  # the trial's TensorBoard HParams (runner/hparams.py)
    assert hparams["trial"] == trial.name and hparams["params"] == {"agent.learning_rate": 3e-4}
    trial_dir = location / trial.name
    assert "learning_rate: 0.0003" in (trial_dir / "spec.yaml").read_text()
    prepare(3)  # a retry of the same index (a new pod): it resumes under the same record
    from rlcloud.storage import open_store

    assert [h["event"] for h in read_history(open_store(str(trial_dir)))] == ["created", "resumed"]
    (trial_dir / "progress.json").write_text(json.dumps({"state": "succeeded"}))
    assert prepare(3) == runner.EXIT_OK  # a sweep started again: a finished trial is not run twice
    assert prepare(4) == runner.EXIT_SPEC  # no such trial
    other = sweep.trial(0)
    (location / other.name).mkdir(parents=True)
    (location / other.name / "spec.yaml").write_text(other.spec.replace(**{"agent.learning_rate": 0.5}).to_yaml())
    assert prepare(0) == runner.EXIT_SPEC  # a different learning setup under that name: refused, not retried
    monkeypatch.delenv(SWEEP_RESULTS_ENV)
    _spec, workdir = prepare(1)  # without a results location the trial trains in <workdir>/<trial>
    assert workdir == tmp_path / "w" / sweep.trial(1).name and "RLCLOUD_RESULTS" not in os.environ


def _role_pod(apiserver: FakeKubeApiServer, job_name: str, index: int, pod_name: str) -> None:
    """A finished pod of ``job_name`` (its template's labels, its completion index), with one log line."""
    job = apiserver.get_object("Job", job_name, "rl")
    assert job is not None
    labels = job["spec"]["template"]["metadata"]["labels"]
    meta = {"name": pod_name, "labels": labels, "annotations": {"batch.kubernetes.io/job-completion-index": str(index)}}
    apiserver.create_object("Pod", {"metadata": meta, "spec": {"containers": [{"name": "runner", "image": "x"}]}}, "rl")
    apiserver.update_status("Pod", pod_name, "rl", {"phase": "Succeeded"})
    apiserver.append_log("rl", pod_name, f"{labels['rlcloud.io/role']} {index} done\n".encode())


def test_following_the_logs_of_1000_env_servers_opens_the_learners_stream_only(
    backend: KubernetesBackend, apiserver: FakeKubeApiServer, tmp_path: Path
) -> None:
    backend.start(make_spec("distributed", 1000, name="wide"), str(tmp_path))
    jobs = {labels["rlcloud.io/role"]: job["metadata"]["name"] for job in apiserver.list_objects("Job", "rl")
            if (labels := job["metadata"]["labels"]).get("rlcloud.io/role")}  # fmt: skip
    _role_pod(apiserver, jobs["agent"], 0, "wide-agent-0-x")
    for i in range(1000):
        _role_pod(apiserver, jobs["env-server"], i, f"wide-env-server-{i}-x")
    for job in jobs.values():
        apiserver.update_status("Job", job, "rl", {"conditions": [{"type": "Complete", "status": "True"}]})

    def streams(**kwargs: Any) -> tuple[list[str], int]:
        lines, reqs = _requests(apiserver, lambda: list(backend.logs("wide", follow=True, **kwargs)))
        return lines, sum(r.endswith("/log") for r in reqs)

    assert streams() == (["agent-0 | agent 0 done"], 1)  # by default: the learner's log, one stream
    assert streams(roles=["env-server-7"]) == (["env-server-7 | env-server 7 done"], 1)
    lines, opened = streams(roles=["learner", "env-server"])  # on request: every pod's
    # the streams run side by side: lines arrive in no fixed order across pods
    expected = ["agent-0 | agent 0 done"] + [f"env-server-{i} | env-server {i} done" for i in range(1000)]
    assert opened == 1001 and sorted(lines) == sorted(expected)
    # without follow every role's log is read, as before
    assert len(list(backend.logs("wide"))) == 1001
