"""Client-side readers: incremental verified download, metrics/progress/logs without a full download,
TensorBoard summaries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rlcloud.errors import StorageError
from rlcloud.storage import (
    download,
    read_evaluation,
    read_logs,
    read_metrics,
    read_progress,
    sync_tensorboard,
    tail_log,
)
from rlcloud.storage.local import LocalStore


@pytest.fixture(params=["local", "gcs"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    return request.getfixturevalue("gcs_store")


def test_download_is_incremental_and_reports_progress(store: Any, tmp_path: Path) -> None:
    files = {"a.txt": b"alpha", "sub/b.bin": b"\x00" * 5000, "sub/deeper/c": b"c" * 70}
    for name, data in files.items():
        store.write_bytes(name, data)
    dest = tmp_path / "dest"
    seen: list[tuple[int, int]] = []
    first = download(store, dest, progress=lambda d, t: seen.append((d, t)))
    assert sorted(first.downloaded) == sorted(files)
    assert first.bytes_downloaded == sum(len(d) for d in files.values())
    assert seen[-1] == (first.bytes_downloaded, first.bytes_downloaded)
    assert {n: (dest / n).read_bytes() for n in files} == files

    second = download(store, dest)
    assert second.downloaded == [] and sorted(second.unchanged) == sorted(files)

    store.write_bytes("sub/b.bin", b"\x01" * 5000)  # same size, other content: the CRC tells
    (dest / "a.txt").write_bytes(b"tampered")  # a local edit is replaced by the stored version
    third = download(store, dest)
    assert sorted(third.downloaded) == ["a.txt", "sub/b.bin"]
    assert (dest / "sub/b.bin").read_bytes() == b"\x01" * 5000
    assert (dest / "a.txt").read_bytes() == b"alpha"


def test_metrics_progress_and_evaluation(store: Any) -> None:
    assert read_metrics(store) == []
    assert read_progress(store) is None
    rows = [{"episode": i, "timestep": 10 * i, "return": i / 2, "length": 10, "time": i, "worker": 0} for i in (1, 2)]
    # the last line is torn: the runner was appending while the file was synced
    store.write_text("metrics.jsonl", "".join(json.dumps(r) + "\n" for r in rows) + '{"episode": 3, "ret')
    assert read_metrics(store) == rows
    store.write_text("evaluation.jsonl", json.dumps({"episode": 1, "return": 5.0, "at_episode": 2}) + "\n")
    assert read_evaluation(store) == [{"episode": 1, "return": 5.0, "at_episode": 2}]
    progress = {"state": "running", "timestep": 20, "episode": 2, "checkpoint": None}
    store.write_text("progress.json", json.dumps(progress))
    assert read_progress(store) == progress
    store.write_text("progress.json", "[1, 2]")
    with pytest.raises(StorageError, match=r"progress\.json"):
        read_progress(store)


def test_logs_and_tail(store: Any) -> None:
    store.write_text("logs/agent-0.log", "start\nstep 1\n")
    store.write_text("logs/env-server-1.log", "serving\n")
    store.write_text("logs/README", "not a log")
    assert read_logs(store) == {"agent-0": "start\nstep 1\n", "env-server-1": "serving\n"}

    text, offset = tail_log(store, "agent-0")
    assert text == "start\nstep 1\n" and offset == len(text)
    assert tail_log(store, "agent-0", offset) == ("", offset)
    store.write_text("logs/agent-0.log", "start\nstep 1\nstep 2\npartial")
    more, offset2 = tail_log(store, "agent-0", offset)
    assert more == "step 2\n"  # the unfinished line waits for its newline
    assert offset2 == offset + len("step 2\n")
    store.write_text("logs/agent-0.log", "restarted\n")  # a new runner replaced it: start over
    assert tail_log(store, "agent-0", offset2) == ("restarted\n", len("restarted\n"))
    assert tail_log(store, "nobody-0") == ("", 0)


def test_sync_tensorboard_downloads_only_summaries(store: Any, tmp_path: Path) -> None:
    store.write_bytes("summaries/rlcloud/events.out.tfevents.1", b"e1")
    store.write_bytes("checkpoints/ckpt-1/agent.data", b"big")
    logdir = sync_tensorboard(store, tmp_path / "tb")
    assert logdir == tmp_path / "tb" / "summaries"
    assert [p.name for p in logdir.rglob("*") if p.is_file()] == ["events.out.tfevents.1"]
    assert not (tmp_path / "tb" / "checkpoints").exists()
    store.write_bytes("summaries/rlcloud/events.out.tfevents.2", b"e2")
    sync_tensorboard(store, tmp_path / "tb")
    assert sorted(p.name for p in logdir.rglob("*") if p.is_file()) == [
        "events.out.tfevents.1",
        "events.out.tfevents.2",
    ]
