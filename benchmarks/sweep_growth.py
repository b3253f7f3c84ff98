"""What growing a sweep costs (issue 45): the trial list with growth steps, and Kubernetes API requests.

The trial list of a grown sweep is computed from the sweep and its growth steps wherever it is needed (a
pod computes its trial, each status reads the table): its time by number of trials, ungrown and doubled by
a growth step of more seeds. On Kubernetes, with the real client against the fake kube-apiserver (in
process, request counts from its log), the requests of ``grow_sweep`` (a second Job) and of a status of the
grown sweep, beside an ungrown sweep's.

    uv run --frozen python benchmarks/sweep_growth.py [--trials 1000 10000]

Measured here (2 cores shared with other work, load ~19, 2026-11; the milliseconds vary 2-3x run to run):

      trials  table ms  grown to  grown table ms  trial(last) ms  with_growth ms
        1000         1      2000              43             107             139
        5000        17     10000             676             981            1027

    requests: start 3, status 3; grow_sweep 4; status of the grown sweep 4

A growth step costs a status the grown trial table (every name computed again: ~0.07 ms a trial here, an
ungrown sweep's ~0.003 ms) and one list of the sweep's Jobs; grow_sweep reads the ConfigMap, patches it
with the grown sweep, creates the second Job and patches the count of trials that have a Job.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fakes
sys.path.insert(0, str(Path(__file__).resolve().parent))  # for sweep_objects

from sweep_objects import fake_backend, measure, sweep_for
from tests.fakes.kube_apiserver import FakeKubeApiServer

from rlcloud.specs.sweep import MAX_TRIALS, Growth, SweepSpec


def _ms(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return (time.perf_counter() - start) * 1000


def table_figures(trials: int) -> str:
    half = min(trials, MAX_TRIALS // 2)
    sweep = sweep_for(half)
    seeds = sweep.seed_list
    growth = [Growth(seeds=[s + len(seeds) for s in seeds])]
    made = _ms(lambda: sweep.with_growth(growth))
    grown = sweep.with_growth(growth)
    return (
        f"{sweep.num_trials:>8} {_ms(sweep.trial_table):>9.0f} {grown.num_trials:>9} {_ms(grown.trial_table):>15.0f}"
        f" {_ms(lambda: grown.trial(grown.num_trials - 1)):>15.0f} {made:>15.0f}"
    )


def request_figures() -> str:
    with FakeKubeApiServer() as server, tempfile.TemporaryDirectory() as tmp:
        _api, backend = fake_backend(server)
        sweep: SweepSpec = sweep_for(100)
        _, start, _ = measure(server, lambda: backend.start_sweep(sweep, tmp))
        _, status, _ = measure(server, lambda: backend.sweep_status(sweep.name))
        grown = sweep.with_growth([Growth(seeds=[s + 50 for s in sweep.seed_list])])
        _, grow, _ = measure(server, lambda: backend.grow_sweep(grown, tmp))
        _, grown_status, _ = measure(server, lambda: backend.sweep_status(sweep.name))
        return f"requests: start {start}, status {status}; grow_sweep {grow}; status of the grown sweep {grown_status}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[1000, 10000])
    args = parser.parse_args()
    print("  trials  table ms  grown to  grown table ms  trial(last) ms  with_growth ms")
    for trials in args.trials:
        print(table_figures(trials))
    print(request_figures())


if __name__ == "__main__":
    main()
