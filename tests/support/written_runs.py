"""A finished sweep written in the project's results layout, as its runners would leave it: for the reading
tests (tests/storage/test_reading_at_scale.py) and benchmarks/scale_reads.py.

Each trial gets its spec of record, history, progress.json (succeeded), metrics.jsonl, evaluation.jsonl, a
checkpoint (LATEST and its state), a log, and the run summary the runner writes at its end
(:func:`rlcloud.storage.summary.write_summary`, unless ``summaries=False``: a sweep from before summaries).
:func:`write_local_runs` writes such trials as finished local runs, with the state a local run leaves
(tests/local/test_listing.py, benchmarks/local_list.py).
"""

from __future__ import annotations

import json
import random
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def sweep_spec(name: str, trials: int, configs: int = 2) -> Any:
    """A SweepSpec of ``configs`` learning rates x ``trials // configs`` seeds (CartPole PPO)."""
    from rlcloud.specs.sweep import SweepSpec

    rates = [1e-3, 3e-4, 1e-4, 3e-5][:configs]
    return SweepSpec.from_dict(
        {
            "name": name,
            "experiment": "cartpole_ppo.yaml",
            "parameters": {"agent.learning_rate": rates},
            "seeds": max(1, trials // configs),
        },
        base_dir=EXAMPLES,
    )


def trial_files(trial: Any, episodes: int, *, summary: bool = True) -> dict[str, bytes]:
    """The objects of one finished trial, by name relative to its location."""
    from rlcloud.storage.summary import write_summary

    rng = random.Random(trial.seed * 7919 + int(trial.params["agent.learning_rate"] * 1e6))
    level = 100.0 if trial.params["agent.learning_rate"] == 1e-3 else 50.0
    steps = 25
    metrics = [
        {
            "episode": i + 1,
            "timestep": (i + 1) * steps,
            "return": round(level + rng.gauss(0, 10), 3),
            "length": steps,
            "time": round((i + 1) * 0.05, 3),
            "worker": 0,
        }
        for i in range(episodes)
    ]
    total = episodes * steps
    evaluation = [
        {
            "episode": k,
            "at_episode": episodes,
            "at_timestep": total,
            "return": level + k,
            "length": steps,
            "worker": -1,
        }
        for k in range(3)
    ]
    progress = {
        "state": "succeeded",
        "timestep": total,
        "episode": episodes,
        "mean_return": level,
        "steps_per_second": 500.0,
        "updated": 1.7e9,
        "elapsed": total / 500,
        "cpu_seconds": total / 400,
        "checkpoint": "ckpt-1",
    }
    files: dict[str, bytes] = {
        "spec.yaml": trial.spec.to_yaml().encode(),
        "history.jsonl": (json.dumps({"time": 1.7e9, "event": "created", "where": "test"}) + "\n").encode(),
        "progress.json": (json.dumps(progress) + "\n").encode(),
        "metrics.jsonl": "".join(json.dumps(m) + "\n" for m in metrics).encode(),
        "evaluation.jsonl": "".join(json.dumps(e) + "\n" for e in evaluation).encode(),
        "checkpoints/LATEST": b"ckpt-1",
        "checkpoints/ckpt-1/state.json": json.dumps({"timestep": total, "episode": episodes}).encode(),
        "logs/single-0.log": b"training\n",
    }
    if summary:
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("progress.json", "metrics.jsonl", "evaluation.jsonl"):
                (Path(tmp) / name).write_bytes(files[name])
            write_summary(Path(tmp))
            files["run-summary.json"] = (Path(tmp) / "run-summary.json").read_bytes()
    return files


def write_sweep(store: Any, spec: Any, episodes: int, *, summaries: bool = True) -> list[str]:
    """Write every trial of ``spec`` under ``store`` (the sweep's location) and its sweep.yaml; the trial names."""
    with tempfile.TemporaryDirectory() as tmp:
        pairs = []
        names = []
        for trial in spec.trials():
            names.append(trial.name)
            for name, data in trial_files(trial, episodes, summary=summaries).items():
                path = Path(tmp) / trial.name / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                pairs.append((path, f"{trial.name}/{name}"))
        sweep_yaml = Path(tmp) / "sweep.yaml"
        sweep_yaml.write_text(spec.to_yaml())
        pairs.append((sweep_yaml, "sweep.yaml"))
        store.upload_files(pairs)
    return names


def write_local_runs(root: Path, runs: int, *, facts: bool = True, prefix: str = "bench") -> list[str]:
    """Write ``runs`` finished local runs under ``root`` (the trials of a sweep named ``prefix``, each a run of
    its own, as a sweep's trials are under its location; 100 episodes, 2,500 timesteps each). ``facts=False``:
    runs started before state.json recorded their goal, budget and processes."""
    from rlcloud.local.state import STATE_DIR

    names = []
    for trial in sweep_spec(prefix, runs).trials():
        workdir = root / trial.name
        files = trial_files(trial, 100)
        for name, data in files.items():
            path = workdir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        state_dir = workdir / STATE_DIR
        state_dir.mkdir()
        (state_dir / "spec.yaml").write_bytes(files["spec.yaml"])
        runner = [sys.executable, "-m", "rlcloud.runner", "--workdir", str(workdir.resolve())]
        role = {
            # a process that ended long ago: its pid no longer runs with this start time
            "role": "single", "index": 0, "started": 1.7e9, "port": None, "pid": 2**22 - 1,
            "starttime": "1", "host": socket.gethostname(), "cmdline": runner,
        }  # fmt: skip
        state = {
            "name": trial.name, "results": str(root.resolve()), "workdir": str(workdir.resolve()),
            "run_mode": "single", "started": 1.7e9, "host": socket.gethostname(), "roles": [role],
            "stop_requested": False, "paused": False,
        }  # fmt: skip
        if facts:
            from rlcloud.backend import RunFacts

            state["facts"] = RunFacts.of_spec(trial.spec).to_record()
        (state_dir / "state.json").write_text(json.dumps(state, indent=1) + "\n")
        (state_dir / "single-0.exit").write_text("0\n")
        names.append(trial.name)
    return names


def write_local_sweep(root: Path, name: str, trials: int, *, facts: bool = True) -> list[str]:
    """Write a finished local sweep ``name`` of ``trials`` trials under ``root``: the trials as
    :func:`write_local_runs` writes them, under the sweep's location, and the sweep's own state (its spec and
    state.json, its scheduler long ended). The trial names."""
    from rlcloud.layout import SWEEP_SPEC
    from rlcloud.local.state import SWEEP_STATE_DIR

    location = root / name
    names = write_local_runs(location, trials, facts=facts, prefix=name)
    statedir = location / SWEEP_STATE_DIR
    statedir.mkdir()
    (statedir / SWEEP_SPEC).write_text(sweep_spec(name, trials).to_yaml())
    state = {
        "name": name, "results": str(root.resolve()), "location": str(location.resolve()), "max_parallel": 2,
        "started": 1.7e9, "stop_requested": False, "price_per_hour": None, "only": None, "grow_request": 0,
    }  # fmt: skip
    (statedir / "state.json").write_text(json.dumps(state, indent=1) + "\n")
    return names


def write_run(
    where: Path | Any,
    name: str,
    *,
    lr: float = 1e-3,
    seed: int | None = 1,
    returns: list[float] | None = None,
    steps_per_episode: int = 10,
    evaluation: dict[int, list[float]] | None = None,
    state: str = "succeeded",
    extra_spec: dict[str, Any] | None = None,
) -> str:
    """One run's results: spec.yaml, metrics.jsonl, progress.json, evaluation.jsonl (into a dir or a Store)."""
    returns = returns if returns is not None else [10.0] * 5
    spec = {
        "kind": "Experiment",
        "name": name,
        "environment": {"type": "gym", "level": "CartPole-v1"},
        "agent": {"type": "ppo", "batch_size": 5, "learning_rate": lr},
        "network": "auto",
        "total_timesteps": len(returns) * steps_per_episode,
        "seed": seed,
        "run_mode": "single",
        "results": str(where) if isinstance(where, Path) else None,  # differs by root: must not count
        **(extra_spec or {}),
    }
    metrics = [
        {
            "episode": i + 1,
            "timestep": (i + 1) * steps_per_episode,
            "return": r,
            "length": steps_per_episode,
            "time": 0.5 * (i + 1),
            "worker": 0,
        }
        for i, r in enumerate(returns)
    ]
    evals = [
        {"episode": k + 1, "timestep": at, "return": r, "length": 1, "time": 0.0, "worker": 0, "at_timestep": at}
        for at, values in (evaluation or {}).items()
        for k, r in enumerate(values)
    ]
    progress = {
        "state": state,
        "timestep": len(returns) * steps_per_episode,
        "episode": len(returns),
        "mean_return": None,
        "steps_per_second": 123.0,
        "updated": 0,
        "checkpoint": None,
    }
    files = {
        "spec.yaml": yaml.safe_dump(spec),
        "metrics.jsonl": "".join(json.dumps(m) + "\n" for m in metrics),
        "progress.json": json.dumps(progress),
        "evaluation.jsonl": "".join(json.dumps(e) + "\n" for e in evals),
    }
    if isinstance(where, Path):
        run = where / name
        run.mkdir(parents=True)
        for file, text in files.items():
            (run / file).write_text(text)
        return str(run)
    for file, text in files.items():
        where.child(name).write_text(file, text)
    return name
