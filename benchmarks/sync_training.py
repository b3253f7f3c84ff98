"""Does syncing results to ``gs://`` slow training down, and how soon is a checkpoint stored? (issue 15, goal 4)

Trains CartPole PPO (``run_mode: multi-threaded``, ``--workers`` environments, ``--timesteps`` steps, a
checkpoint every ``--saver`` e.g. ``10s``) with the runner exactly as a pod runs it,
``python -m rlcloud.runner --role multi --spec ... --workdir ...``, its output read through a pipe (so it
also tees its log into ``logs/``, as in a pod), in two configurations, interleaved round by round:

- local:  results in the work directory only (no ``RLCLOUD_RESULTS``, nothing synced);
- gs:     ``RLCLOUD_RESULTS=gs://bucket/...`` through a proxy (a process of its own) that holds every request
  ``--latency-ms`` (default 20) before passing it to fake-gcs-server, like the round trip from a GKE pod
  to Cloud Storage; the runner restores (nothing), syncs in its background thread every
  ``RLCLOUD_SYNC_INTERVAL`` (``--sync-interval``, default the runner's 30 s) and at each checkpoint.

Printed: steps/s of each run (env steps over the training loop's own clock, first to last episode record in
``metrics.jsonl``: TensorFlow's import and the agent's construction are left out) and the median ratio
gs / local (goal >= 0.95); for every checkpoint of the gs runs, the delay between the runner's log line
saying it is complete on disk (written right after the local ``checkpoints/LATEST`` names it) and the
syncer's log line saying the stored ``LATEST`` names it (written after that write has been answered, so
the figure is an upper bound): median and max (goal <= 2 s); and the machine's core count. After each gs run
the stored ``LATEST`` is read back and must name the local one. Also printed: the runner process's CPU
seconds (``progress.json``), a figure less sensitive than wall time to what else runs on the machine. Run
with::

    uv run --frozen python benchmarks/sync_training.py [--rounds 3] [--timesteps 60000] [--workers 8]

Timings on a shared machine vary; compare figures from one run.

Measured 2026-11-23 on the 2-core development VM (shared with three other jobs), defaults, ``--rounds 5``:
steps/s local 4798 (median; 4252-5424), gs 4725 (4604-4952): ratio 0.985 (per round 0.87-1.15); runner
CPU seconds 24.6 vs 25.0 (+2%, mostly importing the storage client); 20 checkpoints stored a median
0.12 s, at most 0.13 s, after they were complete on disk. An earlier run of 3 rounds, with the previous
upload path (``Blob`` uploads, a read-back of LATEST), on a busier machine: 2584 vs 2750 steps/s (1.064),
16 checkpoints, median 0.19 s, max 0.63 s. The results sync already ran in a background thread that a
checkpoint wakes, uploading the checkpoint before anything else; nothing in it needed to move.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fakes

from tests.fakes.faulty_proxy import proxy_process
from tests.fakes.gcs import FakeGcsServer

from rlcloud.specs import ExperimentSpec

AGENT = {
    "type": "ppo",
    "batch_size": 5,
    "learning_rate": 1e-3,
    "baseline": {"type": "auto", "size": 32, "depth": 1},
    "baseline_optimizer": {"optimizer": "adam", "learning_rate": 1e-3, "multi_step": 10},
}
_STAMP = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"
_COMPLETE = re.compile(_STAMP + r" .*rlcloud\.runner\.loop: checkpoint (ckpt-\d+) \(timestep")
_PUBLISHED = re.compile(_STAMP + r" .*rlcloud\.storage\.sync: published checkpoint (ckpt-\d+) to ")


@dataclass
class Run:
    """One training run: its steps/s and, when synced, each checkpoint's delay to the store."""

    steps_per_s: float
    cpu_s: float
    delays: dict[str, float] = field(default_factory=dict)
    unpublished: list[str] = field(default_factory=list)


def _stamp(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def steps_per_second(workdir: Path) -> float:
    """Env steps per second of the training loop, from its first to its last episode record."""
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines() if line]
    first, last = records[0], records[-1]
    return (last["timestep"] - first["timestep"]) / (last["time"] - first["time"])


