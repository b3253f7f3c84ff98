"""A local cache of stored objects keyed by their generation: what a second read of a finished sweep costs
nothing for.

An object's generation changes with every write (Cloud Storage's object generation), so the bytes of one
generation never change: a cached copy is exactly the stored object of that generation and is never stale.
A reader asks with the generation a listing has just given (:meth:`ObjectCache.get`): a newer generation is a
miss, never an older copy. Entries are files named by a hash of the object's URL and the generation,
written to a temporary file and renamed into place (processes reading or filling the cache at once each see
a whole entry or none), and the cache is kept under ``max_bytes`` by removing the least recently used
entries. A damaged entry (its checksum does not match) is removed and is a miss.

It lives in ``$XDG_CACHE_HOME/rlcloud/objects`` (:func:`rlcloud.results.object_cache_dir`); ``RLCLOUD_CACHE_MB``
bounds it (default 512; 0 turns it off).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
import time
from pathlib import Path

__all__ = ["DEFAULT_CACHE_MB", "ObjectCache", "default_cache"]

logger = logging.getLogger(__name__)

#: The cache's default bound in MiB (``RLCLOUD_CACHE_MB``): ~100,000 run summaries, or 2,000 runs' metrics.
DEFAULT_CACHE_MB = 512
#: Largest object kept (a larger one is read every time): a summary is a few KiB, an episode record ~150 bytes.
MAX_ENTRY_BYTES = 16 << 20
_DIGEST = 8  # bytes of blake2b over the content, at the start of an entry


class ObjectCache:
    """Objects by (URL, generation) in a directory; see the module docstring."""

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._added = 0  # bytes added since the last trim

    @property
    def enabled(self) -> bool:
        """Whether the cache keeps anything."""
        return self.max_bytes > 0

    def _path(self, url: str, generation: int) -> Path:
        key = hashlib.sha256(url.encode("utf-8", "surrogateescape")).hexdigest()[:40]
        return self.root / key[:2] / f"{key}-{generation}"

    def get(self, url: str, generation: int) -> bytes | None:
        """The bytes of ``url`` at ``generation``, or None when they are not here (or the entry is damaged)."""
        if not self.enabled or generation <= 0:
            return None
        path = self._path(url, generation)
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        digest, data = raw[:_DIGEST], raw[_DIGEST:]
        if hashlib.blake2b(data, digest_size=_DIGEST).digest() != digest:
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: trimmed last
        return data

    def put(self, url: str, generation: int, data: bytes) -> None:
        """Keep the bytes of ``url`` at ``generation`` (too large an object, or a full disk, is left out)."""
        if not self.enabled or generation <= 0 or len(data) > min(MAX_ENTRY_BYTES, self.max_bytes):
            return
        path = self._path(url, generation)
        tmp = path.with_name(f".tmp-{os.getpid()}-{threading.get_ident()}-{path.name}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(hashlib.blake2b(data, digest_size=_DIGEST).digest() + data)
            os.replace(tmp, path)
        except OSError as exc:
            logger.debug("not cached: %s: %s", url, exc)
            with contextlib.suppress(OSError):
                tmp.unlink()
            return
        with self._lock:
            self._added += len(data)
            trim = self._added > self.max_bytes // 10
            if trim:
                self._added = 0
        if trim:
            self.trim()

    def trim(self) -> None:
        """Remove the least recently used entries until the cache holds at most 80% of ``max_bytes``
        (another process trimming at once only removes some entries twice: a miss, never a wrong answer)."""
        entries = []
        for path in self.root.glob("*/*"):
            try:
                st = path.stat()
            except OSError:
                continue
            if path.name.startswith(".tmp-") and st.st_mtime < time.time() - 3600:
                with contextlib.suppress(OSError):
                    path.unlink()  # a writer that died mid-write
                continue
            entries.append((st.st_mtime, st.st_size, path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_bytes * 0.8:
                break
            with contextlib.suppress(OSError):
                path.unlink()
            total -= size


_default: ObjectCache | None = None
_default_lock = threading.Lock()


def default_cache() -> ObjectCache:
    """This process's cache (``$XDG_CACHE_HOME/rlcloud/objects``, bounded by ``RLCLOUD_CACHE_MB``)."""
    from rlcloud.results import object_cache_dir

    global _default
    with _default_lock:
        root = object_cache_dir()
        if _default is None or _default.root != root:
            try:
                megabytes = float(os.environ.get("RLCLOUD_CACHE_MB", DEFAULT_CACHE_MB))
            except ValueError:
                logger.warning("RLCLOUD_CACHE_MB is not a number; using %d", DEFAULT_CACHE_MB)
                megabytes = DEFAULT_CACHE_MB
            _default = ObjectCache(root, int(max(0.0, megabytes) * (1 << 20)))
        return _default
