"""Local sweeps: how well trials pack onto the cores, and what early stopping saves.

Two measurements, one command each::

    uv run --frozen python benchmarks/sweep.py packing [--trials 8] [--timesteps 3000]
    uv run --frozen python benchmarks/sweep.py early-stopping [--timesteps 20000] [--keep DIR] [--rule asha]
    uv run --frozen python benchmarks/sweep.py plot --results DIR --name NAME --out docs/img/sweep.png

* ``packing``: a sweep of ``--trials`` short CartPole PPO trials (seeds of one configuration), run
  locally with max_parallel = the core count. Printed: the sweep's wall time, the trials' summed CPU
  time (each runner's ``cpu_seconds`` in progress.json, TensorFlow's start included) divided by the
  cores (the ideal wall time), and their ratio. Goal: wall <= 1.15 x ideal.
* ``early-stopping``: a sweep where half the configurations cannot learn (learning rate 1e-9 next to
  1e-3 and 3e-3, 2 seeds each), run twice: without and with the median stopping rule. Printed: total
  timesteps trained and wall time of each, the fraction saved, and the best trial's objective in
  both. Goals: >= 30 % of timesteps saved, the best trial unchanged.

Measured 2026-11-23 on the 2-core development VM, nothing else running:

* packing, 8 trials x 3,000 timesteps, max_parallel 2: wall 65.0 s, summed trial CPU / cores 56.6 s
  (113.2 CPU-s): 1.15 (1.19 with the scheduler polling every 1 s instead of 0.25 s).
* early stopping, 4 learning rates (3e-3, 1e-3, 1e-9, 2e-9) x 2 seeds x 20,000 timesteps: 160,000 timesteps
  in 146 s without the rule, 88,143 in 114 s with it (45 % of timesteps and 22 % of wall time saved); the
  best trial (lr3e-3--seed2, mean return 399.4) is the same in both. The rule stopped the four trials that
  cannot learn and also the two 1e-3 trials, which were below the 3e-3 trials' median when they checked
  (with min_trials 2 the median is that of the 3e-3 pair): the median rule prunes slow learners too.

Measured 2026-11-28, decisions at timestep checkpoints (median: 5,000, 10,000, 15,000 against the earlier
trials; asha: rungs 2,000, 6,000, 18,000, eta 3), both commands at once on the 2-core VM shared with other
sessions (load 15-20: the wall times are not comparable with the above; the timesteps do not depend on it):

* median: 160,000 timesteps without (120 s), 80,128 with (89 s): 50 % of timesteps saved; the best trial
  (lr3e-3--seed2, 244.8) the same; stopped: the four that cannot learn and the two 1e-3 trials.
* asha: 160,000 without (124 s), 42,112 with (88 s): 74 % saved; it kept one trial of eight,
  lr3e-3--seed1 (209.8), and stopped lr3e-3--seed2 (244.8 when trained to the end) at a rung where it was
  behind seed 1: with two trials at a rung, the second goes on only if it beats the first (the top third
  of two, as Ray Tune's ASHA computes it), so ASHA wants many more configurations than this sweep has.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "examples" / "cartpole_ppo.yaml"


def _base(timesteps: int) -> Any:
    from rlcloud import ExperimentSpec

    return ExperimentSpec.from_file(
        EXPERIMENT, total_timesteps=timesteps, saver_frequency=None, summary_frequency=None, evaluation=None
    )


def _run(spec: Any, results: str) -> tuple[float, Any]:
    from rlcloud import Sweep

    sweep = Sweep(spec, results=results)
    start = time.monotonic()
    sweep.start()
    status = sweep.wait(timeout=3600, poll_interval=0.5)
    return time.monotonic() - start, status


def packing(trials: int, timesteps: int) -> None:
    """Wall time of a local sweep vs. the trials' CPU time spread over the cores."""
    from rlcloud import SweepSpec

    cores = os.cpu_count() or 1
    spec = SweepSpec(name="packing", experiment=_base(timesteps), seeds=trials, max_parallel=cores)
    with tempfile.TemporaryDirectory() as tmp:
        wall, status = _run(spec, tmp)
    cpu = sum(float(t.progress.get("cpu_seconds", 0.0)) for t in status.trials)
    ideal = cpu / cores
    print(f"cores {cores}, {trials} trials x {timesteps} timesteps, max_parallel {cores}: {status.counts()}")
    print(f"{'wall time':>28}: {wall:8.1f} s")
    print(f"{'summed trial CPU / cores':>28}: {ideal:8.1f} s  ({cpu:.1f} CPU-s)")
    print(f"{'wall / ideal':>28}: {wall / ideal:8.2f}  (goal <= 1.15)")


