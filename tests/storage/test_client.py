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


#: object names a bucket holds (GCS takes any UTF-8 name of 1-1,024 bytes without CR/LF:
#: https://cloud.google.com/storage/docs/objects#naming) that no local file can have, with why
ODD_NAMES = {
    "nul": "logs/a\x00b.log",
    "part-of-256-bytes": "logs/" + "n" * 256,
    "part-of-300-bytes": "summaries/" + "\u00e9" * 150,  # 150 characters, 300 bytes
    "file-and-folder": "both",  # with both/child below
    "dot-dot": "logs/../../escape.txt",
    "empty-part": "logs//double.txt",
    "dot": "logs/./dot.txt",
}


def test_odd_object_names_are_each_skipped_and_the_rest_downloaded(
    gcs_store: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    raw = gcs_store.bucket  # the real client, to write names the store itself would refuse
    good = {
        "metrics.jsonl": b"{}\n",
        "both/child": b"child",
        "logs/" + "k" * 230 + ".log": b"a 234-byte name fits",  # 230-255 bytes: downloaded, tmp file too
        "logs/" + "m" * 251 + ".log": b"255 bytes exactly",
        "checkpoints/c1/agent.index": b"ckpt",
    }
    for name, data in good.items():
        gcs_store.write_bytes(name, data)
    for name in ODD_NAMES.values():
        raw.blob(f"exp/{name}").upload_from_string(b"odd")
    raw.blob("exp/folder/").upload_from_string(b"")  # the Console's "create folder": a zero-byte placeholder
    raw.blob("exp/folder/inside.txt").upload_from_string(b"inside")
    good["folder/inside.txt"] = b"inside"

    dest = tmp_path / "dest"
    report = download(gcs_store, dest)
    assert sorted(report.downloaded) == sorted(good)
    assert {n: (dest / n).read_bytes() for n in good} == good
    assert sorted(report.skipped) == sorted(ODD_NAMES.values())  # the placeholder is a folder, not skipped
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == len(ODD_NAMES)
    assert all("not downloaded: gs://" in w for w in warnings)  # each names the object
    assert not (tmp_path / "escape.txt").exists()  # still never outside dest
    assert not [p for p in dest.rglob("*") if p.name.startswith(".rlcloud-tmp")]
    assert download(gcs_store, dest).downloaded == []  # incremental as before


def test_a_local_file_or_folder_in_the_way_skips_only_that_object(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    for name in ("a/b.txt", "c.txt", "d.txt"):
        store.write_bytes(name, name.encode())
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "a").write_text("a file where a folder goes")
    (dest / "c.txt").mkdir()
    report = download(store, dest)
    assert report.downloaded == ["d.txt"] and sorted(report.skipped) == ["a/b.txt", "c.txt"]


def test_a_run_resumes_past_odd_names_in_its_logs(gcs_store: Any, tmp_path: Path) -> None:
    from rlcloud.storage import restore_latest

    gcs_store.write_bytes("checkpoints/c1/agent.index", b"ckpt")
    gcs_store.write_text("checkpoints/LATEST", "c1\n")
    gcs_store.write_bytes("logs/learner-0.log", b"log")
    for name in ("logs/a\x00b.log", "logs/" + "z" * 300, "logs/x/", "logs/../up.log"):
        gcs_store.bucket.blob(f"exp/{name}").upload_from_string(b"odd" if not name.endswith("/") else b"")
    fresh = tmp_path / "fresh"
    assert restore_latest(gcs_store, fresh) == "c1"
    assert (fresh / "checkpoints/c1/agent.index").read_bytes() == b"ckpt"
    assert (fresh / "logs/learner-0.log").read_bytes() == b"log"
    assert not (tmp_path / "up.log").exists()


# -------------------------------------------- a stray object under a run file's name never hides it (issue 37)


@pytest.mark.parametrize(
    ("listing", "kept", "strays"),
    [
        (["metrics.jsonl", "metrics.jsonl/inner.txt"], ["metrics.jsonl"], ["metrics.jsonl/inner.txt"]),
        (["progress.json", "progress.json/a/b"], ["progress.json"], ["progress.json/a/b"]),
        (["spec.yaml", "spec.yaml/x", "history.jsonl"], ["history.jsonl", "spec.yaml"], ["spec.yaml/x"]),
        (["t0001/metrics.jsonl", "t0001/metrics.jsonl/x"], ["t0001/metrics.jsonl"], ["t0001/metrics.jsonl/x"]),
        (
            ["checkpoints/c1/state.json", "checkpoints/c1/state.json/y"],
            ["checkpoints/c1/state.json"],
            ["checkpoints/c1/state.json/y"],
        ),
        (["checkpoints/LATEST", "checkpoints/LATEST/z"], ["checkpoints/LATEST"], ["checkpoints/LATEST/z"]),
        # a name that is not a run's file: the folder's objects win, as before
        (["summaries", "summaries/events.out"], ["summaries/events.out"], ["summaries"]),
        (["both", "both/child"], ["both/child"], ["both"]),
    ],
)
def test_a_run_file_wins_over_objects_under_its_name(
    listing: list[str], kept: list[str], strays: list[str], tmp_path: Path
) -> None:
    from rlcloud.storage.base import ObjectInfo, local_targets

    infos = [ObjectInfo(name, 1, "AAAAAA==", 1) for name in sorted(listing)]
    targets, skipped = local_targets(infos, tmp_path)
    assert sorted(info.name for info, _ in targets) == sorted(kept)
    assert sorted(name for name, _ in skipped) == sorted(strays)


def test_download_keeps_metrics_beside_an_object_under_its_name(gcs_store: Any, tmp_path: Path) -> None:
    """`metrics.jsonl/inner.txt` beside `metrics.jsonl` made download skip the real metrics."""
    gcs_store.write_bytes("metrics.jsonl", b'{"episode": 1}\n')
    gcs_store.write_bytes("metrics.jsonl/inner.txt", b"stray")
    report = download(gcs_store, tmp_path / "dest")
    assert report.downloaded == ["metrics.jsonl"] and report.skipped == ["metrics.jsonl/inner.txt"]
    assert (tmp_path / "dest" / "metrics.jsonl").read_bytes() == b'{"episode": 1}\n'
