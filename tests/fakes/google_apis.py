"""FakeGoogleApis: one local server for what ``rlcloud doctor`` asks Google, spoken as the official clients speak.

The REST (JSON over HTTP/1.1) APIs the generated clients' REST transports call, at their exact paths:

* Service Usage v1: ``GET /v1/projects/P/services:batchGet?names=...``;
* Resource Manager v3: ``POST /v3/projects/P:testIamPermissions``, ``GET /v3/projects/P`` (its ``name`` is
  ``projects/NUMBER``), ``POST /v3/projects/P:getIamPolicy``;
* Compute v1: ``GET /compute/v1/projects/P/regions/R`` and ``GET /compute/v1/projects/P`` (their quotas),
  ``GET /compute/v1/projects/P/aggregated/acceleratorTypes`` (which zone offers which GPU:
  :mod:`tests.fakes.gce_catalog`, filtered by ``name = TYPE``);
* Artifact Registry v1: ``GET /v1/projects/P/locations/L/repositories/R/packages/PKG/tags/T``,
  ``.../versions/sha256:D`` and
  ``GET /v1/projects/P/locations/L/repositories/R:getIamPolicy``;

and, as gRPC (HTTP/2, plaintext), ``google.iam.admin.v1.IAM/GetIamPolicy`` (service accounts' policies) and
``IAM/GetRole`` (a role's permissions): the IAM admin client has no REST transport. Both protocols share one
port: each connection is handed to the HTTP server or relayed to the gRPC server by its first bytes (HTTP/2's
preface starts ``PRI``), so that one ``RLCLOUD_GOOGLE_API_HOST=http://127.0.0.1:PORT`` sends every doctor
client here.

Errors have Google's JSON shape (``{"error": {"code", "message", "status", "details"}}``, an ``ErrorInfo``
with reason ``SERVICE_DISABLED`` for a disabled API), or a gRPC status. :attr:`FakeGoogleApis.requests`
lists what was asked, as ``(operation, path)``.

Permissions come from roles, as in IAM: the caller holds :attr:`GoogleState.roles` (predefined roles, mapped
to the permissions each contains by :data:`ROLE_PERMISSIONS`, or custom ones in
:attr:`GoogleState.custom_roles`); each call needs the permission its method's reference page names
(:data:`PERMISSION_OF`) and is answered 403 without it, with the message that API gives. ``testIamPermissions``
needs none and answers the subset held. The fake does not model where a role is granted (project, bucket or
service account): every role the caller holds counts everywhere.

A new instance knows a project where everything is set up (all APIs on, the caller an Owner, 64 GPUs of every
kind Compute reports a quota for), with no service account, image or IAM binding: tests add what they need to
:attr:`state`.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import socket
import threading
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import grpc
from google.cloud import iam_admin_v1
from google.iam.v1 import iam_policy_pb2, policy_pb2

from tests.fakes.gce_catalog import ACCELERATOR_ZONES

__all__ = ["FakeGoogleApis", "GoogleState", "default_compute_account"]

PROJECT_NUMBER = "123456789012"
#: The GPU quota metrics Compute Engine reports in ``regions.get``: the names of google-cloud-compute's
#: ``Quota.Metric`` enum (1.57.0). It has no on-demand H100, no H100 Mega and no H200 metric (those are in
#: Cloud Quotas only), so the fake serves none of them (/work/shared/FACTS.md, round 3).
GPU_QUOTA_METRICS = (
    *(
        f"{prefix}NVIDIA_{gpu}_GPUS"
        for gpu in ("T4", "L4", "P4", "P100", "V100", "A100", "A100_80GB")
        for prefix in ("", "PREEMPTIBLE_")
    ),
    "PREEMPTIBLE_NVIDIA_H100_GPUS",
)
_CONTAINER = frozenset(
    {
        "container.clusters.create",
        "container.clusters.delete",
        "container.clusters.get",
        "container.clusters.getCredentials",
        "container.clusters.list",
        "container.clusters.update",
        "container.operations.get",
        "container.operations.list",
    }
)
#: The permissions each predefined role holds, of those the fake's calls (and the doctor's
#: testIamPermissions) need: a subset of each role, from Google's IAM roles reference,
#: cloud.google.com/iam/docs/roles-permissions/{container,compute,serviceusage,artifactregistry,
#: resourcemanager,iam,storage} and, for the basic roles, cloud.google.com/iam/docs/roles-overview#basic.
#: roles/container.admin is container.* (and cloudkms.*): no compute.*, serviceusage.*, artifactregistry.*.
ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
    "roles/owner": frozenset({"*"}),  # every permission
    "roles/container.admin": _CONTAINER,
    "roles/container.clusterAdmin": _CONTAINER | {"resourcemanager.projects.get", "resourcemanager.projects.list"},
    "roles/iam.serviceAccountUser": frozenset(
        {
            "iam.serviceAccounts.actAs",
            "iam.serviceAccounts.get",
            "iam.serviceAccounts.list",
            "resourcemanager.projects.get",
            "resourcemanager.projects.list",
        }
    ),
    # granted on the bucket (Cloud Storage itself is fake-gcs-server): objects, never storage.buckets.get
    "roles/storage.objectAdmin": frozenset(
        {"storage.objects.create", "storage.objects.delete", "storage.objects.get", "storage.objects.list"}
    ),
    "roles/storage.legacyBucketReader": frozenset({"storage.buckets.get", "storage.objects.list"}),
    "roles/serviceusage.serviceUsageConsumer": frozenset(
        {"serviceusage.services.get", "serviceusage.services.list", "serviceusage.services.use"}
    ),
    "roles/compute.viewer": frozenset(
        {
            "compute.acceleratorTypes.list",
            "compute.regions.get",
            "compute.projects.get",
            "resourcemanager.projects.get",
            "resourcemanager.projects.list",
        }
    ),
    "roles/artifactregistry.reader": frozenset(
        {
            "artifactregistry.repositories.downloadArtifacts",
            "artifactregistry.tags.get",
            "artifactregistry.tags.list",
            "artifactregistry.versions.get",
            "artifactregistry.versions.list",
        }
    ),
    "roles/browser": frozenset(
        {"resourcemanager.projects.get", "resourcemanager.projects.getIamPolicy", "resourcemanager.projects.list"}
    ),
    "roles/iam.securityReviewer": frozenset(
        {
            "artifactregistry.repositories.getIamPolicy",
            "iam.roles.get",
            "iam.roles.list",
            "iam.serviceAccounts.getIamPolicy",
            "resourcemanager.projects.getIamPolicy",
        }
    ),
    "roles/iam.workloadIdentityUser": frozenset({"iam.serviceAccounts.getAccessToken"}),
}
#: The permission each call needs, from its method's REST reference ("Authorization requires the following IAM
#: permission"): Service Usage services.batchGet, Resource Manager v3 projects.get/getIamPolicy (and
#: testIamPermissions, which needs none), Compute regions.get/projects.get, Artifact Registry
#: tags.get/repositories.getIamPolicy, IAM projects.serviceAccounts.getIamPolicy.
PERMISSION_OF: dict[str, str] = {
    "serviceusage.batchGet": "serviceusage.services.get",
    "projects.get": "resourcemanager.projects.get",
    "projects.getIamPolicy": "resourcemanager.projects.getIamPolicy",
    "regions.get": "compute.regions.get",
    "compute.projects.get": "compute.projects.get",
    # acceleratorTypes.aggregatedList, "IAM Permissions": compute.acceleratorTypes.list
    # (cloud.google.com/compute/docs/reference/latest/acceleratorTypes/aggregatedList); roles/container.admin,
    # the documented CI role, lacks it (shared/reviews/gke-desk-check.md, N4)
    "acceleratorTypes.aggregatedList": "compute.acceleratorTypes.list",
    "tags.get": "artifactregistry.tags.get",
    # projects.locations.repositories.packages.versions.get: "Authorization requires ...
    # artifactregistry.versions.get" (cloud.google.com/artifact-registry/docs/reference/rest/v1/
    # projects.locations.repositories.packages.versions/get)
    "versions.get": "artifactregistry.versions.get",
    "repositories.getIamPolicy": "artifactregistry.repositories.getIamPolicy",
    "serviceAccounts.getIamPolicy": "iam.serviceAccounts.getIamPolicy",
}
_STATUS = {403: "PERMISSION_DENIED", 404: "NOT_FOUND", 401: "UNAUTHENTICATED", 400: "INVALID_ARGUMENT"}


def default_compute_account(number: str = PROJECT_NUMBER) -> str:
    """The project's default Compute Engine service account, what nodes run as when a spec names none."""
    return f"{number}-compute@developer.gserviceaccount.com"


