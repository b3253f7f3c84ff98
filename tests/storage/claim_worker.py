"""A pod's claim loop in a process of its own, for tests/storage/test_claims.py.

``claim_worker.py run LOCATION TRIALS LEASE_S OUT``: waits for a line on stdin (every worker starts at once),
then claims the sweep's next free trial (``t0`` .. ``t<TRIALS-1>``) until every trial is done. For each claim
it creates ``<OUT>.running/<trial>`` exclusively (O_EXCL: a second holder running the trial at the same time
would fail and write ``DOUBLE`` to OUT), appends the trial to OUT, and marks the claim done. At the end it
prints ``{"claimed": [...], "conflicts": n}`` (JSON) on stdout.

``claim_worker.py hold LOCATION TRIALS LEASE_S``: claims the next free trial, prints ``holding <trial> <holder>``
and renews it until killed. ``... take LOCATION TRIALS LEASE_S``: prints ``looking`` after its first look, then
claims the next trial it may (waiting for leases to expire), prints ``claimed <trial> <took_over>``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

from rlcloud.storage import open_store
from rlcloud.storage.claims import Claim, Lease, TrialClaims
from rlcloud.waiting import poll_until


def main(argv: list[str]) -> int:
    mode, location, trials, lease_s = argv[0], argv[1], int(argv[2]), float(argv[3])
    store = open_store(location)
    claims = TrialClaims(store, [f"t{i}" for i in range(trials)], job_uid="job", lease_s=lease_s)

    def claim_next() -> Claim | bool | None:
        got = claims.claim_next()
        return None if got is False else got

    if mode == "hold":
        claim = claims.claim_next()
        assert isinstance(claim, Claim)
        with Lease(claims, claim, on_lost=lambda why: os._exit(3)):
            print(f"holding {claim.name} {claims.holder}", flush=True)
            threading.Event().wait()  # renewed by the lease's thread until killed
    if mode == "take":
        assert claims.claim_next() is False  # held by the other: this first look starts its lease's age here
        print("looking", flush=True)
        got = poll_until(claim_next, None, interval=lease_s / 8)
        assert isinstance(got, Claim)
        print(f"claimed {got.name} {got.took_over}", flush=True)
        return 0
    out = Path(argv[4])
    running = Path(f"{out}.running")
    running.mkdir(exist_ok=True)
    out.touch()  # a worker that claims nothing (the others were quicker) leaves an empty list
    claims.look()  # the store's client made and connected before the start
    print("ready", flush=True)
    sys.stdin.readline()  # the go
    claimed = []
    while isinstance(claim := poll_until(claim_next, None, interval=lease_s / 8), Claim):
        with Lease(claims, claim, on_lost=lambda why: os._exit(3)) as lease:
            try:
                fd = os.open(running / claim.name, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                with out.open("a") as fh:
                    fh.write("DOUBLE\n")
                return 1
            with out.open("a") as fh:
                fh.write(claim.name + "\n")
            claimed.append(claim.name)
            os.close(fd)
            (running / claim.name).unlink()
        assert lease.finish("succeeded")
    print(json.dumps({"claimed": claimed, "conflicts": claims.conflicts}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
