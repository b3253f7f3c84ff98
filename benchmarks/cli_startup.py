"""How long `rlcloud --help` and `import rlcloud` take against a bare `python -c pass` (goal: <= 3x).

Each round runs the bare interpreter and then every command once, so a busy machine slows both sides of a
ratio alike; the figure is the median over the rounds of (command / bare Python), with its range.

Run: uv run python benchmarks/cli_startup.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def seconds(cmd: list[str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of ``cmd``."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, _status, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped here
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def main() -> None:
    """Print, per command, the median time and the median (min-max) ratio to a bare `python -c pass`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="rounds (default 20)")
    args = parser.parse_args()
    # the console script, as users run it (falls back to -m when not installed)
    script = shutil.which("rlcloud", path=str(Path(sys.executable).parent))
    cli = [script] if script else [sys.executable, "-m", "rlcloud"]
    base_cmd = [sys.executable, "-c", "pass"]
    commands = {
        "import rlcloud": [sys.executable, "-c", "import rlcloud"],
        "rlcloud --help": [*cli, "--help"],
        "rlcloud experiment run --help": [*cli, "experiment", "run", "--help"],
    }
    for cmd in [base_cmd, *commands.values()]:  # warm the file cache and the .pyc files
        seconds(cmd)
    base: list[tuple[float, float]] = []
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(args.runs):
        base.append(seconds(base_cmd))
        for name, cmd in commands.items():
            times[name].append(seconds(cmd))
    wall0 = [b[0] for b in base]
    cpu0 = [b[1] for b in base]
    print(
        f"{'python -c pass':30s} wall {statistics.median(wall0) * 1000:6.1f} ms"
        f"  cpu {statistics.median(cpu0) * 1000:6.1f} ms  ({args.runs} rounds)"
    )
    for name, runs in times.items():
        # each round's ratio to the bare Python run just before it
        wall = [t[0] / b for t, b in zip(runs, wall0, strict=True)]
        cpu = [t[1] / b for t, b in zip(runs, cpu0, strict=True) if b > 0]
        print(
            f"{name:30s} wall {statistics.median(t[0] for t in runs) * 1000:6.1f} ms"
            f"  median ratio {statistics.median(wall):4.2f}x (range {min(wall):.2f}-{max(wall):.2f}x)"
            f"  cpu ratio {statistics.median(cpu):4.2f}x"
        )


if __name__ == "__main__":
    main()
