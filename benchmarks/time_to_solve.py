"""Time to solve CartPole-v1 with PPO: rlcloud's multi-threaded loop vs. Tensorforce's Runner.

"Solved" is the first episode after which the mean return of the last 20 episodes is >= 450 (CartPole-v1
caps a return at 500). For each configuration and seed this prints the wall time from the start (the
agent's construction included, TensorFlow's import not: both pay that once) to that episode, and the
timesteps it took. Every configuration uses the agent of examples/cartpole_ppo.yaml (PPO, batch of 5
episodes, a critic) with the same seed; the environments are seeded alike (row ``i`` with ``seed + i``).

* rlcloud: ``multi-threaded`` with N environments in one process (the training loop of runner/loop.py,
  metrics and progress files included);
* Tensorforce: ``Runner(num_parallel=N, batch_agent_calls=True)`` over the same environments.

Each run is a fresh interpreter; configurations interleave per seed. Medians over the seeds, and the ratio
rlcloud best / Runner best (goal <= 0.5). Usage::

    uv run --frozen python benchmarks/time_to_solve.py [--seeds 1,2,3] [--rlcloud 8,16,32] [--runner 4,8,16]

A run that does not solve within ``--max-timesteps`` counts as not solved (its time is not in the median).

Measured 2026-11-23 on the 2-core development VM (seeds 1-3, medians; seconds, timesteps):
rlcloud multi-threaded N=4 18.5 s / 49,948; N=8 10.5 s / 28,488 (seeds 24.3, 10.5, 8.6 s); N=16 11.7 s /
64,352; N=32 9.5 s / 61,728. Tensorforce Runner num_parallel=8 12.6 s / 39,337; =16 15.7 s / 86,549.
rlcloud best (N=32) / Runner best (N=8): 0.76x (goal <= 0.5x, not reached). About half of each run is the
one-time cost both pay alike (building the agent and TensorFlow tracing its act/observe/update functions,
~4-5 s here); on the stepping after it rlcloud is 1.38-1.49x the Runner (runner_throughput.py). Sample
efficiency falls with more environments (N=8 needs the fewest timesteps in the median, with the widest
spread between seeds), wall time is lowest at 32: examples/cartpole_ppo.yaml uses 32.

Where one rlcloud N=32 run's time goes (seed 1, 55,200 timesteps, solved at ~10 s; timed per call): the
first observe 3.2-4.1 s (TensorFlow tracing the observe function with PPO's whole update inside it; the
Runner pays the same), first act 0.4-0.5 s, then act 2.4-2.9 s (~1,900 calls of 1.4 ms) and the
episode-end observes with their 67 updates ~2 s: nearly all of it TensorFlow executing Tensorforce's
graphs, the same graphs the Runner runs. The 0.5x goal would need the Runner's own TensorFlow work to
shrink, which a faster loop around the same agent cannot do. Building the agent without Tensorforce's
in-graph assertions (rlcloud's default since, ``debug_logging`` keeps them) learns identically and traces
faster; re-measured after it (2026-11-23, seeds 1-3, medians): rlcloud N=16 10.7 s / 64,352, N=32 11.4 s
/ 61,728 (one seed 7.6 s); Runner num_parallel=8 13.8 s / 39,337, with the same lean agent 13.5 s:
0.78x (the VM measured ~10 % slower this day than the figures above).

Then (2026-11-23 again, a slower and more variable day: the Runner's seed 3 took 13.9 to 20.8 s in three
runs) two changes, neither of which changes a single action (tests compare): runner/agent_calls.py calls
act/observe as their traced graphs with flat tensors after the first call (act at 32 rows 1.45 -> 0.98 ms),
and the runner runs dense-only networks on Eigen instead of oneDNN CPU kernels (runner/kernels.py; N=32
seeds 1-3 side by side: 10.2 / 12.3 / 10.7 s with oneDNN, 7.5 / 11.0 / 8.3 s without). Three full runs
after the first change, the last with both (medians): rlcloud N=32 9.6 / 9.9 / 9.7 s, N=64 9.1 / 10.7 /
8.9 s, N=8 11.0 s; Runner num_parallel=8 13.9 / 17.3 / 15.7 s: **0.65x / 0.57x / 0.57x** (goal <= 0.5x, not
reached). The Runner with rlcloud's TensorFlow settings (no assertions, Eigen): 13.2 s (first run), 14.3 s
(last). Where an N=32 run's time goes now (48,000 timesteps, medians of 4 runs): the first observe
(tracing observe with PPO's update, and Grappler optimising it) 3.2 s, later observes with 63 updates
1.6 s, act 1.3 s (0.8 ms a call, of which TensorFlow executing the graph ~0.6 ms), the 32 CartPoles 0.7 s,
the loop 0.3 s: 7.1 s. Tried and not kept: Grappler without its layout/memory passes and with one
iteration (first observe -0.2 s, later observes +0.2 s), If/While ops left unlowered (first observe
-1 s, later ones +1.5 s), XLA auto-clustering (14.7 s of compiling), TensorFlow's single-threaded
executor (hangs on Tensorforce's graphs).

Then (2026-11-23, next session) the runner traces Tensorforce's nested functions inline (runner/inlining.py):
the first observe at 32 CartPoles (tracing plus its first run) 1.4-1.9 s instead of 3.0-3.6 s in one process,
first act 0.14-0.20 s instead of 0.21-0.26 s. Every rlcloud run below solved at the same timestep as before it
(the same episodes). Three full runs, side by side, medians of seeds 1-3: rlcloud N=32 7.7 / 8.3 / 7.8 s
(61,728 timesteps), N=64 7.6 / 8.0 / 7.4 s (79,424), N=16 10.8 / 9.0 / 9.2 s; Runner num_parallel=8 19.6 /
20.0 / 15.8 s (39,337), =16 21.0 s (third run): **0.39x / 0.40x / 0.47x** (goal <= 0.5x: met). The Runner with
rlcloud's settings (no assertions, Eigen, inlining) 14.4 / 14.0 / 11.7 s, so rlcloud's loop itself is
0.54-0.63x of that. The Runner varied most (seed 1: 16.1-22.0 s in five runs of this day). Which N: 32 and 64
are equally fast; 32 needs fewer timesteps (62k against 79k) and stays the example's setting.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "cartpole_ppo.yaml"
WINDOW = 20
TARGET = 450.0


def _example() -> dict[str, Any]:
    return dict(yaml.safe_load(EXAMPLE.read_text()))


def _solved_at(returns: list[float]) -> int | None:
    """Index of the first episode after which the mean of the last WINDOW returns reaches TARGET."""
    window: list[float] = []
    for index, ret in enumerate(returns):
        window.append(ret)
        if len(window) > WINDOW:
            window.pop(0)
        if len(window) == WINDOW and sum(window) / WINDOW >= TARGET:
            return index
    return None


def rlcloud_run(workers: int, seed: int, max_timesteps: int) -> dict[str, Any]:
    """Train with rlcloud's loop until solved; wall time (agent construction included) and timesteps.

    The runner's own order: environments, then the CPU kernels chosen for the agent's networks, then
    TensorFlow (its import not timed), then the agent (runner/loop.py ``Trainer.setup``)."""
    from rlcloud.runner.compat import import_tensorforce
    from rlcloud.runner.kernels import choose_cpu_kernels
    from rlcloud.runner.loop import Trainer, build_vector_env, read_jsonl
    from rlcloud.specs import ExperimentSpec

    example = _example()
    spec = ExperimentSpec(
        name="solve",
        environment=example["environment"],
        agent=example["agent"],
        network=example["network"],
        seed=seed,
        run_mode="multi-threaded",
        num_workers=workers,
        execution="batched",
        total_timesteps=max_timesteps,
    )
    workdir = Path(tempfile.mkdtemp(prefix="rlcloud-solve-"))
    try:
        start = time.perf_counter()
        venv = build_vector_env(spec)
        envs_s = time.perf_counter() - start
        choose_cpu_kernels(spec.network, spec.agent, venv.states_spec)
        import_tensorforce()
        start = time.perf_counter()
        trainer = Trainer(spec, workdir, vector_env=venv)
        trainer.setup()
        setup_s = envs_s + time.perf_counter() - start

        class StopWhenSolved:
            def on_tick(self) -> None:
                returns = [r["return"] for r in read_jsonl(workdir / "metrics.jsonl")]
                if _solved_at(returns) is not None:
                    trainer.request_stop("solved")

        trainer.hooks = StopWhenSolved()
        trainer.run()
        records = read_jsonl(workdir / "metrics.jsonl")
        index = _solved_at([r["return"] for r in records])
        if index is None:
            return {"solved": False, "timesteps": records[-1]["timestep"] if records else 0}
        return {"solved": True, "seconds": setup_s + records[index]["time"], "timesteps": records[index]["timestep"]}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def runner_run(num_parallel: int, seed: int, max_timesteps: int, assertions: bool = True) -> dict[str, Any]:
    """Train with ``tensorforce.Runner`` until solved; wall time (agent construction included), timesteps.

    ``assertions=False`` builds the agent as rlcloud's runner does (``create_tf_assertions`` off; the
    ``runner-lean`` configuration also runs it on the same CPU kernels, with Tensorforce's nested functions
    traced inline as runner/inlining.py does), to show what the Runner gains
    from rlcloud's TensorFlow settings alone."""
    from rlcloud.runner.compat import import_tensorforce
    from rlcloud.runner.inlining import inline_nested_functions

    tensorforce = import_tensorforce()
    from runner_throughput import tensorforce_environments

    inline_nested_functions(enabled=not assertions)  # the lean Runner traces as rlcloud's runner does

    example = _example()
    start = time.perf_counter()
    envs = tensorforce_environments(example["environment"], seed, num_parallel)
    agent_spec = dict(example["agent"])
    agent = tensorforce.Agent.create(
        agent=agent_spec.pop("type"),
        network=example["network"],
        states=envs[0].states(),
        actions=envs[0].actions(),
        max_episode_timesteps=envs[0].max_episode_timesteps(),
        parallel_interactions=num_parallel,
        config=dict(seed=seed, create_tf_assertions=assertions),
        **agent_spec,
    )
    solved: dict[str, Any] = {}

    def callback(runner: Any, parallel: int) -> bool:
        index = _solved_at([float(r) for r in runner.episode_returns])
        if index is not None:
            solved.update(seconds=time.perf_counter() - start, timesteps=int(runner.timesteps))
            return False
        return True

    runner = tensorforce.Runner(agent=agent, environments=envs, num_parallel=num_parallel)
    runner.run(
        num_timesteps=max_timesteps,
        use_tqdm=False,
        batch_agent_calls=True,
        callback=callback,
        callback_episode_frequency=1,
    )
    timesteps = int(runner.timesteps)
    runner.close()
    agent.close()
    if not solved:
        return {"solved": False, "timesteps": timesteps}
    return {"solved": True, **solved}


