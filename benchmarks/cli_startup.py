"""How long `rlcloud --help` and `import rlcloud` take against a bare `python -c pass` (goal: <= 3x).

Run: uv run python benchmarks/cli_startup.py
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def median_seconds(cmd: list[str], runs: int = 15) -> float:
    """Median wall time of ``cmd`` over ``runs`` runs (after one warm-up)."""
    subprocess.run(cmd, capture_output=True, check=False)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    """Print the timings and ratios."""
    # the console script, as users run it (falls back to -m when not installed)
    script = shutil.which("rlcloud", path=str(Path(sys.executable).parent))
    cli = [script] if script else [sys.executable, "-m", "rlcloud"]
    base = median_seconds([sys.executable, "-c", "pass"])
    rows = {
        "python -c pass": base,
        "import rlcloud": median_seconds([sys.executable, "-c", "import rlcloud"]),
        "rlcloud --help": median_seconds([*cli, "--help"]),
        "rlcloud experiment run --help": median_seconds([*cli, "experiment", "run", "--help"]),
    }
    for name, seconds in rows.items():
        print(f"{name:32s} {seconds * 1000:7.1f} ms  {seconds / base:5.2f}x")


if __name__ == "__main__":
    main()
