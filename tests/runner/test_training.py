"""Real Tensorforce training through the runner: learning, reproducibility, checkpoints, resume, signals.

Budgets are small (CartPole PPO, seconds of training each); TensorFlow is imported once per test process,
and the tests that need a real process (kill -9, SIGTERM, exit codes) start ``python -m rlcloud.runner``.
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlcloud.runner.loop import Trainer, latest_checkpoint, read_jsonl
from rlcloud.specs import ExperimentSpec
from tests.support.runner import checkpoint_state, make_spec, run_runner, wait_for

FIXED_STATES = np.random.default_rng(42).normal(0.0, 0.3, size=(64, 4)).astype(np.float32)


def greedy_actions(agent: Any) -> np.ndarray:
    return np.asarray(agent.act(states=FIXED_STATES, independent=True, deterministic=True))


def weights(agent: Any) -> list[np.ndarray]:
    return [v.numpy() for v in agent.model.trainable_variables]


def returns(workdir: Path, name: str = "metrics.jsonl") -> list[float]:
    return [r["return"] for r in read_jsonl(workdir / name)]


@pytest.mark.training
def test_single_mode_learns(tmp_path: Path) -> None:
    spec = make_spec(total_timesteps=6000, summary_frequency="5s", saver_frequency="2000t")
    result = Trainer(spec, tmp_path).run()
    assert result.state == "succeeded" and result.timesteps == 6000
    got = returns(tmp_path)
    assert np.mean(got[-10:]) > 2 * np.mean(got[:10]), (got[:10], got[-10:])
    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["episode"] for r in records] == list(range(1, len(records) + 1))
    assert {r["worker"] for r in records} == {0}
    assert sum(r["length"] for r in records) <= 6000 and records[-1]["timestep"] <= 6000
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress["state"] == "succeeded" and progress["timestep"] == 6000
    assert progress["checkpoint"] == "ckpt-000000006000" == latest_checkpoint(tmp_path)
    # the heartbeat and the checkpoint's time (issue 30): the last timestep and the last save were just now
    assert progress["stall_timeout"] == 600 and progress["elapsed"] > 0
    assert progress["updated"] - 60 < progress["advanced_at"] <= progress["updated"]
    assert progress["updated"] - 60 < progress["checkpoint_at"] <= progress["updated"]
    assert any((tmp_path / "summaries").rglob("events.out.tfevents.*"))


@pytest.mark.training
def test_multi_threaded_learns_with_evaluation(tmp_path: Path) -> None:
    spec = make_spec(
        run_mode="multi-threaded",
        num_workers=8,
        execution="batched",
        total_timesteps=24000,
        evaluation={"every": "8000t", "episodes": 2},
        summary_frequency="2s",
    )
    result = Trainer(spec, tmp_path).run()
    assert result.state == "succeeded" and result.timesteps == 24000
    got = returns(tmp_path)
    assert np.mean(got[-20:]) > 2 * np.mean(got[:20]), (got[:20], got[-20:])
    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert {r["worker"] for r in records} == set(range(8))
    # rows that end in the same step each start their next episode from zero: no episode outlives
    # CartPole-v1's 500 steps, and the episodes' steps add up to no more than the run's
    assert max(r["length"] for r in records) <= 500 and sum(r["length"] for r in records) <= 24000
    assert all(r["return"] == r["length"] for r in records)  # CartPole: a reward of 1 per step
    evaluations = read_jsonl(tmp_path / "evaluation.jsonl")
    # every 8000 timesteps, and at the end (24000) although the run stops there
    assert [e["at_timestep"] for e in evaluations] == [8000, 8000, 16000, 16000, 24000, 24000]
    assert all(e["worker"] == -1 and e["length"] >= 1 for e in evaluations)


@pytest.mark.training
def test_single_mode_is_reproducible(tmp_path: Path) -> None:
    # the README's example agent (PPO with a critic), with the things that happen on the wall clock (checkpoints,
    # summaries) made frequent and an evaluation in between: none of them may change what is learned
    example = ExperimentSpec.from_file(Path(__file__).resolve().parents[2] / "examples" / "cartpole_ppo.yaml")
    spec = example.replace(
        run_mode="single", num_workers=1, total_timesteps=3000, saver_frequency="1s", summary_frequency="1s",
        evaluation={"every": "1000t", "episodes": 1},
    )  # fmt: skip
    runs = []
    for name in ("a", "b"):
        Trainer(spec, tmp_path / name).run()
        runs.append(
            [
                {k: v for k, v in r.items() if k != "time"}
                for kind in ("metrics.jsonl", "evaluation.jsonl")
                for r in read_jsonl(tmp_path / name / kind)
            ]
        )
    assert runs[0] == runs[1] and len(runs[0]) > 50


@pytest.mark.training
def test_overlapped_distributed_mode_is_reproducible(tmp_path: Path) -> None:
    # overlap: every env server hosts two environments and steps one while the agent acts on the other;
    # the order of the agent's calls is fixed, so the same seed gives the same episodes whichever server
    # answers first
    from rlcloud.runner.envs import make_env
    from rlcloud.runner.envserver import EnvServer
    from rlcloud.runner.remote import RemoteVectorEnv

    example = ExperimentSpec.from_file(Path(__file__).resolve().parents[2] / "examples" / "cartpole_ppo.yaml")
    environment = {"type": "rlcloud.runner.costly:CostlyCartPole", "step_ms": 2.0}
    spec = example.replace(
        run_mode="distributed", num_workers=4, environment=environment, total_timesteps=2000,
        saver_frequency="1s", summary_frequency=None, evaluation=None,
    )  # fmt: skip
    runs = []
    for name in ("a", "b"):
        servers = [
            EnvServer(
                [make_env(environment), make_env(environment)],
                host="127.0.0.1",
                port=0,
                idle_timeout=60,
                seed=1 + 1000 * (i + 1),
            )
            for i in range(4)
        ]
        threads = [threading.Thread(target=s.serve, daemon=True) for s in servers]
        for thread in threads:
            thread.start()
        venv = RemoteVectorEnv([f"127.0.0.1:{s.port}" for s in servers], connect_timeout=20, overlap=True)
        result = Trainer(spec, tmp_path / name, vector_env=venv).run()
        for thread in threads:
            thread.join(timeout=10)
        assert result.state == "succeeded" and venv.overlap is True
        runs.append(
            [{k: v for k, v in r.items() if k != "time"} for r in read_jsonl(tmp_path / name / "metrics.jsonl")]
        )
    assert runs[0] == runs[1] and len(runs[0]) > 50
    assert {r["worker"] for r in runs[0]} == set(range(8))  # 4 servers x 2 environments


class CaptureOnCheckpoint:
    """A hook that records the live agent's greedy actions and weights at each checkpoint."""

    def __init__(self) -> None:
        self.trainer: Trainer | None = None
        self.captured: dict[str, tuple[np.ndarray, list[np.ndarray]]] = {}
        self.finished: list[str] = []

    def on_finish(self, state: str) -> None:
        self.finished.append(state)

    def on_checkpoint(self, name: str) -> None:
        assert self.trainer is not None
        self.captured[name] = (greedy_actions(self.trainer.agent), weights(self.trainer.agent))


