"""The training loop: one Tensorforce agent driven over a :class:`~rlcloud.runner.vector.VectorEnv`.

The agent is driven directly, not through ``tensorforce.Runner``: one act and one observe for every row
per vector step, through :class:`~rlcloud.runner.agent_calls.AgentCalls`, which calls the agent's
TensorFlow functions without Tensorforce's per-call Python work. The Runner's per-environment Python
bookkeeping, and that work, not TensorFlow, is what capped the throughput (FACTS.md; issue 15's figures in
benchmarks/runner_throughput.py).

What the loop writes into the work directory (docs/contracts.md, "Results layout"):

* ``metrics.jsonl``: one line per finished training episode, flushed at once so a crash loses nothing
  complete; ``evaluation.jsonl``: the same for evaluation episodes plus ``at_episode``/``at_timestep``
  (every ``evaluation.every``, and once more when the run reaches its stop condition off the schedule).
* ``progress.json``: the latest counters, replaced atomically (tmp + rename).
* ``checkpoints/<name>/`` (agent files + ``state.json``) and ``checkpoints/LATEST``: the directory is
  complete before LATEST names it, so a crash mid-save leaves the previous checkpoint loadable.
* ``summaries/``: TensorBoard events against timesteps: each episode's return and length, the mean of the
  last 20, throughput, evaluation means, and the agent's losses, KL divergence, update norms (one per
  optimizer) and entropy (forwarded from ``tensorforce-summaries/``, where Tensorforce writes them against
  its update index).

Resume: a work directory whose ``checkpoints/LATEST`` names a checkpoint restores the agent and continues
the counters; records written after that checkpoint (episodes or timesteps past it) are dropped, atomically,
so that episode numbers stay unique and timesteps never go backwards. A run restarted before its first
checkpoint starts from empty records: the dead attempt's episodes are dropped with its counters. A latest
checkpoint that cannot be restored (a truncated agent file, a broken state.json) is set aside and the
previous complete one (three are kept) is restored instead, which the log says; only when none can be
restored does the run fail (:class:`CheckpointError`), naming each checkpoint and why.

Stop: ``episodes`` / ``total_timesteps`` (all rows together; every vector step adds ``num_envs``
timesteps, so a run may end up to ``num_envs - 1`` past ``total_timesteps``), or
:meth:`Trainer.request_stop` (the signal handlers in runner/main.py call it): a checkpoint is written and
:meth:`Trainer.run` returns.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.layout import (
    AGENT_SUMMARIES,
    CHECKPOINT_STATE,
    CHECKPOINTS,
    EVALUATION,
    LATEST,
    METRICS,
    STOPPED_EARLY,
    SUMMARIES,
    checkpoint_path,
)
from rlcloud.runner.agent_calls import AgentCalls
from rlcloud.runner.checkpoints import (
    CheckpointError,
    _truncate_jsonl,
    _within,
    atomic_write_text,
    latest_checkpoint,
    read_jsonl,
    restorable_checkpoints,
)
from rlcloud.runner.envs import DETERMINISTIC_PROBLEM, EnvAdapter
from rlcloud.runner.inlining import inline_nested_functions
from rlcloud.runner.kernels import choose_cpu_kernels
from rlcloud.runner.overlap import overlapped_stepper
from rlcloud.runner.reporting import Reporting, _Counters, _env_factory, agent_summary_name
from rlcloud.runner.saving import restore_agent, save_agent
from rlcloud.runner.updates import TimestepUpdates
from rlcloud.runner.vector import VectorEnv, make_vector_env

if TYPE_CHECKING:  # the runner imports the spec models only when it loads a spec
    from rlcloud.specs import ExperimentSpec, Frequency

__all__ = [
    "CHECKPOINTS_KEPT",
    "CheckpointError",
    "LoopHooks",
    "TrainResult",
    "Trainer",
    "agent_summary_name",
    "atomic_write_text",
    "build_agent_kwargs",
    "build_vector_env",
    "latest_checkpoint",
    "read_jsonl",
    "restorable_checkpoints",
    "train",
]

logger = logging.getLogger(__name__)

#: Complete checkpoints kept on disk (the newest ones; LATEST always among them).
CHECKPOINTS_KEPT = 3
#: Episodes averaged for ``mean_return`` in progress.json.
MEAN_WINDOW = 20
_TICK_S = 1.0
_LOG_S = 10.0


class LoopHooks(Protocol):
    """Callbacks the loop makes, e.g. to a results syncer. Every method is optional.

    ``on_tick()`` about once a second (after progress.json is written); ``on_checkpoint(name)`` after a
    checkpoint is complete and LATEST names it; ``on_finish(state)`` once at the end with the final
    state ("succeeded" / "stopped" / "failed"); ``on_decision(timestep)`` at the step whose timestep reaches
    :attr:`Trainer.decision_at` (rlcloud.runner.early_stop). A hook that raises is logged and does not stop
    training.
    """

    def on_tick(self) -> None:
        """About once a second."""

    def on_checkpoint(self, name: str) -> None:
        """After checkpoint ``name`` is complete (LATEST names it)."""

    def on_finish(self, state: str) -> None:
        """Once, when the loop ends."""


@dataclass
class TrainResult:
    """How a training run ended."""

    state: str
    episodes: int
    timesteps: int
    elapsed: float
    steps_per_second: float
    mean_return: float | None
    checkpoint: str | None
    stop_reason: str = ""


# ----------------------------------------------------------------------------------------------- spec


def build_agent_kwargs(spec: ExperimentSpec, venv: VectorEnv) -> dict[str, Any]:
    """Arguments for ``tensorforce.Agent.create`` from the spec and the environments' specs."""
    agent = dict(spec.agent)
    agent_type = agent.pop("type", None) or agent.pop("agent", None)
    if not agent_type:
        raise SpecError([SpecProblem("agent.type", "required, e.g. ppo, dqn, a2c")])
    network = spec.network
    if network != "auto" and "network" not in agent:
        agent["network"] = network
    config = dict(agent.pop("config", None) or {})
    if spec.seed is not None:
        config.setdefault("seed", spec.seed)
    # Tensorforce's in-graph argument checks re-check, on every call, what the runner's adapter already
    # guarantees (shapes, one terminal per episode's end); without them the first observe traces in
    # 3.2 s instead of 3.6-4.1 s and a run learns exactly the same (issue 15). debug_logging keeps them.
    config.setdefault("create_tf_assertions", spec.debug_logging)
    agent["config"] = config
    agent.update(
        agent=agent_type,
        states=venv.states_spec,
        actions=venv.actions_spec,
        max_episode_timesteps=venv.max_episode_timesteps,
        parallel_interactions=venv.num_envs,
    )
    return agent


