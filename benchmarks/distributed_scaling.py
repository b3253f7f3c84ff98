"""Distributed env servers scale (issue 15, goal 3): steps/s against the ideal, before and after overlap.

One command prints, with the machine's CPU count:

* the protocol's per-step overhead: the round trip of one step to one env server with a free
  environment (learner side, no agent), and the serialisation (encode + decode of a step request and
  its result) alone;
* the learner's own limit with N servers: the example agent's act + observe on CartPole rows in this
  process, synchronous (one call of N rows) and overlapped (2N rows, two calls of N alternating);
* for 2 / 4 / 8 / 16 local env servers (``python -m rlcloud.runner --role env-server``) serving
  ``rlcloud.runner.costly:CostlyCartPole`` with a 5 ms step, slept (waiting) and spun (computing):
  steps/s synchronous (before) and overlapped (after), the ideal (servers / step time) and the % of
  it; the ceiling is the ideal capped by the learner's limit and, for spinning servers, by the CPUs
  (cpus / step time);
* multi-threaded mode, 8 workers of the same environment in processes: one process per CPU (before)
  against the pool :func:`rlcloud.runner.vector.pool_size` sizes from the probe's CPU time against its
  wall time (after).

Each configuration runs in a fresh interpreter with examples/cartpole_ppo.yaml's agent (one per variant:
synchronous has N rows, overlapped 2N); inside it the before/after variants alternate in windows of
``--seconds`` for ``--rounds`` rounds, and the best window of each is reported. Usage::

    uv run --frozen python benchmarks/distributed_scaling.py [--rounds 3] [--seconds 3] [--only ...]

Goal: >= 80 % of the ideal until the learner saturates.

Before (measured 2026-11-22, same VM under load from other jobs, ``--rounds 3 --seconds 2``), overlap
meaning halves of the servers with one environment each: 2 / 4 / 8 / 16 servers of 5 ms sleep, synchronous
143 / 351 / 486 / 943 steps/s (36 / 44 / 30 / 29 % of ideal), overlapped 143 / 293 / 524 / 994 (no gain:
each server still waited for its half's act and observe).

After (2026-11-23, the 2-core development VM with no other job of ours, ``--rounds 3 --seconds 3``;
overlapped: ``--slots`` environments per server, the agent acting on one group while the servers step
the others), steps/s, two runs (the VM itself varies: the protocol's round trip measured 164 µs in one and
300 µs in the other):

* protocol per step (1 local server, free env): round trip 164-300 µs, of which serialisation (encode and
  decode of the request and of the result) 28-45 µs and the env step 6-10 µs; the rest is two loopback
  TCP hops and the server loop.
* learner alone (act + observe with its updates, in-process CartPole rows), as with N servers: synchronous
  on N rows / overlapped on 2N rows in groups of N: N=2 1317-1754 / 1406-2009, 4 2404-3519 / 2483-3150,
  8 4127-4847 / 4109-4274, 16 6836-9315 / 7740-10219.
* 5 ms sleep env, synchronous vs overlapped with 2 environments per server (% of ideal): 2 servers 214-224
  (54-56 %) vs 345-352 (86-88 %); 4: 423-457 (53-57 %) vs 691-696 (86-87 %); 8: 821-877 (51-55 %) vs
  1357-1391 (85-87 %); 16: 1322-1342 (41-42 %) vs 2186-2276 (68-71 %); the learner waits for the servers
  38-56 % of an overlapped window, so it is not what limits. The goal (>= 80 %) is met up to 8 servers.
  At 16 every group waits for the slowest of 16 processes sharing 2 CPUs: ``--slots 3`` (a third
  environment per server, ``envs_per_server: 3``) gives the servers a step in hand and reached 2367 (74 %),
  side by side with synchronous at 1261 (39 %); 4 slots measured the same as 3 (75-76 % in a trial run).
* 5 ms spin env (each server computes; 2 CPUs cap the total at 400 steps/s, less the learner's own CPU):
  2 servers 221 vs 276; 4: 256 vs 304; 8: 293 vs 325; 16: 307 vs 328 (76-82 % of the CPUs' cap from 4
  servers on; 3 slots: 8 and 16 servers 331, 83 %).
* multi-threaded, 8 workers in processes: sleep env (probe CPU/wall 3-8 %): one process per CPU 298-322,
  sized by the probe (8 processes) 665-857 steps/s (2.2-2.7x); spin env (100 %): 300 with 2 processes both
  ways. One earlier run's probe measured 97 % and gave 3 processes (278, 0.88x):
  :func:`~rlcloud.runner.vector.pool_size` now rounds to the nearest count.

Then (2026-11-23, the learner's act/observe as traced graphs with flat tensors, runner/agent_calls.py; the
table now also has the share of the machine's CPUs busy in the best overlapped window):

* protocol: round trip 175 µs, serialisation 27 µs, env step 6 µs.
* learner alone, synchronous / overlapped: N=2 2722 / 2279, 4 4876 / 5433, 8 6921 / 7164, 16 11243 / 10264
  (about 1.5x the figures above).
* 5 ms sleep, synchronous vs overlapped with 2 per server: 2 servers 223 (56 %) vs 336 (84 %), CPUs 32 %
  busy; 4: 428 (53 %) vs 669 (84 %), 37 %; 8: 819 (51 %) vs 1353 (85 %), 55 %; 16: 1420 (44 %) vs 2400
  (75 %), 76 % busy: 17 processes on 2 CPUs, each group waiting for the last of 16 servers scheduled.
  ``--slots 3`` at 16: 2588 (81 %; synchronous side by side 42 %), the learner waiting 35 % of the window.
  The goal (>= 80 %) is met up to 8 servers with 2 environments each and at 16 with 3.
* 5 ms spin, % of the CPUs' cap (400 steps/s), overlapped: 2 servers 75 %, 4: 82 %, 8: 85 %, 16: 86 %
  (3 slots at 16: 86 %), 96-100 % of the CPUs busy.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # runner_throughput's env-server launcher

from runner_throughput import local_env_servers

STEP_MS = 5.0
SERVERS = (2, 4, 8, 16)
MODES = ("sleep", "spin")
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cartpole_ppo.yaml"


def costly(mode: str, step_ms: float = STEP_MS) -> dict[str, Any]:
    """The environment spec of a CartPole costing ``step_ms`` per step, slept or spun."""
    return {"type": "rlcloud.runner.costly:CostlyCartPole", "step_ms": step_ms, "mode": mode}


def _agent(venv: Any) -> Any:
    from rlcloud.runner.compat import import_tensorforce
    from rlcloud.runner.inlining import inline_nested_functions
    from rlcloud.runner.kernels import choose_cpu_kernels
    from rlcloud.runner.loop import build_agent_kwargs
    from rlcloud.specs import ExperimentSpec

    spec = ExperimentSpec.from_file(EXAMPLE)
    choose_cpu_kernels(spec.network, spec.agent, venv.states_spec)  # as the learner's Trainer.setup does
    tensorforce = import_tensorforce()
    inline_nested_functions()
    return tensorforce.Agent.create(**build_agent_kwargs(spec, venv))


def _sync_window(agent: Any, venv: Any, states: Any, seconds: float, min_steps: int = 0) -> tuple[Any, float]:
    """The training loop's synchronous step (runner/loop.py) for ``seconds``: (states, steps/s)."""
    from rlcloud.runner.agent_calls import AgentCalls

    rows = np.arange(venv.num_envs)
    calls = AgentCalls(agent, rows)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or steps < min_steps:
        actions = calls.act(states)
        states, rewards, terminals = venv.step(actions)
        calls.observe(rewards, terminals)
        steps += len(rows)
    return states, steps / (time.perf_counter() - start)


