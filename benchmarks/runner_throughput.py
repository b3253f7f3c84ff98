"""Env-steps per second of CartPole-v1 PPO training: plain Tensorforce vs. rlcloud's runner modes.

Prints one line per configuration and its ratio to rlcloud single mode:

* the raw environment (gymnasium, and through rlcloud's adapter), no agent;
* plain ``tensorforce.Runner``: one environment, and ``num_parallel`` 8/16 (batch_agent_calls=True);
* rlcloud single; multi-threaded (batched) with 4/8/16/32 workers;
* distributed with 2 and 4 local env-server processes (``python -m rlcloud.runner --role env-server``).

Every training configuration uses the same agent (PPO, batch_size 10 episodes, lr 1e-3, seed 1) and
runs ``--timesteps`` env steps after the agent is built; agent construction and TensorFlow tracing of
the first calls are excluded by a short warm-up. Each configuration runs in a fresh interpreter (agents
built earlier in a process slow down later ones). Usage::

    uv run --frozen python benchmarks/runner_throughput.py [--timesteps 20000] [--repeat 2] [--only single,multi]

Figures depend on the machine and on what else runs on it; the goals: rlcloud single >= 0.95x plain
Tensorforce single, the best multi-threaded >= 5x single on a 2-core machine (issue 3), and multi-threaded
>= 1.3x Tensorforce's Runner at equal parallelism N = 8, 16, 32 (issue 15).

Measured 2026-11-22 on the 2-core development VM (shared with other jobs; single runs varied by up to
+-40 % between rounds), ``--timesteps 10000 --repeat 2``, best of the two rounds, steps/s:
raw env 45.7k (gymnasium) / 33.6k (rlcloud adapter); tensorforce Runner 1 env 390; rlcloud single 405
(1.04x Tensorforce's Runner); distributed 2 local env servers 505, 4: 870.

Issue 15, 2026-11-23, same VM, ``--only tensorforce-parallel,multi-agent-api,multi --timesteps 30000
--repeat 2`` (best of 2 interleaved rounds; 10,000 steps are too short a window at 10k steps/s), steps/s:
Tensorforce Runner num_parallel=8: 4,287, =16: 8,006, =32: 9,091; rlcloud multi-threaded through
Tensorforce's Agent API (before): 5,044 / 9,101 / 12,544; with runner/agent_calls.py (after): 6,380 /
11,075 / 13,054. After / Runner: **1.49x (8), 1.38x (16), 1.44x (32)** per wall second (1.49x, 1.38x, 1.42x
per CPU second); after / before 1.26x, 1.22x, 1.04x. Rounds differ by up to +-30 % on this VM; shorter runs
(10,000 steps, 3 rounds) gave 1.14x / 1.57x / 1.44x.

Then (2026-11-23, a slower day of the same VM) AgentCalls calls each function's traced graph with flat
tensors after its first call, skipping tf.function's per-call dispatch (act at 32 CartPoles 1.45 -> 0.98 ms,
the same actions); ``--only tensorforce-parallel,multi --timesteps 30000 --repeat 2``: Runner 3,491 / 5,256 /
6,763; rlcloud multi-threaded 6,492 / 11,559 / 13,269 steps/s: **1.86x (8), 2.20x (16), 1.96x (32)** per
wall second (1.72x, 1.79x, 1.98x per CPU second). Profile of an act call at 32 rows now: TensorFlow
executing the graph 0.64 ms of 0.93 ms; the rest is Tensorforce's state/action conversions and checks.
With the runner also choosing Eigen CPU kernels for this dense agent (runner/kernels.py), same command:
Runner 3,642 / 4,708 / 6,416; rlcloud 8,792 / 10,414 / 11,966 steps/s: **2.41x, 2.21x, 1.86x** per wall
second (2.38x, 2.14x, 1.82x per CPU second).

With Tensorforce's nested functions traced inline too (runner/inlining.py; it shortens tracing, which the
warm-up excludes here), same command, a slower hour of the VM: Runner 3,266 / 4,556 / 5,307; rlcloud 6,183 /
8,828 / 12,829 steps/s: **1.89x, 1.94x, 2.42x** per wall second (1.88x, 1.88x, 2.26x per CPU second).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rlcloud.runenv import RunnerEnv

CARTPOLE = {"type": "gym", "level": "CartPole-v1"}
AGENT = {"type": "ppo", "batch_size": 10, "learning_rate": 1e-3}
SEED = 1
WARMUP = 1000
#: Steps per CPU second (all of the process's threads) of the latest measurement: a cross-check of the wall
#: figure (time the process waited for a CPU is not in it); on the development VM the two moved together.
CPU_RATE: list[float] = []


def raw_env_rate(steps: int = 100_000) -> tuple[float, float]:
    """Steps/s of gymnasium's CartPole alone, and through rlcloud's adapter (random actions)."""
    import gymnasium

    from rlcloud.runner.envs import make_env

    env = gymnasium.make("CartPole-v1")
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 2, size=steps)
    start = time.perf_counter()
    for a in actions:
        _s, _r, terminated, truncated, _i = env.step(int(a))
        if terminated or truncated:
            env.reset()
    gym_rate = steps / (time.perf_counter() - start)
    adapter = make_env(CARTPOLE)
    adapter.reset(seed=0)
    start = time.perf_counter()
    for a in actions:
        if adapter.step(a)[2]:
            adapter.reset()
    return gym_rate, steps / (time.perf_counter() - start)


def _agent_kwargs(num_parallel: int) -> dict[str, Any]:
    from rlcloud.runner.envs import make_env

    env = make_env(CARTPOLE)
    kwargs = dict(AGENT)
    kwargs["agent"] = kwargs.pop("type")
    kwargs.update(
        states=env.states_spec,
        actions=env.actions_spec,
        max_episode_timesteps=env.max_episode_timesteps,
        parallel_interactions=num_parallel,
        config=dict(seed=SEED),
    )
    return kwargs


def tensorforce_environments(environment: dict[str, Any], seed: int, count: int) -> list[Any]:
    """``count`` copies of ``environment`` as plain Tensorforce environments (what a Tensorforce user would
    write around gymnasium), copy ``i`` seeded with ``seed + i`` like rlcloud's row ``i``: with the same
    agent seed both then see the same episodes, so rates differ by loop overhead only."""
    from rlcloud.runner.compat import import_tensorforce

    tensorforce = import_tensorforce()
    from rlcloud.runner.envs import make_env

    class Wrapped(tensorforce.Environment):  # type: ignore[misc,name-defined]
        def __init__(self, index: int) -> None:
            super().__init__()
            self.env = make_env(environment)
            self.seed: int | None = seed + index

        def states(self) -> dict[str, Any]:
            return self.env.states_spec

        def actions(self) -> dict[str, Any]:
            return self.env.actions_spec

        def max_episode_timesteps(self) -> int | None:
            return self.env.max_episode_timesteps

        def reset(self) -> Any:
            state = self.env.reset(seed=self.seed)
            self.seed = None
            return state

        def execute(self, actions: Any) -> tuple[Any, int, float]:
            state, reward, terminal = self.env.step(actions)
            return state, terminal, reward

    return [tensorforce.Environment.create(environment=Wrapped(i)) for i in range(count)]


def tensorforce_runner_rate(num_parallel: int, timesteps: int) -> float:
    """Steps/s of plain ``tensorforce.Runner`` over gymnasium CartPole (Tensorforce-style wrapper)."""
    from rlcloud.runner.compat import import_tensorforce

    tensorforce = import_tensorforce()
    agent = tensorforce.Agent.create(**_agent_kwargs(num_parallel))
    envs = tensorforce_environments(CARTPOLE, SEED, num_parallel)
    if num_parallel == 1:
        runner = tensorforce.Runner(agent=agent, environment=envs[0])
    else:
        runner = tensorforce.Runner(agent=agent, environments=envs, num_parallel=num_parallel)
    runner.run(num_timesteps=WARMUP, use_tqdm=False, batch_agent_calls=num_parallel > 1)
    start, cpu = time.perf_counter(), time.process_time()
    runner.run(num_timesteps=timesteps, use_tqdm=False, batch_agent_calls=num_parallel > 1)  # counts anew
    rate = timesteps / (time.perf_counter() - start)
    CPU_RATE.append(timesteps / (time.process_time() - cpu))
    runner.close()
    agent.close()
    return rate


def rlcloud_rate(
    run_mode: str, workers: int, timesteps: int, vector_env: Any = None, *, agent_api: bool = False
) -> float:
    """Steps/s of rlcloud's training loop (metrics, progress and counters included).

    ``agent_api``: drive the agent through Tensorforce's public ``Agent.act``/``observe`` (what the loop did
    before runner/agent_calls.py), for a before/after comparison in one run.
    """
    from rlcloud.runner import agent_calls
    from rlcloud.runner.loop import Trainer
    from rlcloud.specs import ExperimentSpec

    if agent_api:
        agent_calls._unsupported = lambda agent: "benchmark: Tensorforce's public Agent API"  # type: ignore[assignment]

    spec = ExperimentSpec(
        name="bench",
        environment=CARTPOLE,
        agent=AGENT,
        seed=SEED,
        run_mode=run_mode,
        num_workers=workers,
        execution="batched",
        total_timesteps=WARMUP + timesteps,
    )
    workdir = Path(tempfile.mkdtemp(prefix="rlcloud-bench-"))
    try:
        trainer = Trainer(spec, workdir, vector_env=vector_env)
        trainer.setup()
        # The first WARMUP steps (TensorFlow traces the act/observe/update functions) are not measured.
        marks: list[tuple[float, int, float]] = []

        class Mark:
            def on_tick(self) -> None:
                counters = trainer.counters
                marks.append((counters["elapsed"], counters["timestep"], time.process_time()))

        trainer.hooks = Mark()
        result = trainer.run()
        # Loop time (the trainer's own clock) from the first tick after the warm-up to the last step; the
        # final checkpoint and closing are not part of the stepping rate.
        t0, s0, cpu0 = next(((t, s, c) for t, s, c in marks if s >= WARMUP), marks[0])
        _t1, s1, cpu1 = marks[-1]  # CPU time is read at ticks only: the steps between the same two ticks
        CPU_RATE.append((s1 - s0) / (cpu1 - cpu0) if cpu1 > cpu0 else float("nan"))
        return (result.timesteps - s0) / (result.elapsed - t0)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def local_env_servers(
    count: int, environment: dict[str, Any] | None = None, envs_per_server: int = 1
) -> Iterator[list[str]]:
    """Start ``count`` env-server processes on 127.0.0.1 (the distributed mode's env side), each serving
    ``envs_per_server`` copies of ``environment`` (default: CartPole-v1)."""
    from rlcloud.specs import ExperimentSpec

    spec = ExperimentSpec(
        name="bench", environment=environment or CARTPOLE, agent=AGENT, seed=SEED, run_mode="distributed",
        num_workers=count, total_timesteps=1, envs_per_server=envs_per_server,
    )  # fmt: skip
    with spec_env_servers(spec, count) as addresses:
        yield addresses


@contextlib.contextmanager
def spec_env_servers(spec: Any, count: int) -> Iterator[list[str]]:
    """``count`` env-server processes on 127.0.0.1 (``python -m rlcloud.runner --role env-server``) serving the
    environment of ``spec`` (an ExperimentSpec); their addresses."""
    workdir = Path(tempfile.mkdtemp(prefix="rlcloud-bench-servers-"))
    (workdir / "spec.yaml").write_text(spec.to_yaml())
    procs, addresses = [], []
    try:
        for index in range(count):
            port = _free_port()
            env = {**os.environ, **RunnerEnv(port=port, bind_host="127.0.0.1").to_env()}
            command = [sys.executable, "-m", "rlcloud.runner", "--role", "env-server", "--index", str(index)]
            command += ["--spec", str(workdir / "spec.yaml"), "--workdir", str(workdir)]
            procs.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            addresses.append(f"127.0.0.1:{port}")
        yield addresses
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


def distributed_rate(servers: int, timesteps: int) -> float:
    """Steps/s of the distributed mode: the agent here, ``servers`` local env-server processes."""
    from rlcloud.runner.remote import RemoteVectorEnv

    with local_env_servers(servers) as addresses:
        venv = RemoteVectorEnv(addresses, connect_timeout=60)
        return rlcloud_rate("distributed", servers, timesteps, vector_env=venv)


#: Every measured configuration: label -> function(timesteps) returning steps/s.
CONFIGS: dict[str, tuple[str, Callable[[int], float]]] = {
    "tensorforce Runner, 1 env": ("tensorforce", lambda t: tensorforce_runner_rate(1, t)),
    **{
        f"tensorforce Runner, num_parallel={n}": ("tensorforce-parallel", lambda t, n=n: tensorforce_runner_rate(n, t))
        for n in (8, 16, 32)
    },
    "rlcloud single": ("single", lambda t: rlcloud_rate("single", 1, t)),
    **{
        f"rlcloud multi-threaded, {n} workers": ("multi", lambda t, n=n: rlcloud_rate("multi-threaded", n, t))
        for n in (4, 8, 16, 32)
    },
    **{
        f"rlcloud multi-threaded, {n} workers, Agent API": (
            "multi-agent-api",
            lambda t, n=n: rlcloud_rate("multi-threaded", n, t, agent_api=True),
        )
        for n in (8, 16, 32)
    },
    **{
        f"rlcloud distributed, {n} local env servers": ("distributed", lambda t, n=n: distributed_rate(n, t))
        for n in (2, 4)
    },
}


def _measure_in_subprocess(label: str, timesteps: int) -> float:
    """One configuration in a fresh interpreter: agents built earlier in a process slow later ones down."""
    command = [sys.executable, __file__, "--one", label, "--timesteps", str(timesteps)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}")
    rate, cpu_rate = lines[-1].split()
    CPU_RATE.append(float(cpu_rate))
    return float(rate)


def _measure_round(groups: set[str], timesteps: int, measure: Callable[[str, Callable[[], float]], None]) -> None:
    for label, (group, _fn) in CONFIGS.items():
        if group in groups:
            measure(label, lambda label=label: _measure_in_subprocess(label, timesteps))


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timesteps", type=int, default=20_000, help="measured env steps per configuration")
    parser.add_argument(
        "--repeat", type=int, default=1, help="measure each configuration N times (rounds) and keep the best"
    )
    parser.add_argument(
        "--only",
        default="raw,tensorforce,tensorforce-parallel,single,multi,distributed",
        help="comma-separated groups: raw, tensorforce, tensorforce-parallel, single, multi, multi-agent-api "
        "(the loop through Tensorforce's Agent API, as before issue 15), distributed",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one configuration, print it
    args = parser.parse_args(argv)
    groups = set(args.only.split(","))
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger().addFilter(lambda record: "bound specified" not in str(record.msg))
    if args.one:
        rate = CONFIGS[args.one][1](args.timesteps)
        print(rate, CPU_RATE[-1] if CPU_RATE else float("nan"))
        return 0
    print(f"CartPole-v1 PPO (batch_size 10), {args.timesteps} measured steps each, {os.cpu_count()} CPUs")

    best: dict[str, float] = {}
    best_cpu: dict[str, float] = {}

    def measure(label: str, fn: Callable[[], float]) -> None:
        try:
            rate = fn()
        except Exception as exc:  # one broken configuration should not hide the others
            print(f"{label:<44} failed: {type(exc).__name__}: {exc}", flush=True)
            return
        best[label] = max(rate, best.get(label, 0.0))
        cpu_rate = CPU_RATE[-1] if CPU_RATE else float("nan")
        best_cpu[label] = max(cpu_rate, best_cpu.get(label, 0.0))
        print(f"{label:<44} {rate:9.0f} steps/s {cpu_rate:9.0f} steps/CPU-s", flush=True)

    if "raw" in groups:
        gym_rate, adapter_rate = raw_env_rate()
        print(f"{'raw env: gymnasium CartPole-v1':<44} {gym_rate:9.0f} steps/s")
        print(f"{'raw env: through rlcloud adapter':<44} {adapter_rate:9.0f} steps/s")
    # Rounds interleave the configurations, so that a burst of load from elsewhere on the machine does not
    # hit all measurements of one configuration; the best of the rounds is reported.
    for round_ in range(args.repeat):
        if args.repeat > 1:
            print(f"-- round {round_ + 1} of {args.repeat}", flush=True)
        _measure_round(groups, args.timesteps, measure)
    rows = list(best.items())

    if args.repeat > 1:
        print("\nbest of the rounds:")
        for label, rate in rows:
            print(f"{label:<44} {rate:9.0f} steps/s {best_cpu[label]:9.0f} steps/CPU-s")
    single = dict(rows).get("rlcloud single")
    tf_single = dict(rows).get("tensorforce Runner, 1 env")
    if single:
        print("\nratios to rlcloud single:")
        for label, rate in rows:
            print(f"  {label:<42} {rate / single:6.2f}x")
    if single and tf_single:
        print(f"\nrlcloud single / tensorforce Runner single: {single / tf_single:.2f}x (goal >= 0.95x)")
    multi = [rate for label, rate in rows if "multi-threaded" in label]
    if single and multi:
        print(f"best multi-threaded / rlcloud single: {max(multi) / single:.2f}x (goal >= 5x)")
    measured = dict(rows)
    for n in (8, 16, 32):
        ours, peer = (
            measured.get(f"rlcloud multi-threaded, {n} workers"),
            measured.get(f"tensorforce Runner, num_parallel={n}"),
        )
        label, peer_label = f"rlcloud multi-threaded, {n} workers", f"tensorforce Runner, num_parallel={n}"
        if ours and peer:
            print(
                f"rlcloud multi-threaded / tensorforce Runner at {n} environments: {ours / peer:.2f}x per wall "
                f"second, {best_cpu[label] / best_cpu[peer_label]:.2f}x per CPU second (goal >= 1.3x)"
            )
        before = measured.get(f"{label}, Agent API")
        if ours and before:
            print(
                f"  AgentCalls / the loop through Tensorforce's Agent API at {n} environments: {ours / before:.2f}x "
                f"per wall second, {best_cpu[label] / best_cpu[label + ', Agent API']:.2f}x per CPU second"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
