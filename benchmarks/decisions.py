"""What an early-stopping decision costs by the size of the sweep (rlcloud.runner.early_stop).

The last trial of an N-trial sweep decides at one point, every earlier trial's record there already in the
store (the most it ever reads at a point): fake-gcs-server (tests/fakes/gcs.py) behind the counting proxy
(tests/fakes/faulty_proxy.py) holding each request ``--latency-ms`` (default 20 ms, a GKE pod's round
trip to Cloud Storage), through rlcloud's GcsStore. Printed per N: the requests (one listing, a stat and
a read per earlier record, one create-only write), the wall time, and the bytes of the records read.
Request counts are exact; the seconds vary with the machine's load.

    uv run --frozen python benchmarks/decisions.py [--trials 10 100 1000] [--latency-ms 20]

Measured 2026-11-28 on the 2-core development VM shared with other sessions (load average ~12), 20 ms per
request, the proxy in the measuring process::

    trials  requests  lists  reads  writes  seconds  record bytes read
        10        21      1      9       1     0.36              2,448
       100       201      1     99       1     0.86             27,106
      1000      2001      1    999       1    11.42            275,504

Requests grow with the earlier trials: one listing of the point, then per earlier record a stat and a read
(every bounded record read checks the size first), plus this trial's own record looked for (a stat) and
written. Bytes per record stay constant (a record says how many it compared and their median, not each
peer's value; with each peer's value, the 1000th record alone was ~25 KB). Reads go 16 at a time (1000:
2000 round trips of 20 ms would be 40 s one after another). Each record is read once per trial and kept
(records never change), so a trial's later waits at the same point read only what is new.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fakes

from tests.fakes.faulty_proxy import FaultyProxy
from tests.fakes.gcs import FakeGcsServer

from rlcloud.runner.early_stop import EarlyStopper, record_name
from rlcloud.storage import open_store

POINT = 20_000


def measure(server: FakeGcsServer, proxy: FaultyProxy, trials: int) -> tuple[int, int, int, int, float, int]:
    """(requests, lists, reads, writes, seconds, bytes read) of the last trial's decision at POINT."""
    bucket = server.create_bucket()
    store = open_store(f"gs://{bucket}/sweep")
    names = [f"trial{i:05d}" for i in range(trials)]
    size = 0
    for i, name in enumerate(names[:-1]):
        record = {"trial": name, "index": i, "rule": "median", "timestep": POINT, "at": POINT,
                  "value": 100.0 + i % 50, "decision": "continue", "reason": "r" * 60, "compared": i,
                  "median": 120.5, "best": 130.25, "decided": 1.8e9}  # fmt: skip
        text = json.dumps(record)
        size += len(text)
        store.write_text(record_name("median", POINT, name), text, if_generation_match=0)
    stopper = EarlyStopper(
        {"rule": "median", "grace_timesteps": POINT, "min_trials": 3, "trial": names[-1], "index": trials - 1},
        value=lambda: 110.0,
        stop=lambda reason: None,
        store=store,
        peers=names[:-1],
    )
    proxy.reset_counts()
    started = time.perf_counter()
    record = stopper.try_decide(POINT, POINT)
    seconds = time.perf_counter() - started
    assert record is not None and record["compared"] == trials - 1, record
    requests = proxy.snapshot()
    return len(requests), proxy.list_calls, proxy.downloads, proxy.uploads, seconds, size


def main() -> None:
    """Print the table (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--latency-ms", type=float, default=20.0, help="held per request by the proxy")
    args = parser.parse_args()
    with FakeGcsServer() as server, FaultyProxy(server.url, latency_s=args.latency_ms / 1000) as proxy:
        os.environ["STORAGE_EMULATOR_HOST"] = server.url  # the records are written directly
        rows = []
        for trials in args.trials:
            os.environ["STORAGE_EMULATOR_HOST"] = proxy.url
            rows.append((trials, *measure(server, proxy, trials)))
    print(f"{'trials':>6}{'requests':>10}{'lists':>7}{'reads':>7}{'writes':>8}{'seconds':>9}{'record bytes read':>19}")
    for trials, requests, lists, reads, writes, seconds, size in rows:
        print(f"{trials:>6}{requests:>10}{lists:>7}{reads:>7}{writes:>8}{seconds:>9.2f}{size:>19,}")


if __name__ == "__main__":
    main()
