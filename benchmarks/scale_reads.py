"""Reading a finished sweep back from Cloud Storage at scale (issue 36): requests, bytes, seconds, peak RSS.

A finished sweep of N trials (2 configurations x N/2 seeds, E episodes each) is written in the project's
results layout (tests/support/written_runs.py: spec, history, progress, metrics, evaluation, a checkpoint, a
log and the runner's run-summary.json) to fake-gcs-server, then read through tests/fakes/faulty_proxy.py
holding every request ``--latency`` seconds (80 ms: a laptop talking to Cloud Storage). Each path runs in a
process of its own (``python -m ...`` of this file, as a user's command would), first with an empty object
cache ("1st"; for compare, results() and plot() the first of them writes the sweep's index), then with the
cache the first run left ("2nd"), then with an empty cache again ("other machine": the index only):

- ``compare``: ``rlcloud compare gs://.../SWEEP -o json`` (the per-configuration table);
- ``results()``: ``Sweep.results()`` (one row per trial);
- ``plot()``: ``Sweep.plot(path)``;
- ``sweep status``: ``Sweep.status()`` of the sweep on a cluster (the fake kube-apiserver holds its Indexed
  Job, every trial succeeded), from a new process.

Usage::

    uv run --frozen python benchmarks/scale_reads.py [--sizes 100 1000] [--episodes 100] [--latency 0.08]

Requests are counted by the proxy (exact whatever the load; google-cloud-storage's one background read of
the bucket's metadata per process included), bytes are the response bodies it sent, seconds the path's
own (the heavy libraries' imports, paid once by any command, are timed apart), peak RSS the process's.
Figures of this machine are in the README ("At scale").
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.fakes, tests.storage

PATHS = ("compare", "results()", "plot()", "sweep status")


def _counting_proxy(upstream: str, latency: float) -> Any:
    """A FaultyProxy that also counts the bytes of the bodies it sends back."""
    from tests.fakes.faulty_proxy import FaultyProxy

    class Counting(FaultyProxy):
        bytes_sent = 0
        _count_lock = threading.Lock()

        def _handler_class(self) -> Any:
            base = super()._handler_class()
            owner = self

            class Handler(base):  # type: ignore[misc, valid-type]
                def _send(self, status: int, headers: Any, body: bytes, *, truncate: bool = False) -> None:
                    with owner._count_lock:
                        owner.bytes_sent += len(body)
                    super()._send(status, headers, body, truncate=truncate)

            return Handler

    return Counting(upstream, latency_s=latency).start()


def child(path: str, bucket: str, trials: int, kube: str | None) -> None:
    """Run one path in this process and print its seconds and peak RSS as JSON."""
    from tests.support.written_runs import sweep_spec

    from rlcloud import Sweep

    spec = sweep_spec("lr", trials)
    t0 = time.perf_counter()
    # the libraries a path imports on first use, timed apart: what any command pays once, not the reading
    import google.cloud.storage  # noqa: F401
    import pandas  # noqa: F401
    import scipy.stats  # noqa: F401

    if path == "plot()":
        import matplotlib.pyplot  # noqa: F401
    imports = time.perf_counter() - t0
    t0 = time.perf_counter()
    if path == "compare":
        from rlcloud.cli import main

        with contextlib.redirect_stdout(io.StringIO()):
            main(["compare", f"gs://{bucket}/lr", "-o", "json"])
    elif path == "results()":
        Sweep(spec, results=f"gs://{bucket}").results()
    elif path == "plot()":
        with tempfile.TemporaryDirectory() as tmp:
            Sweep(spec, results=f"gs://{bucket}").plot(Path(tmp) / "sweep.png")
    elif path == "sweep status":
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import sweep_objects

        from rlcloud.cluster import Cluster

        assert kube is not None
        cluster = Cluster.kubernetes(kubeconfig=kube, namespace=sweep_objects.NAMESPACE)
        status = Sweep.attach("lr", cluster=cluster).status()
        assert status.state == "succeeded", status.state
    seconds = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "imports": imports, "rss_mb": rss}))


def _run_child(path: str, bucket: str, trials: int, env: dict[str, str], kube: str | None) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", path, "--bucket", bucket, "--trials", str(trials)]
    if kube:
        command += ["--kubeconfig", kube]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{path} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _cluster_sweep(bucket: str, trials: int, workdir: Path) -> tuple[Any, str]:
    """The fake kube-apiserver holding the sweep's Indexed Job (completed: every index succeeded) and its
    ConfigMap, as KubernetesBackend.start_sweep made them; the kubeconfig that reaches it."""
    from tests.fakes.kube_apiserver import FakeKubeApiServer
    from tests.support.written_runs import sweep_spec

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import sweep_objects

    server = FakeKubeApiServer().start()
    api, backend = sweep_objects.fake_backend(server)
    spec = sweep_spec("lr", trials)
    backend.start_sweep(spec, f"gs://{bucket}")
    for job in server.list_objects("Job", sweep_objects.NAMESPACE):
        done = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": spec.num_trials,
                "completedIndexes": f"0-{spec.num_trials - 1}"}  # fmt: skip
        server.update_status("Job", job["metadata"]["name"], sweep_objects.NAMESPACE, done)
    api.close()
    kubeconfig = workdir / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(  # JSON is YAML
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": server.url}}],
                "users": [{"name": "me", "user": {"token": "t0k3n"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me"}}],
                "current-context": "fake",
            }
        )
    )
    return server, str(kubeconfig)


def measure(trials: int, episodes: int, latency: float, paths: list[str]) -> list[dict[str, Any]]:
    """Write a sweep of ``trials`` trials and read it back each way; one row per path and read."""
    from tests.fakes.gcs import FakeGcsServer
    from tests.support.written_runs import sweep_spec, write_sweep

    from rlcloud.storage.gcs import GcsStore

    rows = []
    with FakeGcsServer() as fake, tempfile.TemporaryDirectory() as tmp:
        bucket = fake.create_bucket()
        t0 = time.perf_counter()
        write_sweep(GcsStore(bucket, "lr", client=fake.client()), sweep_spec("lr", trials), episodes)
        print(f"  wrote {trials} trials x {episodes} episodes in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        proxy = _counting_proxy(fake.url, latency)
        kube_server, kubeconfig = (None, None)
        if "sweep status" in paths:
            kube_server, kubeconfig = _cluster_sweep(bucket, trials, Path(tmp))
        try:
            for path in paths:
                cache = Path(tmp) / f"cache-{path.strip('()').replace(' ', '-')}"
                env = {**os.environ, "STORAGE_EMULATOR_HOST": proxy.url, "XDG_CACHE_HOME": str(cache)}
                for read in ("1st", "2nd", "other machine"):
                    if read == "other machine":  # an empty cache, the index the first read left in the bucket
                        env = {**env, "XDG_CACHE_HOME": str(cache) + "-other"}
                    proxy.reset_counts()
                    proxy.bytes_sent = 0
                    got = _run_child(path, bucket, trials, env, kubeconfig)
                    records = proxy.snapshot()
                    rows.append({"trials": trials, "episodes": episodes, "path": path, "read": read,
                                 "requests": len(records), "bytes": proxy.bytes_sent, **got})  # fmt: skip
                    print(f"  {path} ({read}): {rows[-1]}", file=sys.stderr)
        finally:
            proxy.stop()
            if kube_server is not None:
                kube_server.stop()
    return rows


def main() -> None:
    """Print the table (or, with --child, run one path)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.08)
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    parser.add_argument("--child", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument("--bucket", help=argparse.SUPPRESS)
    parser.add_argument("--trials", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.bucket, args.trials, args.kubeconfig)
        return
    rows = []
    for n in args.sizes:
        rows.extend(measure(n, args.episodes, args.latency, args.paths))
    print(f"{os.cpu_count()} CPUs; fake-gcs-server behind a proxy holding each request {args.latency * 1000:.0f} ms\n")
    print("| trials x episodes | path | read | requests | bytes | seconds (+ imports) | peak RSS |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['trials']:,} x {r['episodes']:,} | {r['path']} | {r['read']} | {r['requests']:,} | "
            f"{r['bytes'] / 1e6:.1f} MB | {r['seconds']:.1f} (+ {r['imports']:.1f}) | {r['rss_mb']:.0f} MB |"
        )


if __name__ == "__main__":
    main()
