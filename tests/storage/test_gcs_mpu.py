"""Large-file uploads as XML multipart uploads (``transfer_manager.upload_chunks_concurrently``), with
the real client library: through tests/fakes/xml_mpu.py (fake-gcs-server plus the XML MPU API) and,
for the fallback to resumable uploads, against plain fake-gcs-server."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rlcloud.errors import AuthError, StorageError
from rlcloud.storage import Syncer, download
from rlcloud.storage.base import crc32c_of_file
from rlcloud.storage.gcs import GcsStore
from tests.fakes.gcs import FakeGcsServer
from tests.fakes.xml_mpu import XmlMpuServer

MiB = 1 << 20


@pytest.fixture
def mpu_server(fake_gcs: FakeGcsServer) -> Iterator[Callable[..., XmlMpuServer]]:
    """Factory of started XmlMpuServer instances in front of the fake server (stopped after the test)."""
    started: list[XmlMpuServer] = []

    def make(**kwargs: Any) -> XmlMpuServer:
        server = XmlMpuServer(fake_gcs.url, **kwargs).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def small_store_via(gcs_store_via: Callable[..., Any]) -> Callable[..., GcsStore]:
    """A store through ``proxy`` whose files of 4 MiB and more are large, in 1 MiB parts (fast tests)."""

    def make(proxy: Any, bucket: str, **kwargs: Any) -> GcsStore:
        kwargs.setdefault("large_file_bytes", 4 * MiB)
        kwargs.setdefault("chunk_bytes", MiB)
        kwargs.setdefault("max_workers", 4)
        store: GcsStore = gcs_store_via(proxy, bucket, **kwargs)
        return store

    return make


def random_file(path: Path, size: int, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(random.Random(seed).randbytes(size))
    return path


def stored_bytes(fake_gcs: FakeGcsServer, bucket: str, key: str) -> bytes:
    """The object's content read from the fake server directly (not through any proxy)."""
    return bytes(fake_gcs.client().bucket(bucket).blob(key).download_as_bytes())


def test_large_file_goes_up_in_parts_with_the_production_defaults(
    mpu_server: Callable[..., XmlMpuServer],
    gcs_store_via: Callable[..., Any],
    fake_gcs: FakeGcsServer,
    gcs_bucket: str,
    tmp_path: Path,
) -> None:
    # Defaults: large from 32 MiB, 8 MiB parts; the server rejects parts under 5 MiB (but the last) as GCS does.
    server = mpu_server()
    store: GcsStore = gcs_store_via(server, gcs_bucket)
    src = random_file(tmp_path / "model.bin", 40 * MiB + 12345)
    seen: list[tuple[int, int]] = []

    [info] = store.upload_files([(src, "ckpt/model.bin")], progress=lambda done, total: seen.append((done, total)))

    assert info.name == "ckpt/model.bin" and info.size == src.stat().st_size
    assert info.crc32c == crc32c_of_file(src)
    assert info.generation > 0
    assert len(server.mpu_records("initiate")) == 1
    assert len(server.mpu_records("part")) == 6  # ceil(40.01 MiB / 8 MiB)
    assert len(server.mpu_records("complete")) == 1
    assert server.mpu_records("resumable") == [] and server.uploads == 0  # no JSON API upload at all
    assert server.in_progress == set() and server.aborted == []
    assert stored_bytes(fake_gcs, gcs_bucket, "exp/ckpt/model.bin") == src.read_bytes()
    assert seen[-1] == (src.stat().st_size, src.stat().st_size)


