"""Incremental sync, checkpoint publication and restore, against fake-gcs-server (through the counting
proxy) and against a directory store."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from rlcloud.layout import LATEST
from rlcloud.storage import Syncer, restore_latest
from rlcloud.storage.base import crc32c_of_file
from rlcloud.storage.local import LocalStore
from rlcloud.storage.sync import SyncHook, read_latest

REPO = Path(__file__).resolve().parents[2]


def write_tree(root: Path, *, checkpoint: str = "ckpt-000000000100", files_per_ckpt: int = 4) -> dict[str, bytes]:
    """A results tree as the runner leaves it (plus its temporaries, which must not be synced)."""
    tree: dict[str, bytes] = {
        "spec.yaml": b"name: demo\nagent: {type: ppo}\n",
        "metrics.jsonl": b"".join(
            json.dumps({"episode": i, "timestep": 10 * i, "return": float(i)}).encode() + b"\n" for i in range(1, 30)
        ),
        "progress.json": json.dumps({"state": "running", "episode": 29, "checkpoint": checkpoint}).encode(),
        "summaries/rlcloud/events.out.tfevents.1.host": os.urandom(3000),
        "logs/single-0.log": b"line one\nline two\n",
    }
    tree.update(checkpoint_files(checkpoint, files_per_ckpt))
    for rel, data in tree.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "checkpoints" / "LATEST").write_text(checkpoint + "\n")
    # temporaries of the runner: a half-written checkpoint and an atomic-write tmp file
    (root / "checkpoints" / ".tmp-ckpt-000000000200-77").mkdir()
    (root / "checkpoints" / ".tmp-ckpt-000000000200-77" / "agent.json").write_text("{}")
    (root / ".progress.json.tmp-77").write_text("{}")
    return tree


def checkpoint_files(name: str, n: int) -> dict[str, bytes]:
    files = {f"checkpoints/{name}/agent-{i}.data": os.urandom(2000 + i) for i in range(n - 1)}
    files[f"checkpoints/{name}/state.json"] = json.dumps({"name": name, "episode": 29, "timestep": 290}).encode()
    return files


def stored_tree(store: Any) -> dict[str, bytes]:
    return {o.name: store.read_bytes(o.name) for o in store.list()}


@pytest.fixture(params=["gcs", "local"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, Any]:
    """(store, proxy or None): a GCS store behind a counting proxy, or a directory store."""
    if request.param == "local":
        return LocalStore(tmp_path / "store" / "exp"), None
    proxy = request.getfixturevalue("faulty_proxy")()
    bucket = request.getfixturevalue("gcs_bucket")
    return request.getfixturevalue("gcs_store_via")(proxy, bucket), proxy


def test_round_trip_no_change_change_and_new_checkpoint(target: tuple[Any, Any], tmp_path: Path) -> None:
    store, proxy = target
    local = tmp_path / "work"
    tree = write_tree(local)
    syncer = Syncer(local, store)

    first = syncer.sync()
    assert first.published == "ckpt-000000000100"
    assert sorted(first.uploaded) == sorted(tree)
    stored = stored_tree(store)
    assert stored.pop(LATEST) == b"ckpt-000000000100"
    assert stored == tree  # byte-identical, temporaries left out

    # a re-sync with no change: one listing call, nothing else
    if proxy:
        proxy.reset_counts()
    again = syncer.sync()
    assert again.uploaded == [] and again.published is None and again.deleted == []
    assert again.unchanged == len([k for k in tree if not k.startswith("checkpoints/")])
    if proxy:
        assert proxy.list_calls == 1
        assert proxy.uploads == 0
        assert len(proxy.snapshot()) == 1

    # one changed file is uploaded again, alone
    with open(local / "metrics.jsonl", "ab") as fh:
        fh.write(b'{"episode": 30, "timestep": 300, "return": 30.0}\n')
    if proxy:
        proxy.reset_counts()
    changed = syncer.sync()
    assert changed.uploaded == ["metrics.jsonl"]
    assert store.read_bytes("metrics.jsonl") == (local / "metrics.jsonl").read_bytes()
    if proxy:
        assert proxy.uploads == 1 and proxy.list_calls == 1

    # a new checkpoint: its files, then LATEST; the runner pruned the old one, so it goes from the store too
    new = "ckpt-000000000200"
    for rel, data in checkpoint_files(new, 3).items():
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_bytes(data)
    (local / "checkpoints" / "LATEST").write_text(new + "\n")
    for p in (local / "checkpoints" / "ckpt-000000000100").iterdir():
        p.unlink()
    (local / "checkpoints" / "ckpt-000000000100").rmdir()
    report = syncer.sync()
    assert report.published == new
    assert sorted(report.uploaded) == sorted(
        f"checkpoints/{new}/{f}" for f in ("agent-0.data", "agent-1.data", "state.json")
    )
    assert read_latest(store)[0] == new  # type: ignore[index]
    names = [o.name for o in store.list("checkpoints/")]
    assert not any("ckpt-000000000100" in n for n in names)
    assert sorted(report.deleted) == sorted(
        f"checkpoints/ckpt-000000000100/{n}" for n in ("agent-0.data", "agent-1.data", "agent-2.data", "state.json")
    )


def add_checkpoint(local: Path, name: str, *, drop: str | None = None) -> None:
    """What the runner does: write a checkpoint directory, point LATEST at it, maybe prune an old one."""
    for rel, data in checkpoint_files(name, 2).items():
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_bytes(data)
    (local / "checkpoints" / "LATEST").write_text(name + "\n")
    if drop:
        shutil.rmtree(local / "checkpoints" / drop)


def train_and_sync(local: Path, store: Any, *checkpoints: str) -> Syncer:
    """A runner's results over time: its first checkpoint, then each later one, synced after every one."""
    write_tree(local, checkpoint=checkpoints[0])
    syncer = Syncer(local, store)
    syncer.sync()
    for name in checkpoints[1:]:
        add_checkpoint(local, name)
        syncer.sync()
    return syncer