def _all_gpu_quotas(limit: float) -> dict[str, float]:
    return dict.fromkeys(GPU_QUOTA_METRICS, limit)


@dataclass
class GoogleState:
    """What the fake Google APIs know about every project they are asked about."""

    project_number: str = PROJECT_NUMBER
    enabled: set[str] = field(
        default_factory=lambda: {
            "container.googleapis.com",
            "compute.googleapis.com",
            "storage.googleapis.com",
            "artifactregistry.googleapis.com",
            "iam.googleapis.com",
            "iamcredentials.googleapis.com",
        }
    )
    #: the caller's roles: predefined (:data:`ROLE_PERMISSIONS`) or custom (:attr:`custom_roles`)
    roles: set[str] = field(default_factory=lambda: {"roles/owner"})
    #: who the caller is, as a policy member (grants on a service account's own policy name it)
    caller: str = "user:me@example.com"
    #: custom roles, ``projects/P/roles/NAME`` -> their permissions
    custom_roles: dict[str, set[str]] = field(default_factory=dict)
    region_quotas: dict[str, float] = field(default_factory=lambda: _all_gpu_quotas(64))
    project_quotas: dict[str, float] = field(default_factory=lambda: {"GPUS_ALL_REGIONS": 64})
    #: service account email -> its policy's bindings; a missing one does not exist (NOT_FOUND)
    service_accounts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: "repository/package:tag" of the images that exist
    tags: set[str] = field(default_factory=set)
    #: "repository/package@sha256:..." of the image versions that exist (an image named by digest alone)
    versions: set[str] = field(default_factory=set)
    #: repository -> its policy's bindings (none: an empty policy)
    repository_policies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    project_policy: list[dict[str, Any]] = field(default_factory=list)
    #: zone -> the GPU types Compute Engine offers there (acceleratorTypes)
    accelerator_zones: dict[str, frozenset[str]] = field(default_factory=lambda: dict(ACCELERATOR_ZONES))
    #: operation (as in :attr:`FakeGoogleApis.requests`) -> (HTTP status, message, ErrorInfo reason or "")
    errors: dict[str, tuple[int, str, str]] = field(default_factory=dict)

    def permissions_of(self, roles: set[str]) -> set[str]:
        """The permissions ``roles`` hold together (``*``: every one)."""
        held: set[str] = set()
        for role in roles:
            held |= ROLE_PERMISSIONS.get(role, frozenset()) | self.custom_roles.get(role, set())
        return held

    def permits(self, permission: str) -> bool:
        """Whether the caller holds ``permission`` through one of its :attr:`roles`."""
        held = self.permissions_of(self.roles)
        return "*" in held or permission in held

    def deny(self, operation: str, reason: str = "IAM_PERMISSION_DENIED") -> None:
        """Make ``operation`` answer 403 PERMISSION_DENIED (``reason`` SERVICE_DISABLED: the API is off)."""
        message = (
            "API has not been used in project before or it is disabled"
            if reason == "SERVICE_DISABLED"
            else "The caller does not have permission"
        )
        self.errors[operation] = (403, message, reason)


