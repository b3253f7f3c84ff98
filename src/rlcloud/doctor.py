"""``rlcloud doctor``: pre-flight checks of a Google Cloud project, so nothing is billed for a run that cannot work.

Each check answers OK, or FAIL with the one command that fixes it (a SKIP when it does not apply):

* ``apis``: the APIs rlcloud needs are enabled (Service Usage);
* ``permissions``: the caller may create, read and delete clusters (Resource Manager testIamPermissions);
* ``gpu-quota``: the region's quota of the spec's GPU type, and GPUS_ALL_REGIONS, cover the spec (Compute);
* ``bucket``: the results bucket exists and is reachable, and soft delete is off (Cloud Storage);
* ``workload-identity``: the runner's Google service account lets ``PROJECT.svc.id.goog[NS/rlcloud-runner]``
  act as it (IAM);
* ``images``: the runner images named in rlcloud.yaml exist in Artifact Registry;
* ``reaper``: the reaper's Google service account lets ``rlcloud-system/rlcloud-reaper`` act as it (IAM),
  when a spec has a ttl or autodown.

The calls are the services' public REST (JSON) APIs, sent through google-auth's ``AuthorizedSession`` with
Application Default Credentials (Cloud Storage through google-cloud-storage): one client for all, no extra
dependency per service. ``RLCLOUD_GOOGLE_API_HOST`` (or ``api_host=``) sends every REST call to one local
fake instead of Google, without credentials (tests).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlcloud.config import ProjectConfig
from rlcloud.specs.cluster import REGION_RE, ClusterSpec

__all__ = ["Check", "Doctor", "gpu_quota_metric"]

API_HOST_ENV = "RLCLOUD_GOOGLE_API_HOST"
HOSTS = {
    "serviceusage": "https://serviceusage.googleapis.com",
    "cloudresourcemanager": "https://cloudresourcemanager.googleapis.com",
    "compute": "https://compute.googleapis.com",
    "iam": "https://iam.googleapis.com",
    "artifactregistry": "https://artifactregistry.googleapis.com",
}
#: What creating, using and deleting a cluster needs (roles/container.admin holds all of them).
CLUSTER_PERMISSIONS = (
    "container.clusters.create",
    "container.clusters.delete",
    "container.clusters.get",
    "container.clusters.list",
    "container.clusters.update",
    "container.operations.get",
    "container.operations.list",
)
_AR_IMAGE_RE = re.compile(r"^([a-z0-9-]+)-docker\.pkg\.dev/([^/]+)/([^/]+)/(.+?)(?::([\w.-]+))?(?:@.*)?$")
_GPU_QUOTA_NAMES = {
    "nvidia-tesla-p100": "P100",
    "nvidia-tesla-p4": "P4",
    "nvidia-tesla-v100": "V100",
    "nvidia-tesla-t4": "T4",
    "nvidia-l4": "L4",
    "nvidia-tesla-a100": "A100",
    "nvidia-a100-80gb": "A100_80GB",
    "nvidia-h100-80gb": "H100",
    "nvidia-h100-mega-80gb": "H100_MEGA",
    "nvidia-h200-141gb": "H200",
}


@dataclass(frozen=True)
class Check:
    """One check's outcome: ``status`` is OK, FAIL or SKIP; ``fix`` the one command that fixes a FAIL."""

    name: str
    status: str
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        """True unless the check failed."""
        return self.status != "FAIL"

    def __str__(self) -> str:
        line = f"{self.status:<4} {self.name}: {self.detail}"
        return line + (f"\n     fix: {self.fix}" if self.fix else "")


def gpu_quota_metric(gpu_type: str, *, spot: bool) -> str:
    """The regional Compute Engine quota of a GPU type, e.g. ``PREEMPTIBLE_NVIDIA_T4_GPUS`` for Spot T4s."""
    name = _GPU_QUOTA_NAMES.get(gpu_type, gpu_type.removeprefix("nvidia-tesla-").removeprefix("nvidia-").upper())
    return ("PREEMPTIBLE_" if spot else "") + f"NVIDIA_{name.replace('-', '_')}_GPUS"


