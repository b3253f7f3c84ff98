"""The project config file (``rlcloud.yaml``) that ``rlcloud init`` writes, and the defaults it gives.

Looked up from the current directory upwards, like git. It holds defaults only (project, location,
results, image, credentials *path*); a key file is never copied into the project nor printed.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field, field_validator

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.specs._base import StrictModel

CONFIG_FILE = "rlcloud.yaml"
DEFAULT_IMAGE = "us-docker.pkg.dev/rlcloud/rlcloud/runner-cpu:0.1.0"
DEFAULT_GPU_IMAGE = "us-docker.pkg.dev/rlcloud/rlcloud/runner-gpu:0.1.0"


class ProjectConfig(StrictModel):
    """Defaults for every command run inside an rlcloud project directory."""

    project: str | None = Field(
        None, description="Google Cloud project id (else from Application Default Credentials)."
    )
    location: str | None = Field(None, description="Default zone or region for clusters.")
    results: str | None = Field(None, description="Default results root: gs://bucket/prefix or a directory.")
    image: str | None = Field(None, description="Default runner image for CPU pods.")
    gpu_image: str | None = Field(None, description="Default runner image for GPU pods.")
    credentials: str | None = Field(
        None, description="Path to a service-account key file (checked by `rlcloud init`, never copied)."
    )
    gcp_service_account: str | None = Field(
        None,
        description="Google service account the pods act as through Workload Identity (preferred for results "
        "in GCS), e.g. rlcloud-runner@my-project.iam.gserviceaccount.com.",
    )
    credentials_secret: str | None = Field(
        None, description="Instead of Workload Identity: a Kubernetes Secret holding a key file, mounted read-only."
    )

    @field_validator("credentials")
    @classmethod
    def _credentials(cls, value: str | None) -> str | None:
        if value is not None:
            check_credentials_file(value)
        return value


def check_credentials_file(path: str | Path) -> str:
    """Check that ``path`` is a readable Google credentials JSON file; return its type. Never echo its content."""
    p = Path(path).expanduser()
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError([SpecProblem("credentials", f"file not found: {p}")]) from None
    except (OSError, ValueError):
        # the message must not quote the file: it may hold a private key
        raise SpecError([SpecProblem("credentials", f"{p} is not a readable JSON credentials file")]) from None
    kind = data.get("type") if isinstance(data, dict) else None
    if kind not in ("service_account", "authorized_user", "external_account", "impersonated_service_account"):
        raise SpecError(
            [
                SpecProblem(
                    "credentials",
                    f"{p} is not a Google credentials file (expected a service-account key or an authorized-user "
                    "file from `gcloud auth application-default login`)",
                )
            ]
        )
    if kind == "service_account" and not {"client_email", "private_key", "project_id"} <= set(data):
        raise SpecError([SpecProblem("credentials", f"{p} is an incomplete service-account key")])
    return str(kind)


def find_project_config(start: str | Path | None = None) -> Path | None:
    """The nearest rlcloud.yaml from ``start`` (default: cwd) upwards, or None."""
    here = Path(start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / CONFIG_FILE
        if candidate.is_file():
            return candidate
    return None


def load_project_config(start: str | Path | None = None) -> ProjectConfig:
    """The project config in effect here (empty defaults outside an rlcloud project)."""
    from rlcloud.specs.loading import build_model, read_data_file

    path = find_project_config(start)
    if path is None:
        return ProjectConfig()
    data = read_data_file(path) or {}
    return build_model(ProjectConfig, data, source=str(path))


def google_credentials(config: ProjectConfig | None = None) -> object | None:
    """Credentials from the project config's key file (cloud-platform scope), or None to use ADC.

    google.auth is imported here, on use only.
    """
    config = config or load_project_config()
    if not config.credentials:
        return None
    import google.auth

    credentials, _ = google.auth.load_credentials_from_file(
        str(Path(config.credentials).expanduser()), scopes=["https://www.googleapis.com/auth/cloud-platform"]
    )
    return credentials