def stored_checkpoints(store: Any) -> list[str]:
    return sorted({o.name.split("/")[1] for o in store.list("checkpoints/") if o.name.count("/") >= 2})


def test_a_restarted_runner_prunes_its_predecessors_checkpoints_by_the_runners_retention(
    target: tuple[Any, Any], tmp_path: Path
) -> None:
    store, _ = target
    train_and_sync(tmp_path / "first", store, "ckpt-000000000100", "ckpt-000000000200", "ckpt-000000000300")
    assert stored_checkpoints(store) == ["ckpt-000000000100", "ckpt-000000000200", "ckpt-000000000300"]

    # the pod is replaced: the new runner restores only the latest checkpoint
    second = tmp_path / "second"
    assert restore_latest(store, second) == "ckpt-000000000300"
    syncer = Syncer(second, store)
    assert syncer.sync().deleted == []  # three stored, the runner keeps three: nothing to prune yet
    add_checkpoint(second, "ckpt-000000000400")
    report = syncer.sync()
    assert report.published == "ckpt-000000000400"
    assert {n.split("/")[1] for n in report.deleted} == {"ckpt-000000000100"}
    add_checkpoint(second, "ckpt-000000000500")
    syncer.sync()
    add_checkpoint(second, "ckpt-000000000600", drop="ckpt-000000000300")  # the runner prunes its own, too
    syncer.sync()
    assert stored_checkpoints(store) == ["ckpt-000000000400", "ckpt-000000000500", "ckpt-000000000600"]
    assert read_latest(store)[0] == "ckpt-000000000600"  # type: ignore[index]


