"""Vectors of environments stepped together: the interface the training loop consumes.

:class:`VectorEnv` is the contract. The loop calls ``reset()`` once, then ``step(actions)`` with one
action per row, and feeds the batch to the agent with ``act(states=batch, parallel=rows)`` /
``observe(reward=, terminal=, parallel=rows)``. Rows auto-reset in the same step: after a terminal (1 or
2) the returned state of that row is already the first state of its next episode.

Implementations here:

* :class:`BatchedVectorEnv` steps its environments one after another in this process: the fastest for
  cheap environments (CartPole steps in ~10 µs; a message to another process costs ~260 µs).
* :class:`ProcessVectorEnv` spreads the environments over worker processes (one pipe per process, each
  stepping a chunk of rows): it pays for environments slower than the messaging.
* :func:`make_vector_env` picks one by ``execution`` (``auto`` times a few steps of one environment).

The distributed mode implements the same protocol over TCP (runner/remote.py).
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing as mp
import os
import signal
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from rlcloud.errors import SpecError, SpecProblem, WorkloadError
from rlcloud.runner.envs import EnvAdapter, make_env

__all__ = [
    "PROCESS_THRESHOLD_S",
    "BatchedVectorEnv",
    "EnvFactory",
    "ExecutionChoice",
    "ProcessVectorEnv",
    "VectorEnv",
    "choose_execution",
    "is_single_spec",
    "make_vector_env",
    "pool_size",
    "sample_action",
    "stack_states",
    "take_row",
]

logger = logging.getLogger(__name__)

#: Per-step cost above which processes pay: ~4x the ~260 µs a round trip to another process costs.
PROCESS_THRESHOLD_S = 1e-3


@runtime_checkable
class VectorEnv(Protocol):
    """``num_envs`` environments stepped together, in Tensorforce's spec format.

    ``reset()`` returns the batch of first states; ``step(actions)`` applies one action per row and
    returns ``(states, rewards, terminals)``: ``rewards`` float array of shape ``(num_envs,)``,
    ``terminals`` int array of 0 (running) / 1 (terminated) / 2 (truncated). A row that ended is reset
    in the same call: its returned state is the first state of the next episode. A batch of states is a
    numpy array with a leading ``num_envs`` axis, or for dict specs a dict of such arrays (as
    ``Agent.act(states=..., parallel=...)`` takes them); so is a batch of actions.
    """

    # Read-only properties, so that implementations may use plain attributes or properties.
    @property
    def num_envs(self) -> int:
        """How many environments (rows) there are."""
        ...

    @property
    def states_spec(self) -> dict[str, Any]:
        """Tensorforce states spec of one environment."""
        ...

    @property
    def actions_spec(self) -> dict[str, Any]:
        """Tensorforce actions spec of one environment."""
        ...

    @property
    def max_episode_timesteps(self) -> int | None:
        """Longest episode in agent timesteps (None: unbounded); the agent needs it for its buffers."""
        ...

    def reset(self) -> Any:
        """Reset every row and return the batch of first states."""
        ...

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray]:
        """Step every row once; rows that end are reset in the same call."""
        ...

    def close(self) -> None:
        """Release every environment (idempotent)."""
        ...


@dataclass(frozen=True)
class EnvFactory:
    """Picklable recipe for one environment (process workers rebuild environments from it)."""

    environment: Mapping[str, Any]
    repeat_actions: int = 1
    max_timesteps_per_episode: int | None = None

    def __call__(self) -> EnvAdapter:
        """Build the environment."""
        return make_env(
            self.environment,
            repeat_actions=self.repeat_actions,
            max_timesteps_per_episode=self.max_timesteps_per_episode,
        )


# ------------------------------------------------------------------------------------------- helpers


def is_single_spec(spec: Mapping[str, Any]) -> bool:
    """Whether a Tensorforce states/actions spec describes one component (vs. a dict of components)."""
    return isinstance(spec.get("type"), str) or "shape" in spec


def stack_states(states: Sequence[Any], spec: Mapping[str, Any]) -> Any:
    """Stack per-row states into a batch: an array, or a dict of arrays for dict specs."""
    if is_single_spec(spec):
        return np.stack([np.asarray(s) for s in states])
    return {name: stack_states([s[name] for s in states], spec[name]) for name in spec}


def take_row(batch: Any, row: int) -> Any:
    """Row ``row`` of a batch of actions or states (an array, or a dict of arrays)."""
    if isinstance(batch, Mapping):
        return {name: take_row(value, row) for name, value in batch.items()}
    return batch[row]


def _put_row(batch: Any, row: int, value: Any) -> None:
    if isinstance(batch, Mapping):
        for name in batch:
            _put_row(batch[name], row, value[name])
    else:
        batch[row] = value


def _slice_rows(batch: Any, rows: slice) -> Any:
    if isinstance(batch, Mapping):
        return {name: _slice_rows(value, rows) for name, value in batch.items()}
    return batch[rows]


def _concat(batches: Sequence[Any]) -> Any:
    if isinstance(batches[0], Mapping):
        return {name: _concat([b[name] for b in batches]) for name in batches[0]}
    return np.concatenate(batches)


def sample_action(spec: Mapping[str, Any], rng: np.random.Generator) -> Any:
    """A random valid action for a Tensorforce actions spec (used to probe an environment's speed)."""
    if not is_single_spec(spec):
        return {name: sample_action(sub, rng) for name, sub in spec.items()}
    shape = tuple(np.atleast_1d(spec.get("shape", ()))) if spec.get("shape", ()) != () else ()
    kind = spec.get("type", "float")
    if kind == "int":
        return rng.integers(0, int(spec.get("num_values", 2)), size=shape)
    if kind == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    low = np.asarray(spec.get("min_value", -1.0), dtype=np.float32)
    high = np.asarray(spec.get("max_value", 1.0), dtype=np.float32)
    return (low + (high - low) * rng.random(size=shape)).astype(np.float32)


def _seed_for(seed: int | None, row: int) -> int | None:
    return None if seed is None else seed + row


# ------------------------------------------------------------------------------------ batched (in-process)


class BatchedVectorEnv:
    """Environments stepped one after another in this process (the fast path for cheap environments)."""

    def __init__(self, envs: Sequence[EnvAdapter], *, seed: int | None = None, first_row: int = 0) -> None:
        if not envs:
            raise SpecError([SpecProblem("num_workers", "must be >= 1", 0)])
        self.envs = list(envs)
        self.num_envs = len(self.envs)
        self.states_spec = self.envs[0].states_spec
        self.actions_spec = self.envs[0].actions_spec
        self.max_episode_timesteps = self.envs[0].max_episode_timesteps
        self._seed = seed
        self._first_row = first_row
        self._single_action = is_single_spec(self.actions_spec)
        self._closed = False

    @classmethod
    def from_factory(
        cls, factory: Callable[[], EnvAdapter], num_envs: int, *, seed: int | None = None
    ) -> BatchedVectorEnv:
        """Build ``num_envs`` environments with ``factory``."""
        return cls([factory() for _ in range(num_envs)], seed=seed)

    def reset(self) -> Any:
        """Reset every row (row i seeded with ``seed + i`` the first time) and return the batch."""
        states = [env.reset(seed=_seed_for(self._seed, self._first_row + i)) for i, env in enumerate(self.envs)]
        self._seed = None  # later resets continue each environment's own RNG stream
        return stack_states(states, self.states_spec)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray]:
        """Step every row; a row that ends is reset at once (same-step autoreset)."""
        states = []
        rewards = np.empty(self.num_envs, dtype=np.float64)
        terminals = np.empty(self.num_envs, dtype=np.int64)
        for i, env in enumerate(self.envs):
            action = actions[i] if self._single_action else take_row(actions, i)
            state, reward, terminal = env.step(action)
            if terminal:
                state = env.reset()
            states.append(state)
            rewards[i] = reward
            terminals[i] = terminal
        return stack_states(states, self.states_spec), rewards, terminals

    def close(self) -> None:
        """Close every environment (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for env in self.envs:
            try:
                env.close()
            except Exception:  # closing must not hide the error that made us close
                logger.exception("closing an environment failed")


# ------------------------------------------------------------------------------------------ processes


def _worker_main(conn: Any, factory: EnvFactory, num_envs: int, seed: int | None, first_row: int) -> None:
    """Body of one worker process: owns ``num_envs`` rows and answers reset/step/close over ``conn``."""
    # The parent decides when to stop (it checkpoints first): a SIGTERM/Ctrl-C sent to the whole process
    # group must not kill the environments under it. A dead parent closes the pipe, which ends us.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        venv = BatchedVectorEnv([factory() for _ in range(num_envs)], seed=seed, first_row=first_row)
        conn.send(("ready", (venv.states_spec, venv.actions_spec, venv.max_episode_timesteps)))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    try:
        while True:
            command, payload = conn.recv()
            if command == "step":
                conn.send(("ok", venv.step(payload)))
            elif command == "reset":
                conn.send(("ok", venv.reset()))
            else:
                break
    except (EOFError, KeyboardInterrupt):
        pass  # the parent is gone or stopping: nothing to report to
    except BaseException:
        with contextlib.suppress(OSError):
            conn.send(("error", traceback.format_exc()))
    finally:
        venv.close()


class ProcessVectorEnv:
    """Environments spread over worker processes, each stepping a contiguous chunk of rows.

    Processes start with the ``spawn`` method: forking a process that has TensorFlow's thread pools is
    unsafe. One message per process per step (not per environment) keeps the overhead at ~260 µs.
    """

    def __init__(
        self,
        factory: EnvFactory,
        num_envs: int,
        *,
        num_processes: int | None = None,
        seed: int | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        if num_envs < 1:
            raise SpecError([SpecProblem("num_workers", "must be >= 1", num_envs)])
        processes = max(1, min(num_envs, num_processes or os.cpu_count() or 1))
        sizes = [num_envs // processes + (1 if i < num_envs % processes else 0) for i in range(processes)]
        ctx = mp.get_context("spawn")
        self.num_envs = num_envs
        self._conns: list[Any] = []
        self._procs: list[Any] = []
        self._bounds: list[slice] = []
        self._closed = False
        row = 0
        for size in sizes:
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=_worker_main,
                args=(child, factory, size, seed, row),
                daemon=True,
                name=f"rlcloud-env-{row}",
            )
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)
            self._bounds.append(slice(row, row + size))
            row += size
        try:
            infos = [self._receive(i, timeout=start_timeout) for i in range(processes)]
        except BaseException:
            self.close()
            raise
        self.states_spec, self.actions_spec, self.max_episode_timesteps = infos[0]

    def _receive(self, index: int, timeout: float | None = None) -> Any:
        conn = self._conns[index]
        if timeout is not None and not conn.poll(timeout):
            raise WorkloadError(f"environment process {index} did not answer within {timeout:.0f} s")
        try:
            status, payload = conn.recv()
        except EOFError as exc:
            code = self._procs[index].exitcode
            raise WorkloadError(f"environment process {index} died (exit code {code})") from exc
        if status == "error":
            raise WorkloadError(f"environment process {index} failed:\n{payload}")
        return payload

    def reset(self) -> Any:
        """Reset every row and return the batch of first states."""
        for conn in self._conns:
            conn.send(("reset", None))
        return _concat([self._receive(i) for i in range(len(self._conns))])

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray]:
        """Step every row in parallel across the processes (same-step autoreset in each)."""
        for conn, rows in zip(self._conns, self._bounds, strict=True):
            conn.send(("step", _slice_rows(actions, rows)))
        results = [self._receive(i) for i in range(len(self._conns))]
        states = _concat([r[0] for r in results])
        rewards = np.concatenate([r[1] for r in results])
        terminals = np.concatenate([r[2] for r in results])
        return states, rewards, terminals

    def close(self) -> None:
        """Stop the worker processes (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.send(("close", None))
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        for conn in self._conns:
            conn.close()


# ------------------------------------------------------------------------------------------- choosing


@dataclass
class ExecutionChoice:
    """What :func:`choose_execution` decided and why (the step time it measured)."""

    execution: str
    seconds_per_step: float | None = None
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _runqueue_seconds() -> float | None:
    """Time this thread has spent runnable but waiting for a CPU (Linux schedstat), or None elsewhere."""
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as fh:
            return int(fh.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def pool_size(num_envs: int, cpus: int, cpu_fraction: float | None) -> int:
    """How many worker processes step ``num_envs`` rows on ``cpus`` CPUs.

    ``cpu_fraction`` is the share of a step's wall time the environment spends computing (its CPU time
    over its wall time; None: unknown, taken as 1). An environment that computes gets one process per
    CPU, each stepping its rows in turn. One that waits (a remote simulator, I/O) gets as many processes
    as keep the CPUs busy, ``cpus / cpu_fraction`` (rounded to the nearest: a probe measured at 97 % CPU
    is computing, and one process more than CPUs measured 0.88x there): each waits in parallel with the
    others. Never more processes than rows.
    """
    share = 1.0 if cpu_fraction is None else min(1.0, max(cpu_fraction, 1e-3))
    return max(1, min(num_envs, max(cpus, math.floor(cpus / share + 0.5))))


def choose_execution(factory: Callable[[], EnvAdapter], *, probe_steps: int = 64) -> ExecutionChoice:
    """Time ``probe_steps`` random steps of one environment and pick ``batched`` or ``processes``.

    Processes only when a step costs clearly more than the messaging (:data:`PROCESS_THRESHOLD_S`) and
    there is more than one CPU to spread over, or the step mostly waits (then processes wait in
    parallel even on one CPU). ``extra["cpu_fraction"]`` is the step's CPU time over its wall time (less
    the time it waited for a CPU, where Linux tells it), from which :func:`pool_size` sizes the pool.
    """
    env = factory()
    rng = np.random.default_rng(0)
    try:
        env.reset(seed=0)
        queued_start = _runqueue_seconds()
        start = time.perf_counter()
        cpu_start = time.thread_time()
        for _ in range(probe_steps):
            _state, _reward, terminal = env.step(sample_action(env.actions_spec, rng))
            if terminal:
                env.reset()
        cpu = time.thread_time() - cpu_start
        wall = time.perf_counter() - start
        queued_end = _runqueue_seconds()
    finally:
        env.close()
    per_step = wall / probe_steps
    # On a busy machine a computing step also waits for a CPU: that time is not the environment waiting.
    queued = queued_end - queued_start if queued_start is not None and queued_end is not None else 0.0
    own = max(wall - queued, cpu)
    cpu_fraction = min(1.0, cpu / own) if own > 0 else 1.0
    extra = {"cpu_fraction": cpu_fraction}
    cpus = os.cpu_count() or 1
    cost = f"a step takes {per_step * 1e6:.0f} µs, {cpu_fraction:.0%} of it computing"
    if per_step > PROCESS_THRESHOLD_S and (cpus > 1 or cpu_fraction < 0.5):
        return ExecutionChoice("processes", per_step, f"{cost} (> messaging)", extra)
    return ExecutionChoice("batched", per_step, f"{cost} (cheap: in-process)", extra)


def make_vector_env(
    factory: EnvFactory,
    num_envs: int,
    *,
    execution: str = "auto",
    seed: int | None = None,
) -> VectorEnv:
    """Build ``num_envs`` environments stepped together, batched in-process or over processes.

    ``execution``: ``"batched"``, ``"processes"`` (one per CPU), or ``"auto"`` (time a few steps and
    choose, sizing the pool by the step's CPU time against its wall time, :func:`pool_size`; a single
    environment is always batched).
    """
    if execution not in ("auto", "batched", "processes"):
        raise SpecError([SpecProblem("execution", "must be one of auto, batched, processes", execution)])
    num_processes = None  # one per CPU
    if execution == "auto":
        if num_envs == 1:
            execution = "batched"
        else:
            choice = choose_execution(factory)
            execution = choice.execution
            num_processes = pool_size(num_envs, os.cpu_count() or 1, choice.extra.get("cpu_fraction"))
            logger.info(
                "execution: %s (%s)%s",
                execution,
                choice.reason,
                f", {num_processes} processes" if execution == "processes" else "",
            )
    if execution == "processes":
        return ProcessVectorEnv(factory, num_envs, seed=seed, num_processes=num_processes)
    return BatchedVectorEnv.from_factory(factory, num_envs, seed=seed)
