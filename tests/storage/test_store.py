"""The store interface: the directory store and the GCS store (against fake-gcs-server) behave alike."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rlcloud.errors import AuthError, NotFoundError, SpecError
from rlcloud.storage import PreconditionFailedError, open_store, parse_gs_url
from rlcloud.storage.base import crc32c_of_bytes, crc32c_of_file
from rlcloud.storage.local import LocalStore


def test_crc32c_matches_known_vector() -> None:
    # RFC 3720 test vector: CRC32C("123456789") = 0xE3069283
    assert crc32c_of_bytes(b"123456789") == "4waSgw=="


def test_bytes_round_trip_and_listing(store: Any) -> None:
    store.write_bytes("b/two.txt", b"second")
    store.write_text("a.json", '{"x": 1}')
    store.write_bytes("b/c/three.bin", bytes(range(256)))

    listing = store.list()
    assert [o.name for o in listing] == ["a.json", "b/c/three.bin", "b/two.txt"]
    assert {o.name: o.size for o in listing} == {"a.json": 8, "b/c/three.bin": 256, "b/two.txt": 6}
    assert listing[1].crc32c == crc32c_of_bytes(bytes(range(256)))
    assert [o.name for o in store.list("b/")] == ["b/c/three.bin", "b/two.txt"]
    assert [o.name for o in store.list("b/c")] == ["b/c/three.bin"]
    assert store.list("nothing/") == []

    assert store.read_bytes("b/two.txt") == b"second"
    assert store.read_bytes("b/two.txt", start=3) == b"ond"
    assert store.read_bytes("b/two.txt", start=6) == b""
    assert store.read_text("a.json") == '{"x": 1}'
    assert store.exists("a.json") and not store.exists("missing.json")
    info = store.stat("b/two.txt")
    assert info is not None and info.size == 6 and info.crc32c == crc32c_of_bytes(b"second")
    assert store.stat("missing") is None


def test_missing_object_is_not_found_naming_it(store: Any) -> None:
    with pytest.raises(NotFoundError, match=r"metrics\.jsonl"):
        store.read_bytes("metrics.jsonl")
    with pytest.raises(NotFoundError, match=r"metrics\.jsonl"):
        store.download_file("metrics.jsonl", "/tmp/never-written")


def test_delete_is_idempotent(store: Any) -> None:
    store.write_bytes("x/y", b"1")
    store.delete("x/y")
    store.delete("x/y")
    store.delete_many(["x/y", "never/there"])
    assert not store.exists("x/y")
    assert store.list() == []


def test_conditional_write_follows_generations(store: Any) -> None:
    first = store.write_text("checkpoints/LATEST", "ckpt-1", if_generation_match=0)
    with pytest.raises(PreconditionFailedError):
        store.write_text("checkpoints/LATEST", "ckpt-x", if_generation_match=0)
    second = store.write_text("checkpoints/LATEST", "ckpt-2", if_generation_match=first.generation)
    assert second.generation != first.generation
    with pytest.raises(PreconditionFailedError):  # a stale generation loses
        store.write_text("checkpoints/LATEST", "ckpt-y", if_generation_match=first.generation)
    assert store.read_text("checkpoints/LATEST") == "ckpt-2"
    stat = store.stat("checkpoints/LATEST")
    assert stat is not None and stat.generation == second.generation


def test_file_transfers_verify_and_report_progress(store: Any, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    payloads = {f"f{i}.bin": bytes([i]) * (1000 * i + 1) for i in range(12)}
    for name, data in payloads.items():
        (src / name).write_bytes(data)
    seen: list[tuple[int, int]] = []
    stored = store.upload_files([(src / n, f"up/{n}") for n in payloads], progress=lambda d, t: seen.append((d, t)))
    total = sum(len(d) for d in payloads.values())
    assert [o.name for o in stored] == [f"up/{n}" for n in payloads]
    assert all(o.crc32c == crc32c_of_bytes(payloads[o.name[3:]]) for o in stored)
    assert seen[-1] == (total, total)

    dest = tmp_path / "dest"
    listing = store.list("up/")
    store.download_files([(o, dest / o.name) for o in listing])
    for name, data in payloads.items():
        assert (dest / "up" / name).read_bytes() == data
    # nothing but the files themselves is left behind (temporaries are renamed into place)
    assert sorted(p.name for p in (dest / "up").iterdir()) == sorted(payloads)
    one = store.upload_file(src / "f3.bin", "single")
    assert one.crc32c == crc32c_of_file(src / "f3.bin")


def test_child_store_is_scoped(store: Any) -> None:
    exp = store.child("exp-a")
    exp.write_text("progress.json", "{}")
    assert [o.name for o in store.list()] == ["exp-a/progress.json"]
    assert [o.name for o in exp.list()] == ["progress.json"]
    assert exp.url.endswith("/exp-a")


@pytest.mark.parametrize(
    "url",
    ["gs://", "gs:///prefix", "gs://UPPER/x", "gs://ab", "gs://-bad-/x", "gs://bucket/a/../b", "gs://bu cket/x"],
)
def test_malformed_gs_url_names_it_and_the_valid_form(url: str) -> None:
    with pytest.raises(SpecError) as info:
        open_store(url)
    assert url in str(info.value)
    assert "gs://BUCKET[/PREFIX]" in str(info.value)
    assert info.value.fields[0] == "results"


def test_parse_and_other_schemes() -> None:
    assert parse_gs_url("gs://my-bucket/a/b/") == ("my-bucket", "a/b")
    assert parse_gs_url("gs://my.bucket_1") == ("my.bucket_1", "")
    with pytest.raises(SpecError, match="unsupported scheme 's3'"):
        open_store("s3://bucket/x")
    with pytest.raises(SpecError, match="absolute path"):
        open_store("file://relative/dir")
    assert isinstance(open_store("file:///tmp/x"), LocalStore)


def test_missing_bucket_is_not_found_naming_it(fake_gcs: Any, tmp_path: Path) -> None:
    from rlcloud.storage.gcs import GcsStore

    store = GcsStore("no-such-bucket-4242", "exp", client=fake_gcs.client(), retry_initial_s=0.01)
    with pytest.raises(NotFoundError, match="gs://no-such-bucket-4242"):
        store.list()
    with pytest.raises(NotFoundError, match="gs://no-such-bucket-4242"):
        store.write_text("x", "y")
    (tmp_path / "f").write_text("data")
    with pytest.raises(NotFoundError, match="gs://no-such-bucket-4242"):
        store.upload_files([(tmp_path / "f", "f")])
    with pytest.raises(NotFoundError, match="gs://no-such-bucket-4242"):
        store.read_bytes("metrics.jsonl")


def test_permission_denied_is_auth_error_naming_location_and_role(
    faulty_proxy: Any, gcs_store_via: Any, gcs_bucket: str, tmp_path: Path
) -> None:
    proxy = faulty_proxy(deny=lambda method, path: True)
    store = gcs_store_via(proxy, gcs_bucket, "denied")
    for call in (store.list, lambda: store.write_text("a", "b"), lambda: store.read_bytes("a")):
        with pytest.raises(AuthError) as info:
            call()
        message = str(info.value)
        assert f"gs://{gcs_bucket}" in message
        assert "roles/storage.objectAdmin" in message
    (tmp_path / "f").write_text("x")
    with pytest.raises(AuthError, match=r"roles/storage\.objectAdmin"):
        store.upload_files([(tmp_path / "f", "f")])


def test_emulator_host_gives_an_anonymous_client(
    fake_gcs: Any, gcs_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake_gcs.url)
    with open_store(f"gs://{gcs_bucket}/via-env") as store:
        store.write_text("hello.txt", "hi")
        assert store.read_text("hello.txt") == "hi"
        assert store.url == f"gs://{gcs_bucket}/via-env"


def test_missing_credentials_is_auth_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-key.json"))
    store = open_store("gs://some-bucket/exp")
    with pytest.raises(AuthError, match="gs://some-bucket/exp"):
        store.list()


def test_only_one_of_racing_conditional_writes_wins(store: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    first = store.write_text("checkpoints/LATEST", "ckpt-0", if_generation_match=0)

    def attempt(i: int) -> bool:
        try:
            store.write_text("checkpoints/LATEST", f"ckpt-{i}", if_generation_match=first.generation)
        except PreconditionFailedError:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        wins = [i for i, won in zip(range(1, 9), pool.map(attempt, range(1, 9)), strict=True) if won]
    assert len(wins) == 1
    assert store.read_text("checkpoints/LATEST") == f"ckpt-{wins[0]}"


# ------------------------------------------------------------------ process state never crosses a store

#: Variants of this machine's process state as another machine (or anyone with the bucket) may plant them.
PLANTED_STATE = [
    ".rlcloud-local/state.json",
    ".rlcloud-local/single-0.runner",
    ".rlcloud-sweep/state.json",
    "trial-1/.rlcloud-local/state.json",
    "logs/.rlcloud-local/x",
    ".rlcloud-anything",
]


def _plant(store: Any, name: str, data: bytes) -> None:
    """Write an object the way another tool would, bypassing the store's own name check."""
    if isinstance(store, LocalStore):
        path = store.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    else:
        store.bucket.blob(f"{store.prefix}/{name}").upload_from_string(data)


