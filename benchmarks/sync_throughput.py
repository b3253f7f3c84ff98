"""Upload throughput of rlcloud's results sync against fake-gcs-server, with two baselines.

Tree: N small files (default 500 x 16 KiB) + M large ones (default 2 x 64 MiB), random bytes.

- naive:   a sequential loop of ``blob.upload_from_filename`` (one ``storage.Client()``, defaults);
- rlcloud: ``Syncer(tree, open_store("gs://...")).sync()`` (one listing, transfer_manager threads);
  both clients come from ``STORAGE_EMULATOR_HOST``, as in a pod;
- cp -r:   the same tree copied on local disk (the physical limit of this machine);
- re-sync: a second sync with nothing changed, through a counting proxy: listing calls, uploads,
  requests in all (goal: 1 listing, 0 uploads), for the same Syncer (warm CRC cache) and a new one
  (a restarted runner, which hashes every file once).

Each timed case runs ``--repeats`` times into a fresh bucket; the median is printed. Run with
``uv run --frozen python benchmarks/sync_throughput.py``. Timings on a shared machine vary; compare
figures from one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fakes

from tests.fakes.faulty_proxy import FaultyProxy
from tests.fakes.gcs import FakeGcsServer

from rlcloud.storage import Syncer, open_store
from rlcloud.storage.gcs import GcsStore


def make_tree(root: Path, small: int, small_kib: int, large: int, large_mib: int) -> int:
    total = 0
    for i in range(small):
        path = root / "summaries" / f"run-{i % 10}" / f"events.{i:04d}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(small_kib << 10))
        total += small_kib << 10
    for i in range(large):
        path = root / "replay" / f"buffer-{i}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            for _ in range(large_mib):
                fh.write(os.urandom(1 << 20))
        total += large_mib << 20
    return total


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=500)
    parser.add_argument("--small-kib", type=int, default=16)
    parser.add_argument("--large", type=int, default=2)
    parser.add_argument("--large-mib", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="rlcloud-bench-"))
    try:
        tree = work / "tree"
        total = make_tree(tree, args.small, args.small_kib, args.large, args.large_mib)
        files = sorted(p for p in tree.rglob("*") if p.is_file())
        mb = total / 1e6
        print(
            f"tree: {args.small} x {args.small_kib} KiB + {args.large} x {args.large_mib} MiB = "
            f"{len(files)} files, {mb:.1f} MB; {os.cpu_count()} CPUs; {args.repeats} repeats, median shown"
        )

        with FakeGcsServer() as server:
            os.environ["STORAGE_EMULATOR_HOST"] = server.url
            from google.cloud import storage

            client = storage.Client()
            times: dict[str, list[float]] = {"naive": [], "rlcloud": [], "cp": []}
            last_syncer: Syncer | None = None
            last_bucket = ""
            for r in range(args.repeats):
                bucket = server.create_bucket()
                b = client.bucket(bucket)

                def naive(b: object = b) -> None:
                    for path in files:
                        b.blob("naive/" + path.relative_to(tree).as_posix()).upload_from_filename(str(path))  # type: ignore[attr-defined]

                times["naive"].append(timed(naive))

                bucket = server.create_bucket()
                store = open_store(f"gs://{bucket}/exp", max_workers=args.workers)
                syncer = Syncer(tree, store)
                report = None

                def sync(syncer: Syncer = syncer) -> None:
                    nonlocal report
                    report = syncer.sync()

                times["rlcloud"].append(timed(sync))
                assert report is not None and len(report.uploaded) == len(files), report
                last_syncer, last_bucket = syncer, bucket

                dst = work / f"cp-{r}"
                times["cp"].append(timed(lambda dst=dst: subprocess.run(["cp", "-r", str(tree), str(dst)], check=True)))
                shutil.rmtree(dst)

            med = {k: statistics.median(v) for k, v in times.items()}
            print(f"{'case':<28}{'seconds':>9}{'MB/s':>9}   all runs")
            for key, label in (
                ("naive", "naive upload loop"),
                ("rlcloud", "rlcloud Syncer.sync()"),
                ("cp", "cp -r (local disk)"),
            ):
                runs = ", ".join(f"{t:.2f}" for t in times[key])
                print(f"{label:<28}{med[key]:>9.2f}{mb / med[key]:>9.1f}   [{runs}]")
            print(f"speed-up of rlcloud over the naive loop: {med['naive'] / med['rlcloud']:.2f}x (goal >= 5x)")
            print(f"rlcloud time / cp -r time: {med['rlcloud'] / med['cp']:.1f}x")

            # no-change re-syncs, counted at a proxy in front of the same server
            assert last_syncer is not None
            with FaultyProxy(server.url) as proxy:
                proxied = server.client_for(proxy.url)
                try:
                    for label, syncer in (
                        ("same Syncer (warm cache)", last_syncer),
                        ("new Syncer (restarted)", Syncer(tree, GcsStore(last_bucket, "exp", client=proxied))),
                    ):
                        if syncer is last_syncer:
                            syncer.store = GcsStore(last_bucket, "exp", client=proxied)
                        proxy.reset_counts()
                        start = time.perf_counter()
                        rep = syncer.sync()
                        took = time.perf_counter() - start
                        print(
                            f"no-change re-sync, {label}: {took:.3f} s, listing calls {proxy.list_calls}, "
                            f"uploads {proxy.uploads}, requests {len(proxy.snapshot())}, "
                            f"unchanged {rep.unchanged} (goal: 1 listing, 0 uploads)"
                        )
                finally:
                    proxied.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
