"""A stand-in for ``python -m rlcloud.runner`` in the local lifecycle tests (standard library only).

It takes the runner's arguments and, for a learner role, "trains" ``STANDIN_EPISODES`` episodes of
``STANDIN_DELAY`` seconds: one ``metrics.jsonl`` record and one log line each, resuming after
``checkpoints/LATEST``. On SIGTERM it writes ``checkpoints/ckpt-<episode>`` + ``LATEST`` and exits 143
(unless ``STANDIN_IGNORE_TERM`` is set: then it ignores SIGTERM, like a runner stuck in a wait). Each process
appends its pid to ``runners.log`` in the work directory, so that a test counts the runners a run had (an
env server's line says so; it only waits for SIGTERM).

``STANDIN_HANG_AFTER=N`` makes the learner hang after episode N (no more progress.json heartbeats; SIGTERM
still checkpoints it), like a runner stuck in an env step (one resumed at or past N hangs after its first
episode: it reports training first, as a restarted runner does); with ``STANDIN_HANG_ONCE`` only the first process
of the run hangs (it leaves ``hung`` in the work directory), so a restarted one finishes.
``STANDIN_WATCHDOG`` runs the real runner's stall watchdog (:mod:`rlcloud.runner.watchdog`) over the episodes,
with ``STANDIN_STALL_TIMEOUT`` (the learner then checkpoints every episode): a hang ends it with exit 88, or
89 when the previous runner stalled too.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

terminated: list[int] = []


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", required=True)
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--spec", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    if os.environ.get("STANDIN_IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda signum, _frame: terminated.append(signum))
    workdir = Path(args.workdir)
    with open(workdir / "runners.log", "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()}\n" if args.role != "env-server" else f"env-server {os.getpid()}\n")
    if args.role == "env-server":  # serves until told to stop
        while not terminated:
            time.sleep(0.05)
        return 143
    episodes = int(os.environ.get("STANDIN_EPISODES", "5"))
    delay = float(os.environ.get("STANDIN_DELAY", "0.05"))
    latest = workdir / "checkpoints" / "LATEST"
    start = int(latest.read_text().split("-")[1]) if latest.exists() else 0
    if start:
        print(f"resumed from checkpoint ckpt-{start}", flush=True)
    hang_after = int(os.environ.get("STANDIN_HANG_AFTER", "0"))
    if hang_after and os.environ.get("STANDIN_HANG_ONCE") and (workdir / "hung").exists():
        hang_after = 0
    counters = {"timestep": start}
    if os.environ.get("STANDIN_WATCHDOG"):  # the real runner's stall watchdog over these episodes
        from rlcloud.runner.watchdog import StallWatchdog

        trainer = type("Trainer", (), {"running": True, "counters": counters})()
        stall_timeout = float(os.environ.get("STANDIN_STALL_TIMEOUT", "600"))
        StallWatchdog(trainer, stall_timeout, workdir, label=f"{args.role}-{args.index}").start()
    if hang_after and start >= hang_after:
        # a resumed learner reports training before it hangs again, as the runner does: a supervisor judges a
        # restarted runner only from its first report (its start-up, TensorFlow's import, is no stall)
        hang_after = start + 1
    for episode in range(start + 1, episodes + 1):
        if hang_after and episode > hang_after:
            (workdir / "hung").write_text(f"{os.getpid()}\n")
            print(f"hanging after episode {episode - 1}", flush=True)
            while not terminated:
                time.sleep(0.05)
        if terminated:
            name = f"ckpt-{episode - 1}"
            (workdir / "checkpoints" / name).mkdir(parents=True, exist_ok=True)
            latest.with_suffix(".tmp").write_text(name)
            latest.with_suffix(".tmp").replace(latest)
            print(f"stopped: checkpoint {name}", flush=True)
            return 143
        with open(workdir / "metrics.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"episode": episode, "pid": os.getpid()}) + "\n")
        now = time.time()
        progress = {"state": "running", "episode": episode, "timestep": episode, "updated": now, "advanced_at": now}
        progress["elapsed"] = round(episode * delay, 3)  # training seconds, as the runner counts them
        (workdir / "progress.json").write_text(json.dumps(progress))
        counters["timestep"] = episode
        if os.environ.get("STANDIN_WATCHDOG"):  # a hung learner cannot checkpoint on its way out
            (workdir / "checkpoints" / f"ckpt-{episode}").mkdir(parents=True, exist_ok=True)
            latest.with_suffix(".tmp").write_text(f"ckpt-{episode}")
            latest.with_suffix(".tmp").replace(latest)
        print(f"episode {episode}", flush=True)
        time.sleep(delay)
    print(f"succeeded: {episodes} episodes (summary)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