def _overlapped_window(agent: Any, venv: Any, states: Any, seconds: float) -> tuple[Any, float]:
    """The loop's overlapped stepping (runner/overlap.py) for ``seconds``, then back to synchronous."""
    from rlcloud.runner.overlap import OverlappedStepper

    steps, start = 0, time.perf_counter()
    stepper = OverlappedStepper(agent, venv, states)
    while time.perf_counter() - start < seconds:
        rows, _rewards, _terminals = stepper.step()
        steps += len(rows)
    states = _finish(stepper)
    return states, (steps + venv.num_envs) / (time.perf_counter() - start)


def _time_receives(venv: Any) -> list[float]:
    """Make ``venv.receive`` add the seconds it takes to the returned one-element list: the learner's
    time waiting for the servers (and reading their answers), against which the rest is its own work."""
    total = [0.0]
    receive = venv.receive

    def timed(rows: Any) -> Any:
        start = time.perf_counter()
        try:
            return receive(rows)
        finally:
            total[0] += time.perf_counter() - start

    venv.receive = timed
    return total


def _cpu_jiffies() -> tuple[int, int]:
    """The machine's (busy, total) CPU time so far from /proc/stat (Linux; (0, 0) elsewhere): whether a
    window left CPU idle or the machine itself was the limit (servers and learner share its CPUs here)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _busy_since(start: tuple[int, int]) -> float:
    """The fraction of all CPUs busy since ``start`` (a :func:`_cpu_jiffies` reading); nan when unknown."""
    busy, total = _cpu_jiffies()
    return (busy - start[0]) / (total - start[1]) if total > start[1] else float("nan")


def _finish(stepper: Any) -> Any:
    """Receive and observe every group still stepping; the batch of states, for a synchronous window next."""
    parts: dict[int, Any] = {}
    for _ in stepper._groups:
        rows, calls = stepper._groups[stepper._turn], stepper._calls[stepper._turn]
        stepper._turn = (stepper._turn + 1) % len(stepper._groups)
        states, rewards, terminals = stepper.venv.receive(rows)
        calls.observe(rewards, terminals)
        parts[int(rows[0])] = states
    return np.concatenate([parts[first] for first in sorted(parts)])


def _warm_up(agent: Any, venv: Any, states: Any, split: Any) -> Any:
    """Run past TensorFlow's tracing of act, observe and the first updates (PPO updates every 5 episodes)."""
    states, _ = _sync_window(agent, venv, states, 2.0, min_steps=800)
    if split is not None:
        states, _ = _overlapped_window(agent, split, states, 1.0)
    return states


