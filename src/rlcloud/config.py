"""The project config file (``rlcloud.yaml``) that ``rlcloud init`` writes, and the defaults it gives.

Looked up from the current directory upwards, like git. It holds defaults only (project, location,
results, image, credentials *path*); a key file is never copied into the project nor printed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from pydantic import Field, field_validator

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.specs._base import StrictModel
from rlcloud.specs.code import CodeSpec

CONFIG_FILE = "rlcloud.yaml"
# rlcloud publishes no image that every cluster can pull, so the built-in defaults are the tags of images
# built locally from images/ (`docker build -f images/cpu/Dockerfile -t rlcloud-runner-cpu:local .`), for a
# kind or minikube cluster that was loaded with them. Starting on a cluster with no image configured is
# refused (check_cluster_image) rather than left to fail with ImagePullBackOff; local runs use no image.
DEFAULT_IMAGE = "rlcloud-runner-cpu:local"
DEFAULT_GPU_IMAGE = "rlcloud-runner-gpu:local"
IMAGES_DOC = "docs/images.md"


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
    reaper_service_account: str | None = Field(
        None,
        description="Google service account the in-cluster reaper acts as (may only get and delete clusters), e.g. "
        "rlcloud-reaper@my-project.iam.gserviceaccount.com; without it clusters with ttl/autodown get no reaper.",
    )

    code: CodeSpec | None = Field(
        None,
        description="The project code every run takes with it unless its spec says otherwise (code: . packs the "
        "folder of rlcloud.yaml); see rlcloud.specs.code.",
    )

    cpu_hour_usd: float = Field(
        0.0,
        ge=0,
        le=100,
        description="What a CPU-hour on this machine costs you, in USD: local runs' cost so far is their training "
        "time x their processes (the learner, plus env servers) x this rate, and a spec's budget stops a local run "
        "at it. 0 (the default): local runs are free and no budget stops them.",
    )

    @field_validator("credentials")
    @classmethod
    def _credentials(cls, value: str | None) -> str | None:
        if value is not None:
            check_credentials_file(value)
        return value


def check_cluster_image(
    spec_image: str | None, cluster_image: str | None, *, gpu: bool, where: str, config: ProjectConfig | None = None
) -> str:
    """The image pods of a run on a cluster use: the experiment's, else the cluster's, else rlcloud.yaml's
    ``gpu_image`` (GPU clusters) or ``image``. With none of them: SpecError pointing at docs/images.md,
    before anything is created or billed (the built-in default is a local tag no cluster can pull)."""
    config = config or load_project_config()
    key = "gpu_image" if gpu else "image"
    image = spec_image or cluster_image or (config.gpu_image if gpu else config.image)
    if image:
        return image
    raise SpecError(
        [
            SpecProblem(
                "image",
                f"no runner image for {where}: rlcloud has no public image that every cluster can pull. Build "
                f"and push one ({IMAGES_DOC}), then set `{key}:` in {CONFIG_FILE}, or pass image= to the cluster, "
                "or set `image:` in the experiment spec",
            )
        ]
    )


def check_credentials_file(path: str | Path) -> str:
    """Check that ``path`` is a readable Google credentials JSON file; return its type. Never echo its content."""
    p = Path(path).expanduser()
    try:
        if p.stat().st_size > _MAX_KEY_FILE:
            raise SpecError([SpecProblem("credentials", f"{p} is too large to be a credentials file")])
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError([SpecProblem("credentials", f"file not found: {p}")]) from None
    except (OSError, ValueError, RecursionError):
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
    _check_loadable(p, data, str(kind))
    return str(kind)


#: A key file is ~2.4 KB; anything over 64 KiB is not one (and is not read whole to find out).
_MAX_KEY_FILE = 64 * 1024


def _check_loadable(path: Path, data: dict[str, object], kind: str) -> None:
    """Build the credentials the way ``google_credentials`` will, so that a broken key (a truncated or
    edited ``private_key``) fails at ``rlcloud init`` instead of crashing ``cluster list`` later. The
    error names the file and the field, never the key: google-auth's own messages may quote it."""
    try:
        if kind == "service_account":
            from google.oauth2 import service_account

            service_account.Credentials.from_service_account_info(data)
        elif kind == "authorized_user":
            from google.oauth2 import credentials as user_credentials

            user_credentials.Credentials.from_authorized_user_info(data)
    except ImportError:  # pragma: no cover - google-auth is a dependency; without it the pods report it
        return
    except Exception as exc:  # ValueError, MalformedError, cryptography's errors: all mean "not usable"
        field = "private_key" if kind == "service_account" else "the authorized-user fields"
        raise SpecError(
            [
                SpecProblem(
                    "credentials",
                    f"{path} is not a usable {kind.replace('_', '-')} key: {field} cannot be loaded "
                    f"({type(exc).__name__}); download a new key file",
                )
            ]
        ) from None


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
    from rlcloud.specs.building import build_model, read_data_file

    path = find_project_config(start)
    if path is None:
        return ProjectConfig()
    data = read_data_file(path) or {}
    config = build_model(ProjectConfig, data, source=str(path))
    if config.code is not None:  # relative to rlcloud.yaml, wherever the command runs
        folder = (path.parent / Path(config.code.path).expanduser()).resolve()
        config = config.model_copy(update={"code": config.code.model_copy(update={"path": str(folder)})})
    return config


def local_cpu_hour_usd() -> float | None:
    """rlcloud.yaml's ``cpu_hour_usd`` (USD per process-hour on this machine), None when the config is
    unreadable: the rate of a LocalBackend built without :meth:`rlcloud.Cluster.local` (a sweep's trials)."""
    from rlcloud.errors import RLCloudError

    try:
        return load_project_config().cpu_hour_usd
    except RLCloudError:
        return None


def google_credentials(config: ProjectConfig | None = None) -> object | None:
    """Credentials from the project config's key file (cloud-platform scope), or None to use ADC.

    google.auth is imported here, on use only.
    """
    config = config or load_project_config()
    if not config.credentials:
        return None
    import google.auth

    path = Path(config.credentials).expanduser()
    try:
        credentials, _ = google.auth.load_credentials_from_file(
            str(path), scopes=["https://www.googleapis.com/auth/cloud-platform"]
        )
    except Exception as exc:  # a key edited after `rlcloud init`: say which file, never quote it
        from rlcloud.errors import AuthError

        raise AuthError(
            f"the credentials file {path} (rlcloud.yaml) cannot be loaded ({type(exc).__name__}); "
            "check it with `rlcloud init --credentials FILE` or download a new key"
        ) from None
    return cast("object", credentials)
