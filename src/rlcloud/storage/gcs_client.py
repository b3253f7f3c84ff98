"""The Cloud Storage client of :class:`rlcloud.storage.gcs.GcsStore` and the reading of its errors.

:func:`_build_client` builds the client (its connection pool sized for the store's workers, proxies resolved
once); :func:`_translate` maps every Google error into the rlcloud error tree, in one place (see
rlcloud.storage.gcs), and the predicates beside it tell transient errors, a missing bucket and an endpoint
without the XML multipart upload API. Imported only with rlcloud.storage.gcs, for ``gs://`` URLs.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from rlcloud.errors import AuthError, NotFoundError, RLCloudError, StorageError
from rlcloud.storage.base import PreconditionFailedError

if TYPE_CHECKING:
    from rlcloud.storage.gcs import GcsStore

__all__ = ["ROLE_NEEDED"]

ROLE_NEEDED = "roles/storage.objectAdmin"


def _build_client(credentials: Any, project: str | None, max_workers: int, url: str) -> Any:
    """A storage client whose HTTP session (an ``AuthorizedSession``, built here with google-auth's public
    API and handed to the client's constructor, its documented ``_http`` argument) has a connection pool
    sized for ``max_workers`` concurrent requests; the client's own session has requests' 10."""
    import google.auth
    import google.auth.exceptions
    from google.cloud import storage

    try:
        if credentials is None and os.environ.get("STORAGE_EMULATOR_HOST"):
            from google.auth.credentials import AnonymousCredentials

            credentials = AnonymousCredentials()
        elif credentials is None:
            credentials, found = google.auth.default(scopes=list(storage.Client.SCOPE))
            project = project or found
        session = _session(credentials, max_workers)
        client = storage.Client(project=project, credentials=credentials, _http=session)
    except google.auth.exceptions.DefaultCredentialsError as exc:
        raise AuthError(
            f"no Google credentials found for {url}: run `gcloud auth application-default login`, set "
            f"GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, or pass credentials=; the "
            f"account needs {ROLE_NEEDED} on the bucket"
        ) from exc
    _resolve_proxies(session, client.api_endpoint)
    return client


def _session(credentials: Any, max_workers: int) -> Any:
    """An authorized requests session with a pool of connections for ``max_workers`` concurrent requests."""
    import requests.adapters
    from google.auth.transport.requests import AuthorizedSession

    session = AuthorizedSession(credentials)
    session.configure_mtls_channel()  # what the client does with a session of its own (a no-op without mTLS)
    # requests keeps 10 connections per host by default; more workers than that would open and drop a
    # connection per request ("Connection pool is full"), a TCP (and TLS) handshake each time
    # (github.com/googleapis/python-storage/issues/253: the library offers no setting for it).
    adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=max(10, 2 * max_workers))
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session


def _resolve_proxies(session: Any, endpoint: str) -> None:
    """Read proxy settings once, not per request: with trust_env, requests scans the whole environment for
    proxy variables on every request (~0.3 ms of CPU each, a third of a small upload's client time). The
    endpoint is fixed, so resolve the proxy (and a custom CA bundle) once and turn the per-request scan off."""
    import requests.utils

    session.proxies.update(requests.utils.get_environ_proxies(endpoint))
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle and session.verify is True:
        session.verify = bundle
    session.trust_env = False


def _translate(exc: BaseException, store: GcsStore, what: str, name: str | None) -> RLCloudError:
    """Map a Google/transport error to the rlcloud tree, naming the location (never credentials)."""
    import google.auth.exceptions
    from google.api_core import exceptions as gexc
    from google.cloud.storage.exceptions import DataCorruption, InvalidResponse

    bucket_url = f"gs://{store.bucket_name}"
    if isinstance(exc, RLCloudError):
        return exc
    if isinstance(exc, gexc.PreconditionFailed):
        return PreconditionFailedError(
            f"{what}: the object changed (generation precondition failed)", name=name or "", expected=-1
        )
    if isinstance(exc, gexc.Forbidden | gexc.Unauthorized) or (
        isinstance(exc, InvalidResponse) and getattr(exc.response, "status_code", None) in (401, 403)
    ):
        return AuthError(
            f"permission denied {what}: the credentials' account needs {ROLE_NEEDED} on bucket {bucket_url} "
            f"(location {store.url}); server said: {_message(exc)}"
        )
    if isinstance(exc, google.auth.exceptions.DefaultCredentialsError | google.auth.exceptions.RefreshError):
        return AuthError(f"Google credentials are missing or invalid ({what}); {_message(exc)}")
    if isinstance(exc, gexc.NotFound) or (
        isinstance(exc, InvalidResponse) and getattr(exc.response, "status_code", None) == 404
    ):
        if name is None or _bucket_missing(store, exc):
            return NotFoundError(f"bucket {bucket_url} does not exist (location {store.url})")
        return NotFoundError(f"{store.describe(name)} does not exist")
    if isinstance(exc, DataCorruption):
        return StorageError(f"checksum mismatch {what}: {_message(exc)}")
    return StorageError(f"{what} failed: {type(exc).__name__}: {_message(exc)}")


def _bucket_missing(store: GcsStore, exc: BaseException) -> bool:
    text = _message(exc).lower()
    if "bucket" in text and ("not exist" in text or "not found" in text):
        return True
    try:
        return not store.bucket.exists(retry=store.retry)
    except Exception:
        return False


def _mpu_not_offered(exc: BaseException) -> bool:
    """Whether ``exc`` is the answer of an endpoint without the XML multipart upload API to the upload's
    initiation (``POST <object>?uploads``): 404, 405 or 501 that is not an XML API error document (GCS's
    own 404s, such as NoSuchBucket, are ``<Error>`` documents; a JSON-only emulator answers JSON)."""
    from google.cloud.storage.exceptions import InvalidResponse

    if not isinstance(exc, InvalidResponse) or _request_method(exc) != "POST":
        return False
    response = exc.response
    if getattr(response, "status_code", None) not in (404, 405, 501):
        return False
    if not str(getattr(response.request, "url", "")).endswith("?uploads"):
        return False
    body = (getattr(response, "text", "") or "")[:2000]
    return not ("<Error>" in body and "<Code>" in body)


def _before_abort(exc: Exception) -> Exception:
    """The failure that made the library abort a multipart upload, when ``exc`` is the abort's own
    failure (its DELETE refused or unanswered); else ``exc``. The abort's exceptions (the library's
    RetryError, the last answer) chain back to that failure through ``__context__``."""
    if _request_method(exc) != "DELETE":
        return exc
    cause = exc.__context__
    for _ in range(8):  # a short chain; bounded in case of a cycle
        if cause is None or _request_method(cause) != "DELETE":
            break
        cause = cause.__context__
    return cause if isinstance(cause, Exception) else exc


def _request_method(exc: BaseException) -> str | None:
    """The HTTP method of the request that failed with ``exc`` (an answer or a transport error; for the
    library's ``RetryError``, the last attempt's)."""
    from google.api_core.exceptions import RetryError

    if isinstance(exc, RetryError) and exc.cause is not None:
        exc = exc.cause
    request = getattr(getattr(exc, "response", None), "request", None) or getattr(exc, "request", None)
    method = getattr(request, "method", None)
    return method if isinstance(method, str) else None


def _message(exc: BaseException) -> str:
    msg = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return msg if len(msg) < 400 else msg[:397] + "..."


def _transient(exc: BaseException) -> bool:
    from google.api_core import exceptions as gexc
    from google.api_core.retry import if_transient_error
    from google.cloud.storage.exceptions import DataCorruption

    # requests' exceptions are OSErrors; the answers Cloud Storage says to retry: 408, 429, 5xx
    # (cloud.google.com/storage/docs/retry-strategy)
    answers = gexc.TooManyRequests | gexc.ServerError
    if isinstance(exc, DataCorruption | ConnectionError | TimeoutError | OSError | answers):
        return True
    return isinstance(exc, Exception) and (bool(if_transient_error(exc)) or getattr(exc, "code", None) == 408)