@pytest.mark.training
def test_resume_restores_weights_and_continues_counters(tmp_path: Path) -> None:
    hook = CaptureOnCheckpoint()
    first = Trainer(make_spec(total_timesteps=1500), tmp_path, hooks=hook)
    hook.trainer = first
    result = first.run()
    assert result.checkpoint == "ckpt-000000001500" and hook.finished == ["succeeded"]
    before_actions, before_weights = hook.captured["ckpt-000000001500"]
    episodes = result.episodes

    second = Trainer(make_spec(total_timesteps=2500), tmp_path)
    second.setup()
    assert second.counters["timestep"] == 1500 and second.counters["episode"] == episodes
    np.testing.assert_array_equal(greedy_actions(second.agent), before_actions)
    for a, b in zip(weights(second.agent), before_weights, strict=True):
        np.testing.assert_array_equal(a, b)
    result = second.run()
    assert result.timesteps == 2500 and result.episodes > episodes
    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["episode"] for r in records] == list(range(1, len(records) + 1))
    resumed = [r for r in records if r["episode"] > episodes]
    assert resumed and resumed[0]["timestep"] > 1500
    assert resumed[0]["time"] >= records[episodes - 1]["time"]  # time keeps counting from the first run


@pytest.mark.training
def test_kill_9_mid_run_then_resume(tmp_path: Path) -> None:
    spec = make_spec(total_timesteps=4000, saver_frequency="500t")
    proc = run_runner(spec, tmp_path)
    try:
        wait_for(lambda: (checkpoint_state(tmp_path) or {}).get("timestep", 0) >= 1000, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    state = checkpoint_state(tmp_path)
    assert state is not None
    # What the killed process saved, read back by Tensorforce's own loader (agent.json + TF checkpoint).
    from rlcloud.runner.compat import import_tensorforce

    tensorforce = import_tensorforce()
    saved = tensorforce.Agent.load(directory=str(tmp_path / "checkpoints" / state["name"]), filename="agent")
    saved_actions, saved_weights = greedy_actions(saved), weights(saved)
    saved.close()

    trainer = Trainer(spec, tmp_path)
    trainer.setup()
    assert trainer.counters["timestep"] == state["timestep"] and trainer.counters["episode"] == state["episode"]
    np.testing.assert_array_equal(greedy_actions(trainer.agent), saved_actions)
    for a, b in zip(weights(trainer.agent), saved_weights, strict=True):
        np.testing.assert_array_equal(a, b)
    result = trainer.run()
    assert result.state == "succeeded" and result.timesteps == 4000
    records = read_jsonl(tmp_path / "metrics.jsonl")
    # Episodes the killed process logged after its last checkpoint were dropped and redone: no duplicates.
    assert [r["episode"] for r in records] == list(range(1, len(records) + 1))
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))
    assert len([p for p in (tmp_path / "checkpoints").iterdir() if p.is_dir()]) <= 3