class Doctor:
    """Pre-flight checks for ``project``: the results ``bucket`` (``gs://b/...`` or a name), an optional cluster
    ``spec``, the project ``config`` (rlcloud.yaml: images, service accounts).

    ``session``: a requests-compatible session for the REST calls (default: google-auth's
    ``AuthorizedSession`` over ``credentials`` or Application Default Credentials); ``storage_client``: a
    ``google.cloud.storage.Client``; ``api_host``: send every REST call there (a local fake).
    """

    def __init__(
        self,
        project: str,
        *,
        bucket: str | None = None,
        spec: ClusterSpec | None = None,
        config: ProjectConfig | None = None,
        namespace: str = "rlcloud",
        credentials: Any = None,
        session: Any = None,
        storage_client: Any = None,
        api_host: str | None = None,
    ) -> None:
        self.project = project
        self.bucket = bucket.removeprefix("gs://").split("/", 1)[0] if bucket else None
        self.spec = spec
        self.config = config or ProjectConfig()
        self.namespace = namespace
        self._credentials = credentials
        self._session = session
        self._storage = storage_client
        self.api_host = api_host or os.environ.get(API_HOST_ENV)

    # ------------------------------------------------------------------------------------------ plumbing

    @property
    def session(self) -> Any:
        """The HTTP session the REST checks use (built on first use)."""
        if self._session is None and self.api_host and self._credentials is None:
            import requests

            # a local fake (like RLCLOUD_GKE_EMULATOR_HOST for the Container API) needs no credentials
            self._session = requests.Session()
        if self._session is None:
            import google.auth
            from google.auth.transport.requests import AuthorizedSession

            credentials = self._credentials
            if credentials is None:
                credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
            self._session = AuthorizedSession(credentials)
        return self._session

    def _url(self, service: str, path: str) -> str:
        return (self.api_host.rstrip("/") if self.api_host else HOSTS[service]) + path

    def _call(self, method: str, service: str, path: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
        response = self.session.request(method, self._url(service, path), timeout=30, **kwargs)
        try:
            body = response.json()
        except ValueError:
            body = {}
        return response.status_code, body if isinstance(body, dict) else {}

    @staticmethod
    def _error(status: int, body: dict[str, Any]) -> str:
        message = str((body.get("error") or {}).get("message") or "")[:200]
        return f"HTTP {status}" + (f": {message}" if message else "")

    # ------------------------------------------------------------------------------------------ checks

    def check_apis(self) -> Check:
        """The APIs rlcloud needs are enabled (Service Usage ``services:batchGet``)."""
        needed = ["container.googleapis.com", "compute.googleapis.com"]
        if self.bucket:
            needed.append("storage.googleapis.com")
        if any(_AR_IMAGE_RE.match(i or "") for i in (self.config.image, self.config.gpu_image)):
            needed.append("artifactregistry.googleapis.com")
        names = [("names", f"projects/{self.project}/services/{s}") for s in needed]
        status, body = self._call("GET", "serviceusage", f"/v1/projects/{self.project}/services:batchGet", params=names)
        if status != 200:
            return Check(
                "apis",
                "FAIL",
                f"cannot read the enabled APIs ({self._error(status, body)})",
                f"gcloud services enable serviceusage.googleapis.com --project={self.project}",
            )
        enabled = {
            s.get("config", {}).get("name") or str(s.get("name", "")).rsplit("/", 1)[-1]
            for s in body.get("services") or []
            if s.get("state") == "ENABLED"
        }
        missing = [s for s in needed if s not in enabled]
        if missing:
            return Check(
                "apis",
                "FAIL",
                f"not enabled: {', '.join(missing)}",
                f"gcloud services enable {' '.join(missing)} --project={self.project}",
            )
        return Check("apis", "OK", f"enabled: {', '.join(needed)}")

    def check_permissions(self) -> Check:
        """The caller holds what creating and deleting clusters needs (``projects:testIamPermissions``)."""
        status, body = self._call(
            "POST",
            "cloudresourcemanager",
            f"/v1/projects/{self.project}:testIamPermissions",
            json={"permissions": list(CLUSTER_PERMISSIONS)},
        )
        if status != 200:
            return Check(
                "permissions",
                "FAIL",
                f"cannot test permissions ({self._error(status, body)})",
                "gcloud auth application-default login",
            )
        missing = sorted(set(CLUSTER_PERMISSIONS) - set(body.get("permissions") or []))
        if missing:
            return Check(
                "permissions",
                "FAIL",
                f"missing {', '.join(missing)}",
                f"gcloud projects add-iam-policy-binding {self.project} --member=user:YOU@example.com "
                "--role=roles/container.admin",
            )
        return Check("permissions", "OK", "may create, read and delete clusters")

    def check_gpu_quota(self) -> Check:
        """The region's quota of the spec's GPU type and GPUS_ALL_REGIONS cover the spec at its largest."""
        spec = self.spec
        if spec is None or not spec.gpus_per_node or spec.gpu_type is None:
            return Check("gpu-quota", "SKIP", "no GPUs in the cluster spec")
        region = spec.location if REGION_RE.match(spec.location) else spec.location.rsplit("-", 1)[0]
        zones = 3 if spec.is_regional else 1
        nodes = spec.autoscaling.max_nodes if spec.autoscaling else spec.num_nodes
        need = spec.gpus_per_node * nodes * zones
        metric = gpu_quota_metric(spec.gpu_type.value, spot=spec.spot)
        fix = f"request more in the Console: https://console.cloud.google.com/iam-admin/quotas?project={self.project}"
        checks: list[tuple[str, str]] = [(f"/compute/v1/projects/{self.project}/regions/{region}", metric)]
        checks.append((f"/compute/v1/projects/{self.project}", "GPUS_ALL_REGIONS"))
        found = []
        for path, name in checks:
            status, body = self._call("GET", "compute", path)
            if status != 200:
                return Check(
                    "gpu-quota",
                    "FAIL",
                    f"cannot read quotas ({self._error(status, body)})",
                    f"gcloud services enable compute.googleapis.com --project={self.project}",
                )
            quota = next((q for q in body.get("quotas") or [] if q.get("metric") == name), None)
            limit = float(quota.get("limit", 0)) if quota else 0.0
            usage = float(quota.get("usage", 0)) if quota else 0.0
            if limit - usage < need:
                where = f" in {region}" if "regions" in path else ""
                return Check(
                    "gpu-quota",
                    "FAIL",
                    f"{name}{where}: {limit - usage:g} free of {limit:g}, the spec needs {need}",
                    fix,
                )
            found.append(f"{name} {limit - usage:g} free")
        return Check("gpu-quota", "OK", f"{'; '.join(found)} (needs {need})")

    def check_bucket(self) -> Check:
        """The results bucket exists and is reachable; soft delete is off (it bills every pruned checkpoint)."""
        if not self.bucket:
            return Check("bucket", "SKIP", "no gs:// results bucket given")
        from google.api_core import exceptions as gexc

        if self._storage is None:
            from google.cloud import storage

            self._storage = storage.Client(project=self.project, credentials=self._credentials)
        try:
            bucket = self._storage.get_bucket(self.bucket)
        except gexc.NotFound:
            return Check(
                "bucket",
                "FAIL",
                f"gs://{self.bucket} does not exist",
                f"gcloud storage buckets create gs://{self.bucket} --project={self.project} "
                "--uniform-bucket-level-access --soft-delete-duration=0",
            )
        except gexc.GoogleAPICallError as exc:
            return Check(
                "bucket",
                "FAIL",
                f"gs://{self.bucket} cannot be read ({exc.code})",
                f"gcloud storage buckets add-iam-policy-binding gs://{self.bucket} "
                "--member=user:YOU@example.com --role=roles/storage.objectAdmin",
            )
        seconds = int((bucket._properties.get("softDeletePolicy") or {}).get("retentionDurationSeconds") or 0)
        if seconds:
            return Check(
                "bucket",
                "FAIL",
                f"gs://{self.bucket}: soft delete keeps deleted objects {seconds // 86400} days "
                "(billed): every pruned checkpoint costs that much more",
                f"gcloud storage buckets update gs://{self.bucket} --clear-soft-delete",
            )
        return Check("bucket", "OK", f"gs://{self.bucket} reachable, soft delete off")

    def _wi_check(self, name: str, account: str | None, member: str, missing: str) -> Check:
        if not account:
            return Check(name, "SKIP", missing)
        path = f"/v1/projects/{self.project}/serviceAccounts/{account}:getIamPolicy"
        status, body = self._call("POST", "iam", path, json={})
        fix = (
            f"gcloud iam service-accounts add-iam-policy-binding {account} --role=roles/iam.workloadIdentityUser "
            f'--member="{member}"'
        )
        if status == 404:
            return Check(
                name,
                "FAIL",
                f"service account {account} does not exist",
                f"gcloud iam service-accounts create {account.split('@')[0]} --project={self.project}",
            )
        if status != 200:
            return Check(name, "FAIL", f"cannot read the IAM policy of {account} ({self._error(status, body)})", fix)
        for binding in body.get("bindings") or []:
            if binding.get("role") == "roles/iam.workloadIdentityUser" and member in (binding.get("members") or []):
                return Check(name, "OK", f"{member} may act as {account}")
        return Check(name, "FAIL", f"{member} may not act as {account}", fix)

    def check_workload_identity(self) -> Check:
        """The runner pods' Kubernetes ServiceAccount may act as ``gcp_service_account``."""
        member = f"serviceAccount:{self.project}.svc.id.goog[{self.namespace}/rlcloud-runner]"
        return self._wi_check(
            "workload-identity", self.config.gcp_service_account, member, "no gcp_service_account in rlcloud.yaml"
        )

    def check_reaper(self) -> Check:
        """The in-cluster reaper's Kubernetes ServiceAccount may act as ``reaper_service_account``."""
        if self.spec is not None and self.spec.ttl is None and self.spec.autodown is None:
            return Check("reaper", "SKIP", "the cluster spec has no ttl or autodown")
        if self.spec is None and not self.config.reaper_service_account:
            return Check("reaper", "SKIP", "no reaper_service_account in rlcloud.yaml (needed for ttl/autodown)")
        member = f"serviceAccount:{self.project}.svc.id.goog[rlcloud-system/rlcloud-reaper]"
        check = self._wi_check("reaper", self.config.reaper_service_account, member, "")
        if check.status == "SKIP":
            return Check(
                "reaper",
                "FAIL",
                "no reaper_service_account in rlcloud.yaml: ttl/autodown act only through `rlcloud cluster reap`",
                "see docs/gke-setup.md#7-teardown-inside-the-cluster",
            )
        return check

    def check_images(self) -> Check:
        """The runner images named in rlcloud.yaml exist (Artifact Registry images are looked up by tag)."""
        images = [i for i in (self.config.image, self.config.gpu_image) if i]
        if not images:
            return Check(
                "images",
                "FAIL",
                "no image in rlcloud.yaml: a cluster run has no image to pull",
                "build and push one (docs/images.md), then set image: and gpu_image: in rlcloud.yaml",
            )
        seen = []
        for image in images:
            match = _AR_IMAGE_RE.match(image)
            if not match:
                seen.append(f"{image} (not in Artifact Registry: not checked)")
                continue
            location, project, repository, package, tag = match.groups()
            package_id = package.replace("/", "%2F")
            path = (
                f"/v1/projects/{project}/locations/{location}/repositories/{repository}/packages/{package_id}"
                f"/tags/{tag or 'latest'}"
            )
            status, body = self._call("GET", "artifactregistry", path)
            if status == 404:
                return Check(
                    "images",
                    "FAIL",
                    f"{image} does not exist",
                    "gcloud builds submit --config images/cloudbuild.yaml --substitutions=_VARIANT="
                    f"{'gpu' if image == self.config.gpu_image else 'cpu'} .",
                )
            if status != 200:
                return Check(
                    "images",
                    "FAIL",
                    f"cannot look up {image} ({self._error(status, body)})",
                    f"gcloud services enable artifactregistry.googleapis.com --project={project}",
                )
            seen.append(image)
        return Check("images", "OK", ", ".join(seen))

    def checks(self, *, cheap_only: bool = False) -> list[Callable[[], Check]]:
        """The checks in the order they run; ``cheap_only``: those worth running before every create."""
        cheap = [self.check_apis, self.check_permissions, self.check_gpu_quota, self.check_images]
        if cheap_only:
            return list(cheap)
        return [*cheap, self.check_bucket, self.check_workload_identity, self.check_reaper]

    def run(self, *, cheap_only: bool = False) -> list[Check]:
        """Run the checks; a check that raises is reported as FAIL, never raised."""
        results = []
        for check in self.checks(cheap_only=cheap_only):
            try:
                results.append(check())
            except Exception as exc:  # one broken check must not hide the others
                name = check.__name__.removeprefix("check_").replace("_", "-")
                results.append(Check(name, "FAIL", f"{type(exc).__name__}: {str(exc)[:200]}"))
        return results
