"""Distributed mode end to end: ``python -m rlcloud.runner`` agent and env-server processes over TCP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from rlcloud.runner.envs import make_env
from rlcloud.runner.envserver import EnvServer
from rlcloud.runner.remote import RemoteVectorEnv, ServerAddress


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def _write_spec(tmp_path: Path, **overrides: object) -> Path:
    spec = {
        "name": "dist-test",
        "environment": {"type": "gym", "level": "CartPole-v1"},
        "agent": {"type": "ppo", "batch_size": 10, "learning_rate": 1e-3},
        "network": "auto",
        "run_mode": "distributed",
        "num_workers": 2,
        "seed": 1,
        "total_timesteps": 1000,
        **overrides,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


class Procs:
    """Runner processes of one test, each logging to a file; all killed at the end."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, role: str, index: int, spec: Path, **env: str) -> subprocess.Popen[bytes]:
        log = open(self.tmp_path / f"{role}-{index}.log", "ab")  # noqa: SIM115 - the child owns it
        proc = subprocess.Popen(
            [sys.executable, "-m", "rlcloud.runner", "--role", role, "--index", str(index),
             "--spec", str(spec), "--workdir", str(self.tmp_path / "work")],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env},
        )  # fmt: skip
        log.close()
        self.procs.append(proc)
        return proc

    def env_server(self, index: int, spec: Path, port: int, idle: float = 120) -> subprocess.Popen[bytes]:
        return self.start(
            "env-server", index, spec, RLCLOUD_PORT=str(port), RLCLOUD_BIND_HOST="127.0.0.1",
            RLCLOUD_IDLE_TIMEOUT=str(idle),
        )  # fmt: skip

    def log(self, role: str, index: int) -> str:
        return (self.tmp_path / f"{role}-{index}.log").read_text(errors="replace")

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    p = Procs(tmp_path)
    yield p
    p.kill_all()


def _metrics(tmp_path: Path) -> list[dict[str, float]]:
    path = tmp_path / "work" / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _timestep(tmp_path: Path) -> int:
    try:
        return int(json.loads((tmp_path / "work" / "progress.json").read_text())["timestep"])
    except (OSError, ValueError, KeyError):
        return 0


# --------------------------------------------------------------------------------------- fast ones


@pytest.mark.processes
def test_agent_fails_with_a_clear_error_when_a_server_is_unreachable(procs: Procs, tmp_path: Path) -> None:
    spec = _write_spec(tmp_path)
    up, down = _free_ports(2)
    procs.env_server(0, spec, up)
    agent = procs.start(
        "agent", 0, spec,
        RLCLOUD_ENV_SERVERS="exp-env-0.exp:5000,exp-env-1.exp:5000",
        RLCLOUD_HOST_MAP=f"exp-env-0.exp=127.0.0.1:{up},exp-env-1.exp=127.0.0.1:{down}",
        RLCLOUD_CONNECT_TIMEOUT="3",
    )  # fmt: skip
    assert agent.wait(timeout=120) == 3  # construction error: do not retry
    log = procs.log("agent", 0)
    assert f"1 of 2 env servers not reachable after 3 s: exp-env-1.exp:5000 (127.0.0.1:{down})" in log
    assert "exp-env-0.exp" not in log.split("not reachable")[1].splitlines()[0]


@pytest.mark.processes
def test_env_server_exits_when_no_agent_ever_comes(procs: Procs, tmp_path: Path) -> None:
    spec = _write_spec(tmp_path)
    (port,) = _free_ports(1)
    server = procs.env_server(0, spec, port, idle=1)
    assert server.wait(timeout=60) == 0
    assert "no agent for 1 s, assuming it is gone for good" in procs.log("env-server", 0)


@pytest.mark.processes
def test_env_server_with_bad_environment_kwargs_exits_3(procs: Procs, tmp_path: Path) -> None:
    spec = _write_spec(tmp_path, environment={"type": "gym", "level": "CartPole-v1", "bogus_option": 1})
    (port,) = _free_ports(1)
    server = procs.env_server(0, spec, port)
    assert server.wait(timeout=60) == 3
    assert "bogus_option" in procs.log("env-server", 0)


def test_a_signal_leaves_the_servers_waiting_for_the_restarted_agent() -> None:
    env = make_env({"type": "gym", "level": "CartPole-v1"})
    server = EnvServer(env, host="127.0.0.1", port=0, idle_timeout=30)
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(server.serve()), daemon=True)
    thread.start()
    runner_saw: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: runner_saw.append(signum))
    try:
        address = ServerAddress(f"127.0.0.1:{server.port}", "127.0.0.1", server.port)
        venv = RemoteVectorEnv([address], connect_timeout=10, watch_signals=True)
        venv.reset()
        os.kill(os.getpid(), signal.SIGTERM)
        venv.step(np.array([0]))
        venv.close()  # after a signal: not finished
        assert runner_saw == [signal.SIGTERM]  # the runner's own handler still ran
        # the server did not end with that agent: the restarted one connects and is served (an ended server
        # would refuse it), and only its normal end finishes the server
        again = RemoteVectorEnv([address], connect_timeout=10)
        again.reset()
        again.close()  # a normal end: finished
        thread.join(timeout=10)
        assert result == [0]
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.stop()
        thread.join(timeout=10)


# ------------------------------------------------------------------------------------ real training