class _Groups:
    """In-process rows with the split send/receive of RemoteVectorEnv: the learner's limit overlapped."""

    def __init__(self, venv: Any, slots: int) -> None:
        self.venv = venv
        self.num_envs = venv.num_envs
        self.overlap = True
        self.slots = slots
        self._results: dict[int, tuple[Any, float, int]] = {}

    def send_actions(self, rows: Any, actions: Any) -> None:
        for i, row in enumerate(rows):
            env = self.venv.envs[row]
            state, reward, terminal = env.step(actions[i])
            if terminal:
                state = env.reset()
            self._results[int(row)] = (state, reward, terminal)

    def receive(self, rows: Any) -> tuple[Any, np.ndarray, np.ndarray]:
        results = [self._results.pop(int(row)) for row in rows]
        return (
            np.stack([r[0] for r in results]),
            np.array([r[1] for r in results], dtype=np.float64),
            np.array([r[2] for r in results], dtype=np.int64),
        )


# ------------------------------------------------------------------------------------- measurements


def protocol_overhead(steps: int = 3000) -> dict[str, float]:
    """Round trip of a step to one local env server (free environment), and serialisation alone."""
    from rlcloud.runner.protocol import recv_message, send_message
    from rlcloud.runner.remote import RemoteVectorEnv

    with local_env_servers(1, costly("sleep", 0.0)) as addresses:
        venv = RemoteVectorEnv(addresses, connect_timeout=60, overlap=False)
        try:
            venv.reset()
            actions = np.zeros(1, dtype=np.int64)
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                for _ in range(steps):
                    venv.step(actions)
                best = min(best, (time.perf_counter() - start) / steps)
        finally:
            venv.close(finished=True)
    a, b = socket.socketpair()
    try:
        state = np.zeros(4, dtype=np.float32)
        action = np.zeros((), dtype=np.int64)
        ser = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(steps):
                send_message(a, {"type": "step"}, {"actions": action})
                recv_message(b)
                send_message(b, {"type": "result", "reward": 1.0, "terminal": 0, "step_s": 1e-5}, {"states": state})
                recv_message(a)
            ser = min(ser, (time.perf_counter() - start) / steps)
    finally:
        a.close()
        b.close()
    return {"round_trip_s": best, "serialisation_s": ser, "server_env_step_s": _free_env_step(steps)}


def _free_env_step(steps: int) -> float:
    """Seconds of one step of the free environment in this process (the server's share of the trip)."""
    from rlcloud.runner.costly import CostlyCartPole

    env = CostlyCartPole(step_ms=0.0)
    env.reset(seed=1)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(steps):
            _, _, terminated, truncated, _ = env.step(0)
            if terminated or truncated:
                env.reset()
        best = min(best, (time.perf_counter() - start) / steps)
    return best


