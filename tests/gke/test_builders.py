"""Pure builders: ClusterSpec -> Container API messages (no server involved)."""

from __future__ import annotations

from typing import Any

import pytest
from google.cloud import container_v1

from rlcloud.errors import SpecError
from rlcloud.gke.builders import (
    build_cluster,
    build_create_cluster_request,
    build_create_node_pool_request,
    cluster_labels,
)
from rlcloud.gke.plan import (
    DEFAULT_POOL,
    GPU_POOL,
    POOL_LABEL,
    SYSTEM_MACHINE_TYPE,
    SYSTEM_MAX_NODES,
    plan_pools,
)
from rlcloud.specs import ClusterSpec

Driver = container_v1.GPUDriverInstallationConfig.GPUDriverVersion


def pools(cluster: container_v1.Cluster) -> dict[str, container_v1.NodePool]:
    return {p.name: p for p in cluster.node_pools}


def test_cpu_only_cluster_is_one_pool_of_the_spec_machine() -> None:
    spec = ClusterSpec(name="cpu", machine_type="n1-standard-8", num_nodes=3, disk_size=50)
    cluster = build_cluster(spec, project="proj-123", now=1_000)
    assert list(pools(cluster)) == [DEFAULT_POOL]
    pool = pools(cluster)[DEFAULT_POOL]
    assert pool.config.machine_type == "n1-standard-8"
    assert pool.initial_node_count == 3
    assert pool.config.disk_size_gb == 50
    assert not pool.config.accelerators
    assert not pool.config.spot
    assert not pool.autoscaling.enabled
    assert pool.config.labels[POOL_LABEL] == "workers"
    assert cluster.workload_identity_config.workload_pool == "proj-123.svc.id.goog"
    assert pool.config.workload_metadata_config.mode == container_v1.WorkloadMetadataConfig.Mode.GKE_METADATA
    assert cluster.resource_labels["managed-by"] == "rlcloud"
    assert "expiry" not in cluster.resource_labels
    assert not cluster.initial_node_count  # node_pools and initial_node_count exclude each other


def test_gpu_cluster_has_a_small_cpu_pool_and_a_gpu_pool_with_managed_drivers() -> None:
    spec = ClusterSpec(name="p100", gpu_type="nvidia-tesla-p100", gpus_per_node=2, num_nodes=2)
    cluster = build_cluster(spec, project="proj-123", gpu_driver_version="LATEST")
    by_name = pools(cluster)
    assert list(by_name) == [DEFAULT_POOL, GPU_POOL]
    system, gpu = by_name[DEFAULT_POOL], by_name[GPU_POOL]
    assert system.config.machine_type == SYSTEM_MACHINE_TYPE
    assert system.initial_node_count == 1
    assert not system.config.accelerators and not system.config.spot
    assert system.config.labels[POOL_LABEL] == "system"
    # the CPU pool grows for env servers (GKE keeps them off the tainted GPU nodes), on demand
    assert system.autoscaling.enabled
    assert (system.autoscaling.min_node_count, system.autoscaling.max_node_count) == (1, SYSTEM_MAX_NODES)
    assert system.autoscaling.location_policy == container_v1.NodePoolAutoscaling.LocationPolicy.BALANCED
    assert not gpu.autoscaling.enabled  # the spec asked for none
    assert gpu.config.machine_type == "n1-standard-8"
    assert gpu.initial_node_count == 2
    (accelerator,) = gpu.config.accelerators
    assert accelerator.accelerator_type == "nvidia-tesla-p100"
    assert accelerator.accelerator_count == 2
    assert accelerator.gpu_driver_installation_config.gpu_driver_version == Driver.LATEST
    # set explicitly: GKE adds it by itself only to a GPU pool added to a running cluster
    assert [(t.key, t.value, t.effect) for t in gpu.config.taints] == [
        ("nvidia.com/gpu", "present", container_v1.NodeTaint.Effect.NO_SCHEDULE)
    ]
    assert not system.config.taints


def test_spot_autoscaling_and_labels_with_expiry() -> None:
    spec = ClusterSpec(
        name="t4",
        gpu_type="nvidia-tesla-t4",
        spot=True,
        num_nodes=1,
        autoscaling={"min_nodes": 0, "max_nodes": 4},
        labels={"team": "rl"},
        ttl="6h",
    )
    cluster = build_cluster(spec, project="proj-123", experiment="cartpole", now=1_700_000_000.5)
    gpu = pools(cluster)[GPU_POOL]
    assert gpu.config.spot
    assert gpu.autoscaling.enabled
    assert (gpu.autoscaling.min_node_count, gpu.autoscaling.max_node_count) == (0, 4)
    assert gpu.autoscaling.location_policy == container_v1.NodePoolAutoscaling.LocationPolicy.ANY
    assert gpu.config.accelerators[0].gpu_driver_installation_config.gpu_driver_version == Driver.DEFAULT
    assert dict(cluster.resource_labels) == {
        "team": "rl",
        "managed-by": "rlcloud",
        "experiment": "cartpole",
        "expiry": str(1_700_000_000 + 6 * 3600),
    }


def test_custom_machine_type_from_cpus_and_memory() -> None:
    spec = ClusterSpec(name="custom", cpus_per_node=6, memory_per_node=20)
    pool = pools(build_cluster(spec, project="proj-123"))[DEFAULT_POOL]
    assert pool.config.machine_type == "custom-6-20480"


