"""FakeKubeApiServer: a small, stateful kube-apiserver that the real ``kubernetes`` client can talk to.

No kube-apiserver binary can be installed on the test machines (see /work/shared/FACTS.md), so this
standard-library HTTP server implements the part of the Kubernetes REST API that rlcloud uses:

* resources: namespaces, nodes, pods (+ ``/status``, ``/log``), services, configmaps, secrets,
  serviceaccounts, events (core/v1); jobs (+ ``/status``, batch/v1); roles, rolebindings
  (rbac.authorization.k8s.io/v1);
* verbs: create (409 ``AlreadyExists`` with a real ``Status`` body, 404 when the namespace is
  missing, 422 for invalid names/labels), get (404), list with label selectors (equality and
  set-based) and simple field selectors, replace (optimistic concurrency on ``resourceVersion``),
  patch (JSON merge patch for merge/strategic content types, RFC 6902 for ``json-patch+json``),
  delete (returns the object; ``propagationPolicy`` cascades over ``ownerReferences``, the batch/v1
  Job default being ``Orphan`` as in the real API), deletecollection, watch (chunked stream,
  ``timeoutSeconds``, ``resourceVersion``, an ``ERROR`` event with code 410 once history was
  compacted), pod logs (``follow``, ``tailLines``; 400 while the pod is still Pending);
* some server-side defaults (Job selector/labels/backoffLimit..., Service clusterIP, Pod phase) so
  that clients have to cope with objects that differ from what they sent;
* optional TLS (``tls=ssl.SSLContext``) and bearer-token checking (``token_validator``);
* fault injection (:meth:`FakeKubeApiServer.inject_fault`) and a request log
  (:attr:`FakeKubeApiServer.requests`) for tests and benchmarks.

It is a test double, not a conformance implementation: admission, defaulting and validation are
only as deep as rlcloud's tests need. Test-only code (kubelet fake, fixtures) can use the in-process
methods (:meth:`create_object`, :meth:`get_object`, :meth:`list_objects`, :meth:`update_status`,
:meth:`delete_object`, :meth:`append_log`, :meth:`record_event`), which skip the request log.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime as _dt
import http.server
import json
import re
import secrets
import socket
import ssl
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["FakeKubeApiServer", "Fault", "RecordedRequest", "ResourceType"]

JSON = dict[str, Any]


@dataclass(frozen=True)
class ResourceType:
    """One REST resource the fake serves."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: frozenset[str] = frozenset()
    #: what a DELETE without propagationPolicy does to dependents (batch/v1 Jobs: Orphan, for
    #: backwards compatibility, exactly like the real API server)
    default_propagation: str = "Background"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """``plural.group`` as the API names it in messages (``jobs.batch``, ``pods``)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", False, frozenset({"status"})),
    ResourceType("", "v1", "nodes", "Node", False, frozenset({"status"})),
    ResourceType("", "v1", "pods", "Pod", True, frozenset({"status", "log"})),
    ResourceType("", "v1", "services", "Service", True, frozenset({"status"})),
    ResourceType("", "v1", "configmaps", "ConfigMap", True),
    ResourceType("", "v1", "secrets", "Secret", True),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True),
    ResourceType("", "v1", "events", "Event", True),
    ResourceType("", "v1", "resourcequotas", "ResourceQuota", True, frozenset({"status"})),
    ResourceType("batch", "v1", "jobs", "Job", True, frozenset({"status"}), default_propagation="Orphan"),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    ResourceType("batch", "v1", "cronjobs", "CronJob", True, frozenset({"status"})),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    # Kueue's CRD: served only by a fake started with kueue=True (a cluster where Kueue is installed;
    # kueue.sigs.k8s.io/docs/concepts/local_queue/)
    ResourceType("kueue.x-k8s.io", "v1beta1", "localqueues", "LocalQueue", True, frozenset({"status"})),
)
#: API groups that only exist when a CRD is installed (FakeKubeApiServer(kueue=True))
_CRD_GROUPS = {"kueue.x-k8s.io"}
_BY_PATH: dict[tuple[str, str, str], ResourceType] = {(r.group, r.version, r.plural): r for r in RESOURCE_TYPES}
_BY_KIND: dict[str, ResourceType] = {r.kind: r for r in RESOURCE_TYPES}

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
#: resources whose names must be DNS-1123 labels (not subdomains); Jobs are limited to 63 characters
#: because the name becomes a label value on their pods
_LABEL_NAMED = {"Namespace", "Service", "Job"}


class ApiError(Exception):
    """An error response: HTTP status + a metav1.Status body."""

    def __init__(self, code: int, reason: str, message: str, details: JSON | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> JSON:
        body: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{rt.key} "{name}" not found',
        {"name": name, "group": rt.group, "kind": rt.plural},
    )


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class RecordedRequest:
    """One request the fake received (before fault injection and auth)."""

    method: str
    path: str
    query: dict[str, list[str]]
    user_agent: str = ""


@dataclass
class Fault:
    """A planned failure: the next ``count`` requests matching method + path regex get ``status``.

    With ``after=True`` the request is carried out first and the error returned afterwards, like a
    response lost on the way back to the client (the client sees 500 though the object exists).
    """

    method: str | None
    path: re.Pattern[str]
    status: int
    count: int
    reason: str
    message: str
    after: bool = False
    hits: int = 0


@dataclass
class _Change:
    rv: int
    type: str  # ADDED / MODIFIED / DELETED
    rt: ResourceType
    namespace: str
    obj: JSON


# ---------------------------------------------------------------------------------------------------
# selectors and patches


def _split_terms(selector: str) -> list[str]:
    terms, depth, cur = [], 0, []
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        terms.append("".join(cur).strip())
    return [t for t in terms if t]


_SET_TERM = re.compile(r"^(?P<key>[^\s!=()]+)\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)$")


def parse_label_selector(selector: str) -> Callable[[dict[str, str]], bool]:
    """Compile a label selector (``a=b,c!=d,e in (x,y),f notin (z),g,!h``) into a predicate."""
    checks: list[Callable[[dict[str, str]], bool]] = []
    for term in _split_terms(selector):
        m = _SET_TERM.match(term)
        if m:
            key, op = m["key"], m["op"]
            values = {v.strip() for v in m["values"].split(",") if v.strip()}
            if op == "in":
                checks.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                checks.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            checks.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif "=" in term:
            key, value = (s.strip() for s in re.split(r"==?", term, maxsplit=1))
            checks.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif term.startswith("!"):
            key = term[1:].strip()
            checks.append(lambda labels, k=key: k not in labels)
        elif _LABEL_NAME.match(term.split("/")[-1]):
            checks.append(lambda labels, k=term: k in labels)
        else:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {term!r}")
    return lambda labels: all(check(labels) for check in checks)


def _dig(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def parse_field_selector(selector: str) -> Callable[[JSON], bool]:
    """Compile a field selector (``metadata.name=x,status.phase!=Running``) into a predicate."""
    checks: list[Callable[[JSON], bool]] = []
    for term in _split_terms(selector):
        if "!=" in term:
            path, value = (s.strip() for s in term.split("!=", 1))
            checks.append(lambda o, p=path, v=value: str(_dig(o, p) or "") != v)
        elif "=" in term:
            path, value = (s.strip() for s in re.split(r"==?", term, maxsplit=1))
            checks.append(lambda o, p=path, v=value: str(_dig(o, p) or "") == v)
        else:
            raise ApiError(400, "BadRequest", f"invalid field selector term {term!r}")
    return lambda obj: all(check(obj) for check in checks)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (strategic merge patches are treated the same way)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):  # strategic-merge directives ($patch, $retainKeys...): not modelled
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def json_patch(target: JSON, ops: list[JSON]) -> JSON:
    """RFC 6902 JSON patch: add, remove, replace, test (enough for clients that send lists)."""
    doc = copy.deepcopy(target)
    for op in ops:
        parts = _pointer(op["path"])
        parent: Any = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent.setdefault(part, {})
        last = parts[-1]
        kind = op["op"]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(index, op["value"])
            elif kind == "remove":
                parent.pop(index)
            elif kind == "replace":
                parent[index] = op["value"]
            elif kind == "test" and parent[index] != op["value"]:
                raise ApiError(422, "Invalid", f"test operation failed at {op['path']}")
        else:
            if kind in ("add", "replace"):
                parent[last] = op["value"]
            elif kind == "remove":
                if last not in parent:
                    raise ApiError(422, "Invalid", f"path {op['path']} does not exist")
                del parent[last]
            elif kind == "test" and parent.get(last) != op["value"]:
                raise ApiError(422, "Invalid", f"test operation failed at {op['path']}")
    return doc


# ---------------------------------------------------------------------------------------------------
# the store


class _Store:
    """Objects keyed by (resource type, namespace, name), a global resourceVersion and a change log."""

    def __init__(self, history_limit: int) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.objects: dict[tuple[ResourceType, str, str], JSON] = {}
        self.rv = 0
        self.history: list[_Change] = []
        self.history_limit = history_limit
        #: the oldest resourceVersion a watch can still start from (older: 410 Gone)
        self.oldest_rv = 0
        self.logs: dict[tuple[str, str], bytearray] = {}
        self.closing = False
        #: set by a kubelet fake: deleting a running pod only marks it until the kubelet confirms
        self.graceful_pods = False

    # -- helpers -------------------------------------------------------------------------------

    def _bump(self, change_type: str, rt: ResourceType, namespace: str, obj: JSON) -> None:
        self.history.append(_Change(self.rv, change_type, rt, namespace, copy.deepcopy(obj)))
        if len(self.history) > self.history_limit:
            dropped = self.history[: len(self.history) - self.history_limit]
            del self.history[: len(dropped)]
            self.oldest_rv = dropped[-1].rv
        self.changed.notify_all()

    def compact(self) -> None:
        with self.lock:
            self.history.clear()
            self.oldest_rv = self.rv

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    # -- verbs ---------------------------------------------------------------------------------

    def create(self, rt: ResourceType, namespace: str, body: JSON) -> JSON:
        with self.lock:
            obj = copy.deepcopy(body)
            obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
            meta = obj.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
            name = meta.get("name") or ""
            _validate_meta(rt, meta)
            if rt.kind == "Job":
                _validate_job_spec(name, obj.get("spec") or {})
            if rt.namespaced:
                if meta.get("namespace") and meta["namespace"] != namespace:
                    raise ApiError(
                        400,
                        "BadRequest",
                        "the namespace of the provided object does not match the namespace sent on the request",
                    )
                meta["namespace"] = namespace
                if (_BY_KIND["Namespace"], "", namespace) not in self.objects:
                    raise ApiError(
                        404,
                        "NotFound",
                        f'namespaces "{namespace}" not found',
                        {"name": namespace, "kind": "namespaces"},
                    )
                if rt.kind == "Pod":
                    _admit_pod_security(self.objects[(_BY_KIND["Namespace"], "", namespace)], obj)
            key = (rt, namespace if rt.namespaced else "", name)
            if key in self.objects:
                raise ApiError(
                    409,
                    "AlreadyExists",
                    f'{rt.key} "{name}" already exists',
                    {"name": name, "group": rt.group, "kind": rt.plural},
                )
            _validate_size(rt, obj)
            meta.pop("resourceVersion", None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = _now()
            meta["generation"] = 1
            _apply_defaults(rt, obj, self)
            meta["resourceVersion"] = self._next_rv()
            self.objects[key] = obj
            self._bump("ADDED", rt, key[1], obj)
            return copy.deepcopy(obj)

    def get(self, rt: ResourceType, namespace: str, name: str) -> JSON:
        with self.lock:
            obj = self.objects.get((rt, namespace if rt.namespaced else "", name))
            if obj is None:
                raise _not_found(rt, name)
            return copy.deepcopy(obj)

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[JSON]:
        labels_ok = parse_label_selector(label_selector) if label_selector else None
        fields_ok = parse_field_selector(field_selector) if field_selector else None
        with self.lock:
            items = []
            for (t, ns, _), obj in self.objects.items():
                if t is not rt or (namespace is not None and ns != namespace):
                    continue
                if labels_ok and not labels_ok(obj["metadata"].get("labels") or {}):
                    continue
                if fields_ok and not fields_ok(obj):
                    continue
                items.append(copy.deepcopy(obj))
            return items

    def update(self, rt: ResourceType, namespace: str, name: str, body: JSON, subresource: str = "") -> JSON:
        """Replace an object (``subresource="status"``: only its status)."""
        with self.lock:
            key = (rt, namespace if rt.namespaced else "", name)
            current = self.objects.get(key)
            if current is None:
                raise _not_found(rt, name)
            sent_rv = (body.get("metadata") or {}).get("resourceVersion")
            if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {rt.key} "{name}": the object has been '
                    "modified; please apply your changes to the latest version and try again",
                    {"name": name, "group": rt.group, "kind": rt.plural},
                )
            if subresource == "status":
                new = copy.deepcopy(current)
                new["status"] = copy.deepcopy(body.get("status") or {})
                qos = (current.get("status") or {}).get("qosClass")
                if rt.kind == "Pod" and qos:
                    new["status"]["qosClass"] = qos  # set at creation, immutable after
            else:
                new = copy.deepcopy(body)
                new["apiVersion"], new["kind"] = rt.api_version, rt.kind
                meta = new.setdefault("metadata", {})
                if meta.get("name", name) != name:
                    raise ApiError(400, "BadRequest", "the name of the object does not match the URL")
                meta["name"] = name
                _validate_meta(rt, meta)
                _validate_size(rt, new)
                if rt.namespaced:
                    meta["namespace"] = namespace
                for kept in ("uid", "creationTimestamp", "generation", "deletionTimestamp"):
                    if kept in current["metadata"]:
                        meta[kept] = current["metadata"][kept]
                if "status" in rt.subresources:
                    # the main resource cannot change status (only /status can), as in the real API
                    if "status" in current:
                        new["status"] = copy.deepcopy(current["status"])
                    else:
                        new.pop("status", None)
                if new.get("spec") != current.get("spec"):
                    meta["generation"] = current["metadata"].get("generation", 1) + 1
                _apply_defaults(rt, new, self, updating=True)
                if rt.kind == "Job":
                    _validate_job_update(name, current.get("spec") or {}, new.get("spec") or {})
            if _strip_rv(new) == _strip_rv(current):
                return copy.deepcopy(current)  # no-op updates do not bump resourceVersion
            new["metadata"]["resourceVersion"] = self._next_rv()
            self.objects[key] = new
            self._bump("MODIFIED", rt, key[1], new)
            return copy.deepcopy(new)

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        patch: Any,
        content_type: str,
        subresource: str = "",
    ) -> JSON:
        with self.lock:
            current = self.get(rt, namespace, name)
            if "json-patch" in content_type:
                if not isinstance(patch, list):
                    raise ApiError(400, "BadRequest", "json patch body must be a list of operations")
                new = json_patch(current, patch)
            else:
                if not isinstance(patch, dict):
                    raise ApiError(400, "BadRequest", "merge patch body must be an object")
                new = merge_patch(current, patch)
            # a patch carries no precondition unless it names a resourceVersion itself
            if not (isinstance(patch, dict) and (patch.get("metadata") or {}).get("resourceVersion")):
                new.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
            return self.update(rt, namespace, name, new, subresource)

    def delete(self, rt: ResourceType, namespace: str, name: str, propagation: str | None, force: bool = False) -> JSON:
        with self.lock:
            key = (rt, namespace if rt.namespaced else "", name)
            obj = self.objects.get(key)
            if obj is None:
                raise _not_found(rt, name)
            policy = propagation or rt.default_propagation
            if rt.kind == "Namespace":
                for other in [k for k in self.objects if k[0].namespaced and k[1] == name]:
                    self._remove(other, force=True)
            elif policy in ("Foreground", "Background"):
                self._delete_dependents(obj["metadata"]["uid"])
            else:  # Orphan: dependents stay, their ownerReferences to this object go away
                self._orphan_dependents(obj["metadata"]["uid"])
            removed = self._remove(key, force=force)
            removed["metadata"].setdefault("deletionTimestamp", _now())
            return removed

    def _remove(self, key: tuple[ResourceType, str, str], force: bool = False) -> JSON:
        obj = self.objects[key]
        if key[0].kind == "Pod" and self.graceful_pods and not force and _pod_on_node(obj):
            # graceful deletion: the pod stays, marked, until its kubelet has stopped the containers
            # and deletes it for good (gracePeriodSeconds=0), as in a real cluster
            if "deletionTimestamp" not in obj["metadata"]:
                obj = copy.deepcopy(obj)
                obj["metadata"]["deletionTimestamp"] = _now()
                obj["metadata"]["deletionGracePeriodSeconds"] = obj["spec"].get("terminationGracePeriodSeconds", 30)
                obj["metadata"]["resourceVersion"] = self._next_rv()
                self.objects[key] = obj
                self._bump("MODIFIED", key[0], key[1], obj)
            return copy.deepcopy(obj)
        obj = self.objects.pop(key)
        obj["metadata"]["resourceVersion"] = self._next_rv()
        if key[0].kind == "Pod":
            self.logs.pop((key[1], key[2]), None)
        self._bump("DELETED", key[0], key[1], obj)
        return copy.deepcopy(obj)

    def _dependents(self, uid: str) -> list[tuple[ResourceType, str, str]]:
        return [
            k
            for k, o in self.objects.items()
            if any(ref.get("uid") == uid for ref in o["metadata"].get("ownerReferences") or [])
        ]

    def _delete_dependents(self, uid: str) -> None:
        # one pass to index owners -> dependents, so a Job with 1000 pods is not 1000 scans
        owned: dict[str, list[tuple[ResourceType, str, str]]] = {}
        for key, obj in self.objects.items():
            for ref in obj["metadata"].get("ownerReferences") or []:
                owned.setdefault(ref.get("uid", ""), []).append(key)
        pending = list(owned.get(uid, []))
        while pending:
            key = pending.pop()
            if key in self.objects:
                pending.extend(owned.get(self.objects[key]["metadata"]["uid"], []))
                self._remove(key)

    def _orphan_dependents(self, uid: str) -> None:
        for key in self._dependents(uid):
            obj = copy.deepcopy(self.objects[key])
            refs = [r for r in obj["metadata"]["ownerReferences"] if r.get("uid") != uid]
            obj["metadata"]["ownerReferences"] = refs
            if not refs:
                del obj["metadata"]["ownerReferences"]
            obj["metadata"]["resourceVersion"] = self._next_rv()
            self.objects[key] = obj
            self._bump("MODIFIED", key[0], key[1], obj)


def _pod_on_node(pod: JSON) -> bool:
    """A pod a kubelet is running: bound to a node and not finished."""
    return bool(pod.get("spec", {}).get("nodeName")) and pod.get("status", {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def _strip_rv(obj: JSON) -> JSON:
    out = dict(obj)
    out["metadata"] = {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
    return out


#: ConfigMaps and Secrets hold at most 1 MiB of data, keys and values together ("ConfigMaps",
#: kubernetes.io/docs/concepts/configuration/configmap/; "Secrets": "Individual Secrets are limited to 1MiB in
#: size"; the API server's validation counts len(key) + len(value) over data and binaryData).
MAX_DATA_BYTES = 1024 * 1024


def _validate_size(rt: ResourceType, obj: JSON) -> None:
    if rt.kind not in ("ConfigMap", "Secret"):
        return
    size = 0
    for field in ("data", "binaryData", "stringData"):
        # base64 in JSON (binaryData, a Secret's data) is counted as the bytes it stands for
        encoded = field == "binaryData" or (rt.kind == "Secret" and field == "data")
        for key, value in (obj.get(field) or {}).items():
            size += len(str(key).encode()) + (len(str(value)) * 3 // 4 if encoded else len(str(value).encode()))
    if size > MAX_DATA_BYTES:
        name = (obj.get("metadata") or {}).get("name", "")
        cause = f"[]: Too long: may not be more than {MAX_DATA_BYTES} bytes"
        raise ApiError(
            422,
            "Invalid",
            f'{rt.kind} "{name}" is invalid: {cause}',
            {"name": name, "group": rt.group, "kind": rt.kind, "causes": [{"message": cause}]},
        )


def _validate_meta(rt: ResourceType, meta: JSON) -> None:
    name = meta.get("name") or ""
    causes: list[str] = []
    if not name:
        causes.append("metadata.name: Required value: name or generateName is required")
    elif rt.kind in _LABEL_NAMED:
        if len(name) > 63 or not _DNS_LABEL.match(name):
            causes.append(
                f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 label must consist of "
                "lower case alphanumeric characters or '-', start and end with an alphanumeric "
                "character, at most 63 characters"
            )
    elif len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        causes.append(f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 subdomain is required")
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, label_name = key.rpartition("/")
        if not _LABEL_NAME.match(label_name) or len(label_name) > 63 or (prefix and len(prefix) > 253):
            causes.append(f"metadata.labels: Invalid value: {key!r}: invalid label key")
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            causes.append(f"metadata.labels: Invalid value: {value!r}: invalid label value")
    if causes:
        raise ApiError(
            422,
            "Invalid",
            f'{rt.kind} "{name}" is invalid: ' + "; ".join(causes),
            {"name": name, "group": rt.group, "kind": rt.kind, "causes": [{"message": c} for c in causes]},
        )


def _validate_job_spec(name: str, spec: JSON) -> None:
    """What the API server refuses in a Job's failure limits (Kubernetes API reference, JobSpec:
    ``maxFailedIndexes`` "can only be specified when backoffLimitPerIndex is set", and must not exceed
    ``completions``; pkg/apis/batch/validation)."""
    causes = []
    max_failed = spec.get("maxFailedIndexes")
    if max_failed is not None:
        if spec.get("backoffLimitPerIndex") is None:
            causes.append("spec.maxFailedIndexes: Invalid value: requires spec.backoffLimitPerIndex")
        if int(max_failed) < 0 or int(max_failed) > int(spec.get("completions") or 1):
            causes.append(f"spec.maxFailedIndexes: Invalid value: {max_failed}: must be between 0 and completions")
    if causes:
        raise ApiError(422, "Invalid", f'Job.batch "{name}" is invalid: ' + "; ".join(causes))


def _validate_job_update(name: str, before: JSON, after: JSON) -> None:
    """What the API server refuses when a Job changes (pkg/apis/batch/validation, ValidateJobSpecUpdate):
    ``completionMode`` and ``selector`` never change; ``completions`` is immutable except for an Indexed Job
    whose new ``completions`` equals its new ``parallelism`` (Kubernetes "Jobs", Elastic Indexed Job, KEP-3715,
    stable in 1.31: "scale Indexed Jobs up or down by mutating both .spec.parallelism and .spec.completions
    together such that .spec.parallelism == .spec.completions"), which a sweep running max_parallel of more
    trials is not."""
    causes = []
    for field in ("completionMode", "selector"):
        if field in before and before.get(field) != after.get(field):
            causes.append(f"spec.{field}: Invalid value: field is immutable")
    if before.get("completions") != after.get("completions"):
        elastic = after.get("completionMode") == "Indexed" and after.get("completions") == after.get("parallelism")
        if not elastic:
            causes.append(
                "spec.completions: Invalid value: field is immutable (an Indexed Job's completions may change "
                "only together with parallelism, equal to it)"
            )
    if causes:
        raise ApiError(422, "Invalid", f'Job.batch "{name}" is invalid: ' + "; ".join(causes))


def _default_pod_spec(spec: JSON) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for container in spec.get("containers") or []:
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        image = container.get("image", "")
        container.setdefault("imagePullPolicy", "Always" if image.endswith(":latest") else "IfNotPresent")


#: the namespace label that makes the PodSecurity admission controller enforce a level
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"
#: volume types the restricted level allows
_RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def _pod_security_violations(spec: JSON, level: str) -> list[str]:
    """What a pod spec breaks of a Pod Security Standard level (kubernetes.io/docs/concepts/security/
    pod-security-standards/), worded as the PodSecurity admission controller words it (a subset of the
    baseline checks, every restricted check but the Windows ones)."""
    pod_sc = spec.get("securityContext") or {}
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    out: list[str] = []

    def names(pred: Callable[[JSON], bool]) -> list[str]:
        return [f'"{c.get("name")}"' for c in containers if pred(c.get("securityContext") or {})]

    def which(bad: list[str]) -> str:
        return f"container {bad[0]}" if len(bad) == 1 else f"containers {', '.join(bad)}"

    if spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"):
        out.append("host namespaces (hostNetwork=true, hostPID=true or hostIPC=true)")
    bad = names(lambda sc: bool(sc.get("privileged")))
    if bad:
        out.append(f"privileged ({which(bad)} must not set securityContext.privileged=true)")
    host_path = [f'"{v.get("name")}"' for v in spec.get("volumes") or [] if "hostPath" in v]
    if host_path:
        out.append(f"hostPath volumes (volumes {', '.join(host_path)})")
    if level != "restricted":
        return out
    other = [
        f'"{v.get("name")}"'
        for v in spec.get("volumes") or []
        if not (set(v) - {"name"}) <= _RESTRICTED_VOLUMES and "hostPath" not in v
    ]
    if other:
        out.append(f"restricted volume types (volumes {', '.join(other)} use restricted volume types)")
    bad = names(lambda sc: sc.get("allowPrivilegeEscalation") is not False)
    if bad:
        out.append(
            f"allowPrivilegeEscalation != false ({which(bad)} must set securityContext.allowPrivilegeEscalation=false)"
        )
    bad = names(lambda sc: "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []))
    if bad:
        out.append(f'unrestricted capabilities ({which(bad)} must set securityContext.capabilities.drop=["ALL"])')
    bad = names(lambda sc: sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is not True)
    if bad:
        out.append(f"runAsNonRoot != true (pod or {which(bad)} must set securityContext.runAsNonRoot=true)")
    if pod_sc.get("runAsUser") == 0 or names(lambda sc: sc.get("runAsUser") == 0):
        out.append("runAsUser=0 (pod and containers must not set runAsUser=0)")
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    bad = names(
        lambda sc: ((sc.get("seccompProfile") or {}).get("type") or pod_seccomp) not in ("RuntimeDefault", "Localhost")
    )
    if bad:
        out.append(
            f'seccompProfile (pod or {which(bad)} must set securityContext.seccompProfile.type to "RuntimeDefault" '
            'or "Localhost")'
        )
    return out


def _admit_pod_security(namespace: JSON, pod: JSON) -> None:
    """The PodSecurity admission controller in enforce mode: a pod that breaks the level its namespace's
    ``pod-security.kubernetes.io/enforce`` label names is refused (403), with the controller's message
    ("Pod Security Admission", kubernetes.io/docs/concepts/security/pod-security-admission/). It only
    enforces on Pods: a Job is accepted and the Job controller's pod creations fail."""
    level = (namespace["metadata"].get("labels") or {}).get(POD_SECURITY_ENFORCE)
    if level not in ("baseline", "restricted"):
        return
    problems = _pod_security_violations(pod.get("spec") or {}, level)
    if problems:
        name = pod["metadata"].get("name", "")
        raise ApiError(
            403,
            "Forbidden",
            f'pods "{name}" is forbidden: violates PodSecurity "{level}:latest": {", ".join(problems)}',
            {"name": name, "kind": "pods"},
        )


def _default_requests(spec: JSON) -> None:
    """A container that gives a limit but no request for a resource requests its limit (the API server's
    Pod defaulting; "Resource Management for Pods and Containers",
    kubernetes.io/docs/concepts/configuration/manage-resources-containers/)."""
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        if limits:
            requests = resources.setdefault("requests", {})
            for key, value in limits.items():
                requests.setdefault(key, value)
            container["resources"] = resources


def _qos_class(spec: JSON) -> str:
    """The pod's QoS class ("Pod Quality of Service Classes", kubernetes.io/docs/concepts/workloads/pods/pod-qos/):
    Guaranteed when every container has CPU and memory limits equal to its requests, BestEffort when no
    container requests or limits CPU or memory, Burstable otherwise."""
    guaranteed, any_set = True, False
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for key in ("cpu", "memory"):
            if key in requests or key in limits:
                any_set = True
            if key not in limits or str(requests.get(key, limits[key])) != str(limits[key]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _apply_defaults(rt: ResourceType, obj: JSON, store: _Store, updating: bool = False) -> None:
    """A few of the defaults the real API server fills in, so clients must compare with care."""
    meta = obj["metadata"]
    if rt.kind == "Namespace":
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        obj.setdefault("status", {"phase": "Active"})
    elif rt.kind == "Job":
        spec = obj.setdefault("spec", {})
        uid = meta["uid"]
        spec.setdefault("parallelism", 1)
        if spec.get("completionMode") == "Indexed" or "completions" not in spec:
            spec.setdefault("completions", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
        spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
        template = spec.setdefault("template", {})
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        labels.update(
            {
                "batch.kubernetes.io/controller-uid": uid,
                "batch.kubernetes.io/job-name": meta["name"],
                "controller-uid": uid,
                "job-name": meta["name"],
            }
        )
        _default_pod_spec(template.setdefault("spec", {}))
        if not updating:
            obj["status"] = {}
    elif rt.kind == "Pod":
        _default_pod_spec(obj.setdefault("spec", {}))
        if not updating:
            _default_requests(obj["spec"])
            obj["status"] = {"phase": "Pending", "qosClass": _qos_class(obj["spec"])}
    elif rt.kind == "Service":
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if "clusterIP" not in spec:
            n = store.rv + 1
            spec["clusterIP"] = f"10.96.{(n // 250) % 250}.{n % 250 + 1}"
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        if not updating:
            obj["status"] = {"loadBalancer": {}}
    elif rt.kind == "Secret":
        obj.setdefault("type", "Opaque")
        string_data = obj.pop("stringData", None) or {}
        data = obj.setdefault("data", {})
        for k, v in string_data.items():
            data[k] = base64.b64encode(v.encode()).decode()


# ---------------------------------------------------------------------------------------------------
# HTTP


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # headers and body go out in separate writes: without this, Nagle + delayed ACK add ~40 ms each
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests read the request log instead

    def setup(self) -> None:
        super().setup()
        self.server.connections.add(self.connection)

    def finish(self) -> None:
        self.server.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    # -- plumbing ------------------------------------------------------------------------------

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"body is not JSON: {exc}") from exc

    def _send_json(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def _end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _serve(self, method: str) -> None:
        fake = self.server.fake
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        fake._record(RecordedRequest(method, parts.path, query, self.headers.get("User-Agent", "")))
        try:
            body = self._body() if method in ("POST", "PUT", "PATCH", "DELETE") else None
            if fake.token_validator is not None:
                auth = self.headers.get("Authorization", "")
                token = auth[7:] if auth.startswith("Bearer ") else ""
                if not token or not fake.token_validator(token):
                    raise ApiError(401, "Unauthorized", "Unauthorized")
            fault = fake._take_fault(method, parts.path)
            if fault is not None and not fault.after:
                raise ApiError(fault.status, fault.reason, fault.message)
            streamed = self._route(method, parts.path, query, body)
            if fault is not None and not streamed:
                raise ApiError(fault.status, fault.reason, fault.message)
            if streamed:
                return
            code, payload = self._result
            self._send_json(code, payload)
        except ApiError as err:
            self._send_json(err.code, err.status())
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
        except Exception as exc:  # a bug in the fake must reach the client, not hang it
            self._send_json(500, ApiError(500, "InternalError", f"fake apiserver: {exc!r}").status())

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> bool:
        """Carry out the request; store the reply in ``self._result`` or stream it (return True)."""
        fake = self.server.fake
        if path in ("/version", "/version/"):
            self._result = (200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0-fake", "platform": "fake"})
            return False
        if path in ("/healthz", "/readyz", "/livez"):
            self._result = (200, "ok")
            return False
        rt, namespace, name, sub = _parse_path(path)
        if rt.group in _CRD_GROUPS and not fake.kueue:
            # a group nobody installed: the real server answers 404 without any object details
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
        q = {k: v[-1] for k, v in query.items()}
        if sub == "log":
            if method != "GET":
                raise ApiError(405, "MethodNotAllowed", "only GET is allowed on pods/log")
            return self._logs(namespace, name, q)
        if name is None:
            return self._collection(method, rt, namespace, q, body)
        return self._object(method, rt, namespace or "", name, sub, q, body)

    def _collection(self, method: str, rt: ResourceType, namespace: str | None, q: dict[str, str], body: Any) -> bool:
        """A request on a collection (list, watch, create, delete-collection)."""
        store = self.server.fake._store
        if method == "GET" and q.get("watch") in ("true", "1"):
            self._watch(rt, namespace, q)
            return True
        if method == "GET":
            items = store.list(rt, namespace, q.get("labelSelector"), q.get("fieldSelector"))
            self._result = (200, _list_of(rt, store.rv, items))
        elif method == "POST":
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "body must be an object")
            if rt.namespaced and namespace is None:
                raise ApiError(405, "MethodNotAllowed", "create needs a namespace in the path")
            self._result = (201, store.create(rt, namespace or "", body))
        elif method == "DELETE":
            items = store.list(rt, namespace, q.get("labelSelector"), q.get("fieldSelector"))
            deleted = [
                store.delete(rt, i["metadata"].get("namespace", ""), i["metadata"]["name"], _policy(q, body))
                for i in items
            ]
            self._result = (200, _list_of(rt, store.rv, deleted))
        else:
            raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed on a collection")
        return False

    def _object(
        self, method: str, rt: ResourceType, ns: str, name: str, sub: str, q: dict[str, str], body: Any
    ) -> bool:
        """A request on one object or its subresource."""
        store = self.server.fake._store
        if sub and sub not in rt.subresources:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({sub})")
        if method == "GET":
            self._result = (200, store.get(rt, ns, name))
        elif method == "PUT":
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "body must be an object")
            self._result = (200, store.update(rt, ns, name, body, sub))
        elif method == "PATCH":
            content_type = self.headers.get("Content-Type", "application/merge-patch+json")
            if "apply-patch" in content_type:
                raise ApiError(415, "UnsupportedMediaType", "server-side apply is not supported by the fake")
            self._result = (200, store.patch(rt, ns, name, body, content_type, sub))
        elif method == "DELETE":
            if sub:
                raise ApiError(405, "MethodNotAllowed", "DELETE is not allowed on a subresource")
            self._result = (200, store.delete(rt, ns, name, _policy(q, body), force=_grace(q, body) == 0))
        else:
            raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed on an object")
        return False

    # -- streaming -----------------------------------------------------------------------------

    def _watch(self, rt: ResourceType, namespace: str | None, q: dict[str, str]) -> None:
        store = self.server.fake._store
        labels_ok = parse_label_selector(q["labelSelector"]) if q.get("labelSelector") else None
        fields_ok = parse_field_selector(q["fieldSelector"]) if q.get("fieldSelector") else None
        timeout = float(q.get("timeoutSeconds") or self.server.fake.default_watch_timeout)
        deadline = time.monotonic() + timeout

        def matches(change_rt: ResourceType, ns: str, obj: JSON) -> bool:
            if change_rt is not rt or (namespace is not None and ns != namespace):
                return False
            if labels_ok and not labels_ok(obj["metadata"].get("labels") or {}):
                return False
            return not (fields_ok and not fields_ok(obj))

        initial: list[JSON] = []
        with store.lock:
            requested = q.get("resourceVersion") or "0"
            if requested == "0":
                initial = [
                    {"type": "ADDED", "object": obj}
                    for obj in store.list(rt, namespace, q.get("labelSelector"), q.get("fieldSelector"))
                ]
                since = store.rv
            else:
                try:
                    since = int(requested)
                except ValueError as exc:
                    raise ApiError(400, "BadRequest", f"invalid resourceVersion {requested!r}") from exc
                if since < store.oldest_rv:
                    gone = ApiError(410, "Expired", f"too old resource version: {since} ({store.oldest_rv})")
                    initial = [{"type": "ERROR", "object": gone.status()}]
                    since = -1
        self._start_chunked("application/json")
        for event in initial:
            self._chunk(json.dumps(event).encode() + b"\n")
        while since >= 0:
            with store.lock:
                pending = [c for c in store.history if c.rv > since]
                if not pending:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or store.closing:
                        break
                    store.changed.wait(min(remaining, 1.0))
                    continue
            for change in pending:
                since = change.rv
                if matches(change.rt, change.namespace, change.obj):
                    self._chunk(json.dumps({"type": change.type, "object": change.obj}).encode() + b"\n")
        self._end_chunked()

    def _logs(self, namespace: str | None, name: str | None, q: dict[str, str]) -> bool:
        fake = self.server.fake
        store = fake._store
        ns = namespace or ""
        assert name is not None
        pod = store.get(_BY_KIND["Pod"], ns, name)
        containers = [c["name"] for c in pod.get("spec", {}).get("containers", [])]
        container = q.get("container") or (containers[0] if len(containers) == 1 else "")
        if not container:
            raise ApiError(
                400,
                "BadRequest",
                f"a container name must be specified for pod {name}, choose one of: {containers}",
            )
        with store.lock:
            data = bytes(store.logs.get((ns, name), b""))
        if not data and pod.get("status", {}).get("phase", "Pending") == "Pending":
            raise ApiError(
                400,
                "BadRequest",
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating',
            )
        if q.get("tailLines"):
            lines = data.splitlines(keepends=True)
            data = b"".join(lines[-int(q["tailLines"]) :]) if int(q["tailLines"]) else b""
            offset = len(bytes(store.logs.get((ns, name), b"")))
        else:
            offset = len(data)
        if q.get("follow") not in ("true", "1"):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return True
        self._start_chunked("text/plain")
        self._chunk(data)
        while True:
            with store.lock:
                buf = store.logs.get((ns, name))
                current = store.objects.get((_BY_KIND["Pod"], ns, name))
                new = bytes(buf[offset:]) if buf is not None else b""
                offset += len(new)
                done = (
                    current is None
                    or current.get("status", {}).get("phase") in ("Succeeded", "Failed")
                    or store.closing
                )
                if not new and not done:
                    store.changed.wait(1.0)
                    continue
            self._chunk(new)
            if done and not new:
                break
        self._end_chunked()
        return True


def _grace(q: dict[str, str], body: Any) -> int | None:
    value = q.get("gracePeriodSeconds")
    if value is None and isinstance(body, dict):
        value = body.get("gracePeriodSeconds")
    return None if value is None else int(value)


def _policy(q: dict[str, str], body: Any) -> str | None:
    if q.get("propagationPolicy"):
        return q["propagationPolicy"]
    if isinstance(body, dict):
        if body.get("propagationPolicy"):
            return str(body["propagationPolicy"])
        if body.get("orphanDependents") is True:
            return "Orphan"
    return None


def _list_of(rt: ResourceType, rv: int, items: list[Any]) -> dict[str, Any]:
    """A list reply, as the API server sends one."""
    return {
        "kind": f"{rt.kind}List",
        "apiVersion": rt.api_version,
        "metadata": {"resourceVersion": str(rv)},
        "items": items,
    }


def _parse_path(path: str) -> tuple[ResourceType, str | None, str | None, str]:
    """Split an API path into (resource type, namespace, name, subresource)."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
    namespace: str | None = None
    if (
        len(rest) >= 3
        and rest[0] == "namespaces"
        and (group, version, rest[2]) in _BY_PATH
        and _BY_PATH[(group, version, rest[2])].namespaced
    ):
        namespace, rest = rest[1], rest[2:]
    if not rest or (group, version, rest[0]) not in _BY_PATH:
        raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
    rt = _BY_PATH[(group, version, rest[0])]
    name = rest[1] if len(rest) > 1 else None
    sub = "/".join(rest[2:])
    return rt, namespace, name, sub


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], fake: FakeKubeApiServer, tls: ssl.SSLContext | None) -> None:
        self.fake = fake
        self.tls = tls
        self.connections: set[socket.socket] = set()
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that rejects our certificate (wrong CA: a test case) or hangs up mid-request is
        # the client's business; anything else is a bug in the fake and is printed
        if not isinstance(sys.exc_info()[1], OSError):  # ssl.SSLError is an OSError
            super().handle_error(request, client_address)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        if self.tls is not None:
            # the handshake happens in the handler thread, on first read, not in the accept loop
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr


# ---------------------------------------------------------------------------------------------------
# the public object


class FakeKubeApiServer:
    """A threaded fake kube-apiserver on 127.0.0.1; use as a context manager or start()/stop().

    ``url`` goes into ``kubernetes.client.Configuration(host=url)``. With ``tls`` (a server-side
    ``ssl.SSLContext``, e.g. from a trustme CA) it serves HTTPS; with ``token_validator`` every
    request needs ``Authorization: Bearer <token>`` for which the validator returns True (401
    otherwise). ``namespaces`` are created at start (``default`` unless told otherwise). ``kueue``: serve
    Kueue's LocalQueues (``kueue.x-k8s.io/v1beta1``), as a cluster with Kueue installed does.
    """

    def __init__(
        self,
        *,
        tls: ssl.SSLContext | None = None,
        token_validator: Callable[[str], bool] | None = None,
        namespaces: tuple[str, ...] = ("default",),
        history_limit: int = 100_000,
        default_watch_timeout: float = 300.0,
        kueue: bool = False,
    ) -> None:
        self.tls = tls
        #: whether Kueue's CRDs (localqueues.kueue.x-k8s.io) are served
        self.kueue = kueue
        self.token_validator = token_validator
        self.default_watch_timeout = default_watch_timeout
        self._store = _Store(history_limit)
        self._faults: list[Fault] = []
        self._faults_lock = threading.Lock()
        #: every request received, in order (method, path, query, user agent)
        self.requests: list[RecordedRequest] = []
        self._initial_namespaces = namespaces
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> FakeKubeApiServer:
        """Bind a free port on 127.0.0.1 and serve in a background thread."""
        self._httpd = _HTTPServer(("127.0.0.1", 0), self, self.tls)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="fake-kube-apiserver", daemon=True
        )
        self._thread.start()
        for ns in self._initial_namespaces:
            self.create_object("Namespace", {"metadata": {"name": ns}})
        return self

    def stop(self) -> None:
        """Stop serving and close every open connection (watches and log streams end)."""
        if self._httpd is None:
            return
        with self._store.lock:
            self._store.closing = True
            self._store.changed.notify_all()
        self._httpd.shutdown()
        for conn in list(self._httpd.connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        assert self._thread is not None
        self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> FakeKubeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        assert self._httpd is not None, "not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http(s)://127.0.0.1:<port>`` for ``Configuration(host=...)``."""
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    # -- request log and faults ----------------------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._faults_lock:
            self.requests.append(request)

    def request_count(self, method: str | None = None, path: str | None = None) -> int:
        """How many requests matched ``method`` and the regular expression ``path`` (re.search)."""
        pattern = re.compile(path) if path else None
        with self._faults_lock:
            return sum(
                1
                for r in self.requests
                if (method is None or r.method == method) and (pattern is None or pattern.search(r.path))
            )

    def clear_requests(self) -> None:
        """Forget the request log."""
        with self._faults_lock:
            self.requests.clear()

    def inject_fault(
        self,
        method: str | None,
        path: str,
        *,
        status: int = 500,
        count: int = 1,
        after: bool = False,
        reason: str | None = None,
        message: str | None = None,
    ) -> Fault:
        """Make the next ``count`` requests with ``method`` (None: any) whose path matches the regular
        expression ``path`` fail with ``status``. ``after=True`` carries the request out first (a lost
        response). Returns the :class:`Fault`; its ``hits`` counts how often it fired."""
        default_reasons = {409: "Conflict", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError"}
        fault = Fault(
            method=method,
            path=re.compile(path),
            status=status,
            count=count,
            reason=reason or default_reasons.get(status, "InternalError"),
            message=message or f"injected fault {status}",
            after=after,
        )
        with self._faults_lock:
            self._faults.append(fault)
        return fault

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._faults_lock:
            for fault in self._faults:
                if fault.count > 0 and fault.method in (None, method) and fault.path.search(path):
                    fault.count -= 1
                    fault.hits += 1
                    return fault
        return None

    # -- in-process access (test code: kubelet fake, fixtures) -------------------------------------

    def create_object(self, kind: str, body: JSON, namespace: str = "") -> JSON:
        """Create an object of ``kind`` directly in the store (no HTTP, not in the request log)."""
        rt = _BY_KIND[kind]
        return self._store.create(rt, namespace or body.get("metadata", {}).get("namespace", ""), body)

    def get_object(self, kind: str, name: str, namespace: str = "") -> JSON | None:
        """The stored object, or None."""
        try:
            return self._store.get(_BY_KIND[kind], namespace, name)
        except ApiError:
            return None

    def list_objects(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[JSON]:
        """Stored objects of ``kind`` (all namespaces when ``namespace`` is None)."""
        return self._store.list(_BY_KIND[kind], namespace, label_selector)

    def update_status(self, kind: str, name: str, namespace: str, status: JSON) -> JSON | None:
        """Replace an object's status (like a controller writing ``/status``); None if it is gone."""
        try:
            return self._store.update(_BY_KIND[kind], namespace, name, {"status": status}, "status")
        except ApiError:
            return None

    def patch_object(self, kind: str, name: str, namespace: str, patch: JSON) -> JSON | None:
        """Merge-patch an object's main resource; None if it is gone."""
        try:
            return self._store.patch(_BY_KIND[kind], namespace, name, patch, "application/merge-patch+json")
        except ApiError:
            return None

    def delete_object(
        self, kind: str, name: str, namespace: str = "", propagation: str | None = None, force: bool = False
    ) -> bool:
        """Delete an object (``force``: a pod goes at once, as with gracePeriodSeconds=0); False if it
        did not exist."""
        try:
            self._store.delete(_BY_KIND[kind], namespace, name, propagation, force=force)
            return True
        except ApiError:
            return False

    def append_log(self, namespace: str, pod: str, data: bytes) -> None:
        """Append to a pod's log (what ``kubectl logs`` would show); wakes followers."""
        with self._store.lock:
            if (_BY_KIND["Pod"], namespace, pod) not in self._store.objects:
                return
            self._store.logs.setdefault((namespace, pod), bytearray()).extend(data)
            self._store.changed.notify_all()

    def record_event(
        self,
        namespace: str,
        involved: JSON,
        reason: str,
        message: str,
        type_: str = "Warning",
        component: str = "fake",
    ) -> JSON:
        """Create a core/v1 Event about ``involved`` (an object dict), as ``component`` (a controller) would."""
        meta = involved["metadata"]
        now = _now()
        return self.create_object(
            "Event",
            {
                "metadata": {"generateName": f"{meta['name']}."},
                "involvedObject": {
                    "kind": involved.get("kind"),
                    "apiVersion": involved.get("apiVersion"),
                    "name": meta["name"],
                    "namespace": namespace,
                    "uid": meta.get("uid"),
                },
                "reason": reason,
                "message": message,
                "type": type_,
                "count": 1,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "source": {"component": component},
            },
            namespace,
        )

    @property
    def graceful_pod_deletion(self) -> bool:
        """Whether deleting a running pod waits for a kubelet (set by :class:`FakeKubelet`)."""
        return self._store.graceful_pods

    @graceful_pod_deletion.setter
    def graceful_pod_deletion(self, value: bool) -> None:
        self._store.graceful_pods = value

    def compact(self) -> None:
        """Drop the change history: watches from an older resourceVersion now get 410 Gone."""
        self._store.compact()

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion."""
        return self._store.rv

    def wait_for_change(self, since: int, timeout: float) -> int:
        """Block until the resourceVersion moves past ``since`` (or timeout); return the current one."""
        deadline = time.monotonic() + timeout
        with self._store.lock:
            while self._store.rv <= since and not self._store.closing:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._store.changed.wait(remaining)
            return self._store.rv

    def changes_since(self, since: int) -> Iterator[tuple[str, str, str, JSON]]:
        """(type, kind, namespace, object) for every retained change after ``since``."""
        with self._store.lock:
            pending = [c for c in self._store.history if c.rv > since]
        for c in pending:
            yield c.type, c.rt.kind, c.namespace, copy.deepcopy(c.obj)