def build_vector_env(spec: ExperimentSpec) -> VectorEnv:
    """The environments a ``single`` or ``multi-threaded`` spec trains on (distributed: runner/remote.py)."""
    mode = spec.run_mode
    factory = _env_factory(spec)
    if mode == "single":
        return make_vector_env(factory, 1, execution="batched", seed=spec.seed)
    if mode == "multi-threaded":
        return make_vector_env(factory, spec.num_workers, execution=spec.execution, seed=spec.seed)
    raise SpecError([SpecProblem("run_mode", "the distributed mode gets its environments from env servers", mode)])


@dataclass
class _Schedule:
    """When the loop last checkpointed (time, episode, timestep), summarised (time, timestep), wrote progress and
    logged, and the position (episode or timestep) of its last evaluation; its clock's start and the training
    time of earlier attempts."""

    start: float
    base_elapsed: float
    save: tuple[float, int, int]
    summary: tuple[float, int]
    tick: float
    log: float
    evaluated_at: int | None = None


class _Stepper:
    """One vector step of ``agent`` over the environments, with each row's unfinished episode. Made anew (the
    environments reset, unfinished episodes dropped as on a resume) when the trainer's agent is replaced."""

    def __init__(self, agent: Any, venv: VectorEnv) -> None:
        self.agent, self.venv = agent, venv
        self.rows = np.arange(venv.num_envs)
        self.calls = AgentCalls(agent, self.rows)
        # several environments: updates at one environment's rate, not once per episode (runner/updates.py)
        self.updates = TimestepUpdates.for_agent(agent)
        self.ep_return = np.zeros(venv.num_envs)
        self.ep_length = np.zeros(venv.num_envs, dtype=np.int64)
        self.states = venv.reset()
        self.overlapped: Any = None

    def step(self) -> tuple[Any, Any, Any]:
        """One step: (the rows stepped, their rewards, their terminals)."""
        stepped = self.rows
        if self.overlapped is not None:
            stepped, rewards, terminals = self.overlapped.step()
        else:
            actions = self.calls.act(self.states)
            self.states, rewards, terminals = self.venv.step(actions)
            self.calls.observe(rewards, terminals)
            # `execution: overlapped` (env servers): from here on the agent acts on one group of
            # the rows while the servers step the others (runner/overlap.py); otherwise None.
            self.overlapped = overlapped_stepper(self.agent, self.venv, states=self.states)
        if self.updates is not None:
            self.updates.catch_up()
        return stepped, rewards, terminals


