"""Reading a finished sweep back from Cloud Storage (issue 36): requests per path, first and second read.

A sweep of N trials is written to fake-gcs-server in the project's results layout (tests/support/written_runs.py)
and read back through tests/fakes/faulty_proxy.py, which counts every request (counts do not depend on load).
A first read lists the sweep once (fake-gcs-server ignores ``matchGlob`` and lists every object: one page per
1,000) and reads each trial's spec of record and summary, one request each; a second read of the finished
sweep lists it again and takes everything else from the local cache (keyed by generation). Before issue 36,
``compare`` made 9N + 6 requests and ``Sweep.results()`` 11N.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rlcloud.layout import SWEEP_INDEX_SHARDS
from rlcloud.storage import runs as reading
from rlcloud.storage.gcs import GcsStore
from tests.fakes.faulty_proxy import FaultyProxy
from tests.fakes.gcs import FakeGcsServer
from tests.support.written_runs import sweep_spec, trial_files, write_sweep

EPISODES = 30
#: objects per trial: spec, history, progress, metrics, evaluation, LATEST, a checkpoint's state, a log, summary
OBJECTS_PER_TRIAL = 9


@pytest.fixture
def reader_via(fake_gcs: FakeGcsServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], FaultyProxy]]:
    """A counting proxy in front of fake-gcs-server that rlcloud's readers use (STORAGE_EMULATOR_HOST)."""
    proxies: list[FaultyProxy] = []

    def make() -> FaultyProxy:
        proxy = FaultyProxy(fake_gcs.url).start()
        proxies.append(proxy)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
        return proxy

    yield make
    reading.forget_stores()
    for proxy in proxies:
        proxy.stop()


def _written(fake_gcs: FakeGcsServer, bucket: str, n: int, **kwargs: Any) -> Any:
    spec = sweep_spec("lr", n)
    store = GcsStore(bucket, "lr", client=fake_gcs.client(), retry_initial_s=0.05, retry_timeout_s=30)
    write_sweep(store, spec, EPISODES, **kwargs)
    return spec, store


def _requests(proxy: FaultyProxy) -> list[Any]:
    """The object requests the proxy saw (listings and reads). google-cloud-storage 3.17 also fetches the
    bucket's metadata in the background, once per client and bucket, for its tracing attributes
    (google/cloud/storage/_bucket_metadata_cache.py): not a request of ours, and its moment is the library's;
    at most one is allowed."""
    records = proxy.snapshot()
    assert sum(r.method == "GET" and r.path.rstrip("/").count("/") == 4 for r in records) <= 1
    return [r for r in records if "/o" in r.path]


def _pages(n: int) -> int:
    return max(1, math.ceil((n * OBJECTS_PER_TRIAL + 1 + SWEEP_INDEX_SHARDS) / 1000))


def _shards(spec: Any) -> int:
    """The shards of the sweep's index its trials fall into."""
    return len({zlib.crc32(t.name.encode()) % SWEEP_INDEX_SHARDS for t in spec.trials()})


@pytest.mark.parametrize("n", [10, 100])
def test_compare_and_results_of_a_finished_sweep(
    n: int,
    fake_gcs: FakeGcsServer,
    gcs_bucket: str,
    reader_via: Callable[[], FaultyProxy],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    import rlcloud
    from rlcloud import Sweep

    spec, _ = _written(fake_gcs, gcs_bucket, n)
    proxy = reader_via()
    location = f"gs://{gcs_bucket}/lr"

    first = rlcloud.compare(location)
    assert len(first) == n and set(first["state"]) == {"succeeded"}
    # the listing and the index's, a spec and a summary per trial, then the finished trials into the index
    assert len(_requests(proxy)) == _pages(n) + 1 + 2 * n + _shards(spec)
    assert proxy.list_calls == _pages(n) + 1 and proxy.uploads == _shards(spec)
    assert not [r for r in _requests(proxy) if r.is_download and "metrics.jsonl" in r.path]

    proxy.reset_counts()
    second = rlcloud.compare(location)
    assert len(_requests(proxy)) == _pages(n) + 1  # the listings only: every object is the cached generation
    assert second.equals(first)

    # another machine (an empty cache): the index's shards stand for every finished trial
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "another-cache"))
    proxy.reset_counts()
    assert rlcloud.compare(location).equals(first)
    assert len(_requests(proxy)) == _pages(n) + 1 + _shards(spec) and proxy.uploads == 0

    sweep = Sweep(spec, results=f"gs://{gcs_bucket}")
    proxy.reset_counts()
    table = sweep.results()
    assert list(table["run"]) == [t.name for t in spec.trials()]  # the sweep's own order
    assert len(_requests(proxy)) == _pages(n) + 1
    if n == 10:  # (P(improvement)'s interval over 50 seeds each takes ~0.5 GB today: issue 36 item 4)
        proxy.reset_counts()
        best = sweep.best()
        assert best.parameters == {"agent.learning_rate": 1e-3}
        assert len(_requests(proxy)) == _pages(n) + 1


