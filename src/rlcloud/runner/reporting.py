"""What the trainer reports as it trains: its counters, TensorBoard summaries (episodes, throughput and the
agent's own, forwarded against timesteps) and progress.json. A mixin of :class:`rlcloud.runner.loop.Trainer`."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rlcloud.layout import (
    AGENT_SUMMARIES,
    CHECKPOINT_STATE,
    EVALUATION,
    PROGRESS,
    STOPPED_EARLY,
    ProgressRecord,
    checkpoint_path,
)
from rlcloud.runner.checkpoints import atomic_write_text, latest_checkpoint
from rlcloud.runner.envs import EnvAdapter
from rlcloud.runner.vector import EnvFactory

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec

__all__ = ["Reporting", "agent_summary_name"]

logger = logging.getLogger("rlcloud.runner.loop")


@dataclass
class _Counters:
    timestep: int = 0
    episode: int = 0
    evaluation_episode: int = 0
    elapsed: float = 0.0
    next_evaluation: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _env_factory(spec: ExperimentSpec) -> EnvFactory:
    return EnvFactory(
        environment=dict(spec.environment),
        repeat_actions=spec.repeat_actions,
        max_timesteps_per_episode=spec.max_timesteps_per_episode,
    )


class Reporting:
    """The trainer's summaries and progress (the attributes below are the trainer's)."""

    spec: ExperimentSpec
    workdir: Path
    agent: Any
    _counters: _Counters
    _returns: deque[float]
    _summary_writer: Any
    _update_marks: list[tuple[int, int]]
    _forwarded: dict[str, int]
    _advanced_at: float
    _advanced_timestep: int | None
    _checkpoint: str | None
    _checkpoint_at: float | None
    _stop_reason: str
    _stop: threading.Event
    _eval_env: EnvAdapter | None
    last_evaluation: float | None

    # -- evaluation
    def _evaluate(self, episodes: int) -> None:
        agent, c = self.agent, self._counters
        if self._eval_env is None:
            self._eval_env = _env_factory(self.spec)()
            seed = self.spec.seed
            self._eval_env.reset(seed=None if seed is None else int(seed) + 100_003)
        env = self._eval_env
        path = self.workdir / EVALUATION
        returns = []
        with open(path, "a", encoding="utf-8") as fh:
            for _ in range(episodes):
                state = env.reset()
                internals = agent.initial_internals()
                total, length, terminal = 0.0, 0, 0
                while not terminal and not self._stop.is_set():
                    action, internals = agent.act(
                        states=state, internals=internals, independent=True, deterministic=True
                    )
                    state, reward, terminal = env.step(action)
                    total += reward
                    length += 1
                if self._stop.is_set() and not terminal:
                    break  # an unfinished evaluation episode is not a result
                c.evaluation_episode += 1
                returns.append(total)
                record = {
                    "episode": c.evaluation_episode,
                    "timestep": c.timestep,
                    "return": total,
                    "length": length,
                    "time": round(c.elapsed, 3),
                    "worker": -1,
                    "at_episode": c.episode,
                    "at_timestep": c.timestep,
                }
                fh.write(json.dumps(record) + "\n")
                fh.flush()
                # an evaluation episode is progress too: a long evaluation must not read as a stall
                self._advanced_at = time.time()
                self._write_progress("running")
        if returns:
            self.last_evaluation = float(np.mean(returns))
            logger.info(
                "evaluation at episode %d: mean return %.1f over %d episodes", c.episode, np.mean(returns), len(returns)
            )
            if self._summary_writer is not None:
                import tensorflow as tf

                with self._summary_writer.as_default(step=c.timestep):
                    tf.summary.scalar("evaluation/mean_return", float(np.mean(returns)))

    # -- summaries
    def _summarize_episode(self, ret: float, length: int) -> None:
        """One point per episode against timesteps: TensorBoard's curve of the returns is every episode, not
        one point per ``summary_frequency`` (the writer buffers; :meth:`_summarize` flushes). The running
        mean too: it is a sweep's objective, whose curve HParams shows (a trial stopped before its first
        ``summary_frequency`` would have none)."""
        if self._summary_writer is None:
            return
        import tensorflow as tf

        with self._summary_writer.as_default(step=self._counters.timestep):
            tf.summary.scalar("episode/return", ret)
            tf.summary.scalar("episode/length", length)
            tf.summary.scalar(f"episode/mean_return_last_{self._returns.maxlen}", float(np.mean(self._returns)))

    def _mark_updates(self) -> None:
        """Remember the timestep at which the agent's update count last changed: the x of its summaries."""
        if self._summary_writer is None:
            return
        try:
            updates = int(self.agent.model.updates.numpy())
        except Exception:  # an agent without Tensorforce's update counter (remote, or a stand-in)
            return
        if not self._update_marks or updates > self._update_marks[-1][0]:
            self._update_marks.append((updates, self._counters.timestep))

    def _forward_agent_summaries(self) -> None:
        """Tensorforce's update summaries, renamed (agent/policy-loss, agent/entropy...) and put against the
        timestep of their update, into rlcloud's event file. Each file is read on from where the last call
        stopped (TFRecord framing: length, CRC, event, CRC); an event whose update's timestep is not known
        yet, or a record still being written, waits for the next call."""
        if self._summary_writer is None or not self._update_marks:
            return
        import bisect
        import struct

        import tensorflow as tf

        counts = [u for u, _ in self._update_marks]
        for path in sorted((self.workdir / AGENT_SUMMARIES).rglob("events.out.tfevents.*")):
            offset = self._forwarded.get(str(path), 0)
            with open(path, "rb") as file, self._summary_writer.as_default():
                file.seek(offset)
                while True:
                    head = file.read(12)
                    if len(head) < 12:
                        break
                    (length,) = struct.unpack("<Q", head[:8])
                    body = file.read(length + 4)
                    if len(body) < length + 4:
                        break
                    event = tf.compat.v1.Event.FromString(body[:length])
                    at = bisect.bisect_right(counts, int(event.step))  # the first mark past this update
                    if event.summary.value and at == len(counts):
                        break
                    for value in event.summary.value:
                        data = value.simple_value if value.HasField("simple_value") else tf.make_ndarray(value.tensor)
                        tf.summary.scalar(agent_summary_name(value.tag), float(data), step=self._update_marks[at][1])
                    offset = file.tell()
            self._forwarded[str(path)] = offset

    def _summarize(self, now: float, last: tuple[float, int]) -> None:
        if self._summary_writer is None:
            return
        import tensorflow as tf

        c = self._counters
        self._forward_agent_summaries()
        with self._summary_writer.as_default(step=c.timestep):
            mean = self._mean_return()
            if mean is not None:
                tf.summary.scalar(f"episode/mean_return_last_{self._returns.maxlen}", mean)
            tf.summary.scalar("episode/count", c.episode)
            if now > last[0]:
                tf.summary.scalar("throughput/steps_per_second", (c.timestep - last[1]) / (now - last[0]))
        self._summary_writer.flush()

    # -- progress
    def _mean_return(self) -> float | None:
        return float(np.mean(self._returns)) if self._returns else None

    @property
    def mean_return(self) -> float | None:
        """Mean return of the last 20 training episodes (None before the first episode ends)."""
        return self._mean_return()

    def _steps_per_second(self) -> float | None:
        """The run's one steps/s figure, every view's (status, list, bars, compare, logs): its timesteps over
        its training time (``elapsed``: the training loop's clock over every attempt, evaluations and
        checkpoints included, TensorFlow's import not), so that rate x time = timesteps; None before a step."""
        c = self._counters
        return c.timestep / c.elapsed if c.timestep > 0 and c.elapsed > 0 else None

    def _mark_starting(self) -> None:
        """progress.json says "starting" while TensorFlow loads and the agent is built (up to a minute), with
        the counters of the checkpoint it resumes from (zero without one): a resumed run's figures are not a
        live rate, and a dead attempt's counters past its checkpoint are not shown."""
        path = self.workdir / PROGRESS
        from rlcloud.errors import RecordError
        from rlcloud.stored import read_record_file

        try:
            previous = read_record_file(path)
        except (OSError, RecordError) as exc:
            if not isinstance(exc, FileNotFoundError):
                logger.warning("%s", exc)
            previous = {}
        progress: dict[str, Any] = {"timestep": 0, "episode": 0, "mean_return": None, "checkpoint": None}
        progress.update(previous if isinstance(previous, dict) else {})
        # the counters are those the run resumes from (its latest checkpoint's, else zero), not the ones a
        # dead attempt reached after it: progress never shows timesteps it will go back on
        progress.update(timestep=0, episode=0, mean_return=None, checkpoint=None)
        name = latest_checkpoint(self.workdir)
        if name is not None:
            with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                saved = self.workdir / checkpoint_path(name) / CHECKPOINT_STATE
                state = json.loads(saved.read_text(encoding="utf-8"))
                progress.update(timestep=int(state["timestep"]), episode=int(state["episode"]), checkpoint=name)
        now = time.time()
        # a fresh process gets a whole stall_timeout from its start, whatever the previous one did
        progress.update(state="starting", steps_per_second=None, updated=now, advanced_at=now)
        progress["stall_timeout"] = self.spec.stall_timeout.seconds
        progress.pop("stop_reason", None)
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, json.dumps(progress) + "\n")
        except OSError:
            logger.exception("could not write progress.json")

    def _write_progress(self, state: str) -> None:
        c = self._counters
        if not self.workdir.exists():
            return
        now = time.time()
        if c.timestep != self._advanced_timestep:
            self._advanced_timestep, self._advanced_at = c.timestep, now
        progress = {
            "state": state,
            "timestep": c.timestep,
            "episode": c.episode,
            "mean_return": self._mean_return(),
            "steps_per_second": None if (rate := self._steps_per_second()) is None else round(rate, 1),
            "updated": now,
            # the heartbeat (docs/contracts.md): status calls a run stalled when this is stall_timeout old
            "advanced_at": self._advanced_at,
            "stall_timeout": self.spec.stall_timeout.seconds,
            "checkpoint": self._checkpoint,
            "checkpoint_at": self._checkpoint_at,
            "elapsed": round(c.elapsed, 1),
            # this process's CPU time (TensorFlow's start included): what packing trials onto cores costs
            "cpu_seconds": round(time.process_time(), 2),
        }
        if state == STOPPED_EARLY:
            progress["stop_reason"] = self._stop_reason
        try:
            atomic_write_text(self.workdir / PROGRESS, ProgressRecord(progress).to_json())
        except OSError:
            logger.exception("could not write progress.json")


def agent_summary_name(tag: str) -> str:
    """A Tensorforce summary's graph name made readable: ``agent/cond_2/losses/policy-loss`` ->
    ``agent/policy-loss``. An optimizer's summary keeps which optimizer (PPO's policy and baseline optimizers
    both write ``update-norm``, which one curve would mix): ``policy_optimizer/update-norm`` ->
    ``agent/policy-update-norm``, ``baseline_optimizer/update-norm`` -> ``agent/baseline-update-norm``."""
    parts = tag.rsplit("/", 2)
    if len(parts) >= 2 and parts[-2].endswith("_optimizer"):
        return f"agent/{parts[-2].removesuffix('_optimizer')}-{parts[-1]}"
    return "agent/" + parts[-1]
