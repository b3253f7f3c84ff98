"""FaultyProxy: a loopback HTTP proxy in front of a GCS JSON API server that records every request and
injects faults into a seeded share of them.

Faults (chosen per request with ``random.Random(seed)``):

- ``"503"``: answer 503 Service Unavailable without forwarding;
- ``"reset-before"``: drop the connection (TCP RST) without forwarding;
- ``"reset-after"``: forward (the server applies the request), then drop the connection, so the client
  never sees the answer of a request that took effect;
- ``"truncate"``: forward, then send the status line and headers with the full Content-Length but only
  half of the body, and drop the connection.

``deny(method, path)`` returning True answers 403 the way GCS does for a missing IAM permission.
``rule(method, path, query)``, when set, picks the fault of a request itself (a fault name or None),
before the random draw: a test can target one request, e.g. the conditional write of a pointer.
``latency_s`` holds every request that long before forwarding it: a network round trip to a remote
service (GCS from a GKE pod) on top of the loopback one, for benchmarks.
``hold(predicate)`` parks matching requests before they are forwarded until ``release()``: a test can
stop a client between two requests (e.g. kill an uploader halfway) deterministically; ``held`` is set
when the first one arrives. Released requests are dropped, not forwarded.
The client points at ``proxy.url`` (``client_options={"api_endpoint": proxy.url}``); resumable-upload
``Location`` headers are rewritten so their follow-up requests come through the proxy too.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import socket
import struct
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

__all__ = ["FAULTS", "FaultyProxy", "RequestRecord"]

FAULTS = ("503", "reset-before", "reset-after", "truncate")
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
}
_LIST_RE = re.compile(r"^/storage/v1/b/[^/]+/o/?$")


@dataclass(frozen=True)
class RequestRecord:
    """One request the proxy saw: what, and which fault (if any) it got."""

    method: str
    path: str
    query: str
    fault: str | None
    status: int | None

    @property
    def is_list(self) -> bool:
        """An object listing call (GET .../b/BUCKET/o)."""
        return self.method == "GET" and bool(_LIST_RE.match(self.path))

    @property
    def is_upload(self) -> bool:
        """The start of an object upload (simple, multipart, or a resumable session's initiation)."""
        return self.method == "POST" and self.path.startswith("/upload/")

    @property
    def is_download(self) -> bool:
        """A media download."""
        return self.method == "GET" and (self.path.startswith("/download/") or "alt=media" in self.query)


class FaultyProxy:
    """A threaded loopback proxy to ``upstream`` (e.g. a FakeGcsServer's URL). See the module docstring."""

    def __init__(
        self,
        upstream: str,
        *,
        fault_rate: float = 0.0,
        seed: int = 0,
        faults: Sequence[str] = FAULTS,
        deny: Callable[[str, str], bool] | None = None,
        latency_s: float = 0.0,
    ) -> None:
        unknown = set(faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; valid: {FAULTS}")
        parsed = urllib.parse.urlsplit(upstream)
        self.upstream = upstream.rstrip("/")
        self._up_host = parsed.hostname or "127.0.0.1"
        self._up_port = parsed.port or 80
        self.fault_rate = fault_rate
        self.faults = tuple(faults)
        self.deny = deny
        self.latency_s = latency_s
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.records: list[RequestRecord] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""
        self._hold: Callable[[str, str, str], bool] | None = None
        self.rule: Callable[[str, str, str], str | None] | None = None
        self.held = threading.Event()
        self._release = threading.Event()

    def hold(self, predicate: Callable[[str, str, str], bool]) -> None:
        """Park requests for which ``predicate(method, path, query)`` is true until :meth:`release`."""
        self._release.clear()
        self.held.clear()
        self._hold = predicate

    def release(self) -> None:
        """Let parked requests go (they are answered with a dropped connection) and stop holding."""
        self._hold = None
        self._release.set()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Self:
        """Listen on a free loopback port."""
        proxy = self

        class Handler(self._handler_class()):  # type: ignore[misc]
            owner = proxy

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        name = type(self).__name__
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)
        self._thread.start()
        return self

    def _handler_class(self) -> type[_Handler]:
        """The request handler (a subclass answers some requests itself)."""
        return _Handler

    def stop(self) -> None:
        """Stop listening (idempotent)."""
        self.release()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- accounting ------------------------------------------------------------------------------

    def reset_counts(self) -> None:
        """Forget the requests seen so far."""
        with self._lock:
            self.records.clear()

    def snapshot(self) -> list[RequestRecord]:
        """The requests seen so far."""
        with self._lock:
            return list(self.records)

    @property
    def list_calls(self) -> int:
        """How many object listings were requested."""
        return sum(r.is_list for r in self.snapshot())

    @property
    def uploads(self) -> int:
        """How many uploads were started."""
        return sum(r.is_upload for r in self.snapshot())

    @property
    def downloads(self) -> int:
        """How many media downloads were requested."""
        return sum(r.is_download for r in self.snapshot())

    def fault_counts(self) -> Counter[str]:
        """How many faults of each kind were injected."""
        return Counter(r.fault for r in self.snapshot() if r.fault)

    def _pick_fault(self) -> str | None:
        with self._lock:
            if self.fault_rate and self._rng.random() < self.fault_rate:
                return self._rng.choice(self.faults)
            return None

    def _record(self, rec: RequestRecord) -> None:
        with self._lock:
            self.records.append(rec)


class _QuietServer(ThreadingHTTPServer):
    # socketserver's listen backlog is 5: a client opening 16-32 connections at once (a transfer pool)
    # would have the surplus SYNs dropped and retried a second later, a stall no real server adds.
    request_queue_size = 128

    def handle_error(self, request: object, client_address: object) -> None:
        # Clients dropping connections (their own retries, the resets we inject) are expected here.
        import sys

        exc = sys.exc_info()[1]
        if not isinstance(exc, ConnectionError | TimeoutError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: with Nagle's algorithm on, each answer would wait for
    # the client's delayed ACK (40 ms on Linux), a stall no real server adds.
    disable_nagle_algorithm = True
    owner: FaultyProxy
    _conn: http.client.HTTPConnection | None = None

    def log_message(self, format: str, *args: object) -> None:  # quiet: tests read records instead
        pass

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _reset(self) -> None:
        # SO_LINGER 0: close() sends a TCP RST, as a crashed server or a middlebox would.
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def _upstream(self) -> http.client.HTTPConnection:
        # One upstream connection per client connection, closed with it (see finish()).
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.owner._up_host, self.owner._up_port, timeout=120)
        return self._conn

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers["Content-Length"] = str(len(body))
        for attempt in range(2):
            conn = self._upstream()
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                return resp.status, resp.getheaders(), data
            except (OSError, http.client.HTTPException):
                conn.close()
                self._conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _send(self, status: int, headers: list[tuple[str, str]], body: bytes, *, truncate: bool = False) -> None:
        self.send_response(status)
        for key, value in headers:
            if key.lower() in _HOP_BY_HOP:
                continue
            if key.lower() == "location":
                value = value.replace(self.owner.upstream, self.owner.url)
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if truncate:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self._reset()
            return
        self.wfile.write(body)

    def _error(self, status: int, message: str, reason: str) -> None:
        body = json.dumps(
            {"error": {"code": status, "message": message, "errors": [{"message": message, "reason": reason}]}}
        ).encode()
        self._send(status, [("Content-Type", "application/json; charset=UTF-8")], body)

    def _handle(self) -> None:
        split = urllib.parse.urlsplit(self.path)
        body = self._read_body()
        owner = self.owner
        if owner.deny is not None and owner.deny(self.command, split.path):
            owner._record(RequestRecord(self.command, split.path, split.query, None, 403))
            self._error(
                403,
                "rlcloud-test@example.iam.gserviceaccount.com does not have storage.objects.list access to "
                "the Google Cloud Storage bucket. Permission 'storage.objects.list' denied on resource "
                "(or it may not exist).",
                "forbidden",
            )
            return
        hold = owner._hold
        if hold is not None and hold(self.command, split.path, split.query):
            owner._record(RequestRecord(self.command, split.path, split.query, "held", None))
            owner.held.set()
            owner._release.wait(120)
            self._reset()
            return
        fault = owner.rule(self.command, split.path, split.query) if owner.rule is not None else None
        fault = fault or owner._pick_fault()
        if owner.latency_s:
            time.sleep(owner.latency_s)
        if fault == "503":
            owner._record(RequestRecord(self.command, split.path, split.query, fault, 503))
            self._error(503, "Service Unavailable (injected)", "backendError")
            return
        if fault == "reset-before":
            owner._record(RequestRecord(self.command, split.path, split.query, fault, None))
            self._reset()
            return
        try:
            status, headers, data = self._forward(body)
        except (OSError, http.client.HTTPException):
            owner._record(RequestRecord(self.command, split.path, split.query, "upstream-error", None))
            self._reset()
            return
        if fault == "truncate" and len(data) < 2:
            fault = "reset-after"
        owner._record(RequestRecord(self.command, split.path, split.query, fault, status))
        if fault == "reset-after":
            self._reset()
            return
        self._send(status, headers, data, truncate=fault == "truncate")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle


@contextmanager
def proxy_process(upstream: str, *, latency_ms: float = 0.0) -> Iterator[str]:
    """Run :func:`main` in a process of its own for the ``with`` block; yields the proxy's URL (benchmarks)."""
    import subprocess
    import sys
    from pathlib import Path

    command = [sys.executable, "-m", "tests.fakes.faulty_proxy", upstream, "--latency-ms", str(latency_ms)]
    proc = subprocess.Popen(command, cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    """``python -m tests.fakes.faulty_proxy UPSTREAM [--latency-ms N]``: serve until killed, printing the URL.

    A proxy in a process of its own, for benchmarks: in the measuring process it would compete with the
    client for the interpreter lock.
    """
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("upstream")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args()
    with FaultyProxy(args.upstream, latency_s=args.latency_ms / 1000) as proxy:
        print(proxy.url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
