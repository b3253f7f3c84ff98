"""Space Invaders DQN (examples/space_invaders_dqn.yaml) in single mode: steps/s by replay memory size.

For each memory size, side by side in fresh interpreters (the configurations interleave):

* rlcloud: the runner's way (runner/loop.py ``Trainer.setup``): CPU kernels chosen for the network, Tensorforce
  through the compatibility layer (buffer writes in place, runner/inplace.py), nested functions inline, no
  in-graph assertions, act/observe through runner/agent_calls.py;
* tensorforce: plain Tensorforce 0.6.5 (only the compatibility fixes it needs to run on this TensorFlow:
  ``RLCLOUD_INPLACE_BUFFERS=0``, no inlining, its default assertions), through ``Agent.act``/``Agent.observe``.

Same agent, environment and seed. Each step is timed in three parts: ``act``, the environment's step, and
``observe`` (which writes into the replay memory every ``update_frequency`` steps and then updates). Figures
are given before the first update (the first steps, while Tensorforce traces, left out) and after it
(``--after`` steps; the first few, where the update graph first runs, left out). Tensorforce starts updating
once the first episode has ended, whatever ``start_updating`` says (runner/inplace.py): episodes are capped at
``--episode-cap`` steps (the same for every configuration; memory 1,000 needs a cap <= 1,000) so that updates
start early. Usage::

    uv run --frozen python benchmarks/atari_speed.py [--memories 1000,10000,100000] [--variants rlcloud,tensorforce]
        [--after 300] [--episode-cap 300] [--budget 240]

``--budget`` bounds each configuration's seconds (plain Tensorforce at 100,000 frames steps at ~1 s): a
configuration out of time reports what it measured so far. The machine is shared: compare configurations of
the same run, and read the ratios.

Variants: ``rlcloud`` (frames kept as uint8 in the memory, runner/frames.py), ``rlcloud-float32``
(``RLCLOUD_UINT8_FRAMES=0``), ``tensorforce``, ``servers<N>`` (rlcloud's distributed mode: the learner here,
N local env-server processes of the same environment; ``--after`` counts steps per environment). Each line
gives the learner's CPU time per step (all its threads; less sensitive to other sessions' load than wall
time) and the updates per 1,000 steps after the first update.

Measured 2026-11-25 on the 2-core development VM shared with 7 other sessions (load average 7-10 through the
run; ``--repeat 2``, best round; steps/s after the first update, in brackets observe's ms per step):

    memory        1,000          10,000         100,000
    rlcloud       34.2 (19.2)    31.4 (21.8)    33.0 (21.2)     peak RSS 0.8 / 1.0 / 3.5 GB
    tensorforce   24.0 (28.7)    11.2 (78.8)     1.2 (837)      peak RSS 0.9 / 1.7 / 9.2 GB

Measured 2026-11-26, the same VM: at load average 0.1-1.6 rlcloud (uint8 frames) 114 / 126 / 128 steps/s at
1,000 / 10,000 / 100,000 frames (act 2.2, env 0.4, observe 5.3-6.0 ms a step: an update of ~21 ms every 4
steps). Then one sitting at load average 9-11 (steps/s; learner CPU ms per step; peak RSS GB):

    memory            1,000               10,000              100,000
    rlcloud           42.4; 14.4; 0.8     28.5; 15.5; 0.8     36.0; 15.1; 1.4
    rlcloud-float32   30.4; 13.5; 0.8     35.2; 15.8; 1.0     28.3; 14.7; 3.5
    tensorforce       18.5; 21.9; 0.9      6.2; 48.0; 1.7      1.6; 224; 9.2
    servers4         247.4;  1.5; 0.8    499.3;  1.3; 0.9    262.3;  1.6; 1.5   (3 updates per 1,000 steps: before
                                                                                  runner/updates.py)

and rlcloud at memory 1,000,000 right after: 30.1; 16.1; 7.6 (uint8 frames: 7 GB of them).

uint8 and float32 frames cost the same CPU (the wall-clock differences are the load's); uint8 takes a quarter
of the memory. That servers4 was not the same learning: with several environments Tensorforce observes per
episode and updates at most once per observe call (3 updates per 1,000 steps against 250; README "Atari").
The runner now adds the missing updates (runner/updates.py); ``servers<N>-episodic`` measures without them.
Measured 2026-11-26, memory 10,000 (steps/s after the first update; observe's ms per step; updates per 1,000
steps). At load average 1.6-1.8: rlcloud 113.8; 5.9; 250. servers2 121.7; 5.8; 250. servers4 127.6; 6.0;
250 (1.12x). At load 2.6-4.1: rlcloud 52.8; 13.8; 250. servers4 51.9; 15.2; 250. servers4-episodic 556;
0.2; 3. With the same learning the update sets the pace: with act and the environment free, one learner on
2 cores would reach at most (2.5 + 0.4 + 5.9) / 5.9 = 1.49x single mode.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "space_invaders_dqn.yaml"
SKIP_BEFORE = 10  # the first act/observe calls trace their graphs
SKIP_AFTER = 8  # the first update runs its graph for the first time


def one(variant: str, memory: int, after: int, episode_cap: int, budget: float, seed: int) -> dict[str, Any]:
    """Run one configuration in this process and return its timings (seconds per part, per phase).

    ``variant`` "servers<N>" is rlcloud's distributed mode: the learner here, N local env servers.
    """
    from rlcloud.specs import ExperimentSpec

    spec = ExperimentSpec.from_file(EXAMPLE).replace(
        run_mode="single", num_workers=1, seed=seed, max_timesteps_per_episode=episode_cap, **{"agent.memory": memory}
    )
    if not variant.startswith("servers"):
        return _measure(variant, spec, None, after, budget)
    count = int(variant.removeprefix("servers").removesuffix("-episodic"))
    spec = spec.replace(run_mode="distributed", num_workers=count)
    after *= count  # as many steps per environment as single mode's one
    from runner_throughput import spec_env_servers

    with spec_env_servers(spec, count) as addresses:
        from rlcloud.runner.remote import RemoteVectorEnv

        venv = RemoteVectorEnv(addresses, connect_timeout=180)
        try:
            return _measure(variant, spec, venv, after, budget)
        finally:
            venv.close(finished=True)


def _stepping(agent: Any, width: int, rlcloud: bool) -> tuple[Any, Any]:
    """(act, observe) as the runner's loop calls the agent (rlcloud) or as Tensorforce's own loop does."""
    import numpy as np

    if rlcloud:
        from rlcloud.runner.agent_calls import AgentCalls
        from rlcloud.runner.updates import TimestepUpdates

        calls = AgentCalls(agent, np.arange(width))
        # as the loop does: with several environments, one update per update_frequency timesteps
        catch_up = TimestepUpdates.for_agent(agent)
        act = calls.act

        def observe(rewards: Any, terminals: Any) -> None:
            calls.observe(rewards, terminals)
            if catch_up is not None:
                catch_up.catch_up()
    else:

        def act(states: Any) -> Any:
            return np.asarray([agent.act(states=states[0])])

        def observe(rewards: Any, terminals: Any) -> None:
            agent.observe(reward=float(rewards[0]), terminal=int(terminals[0]))

    return act, observe


def _measure(variant: str, spec: Any, venv: Any, after: int, budget: float) -> dict[str, Any]:
    import numpy as np

    from rlcloud.runner.kernels import choose_cpu_kernels
    from rlcloud.runner.loop import build_agent_kwargs, build_vector_env

    memory = spec.agent["memory"]
    venv = venv if venv is not None else build_vector_env(spec)
    rlcloud = variant != "tensorforce"
    choose_cpu_kernels(spec.network, spec.agent, venv.states_spec)
    from rlcloud.runner.compat import import_tensorforce
    from rlcloud.runner.inlining import inline_nested_functions
    from rlcloud.runner.inplace import patched_methods

    tensorforce = import_tensorforce()
    kwargs = build_agent_kwargs(spec, venv)
    if rlcloud:
        inline_nested_functions()
    else:
        kwargs["config"].pop("create_tf_assertions")  # Tensorforce's default: with assertions
    assert bool(patched_methods()) is rlcloud
    agent = tensorforce.Agent.create(**kwargs)
    width = venv.num_envs  # env steps per loop step
    act, observe = _stepping(agent, width, rlcloud)
    phases: dict[str, list[list[float]]] = {"before": [], "after": []}
    states, start, steps_after = venv.reset(), time.perf_counter(), -1
    cpu_after = 0.0  # this process's CPU seconds (all threads) in the steps timed after the first update
    updates_after = 0
    while steps_after < (after + SKIP_AFTER) // width and time.perf_counter() - start < budget:
        c0, updates_seen = time.process_time(), int(agent.updates)
        t0 = time.perf_counter()
        actions = act(states)
        t1 = time.perf_counter()
        states, rewards, terminals = venv.step(actions)
        t2 = time.perf_counter()
        observe(rewards, terminals)
        t3 = time.perf_counter()
        row = [t1 - t0, t2 - t1, t3 - t2]
        if agent.updates == 0:
            phases["before"].append(row)
        elif steps_after < 0:  # the step whose observe ran the first update
            steps_after = 0
        else:
            steps_after += 1
            if steps_after > SKIP_AFTER // width:
                phases["after"].append(row)
                updates_after += int(agent.updates) - updates_seen
                cpu_after += time.process_time() - c0
    out: dict[str, Any] = {"variant": variant, "memory": memory, "updates": int(agent.updates)}
    out["updates_per_1000_steps"] = 1000 * updates_after / max(1, len(phases["after"]) * width)
    for name, rows in phases.items():
        rows = rows[SKIP_BEFORE:] if name == "before" else rows
        if rows:
            totals = np.sum(rows, axis=0)
            out[name] = {"steps": len(rows) * width, "act": totals[0], "env": totals[1], "observe": totals[2]}
    if "after" in out:
        out["after"]["cpu"] = cpu_after
    from rlcloud.runner.frames import frame_codec

    codec = frame_codec(agent.model)
    out["frames"] = "uint8" if codec is not None and codec.store_uint8 else "float32"
    out["max_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return out


def _child(variant: str, memory: int, args: argparse.Namespace) -> dict[str, Any]:
    environ = dict(os.environ)
    environ["RLCLOUD_INPLACE_BUFFERS"] = "0" if variant == "tensorforce" else "1"
    environ["RLCLOUD_UINT8_FRAMES"] = "0" if variant.endswith("float32") else "1"
    environ["RLCLOUD_TIMESTEP_UPDATES"] = "0" if variant.endswith("-episodic") else "1"
    command = [sys.executable, __file__, "--one", f"{variant}:{memory}", "--after", str(args.after)]
    command += ["--episode-cap", str(args.episode_cap), "--budget", str(args.budget), "--seed", str(args.seed)]
    done = subprocess.run(command, capture_output=True, text=True, env=environ, check=False)
    if done.returncode != 0:
        return {"variant": variant, "memory": memory, "error": done.stderr.strip().splitlines()[-1:]}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _rate(result: dict[str, Any], phase: str) -> float:
    timing = result.get(phase)
    return timing["steps"] / (timing["act"] + timing["env"] + timing["observe"]) if timing else 0.0


def _line(result: dict[str, Any], phase: str) -> str:
    timing = result.get(phase)
    if not timing:
        return "n/a (out of time)" if "error" not in result else f"failed: {result['error']}"
    n = timing["steps"]
    rate = n / (timing["act"] + timing["env"] + timing["observe"])
    per = "  ".join(f"{part} {1e3 * timing[part] / n:6.2f}" for part in ("act", "env", "observe"))
    cpu = f"; learner CPU {1e3 * timing['cpu'] / n:5.2f} ms/step" if "cpu" in timing else ""
    return f"{rate:7.1f} steps/s  (ms/step: {per}; {n} steps{cpu})"


def main(argv: list[str] | None = None) -> int:
    """Run the configurations side by side and print steps/s and the per-part split."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", default="1000,10000,100000")
    parser.add_argument(
        "--variants",
        default="rlcloud,tensorforce",
        help="rlcloud, rlcloud-float32 (frames kept float32), tensorforce, servers<N> (distributed, N env "
        "servers), servers<N>-episodic (Tensorforce's one update per observe)",
    )
    parser.add_argument("--after", type=int, default=300, help="steps timed after the first update")
    parser.add_argument("--episode-cap", type=int, default=300, help="max_timesteps_per_episode")
    parser.add_argument("--budget", type=float, default=240.0, help="seconds per configuration at most")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the best round of each is compared")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one configuration, print it
    args = parser.parse_args(argv)
    if args.one:
        variant, memory = args.one.split(":")
        print(json.dumps(one(variant, int(memory), args.after, args.episode_cap, args.budget, args.seed)))
        return 0
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} ({os.cpu_count()} CPUs)")
    results: dict[tuple[str, int], dict[str, Any]] = {}
    for round_ in range(1, args.repeat + 1):
        for memory in (int(m) for m in args.memories.split(",")):
            for variant in args.variants.split(","):
                result = _child(variant, memory, args)
                rss = result.get("max_rss_gb", 0)
                frames, updates = result.get("frames", "?"), result.get("updates_per_1000_steps", 0)
                print(
                    f"{variant:15s} memory {memory:>7,}  round {round_}  max RSS {rss:5.2f} GB  frames {frames}  "
                    f"updates per 1,000 steps after the first {updates:.0f}"
                )
                for phase in ("before", "after"):
                    print(f"    {phase:6s} first update: {_line(result, phase)}", flush=True)
                best = results.get((variant, memory))
                if best is None or _rate(result, "after") > _rate(best, "after"):
                    results[variant, memory] = result
    if args.repeat > 1:
        print("best of the rounds (by steps/s after the first update):")
        for (variant, memory), result in results.items():
            print(f"{variant:15s} memory {memory:>7,}")
            for phase in ("before", "after"):
                print(f"    {phase:6s} first update: {_line(result, phase)}")
    print("ratios (after the first update):")
    for (variant, memory), result in results.items():
        mine = result.get("after")
        for other, name in (("tensorforce", "plain Tensorforce"), ("rlcloud", "rlcloud single")):
            base = results.get((other, memory), {}).get("after")
            if variant not in ("tensorforce", other) and base and mine:
                speed = (base["act"] + base["env"] + base["observe"]) / base["steps"]
                speed /= (mine["act"] + mine["env"] + mine["observe"]) / mine["steps"]
                print(f"    memory {memory:>7,}: {variant} {speed:.2f}x {name}'s steps/s")
    smallest = min(m for _, m in results)
    for variant in args.variants.split(","):
        first = results.get((variant, smallest), {}).get("after")
        for (other, memory), result in results.items():
            mine = result.get("after")
            if other == variant and memory != smallest and first and mine:
                growth = (mine["observe"] / mine["steps"]) / (first["observe"] / first["steps"])
                print(f"    {variant}: observe at memory {memory:,} / at {smallest:,}: {growth:.2f}x")
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
