"""``rlcloud doctor``: pre-flight checks of a Google Cloud project, so nothing is billed for a run that cannot work.

Each check answers OK, or FAIL with the one command that fixes it (SKIP when it does not apply, WARN when it
could not tell and refuses nothing):

* ``apis``: the APIs rlcloud needs are enabled (Service Usage);
* ``permissions``: the caller may create, read and delete clusters (Resource Manager testIamPermissions);
* ``gpu-quota``: the region's quota of the spec's GPU type, and GPUS_ALL_REGIONS, cover the spec (Compute);
* ``bucket``: the results bucket exists and is reachable, and soft delete is off (Cloud Storage);
* ``workload-identity``: the runner's Google service account lets ``PROJECT.svc.id.goog[NS/rlcloud-runner]``
  act as it (IAM);
* ``images``: the runner images exist in Artifact Registry, and the cluster's nodes may pull them: their
  service account (the spec's ``service_account``, else the project's default Compute Engine account) holds
  ``roles/artifactregistry.reader`` or a role that includes it on the repository or its project;
* ``reaper``: the reaper's Google service account lets ``rlcloud-system/rlcloud-reaper`` act as it (IAM), and
  the roles the project binds to it hold what the reaper calls (:data:`REAPER_PERMISSIONS`), when a spec has a
  ttl, an autodown or a budget (a cluster's budget deletes it). Creating a cluster with a budget runs it with
  the cheap checks: a budget that could not delete the cluster refuses the create.

Each service is called through its official client library (google-cloud-service-usage,
-resource-manager, -compute, -iam, -artifact-registry, -storage), imported inside the check that uses it:
REST transports, and gRPC for IAM, whose admin client has no REST transport. Credentials are Application
Default Credentials unless given. ``RLCLOUD_GOOGLE_API_HOST`` (or ``api_host=``), e.g.
``http://127.0.0.1:8080``, sends every call but Cloud Storage's to one local fake instead of Google, without
credentials (tests): the REST clients as HTTP/1.1 and the IAM client as plaintext gRPC (HTTP/2) to the same
address. Cloud Storage follows ``STORAGE_EMULATOR_HOST`` or ``storage_client=``.

``Doctor.run(cheap_only=True)`` (APIs, permissions, GPU quota, images: a few requests) is what creating a
cluster runs first (:meth:`rlcloud.gke.GkeCluster.create`).

``python -m rlcloud.gke.doctor probe`` runs the smoke test's in-pod program (:mod:`rlcloud.gke.probe`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rlcloud.config import ProjectConfig
from rlcloud.gke.checks import (
    _AR_IMAGE_RE,
    _TIMEOUT,
    PULL_ROLES,
    SEE_APIS,
    SEE_BUCKET,
    SEE_POLICIES,
    SEE_PROJECT,
    SEE_QUOTAS,
    Check,
    _CheckFailedError,
    _describe,
    _grants,
)
from rlcloud.gke.doctor_images import check_images
from rlcloud.specs.cluster import REGION_RE, ClusterSpec

__all__ = [
    "API_HOST_ENV",
    "PULL_ROLES",
    "REAPER_PERMISSIONS",
    "Check",
    "Doctor",
    "doctor_for",
    "gpu_quota_metric",
]

API_HOST_ENV = "RLCLOUD_GOOGLE_API_HOST"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
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
#: What the in-cluster reaper asks the Container API (rlcloud.gke.reaper.run_once: get_cluster, then delete_cluster)
REAPER_PERMISSIONS = ("container.clusters.get", "container.clusters.delete")
#: APIs that only the doctor calls, to look: rlcloud runs without them
_DOCTOR_ONLY_APIS = frozenset({"serviceusage.googleapis.com", "cloudresourcemanager.googleapis.com"})
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


def gpu_quota_metric(gpu_type: str, *, spot: bool) -> str:
    """The regional Compute Engine quota of a GPU type, e.g. ``PREEMPTIBLE_NVIDIA_T4_GPUS`` for Spot T4s."""
    name = _GPU_QUOTA_NAMES.get(gpu_type, gpu_type.removeprefix("nvidia-tesla-").removeprefix("nvidia-").upper())
    return ("PREEMPTIBLE_" if spot else "") + f"NVIDIA_{name.replace('-', '_')}_GPUS"


def _quota(quotas: Any, name: str) -> tuple[float, float]:
    """``(limit, free)`` of the quota ``name`` among Compute's ``quotas`` (absent: none, 0 of 0)."""
    quota = next((q for q in quotas if q.metric == name), None)
    if quota is None:
        return 0.0, 0.0
    return float(quota.limit), float(quota.limit) - float(quota.usage)


