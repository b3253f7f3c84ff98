"""KubernetesBackend against the fake apiserver (real client), with the fake kubelet running a stand-in
runner so the lifecycle is real but fast."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from rlcloud.errors import BackendError, ConflictError, NotFoundError, SpecError, WaitTimeoutError
from rlcloud.k8s.backend import KubernetesBackend
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet
from tests.support.kubernetes import FAST_RETRY, kubelet_for, make_backend, make_spec, objects
from tests.support.waiting import eventually


@pytest.fixture
def backend(api_client: client.ApiClient) -> KubernetesBackend:
    return make_backend(api_client)


@pytest.fixture
def results(tmp_path: Path) -> str:
    return str(tmp_path / "results")


@pytest.fixture
def kubelet(apiserver: FakeKubeApiServer, tmp_path: Path) -> Iterator[FakeKubelet]:
    with kubelet_for(apiserver, tmp_path, STANDIN_EPISODES="3", STANDIN_DELAY="0.05") as k:
        yield k


# ---------------------------------------------------------------------------------------------- start


def test_start_creates_namespace_rbac_and_objects_once(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, results: str
) -> None:
    spec = make_spec("distributed", 3)
    backend.start(spec, results)
    assert apiserver.get_object("Namespace", "rl") is not None
    for kind in ("ServiceAccount", "Role", "RoleBinding"):
        assert apiserver.get_object(kind, "rlcloud-runner", "rl") is not None, kind
    created = objects(apiserver)
    assert created == [
        ("ConfigMap", "cartpole-spec"),
        ("Job", "cartpole-agent"),
        ("Job", "cartpole-env"),
        ("Service", "cartpole-env"),
    ]
    # start again, also from a fresh backend (another machine): nothing new, no error
    backend.start(spec, results)
    make_backend(backend.api_client).start(spec, results)
    assert objects(apiserver) == created
    # SA + Role + RoleBinding + 4 objects, then 4 creates answered 409 per repeated start
    assert apiserver.request_count("POST", r"/namespaces/rl/") == 3 + 4 + 4 + 4
    assert apiserver.request_count("POST", r"^/api/v1/namespaces$") == 1
    with pytest.raises(ConflictError, match="different configuration"):
        backend.start(make_spec("distributed", 4), results)


def test_injected_500s_are_retried_without_duplicates(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, results: str
) -> None:
    apiserver.inject_fault("POST", r"/jobs$", status=500, count=2)
    lost = apiserver.inject_fault("POST", r"/configmaps$", status=500, after=True)  # created, reply lost
    apiserver.inject_fault("GET", r"/services/", status=503)
    apiserver.inject_fault("POST", r"/services$", status=500, after=True)
    backend.start(make_spec("distributed", 2), results)
    assert lost.hits == 1
    assert objects(apiserver) == [
        ("ConfigMap", "cartpole-spec"),
        ("Job", "cartpole-agent"),
        ("Job", "cartpole-env"),
        ("Service", "cartpole-env"),
    ]


def test_persistent_500_and_422_become_rlcloud_errors(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, results: str
) -> None:
    apiserver.inject_fault("POST", r"/jobs$", status=500, count=100)
    with pytest.raises(BackendError, match="create Job"):
        backend.start(make_spec(), results)
    apiserver._faults.clear()
    apiserver.inject_fault("POST", r"/jobs$", status=422, message='Job.batch "x" is invalid: spec.template: bad')
    with pytest.raises(SpecError, match="is invalid"):
        backend.start(make_spec(), results)


def test_no_permission_for_namespace_is_auth_error(apiserver: FakeKubeApiServer, api_client: client.ApiClient) -> None:
    apiserver.inject_fault("POST", r"^/api/v1/namespaces$", status=403, reason="Forbidden", message="forbidden: no")
    from rlcloud.errors import AuthError

    with pytest.raises(AuthError, match="permission"):
        make_backend(api_client, "locked").start(make_spec(), "/tmp/x")


# ---------------------------------------------------------------------------------------------- lifecycle


@pytest.mark.processes
def test_single_runs_to_success_with_status_logs_attach_list(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, kubelet: FakeKubelet, results: str
) -> None:
    spec = make_spec()
    backend.start(spec, results)
    status = backend.wait("cartpole", timeout=30)
    assert status.state == "succeeded"
    # wait() blocks on a watch of the Jobs between status reads instead of polling
    assert any(r.query.get("watch") == ["true"] and r.path.endswith("/jobs") for r in apiserver.requests)
    assert [(r.role, r.index, r.state, r.exit_code) for r in status.roles] == [("single", 0, "succeeded", 0)]
    assert status.progress["state"] == "succeeded" and status.progress["episode"] == 3
    lines = list(backend.logs("cartpole"))
    assert lines[0] == "single-0 | single: training with 0 env servers"
    assert "single-0 | episode 2 return 12" in lines and lines[-1] == "single-0 | done"
    assert backend.list() == ["cartpole"]
    attached, root = make_backend(backend.api_client).attach("cartpole")
    assert attached == spec and root == results
    # results went to <root>/<name> as the contract says
    assert (Path(results) / "cartpole" / "progress.json").exists()


@pytest.mark.processes
def test_distributed_follow_logs_waits_for_pods_and_all_roles_finish(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path, results: str
) -> None:
    backend.start(make_spec("distributed", 3), results)
    # logs(follow=True) called while nothing runs yet: it waits for the pods, then streams every role asked for
    with kubelet_for(apiserver, tmp_path, STANDIN_EPISODES="4", STANDIN_DELAY="0.1"):
        lines = list(backend.logs("cartpole", follow=True, roles=["learner", "env-server"]))
        status = backend.wait("cartpole", timeout=30)
    assert "agent-0 | agent: training with 3 env servers" in lines
    for i in range(3):
        assert f"env-server-{i} | env server {i}: agent done" in lines
    assert lines.index("agent-0 | episode 0 return 10") < lines.index("agent-0 | episode 3 return 13")
    assert status.state == "succeeded"
    assert {(r.role, r.state) for r in status.roles} == {("agent", "succeeded"), ("env-server", "succeeded")}
    assert len(status.roles) == 4


@pytest.mark.processes
def test_pause_checkpoints_then_resume_continues(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path, results: str
) -> None:
    backend.start(make_spec("distributed", 2), results)
    with kubelet_for(apiserver, tmp_path, STANDIN_EPISODES="40", STANDIN_DELAY="0.1") as kubelet:
        eventually(lambda: backend.status("cartpole").progress.get("episode", 0) >= 3, what="training")
        backend.pause("cartpole")
        latest = (Path(results) / "cartpole" / "checkpoints" / "LATEST").read_text()
        assert latest.startswith("ckpt-")
        status = backend.status("cartpole")
        assert status.state == "paused" and {r.state for r in status.roles} == {"suspended"}
        assert not kubelet.running()
        backend.resume("cartpole")
        final = backend.wait("cartpole", timeout=60)
    assert final.state == "succeeded"
    agent_logs = [line for line in backend.logs("cartpole") if line.startswith("agent-0")]
    assert f"agent-0 | resumed from {latest}" in agent_logs
    # the learner pod was removed by the suspension, not counted as a failure
    assert all(r.restarts == 0 for r in final.roles if r.role == "agent")


@pytest.mark.processes
def test_stop_deletes_everything_idempotently(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path, results: str
) -> None:
    backend.start(make_spec("distributed", 2), results)
    with kubelet_for(apiserver, tmp_path, STANDIN_EPISODES="400", STANDIN_DELAY="0.1") as kubelet:
        eventually(lambda: len(kubelet.running()) == 3, what="3 pods running")
        backend.stop("cartpole")
        assert objects(apiserver) == [] and apiserver.list_objects("Pod", "rl") == []
        eventually(lambda: not kubelet.running(), what="processes gone")
    backend.stop("cartpole")
    backend.stop("never-existed")
    with pytest.raises(NotFoundError, match="no experiment 'cartpole'"):
        backend.status("cartpole")
    with pytest.raises(NotFoundError):
        backend.attach("cartpole")
    assert backend.list() == []


@pytest.mark.processes
def test_spec_error_exit_fails_fast(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path, results: str
) -> None:
    backend.start(make_spec(), results)
    with kubelet_for(apiserver, tmp_path, STANDIN_EXIT="2"):
        status = backend.wait("cartpole", timeout=30)
    assert status.state == "failed" and "exit code 2" in (status.message or "")
    assert len(apiserver.list_objects("Pod", "rl")) == 1  # not retried
    assert status.roles[0].exit_code == 2


@pytest.mark.processes
def test_crash_is_retried_and_counted(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path, results: str
) -> None:
    backend.start(make_spec(), results)
    with kubelet_for(apiserver, tmp_path, STANDIN_EPISODES="30", STANDIN_DELAY="0.05") as kubelet:
        (pod,) = eventually(kubelet.running, what="pod running")
        kubelet.kill(pod)
        status = backend.wait("cartpole", timeout=30)
    assert status.state == "succeeded" and status.roles[0].restarts == 1


@pytest.mark.processes
def test_preemption_does_not_spend_the_budget(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path, results: str
) -> None:
    backend.start(make_spec(), results)
    with kubelet_for(apiserver, tmp_path, STANDIN_EPISODES="80", STANDIN_DELAY="0.05") as kubelet:
        for _ in range(6):  # more preemptions than backoffLimit (4)
            (pod,) = eventually(kubelet.running, what="pod running")
            log = kubelet.workdir / "rl" / pod / "container.log"
            eventually(lambda log=log: "episode" in log.read_text(), what="training")
            kubelet.preempt(pod)
            eventually(lambda p=pod: p not in kubelet.running(), what="pod gone")
        status = backend.wait("cartpole", timeout=60)
    assert status.state == "succeeded"


def test_wait_times_out(backend: KubernetesBackend, results: str) -> None:
    backend.start(make_spec(), results)  # no kubelet: stays pending
    with pytest.raises(WaitTimeoutError, match="still pending"):
        backend.wait("cartpole", timeout=0.3)


@pytest.mark.processes
def test_install_credentials_mounts_the_key_and_never_shows_it(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, results: str, tmp_path: Path
) -> None:
    key = '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----TOPSECRET"}'
    assert backend.install_credentials(key) == "rlcloud-gcp-key"
    backend.install_credentials(key.replace("TOPSECRET", "ROTATED"))  # replaced, not duplicated
    backend.start(make_spec(), results)
    with kubelet_for(apiserver, tmp_path, STANDIN_EPISODES="1") as kubelet:
        status = backend.wait("cartpole", timeout=30)
        (pod,) = apiserver.list_objects("Pod", "rl")
        mounted = kubelet.workdir / "rl" / pod["metadata"]["name"] / "volumes" / "gcp-credentials" / "key.json"
        assert "ROTATED" in mounted.read_text() and oct(mounted.stat().st_mode & 0o777) == "0o400"
    assert status.state == "succeeded"
    for kind in ("Job", "ConfigMap", "Pod"):
        assert "PRIVATE KEY" not in repr(apiserver.list_objects(kind, "rl")), kind
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["GOOGLE_APPLICATION_CREDENTIALS"] == "/var/run/secrets/rlcloud/gcp/key.json"
    assert "PRIVATE KEY" not in "\n".join(backend.logs("cartpole"))


def test_local_results_directory_is_refused_on_a_cluster(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient
) -> None:
    backend = KubernetesBackend(api_client, namespace="rl", retry=FAST_RETRY)
    with pytest.raises(SpecError) as err:
        backend.start(make_spec(), "./rlcloud-results")
    assert err.value.fields == ["results"] and "gs://" in str(err.value)
    assert apiserver.request_count("POST") == 0


def test_rbac_refused_is_not_fatal(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, results: str, caplog: pytest.LogCaptureFixture
) -> None:
    apiserver.inject_fault(
        "POST", r"/roles$", status=403, reason="Forbidden", message="attempt to grant extra privileges"
    )
    with caplog.at_level("WARNING", logger="rlcloud.k8s.backend"):
        backend.start(make_spec(), results)
    assert "could not create Role rlcloud-runner" in caplog.text
    assert apiserver.get_object("ServiceAccount", "rlcloud-runner", "rl") is not None
    assert ("Job", "cartpole-single") in objects(apiserver)


def test_start_waits_for_a_previous_incarnation_being_deleted(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, results: str
) -> None:
    backend.start(make_spec(), results)
    backend.stop("cartpole")
    backend.start(make_spec(), results)  # after a stop: everything again
    # a foreground deletion still in progress: the old Job is marked, not gone yet
    apiserver.patch_object("Job", "cartpole-single", "rl", {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})
    old_uid = apiserver.get_object("Job", "cartpole-single", "rl")["metadata"]["uid"]
    timer = threading.Timer(0.3, apiserver.delete_object, args=("Job", "cartpole-single", "rl"))
    timer.start()
    try:
        backend.start(make_spec(), results)
    finally:
        timer.join()
    job = apiserver.get_object("Job", "cartpole-single", "rl")
    assert job is not None and job["metadata"]["uid"] != old_uid and "deletionTimestamp" not in job["metadata"]


@pytest.mark.processes
def test_env_server_out_of_retries_is_failed_while_the_agent_runs(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path, results: str
) -> None:
    backend.start(make_spec("distributed", 2), results)
    with kubelet_for(apiserver, tmp_path, STANDIN_EPISODES="400", STANDIN_DELAY="0.1") as kubelet:
        for _ in range(4):  # backoffLimitPerIndex is 3: the 4th failure is the last
            pod = eventually(
                lambda: next((p for p in kubelet.running() if p.startswith("cartpole-env-1-")), None), what="env 1"
            )
            kubelet.kill(pod)
            eventually(lambda p=pod: p not in kubelet.running(), what="killed")

        def env_1_failed() -> bool:
            roles = {(r.role, r.index): r for r in backend.status("cartpole").roles}
            return roles[("env-server", 1)].state == "failed"

        eventually(env_1_failed, what="index 1 failed")
        status = backend.status("cartpole")
        backend.stop("cartpole")
    env_1 = next(r for r in status.roles if r.role == "env-server" and r.index == 1)
    assert env_1.exit_code == 137 and env_1.restarts == 3 and "not retried again" in (env_1.reason or "")
    assert status.state == "running"  # the agent goes on with the other env server


@pytest.mark.processes
def test_a_failed_agent_releases_its_env_servers(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path, results: str
) -> None:
    backend.start(make_spec("distributed", 2), results)
    # the agent crashes with no retry left; its env servers would wait for it for an hour
    apiserver.patch_object("Job", "cartpole-agent", "rl", {"spec": {"backoffLimit": 0}})
    with kubelet_for(apiserver, tmp_path, STANDIN_EPISODES="500", STANDIN_DELAY="0.1") as kubelet:
        eventually(lambda: len(kubelet.running("rlcloud.io/role=env-server")) == 2, what="env servers up")
        (agent,) = eventually(lambda: kubelet.running("rlcloud.io/role=agent"), what="agent up")
        kubelet.kill(agent)
        status = backend.wait("cartpole", timeout=30)
        assert status.state == "failed"
        eventually(lambda: not kubelet.running(), what="env servers stopped")
    assert apiserver.get_object("Job", "cartpole-env", "rl")["spec"]["suspend"] is True


@pytest.mark.processes
def test_a_hung_learner_shows_as_stalled_not_running(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path, results: str
) -> None:
    """The learner's pod runs on but its heartbeat stops (issue 30): within stall_timeout plus a heartbeat the
    status, its display and -o json say "stalled" (the pod still reads running), and a stop still checkpoints."""
    from rlcloud.display import display_state

    backend.start(make_spec("single"), results)
    env = {"STANDIN_EPISODES": "40", "STANDIN_DELAY": "0.05", "STANDIN_HANG_AFTER": "2", "STANDIN_STALL_TIMEOUT": "2"}
    with kubelet_for(apiserver, tmp_path, **env):
        eventually(lambda: backend.status("cartpole").stalled_for is not None, timeout=60, what="a stall")
        status = backend.status("cartpole")
        assert status.state == "running" and [r.state for r in status.roles] == ["running"]
        assert display_state(status).startswith("stalled (") and status.to_dict()["state"] == "stalled"
        assert status.progress["episode"] == 2
        backend.stop("cartpole")
    assert (Path(results) / "cartpole" / "checkpoints" / "LATEST").read_text() == "ckpt-2"