@pytest.mark.parametrize("n", [10, 100])
def test_plot_of_a_finished_sweep_reads_no_episodes(
    n: int, fake_gcs: FakeGcsServer, gcs_bucket: str, reader_via: Callable[[], FaultyProxy], tmp_path: Any
) -> None:
    pytest.importorskip("matplotlib")
    from rlcloud import Sweep

    spec, _ = _written(fake_gcs, gcs_bucket, n)
    proxy = reader_via()
    sweep = Sweep(spec, results=f"gs://{gcs_bucket}")
    sweep.plot(tmp_path / "a.png")
    assert len(_requests(proxy)) == _pages(n) + 1 + 2 * n + _shards(spec)  # the curves are in the summaries
    proxy.reset_counts()
    sweep.plot(tmp_path / "b.png")
    assert len(_requests(proxy)) == _pages(n) + 1
    # a window other than the summaries' reads the episodes, concurrently, once each (then cached)
    proxy.reset_counts()
    sweep.plot(tmp_path / "c.png", window=5)
    assert sum(r.is_download and "metrics.jsonl" in r.path for r in _requests(proxy)) == n


def test_a_sweep_from_before_summaries_reads_its_records(
    fake_gcs: FakeGcsServer, gcs_bucket: str, reader_via: Callable[[], FaultyProxy]
) -> None:
    import rlcloud

    n = 10
    _written(fake_gcs, gcs_bucket, n, summaries=False)
    with_summaries = f"gs://{gcs_bucket}/lr"
    proxy = reader_via()
    old = rlcloud.compare(with_summaries)
    assert len(old) == n
    # no summary: the spec, progress, metrics and evaluation of each trial, one request each (none indexed:
    # the index holds stored summaries only)
    assert len(_requests(proxy)) == 2 + 4 * n and proxy.uploads == 0
    proxy.reset_counts()
    assert rlcloud.compare(with_summaries).equals(old)
    assert len(_requests(proxy)) == 2  # the summaries built the first time are cached by their records


def test_a_stale_summary_is_rebuilt_from_the_records(
    fake_gcs: FakeGcsServer, gcs_bucket: str, reader_via: Callable[[], FaultyProxy]
) -> None:
    import rlcloud

    spec, store = _written(fake_gcs, gcs_bucket, 4)
    trials = spec.trials()
    location = f"gs://{gcs_bucket}/lr"
    proxy = reader_via()
    fresh = rlcloud.compare(location).set_index("run")
    # trial 0: episodes appended after its summary was written (a run between two checkpoints)
    grown = trial_files(trials[0], EPISODES)["metrics.jsonl"] + b"".join(
        json.dumps({"episode": EPISODES + k, "timestep": 10_000 + k, "return": 1000.0}).encode() + b"\n"
        for k in range(1, 21)
    )
    store.write_bytes(f"{trials[0].name}/metrics.jsonl", grown)
    # trial 1: a summary written by another version of rlcloud, with a wrong objective
    summary = json.loads(store.read_bytes(f"{trials[1].name}/run-summary.json"))
    store.write_bytes(
        f"{trials[1].name}/run-summary.json", json.dumps({**summary, "version": 0, "objective": -1}).encode()
    )
    # trial 2: a summary whose objective was tampered with but whose sources still match is taken as written
    store.write_bytes(f"{trials[2].name}/run-summary.json", json.dumps({**json.loads(
        store.read_bytes(f"{trials[2].name}/run-summary.json")), "objective": 12345.0}).encode())  # fmt: skip

    proxy.reset_counts()
    table = rlcloud.compare(location).set_index("run")
    assert table.loc[trials[0].name, "objective"] == 1000.0  # rebuilt: the last 20 returns are the new ones
    assert table.loc[trials[0].name, "timesteps"] == fresh.loc[trials[0].name, "timesteps"]  # progress as stored
    assert table.loc[trials[1].name, "objective"] == fresh.loc[trials[1].name, "objective"]  # rebuilt, not -1
    assert table.loc[trials[2].name, "objective"] == 12345.0  # a current summary is what it says
    assert table.loc[trials[3].name, "objective"] == fresh.loc[trials[3].name, "objective"]
    # the two rebuilt trials read their progress, metrics and evaluation; the summaries' new generations too
    downloads = sorted(r.path.rsplit("%2F", 1)[-1] for r in _requests(proxy) if r.is_download)
    # trials 0 and 1 are rebuilt: their records are read (once); the new summaries of trials 1 and 2 too;
    # the specs and trial 0's and 3's summaries come from the cache
    assert downloads == sorted(["evaluation.jsonl", "metrics.jsonl", "progress.json"] * 2 + ["run-summary.json"] * 2)