def test_a_syncer_without_checkpoints_of_its_own_leaves_the_stored_ones_alone(
    target: tuple[Any, Any], tmp_path: Path
) -> None:
    store, _ = target
    names = ("ckpt-000000000100", "ckpt-000000000200", "ckpt-000000000300", "ckpt-000000000400")
    train_and_sync(tmp_path / "runner", store, *names)
    before = stored_checkpoints(store)
    assert len(before) == 4  # the runner never pruned locally, so neither did its syncer
    # e.g. a log shipper built without prune_checkpoints=False: it has no checkpoints to judge by
    shipper = tmp_path / "shipper"
    (shipper / "logs").mkdir(parents=True)
    (shipper / "logs" / "env_server-0.log").write_text("serving\n")
    assert Syncer(shipper, store, include=["logs/*"]).sync().deleted == []
    assert stored_checkpoints(store) == before


def test_the_syncer_keeps_as_many_checkpoints_as_the_runner() -> None:
    from rlcloud.runner.loop import CHECKPOINTS_KEPT

    assert Syncer(".", LocalStore("unused")).keep_checkpoints == CHECKPOINTS_KEPT
    with pytest.raises(ValueError, match="keep_checkpoints"):
        Syncer(".", LocalStore("unused"), keep_checkpoints=0)


def test_checkpoint_not_yet_named_by_latest_is_not_uploaded(target: tuple[Any, Any], tmp_path: Path) -> None:
    store, _ = target
    local = tmp_path / "work"
    write_tree(local)
    # a directory the runner has written but LATEST does not name yet (e.g. crashed before LATEST)
    for rel, data in checkpoint_files("ckpt-000000000300", 2).items():
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_bytes(data)
    Syncer(local, store).sync()
    names = [o.name for o in store.list("checkpoints/")]
    assert names and not any("ckpt-000000000300" in n for n in names)
    assert read_latest(store)[0] == "ckpt-000000000100"  # type: ignore[index]


def test_publish_checkpoint_is_idempotent_and_restore_brings_it_back(target: tuple[Any, Any], tmp_path: Path) -> None:
    store, proxy = target
    local = tmp_path / "work"
    tree = write_tree(local)
    syncer = Syncer(local, store)
    report = syncer.publish_checkpoint("ckpt-000000000100")
    assert report.published == "ckpt-000000000100"
    assert all(n.startswith("checkpoints/") for n in report.uploaded)  # only the checkpoint
    if proxy:
        proxy.reset_counts()
    assert syncer.publish_checkpoint("ckpt-000000000100").uploaded == []
    if proxy:
        assert proxy.uploads == 0
    syncer.sync()

    fresh = tmp_path / "fresh"
    name = restore_latest(store, fresh)
    assert name == "ckpt-000000000100"
    assert (fresh / LATEST).read_text().strip() == name
    restored = {p.relative_to(fresh).as_posix(): p.read_bytes() for p in fresh.rglob("*") if p.is_file()}
    restored.pop(LATEST)
    want = {
        k: v
        for k, v in tree.items()
        if k.startswith(("checkpoints/", "logs/")) or k in ("metrics.jsonl", "progress.json")
    }
    assert restored == want
    # a directory that has a checkpoint already is left alone
    assert restore_latest(store, fresh) is None


def test_restore_from_an_empty_store_is_none(target: tuple[Any, Any], tmp_path: Path) -> None:
    store, _ = target
    assert restore_latest(store, tmp_path / "w") is None


def test_syncs_in_background_and_on_stop(target: tuple[Any, Any], tmp_path: Path) -> None:
    store, _ = target
    local = tmp_path / "work"
    local.mkdir()
    syncer = Syncer(local, store).start(interval_s=0.05)
    hook = SyncHook(syncer, interval_s=0.05)
    (local / "metrics.jsonl").write_text('{"episode": 1}\n')
    deadline = time.monotonic() + 30
    while not store.exists("metrics.jsonl") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.exists("metrics.jsonl")
    for rel, data in checkpoint_files("ckpt-000000000010", 2).items():
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_bytes(data)
    (local / LATEST).write_text("ckpt-000000000010\n")
    hook.on_checkpoint("ckpt-000000000010")
    (local / "progress.json").write_text('{"state": "succeeded"}')
    hook.on_finish("succeeded")  # stops the thread, final sync
    assert not syncer.running
    assert read_latest(store)[0] == "ckpt-000000000010"  # type: ignore[index]
    assert store.read_text("progress.json") == '{"state": "succeeded"}'


