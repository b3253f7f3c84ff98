"""What a local sweep's trials spend outside training: per-trial overhead, and the sweep's wall time.

    uv run --frozen python benchmarks/sweep_overhead.py [--trials 16] [--timesteps 3000] [--parallel 2]
        [--mode warm|cold|both]

A sweep of ``--trials`` seeds of CartPole PPO (examples/cartpole_ppo.yaml in ``single`` mode, no saver,
summaries or evaluation) runs locally at ``max_parallel`` ``--parallel``. ``--mode cold`` sets
``RLCLOUD_WARM_TRIALS=0`` (every trial its own supervisor and runner process, as before issue 30);
``warm`` leaves trials to the sweep's long-lived workers (rlcloud.local.worker). Printed per mode:

* each trial's wall time (its start in history.jsonl to its last progress.json update), its training
  time (the loop's ``elapsed`` in its last checkpoint: the first act to the last step, tracing included)
  and their difference, the overhead: process start, imports, building the agent, the final save;
* the overhead of the trials after the first ``--parallel`` ones (the first trial of each worker pays the
  imports), median and maximum. Goal: <= 2 s;
* the sweep's wall time against the summed training time / ``--parallel``. Goal: <= 1.15.

Measured 2026-11-25 on the 2-core development VM shared with other sessions (load average ~9 throughout),
16 trials x 3,000 timesteps, max_parallel 2, ``--mode both`` (one command, the same load for both):

* cold (a supervisor and a runner per trial): overhead after the first two trials median 25.5 s, max
  30.1 s; sweep wall 332.1 s against 68.4 s of summed training / 2: ratio 4.86.
* warm (workers, importing while the smoke trial runs): overhead median 1.6 s, max 2.2 s (the second
  worker's first trial: 1.3 s); sweep wall 109.1 s against 67.8 s: ratio 1.61. What is left is the first
  trial's start (17.4 s: Python, the imports, the first agent; the other slot warms meanwhile but waits
  for the smoke trial) and ~1.5 s a trial for building the agent and its last checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "examples" / "cartpole_ppo.yaml"


def _trial_times(workdir: Path) -> tuple[float, float]:
    """(wall, training) seconds of one finished trial, from its results."""
    history = [json.loads(line) for line in (workdir / "history.jsonl").read_text().splitlines() if line.strip()]
    progress = json.loads((workdir / "progress.json").read_text())
    latest = (workdir / "checkpoints" / "LATEST").read_text().strip()
    state = json.loads((workdir / "checkpoints" / latest / "state.json").read_text())
    return float(progress["updated"]) - float(history[-1]["time"]), float(state["elapsed"])


def run(mode: str, trials: int, timesteps: int, parallel: int) -> dict[str, Any]:
    """Run one sweep in ``mode`` (warm/cold) and print its figures."""
    from rlcloud import ExperimentSpec, Sweep, SweepSpec

    base = ExperimentSpec.from_file(
        EXPERIMENT,
        run_mode="single",
        num_workers=1,
        total_timesteps=timesteps,
        saver_frequency=None,
        summary_frequency=None,
        evaluation=None,
    )
    spec = SweepSpec(name=f"overhead-{mode}", experiment=base, seeds=trials, max_parallel=parallel)
    os.environ["RLCLOUD_WARM_TRIALS"] = "1" if mode == "warm" else "0"
    with tempfile.TemporaryDirectory() as tmp:
        sweep = Sweep(spec, results=tmp)
        start = time.monotonic()
        sweep.start()
        status = sweep.wait(timeout=7200, poll_interval=0.25)
        wall = time.monotonic() - start
        rows = []
        for trial in status.trials:
            trial_wall, training = _trial_times(Path(tmp) / spec.name / trial.name)
            rows.append((trial.name, trial.state, trial_wall, training))
    print(f"\n{mode}: {trials} trials x {timesteps} timesteps, max_parallel {parallel}: {status.counts()}")
    print(f"{'trial':>24} {'state':>10} {'wall s':>8} {'train s':>8} {'overhead s':>10}")
    for name, state, trial_wall, training in rows:
        print(f"{name:>24} {state:>10} {trial_wall:8.1f} {training:8.1f} {trial_wall - training:10.1f}")
    # trials start in table order: the first `parallel` are the first of each worker
    later = [w - t for _n, _s, w, t in rows[parallel:]] or [w - t for _n, _s, w, t in rows]
    training_sum = sum(t for _n, _s, _w, t in rows)
    ideal = training_sum / parallel
    print(f"overhead after the first {parallel}: median {statistics.median(later):.1f} s, max {max(later):.1f} s "
          "(goal <= 2 s)")  # fmt: skip
    print(f"sweep wall {wall:.1f} s; summed training / {parallel} = {ideal:.1f} s; ratio {wall / ideal:.2f} "
          "(goal <= 1.15)")  # fmt: skip
    return {"mode": mode, "wall": wall, "ideal": ideal, "overhead_median": statistics.median(later)}


def main() -> None:
    """Parse the command line and run the sweep(s)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--timesteps", type=int, default=3000)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--mode", choices=("warm", "cold", "both"), default="both")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    modes = ("cold", "warm") if args.mode == "both" else (args.mode,)
    for mode in modes:
        run(mode, args.trials, args.timesteps, args.parallel)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
