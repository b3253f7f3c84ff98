"""Issue 42: a sweep's trials_per_gpu in the built manifests and on the fake kubelet's GPU-sharing node."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from kubernetes.client import ApiClient

from rlcloud.errors import SpecError
from rlcloud.k8s.sweep_builders import build_sweep_workloads
from rlcloud.runenv import GPU_MEMORY_MB, RunnerEnv
from rlcloud.specs.cluster import shared_gpu_memory_mb
from tests.fakes.kubelet import gke_cpu_node, gke_gpu_node, pod_requests, schedule
from tests.support.kubernetes import make_sweep

T4 = "nvidia-tesla-t4"


def trial_pod(trials_per_gpu: int, **extra: Any) -> dict[str, Any]:
    sweep = make_sweep(2, max_parallel=4, trials_per_gpu=trials_per_gpu, **extra)
    _, job = build_sweep_workloads(sweep, image="i:1", namespace="rl", gpu_type=T4)
    template: dict[str, Any] = ApiClient().sanitize_for_serialization(job.spec.template)
    return {"metadata": template["metadata"], "spec": template["spec"]}


def test_each_trial_asks_for_one_shared_gpu_and_a_bounded_share_of_its_memory() -> None:
    pod = trial_pod(4)
    (container,) = pod["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    env = {e["name"]: e.get("value") for e in container["env"]}
    # a T4 has 16 GB: four trials get under a quarter each, after the driver's share and their CUDA contexts
    assert env[GPU_MEMORY_MB] == str(shared_gpu_memory_mb(T4, 4))
    assert 3000 < int(env[GPU_MEMORY_MB]) < 4096
    assert RunnerEnv.from_env({GPU_MEMORY_MB: env[GPU_MEMORY_MB]}).gpu_memory_mb == int(env[GPU_MEMORY_MB])
    # one trial per GPU: no bound, TensorFlow's default
    plain = trial_pod(1)["spec"]["containers"][0]
    assert GPU_MEMORY_MB not in {e["name"] for e in plain["env"]}


def test_four_trials_share_one_gpu_on_the_fake_kubelet() -> None:
    # four trials on an n1-standard-4 GPU node: each asks for under a quarter of its CPUs
    pod = trial_pod(4, experiment={"resources": {"learner": {"cpu": "900m", "memory": "2Gi"}}})
    shared = gke_gpu_node(shared_clients=4)  # one T4, time-shared by up to four containers
    nodes = [shared, gke_cpu_node()]
    used: dict[str, dict[str, Decimal]] = {}
    for _ in range(4):
        node, message = schedule(pod, nodes, used)
        assert node == shared.name, message
        bound = used.setdefault(node, {"pods": Decimal(0)})
        bound["pods"] += 1
        for resource, amount in pod_requests(pod).items():
            bound[resource] = bound.get(resource, Decimal(0)) + amount
    # a fifth trial waits for a free share, as kube-scheduler says
    node, message = schedule(pod, nodes, used)
    assert node is None and "Insufficient nvidia.com/gpu" in message
    # without sharing the same node holds one trial
    alone = [gke_gpu_node(), gke_cpu_node()]
    taken = {alone[0].name: {"pods": Decimal(1), "nvidia.com/gpu": Decimal(1)}}
    assert schedule(pod, alone, taken)[0] is None


@pytest.mark.parametrize(
    ("extra", "gpu_type", "wrong"),
    [
        ({}, None, "no GPU cluster"),
        ({"experiment": {"resources": {"learner": {"gpus": 2}}}}, T4, "ask for 2 GPUs"),
    ],
)
def test_trials_per_gpu_needs_one_gpu_per_trial_on_a_gpu_cluster(
    extra: dict[str, Any], gpu_type: str | None, wrong: str
) -> None:
    sweep = make_sweep(2, max_parallel=4, trials_per_gpu=2, **extra)
    with pytest.raises(SpecError, match=wrong):
        build_sweep_workloads(sweep, image="i:1", namespace="rl", gpu_type=gpu_type)


def test_a_gke_cluster_refuses_more_trials_per_gpu_than_it_shares_among() -> None:
    from rlcloud import Cluster
    from rlcloud.specs import ClusterSpec

    shared = Cluster.gke(ClusterSpec(name="rl", gpu_type="t4", gpu_sharing={"clients_per_gpu": 4}), project="p-test-1")
    shared.check_trials_per_gpu(4)  # fits
    with pytest.raises(SpecError, match="at most 4"):
        shared.check_trials_per_gpu(8)
    plain = Cluster.gke(ClusterSpec(name="rl", gpu_type="t4"), project="p-test-1")
    plain.check_trials_per_gpu(1)
    with pytest.raises(SpecError, match="has no gpu_sharing"):
        plain.check_trials_per_gpu(2)
    assert ("GPU sharing", "time-sharing, 4 per GPU") in shared._rows()
    mps = ClusterSpec(name="rl", gpu_type="t4", gpu_sharing={"strategy": "mps", "clients_per_gpu": 4})
    with pytest.raises(SpecError, match="hostIPC"):
        Cluster.gke(mps, project="p-test-1").check_trials_per_gpu(2)