def _metric_in_use(regional: Any, metric: str) -> tuple[str, str]:
    """The regional quota a node pool draws on, and a note saying why when it is not ``metric`` itself.

    Spot VMs use the preemptible quota when the project has one, and the standard quota otherwise
    ("Create and use Spot VMs", cloud.google.com/compute/docs/instances/create-use-spot: preemptible quota
    keeps Spot VMs from consuming the standard one): a project whose ``PREEMPTIBLE_NVIDIA_T4_GPUS`` is 0 or
    absent runs Spot T4s on ``NVIDIA_T4_GPUS``.
    """
    if not metric.startswith("PREEMPTIBLE_") or _quota(regional, metric)[0] > 0:
        return metric, ""
    standard = metric.removeprefix("PREEMPTIBLE_")
    return standard, f" (no {metric} quota: Spot VMs use {standard}; request either)"


def _service_account_path(account: str) -> str:
    """The resource name of a service account: under its own project when the email names it, so that a
    missing account is 404; ``projects/-`` answers 403 for one that does not exist (IAM reference,
    projects.serviceAccounts.get)."""
    domain = account.partition("@")[2]
    project = domain.removesuffix(".iam.gserviceaccount.com") if domain.endswith(".iam.gserviceaccount.com") else "-"
    return f"projects/{project}/serviceAccounts/{account}"


