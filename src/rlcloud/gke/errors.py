"""The one place where Container API errors become rlcloud errors.

Two sources of failure: a call raises ``google.api_core.exceptions.GoogleAPICallError`` (quota,
permission, busy cluster, not found...), or an operation ends DONE with an error (stockouts and many
quota failures only show up there, minutes later). Both go through :func:`classify`, so a quota
problem reads the same wherever it surfaced.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rlcloud.errors import (
    AuthError,
    BackendError,
    CapacityError,
    ConflictError,
    NotFoundError,
    QuotaExceededError,
    RLCloudError,
)

__all__ = [
    "ClusterBusyError",
    "api_errors",
    "classify",
    "is_transient",
    "operation_error",
    "translate_api_error",
    "zones_with_capacity",
]

QUOTAS_URL = "https://console.cloud.google.com/iam-admin/quotas?project={project}"
API_URL = "https://console.cloud.google.com/apis/library/container.googleapis.com?project={project}"
ADMIN_ROLE = "roles/container.admin"

_ZONE = r"[a-z]+-[a-z]+[0-9]+-[a-z]"
_CAPACITY_ZONES_RE = re.compile(r"Consider trying your request in the (.+?) zone\(s\)")
_ZONES_AVAILABLE_RE = re.compile(r"zonesAvailable:\s*([a-z0-9,\s-]*)")
_STOCKED_ZONE_RES = (
    re.compile(rf"unavailable in the ({_ZONE}) zone"),
    re.compile(rf"zones/({_ZONE})' does not have enough resources"),
)
_QUOTA_RES = (
    re.compile(r"Quota '([A-Za-z0-9_]+)' exceeded"),
    re.compile(r"quota[^\"']*resource \"([A-Za-z0-9_]+)\"", re.IGNORECASE),
    re.compile(r"\b([A-Z][A-Z0-9_]*_(?:GPUS|CPUS|GB|ADDRESSES)(?:_[A-Z0-9_]+)?)\b"),
)
_BUSY_RE = re.compile(
    r"incompatible operation (operation-[\w-]+)|Operation (operation-[\w-]+) is currently \w+",
)
_PERMISSION_RE = re.compile(r"Required \"([\w.]+)\" permission")


class ClusterBusyError(ConflictError):
    """Another operation runs on the cluster (CLUSTER_ALREADY_HAS_OPERATION): wait for it, then retry.

    rlcloud handles this itself (waits and retries); it only escapes when the wait times out.
    """

    def __init__(self, message: str, *, operation: str | None = None) -> None:
        super().__init__(message)
        self.operation = operation


def zones_with_capacity(message: str) -> list[str]:
    """The zones a Compute Engine stockout message says still have capacity, in its order."""
    zones: list[str] = []
    for regex in (_CAPACITY_ZONES_RE, _ZONES_AVAILABLE_RE):
        for match in regex.finditer(message):
            for zone in re.findall(_ZONE, match.group(1)):
                if zone not in zones:
                    zones.append(zone)
    return zones


def _stocked_out_zone(message: str) -> str | None:
    for regex in _STOCKED_ZONE_RES:
        match = regex.search(message)
        if match:
            return match.group(1)
    return None


def _quota_name(message: str) -> str | None:
    for regex in _QUOTA_RES:
        match = regex.search(message)
        if match:
            return match.group(1)
    return None


def _is_quota(message: str, reason: str, code: str) -> bool:
    lowered = message.lower()
    return (
        (reason in {"QUOTA_EXCEEDED", "RATE_LIMIT_EXCEEDED"} and "quota" in lowered)
        or "quota_exceeded" in lowered
        or ("quota" in lowered and ("exceeded" in lowered or "insufficient" in lowered))
    )


def _is_stockout(message: str, reason: str) -> bool:
    return (
        "ZONE_RESOURCE_POOL_EXHAUSTED" in message
        or "GCE_STOCKOUT" in message
        or "does not have enough resources available" in message
        or reason in {"ZONE_RESOURCE_POOL_EXHAUSTED", "resource_availability"}
    )


def _is_busy(message: str, reason: str) -> bool:
    return reason == "CLUSTER_ALREADY_HAS_OPERATION" or bool(_BUSY_RE.search(message))


def classify(
    message: str, *, code: str = "", reason: str = "", project: str | None = None, action: str = ""
) -> RLCloudError:
    """Turn an API or operation error (its message, status code name and ErrorInfo reason) into our tree.

    ``code`` is the gRPC/HTTP status name ("RESOURCE_EXHAUSTED", "PERMISSION_DENIED"...); ``action`` says
    what was being done ("create cluster rl in us-central1-a") for the message.
    """
    project_text = project or "<your project>"
    doing = f"{action}: " if action else ""
    if _is_quota(message, reason, code):
        quota = _quota_name(message)
        named = quota or "a Compute Engine quota"
        url = QUOTAS_URL.format(project=project_text)
        return QuotaExceededError(
            f"{doing}quota {named} is too low for this request. Ask for more in the Google Cloud console under "
            f"IAM & Admin > Quotas ({url}): filter by {quota or 'the quota named below'}, select it and choose "
            "'Edit quotas' (GPU quota starts at 0 in new projects; GPUS_ALL_REGIONS and the per-region GPU quota "
            f"must both cover the request). Google said: {message}",
            quota=quota,
        )
    if _is_stockout(message, reason):
        zone = _stocked_out_zone(message)
        zones = zones_with_capacity(message)
        where = f" in {zone}" if zone else ""
        hint = (
            f"Zones with capacity right now: {', '.join(zones)}. Allow rlcloud to retry there with "
            f"fallback_zones: [{', '.join(zones)}] in the cluster spec (or create(fallback_zones=[...]))"
            if zones
            else "Google named no zone with capacity; add fallback_zones to the cluster spec"
        )
        error = CapacityError(
            f"{doing}no capacity{where} for the requested machines (ZONE_RESOURCE_POOL_EXHAUSTED; this is not a "
            f"quota problem). {hint}, change the machine/GPU type, or retry later. Google said: {message}",
            zones_with_capacity=zones,
        )
        error.zone = zone  # type: ignore[attr-defined]
        return error
    if _is_busy(message, reason):
        match = _BUSY_RE.search(message)
        operation = (match.group(1) or match.group(2)) if match else None
        return ClusterBusyError(
            f"{doing}another operation ({operation or 'unknown'}) is running on the cluster; GKE allows one at a "
            "time. Wait for it to finish and retry.",
            operation=operation,
        )
    if code in {"PERMISSION_DENIED", "FORBIDDEN"}:
        if reason == "SERVICE_DISABLED" or "has not been used in project" in message or "it is disabled" in message:
            return AuthError(
                f"{doing}the Kubernetes Engine API (container.googleapis.com) is not enabled in project "
                f"{project_text}. Enable it at {API_URL.format(project=project_text)} (it needs the Compute "
                f"Engine API too), wait a minute, and retry. Google said: {message}"
            )
        permission = _PERMISSION_RE.search(message)
        needed = f" (missing permission {permission.group(1)})" if permission else ""
        return AuthError(
            f"{doing}permission denied{needed}. The account needs the Kubernetes Engine Admin role "
            f"({ADMIN_ROLE}) on project {project_text}, and Service Account User (roles/iam.serviceAccountUser) "
            f"on the nodes' service account: grant them under IAM & Admin > IAM. Google said: {message}"
        )
    if code in {"UNAUTHENTICATED", "UNAUTHORIZED"}:
        return AuthError(
            f"{doing}the Google credentials were rejected (invalid or expired). Run `gcloud auth "
            "application-default login`, or point GOOGLE_APPLICATION_CREDENTIALS at a service-account key. "
            f"Google said: {message}"
        )
    if code == "NOT_FOUND":
        return NotFoundError(f"{doing}not found. Google said: {message}")
    if code == "ALREADY_EXISTS":
        return ConflictError(f"{doing}it already exists. Google said: {message}")
    return BackendError(f"{doing}the Container API failed ({code or 'error'}). Google said: {message}")


def translate_api_error(exc: Exception, *, project: str | None = None, action: str = "") -> RLCloudError:
    """Translate a google.api_core / google.auth exception raised by a ClusterManagerClient call."""
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc

    if isinstance(exc, auth_exc.DefaultCredentialsError):
        return AuthError(
            f"{action + ': ' if action else ''}no Google credentials found. Run `gcloud auth application-default "
            "login`, set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, or pass credentials=."
        )
    if isinstance(exc, auth_exc.GoogleAuthError):
        return AuthError(
            f"{action + ': ' if action else ''}could not obtain a Google access token ({type(exc).__name__}). "
            "Re-run `gcloud auth application-default login` or check the service-account key."
        )
    if isinstance(exc, gexc.RetryError):
        # the client library's own retry of a read ran out (UNAVAILABLE each time: no route to Google, a proxy,
        # DNS): one line saying so, not three chained tracebacks
        last = exc.cause if isinstance(exc.cause, BaseException) else None
        why = f" (last: {_brief_error(last)})" if last is not None else ""
        return BackendError(
            f"{action + ': ' if action else ''}cannot reach the Google Kubernetes Engine API "
            f"(container.googleapis.com); its client retried for {_retry_seconds(exc)}{why}. Check the network: "
            "a proxy (HTTPS_PROXY), a firewall or DNS"
        )
    if isinstance(exc, gexc.GoogleAPICallError):
        code = ""
        grpc_code = getattr(exc, "grpc_status_code", None)
        if grpc_code is not None:
            code = grpc_code.name
        elif isinstance(exc, gexc.Forbidden):
            code = "PERMISSION_DENIED"
        elif isinstance(exc, gexc.Unauthorized):
            code = "UNAUTHENTICATED"
        elif isinstance(exc, gexc.NotFound):
            code = "NOT_FOUND"
        elif isinstance(exc, gexc.Conflict):
            code = "ALREADY_EXISTS"
        elif isinstance(exc, gexc.TooManyRequests):
            code = "RESOURCE_EXHAUSTED"
        return classify(exc.message or str(exc), code=code, reason=exc.reason or "", project=project, action=action)
    if isinstance(exc, RLCloudError):
        return exc
    return BackendError(f"{action + ': ' if action else ''}{type(exc).__name__}: {exc}")


def _brief_error(exc: BaseException) -> str:
    """An exception as one short line (gRPC's messages hold every address it tried)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 160 else text[:157] + "..."


def _retry_seconds(exc: Any) -> str:
    """How long the retry ran, from RetryError's message ("Timeout of 20.0s exceeded, ..."), else "a while"."""
    import re

    match = re.search(r"Timeout of ([0-9.]+)s", str(getattr(exc, "message", "")))
    return f"{float(match.group(1)):g} s" if match else "a while"


def operation_error(operation: Any, *, project: str | None = None, action: str = "") -> RLCloudError | None:
    """The error a finished GKE Operation reports, translated; None when it succeeded.

    Only ``operation.error`` decides (a ``google.rpc.Status``: code 0 or unset is success). The Container
    API reference calls it "the error result of the operation in case of failure"; ``status_message`` and
    the cluster/node-pool conditions are deprecated descriptive fields, which a successful operation may
    carry too (a warning about the node version, say): they only add words to the message of a failure.
    """
    number = int(operation.error.code) if operation.error else 0
    if not number:
        return None
    message = operation.error.message or operation.status_message or ""
    for extra in [operation.status_message] + [
        c.message for c in list(operation.cluster_conditions) + list(operation.nodepool_conditions)
    ]:
        if extra and extra not in message:
            message = f"{message} {extra}".strip()
    code = _CODE_NAMES.get(number, "")
    return classify(message or "the operation failed", code=code, project=project, action=action)


def is_transient(exc: BaseException) -> bool:
    """True for a failure worth repeating a read for: the service or the network had a moment, not our request.

    UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL and the other 5xx, ABORTED, a rate limit (RESOURCE_EXHAUSTED on
    a read), google.api_core's RetryError (its own retry ran out), a token refresh that could not reach
    Google, a reset connection. ``exc`` may be an rlcloud error translated by :func:`api_errors`: its cause
    decides. Google's "Retry failed requests" guidance (cloud.google.com/apis/design/errors#error_retries)
    lists UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL and RESOURCE_EXHAUSTED (with backoff) as retryable.
    """
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc

    if isinstance(exc, RLCloudError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return isinstance(
        exc,
        gexc.ServiceUnavailable
        | gexc.DeadlineExceeded
        | gexc.InternalServerError
        | gexc.BadGateway
        | gexc.GatewayTimeout
        | gexc.Aborted
        | gexc.TooManyRequests
        | gexc.RetryError
        | auth_exc.TransportError
        | ConnectionError,
    )


@contextmanager
def api_errors(*, project: str | None = None, action: str = "") -> Iterator[None]:
    """Run Container API calls; re-raise Google errors as rlcloud errors (``raise ... from exc``)."""
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc

    try:
        yield
    except (gexc.GoogleAPIError, auth_exc.GoogleAuthError) as exc:  # GoogleAPIError: RetryError too
        raise translate_api_error(exc, project=project, action=action) from exc


# google.rpc.Code numbers -> names (operation.error carries the number only).
_CODE_NAMES = {
    1: "CANCELLED",
    2: "UNKNOWN",
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND",
    6: "ALREADY_EXISTS",
    7: "PERMISSION_DENIED",
    8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION",
    10: "ABORTED",
    13: "INTERNAL",
    14: "UNAVAILABLE",
    16: "UNAUTHENTICATED",
}
