"""Retried GCS writes carry a generation precondition and never write blindly: a write whose answer was
lost is found landed (no second write, no duplicate line), and a retry that writes says which generation it
replaces. fake-gcs-server enforces ``ifGenerationMatch`` on simple and multipart uploads, as GCS does
("Request preconditions", cloud.google.com/storage/docs/request-preconditions)."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from rlcloud.record import _append_line, read_history
from rlcloud.storage.base import PreconditionFailedError


def _once(fault: str, *, conditional: bool | None = None) -> Any:
    """A proxy rule: ``fault`` on the first upload POST (only a conditional one, or only an unconditional
    one, when ``conditional`` says so), nothing after."""
    fired: list[str] = []

    def rule(method: str, path: str, query: str) -> str | None:
        if fired or method != "POST" or not path.startswith("/upload/"):
            return None
        if conditional is not None and ("ifGenerationMatch" in query) != conditional:
            return None
        fired.append(query)
        return fault

    rule.fired = fired  # type: ignore[attr-defined]
    return rule


def _uploads(proxy: Any) -> list[dict[str, list[str]]]:
    """The query of each upload request since the proxy's counts were last reset (one object per step)."""
    uploads = [urllib.parse.parse_qs(r.query) for r in proxy.snapshot() if r.is_upload]
    proxy.reset_counts()
    return uploads


def test_an_append_whose_answer_was_lost_is_not_appended_twice(
    faulty_proxy: Any, gcs_store_via: Any, gcs_store: Any, gcs_bucket: str
) -> None:
    gcs_store.write_text("history.jsonl", '{"event": "start"}\n', if_generation_match=0)
    proxy = faulty_proxy()
    store = gcs_store_via(proxy, gcs_bucket)
    # the conditional write lands, its answer is lost; the retry met 412 and the append read again and
    # appended a second time
    proxy.rule = _once("reset-after", conditional=True)
    _append_line(store, "history.jsonl", '{"event": "resume"}')
    assert proxy.rule.fired
    assert [h["event"] for h in read_history(gcs_store)] == ["start", "resume"]


def test_a_retried_write_that_landed_is_not_written_again(
    faulty_proxy: Any, gcs_store_via: Any, gcs_store: Any, gcs_bucket: str, tmp_path: Path
) -> None:
    proxy = faulty_proxy()
    store = gcs_store_via(proxy, gcs_bucket)
    proxy.rule = _once("reset-after")
    info = store.write_text("curves/t0.json", "[1, 2, 3]")
    assert len(_uploads(proxy)) == 1  # the landed write was found, not repeated
    assert gcs_store.stat("curves/t0.json").generation == info.generation
    # the same through upload_files (the sync's path): one upload of the file, not two
    (tmp_path / "progress.json").write_text('{"episode": 7}')
    proxy.rule = _once("reset-after")
    (stored,) = store.upload_files([(tmp_path / "progress.json", "progress.json")])
    assert len(_uploads(proxy)) == 1
    assert gcs_store.read_text("progress.json") == '{"episode": 7}'
    assert gcs_store.stat("progress.json").generation == stored.generation


@pytest.mark.parametrize("existing", [False, True])
def test_a_retry_that_writes_carries_the_generation_it_replaces(
    faulty_proxy: Any, gcs_store_via: Any, gcs_store: Any, gcs_bucket: str, tmp_path: Path, existing: bool
) -> None:
    before = gcs_store.write_text("progress.json", "old") if existing else None
    proxy = faulty_proxy()
    store = gcs_store_via(proxy, gcs_bucket)
    (tmp_path / "progress.json").write_text("new")
    proxy.rule = _once("503")  # refused before it reached the server: the retry must write
    store.upload_files([(tmp_path / "progress.json", "progress.json")])
    first, retry = _uploads(proxy)
    assert "ifGenerationMatch" not in first
    # 0: create only if still absent; else only over the generation the retry read
    assert retry["ifGenerationMatch"] == [str(before.generation if before else 0)]
    assert gcs_store.read_text("progress.json") == "new"
    proxy.rule = _once("503")
    store.write_text("curves/t1.json", "x")
    first, retry = _uploads(proxy)
    assert "ifGenerationMatch" not in first and retry["ifGenerationMatch"] == ["0"]


def test_the_fake_enforces_generation_preconditions_on_uploads(gcs_store: Any, tmp_path: Path) -> None:
    info = gcs_store.write_text("LATEST", "ckpt-1", if_generation_match=0)
    with pytest.raises(PreconditionFailedError):
        gcs_store.write_text("LATEST", "ckpt-2", if_generation_match=0)  # exists already
    with pytest.raises(PreconditionFailedError):
        gcs_store.write_text("LATEST", "ckpt-2", if_generation_match=info.generation + 1)
    assert gcs_store.write_text("LATEST", "ckpt-2", if_generation_match=info.generation).generation > info.generation