def test_the_cache_never_answers_for_a_newer_generation(
    fake_gcs: FakeGcsServer, gcs_bucket: str, reader_via: Callable[[], FaultyProxy]
) -> None:
    import rlcloud

    spec, store = _written(fake_gcs, gcs_bucket, 2)
    name = spec.trials()[0].name
    location = f"gs://{gcs_bucket}/lr"
    proxy = reader_via()
    rlcloud.compare(location)
    # the trial is resumed and finishes again: new records and a new summary (new generations)
    for record, data in trial_files(spec.trials()[0], EPISODES + 10).items():
        if record in ("metrics.jsonl", "progress.json", "run-summary.json", "evaluation.jsonl"):
            store.write_bytes(f"{name}/{record}", data)
    proxy.reset_counts()
    table = rlcloud.compare(location).set_index("run")
    assert table.loc[name, "episodes"] == EPISODES + 10
    assert [r.path.rsplit("%2F", 1)[-1] for r in _requests(proxy) if r.is_download] == ["run-summary.json"]


def test_a_single_run_costs_a_listing_and_two_reads(
    fake_gcs: FakeGcsServer, gcs_bucket: str, reader_via: Callable[[], FaultyProxy]
) -> None:
    import rlcloud

    spec, _ = _written(fake_gcs, gcs_bucket, 2)
    proxy = reader_via()
    names = [t.name for t in spec.trials()]
    table = rlcloud.compare([f"gs://{gcs_bucket}/lr/{n}" for n in names])
    assert list(table["run"]) == names
    assert len(_requests(proxy)) == 2 * 3  # per run: its listing, its spec, its summary


@pytest.mark.parametrize("n", [10, 100])
def test_cluster_sweep_status_from_new_processes(
    n: int,
    fake_gcs: FakeGcsServer,
    gcs_bucket: str,
    reader_via: Callable[[], FaultyProxy],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    """``sweep status`` of a finished sweep on a cluster: 3 Kubernetes calls, then the sweep's progress records
    (a listing; the index's entries, else one read per trial; then the cache), never 2 requests per trial."""
    from kubernetes import client

    import rlcloud
    from rlcloud.k8s.applier import RetryPolicy
    from rlcloud.k8s.backend import KubernetesBackend
    from tests.fakes.kube_apiserver import FakeKubeApiServer

    spec, _ = _written(fake_gcs, gcs_bucket, n)
    proxy = reader_via()
    with FakeKubeApiServer() as server:

        def backend() -> KubernetesBackend:  # a new process: nothing read before in memory
            api = client.ApiClient(client.Configuration(host=server.url))
            made = KubernetesBackend(api, namespace="s", image="rlcloud:t", retry=RetryPolicy(attempts=2, initial=0.01))
            made.ensure_namespace()
            return made

        backend().start_sweep(spec, f"gs://{gcs_bucket}")
        for job in server.list_objects("Job", "s"):
            done = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": n}
            server.update_status("Job", job["metadata"]["name"], "s", {**done, "completedIndexes": f"0-{n - 1}"})

        proxy.reset_counts()
        status = backend().sweep_status("lr")
        assert status.state == "succeeded" and {t.progress.state for t in status.trials} == {"succeeded"}
        assert len(_requests(proxy)) == _pages(n) + 1 + n  # the records' and the index's listings; no index yet
        proxy.reset_counts()
        backend().sweep_status("lr")
        assert len(_requests(proxy)) == _pages(n) + 1  # cached by generation

        rlcloud.compare(f"gs://{gcs_bucket}/lr")  # a reader leaves the sweep's index
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "another-machine"))
        proxy.reset_counts()
        assert backend().sweep_status("lr").state == "succeeded"
        assert len(_requests(proxy)) == _pages(n) + 1 + _shards(spec)  # the index stands for every trial
