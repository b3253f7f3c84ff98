"""ClusterSpec: every field rule, the derived machine type, and the error text users see."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from rlcloud.specs import Autoscaling, ClusterSpec, Duration, GpuType, LegacySpecWarning
from rlcloud.specs.cluster import custom_machine_type
from tests.support.specs import spec_error


def cluster(**fields: Any) -> ClusterSpec:
    """A ClusterSpec through the loader path (SpecError, legacy mapping), named 'gpu' unless given."""
    return ClusterSpec.from_dict({"name": "gpu", **fields})


def only_problem(**fields: Any) -> tuple[str, str]:
    """The single (field, message) a bad cluster gives."""
    error = spec_error(lambda: cluster(**fields))
    assert len(error.problems) == 1, error
    return error.problems[0].field, error.problems[0].message


# ------------------------------------------------------------------------------------------------ name


@pytest.mark.parametrize("name", ["a", "gpu-pool", "t4-x2", "a" * 40])
def test_valid_names(name: str) -> None:
    assert ClusterSpec(name=name).name == name


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("", "non-empty"),
        ("a" * 41, "at most 40 characters"),
        ("GPU", "DNS-1123"),
        ("1gpu", "starting with a letter"),
        ("gpu-", "DNS-1123"),
        ("gpu.pool", "DNS-1123"),
    ],
)
def test_bad_names(name: str, says: str) -> None:
    field, message = only_problem(name=name)
    assert field == "name"
    assert says in message


def test_bad_name_message_suggests_a_valid_one() -> None:
    _, message = only_problem(name="My Cluster")
    assert "'my-cluster'" in message


def test_underscored_name_from_a_file_is_hyphenated_with_a_warning() -> None:
    # tensorforce-client names had underscores; the loader maps them, the model itself refuses them
    with pytest.warns(LegacySpecWarning, match="became 'small-cluster'"):
        assert cluster(name="small_cluster", location="us-central1-a").name == "small-cluster"
    with pytest.raises(ValidationError):
        ClusterSpec(name="small_cluster")


def test_name_is_required() -> None:
    error = spec_error(lambda: ClusterSpec.from_dict({"num_nodes": 2}))
    assert error.fields == ["name"]
    assert "required" in error.problems[0].message


# ------------------------------------------------------------------------------------ project, location


@pytest.mark.parametrize("project", ["my-rl-project", "abcdef", "project-123456"])
def test_valid_projects(project: str) -> None:
    assert cluster(project=project).project == project


@pytest.mark.parametrize("project", ["X", "abc", "My-Project", "1project", "project-", "a" * 31, "my_project"])
def test_bad_projects(project: str) -> None:
    field, message = only_problem(project=project)
    assert field == "project"
    assert "6-30 lowercase letters" in message


def test_project_defaults_to_none_for_adc() -> None:
    assert cluster().project is None


@pytest.mark.parametrize(
    ("location", "regional"),
    [("us-central1-a", False), ("europe-west4-b", False), ("us-central1", True), ("asia-northeast1", True)],
)
def test_zone_or_region(location: str, regional: bool) -> None:
    spec = cluster(location=location)
    assert spec.location == location
    assert spec.is_regional is regional


@pytest.mark.parametrize("location", ["mars", "us-central", "US-CENTRAL1-A", "us-central1-ab", "us central1"])
def test_bad_locations(location: str) -> None:
    field, message = only_problem(location=location)
    assert field == "location"
    assert "zone such as 'us-central1-a'" in message
    assert "region such as 'us-central1'" in message


def test_fallback_zones_must_be_zones() -> None:
    assert cluster(fallback_zones=["us-central1-b", "us-central1-c"]).fallback_zones == [
        "us-central1-b",
        "us-central1-c",
    ]
    field, message = only_problem(fallback_zones=["us-central1-b", "us-central1"])
    assert field == "fallback_zones"
    assert "'us-central1'" in message
    assert "'us-central1-b'" not in message.split("not")[-1]


# ------------------------------------------------------------------------------------------ machine type


def test_machine_type_is_used_as_given() -> None:
    assert cluster(machine_type="n1-highmem-8").effective_machine_type == "n1-highmem-8"


@pytest.mark.parametrize(
    ("cpus", "memory_gb", "expected"),
    [
        (4, 16, "custom-4-16384"),
        (4, 15.1, "custom-4-15616"),  # 15462.4 MiB rounds up to the next 256 MiB
        (2, 7.5, "custom-2-7680"),
        (1, 0.9, "custom-1-1024"),  # lowest ratio, rounded up to 256 MiB
        (1, 6.5, "custom-1-6656"),  # highest ratio, exactly
        (8, 52, "custom-8-53248"),
        (96, 624, "custom-96-638976"),
    ],
)
def test_cpus_and_memory_derive_a_custom_type(cpus: int, memory_gb: float, expected: str) -> None:
    spec = cluster(cpus_per_node=cpus, memory_per_node=memory_gb)
    assert spec.effective_machine_type == expected
    assert spec.machine_type is None
    mib = int(expected.rsplit("-", 1)[1])
    assert mib % 256 == 0
    assert custom_machine_type(cpus, memory_gb) == expected


@pytest.mark.parametrize(
    ("cpus", "memory_gb", "range_text"),
    [
        (4, 3, "3.6-26 GB"),  # 0.75 GB/vCPU: too little
        (4, 30, "3.6-26 GB"),  # 7.5 GB/vCPU: too much
        (1, 7, "0.9-6.5 GB"),
        (16, 8, "14.4-104 GB"),
    ],
)
def test_memory_ratio_outside_what_gce_allows(cpus: int, memory_gb: float, range_text: str) -> None:
    field, message = only_problem(cpus_per_node=cpus, memory_per_node=memory_gb)
    assert field == "memory_per_node"
    assert range_text in message
    assert "0.9-6.5 GB per vCPU" in message
    with pytest.raises(ValueError, match=r"0\.9-6\.5 GB per vCPU"):
        custom_machine_type(cpus, memory_gb)


@pytest.mark.parametrize("cpus", [0, 3, 7, 98])
def test_custom_cpus_must_be_one_or_even_up_to_96(cpus: int) -> None:
    field, message = only_problem(cpus_per_node=cpus, memory_per_node=cpus * 4 or 4)
    assert field == "cpus_per_node"
    assert "1 or an even number up to 96" in message


@pytest.mark.parametrize(
    ("fields", "at"),
    [({"cpus_per_node": 4}, "memory_per_node"), ({"memory_per_node": 16}, "cpus_per_node")],
)
def test_cpus_and_memory_go_together(fields: dict[str, Any], at: str) -> None:
    field, message = only_problem(**fields)
    assert field == at
    assert "give both or neither" in message


def test_machine_type_and_custom_shape_are_exclusive() -> None:
    field, message = only_problem(machine_type="n1-standard-4", cpus_per_node=4, memory_per_node=16)
    assert field == "machine_type"
    assert "not both" in message


@pytest.mark.parametrize(
    ("gpu_type", "expected"),
    [(None, "n1-standard-4"), ("nvidia-tesla-t4", "n1-standard-8"), ("nvidia-l4", "g2-standard-8")],
)
def test_default_machine_type_fits_the_gpu(gpu_type: str | None, expected: str) -> None:
    assert cluster(gpu_type=gpu_type).effective_machine_type == expected


def test_every_gpu_type_has_a_default_machine_type() -> None:
    for gpu in GpuType:
        assert cluster(gpu_type=gpu.value).effective_machine_type


# -------------------------------------------------------------------------------------- sizes and GPUs


def test_size_defaults() -> None:
    spec = cluster()
    assert (spec.num_nodes, spec.disk_size, spec.gpus_per_node, spec.gpu_type) == (1, 100, 0, None)


@pytest.mark.parametrize(("fields", "at"), [({"num_nodes": 0}, "num_nodes"), ({"disk_size": 9}, "disk_size")])
def test_lower_bounds(fields: dict[str, Any], at: str) -> None:
    field, message = only_problem(**fields)
    assert field == at
    assert "greater than or equal to" in message


def test_disk_size_ten_is_enough() -> None:
    assert cluster(disk_size=10).disk_size == 10


def test_gpu_type_alone_means_one_gpu_per_node() -> None:
    spec = cluster(gpu_type="nvidia-tesla-t4")
    assert spec.gpus_per_node == 1
    assert spec.gpu_type is GpuType.T4


def test_gpus_need_a_gpu_type() -> None:
    field, message = only_problem(gpus_per_node=2)
    assert field == "gpu_type"
    assert "gpus_per_node=2 needs a gpu_type" in message
    assert "nvidia-tesla-t4" in message


@pytest.mark.parametrize("gpus", [-1, 17])
def test_gpus_per_node_bounds(gpus: int) -> None:
    field, _ = only_problem(gpus_per_node=gpus, gpu_type="nvidia-l4")
    assert field == "gpus_per_node"


@pytest.mark.parametrize("gpu", list(GpuType))
def test_current_gpu_types_are_accepted(gpu: GpuType) -> None:
    assert cluster(gpu_type=gpu.value, gpus_per_node=2).gpu_type is gpu


def test_k80_is_refused_with_its_end_of_support_and_alternatives() -> None:
    error = spec_error(lambda: cluster(gpu_type="nvidia-tesla-k80"))
    assert error.fields == ["gpu_type"]
    message = error.problems[0].message
    assert "end of support on 2024-05-01" in message
    assert "nvidia-tesla-t4" in message
    assert "nvidia-l4" in message
    assert error.problems[0].value == "nvidia-tesla-k80"


def test_unknown_gpu_type_lists_the_valid_ones() -> None:
    field, message = only_problem(gpu_type="nvidia-tesla-k40")
    assert field == "gpu_type"
    assert "unknown gpu_type 'nvidia-tesla-k40'" in message
    assert all(t.value in message for t in GpuType)


# ------------------------------------------------------------------------- spot, autoscaling, labels, ttl


def test_spot() -> None:
    assert cluster().spot is False
    assert cluster(spot=True).spot is True
    field, _ = only_problem(spot="sometimes")
    assert field == "spot"


def test_autoscaling_bounds() -> None:
    spec = cluster(num_nodes=2, autoscaling={"min_nodes": 0, "max_nodes": 4})
    assert spec.autoscaling == Autoscaling(min_nodes=0, max_nodes=4)
    assert cluster(autoscaling={"max_nodes": 3}).autoscaling == Autoscaling(min_nodes=0, max_nodes=3)


@pytest.mark.parametrize(
    ("autoscaling", "at", "says"),
    [
        ({"min_nodes": 3, "max_nodes": 2}, "autoscaling.min_nodes", "must not exceed"),
        ({"min_nodes": 0}, "autoscaling.max_nodes", "required"),
        ({"min_nodes": -1, "max_nodes": 2}, "autoscaling.min_nodes", "greater than or equal to 0"),
        ({"max_nodes": 0}, "autoscaling.max_nodes", "greater than or equal to 1"),
        ({"max_nodes": 2, "maximum": 3}, "autoscaling.maximum", "unknown field"),
    ],
)
def test_bad_autoscaling(autoscaling: dict[str, int], at: str, says: str) -> None:
    field, message = only_problem(autoscaling=autoscaling)
    assert field == at
    assert says in message


def test_num_nodes_must_lie_within_autoscaling_bounds() -> None:
    field, message = only_problem(num_nodes=5, autoscaling={"min_nodes": 1, "max_nodes": 3})
    assert field == "num_nodes"
    assert "1..3" in message


def test_labels() -> None:
    assert cluster(labels={"team": "rl", "cost_center": "r-d-42"}).labels == {"team": "rl", "cost_center": "r-d-42"}


@pytest.mark.parametrize("labels", [{"Team": "rl"}, {"team": "RL"}, {"1team": "rl"}, {"team": "a" * 64}, {"t": "a b"}])
def test_bad_labels(labels: dict[str, str]) -> None:
    field, message = only_problem(labels=labels)
    assert field == "labels"
    assert "not a valid GCE label" in message


@pytest.mark.parametrize(
    ("raw", "seconds", "text"),
    [("6h", 21600, "6h"), ("90m", 5400, "90m"), ("2d", 172800, "2d"), (90, 90, "90s"), ("120m", 7200, "2h")],
)
def test_ttl(raw: str | int, seconds: int, text: str) -> None:
    ttl = cluster(ttl=raw).ttl
    assert ttl == Duration(seconds)
    assert str(ttl) == text


@pytest.mark.parametrize("raw", ["6x", "h", "0h", 0, -5, "1.5h", True])
def test_bad_ttl(raw: Any) -> None:
    field, message = only_problem(ttl=raw)
    assert field == "ttl"
    assert "'6h'" in message


def test_unknown_field_suggests_the_close_one() -> None:
    field, message = only_problem(num_node=3)
    assert field == "num_node"
    assert "did you mean 'num_nodes'?" in message


def test_spec_is_frozen() -> None:
    spec = cluster()
    with pytest.raises(ValidationError):
        spec.num_nodes = 3  # type: ignore[misc]


def test_explicit_zero_gpus_is_not_turned_into_one() -> None:
    # tensorforce-client CPU clusters kept a gpu_type next to gpus_per_node: 0; the loader drops it, loudly
    with pytest.warns(LegacySpecWarning, match="gpu_type 'nvidia-tesla-k80' was dropped: gpus_per_node is 0"):
        spec = cluster(gpus_per_node=0, gpu_type="nvidia-tesla-k80")
    assert (spec.gpus_per_node, spec.gpu_type) == (0, None)
    # the model itself refuses the contradiction instead of quietly buying a GPU
    with pytest.raises(ValidationError, match="gpus_per_node is 0 but gpu_type is nvidia-tesla-t4"):
        ClusterSpec(name="gpu", gpus_per_node=0, gpu_type=GpuType.T4)
