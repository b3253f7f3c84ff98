"""Fixtures for the GKE backend: the gRPC ClusterManager fake and the real client pointed at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rlcloud.gke.cluster import GkeCluster
from rlcloud.gke.project import EMULATOR_ENV
from rlcloud.specs import ClusterSpec
from tests.fakes.gke import FakeClusterManager
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.support.gke import PROJECT, NoCredentials
from tests.support.kubernetes import api_client  # noqa: F401  (the fixture, over this directory's apiserver)


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


#: a kube-apiserver with the reaper's namespace (where its ConfigMap and Jobs go)
@pytest.fixture
def apiserver() -> Iterator[FakeKubeApiServer]:
    with FakeKubeApiServer() as server:
        server.create_object("Namespace", {"metadata": {"name": "rlcloud-system"}})
        yield server


@pytest.fixture
def emulated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClusterManager]:
    """The GKE fake that rlcloud's own clients reach (its emulator variable), from a directory with no rlcloud.yaml."""
    monkeypatch.chdir(tmp_path)  # no rlcloud.yaml above: flags only
    with FakeClusterManager(polls_to_done=0) as fake:
        monkeypatch.setenv(EMULATOR_ENV, fake.address)
        yield fake