# --------------------------------------------------------------------------------------------- trainer


class Trainer(Reporting):
    """Trains ``spec``'s agent on a vector of environments, writing results into ``workdir``.

    ``vector_env`` defaults to the environments ``spec.run_mode`` describes (single: one; multi-threaded:
    ``num_workers``, batched or in processes). ``hooks`` gets the :class:`LoopHooks` callbacks.
    """

    def __init__(
        self,
        spec: ExperimentSpec,
        workdir: str | os.PathLike[str],
        *,
        vector_env: VectorEnv | None = None,
        hooks: Any = None,
    ) -> None:
        self.spec = spec
        self._base_spec = spec
        #: The dotted agent arguments a population's exploit set on top of the run's spec (:meth:`adopt`).
        self.overrides: dict[str, Any] = {}
        #: The timestep of the checkpoint this run resumed from (0: none); the latest evaluation's mean return.
        self.resumed_at = 0
        self.last_evaluation: float | None = None
        self.workdir = Path(workdir)
        self.hooks = hooks
        self._venv = vector_env
        self._stop = threading.Event()
        self._stop_reason = ""
        self._stopped_early = False
        self._eval_env: EnvAdapter | None = None
        self.agent: Any = None
        self._counters = _Counters()
        self._checkpoint: str | None = None
        self._checkpoint_at: float | None = None  # wall time the latest checkpoint was written
        self._returns: deque[float] = deque(maxlen=MEAN_WINDOW)
        # The heartbeat: when the timestep (or an evaluation episode) last advanced, and where it stood then.
        self._advanced_at = time.time()
        self._advanced_timestep: int | None = None
        self._summary_writer: Any = None
        self._update_marks: list[tuple[int, int]] = []  # (agent update count, timestep it was reached at)
        self._forwarded: dict[str, int] = {}  # Tensorforce event file -> bytes of it forwarded
        #: True once the training loop runs (a stop request is then honoured with a checkpoint).
        self.running = False
        #: The timestep at which the hooks' ``on_decision(timestep)`` is called next (a sweep's early stopping
        #: decides at timestep checkpoints, never by the clock: rlcloud.runner.early_stop); None: never.
        self.decision_at: int | None = None
        if spec.deterministic:
            raise SpecError([DETERMINISTIC_PROBLEM])

    # -- control
    def request_stop(self, reason: str = "stop requested", *, early: bool = False) -> None:
        """Ask the loop to checkpoint and return at the next step (thread- and signal-safe).

        ``early``: the run is finished, not interrupted (a sweep trial stopped by its rule): the result's
        state is ``stopped-early`` and the reason goes into progress.json.
        """
        self._stop_reason = reason
        self._stopped_early = early
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        """Whether :meth:`request_stop` was called (a hook that waits gives up)."""
        return self._stop.is_set()

    def hold(self) -> None:
        """A hook waits in the loop on purpose (a decision waits for its peers): progress.json and the other
        hooks (the results syncer) go on as each second of training, and the wait is no stall."""
        self._advanced_at = time.time()
        self._write_progress("running")
        self._call_hook("on_tick")

    @property
    def counters(self) -> dict[str, Any]:
        """The current global counters (timestep, episode, evaluation_episode, elapsed)."""
        return asdict(self._counters)

    # -- setup
    def setup(self) -> None:
        """Build the environments and the agent, restoring the latest checkpoint (idempotent).

        Errors here are construction errors (bad environment, agent arguments, TensorFlow): the runner
        maps them to exit code 3. :meth:`run` calls it when it has not been called.
        """
        if self.agent is not None:
            return
        from rlcloud.runner.compat import import_tensorforce

        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / CHECKPOINTS).mkdir(exist_ok=True)
        if self._venv is None:
            # Before TensorFlow loads: a bad environment fails in a second, not after an 11 s import, and
            # environment processes are spawned from a process without TensorFlow's threads.
            self._venv = build_vector_env(self.spec)
        # Before TensorFlow's first import, which alone reads the choice (runner/kernels.py).
        choose_cpu_kernels(self.spec.network, self.spec.agent, self._venv.states_spec)
        tensorforce = import_tensorforce()
        inline_nested_functions()
        self._take_saved_overrides()
        kwargs = self._agent_kwargs()
        self.agent = tensorforce.Agent.create(**kwargs)
        self._restore_readable(lambda: tensorforce.Agent.create(**kwargs))
        if self.spec.summary_frequency is not None:
            import tensorflow as tf

            self._summary_writer = tf.summary.create_file_writer(str(self.workdir / SUMMARIES / "rlcloud"))

    def _agent_kwargs(self) -> dict[str, Any]:
        assert self._venv is not None
        kwargs = build_agent_kwargs(self.spec, self._venv)
        summary = self.spec.summary_frequency
        if summary is not None:
            # Update-based summaries only: timestep-based ones cost a summary op on every act(). Tensorforce
            # writes them against its update index under graph names (agent/cond_2/losses/policy-loss), outside
            # the TensorBoard logdir; _forward_agent_summaries copies them into summaries/rlcloud as
            # agent/policy-loss etc. against timesteps, the x axis of every other curve.
            kwargs.setdefault(
                "summarizer",
                dict(
                    directory=str(self.workdir / AGENT_SUMMARIES),
                    filename="agent",
                    summaries=["loss", "kl-divergence", "update-norm", "entropy"],
                    flush=max(1, summary.value) if summary.unit == "s" else 10,
                ),
            )
        return kwargs

    def _take_saved_overrides(self) -> None:
        """The agent arguments a population's exploit set (:meth:`adopt`), as the latest checkpoint recorded
        them: a resumed member goes on with the hyperparameters its weights were trained with."""
        name = latest_checkpoint(self.workdir)
        if name is None:
            return
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            state = json.loads((self.workdir / checkpoint_path(name) / CHECKPOINT_STATE).read_text(encoding="utf-8"))
            overrides = state.get("overrides") or {}
            if overrides:
                self.spec = self._base_spec.replace(**overrides)
                self.overrides = dict(overrides)
                logger.info("the checkpoint's agent arguments: %s", overrides)

    def adopt(self, overrides: dict[str, Any], directory: str | os.PathLike[str]) -> None:
        """PBT's exploit and explore (rlcloud.runner.population): go on from the checkpoint in ``directory``
        (another trial's) with the run's spec changed by ``overrides`` (dotted agent arguments).

        Tensorforce bakes its hyperparameters into the traced graph: a new agent is built with them and the
        checkpoint restored into it (docs/sweeps.md lists the arguments whose change keeps the checkpoint's
        variables restorable). The counters and records stay this run's; a checkpoint is written at once,
        so that a resumed run starts from the adopted weights and arguments. Called from a loop hook: the
        loop resets the environments and acts with the new agent from its next step.
        """
        from rlcloud.runner.compat import import_tensorforce

        spec = self._base_spec.replace(**overrides)
        previous, self.spec = self.spec, spec
        try:
            agent = import_tensorforce().Agent.create(**self._agent_kwargs())
            restore_agent(agent, directory)
        except BaseException:
            self.spec = previous
            raise
        self._mark_updates()
        _close_beside(self.agent)
        self._forward_agent_summaries()
        # the new agent counts its updates from the adopted checkpoint's: the old marks no longer map them
        self._update_marks.clear()
        self.agent, self.overrides = agent, dict(overrides)
        self._checkpoint = None  # the checkpoint at this timestep is written anew, with the adopted weights
        self._save()

    def _restore_readable(self, new_agent: Callable[[], Any]) -> None:
        """Restore the latest checkpoint that can be restored (see the module docstring), or start from
        empty records when there is none; :class:`CheckpointError` when there are some and none restores."""
        candidates = restorable_checkpoints(self.workdir)
        if not candidates:
            self._truncate_records(0, 0, "no checkpoint: the run starts from the beginning")
            return
        failed: list[tuple[str, str]] = []
        for name in candidates:
            try:
                self._restore(name)
            except Exception as exc:  # any failure to read it: a truncated file, a broken state.json
                why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                failed.append((name, why))
                logger.warning("checkpoint %s cannot be restored (%s)", name, why)
                # a half-restored agent is never trained on: the next try starts from a new one
                with contextlib.suppress(Exception):
                    self.agent.close()
                self.agent = new_agent()
                continue
            if failed:
                self._set_aside([bad for bad, _ in failed if bad > name], keep=name)
                logger.warning(
                    "resumed from the previous complete checkpoint %s instead: %s could not be restored",
                    name,
                    ", ".join(bad for bad, _ in failed),
                )
            return
        details = "; ".join(f"{name}: {why}" for name, why in failed)
        with contextlib.suppress(Exception):
            self.agent.close()
        self.agent = None  # setup() may be called again once earlier checkpoints are fetched
        raise CheckpointError(
            f"none of the {len(failed)} checkpoint(s) in {self.workdir / CHECKPOINTS} can be restored ({details}); "
            "nothing was trained. Move the checkpoints directory away to start this run over from the "
            "beginning, or start it with the rlcloud version that wrote them."
        )

    def _set_aside(self, names: list[str], *, keep: str) -> None:
        """Rename checkpoints that cannot be restored to hidden ``.unreadable-<name>`` directories (kept for
        a look, never synced, restored or counted among the three kept) and point LATEST at ``keep``."""
        root = self.workdir / CHECKPOINTS
        for name in names:
            with contextlib.suppress(OSError):
                os.replace(root / name, root / f".unreadable-{name}")
        atomic_write_text(self.workdir / LATEST, keep + "\n", fsync=True)

    def _restore(self, name: str) -> None:
        directory = self.workdir / checkpoint_path(name)
        # state.json first, whole: a checkpoint is used all or not at all
        state = json.loads((directory / CHECKPOINT_STATE).read_text(encoding="utf-8"))
        counters = _Counters(
            timestep=int(state["timestep"]),
            episode=int(state["episode"]),
            evaluation_episode=int(state.get("evaluation_episode", 0)),
            elapsed=float(state.get("elapsed", 0.0)),
            next_evaluation=state.get("next_evaluation"),
        )
        recent = [float(r) for r in state.get("recent_returns", [])]
        # Agent.load() is Agent.create(**agent.json) + restore(); the agent is built from the current spec
        # instead, so that paths in agent.json (summaries of another machine's workdir) do not matter.
        restore_agent(self.agent, directory)  # agent.restore, also across frame dtypes (runner/frames.py)
        self._counters, self.resumed_at = counters, counters.timestep
        self._returns.clear()
        self._returns.extend(recent)
        self._checkpoint = name
        with contextlib.suppress(OSError):
            self._checkpoint_at = (directory / CHECKPOINT_STATE).stat().st_mtime
        dropped = self._truncate_records(counters.episode, counters.timestep, "")
        logger.info(
            "resumed from checkpoint %s: timestep %d, episode %d (dropped %d records written after it)",
            name,
            counters.timestep,
            counters.episode,
            dropped,
        )

    def _truncate_records(self, episode: int, timestep: int, why: str) -> int:
        """Drop the episode records past (``episode``, ``timestep``): a restarted run's record continues
        from where its counters continue, never with a dead attempt's episodes twice."""
        dropped = _truncate_jsonl(
            self.workdir / METRICS, lambda r: _within(r, "episode", "timestep", episode, timestep)
        )
        dropped += _truncate_jsonl(
            self.workdir / EVALUATION, lambda r: _within(r, "at_episode", "at_timestep", episode, timestep)
        )
        if dropped and why:
            logger.info("%s: dropped %d episode record(s) of an earlier attempt", why, dropped)
        return dropped

    # -- the loop
    def run(self) -> TrainResult:
        """Train until a stop condition or :meth:`request_stop`; checkpoint at the end; return the result."""
        state = "failed"
        try:
            self._mark_starting()
            self.setup()
            state = self._loop()
            return self._result(state)
        finally:
            self._write_progress(state)
            self._call_hook("on_finish", state)
            self._close(finished=state == "succeeded")

    def _loop(self) -> str:
        assert self._venv is not None and self.agent is not None
        self.running = True
        venv, c, spec = self._venv, self._counters, self.spec
        if spec.evaluation is not None and c.next_evaluation is None:
            c.next_evaluation = spec.evaluation.every.value
        start = time.monotonic()
        times = _Schedule(start, c.elapsed, (start, c.episode, c.timestep), (start, c.timestep), start, start)
        # the training clock starts: a budget's supervisor counts on from this report (local/supervisor.py
        # training_seconds), not from the first one after the first act's tracing
        self._write_progress("running")
        with open(self.workdir / METRICS, "a", encoding="utf-8") as metrics:
            logger.info(
                "training: %d environment(s), agent %s, stop at %s episodes / %s timesteps",
                venv.num_envs,
                spec.agent.get("type"),
                spec.episodes,
                spec.total_timesteps,
            )
            if self._done(spec.episodes, spec.total_timesteps):
                return "succeeded"
            stepper = _Stepper(self.agent, venv)
            while True:
                if self._stop.is_set():
                    c.elapsed = times.base_elapsed + time.monotonic() - times.start
                    self._save()
                    return STOPPED_EARLY if self._stopped_early else "stopped"
                stepped, rewards, terminals = stepper.step()
                c.timestep += len(stepped)
                now = time.monotonic()
                c.elapsed = times.base_elapsed + now - times.start
                self._record_episodes(stepper, stepped, rewards, terminals, metrics)
                if self.decision_at is not None and c.timestep >= self.decision_at:
                    self._call_hook("on_decision", c.timestep)  # may wait for peers, request a stop, adopt
                    if self.agent is not stepper.agent:  # a population's exploit replaced the agent
                        stepper = _Stepper(self.agent, venv)
                if self._after_step(now, times):
                    return "succeeded"

    def _record_episodes(self, stepper: _Stepper, stepped: Any, rewards: Any, terminals: Any, metrics: Any) -> None:
        """Add a step's rewards to its rows' episodes; write the episodes it ended (metrics.jsonl, summaries)."""
        c = self._counters
        stepper.ep_return[stepped] += rewards
        stepper.ep_length[stepped] += 1
        ended = stepped[np.flatnonzero(terminals)]
        for row in ended:
            c.episode += 1
            ret, length = float(stepper.ep_return[row]), int(stepper.ep_length[row])
            self._returns.append(ret)
            record = {
                "episode": c.episode,
                "timestep": c.timestep,
                "return": ret,
                "length": length,
                "time": round(c.elapsed, 3),
                "worker": int(row),
            }
            metrics.write(json.dumps(record) + "\n")
            self._summarize_episode(ret, length)
            stepper.ep_return[row] = 0.0
            stepper.ep_length[row] = 0
        if len(ended):
            metrics.flush()
            self._mark_updates()

    def _after_step(self, now: float, times: _Schedule) -> bool:
        """What is due after a step: an evaluation, summaries, a checkpoint, progress and a log line; True when
        the run reached its stop condition (checkpointed)."""
        c, spec = self._counters, self.spec
        done = self._done(spec.episodes, spec.total_timesteps)
        evaluation = spec.evaluation
        if evaluation is not None and c.next_evaluation is not None:
            position = c.episode if evaluation.every.unit == "e" else c.timestep
            # the end of training is evaluated too, wherever it falls in the schedule: the last
            # evaluation line should describe the agent the run leaves behind
            if position >= c.next_evaluation or (done and position != times.evaluated_at):
                self._evaluate(evaluation.episodes)
                times.evaluated_at = position
                while c.next_evaluation <= position:
                    c.next_evaluation += evaluation.every.value
        summary = spec.summary_frequency
        if summary is not None and (done or self._due(summary, times.summary[0], now, None, times.summary[1])):
            self._summarize(now, times.summary)
            times.summary = (now, c.timestep)
        if done:
            self._save()
            return True
        saver = spec.saver_frequency
        if saver is not None and self._due(saver, times.save[0], now, times.save[1], times.save[2]):
            self._save()
            times.save = (time.monotonic(), c.episode, c.timestep)
        if now - times.tick >= _TICK_S:
            times.tick = now
            self._write_progress("running")
            self._call_hook("on_tick")
            if now - times.log >= _LOG_S:
                times.log = now
                logger.info(
                    "timestep %d, episode %d, mean return %s, %s steps/s",
                    c.timestep,
                    c.episode,
                    _fmt(self._mean_return()),
                    _fmt(self._steps_per_second()),
                )
        return False

    def _done(self, max_episodes: int | None, max_timesteps: int | None) -> bool:
        c = self._counters
        if max_episodes is not None and c.episode >= max_episodes:
            self._stop_reason = f"reached {max_episodes} episodes"
            return True
        if max_timesteps is not None and c.timestep >= max_timesteps:
            self._stop_reason = f"reached {max_timesteps} timesteps"
            return True
        return False

    def _due(self, freq: Frequency, since: float, now: float, episode0: int | None, timestep0: int) -> bool:
        value, unit = freq.value, freq.unit
        if unit == "s":
            return now - since >= value
        if unit == "e":
            return episode0 is not None and self._counters.episode - episode0 >= value
        return self._counters.timestep - timestep0 >= value

    # -- checkpoints
    def _save(self) -> None:
        """Write a complete checkpoint directory, then point LATEST at it (tmp + rename)."""
        c = self._counters
        name = f"ckpt-{c.timestep:012d}"
        root = self.workdir / CHECKPOINTS
        final = root / name
        if self._checkpoint == name and final.exists():
            return  # nothing happened since the last one
        tmp = root / f".tmp-{name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        started = time.monotonic()
        # Without the per-environment episode buffers Tensorforce discards on restore (runner/saving.py):
        # most of a replay agent's checkpoint with several environments, and a SIGTERM checkpoint must
        # reach the store within the 15 s a Spot pod gets.
        save_agent(self.agent, tmp)
        state = {
            "name": name,
            "timestep": c.timestep,
            "episode": c.episode,
            "evaluation_episode": c.evaluation_episode,
            "elapsed": round(c.elapsed, 3),
            "next_evaluation": c.next_evaluation,
            "recent_returns": list(self._returns),
            "created": time.time(),
            "experiment": self.spec.name,
        }
        if self.overrides:
            state["overrides"] = self.overrides
        atomic_write_text(tmp / CHECKPOINT_STATE, json.dumps(state, indent=1) + "\n", fsync=True)
        if final.exists():  # left over from a crashed run at the same timestep; LATEST does not name it
            shutil.rmtree(final)
        os.replace(tmp, final)
        atomic_write_text(self.workdir / LATEST, name + "\n", fsync=True)
        self._checkpoint = name
        self._checkpoint_at = time.time()
        size = sum(f.stat().st_size for f in final.iterdir() if f.is_file())
        logger.info(
            "checkpoint %s (timestep %d, episode %d, %.1f MB) in %.2f s",
            name,
            c.timestep,
            c.episode,
            size / 1e6,
            time.monotonic() - started,
        )
        self._prune(root, keep=name)
        self._write_progress("running")
        self._call_hook("on_checkpoint", name)

    def _prune(self, root: Path, keep: str) -> None:
        complete = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name.startswith("ckpt-"))
        for old in complete[:-CHECKPOINTS_KEPT]:
            if old != keep:
                shutil.rmtree(root / old, ignore_errors=True)
        for stale in root.glob(".tmp-*"):
            if stale.is_dir() and not stale.name.endswith(f"-{os.getpid()}"):
                shutil.rmtree(stale, ignore_errors=True)

    def _call_hook(self, name: str, *args: Any) -> None:
        method = getattr(self.hooks, name, None) if self.hooks is not None else None
        if method is None:
            return
        try:
            method(*args)
        except Exception:  # a syncer hiccup must not end a training run
            logger.exception("hook %s failed", name)

    def _result(self, state: str) -> TrainResult:
        c = self._counters
        return TrainResult(
            state=state,
            episodes=c.episode,
            timesteps=c.timestep,
            elapsed=c.elapsed,
            steps_per_second=self._steps_per_second() or 0.0,
            mean_return=self._mean_return(),
            checkpoint=self._checkpoint,
            stop_reason=self._stop_reason,
        )

    def _close(self, finished: bool) -> None:
        if self._venv is not None:
            try:
                # Remote environments stay up for a restarted agent unless the run is finished.
                self._venv.close(finished=finished)  # type: ignore[call-arg]
            except TypeError:
                self._venv.close()
            except Exception:
                logger.warning("closing the environments failed", exc_info=True)
        self._mark_updates()
        for closer in (
            getattr(self._eval_env, "close", None),
            getattr(self.agent, "close", None),  # flushes Tensorforce's summaries: forwarded next
            self._forward_agent_summaries,
            getattr(self._summary_writer, "close", None),
        ):
            if closer is not None:
                with contextlib.suppress(Exception):
                    closer()


def _close_beside(agent: Any) -> None:
    """Close ``agent`` (its summaries flushed) when a newer agent lives in the process: Tensorforce keeps its
    module stack and layer registry on the classes, made anew by each agent and deleted by ``close()``."""
    from tensorforce.core import Module
    from tensorforce.core.layers import Layer

    stack, layers = getattr(Module, "_MODULE_STACK", None), getattr(Layer, "_REGISTERED_LAYERS", None)
    with contextlib.suppress(Exception):
        agent.close()
    Module._MODULE_STACK, Layer._REGISTERED_LAYERS = stack, layers


def _fmt(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1f}"


def train(
    spec: ExperimentSpec,
    workdir: str | os.PathLike[str],
    *,
    vector_env: VectorEnv | None = None,
    hooks: Any = None,
) -> TrainResult:
    """Train ``spec`` into ``workdir`` (resuming from its latest checkpoint) and return the result.

    ``vector_env``: the environments to train on (default: from ``spec.run_mode``); ``hooks``: an object
    with any of ``on_tick()``, ``on_checkpoint(name)``, ``on_finish(state)``.
    """
    return Trainer(spec, workdir, vector_env=vector_env, hooks=hooks).run()