def _policy_json(bindings: list[dict[str, Any]]) -> dict[str, Any]:
    return {"version": 1, "etag": "BwXfake=", "bindings": bindings}


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _HttpServer
    protocol_version = "HTTP/1.1"  # keep-alive, as Google's front ends do: the clients reuse connections

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, code: int, message: str, reason: str = "") -> None:
        error: dict[str, Any] = {"code": code, "message": message, "status": _STATUS.get(code, "UNKNOWN")}
        if reason:
            error["details"] = [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "googleapis.com"}
            ]
        self._send(code, {"error": error})

    def _denied(self, permission: str, path: str) -> None:
        """403 as the API words a missing permission: Compute "Required 'P' permission for 'R'" (its own error
        format, cloud.google.com/compute/docs/api/how-tos/api-requests-responses), the others IAM's
        "Permission 'P' denied on resource 'R' (or it may not exist)." with ErrorInfo IAM_PERMISSION_DENIED."""
        resource = re.sub(r"^/(compute/)?v\d+/", "", path).split(":", 1)[0]
        if permission.startswith("compute."):
            message = f"Required '{permission}' permission for '{resource}'"
            error = {
                "code": 403,
                "message": message,
                "errors": [{"message": message, "domain": "global", "reason": "forbidden"}],
            }
            return self._send(403, {"error": error})
        message = f"Permission '{permission}' denied on resource '{resource}' (or it may not exist)."
        return self._error(403, message, "IAM_PERMISSION_DENIED")

    def _route(self, method: str) -> None:
        fake = self.server.fake
        state = fake.state
        url = urlsplit(self.path)
        path = unquote(url.path)  # once, as Google's front end does: a package's %2F stays %2F
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}") if length else {}
        for operation, pattern, verb in _ROUTES:
            match = re.fullmatch(pattern, path)
            if match and verb == method:
                fake.record(operation, path)
                if operation in state.errors:
                    return self._error(*state.errors[operation])
                needed = PERMISSION_OF.get(operation)
                if needed and not state.permits(needed):
                    return self._denied(needed, path)
                return getattr(self, "_" + operation.replace(".", "_"))(match, parse_qs(url.query), body)
        fake.record("unknown", path)
        return self._error(404, f"{method} {path}: no such method in the fake")

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    # ---------------------------------------------------------------------------------------- operations

    def _serviceusage_batchGet(self, match: Any, query: dict[str, list[str]], body: Any) -> None:
        state = self.server.fake.state
        services = []
        for name in query.get("names", []):
            service = name.rsplit("/", 1)[-1]
            services.append(
                {
                    "name": f"projects/{state.project_number}/services/{service}",
                    "parent": f"projects/{state.project_number}",
                    "config": {"name": service},
                    "state": "ENABLED" if service in state.enabled else "DISABLED",
                }
            )
        self._send(200, {"services": services})

    def _projects_testIamPermissions(self, match: Any, query: Any, body: dict[str, Any]) -> None:
        asked = body.get("permissions") or []
        state = self.server.fake.state
        self._send(200, {"permissions": [p for p in asked if state.permits(p)]})

    def _projects_get(self, match: Any, query: Any, body: Any) -> None:
        number = self.server.fake.state.project_number
        self._send(200, {"name": f"projects/{number}", "projectId": match.group(1), "state": "ACTIVE"})

    def _projects_getIamPolicy(self, match: Any, query: Any, body: Any) -> None:
        self._send(200, _policy_json(self.server.fake.state.project_policy))

    def _regions_get(self, match: Any, query: Any, body: Any) -> None:
        quotas = [{"metric": k, "limit": v, "usage": 0.0} for k, v in self.server.fake.state.region_quotas.items()]
        self._send(200, {"kind": "compute#region", "name": match.group(2), "quotas": quotas})

    def _compute_projects_get(self, match: Any, query: Any, body: Any) -> None:
        quotas = [{"metric": k, "limit": v, "usage": 0.0} for k, v in self.server.fake.state.project_quotas.items()]
        self._send(200, {"kind": "compute#project", "name": match.group(1), "quotas": quotas})

    def _acceleratorTypes_aggregatedList(self, match: Any, query: dict[str, list[str]], body: Any) -> None:
        # Compute's aggregated list: one scope per zone ("zones/Z"), each with its acceleratorTypes, or a
        # NO_RESULTS_ON_PAGE warning when the filter leaves none there (compute/docs/reference/rest/v1/
        # acceleratorTypes/aggregatedList). Filters: AIP-160 "name = X" (quotes optional), as the API documents.
        wanted = None
        for text in query.get("filter", []):
            found = re.fullmatch(r'\s*name\s*=\s*"?([a-z0-9-]+)"?\s*', text)
            if not found:
                return self._error(400, f"Invalid value for field 'filter': '{text}'. Invalid list filter expression.")
            wanted = found.group(1)
        project = match.group(1)
        items: dict[str, Any] = {}
        for zone, types in sorted(self.server.fake.state.accelerator_zones.items()):
            chosen = sorted(t for t in types if wanted in (None, t))
            if chosen:
                link = f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}"
                items[f"zones/{zone}"] = {
                    "acceleratorTypes": [
                        {"kind": "compute#acceleratorType", "name": t, "zone": link, "maximumCardsPerInstance": 8}
                        for t in chosen
                    ]
                }
            else:
                items[f"zones/{zone}"] = {
                    "warning": {"code": "NO_RESULTS_ON_PAGE", "message": "There are no results for scope"}
                }
        self._send(200, {"kind": "compute#acceleratorTypeAggregatedList", "id": project, "items": items})

    def _tags_get(self, match: Any, query: Any, body: Any) -> None:
        repository, package, tag = match.group(3), unquote(match.group(4)), match.group(5)
        if f"{repository}/{package}:{tag}" not in self.server.fake.state.tags:
            return self._error(404, f'Requested entity was not found: tag "{tag}" of package "{package}"')
        name = self.path.split("?", 1)[0].removeprefix("/v1/")
        return self._send(200, {"name": name, "version": f"{name.split('/tags/')[0]}/versions/sha256:0abc"})

    def _versions_get(self, match: Any, query: Any, body: Any) -> None:
        repository, package, version = match.group(3), unquote(match.group(4)), unquote(match.group(5))
        if f"{repository}/{package}@{version}" not in self.server.fake.state.versions:
            return self._error(404, f'Requested entity was not found: version "{version}" of package "{package}"')
        return self._send(200, {"name": self.path.split("?", 1)[0].removeprefix("/v1/")})

    def _repositories_getIamPolicy(self, match: Any, query: Any, body: Any) -> None:
        self._send(200, _policy_json(self.server.fake.state.repository_policies.get(match.group(3), [])))