def train(spec_path: Path, workdir: Path, env: dict[str, str], log: Path) -> list[str]:
    """Run the runner to the end, its output through a pipe (as in a pod); returns its log lines."""
    command = [sys.executable, "-m", "rlcloud.runner", "--role", "multi", "--spec", str(spec_path)]
    command += ["--workdir", str(workdir)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    assert proc.stdout is not None

    def read() -> None:
        assert proc.stdout is not None
        lines.extend(proc.stdout)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    code = proc.wait(timeout=1800)
    reader.join(30)
    log.write_text("".join(lines))
    if code != 0:
        raise SystemExit(f"the runner exited with {code}; its output is in {log}")
    return lines


def checkpoint_delays(lines: list[str]) -> tuple[dict[str, float], list[str]]:
    """Seconds from "checkpoint X (complete on disk)" to "published checkpoint X", per checkpoint; and
    the checkpoints never published (a later one superseded them before the syncer got to them)."""
    complete: dict[str, float] = {}
    published: dict[str, float] = {}
    for line in lines:
        if m := _COMPLETE.search(line):
            complete.setdefault(m.group(2), _stamp(m.group(1)))
        elif m := _PUBLISHED.search(line):
            published.setdefault(m.group(2), _stamp(m.group(1)))
    delays = {name: published[name] - t for name, t in complete.items() if name in published}
    return delays, [name for name in complete if name not in published]


def report(runs: dict[str, list[Run]], args: argparse.Namespace) -> None:
    """The medians, the ratio gs / local, CPU seconds and checkpoint delays, as printed at the end."""
    local = [r.steps_per_s for r in runs["local"]]
    gs = [r.steps_per_s for r in runs["gs"]]
    delays = sorted(d for r in runs["gs"] for d in r.delays.values())
    ratios = [g / loc for g, loc in zip(gs, local, strict=True)]
    print(f"\n{os.cpu_count()} CPUs; steps/s, median of {args.rounds} (all runs):")
    print(f"  local results      {statistics.median(local):8.0f}   {[round(x) for x in local]}")
    print(f"  gs:// via {args.latency_ms:g} ms  {statistics.median(gs):8.0f}   {[round(x) for x in gs]}")
    print(
        f"  ratio gs / local: {statistics.median(gs) / statistics.median(local):.3f} (of medians; per round "
        f"{', '.join(f'{x:.3f}' for x in ratios)}; goal >= 0.95)"
    )
    cpu_local = statistics.median(r.cpu_s for r in runs["local"])
    cpu_gs = statistics.median(r.cpu_s for r in runs["gs"])
    print(
        f"  runner process CPU seconds (whole run: imports, restore, training, final sync), median: local "
        f"{cpu_local:.1f}, gs {cpu_gs:.1f} ({cpu_gs / cpu_local - 1:+.1%})"
    )
    if delays:
        print(
            f"checkpoint complete on disk -> LATEST stored: {len(delays)} checkpoints, median "
            f"{statistics.median(delays):.2f} s, max {delays[-1]:.2f} s (goal <= 2 s)"
        )
    superseded = sum(len(r.unpublished) for r in runs["gs"])
    if superseded:
        print(f"  {superseded} checkpoints were superseded by a newer one before they were stored")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timesteps", type=int, default=60_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--saver", default="5s", help="saver_frequency (e.g. 10s, 20e, 5000t)")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="added per request to the store")
    parser.add_argument("--sync-interval", type=float, default=None, help="RLCLOUD_SYNC_INTERVAL (default 30)")
    parser.add_argument("--keep", action="store_true", help="keep the work directories (and runner logs)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="rlcloud-synctrain-"))
    spec = ExperimentSpec(
        name="synctrain",
        environment={"type": "gym", "level": "CartPole-v1"},
        agent=AGENT,
        network="auto",
        seed=1,
        run_mode="multi-threaded",
        num_workers=args.workers,
        total_timesteps=args.timesteps,
        saver_frequency=args.saver,
        summary_frequency="30s",
    )
    spec_path = work / "spec.yaml"
    spec_path.write_text(spec.to_yaml())
    print(
        f"CartPole PPO, multi-threaded x{args.workers}, {args.timesteps} timesteps, checkpoint every {args.saver}; "
        f"store through a proxy adding {args.latency_ms:g} ms per request; {os.cpu_count()} CPUs; "
        f"{args.rounds} rounds, local and gs interleaved"
    )
    runs: dict[str, list[Run]] = {"local": [], "gs": []}
    base_env = {k: v for k, v in os.environ.items() if k not in ("RLCLOUD_RESULTS", "STORAGE_EMULATOR_HOST")}
    base_env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    try:
        with FakeGcsServer() as server, proxy_process(server.url, latency_ms=args.latency_ms) as url:
            client = server.client_for()
            for r in range(args.rounds):
                order = ("local", "gs") if r % 2 == 0 else ("gs", "local")
                for mode in order:
                    workdir = work / f"{mode}-{r}"
                    env = dict(base_env)
                    bucket = ""
                    if mode == "gs":
                        bucket = server.create_bucket()
                        env["RLCLOUD_RESULTS"] = f"gs://{bucket}/synctrain"
                        env["STORAGE_EMULATOR_HOST"] = url
                        if args.sync_interval is not None:
                            env["RLCLOUD_SYNC_INTERVAL"] = str(args.sync_interval)
                    lines = train(spec_path, workdir, env, work / f"{mode}-{r}.log")
                    progress = json.loads((workdir / "progress.json").read_text())
                    run = Run(steps_per_second(workdir), float(progress.get("cpu_seconds") or 0.0))
                    if mode == "gs":
                        run.delays, run.unpublished = checkpoint_delays(lines)
                        local = (workdir / "checkpoints" / "LATEST").read_text().strip()
                        stored = client.bucket(bucket).blob("synctrain/checkpoints/LATEST").download_as_text()
                        assert stored.strip() == local, (stored, local)
                    runs[mode].append(run)
                    extra = ""
                    if run.delays:
                        d = sorted(run.delays.values())
                        superseded = f" ({len(run.unpublished)} superseded)" if run.unpublished else ""
                        extra = (
                            f", {len(d)} checkpoints stored after median {statistics.median(d):.2f} s, "
                            f"max {d[-1]:.2f} s{superseded}"
                        )
                    print(
                        f"round {r + 1} {mode:<5} {run.steps_per_s:8.0f} steps/s, {run.cpu_s:.1f} CPU s{extra}",
                        flush=True,
                    )
            client.close()
    finally:
        if args.keep:
            print(f"work directories and runner logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    report(runs, args)


if __name__ == "__main__":
    main()