LABELS = {
    "rlcloud": "rlcloud multi-threaded",
    "runner": "tensorforce Runner",
    "runner-lean": "Runner, rlcloud's TF settings",
}


def _in_subprocess(kind: str, n: int, seed: int, max_timesteps: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--one", f"{kind}:{n}:{seed}", "--max-timesteps", str(max_timesteps)]
    from rlcloud.runner.kernels import ONEDNN_VARIABLE

    env = dict(os.environ)
    if kind == "runner-lean":  # the kernels rlcloud's runner chooses for this dense agent (runner/kernels.py)
        env[ONEDNN_VARIABLE] = "0"
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600, env=env)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return {"solved": False, "error": tail[0]}
    return dict(json.loads(lines[-1]))


def main(argv: list[str] | None = None) -> int:
    """Run every configuration for every seed and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--rlcloud", default="8,16,32", help="multi-threaded environment counts")
    parser.add_argument("--runner", default="4,8,16", help="Runner num_parallel values")
    parser.add_argument(
        "--runner-lean",
        default="",
        help="Runner num_parallel values with rlcloud's TensorFlow settings (no in-graph assertions, CPU kernels)",
    )
    parser.add_argument("--max-timesteps", type=int, default=300_000)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: kind:n:seed, prints one JSON result
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger().addFilter(lambda record: "bound specified" not in str(record.msg))
    if args.one:
        kind, n, seed = args.one.split(":")
        if kind == "rlcloud":
            result = rlcloud_run(int(n), int(seed), args.max_timesteps)
        else:
            result = runner_run(int(n), int(seed), args.max_timesteps, assertions=kind == "runner")
        print(json.dumps(result))
        return 0
    seeds = [int(s) for s in args.seeds.split(",")]
    configs = [("rlcloud", int(n)) for n in args.rlcloud.split(",") if n]
    configs += [("runner", int(n)) for n in args.runner.split(",") if n]
    configs += [("runner-lean", int(n)) for n in args.runner_lean.split(",") if n]
    print(f"CartPole-v1 PPO (examples/cartpole_ppo.yaml's agent), solved = mean of last {WINDOW} >= {TARGET:.0f}, "
          f"seeds {seeds}, {os.cpu_count()} CPUs")  # fmt: skip
    results: dict[tuple[str, int], list[dict[str, Any]]] = {c: [] for c in configs}
    for seed in seeds:
        for kind, n in configs:
            result = _in_subprocess(kind, n, seed, args.max_timesteps)
            results[(kind, n)].append(result)
            label = f"{LABELS[kind]}, N={n}, seed {seed}"
            if result.get("solved"):
                print(f"{label:<44} {result['seconds']:7.1f} s {result['timesteps']:8d} timesteps", flush=True)
            else:
                print(f"{label:<44} not solved ({result.get('error') or result.get('timesteps')})", flush=True)
    print("\nmedians over the seeds (solved runs):")
    medians: dict[tuple[str, int], float] = {}
    for (kind, n), runs in results.items():
        solved = [r for r in runs if r.get("solved")]
        if not solved:
            print(f"  {kind} N={n}: not solved")
            continue
        seconds = statistics.median(r["seconds"] for r in solved)
        steps = statistics.median(r["timesteps"] for r in solved)
        medians[(kind, n)] = seconds
        print(f"  {kind:<11} N={n:<3} {seconds:7.1f} s {steps:9.0f} timesteps ({len(solved)}/{len(runs)} solved)")
    ours = [(s, n) for (k, n), s in medians.items() if k == "rlcloud"]
    peer = [(s, n) for (k, n), s in medians.items() if k == "runner"]
    if ours and peer:
        best, best_peer = min(ours), min(peer)
        print(
            f"\nrlcloud best (N={best[1]}) {best[0]:.1f} s / Runner best (N={best_peer[1]}) {best_peer[0]:.1f} s "
            f"= {best[0] / best_peer[0]:.2f}x (goal <= 0.5x)"
        )
    return 0


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    sys.exit(main())
