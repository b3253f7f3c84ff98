"""A hung env server is replaced and its environments rejoin, without the learner restarting (issue 30).

Real processes: the local supervisor runs ``python -m rlcloud.runner --role env-server`` as the local backend
starts it; the test is the agent (:class:`rlcloud.runner.remote.RemoteVectorEnv`, as the learner uses it).
The test stops the env server with SIGSTOP: it answers nothing, and its request loop's heartbeat ages. The
agent's step times out and it reconnects; the supervisor sees the heartbeat stall_timeout old, kills the
server (SIGTERM + SIGCONT) and starts it again on the same port; the agent's wait ends with the server's
environment reset and the episode it was in truncated. The test waits on the agent's own calls, never on
sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from rlcloud.local import LocalBackend
from rlcloud.local.state import RunState
from rlcloud.runner.remote import RemoteVectorEnv
from rlcloud.runner.watchdog import heartbeat_path
from rlcloud.specs import ExperimentSpec
from tests.support.waiting import eventually


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.processes
def test_a_stopped_env_server_is_replaced_and_the_agent_carries_on(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "hung-server",
                "environment": {"type": "gym", "level": "CartPole-v1"},
                "agent": {"type": "ppo", "batch_size": 10},
                "run_mode": "distributed",
                "num_workers": 1,
                "total_timesteps": 1000,
                "stall_timeout": "3s",
            }
        )
    )
    run = RunState(workdir)
    run.state_dir.mkdir()  # as the local backend's start leaves it
    port = _free_port()
    log_path = tmp_path / "env-server-0.log"
    runner = [sys.executable, "-m", "rlcloud.runner", "--role", "env-server", "--index", "0",
              "--spec", str(spec), "--workdir", str(workdir)]  # fmt: skip
    with open(log_path, "ab") as log:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "rlcloud.local.supervisor", "--workdir", str(workdir), "--label", "env-server-0",
             "--grace", "10", "--stall-timeout", "3", "--", *runner],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "RLCLOUD_PORT": str(port), "RLCLOUD_BIND_HOST": "127.0.0.1"},
        )  # fmt: skip
    venv = None
    try:
        venv = RemoteVectorEnv([f"127.0.0.1:{port}"], connect_timeout=60, step_timeout=1.0)
        venv.reset()
        for _ in range(3):
            _states, _rewards, terminals = venv.step(np.zeros(1, dtype=np.int64))
        first = run.runner("env-server-0")
        assert first is not None and heartbeat_path(workdir, "env-server-0").exists()
        os.kill(int(first["pid"]), signal.SIGSTOP)  # hung: no answer, no heartbeat
        # this step's answer never comes: the agent drops the server, the supervisor replaces it, the agent's
        # reconnection resets its environment and the row comes back truncated
        _states, rewards, terminals = venv.step(np.zeros(1, dtype=np.int64))
        assert terminals.tolist() == [2] and rewards.tolist() == [0.0]
        assert venv.reconnects == 1
        second = run.runner("env-server-0")
        assert second is not None and second["pid"] != first["pid"]
        for _ in range(3):  # the new server steps on
            _states, _rewards, terminals = venv.step(np.zeros(1, dtype=np.int64))
        assert venv.reconnects == 1
        assert run.restarts_file("env-server-0").read_text().strip() == "1"
        venv.close(finished=True)  # the run is over: the new server exits 0, and with it its supervisor
        venv = None
        assert supervisor.wait(60) == 0
    finally:
        if venv is not None:
            venv.close(finished=True)
        if supervisor.poll() is None:
            os.killpg(supervisor.pid, signal.SIGKILL)
            supervisor.wait()
    log_text = log_path.read_text(errors="replace")
    assert "env-server-0 stalled: no heartbeat (it stopped answering) for" in log_text, log_text
    assert "replacing it" in log_text
    assert run.exit_code("env-server-0") == 0


@pytest.mark.processes
@pytest.mark.training
def test_a_distributed_run_survives_a_hung_env_server_without_restarting_its_learner(tmp_path: Path) -> None:
    """The local backend, real agent and env servers: env-server-1 is stopped mid-run. Its supervisor replaces
    it, the agent rejoins the new one, and the run succeeds with the learner never restarted."""
    root = tmp_path / "results"
    backend = LocalBackend(str(root), grace_period=20)
    spec = ExperimentSpec.from_dict(
        {
            "name": "hung-dist",
            "environment": {"type": "gym", "level": "CartPole-v1"},
            "agent": {"type": "ppo", "batch_size": 10, "learning_rate": 1e-3},
            "run_mode": "distributed",
            "num_workers": 2,
            "total_timesteps": 2000,
            "stall_timeout": "6s",
        }
    )
    workdir = root / "hung-dist"
    try:
        backend.start(spec, str(root))
        progress = workdir / "progress.json"
        eventually(
            lambda: progress.exists() and json.loads(progress.read_text()).get("timestep", 0) >= 300,
            timeout=300,
            what="training",
        )
        hung = RunState(workdir).runner("env-server-1")
        assert hung is not None
        os.kill(int(hung["pid"]), signal.SIGSTOP)
        final = backend.wait("hung-dist", timeout=400)
    finally:
        for name in backend.list():
            backend.stop(name)
    assert final.state == "succeeded", final.message
    restarts = {r.label: r.restarts for r in final.roles}
    assert restarts == {"agent-0": 0, "env-server-0": 0, "env-server-1": 1}
    agent_log = (workdir / "logs" / "agent-0.log").read_text(errors="replace")
    assert "lost (receive: timed out); reconnecting" in agent_log and " is back" in agent_log
    assert "stalled: no timestep" not in agent_log
    assert "env-server-1 stalled: no heartbeat" in (workdir / "logs" / "env-server-1.log").read_text(errors="replace")
    assert final.progress["timestep"] >= 2000
