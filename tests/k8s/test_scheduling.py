"""Where an experiment's pods land on an rlcloud GKE GPU cluster, scheduled by the fake kubelet's scheduler
(requests against node capacity, the GPU pool's taint, node affinity): the learner on the GPU node, the env
servers on the CPU pool, and what does not fit Pending with the scheduler's reason, so the cluster
autoscaler adds a node for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from rlcloud.k8s.backend import KubernetesBackend
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet, gke_cpu_node, gke_gpu_node
from tests.support.kubernetes import FAST_RETRY, make_spec, standin
from tests.support.waiting import eventually

ENV_SERVERS = 9  # 7 of them fit one e2-standard-4 node at the default 500m each


def _pods(apiserver: FakeKubeApiServer, role: str) -> list[dict[str, Any]]:
    return apiserver.list_objects("Pod", "rl", f"rlcloud.io/role={role}")


def _unschedulable(pod: dict[str, Any]) -> str | None:
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond["type"] == "PodScheduled" and cond["status"] == "False":
            return str(cond["message"])
    return None


@pytest.mark.processes
def test_env_servers_request_cpu_stay_off_the_gpu_node_and_wait_for_the_autoscaler(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    backend = KubernetesBackend(
        api_client,
        namespace="rl",
        image="rlcloud-gpu:test",
        env_server_image="rlcloud:test",
        gpu_type="nvidia-tesla-t4",
        retry=FAST_RETRY,
        local_results=True,
    )
    # the GPU node first: a pod that may go anywhere lands on the first node that fits
    gpu_node, cpu_node = gke_gpu_node(), gke_cpu_node()
    backend.start(make_spec("distributed", ENV_SERVERS), str(tmp_path / "results"))
    env = {"STANDIN_EPISODES": "1000", "STANDIN_DELAY": "1"}
    with FakeKubelet(
        apiserver, tmp_path / "pods", nodes=[gpu_node, cpu_node], argv_rewrite=standin, extra_env=env, max_grace=5
    ) as kubelet:
        (agent,) = eventually(lambda: [p for p in _pods(apiserver, "agent") if p["spec"].get("nodeName")], what="agent")
        assert agent["spec"]["nodeName"] == gpu_node.name

        def settled() -> list[dict[str, Any]] | None:
            pods = _pods(apiserver, "env-server")
            done = len(pods) == ENV_SERVERS and all(p["spec"].get("nodeName") or _unschedulable(p) for p in pods)
            return pods if done else None

        pods = eventually(settled, what="every env server bound or unschedulable")
        # BestEffort env servers that tolerated the GPU taint all went to the (Spot) GPU node and never waited
        assert {p["spec"].get("nodeName") for p in pods} - {None} == {cpu_node.name}
        assert all(p["status"]["qosClass"] == "Burstable" for p in pods)
        assert all(p["spec"]["containers"][0]["image"] == "rlcloud:test" for p in pods)
        waiting = [p for p in pods if not p["spec"].get("nodeName")]
        assert len(waiting) == ENV_SERVERS - 7
        assert _unschedulable(waiting[0]) == (
            "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {nvidia.com/gpu: present}. "
            "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
            "1 Preemption is not helpful for scheduling."
        )
        # what the user sees: why the env servers wait
        reason = eventually(
            lambda: next(
                (r.reason for r in backend.status("cartpole").roles if "not enough CPU" in (r.reason or "")), None
            ),
            what="a pending env server's reason in the status",
        )
        assert "Insufficient cpu" in reason
        # the cluster autoscaler adds a CPU node: the rest are scheduled there, still off the GPU node
        extra = gke_cpu_node("gke-rl-default-pool-1")
        kubelet.add_node(extra)
        eventually(lambda: all(p["spec"].get("nodeName") for p in _pods(apiserver, "env-server")), what="all bound")
        bound = {p["spec"]["nodeName"] for p in _pods(apiserver, "env-server")}
        assert bound == {cpu_node.name, extra.name}


def test_a_gpu_clusters_env_servers_get_the_cpu_image_of_rlcloud_yaml(
    api_client: client.ApiClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlcloud import Cluster

    monkeypatch.chdir(tmp_path)
    Path("rlcloud.yaml").write_text("image: repo/runner-cpu:1\ngpu_image: repo/runner-gpu:1\n")
    backend = Cluster.kubernetes(api_client=api_client, gpu_type="nvidia-l4")._make_backend()
    assert isinstance(backend, KubernetesBackend)
    assert (backend.image, backend.env_server_image) == ("repo/runner-gpu:1", "repo/runner-cpu:1")
    # an image given to the cluster is for every pod (it may hold the user's environments)
    backend = Cluster.kubernetes(api_client=api_client, gpu_type="nvidia-l4", image="mine:1")._make_backend()
    assert isinstance(backend, KubernetesBackend)
    assert (backend.image, backend.env_server_image) == ("mine:1", None)
