"""Trial claims with leases (rlcloud.storage.claims): several processes claiming one sweep's trials against a
directory store and fake-gcs-server, a killed holder's trial taken over after its lease, and the rules of a
claim's life in one process with a stepped clock."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rlcloud.k8s.warm import read_shares
from rlcloud.layout import ProgressRecord
from rlcloud.storage import open_store
from rlcloud.storage.claims import Claim, Lease, TrialClaims, claim_path
from rlcloud.waiting import Clock
from tests.fakes.gcs import FakeGcsServer
from tests.support.waiting import eventually

WORKER = Path(__file__).with_name("claim_worker.py")
ROOT = Path(__file__).resolve().parents[2]


class SteppedClock:
    """A clock whose monotonic time moves only when the test steps it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def clock(self) -> Clock:
        return Clock(time=lambda: self.now, monotonic=lambda: self.now)


def _names(n: int) -> list[str]:
    return [f"t{i}" for i in range(n)]


def _worker(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def _claim_concurrently(location: str, tmp_path: Path, workers: int, trials: int, env: dict[str, str]) -> int:
    """``workers`` processes claim ``trials`` trials at once; each trial is claimed and run exactly once."""
    procs = [_worker("run", location, str(trials), "30", str(tmp_path / f"out-{i}"), env=env) for i in range(workers)]
    for proc in procs:  # all ready (imported, the store's client made), then all go at once
        assert proc.stdin is not None and proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [json.loads(proc.communicate()[0]) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * workers
    ran = Counter(line for i in range(workers) for line in (tmp_path / f"out-{i}").read_text().split())
    assert "DOUBLE" not in ran
    assert ran == Counter(_names(trials)), ran  # no duplicate, no loss
    assert sorted(t for r in results for t in r["claimed"]) == sorted(_names(trials))
    conflicts = sum(r["conflicts"] for r in results)
    print(f"{workers} processes, {trials} claims, {conflicts} conflicts lost, per process "
          f"{[len(r['claimed']) for r in results]}")  # fmt: skip
    store = open_store(location)
    for name in _names(trials):
        record = json.loads(store.read_text(claim_path(name)))
        assert record["state"] == "done" and record["outcome"] == "succeeded"
    return conflicts


@pytest.mark.processes
def test_processes_claiming_at_once_from_a_directory_each_run_distinct_trials(tmp_path: Path) -> None:
    _claim_concurrently(str(tmp_path / "sweep"), tmp_path, workers=4, trials=24, env={})


@pytest.mark.processes
def test_processes_claiming_at_once_from_gcs_each_run_distinct_trials(
    tmp_path: Path, fake_gcs: FakeGcsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake_gcs.url)
    bucket = fake_gcs.create_bucket()
    _claim_concurrently(f"gs://{bucket}/sweep", tmp_path, workers=4, trials=16, env=fake_gcs.env)


@pytest.mark.processes
@pytest.mark.parametrize("where", ["dir", "gcs"])
def test_a_killed_holders_trial_is_taken_over_once_its_lease_expired(
    where: str, tmp_path: Path, fake_gcs: FakeGcsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A holds t0 and renews it; B looks, and may take it only once A is killed -9 and its lease (2 s, by B's
    monotonic clock from when B first saw A's last renewal) has passed."""
    env = fake_gcs.env if where == "gcs" else {}
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake_gcs.url)
    location = f"gs://{fake_gcs.create_bucket()}/sweep" if where == "gcs" else str(tmp_path / "sweep")
    with contextlib.ExitStack() as stack:
        holder = stack.enter_context(_worker("hold", location, "1", "2", env=env))
        assert holder.stdout is not None
        _, trial, holder_id = holder.stdout.readline().split()
        taker = stack.enter_context(_worker("take", location, "1", "2", env=env))  # once the trial is held
        assert taker.stdout is not None
        assert taker.stdout.readline().strip() == "looking"
        store = open_store(location)
        # the holder renews while the taker watches: two more renewals, then the holder is killed mid-trial
        first = json.loads(store.read_text(claim_path(trial)))["renewals"]
        eventually(lambda: json.loads(store.read_text(claim_path(trial)))["renewals"] >= first + 2, what="renewals")
        assert taker.poll() is None  # not taken while renewed
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        line = taker.stdout.readline().split()
        assert taker.wait() == 0
    assert line == ["claimed", trial, holder_id]
    record = json.loads(store.read_text(claim_path(trial)))
    assert record["took_over"] == holder_id and record["holder"] != holder_id and record["state"] == "held"


def test_a_claims_life_with_a_stepped_clock(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "sweep"))
    stepped = SteppedClock()
    a = TrialClaims(store, _names(3), job_uid="j1", lease_s=10, holder="a")
    b = TrialClaims(store, _names(3), job_uid="j1", lease_s=10, holder="b", clock=stepped.clock())
    got = a.claim_next()
    assert isinstance(got, Claim) and got.name == "t0"
    nxt = b.claim_next(lambda index: index == 0)
    assert nxt is False  # held, first seen now
    stepped.now += 11
    assert a.rewrite(got, renewals=1)  # renewed: a new generation, whose age starts when b sees it
    assert b.claim_next(lambda index: index == 0) is False
    stepped.now += 11  # no renewal for a whole lease, as b has watched it
    taken = b.claim_next(lambda index: index == 0)
    assert isinstance(taken, Claim) and taken.took_over == "a"
    assert not a.rewrite(got, renewals=2) and a.conflicts == 1  # a's next renewal finds it lost
    assert b.rewrite(taken, state="done", outcome="succeeded")
    # the lowest free trial next; a done trial is never claimed again
    assert [c.name for c in (a.claim_next(), b.claim_next()) if isinstance(c, Claim)] == ["t1", "t2"]
    assert a.claim_next() is False  # t1 and t2 held (b's t2 first seen now by a)


def test_released_and_failed_claims_are_taken_at_once_and_the_rest_are_final(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "sweep"))
    a = TrialClaims(store, _names(3), job_uid="j1", lease_s=1000, holder="a")
    claims = [a.claim_next() for _ in range(3)]
    assert all(isinstance(c, Claim) for c in claims)
    c0, c1, c2 = claims
    assert isinstance(c0, Claim) and isinstance(c1, Claim) and isinstance(c2, Claim)
    Lease(a, c0, on_lost=print).release()  # a signal stopped it: anyone resumes it
    Lease(a, c1, on_lost=print).finish("failed")  # failed in Job j1
    Lease(a, c2, on_lost=print).finish("stopped-early")
    same_job = TrialClaims(store, _names(3), job_uid="j1", lease_s=1000, holder="b")
    got = same_job.claim_next()
    assert isinstance(got, Claim) and got.name == "t0" and got.took_over == "a"
    Lease(same_job, got, on_lost=print).finish("succeeded")
    assert same_job.claim_next() is True  # every trial final for j1
    later_job = TrialClaims(store, _names(3), job_uid="j2", lease_s=1000, holder="c")
    again = later_job.claim_next()
    assert isinstance(again, Claim) and again.name == "t1"  # j1's failure: run again by a later Job
    assert later_job.claim_next() is False


def test_a_holder_whose_renewal_hangs_stops_its_trial_before_the_lease_ends(
    fake_gcs: FakeGcsServer, gcs_bucket: str, faulty_proxy: Any, gcs_store_via: Any
) -> None:
    """The store holds the holder's renewal (a partition): its fence calls on_lost at 3/4 of the lease, before
    any other pod may take the trial over."""
    proxy = faulty_proxy()
    store = gcs_store_via(proxy, gcs_bucket, "sweep")
    claims = TrialClaims(store, _names(1), job_uid="j", lease_s=1.0, holder="a")
    claim = claims.claim_next()
    assert isinstance(claim, Claim)
    lost = threading.Event()
    why: list[str] = []
    proxy.hold(lambda method, _path, _query: method == "POST")  # every write from now on waits
    with Lease(claims, claim, on_lost=lambda reason: (why.append(reason), lost.set())):
        assert lost.wait(60)  # bounded only so that a broken fence fails instead of hanging the suite
        proxy.release()
    assert why and "could not be renewed" in why[0]


def test_status_reads_claimed_trials_in_order_until_pods_in_a_row_have_no_record() -> None:
    names = _names(10)
    records = {"t0": {"state": "succeeded"}, "t1": {"state": "running"}, "t2": {"state": "succeeded"},
               "t4": {"state": "running"}}  # fmt: skip
    batches: list[list[str]] = []

    def read(batch: list[str]) -> dict[str, ProgressRecord]:
        batches.append(batch)
        return {n: ProgressRecord(records[n]) for n in batch if n in records}  # type: ignore[arg-type]

    got = read_shares(names, 2, read, job_uid="j", claiming=True)
    assert got["t4"] == {"state": "running"} and "t8" not in got
    assert batches == [["t0", "t1"], ["t2", "t3"], ["t4", "t5"], ["t6", "t7"]]
