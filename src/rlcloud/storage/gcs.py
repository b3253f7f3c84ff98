"""The results store in Google Cloud Storage (google-cloud-storage only).

Loaded only for ``gs://`` URLs, so ``import rlcloud`` never imports ``google.cloud``. Every Google
error is translated here, in one place (:func:`_translate`), into the rlcloud error tree:

- 404 on a bucket -> ``NotFoundError`` naming the bucket; on an object -> ``NotFoundError`` naming it
- 401/403, missing or unusable credentials -> ``AuthError`` naming the location and the role needed
- 412 on a conditional write -> ``PreconditionFailedError`` (a ``StorageError``)
- anything else, after the client library's retries -> ``StorageError``

Writes are retried here (transient errors, lost answers) and a retry never writes blindly: it first reads
the object, and one that already holds the bytes being written is the result (the previous attempt landed,
its answer lost; the library's own retry would write again, or meet its own write's 412); otherwise the
retry carries a generation precondition (the caller's, else the generation it read, 0 when absent:
"Request preconditions", cloud.google.com/storage/docs/request-preconditions).

Many files go through thread workers (threads, not processes: the runner process holds TensorFlow, and
forking it is unsafe): downloads with ``transfer_manager``, large ones split into concurrent ranged reads
with ``download_chunks_concurrently``; small uploads as one request each with the library's public
``Blob.upload_from_string`` (whose answer describes the stored object: no metadata read after it). Large
uploads go in concurrent parts through the XML multipart upload API (``upload_chunks_concurrently``), then
one metadata read gives the stored CRC32C. Not every endpoint offers that API (fake-gcs-server answers 404
to its initiation): by default the first large upload finds out, and the store (with its ``child()``
stores) then streams each large file from disk with ``Blob.upload_from_file``. A failed chunked upload is
aborted by the library; one it could not abort (the process was killed) stays billed until a bucket
lifecycle rule (AbortIncompleteMultipartUpload) removes it, see docs/gke-setup.md.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import logging
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rlcloud.errors import AuthError, NotFoundError, RLCloudError, StorageError
from rlcloud.layout import LATEST
from rlcloud.storage.base import (
    ObjectInfo,
    ObjectList,
    Progress,
    Store,
    _check_name,
    crc32c_of_file,
    is_internal,
    tmp_sibling,
)
from rlcloud.storage.gcs_client import (
    ROLE_NEEDED,
    _before_abort,
    _build_client,
    _message,
    _mpu_not_offered,
    _transient,
    _translate,
)
from rlcloud.waiting import Backoff, sleep_until

__all__ = ["ROLE_NEEDED", "GcsStore"]

logger = logging.getLogger(__name__)
_LIST_FIELDS = "items(name,size,crc32c,generation,updated),nextPageToken"
_NAMED_FIELDS = "items(name,size,crc32c,generation),nextPageToken"
_T = TypeVar("_T")
# XML multipart upload limits on GCS: parts of 5 MiB to 5 GiB (the last one may be smaller), at most
# 10,000 parts per upload; the default chunk_bytes (8 MiB) is within them.
_MAX_PARTS = 10_000
# Each part in flight is held in memory (read whole, checksummed, sent): at most 8 parts of 8 MiB keep
# a large upload's buffers near 64 MiB, in a runner process that also holds a model.
_PART_WORKERS = 8
# Block size in which a file's CRC32C is computed (a retried streamed upload).
_STREAM_BLOCK = 1 << 20


class _ChunkedSupport:
    """Whether the endpoint offers XML multipart uploads, learned once and shared by a store and its
    ``child()`` stores (they talk to the same endpoint)."""

    def __init__(self) -> None:
        self.offered: bool | None = None  # None: not known yet
        self._lock = threading.Lock()

    def seen_offered(self) -> None:
        with self._lock:
            if self.offered is None:
                self.offered = True

    def not_offered(self, url: str) -> None:
        with self._lock:
            first = self.offered is not False
            self.offered = False
        if first:  # once per store family, not once per large file
            logger.debug(
                "the endpoint of %s does not offer XML multipart uploads; large files go in one request each",
                url,
            )


#: One file's upload: its index in the pairs, and the stored object or the error.
_Uploaded = tuple[int, ObjectInfo | BaseException]
_Failed = tuple[int, BaseException]


class _Uploads:
    """The files of one :meth:`GcsStore.upload_files` call: what is stored so far, and its progress."""

    def __init__(self, pairs: Sequence[tuple[Path, str]], sizes: list[int], progress: Progress | None) -> None:
        self.pairs = pairs
        self.sizes = sizes
        self.results: list[ObjectInfo | None] = [None] * len(pairs)
        self.progress = progress
        self.done, self.total = 0, sum(sizes)

    def record(self, finished: list[_Uploaded]) -> list[_Failed]:
        """Keep ``finished``'s stored objects and report progress; return its failures."""
        failed: list[_Failed] = []
        for i, res in finished:
            if isinstance(res, BaseException):
                failed.append((i, res))
                continue
            self.results[i] = res
            self.done += self.sizes[i]
        if self.progress:
            self.progress(self.done, self.total)
        return failed


