"""Each role's output reaches the store: tee_output copies stdout/stderr (Python, raw fd writes, child
processes) into logs/<role>.log; make_hooks restores a predecessor's log first, so it is continued."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.processes
def test_tee_output_copies_everything_and_keeps_the_streams(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "single-0.log"
    log.parent.mkdir()
    log.write_text("earlier run\n")
    done = run(
        f"""
        import os, subprocess, sys
        from rlcloud.storage.logs import tee_output
        restore = tee_output({str(log)!r})
        print("from python stdout", flush=True)
        print("from python stderr", file=sys.stderr, flush=True)
        os.write(2, b"from the raw fd\\n")
        subprocess.run(["sh", "-c", "echo from a child"], check=True)
        restore()
        print("after restore")
        """
    )
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert text.startswith("earlier run\n")  # appended, not replaced
    for line in ("from python stdout", "from python stderr", "from the raw fd", "from a child"):
        assert line in text
    assert "after restore" not in text
    assert "from python stdout" in done.stdout and "from a child" in done.stdout and "after restore" in done.stdout
    assert "from the raw fd" in done.stderr


def test_make_hooks_continues_the_stored_log(fake_gcs: Any, gcs_bucket: str, tmp_path: Path) -> None:
    store = fake_gcs.client().bucket(gcs_bucket)
    store.blob("exp/logs/single-0.log").upload_from_string("runner 1 was here\n")
    workdir = tmp_path / "pod-2"
    done = run(
        f"""
        from rlcloud.storage.sync import make_hooks
        hook = make_hooks("gs://{gcs_bucket}/exp", {str(workdir)!r}, log_name="single-0", interval_s=3600)
        print("runner 2 starts", flush=True)
        hook.on_finish("succeeded")
        print("runner 2 says goodbye after the last sync", flush=True)
        """,
        env=fake_gcs.env,
    )
    assert done.returncode == 0, done.stderr
    stored = store.blob("exp/logs/single-0.log").download_as_text()
    assert stored.startswith("runner 1 was here\nrunner 2 starts\n")
    assert "goodbye" in stored  # shipped by the sync at exit


def test_ship_logs_syncs_only_this_role_log(fake_gcs: Any, gcs_bucket: str, tmp_path: Path) -> None:
    store = fake_gcs.client().bucket(gcs_bucket)
    store.blob("exp/logs/env-server-1.log").upload_from_string("server 1, first life\n")
    store.blob("exp/metrics.jsonl").upload_from_string("the learner's\n")
    workdir = tmp_path / "env-1"
    done = run(
        f"""
        from pathlib import Path
        from rlcloud.storage.sync import ship_logs
        ship_logs("gs://{gcs_bucket}/exp", {str(workdir)!r}, "env-server-1", interval_s=3600)
        Path({str(workdir)!r}, "metrics.jsonl").write_text("not mine to ship")
        print("server 1, second life", flush=True)
        """,
        env=fake_gcs.env,
    )
    assert done.returncode == 0, done.stderr
    assert store.blob("exp/logs/env-server-1.log").download_as_text() == (
        "server 1, first life\nserver 1, second life\n"
    )
    assert store.blob("exp/metrics.jsonl").download_as_text() == "the learner's\n"
