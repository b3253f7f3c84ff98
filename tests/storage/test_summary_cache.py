"""The run summary the runner writes (rlcloud.storage.summary) and the object cache (rlcloud.storage.cache)."""

from __future__ import annotations

import json
import math
import multiprocessing
from pathlib import Path

import pytest

from rlcloud.layout import RUN_SUMMARY, SUMMARY_SOURCES, SUMMARY_VERSION
from rlcloud.storage.cache import ObjectCache
from rlcloud.storage.local import LocalStore
from rlcloud.storage.summary import JsonlTally, SummaryHook, summary_is_current, write_summary


def _append(path: Path, records: list[dict[str, object]], tail: str = "") -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in records) + tail)


def _episodes(start: int, count: int, value: float) -> list[dict[str, object]]:
    return [{"episode": i, "timestep": 10 * i, "return": value, "time": 0.1 * i} for i in range(start, start + count)]


def test_the_summary_follows_its_records_and_says_which(tmp_path: Path) -> None:
    hook = SummaryHook(tmp_path)
    _append(tmp_path / "metrics.jsonl", _episodes(1, 30, 5.0))
    (tmp_path / "progress.json").write_text(json.dumps({"state": "running", "timestep": 300}))
    hook.on_checkpoint("ckpt-1")
    listed = {i.name: i for i in LocalStore(tmp_path).list_named(SUMMARY_SOURCES)}
    first = json.loads((tmp_path / RUN_SUMMARY).read_text())
    assert first["version"] == SUMMARY_VERSION and summary_is_current(first, listed)
    assert (first["episodes"], first["objective"], first["last_timestep"]) == (30, 5.0, 300)
    assert first["sources"]["evaluation.jsonl"] is None  # absent, and said so

    # more episodes (one torn mid-append), an evaluation round, the final progress: the summary is stale
    # until the runner writes it again, and then it is current, having read only what was appended
    _append(tmp_path / "metrics.jsonl", _episodes(31, 20, 9.0), tail='{"episode": 51, "ret')
    _append(tmp_path / "evaluation.jsonl", [{"at_timestep": 500, "return": 7.0}, {"at_timestep": 500, "return": 9.0}])
    (tmp_path / "progress.json").write_text(json.dumps({"state": "succeeded", "timestep": 500}))
    listed = {i.name: i for i in LocalStore(tmp_path).list_named(SUMMARY_SOURCES)}
    assert not summary_is_current(first, listed)
    hook.on_finish("succeeded")
    final = json.loads((tmp_path / RUN_SUMMARY).read_text())
    assert summary_is_current(final, listed)
    assert final["episodes"] == 50 and final["objective"] == 9.0  # the last 20 returns; the torn line waits
    assert final["evaluation"] == [[500, 8.0]] and final["progress"]["state"] == "succeeded"
    assert final["curve"]["window"] == 20 and final["curve"]["timestep"][-1] == 500
    assert math.isclose(final["wall_time"], 5.0)
    # the same summary from scratch (a reader rebuilding it) is the same
    assert write_summary(tmp_path) == final


def test_a_tally_reads_a_file_again_when_it_shrank(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    tally = JsonlTally(path)
    assert tally.update() is None
    _append(path, _episodes(1, 5, 1.0))
    tally.update()
    path.write_text("")  # a restarted runner truncated its records to its checkpoint
    _append(path, _episodes(1, 2, 3.0))
    source = tally.update()
    assert len(tally.episodes()) == 2 and source == {"size": path.stat().st_size, "crc32c": source["crc32c"]}


def test_a_summary_of_another_version_or_without_sources_is_not_current(tmp_path: Path) -> None:
    write_summary(tmp_path)
    summary = json.loads((tmp_path / RUN_SUMMARY).read_text())
    assert summary_is_current(summary, {})
    assert not summary_is_current({**summary, "version": SUMMARY_VERSION + 1}, {})
    assert not summary_is_current({k: v for k, v in summary.items() if k != "sources"}, {})
    assert not summary_is_current(["not", "a", "summary"], {})


def test_the_cache_keys_by_generation_and_stays_bounded(tmp_path: Path) -> None:
    cache = ObjectCache(tmp_path / "c", max_bytes=10_000)
    cache.put("gs://b/x", 1, b"one")
    assert cache.get("gs://b/x", 1) == b"one"
    assert cache.get("gs://b/x", 2) is None  # a newer generation is never answered with an older copy
    for generation in range(2, 40):
        cache.put("gs://b/x", generation, bytes(1000))
    held = sum(p.stat().st_size for p in (tmp_path / "c").glob("*/*"))
    assert held <= 10_000 + 1100  # trimmed to 80% whenever a tenth of the bound was added
    assert cache.get("gs://b/x", 39) == bytes(1000)  # the most recent stay
    # a damaged entry (a torn or edited file) is a miss, and goes
    (entry,) = [p for p in (tmp_path / "c").glob("*/*") if p.name.endswith("-39")]
    entry.write_bytes(entry.read_bytes()[:-1] + b"x")
    assert cache.get("gs://b/x", 39) is None and not entry.exists()
    # too large to keep, or off
    cache.put("gs://b/y", 1, bytes(20_000))
    assert cache.get("gs://b/y", 1) is None
    off = ObjectCache(tmp_path / "off", max_bytes=0)
    off.put("gs://b/x", 1, b"one")
    assert off.get("gs://b/x", 1) is None and not (tmp_path / "off").exists()


def _fill(root: str, start: int) -> None:
    cache = ObjectCache(Path(root), max_bytes=1 << 20)
    for generation in range(start, start + 200):
        cache.put("gs://b/shared", generation % 50 + 1, bytes([generation % 50]) * 500)


@pytest.mark.processes
def test_processes_filling_one_cache_leave_whole_entries(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_fill, args=(str(tmp_path / "c"), k * 7)) for k in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert all(worker.exitcode == 0 for worker in workers)
    cache = ObjectCache(tmp_path / "c", max_bytes=1 << 20)
    for generation in range(1, 51):
        assert cache.get("gs://b/shared", generation) == bytes([generation - 1]) * 500
    assert not list((tmp_path / "c").glob("*/.tmp-*"))