@pytest.mark.training
def test_distributed_cartpole_ppo_learns_and_servers_exit_with_the_agent(procs: Procs, tmp_path: Path) -> None:
    spec = _write_spec(tmp_path, total_timesteps=8000)
    ports = _free_ports(2)
    servers = [procs.env_server(i, spec, port) for i, port in enumerate(ports)]
    agent = procs.start("agent", 0, spec, RLCLOUD_ENV_SERVERS=",".join(f"127.0.0.1:{p}" for p in ports))
    assert agent.wait(timeout=500) == 0, procs.log("agent", 0)[-3000:]
    # The agent told them the run is finished: both exit 0 by themselves.
    assert [s.wait(timeout=30) for s in servers] == [0, 0]
    for i in range(2):
        assert "the agent finished the run; exiting" in procs.log("env-server", i)
    records = _metrics(tmp_path)
    assert {r["worker"] for r in records} == {0, 1}  # episodes from both servers, counted together
    assert [r["episode"] for r in records] == list(range(1, len(records) + 1))
    assert _timestep(tmp_path) >= 8000
    first = float(np.mean([r["return"] for r in records[:20]]))
    last = float(np.mean([r["return"] for r in records[-20:]]))
    print(f"distributed PPO: {len(records)} episodes, mean return first 20 {first:.1f}, last 20 {last:.1f}")
    assert last > 1.5 * first and last > 50, (first, last)


@pytest.mark.training
def test_overlapped_servers_host_two_environments_each(procs: Procs, tmp_path: Path) -> None:
    spec = _write_spec(tmp_path, total_timesteps=1200, execution="overlapped")
    (tmp_path / "plain").mkdir()
    plain = _write_spec(tmp_path / "plain")
    ports = _free_ports(3)
    servers = [procs.env_server(i, spec, port) for i, port in enumerate(ports[:2])]
    agent = procs.start("agent", 0, spec, RLCLOUD_ENV_SERVERS=",".join(f"127.0.0.1:{p}" for p in ports[:2]))
    assert agent.wait(timeout=300) == 0, procs.log("agent", 0)[-3000:]
    assert [s.wait(timeout=30) for s in servers] == [0, 0]
    records = _metrics(tmp_path)
    assert {r["worker"] for r in records} == {0, 1, 2, 3}  # 2 servers x 2 environments
    assert _timestep(tmp_path) >= 1200
    # A server started from a spec without `execution: overlapped` hosts one environment: the agent says so.
    odd = procs.env_server(2, plain, ports[2])
    agent = procs.start(
        "agent", 1, spec, RLCLOUD_ENV_SERVERS=f"127.0.0.1:{ports[2]}", RLCLOUD_CONNECT_TIMEOUT="30"
    )  # fmt: skip
    assert agent.wait(timeout=120) not in (0, None)
    assert (
        "hosts 1 environment(s), the agent expects 2 (envs_per_server or execution differ between them)"
        in procs.log("agent", 1)
    )
    odd.kill()


def _wait_until(condition: Callable[[], bool], agent: subprocess.Popen[bytes], procs: Procs, what: str) -> None:
    deadline = time.monotonic() + 300
    while not condition():
        assert agent.poll() is None, procs.log("agent", 0)[-3000:]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.mark.training
def test_env_server_and_agent_killed_and_restarted_mid_run_and_the_run_finishes(procs: Procs, tmp_path: Path) -> None:
    spec = _write_spec(tmp_path, total_timesteps=3000, saver_frequency="500t")
    ports = _free_ports(2)
    servers_env = {"RLCLOUD_ENV_SERVERS": ",".join(f"127.0.0.1:{p}" for p in ports)}
    survivor = procs.env_server(0, spec, ports[0])
    victim = procs.env_server(1, spec, ports[1])
    agent = procs.start("agent", 0, spec, **servers_env)
    _wait_until(lambda: _timestep(tmp_path) >= 400, agent, procs, "training")

    # An env server dies (kill -9) and comes back on the same address: the agent reconnects.
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    lost = f"env server 127.0.0.1:{ports[1]} lost"
    _wait_until(lambda: lost in procs.log("agent", 0), agent, procs, "the agent to notice")  # and wait for it
    reborn = procs.env_server(1, spec, ports[1])
    back = f"env server 127.0.0.1:{ports[1]} is back"
    _wait_until(lambda: back in procs.log("agent", 0), agent, procs, "the reconnect")
    server_log = procs.log("env-server", 1)
    assert server_log.count("listening on port") == 2
    assert "agent connected" in server_log.split("listening on port")[-1]  # the new process serves

    # Then the agent dies (kill -9, like a preempted pod) and is restarted: both servers serve the new
    # agent, which resumes from its checkpoint and finishes the run.
    _wait_until(lambda: (tmp_path / "work" / "checkpoints" / "LATEST").exists(), agent, procs, "a checkpoint")
    agent.send_signal(signal.SIGKILL)
    agent.wait(timeout=10)
    assert survivor.poll() is None and reborn.poll() is None
    second = procs.start("agent", 0, spec, **servers_env)
    assert second.wait(timeout=300) == 0, procs.log("agent", 0)[-3000:]
    assert survivor.wait(timeout=30) == 0 and reborn.wait(timeout=30) == 0
    assert "resumed from checkpoint" in procs.log("agent", 0)
    assert "dropping the previous connection" not in procs.log("env-server", 0)  # the old one was closed
    assert _timestep(tmp_path) >= 3000
