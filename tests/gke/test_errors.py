"""Error translation: real Container API / Compute Engine message shapes -> the rlcloud error tree."""

from __future__ import annotations

import pytest
from google.api_core import exceptions as gexc
from google.auth import exceptions as auth_exc
from google.cloud import container_v1
from google.rpc import status_pb2

from rlcloud.errors import (
    AuthError,
    BackendError,
    CapacityError,
    ConflictError,
    NotFoundError,
    QuotaExceededError,
)
from rlcloud.gke.errors import (
    ClusterBusyError,
    api_errors,
    classify,
    is_transient,
    operation_error,
    translate_api_error,
    zones_with_capacity,
)

# Shapes as Google returns them (see the fake's docstring for their sources).
STOCKOUT_GCE = (
    "Google Compute Engine: Not all instances running in IGM after 41.2s. Expected 1, running 0, transitioning 1. "
    "Current errors: [ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS]: Instance 'gke-rl-gpu-pool-1-x' creation failed: "
    "The zone 'projects/p/zones/us-central1-b' does not have enough resources available to fulfill the request. "
    "A n1-standard-4 VM instance with 1 nvidia-tesla-t4 accelerator(s) is currently unavailable in the "
    "us-central1-b zone. Consider trying your request in the us-central1-a, us-central1-f zone(s), which "
    "currently has capacity to accommodate your request."
)
STOCKOUT_DETAILS = "errorInfo: metadatas: zone: us-central1-b zonesAvailable: us-central1-a,us-central1-f " + (
    "reason: resource_availability ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
)
STOCKOUT_OLD = (
    "ZONE_RESOURCE_POOL_EXHAUSTED: The zone 'projects/p/zones/us-central1-a' does not have enough resources "
    "available to fulfill the request. Try a different zone, or try again later."
)


def test_stockout_messages() -> None:
    for message in (STOCKOUT_GCE, STOCKOUT_DETAILS):
        error = classify(message)
        assert isinstance(error, CapacityError)
        assert error.zones_with_capacity == ["us-central1-a", "us-central1-f"]
        assert "fallback_zones" in str(error)
    old = classify(STOCKOUT_OLD)
    assert isinstance(old, CapacityError) and old.zones_with_capacity == []
    assert old.zone == "us-central1-a"  # type: ignore[attr-defined]
    assert zones_with_capacity("nothing here") == []


@pytest.mark.parametrize(
    ("message", "quota"),
    [
        (
            "Insufficient quota to satisfy the request: Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 0.0 globally.",
            "GPUS_ALL_REGIONS",
        ),
        (
            "Insufficient regional quota to satisfy request: resource \"NVIDIA_T4_GPUS\": request requires '1.0' and "
            "is short '1.0'. project has a quota of '0.0' with '0.0' available.",
            "NVIDIA_T4_GPUS",
        ),
        ("Code: QUOTA_EXCEEDED Message: Quota 'CPUS_ALL_REGIONS' exceeded.", "CPUS_ALL_REGIONS"),
    ],
)
def test_quota_messages(message: str, quota: str) -> None:
    for code in ("RESOURCE_EXHAUSTED", "PERMISSION_DENIED", ""):
        error = classify(message, code=code, project="my-proj")
        assert isinstance(error, QuotaExceededError)
        assert error.quota == quota
        assert "IAM & Admin > Quotas" in str(error)
        assert "https://console.cloud.google.com/iam-admin/quotas?project=my-proj" in str(error)


def test_busy_messages() -> None:
    new = classify(
        "Cluster is running incompatible operation operation-1718024305921-fd4f65ea.", code="FAILED_PRECONDITION"
    )
    assert isinstance(new, ClusterBusyError) and new.operation == "operation-1718024305921-fd4f65ea"
    old = classify(
        "Operation operation-1596064640049-1b03e177 is currently upgrading cluster x. Please wait and try "
        "again once it is done.",
        code="FAILED_PRECONDITION",
    )
    assert isinstance(old, ClusterBusyError) and old.operation == "operation-1596064640049-1b03e177"
    by_reason = classify("busy", code="FAILED_PRECONDITION", reason="CLUSTER_ALREADY_HAS_OPERATION")
    assert isinstance(by_reason, ClusterBusyError) and isinstance(by_reason, ConflictError)