def _script(body: str) -> str:
    return textwrap.dedent(body)


def test_sigterm_syncs_once_more_and_exits_143(fake_gcs: Any, gcs_bucket: str, tmp_path: Path) -> None:
    local = tmp_path / "work"
    local.mkdir()
    code = _script(
        f"""
        import sys, time
        from pathlib import Path
        from rlcloud.storage import Syncer, open_store
        syncer = Syncer({str(local)!r}, open_store("gs://{gcs_bucket}/exp"))
        syncer.start(interval_s=3600, handle_sigterm=True)
        Path({str(local)!r}, "metrics.jsonl").write_text("late\\n")
        print("ready", flush=True)
        while True:
            time.sleep(0.05)
        """
    )
    env = {**os.environ, **fake_gcs.env}
    with subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, cwd=REPO) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 143
    store = fake_gcs.client().bucket(gcs_bucket).blob("exp/metrics.jsonl")
    assert store.download_as_bytes() == b"late\n"


def test_uploader_killed_halfway_never_publishes_a_partial_checkpoint(
    fake_gcs: Any, faulty_proxy: Any, gcs_bucket: str, gcs_store: Any, tmp_path: Path
) -> None:
    local = tmp_path / "work"
    tree = write_tree(local)
    Syncer(local, gcs_store).sync()  # ckpt-...100 is published

    new = "ckpt-000000000200"
    new_files = checkpoint_files(new, 10)
    for rel, data in new_files.items():
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_bytes(data)
    (local / LATEST).write_text(new + "\n")

    proxy = faulty_proxy()
    uploads = []

    def fifth_checkpoint_upload(method: str, path: str, query: str) -> bool:
        # The only uploads this sync makes are the new checkpoint's files: the rest is unchanged.
        if method == "POST" and path.startswith("/upload/"):
            uploads.append(query)
            return len(uploads) >= 5
        return False

    proxy.hold(fifth_checkpoint_upload)
    code = _script(
        f"""
        from rlcloud.storage import Syncer
        from rlcloud.storage.gcs import GcsStore
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage
        client = storage.Client(project="p", credentials=AnonymousCredentials(),
                                client_options={{"api_endpoint": {proxy.url!r}}})
        Syncer({str(local)!r}, GcsStore({gcs_bucket!r}, "exp", client=client, max_workers=1)).sync()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stderr=subprocess.DEVNULL)
    try:
        assert proxy.held.wait(60), "the uploader never reached the fifth checkpoint file"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        proxy.release()
        if proc.poll() is None:
            proc.kill()

    # half of the new checkpoint is in the store, but LATEST still names the complete old one
    partial = [o.name for o in gcs_store.list(f"checkpoints/{new}/")]
    assert 0 < len(partial) < len(new_files)
    assert read_latest(gcs_store)[0] == "ckpt-000000000100"  # type: ignore[index]
    fresh = tmp_path / "fresh"
    assert restore_latest(gcs_store, fresh) == "ckpt-000000000100"
    for rel, data in tree.items():
        if rel.startswith("checkpoints/"):
            assert (fresh / rel).read_bytes() == data

    # the next sync (a restarted uploader) completes it and only then moves LATEST
    report = Syncer(local, gcs_store).sync()
    assert report.published == new
    assert sorted(report.uploaded) == sorted(set(new_files) - set(partial)) or set(report.uploaded) <= set(new_files)
    assert {o.name for o in gcs_store.list(f"checkpoints/{new}/")} == set(new_files)


def test_include_limits_what_is_synced(target: tuple[Any, Any], tmp_path: Path) -> None:
    store, _ = target
    local = tmp_path / "env-server"
    write_tree(local)
    report = Syncer(local, store, include=["logs/*"]).sync()
    assert report.uploaded == ["logs/single-0.log"] and report.published is None
    assert [o.name for o in store.list()] == ["logs/single-0.log"]


def test_another_writer_moving_latest_is_a_conflict(
    faulty_proxy: Any, gcs_store_via: Any, gcs_store: Any, gcs_bucket: str, tmp_path: Path
) -> None:
    from rlcloud.storage import PreconditionFailedError

    local = tmp_path / "work"
    write_tree(local)
    proxy = faulty_proxy()
    syncer = Syncer(local, gcs_store_via(proxy, gcs_bucket))
    syncer.sync()
    for rel, data in checkpoint_files("ckpt-000000000200", 2).items():
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_bytes(data)
    (local / LATEST).write_text("ckpt-000000000200\n")

    def second_runner_writes_first(method: str, path: str, query: str) -> None:
        # just before our conditional write reaches the server, another writer moves LATEST
        if method == "POST" and "ifGenerationMatch" in query:
            proxy.rule = None
            gcs_store.write_text(LATEST, "ckpt-from-elsewhere")

    proxy.rule = second_runner_writes_first  # type: ignore[assignment]
    with pytest.raises(PreconditionFailedError, match="another writer"):
        syncer.sync()
    assert read_latest(gcs_store)[0] == "ckpt-from-elsewhere"  # type: ignore[index]


def test_background_sync_survives_a_failing_store(
    faulty_proxy: Any, gcs_store_via: Any, gcs_bucket: str, tmp_path: Path
) -> None:
    from rlcloud.errors import AuthError

    local = tmp_path / "work"
    local.mkdir()
    (local / "metrics.jsonl").write_text('{"episode": 1}\n')
    denied = {"on": True}
    proxy = faulty_proxy(deny=lambda method, path: denied["on"])
    store = gcs_store_via(proxy, gcs_bucket)
    syncer = Syncer(local, store).start(interval_s=0.05)
    try:
        deadline = time.monotonic() + 30
        while syncer.last_error is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert isinstance(syncer.last_error, AuthError)
        assert syncer.running  # a failed sync does not end the thread
        denied["on"] = False
        while not store.exists("metrics.jsonl") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert store.read_text("metrics.jsonl") == '{"episode": 1}\n'
    finally:
        syncer.stop(final_sync=False)


def test_each_new_file_and_checkpoint_costs_one_request(
    faulty_proxy: Any, gcs_store_via: Any, gcs_store: Any, gcs_bucket: str, tmp_path: Path
) -> None:
    """Under latency the requests are the cost: a small file is one upload whose answer describes the stored
    object (no metadata read), a checkpoint is its files plus the LATEST write (no read-back)."""
    local = tmp_path / "work"
    for i in range(12):
        (local / "summaries").mkdir(parents=True, exist_ok=True)
        (local / "summaries" / f"events.{i}").write_bytes(os.urandom(1000 + i))
    (local / "checkpoints" / "ckpt-1").mkdir(parents=True)
    for i in range(3):
        (local / "checkpoints" / "ckpt-1" / f"part-{i}").write_bytes(os.urandom(500))
    (local / LATEST).write_text("ckpt-1\n")
    proxy = faulty_proxy()
    syncer = Syncer(local, gcs_store_via(proxy, gcs_bucket))
    syncer.sync()  # the first sync also looks the bucket up once
    (local / "checkpoints" / "ckpt-2").mkdir()
    for i in range(3):
        (local / "checkpoints" / "ckpt-2" / f"part-{i}").write_bytes(os.urandom(500))
    (local / LATEST).write_text("ckpt-2\n")
    (local / "summaries" / "events.12").write_bytes(os.urandom(100))
    proxy.reset_counts()
    report = syncer.sync()
    assert report.published == "ckpt-2" and len(report.uploaded) == 4
    seen = proxy.snapshot()
    # one listing, 3 checkpoint files + LATEST + 1 new file: nothing else
    assert (proxy.list_calls, proxy.uploads, len(seen)) == (1, 5, 6), [(r.method, r.path, r.query) for r in seen]
    stored = {o.name: o for o in gcs_store.list()}
    assert stored["summaries/events.12"].crc32c == crc32c_of_file(local / "summaries" / "events.12")