def early_stopping(timesteps: int, keep: str | None = None, which: str = "median") -> None:
    """Timesteps trained with and without the rule ``which`` (median or asha), on a sweep where half cannot
    learn. With ``keep``, the run without early stopping is kept there (for ``plot``)."""
    from rlcloud import SweepSpec

    cores = os.cpu_count() or 1
    rows = []
    points = {"grace_timesteps": timesteps // 4, "interval_timesteps": timesteps // 4}  # decided at 1/4, 1/2, 3/4
    chosen = {**points, "min_trials": 2, "check_seconds": 2}
    if which == "asha":  # rungs at 1/10, 3/10 and 9/10 of the budget, the top third of each going on
        chosen = {"rule": "asha", "grace_timesteps": timesteps // 10, "reduction_factor": 3, "check_seconds": 2}
    for rule in (None, chosen):
        spec = SweepSpec(
            name="early",
            experiment=_base(timesteps),
            parameters={"agent.learning_rate": [3e-3, 1e-3, 1e-9, 2e-9]},
            seeds=2,
            max_parallel=cores,
            early_stopping=rule,
        )
        with tempfile.TemporaryDirectory() as tmp:
            wall, status = _run(spec, keep if keep and rule is None else tmp)
        steps = sum(int(t.progress.get("timestep", 0)) for t in status.trials)
        best = max(status.trials, key=lambda t: t.progress.get("mean_return") or 0.0)
        stopped = [t.name for t in status.trials if t.state == "stopped early"]
        rows.append((rule is not None, wall, steps, best, stopped))
        print(
            f"early stopping {'on ' if rule else 'off'}: {steps:,} timesteps in {wall:.0f} s; best {best.name} "
            f"{best.progress.get('mean_return', 0):.1f}; stopped early: {', '.join(stopped) or 'none'}"
        )
    (_, wall_off, off, best_off, _), (_, wall_on, on, best_on, _) = rows
    print(f"timesteps saved: {1 - on / off:.0%} (goal >= 30%); wall time saved: {1 - wall_on / wall_off:.0%}")
    print(f"best trial: {best_off.name} {best_off.progress.get('mean_return', 0):.1f} without, "
          f"{best_on.name} {best_on.progress.get('mean_return', 0):.1f} with")  # fmt: skip


def plot(results: str, name: str, out: str) -> None:
    """The comparison plot of a finished sweep (for the docs)."""
    from rlcloud import Sweep

    Sweep.attach(name, results=results).plot(out)
    print(f"wrote {out}")


def main() -> None:
    """Parse the command line and run one measurement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("packing")
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--timesteps", type=int, default=3000)
    e = sub.add_parser("early-stopping")
    e.add_argument("--timesteps", type=int, default=20000)
    e.add_argument("--keep", metavar="DIR", help="keep the run without early stopping here (for plot)")
    e.add_argument("--rule", choices=["median", "asha"], default="median", help="the early stopping rule")
    g = sub.add_parser("plot")
    g.add_argument("--results", required=True)
    g.add_argument("--name", required=True)
    g.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.what == "packing":
        packing(args.trials, args.timesteps)
    elif args.what == "early-stopping":
        early_stopping(args.timesteps, args.keep, args.rule)
    else:
        plot(args.results, args.name, args.out)


if __name__ == "__main__":
    main()
