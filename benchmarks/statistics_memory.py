"""Memory of the statistics over many seeds: best() and compare(by="config") over 2 configurations x N seeds.

Before: P(improvement)'s interval compared every run of one configuration with every run of the other in
each of 20,000 resamples (20,000 x n x n values: 0.54 GB at 50 seeds, MemoryError at 500). Now each
resample is a count per run, read against the other side's cumulative counts, in chunks: memory grows with
the runs, not their square. Each size runs in a process of its own, so its peak RSS is its own (imports
of pandas and scipy included, ~150 MB).

    uv run --frozen python benchmarks/statistics_memory.py            # 2 x 500 and 2 x 5,000 seeds
    uv run --frozen python benchmarks/statistics_memory.py --seeds 50 500 5000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def one(seeds: int) -> None:
    """best() and summarize() over 2 x ``seeds`` normal returns; print a JSON line of figures."""
    import numpy as np
    import pandas as pd

    from rlcloud.comparison import best, summarize

    rng = np.random.default_rng(0)
    table = pd.DataFrame(
        {
            "run": [f"r{i}" for i in range(2 * seeds)],
            "agent.learning_rate": [1e-3] * seeds + [3e-4] * seeds,
            "objective": np.r_[rng.normal(300, 50, seeds), rng.normal(290, 50, seeds)],
            "seed": list(range(seeds)) * 2,
        }
    )
    table.attrs["parameters"] = ["agent.learning_rate"]
    started = time.perf_counter()
    summarize(table)
    summarized = time.perf_counter() - started
    found = best(table)
    took = time.perf_counter() - started - summarized
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(
        json.dumps(
            {
                "seeds": seeds,
                "summarize_s": round(summarized, 1),
                "best_s": round(took, 1),
                "peak_rss_mb": round(peak),
                "p_improvement": [found.probability_of_improvement_low, found.probability_of_improvement_high],
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[500, 5000], help="seeds per configuration")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one)
        return
    print("| seeds per configuration | summarize() s | best() s | peak RSS MB | P(improvement) interval |")
    print("|---|---|---|---|---|")
    for seeds in args.seeds:
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(seeds)], check=True, capture_output=True, text=True
        ).stdout
        row = json.loads(out.splitlines()[-1])
        low, high = row["p_improvement"]
        print(
            f"| 2 x {seeds:,} | {row['summarize_s']} | {row['best_s']} | {row['peak_rss_mb']} | {low:.3f}..{high:.3f} |"
        )


if __name__ == "__main__":
    main()
