"""The applier: sends built objects to the API server, idempotently, with retries.

- :func:`translate` is the one place where ``kubernetes`` ``ApiException`` and transport errors become
  the RLCloudError tree (``raise ... from exc``).
- :class:`Applier` wraps one ``ApiClient``. Requests go through the client's own request layer
  (``ApiClient.param_serialize`` + ``call_api``: its configuration, TLS, bearer-token refresh hook and
  connection pool), but not through the generated ``CoreV1Api``/``BatchV1Api`` wrappers: building
  ``CoreV1Api`` alone costs ~5 s of CPU (hundreds of pydantic-validated methods) in every process, and
  their model deserialisation ~2 ms per pod. Responses are read as plain JSON.
- :meth:`Applier.call` retries transient failures (429, 5xx, connection errors) with exponential
  backoff; :meth:`Applier.create` treats 409 AlreadyExists as "read it back and compare the
  config-hash annotation" (same: fine; different: ConflictError), so a create retried after a lost
  response never duplicates anything (names are fixed, never generated).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

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
from rlcloud.waiting import Backoff, poll_until, retry

__all__ = ["KUEUE_API", "Applier", "RetryPolicy", "api_message", "path_for", "translate"]

logger = logging.getLogger(__name__)
T = TypeVar("T")
JSON = dict[str, Any]

_TRANSIENT = {429, 500, 502, 503, 504}

#: the Kueue API version rlcloud reads LocalQueues through (served by Kueue v0.x and later)
KUEUE_API = "kueue.x-k8s.io/v1beta1"

#: kind -> (API prefix, plural, namespaced)
_KINDS: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("/api/v1", "namespaces", False),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "Secret": ("/api/v1", "secrets", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Service": ("/api/v1", "services", True),
    "Pod": ("/api/v1", "pods", True),
    "Event": ("/api/v1", "events", True),
    "Job": ("/apis/batch/v1", "jobs", True),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    # the in-cluster reaper's kinds (k8s/reaper_install.py)
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "CronJob": ("/apis/batch/v1", "cronjobs", True),
    # sweeps submitted to Kueue: the LocalQueue must exist (read only)
    "LocalQueue": (f"/apis/{KUEUE_API}", "localqueues", True),
}


def path_for(kind: str, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
    """The REST path of a collection (``name=None``), an object, or an object's subresource."""
    prefix, plural, namespaced = _KINDS[kind]
    path = prefix + (f"/namespaces/{quote(namespace or '', safe='')}" if namespaced else "") + f"/{plural}"
    if name is not None:
        path += f"/{quote(name, safe='')}"
        if sub:
            path += f"/{sub}"
    return path


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
        reason = _status_reason(exc)
        return BackendError(f"{message} (HTTP {status}{', ' + reason if reason else ''})")
    if isinstance(exc, Urllib3Error | OSError):
        return BackendError(f"{what}: cannot reach the Kubernetes API server: {exc}")
    return BackendError(f"{what}: {exc!r}")


def _terminating(obj: JSON | None) -> bool:
    """True when ``obj`` exists and is being deleted (it carries a deletionTimestamp)."""
    return obj is not None and bool((obj.get("metadata") or {}).get("deletionTimestamp"))


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


