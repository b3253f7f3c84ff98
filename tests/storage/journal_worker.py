"""Appends to a study's journal in the results store from a process of its own (tests/storage/test_journal.py).

``journal_worker.py append LOCATION WORKER COUNT``: prints ``ready`` once its store is open, waits for a line on
stdin (every worker starts at once), appends ``{"worker": WORKER, "seq": i}`` for i < COUNT in calls of 1, 2 or 3
logs, and prints ``{"conflicts": n}``.
``journal_worker.py tpe LOCATION TRIALS SEED``: the same start, then asks the study ``sweep`` (TPE, seeded by
SEED) TRIALS times for ``x`` in [-10, 10] and tells it ``-(x - 3)**2``; prints ``{"numbers": [...]}``.
"""

from __future__ import annotations

import json
import sys

from rlcloud.storage import open_store
from rlcloud.storage.journal import StoreJournal, open_study


def main(argv: list[str]) -> int:
    mode, location, arg, count = argv[0], argv[1], int(argv[2]), int(argv[3]) if len(argv) > 3 else 0
    store = open_store(location)
    store.list("study/")  # the store's client made and connected before the start
    print("ready", flush=True)
    sys.stdin.readline()
    if mode == "append":
        journal = StoreJournal(store)
        seq = 0
        while seq < count:
            batch = [{"worker": arg, "seq": i} for i in range(seq, min(count, seq + 1 + seq % 3))]
            journal.append_logs(batch)
            seq += len(batch)
        print(json.dumps({"conflicts": journal.conflicts}), flush=True)
        return 0
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = open_study(store, "sweep", seed=count)
    numbers = []
    for _ in range(arg):
        trial = study.ask()
        x = trial.suggest_float("x", -10, 10)
        study.tell(trial, -((x - 3) ** 2))
        numbers.append(trial.number)
    print(json.dumps({"numbers": numbers}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
