"""Kubernetes access to a GKE cluster without gcloud: an ApiClient and a kubeconfig.

The ApiClient gets its own ``kubernetes.client.Configuration`` (never the global default): the
cluster's endpoint, its CA certificate (in memory, as ``ca_cert_data``) and an OAuth access token from
google-auth that is refreshed before every request once it has expired. The kubeconfig for kubectl
users holds no token at all: it runs ``gke-gcloud-auth-plugin`` (client.authentication.k8s.io exec).
"""

from __future__ import annotations

import base64
import binascii
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import yaml

from rlcloud.errors import AuthError, BackendError

__all__ = ["TokenRefresher", "build_kube_client", "kubeconfig_entry", "write_kubeconfig"]

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
AUTH_PLUGIN = "gke-gcloud-auth-plugin"
AUTH_PLUGIN_HINT = (
    "Install gke-gcloud-auth-plugin for use with kubectl by following "
    "https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin"
)


def _ca_pem(ca_certificate: str) -> str:
    """GKE reports the CA certificate base64-encoded; the TLS stack wants the PEM text."""
    try:
        pem = base64.b64decode(ca_certificate, validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise BackendError(
            "the cluster's CA certificate (master_auth.cluster_ca_certificate) is not base64 PEM"
        ) from exc
    if "BEGIN CERTIFICATE" not in pem:
        raise BackendError("the cluster's CA certificate (master_auth.cluster_ca_certificate) holds no PEM certificate")
    return pem


class TokenRefresher:
    """``Configuration.refresh_api_key_hook``: puts a valid google-auth access token into the config.

    The kubernetes client calls the hook before building every request's auth header, so an expired
    token is refreshed in place. Thread-safe (the client's pool shares one Configuration).
    """

    def __init__(self, credentials: Any, request: Any | None = None) -> None:
        self._credentials = credentials
        self._request = request
        self._lock = threading.Lock()

    def __call__(self, configuration: Any) -> None:
        """Refresh the token in ``configuration`` when it is about to expire (the client calls this)."""
        with self._lock:
            if not self._credentials.valid:
                from google.auth import exceptions as auth_exc

                try:
                    self._credentials.refresh(self._request or self._default_request())
                except auth_exc.GoogleAuthError as exc:
                    # The refresh error's text can quote the token endpoint's reply; keep only the type.
                    raise AuthError(
                        f"could not refresh the Google access token for the cluster ({type(exc).__name__}); "
                        "re-run `gcloud auth application-default login` or check the service-account key"
                    ) from None
            configuration.api_key["BearerToken"] = self._credentials.token

    @staticmethod
    def _default_request() -> Any:
        from google.auth.transport.requests import Request

        return Request()

    def __deepcopy__(self, memo: dict[int, Any]) -> TokenRefresher:
        # Configuration deep-copies its attributes; credentials and the lock must stay shared.
        return self

    def __repr__(self) -> str:
        return "TokenRefresher(<credentials hidden>)"


def build_kube_client(endpoint: str, ca_certificate: str, credentials: Any, *, request: Any | None = None) -> Any:
    """A ``kubernetes.client.ApiClient`` for ``https://<endpoint>`` trusting only the cluster's CA.

    ``ca_certificate``: base64 PEM as GKE reports it; ``credentials``: google-auth credentials with the
    cloud-platform scope; ``request``: a google.auth transport Request for refreshing (default: requests).
    """
    from kubernetes import client as k8s

    if not endpoint:
        raise BackendError("the cluster has no endpoint yet (is it still provisioning?)")
    configuration = k8s.Configuration(host=endpoint if endpoint.startswith("https://") else f"https://{endpoint}")
    configuration.verify_ssl = True
    configuration.ca_cert_data = _ca_pem(ca_certificate)
    configuration.api_key = {"BearerToken": ""}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    configuration.refresh_api_key_hook = TokenRefresher(credentials, request)  # type: ignore[assignment]
    return k8s.ApiClient(configuration)


def kubeconfig_entry(name: str, endpoint: str, ca_certificate: str) -> dict[str, Any]:
    """The cluster, user and context entries of a kubeconfig for one GKE cluster (no secrets)."""
    _ca_pem(ca_certificate)  # refuse to write a kubeconfig kubectl could not use
    return {
        "cluster": {
            "name": name,
            "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca_certificate},
        },
        "user": {
            "name": name,
            "user": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1beta1",
                    "command": AUTH_PLUGIN,
                    "installHint": AUTH_PLUGIN_HINT,
                    "provideClusterInfo": True,
                    "interactiveMode": "IfAvailable",
                }
            },
        },
        "context": {"name": name, "context": {"cluster": name, "user": name}},
    }


def _replace(entries: list[dict[str, Any]], new: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in entries if e.get("name") != new["name"]] + [new]


def write_kubeconfig(
    path: str | os.PathLike[str], name: str, endpoint: str, ca_certificate: str, *, set_current: bool = True
) -> Path:
    """Add (or replace) cluster ``name`` in the kubeconfig at ``path``, keeping its other entries.

    Written atomically with mode 0600. kubectl then authenticates through gke-gcloud-auth-plugin.
    """
    target = Path(path).expanduser()
    entry = kubeconfig_entry(name, endpoint, ca_certificate)
    config: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    if target.exists():
        from rlcloud.errors import RLCloudError
        from rlcloud.stored import read_record_file

        try:  # bounded: the user's file, but no alias bomb or garbage gets a traceback
            loaded = read_record_file(target, form="yaml", expect=None, follow_links=True) or {}
        except RLCloudError as exc:
            raise BackendError(f"{target} is not a kubeconfig: {exc}") from None
        if not isinstance(loaded, dict):
            raise BackendError(f"{target} is not a kubeconfig (expected a YAML mapping)")
        config.update(loaded)
    for key in ("clusters", "users", "contexts"):
        config[key] = _replace(list(config.get(key) or []), entry[key[:-1]])
    if set_current or not config.get("current-context"):
        config["current-context"] = name
    config.setdefault("preferences", {})
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kubeconfig-", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            yaml.safe_dump(config, handle, sort_keys=False)
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
