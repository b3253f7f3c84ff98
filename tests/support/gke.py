"""GKE and Google test helpers: the test project, a doctor over a set-up project, credentials and metadata."""

from __future__ import annotations

import datetime as _dt
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth import _helpers

from rlcloud.config import ProjectConfig
from rlcloud.gke.doctor import Doctor
from rlcloud.specs import ClusterSpec
from tests.fakes.gcs import FakeGcsServer
from tests.fakes.google_apis import FakeGoogleApis, default_compute_account

PROJECT = "rl-test-project"


class NoCredentials:
    """Stands in for google-auth credentials where a test never needs a token (the fake has no auth).

    Any use of it fails loudly, so a test cannot silently reach for Application Default Credentials.
    """

    valid = False

    def refresh(self, request: Any) -> None:
        raise AssertionError("these tests must not refresh credentials")


RUNNER = f"rlcloud-runner@{PROJECT}.iam.gserviceaccount.com"
REAPER = f"rlcloud-reaper@{PROJECT}.iam.gserviceaccount.com"
#: the custom role docs/gke-setup.md step 7 creates for the reaper
REAPER_ROLE = f"projects/{PROJECT}/roles/rlcloudReaper"
REAPER_ROLE_PERMISSIONS = {"container.clusters.get", "container.clusters.delete", "container.operations.get"}
NODES = f"rlcloud-nodes@{PROJECT}.iam.gserviceaccount.com"
IMAGE = f"us-central1-docker.pkg.dev/{PROJECT}/rlcloud/runner-cpu:0.1.0"
GPU_IMAGE = f"us-central1-docker.pkg.dev/{PROJECT}/rlcloud/runner-gpu:0.1.0"
#: what docs/gke-setup.md step 2 grants a CI identity (the bucket role in step 4)
CI_ROLES = {"roles/container.admin", "roles/iam.serviceAccountUser", "roles/storage.objectAdmin"}
T4_SPOT = ClusterSpec(name="rl", gpu_type="nvidia-tesla-t4", spot=True, num_nodes=2, ttl="6h")


def _wi(account: str, ns_sa: str) -> list[dict[str, Any]]:
    member = f"serviceAccount:{PROJECT}.svc.id.goog[{ns_sa}]"
    return [{"role": "roles/iam.workloadIdentityUser", "members": [member]}]


def _doctor(google: FakeGoogleApis, gcs: FakeGcsServer | None = None, **options: Any) -> Doctor:
    """A doctor of a project where everything is set up (a test breaks what it checks)."""
    state = google.state
    state.service_accounts.setdefault(RUNNER, _wi(RUNNER, "rlcloud/rlcloud-runner"))
    state.service_accounts.setdefault(REAPER, _wi(REAPER, "rlcloud-system/rlcloud-reaper"))
    state.tags.update({"rlcloud/runner-cpu:0.1.0", "rlcloud/runner-gpu:0.1.0"})
    if not state.project_policy:
        reader = {"role": "roles/artifactregistry.reader", "members": [f"serviceAccount:{default_compute_account()}"]}
        state.project_policy.extend([reader, {"role": REAPER_ROLE, "members": [f"serviceAccount:{REAPER}"]}])
    state.custom_roles.setdefault(REAPER_ROLE, set(REAPER_ROLE_PERMISSIONS))
    config = options.pop(
        "config",
        ProjectConfig(image=IMAGE, gpu_image=GPU_IMAGE, gcp_service_account=RUNNER, reaper_service_account=REAPER),
    )
    storage = gcs.client() if gcs is not None else None
    return Doctor(PROJECT, config=config, api_host=google.url, storage_client=storage, **options)


def service_account_key(path: Path, project: str) -> Path:
    """A syntactically real service-account key file (its key was never registered anywhere)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": project,
                "private_key_id": "0" * 40,
                "private_key": pem,
                "client_email": f"rlcloud-test@{project}.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": "https://oauth2.googleapis.com/token",
            }
        )
    )
    return path


LOCATION = "us-central1-a"


class _Metadata(http.server.BaseHTTPRequestHandler):
    values: dict[str, str] = {}

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        value = self.values.get(self.path)
        if self.headers.get("Metadata-Flavor") != "Google" or value is None:
            self.send_response(403 if value is not None else 404)
            self.end_headers()
            return
        body = value.encode()
        self.send_response(200)
        self.send_header("Metadata-Flavor", "Google")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def metadata() -> Iterator[str]:
    """A GCE metadata server (the three values the reaper reads); yields host:port."""
    handler = type(
        "Handler",
        (_Metadata,),
        {
            "values": {
                "/computeMetadata/v1/project/project-id": PROJECT,
                "/computeMetadata/v1/instance/attributes/cluster-name": "rl",
                "/computeMetadata/v1/instance/attributes/cluster-location": LOCATION,
            }
        },
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class TokenIssuer:
    """google-auth refresh handler: numbered tokens; the apiserver accepts only the latest."""

    def __init__(self) -> None:
        self.issued: list[str] = []

    def __call__(self, request: Any, scopes: Any = None) -> tuple[str, _dt.datetime]:
        self.issued.append(f"e2e-token-{len(self.issued)}")
        return self.issued[-1], _helpers.utcnow() + _dt.timedelta(hours=1)

    def accepts(self, token: str) -> bool:
        return bool(self.issued) and token == self.issued[-1]