class Doctor:
    """Pre-flight checks for ``project``: the results ``bucket`` (``gs://b/...`` or a name), an optional cluster
    ``spec``, the project ``config`` (rlcloud.yaml: images, service accounts).

    ``images``: the runner images to check (default: rlcloud.yaml's ``image`` and ``gpu_image``, and a FAIL
    when it names none; an explicit empty list is a SKIP: each experiment names its own).
    ``credentials``: google-auth credentials (default: Application Default Credentials, looked up on first
    use); ``storage_client``: a ``google.cloud.storage.Client``; ``api_host``: send every other call there (a
    local fake, default ``$RLCLOUD_GOOGLE_API_HOST``), without credentials.
    """

    def __init__(
        self,
        project: str,
        *,
        bucket: str | None = None,
        spec: ClusterSpec | None = None,
        config: ProjectConfig | None = None,
        images: Sequence[str] | None = None,
        namespace: str = "rlcloud",
        credentials: Any = None,
        storage_client: Any = None,
        api_host: str | None = None,
    ) -> None:
        self.project = project
        self.bucket = bucket.removeprefix("gs://").split("/", 1)[0] if bucket else None
        self.spec = spec
        self.config = config or ProjectConfig()
        self.images = list(images) if images is not None else None
        self.namespace = namespace
        self._credentials = credentials
        self._storage = storage_client
        host = api_host or os.environ.get(API_HOST_ENV) or None
        self.api_host = host if host is None or "://" in host else f"http://{host}"

    # ------------------------------------------------------------------------------------------ clients

    def _google_credentials(self) -> Any:
        if self._credentials is None:
            import google.auth

            self._credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
        return self._credentials

    @contextmanager
    def _client(self, client_class: Any) -> Iterator[Any]:
        """A REST client of ``client_class`` (a generated GAPIC client), closed after use."""
        if self.api_host:
            from google.auth.credentials import AnonymousCredentials

            # the generated REST transports take an http:// endpoint as it is: a local fake, no TLS, no token
            client = client_class(
                credentials=AnonymousCredentials(), transport="rest", client_options={"api_endpoint": self.api_host}
            )
        else:
            client = client_class(credentials=self._google_credentials(), transport="rest")
        with client:
            yield client

    @contextmanager
    def _iam_client(self) -> Iterator[Any]:
        """The IAM admin client (service accounts' policies): gRPC, the only transport it has."""
        from google.cloud import iam_admin_v1

        if self.api_host:
            import grpc
            from google.cloud.iam_admin_v1.services.iam.transports import IAMGrpcTransport

            address = self.api_host.split("://", 1)[1].rstrip("/")
            client = iam_admin_v1.IAMClient(transport=IAMGrpcTransport(channel=grpc.insecure_channel(address)))
        else:
            client = iam_admin_v1.IAMClient(credentials=self._google_credentials())
        with client:
            yield client

    def _failure(
        self,
        name: str,
        exc: BaseException,
        what: str,
        *,
        api: str,
        denied: str,
        not_found: tuple[str, str] | None = None,
        observe: str | None = None,
    ) -> Check:
        """The FAIL for a call that raised ``exc`` while ``what``: the fix for its cause (no credentials, API
        disabled, permission denied, not found), or what it said when it is none of those.

        ``observe``: the call only looks (rlcloud itself never needs what it reads), and this role lets the
        caller see: a permission denied is then a WARN ("cannot tell") with the grant, never a FAIL, so that a
        narrowly granted identity (docs/gke-setup.md step 2) is not refused a cluster it may create.
        """
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc

        login = "gcloud auth application-default login"
        if isinstance(exc, auth_exc.GoogleAuthError | gexc.Unauthenticated | gexc.Unauthorized):
            return Check(name, "FAIL", f"cannot {what}: no usable Google credentials ({_describe(exc)})", login)
        if isinstance(exc, gexc.NotFound) and not_found is not None:
            return Check(name, "FAIL", not_found[0], not_found[1])
        if isinstance(exc, gexc.PermissionDenied | gexc.Forbidden) and "quota project" in str(exc):
            # user ADC without a quota project: Service Usage, Resource Manager and others refuse them, saying
            # SERVICE_DISABLED for gcloud's own client project, which is not the fix
            # (cloud.google.com/docs/authentication/adc-troubleshooting/user-creds)
            return Check(
                name,
                "WARN" if observe else "FAIL",
                f"cannot {what}: {api} needs a quota project for user credentials, and the Application Default "
                "Credentials name none",
                f"gcloud auth application-default set-quota-project {self.project}",
            )
        if isinstance(exc, gexc.PermissionDenied | gexc.Forbidden):
            text = str(exc)
            if (
                getattr(exc, "reason", None) == "SERVICE_DISABLED"
                or "has not been used" in text
                or "is disabled" in text
            ):
                # an API only the doctor calls (rlcloud never needs it to run) being off is no reason to refuse
                status = "WARN" if observe and api in _DOCTOR_ONLY_APIS else "FAIL"
                return Check(
                    name,
                    status,
                    f"cannot {what}: {api} is not enabled",
                    f"gcloud services enable {api} --project={self.project}",
                )
            if observe:
                return Check(
                    name,
                    "WARN",
                    f"cannot tell: permission denied to {what} ({_describe(exc)}); grant {observe} to see",
                    self._grant_fix(observe),
                )
            return Check(name, "FAIL", f"cannot {what}: permission denied ({_describe(exc)})", denied)
        # an API error of another kind (say, 400 or 503) may mean a disabled or unreachable service; anything
        # else (a refused connection, a timeout) has no command that fixes it
        enable = f"gcloud services enable {api} --project={self.project}"
        fix = enable if isinstance(exc, gexc.GoogleAPICallError) else ""
        return Check(name, "FAIL", f"cannot {what} ({_describe(exc)})", fix)

    @contextmanager
    def _calling(self, name: str, what: str, **fixes: Any) -> Iterator[None]:
        """Turn an exception of the calls inside into the check's FAIL (raised as :class:`_CheckFailedError`)."""
        try:
            yield
        except _CheckFailedError:
            raise
        except Exception as exc:  # every API, auth and transport error becomes the check's answer
            raise _CheckFailedError(self._failure(name, exc, what, **fixes)) from exc

    # ------------------------------------------------------------------------------------------ checks

    def check_apis(self) -> Check:
        """The APIs rlcloud needs are enabled (Service Usage ``services:batchGet``)."""
        needed = ["container.googleapis.com", "compute.googleapis.com"]
        if self.bucket:
            needed.append("storage.googleapis.com")
        if any(_AR_IMAGE_RE.match(i) for i in self._images()):
            needed.append("artifactregistry.googleapis.com")
        if self.spec is not None or self.config.gcp_service_account or self.config.reaper_service_account:
            # IAM: the node account's actAs test and the Workload Identity checks; IAM Credentials: a pod acting
            # as a Google service account through Workload Identity gets its tokens from it
            # (cloud.google.com/kubernetes-engine/docs/how-to/workload-identity: "Enable the IAM Service
            # Account Credentials API")
            needed.append("iam.googleapis.com")
        if self.config.gcp_service_account or self.config.reaper_service_account:
            needed.append("iamcredentials.googleapis.com")
        from google.cloud import service_usage_v1

        try:
            with (
                self._calling(
                    "apis",
                    "read the enabled APIs",
                    api="serviceusage.googleapis.com",
                    denied=self._grant_fix(SEE_APIS),
                    observe=SEE_APIS,
                ),
                self._client(service_usage_v1.ServiceUsageClient) as client,
            ):
                response = client.batch_get_services(
                    request={
                        "parent": f"projects/{self.project}",
                        "names": [f"projects/{self.project}/services/{s}" for s in needed],
                    },
                    timeout=_TIMEOUT,
                )
        except _CheckFailedError as failed:
            return failed.check
        enabled = {
            s.config.name or s.name.rsplit("/", 1)[-1]
            for s in response.services
            if s.state == service_usage_v1.State.ENABLED
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

    def _grant_fix(self, role: str) -> str:
        return f"gcloud projects add-iam-policy-binding {self.project} --member=user:YOU@example.com --role={role}"

    def check_permissions(self) -> Check:
        """The caller holds what creating and deleting clusters needs (``projects:testIamPermissions``)."""
        from google.cloud import resourcemanager_v3

        try:
            with (
                self._calling(
                    "permissions",
                    "test permissions",
                    api="cloudresourcemanager.googleapis.com",
                    denied="gcloud auth application-default login",
                    not_found=(
                        f"project {self.project} does not exist or is not visible to these credentials",
                        "gcloud projects list",
                    ),
                ),
                self._client(resourcemanager_v3.ProjectsClient) as client,
            ):
                response = client.test_iam_permissions(
                    request={"resource": f"projects/{self.project}", "permissions": list(CLUSTER_PERMISSIONS)},
                    timeout=_TIMEOUT,
                )
        except _CheckFailedError as failed:
            return failed.check
        missing = sorted(set(CLUSTER_PERMISSIONS) - set(response.permissions))
        if missing:
            return Check(
                "permissions", "FAIL", f"missing {', '.join(missing)}", self._grant_fix("roles/container.admin")
            )
        if self.spec is None:
            return Check("permissions", "OK", "may create, read and delete clusters")
        return self._act_as_nodes()

    def _act_as_nodes(self) -> Check:
        """The caller may act as the node service account: creating a cluster needs
        ``iam.serviceAccounts.actAs`` on it ("GKE API permissions", projects.locations.clusters.create:
        cloud.google.com/kubernetes-engine/docs/reference/api-permissions), granted on the account itself or on
        the project (IAM ``serviceAccounts.testIamPermissions``, which needs no permission to call)."""
        from google.iam.v1 import iam_policy_pb2

        try:
            account = self._node_account()
        except _CheckFailedError as failed:  # the project's number could not be read: cannot tell which account
            return Check("permissions", "WARN", failed.check.detail, failed.check.fix)
        fix = (
            f"gcloud iam service-accounts add-iam-policy-binding {account} --member=user:YOU@example.com "
            f"--role=roles/iam.serviceAccountUser --project={self.project}"
        )
        try:
            with (
                self._calling(
                    "permissions",
                    f"test iam.serviceAccounts.actAs on the node service account {account}",
                    api="iam.googleapis.com",
                    denied=f"check that {account} exists: gcloud iam service-accounts describe {account}",
                    not_found=(
                        f"the node service account {account} does not exist",
                        f"gcloud iam service-accounts create {account.split('@')[0]} --project={self.project}",
                    ),
                ),
                self._iam_client() as client,
            ):
                request = iam_policy_pb2.TestIamPermissionsRequest(
                    resource=_service_account_path(account), permissions=["iam.serviceAccounts.actAs"]
                )
                response = client.test_iam_permissions(request=request, timeout=_TIMEOUT)
        except _CheckFailedError as failed:
            return failed.check
        if "iam.serviceAccounts.actAs" not in response.permissions:
            return Check(
                "permissions",
                "FAIL",
                f"may not act as the node service account {account} (iam.serviceAccounts.actAs): GKE refuses the "
                "cluster",
                fix,
            )
        return Check("permissions", "OK", f"may create, read and delete clusters, with nodes as {account}")

    def check_gpu_quota(self) -> Check:
        """The region's quota of the spec's GPU type and GPUS_ALL_REGIONS cover the spec at its largest
        (Compute ``regions.get`` and ``projects.get``)."""
        spec = self.spec
        if spec is None or not spec.gpus_per_node or spec.gpu_type is None:
            return Check("gpu-quota", "SKIP", "no GPUs in the cluster spec")
        region = spec.location if REGION_RE.match(spec.location) else spec.location.rsplit("-", 1)[0]
        # a regional cluster's GPU pool is in its node_locations, else in the one zone rlcloud picks
        # (gke/zones.py); a zonal cluster's in its zone
        zones = len(spec.node_locations) or 1
        nodes = spec.autoscaling.max_nodes if spec.autoscaling else spec.num_nodes
        need = spec.gpus_per_node * nodes * zones
        metric = gpu_quota_metric(spec.gpu_type.value, spot=spec.spot)
        from google.cloud import compute_v1

        try:
            with self._calling(
                "gpu-quota",
                "read quotas",
                api="compute.googleapis.com",
                denied=self._grant_fix(SEE_QUOTAS),
                observe=SEE_QUOTAS,
                not_found=(f"region {region} does not exist", "gcloud compute regions list"),
            ):
                with self._client(compute_v1.RegionsClient) as regions:
                    regional = regions.get(project=self.project, region=region, timeout=_TIMEOUT).quotas
                with self._client(compute_v1.ProjectsClient) as projects:
                    overall = projects.get(project=self.project, timeout=_TIMEOUT).quotas
        except _CheckFailedError as failed:
            return failed.check
        fix = f"request more in the Console: https://console.cloud.google.com/iam-admin/quotas?project={self.project}"
        if spec.capacity:
            return self._ladder_quota(spec.gpu_type.value, need, regional, overall, fix)
        found = []
        metric, note = _metric_in_use(regional, metric)
        # a metric Compute does not define (on-demand H100, H100 Mega, H200: Cloud Quotas only) is absent from
        # regions.get however much quota the project has: unknown, not 0
        unreported = all(q.metric != metric for q in regional) and metric not in compute_v1.Quota.Metric.__members__
        for quotas, name, where in ((regional, metric, f" in {region}"), (overall, "GPUS_ALL_REGIONS", "")):
            if name == metric and unreported:
                continue
            limit, free = _quota(quotas, name)
            if free < need:
                why = note or (" (Spot VMs use the preemptible quota when the project has one)" if spec.spot else "")
                detail = f"{name}{where}: {free:g} free of {limit:g}, the spec needs {need}"
                return Check("gpu-quota", "FAIL", detail + (why if name == metric else ""), fix)
            found.append(f"{name} {free:g} free")
        if unreported:
            return Check(
                "gpu-quota",
                "WARN",
                f"Compute reports no quota metric for {spec.gpu_type.value} ({metric} in {region}); check the "
                f"console (the spec needs {need}); {'; '.join(found)}",
                fix,
            )
        return Check("gpu-quota", "OK", f"{'; '.join(found)} (needs {need}){note}")

    def _ladder_quota(self, gpu: str, need: int, regional: Any, overall: Any, fix: str) -> Check:
        """check_gpu_quota for a spec with a capacity ladder: each rung's quota and price (gke/capacity.py)."""
        from google.cloud import compute_v1

        from rlcloud.gke.capacity import ladder_quota_check

        def quota_of(rung: str) -> tuple[str, float | None]:
            metric, _ = _metric_in_use(regional, gpu_quota_metric(gpu, spot=rung != "on-demand"))
            known = any(q.metric == metric for q in regional) or metric in compute_v1.Quota.Metric.__members__
            return metric, _quota(regional, metric)[1] if known else None

        assert self.spec is not None
        status, detail = ladder_quota_check(self.spec, need, quota_of)
        limit, free = _quota(overall, "GPUS_ALL_REGIONS")
        if free < need:
            return Check("gpu-quota", "FAIL", f"GPUS_ALL_REGIONS: {free:g} free of {limit:g}, needs {need}", fix)
        return Check("gpu-quota", status, f"{detail}; GPUS_ALL_REGIONS {free:g} free", "" if status == "OK" else fix)

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
        except (gexc.Forbidden, gexc.PermissionDenied) as exc:
            # storage.buckets.get is not in roles/storage.objectAdmin, the role a CI identity has on the bucket
            return Check(
                "bucket",
                "WARN",
                f"cannot tell whether gs://{self.bucket} exists and has soft delete off: permission denied "
                f"({exc.code}, storage.buckets.get); grant {SEE_BUCKET} on the bucket to see",
                f"gcloud storage buckets add-iam-policy-binding gs://{self.bucket} "
                f"--member=user:YOU@example.com --role={SEE_BUCKET}",
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
        """``member`` may act as the Google service account ``account`` (IAM ``serviceAccounts.getIamPolicy``)."""
        if not account:
            return Check(name, "SKIP", missing)
        fix = (
            f"gcloud iam service-accounts add-iam-policy-binding {account} --role=roles/iam.workloadIdentityUser "
            f'--member="{member}"'
        )
        from google.iam.v1 import iam_policy_pb2

        try:
            with (
                self._calling(
                    name,
                    f"read the IAM policy of {account}",
                    api="iam.googleapis.com",
                    denied=fix,
                    not_found=(
                        f"service account {account} does not exist",
                        f"gcloud iam service-accounts create {account.split('@')[0]} --project={self.project}",
                    ),
                    observe=SEE_POLICIES,
                ),
                self._iam_client() as client,
            ):
                request = iam_policy_pb2.GetIamPolicyRequest(resource=_service_account_path(account))
                policy = client.get_iam_policy(request=request, timeout=_TIMEOUT)
        except _CheckFailedError as failed:
            return failed.check
        if _grants(policy.bindings, member, frozenset({"roles/iam.workloadIdentityUser"})):
            return Check(name, "OK", f"{member} may act as {account}")
        return Check(name, "FAIL", f"{member} may not act as {account}", fix)

    def check_workload_identity(self) -> Check:
        """The runner pods' Kubernetes ServiceAccount may act as ``gcp_service_account``."""
        member = f"serviceAccount:{self.project}.svc.id.goog[{self.namespace}/rlcloud-runner]"
        return self._wi_check(
            "workload-identity", self.config.gcp_service_account, member, "no gcp_service_account in rlcloud.yaml"
        )

    def check_reaper(self) -> Check:
        """The in-cluster reaper's Kubernetes ServiceAccount may act as ``reaper_service_account``, which may get
        and delete the cluster: for a spec with a ttl, an autodown or a budget."""
        spec = self.spec
        if spec is not None and spec.ttl is None and spec.autodown is None and spec.budget is None:
            return Check("reaper", "SKIP", "the cluster spec has no ttl, autodown or budget")
        if spec is None and not self.config.reaper_service_account:
            return Check(
                "reaper", "SKIP", "no reaper_service_account in rlcloud.yaml (needed for ttl/autodown/cluster budget)"
            )
        member = f"serviceAccount:{self.project}.svc.id.goog[rlcloud-system/rlcloud-reaper]"
        check = self._wi_check("reaper", self.config.reaper_service_account, member, "")
        if check.status == "SKIP":
            what = (
                "the cluster's budget would not be enforced (deleting it needs the reaper's Google identity)"
                if spec is not None and spec.budget is not None
                else "ttl/autodown act only through `rlcloud cluster reap`"
            )
            return Check(
                "reaper",
                "FAIL",
                f"no reaper_service_account in rlcloud.yaml: {what}",
                "see docs/gke-setup.md#7-teardown-inside-the-cluster",
            )
        if check.status == "FAIL":
            return check
        assert self.config.reaper_service_account  # a SKIP otherwise
        may = self._reaper_permissions(self.config.reaper_service_account)
        if may.status == "FAIL":
            return may
        if "WARN" in (check.status, may.status):
            return Check("reaper", "WARN", f"{check.detail}; {may.detail}", check.fix or may.fix)
        return Check("reaper", "OK", f"{check.detail}, which {may.detail}")

    def _reaper_permissions(self, account: str) -> Check:
        """Whether the reaper's Google service account holds :data:`REAPER_PERMISSIONS` on the project: the roles
        the project's IAM policy binds to it (Resource Manager ``projects.getIamPolicy``), each role's permissions
        from IAM ``roles.get``. Grants on folders, the organisation or through groups are not read."""
        from google.api_core import exceptions as gexc
        from google.cloud import iam_admin_v1, resourcemanager_v3

        member = f"serviceAccount:{account}"
        role = f"projects/{self.project}/roles/rlcloudReaper"
        fix = f"gcloud projects add-iam-policy-binding {self.project} --member={member} --role={role}"
        try:
            with (
                self._calling(
                    "reaper",
                    f"read the IAM policy of project {self.project}",
                    api="cloudresourcemanager.googleapis.com",
                    denied=self._grant_fix(SEE_POLICIES),
                    observe=SEE_POLICIES,
                ),
                self._client(resourcemanager_v3.ProjectsClient) as client,
            ):
                policy = client.get_iam_policy(request={"resource": f"projects/{self.project}"}, timeout=_TIMEOUT)
            roles = sorted({b.role for b in policy.bindings if member in b.members})
            held: set[str] = set()
            unreadable: list[str] = []
            with self._iam_client() as iam:
                for name in roles:
                    try:
                        found = iam.get_role(request=iam_admin_v1.GetRoleRequest(name=name), timeout=_TIMEOUT)
                    except (gexc.PermissionDenied, gexc.Forbidden):  # a custom role needs iam.roles.get to read
                        unreadable.append(name)
                        continue
                    except Exception as exc:  # auth, transport, other API errors: the check's FAIL
                        failure = self._failure("reaper", exc, f"read role {name}", api="iam.googleapis.com", denied="")
                        raise _CheckFailedError(failure) from exc
                    held.update(found.included_permissions)
        except _CheckFailedError as failed:
            return failed.check
        missing = [p for p in REAPER_PERMISSIONS if p not in held]
        if not missing:
            return Check("reaper", "OK", "may get and delete the cluster")
        if unreadable:
            return Check(
                "reaper",
                "WARN",
                f"cannot tell whether {account} may delete the cluster: the permissions of {', '.join(unreadable)} "
                f"are not readable here; grant {SEE_POLICIES} to see",
                self._grant_fix(SEE_POLICIES),
            )
        bound = ", ".join(roles) or "none"
        return Check(
            "reaper",
            "FAIL",
            f"{account} lacks {', '.join(missing)}: the reaper could not delete the cluster at its ttl/autodown "
            f"(its roles on project {self.project}: {bound}; folder, organisation and group grants are not read). "
            "Grant it the rlcloudReaper role of docs/gke-setup.md step 7 (or roles/container.clusterAdmin)",
            fix,
        )

    def _images(self) -> list[str]:
        if self.images is not None:
            return self.images
        return [i for i in (self.config.image, self.config.gpu_image) if i]

    def _node_account(self) -> str:
        """The service account the cluster's nodes run as: the spec's, else the project's default Compute
        Engine account (its number from Resource Manager ``projects.get``)."""
        if self.spec is not None and self.spec.service_account:
            return self.spec.service_account
        from google.cloud import resourcemanager_v3

        with (
            self._calling(
                "images",
                f"read project {self.project}'s number (for its default compute service account)",
                api="cloudresourcemanager.googleapis.com",
                denied=self._grant_fix(SEE_PROJECT),
                observe=SEE_PROJECT,
            ),
            self._client(resourcemanager_v3.ProjectsClient) as client,
        ):
            project = client.get_project(name=f"projects/{self.project}", timeout=_TIMEOUT)
        number = project.name.rsplit("/", 1)[-1]
        return f"{number}-compute@developer.gserviceaccount.com"

    def check_images(self) -> Check:
        """The runner images exist and the cluster's nodes may pull them (:mod:`rlcloud.gke.doctor_images`)."""
        return check_images(self)

    def checks(self, *, cheap_only: bool = False) -> list[Callable[[], Check]]:
        """The checks in the order they run; ``cheap_only``: those worth running before every create (a few
        requests each: APIs, permissions, GPU quota, images)."""
        cheap = [self.check_apis, self.check_permissions, self.check_gpu_quota, self.check_images]
        if cheap_only:
            # a cluster's budget deletes it through the reaper: a create is refused when that could not act
            budget = self.spec is not None and self.spec.budget is not None
            return [*cheap, self.check_reaper] if budget else list(cheap)
        return [*cheap, self.check_bucket, self.check_workload_identity, self.check_reaper]

    def run(self, *, cheap_only: bool = False) -> list[Check]:
        """Run the checks; a check that raises is reported as FAIL, never raised."""
        results = []
        for check in self.checks(cheap_only=cheap_only):
            try:
                results.append(check())
            except Exception as exc:  # one broken check must not hide the others
                name = check.__name__.removeprefix("check_").replace("_", "-")
                results.append(Check(name, "FAIL", _describe(exc)))
        return results


def doctor_for(
    project: str,
    results: str | None,
    *,
    spec: ClusterSpec | None = None,
    config: ProjectConfig | None = None,
    images: Sequence[str] | None = None,
    namespace: str = "rlcloud",
    credentials: Any = None,
) -> Doctor:
    """The :class:`Doctor` of ``project`` (built here and nowhere else: ``rlcloud doctor`` and a cluster's
    checkup share it): the bucket it checks is ``results`` when that is ``gs://...``, none for a local root."""
    bucket = results if results and results.startswith("gs://") else None
    return Doctor(
        project, bucket=bucket, spec=spec, config=config, images=images, namespace=namespace, credentials=credentials
    )


if __name__ == "__main__":
    from rlcloud.gke.probe import main

    sys.exit(main())
