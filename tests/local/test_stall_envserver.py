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

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

from rlcloud.local.state import RunState
from rlcloud.runner.remote import RemoteVectorEnv
from rlcloud.runner.watchdog import heartbeat_path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
