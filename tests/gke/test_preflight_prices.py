"""Pre-flight GPU/machine checks and the hourly cost estimate (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from rlcloud.errors import SpecError
from rlcloud.gke.machines import machine_shape
from rlcloud.gke.plan import SYSTEM_MAX_NODES
from rlcloud.gke.preflight import check_cluster_spec, cluster_spec_warnings
from rlcloud.gke.prices import (
    CLUSTER_FEE_PER_HOUR,
    DISK_PER_GB_HOUR,
    GPU_PER_HOUR,
    MACHINE_PER_HOUR,
    PRICES_DATE,
    SPOT_FRACTION,
    estimate_hourly_cost,
)
from rlcloud.specs import ClusterSpec
from rlcloud.specs.cluster import GpuType


@pytest.mark.parametrize(
    ("gpu", "machine", "count"),
    [
        ("nvidia-tesla-t4", "n1-standard-8", 1),
        ("nvidia-tesla-t4", "n1-standard-32", 4),
        ("nvidia-tesla-p100", "n1-standard-16", 1),
        ("nvidia-tesla-v100", "n1-standard-8", 8),
        ("nvidia-tesla-p4", "custom-8-30720", 2),
        ("nvidia-l4", "g2-standard-8", 1),
        ("nvidia-l4", "g2-standard-48", 4),
        ("nvidia-tesla-a100", "a2-highgpu-2g", 2),
        ("nvidia-a100-80gb", "a2-ultragpu-1g", 1),
        ("nvidia-h100-80gb", "a3-highgpu-8g", 8),
        ("nvidia-h100-80gb", "a3-edgegpu-8g", 8),
        ("nvidia-rtx-pro-6000", "g4-standard-96", 2),
        ("nvidia-b200", "a4-highgpu-8g", 8),
    ],
)
def test_valid_gpu_machine_combinations_pass(gpu: str, machine: str, count: int) -> None:
    check_cluster_spec(ClusterSpec(name="ok", gpu_type=gpu, gpus_per_node=count, machine_type=machine))


# What each GPU type's default needs before Compute Engine sells it (cloud.google.com/compute/docs/
# accelerator-optimized-machines: a3-highgpu-1g/2g/4g are Spot or Flex-start only; A3 Ultra needs a reservation).
NEEDS = {GpuType.H100: ("spot", {"spot": True}), GpuType.H200: ("reservation", {"reservation": "h200-block"})}


@pytest.mark.parametrize("gpu", list(GpuType))
def test_every_gpu_type_alone_is_orderable_or_refused_naming_what_it_needs(gpu: GpuType) -> None:
    spec = ClusterSpec(name="ok", gpu_type=gpu.value)
    # the GPU count follows the default machine type (8 on a3-ultragpu-8g), never one that preflight refuses
    assert spec.gpus_per_node == (machine_shape(spec.effective_machine_type).fixed_gpus or ("", 1))[1]
    if gpu in NEEDS:
        field, settings = NEEDS[gpu]
        with pytest.raises(SpecError) as caught:
            check_cluster_spec(spec)
        assert caught.value.fields == [field]
        spec = ClusterSpec(name="ok", gpu_type=gpu.value, **settings)  # type: ignore[arg-type]
    check_cluster_spec(spec)


def test_gpus_per_node_follows_the_machine_type_named() -> None:
    assert ClusterSpec(name="a", gpu_type="a100", machine_type="a2-highgpu-4g").gpus_per_node == 4
    assert ClusterSpec(name="a", gpu_type="l4", machine_type="g2-standard-24").gpus_per_node == 2
    assert ClusterSpec(name="a", gpu_type="t4", machine_type="n1-standard-16").gpus_per_node == 1
    assert ClusterSpec(name="a", gpu_type="h100", machine_type="a3-highgpu-2g", gpus_per_node=1).gpus_per_node == 1


def test_newer_accelerators_are_accepted_with_a_warning() -> None:
    for gpu, machine in [("b200", "a4-highgpu-8g"), ("gb200", "a4x-highgpu-4g"), ("rtx-pro-6000", "g4-standard-48")]:
        spec = ClusterSpec(name="new", gpu_type=gpu)
        assert spec.effective_machine_type == machine
        check_cluster_spec(spec)
        (warning,) = cluster_spec_warnings(spec)
        assert "new to rlcloud" in warning
    assert "Arm" in cluster_spec_warnings(ClusterSpec(name="new", gpu_type="gb200"))[0]
    assert cluster_spec_warnings(ClusterSpec(name="old", gpu_type="t4")) == []
    # a shape of the right series that rlcloud's tables lack: GKE decides, rlcloud says it cannot vouch for it
    future = ClusterSpec(name="f", gpu_type="h100", machine_type="a3-futuregpu-8g", gpus_per_node=8)
    check_cluster_spec(future)
    assert "not in rlcloud's tables" in cluster_spec_warnings(future)[0]


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"gpu_type": "nvidia-tesla-t4", "machine_type": "e2-standard-8"}, "machine_type", "N1"),
        ({"gpu_type": "nvidia-tesla-t4", "machine_type": "g2-standard-8"}, "gpu_type", "nvidia-l4"),
        ({"gpu_type": "nvidia-l4", "machine_type": "n1-standard-8"}, "machine_type", "g2-standard-8"),
        ({"gpu_type": "nvidia-tesla-a100", "machine_type": "n1-standard-8"}, "machine_type", "a2-highgpu-1g"),
        ({"gpu_type": "nvidia-h100-80gb", "machine_type": "a2-highgpu-1g"}, "gpu_type", "nvidia-tesla-a100"),
        ({"gpu_type": "h100", "machine_type": "a3-highgpu-4g"}, "spot", "Spot or Flex-start"),
        ({"gpu_type": "h200", "spot": True}, "reservation", "only through a Compute Engine reservation"),
        ({"gpu_type": "nvidia-tesla-t4", "gpus_per_node": 3}, "gpus_per_node", "[1, 2, 4]"),
        ({"gpu_type": "nvidia-tesla-p100", "gpus_per_node": 8}, "gpus_per_node", "[1, 2, 4]"),
        (
            {"gpu_type": "nvidia-tesla-a100", "gpus_per_node": 2, "machine_type": "a2-highgpu-1g"},
            "gpus_per_node",
            "a2-highgpu-2g",
        ),
        ({"gpu_type": "nvidia-tesla-v100", "machine_type": "n1-standard-16"}, "machine_type", "at most 12 vCPUs"),
        ({"gpu_type": "nvidia-tesla-v100", "cpus_per_node": 16, "memory_per_node": 60}, "cpus_per_node", "12"),
        ({"machine_type": "a2-highgpu-1g"}, "gpu_type", "comes with 1 x nvidia-tesla-a100"),
        ({"machine_type": "g2-standard-4"}, "gpu_type", "nvidia-l4"),
    ],
)
def test_invalid_combinations_name_the_field(spec: dict[str, object], field: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        check_cluster_spec(ClusterSpec(name="bad", **spec))  # type: ignore[arg-type]
    assert field in caught.value.fields
    assert words in str(caught.value)


def test_cpu_only_unknown_series_is_left_to_gce() -> None:
    check_cluster_spec(ClusterSpec(name="c4", machine_type="c4-standard-8"))


def test_machine_shapes() -> None:
    assert machine_shape("n1-standard-8").vcpus == 8 and machine_shape("n1-standard-8").memory_gb == 30
    assert machine_shape("custom-6-20480").custom and machine_shape("custom-6-20480").memory_gb == 20
    assert machine_shape("n2-custom-4-8192").family == "n2"
    assert machine_shape("g2-standard-24").fixed_gpus == ("nvidia-l4", 2)
    assert machine_shape("a3-highgpu-8g").fixed_gpus == ("nvidia-h100-80gb", 8)
    assert machine_shape("e2-medium").vcpus == 2


def test_cpu_cluster_estimate_adds_up() -> None:
    estimate = estimate_hourly_cost(ClusterSpec(name="cpu", machine_type="n1-standard-4", num_nodes=2, disk_size=100))
    # 2 x n1-standard-4 (4 vCPU, 15 GB) + 200 GB balanced disk + the GKE fee
    machines = 2 * (4 * 0.031611 + 15 * 0.004237)
    disks = 200 * 0.10 / 730
    assert estimate.hourly == pytest.approx(machines + disks + CLUSTER_FEE_PER_HOUR, abs=1e-3)
    assert sum(i.hourly or 0 for i in estimate.items) == pytest.approx(estimate.hourly, abs=1e-3)
    assert estimate.max_hourly is None
    text = str(estimate)
    assert "estimate" in text.lower() and PRICES_DATE in text and "us-central1" in text


def test_gpu_spot_regional_estimate() -> None:
    on_demand = estimate_hourly_cost(ClusterSpec(name="t4", gpu_type="nvidia-tesla-t4", num_nodes=2))
    gpu_items = [i for i in on_demand.items if "nvidia-tesla-t4" in i.item]
    assert gpu_items[0].quantity == 2 and gpu_items[0].hourly == pytest.approx(2 * GPU_PER_HOUR["nvidia-tesla-t4"])
    spot = estimate_hourly_cost(ClusterSpec(name="t4", gpu_type="nvidia-tesla-t4", num_nodes=2, spot=True))
    spot_gpu = next(i for i in spot.items if "nvidia-tesla-t4" in i.item)
    assert spot_gpu.hourly == pytest.approx(gpu_items[0].hourly * SPOT_FRACTION)
    assert spot.hourly < on_demand.hourly
    regional = estimate_hourly_cost(ClusterSpec(name="t4", location="us-central1", gpu_type="nvidia-tesla-t4"))
    # a regional GPU pool is in one zone (rlcloud picks it), the CPU pool in the region's three
    assert next(i for i in regional.items if "nvidia-tesla-t4" in i.item).quantity == 1
    assert next(i for i in regional.items if "e2-standard-4" in i.item).quantity == 3
    scaled = estimate_hourly_cost(
        ClusterSpec(name="t4", gpu_type="nvidia-tesla-t4", num_nodes=1, autoscaling={"min_nodes": 0, "max_nodes": 5})
    )
    assert scaled.max_hourly is not None and scaled.max_hourly > scaled.hourly
    assert "autoscaling maximum" in str(scaled)


def test_gpu_cluster_estimate_shows_the_cpu_pool_range() -> None:
    e2_node = 4 * MACHINE_PER_HOUR["e2"][0] + 16 * MACHINE_PER_HOUR["e2"][1] + 50 * DISK_PER_GB_HOUR
    t4_node = 4 * MACHINE_PER_HOUR["n1"][0] + 15 * MACHINE_PER_HOUR["n1"][1] + 100 * DISK_PER_GB_HOUR
    t4_node += GPU_PER_HOUR["nvidia-tesla-t4"]
    # a fixed GPU pool: the CPU pool alone makes the range, from 1 to SYSTEM_MAX_NODES e2-standard-4
    fixed = estimate_hourly_cost(ClusterSpec(name="t4", gpu_type="nvidia-tesla-t4", machine_type="n1-standard-4"))
    assert fixed.hourly == pytest.approx(CLUSTER_FEE_PER_HOUR + e2_node + t4_node, abs=1e-3)
    assert fixed.max_hourly == pytest.approx(CLUSTER_FEE_PER_HOUR + SYSTEM_MAX_NODES * e2_node + t4_node, abs=1e-3)
    (system,) = [i for i in fixed.items if "e2-standard-4" in i.item]
    assert system.quantity == 1
    assert system.item == f"default-pool: 1 x e2-standard-4 (autoscaling 1-{SYSTEM_MAX_NODES} per zone)"
    assert "autoscaling maximum" in str(fixed) and f"${fixed.max_hourly:.2f}/hour" in str(fixed)
    # both pools autoscaling, regional: the CPU pool in each of the three zones, the GPU pool in its one
    both = estimate_hourly_cost(
        ClusterSpec(
            name="t4",
            location="us-central1",
            gpu_type="nvidia-tesla-t4",
            machine_type="n1-standard-4",
            autoscaling={"min_nodes": 0, "max_nodes": 2},
        )
    )
    assert both.hourly == pytest.approx(CLUSTER_FEE_PER_HOUR + 3 * e2_node + t4_node, abs=1e-3)
    top = CLUSTER_FEE_PER_HOUR + 3 * SYSTEM_MAX_NODES * e2_node + 2 * t4_node
    assert both.max_hourly == pytest.approx(top, abs=1e-3)
    assert next(i for i in both.items if "n1-standard-4" in i.item).item.endswith("(autoscaling 0-2 per zone)")


def test_unknown_series_is_reported_not_guessed() -> None:
    estimate = estimate_hourly_cost(ClusterSpec(name="c4", machine_type="c4-standard-8"))
    assert estimate.unknown == ["c4-standard-8"]
    assert "no price" in str(estimate)


def test_table_figures() -> None:
    # Verified on https://cloud.google.com/kubernetes-engine/pricing: $0.10 per cluster per hour.
    assert CLUSTER_FEE_PER_HOUR == 0.10
    # The spot page's stated range of discounts (60-91 %) as a fraction of on-demand.
    assert 0.09 <= SPOT_FRACTION <= 0.40
    # Kept, unverified (see the module docstring): balanced PD per GB-month, per-GPU rates.
    assert abs(DISK_PER_GB_HOUR * 730 - 0.10) < 1e-12
    assert GPU_PER_HOUR["nvidia-tesla-t4"] == 0.35 and GPU_PER_HOUR["nvidia-l4"] == 0.56
    assert GPU_PER_HOUR["nvidia-tesla-a100"] == 2.93 and GPU_PER_HOUR["nvidia-a100-80gb"] == 3.93
    assert GPU_PER_HOUR["nvidia-h100-80gb"] == 9.80
    assert PRICES_DATE == "2025-06-01"


@pytest.mark.parametrize(
    ("spec", "machine", "gpu", "count"),
    [
        (
            {"machine_type": "a2-highgpu-2g", "gpu_type": "nvidia-tesla-a100", "gpus_per_node": 2},
            "a2-highgpu-2g",
            "nvidia-tesla-a100",
            2,
        ),
        (
            {"machine_type": "a3-highgpu-8g", "gpu_type": "nvidia-h100-80gb", "gpus_per_node": 8},
            "a3-highgpu-8g",
            "nvidia-h100-80gb",
            8,
        ),
        (
            {"machine_type": "g2-standard-24", "gpu_type": "nvidia-l4", "gpus_per_node": 2},
            "g2-standard-24",
            "nvidia-l4",
            2,
        ),
        # A machine with built-in GPUs costs them even where the spec names none.
        ({"machine_type": "g2-standard-24"}, "g2-standard-24", "nvidia-l4", 2),
    ],
)
def test_machine_with_built_in_gpus_counts_them_once(
    spec: dict[str, object], machine: str, gpu: str, count: int
) -> None:
    estimate = estimate_hourly_cost(ClusterSpec(name="acc", num_nodes=1, **spec))  # type: ignore[arg-type]
    gpu_items = [i for i in estimate.items if gpu in i.item]
    assert len(gpu_items) == 1 and gpu_items[0].quantity == count
    assert gpu_items[0].hourly == pytest.approx(count * GPU_PER_HOUR[gpu])
    # The machine line is its vCPU and memory part only (billed separately from the GPU SKU).
    shape = machine_shape(machine)
    assert shape.vcpus is not None and shape.memory_gb is not None
    vcpu, gb = MACHINE_PER_HOUR[shape.family]
    machine_item = next(i for i in estimate.items if i.item.endswith(f"1 x {machine}"))
    assert machine_item.hourly == pytest.approx(shape.vcpus * vcpu + shape.memory_gb * gb)
    assert sum(i.hourly or 0 for i in estimate.items) == pytest.approx(estimate.hourly, abs=1e-3)


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"location": "us-central1-a", "gpu_type": "t4"}, "regional cluster"),
        ({"location": "us-central1", "gpu_type": "t4", "node_locations": ["europe-west4-a"]}, "region us-central1"),
        ({"location": "us-central1"}, "has no GPUs"),
        ({"location": "us-central1", "gpu_type": "t4", "node_locations": ["us-central1-a", "us-central1-a"]}, "twice"),
    ],
)
def test_node_locations_must_place_a_regional_gpu_pool(settings: dict[str, object], words: str) -> None:
    settings.setdefault("node_locations", ["us-central1-a"])
    with pytest.raises(SpecError) as caught:
        ClusterSpec.from_dict({"name": "r", **settings})
    assert caught.value.fields == ["node_locations"] and words in str(caught.value)


def test_the_quota_check_counts_a_regional_gpu_pool_in_its_zones(google_apis: Any) -> None:
    from rlcloud.gke.doctor import Doctor

    google_apis.state.region_quotas["PREEMPTIBLE_NVIDIA_T4_GPUS"] = 2
    one = ClusterSpec(name="r", location="us-central1", gpu_type="t4", spot=True, num_nodes=2)
    assert Doctor("rl-test-project", spec=one, images=[]).check_gpu_quota().status == "OK"
    three = ClusterSpec(
        name="r", location="us-central1", gpu_type="t4", spot=True, node_locations=["us-central1-a", "us-central1-b"]
    )
    assert "needs 2" in Doctor("rl-test-project", spec=three, images=[]).check_gpu_quota().detail
