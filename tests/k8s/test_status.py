"""status(): why a role is Pending, in one line, from pod conditions, container states and events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from rlcloud.errors import AuthError, NotFoundError, SpecError
from rlcloud.k8s.backend import KubernetesBackend
from rlcloud.k8s.client import api_client_from_kubeconfig
from rlcloud.k8s.status import why_pending
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet
from tests.support.kubernetes import FAST_RETRY, make_spec, standin, write_kubeconfig
from tests.support.waiting import eventually


@pytest.fixture
def backend(api_client: client.ApiClient) -> KubernetesBackend:
    return KubernetesBackend(
        api_client,
        namespace="rl",
        image="rlcloud:test",
        gpu_type="nvidia-tesla-t4",
        retry=FAST_RETRY,
        local_results=True,
    )


def learner_pod(apiserver: FakeKubeApiServer) -> dict[str, Any]:
    return eventually(lambda: apiserver.list_objects("Pod", "rl", "rlcloud.io/role=single"), what="pod")[0]


@pytest.mark.processes
def test_insufficient_gpu_with_autoscaler(
    apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path
) -> None:
    message = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available."

    def no_gpu(pod: dict[str, Any]) -> str | None:
        limits = pod["spec"]["containers"][0].get("resources", {}).get("limits", {})
        return message if "nvidia.com/gpu" in limits else None

    backend.start(make_spec(), str(tmp_path / "results"))
    with FakeKubelet(apiserver, tmp_path / "pods", unschedulable=no_gpu, argv_rewrite=standin):
        pod = learner_pod(apiserver)
        eventually(lambda: apiserver.get_object("Pod", pod["metadata"]["name"], "rl")["status"].get("conditions"))
        apiserver.record_event(
            "rl", pod, "TriggeredScaleUp", "pod triggered scale-up: [{gpu-pool 0->1 (max: 2)}]", "Normal"
        )
        status = backend.status("cartpole")
    assert status.state == "pending"
    (role,) = status.roles
    assert role.state == "pending"
    assert role.reason is not None and role.reason.startswith("waiting for a GPU: no node has a free nvidia.com/gpu")
    assert role.reason.endswith("the cluster autoscaler is adding a node")
    assert "\n" not in role.reason and len(role.reason) <= 240
    assert status.message == f"single-0: {role.reason}"


@pytest.mark.processes
def test_untolerated_taint(apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path) -> None:
    taint = "0/2 nodes are available: 2 node(s) had untolerated taint {dedicated: infra}."
    backend.start(make_spec(), str(tmp_path / "results"))
    with FakeKubelet(apiserver, tmp_path / "pods", unschedulable=lambda pod: taint):
        learner_pod(apiserver)
        reason = eventually(
            lambda: (r := backend.status("cartpole").roles[0].reason) and "taint" in r and r, what="the taint reason"
        )
    assert reason.startswith("no node tolerates the pod: untolerated taint")


def test_image_pull_error(apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path) -> None:
    backend.start(make_spec(), str(tmp_path / "results"))
    # no kubelet: play the pod as a kubelet that cannot pull the image would report it
    job = apiserver.get_object("Job", "cartpole-single", "rl")
    pod = apiserver.create_object(
        "Pod",
        {
            "metadata": {
                "name": "cartpole-single-abcde",
                "labels": job["spec"]["template"]["metadata"]["labels"],
                "ownerReferences": [
                    {"apiVersion": "batch/v1", "kind": "Job", "name": "x", "uid": job["metadata"]["uid"]}
                ],
            },
            "spec": {**job["spec"]["template"]["spec"], "nodeName": "n1"},
        },
        "rl",
    )
    apiserver.update_status(
        "Pod",
        pod["metadata"]["name"],
        "rl",
        {
            "phase": "Pending",
            "containerStatuses": [
                {
                    "name": "runner",
                    "ready": False,
                    "restartCount": 0,
                    "image": "rlcloud:test",
                    "imageID": "",
                    "state": {
                        "waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "rlcloud:test"'}
                    },
                }
            ],
        },
    )
    (role,) = backend.status("cartpole").roles
    assert role.reason == 'cannot pull image rlcloud:test (ImagePullBackOff): Back-off pulling image "rlcloud:test"'


def test_quota_refuses_pod_creation(apiserver: FakeKubeApiServer, backend: KubernetesBackend, tmp_path: Path) -> None:
    backend.start(make_spec(), str(tmp_path / "results"))
    job = apiserver.get_object("Job", "cartpole-single", "rl")
    apiserver.record_event(
        "rl",
        job,
        "FailedCreate",
        'Error creating: pods "cartpole-single-x" is forbidden: exceeded quota: gpu-quota, requested: '
        "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4",
    )
    status = backend.status("cartpole")
    assert status.roles[0].state == "pending"
    assert status.roles[0].reason is not None and status.roles[0].reason.startswith("quota exceeded: Error creating")


def test_unknown_experiment_lists_the_known_ones(backend: KubernetesBackend, tmp_path: Path) -> None:
    backend.start(make_spec(name="known"), str(tmp_path))
    with pytest.raises(NotFoundError, match="experiments there: known"):
        backend.status("unknown")
    with pytest.raises(NotFoundError):
        list(backend.logs("unknown"))


# ------------------------------------------------------------------------------------ kubeconfig client


def test_api_client_from_kubeconfig_leaves_global_default_alone(tmp_path: Path) -> None:
    before = client.Configuration.get_default_copy().host
    with FakeKubeApiServer(token_validator=lambda t: t == "t0k3n") as server:
        kubeconfig = write_kubeconfig(tmp_path / "config", server.url)
        api = api_client_from_kubeconfig(kubeconfig, context="two")
        try:
            assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"
        finally:
            api.close()
    assert client.Configuration.get_default_copy().host == before


def test_api_client_errors(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no kubeconfig"):
        api_client_from_kubeconfig(tmp_path / "missing")
    kubeconfig = write_kubeconfig(tmp_path / "config", "http://127.0.0.1:9")
    with pytest.raises(SpecError) as err:
        api_client_from_kubeconfig(kubeconfig, context="three")
    assert err.value.fields == ["context"] and "one, two" in str(err.value)
    broken = tmp_path / "broken"
    broken.write_text("apiVersion: v1\nkind: Config\ncontexts: []\nclusters: []\nusers: []\n")
    with pytest.raises(AuthError):
        api_client_from_kubeconfig(broken)


def test_backend_over_tls_with_a_refreshing_bearer_token(tmp_path: Path) -> None:
    """The backend's requests carry the client's auth: TLS to a private CA, a token from the refresh hook
    (what GKE's kube client sets up), a new token once the old one expires."""
    import ssl

    import trustme

    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    valid = {"token-1"}
    issued: list[str] = []

    def refresh(configuration: client.Configuration) -> None:
        token = sorted(valid)[-1]
        issued.append(token)
        configuration.api_key["BearerToken"] = token

    with (
        FakeKubeApiServer(tls=server_ctx, token_validator=lambda t: t in valid) as server,
        ca.cert_pem.tempfile() as ca_file,
    ):
        config = client.Configuration(host=server.url)
        config.ssl_ca_cert = ca_file
        config.api_key = {"BearerToken": ""}
        config.api_key_prefix = {"BearerToken": "Bearer"}
        config.refresh_api_key_hook = refresh
        api = client.ApiClient(config)
        try:
            backend = KubernetesBackend(api, namespace="rl", retry=FAST_RETRY)
            backend.start(make_spec(), "gs://bucket/runs")
            valid.clear()
            valid.add("token-2")  # the first token expired
            assert KubernetesBackend(api, namespace="rl", retry=FAST_RETRY).list() == ["cartpole"]
        finally:
            api.close()
    assert issued[0] == "token-1" and issued[-1] == "token-2"


def _pod(conditions: list[dict[str, Any]] | None = None, waiting: dict[str, str] | None = None, node: str = "") -> Any:
    status: dict[str, Any] = {"phase": "Pending", "conditions": conditions or []}
    if waiting:
        status["containerStatuses"] = [{"name": "runner", "state": {"waiting": waiting}}]
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"image": "img:1"}], "nodeName": node}, "status": status}


