"""Distributed mode throughput: env-steps/s of CartPole PPO with 2 and 4 local env servers.

    uv run --frozen python benchmarks/distributed_throughput.py [--timesteps 6000] [--servers 2 4]

For each server count it starts that many ``python -m rlcloud.runner --role env-server`` processes on
local ports and prints:

* ``raw``: random actions through :class:`RemoteVectorEnv` (the protocol's cost, no agent),
* ``train``: the real training loop (Trainer, PPO) over the servers, in timesteps per second of
  training (after the agent is built; TensorFlow's start-up is not counted),

and the same training loop in single mode (one in-process environment) as the reference for the ratio.
Numbers depend on how busy the machine is: run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SPEC = {
    "name": "bench-distributed",
    "environment": {"type": "gym", "level": "CartPole-v1"},
    "agent": {"type": "ppo", "batch_size": 10, "learning_rate": 1e-3},
    "network": "auto",
    "seed": 1,
}


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def _spec(run_mode: str, num_workers: int, timesteps: int) -> object:
    from rlcloud.specs import ExperimentSpec

    return ExperimentSpec.from_dict(
        {**SPEC, "run_mode": run_mode, "num_workers": num_workers, "total_timesteps": timesteps}
    )


def _start_servers(n: int, spec_path: Path, workdir: Path) -> tuple[list[subprocess.Popen[bytes]], list[int]]:
    ports = _free_ports(n)
    procs = []
    for i, port in enumerate(ports):
        env = {**os.environ, "RLCLOUD_PORT": str(port), "RLCLOUD_BIND_HOST": "127.0.0.1", "RLCLOUD_IDLE_TIMEOUT": "120"}
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "rlcloud.runner",
                    "--role",
                    "env-server",
                    "--index",
                    str(i),
                    "--spec",
                    str(spec_path),
                    "--workdir",
                    str(workdir),
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    return procs, ports


def _raw_rate(ports: list[int], steps: int) -> float:
    from rlcloud.runner.remote import RemoteVectorEnv, ServerAddress

    venv = RemoteVectorEnv([ServerAddress(f"127.0.0.1:{p}", "127.0.0.1", p) for p in ports], connect_timeout=60)
    rng = np.random.default_rng(0)
    venv.reset()
    start = time.perf_counter()
    rounds = max(1, steps // len(ports))
    for _ in range(rounds):
        venv.step(rng.integers(0, 2, size=len(ports)))
    rate = rounds * len(ports) / (time.perf_counter() - start)
    venv.close(finished=False)  # the servers stay for the training measurement
    return rate


def _train_rate(spec: object, workdir: Path, vector_env: object = None) -> float:
    from rlcloud.runner.loop import Trainer

    trainer = Trainer(spec, workdir, vector_env=vector_env)  # type: ignore[arg-type]
    trainer.setup()
    start_steps = trainer.counters["timestep"]
    started = time.perf_counter()
    result = trainer.run()
    return (result.timesteps - start_steps) / (time.perf_counter() - started)


def _finish(ports: list[int]) -> None:
    from rlcloud.runner.remote import RemoteVectorEnv, ServerAddress

    RemoteVectorEnv([ServerAddress(f"127.0.0.1:{p}", "127.0.0.1", p) for p in ports], connect_timeout=60).close(
        finished=True
    )


def main() -> None:
    """Print the figures (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timesteps", type=int, default=6000, help="training timesteps per measurement")
    parser.add_argument("--servers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--raw-only", action="store_true", help="only the protocol's rate (no TensorFlow)")
    args = parser.parse_args()

    from rlcloud.runner.compat import import_tensorforce
    from rlcloud.runner.remote import RemoteVectorEnv, ServerAddress

    print(f"CartPole-v1 PPO, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        single = 0.0
        if not args.raw_only:
            import_tensorforce()
            single = _train_rate(_spec("single", 1, args.timesteps), root / "single")
            print(f"{'rlcloud single (reference)':36s} train {single:8.0f} steps/s")
        for n in args.servers:
            spec = _spec("distributed", n, args.timesteps)
            spec_path = root / f"spec-{n}.yaml"
            spec_path.write_text(spec.to_yaml())  # type: ignore[attr-defined]
            procs, ports = _start_servers(n, spec_path, root / f"work-{n}")
            try:
                raw = _raw_rate(ports, 20000)
                if args.raw_only:
                    print(f"{f'{n} local env servers':36s} raw protocol {raw:8.0f} steps/s (random actions)")
                    _finish(ports)
                    continue
                venv = RemoteVectorEnv(
                    [ServerAddress(f"127.0.0.1:{p}", "127.0.0.1", p) for p in ports], connect_timeout=60
                )
                train = _train_rate(spec, root / f"dist-{n}", vector_env=venv)
                print(
                    f"{f'distributed, {n} local env servers':36s} train {train:8.0f} steps/s "
                    f"({train / single:.2f}x single); raw protocol {raw:8.0f} steps/s"
                )
            finally:
                for proc in procs:
                    try:
                        proc.wait(timeout=15)  # the trainer finished the run: they exit by themselves
                    except subprocess.TimeoutExpired:
                        proc.kill()


if __name__ == "__main__":
    main()
