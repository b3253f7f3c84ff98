"""Quickstart: train PPO on CartPole on this machine, watch it learn, and plot the returns.

    uv run python examples/quickstart.py                      # the demo's run: 150,000 timesteps, 32 environments
    uv run python examples/quickstart.py --workers 1          # one environment (single mode, 2-5 minutes)
    uv run python examples/quickstart.py --timesteps 10000 --results /tmp/rl   # shorter

The experiment is examples/cartpole_ppo.yaml (the one ./scripts/demo trains), with the command line's
overrides and without its periodic evaluation. Everything it writes
(metrics.jsonl, checkpoints/, summaries/ for TensorBoard, logs/) lands in <results>/<name>/; running the
script again resumes from the latest checkpoint, so delete that directory to start over.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from rlcloud import Experiment, ExperimentSpec

SPEC_FILE = Path(__file__).resolve().parent / "cartpole_ppo.yaml"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: how long to train, how many environments, where results go."""
    parser = argparse.ArgumentParser(
        description="Train PPO on CartPole locally with rlcloud and plot the episode returns.",
        epilog="example: python examples/quickstart.py --timesteps 20000 --workers 8",
    )
    parser.add_argument("--timesteps", type=int, default=None, help="training timesteps (default: the spec's 150,000)")
    parser.add_argument("--episodes", type=int, default=None, help="stop after this many episodes instead")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="environments: 1 runs single mode, more multi-threaded (default: the spec's 32, multi-threaded)",
    )
    parser.add_argument("--results", default=None, help="results root directory (default ./rlcloud-results)")
    parser.add_argument("--name", default="cartpole-quickstart", help="experiment name (default cartpole-quickstart)")
    parser.add_argument("--plot", default="returns.png", help="where to save the returns plot (default returns.png)")
    args = parser.parse_args(argv)
    if any(value is not None and value < 1 for value in (args.timesteps, args.episodes, args.workers)):
        parser.error("--timesteps, --episodes and --workers must be at least 1")
    return args


def make_experiment(args: argparse.Namespace) -> Experiment:
    """The example spec with the command line's overrides (keyword arguments replace file settings)."""
    # the file's periodic evaluation is left out: the quickstart shows training returns
    overrides: dict[str, Any] = {"name": args.name, "evaluation": None}
    if args.episodes is not None:  # a stop on episodes replaces the file's timesteps unless both are given
        overrides.update(episodes=args.episodes, total_timesteps=args.timesteps)
    elif args.timesteps is not None:
        overrides["total_timesteps"] = args.timesteps
    if args.workers == 1:
        overrides.update(run_mode="single", num_workers=1)
    elif args.workers is not None:
        overrides.update(run_mode="multi-threaded", num_workers=args.workers)
    spec = ExperimentSpec.from_file(SPEC_FILE, **overrides)
    return Experiment(spec, results=args.results)


def summarize(records: pd.DataFrame, window: int = 20) -> dict[str, float]:
    """Episodes, timesteps, and mean return of the first and last ``window`` episodes of ``exp.metrics()``."""
    if records.empty:
        return {"episodes": 0, "timesteps": 0, "first_mean": float("nan"), "last_mean": float("nan")}
    returns = records["return"]
    return {
        "episodes": len(records),
        "timesteps": int(records["timestep"].max()),
        "first_mean": float(returns.head(window).mean()),
        "last_mean": float(returns.tail(window).mean()),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the quickstart; the exit code is 0 when training succeeded."""
    args = parse_args(argv)
    exp = make_experiment(args)
    print(
        f"training {exp.name} ({exp.spec.run_mode}, {exp.spec.num_workers} environment(s)); results in {exp.location}"
    )
    exp.start()
    status = exp.wait(progress=True)  # a tqdm bar over episodes; Ctrl-C leaves the experiment running
    summary = summarize(exp.metrics())
    print(
        f"{status.state}: {summary['episodes']} episodes, {summary['timesteps']} timesteps; mean return "
        f"{summary['first_mean']:.1f} (first 20) -> {summary['last_mean']:.1f} (last 20)"
    )
    exp.plot(args.plot)
    results = f" --results {args.results}" if args.results else ""
    print(f"plot saved to {args.plot}; TensorBoard: rlcloud tensorboard {exp.name}{results}")
    if status.state != "succeeded":
        for line in list(exp.logs())[-20:]:
            print(line, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