def _event(reason: str, message: str) -> dict[str, Any]:
    return {"reason": reason, "message": message}


@pytest.mark.parametrize(
    ("pod", "events", "expected"),
    [
        (
            _pod(
                [{"type": "PodScheduled", "status": "False", "message": "0/2 nodes are available: 2 Insufficient cpu."}]
            ),
            [_event("NotTriggerScaleUp", "pod didn't trigger scale-up: 1 max node group size reached")],
            "not enough CPU or memory on any node (0/2 nodes are available: 2 Insufficient cpu.); the autoscaler "
            "cannot help: pod didn't trigger scale-up: 1 max node group size reached",
        ),
        (
            _pod(),
            [
                _event(
                    "FailedScheduling", "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
                )
            ],
            "no node matches the pod's node selector, e.g. the GPU type (0/3 nodes are available: 3 node(s) didn't "
            "match Pod's node affinity/selector.)",
        ),
        (
            _pod(waiting={"reason": "ErrImagePull", "message": "not found"}),
            [],
            "cannot pull image img:1 (ErrImagePull): not found",
        ),
        (
            _pod(waiting={"reason": "CreateContainerConfigError", "message": 'secret "k" not found'}),
            [],
            'cannot start the container (CreateContainerConfigError): secret "k" not found',
        ),
        (
            _pod(node="n1"),
            [_event("FailedMount", "MountVolume.SetUp failed")],
            "cannot mount a volume: MountVolume.SetUp failed",
        ),
        (_pod(node="n1"), [], "starting: pulling the image or mounting volumes"),
        (_pod(), [], "waiting to be scheduled"),
        (None, [_event("FailedCreate", "admission webhook denied")], "cannot create the pod: admission webhook denied"),
        (None, [], "waiting for the Job controller to create the pod"),
    ],
)
def test_why_pending_lines(pod: Any, events: list[dict[str, Any]], expected: str) -> None:
    assert why_pending(pod, events) == expected


def test_why_pending_is_one_bounded_line() -> None:
    message = "0/500 nodes are available:\n" + "x " * 500
    line = why_pending(_pod([{"type": "PodScheduled", "status": "False", "message": message}]), [])
    assert "\n" not in line and len(line) <= 240 and line.endswith("...")