def learner_limit(servers: int, seconds: float, rounds: int, slots: int = 2) -> dict[str, float]:
    """The agent's act + observe rate on in-process CartPole rows, as it runs with ``servers`` env servers:
    synchronous on ``servers`` rows, and overlapped on ``slots`` x ``servers`` rows in groups of ``servers``."""
    from rlcloud.runner.vector import BatchedVectorEnv, EnvFactory

    factory = EnvFactory({"type": "gym", "level": "CartPole-v1"})
    sync = BatchedVectorEnv.from_factory(factory, servers, seed=1)
    several = BatchedVectorEnv.from_factory(factory, slots * servers, seed=1)
    agents = {"sync": _agent(sync), "overlapped": _agent(several)}
    groups = _Groups(several, slots)
    states = {"sync": _warm_up(agents["sync"], sync, sync.reset(), None)}
    states["overlapped"] = _warm_up(agents["overlapped"], several, several.reset(), groups)
    best = {"sync": 0.0, "overlapped": 0.0}
    for _ in range(rounds):
        states["sync"], rate = _sync_window(agents["sync"], sync, states["sync"], seconds)
        best["sync"] = max(best["sync"], rate)
        states["overlapped"], rate = _overlapped_window(agents["overlapped"], groups, states["overlapped"], seconds)
        best["overlapped"] = max(best["overlapped"], rate)
    return best


def distributed(servers: int, mode: str, seconds: float, rounds: int, slots: int = 2) -> dict[str, float]:
    """Steps/s of ``servers`` local env servers of CostlyCartPole: synchronous (one environment each) and
    overlapped (``slots`` each, runner/overlap.py), side by side, each with its own agent."""
    from rlcloud.runner.remote import RemoteVectorEnv

    with (
        local_env_servers(servers, costly(mode)) as plain,
        local_env_servers(servers, costly(mode), envs_per_server=slots) as several,
    ):
        sync = RemoteVectorEnv(plain, connect_timeout=120)
        overlapped = RemoteVectorEnv(several, connect_timeout=120, overlap=True, slots=slots)
        try:
            agents = {"sync": _agent(sync), "overlapped": _agent(overlapped)}
            states = {"sync": sync.reset(), "overlapped": overlapped.reset()}
            states["sync"] = _warm_up(agents["sync"], sync, states["sync"], None)
            states["overlapped"] = _warm_up(agents["overlapped"], overlapped, states["overlapped"], overlapped)
            best = {"sync": 0.0, "overlapped": 0.0, "waiting": 0.0, "busy": float("nan")}
            waited = _time_receives(overlapped)
            for _ in range(rounds):
                states["sync"], rate = _sync_window(agents["sync"], sync, states["sync"], seconds)
                best["sync"] = max(best["sync"], rate)
                waited[0], start, cpu = 0.0, time.perf_counter(), _cpu_jiffies()
                windowed = _overlapped_window(agents["overlapped"], overlapped, states["overlapped"], seconds)
                states["overlapped"] = windowed[0]
                if windowed[1] > best["overlapped"]:
                    best["overlapped"] = windowed[1]
                    best["waiting"] = waited[0] / (time.perf_counter() - start)
                    best["busy"] = _busy_since(cpu)
        finally:
            sync.close(finished=True)
            overlapped.close(finished=True)
    return best


def multi_threaded(workers: int, mode: str, seconds: float, rounds: int) -> dict[str, float]:
    """Steps/s of ``workers`` rows in processes: one per CPU (before) vs sized by the probe (after)."""
    from rlcloud.runner.vector import EnvFactory, ProcessVectorEnv, choose_execution, pool_size

    factory = EnvFactory(costly(mode))
    choice = choose_execution(factory, probe_steps=32)
    cpus = os.cpu_count() or 1
    sized = pool_size(workers, cpus, choice.extra.get("cpu_fraction"))
    before = ProcessVectorEnv(factory, workers, seed=1)
    after = ProcessVectorEnv(factory, workers, seed=1, num_processes=sized)
    try:
        agent = _agent(before)
        states = {"before": before.reset(), "after": after.reset()}
        best = {"before": 0.0, "after": 0.0, "cpu_fraction": float(choice.extra.get("cpu_fraction", 1.0))}
        best.update(processes_after=float(sized), processes_before=float(min(cpus, workers)))
        states["before"] = _warm_up(agent, before, states["before"], None)
        for _ in range(rounds):
            for name, venv in (("before", before), ("after", after)):
                # The same agent rows drive both vectors: each window ends with every act observed.
                states[name], rate = _sync_window(agent, venv, states[name], seconds)
                best[name] = max(best[name], rate)
    finally:
        before.close()
        after.close()
    return best


# ------------------------------------------------------------------------------------------- driver