def test_process_state_is_never_listed_downloaded_or_written(store: Any, tmp_path: Path) -> None:
    from rlcloud.errors import StorageError
    from rlcloud.storage import download
    from rlcloud.storage.sync import restore_latest

    store.write_text("metrics.jsonl", '{"episode": 1}\n')
    store.write_text("logs/single-0.log", "hello\n")
    for name in PLANTED_STATE:
        _plant(store, name, b'{"roles": [{"role": "single", "index": 0, "pid": 1, "started": 0}]}')
    assert [o.name for o in store.list()] == ["logs/single-0.log", "metrics.jsonl"]
    assert store.list(".rlcloud-local/") == []
    for name in PLANTED_STATE:
        with pytest.raises(StorageError, match="process state"):
            store.read_bytes(name)
        with pytest.raises(StorageError, match="process state"):
            store.write_text(name, "{}")
        with pytest.raises(StorageError, match="process state"):
            store.stat(name)
    dest = tmp_path / "dest"
    report = download(store, dest)
    assert sorted(report.downloaded) == ["logs/single-0.log", "metrics.jsonl"]
    assert not list(dest.rglob(".rlcloud-*"))
    restored = tmp_path / "restored"
    restore_latest(store, restored)
    assert not list(restored.rglob(".rlcloud-*")) and (restored / "metrics.jsonl").exists()
    with pytest.raises(StorageError, match="process state"):
        store.child(".rlcloud-local")