class GcsStore(Store):
    """A results location ``gs://bucket/prefix``.

    ``client`` is a ``google.cloud.storage.Client``; when None one is built on first use from
    ``credentials`` (default: ``google.auth.default()``; anonymous when ``STORAGE_EMULATOR_HOST`` is set).
    ``max_workers`` concurrent transfers (default 32: a small upload spends most of its time waiting on
    the network, ~20-50 ms from a GKE pod, so many in flight pay off: syncing 500 x 16 KiB + 2 x 64 MiB
    through a proxy adding 20 / 50 ms per request took 3.50 / 5.25 s with 8 and 2.46 / 2.70 s with 32,
    median of 4 on two cores; 64 gained little more).
    ``retry_initial_s`` / ``retry_timeout_s`` tune the client library's exponential back-off (tests use
    short ones). Files of at least ``large_file_bytes`` are downloaded as concurrent ranged reads and
    uploaded as XML multipart uploads in parts of ``chunk_bytes`` (GCS needs at least 5 MiB; more for
    files over 10,000 parts). ``chunked_uploads``: None (default) tries the multipart upload and falls
    back to one streamed single-request upload per large file where the endpoint does not offer it (e.g.
    an emulator);
    True always uses it (its errors surface); False never does.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        client: Any = None,
        credentials: Any = None,
        project: str | None = None,
        max_workers: int = 32,
        retry_initial_s: float = 1.0,
        retry_timeout_s: float = 120.0,
        large_file_bytes: int = 32 << 20,
        chunk_bytes: int = 8 << 20,
        chunked_uploads: bool | None = None,
    ) -> None:
        self.bucket_name = bucket
        self.prefix = prefix.strip("/")
        self.url = f"gs://{bucket}" + (f"/{self.prefix}" if self.prefix else "")
        self.max_workers = max(1, max_workers)
        self.retry_initial_s = retry_initial_s
        self.retry_timeout_s = retry_timeout_s
        self.large_file_bytes = large_file_bytes
        self.chunk_bytes = max(1, chunk_bytes)
        self.chunked_uploads = chunked_uploads
        self._chunked = _ChunkedSupport()
        self._client = client
        self._owns_client = client is None
        self._credentials = credentials
        self._project = project
        self._lock = threading.Lock()
        self._bucket: Any = None
        self._retry: Any = None

    # -- plumbing --------------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The ``google.cloud.storage.Client`` in use (built on first use when none was given)."""
        with self._lock:
            if self._client is None:
                self._client = _build_client(self._credentials, self._project, self.max_workers, self.url)
                # A store dropped without close() still closes its connections (no socket left to the
                # garbage collector, which would report it as a ResourceWarning).
                weakref.finalize(self, self._client.close)
            return self._client

    @property
    def bucket(self) -> Any:
        """The ``google.cloud.storage.Bucket`` (no request is made to build it)."""
        if self._bucket is None:
            self._bucket = self.client.bucket(self.bucket_name)
        return self._bucket

    @property
    def retry(self) -> Any:
        """The ``google.api_core`` retry policy passed to every call."""
        if self._retry is None:
            from google.cloud.storage.retry import DEFAULT_RETRY

            self._retry = DEFAULT_RETRY.with_delay(
                initial=self.retry_initial_s, maximum=max(self.retry_initial_s, 32 * self.retry_initial_s)
            ).with_timeout(self.retry_timeout_s)
        return self._retry

    def _key(self, name: str) -> str:
        _check_name(name)
        return f"{self.prefix}/{name}" if self.prefix else name

    def _name(self, key: str) -> str:
        return key[len(self.prefix) + 1 :] if self.prefix else key

    def _info(self, blob: Any, *, with_time: bool = True) -> ObjectInfo:
        # parsed from its RFC 3339 text on each access (a strptime: the most costly field of a large
        # listing): read once, and only when wanted
        when = blob.updated if with_time else None
        updated = when.timestamp() if when is not None else None
        return ObjectInfo(
            name=self._name(blob.name),
            size=int(blob.size or 0),
            crc32c=blob.crc32c or "",
            generation=int(blob.generation or 0),
            updated=updated,
        )

    def _call(self, what: str, fn: Callable[[], _T], *, name: str | None = None) -> _T:
        try:
            return fn()
        except RLCloudError:
            raise
        except Exception as exc:
            raise _translate(exc, self, what, name) from exc

    def close(self) -> None:
        """Close the HTTP session of a client this store built (not of one passed in)."""
        with self._lock:
            if self._owns_client and self._client is not None:
                self._client.close()
                self._client = None
                self._bucket = None

    # -- Store -----------------------------------------------------------------------------------

    def child(self, prefix: str) -> GcsStore:
        """A store for ``gs://bucket/<prefix>/<sub>``, sharing this store's client."""
        sub = _check_name(prefix.strip("/"))
        other = GcsStore(
            self.bucket_name,
            f"{self.prefix}/{sub}" if self.prefix else sub,
            client=self.client,
            max_workers=self.max_workers,
            retry_initial_s=self.retry_initial_s,
            retry_timeout_s=self.retry_timeout_s,
            large_file_bytes=self.large_file_bytes,
            chunk_bytes=self.chunk_bytes,
            chunked_uploads=self.chunked_uploads,
        )
        other._chunked = self._chunked  # same endpoint: what one learned holds for the other
        return other

    def _list(self, prefix: str) -> ObjectList:
        """One listing (all pages) of the objects under ``prefix``, sorted by name."""
        key_prefix = (self.prefix + "/" if self.prefix else "") + prefix

        def run() -> ObjectList:
            blobs = self.client.list_blobs(
                self.bucket_name, prefix=key_prefix or None, fields=_LIST_FIELDS, retry=self.retry
            )
            return sorted((self._info(b) for b in blobs), key=lambda o: o.name)

        return self._call(f"listing {self.describe(prefix)}", run)

    def stat(self, name: str) -> ObjectInfo | None:
        """The object's metadata, or None when it (or the bucket) does not exist."""
        blob = self._call(
            f"reading metadata of {self.describe(name)}",
            lambda: self.bucket.get_blob(self._key(name), retry=self.retry),
            name=name,
        )
        return None if blob is None else self._info(blob)

    def read_bytes(self, name: str, *, start: int = 0) -> bytes:
        """The object's content from byte ``start`` (CRC32C checked when reading it whole)."""
        from google.api_core import exceptions as gexc

        blob = self.bucket.blob(self._key(name))

        def run() -> bytes:
            try:
                return bytes(
                    blob.download_as_bytes(
                        start=start or None,
                        checksum="auto" if not start else None,
                        retry=self.retry,
                    )
                )
            except gexc.RequestRangeNotSatisfiable:
                return b""

        return self._call(f"reading {self.describe(name)}", run, name=name)

    def read_record_bytes(self, name: str, limit: int) -> bytes:
        """The content of a stored record in one request (no metadata read first), refused (RecordError) as
        soon as more than ``limit`` bytes arrive: see :meth:`read_versioned`."""
        return self.read_versioned(name, limit)[0]

    def read_versioned(self, name: str, limit: int) -> tuple[bytes, int]:
        """A record's content and its generation from one request: the download's answer carries the
        generation (``x-goog-generation``, which the library puts on the blob), so the bytes and the
        generation are of one object version. The body is taken in blocks into a sink that refuses more than
        ``limit`` bytes (RecordError: a huge object planted under a record's name is never pulled into
        memory); the CRC32C is checked when the whole object is read."""
        blob = self.bucket.blob(self._key(name))

        def run() -> tuple[bytes, int]:
            sink = _BoundedSink(limit, self.describe(name))
            blob.download_to_file(sink, checksum="auto", retry=self.retry)
            return sink.getvalue(), int(blob.generation or 0)

        return self._call(f"reading {self.describe(name)}", run, name=name)

    def list_named(self, names: Sequence[str]) -> ObjectList:
        """The objects called one of ``names`` at the root or one folder below it, in one listing (all pages)
        with a ``matchGlob`` (cloud.google.com/storage/docs/json_api/v1/objects/list#list-objects-and-prefixes-
        using-glob): Cloud Storage leaves the checkpoints' and logs' objects out of the pages. The names are
        checked here too (fake-gcs-server 1.54 ignores the glob and lists everything)."""
        key_prefix = self.prefix + "/" if self.prefix else ""
        wanted = set(names)
        glob = key_prefix + "**{" + ",".join(sorted(wanted)) + "}"

        def run() -> ObjectList:
            blobs = self.client.list_blobs(
                self.bucket_name, prefix=key_prefix or None, match_glob=glob, fields=_NAMED_FIELDS, retry=self.retry
            )
            found = []
            for blob in blobs:
                name = self._name(blob.name)
                if name.count("/") <= 1 and name.rsplit("/", 1)[-1] in wanted and not is_internal(name):
                    found.append(self._info(blob, with_time=False))
            return sorted(found, key=lambda o: o.name)

        return self._call(f"listing {self.describe()}", run)

    def write_bytes(self, name: str, data: bytes, *, if_generation_match: int | None = None) -> ObjectInfo:
        """Upload ``data`` in one request; with ``if_generation_match`` as a GCS precondition.

        A retry never writes blindly (see :meth:`_writer`): it first reads the object, and if the object
        already holds ``data`` (the previous attempt landed, its answer lost) that is the result; otherwise
        the retry carries a generation precondition, so that it never overwrites a write it has not seen.
        """
        attempt = self._writer(name, data, None, len(data), if_generation_match)
        retried: Callable[[], ObjectInfo] = self.retry(attempt)
        return self._call(f"writing {self.describe(name)}", retried, name=name)

    def _landed(self, name: str, crc: str, size: int) -> ObjectInfo | None:
        """The object's metadata when it holds exactly the bytes of CRC32C ``crc`` and ``size`` (a write of
        those bytes has landed), else None."""
        blob = self.bucket.get_blob(self._key(name), retry=self.retry)
        if blob is not None and blob.crc32c == crc and int(blob.size or 0) == size:
            return self._info(blob)
        return None

    def _retry_precondition(
        self, name: str, crc: str, size: int, wanted: int | None
    ) -> tuple[ObjectInfo | None, int | None]:
        """Before retrying a write whose previous attempt may have landed (its answer lost): read the object.

        Returns (its metadata, None) when it already holds the bytes being written: the write is done, a
        second one would only add a generation (or fail its own precondition). Otherwise (None, the
        precondition for the retry): the caller's ``wanted``, else the generation just read (0: the object
        must still be absent), so a retry never overwrites a write it has not seen.
        """
        blob = self.bucket.get_blob(self._key(name), retry=self.retry)
        if blob is not None and blob.crc32c == crc and int(blob.size or 0) == size:
            return self._info(blob), None
        if wanted is not None:
            return None, wanted
        return None, int(blob.generation or 0) if blob is not None else 0

    def upload_files(self, pairs: Sequence[tuple[Path, str]], *, progress: Progress | None = None) -> ObjectList:
        """Upload files in threads, retrying failed ones: small files one request each
        (:meth:`_upload_simple`), files of at least ``large_file_bytes`` one at a time in concurrent parts
        with ``upload_chunks_concurrently`` (or streamed in one request each, see ``chunked_uploads``).

        Each stored object's CRC32C (computed by the server) must equal the local file's: a mismatch
        means the file changed during the upload, and the object reflects the bytes actually sent.
        """
        uploads = _Uploads(pairs, [_size(p) for p, _ in pairs], progress)
        pending = list(range(len(pairs)))
        attempt = 0
        # a round whose failures are all transient is tried again (the rest only), twice at most, after a
        # pause that doubles: the library already retried each request within the round
        pauses = Backoff(self.retry_initial_s, 2 * self.retry_initial_s).pauses()
        while pending:
            failed = self._upload_round(uploads, pending)
            pending = [i for i, _ in failed]
            if failed:
                attempt += 1
                i, exc = failed[0]
                name = pairs[i][1]
                err = _translate(exc, self, f"uploading {pairs[i][0]} to {self.describe(name)}", name)
                if isinstance(exc, FileNotFoundError):
                    err = NotFoundError(f"local file {pairs[i][0]} does not exist (uploading to {self.describe(name)})")
                # Only transient failures deserve another round; the library retried each already.
                if attempt >= 3 or isinstance(err, AuthError | NotFoundError) or not _transient(exc):
                    raise err from exc
                sleep_until(None, next(pauses))
        return [r for r in uploads.results if r is not None]

    def _upload_round(self, uploads: _Uploads, pending: builtins.list[int]) -> builtins.list[_Failed]:
        """Upload files ``pending`` once; the ones that failed, with their errors.

        Small files go in batches (progress between them, the pool stays full); large ones go in a call of
        their own, alongside, so that a batch never waits for a large file to finish."""
        sizes = uploads.sizes
        failed: builtins.list[_Failed] = []
        batch_len = self.max_workers * 4
        large = [i for i in pending if sizes[i] >= self.large_file_bytes]
        small = [i for i in pending if sizes[i] < self.large_file_bytes]
        large_done: builtins.list[_Uploaded] = []
        large_thread = None
        if large:
            large_thread = threading.Thread(
                target=self._upload_large,
                args=(uploads, large, large_done),
                name="rlcloud-upload-large",
                daemon=True,
            )
            large_thread.start()
        for lo in range(0, len(small), batch_len):
            failed += uploads.record(self._upload_batch(uploads, small[lo : lo + batch_len], self.max_workers))
        if large_thread is not None:
            large_thread.join()
            failed += uploads.record(large_done)
        if large and len(large_done) != len(large):  # the thread died: an unexpected error
            raise StorageError(f"uploading {len(large)} large files to {self.url} failed unexpectedly")
        return failed

    def _upload_batch(self, uploads: _Uploads, batch: builtins.list[int], workers: int) -> builtins.list[_Uploaded]:
        """Upload files ``batch`` one request each (:meth:`_upload_simple`), ``workers`` at a time."""
        from concurrent.futures import ThreadPoolExecutor

        def upload_one(i: int) -> _Uploaded:
            try:
                return i, self._upload_simple(uploads.pairs[i][0], uploads.pairs[i][1], uploads.sizes[i])
            except Exception as exc:
                return i, exc

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rlcloud-upload") as pool:
            return list(pool.map(upload_one, batch))

    def _upload_large(self, uploads: _Uploads, batch: builtins.list[int], out: builtins.list[_Uploaded]) -> None:
        """Upload large files ``batch`` into ``out``: one chunked upload at a time (each already keeps its parts
        in flight concurrently), then the ones the endpoint cannot take in parts, streamed."""
        resumable = []
        for i in batch:
            if not self._chunked_wanted(uploads.sizes[i]):
                resumable.append(i)
                continue
            path, name = uploads.pairs[i]
            blob = self.bucket.blob(self._key(name))
            try:
                chunked = self._upload_chunked(path, name, blob, uploads.sizes[i])
            except Exception as exc:
                out.append((i, exc))
                continue
            if chunked:
                out.append((i, self._info(blob)))
            else:
                resumable.append(i)
        if resumable:
            out.extend(self._upload_batch(uploads, resumable, min(len(resumable), self.max_workers)))

    def _upload_simple(self, path: Path, name: str, size: int) -> ObjectInfo:
        """Upload one file with the library's public upload calls (retried here, see :meth:`_write`), and
        return the stored object as the upload's answer describes it: no second request for its metadata.

        A file smaller than ``large_file_bytes`` is read whole and sent in one request; a larger one (where
        the endpoint offers no XML multipart upload) is streamed from disk, its first ``size`` bytes. Either
        way the library checks the stored CRC32C against that of the bytes sent (``DataCorruption``).
        """
        with open(path, "rb") as fh:
            data = fh.read() if size < self.large_file_bytes else None
            retried: Callable[[], ObjectInfo] = self.retry(self._writer(name, data, fh, size))
            return self._call(f"uploading {path} to {self.describe(name)}", retried, name=name)

    def _writer(
        self, name: str, data: bytes | None, fh: Any, size: int, if_generation_match: int | None = None
    ) -> Callable[[], ObjectInfo]:
        """One attempt of a write of ``data`` (or of the first ``size`` bytes of the open file ``fh``), to be
        called again by a retry. A retry never writes blindly: it first reads the object, and if the object
        already holds these bytes (the previous attempt landed, its answer lost) that is the result;
        otherwise it carries a generation precondition (the caller's, else the generation it read, 0 when
        absent), so that it never overwrites a write it has not seen."""
        import google_crc32c
        from google.api_core import exceptions as gexc

        blob = self.bucket.blob(self._key(name))
        attempts = 0
        crc = ""

        def checksum() -> str:
            return _b64_crc(google_crc32c.value(data) if data is not None else _file_crc(fh, size))

        def attempt() -> ObjectInfo:
            nonlocal attempts, crc
            attempts += 1
            precondition = if_generation_match
            if attempts > 1:
                crc = crc or checksum()
                landed, precondition = self._retry_precondition(name, crc, size, if_generation_match)
                if landed is not None:
                    return landed
            try:
                if data is not None:
                    blob.upload_from_string(
                        data,
                        content_type=_content_type(name),
                        if_generation_match=precondition,
                        checksum="crc32c",
                        retry=None,
                    )
                else:
                    fh.seek(0)
                    blob.upload_from_file(
                        fh,
                        size=size,
                        content_type=_content_type(name),
                        if_generation_match=precondition,
                        checksum="crc32c",
                        retry=None,
                    )
            except gexc.PreconditionFailed:
                # written in between: by our lost attempt (the same bytes: done), else by another writer
                landed = self._landed(name, crc or checksum(), size) if attempts > 1 else None
                if landed is None:
                    raise
                return landed
            return self._info(blob)

        return attempt

    def _chunked_wanted(self, size: int) -> bool:
        if size <= 0:  # an XML multipart upload needs at least one part
            return False
        if self.chunked_uploads is not None:
            return self.chunked_uploads
        return self._chunked.offered is not False

    def _upload_chunked(self, path: Path, name: str, blob: Any, size: int) -> bool:
        """Upload one file as an XML multipart upload, then read its metadata back (one GET) so that
        ``blob`` carries the stored size, CRC32C and generation. False, having uploaded nothing, when the
        endpoint does not offer the API (and ``chunked_uploads`` is None). Raises what the upload raised;
        the library has aborted the failed upload by then (its parts are deleted), or tried to: a failed
        abort is logged, and the failure that caused it is raised.
        """
        from google.cloud.storage import transfer_manager as tm

        # Large enough parts to stay within GCS's 10,000 parts, whatever the file's size.
        chunk = max(self.chunk_bytes, -(-size // _MAX_PARTS))
        try:
            tm.upload_chunks_concurrently(
                str(path),
                blob,
                chunk_size=chunk,
                worker_type=tm.THREAD,
                max_workers=min(self.max_workers, _PART_WORKERS),
                # Each part is checksummed (crc32c with the C extension, else md5) and checked by the
                # server; the whole object's CRC32C is compared by the caller, from the reload below.
                checksum="auto",
                retry=self.retry,
            )
        except Exception as exc:
            if _mpu_not_offered(exc):
                if self.chunked_uploads:
                    raise StorageError(
                        f"uploading {path} to {self.describe(name)}: the endpoint does not offer XML multipart "
                        f"uploads (chunked_uploads=True); leave chunked_uploads unset to fall back to "
                        f"single-request uploads"
                    ) from exc
                self._chunked.not_offered(self.url)
                return False
            original = _before_abort(exc)
            if original is not exc:
                # The abort itself failed: report the failure that caused it, and say what is left behind.
                logger.warning(
                    "could not abort the failed multipart upload of %s (%s: %s); its parts stay stored until "
                    "a bucket lifecycle rule (AbortIncompleteMultipartUpload) removes them",
                    self.describe(name),
                    type(exc).__name__,
                    _message(exc),
                )
                raise original from None
            raise
        self._chunked.seen_offered()
        blob.reload(retry=self.retry)
        return True

    def download_files(self, items: Sequence[tuple[ObjectInfo, Path]], *, progress: Progress | None = None) -> None:
        """Download objects concurrently (ranged reads for large ones), each to a temporary file that is
        CRC32C-checked against the listing and then renamed into place."""
        from google.cloud.storage import transfer_manager as tm

        total = sum(info.size for info, _ in items)
        done = 0
        small = [(info, Path(dst)) for info, dst in items if info.size < self.large_file_bytes]
        large = [(info, Path(dst)) for info, dst in items if info.size >= self.large_file_bytes]
        batch_len = self.max_workers * 4

        def finish(info: ObjectInfo, tmp: Path, dst: Path) -> None:
            got = crc32c_of_file(tmp)
            if got != info.crc32c:
                now = self.stat(info.name)  # rewritten since listed? accept the newer, consistent copy
                if now is None or now.crc32c != got:
                    tmp.unlink(missing_ok=True)
                    raise StorageError(
                        f"checksum mismatch downloading {self.describe(info.name)} to {dst}: "
                        f"expected crc32c {info.crc32c}, got {got}"
                    )
            os.replace(tmp, dst)

        for lo in range(0, len(small), batch_len):
            batch = small[lo : lo + batch_len]
            tmps = [_tmp_path(dst) for _, dst in batch]
            blobs = [self.bucket.blob(self._key(info.name)) for info, _ in batch]
            try:
                outcome = tm.download_many(
                    [(b, str(t)) for b, t in zip(blobs, tmps, strict=True)],
                    download_kwargs={"retry": self.retry, "checksum": "auto"},
                    worker_type=tm.THREAD,
                    max_workers=self.max_workers,
                    raise_exception=False,
                )
                for (info, dst), tmp, res in zip(batch, tmps, outcome, strict=True):
                    if isinstance(res, BaseException):
                        # One more plain attempt: transfer_manager already used the library's retries.
                        self._download_one(info, tmp, first_error=res)
                    finish(info, tmp, dst)
                    done += info.size
            finally:
                for tmp in tmps:
                    tmp.unlink(missing_ok=True)
            if progress:
                progress(done, total)

        for info, dst in large:
            tmp = _tmp_path(dst)
            try:
                self._download_large(info, tmp, dst)
                finish(info, tmp, dst)
            finally:
                tmp.unlink(missing_ok=True)
            done += info.size
            if progress:
                progress(done, total)

    def _download_large(self, info: ObjectInfo, tmp: Path, dst: Path) -> None:
        from google.cloud.storage import transfer_manager as tm

        blob = self.bucket.blob(self._key(info.name))

        def run() -> None:
            tm.download_chunks_concurrently(
                blob,
                str(tmp),
                chunk_size=8 << 20,
                download_kwargs={"retry": self.retry},
                worker_type=tm.THREAD,
                max_workers=self.max_workers,
                crc32c_checksum=True,
            )

        self._call(f"downloading {self.describe(info.name)} to {dst}", run, name=info.name)

    def _download_one(self, info: ObjectInfo, tmp: Path, *, first_error: BaseException) -> None:
        err = _translate(first_error, self, f"downloading {self.describe(info.name)}", info.name)
        if isinstance(err, AuthError | NotFoundError) or not _transient(first_error):
            raise err from first_error
        blob = self.bucket.blob(self._key(info.name))
        self._call(
            f"downloading {self.describe(info.name)}",
            lambda: blob.download_to_filename(str(tmp), checksum="auto", retry=self.retry),
            name=info.name,
        )

    def delete(self, name: str) -> None:
        """Delete the object; a missing one is fine."""
        from google.api_core import exceptions as gexc

        blob = self.bucket.blob(self._key(name))

        def run() -> None:
            with contextlib.suppress(gexc.NotFound):
                blob.delete(retry=self.retry)

        self._call(f"deleting {self.describe(name)}", run, name=name)

    def delete_many(self, names: Sequence[str]) -> None:
        """Delete objects concurrently (missing ones are fine)."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
            list(pool.map(self.delete, names))


# -- helpers -------------------------------------------------------------------------------------


def _content_type(name: str) -> str:
    if name.endswith((".json", ".jsonl")):
        return "application/json"
    if name.endswith((".txt", ".log", ".yaml")) or name.rsplit("/", 1)[-1] == LATEST.rsplit("/", 1)[-1]:
        return "text/plain"
    return "application/octet-stream"


class _BoundedSink:
    """A file-like sink for a download that refuses (RecordError) more than ``limit`` bytes."""

    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        self.what = what
        self.parts: builtins.list[bytes] = []
        self.size = 0

    def write(self, data: bytes) -> int:
        from rlcloud.errors import RecordError

        self.size += len(data)
        if self.size > self.limit:
            raise RecordError(f"{self.what}: more than the {self.limit} bytes a record of its kind holds; not read")
        self.parts.append(bytes(data))
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:  # a retried download starts again from its start
        if offset == 0 and whence == 0:
            self.parts, self.size = [], 0
        return self.size

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        """Nothing is buffered."""

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


def _file_crc(fh: Any, size: int) -> int:
    """The CRC32C of the first ``size`` bytes of an open file (read in blocks)."""
    import google_crc32c

    fh.seek(0)
    crc, left = 0, size
    while left > 0:
        chunk = fh.read(min(_STREAM_BLOCK, left))
        if not chunk:
            break
        crc = google_crc32c.extend(crc, chunk)
        left -= len(chunk)
    return crc


def _b64_crc(crc: int) -> str:
    return base64.b64encode(crc.to_bytes(4, "big")).decode("ascii")


def _tmp_path(dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    return tmp_sibling(dst)


def _size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
