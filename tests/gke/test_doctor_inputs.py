"""The doctor's round-4 checks (issue 37, items 13 and 14): an image named by digest is looked up as that
version (never ``:latest``); ``iam.serviceAccounts.actAs`` on the node service account; the IAM and IAM
Credentials APIs; user credentials without a quota project. Against tests/fakes/google_apis.py, which refuses
what Google refuses (each rule citing its documentation there)."""

from __future__ import annotations

import pytest

from rlcloud.specs import ClusterSpec
from tests.fakes.google_apis import FakeGoogleApis, default_compute_account
from tests.support.gke import CI_ROLES, IMAGE, NODES, PROJECT, RUNNER, T4_SPOT, _doctor

DIGEST = "sha256:" + "ab" * 32
REPO = f"us-central1-docker.pkg.dev/{PROJECT}/rlcloud"


# ------------------------------------------------------------------------------------------- 13: digests


@pytest.mark.parametrize(
    ("image", "stored", "ok"),
    [
        (f"{REPO}/runner-cpu@{DIGEST}", {f"rlcloud/runner-cpu@{DIGEST}"}, True),
        (f"{REPO}/runner-cpu:0.1.0@{DIGEST}", {f"rlcloud/runner-cpu@{DIGEST}"}, True),  # the digest is pulled
        (f"{REPO}/team/runner@{DIGEST}", {f"rlcloud/team/runner@{DIGEST}"}, True),  # %2F in the package
        (f"{REPO}/runner-cpu@{DIGEST}", set(), False),  # no such version: FAIL naming it
    ],
)
def test_an_image_named_by_digest_is_looked_up_as_that_version(
    image: str, stored: set[str], ok: bool, google_apis: FakeGoogleApis
) -> None:
    google_apis.state.versions.update(stored)
    check = _doctor(google_apis, images=[image]).check_images()
    assert check.ok is ok, check
    operations = google_apis.operations()
    assert "versions.get" in operations and "tags.get" not in operations  # never :latest
    assert not any(path.endswith("/tags/latest") for _, path in google_apis.requests)
    if not ok:
        assert "does not exist" in check.detail


def test_looking_up_a_version_needs_its_permission(google_apis: FakeGoogleApis) -> None:
    """versions.get needs artifactregistry.versions.get: without it the doctor cannot tell (WARN), never FAIL."""
    google_apis.state.versions.add(f"rlcloud/runner-cpu@{DIGEST}")
    google_apis.state.roles = set(CI_ROLES)
    check = _doctor(google_apis, images=[f"{REPO}/runner-cpu@{DIGEST}"]).check_images()
    assert check.status == "WARN" and "roles/artifactregistry.reader" in check.fix
    google_apis.state.roles |= {"roles/artifactregistry.reader"}
    assert _doctor(google_apis, images=[f"{REPO}/runner-cpu@{DIGEST}"]).check_images().status in ("OK", "WARN")


# ---------------------------------------------------------------------------------- 14: actAs, APIs, ADC


@pytest.mark.parametrize(
    ("roles", "grant_on_account", "status"),
    [
        ({"roles/owner"}, False, "OK"),
        ({"roles/container.admin", "roles/iam.serviceAccountUser"}, False, "OK"),  # on the project
        ({"roles/container.admin"}, True, "OK"),  # on the account itself, as the docs grant it
        ({"roles/container.admin"}, False, "FAIL"),
        ({"roles/container.admin", "roles/browser"}, False, "FAIL"),
    ],
)
@pytest.mark.parametrize("nodes", [NODES, None])  # the spec's account, or the project's default one
def test_creating_a_cluster_needs_act_as_on_the_node_service_account(
    roles: set[str], grant_on_account: bool, status: str, nodes: str | None, google_apis: FakeGoogleApis
) -> None:
    state = google_apis.state
    account = nodes or default_compute_account()
    state.service_accounts[account] = (
        [{"role": "roles/iam.serviceAccountUser", "members": [state.caller]}] if grant_on_account else []
    )
    state.roles = set(roles) | {"roles/browser"}  # the project's number, for the default account
    spec = ClusterSpec(name="rl", gpu_type="nvidia-tesla-t4", spot=True, service_account=nodes)
    check = _doctor(google_apis, spec=spec).check_permissions()
    assert check.status == status, check
    assert account in check.detail
    if status == "FAIL":
        assert "iam.serviceAccounts.actAs" in check.detail
        assert f"add-iam-policy-binding {account}" in check.fix and "roles/iam.serviceAccountUser" in check.fix
    assert "serviceAccounts.testIamPermissions" in google_apis.operations()


def test_a_node_service_account_that_does_not_exist_fails_naming_it(google_apis: FakeGoogleApis) -> None:
    spec = ClusterSpec(name="rl", service_account=f"ghost-nodes@{PROJECT}.iam.gserviceaccount.com")
    check = _doctor(google_apis, spec=spec).check_permissions()
    assert (
        check.status == "FAIL"
        and "does not exist" in check.detail
        and "service-accounts create ghost-nodes" in check.fix
    )


def test_without_a_spec_no_node_account_is_tested(google_apis: FakeGoogleApis) -> None:
    assert _doctor(google_apis).check_permissions().status == "OK"
    assert "serviceAccounts.testIamPermissions" not in google_apis.operations()


@pytest.mark.parametrize(
    ("disabled", "spec", "runner", "missing"),
    [
        ("iamcredentials.googleapis.com", None, RUNNER, True),  # Workload Identity tokens come from it
        ("iam.googleapis.com", T4_SPOT, None, True),  # the actAs test and the Workload Identity checks
        ("iam.googleapis.com", None, RUNNER, True),
        ("iamcredentials.googleapis.com", T4_SPOT, None, False),  # no Google identity in the pods: not needed
    ],
)
def test_the_iam_apis_are_checked_when_needed(
    disabled: str, spec: ClusterSpec | None, runner: str | None, missing: bool, google_apis: FakeGoogleApis
) -> None:
    from rlcloud.config import ProjectConfig

    google_apis.state.enabled.discard(disabled)
    config = ProjectConfig(image=IMAGE, gcp_service_account=runner)
    check = _doctor(google_apis, spec=spec, config=config).check_apis()
    if missing:
        assert check.status == "FAIL" and disabled in check.detail and f"gcloud services enable {disabled}" in check.fix
    else:
        assert check.status == "OK" and disabled not in check.detail


QUOTA_PROJECT = (
    "Your application is authenticating by using local Application Default Credentials. The "
    "serviceusage.googleapis.com API requires a quota project, which is not set by default. To learn how to set "
    "your quota project, see https://cloud.google.com/docs/authentication/adc-troubleshooting/user-creds ."
)


@pytest.mark.parametrize(
    ("operation", "check_name"),
    [("serviceusage.batchGet", "check_apis"), ("regions.get", "check_gpu_quota"), ("tags.get", "check_images")],
)
def test_user_credentials_without_a_quota_project_get_the_right_fix(
    operation: str, check_name: str, google_apis: FakeGoogleApis
) -> None:
    """The refusal says SERVICE_DISABLED for gcloud's own project: "enable the API" was the wrong fix."""
    google_apis.state.errors[operation] = (403, QUOTA_PROJECT, "SERVICE_DISABLED")
    check = getattr(_doctor(google_apis, spec=T4_SPOT), check_name)()
    assert check.fix == f"gcloud auth application-default set-quota-project {PROJECT}", check
    assert "quota project" in check.detail and "services enable" not in check.fix
