"""The fakes refuse what Google refuses (issue 37, item 12): on-demand a3-highgpu-1g/2g/4g, A3 Ultra without a
reservation, boot disks an A3 cannot take (tests/fakes/gke.py:_check_consumption), and
acceleratorTypes.aggregatedList without compute.acceleratorTypes.list (tests/fakes/google_apis.py); rlcloud's
preflight refuses each before anything is created, so a user never meets the fake's (Google's) refusal."""

from __future__ import annotations

from typing import Any

import pytest
from google.api_core import exceptions as gexc
from google.cloud import container_v1

from rlcloud.errors import SpecError
from rlcloud.specs import ClusterSpec
from tests.fakes.gke import FakeClusterManager
from tests.support.gke import CI_ROLES, PROJECT

SPECIFIC = container_v1.ReservationAffinity(
    consume_reservation_type=container_v1.ReservationAffinity.Type.SPECIFIC_RESERVATION,
    key="compute.googleapis.com/reservation-name",
    values=["h200-block"],
)


def _pool(machine: str, accelerator: str, count: int, **config: Any) -> container_v1.NodePool:
    flex = {}
    if config.get("flex_start"):  # flex-start pools start empty and autoscale (the fake's other rule, GKE's too)
        flex = dict(initial_node_count=0, autoscaling=container_v1.NodePoolAutoscaling(enabled=True, max_node_count=1))
    return container_v1.NodePool(
        name="gpu-pool",
        **({"initial_node_count": 1} | flex),
        config=container_v1.NodeConfig(
            machine_type=machine,
            accelerators=[container_v1.AcceleratorConfig(accelerator_count=count, accelerator_type=accelerator)],
            **config,
        ),
    )


@pytest.mark.parametrize(
    ("pool", "refused"),
    [
        (_pool("a3-highgpu-1g", "nvidia-h100-80gb", 1), "Spot VMs or with Flex-start"),
        (_pool("a3-highgpu-2g", "nvidia-h100-80gb", 2), "Spot VMs or with Flex-start"),
        (_pool("a3-highgpu-4g", "nvidia-h100-80gb", 4), "Spot VMs or with Flex-start"),
        (_pool("a3-highgpu-1g", "nvidia-h100-80gb", 1, spot=True), None),
        (_pool("a3-highgpu-1g", "nvidia-h100-80gb", 1, flex_start=True), None),
        (_pool("a3-highgpu-8g", "nvidia-h100-80gb", 8), None),  # on demand at 8 GPUs
        (_pool("a3-ultragpu-8g", "nvidia-h200-141gb", 8, disk_type="hyperdisk-balanced"), "specific reservation"),
        (_pool("a3-ultragpu-8g", "nvidia-h200-141gb", 8, spot=True, disk_type="hyperdisk-balanced"), "reservation"),
        (_pool("a3-ultragpu-8g", "nvidia-h200-141gb", 8, reservation_affinity=SPECIFIC), "pd-balanced"),
        (
            _pool(
                "a3-ultragpu-8g", "nvidia-h200-141gb", 8, reservation_affinity=SPECIFIC, disk_type="hyperdisk-balanced"
            ),
            None,
        ),
        (_pool("a3-highgpu-8g", "nvidia-h100-80gb", 8, disk_type="pd-standard"), "pd-standard"),
        (_pool("a3-megagpu-8g", "nvidia-h100-mega-80gb", 8, disk_type="pd-extreme"), "pd-extreme"),
        (_pool("a3-highgpu-8g", "nvidia-h100-80gb", 8, disk_type="pd-ssd"), None),
        (_pool("n1-standard-8", "nvidia-tesla-t4", 1, disk_type="pd-standard"), None),  # not an A3: any disk
    ],
)
@pytest.mark.parametrize("verb", ["create_cluster", "create_node_pool"])
def test_the_fake_refuses_a3_pools_google_would_refuse(
    pool: container_v1.NodePool, refused: str | None, verb: str, container_client: Any, fake: FakeClusterManager
) -> None:
    location = f"projects/{PROJECT}/locations/us-central1-a"
    cpu = container_v1.NodePool(name="default-pool", initial_node_count=1)

    def send() -> Any:
        if verb == "create_cluster":
            return container_client.create_cluster(
                parent=location, cluster=container_v1.Cluster(name="c", node_pools=[cpu, pool])
            )
        container_client.create_cluster(parent=location, cluster=container_v1.Cluster(name="c", node_pools=[cpu]))
        fake.complete_all_operations()
        return container_client.create_node_pool(parent=f"{location}/clusters/c", node_pool=pool)

    if refused is None:
        send()
        return
    with pytest.raises(gexc.InvalidArgument, match=refused):
        send()


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (ClusterSpec(name="rl", location="us-central1-a", gpu_type="h100"), "spot"),  # a3-highgpu-1g on demand
        (ClusterSpec(name="rl", location="us-central1-a", gpu_type="h200"), "reservation"),  # A3 Ultra
    ],
)
def test_rlcloud_refuses_them_first_and_creates_nothing(
    spec: ClusterSpec, field: str, fake: FakeClusterManager, make_cluster: Any
) -> None:
    with pytest.raises(SpecError) as caught:
        make_cluster(spec, doctor=False).create()
    assert field in caught.value.fields
    assert fake.requests_of("CreateCluster") == []


