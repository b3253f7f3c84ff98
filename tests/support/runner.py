"""Runner test helpers: a spec, the runner as a process, its checkpoint, a fresh Python for a snippet."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from rlcloud.runner.loop import latest_checkpoint
from rlcloud.specs import ExperimentSpec

CARTPOLE = {"type": "gym", "level": "CartPole-v1"}
PPO = {"type": "ppo", "batch_size": 10, "learning_rate": 1e-3}


def make_spec(**overrides: Any) -> ExperimentSpec:
    fields: dict[str, Any] = dict(name="cartpole", environment=CARTPOLE, agent=PPO, seed=7, total_timesteps=2000)
    fields.update(overrides)
    return ExperimentSpec(**fields)


def run_runner(spec: ExperimentSpec, workdir: Path, role: str = "single", **popen: Any) -> subprocess.Popen[str]:
    spec_path = workdir.parent / f"{workdir.name}-spec.yaml"
    spec_path.write_text(spec.to_yaml())
    command = [sys.executable, "-m", "rlcloud.runner", "--role", role, "--index", "0"]
    command += ["--spec", str(spec_path), "--workdir", str(workdir)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)


def wait_for(predicate: Any, proc: subprocess.Popen[str], timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(
                f"runner exited early ({proc.returncode}):\n{proc.stdout.read() if proc.stdout else ''}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("timed out waiting for the runner")
        time.sleep(0.1)


def checkpoint_state(workdir: Path) -> dict[str, Any] | None:
    name = latest_checkpoint(workdir)
    if name is None:
        return None
    return json.loads((workdir / "checkpoints" / name / "state.json").read_text())


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=environ, timeout=300
    )
