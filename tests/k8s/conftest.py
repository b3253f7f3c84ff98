"""Fixtures for the Kubernetes layer: a fake kube-apiserver and a real client pointed at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rlcloud.k8s.builders import SWEEP_RESULTS_ENV
from rlcloud.k8s.sweep_builders import JOB_UID_ENV
from tests.fakes.gcs import FakeGcsServer
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.support.kubernetes import api_client  # noqa: F401  (the fixture, over this directory's apiserver)


@pytest.fixture
def apiserver() -> Iterator[FakeKubeApiServer]:
    with FakeKubeApiServer() as server:
        yield server


#: the warm pod's environment (its sweep's results, its Job's uid)
@pytest.fixture
def pod_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    location = tmp_path / "results" / "lr"
    monkeypatch.setenv(SWEEP_RESULTS_ENV, str(location))
    monkeypatch.setenv(JOB_UID_ENV, "job-2")
    for var in ("RLCLOUD_RESULTS", "RLCLOUD_EARLY_STOPPING"):
        monkeypatch.setenv(var, "x")  # so that what the runner sets is undone after the test
        monkeypatch.delenv(var)
    return location


@pytest.fixture
def gcs(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGcsServer]:
    with FakeGcsServer() as server:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)  # this process and the pods reach it alike
        yield server