def test_what_rlcloud_builds_for_a3_is_what_the_fake_takes(fake: FakeClusterManager, make_cluster: Any) -> None:
    """Spot H100 (a3-highgpu-1g) and A3 Ultra with a reservation (hyperdisk-balanced boot disk) go through."""
    spot = ClusterSpec(name="h100", location="us-central1-a", gpu_type="h100", spot=True)
    assert make_cluster(spot, doctor=False).create().status == "RUNNING"
    ultra = ClusterSpec(name="h200", location="us-central1-a", gpu_type="h200", reservation="h200-block")
    assert make_cluster(ultra, doctor=False).create().status == "RUNNING"


def test_listing_accelerator_types_needs_its_permission(google_apis: Any) -> None:
    """compute.acceleratorTypes.list, which roles/container.admin (the documented CI role) lacks."""
    from rlcloud.gke.zones import accelerator_zones

    google_apis.state.roles = set(CI_ROLES)
    with pytest.raises(gexc.Forbidden, match=r"compute\.acceleratorTypes\.list"):
        accelerator_zones(PROJECT, "nvidia-l4")
    google_apis.state.roles |= {"roles/compute.viewer"}
    assert "europe-west3-b" in accelerator_zones(PROJECT, "nvidia-l4")


@pytest.mark.parametrize(
    ("node_locations", "created"),
    [(None, False), (["europe-west3-b"], True), (["europe-west3-a"], True)],  # -a: not checked, GKE refuses
)
def test_a_regional_gpu_spec_under_the_documented_ci_roles(
    node_locations: list[str] | None, created: bool, google_apis: Any, fake: FakeClusterManager, make_cluster: Any
) -> None:
    """The documented CI roles cannot ask which zones offer the GPU: without node_locations the preflight says so
    (SpecError naming node_locations and roles/compute.viewer) before anything is created; with them, rlcloud
    goes on and GKE (the fake) judges the zones."""
    google_apis.state.roles = set(CI_ROLES)
    spec = ClusterSpec(name="rl", location="europe-west3", gpu_type="l4", node_locations=node_locations or [])
    if not created:
        with pytest.raises(SpecError, match=r"roles/compute\.viewer") as caught:
            make_cluster(spec, doctor=False).create()
        assert caught.value.fields == ["node_locations"]
        assert fake.requests_of("CreateCluster") == []
        return
    if node_locations == ["europe-west3-a"]:  # no L4 there: GKE's 400, no cluster
        with pytest.raises(Exception, match="does not exist in zone europe-west3-a"):
            make_cluster(spec, doctor=False).create()
        assert fake.cluster_names() == []
        return
    assert make_cluster(spec, doctor=False).create().status == "RUNNING"
