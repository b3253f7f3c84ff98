"""Fixtures for the Kubernetes layer: a fake kube-apiserver and a real client pointed at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from rlcloud.specs import ExperimentSpec
from tests.fakes.kube_apiserver import FakeKubeApiServer


@pytest.fixture
def apiserver() -> Iterator[FakeKubeApiServer]:
    with FakeKubeApiServer() as server:
        yield server


@pytest.fixture
def api_client(apiserver: FakeKubeApiServer) -> Iterator[client.ApiClient]:
    api = client.ApiClient(client.Configuration(host=apiserver.url))
    try:
        yield api
    finally:
        api.close()


def make_spec(run_mode: str = "single", num_workers: int | None = None, **extra: object) -> ExperimentSpec:
    """A small CartPole PPO spec for the given run mode."""
    data: dict[str, object] = {
        "name": extra.pop("name", "cartpole"),
        "environment": {"type": "gym", "level": "CartPole-v1"},
        "agent": {"type": "ppo", "batch_size": 10},
        "episodes": 20,
        "run_mode": run_mode,
        **extra,
    }
    if num_workers is not None:
        data["num_workers"] = num_workers
    return ExperimentSpec(**data)  # type: ignore[arg-type]
