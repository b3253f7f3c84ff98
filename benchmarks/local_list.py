"""``rlcloud experiment list`` over many finished local runs (issue 36, item 5): seconds for N runs.

N finished local runs are written under a temporary results root in the project's own layout, as a local run
leaves them (tests/support/written_runs.py, write_local_runs): each run's results (spec of record, history,
progress, metrics, evaluation, a checkpoint, a log and the runner's run-summary.json) plus its local state
(``.rlcloud-local/``: state.json with the learner's process record and the facts of its spec, the spec the
roles ran with, the learner's exit code 0). Then
``rlcloud experiment list -o json --results ROOT`` runs in a process of its own, as a user's command would,
and the seconds of the listing itself are printed (the interpreter's start and rlcloud's imports timed apart).

Usage::

    uv run --frozen python benchmarks/local_list.py [--runs 2000] [--no-facts] [--profile]

``--no-facts`` writes runs as rlcloud wrote them before their state.json held the goal, budget and process
count the listing reads (it then parses their specs). ``--profile`` prints the 25 functions with the most
cumulative time (cProfile) instead of timing apart.
Figures of this machine are in the README ("At scale").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.storage


COMMANDS = {
    "list": '["experiment", "list", "-o", "json", "--results", sys.argv[1]]',
    "sweep-status": '["sweep", "status", "bench", "-o", "json", "--results", sys.argv[1]]',
}

LABELS = {"list": "experiment list", "sweep-status": "sweep status"}

CHILD = """
import json, sys, time
t0 = time.perf_counter()
import rlcloud.cli, rlcloud.experiment, rlcloud.local.backend, rlcloud.specs, rich.table  # paid by any command
import rlcloud.sweep, rlcloud.specs.sweep
t1 = time.perf_counter()
from rlcloud.cli import main
code = main(COMMAND)
t2 = time.perf_counter()
print(json.dumps({"code": code, "imports_s": t1 - t0, "list_s": t2 - t1}), file=sys.stderr)
"""

PROFILE = """
import cProfile, pstats, sys
from rlcloud.cli import main
cProfile.run('main(COMMAND)', sys.argv[2])
pstats.Stats(sys.argv[2], stream=sys.stderr).sort_stats("cumulative").print_stats(25)
"""


def main() -> None:
    """Write the runs, list them in a new process, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--what", choices=sorted(COMMANDS), default="list", help="the command timed")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--no-facts", action="store_true", help="runs started before state.json held their facts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "results"
        from tests.support.written_runs import write_local_runs, write_local_sweep

        t0 = time.perf_counter()
        if args.what == "list":
            names = write_local_runs(root, args.runs, facts=not args.no_facts)
        else:
            names = write_local_sweep(root, "bench", args.runs, facts=not args.no_facts)
        print(f"wrote {len(names)} local runs in {time.perf_counter() - t0:.1f} s", flush=True)
        env = {**os.environ, "HOME": tmp, "XDG_CACHE_HOME": str(Path(tmp) / "cache")}
        code = (PROFILE if args.profile else CHILD).replace("COMMAND", COMMANDS[args.what])
        extra = [str(Path(tmp) / "profile.out")] if args.profile else []
        done = subprocess.run(
            [sys.executable, "-c", code, str(root), *extra], capture_output=True, text=True, env=env, cwd=tmp
        )
        if done.returncode != 0:
            sys.exit(done.stderr)
        rows = json.loads(done.stdout)
        if args.what == "sweep-status":
            rows = rows["trials"] if rows else []
        if args.profile or done.returncode != 0:
            print(done.stderr)
        else:
            figures = json.loads(done.stderr.strip().splitlines()[-1])
        assert sorted(r["name"] for r in rows) == sorted(names), "the listing does not name every run"
        assert all(r["state"] == "succeeded" for r in rows), rows[:2]
        if not args.profile:
            which = " (no facts)" if args.no_facts else ""
            print(
                f"{LABELS[args.what]}, {args.runs} local runs{which}: {figures['list_s']:.2f} s "
                f"({1000 * figures['list_s'] / args.runs:.2f} ms per run; imports {figures['imports_s']:.2f} s apart)"
            )


if __name__ == "__main__":
    main()
