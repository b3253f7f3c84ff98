"""Quickstart: train PPO on CartPole on this machine, watch it learn, and plot the returns.

    uv run python examples/quickstart.py                      # 200 episodes, one environment
    uv run python examples/quickstart.py --workers 8          # 8 environments feeding one agent
    uv run python examples/quickstart.py --episodes 50 --results /tmp/rl

The experiment is examples/cartpole_ppo.yaml with a shorter stop condition. Everything it writes
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
        epilog="example: python examples/quickstart.py --episodes 100 --workers 4",
    )
    parser.add_argument("--episodes", type=int, default=200, help="training episodes (default 200)")
    parser.add_argument(
        "--workers", type=int, default=1, help="parallel environments; more than 1 runs multi-threaded (default 1)"
    )
    parser.add_argument("--results", default=None, help="results root directory (default ./rlcloud-results)")
    parser.add_argument("--name", default="cartpole-quickstart", help="experiment name (default cartpole-quickstart)")
    parser.add_argument("--plot", default="returns.png", help="where to save the returns plot (default returns.png)")
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.workers < 1:
        parser.error("--episodes and --workers must be at least 1")
    return args


def make_experiment(args: argparse.Namespace) -> Experiment:
    """The example spec with the command line's overrides (keyword arguments replace file settings)."""
    overrides: dict[str, Any] = {
        "name": args.name,
        # the file trains for 72k timesteps; stop on episodes instead, and skip the periodic evaluation
        "total_timesteps": None,
        "episodes": args.episodes,
        "evaluation": None,
    }
    if args.workers > 1:
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