def test_without_xml_mpu_large_files_fall_back_once_per_store(
    faulty_proxy: Callable[..., Any],
    small_store_via: Callable[..., GcsStore],
    fake_gcs: FakeGcsServer,
    gcs_bucket: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    proxy = faulty_proxy()  # plain fake-gcs-server behind it: POST ...?uploads is answered 404
    store = small_store_via(proxy, gcs_bucket)
    # Over 8 MiB the library's public upload_from_file goes resumable: an initiation and one PUT of the
    # file streamed from disk (the chunk size is the library's 100 MiB default).
    first = random_file(tmp_path / "a.bin", 9 * MiB, seed=1)
    second = random_file(tmp_path / "b.bin", 5 * MiB, seed=2)
    third = random_file(tmp_path / "c.bin", 4 * MiB, seed=3)

    def initiations() -> int:
        return sum(r.method == "POST" and r.query == "uploads" for r in proxy.snapshot())

    def json_uploads() -> int:
        return sum(r.is_upload for r in proxy.snapshot())

    with caplog.at_level(logging.DEBUG, logger="rlcloud.storage.gcs"):
        [a] = store.upload_files([(first, "a.bin")])
        assert initiations() == 1
        assert "uploadType=resumable" in next(r.query for r in proxy.snapshot() if r.is_upload)
        assert len([r for r in proxy.snapshot() if r.method == "PUT"]) == 1  # the file in one PUT
        uploads = json_uploads()
        [b] = store.upload_files([(second, "b.bin")])
        assert initiations() == 1 and json_uploads() > uploads  # no second attempt at an XML upload
        [c] = store.child("sub").upload_files([(third, "c.bin")])
        assert initiations() == 1  # a child store shares what was learned

    assert len([m for m in caplog.messages if "does not offer XML multipart" in m]) == 1
    for info, src, key in [(a, first, "exp/a.bin"), (b, second, "exp/b.bin"), (c, third, "exp/sub/c.bin")]:
        assert info.crc32c == crc32c_of_file(src)
        assert stored_bytes(fake_gcs, gcs_bucket, key) == src.read_bytes()

    # A fresh store finds out again (the flag belongs to the store family, not the process).
    other = small_store_via(proxy, gcs_bucket)
    other.upload_files([(first, "a2.bin")])
    assert initiations() == 2


def test_chunked_uploads_true_surfaces_a_missing_api_and_false_never_tries(
    faulty_proxy: Callable[..., Any],
    mpu_server: Callable[..., XmlMpuServer],
    small_store_via: Callable[..., GcsStore],
    gcs_bucket: str,
    tmp_path: Path,
) -> None:
    src = random_file(tmp_path / "a.bin", 5 * MiB)
    forced = small_store_via(faulty_proxy(), gcs_bucket, chunked_uploads=True)
    with pytest.raises(StorageError, match=r"does not offer XML multipart uploads") as caught:
        forced.upload_files([(src, "a.bin")])
    assert f"gs://{gcs_bucket}/exp/a.bin" in str(caught.value)

    server = mpu_server()
    never = small_store_via(server, gcs_bucket, chunked_uploads=False)
    [info] = never.upload_files([(src, "a.bin")])
    assert info.crc32c == crc32c_of_file(src)
    assert server.mpu_records("initiate") == [] and server.uploads == 1  # one JSON API upload


def test_a_503_on_one_part_is_retried_and_the_upload_completes(
    mpu_server: Callable[..., XmlMpuServer],
    small_store_via: Callable[..., GcsStore],
    fake_gcs: FakeGcsServer,
    gcs_bucket: str,
    tmp_path: Path,
) -> None:
    server = mpu_server(min_part_bytes=MiB)
    store = small_store_via(server, gcs_bucket)
    src = random_file(tmp_path / "big.bin", 6 * MiB + 7)
    server.fail_part(3, 503)

    [info] = store.upload_files([(src, "big.bin")])

    parts = server.mpu_records("part")
    assert [r.status for r in parts].count(503) == 1
    assert len(parts) == 7 + 1  # 7 parts, one of them sent twice
    assert len(server.mpu_records("initiate")) == 1 and len(server.completed) == 1
    assert server.in_progress == set() and server.aborted == []
    assert info.crc32c == crc32c_of_file(src)
    assert stored_bytes(fake_gcs, gcs_bucket, "exp/big.bin") == src.read_bytes()


def test_a_denied_part_raises_auth_error_and_the_upload_is_aborted(
    mpu_server: Callable[..., XmlMpuServer],
    small_store_via: Callable[..., GcsStore],
    gcs_bucket: str,
    tmp_path: Path,
) -> None:
    server = mpu_server(min_part_bytes=MiB)
    store = small_store_via(server, gcs_bucket)
    src = random_file(tmp_path / "big.bin", 5 * MiB)
    server.fail_part(2, 403)

    with pytest.raises(AuthError) as caught:
        store.upload_files([(src, "ckpt/big.bin")])

    message = str(caught.value)
    assert f"gs://{gcs_bucket}/exp/ckpt/big.bin" in message and "roles/storage.objectAdmin" in message
    assert len(server.mpu_records("initiate")) == 1  # not retried: a denial is not transient
    assert len(server.aborted) == 1 and server.in_progress == set()
    assert server.completed == [] and store.stat("ckpt/big.bin") is None


def test_when_the_abort_fails_too_the_part_failure_is_what_surfaces(
    mpu_server: Callable[..., XmlMpuServer],
    small_store_via: Callable[..., GcsStore],
    gcs_bucket: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = mpu_server(min_part_bytes=MiB)
    store = small_store_via(server, gcs_bucket, retry_timeout_s=0.3)
    src = random_file(tmp_path / "big.bin", 4 * MiB)
    server.fail_part(1, 403)
    server.rule = lambda method, path, query: "503" if method == "DELETE" else None

    with caplog.at_level(logging.WARNING, logger="rlcloud.storage.gcs"), pytest.raises(AuthError):
        store.upload_files([(src, "big.bin")])  # the 403, not the abort's 503s (which would be retried)

    assert len(server.mpu_records("initiate")) == 1 and len(server.in_progress) == 1
    assert any("could not abort" in m and "AbortIncompleteMultipartUpload" in m for m in caplog.messages)


@pytest.mark.parametrize("abort_fails", [False, True])
def test_a_failed_upload_is_aborted_and_the_next_round_uploads_anew(
    abort_fails: bool,
    mpu_server: Callable[..., XmlMpuServer],
    small_store_via: Callable[..., GcsStore],
    fake_gcs: FakeGcsServer,
    gcs_bucket: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = mpu_server(min_part_bytes=MiB)
    store = small_store_via(server, gcs_bucket, retry_timeout_s=0.3)
    src = random_file(tmp_path / "big.bin", 4 * MiB + 1)
    # A checksum mismatch on a part (transient for upload_files, not retried by the library) fails the
    # first upload; with abort_fails, its abort is answered 503 until the library gives up (0.3 s).
    server.fail_part(2, 400)
    if abort_fails:
        server.rule = lambda method, path, query: "503" if method == "DELETE" else None

    with caplog.at_level(logging.WARNING, logger="rlcloud.storage.gcs"):
        [info] = store.upload_files([(src, "big.bin")])

    assert info.crc32c == crc32c_of_file(src)
    assert stored_bytes(fake_gcs, gcs_bucket, "exp/big.bin") == src.read_bytes()
    assert len(server.mpu_records("initiate")) == 2 and len(server.completed) == 1
    if abort_fails:
        # Left for the bucket's lifecycle rule, and said so.
        assert len(server.in_progress) == 1 and server.aborted == []
        assert any("could not abort" in m and "AbortIncompleteMultipartUpload" in m for m in caplog.messages)
    else:
        assert len(server.aborted) == 1 and server.in_progress == set()
        assert not any("could not abort" in m for m in caplog.messages)


def test_sync_round_trips_a_tree_with_a_large_file_through_xml_mpu(
    mpu_server: Callable[..., XmlMpuServer],
    small_store_via: Callable[..., GcsStore],
    gcs_bucket: str,
    tmp_path: Path,
) -> None:
    server = mpu_server(min_part_bytes=MiB)
    store = small_store_via(server, gcs_bucket)
    local = tmp_path / "work"
    tree = {f"summaries/events.{i}": random.Random(i).randbytes(1000 + i) for i in range(12)}
    tree["metrics.jsonl"] = b'{"episode": 1}\n' * 100
    tree["checkpoints/ckpt-1/model.data"] = random.Random(99).randbytes(6 * MiB + 3)
    for rel, data in tree.items():
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_bytes(data)
    (local / "checkpoints" / "LATEST").write_text("ckpt-1\n")

    report = Syncer(local, store).sync()

    assert report.published == "ckpt-1"
    assert len(server.mpu_records("part")) == 7 and len(server.completed) == 1
    assert server.mpu_records("resumable") == [] and server.in_progress == set()
    again = Syncer(local, store).sync()  # the stored CRC32Cs match the local files: nothing to upload
    assert again.uploaded == []

    dest = tmp_path / "copy"
    download(store, dest)
    for rel, data in tree.items():
        assert (dest / rel).read_bytes() == data, rel
    assert (dest / "checkpoints" / "LATEST").read_text().strip() == "ckpt-1"
