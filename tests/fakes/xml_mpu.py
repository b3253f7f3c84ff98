"""XmlMpuServer: the XML API multipart upload (XML MPU) that fake-gcs-server lacks, in front of one.

A :class:`~tests.fakes.faulty_proxy.FaultyProxy` (so it records every request and can inject the same
faults) that answers the subset of the XML MPU API ``google.cloud.storage.transfer_manager.
upload_chunks_concurrently`` uses, as GCS does (https://cloud.google.com/storage/docs/multipart-uploads):

- initiate ``POST /<bucket>/<object>?uploads`` -> 200, ``InitiateMultipartUploadResult`` with an
  ``UploadId`` (in the S3 namespace the library looks it up in); 404 ``NoSuchBucket`` for a missing bucket;
- part ``PUT /<bucket>/<object>?partNumber=N&uploadId=ID`` -> 200 with an ``ETag`` and an
  ``X-Goog-Hash`` (crc32c and md5 of the part, which the library checks); a part whose ``X-Goog-Hash``
  does not match its bytes -> 400 ``BadDigest``;
- complete ``POST /<bucket>/<object>?uploadId=ID`` with a ``CompleteMultipartUpload`` body -> the parts
  concatenated in part order and stored in the fake server through its JSON API (a media upload), 200
  ``CompleteMultipartUploadResult``; parts not ascending, unknown or with a wrong ETag -> 400, a part other
  than the last under ``min_part_bytes`` -> 400 ``EntityTooSmall`` (GCS: 5 MiB, the default here);
- abort ``DELETE /<bucket>/<object>?uploadId=ID`` -> 204.

Every other request is forwarded unchanged to the fake server. ``fail_part(n, status)`` answers the n-th
part PUT (counting every part PUT this server sees, retries included) with ``status`` (400 as
``BadDigest``, a checksum mismatch; 403 as ``AccessDenied``); ``deny`` and ``rule`` of the proxy apply to
XML MPU requests too (403, or the ``"503"`` / ``"reset-before"`` faults). ``in_progress`` is the set of
upload ids neither completed nor aborted.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import struct
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any
from xml.etree import ElementTree
from xml.sax.saxutils import escape

import google_crc32c

from tests.fakes.faulty_proxy import FaultyProxy, RequestRecord, _Handler

__all__ = ["MIN_PART_BYTES", "XmlMpuServer"]

MIN_PART_BYTES = 5 << 20  # GCS: every part but the last must be at least 5 MiB
_S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
_JSON_PREFIXES = ("/storage/", "/upload/", "/download/")


@dataclass
class _Upload:
    bucket: str
    name: str
    content_type: str
    parts: dict[int, tuple[str, bytes]] = field(default_factory=dict)  # number -> (etag, data)


class XmlMpuServer(FaultyProxy):
    """A threaded loopback server: XML MPU handled here, everything else forwarded to ``upstream``."""

    def __init__(self, upstream: str, *, min_part_bytes: int = MIN_PART_BYTES, **kwargs: Any) -> None:
        super().__init__(upstream, **kwargs)
        self.min_part_bytes = min_part_bytes
        self._uploads: dict[str, _Upload] = {}
        self.completed: list[str] = []
        self.aborted: list[str] = []
        self._part_puts = 0
        self._part_failures: dict[int, int] = {}

    def _handler_class(self) -> type[_Handler]:
        return _MpuHandler

    def fail_part(self, nth: int, status: int = 503) -> None:
        """Answer the ``nth`` part PUT from now on (1 = the next one; retries count) with ``status``."""
        with self._lock:
            self._part_failures[self._part_puts + nth] = status

    @property
    def in_progress(self) -> set[str]:
        """Upload ids initiated and neither completed nor aborted."""
        with self._lock:
            return set(self._uploads)

    def mpu_records(self, kind: str) -> list[RequestRecord]:
        """Requests of one kind: ``"initiate"``, ``"part"``, ``"complete"``, ``"abort"`` or ``"resumable"``
        (the start of a JSON API resumable upload, the path large files take without XML MPU)."""
        return [r for r in self.snapshot() if _kind(r.method, r.path, r.query) == kind]

    def _next_part_failure(self) -> int | None:
        with self._lock:
            self._part_puts += 1
            return self._part_failures.pop(self._part_puts, None)


def _kind(method: str, path: str, query: str) -> str | None:
    if method == "POST" and path.startswith("/upload/") and "uploadType=resumable" in query:
        return "resumable"
    if path.startswith(_JSON_PREFIXES) or path.count("/") < 2:
        return None
    params = urllib.parse.parse_qs(query, keep_blank_values=True)
    if method == "POST" and "uploads" in params:
        return "initiate"
    if method == "PUT" and "uploadId" in params and "partNumber" in params:
        return "part"
    if method == "POST" and "uploadId" in params:
        return "complete"
    if method == "DELETE" and "uploadId" in params:
        return "abort"
    return None


def _b64_crc32c(data: bytes) -> str:
    return base64.b64encode(struct.pack(">I", google_crc32c.value(data))).decode()


def _b64_md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


class _MpuHandler(_Handler):
    # Headers and body go out in separate writes: without this each answer waits for a delayed ACK.
    disable_nagle_algorithm = True
    owner: XmlMpuServer

    def _handle_any(self) -> None:
        split = urllib.parse.urlsplit(self.path)
        kind = _kind(self.command, split.path, split.query)
        if kind in (None, "resumable"):
            self._handle()  # forwarded unchanged (with the proxy's faults, if any)
            return
        body = self._read_body()
        owner = self.owner
        status, fault = 0, None
        if owner.deny is not None and owner.deny(self.command, split.path):
            status = 403
        if kind == "part":
            status = owner._next_part_failure() or status
        if not status and owner.rule is not None:
            fault = owner.rule(self.command, split.path, split.query)
            if fault == "reset-before":
                owner._record(RequestRecord(self.command, split.path, split.query, fault, None))
                self._reset()
                return
            status = 503 if fault == "503" else 0
        if status:
            owner._record(RequestRecord(self.command, split.path, split.query, fault or f"injected-{status}", status))
            code = {400: "BadDigest", 403: "AccessDenied", 503: "ServiceUnavailable"}.get(status, "InternalError")
            self._xml_error(status, code, f"injected {status}")
            return
        bucket, _, quoted = split.path.lstrip("/").partition("/")
        name = urllib.parse.unquote(quoted)
        params = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        upload_id = params.get("uploadId", [""])[0]
        handler = {"initiate": self._initiate, "part": self._part, "complete": self._complete, "abort": self._abort}
        status = handler[kind](bucket, name, upload_id, params, body)
        owner._record(RequestRecord(self.command, split.path, split.query, None, status))

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle_any

    # -- the four calls; each answers and returns the status it sent ---------------------------------

    def _initiate(self, bucket: str, name: str, _id: str, _params: dict[str, list[str]], _body: bytes) -> int:
        status, _, _ = self._upstream_request("GET", f"/storage/v1/b/{urllib.parse.quote(bucket, safe='')}")
        if status == 404:
            return self._xml_error(404, "NoSuchBucket", "The specified bucket does not exist.")
        upload_id = uuid.uuid4().hex
        content_type = self.headers.get("Content-Type") or "application/octet-stream"
        with self.owner._lock:
            self.owner._uploads[upload_id] = _Upload(bucket, name, content_type)
        return self._xml(
            200,
            f'<InitiateMultipartUploadResult xmlns="{_S3_NS}"><Bucket>{escape(bucket)}</Bucket>'
            f"<Key>{escape(name)}</Key><UploadId>{upload_id}</UploadId></InitiateMultipartUploadResult>",
        )

    def _part(self, _bucket: str, _name: str, upload_id: str, params: dict[str, list[str]], body: bytes) -> int:
        number = int(params["partNumber"][0])
        crc, md5 = _b64_crc32c(body), _b64_md5(body)
        for claim in (self.headers.get("X-Goog-Hash") or "").split(","):
            label, _, value = claim.strip().partition("=")
            if (label, value) not in (("crc32c", crc), ("md5", md5)) and label in ("crc32c", "md5"):
                return self._xml_error(400, "BadDigest", "The digest you specified did not match the content.")
        etag = f'"{hashlib.md5(body).hexdigest()}"'
        with self.owner._lock:
            upload = self.owner._uploads.get(upload_id)
            if upload is not None:
                upload.parts[number] = (etag, body)
        if upload is None:
            return self._xml_error(404, "NoSuchUpload", "The requested upload was not found.")
        return self._send_simple(200, b"", [("ETag", etag), ("X-Goog-Hash", f"crc32c={crc},md5={md5}")])

    def _complete(self, bucket: str, name: str, upload_id: str, _params: dict[str, list[str]], body: bytes) -> int:
        with self.owner._lock:
            upload = self.owner._uploads.get(upload_id)
        if upload is None:
            return self._xml_error(404, "NoSuchUpload", "The requested upload was not found.")
        try:
            listed = [
                (int(p.findtext("PartNumber") or ""), p.findtext("ETag") or "")
                for p in ElementTree.fromstring(body).iter("Part")
            ]
        except (ElementTree.ParseError, ValueError):
            return self._xml_error(400, "MalformedXML", "The XML you provided was not well-formed.")
        numbers = [n for n, _ in listed]
        if not listed or numbers != sorted(set(numbers)):
            return self._xml_error(400, "InvalidPartOrder", "The list of parts was not in ascending order.")
        chunks = []
        for k, (number, etag) in enumerate(listed):
            have = upload.parts.get(number)
            if have is None or have[0] != etag:
                return self._xml_error(400, "InvalidPart", f"Part {number} was not uploaded or its ETag differs.")
            if k < len(listed) - 1 and len(have[1]) < self.owner.min_part_bytes:
                return self._xml_error(400, "EntityTooSmall", f"Part {number} is smaller than the minimum size.")
            chunks.append(have[1])
        query = urllib.parse.urlencode({"uploadType": "media", "name": upload.name})
        status, _, data = self._upstream_request(
            "POST",
            f"/upload/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o?{query}",
            b"".join(chunks),
            {"Content-Type": upload.content_type},
        )
        if status != 200:
            return self._xml_error(500, "InternalError", f"storing the object failed: {status} {data[:200]!r}")
        with self.owner._lock:
            self.owner._uploads.pop(upload_id, None)
            self.owner.completed.append(upload_id)
        etag = json.loads(data).get("etag", "")
        return self._xml(
            200,
            f'<CompleteMultipartUploadResult xmlns="{_S3_NS}"><Location>{escape(self.owner.url)}/{escape(bucket)}/'
            f"{escape(urllib.parse.quote(name, safe=''))}</Location><Bucket>{escape(bucket)}</Bucket>"
            f"<Key>{escape(name)}</Key><ETag>{escape(etag)}</ETag></CompleteMultipartUploadResult>",
        )

    def _abort(self, _bucket: str, _name: str, upload_id: str, _params: dict[str, list[str]], _body: bytes) -> int:
        with self.owner._lock:
            upload = self.owner._uploads.pop(upload_id, None)
            if upload is not None:
                self.owner.aborted.append(upload_id)
        if upload is None:
            return self._xml_error(404, "NoSuchUpload", "The requested upload was not found.")
        return self._send_simple(204, b"", [])

    # -- plumbing -------------------------------------------------------------------------------------

    def _upstream_request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        headers = {**(headers or {}), "Content-Length": str(len(body))}
        for attempt in range(2):
            conn = self._upstream()
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                return resp.status, resp.getheaders(), resp.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self._conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _send_simple(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> int:
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        if status != 204:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)
        return status

    def _xml(self, status: int, document: str) -> int:
        body = ("<?xml version='1.0' encoding='UTF-8'?>" + document).encode()
        return self._send_simple(status, body, [("Content-Type", "application/xml; charset=UTF-8")])

    def _xml_error(self, status: int, code: str, message: str) -> int:
        # The library reads Code, Message and Details of a 400 answer to a part upload.
        return self._xml(
            status,
            f"<Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
            f"<Details>{escape(message)}</Details></Error>",
        )
