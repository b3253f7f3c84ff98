"""Pytest plugin: fixtures for tests that need Google Cloud Storage.

Load it with ``pytest_plugins = ["tests.fakes.gcs_fixtures"]`` (in tests/conftest.py).

- ``fake_gcs`` (session): a running :class:`FakeGcsServer`.
- ``gcs_bucket``: a fresh bucket (unique name) on it.
- ``gcs_store``: ``open_store("gs://<fresh bucket>/exp")`` with a client talking to the fake server.
- ``faulty_proxy``: a factory ``faulty_proxy(fault_rate=..., seed=..., faults=..., deny=...)`` returning a
  started :class:`FaultyProxy` in front of the fake server (stopped after the test).
- ``gcs_store_via``: a factory ``gcs_store_via(proxy, bucket, prefix="exp")`` for a store whose client goes
  through the proxy, with short retry back-off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fakes.faulty_proxy import FaultyProxy
from tests.fakes.gcs import FakeGcsServer


@pytest.fixture(scope="session")
def fake_gcs() -> Iterator[FakeGcsServer]:
    """One fake-gcs-server for the whole session (in memory, free port)."""
    with FakeGcsServer() as server:
        yield server


@pytest.fixture
def gcs_bucket(fake_gcs: FakeGcsServer) -> str:
    """A bucket with a unique name, fresh for this test."""
    return fake_gcs.create_bucket()


@pytest.fixture
def gcs_store(fake_gcs: FakeGcsServer, gcs_bucket: str) -> Any:
    """A GcsStore at gs://<fresh bucket>/exp talking to the fake server directly."""
    from rlcloud.storage.gcs import GcsStore

    return GcsStore(gcs_bucket, "exp", client=fake_gcs.client(), retry_initial_s=0.05, retry_timeout_s=30)


@pytest.fixture
def faulty_proxy(fake_gcs: FakeGcsServer) -> Iterator[Callable[..., FaultyProxy]]:
    """Factory of started FaultyProxy instances in front of the fake server."""
    started: list[FaultyProxy] = []

    def make(**kwargs: Any) -> FaultyProxy:
        proxy = FaultyProxy(fake_gcs.url, **kwargs).start()
        started.append(proxy)
        return proxy

    yield make
    for proxy in started:
        proxy.stop()


@pytest.fixture
def gcs_store_via(fake_gcs: FakeGcsServer) -> Iterator[Callable[..., Any]]:
    """Factory: a GcsStore for ``bucket``/``prefix`` whose client goes through ``proxy``."""
    from rlcloud.storage.gcs import GcsStore

    clients: list[Any] = []

    def make(proxy: FaultyProxy, bucket: str, prefix: str = "exp", **kwargs: Any) -> Any:
        kwargs.setdefault("retry_initial_s", 0.01)
        kwargs.setdefault("retry_timeout_s", 60)
        client = fake_gcs.client_for(proxy.url)
        clients.append(client)
        return GcsStore(bucket, prefix, client=client, **kwargs)

    yield make
    for client in clients:
        client.close()
