"""kube_client() and write_kubeconfig(): TLS with the cluster's CA, a self-refreshing token, no secrets leaked.

The GKE fake reports the endpoint and CA of a FakeKubeApiServer served over TLS with a trustme CA; the
apiserver checks the bearer token. Tokens come from google.oauth2 Credentials with a refresh handler,
so expiry and refresh are real google-auth behaviour without any Google network.
"""

from __future__ import annotations

import base64
import datetime as _dt
import logging
import os
import ssl
import stat
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml
from google.auth import _helpers
from google.auth import exceptions as auth_exc
from google.oauth2.credentials import Credentials
from kubernetes import client as k8s

from rlcloud.errors import AuthError, NotFoundError
from rlcloud.gke.cluster import GkeCluster
from rlcloud.specs import ClusterSpec
from tests.fakes.gke import FakeClusterManager
from tests.fakes.kube_apiserver import FakeKubeApiServer

MakeCluster = Callable[..., GkeCluster]


class TokenIssuer:
    """Hands out numbered tokens through google-auth's refresh_handler; only the latest one is accepted."""

    def __init__(self, prefix: str = "token") -> None:
        self.prefix = prefix
        self.issued: list[str] = []

    def __call__(self, request: Any, scopes: Any = None) -> tuple[str, _dt.datetime]:
        token = f"{self.prefix}-{len(self.issued)}"
        self.issued.append(token)
        return token, _helpers.utcnow() + _dt.timedelta(hours=1)

    def accepts(self, token: str) -> bool:
        return bool(self.issued) and token == self.issued[-1]


def ca_b64(ca: trustme.CA) -> str:
    return base64.b64encode(ca.cert_pem.bytes()).decode()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def issuer() -> TokenIssuer:
    return TokenIssuer()


@pytest.fixture
def apiserver(ca: trustme.CA, issuer: TokenIssuer) -> Iterator[FakeKubeApiServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    with FakeKubeApiServer(tls=context, token_validator=issuer.accepts) as server:
        yield server


def running_cluster(
    fake: FakeClusterManager, make_cluster: MakeCluster, apiserver: FakeKubeApiServer, ca: trustme.CA, creds: Any
) -> GkeCluster:
    fake.set_master(f"127.0.0.1:{apiserver.port}", ca_b64(ca))
    cluster = make_cluster(ClusterSpec(name="rl"), credentials=creds)
    cluster.create()
    return cluster


def test_kube_client_uses_the_cluster_ca_and_refreshes_expired_tokens(
    fake: FakeClusterManager,
    make_cluster: MakeCluster,
    apiserver: FakeKubeApiServer,
    ca: trustme.CA,
    issuer: TokenIssuer,
) -> None:
    creds = Credentials(token=None, refresh_handler=issuer)
    cluster = running_cluster(fake, make_cluster, apiserver, ca, creds)
    api = cluster.kube_client()
    try:
        core = k8s.CoreV1Api(api)
        assert "default" in [ns.metadata.name for ns in core.list_namespace().items]
        assert issuer.issued == ["token-0"]
        core.list_namespace()
        assert issuer.issued == ["token-0"]  # still valid: no refresh
        creds.expiry = _helpers.utcnow() - _dt.timedelta(seconds=1)  # the token expires
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="rlcloud")))
        assert issuer.issued == ["token-0", "token-1"]  # refreshed before the request, which was accepted
        assert "rlcloud" in [ns.metadata.name for ns in core.list_namespace().items]
        assert api.configuration.host == f"https://127.0.0.1:{apiserver.port}"
    finally:
        api.close()
    # the global default configuration is never touched
    default = k8s.Configuration.get_default_copy()
    assert not default.api_key and default.refresh_api_key_hook is None and "127.0.0.1" not in default.host


