"""The in-cluster reaper never fails silently: each reap attempt's outcome (requested, or refused with the
error) is in its ConfigMap and an Event, against the gRPC GKE fake refusing the delete as GKE does when the
reaper's Google service account lacks container.clusters.delete."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from typing import Any

import pytest
from google.cloud import container_v1
from kubernetes import client as k8s

from rlcloud.errors import AuthError
from rlcloud.gke import reaper
from rlcloud.gke.reaper import ClusterIdentity, run_once
from tests.fakes.gke import FakeClusterManager
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.support.gke import metadata  # noqa: F401  # the fixture: a GCE metadata server for the program

PROJECT = "rl-test-project"
LOCATION = "us-central1-a"
NOW = 1_800_000_000.0
IDENTITY = ClusterIdentity(PROJECT, LOCATION, "rl")


@pytest.fixture
def gke() -> Iterator[FakeClusterManager]:
    with FakeClusterManager(polls_to_done=2) as server:
        created = _dt.datetime.fromtimestamp(NOW - 36_000, _dt.UTC).isoformat().replace("+00:00", "Z")
        server.clusters[(PROJECT, LOCATION, "rl")] = container_v1.Cluster(
            name="rl",
            location=LOCATION,
            zone=LOCATION,
            status=container_v1.Cluster.Status.RUNNING,
            create_time=created,
            resource_labels={"managed-by": "rlcloud", "expiry": str(int(NOW - 60))},  # the ttl has passed
        )
        yield server


@pytest.fixture
def cluster_api() -> Iterator[tuple[FakeKubeApiServer, k8s.ApiClient]]:
    with FakeKubeApiServer(namespaces=("default", "rlcloud-system")) as server:
        api = k8s.ApiClient(k8s.Configuration(host=server.url))
        try:
            yield server, api
        finally:
            api.close()


def _run(gke: FakeClusterManager, api: k8s.ApiClient, now: float = NOW) -> reaper.Decision:
    container = gke.client()
    try:
        return run_once(now=now, identity=IDENTITY, container_client=container, api_client=api)
    finally:
        container.transport.close()


def _record(apiserver: FakeKubeApiServer) -> dict[str, str]:
    config_map = apiserver.get_object("ConfigMap", "rlcloud-reaper", "rlcloud-system")
    assert config_map is not None, "no record written"
    return dict(config_map["data"])


def _events(apiserver: FakeKubeApiServer) -> list[dict[str, Any]]:
    return apiserver.list_objects("Event", "rlcloud-system")


def test_a_refused_delete_is_recorded_with_its_error_and_fails_the_run(
    gke: FakeClusterManager, cluster_api: tuple[FakeKubeApiServer, k8s.ApiClient]
) -> None:
    apiserver, api = cluster_api
    gke.fail_next_with_missing_permission("DeleteCluster", "container.clusters.delete", PROJECT)
    with pytest.raises(AuthError):
        _run(gke, api)
    record = _record(apiserver)
    assert record["decision"] == "delete" and "ttl expired" in record["reason"]
    assert record["outcome"].startswith("refused: ")
    assert "container.clusters.delete" in record["outcome"]
    assert "needs container.clusters.get, container.clusters.delete and container.operations.get" in record["outcome"]
    (event,) = _events(apiserver)
    assert (event["reason"], event["type"]) == ("ClusterDeleteFailed", "Warning")
    assert event["message"].startswith("rlcloud reaper could not delete this cluster (ttl expired")
    assert "container.clusters.delete" in event["message"]
    assert gke.clusters[(PROJECT, LOCATION, "rl")].status == container_v1.Cluster.Status.RUNNING
    # the permission granted, the next run deletes it and records that
    assert _run(gke, api, NOW + 300).delete
    assert _record(apiserver)["outcome"].startswith("delete requested")
    assert [e["reason"] for e in _events(apiserver)] == ["ClusterDeleteFailed", "ClusterDelete"]


def test_a_cluster_the_reaper_may_not_read_is_recorded_too(
    gke: FakeClusterManager, cluster_api: tuple[FakeKubeApiServer, k8s.ApiClient]
) -> None:
    apiserver, api = cluster_api
    gke.fail_next_with_missing_permission("GetCluster", "container.clusters.get", PROJECT)
    with pytest.raises(AuthError):
        _run(gke, api)
    record = _record(apiserver)
    assert record["decision"] == "unknown" and record["outcome"].startswith("refused: ")
    assert "container.clusters.get" in record["outcome"]
    (event,) = _events(apiserver)
    assert event["reason"] == "ClusterDeleteFailed"
    assert event["message"].startswith("rlcloud reaper cannot read this cluster: refused:")


def test_the_program_exits_non_zero_when_the_delete_is_refused(
    gke: FakeClusterManager,
    cluster_api: tuple[FakeKubeApiServer, k8s.ApiClient],
    metadata: str,  # noqa: F811  # the imported fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    apiserver, _ = cluster_api
    gke.clusters[(PROJECT, LOCATION, "rl")].resource_labels["expiry"] = "1000"  # long past, whatever the clock
    gke.fail_next_with_missing_permission("DeleteCluster", "container.clusters.delete", PROJECT)
    monkeypatch.setenv("RLCLOUD_METADATA_HOST", metadata)
    monkeypatch.setenv("RLCLOUD_KUBE_API", apiserver.url)
    monkeypatch.setenv("RLCLOUD_GKE_EMULATOR_HOST", gke.address)
    assert reaper.main([]) == 1
    assert _record(apiserver)["outcome"].startswith("refused: ")