@pytest.mark.training
def test_sigterm_checkpoints_and_exits_143(tmp_path: Path) -> None:
    spec = make_spec(total_timesteps=10_000_000)
    proc = run_runner(spec, tmp_path)

    def training() -> bool:
        try:
            return json.loads((tmp_path / "progress.json").read_text())["timestep"] >= 300
        except (FileNotFoundError, json.JSONDecodeError):
            return False

    wait_for(training, proc)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=10)  # the contract: a checkpoint and exit within 10 s
    assert proc.returncode == 143, output
    state = checkpoint_state(tmp_path)
    assert state is not None and state["timestep"] >= 300
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress["state"] == "stopped" and progress["checkpoint"] == state["name"]
    assert "single-0 INFO" in output and "received SIGTERM" in output


@pytest.mark.processes
def test_spec_errors_exit_2_before_tensorflow(tmp_path: Path) -> None:
    spec = make_spec(environment={"type": "gym", "level": "CartPole-v9"})
    proc = run_runner(spec, tmp_path / "bad-id")
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, output
    assert "environment.level: unknown gymnasium id; did you mean 'CartPole-v1'" in output
    proc = run_runner(make_spec(), tmp_path / "wrong-role", role="multi")
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "role multi serves run_mode multi-threaded" in output


@pytest.mark.processes
def test_environment_construction_error_exits_3(tmp_path: Path) -> None:
    (tmp_path / "badenv.py").write_text(
        textwrap.dedent(
            """
            import gymnasium

            class Env(gymnasium.Env):  # an environment class (a plain callable is refused unrun)
                def __init__(self):
                    raise RuntimeError("no simulator licence")
            """
        )
    )
    spec = make_spec(environment={"type": "badenv:Env"})
    proc = run_runner(spec, tmp_path / "work", env={**os.environ, "PYTHONPATH": str(tmp_path)})
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 3, output
    assert "no simulator licence" in output


def test_latest_checkpoint_ignores_incomplete_saves(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    (root / "ckpt-000000000100").mkdir(parents=True)
    (root / "ckpt-000000000100" / "state.json").write_text('{"timestep": 100}')
    # A crash mid-save: the new directory is still a hidden temporary, LATEST still names the old one.
    (root / ".tmp-ckpt-000000000200-999").mkdir()
    (root / "LATEST").write_text("ckpt-000000000100\n")
    assert latest_checkpoint(tmp_path) == "ckpt-000000000100"
    # A LATEST that names a directory without its state.json (written last) is not trusted.
    (root / "ckpt-000000000300").mkdir()
    (root / "LATEST").write_text("ckpt-000000000300\n")
    assert latest_checkpoint(tmp_path) is None
    assert latest_checkpoint(tmp_path / "nowhere") is None


@pytest.mark.processes
def test_sigterm_while_starting_exits_143_at_once(tmp_path: Path) -> None:
    proc = run_runner(make_spec(), tmp_path)
    wait_for(lambda: (tmp_path / "checkpoints").exists(), proc, timeout=120)  # set up, TensorFlow loading
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=10)
    assert proc.returncode == 143, output
    assert "while starting: stopping without a checkpoint" in output
    assert latest_checkpoint(tmp_path) is None


@pytest.mark.training
def test_tensorboard_has_every_episode_and_readable_agent_scalars_against_timesteps(tmp_path: Path) -> None:
    import tensorflow as tf

    spec = make_spec(total_timesteps=3000, summary_frequency="2s")
    assert Trainer(spec, tmp_path).run().state == "succeeded"
    records = read_jsonl(tmp_path / "metrics.jsonl")
    events = list((tmp_path / "summaries").rglob("events.out.tfevents.*"))
    assert len(events) == 1  # rlcloud's; Tensorforce's own (x = update index) are outside the logdir
    points: dict[str, list[tuple[int, float]]] = {}
    for event in tf.compat.v1.train.summary_iterator(str(events[0])):
        for value in event.summary.value:
            points.setdefault(value.tag, []).append((event.step, float(tf.make_ndarray(value.tensor))))
    # one point per episode, at the timestep it ended, with its return and length
    assert points["episode/return"] == [(r["timestep"], r["return"]) for r in records]
    assert points["episode/length"] == [(r["timestep"], r["length"]) for r in records]
    assert len(records) > 20
    # the agent's scalars: readable names, x = the timestep of their update (PPO updates every 5 episodes)
    agent = {tag for tag in points if tag.startswith("agent/")}
    assert {"agent/policy-loss", "agent/entropy", "agent/kl-divergence", "agent/policy-update-norm"} <= agent
    assert "agent/update-norm" not in agent  # one curve per optimizer (PPO with a baseline has two)
    assert not any("/cond" in tag or "losses/" in tag for tag in points)  # graph-internal names
    steps = [step for step, _ in points["agent/policy-loss"]]
    ends = {r["timestep"] for r in records}
    assert len(steps) >= 5 and steps == sorted(steps) and set(steps) <= ends and steps[-1] <= 3000
    assert points["episode/mean_return_last_20"][-1][0] == 3000