_ROUTES = [
    ("serviceusage.batchGet", r"/v1/projects/([^/]+)/services:batchGet", "GET"),
    ("projects.testIamPermissions", r"/v3/projects/([^/]+):testIamPermissions", "POST"),
    ("projects.getIamPolicy", r"/v3/projects/([^/]+):getIamPolicy", "POST"),
    ("projects.get", r"/v3/projects/([^/:]+)", "GET"),
    ("regions.get", r"/compute/v1/projects/([^/]+)/regions/([^/]+)", "GET"),
    ("compute.projects.get", r"/compute/v1/projects/([^/]+)", "GET"),
    ("acceleratorTypes.aggregatedList", r"/compute/v1/projects/([^/]+)/aggregated/acceleratorTypes", "GET"),
    (
        "tags.get",
        r"/v1/projects/([^/]+)/locations/([^/]+)/repositories/([^/]+)/packages/([^/]+)/tags/([^/]+)",
        "GET",
    ),
    (
        "versions.get",
        r"/v1/projects/([^/]+)/locations/([^/]+)/repositories/([^/]+)/packages/([^/]+)/versions/([^/]+)",
        "GET",
    ),
    ("repositories.getIamPolicy", r"/v1/projects/([^/]+)/locations/([^/]+)/repositories/([^/:]+):getIamPolicy", "GET"),
]


