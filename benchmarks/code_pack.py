"""Pack + upload of a project's code (issue 40): a 1 MB project to fake-gcs-server, then again unchanged.

Project: ``--files`` Python-like text files (default 256 x 4 KiB = 1 MiB) in 16 packages. Each case:

- pack:     :func:`rlcloud.codepack.pack` (walk, secret filter, deterministic tar, SHA-256);
- upload:   :func:`rlcloud.codepack.publish` to ``gs://<bucket>/runs/_code`` (a new archive: one stat, one
            create-only write);
- again:    pack + publish of the same project, nothing changed: no upload (one stat request);
- fetch:    what a pod adds to its start-up (no requirements): :func:`rlcloud.codepack.fetch` of the archive
            into an empty cache (stat, download, digest check, read-only unpack);

through a proxy that holds each request ``--latency-ms`` (default 50: a laptop's round trip to Cloud
Storage) and counts requests and uploads. Goals: pack + upload <= 2 s; no upload when unchanged; a pod's
extra start-up <= 5 s.
Run with ``uv run --frozen python benchmarks/code_pack.py``.

Measured 2026-11-28 on the 2-core development VM (shared with seven other jobs), defaults, median of 5:
pack 0.06-0.07 s, pack + upload 0.20-0.25 s (3 requests, 1 upload), again unchanged 0.13-0.14 s (1 request,
0 uploads), a pod's fetch + unpack into an empty cache 0.34 s (3 requests).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fakes

from tests.fakes.faulty_proxy import FaultyProxy
from tests.fakes.gcs import FakeGcsServer

from rlcloud.codepack import code_location, fetch, pack, publish
from rlcloud.specs.code import CodeSpec
from rlcloud.storage.gcs import GcsStore


def make_project(root: Path, files: int, kib: int) -> int:
    """``files`` text files of ``kib`` KiB each (distinct contents), in 16 packages; returns the bytes."""
    total = 0
    for i in range(files):
        path = root / f"pkg{i % 16}" / f"module_{i:04d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        line = f"VALUE_{i} = {i}  # a line of code of module {i}\n".encode()
        data = (line * (kib * 1024 // len(line) + 1))[: kib * 1024]
        path.write_bytes(data)
        total += len(data)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=256)
    parser.add_argument("--kib", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as work, FakeGcsServer() as server:
        project = Path(work) / "project"
        size = make_project(project, args.files, args.kib)
        code = CodeSpec(path=str(project))
        print(f"project: {args.files} files, {size / 2**20:.2f} MiB; latency {args.latency_ms:g} ms per request")
        packs, firsts, agains, fetches = [], [], [], []
        with FaultyProxy(server.url, latency_s=args.latency_ms / 1000) as proxy:
            os.environ["STORAGE_EMULATOR_HOST"] = proxy.url  # the pod's open_store in fetch(), as in a pod
            client = server.client_for(proxy.url)
            try:
                for _ in range(args.repeats):
                    store = GcsStore(server.create_bucket(), "runs/_code", client=client)
                    start = time.perf_counter()
                    archive = pack(code)
                    packed = time.perf_counter()
                    proxy.reset_counts()
                    assert publish(archive, store) is True
                    done = time.perf_counter()
                    first_requests, first_uploads = len(proxy.snapshot()), proxy.uploads
                    proxy.reset_counts()
                    again_start = time.perf_counter()
                    assert publish(pack(code), store) is False
                    again_done = time.perf_counter()
                    packs.append(packed - start)
                    firsts.append(done - start)
                    agains.append(again_done - again_start)
                    again_requests, again_uploads = len(proxy.snapshot()), proxy.uploads
                    proxy.reset_counts()
                    cache = Path(tempfile.mkdtemp(dir=work))
                    fetch_start = time.perf_counter()
                    folder = fetch(code_location(f"gs://{store.bucket_name}/runs"), archive.digest, cache=cache)
                    fetches.append(time.perf_counter() - fetch_start)
                    fetch_requests = len(proxy.snapshot())
                    assert len(list(folder.rglob("*.py"))) == args.files
            finally:
                client.close()
        print(f"archive: {len(archive.data)} bytes, {archive.digest}")
        print(f"pack:                {statistics.median(packs):.3f} s (median of {args.repeats})")
        print(
            f"pack + upload:       {statistics.median(firsts):.3f} s; {first_requests} requests, "
            f"{first_uploads} upload (goal <= 2 s)"
        )
        print(
            f"again, unchanged:    {statistics.median(agains):.3f} s; {again_requests} requests, "
            f"{again_uploads} uploads (goal: 0 uploads)"
        )
        print(
            f"pod: fetch + unpack: {statistics.median(fetches):.3f} s; {fetch_requests} requests "
            "(a pod's extra start-up without requirements, goal <= 5 s)"
        )


if __name__ == "__main__":
    main()
