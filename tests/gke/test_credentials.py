"""Project and credentials come from Application Default Credentials, lazily and without any network."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rlcloud.errors import AuthError
from rlcloud.gke.cluster import GkeCluster
from rlcloud.specs import ClusterSpec
from tests.fakes.gke import FakeClusterManager
from tests.support.gke import service_account_key


def test_project_comes_from_application_default_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeClusterManager, container_client: Any
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(service_account_key(tmp_path / "key.json", "adc-proj")))
    cluster = GkeCluster(ClusterSpec(name="rl"), container_client=container_client, poll_interval=0.001)
    assert cluster.gke_project._credentials is None  # nothing resolved at construction
    cluster.create()
    assert cluster.project == "adc-proj"
    assert fake.requests_of("CreateCluster")[0].parent == "projects/adc-proj/locations/us-central1-a"
    assert cluster.credentials.service_account_email == "rlcloud-test@adc-proj.iam.gserviceaccount.com"
    # an explicit project, or the spec's, wins over the credentials' one
    assert GkeCluster(ClusterSpec(name="rl", project="spec-proj")).project == "spec-proj"
    assert GkeCluster(ClusterSpec(name="rl", project="spec-proj"), project="arg-proj").project == "arg-proj"


def test_missing_credentials_are_an_auth_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(AuthError, match="gcloud auth application-default login"):
        _ = GkeCluster(ClusterSpec(name="rl")).project