class Applier:
    """Creates, reads, lists, patches and deletes rlcloud's objects over one shared ``ApiClient``."""

    def __init__(
        self, api_client: k8s.ApiClient, retry: RetryPolicy | None = None, terminating_wait: float = 120.0
    ) -> None:
        self.api_client = api_client
        self.retry = retry or RetryPolicy()
        #: how long create() waits for a same-named object that is being deleted to disappear
        self.terminating_wait = terminating_wait
        #: while :meth:`undo_on_failure` runs: (kind, name, namespace) of what create() made or may have made
        self._made: list[tuple[str, str, str | None]] | None = None

    @contextmanager
    def undo_on_failure(self) -> Iterator[None]:
        """Objects created inside the block are deleted again when the block raises: a start whose Job create
        was answered 500 (after the retries) or 422 left its ConfigMap (and Service) behind. Objects that were
        there before (a create answered 409) are never touched. The object whose create failed is deleted
        too, in case the server made it and the answer was lost (a 404 then: it was not made)."""
        made: list[tuple[str, str, str | None]] = []
        outer, self._made = self._made, made
        try:
            yield
        except BaseException:
            self._made = outer
            for kind, name, namespace in reversed(made):
                try:
                    self.delete(kind, name, namespace, propagation="Background")
                except RLCloudError as exc:  # the first error is the one to report; this one is logged
                    logger.warning("could not delete %s %s after a failed start: %s", kind, name, exc)
            raise
        self._made = outer
        if outer is not None:  # nested: the outer block undoes these too
            outer.extend(made)

    # -- plumbing ----------------------------------------------------------------------------------

    def call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` with retries on transient errors. An ``ApiException`` (an answer from the
        server) raises raw, for the caller to judge its status; anything else (an API server that is
        unreachable, dies mid-answer or answers garbage) raises translated (:func:`translate`): every request
        goes through here, so none escapes as a transport traceback."""
        try:
            return retry(
                lambda: fn(*args, **kwargs),
                retryable=_transient,
                backoff=Backoff(self.retry.initial, self.retry.maximum),
                attempts=self.retry.attempts,
                on_retry=lambda exc, attempt, pause: logger.debug(
                    "%s: transient error (%s), retry %d in %.1fs", what, _brief(exc), attempt, pause
                ),
            )
        except Exception as exc:
            if isinstance(exc, k8s.ApiException | RLCloudError):
                raise
            raise translate(exc, what) from exc

    def send(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
    ) -> Any:
        """One request through the client's request layer; the unread response (``.response`` is the
        urllib3 response, for streaming). Non-2xx raises ``ApiException``. No retry here."""
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        params = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=[(k, v) for k, v in (query or {}).items() if v is not None],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        resp = self.api_client.call_api(*params, _request_timeout=timeout)
        if not 200 <= resp.status <= 299:
            resp.read()
            raise k8s.ApiException(http_resp=resp)
        return resp

    def request_json(self, what: str, method: str, path: str, **kwargs: Any) -> Any:
        """:meth:`send` with retries, the body parsed as JSON. Raises ``ApiException`` (untranslated)."""

        def once() -> Any:
            resp = self.send(method, path, **kwargs)
            data = resp.read()
            return json.loads(data) if data else {}

        return self.call(what, once)

    def checked_json(self, what: str, method: str, path: str, **kwargs: Any) -> Any:
        """:meth:`request_json` with every failure translated into the RLCloudError tree."""
        try:
            return self.request_json(what, method, path, **kwargs)
        except Exception as exc:
            raise translate(exc, what) from exc

    # -- verbs -------------------------------------------------------------------------------------

    def create(self, obj: Any, *, compare: bool = True) -> JSON:
        """Create ``obj`` (a kubernetes model object); if it exists, read it back: the same config hash
        (or ``compare=False``) is fine and returns the existing object, a different one raises
        :class:`ConflictError`. Returns the object as JSON."""
        kind = obj.kind
        name = obj.metadata.name
        namespace = obj.metadata.namespace
        namespaced = _KINDS[kind][2]
        what = f"create {kind} {name}" + (f" in namespace {namespace}" if namespaced else "")
        path = path_for(kind, namespace)
        if self._made is not None:  # made, or maybe made (a lost answer): undone if the start fails
            self._made.append((kind, name, namespace))
        try:
            return dict(self.request_json(what, "POST", path, body=obj))
        except k8s.ApiException as exc:
            if exc.status != 409:
                raise translate(exc, what) from exc
        if self._made is not None:
            self._made.pop()  # it was there before: not ours to delete
        existing = self.read(kind, name, namespace)
        if _terminating(existing):
            # left over from a stop() whose foreground deletion is still finishing: wait until it is gone

            def settled() -> tuple[JSON | None] | None:
                now = self.read(kind, name, namespace)
                return None if _terminating(now) else (now,)

            waited = poll_until(
                settled, time.monotonic() + self.terminating_wait, interval=min(1.0, self.retry.maximum)
            )
            if waited is None:
                raise ConflictError(f"{kind} {name} in namespace {namespace} is still being deleted; try again")
            existing = waited[0]
        if existing is None:  # deleted between our create and read: try once more
            if self._made is not None:
                self._made.append((kind, name, namespace))
            return dict(self.checked_json(what, "POST", path, body=obj))
        if compare:
            wanted = (obj.metadata.annotations or {}).get(ANNOTATION_CONFIG_HASH)
            have = ((existing.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_CONFIG_HASH)
            if wanted != have:
                raise ConflictError(
                    f"{kind} {name} in namespace {namespace} already exists with a different configuration "
                    "(another experiment of the same name, or the spec changed): stop the running experiment "
                    "first, or give this one another name"
                )
        return existing

    def read(self, kind: str, name: str, namespace: str | None = None) -> JSON | None:
        """The object as JSON, or None when it does not exist."""
        what = f"read {kind} {name}"
        try:
            return dict(self.request_json(what, "GET", path_for(kind, namespace, name)))
        except k8s.ApiException as exc:
            if exc.status == 404:
                return None
            raise translate(exc, what) from exc

    def replace(self, obj: Any) -> JSON:
        """Replace an existing object with ``obj`` (no resourceVersion: last writer wins)."""
        kind, name, namespace = obj.kind, obj.metadata.name, obj.metadata.namespace
        return dict(self.checked_json(f"replace {kind} {name}", "PUT", path_for(kind, namespace, name), body=obj))

    def list_items(
        self, kind: str, namespace: str | None, *, label_selector: str | None = None, what: str | None = None
    ) -> list[JSON]:
        """The ``items`` of a list call, as JSON."""
        body = self.checked_json(
            what or f"list {kind}s", "GET", path_for(kind, namespace), query={"labelSelector": label_selector}
        )
        return list(body.get("items") or [])

    def patch(self, kind: str, name: str, namespace: str | None, patch: JSON, *, what: str | None = None) -> JSON:
        """JSON-merge-patch an object."""
        return dict(
            self.checked_json(
                what or f"patch {kind} {name}",
                "PATCH",
                path_for(kind, namespace, name),
                body=patch,
                content_type="application/merge-patch+json",
            )
        )

    def delete(self, kind: str, name: str, namespace: str | None = None, propagation: str = "Foreground") -> bool:
        """Delete one object (dependents with ``propagation``); False when it was already gone."""
        what = f"delete {kind} {name}"
        try:
            self.request_json(what, "DELETE", path_for(kind, namespace, name), query={"propagationPolicy": propagation})
            return True
        except k8s.ApiException as exc:
            if exc.status == 404:
                return False
            raise translate(exc, what) from exc

    def delete_collection(
        self, kind: str, namespace: str, *, label_selector: str, propagation: str | None = None
    ) -> None:
        """Delete every object of ``kind`` matching the selector (nothing matching is fine)."""
        self.checked_json(
            f"delete the {kind}s matching {label_selector}",
            "DELETE",
            path_for(kind, namespace),
            query={"labelSelector": label_selector, "propagationPolicy": propagation},
        )

    def version(self) -> JSON:
        """The server's /version document."""
        return dict(self.checked_json("read the server version", "GET", "/version"))

    def pod_log(self, name: str, namespace: str) -> str:
        """A pod's log so far. Raises ``ApiException`` (400 while the container waits to start, 404)."""

        def once() -> str:
            resp = self.send("GET", path_for("Pod", namespace, name, "log"), accept="text/plain")
            return bytes(resp.read()).decode("utf-8", errors="replace")

        return self.call(f"read the log of pod {name}", once)

    def follow_log(self, name: str, namespace: str) -> Any:
        """A streaming response of a pod's log (``.response.stream()``); the caller closes it."""
        return self.send("GET", path_for("Pod", namespace, name, "log"), query={"follow": "true"}, accept="text/plain")


def _brief(exc: BaseException) -> str:
    if isinstance(exc, k8s.ApiException):
        return f"HTTP {exc.status}"
    return type(exc).__name__
