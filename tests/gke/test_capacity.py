"""Issue 42: the GPU pool's capacity ladder and GPU sharing, against the ClusterManager fake (real client)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest
from google.api_core import exceptions as gexc
from google.cloud import container_v1

from rlcloud.errors import CapacityError, QuotaExceededError, SpecError
from rlcloud.gke.budgets import node_prices
from rlcloud.gke.builders import build_create_node_pool_request
from rlcloud.gke.capacity import RUNG_LABEL, TRIED_LABEL, rung_hourly_cost
from rlcloud.gke.cluster import GkeCluster
from rlcloud.gke.prices import estimate_hourly_cost
from rlcloud.specs import ClusterSpec
from tests.fakes.gke import FakeClusterManager, pool_rung
from tests.support.gke import PROJECT

MakeCluster = Callable[..., GkeCluster]
L4 = "nvidia-l4"
REGION_L4 = ["us-central1-a", "us-central1-b", "us-central1-c"]  # the fake catalog's L4 zones of us-central1


def ladder_spec(**kw: Any) -> ClusterSpec:
    base: dict[str, Any] = {
        "name": "rl",
        "location": "us-central1",
        "gpu_type": "l4",
        "capacity": ["spot", "on-demand", "flex-start"],
    }
    return ClusterSpec(**{**base, **kw})


def gpu_requests(fake: FakeClusterManager) -> list[tuple[str, list[str]]]:
    return [(pool_rung(r.node_pool), list(r.node_pool.locations)) for r in fake.requests_of("CreateNodePool")]


def gpu_pool(fake: FakeClusterManager) -> container_v1.NodePool:
    (cluster,) = fake.clusters.values()
    (pool,) = [p for p in cluster.node_pools if p.config.accelerators]  # failed pools of the ladder are gone
    return pool


def test_a_region_wide_spot_stockout_walks_the_zones_then_goes_on_demand(
    fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    fake.stockout_region(REGION_L4, L4, rung="spot")
    cluster = make_cluster(ladder_spec())
    info = cluster.create()
    # one pool name per move: the next pool is made while the failed one still exists (one operation at a time)
    assert info.status == "RUNNING" and info.node_pools == ["default-pool", "gpu-pool-3"]
    # the cluster is created once, with its CPU pool only; the GPU pool is added and moved on its own
    (create,) = fake.requests_of("CreateCluster")
    assert [p.name for p in create.cluster.node_pools] == ["default-pool"]
    assert gpu_requests(fake) == [
        ("spot", ["us-central1-a"]),
        ("spot", ["us-central1-b"]),
        ("spot", ["us-central1-c"]),
        ("on-demand", ["us-central1-a"]),
    ]
    # the failed pools are deleted once the on-demand pool runs: no deletion between a stockout and the next try
    mutations = [m for m, _ in fake.requests if m in ("CreateNodePool", "DeleteNodePool")]
    assert mutations == ["CreateNodePool"] * 4 + ["DeleteNodePool"] * 3
    deleted = [r.name.rsplit("/", 1)[1] for r in fake.requests_of("DeleteNodePool")]
    assert deleted == ["gpu-pool", "gpu-pool-1", "gpu-pool-2"]
    pool = gpu_pool(fake)
    assert not pool.config.spot and dict(pool.config.labels)[RUNG_LABEL] == "on-demand"
    assert dict(pool.config.labels)[TRIED_LABEL] == "spot-a.spot-b.spot-c"
    moves = cluster.capacity_moves
    assert [(m.rung, m.zone, m.why, m.to_rung) for m in moves][-1] == ("spot", "us-central1-c", "stockout", "on-demand")
    # each move is priced: on-demand costs more than spot, and the move says what the new rung costs
    spot, on_demand = rung_hourly_cost(cluster.spec, "spot"), rung_hourly_cost(cluster.spec, "on-demand")
    assert spot is not None and on_demand is not None and on_demand > spot
    assert moves[-1].hourly_usd == on_demand and f"${on_demand:.2f}/h" in moves[-1].line()
    # cluster info shows the rung and what was tried, read back from GKE (any machine, any handle)
    again = make_cluster(ladder_spec()).info()
    assert again.capacity == "on-demand" and again.capacity_tried == "spot-a.spot-b.spot-c"


def test_a_quota_error_skips_the_rungs_other_zones(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    # regional quota: the other zones of the region share it, so the ladder goes to the next rung at once
    fake.exhaust_quota("us-central1", "spot", "PREEMPTIBLE_NVIDIA_L4_GPUS")
    cluster = make_cluster(ladder_spec())
    cluster.create()
    assert gpu_requests(fake) == [("spot", ["us-central1-a"]), ("on-demand", ["us-central1-a"])]
    (move,) = cluster.capacity_moves
    assert move.why == "quota" and "PREEMPTIBLE_NVIDIA_L4_GPUS" in move.message
    assert dict(gpu_pool(fake).config.labels)[TRIED_LABEL] == "spot-quota"


def test_a_zone_stockout_goes_where_google_says_there_is_capacity(
    fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    # zonal cluster: the pool's spare zones are the spec's fallback zones of the region; Google names -c
    fake.stockout("us-central1-a", ["us-central1-c"], accelerator=L4, rung="spot")
    spec = ladder_spec(location="us-central1-a", fallback_zones=["us-central1-b", "us-central1-c"])
    make_cluster(spec).create()
    assert gpu_requests(fake) == [("spot", []), ("spot", ["us-central1-c"])]
    assert gpu_pool(fake).config.spot


def test_flex_start_is_the_last_rung_and_starts_empty(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    fake.stockout_region(REGION_L4, L4)  # no VM of any kind now: only Dynamic Workload Scheduler can wait for one
    cluster = make_cluster(ladder_spec(capacity=["spot", "flex-start"]))
    cluster.create()
    assert [r for r, _ in gpu_requests(fake)] == ["spot"] * 3 + ["flex-start"]
    pool = gpu_pool(fake)
    assert pool.config.flex_start and not pool.config.spot and pool.initial_node_count == 0
    assert pool.autoscaling.enabled and pool.autoscaling.min_node_count == 0 and pool.autoscaling.max_node_count == 1
    assert pool.config.reservation_affinity.consume_reservation_type == (
        container_v1.ReservationAffinity.Type.NO_RESERVATION
    )


def test_a_used_up_ladder_says_everything_it_tried(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    fake.stockout_region(REGION_L4, L4)
    cluster = make_cluster(ladder_spec(capacity=["spot", "on-demand"]))
    with pytest.raises(CapacityError) as caught:
        cluster.create()
    message = str(caught.value)
    assert "capacity ladder spot > on-demand is used up" in message and "on-demand in us-central1-b" in message
    # every (rung, zone) was tried exactly once, and no failed pool was left behind
    tried = gpu_requests(fake)
    assert len(tried) == 6 and len(set(map(str, tried))) == 6
    assert [p.name for c in fake.clusters.values() for p in c.node_pools] == ["default-pool"]


def test_quota_on_every_rung_is_a_quota_error(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    fake.exhaust_quota("us-central1", "spot", "PREEMPTIBLE_NVIDIA_L4_GPUS")
    fake.exhaust_quota("us-central1", "on-demand", "NVIDIA_L4_GPUS")
    with pytest.raises(QuotaExceededError, match="NVIDIA_L4_GPUS"):
        make_cluster(ladder_spec(capacity=["spot", "on-demand"])).create()
    assert len(gpu_requests(fake)) == 2


def test_the_ladder_creates_nothing_twice(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    fake.stockout("us-central1-a", [], accelerator=L4, rung="spot")
    # a pool create whose answer is lost (UNAVAILABLE after it landed is retried: ALREADY_EXISTS is adopted)
    fake.fail_next("CreateNodePool", grpc.StatusCode.UNAVAILABLE, "recvmsg:Connection reset by peer")
    make_cluster(ladder_spec()).create()
    make_cluster(ladder_spec()).create()  # a second process adopts the cluster as it is
    assert len(fake.requests_of("CreateCluster")) == 1
    pools = [p.name for c in fake.clusters.values() for p in c.node_pools]
    assert pools == ["default-pool", "gpu-pool-1"]
    # the request that met UNAVAILABLE was sent again (it had not landed), then the stockout moved the pool once
    a, b = ("spot", ["us-central1-a"]), ("spot", ["us-central1-b"])
    assert gpu_requests(fake) == [a, a, b]
    assert len(fake.requests_of("DeleteNodePool")) == 1


def test_budgets_across_a_rung_change_and_a_shared_gpu_counted_once() -> None:
    def node(name: str, *, spot: bool, gpus: int, shared: int | None = None) -> dict[str, Any]:
        labels = {
            "node.kubernetes.io/instance-type": "g2-standard-8",
            "cloud.google.com/gke-accelerator": L4,
        }
        if spot:
            labels["cloud.google.com/gke-spot"] = "true"
        if shared:
            labels["cloud.google.com/gke-max-shared-clients-per-gpu"] = str(shared)
        allocatable = {"cpu": "7", "memory": "29Gi", "nvidia.com/gpu": str(gpus)}
        return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable}}

    prices = node_prices(
        [node("spot", spot=True, gpus=1), node("od", spot=False, gpus=1), node("shared", spot=False, gpus=4, shared=4)]
    )
    spot, on_demand, shared = prices["spot"][0], prices["od"][0], prices["shared"][0]
    assert spot is not None and on_demand is not None and spot < on_demand
    # four time-shared clients of one L4: one GPU's price, not four
    assert shared == pytest.approx(on_demand)
    # a sweep whose first trial ran an hour on a Spot node and the next an hour on-demand, after a rung change;
    # then four trials an hour each, side by side on the shared GPU: each pays a quarter of its node
    from rlcloud.gke.budgets import run_costs
    from rlcloud.timestamps import format_rfc3339

    def trial(uid: str, node: str, start: float, end: float) -> dict[str, Any]:
        requests = {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": "1"}
        finished = {"terminated": {"finishedAt": format_rfc3339(end)}}
        return {
            "metadata": {"uid": uid, "namespace": "rl", "labels": {"rlcloud.io/sweep": "lr"}},
            "spec": {"nodeName": node, "containers": [{"name": "runner", "resources": {"requests": requests}}]},
            "status": {"startTime": format_rfc3339(start), "containerStatuses": [{"state": finished}]},
        }

    t0 = 1_800_000_000.0
    pods = [trial("a", "spot", t0, t0 + 3600), trial("b", "od", t0 + 3600, t0 + 7200)]
    pods += [trial(f"s{i}", "shared", t0, t0 + 3600) for i in range(4)]
    costs, unpriced = run_costs(pods, prices, now=t0 + 7200)
    run = costs[("rl", "sweep", "lr")]
    assert not unpriced
    assert run["a"] == pytest.approx(spot) and run["b"] == pytest.approx(on_demand)
    assert sum(run[f"s{i}"] for i in range(4)) == pytest.approx(on_demand)
    # the estimate of a sharing spec counts the GPU once too, and says it is shared
    plain, sharing = (
        ClusterSpec(name="rl", gpu_type="l4"),
        ClusterSpec(name="rl", gpu_type="l4", gpu_sharing={"clients_per_gpu": 4}),
    )
    assert estimate_hourly_cost(plain).hourly == estimate_hourly_cost(sharing).hourly
    assert "shared by up to 4 trials" in str(estimate_hourly_cost(sharing))


# ------------------------------------------------------------------------------ the spec and the fake refuse


@pytest.mark.parametrize(
    ("fields", "wrong"),
    [
        ({"gpu_type": "t4", "capacity": ["spot", "flex-start"]}, "accelerator-optimized"),
        ({"gpu_type": "l4", "capacity": ["spot", "spot"]}, "twice"),
        ({"capacity": ["spot"]}, "no GPUs"),
        ({"gpu_type": "l4", "spot": True, "capacity": ["on-demand", "spot"]}, "spot: true contradicts"),
        ({"gpu_type": "l4", "gpu_sharing": {"clients_per_gpu": 49}}, "48"),
        ({"gpu_type": "l4", "gpu_sharing": {"clients_per_gpu": 1}}, "2"),
        ({"gpu_sharing": {"clients_per_gpu": 4}}, "has none"),
        ({"gpu_type": "h100", "capacity": ["flex-start"], "reservation": "r1"}, "reservation"),
    ],
)
def test_the_spec_refuses_what_google_refuses(fields: dict[str, Any], wrong: str) -> None:
    with pytest.raises((SpecError, ValueError), match=wrong):
        ClusterSpec.from_dict({"name": "rl", **fields})


def _raw_pool(fake: FakeClusterManager, spec: ClusterSpec, rung: str, *, spot: bool = False) -> None:
    client = fake.client()
    request = build_create_node_pool_request(
        spec, project=PROJECT, location="us-central1-a", pool_name="gpu-pool", rung=rung
    )
    if spot:
        request.node_pool.config.spot = True
    try:
        client.create_node_pool(request=request)
    finally:
        client.transport.close()


def _plain_cluster(make_cluster: MakeCluster) -> None:
    make_cluster(ClusterSpec(name="rl", machine_type="e2-standard-4")).create()


@pytest.mark.parametrize(
    ("spec", "rung", "spot", "version", "refusal"),
    [
        (ClusterSpec(name="rl", gpu_type="l4", capacity=["flex-start"]), "flex-start", True, None, "Spot"),
        (
            ClusterSpec(name="rl", gpu_type="l4", capacity=["flex-start"]),
            "flex-start",
            False,
            "1.31.6-gke.1000",
            "1.32",
        ),
        (ClusterSpec(name="rl", gpu_type="t4"), "flex-start", False, None, "does not support the flex-start"),
        (
            ClusterSpec(name="rl", gpu_type="l4", gpu_sharing={"strategy": "mps", "clients_per_gpu": 4}),
            "on-demand",
            False,
            "1.27.3-gke.100",
            "MPS requires GKE version 1.27.7",
        ),
    ],
)
def test_the_fake_refuses_flex_start_and_sharing_where_gke_does(
    spec: ClusterSpec,
    rung: str,
    spot: bool,
    version: str | None,
    refusal: str,
    fake: FakeClusterManager,
    make_cluster: MakeCluster,
) -> None:
    if version:
        fake.master_version = version
    _plain_cluster(make_cluster)
    with pytest.raises(gexc.InvalidArgument, match=refusal):
        _raw_pool(fake, spec, rung, spot=spot)


def test_the_fake_refuses_more_than_48_clients(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    _plain_cluster(make_cluster)
    spec = ClusterSpec(name="rl", gpu_type="l4", gpu_sharing={"clients_per_gpu": 8})
    request = build_create_node_pool_request(spec, project=PROJECT, location="us-central1-a", pool_name="gpu-pool")
    request.node_pool.config.accelerators[0].gpu_sharing_config.max_shared_clients_per_gpu = 64
    client = fake.client()
    try:
        with pytest.raises(gexc.InvalidArgument, match="between 2 and 48"):
            client.create_node_pool(request=request)
    finally:
        client.transport.close()


def test_a_sharing_pool_carries_gkes_gpu_sharing_config(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    spec = ClusterSpec(name="rl", gpu_type="l4", gpu_sharing={"strategy": "time-sharing", "clients_per_gpu": 4})
    make_cluster(spec).create()
    (accelerator,) = gpu_pool(fake).config.accelerators
    sharing = accelerator.gpu_sharing_config
    assert sharing.gpu_sharing_strategy == container_v1.GPUSharingConfig.GPUSharingStrategy.TIME_SHARING
    assert sharing.max_shared_clients_per_gpu == 4


def test_another_process_picks_up_an_interrupted_ladder(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    fake.stockout("us-central1-a", [], accelerator=L4, rung="spot")
    first = make_cluster(ladder_spec())
    first.create(wait=False)  # the cluster request only
    fake.complete_all_operations()
    first.create(wait=False)  # once the cluster runs: the GPU pool request (going to stock out); the process ends
    assert [r for r, _ in gpu_requests(fake)] == ["spot"]
    second = make_cluster(ladder_spec())
    info = second.create()
    assert info.status == "RUNNING"
    # the failed pool of the first process is waited for and removed; the second walks the ladder itself
    assert gpu_requests(fake) == [("spot", ["us-central1-a"]), ("spot", ["us-central1-a"]), ("spot", ["us-central1-b"])]
    assert [p.name for c in fake.clusters.values() for p in c.node_pools] == ["default-pool", "gpu-pool-1"]


def test_the_doctor_shows_each_rungs_quota_and_price(google_apis: Any) -> None:
    """A rung without quota does not refuse the cluster (the ladder passes it by on the quota error); no rung
    with quota does. Flex-start draws on the preemptible quota, as Spot does."""
    from tests.support.gke import _doctor

    state = google_apis.state
    spec = ClusterSpec(name="rl", gpu_type="l4", capacity=["spot", "on-demand", "flex-start"])
    state.region_quotas.update({"PREEMPTIBLE_NVIDIA_L4_GPUS": 0, "NVIDIA_L4_GPUS": 4})
    check = _doctor(google_apis, spec=spec).check_gpu_quota()
    # no preemptible quota: Spot (and flex-start) use the standard one, as Compute says of Spot VMs
    assert check.status == "OK", check
    on_demand = rung_hourly_cost(spec, "on-demand")
    assert "on-demand: NVIDIA_L4_GPUS 4 free" in check.detail and f"~${on_demand:.2f}/h" in check.detail
    state.region_quotas.update({"PREEMPTIBLE_NVIDIA_L4_GPUS": 1, "NVIDIA_L4_GPUS": 0})
    spec2 = ClusterSpec(name="rl", gpu_type="l4", num_nodes=2, capacity=["spot", "on-demand", "flex-start"])
    check = _doctor(google_apis, spec=spec2).check_gpu_quota()
    assert check.status == "FAIL" and "the ladder will pass it by" in check.detail
    state.region_quotas.update({"PREEMPTIBLE_NVIDIA_L4_GPUS": 2})
    check = _doctor(google_apis, spec=spec2).check_gpu_quota()
    assert check.status == "WARN" and "on-demand: NVIDIA_L4_GPUS 0 free, needs 2" in check.detail


def test_a_handle_found_by_name_adopts_the_moved_pool(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    from rlcloud.gke.cluster import find
    from rlcloud.gke.project import GkeProject

    fake.stockout("us-central1-a", [], accelerator=L4, rung="spot")
    make_cluster(ladder_spec()).create()
    found = make_cluster(ladder_spec())  # the project and client of the fixture's handles
    handle = find(GkeProject(PROJECT, credentials=found.credentials, container_client=found.client), "rl")
    assert not handle.spec.capacity  # read back from GKE: no ladder, but the moved pool is its GPU pool
    info = handle.create()
    assert info.capacity == "spot" and info.capacity_tried == "spot-a"
    assert len(fake.requests_of("CreateNodePool")) == 2 and len(fake.requests_of("CreateCluster")) == 1
