"""Population-based training on CartPole: 8 PPO members through the local sweeper (rlcloud.runner.population).

    uv run --frozen python benchmarks/pbt_cartpole.py [--members 8] [--timesteps 40000] [--interval 8000]
                                                     [--workers 8] [--max-parallel 8] [--keep DIR]

The members start from learning rates drawn from loguniform(1e-4, 1e-2) (``sampler_seed`` 0) with
examples/cartpole_ppo.yaml's agent and ``--workers`` environments each; every ``--interval`` timesteps the
bottom quarter takes the weights of the top quarter with its learning rate and entropy regularization
perturbed. Printed: each member's timesteps, exploits and final 100-episode mean return; the population's
total timesteps; the best 100-episode mean at the end; the first member timestep at which a 100-episode mean
reached 450, and the population's total timesteps then (members x that timestep: they advance together, as
each waits for the earlier ones at every interval); and the wall time.

Not measured yet: the 2-core machine was shared by 8 sessions (load 10-15); 8 members x 40,000 timesteps
wait for a quiet machine. A smoke run there (``--members 3 --timesteps 3000 --interval 1000 --workers 4``,
2026-11-28): 9,000 timesteps, 4 exploits (trials 1 and 2 at both points), wall 131 s, through the local
sweeper with 2 trials at a time (max_parallel capped at the CPU count); no figure of the benchmark's.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "examples" / "cartpole_ppo.yaml"
WINDOW = 100
SOLVED = 450.0


def _sweep(args: argparse.Namespace) -> Any:
    from rlcloud.specs import ExperimentSpec
    from rlcloud.specs.sweep import SweepSpec

    experiment = ExperimentSpec.from_file(
        EXPERIMENT,
        num_workers=args.workers,
        total_timesteps=args.timesteps,
        evaluation=None,
        summary_frequency=None,
        saver_frequency=f"{args.interval}t",
    )
    return SweepSpec.model_validate(
        {
            "name": "pbt-cartpole",
            "experiment": experiment,
            "parameters": {"agent.learning_rate": {"loguniform": [1e-4, 1e-2]}},
            "samples": args.members,
            "max_parallel": args.max_parallel,
            "population": {
                "perturbation_interval": args.interval,
                "quantile": 0.25,
                "mutations": {
                    "agent.learning_rate": {"loguniform": [1e-4, 1e-2]},
                    "agent.entropy_regularization": [0.0, 0.001, 0.01],
                },
            },
        }
    )


def _first_solved(returns: list[tuple[int, float]]) -> tuple[int | None, float | None]:
    """(the first timestep at which the mean of the last 100 returns reached 450, the final such mean)."""
    window: list[float] = []
    first = None
    for timestep, value in returns:
        window = [*window[-(WINDOW - 1) :], value]
        if first is None and len(window) == WINDOW and sum(window) / WINDOW >= SOLVED:
            first = timestep
    return first, (sum(window) / len(window) if window else None)


def main() -> None:
    """Run the population and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--timesteps", type=int, default=40_000)
    parser.add_argument("--interval", type=int, default=8_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--max-parallel", type=int, default=8)
    parser.add_argument("--keep", type=Path, default=None, help="results root to keep (default: a temporary one)")
    args = parser.parse_args()

    from rlcloud import Sweep
    from rlcloud.runner.loop import read_jsonl
    from rlcloud.runner.population import EXPLOIT, read_pbt_records
    from rlcloud.storage import open_store

    root = args.keep or Path(tempfile.mkdtemp(prefix="rlcloud-pbt-"))
    sweep = Sweep(_sweep(args), results=str(root))
    started = time.monotonic()
    sweep.start()
    sweep.wait()
    wall = time.monotonic() - started
    records = read_pbt_records(open_store(sweep.location))
    total, firsts, finals = 0, [], []
    for name in sweep.spec.trial_names():
        metrics = read_jsonl(Path(sweep.location) / name / "metrics.jsonl")
        returns = [(int(m["timestep"]), float(m["return"])) for m in metrics]
        progress = json.loads((Path(sweep.location) / name / "progress.json").read_text())
        total += int(progress["timestep"])
        first, final = _first_solved(returns)
        exploits = sum(r["trial"] == name and r["decision"] == EXPLOIT for r in records)
        print(f"{name:<28} timesteps {progress['timestep']:>7}  exploits {exploits}  last-100 mean {final}")
        firsts += [first] if first is not None else []
        finals += [final] if final is not None else []
    print(f"population: {args.members} members, {total} timesteps in all, wall {wall:.0f} s")
    print(f"best 100-episode mean at the end: {max(finals) if finals else None}")
    if firsts:
        print(f"first 100-episode mean >= {SOLVED:g} at member timestep {min(firsts)} "
              f"(population ~{min(firsts) * args.members} timesteps)")  # fmt: skip
    else:
        print(f"no member reached a 100-episode mean >= {SOLVED:g}")
    print(f"results: {root}")


if __name__ == "__main__":
    main()
