"""Runner pods meet the Pod Security Standard "restricted": a namespace that enforces it (the fake apiserver's
PodSecurity admission, as the real one) admits every run mode's and a sweep's pods, and they run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client

from rlcloud.k8s.backend import KubernetesBackend
from rlcloud.k8s.builders import build_workloads, to_dict
from rlcloud.k8s.sweep_builders import build_sweep_workloads
from tests.fakes.kube_apiserver import POD_SECURITY_ENFORCE, FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet
from tests.support.kubernetes import FAST_RETRY, make_spec, make_sweep, standin
from tests.support.waiting import eventually


def _restricted(apiserver: FakeKubeApiServer, name: str = "locked") -> str:
    apiserver.create_object("Namespace", {"metadata": {"name": name, "labels": {POD_SECURITY_ENFORCE: "restricted"}}})
    return name


def _templates() -> list[dict[str, Any]]:
    objs = [
        *build_workloads(make_spec(), image="i:1", namespace="locked"),
        *build_workloads(make_spec("distributed", 2), image="i:1", namespace="locked", gpu_type="nvidia-l4"),
        *build_sweep_workloads(make_sweep(2), image="i:1", namespace="locked", credentials_secret="key"),
    ]
    return [to_dict(o)["spec"]["template"] for o in objs if o.kind == "Job"]


@pytest.mark.parametrize("version", ["1.29.0", "1.33.0"])
def test_every_pod_template_is_admitted_where_restricted_is_enforced(
    apiserver: FakeKubeApiServer, version: str
) -> None:
    namespace = _restricted(apiserver)
    for i, template in enumerate(_templates()):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"}, "spec": template["spec"]}
        kubernetes_validate.validate(pod, version, strict=True)
        assert template["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        apiserver.create_object("Pod", pod, namespace)


def test_the_fake_refuses_what_restricted_refuses(apiserver: FakeKubeApiServer) -> None:
    from tests.fakes.kube_apiserver import ApiError

    namespace = _restricted(apiserver)
    spec = _templates()[0]["spec"]
    del spec["securityContext"]["seccompProfile"]
    with pytest.raises(ApiError) as info:
        apiserver.create_object("Pod", {"metadata": {"name": "x"}, "spec": spec}, namespace)
    assert info.value.code == 403
    assert info.value.message == (
        'pods "x" is forbidden: violates PodSecurity "restricted:latest": seccompProfile (pod or container '
        '"runner" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
    )
    spec["securityContext"]["seccompProfile"] = {"type": "Unconfined"}
    spec["containers"][0]["securityContext"] = {"privileged": True}
    with pytest.raises(ApiError, match=r"privileged \(container \"runner\".*allowPrivilegeEscalation != false"):
        apiserver.create_object("Pod", {"metadata": {"name": "y"}, "spec": spec}, namespace)
    apiserver.create_object("Pod", {"metadata": {"name": "z"}, "spec": spec}, "default")  # not enforced there


@pytest.mark.processes
def test_an_experiment_runs_in_a_restricted_namespace(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    namespace = _restricted(apiserver)
    backend = KubernetesBackend(
        api_client, namespace=namespace, image="rlcloud:test", retry=FAST_RETRY, local_results=True, poll_interval=0.1
    )
    backend.start(make_spec(), str(tmp_path / "results"))
    env = {"STANDIN_EPISODES": "2", "STANDIN_DELAY": "0.05"}
    with FakeKubelet(apiserver, tmp_path / "pods", argv_rewrite=standin, extra_env=env, max_grace=5):
        # without the seccomp profile the Job controller's pod creation is refused (FailedCreate)
        status = eventually(
            lambda: (s := backend.status("cartpole")).finished and s,
            timeout=60,
            what="the experiment to finish",
        )
    assert status.state == "succeeded", status
    assert not [e for e in apiserver.list_objects("Event", namespace) if e["reason"] == "FailedCreate"]