def _in_subprocess(kind: str, args: list[str], timeout: float = 900) -> dict[str, float]:
    command = [sys.executable, __file__, "--one", kind, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = done.stderr.strip().splitlines()[-3:]
        raise RuntimeError(" | ".join(tail) or f"exit {done.returncode}")
    return dict(json.loads(lines[-1]))


def main(argv: list[str] | None = None) -> int:
    """Run the measurements and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternating windows per variant (best is kept)")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one measured window")
    parser.add_argument("--servers", default=",".join(map(str, SERVERS)), help="env-server counts")
    parser.add_argument("--slots", type=int, default=2, help="environments per server, overlapped")
    parser.add_argument("--only", default="protocol,learner,distributed,multi", help="groups to run")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--arg", action="append", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger().addFilter(lambda record: "bound specified" not in str(record.msg))
    if args.one:
        a = args.arg
        if args.one == "protocol":
            result = protocol_overhead()
        elif args.one == "learner":
            result = learner_limit(int(a[0]), args.seconds, args.rounds, args.slots)
        elif args.one == "distributed":
            result = distributed(int(a[0]), a[1], args.seconds, args.rounds, args.slots)
        else:
            result = multi_threaded(int(a[0]), a[1], args.seconds, args.rounds)
        print(json.dumps(result))
        return 0

    cpus = os.cpu_count() or 1
    groups = set(args.only.split(","))
    counts = [int(n) for n in args.servers.split(",")]
    common = ["--rounds", str(args.rounds), "--seconds", str(args.seconds), "--slots", str(args.slots)]
    print(f"{cpus} CPUs; env step {STEP_MS:g} ms; agent {EXAMPLE.name}; best of {args.rounds} x {args.seconds:g} s")
    if "protocol" in groups:
        p = _in_subprocess("protocol", common)
        print(
            f"protocol per step (1 local server, free env): round trip {p['round_trip_s'] * 1e6:.0f} µs, "
            f"of which serialisation (encode+decode, both ways) {p['serialisation_s'] * 1e6:.0f} µs and the "
            f"server's env step {p['server_env_step_s'] * 1e6:.0f} µs"
        )
    limits: dict[int, dict[str, float]] = {}
    if "learner" in groups:
        print("\nlearner alone (act + observe, in-process CartPole rows, as with N servers), steps/s:")
        for n in counts:
            limits[n] = _in_subprocess("learner", [*common, "--arg", str(n)])
            sync, overlapped = limits[n]["sync"], limits[n]["overlapped"]
            print(
                f"  N={n:>2}: synchronous ({n} rows) {sync:6.0f}, overlapped ({args.slots} x {n} rows, in groups of "
                f"{n}) {overlapped:6.0f}",
                flush=True,
            )
    if "distributed" in groups:
        print(
            f"\ndistributed, steps/s (overlapped: {args.slots} environments per server; ideal = servers / step "
            "time; ceiling = ideal capped by learner and CPUs):"
        )
        print(
            f"{'env':<6}{'servers':>8}{'ideal':>8}{'sync':>8}{'%ideal':>8}{'%ceil':>7}"
            f"{'overlap':>9}{'%ideal':>8}{'%ceil':>7}{'learner waits':>15}{'CPUs busy':>11}"
        )
        for mode in MODES:
            for n in counts:
                try:
                    r = _in_subprocess("distributed", [*common, "--arg", str(n), "--arg", mode])
                except Exception as exc:  # one broken configuration should not hide the others
                    print(f"{mode:<6}{n:>8}  failed: {exc}", flush=True)
                    continue
                ideal = n / (STEP_MS / 1000)
                ceiling = {"sync": ideal, "overlapped": ideal}
                for variant in ("sync", "overlapped"):
                    if mode == "spin":
                        ceiling[variant] = min(ceiling[variant], cpus / (STEP_MS / 1000))
                    if n in limits:
                        ceiling[variant] = min(ceiling[variant], limits[n][variant])
                print(
                    f"{mode:<6}{n:>8}{ideal:>8.0f}{r['sync']:>8.0f}{r['sync'] / ideal:>8.0%}"
                    f"{r['sync'] / ceiling['sync']:>7.0%}{r['overlapped']:>9.0f}{r['overlapped'] / ideal:>8.0%}"
                    f"{r['overlapped'] / ceiling['overlapped']:>7.0%}{r['waiting']:>15.0%}{r['busy']:>11.0%}",
                    flush=True,
                )
    if "multi" in groups:
        print("\nmulti-threaded, 8 workers in processes, steps/s: one per CPU (before) vs sized by the probe (after)")
        for mode in MODES:
            r = _in_subprocess("multi", [*common, "--arg", "8", "--arg", mode])
            print(
                f"  {mode:<6} probe CPU/wall {r['cpu_fraction']:.0%}: before {r['before']:6.0f} "
                f"({r['processes_before']:.0f} processes), after {r['after']:6.0f} ({r['processes_after']:.0f} "
                f"processes): {r['after'] / r['before']:.2f}x; ideal 8 / step time = {8 / (STEP_MS / 1000):.0f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