class _HttpServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeGoogleApis) -> None:
        # never bound: connections arrive from the shared port (process_request), not from a socket of its own
        super().__init__(("127.0.0.1", 0), _Handler, bind_and_activate=False)
        self.fake = fake


class FakeGoogleApis:
    """The fake's server: REST and gRPC on one port of 127.0.0.1. Use as a context manager; :attr:`url` is what
    ``RLCLOUD_GOOGLE_API_HOST`` (or ``Doctor(api_host=...)``) takes."""

    def __init__(self, state: GoogleState | None = None) -> None:
        self.state = state or GoogleState()
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._http = _HttpServer(self)
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        handlers = {
            "GetIamPolicy": grpc.unary_unary_rpc_method_handler(
                self._service_account_policy,
                request_deserializer=iam_policy_pb2.GetIamPolicyRequest.FromString,
                response_serializer=policy_pb2.Policy.SerializeToString,
            ),
            "TestIamPermissions": grpc.unary_unary_rpc_method_handler(
                self._service_account_test,
                request_deserializer=iam_policy_pb2.TestIamPermissionsRequest.FromString,
                response_serializer=iam_policy_pb2.TestIamPermissionsResponse.SerializeToString,
            ),
            "GetRole": grpc.unary_unary_rpc_method_handler(
                self._get_role,
                request_deserializer=iam_admin_v1.GetRoleRequest.deserialize,
                response_serializer=iam_admin_v1.Role.serialize,
            ),
        }
        self._grpc.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("google.iam.admin.v1.IAM", handlers),)
        )
        self._grpc_port = self._grpc.add_insecure_port("127.0.0.1:0")
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def record(self, operation: str, path: str) -> None:
        """Note a request (thread-safe)."""
        with self._lock:
            self.requests.append((operation, path))

    def operations(self) -> list[str]:
        """The operations asked for, in order (e.g. ``["serviceusage.batchGet", "projects.get"]``)."""
        with self._lock:
            return [operation for operation, _ in self.requests]

    # ------------------------------------------------------------------------------------------ gRPC IAM

    def _service_account_policy(self, request: Any, context: grpc.ServicerContext) -> policy_pb2.Policy:
        account = request.resource.rsplit("/", 1)[-1]
        self.record("serviceAccounts.getIamPolicy", request.resource)
        if "serviceAccounts.getIamPolicy" in self.state.errors:
            code, message, _ = self.state.errors["serviceAccounts.getIamPolicy"]
            context.abort(grpc.StatusCode.PERMISSION_DENIED if code == 403 else grpc.StatusCode.INTERNAL, message)
        permission = PERMISSION_OF["serviceAccounts.getIamPolicy"]
        # projects/- hides whether an account exists: a missing one is 403, not 404 (IAM REST reference,
        # projects.serviceAccounts.get: "the response contains an HTTP 403 Forbidden error instead of a 404")
        missing = account not in self.state.service_accounts
        if not self.state.permits(permission) or (missing and request.resource.startswith("projects/-/")):
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"Permission '{permission}' denied on resource (or it may not exist).",
            )
        if missing:
            context.abort(grpc.StatusCode.NOT_FOUND, f"Service account {account} does not exist.")
        bindings = [
            policy_pb2.Binding(role=b["role"], members=b["members"]) for b in self.state.service_accounts[account]
        ]
        return policy_pb2.Policy(version=1, etag=b"BwXfake=", bindings=bindings)

    def _service_account_test(self, request: Any, context: grpc.ServicerContext) -> Any:
        """IAM projects.serviceAccounts.testIamPermissions: the asked permissions the caller holds on the
        account, through its project roles or a binding of :attr:`GoogleState.caller` on the account's own policy
        (how docs/gke-setup.md grants roles/iam.serviceAccountUser). It needs no permission itself. Creating a
        cluster needs ``iam.serviceAccounts.actAs`` on its node service account ("GKE API permissions",
        cloud.google.com/kubernetes-engine/docs/reference/api-permissions: projects.locations.clusters.create)."""
        account = request.resource.rsplit("/", 1)[-1]
        self.record("serviceAccounts.testIamPermissions", request.resource)
        if account not in self.state.service_accounts and not account.endswith(
            "-compute@developer.gserviceaccount.com"
        ):
            if request.resource.startswith("projects/-/"):  # hides whether it exists: 403, as getIamPolicy
                context.abort(grpc.StatusCode.PERMISSION_DENIED, "Permission denied on resource (or it may not exist).")
            context.abort(grpc.StatusCode.NOT_FOUND, f"Service account {account} does not exist.")
        roles = set(self.state.roles) | {
            b["role"] for b in self.state.service_accounts.get(account, []) if self.state.caller in b["members"]
        }
        held = self.state.permissions_of(roles)
        granted = [p for p in request.permissions if "*" in held or p in held]
        return iam_policy_pb2.TestIamPermissionsResponse(permissions=granted)

    def _get_role(self, request: Any, context: grpc.ServicerContext) -> Any:
        """A role and its permissions. A predefined role (``roles/X``) may be read by anyone; a custom one needs
        ``iam.roles.get`` (IAM REST reference: roles.get, projects.roles.get)."""
        name = request.name
        self.record("roles.get", name)
        if name.startswith("roles/"):
            if name not in ROLE_PERMISSIONS:
                context.abort(grpc.StatusCode.NOT_FOUND, f"The role named {name} was not found.")
            permissions = ROLE_PERMISSIONS[name]
            if "*" in permissions:  # a basic role: every permission the fake knows
                permissions = frozenset().union(*(p for p in ROLE_PERMISSIONS.values() if "*" not in p))
        else:
            if not self.state.permits("iam.roles.get"):
                context.abort(
                    grpc.StatusCode.PERMISSION_DENIED, f"Permission 'iam.roles.get' denied on resource '{name}'."
                )
            if name not in self.state.custom_roles:
                context.abort(grpc.StatusCode.NOT_FOUND, f"The role named {name} was not found.")
            permissions = frozenset(self.state.custom_roles[name])
        return iam_admin_v1.Role(name=name, included_permissions=sorted(permissions))

    # ------------------------------------------------------------------------------------------ one port

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, address = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._dispatch, args=(conn, address), daemon=True).start()

    def _dispatch(self, conn: socket.socket, address: Any) -> None:
        try:
            first = conn.recv(3, socket.MSG_PEEK)
        except OSError:
            conn.close()
            return
        if first != b"PRI":  # HTTP/1.1: the REST clients
            self._http.process_request(conn, address)
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self._grpc_port))
        except OSError:
            conn.close()
            return
        with self._lock:
            self._open.update((conn, upstream))
        threading.Thread(target=self._pipe, args=(upstream, conn), daemon=True).start()
        self._pipe(conn, upstream)

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            with self._lock:
                self._open.difference_update((source, sink))

    # ------------------------------------------------------------------------------------------ lifecycle

    def start(self) -> FakeGoogleApis:
        """Serve in background threads."""
        self._grpc.start()
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving and close every connection."""
        self._stopped.set()
        self._listener.close()
        with self._lock:
            open_sockets = list(self._open)
        for sock in open_sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._grpc.stop(grace=None).wait()
        self._http.server_close()

    def __enter__(self) -> FakeGoogleApis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