# ------------------------------------------------------------- links in a results directory (issue 25)


def _links(root: Path, outside: Path) -> None:
    """A results directory shaped by someone else: links out of it, to a file, a directory, a device, a FIFO."""
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "single-0.log").write_text("ours\n")
    (root / "metrics.jsonl").symlink_to(outside / "secret.txt")
    (root / "evaluation.jsonl").symlink_to("/dev/zero")
    (root / "logs" / "agent-0.log").symlink_to(outside / "secret.txt")
    (root / "summaries").symlink_to(outside, target_is_directory=True)
    os.mkfifo(root / "progress.json")


def test_a_directory_store_never_follows_a_link_nor_reads_a_fifo(tmp_path: Path) -> None:
    from rlcloud.errors import StorageError
    from rlcloud.storage import download
    from rlcloud.storage.client import read_logs, read_metrics, read_progress

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET\n")
    store = LocalStore(tmp_path / "run")
    _links(store.root, outside)
    assert [o.name for o in store.list()] == ["logs/single-0.log"]
    for name in ("metrics.jsonl", "evaluation.jsonl", "logs/agent-0.log", "summaries/secret.txt", "progress.json"):
        assert store.stat(name) is None, name
        with pytest.raises((StorageError, NotFoundError)):
            store.read_bytes(name)
    assert read_metrics(store) == [] and read_progress(store) is None
    assert read_logs(store) == {"single-0": "ours\n"}
    dest = tmp_path / "dest"
    download(store, dest)
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == ["logs", "logs/single-0.log"]


def test_a_download_never_writes_through_a_link_in_its_destination(store: Any, tmp_path: Path) -> None:
    from rlcloud.errors import StorageError
    from rlcloud.storage import download

    store.write_text("metrics.jsonl", '{"episode": 1}\n')
    store.write_text("logs/single-0.log", "line\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "bashrc").write_text("mine\n")
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "metrics.jsonl").symlink_to(outside / "bashrc")  # replaced by the file, never written through
    download(store, dest, prefix="metrics")
    assert (outside / "bashrc").read_text() == "mine\n"
    assert not (dest / "metrics.jsonl").is_symlink() and (dest / "metrics.jsonl").read_text() == '{"episode": 1}\n'
    (dest / "logs").symlink_to(outside, target_is_directory=True)  # a directory leading out: refused
    with pytest.raises(StorageError, match="symbolic link"):
        download(store, dest)
    assert sorted(p.name for p in outside.iterdir()) == ["bashrc"]


def test_a_sync_never_uploads_what_a_link_points_to(store: Any, tmp_path: Path) -> None:
    from rlcloud.storage.sync import Syncer

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET\n")
    workdir = tmp_path / "work"
    _links(workdir, outside)
    Syncer(workdir, store).sync()
    assert [o.name for o in store.list()] == ["logs/single-0.log"]
