"""Local-backend test helpers: a spec, a run's work directory and what its processes left there."""

from __future__ import annotations

import json
from pathlib import Path

from rlcloud.specs import ExperimentSpec


def _spec(name: str, **overrides: object) -> ExperimentSpec:
    data: dict[str, object] = {
        "name": name,
        "environment": {"type": "gym", "level": "CartPole-v1"},
        "agent": {"type": "ppo", "batch_size": 10, "learning_rate": 1e-3},
        "network": "auto",
        "total_timesteps": 300,
        "seed": 1,
        **overrides,
    }
    return ExperimentSpec.from_dict(data)


def _workdir(tmp_path: Path, name: str) -> Path:
    return tmp_path / "results" / name


def _runners(workdir: Path, role: str = "learner") -> list[int]:
    """The pids of the learner runners (or, with role="env-server", the env servers) the run has had."""
    path = workdir / "runners.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return [int(line.split()[-1]) for line in lines if line.startswith("env-server") == (role == "env-server")]


def _episodes(workdir: Path) -> list[int]:
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    return [int(json.loads(line)["episode"]) for line in lines]
