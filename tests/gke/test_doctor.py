"""`rlcloud doctor`: each check passes and fails against local fakes that speak each service's protocol to its
official client (tests/fakes/google_apis.py: Service Usage, Resource Manager, Compute and Artifact Registry
over REST, IAM over gRPC; fake-gcs-server for the bucket)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlcloud.cli import main
from rlcloud.config import ProjectConfig
from rlcloud.errors import SpecError
from rlcloud.gke.doctor import CLUSTER_PERMISSIONS, Doctor, gpu_quota_metric
from rlcloud.gke.project import EMULATOR_ENV
from rlcloud.specs import ClusterSpec
from tests.fakes.faulty_proxy import FaultyProxy
from tests.fakes.gcs import FakeGcsServer
from tests.fakes.gke import FakeClusterManager
from tests.fakes.google_apis import FakeGoogleApis, default_compute_account
from tests.support.gke import (
    CI_ROLES,
    GPU_IMAGE,
    IMAGE,
    NODES,
    PROJECT,
    REAPER,
    REAPER_ROLE,
    REAPER_ROLE_PERMISSIONS,
    RUNNER,
    T4_SPOT,
    _doctor,
    _wi,
)

#: what docs/gke-setup.md step 8's table adds so that every check can see
SEEING_ROLES = {
    "roles/serviceusage.serviceUsageConsumer",
    "roles/compute.viewer",
    "roles/artifactregistry.reader",
    "roles/iam.securityReviewer",
    "roles/storage.legacyBucketReader",
}


@pytest.fixture(scope="module")
def gcs() -> Iterator[FakeGcsServer]:
    with FakeGcsServer() as server:
        yield server


def _by_name(doctor: Doctor) -> dict[str, Any]:
    return {c.name: c for c in doctor.run()}


def test_everything_set_up_passes(google_apis: FakeGoogleApis, gcs: FakeGcsServer) -> None:
    bucket = gcs.create_bucket()
    google_apis.state.region_quotas["PREEMPTIBLE_NVIDIA_T4_GPUS"] = 4
    checks = _by_name(_doctor(google_apis, gcs, bucket=f"gs://{bucket}/rl", spec=T4_SPOT))
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
    assert f"the nodes ({default_compute_account()}) may pull them" in checks["images"].detail
    # each official client asked the fake at the service's own path
    assert google_apis.requests[:2] == [
        ("serviceusage.batchGet", f"/v1/projects/{PROJECT}/services:batchGet"),
        ("projects.testIamPermissions", f"/v3/projects/{PROJECT}:testIamPermissions"),
    ]
    assert ("regions.get", f"/compute/v1/projects/{PROJECT}/regions/us-central1") in google_apis.requests
    # gRPC; under the account's own project, so that a missing one is 404 (projects/- answers 403)
    assert ("serviceAccounts.getIamPolicy", f"projects/{PROJECT}/serviceAccounts/{RUNNER}") in google_apis.requests


def test_apis(google_apis: FakeGoogleApis) -> None:
    assert _doctor(google_apis).check_apis().ok
    google_apis.state.enabled.discard("container.googleapis.com")
    check = _doctor(google_apis).check_apis()
    assert check.status == "FAIL" and "container.googleapis.com" in check.detail
    assert check.fix == f"gcloud services enable container.googleapis.com --project={PROJECT}"
    # Service Usage itself off: Google's 403 SERVICE_DISABLED names what to enable; only the doctor needs it,
    # so it cannot tell, and refuses nothing
    google_apis.state.deny("serviceusage.batchGet", reason="SERVICE_DISABLED")
    check = _doctor(google_apis).check_apis()
    assert check.status == "WARN" and "serviceusage.googleapis.com is not enabled" in check.detail
    assert check.fix == f"gcloud services enable serviceusage.googleapis.com --project={PROJECT}"


def test_permissions(google_apis: FakeGoogleApis) -> None:
    assert _doctor(google_apis).check_permissions().ok
    # a custom role without delete
    custom = f"projects/{PROJECT}/roles/noDelete"
    google_apis.state.custom_roles[custom] = set(CLUSTER_PERMISSIONS) - {"container.clusters.delete"}
    google_apis.state.roles = {custom}
    check = _doctor(google_apis).check_permissions()
    assert check.status == "FAIL" and check.detail == "missing container.clusters.delete"
    assert "--role=roles/container.admin" in check.fix


def test_gpu_quota(google_apis: FakeGoogleApis) -> None:
    state = google_apis.state
    assert gpu_quota_metric("nvidia-l4", spot=False) == "NVIDIA_L4_GPUS"
    assert gpu_quota_metric("nvidia-a100-80gb", spot=True) == "PREEMPTIBLE_NVIDIA_A100_80GB_GPUS"
    assert _doctor(google_apis).check_gpu_quota().status == "SKIP"  # no spec
    assert _doctor(google_apis, spec=T4_SPOT).check_gpu_quota().ok
    state.region_quotas["PREEMPTIBLE_NVIDIA_T4_GPUS"] = 1
    check = _doctor(google_apis, spec=T4_SPOT).check_gpu_quota()
    assert check.status == "FAIL" and "PREEMPTIBLE_NVIDIA_T4_GPUS in us-central1: 1 free of 1" in check.detail
    assert "quotas?project=" in check.fix
    state.region_quotas["PREEMPTIBLE_NVIDIA_T4_GPUS"] = 8
    state.project_quotas["GPUS_ALL_REGIONS"] = 0  # a new project's GPUs start at 0
    check = _doctor(google_apis, spec=T4_SPOT).check_gpu_quota()
    assert check.status == "FAIL" and "GPUS_ALL_REGIONS" in check.detail
    # Compute's API off: GKE needs it, a FAIL with the command that enables it
    state.deny("regions.get", reason="SERVICE_DISABLED")
    check = _doctor(google_apis, spec=T4_SPOT).check_gpu_quota()
    assert check.status == "FAIL" and "compute.googleapis.com is not enabled" in check.detail


def test_spot_gpu_quota_falls_back_to_the_standard_quota(google_apis: FakeGoogleApis) -> None:
    """Spot VMs use the preemptible quota when the project has one, else the standard one (Compute Engine,
    "Create and use Spot VMs"): a project with only NVIDIA_T4_GPUS may run the Spot T4 pool."""
    state = google_apis.state
    state.region_quotas["PREEMPTIBLE_NVIDIA_T4_GPUS"] = 0  # what a project that asked for T4s has
    state.region_quotas["NVIDIA_T4_GPUS"] = 4
    check = _doctor(google_apis, spec=T4_SPOT).check_gpu_quota()
    assert check.status == "OK", check
    assert "NVIDIA_T4_GPUS 4 free" in check.detail
    assert "no PREEMPTIBLE_NVIDIA_T4_GPUS quota: Spot VMs use NVIDIA_T4_GPUS" in check.detail
    del state.region_quotas["PREEMPTIBLE_NVIDIA_T4_GPUS"]  # absent is none too
    assert _doctor(google_apis, spec=T4_SPOT).check_gpu_quota().status == "OK"
    # the standard quota too small: the FAIL names the one Spot VMs would use, and why
    state.region_quotas["NVIDIA_T4_GPUS"] = 1
    check = _doctor(google_apis, spec=T4_SPOT).check_gpu_quota()
    assert check.status == "FAIL"
    assert check.detail.startswith("NVIDIA_T4_GPUS in us-central1: 1 free of 1, the spec needs 2 (no PREEMPTIBLE_")
    # with some preemptible quota, Spot VMs use it, however much standard quota there is
    state.region_quotas.update({"PREEMPTIBLE_NVIDIA_T4_GPUS": 1, "NVIDIA_T4_GPUS": 64})
    check = _doctor(google_apis, spec=T4_SPOT).check_gpu_quota()
    assert check.status == "FAIL" and check.detail.startswith("PREEMPTIBLE_NVIDIA_T4_GPUS in us-central1: 1 free")
    # on-demand pools never use the preemptible quota
    state.region_quotas.update({"PREEMPTIBLE_NVIDIA_T4_GPUS": 64, "NVIDIA_T4_GPUS": 0})
    on_demand = ClusterSpec(name="rl", gpu_type="nvidia-tesla-t4", num_nodes=2)
    check = _doctor(google_apis, spec=on_demand).check_gpu_quota()
    assert check.status == "FAIL" and check.detail.startswith("NVIDIA_T4_GPUS in us-central1: 0 free of 0")


@pytest.mark.parametrize(
    ("gpu_type", "machine_type", "spot", "metric"),
    [
        ("nvidia-h200-141gb", "a3-ultragpu-8g", False, "NVIDIA_H200_GPUS"),
        ("nvidia-h200-141gb", "a3-ultragpu-8g", True, "NVIDIA_H200_GPUS"),  # no preemptible metric either
        ("nvidia-h100-mega-80gb", "a3-megagpu-8g", False, "NVIDIA_H100_MEGA_GPUS"),
        ("nvidia-h100-80gb", "a3-highgpu-8g", False, "NVIDIA_H100_GPUS"),  # only PREEMPTIBLE_ exists
    ],
)
def test_quota_metrics_compute_does_not_report_are_a_warning(
    google_apis: FakeGoogleApis, gpu_type: str, machine_type: str, spot: bool, metric: str
) -> None:
    """google-cloud-compute's Quota.Metric has no on-demand H100, H100 Mega or H200 name, and regions.get
    lists none (the fake serves only the enum's names): the doctor cannot tell, instead of "0 of 0"."""
    spec = ClusterSpec(name="rl", gpu_type=gpu_type, machine_type=machine_type, gpus_per_node=8, spot=spot)
    check = _doctor(google_apis, spec=spec).check_gpu_quota()
    assert check.status == "WARN" and check.ok, check
    assert check.detail.startswith(f"Compute reports no quota metric for {gpu_type} ({metric} in us-central1)")
    assert "GPUS_ALL_REGIONS 64 free" in check.detail and "quotas?project=" in check.fix
    # GPUS_ALL_REGIONS, which Compute does report, still refuses
    google_apis.state.project_quotas["GPUS_ALL_REGIONS"] = 0
    assert _doctor(google_apis, spec=spec).check_gpu_quota().status == "FAIL"
    google_apis.state.project_quotas["GPUS_ALL_REGIONS"] = 64


def test_spot_h100_uses_the_preemptible_quota_compute_reports(google_apis: FakeGoogleApis) -> None:
    spec = ClusterSpec(name="rl", gpu_type="nvidia-h100-80gb", machine_type="a3-highgpu-8g", gpus_per_node=8, spot=True)
    check = _doctor(google_apis, spec=spec).check_gpu_quota()
    assert check.status == "OK" and "PREEMPTIBLE_NVIDIA_H100_GPUS 64 free" in check.detail
    # none of it: Spot VMs would use the on-demand quota, which Compute does not report
    google_apis.state.region_quotas["PREEMPTIBLE_NVIDIA_H100_GPUS"] = 0
    check = _doctor(google_apis, spec=spec).check_gpu_quota()
    assert check.status == "WARN" and "(NVIDIA_H100_GPUS in us-central1)" in check.detail
    # a metric Compute defines but does not list is none (a new project's T4s): 0 of 0, a FAIL
    google_apis.state.region_quotas.clear()
    check = _doctor(google_apis, spec=ClusterSpec(name="rl", gpu_type="nvidia-tesla-t4")).check_gpu_quota()
    assert check.status == "FAIL" and "NVIDIA_T4_GPUS in us-central1: 0 free of 0" in check.detail


def _bucket_behind_iam(gcs: FakeGcsServer, roles: set[str]) -> FaultyProxy:
    """fake-gcs-server has no IAM: a proxy answers ``buckets.get`` 403 unless ``roles`` hold
    storage.buckets.get, which roles/storage.objectAdmin does not (Cloud Storage IAM roles reference,
    cloud.google.com/iam/docs/roles-permissions/storage)."""
    from tests.fakes.google_apis import GoogleState

    may_get = GoogleState(roles=roles).permits("storage.buckets.get")
    return FaultyProxy(
        gcs.url, deny=lambda method, path: not may_get and method == "GET" and path.count("/") == 4
    ).start()


def test_the_documented_ci_roles_get_warnings_never_a_fail(google_apis: FakeGoogleApis, gcs: FakeGcsServer) -> None:
    """An identity with just the roles docs/gke-setup.md gives a CI identity cannot call the doctor's
    observing methods: each such check cannot tell (WARN, naming the role that lets it see) and fails
    nothing; with the roles the docs' table lists per check, every check sees and passes."""
    bucket = gcs.create_bucket()
    google_apis.state.roles = set(CI_ROLES)
    proxy = _bucket_behind_iam(gcs, CI_ROLES)
    try:
        doctor = _doctor(google_apis, bucket=f"gs://{bucket}/rl", spec=T4_SPOT)
        doctor._storage = gcs.client_for(proxy.url)
        checks = _by_name(doctor)
    finally:
        proxy.stop()
    assert {name: c.status for name, c in checks.items()} == {
        "apis": "WARN",
        "permissions": "OK",
        "gpu-quota": "WARN",
        "images": "WARN",
        "bucket": "WARN",
        "workload-identity": "WARN",
        "reaper": "WARN",
    }
    assert all(c.ok for c in checks.values())
    seeing = {
        "apis": "roles/serviceusage.serviceUsageConsumer",
        "gpu-quota": "roles/compute.viewer",
        "images": "roles/artifactregistry.reader",
        "bucket": "roles/storage.legacyBucketReader",
        "workload-identity": "roles/iam.securityReviewer",
        "reaper": "roles/iam.securityReviewer",
    }
    for name, role in seeing.items():
        assert checks[name].detail.startswith("cannot tell"), checks[name]
        assert f"grant {role}" in checks[name].detail and f"--role={role}" in checks[name].fix
    # Compute words its 403 its own way; the doctor says which permission was missing
    assert "compute.regions.get" in checks["gpu-quota"].detail

    google_apis.state.roles = CI_ROLES | SEEING_ROLES
    proxy = _bucket_behind_iam(gcs, CI_ROLES | SEEING_ROLES)
    try:
        doctor._storage = gcs.client_for(proxy.url)
        assert {c.name: c.status for c in doctor.run()} == dict.fromkeys(checks, "OK")
    finally:
        proxy.stop()


def test_the_fake_answers_403_without_the_role(google_apis: FakeGoogleApis) -> None:
    """The fake's own rule, through the official clients: a call is refused unless a role grants the permission
    its method needs; testIamPermissions needs none."""
    from google.api_core import exceptions as gexc
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1, resourcemanager_v3

    options = {"api_endpoint": google_apis.url}
    google_apis.state.roles = {"roles/container.admin"}
    with compute_v1.RegionsClient(credentials=AnonymousCredentials(), transport="rest", client_options=options) as c:
        with pytest.raises(gexc.Forbidden, match=r"Required 'compute\.regions\.get' permission"):
            c.get(project=PROJECT, region="us-central1")
        google_apis.state.roles.add("roles/compute.viewer")
        assert c.get(project=PROJECT, region="us-central1").quotas
    with resourcemanager_v3.ProjectsClient(
        credentials=AnonymousCredentials(), transport="rest", client_options=options
    ) as projects:
        with pytest.raises(gexc.Forbidden, match=r"resourcemanager\.projects\.getIamPolicy"):
            projects.get_iam_policy(request={"resource": f"projects/{PROJECT}"})
        answer = projects.test_iam_permissions(
            request={"resource": f"projects/{PROJECT}", "permissions": ["container.clusters.create", "iam.roles.get"]}
        )
        assert list(answer.permissions) == ["container.clusters.create"]


def test_bucket(google_apis: FakeGoogleApis, gcs: FakeGcsServer) -> None:
    check = _doctor(google_apis, gcs, bucket="gs://no-such-bucket-here/rl").check_bucket()
    assert check.status == "FAIL" and "does not exist" in check.detail
    assert "--soft-delete-duration=0" in check.fix

    class Bucket:
        _properties = {"softDeletePolicy": {"retentionDurationSeconds": "604800"}}

    class Storage:
        def get_bucket(self, name: str) -> Bucket:
            return Bucket()

    doctor = _doctor(google_apis, bucket="gs://kept/rl")
    doctor._storage = Storage()  # soft delete on: fake-gcs-server does not model it
    check = doctor.check_bucket()
    assert check.status == "FAIL" and "7 days" in check.detail
    assert check.fix == "gcloud storage buckets update gs://kept --clear-soft-delete"
    assert _doctor(google_apis).check_bucket().status == "SKIP"


def test_workload_identity(google_apis: FakeGoogleApis) -> None:
    state = google_apis.state
    assert _doctor(google_apis).check_workload_identity().ok
    state.service_accounts[RUNNER] = []
    check = _doctor(google_apis).check_workload_identity()
    assert check.status == "FAIL"
    assert check.fix == (
        f"gcloud iam service-accounts add-iam-policy-binding {RUNNER} --role=roles/iam.workloadIdentityUser "
        f'--member="serviceAccount:{PROJECT}.svc.id.goog[rlcloud/rlcloud-runner]"'
    )
    # the namespace is part of the member
    state.service_accounts[RUNNER] = _wi(RUNNER, "rlcloud/rlcloud-runner")
    assert _doctor(google_apis, namespace="team-a").check_workload_identity().status == "FAIL"
    assert _doctor(google_apis, config=ProjectConfig()).check_workload_identity().status == "SKIP"
    # gRPC PERMISSION_DENIED from IAM: cannot tell (a WARN), never a traceback
    state.deny("serviceAccounts.getIamPolicy")
    check = _doctor(google_apis).check_workload_identity()
    assert check.status == "WARN" and "permission denied" in check.detail


def test_reaper(google_apis: FakeGoogleApis) -> None:
    state = google_apis.state
    assert _doctor(google_apis, spec=T4_SPOT).check_reaper().ok
    check = _doctor(google_apis, spec=T4_SPOT, config=ProjectConfig(image=IMAGE)).check_reaper()
    assert check.status == "FAIL" and "reaper_service_account" in check.detail
    state.service_accounts[REAPER] = []
    assert _doctor(google_apis, spec=T4_SPOT).check_reaper().status == "FAIL"
    del state.service_accounts[REAPER]
    doctor = Doctor(
        PROJECT, spec=T4_SPOT, config=ProjectConfig(reaper_service_account=REAPER), api_host=google_apis.url
    )
    check = doctor.check_reaper()
    assert check.status == "FAIL" and "does not exist" in check.detail and "service-accounts create" in check.fix
    assert _doctor(google_apis, spec=ClusterSpec(name="rl")).check_reaper().status == "SKIP"
    assert _doctor(google_apis, config=ProjectConfig()).check_reaper().status == "SKIP"  # no spec, no reaper


def test_reaper_permissions(google_apis: FakeGoogleApis) -> None:
    """The reaper's Google service account must hold what the reaper asks the Container API (get, then delete
    the cluster): read from the project's IAM policy and each bound role's permissions (IAM roles.get)."""
    state = google_apis.state
    check = _doctor(google_apis, spec=T4_SPOT).check_reaper()
    assert check.status == "OK" and check.detail.endswith("which may get and delete the cluster"), check
    assert ("roles.get", REAPER_ROLE) in google_apis.requests
    # the custom role without delete: the reaper would fail silently at the ttl
    state.custom_roles[REAPER_ROLE] = REAPER_ROLE_PERMISSIONS - {"container.clusters.delete"}
    check = _doctor(google_apis, spec=T4_SPOT).check_reaper()
    assert check.status == "FAIL"
    assert check.detail.startswith(f"{REAPER} lacks container.clusters.delete: the reaper could not delete")
    assert f"its roles on project {PROJECT}: {REAPER_ROLE}" in check.detail and "rlcloudReaper" in check.detail
    assert check.fix == (
        f"gcloud projects add-iam-policy-binding {PROJECT} --member=serviceAccount:{REAPER} --role={REAPER_ROLE}"
    )
    # no role at all on the project
    state.project_policy[:] = [b for b in state.project_policy if b["role"] != REAPER_ROLE]
    check = _doctor(google_apis, spec=T4_SPOT).check_reaper()
    assert check.status == "FAIL" and "its roles on project" in check.detail and ": none;" in check.detail
    # a predefined role that holds both (roles/container.clusterAdmin) is read without iam.roles.get
    state.project_policy.append({"role": "roles/container.clusterAdmin", "members": [f"serviceAccount:{REAPER}"]})
    state.roles = {"roles/browser"}  # reads the project's policy, not custom roles nor accounts' policies
    check = _doctor(google_apis, spec=T4_SPOT).check_reaper()
    assert check.status == "WARN", check  # the Workload Identity binding: cannot tell; the role: seen
    assert check.detail.startswith("cannot tell: permission denied to read the IAM policy of " + REAPER)
    assert check.detail.endswith("; may get and delete the cluster")
    # a custom role these credentials may not read: cannot tell, refuses nothing
    state.project_policy[-1] = {"role": REAPER_ROLE, "members": [f"serviceAccount:{REAPER}"]}
    state.roles = {"roles/browser", "roles/iam.serviceAccountUser"}
    check = _doctor(google_apis, spec=T4_SPOT).check_reaper()
    assert check.status == "WARN" and f"the permissions of {REAPER_ROLE} are not readable here" in check.detail


def test_images_exist(google_apis: FakeGoogleApis) -> None:
    assert _doctor(google_apis).check_images().ok
    check = _doctor(google_apis, config=ProjectConfig()).check_images()
    assert check.status == "FAIL" and "docs/images.md" in check.fix
    assert _doctor(google_apis, images=[]).check_images().status == "SKIP"  # a create that names no image yet
    missing = ProjectConfig(image=IMAGE.replace("0.1.0", "9.9.9"))
    check = _doctor(google_apis, config=missing).check_images()
    assert check.status == "FAIL" and "does not exist" in check.detail and "_VARIANT=cpu" in check.fix
    # a package with a slash is one segment of the resource name (%2F), as Artifact Registry names it
    google_apis.state.tags.add("rlcloud/team/runner:1")
    nested = f"us-central1-docker.pkg.dev/{PROJECT}/rlcloud/team/runner:1"
    assert _doctor(google_apis, images=[nested]).check_images().ok
    assert (
        "tags.get",
        f"/v1/projects/{PROJECT}/locations/us-central1/repositories/rlcloud/packages/team%2Frunner/tags/1",
    ) in google_apis.requests
    elsewhere = _doctor(google_apis, config=ProjectConfig(image="docker.io/me/runner:1")).check_images()
    assert elsewhere.status == "OK" and "not in Artifact Registry: not checked" in elsewhere.detail


def test_images_the_nodes_may_pull(google_apis: FakeGoogleApis) -> None:
    state = google_apis.state
    doctor = _doctor(google_apis, images=[IMAGE])
    state.project_policy[:] = [{"role": "roles/viewer", "members": [f"serviceAccount:{default_compute_account()}"]}]
    check = doctor.check_images()
    assert check.status == "FAIL"
    assert f"the nodes run as {default_compute_account()}, which may not pull" in check.detail
    assert check.fix == (
        "gcloud artifacts repositories add-iam-policy-binding rlcloud --location=us-central1 "
        f"--member=serviceAccount:{default_compute_account()} --role=roles/artifactregistry.reader --project={PROJECT}"
    )
    # a role that includes reading, on the repository, is enough
    state.repository_policies["rlcloud"] = [
        {"role": "roles/artifactregistry.writer", "members": [f"serviceAccount:{default_compute_account()}"]}
    ]
    assert doctor.check_images().ok
    # the spec's node service account is the one that pulls, not the default
    with_nodes = _doctor(google_apis, images=[IMAGE], spec=ClusterSpec(name="rl", service_account=NODES))
    check = with_nodes.check_images()
    assert check.status == "FAIL" and NODES in check.detail and f"--member=serviceAccount:{NODES}" in check.fix
    state.project_policy.append({"role": "roles/artifactregistry.reader", "members": [f"serviceAccount:{NODES}"]})
    assert with_nodes.check_images().ok
    # a public repository: everyone may pull
    state.project_policy[:] = []
    state.repository_policies["rlcloud"] = [{"role": "roles/artifactregistry.reader", "members": ["allUsers"]}]
    assert with_nodes.check_images().ok
    # policies these credentials may not read: cannot tell, refuses nothing
    state.repository_policies.clear()
    state.deny("repositories.getIamPolicy")
    state.deny("projects.getIamPolicy")
    check = with_nodes.check_images()
    assert check.status == "WARN" and check.ok and "cannot tell" in check.detail


def test_cli_prints_each_check_and_fails_when_one_fails(
    google_apis: FakeGoogleApis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rlcloud.yaml").write_text(f"project: {PROJECT}\nresults: ./local-results\nimage: {IMAGE}\n")
    google_apis.state.tags.add("rlcloud/runner-cpu:0.1.0")
    google_apis.state.repository_policies["rlcloud"] = [
        {"role": "roles/artifactregistry.reader", "members": [f"serviceAccount:{default_compute_account()}"]}
    ]

    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "OK   apis" in out and "OK   images" in out and "SKIP workload-identity" in out
    google_apis.state.enabled.discard("compute.googleapis.com")
    assert main(["doctor", "-o", "json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    (apis,) = [r for r in rows if r["check"] == "apis"]
    assert apis["status"] == "FAIL" and apis["fix"].startswith("gcloud services enable compute.googleapis.com")


def test_no_credentials_is_a_fail_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlcloud.gke.doctor import API_HOST_ENV

    monkeypatch.delenv(API_HOST_ENV)  # Google itself, and no Application Default Credentials in the suite
    checks = {c.name: c for c in Doctor(PROJECT, spec=T4_SPOT, images=[]).run(cheap_only=True)}
    assert checks["apis"].status == "FAIL" and "no usable Google credentials" in checks["apis"].detail
    assert checks["apis"].fix == "gcloud auth application-default login"
    assert checks["images"].status == "SKIP"


def test_cluster_gke_doctor(google_apis: FakeGoogleApis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rlcloud import Cluster

    monkeypatch.chdir(tmp_path)
    google_apis.state.region_quotas.clear()
    checks = {c.name: c for c in Cluster.gke(T4_SPOT, project=PROJECT, container_client=object()).doctor()}
    assert checks["gpu-quota"].status == "FAIL" and checks["apis"].ok
    assert checks["images"].status == "FAIL"  # no rlcloud.yaml here: no image


# ------------------------------------------------------------------------- the cheap checks before a create

BUNDLED = Path(__file__).resolve().parents[2] / "src" / "rlcloud" / "configs" / "clusters"


@pytest.fixture
def gke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClusterManager]:
    monkeypatch.chdir(tmp_path)  # no rlcloud.yaml: no image named
    with FakeClusterManager(polls_to_done=0) as fake:
        monkeypatch.setenv(EMULATOR_ENV, fake.address)
        yield fake


def test_cluster_create_is_refused_when_a_cheap_check_fails(
    gke: FakeClusterManager, google_apis: FakeGoogleApis, capsys: pytest.CaptureFixture[str]
) -> None:
    google_apis.state.project_quotas["GPUS_ALL_REGIONS"] = 0  # a new project's GPUs start at 0
    code = main(["cluster", "create", "-f", str(BUNDLED / "t4.yaml"), "-n", "rl-t4", "--project", PROJECT, "--yes"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"project {PROJECT} is not ready (nothing was created)" in err
    assert "FAIL gpu-quota: GPUS_ALL_REGIONS: 0 free of 0" in err and "fix: request more in the Console" in err
    assert "--skip-doctor" in err
    assert gke.requests_of("CreateCluster") == [] and gke.cluster_names() == []
    # the checks ran before anything was asked of GKE but where the cluster is (t4.yaml has fallback zones)
    assert {method for method, _ in gke.requests} <= {"GetCluster", "ListClusters"}
    assert "regions.get" in google_apis.operations()

    # the opt-out creates it all the same
    code = main(["cluster", "create", "-f", str(BUNDLED / "t4.yaml"), "-n", "rl-t4", "--project", PROJECT, "--yes",
                 "--skip-doctor"])  # fmt: skip
    assert code == 0 and gke.cluster_names() == ["rl-t4"]
    # an existing cluster is adopted without the checks (its own GPUs are what use the quota)
    asked = len(google_apis.requests)
    assert (
        main(["cluster", "create", "-f", str(BUNDLED / "t4.yaml"), "-n", "rl-t4", "--project", PROJECT, "--yes"]) == 0
    )
    assert len(google_apis.requests) == asked


def test_cluster_create_prints_the_checks_when_they_pass(
    gke: FakeClusterManager, google_apis: FakeGoogleApis, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["cluster", "create", "-f", str(BUNDLED / "t4.yaml"), "-n", "rl-t4", "--project", PROJECT, "--yes"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "OK   apis" in out and "OK   gpu-quota" in out and "SKIP images" in out
    assert gke.cluster_names() == ["rl-t4"]


def test_the_first_start_on_a_new_cluster_is_refused_when_the_nodes_cannot_pull_its_image(
    gke: FakeClusterManager, google_apis: FakeGoogleApis
) -> None:
    from rlcloud import Cluster, Experiment, ExperimentSpec
    from rlcloud.errors import PreflightError

    google_apis.state.tags.add("rlcloud/runner-gpu:0.1.0")  # it exists, but no one granted the nodes a read
    spec = ExperimentSpec(
        name="cp",
        environment={"type": "gym", "level": "CartPole-v1"},
        agent={"type": "ppo", "batch_size": 10},
        episodes=5,
        image=GPU_IMAGE,
    )
    cluster = Cluster.gke(ClusterSpec(name="rl", gpu_type="nvidia-tesla-t4"), project=PROJECT, dedicated=True)
    with pytest.raises(PreflightError) as refused:
        Experiment(spec, results=f"{Path.cwd()}/results").start(cluster=cluster, validate=False)
    assert refused.value.fields == ["images"]
    assert "--role=roles/artifactregistry.reader" in str(refused.value)
    assert f"--member=serviceAccount:{default_compute_account()}" in str(refused.value)
    assert gke.requests_of("CreateCluster") == [] and gke.cluster_names() == []
    # granted: the same start creates the cluster (the experiment itself then needs a Kubernetes API)
    google_apis.state.repository_policies["rlcloud"] = [
        {"role": "roles/artifactregistry.reader", "members": [f"serviceAccount:{default_compute_account()}"]}
    ]
    assert cluster.handle.check_project()[3].status == "OK"
    cluster.handle.poll_interval = cluster.handle.max_poll_interval = 0.001
    assert cluster.create().status == "RUNNING"


def test_cluster_create_runs_a_spot_pool_on_the_standard_gpu_quota(
    gke: FakeClusterManager, google_apis: FakeGoogleApis, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bundled t4.yaml is Spot; a project granted NVIDIA_T4_GPUS only (what examples/gke_gpu.py asks
    for) creates it: Compute Engine runs Spot VMs on the standard quota when there is no preemptible one."""
    google_apis.state.region_quotas["PREEMPTIBLE_NVIDIA_T4_GPUS"] = 0
    google_apis.state.region_quotas["NVIDIA_T4_GPUS"] = 2
    code = main(["cluster", "create", "-f", str(BUNDLED / "t4.yaml"), "-n", "rl-t4", "--project", PROJECT, "--yes"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "OK   gpu-quota: NVIDIA_T4_GPUS 2 free" in out
    assert gke.cluster_names() == ["rl-t4"]


def test_cluster_create_is_not_refused_for_what_the_doctor_cannot_see(
    gke: FakeClusterManager, google_apis: FakeGoogleApis, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A CI identity with the roles docs/gke-setup.md step 2 gives creates the cluster: the 403s of the
    checks that only look are WARNs."""
    (tmp_path / "rlcloud.yaml").write_text(f"project: {PROJECT}\nimage: {IMAGE}\n")
    google_apis.state.tags.add("rlcloud/runner-cpu:0.1.0")
    google_apis.state.roles = set(CI_ROLES)
    code = main(["cluster", "create", "-f", str(BUNDLED / "t4.yaml"), "-n", "rl-t4", "--project", PROJECT, "--yes"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "WARN apis: cannot tell" in out and "WARN gpu-quota: cannot tell" in out
    assert "WARN images: cannot tell" in out and "OK   permissions" in out
    assert gke.cluster_names() == ["rl-t4"]
    # what it may see still refuses: a custom role without delete is a FAIL before anything is made
    custom = f"projects/{PROJECT}/roles/noDelete"
    google_apis.state.custom_roles[custom] = set(CLUSTER_PERMISSIONS) - {"container.clusters.delete"}
    google_apis.state.roles = {custom}
    code = main(["cluster", "create", "-f", str(BUNDLED / "t4.yaml"), "-n", "rl-t4b", "--project", PROJECT, "--yes"])
    assert code == 2 and "FAIL permissions: missing container.clusters.delete" in capsys.readouterr().err
    assert gke.cluster_names() == ["rl-t4"]


def test_doctor_false_creates_without_the_checks(gke: FakeClusterManager, google_apis: FakeGoogleApis) -> None:
    from rlcloud import Cluster

    google_apis.state.enabled.clear()
    refused = Cluster.gke(ClusterSpec(name="rl"), project=PROJECT)
    with pytest.raises(SpecError, match=r"not enabled: container\.googleapis\.com"):
        refused.create()
    assert gke.cluster_names() == []
    asked = len(google_apis.requests)
    assert Cluster.gke(ClusterSpec(name="rl"), project=PROJECT, doctor=False).create().status == "RUNNING"
    assert len(google_apis.requests) == asked


def test_the_cluster_facade_attaches_waits_and_reports_as_runs_do(gke: FakeClusterManager) -> None:
    # the verbs rhyme across Experiment, Sweep and Cluster: attach by name, wait, status
    from rlcloud import Cluster

    gke.polls_to_done = 2
    created = Cluster.gke(ClusterSpec(name="rl"), project=PROJECT, doctor=False).create(wait=False)
    assert created.status == "PROVISIONING"
    found = Cluster.attach("rl", project=PROJECT)  # e.g. from another machine
    assert found.wait(timeout=60).status == "RUNNING"
    assert found.status().status == "RUNNING" and found.status().name == "rl"
    assert len(gke.requests_of("CreateCluster")) == 1


def test_the_reaper_check_covers_a_budget_only_spec_and_gates_create(google_apis: FakeGoogleApis) -> None:
    """A cluster's budget deletes it through the reaper's Google identity: the check runs for a spec whose only
    cap is a budget, and with the cheap checks that creating the cluster runs (it refuses the create)."""
    budgeted = ClusterSpec(name="rl", budget="40 USD")  # type: ignore[arg-type]
    assert _doctor(google_apis, spec=budgeted).check_reaper().ok
    check = _doctor(google_apis, spec=budgeted, config=ProjectConfig(image=IMAGE)).check_reaper()
    assert check.status == "FAIL" and "the cluster's budget would not be enforced" in check.detail
    cheap = {
        c.name: c for c in _doctor(google_apis, spec=budgeted, config=ProjectConfig(image=IMAGE)).run(cheap_only=True)
    }
    assert cheap["reaper"].status == "FAIL"
    # without a budget the cheap checks stay as they were: a ttl has its fallback (`rlcloud cluster reap`)
    assert "reaper" not in {c.name for c in _doctor(google_apis, spec=T4_SPOT).run(cheap_only=True)}
    assert _doctor(google_apis, spec=ClusterSpec(name="rl")).check_reaper().detail.endswith("ttl, autodown or budget")