def test_zonal_and_regional_parents() -> None:
    zonal = build_create_cluster_request(ClusterSpec(name="z", location="europe-west4-a"), project="proj-123")
    assert zonal.parent == "projects/proj-123/locations/europe-west4-a"
    regional = build_create_cluster_request(
        ClusterSpec(name="r", location="us-central1"), project="proj-123", node_locations=("us-central1-f",)
    )
    assert regional.parent == "projects/proj-123/locations/us-central1"
    assert list(regional.cluster.locations) == ["us-central1-f"]


def test_node_pool_request_can_pin_zones() -> None:
    spec = ClusterSpec(name="t4", gpu_type="nvidia-tesla-t4")
    request = build_create_node_pool_request(
        spec, project="p-12345", location="us-central1-a", pool_name=GPU_POOL, pool_locations=("us-central1-b",)
    )
    assert request.parent == "projects/p-12345/locations/us-central1-a/clusters/t4"
    assert list(request.node_pool.locations) == ["us-central1-b"]
    with pytest.raises(SpecError) as caught:
        build_create_node_pool_request(spec, project="p-12345", location="us-central1-a", pool_name="nope")
    assert caught.value.fields == ["pool_name"]


def test_bad_driver_version_names_the_field() -> None:
    with pytest.raises(SpecError) as caught:
        build_cluster(ClusterSpec(name="t4", gpu_type="nvidia-tesla-t4"), project="p-12345", gpu_driver_version="v9")
    assert caught.value.fields == ["gpu_driver_version"]
    assert "DEFAULT" in str(caught.value)


def test_user_labels_cannot_take_over_managed_by() -> None:
    labels = cluster_labels(ClusterSpec(name="x", labels={"managed-by": "someone"}))
    assert labels["managed-by"] == "rlcloud"


def test_plan_cpu_pool_of_a_gpu_cluster_autoscales_on_demand() -> None:
    assert 1 < SYSTEM_MAX_NODES <= 16
    system, gpu = plan_pools(ClusterSpec(name="t4", gpu_type="nvidia-tesla-t4", spot=True))
    assert (system.name, system.role, system.machine_type) == (DEFAULT_POOL, "system", SYSTEM_MACHINE_TYPE)
    assert (system.nodes_per_zone, system.min_nodes, system.max_nodes) == (1, 1, SYSTEM_MAX_NODES)
    assert not system.spot and gpu.spot  # env servers outlive the GPU nodes' preemptions
    assert (gpu.min_nodes, gpu.max_nodes) == (None, None)
    # without GPUs the one pool is the spec's, fixed unless the spec autoscales
    (only,) = plan_pools(ClusterSpec(name="cpu", machine_type="n1-standard-8"))
    assert (only.name, only.role, only.min_nodes, only.max_nodes) == (DEFAULT_POOL, "workers", None, None)


def test_re_created_cpu_pool_keeps_its_autoscaling() -> None:
    spec = ClusterSpec(name="t4", gpu_type="nvidia-tesla-t4")
    request = build_create_node_pool_request(spec, project="proj-123", location="us-central1-a", pool_name=DEFAULT_POOL)
    autoscaling = request.node_pool.autoscaling
    assert autoscaling.enabled
    assert (autoscaling.min_node_count, autoscaling.max_node_count) == (1, SYSTEM_MAX_NODES)


def test_hopper_and_newer_gpus_get_the_latest_driver_by_default() -> None:
    def driver(spec: ClusterSpec, **options: str) -> Any:
        gpu = pools(build_cluster(spec, project="proj-123", **options))[GPU_POOL]
        return gpu.config.accelerators[0].gpu_driver_installation_config.gpu_driver_version

    # TensorFlow's wheels carry only compute_90 PTX for Hopper: the node's driver JIT-compiles it
    assert driver(ClusterSpec(name="h", gpu_type="h100", spot=True)) == Driver.LATEST
    assert driver(ClusterSpec(name="h", gpu_type="h100-mega")) == Driver.LATEST
    assert driver(ClusterSpec(name="h", gpu_type="h200", reservation="r")) == Driver.LATEST
    assert driver(ClusterSpec(name="b", gpu_type="b200")) == Driver.LATEST
    assert driver(ClusterSpec(name="t", gpu_type="t4")) == Driver.DEFAULT
    assert driver(ClusterSpec(name="t", gpu_type="t4"), gpu_driver_version="LATEST") == Driver.LATEST
    assert driver(ClusterSpec(name="h", gpu_type="h100", spot=True), gpu_driver_version="DEFAULT") == Driver.DEFAULT


def test_a3_ultra_consumes_its_reservation_and_boots_from_hyperdisk() -> None:
    spec = ClusterSpec(name="h200", gpu_type="h200", reservation="projects/proj-123/reservations/h200-block")
    by_name = pools(build_cluster(spec, project="proj-123"))
    gpu, system = by_name[GPU_POOL], by_name[DEFAULT_POOL]
    affinity = gpu.config.reservation_affinity
    assert affinity.consume_reservation_type == container_v1.ReservationAffinity.Type.SPECIFIC_RESERVATION
    assert (affinity.key, list(affinity.values)) == (
        "compute.googleapis.com/reservation-name",
        ["projects/proj-123/reservations/h200-block"],
    )
    assert gpu.config.disk_type == "hyperdisk-balanced"
    assert gpu.config.accelerators[0].accelerator_count == 8
    assert not system.config.reservation_affinity.values and system.config.disk_type == ""