def test_kube_client_rejects_a_server_the_cluster_ca_did_not_sign(
    fake: FakeClusterManager,
    make_cluster: MakeCluster,
    apiserver: FakeKubeApiServer,
    ca: trustme.CA,
    issuer: TokenIssuer,
) -> None:
    cluster = running_cluster(fake, make_cluster, apiserver, ca, Credentials(token=None, refresh_handler=issuer))
    fake.set_master(f"127.0.0.1:{apiserver.port}", ca_b64(trustme.CA()))  # GKE reports another CA
    api = cluster.kube_client()
    api.configuration.retries = 0
    try:
        with pytest.raises(Exception, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            k8s.CoreV1Api(api).list_namespace()
    finally:
        api.close()


def test_kube_client_needs_a_running_cluster(fake: FakeClusterManager, make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    with pytest.raises(NotFoundError, match="does not exist"):
        cluster.kube_client()
    cluster.create(wait=False)
    with pytest.raises(NotFoundError, match="no endpoint yet"):
        cluster.kube_client()


def test_write_kubeconfig_merges_and_holds_no_token(
    fake: FakeClusterManager, make_cluster: MakeCluster, ca: trustme.CA, tmp_path: Path
) -> None:
    fake.set_master("34.1.2.3", ca_b64(ca))
    cluster = make_cluster(ClusterSpec(name="rl"))
    cluster.create()
    path = tmp_path / "kube" / "config"
    path.parent.mkdir()
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "kind", "cluster": {"server": "https://127.0.0.1:6443"}}],
                "users": [{"name": "kind", "user": {}}],
                "contexts": [{"name": "kind", "context": {"cluster": "kind", "user": "kind"}}],
                "current-context": "kind",
            }
        )
    )
    written = cluster.write_kubeconfig(path)
    cluster.write_kubeconfig(path)  # twice: replaced, not duplicated
    assert stat.S_IMODE(os.stat(written).st_mode) == 0o600
    config = yaml.safe_load(written.read_text())
    name = "gke_rl-test-project_us-central1-a_rl"
    assert config["current-context"] == name
    assert [c["name"] for c in config["clusters"]] == ["kind", name]
    entry = next(c for c in config["clusters"] if c["name"] == name)["cluster"]
    assert entry == {"server": "https://34.1.2.3", "certificate-authority-data": ca_b64(ca)}
    user = next(u for u in config["users"] if u["name"] == name)["user"]
    assert set(user) == {"exec"}
    assert user["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert user["exec"]["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    assert "token" not in written.read_text()


def test_canary_secret_never_appears_in_logs_errors_or_kubeconfig(
    fake: FakeClusterManager,
    make_cluster: MakeCluster,
    apiserver: FakeKubeApiServer,
    ca: trustme.CA,
    issuer: TokenIssuer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    issuer.prefix = canary  # the apiserver accepts only this issuer's latest token
    creds = Credentials(token=None, refresh_handler=issuer)
    loud = ["google", "google.auth", "google.api_core", "urllib3", "kubernetes", "kubernetes.client", "rlcloud"]
    caplog.set_level(logging.DEBUG)
    for name in loud:  # caplog restores these levels after the test
        caplog.set_level(logging.DEBUG, logger=name)
    messages: list[str] = []

    def capture_loggers() -> None:
        # kubernetes.client.Configuration() resets the urllib3/kubernetes loggers to WARNING: undo it
        for name in loud:
            logging.getLogger(name).setLevel(logging.DEBUG)

    cluster = running_cluster(fake, make_cluster, apiserver, ca, creds)
    api = cluster.kube_client()
    capture_loggers()
    try:
        core = k8s.CoreV1Api(api)
        core.list_namespace()
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="x")))
        creds.expiry = _helpers.utcnow() - _dt.timedelta(seconds=1)
        core.list_namespace()
        assert len(issuer.issued) == 2
        # the apiserver refusing the token: the ApiException must not quote it
        issuer.issued.append("revoked")
        with pytest.raises(k8s.ApiException) as refused:
            core.list_namespace()
        messages.append(str(refused.value))

        # a refresh that fails with the secret in Google's message: our error keeps it out
        def leaky(request: Any, scopes: Any = None) -> tuple[str, _dt.datetime]:
            raise auth_exc.RefreshError(f"token {canary} was revoked")

        creds.refresh_handler = leaky
        creds.expiry = _helpers.utcnow() - _dt.timedelta(seconds=1)
        with pytest.raises(AuthError) as failed:
            core.list_namespace()
        messages.append(str(failed.value))
        messages.append("".join(traceback.format_exception(failed.value)))  # as a user would see it
        assert failed.value.__cause__ is None and failed.value.__suppress_context__
    finally:
        api.close()
    kubeconfig = cluster.write_kubeconfig(tmp_path / "config").read_text()
    assert canary in "".join(issuer.issued)  # the canary really was the token in use
    records = [r.getMessage() for r in caplog.records] + [r.exc_text or "" for r in caplog.records]
    assert any("urllib3" in r.name or "kubernetes" in r.name for r in caplog.records)  # DEBUG really was on
    for text in [*records, *messages, kubeconfig, repr(api.configuration.refresh_api_key_hook)]:
        assert canary not in text
