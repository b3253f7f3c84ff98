"""GkeCluster against the gRPC ClusterManager fake, through the real ClusterManagerClient."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from google.cloud import container_v1

from rlcloud.errors import (
    AuthError,
    BackendError,
    CapacityError,
    ConflictError,
    NotFoundError,
    QuotaExceededError,
    SpecError,
    WaitTimeoutError,
)
from rlcloud.gke.cluster import GkeCluster, dedicated_cluster, find, reap
from rlcloud.gke.info import ClusterInfo
from rlcloud.gke.operations import OperationUpdate
from rlcloud.gke.plan import SYSTEM_MACHINE_TYPE, SYSTEM_MAX_NODES
from rlcloud.gke.project import GkeProject
from rlcloud.specs import ClusterSpec
from tests.fakes.gke import FakeClusterManager
from tests.support.gke import PROJECT, NoCredentials

MakeCluster = Callable[..., GkeCluster]
T4 = "nvidia-tesla-t4"


def unfinished(fake: FakeClusterManager) -> list[str]:
    done = container_v1.Operation.Status.DONE
    return [name for name, p in fake.operations.items() if p.op.status != done]


def interrupt_when(status: str, *, kind: str | None = None) -> Callable[[OperationUpdate], None]:
    """A progress callback that raises KeyboardInterrupt (one Ctrl-C) at the first update with ``status``."""
    fired: list[OperationUpdate] = []

    def progress(update: OperationUpdate) -> None:
        if not fired and update.status == status and (kind is None or update.kind == kind):
            fired.append(update)
            raise KeyboardInterrupt

    return progress


# ---------------------------------------------------------------------------------------- create


def test_create_polls_the_operation_and_reports_its_progress(
    fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    fake.polls_to_done = 4
    updates: list[OperationUpdate] = []
    info = make_cluster(ClusterSpec(name="rl", machine_type="n1-standard-4", num_nodes=2)).create(
        progress=updates.append
    )
    assert isinstance(info, ClusterInfo)
    assert (info.name, info.location, info.status) == ("rl", "us-central1-a", "RUNNING")
    assert (info.machine_type, info.num_nodes, info.gpus_per_node, info.gpu_type) == ("n1-standard-4", 2, 0, None)
    assert info.managed and info.created is not None and info.expiry is None
    assert [u.status for u in updates] == ["PENDING", "RUNNING", "RUNNING", "RUNNING", "DONE"]
    assert [u.fraction for u in updates] == [None, 0.25, 0.5, 0.75, 1.0]
    assert all(u.kind == "CREATE_CLUSTER" for u in updates)
    assert len(fake.requests_of("CreateCluster")) == 1
    assert len(fake.requests_of("GetOperation")) == 4


SPECS = {
    "cpu-only": dict(name="cpu", machine_type="n1-standard-8", num_nodes=3),
    "p100": dict(name="p100", gpu_type="nvidia-tesla-p100", gpus_per_node=2, machine_type="n1-standard-16"),
    "t4-spot-autoscaling": dict(
        name="t4", gpu_type=T4, spot=True, num_nodes=1, autoscaling={"min_nodes": 0, "max_nodes": 3}, ttl="2h"
    ),
    "custom": dict(name="custom", cpus_per_node=4, memory_per_node=10, disk_size=30),
    "regional": dict(name="regional", location="us-central1", gpu_type="nvidia-l4"),
}


@pytest.mark.parametrize("kind", list(SPECS))
def test_create_request_contents(kind: str, fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    spec = ClusterSpec(**SPECS[kind])  # type: ignore[arg-type]
    info = make_cluster(spec, experiment="exp-1").create()
    (request,) = fake.requests_of("CreateCluster")
    assert request.parent == f"projects/{PROJECT}/locations/{spec.location}"
    cluster = request.cluster
    assert cluster.name == spec.name
    assert cluster.resource_labels["managed-by"] == "rlcloud"
    assert cluster.resource_labels["experiment"] == "exp-1"
    assert cluster.workload_identity_config.workload_pool == f"{PROJECT}.svc.id.goog"
    pools = {p.name: p for p in cluster.node_pools}
    workers = pools["gpu-pool" if spec.gpus_per_node else "default-pool"]
    assert workers.config.machine_type == spec.effective_machine_type
    assert workers.config.disk_size_gb == spec.disk_size
    assert workers.initial_node_count == spec.num_nodes
    assert workers.config.spot == spec.spot
    if spec.gpus_per_node:
        assert set(pools) == {"default-pool", "gpu-pool"}
        system = pools["default-pool"]
        assert system.config.machine_type == SYSTEM_MACHINE_TYPE and not system.config.spot
        assert system.initial_node_count == 1
        assert system.autoscaling.enabled
        assert (system.autoscaling.min_node_count, system.autoscaling.max_node_count) == (1, SYSTEM_MAX_NODES)
        assert system.autoscaling.location_policy == container_v1.NodePoolAutoscaling.LocationPolicy.BALANCED
        (accelerator,) = workers.config.accelerators
        assert accelerator.accelerator_type == spec.gpu_type
        assert accelerator.accelerator_count == spec.gpus_per_node
        assert accelerator.gpu_driver_installation_config.gpu_driver_version.name == "DEFAULT"
        assert info.gpu_type == spec.gpu_type and info.gpus_per_node == spec.gpus_per_node
    else:
        assert set(pools) == {"default-pool"}
        assert not workers.config.accelerators
    if kind == "t4-spot-autoscaling":
        assert workers.autoscaling.enabled
        assert (workers.autoscaling.min_node_count, workers.autoscaling.max_node_count) == (0, 3)
        assert int(cluster.resource_labels["expiry"]) > 0 and info.expiry is not None
        assert info.spot and info.autoscaling == (0, 3)
    if kind == "custom":
        assert workers.config.machine_type == "custom-4-10240"
    if kind == "regional":
        assert info.location == "us-central1"
        assert workers.config.machine_type == "g2-standard-8"
        assert info.num_nodes == 4  # one system node in each of the region's 3 zones, one L4 node in one zone
        assert list(workers.locations) == ["us-central1-a"] and list(pools["default-pool"].locations) == []


def test_preflight_runs_before_any_request(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    from rlcloud.errors import SpecError

    with pytest.raises(SpecError) as caught:
        make_cluster(ClusterSpec(name="bad", gpu_type=T4, machine_type="e2-standard-8")).create()
    assert caught.value.fields == ["machine_type"]
    assert fake.requests == []


# ---------------------------------------------------------------------------------------- get / list / delete


def test_list_get_delete(fake: FakeClusterManager, make_cluster: MakeCluster, container_client: Any) -> None:
    make_cluster(ClusterSpec(name="a", gpu_type=T4, spot=True, labels={"team": "rl"})).create()
    make_cluster(ClusterSpec(name="b", location="europe-west4-b")).create()
    # a cluster rlcloud did not make: listed only with all_clusters, never adopted
    container_client.create_cluster(
        parent=f"projects/{PROJECT}/locations/us-central1-a",
        cluster=container_v1.Cluster(name="other", node_pools=[container_v1.NodePool(name="np", initial_node_count=1)]),
    )

    listed = GkeProject(PROJECT, container_client=container_client, credentials=NoCredentials()).list()
    assert sorted((i.name, i.location) for i in listed) == [("a", "us-central1-a"), ("b", "europe-west4-b")]
    everything = GkeProject(PROJECT, container_client=container_client).list(all_clusters=True)
    assert sorted(i.name for i in everything) == ["a", "b", "other"]

    found = find(
        GkeProject(PROJECT, container_client=container_client, credentials=NoCredentials()), "a", poll_interval=0.001
    )
    assert found.location == "us-central1-a"
    assert found.spec.gpu_type == T4 and found.spec.spot and found.spec.labels == {"team": "rl"}
    assert found.info().gpu_type == T4
    with pytest.raises(NotFoundError):
        find(GkeProject(PROJECT, container_client=container_client), "missing")

    before = len(fake.requests_of("DeleteCluster"))
    found.delete()
    assert "a" not in fake.cluster_names()
    with pytest.raises(NotFoundError):
        found.info()
    found.delete()  # idempotent: nothing to delete, no request sent
    assert len(fake.requests_of("DeleteCluster")) == before + 1


def test_delete_treats_not_found_as_done(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    cluster.create()
    # gone between our look and our delete (someone else deleted it)
    fake.fail_next("DeleteCluster", grpc.StatusCode.NOT_FOUND, f"Not found: {cluster.path}.")
    cluster.delete()
    assert len(fake.requests_of("DeleteCluster")) == 1


def test_delete_waits_out_a_running_operation(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    assert cluster.create(wait=False).status == "PROVISIONING"
    cluster.delete()  # GKE refuses while the create runs: wait for it, then delete
    assert fake.cluster_names() == []
    assert len(fake.requests_of("DeleteCluster")) == 2  # refused once, then accepted
    assert unfinished(fake) == []


# ---------------------------------------------------------------------------------------- idempotent create


def test_create_again_attaches_to_the_in_flight_operation(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    fake.polls_to_done = 3
    cluster = make_cluster(ClusterSpec(name="rl", gpu_type=T4))
    first = cluster.create(wait=False)
    assert first.status == "PROVISIONING"
    info = make_cluster(ClusterSpec(name="rl", gpu_type=T4)).create()  # e.g. a fresh process
    assert info.status == "RUNNING"
    assert len(fake.requests_of("CreateCluster")) == 1
    assert fake.requests_of("ListOperations")
    again = make_cluster(ClusterSpec(name="rl", gpu_type=T4)).create()
    assert again.status == "RUNNING"
    assert len(fake.requests_of("CreateCluster")) == 1
    assert fake.requests_of("CreateNodePool") == []


def test_rerun_after_interrupt_adopts_the_cluster(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    with pytest.raises(KeyboardInterrupt):
        make_cluster().create(progress=interrupt_when("RUNNING"))
    assert fake.cluster_names() == ["rl"]  # not dedicated: left for the re-run
    assert make_cluster().create().status == "RUNNING"
    assert len(fake.requests_of("CreateCluster")) == 1


def mutations(fake: FakeClusterManager) -> builtins.list[str]:
    """The requests that change something (the fake serves no mutation it does not record)."""
    return [name for name, _ in fake.requests if not name.startswith(("Get", "List"))]


def test_adopting_an_identical_gpu_cluster_changes_nothing(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    spec = ClusterSpec(name="rl", gpu_type=T4, spot=True, autoscaling={"min_nodes": 0, "max_nodes": 2})
    first = make_cluster(spec).create()
    assert mutations(fake) == ["CreateCluster"]
    again = make_cluster(spec).create()
    assert mutations(fake) == ["CreateCluster"]  # no pool re-created, resized or re-configured
    assert again.node_pools == first.node_pools == ["default-pool", "gpu-pool"]
    assert again.autoscaling == (0, 2)  # the experiment pool's, not the CPU pool's


def test_adopting_a_gpu_cluster_with_an_older_fixed_cpu_pool_changes_nothing(
    fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    make_cluster(ClusterSpec(name="rl", gpu_type=T4)).create()
    # as rlcloud made them before the CPU pool autoscaled: one fixed e2-standard-4 node
    (cluster,) = fake.clusters.values()
    system = next(p for p in cluster.node_pools if p.name == "default-pool")
    system.autoscaling = container_v1.NodePoolAutoscaling()
    info = make_cluster(ClusterSpec(name="rl", gpu_type=T4)).create()
    assert info.status == "RUNNING" and info.node_pools == ["default-pool", "gpu-pool"]
    assert mutations(fake) == ["CreateCluster"]  # kept as it is: no re-create of a serving pool
    assert not system.autoscaling.enabled


def test_create_adds_a_missing_pool_and_waits_out_a_busy_cluster(
    fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    make_cluster(ClusterSpec(name="rl", machine_type="e2-standard-4")).create()  # CPU only so far
    fake.fail_next(
        "CreateNodePool",
        grpc.StatusCode.FAILED_PRECONDITION,
        "Cluster is running incompatible operation operation-1718024305921-fd4f65ea.",
        reason="CLUSTER_ALREADY_HAS_OPERATION",
    )
    info = make_cluster(ClusterSpec(name="rl", gpu_type=T4)).create()
    assert info.node_pools == ["default-pool", "gpu-pool"] and info.gpu_type == T4
    assert len(fake.requests_of("CreateNodePool")) == 2  # refused once (busy), then accepted
    request = fake.requests_of("CreateNodePool")[-1]
    assert request.parent == f"projects/{PROJECT}/locations/us-central1-a/clusters/rl"
    assert request.node_pool.config.accelerators[0].accelerator_type == T4


def test_an_existing_cluster_of_another_shape_is_a_conflict(
    fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    make_cluster(ClusterSpec(name="rl", machine_type="n1-standard-8")).create()
    with pytest.raises(ConflictError, match="n1-standard-8") as caught:
        make_cluster(ClusterSpec(name="rl", machine_type="n1-standard-4")).create()
    assert "delete it first" in str(caught.value)
    assert len(fake.requests_of("CreateCluster")) == 1


def test_an_error_cluster_from_an_earlier_attempt_is_replaced(
    fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    fake.stockout("us-central1-a", ["us-central1-b"], accelerator=T4)
    make_cluster(ClusterSpec(name="rl", gpu_type=T4)).create(wait=False)
    fake.complete_all_operations()
    assert fake.clusters[(PROJECT, "us-central1-a", "rl")].status == container_v1.Cluster.Status.ERROR
    fake.clear_stockouts()
    info = make_cluster(ClusterSpec(name="rl", gpu_type=T4)).create()
    assert info.status == "RUNNING"
    assert len(fake.requests_of("CreateCluster")) == 2 and len(fake.requests_of("DeleteCluster")) == 1


def test_timeout_leaves_the_operation_to_attach_to(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    fake.polls_to_done = 10_000
    with pytest.raises(WaitTimeoutError) as caught:
        make_cluster().create(timeout=0.05)
    assert isinstance(caught.value, builtins.TimeoutError)
    assert "run the same command again" in str(caught.value)
    fake.polls_to_done = 1
    assert make_cluster().create().status == "RUNNING"
    assert len(fake.requests_of("CreateCluster")) == 1


# ---------------------------------------------------------------------------------------- errors


def test_quota_error(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    fake.fail_next_with_quota("CreateCluster", "GPUS_ALL_REGIONS")
    with pytest.raises(QuotaExceededError) as caught:
        make_cluster(ClusterSpec(name="rl", gpu_type=T4)).create()
    assert caught.value.quota == "GPUS_ALL_REGIONS"
    message = str(caught.value)
    assert "IAM & Admin > Quotas" in message
    assert f"https://console.cloud.google.com/iam-admin/quotas?project={PROJECT}" in message
    assert fake.cluster_names() == []


def test_stockout_without_fallback_names_zones_with_capacity(
    fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    fake.stockout("us-central1-a", ["us-central1-b", "us-central1-f"], accelerator=T4)
    with pytest.raises(CapacityError) as caught:
        make_cluster(ClusterSpec(name="rl", gpu_type=T4)).create()
    assert caught.value.zones_with_capacity == ["us-central1-b", "us-central1-f"]
    assert "fallback_zones" in str(caught.value)
    assert fake.cluster_names() == []  # the ERROR cluster GKE leaves behind was deleted


def test_stockout_retries_in_an_allowed_zone_with_capacity(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    fake.stockout("us-central1-a", ["us-central1-f"], accelerator=T4)
    # us-central1-b is allowed but Google did not name it: skipped; us-central1-f was named: used
    spec = ClusterSpec(name="rl", gpu_type=T4, fallback_zones=["us-central1-b", "us-central1-f"])
    cluster = make_cluster(spec)
    info = cluster.create()
    assert info.location == "us-central1-f" and info.status == "RUNNING"
    parents = [r.parent for r in fake.requests_of("CreateCluster")]
    assert parents == [f"projects/{PROJECT}/locations/us-central1-a", f"projects/{PROJECT}/locations/us-central1-f"]
    assert fake.cluster_names() == ["rl"]
    # a later process finds it in the fallback zone, and can delete it
    again = make_cluster(spec)
    assert again.create().location == "us-central1-f"
    again.delete()
    assert fake.cluster_names() == []


def test_stockout_fallback_argument_and_other_regions(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    fake.stockout("us-central1-a", ["us-central1-c"], accelerator=T4)
    fake.stockout("europe-west4-a", [], accelerator=T4)
    cluster = make_cluster(ClusterSpec(name="rl", gpu_type=T4))
    with pytest.raises(CapacityError) as caught:
        cluster.create(fallback_zones=["europe-west4-a"])
    assert "europe-west4-a" in str(caught.value)
    assert fake.cluster_names() == []
    fake.clear_stockouts()
    fake.stockout("us-central1-a", ["us-central1-c"], accelerator=T4)
    info = make_cluster(ClusterSpec(name="rl", gpu_type=T4)).create(fallback_zones=["europe-west4-b"])
    assert info.location == "europe-west4-b"


def test_regional_stockout_moves_the_gpu_pool_to_another_zone_with_its_gpu(
    fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    fake.stockout("us-central1-a", ["us-central1-c"], accelerator="nvidia-l4")
    # no fallback_zones needed: a regional spec allows the region's zones that offer the GPU
    spec = ClusterSpec(name="rl", location="us-central1", gpu_type="nvidia-l4")
    info = make_cluster(spec).create()
    assert info.location == "us-central1" and info.status == "RUNNING"
    first, second = fake.requests_of("CreateCluster")
    gpu = [{p.name: list(p.locations) for p in r.cluster.node_pools}["gpu-pool"] for r in (first, second)]
    assert gpu == [["us-central1-a"], ["us-central1-c"]]
    assert list(second.cluster.locations) == []  # the CPU pool stays spread over the region


def test_regional_cpu_stockout_pins_node_locations(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    fake.stockout("us-central1-a", ["us-central1-c"])
    spec = ClusterSpec(name="rl", location="us-central1", fallback_zones=["us-central1-c"])
    make_cluster(spec).create()
    first, second = fake.requests_of("CreateCluster")
    assert list(first.cluster.locations) == [] and list(second.cluster.locations) == ["us-central1-c"]


def test_stockout_of_an_added_gpu_pool_moves_the_pool(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    make_cluster(ClusterSpec(name="rl", machine_type="e2-standard-4")).create()
    fake.stockout("us-central1-a", ["us-central1-b"], accelerator=T4)
    spec = ClusterSpec(name="rl", gpu_type=T4, fallback_zones=["us-central1-b"])
    info = make_cluster(spec).create()
    assert info.node_pools == ["default-pool", "gpu-pool"]
    first, second = fake.requests_of("CreateNodePool")
    assert list(first.node_pool.locations) == [] and list(second.node_pool.locations) == ["us-central1-b"]
    assert len(fake.requests_of("DeleteNodePool")) == 1  # the failed pool was removed first


@pytest.mark.parametrize("kind", ["api", "role"])
def test_permission_denied_names_the_api_or_role(
    kind: str, fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    if kind == "api":
        fake.fail_next_with_api_disabled("GetCluster")
    else:
        fake.fail_next_with_missing_permission("CreateCluster", project=PROJECT)
    with pytest.raises(AuthError) as caught:
        make_cluster().create()
    message = str(caught.value)
    if kind == "api":
        assert "container.googleapis.com" in message and "not enabled" in message
    else:
        assert "roles/container.admin" in message and "container.clusters.create" in message
    assert isinstance(caught.value.__cause__, Exception)  # the Google error stays reachable
    assert fake.cluster_names() == []


def test_unknown_failures_are_backend_errors(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    from rlcloud.errors import BackendError

    fake.fail_next("CreateCluster", grpc.StatusCode.INTERNAL, "boom")
    with pytest.raises(BackendError, match="boom"):
        make_cluster().create()


# ---------------------------------------------------------------------------------------- dedicated clusters


@pytest.mark.parametrize("gke_refuses_delete_while_creating", [True, False])
def test_ctrl_c_while_creating_a_dedicated_cluster_leaves_no_cluster(
    gke_refuses_delete_while_creating: bool, fake: FakeClusterManager, container_client: Any
) -> None:
    fake.reject_delete_during_operation = gke_refuses_delete_while_creating
    with (
        pytest.raises(KeyboardInterrupt),
        dedicated_cluster(
            ClusterSpec(name="ded", gpu_type=T4),
            project=PROJECT,
            credentials=NoCredentials(),
            container_client=container_client,
            experiment="cartpole",
            progress=interrupt_when("RUNNING", kind="CREATE_CLUSTER"),
            poll_interval=0.001,
            max_poll_interval=0.005,
        ),
    ):
        raise AssertionError("the block must not run")
    assert fake.cluster_names() == []
    if gke_refuses_delete_while_creating:
        assert unfinished(fake) == []  # the create was waited out, then the delete went through


def test_dedicated_cluster_is_deleted_after_the_block(fake: FakeClusterManager, container_client: Any) -> None:
    options: dict[str, Any] = dict(
        project=PROJECT, container_client=container_client, credentials=NoCredentials(), poll_interval=0.001
    )
    with dedicated_cluster(ClusterSpec(name="ded"), experiment="exp", **options) as cluster:
        assert cluster.info().experiment == "exp"
    assert fake.cluster_names() == []
    with pytest.raises(RuntimeError, match="workload failed"), dedicated_cluster(ClusterSpec(name="ded"), **options):
        raise RuntimeError("workload failed")
    assert fake.cluster_names() == []


def test_create_delete_on_failure_cleans_up_after_an_operation_error(
    fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    fake.stockout("us-central1-a", [], accelerator=None)
    with pytest.raises(CapacityError):
        make_cluster().create(delete_on_failure=True)
    assert fake.cluster_names() == []


def test_twenty_create_fail_delete_cycles_leave_nothing(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    for cycle in range(20):
        spec = ClusterSpec(name=f"cycle-{cycle}", gpu_type=T4)
        cluster = make_cluster(spec)
        failure = cycle % 4
        if failure == 0:
            fake.fail_next_with_quota()
        elif failure == 1:
            fake.stockout("us-central1-a", ["us-central1-b"], accelerator=T4)
        elif failure == 2:
            fake.fail_next_with_api_disabled("CreateCluster")
        try:
            cluster.create(delete_on_failure=True)
        except (QuotaExceededError, CapacityError, AuthError):
            assert failure in (0, 1, 2)
        else:
            assert failure == 3
        finally:
            fake.clear_stockouts()
            cluster.delete()
    assert fake.cluster_names() == []
    assert unfinished(fake) == []


# ---------------------------------------------------------------------------------------- reap


def test_reap_deletes_only_expired_rlcloud_clusters(
    fake: FakeClusterManager, make_cluster: MakeCluster, container_client: Any
) -> None:
    now = 1_800_000_000.0
    for name, ttl in [("old", "1h"), ("young", "2d"), ("forever", None)]:
        GkeCluster(
            ClusterSpec(name=name, ttl=ttl),
            project=PROJECT,
            container_client=container_client,
            poll_interval=0.001,
        ).create()
    # the expiry label is creation time + ttl; make "old" look created two hours ago
    labels = fake.clusters[(PROJECT, "us-central1-a", "old")].resource_labels
    labels["expiry"] = str(int(now - 3600))
    fake.clusters[(PROJECT, "us-central1-a", "young")].resource_labels["expiry"] = str(int(now + 3600))
    container_client.create_cluster(  # not ours, although it carries an old expiry label
        parent=f"projects/{PROJECT}/locations/us-central1-a",
        cluster=container_v1.Cluster(name="theirs", resource_labels={"expiry": "1"}),
    )
    preview = reap(PROJECT, now=now, container_client=container_client, dry_run=True)
    assert [i.name for i in preview] == ["old"]
    assert "old" in fake.cluster_names()
    reaped = reap(PROJECT, now=now, container_client=container_client, credentials=NoCredentials(), poll_interval=0.001)
    assert [i.name for i in reaped] == ["old"]
    assert fake.cluster_names() == ["forever", "theirs", "young"]


def test_reap_goes_on_past_a_cluster_it_cannot_delete(
    fake: FakeClusterManager, make_cluster: MakeCluster, container_client: Any
) -> None:
    now = 1_800_000_000.0
    for name in ("a-stuck", "b-old", "c-odd"):
        GkeCluster(
            ClusterSpec(name=name, ttl="1h"), project=PROJECT, container_client=container_client, poll_interval=0.001
        ).create()
        fake.clusters[(PROJECT, "us-central1-a", name)].resource_labels["expiry"] = str(int(now - 60))
    fake.clusters[(PROJECT, "us-central1-a", "c-odd")].resource_labels["expiry"] = "1799999940000"  # milliseconds
    fake.fail_next("DeleteCluster", grpc.StatusCode.PERMISSION_DENIED, "container.clusters.delete denied")
    with pytest.raises(BackendError, match=r"could not delete 1 of 2 expired cluster\(s\): a-stuck") as caught:
        reap(PROJECT, now=now, container_client=container_client, credentials=NoCredentials(), poll_interval=0.001)
    assert "the others were deleted" in str(caught.value)
    assert fake.cluster_names() == ["a-stuck", "c-odd"]  # b-old deleted; the unreadable label never acts


def test_tqdm_progress_draws_the_operation(make_cluster: MakeCluster) -> None:
    import io

    from rlcloud.gke.operations import tqdm_progress

    out = io.StringIO()
    make_cluster().create(progress=tqdm_progress(file=out, disable=False))
    text = out.getvalue()
    assert "CREATE_CLUSTER rl" in text and "100%" in text and "DONE" in text


def test_a_broken_cluster_rlcloud_did_not_make_is_never_deleted(
    fake: FakeClusterManager, make_cluster: MakeCluster, container_client: Any
) -> None:
    fake.stockout("us-central1-a", [])
    container_client.create_cluster(
        parent=f"projects/{PROJECT}/locations/us-central1-a",
        cluster=container_v1.Cluster(name="rl", node_pools=[container_v1.NodePool(name="np", initial_node_count=1)]),
    )
    fake.complete_all_operations()
    fake.clear_stockouts()
    with pytest.raises(ConflictError, match="not made by rlcloud"):
        make_cluster().create()
    assert fake.cluster_names() == ["rl"] and fake.requests_of("DeleteCluster") == []


def test_get_a_cluster_with_an_accelerator_rlcloud_does_not_model(
    fake: FakeClusterManager, container_client: Any
) -> None:
    pool = container_v1.NodePool(
        name="gpu-pool",
        initial_node_count=1,
        config=container_v1.NodeConfig(
            machine_type="a9-highgpu-8g",
            accelerators=[container_v1.AcceleratorConfig(accelerator_count=8, accelerator_type="nvidia-x900")],
        ),
    )
    # a zone the fakes' GPU table does not know (tests/fakes/gce_catalog.py): any accelerator goes there
    container_client.create_cluster(
        parent=f"projects/{PROJECT}/locations/us-south1-b",
        cluster=container_v1.Cluster(name="x900", node_pools=[pool]),
    )
    found = find(GkeProject(PROJECT, container_client=container_client, credentials=NoCredentials()), "x900")
    assert (found.spec.name, found.location, found.spec.gpu_type) == ("x900", "us-south1-b", None)
    assert found.info().gpu_type == "nvidia-x900" and found.info().gpus_per_node == 8


def test_transient_errors_on_mutations_are_retried(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    fake.fail_next("CreateCluster", grpc.StatusCode.UNAVAILABLE, "The service is currently unavailable.", times=2)
    fake.fail_next("DeleteCluster", grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline exceeded.")
    cluster = make_cluster()
    assert cluster.create().status == "RUNNING"
    assert len(fake.requests_of("CreateCluster")) == 3
    cluster.delete()
    assert fake.cluster_names() == [] and len(fake.requests_of("DeleteCluster")) == 2


def test_a_progress_bar_follows_the_wait_too(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    import io

    from rlcloud.gke.operations import tqdm_progress

    cluster = make_cluster()
    assert cluster.create(wait=False).status == "PROVISIONING"
    out = io.StringIO()
    assert cluster.wait(progress=tqdm_progress(file=out, disable=False)).status == "RUNNING"
    assert "CREATE_CLUSTER rl" in out.getvalue() and "DONE" in out.getvalue()
    assert len(fake.requests_of("CreateCluster")) == 1


# ---------------------------------------------------------------------------------------- operations


@pytest.mark.parametrize("code", [grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE])
def test_transient_errors_while_polling_never_delete_a_cluster_gke_is_building(
    code: grpc.StatusCode, fake: FakeClusterManager, container_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    fake.polls_to_done = 3
    fake.interrupt_polling(times=3, code=code)
    options: dict[str, Any] = dict(
        project=PROJECT, container_client=container_client, credentials=NoCredentials(), poll_interval=0.001
    )
    with dedicated_cluster(ClusterSpec(name="ded", gpu_type=T4), **options) as cluster:
        assert cluster.info().status == "RUNNING"
        assert fake.requests_of("DeleteCluster") == []  # kept through the failed polls
    assert "polling again" in caplog.text
    assert len(fake.requests_of("CreateCluster")) == 1


def test_polling_errors_past_the_deadline_time_out_naming_them(
    fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    fake.interrupt_polling(times=1000, code=grpc.StatusCode.INTERNAL)
    with pytest.raises(WaitTimeoutError, match="failed transiently, the last with InternalServerError"):
        make_cluster(doctor=False).create(timeout=1.0)
    assert fake.cluster_names() == ["rl"]  # GKE goes on building it; running the command again attaches


def test_an_operation_is_a_failure_by_its_error_code_only(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    fake.note_on_success("Node pool version 1.33 is deprecated; upgrade soon.")
    info = make_cluster(ClusterSpec(name="rl", gpu_type=T4)).create(delete_on_failure=True)
    assert info.status == "RUNNING" and fake.cluster_names() == ["rl"]
    assert fake.requests_of("DeleteCluster") == []


# ---------------------------------------------------------------------------------------- GPU taint


def test_gpu_nodes_are_tainted_so_only_gpu_pods_land_there(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    make_cluster(ClusterSpec(name="rl", gpu_type=T4, spot=True)).create()
    # both pools come in one CreateCluster call, where GKE adds no taint by itself: the request must set it
    assert fake.node_taints("rl", "gpu-pool") == [("nvidia.com/gpu", "present", "NO_SCHEDULE")]
    assert fake.node_taints("rl", "default-pool") == []
    # the taint is what the learner's toleration matches (kube side)
    from rlcloud.k8s.builders import GPU_RESOURCE

    assert fake.node_taints("rl", "gpu-pool")[0][0] == GPU_RESOURCE


def test_the_fake_taints_a_gpu_pool_added_later_as_gke_does(fake: FakeClusterManager, container_client: Any) -> None:
    cpu = container_v1.NodePool(name="default-pool", initial_node_count=1)
    container_client.create_cluster(
        parent=f"projects/{PROJECT}/locations/us-central1-a", cluster=container_v1.Cluster(name="c", node_pools=[cpu])
    )
    fake.complete_all_operations()
    gpu = container_v1.NodePool(
        name="gpu-pool",
        initial_node_count=1,
        config=container_v1.NodeConfig(
            accelerators=[container_v1.AcceleratorConfig(accelerator_count=1, accelerator_type=T4)]
        ),
    )
    container_client.create_node_pool(parent=f"projects/{PROJECT}/locations/us-central1-a/clusters/c", node_pool=gpu)
    assert fake.node_taints("c", "gpu-pool") == [("nvidia.com/gpu", "present", "NO_SCHEDULE")]
    assert fake.node_taints("c", "default-pool") == []


# ---------------------------------------------------------------------------------------- regional GPU zones


def test_a_regional_gpu_pool_goes_to_one_zone_that_offers_its_gpu(
    fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    # europe-west3-a has no L4 (GKE's own example); GKE's default zones for the region include it
    spec = ClusterSpec(name="rl", location="europe-west3", gpu_type="l4")
    info = make_cluster(spec).create()
    assert info.status == "RUNNING"
    (request,) = fake.requests_of("CreateCluster")
    pools = {p.name: p for p in request.cluster.node_pools}
    assert list(pools["gpu-pool"].locations) == ["europe-west3-b"]  # one zone: GPUs and cost do not triple
    assert list(pools["default-pool"].locations) == [] and list(request.cluster.locations) == []
    assert info.num_nodes == 3 + 1
    assert next(i for i in make_cluster(spec).estimate_cost().items if "nvidia-l4" in i.item).quantity == 1


def test_the_fake_refuses_a_gpu_pool_in_a_zone_without_its_gpu(container_client: Any) -> None:
    from google.api_core import exceptions as gexc

    gpu = container_v1.NodePool(
        name="gpu-pool",
        initial_node_count=1,
        config=container_v1.NodeConfig(
            machine_type="g2-standard-8",
            accelerators=[container_v1.AcceleratorConfig(accelerator_count=1, accelerator_type="nvidia-l4")],
        ),
    )
    with pytest.raises(
        gexc.InvalidArgument, match='Accelerator type "nvidia-l4" does not exist in zone europe-west3-a'
    ):
        container_client.create_cluster(
            parent=f"projects/{PROJECT}/locations/europe-west3",
            cluster=container_v1.Cluster(name="c", node_pools=[gpu]),
        )


def test_a_region_without_the_gpu_is_refused_before_anything_is_created(
    fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    spec = ClusterSpec(name="rl", location="europe-west3", gpu_type="h100", spot=True)
    with pytest.raises(SpecError) as caught:
        make_cluster(spec).create(delete_on_failure=True)
    assert caught.value.fields == ["location"]
    assert "no zone of europe-west3 offers nvidia-h100-80gb" in str(caught.value)
    assert "europe-west4" in str(caught.value) and "us-central1" in str(caught.value)
    assert fake.requests_of("CreateCluster") == []


def test_node_locations_are_used_when_they_offer_the_gpu_and_refused_when_not(
    fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    wrong = ClusterSpec(name="rl", location="europe-west3", gpu_type="l4", node_locations=["europe-west3-a"])
    with pytest.raises(SpecError) as caught:
        make_cluster(wrong).create()
    assert caught.value.fields == ["node_locations"]
    assert "europe-west3-a does not offer nvidia-l4" in str(caught.value)
    assert "europe-west3-b, europe-west3-c" in str(caught.value)
    assert fake.requests_of("CreateCluster") == []
    two = ClusterSpec(
        name="rl", location="europe-west3", gpu_type="l4", node_locations=["europe-west3-b", "europe-west3-c"]
    )
    info = make_cluster(two).create()
    (request,) = fake.requests_of("CreateCluster")
    gpu = {p.name: p for p in request.cluster.node_pools}["gpu-pool"]
    assert list(gpu.locations) == ["europe-west3-b", "europe-west3-c"]
    assert info.num_nodes == 3 + 2
    assert next(i for i in make_cluster(two).estimate_cost().items if "nvidia-l4" in i.item).quantity == 2


def test_without_compute_access_node_locations_are_needed(
    google_apis: Any, fake: FakeClusterManager, make_cluster: MakeCluster
) -> None:
    google_apis.state.deny("acceleratorTypes.aggregatedList")
    with pytest.raises(SpecError, match=r"roles/compute\.viewer") as caught:
        make_cluster(ClusterSpec(name="rl", location="europe-west3", gpu_type="l4"), doctor=False).create()
    assert caught.value.fields == ["node_locations"]
    spec = ClusterSpec(name="rl", location="europe-west3", gpu_type="l4", node_locations=["europe-west3-c"])
    assert make_cluster(spec, doctor=False).create().status == "RUNNING"
