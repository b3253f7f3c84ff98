"""The applier: sends built objects to the API server, idempotently, with retries.

- :func:`translate` is the one place where ``kubernetes`` ``ApiException`` and transport errors become
  the RLCloudError tree (``raise ... from exc``).
- :class:`Applier` wraps one ``ApiClient``: :meth:`Applier.call` retries transient failures (429,
  5xx, connection errors) with exponential backoff; :meth:`Applier.create` treats 409 AlreadyExists as
  "read it back and compare the config-hash annotation" (same: fine; different: ConflictError), so a
  create retried after a lost response never duplicates anything (names are fixed, never generated).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kubernetes import client as k8s
from urllib3.exceptions import HTTPError as Urllib3Error

from rlcloud.errors import (
    AuthError,
    BackendError,
    ConflictError,
    NotFoundError,
    QuotaExceededError,
    RLCloudError,
    SpecError,
    SpecProblem,
)
from rlcloud.k8s.builders import ANNOTATION_CONFIG_HASH

__all__ = ["Applier", "RetryPolicy", "api_message", "translate"]

logger = logging.getLogger(__name__)
T = TypeVar("T")

_TRANSIENT = {429, 500, 502, 503, 504}


def api_message(exc: k8s.ApiException) -> str:
    """The human part of an API error: the Status message when there is one (never the whole body)."""
    try:
        body = json.loads(exc.body or "")
    except (TypeError, ValueError):
        body = None
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return f"{exc.status} {exc.reason or ''}".strip()


def _status_reason(exc: k8s.ApiException) -> str:
    try:
        body = json.loads(exc.body or "")
    except (TypeError, ValueError):
        return ""
    return str(body.get("reason", "")) if isinstance(body, dict) else ""


def translate(exc: BaseException, what: str) -> RLCloudError:
    """Map an API or transport error met while doing ``what`` (e.g. "create Job x-agent") to RLCloudError."""
    if isinstance(exc, RLCloudError):
        return exc
    if isinstance(exc, k8s.ApiException):
        message = f"{what}: {api_message(exc)}"
        status = exc.status or 0
        if status == 401:
            return AuthError(f"{what}: the cluster rejected the credentials (401); refresh them (kubeconfig/login)")
        if status == 403:
            if "exceeded quota" in message:
                return QuotaExceededError(message, quota="resourcequota")
            return AuthError(f"{message} (403: the identity in the kubeconfig lacks this permission)")
        if status == 404:
            return NotFoundError(message)
        if status == 409:
            return ConflictError(message)
        if status == 422:
            return SpecError([SpecProblem(field=what, message=f"the API server rejected it: {api_message(exc)}")])
        return BackendError(f"{message} (HTTP {status}{', ' + _status_reason(exc) if _status_reason(exc) else ''})")
    if isinstance(exc, Urllib3Error | OSError):
        return BackendError(f"{what}: cannot reach the Kubernetes API server: {exc}")
    return BackendError(f"{what}: {exc!r}")


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, k8s.ApiException):
        return (exc.status or 0) in _TRANSIENT
    return isinstance(exc, Urllib3Error | ConnectionError | TimeoutError)


@dataclass(frozen=True)
class RetryPolicy:
    """Retries for transient API errors: ``attempts`` tries, sleeping ``initial`` * 2^n (capped)."""

    attempts: int = 6
    initial: float = 0.2
    maximum: float = 5.0


@dataclass(frozen=True)
class _KindApi:
    create: Callable[..., Any]
    read: Callable[..., Any]
    delete: Callable[..., Any]
    namespaced: bool = True


class Applier:
    """Creates, reads and deletes rlcloud's objects over one shared ``ApiClient``."""

    def __init__(self, api_client: k8s.ApiClient, retry: RetryPolicy | None = None) -> None:
        self.api_client = api_client
        self.retry = retry or RetryPolicy()
        self.core = k8s.CoreV1Api(api_client)
        self.batch = k8s.BatchV1Api(api_client)
        self.rbac = k8s.RbacAuthorizationV1Api(api_client)
        self._kinds: dict[str, _KindApi] = {
            "Namespace": _KindApi(
                self.core.create_namespace, self.core.read_namespace, self.core.delete_namespace, namespaced=False
            ),
            "ServiceAccount": _KindApi(
                self.core.create_namespaced_service_account,
                self.core.read_namespaced_service_account,
                self.core.delete_namespaced_service_account,
            ),
            "Secret": _KindApi(
                self.core.create_namespaced_secret,
                self.core.read_namespaced_secret,
                self.core.delete_namespaced_secret,
            ),
            "ConfigMap": _KindApi(
                self.core.create_namespaced_config_map,
                self.core.read_namespaced_config_map,
                self.core.delete_namespaced_config_map,
            ),
            "Service": _KindApi(
                self.core.create_namespaced_service,
                self.core.read_namespaced_service,
                self.core.delete_namespaced_service,
            ),
            "Job": _KindApi(
                self.batch.create_namespaced_job, self.batch.read_namespaced_job, self.batch.delete_namespaced_job
            ),
            "Role": _KindApi(
                self.rbac.create_namespaced_role, self.rbac.read_namespaced_role, self.rbac.delete_namespaced_role
            ),
            "RoleBinding": _KindApi(
                self.rbac.create_namespaced_role_binding,
                self.rbac.read_namespaced_role_binding,
                self.rbac.delete_namespaced_role_binding,
            ),
        }

    # -- plumbing ----------------------------------------------------------------------------------

    def call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` with retries on transient errors; other errors raise at once, raw.

        Callers that want RLCloudErrors wrap this in :func:`translate` (or use the helpers below).
        """
        delay = self.retry.initial
        for attempt in range(1, self.retry.attempts + 1):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if not _transient(exc) or attempt == self.retry.attempts:
                    raise
                logger.debug("%s: transient error (%s), retry %d in %.1fs", what, _brief(exc), attempt, delay)
                time.sleep(delay)
                delay = min(delay * 2, self.retry.maximum)
        raise AssertionError("unreachable")

    def list_raw(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """The ``items`` of a list call as plain JSON, skipping the client's model deserialisation
        (which dominates the cost of listing hundreds of pods). Retried and translated like :meth:`checked`."""

        def fetch() -> Any:
            resp = fn(*args, _preload_content=False, **kwargs)
            try:
                return json.loads(resp.data)
            finally:
                resp.release_conn()

        try:
            body = self.call(what, fetch)
        except Exception as exc:
            raise translate(exc, what) from exc
        return list(body.get("items") or [])

    def checked(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """:meth:`call`, with every failure translated into the RLCloudError tree."""
        try:
            return self.call(what, fn, *args, **kwargs)
        except Exception as exc:
            raise translate(exc, what) from exc

    # -- verbs -------------------------------------------------------------------------------------

    def create(self, obj: Any, *, compare: bool = True) -> Any:
        """Create ``obj``; if it exists, read it back: the same config hash (or ``compare=False``) is fine
        and returns the existing object, a different one raises :class:`ConflictError`."""
        kind = obj.kind
        api = self._kinds[kind]
        name = obj.metadata.name
        namespace = obj.metadata.namespace
        what = f"create {kind} {name}" + (f" in namespace {namespace}" if api.namespaced else "")
        args = (namespace, obj) if api.namespaced else (obj,)
        try:
            return self.call(what, api.create, *args)
        except k8s.ApiException as exc:
            if exc.status != 409:
                raise translate(exc, what) from exc
        existing = self.read(kind, name, namespace)
        if existing is None:  # deleted between our create and read: try once more
            return self.checked(what, api.create, *args)
        if compare:
            wanted = (obj.metadata.annotations or {}).get(ANNOTATION_CONFIG_HASH)
            have = (existing.metadata.annotations or {}).get(ANNOTATION_CONFIG_HASH)
            if wanted != have:
                raise ConflictError(
                    f"{kind} {name} in namespace {namespace} already exists with a different configuration "
                    "(another experiment of the same name, or the spec changed): stop the running experiment "
                    "first, or give this one another name"
                )
        return existing

    def read(self, kind: str, name: str, namespace: str | None = None) -> Any | None:
        """The object, or None when it does not exist."""
        api = self._kinds[kind]
        what = f"read {kind} {name}"
        try:
            return self.call(what, api.read, *((name, namespace) if api.namespaced else (name,)))
        except k8s.ApiException as exc:
            if exc.status == 404:
                return None
            raise translate(exc, what) from exc

    def delete(self, kind: str, name: str, namespace: str | None = None, propagation: str = "Foreground") -> bool:
        """Delete one object (dependents with ``propagation``); False when it was already gone."""
        api = self._kinds[kind]
        what = f"delete {kind} {name}"
        args = (name, namespace) if api.namespaced else (name,)
        try:
            self.call(what, api.delete, *args, propagation_policy=propagation)
            return True
        except k8s.ApiException as exc:
            if exc.status == 404:
                return False
            raise translate(exc, what) from exc


def _brief(exc: BaseException) -> str:
    if isinstance(exc, k8s.ApiException):
        return f"HTTP {exc.status}"
    return type(exc).__name__