def test_permission_and_auth_messages() -> None:
    api = classify(
        "Kubernetes Engine API has not been used in project 123 before or it is disabled.",
        code="PERMISSION_DENIED",
        project="proj",
    )
    assert isinstance(api, AuthError) and "container.googleapis.com" in str(api) and "project=proj" in str(api)
    role = classify('Required "container.clusters.delete" permission(s) for "projects/proj".', code="PERMISSION_DENIED")
    assert isinstance(role, AuthError)
    assert "roles/container.admin" in str(role) and "container.clusters.delete" in str(role)
    assert isinstance(classify("Request had invalid authentication credentials.", code="UNAUTHENTICATED"), AuthError)


def test_translate_api_error_keeps_status_and_reason() -> None:
    assert isinstance(translate_api_error(gexc.NotFound("Not found: x")), NotFoundError)
    assert isinstance(translate_api_error(gexc.AlreadyExists("Already exists: x")), ConflictError)
    assert isinstance(translate_api_error(gexc.InternalServerError("boom")), BackendError)
    assert isinstance(translate_api_error(gexc.Forbidden('Required "x.y" permission(s)')), AuthError)
    assert isinstance(translate_api_error(auth_exc.DefaultCredentialsError("none")), AuthError)
    refresh = translate_api_error(auth_exc.RefreshError("secret-ish detail"))
    assert isinstance(refresh, AuthError) and "secret-ish" not in str(refresh)


def test_operation_error_is_decided_by_the_error_code_and_reads_every_message() -> None:
    Op = container_v1.Operation
    assert operation_error(Op(name="op", status=Op.Status.DONE)) is None
    # descriptive fields alone (deprecated in favour of `error`) never make a success a failure
    described = Op(
        name="op",
        status=Op.Status.DONE,
        status_message=STOCKOUT_GCE,
        nodepool_conditions=[container_v1.StatusCondition(message=STOCKOUT_OLD)],
    )
    assert operation_error(described) is None
    failed = Op(
        name="op", status=Op.Status.DONE, status_message=STOCKOUT_GCE, error=status_pb2.Status(code=8, message="")
    )
    assert isinstance(operation_error(failed), CapacityError)
    by_error = Op(
        name="op",
        status=Op.Status.DONE,
        error=status_pb2.Status(code=8, message="Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 0.0 globally."),
    )
    quota = operation_error(by_error, action="create cluster rl")
    assert isinstance(quota, QuotaExceededError) and str(quota).startswith("create cluster rl: ")
    by_condition = Op(
        name="op",
        status=Op.Status.DONE,
        error=status_pb2.Status(code=8, message="failed"),
        nodepool_conditions=[container_v1.StatusCondition(message=STOCKOUT_OLD)],
    )
    assert isinstance(operation_error(by_condition), CapacityError)


def test_transient_failures() -> None:
    assert is_transient(gexc.InternalServerError("Internal error encountered."))
    assert is_transient(gexc.ServiceUnavailable("recvmsg:Connection reset by peer"))
    assert is_transient(gexc.RetryError("Timeout of 20.0s exceeded", cause=None))
    with pytest.raises(BackendError) as translated, api_errors(action="poll"):
        raise gexc.DeadlineExceeded("Deadline Exceeded")
    assert is_transient(translated.value)
    assert is_transient(ConnectionResetError())
    assert not is_transient(gexc.InvalidArgument("bad"))
    assert not is_transient(translate_api_error(gexc.Forbidden('Required "x.y" permission(s)')))
