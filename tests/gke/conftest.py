"""Fixtures for the GKE backend: the gRPC ClusterManager fake and the real client pointed at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rlcloud.gke.cluster import GkeCluster
from rlcloud.specs import ClusterSpec
from tests.fakes.gke import FakeClusterManager

PROJECT = "rl-test-project"


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


class NoCredentials:
    """Stands in for google-auth credentials where a test never needs a token (the fake has no auth).

    Any use of it fails loudly, so a test cannot silently reach for Application Default Credentials.
    """

    valid = False

    def refresh(self, request: Any) -> None:
        raise AssertionError("these tests must not refresh credentials")


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
