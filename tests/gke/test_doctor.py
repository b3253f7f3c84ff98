"""`rlcloud doctor`: each check passes and fails against local fakes (a small server speaking the Service Usage,
Resource Manager, Compute, IAM and Artifact Registry REST APIs; fake-gcs-server for the bucket)."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import requests

from rlcloud.cli import main
from rlcloud.config import ProjectConfig
from rlcloud.doctor import CLUSTER_PERMISSIONS, Doctor, gpu_quota_metric
from rlcloud.specs import ClusterSpec
from tests.fakes.gcs import FakeGcsServer
from tests.gke.conftest import PROJECT

RUNNER = f"rlcloud-runner@{PROJECT}.iam.gserviceaccount.com"
REAPER = f"rlcloud-reaper@{PROJECT}.iam.gserviceaccount.com"
IMAGE = f"us-central1-docker.pkg.dev/{PROJECT}/rlcloud/runner-cpu:0.1.0"
GPU_IMAGE = f"us-central1-docker.pkg.dev/{PROJECT}/rlcloud/runner-gpu:0.1.0"
T4_SPOT = ClusterSpec(name="rl", gpu_type="nvidia-tesla-t4", spot=True, num_nodes=2, ttl="6h")


@dataclass
class GoogleState:
    """What the fake Google APIs know about the project."""

    enabled: set[str] = field(
        default_factory=lambda: {"container.googleapis.com", "compute.googleapis.com", "storage.googleapis.com",
                                 "artifactregistry.googleapis.com"}
    )  # fmt: skip
    granted: set[str] = field(default_factory=lambda: set(CLUSTER_PERMISSIONS))
    region_quotas: dict[str, float] = field(default_factory=lambda: {"PREEMPTIBLE_NVIDIA_T4_GPUS": 4})
    project_quotas: dict[str, float] = field(default_factory=lambda: {"GPUS_ALL_REGIONS": 4})
    policies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # service account -> bindings
    tags: set[str] = field(default_factory=set)  # "repository/package:tag"


def _handler(state: GoogleState) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _not_found(self) -> None:
            self._send(404, {"error": {"code": 404, "message": f"{self.path} not found", "status": "NOT_FOUND"}})

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if m := re.fullmatch(r"/v1/projects/([^/]+)/services:batchGet", url.path):
                names = parse_qs(url.query).get("names", [])
                services = []
                for name in names:
                    service = name.rsplit("/", 1)[-1]
                    state_ = "ENABLED" if service in state.enabled else "DISABLED"
                    services.append({"name": f"projects/123/services/{service}", "config": {"name": service},
                                     "state": state_})  # fmt: skip
                return self._send(200, {"services": services})
            if re.fullmatch(r"/compute/v1/projects/[^/]+/regions/[^/]+", url.path):
                quotas = [{"metric": k, "limit": v, "usage": 0} for k, v in state.region_quotas.items()]
                return self._send(200, {"name": url.path.rsplit("/", 1)[-1], "quotas": quotas})
            if re.fullmatch(r"/compute/v1/projects/[^/]+", url.path):
                quotas = [{"metric": k, "limit": v, "usage": 0} for k, v in state.project_quotas.items()]
                return self._send(200, {"quotas": quotas})
            if m := re.fullmatch(
                r"/v1/projects/[^/]+/locations/[^/]+/repositories/([^/]+)/packages/([^/]+)/tags/([^/]+)", url.path
            ):
                repository, package, tag = m.group(1), unquote(m.group(2)), m.group(3)
                if f"{repository}/{package}:{tag}" in state.tags:
                    return self._send(200, {"name": url.path.removeprefix("/v1/"), "version": "sha256:abc"})
            return self._not_found()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if re.fullmatch(r"/v1/projects/[^/]+:testIamPermissions", self.path):
                return self._send(200, {"permissions": sorted(set(body["permissions"]) & state.granted)})
            if m := re.fullmatch(r"/v1/projects/[^/]+/serviceAccounts/([^/:]+):getIamPolicy", self.path):
                account = m.group(1)
                if account not in state.policies:
                    return self._not_found()
                return self._send(200, {"version": 1, "etag": "BwX=", "bindings": state.policies[account]})
            return self._not_found()

    return Handler


@pytest.fixture
def google() -> Iterator[tuple[GoogleState, str]]:
    state = GoogleState()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def gcs() -> Iterator[FakeGcsServer]:
    with FakeGcsServer() as server:
        yield server


def _wi(account: str, ns_sa: str) -> list[dict[str, Any]]:
    member = f"serviceAccount:{PROJECT}.svc.id.goog[{ns_sa}]"
    return [{"role": "roles/iam.workloadIdentityUser", "members": [member]}]


def _doctor(google: tuple[GoogleState, str], gcs: FakeGcsServer | None = None, **options: Any) -> Doctor:
    state, url = google
    state.policies.setdefault(RUNNER, _wi(RUNNER, "rlcloud/rlcloud-runner"))
    state.policies.setdefault(REAPER, _wi(REAPER, "rlcloud-system/rlcloud-reaper"))
    state.tags.update({"rlcloud/runner-cpu:0.1.0", "rlcloud/runner-gpu:0.1.0"})
    config = options.pop(
        "config",
        ProjectConfig(image=IMAGE, gpu_image=GPU_IMAGE, gcp_service_account=RUNNER, reaper_service_account=REAPER),
    )
    storage = gcs.client() if gcs is not None else None
    return Doctor(PROJECT, config=config, session=requests.Session(), api_host=url, storage_client=storage, **options)


def _by_name(doctor: Doctor) -> dict[str, Any]:
    return {c.name: c for c in doctor.run()}


def test_everything_set_up_passes(google: tuple[GoogleState, str], gcs: FakeGcsServer) -> None:
    bucket = gcs.create_bucket()
    checks = _by_name(_doctor(google, gcs, bucket=f"gs://{bucket}/rl", spec=T4_SPOT))
    assert {name: c.status for name, c in checks.items()} == {
        "apis": "OK",
        "permissions": "OK",
        "gpu-quota": "OK",
        "images": "OK",
        "bucket": "OK",
        "workload-identity": "OK",
        "reaper": "OK",
    }
    assert "PREEMPTIBLE_NVIDIA_T4_GPUS 4 free" in checks["gpu-quota"].detail


def test_apis(google: tuple[GoogleState, str]) -> None:
    google[0].enabled.discard("container.googleapis.com")
    check = _doctor(google).check_apis()
    assert check.status == "FAIL" and "container.googleapis.com" in check.detail
    assert check.fix.startswith("gcloud services enable container.googleapis.com")


def test_permissions(google: tuple[GoogleState, str]) -> None:
    assert _doctor(google).check_permissions().ok
    google[0].granted.discard("container.clusters.delete")
    check = _doctor(google).check_permissions()
    assert check.status == "FAIL" and check.detail == "missing container.clusters.delete"
    assert "--role=roles/container.admin" in check.fix


def test_gpu_quota(google: tuple[GoogleState, str]) -> None:
    assert gpu_quota_metric("nvidia-l4", spot=False) == "NVIDIA_L4_GPUS"
    assert gpu_quota_metric("nvidia-a100-80gb", spot=True) == "PREEMPTIBLE_NVIDIA_A100_80GB_GPUS"
    assert _doctor(google).check_gpu_quota().status == "SKIP"  # no spec
    google[0].region_quotas["PREEMPTIBLE_NVIDIA_T4_GPUS"] = 1
    check = _doctor(google, spec=T4_SPOT).check_gpu_quota()
    assert check.status == "FAIL" and "PREEMPTIBLE_NVIDIA_T4_GPUS in us-central1: 1 free of 1" in check.detail
    assert "quotas?project=" in check.fix
    google[0].region_quotas["PREEMPTIBLE_NVIDIA_T4_GPUS"] = 8
    google[0].project_quotas["GPUS_ALL_REGIONS"] = 0  # a new project's GPUs start at 0
    check = _doctor(google, spec=T4_SPOT).check_gpu_quota()
    assert check.status == "FAIL" and "GPUS_ALL_REGIONS" in check.detail


def test_bucket(google: tuple[GoogleState, str], gcs: FakeGcsServer) -> None:
    check = _doctor(google, gcs, bucket="gs://no-such-bucket-here/rl").check_bucket()
    assert check.status == "FAIL" and "does not exist" in check.detail
    assert "--soft-delete-duration=0" in check.fix

    class Bucket:
        _properties = {"softDeletePolicy": {"retentionDurationSeconds": "604800"}}

    class Storage:
        def get_bucket(self, name: str) -> Bucket:
            return Bucket()

    doctor = _doctor(google, bucket="gs://kept/rl")
    doctor._storage = Storage()  # soft delete on: fake-gcs-server does not model it
    check = doctor.check_bucket()
    assert check.status == "FAIL" and "7 days" in check.detail
    assert check.fix == "gcloud storage buckets update gs://kept --clear-soft-delete"
    assert _doctor(google).check_bucket().status == "SKIP"


def test_workload_identity(google: tuple[GoogleState, str]) -> None:
    google[0].policies[RUNNER] = []
    check = _doctor(google).check_workload_identity()
    assert check.status == "FAIL"
    assert check.fix == (
        f"gcloud iam service-accounts add-iam-policy-binding {RUNNER} --role=roles/iam.workloadIdentityUser "
        f'--member="serviceAccount:{PROJECT}.svc.id.goog[rlcloud/rlcloud-runner]"'
    )
    # the namespace is part of the member
    google[0].policies[RUNNER] = _wi(RUNNER, "rlcloud/rlcloud-runner")
    assert _doctor(google, namespace="team-a").check_workload_identity().status == "FAIL"
    assert _doctor(google, config=ProjectConfig()).check_workload_identity().status == "SKIP"


def test_reaper(google: tuple[GoogleState, str]) -> None:
    check = _doctor(google, spec=T4_SPOT, config=ProjectConfig(image=IMAGE)).check_reaper()
    assert check.status == "FAIL" and "reaper_service_account" in check.detail
    google[0].policies[REAPER] = []
    assert _doctor(google, spec=T4_SPOT).check_reaper().status == "FAIL"
    del google[0].policies[REAPER]
    google[0].policies["other@x.iam.gserviceaccount.com"] = []
    url = google[1]
    doctor = Doctor(PROJECT, spec=T4_SPOT, config=ProjectConfig(reaper_service_account=REAPER),
                    session=requests.Session(), api_host=url)  # fmt: skip
    check = doctor.check_reaper()
    assert check.status == "FAIL" and "does not exist" in check.detail and "service-accounts create" in check.fix
    assert _doctor(google, spec=ClusterSpec(name="rl")).check_reaper().status == "SKIP"
    assert _doctor(google, config=ProjectConfig()).check_reaper().status == "SKIP"  # no spec, no reaper


def test_images(google: tuple[GoogleState, str]) -> None:
    assert _doctor(google).check_images().ok
    check = _doctor(google, config=ProjectConfig()).check_images()
    assert check.status == "FAIL" and "docs/images.md" in check.fix
    missing = ProjectConfig(image=IMAGE.replace("0.1.0", "9.9.9"))
    check = _doctor(google, config=missing).check_images()
    assert check.status == "FAIL" and "does not exist" in check.detail and "_VARIANT=cpu" in check.fix
    elsewhere = ProjectConfig(image="ghcr.io/me/runner:1")
    assert "not checked" in _doctor(google, config=elsewhere).check_images().detail


def test_cli_prints_each_check_and_fails_when_one_fails(
    google: tuple[GoogleState, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state, url = google
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RLCLOUD_GOOGLE_API_HOST", url)
    (tmp_path / "rlcloud.yaml").write_text(f"project: {PROJECT}\nresults: ./local-results\nimage: {IMAGE}\n")
    state.tags.add("rlcloud/runner-cpu:0.1.0")

    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "OK   apis" in out and "OK   images" in out and "SKIP workload-identity" in out
    state.enabled.discard("compute.googleapis.com")
    assert main(["doctor", "-o", "json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    (apis,) = [r for r in rows if r["check"] == "apis"]
    assert apis["status"] == "FAIL" and apis["fix"].startswith("gcloud services enable compute.googleapis.com")


def test_cluster_gke_doctor(google: tuple[GoogleState, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rlcloud import Cluster

    state, url = google
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RLCLOUD_GOOGLE_API_HOST", url)
    state.region_quotas.clear()
    checks = {c.name: c for c in Cluster.gke(T4_SPOT, project=PROJECT, container_client=object()).doctor()}
    assert checks["gpu-quota"].status == "FAIL" and checks["apis"].ok
    assert checks["images"].status == "FAIL"  # no rlcloud.yaml here: no image
