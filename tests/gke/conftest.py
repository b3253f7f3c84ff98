"""Fixtures for the GKE backend: the gRPC ClusterManager fake and the real client pointed at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rlcloud.gke.cluster import GkeCluster
from rlcloud.specs import ClusterSpec
from tests.fakes.gke import FakeClusterManager
from tests.support.gke import PROJECT, NoCredentials


@pytest.fixture
def fake() -> Iterator[FakeClusterManager]:
    with FakeClusterManager(polls_to_done=2) as server:
        yield server


@pytest.fixture
def container_client(fake: FakeClusterManager) -> Iterator[Any]:
    client = fake.client()
    try:
        yield client
    finally:
        client.transport.close()


@pytest.fixture
def make_cluster(container_client: Any) -> Callable[..., GkeCluster]:
    """GkeCluster factory on the fake: fast polling, a fixed project, no Google credentials."""

    def make(spec: ClusterSpec | None = None, **options: Any) -> GkeCluster:
        options.setdefault("poll_interval", 0.001)
        options.setdefault("max_poll_interval", 0.005)
        return GkeCluster(
            spec or ClusterSpec(name="rl"),
            project=options.pop("project", PROJECT),
            credentials=options.pop("credentials", NoCredentials()),
            container_client=container_client,
            **options,
        )

    return make
