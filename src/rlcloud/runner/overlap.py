"""Overlapped stepping: the agent acts on one group of the environments while the others step.

The synchronous loop (runner/loop.py) does ``act(all) -> step(all) -> observe(all)``: while the env
servers step, the agent waits, and while the agent acts and observes, every server waits. For an
environment that costs a fixed time per step (a simulator), the loop's rate is then
``num_envs / (agent time + step time)``, far below the ideal ``num_envs / step time``.

With ``execution: overlapped`` every env server hosts two environments (runner/envserver.py), and
:class:`OverlappedStepper` splits the rows into two fixed halves A and B, one environment of every server
each (:class:`~rlcloud.runner.remote.RemoteVectorEnv` orders its rows so), and alternates, as EnvPool's
async mode does::

    start:  act(A) -> send A;  act(B) -> send B         (after the first, synchronous, step)
    step:   receive A -> observe(A) -> act(A) -> send A        (the servers step B meanwhile)
    step:   receive B -> observe(B) -> act(B) -> send B        (the servers step A meanwhile)
    ...

A server always has the next step queued while the agent works, so it never waits for the agent as long
as the agent's time for a group is below a step's (issue 15: 84-88 % of the ideal with 2 to 8 servers of
5 ms steps, against 51-57 % synchronous; benchmarks/distributed_scaling.py). Halves of the servers instead
(one environment each) gained nothing: each server then still waited for its half's act. With
``envs_per_server`` k > 2 the rows split into k groups taken in turn, and a server has k - 1 steps in hand
(16 servers sharing 2 CPUs: 81 % with 3 against 75 % with 2).

The order of the agent's calls is fixed (it never depends on which server answers first), so a run with
a fixed seed is reproducible. It is another run than the synchronous mode's: more environments, the
groups sampled in separate calls, and an update triggered by one group's observe comes before the next
group's act (``execution: synchronous`` keeps one environment per server).

A vector environment offers it by having ``overlap`` true and ``send_actions(rows, actions)`` /
``receive(rows)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from rlcloud.runner.agent_calls import AgentCalls

__all__ = ["OverlappedStepper", "SplitStepVectorEnv", "overlapped_stepper"]


@runtime_checkable
class SplitStepVectorEnv(Protocol):
    """A vector environment whose step can be sent for some rows and received later."""

    @property
    def num_envs(self) -> int:
        """How many environments (rows) there are."""
        ...

    @property
    def overlap(self) -> bool | None:
        """Whether the loop should overlap acting with stepping (None: not decided yet, step synchronously)."""
        ...

    def send_actions(self, rows: Sequence[int] | np.ndarray, actions: Any) -> None:
        """Send ``rows`` their actions (one entry per row, in ``rows`` order); do not wait."""
        ...

    def receive(self, rows: Sequence[int] | np.ndarray) -> tuple[Any, np.ndarray, np.ndarray]:
        """``(states, rewards, terminals)`` of ``rows``, whose actions were sent."""
        ...


def _rows_of(batch: Any, rows: slice) -> Any:
    if isinstance(batch, Mapping):
        return {name: _rows_of(value, rows) for name, value in batch.items()}
    return batch[rows]


class OverlappedStepper:
    """Drives ``agent`` over ``venv`` in alternating groups of rows (see the module docstring).

    ``states`` is the batch :meth:`reset` returned; the constructor acts on it and sends every group.
    The rows split into ``venv.slots`` groups (two if it does not say), one environment of every server
    each. Each :meth:`step` then completes one group's step: it returns ``(rows, rewards, terminals)`` of
    the rows that stepped (after observing them and sending their next actions).
    """

    def __init__(self, agent: Any, venv: SplitStepVectorEnv, states: Any) -> None:
        n = venv.num_envs
        count = int(getattr(venv, "slots", 2))
        if count < 2 or n < count:
            raise ValueError(f"overlapped stepping needs at least two groups of environments, not {count} of {n}")
        self.venv = venv
        self._groups = tuple(np.array_split(np.arange(n), count))
        self._calls = tuple(AgentCalls(agent, rows) for rows in self._groups)
        self._turn = 0
        for rows, calls in zip(self._groups, self._calls, strict=True):
            part = _rows_of(states, slice(int(rows[0]), int(rows[-1]) + 1))
            venv.send_actions(rows, calls.act(part))

    def step(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Receive, observe, act on and send the next group; ``(rows, rewards, terminals)`` of that group."""
        rows, calls = self._groups[self._turn], self._calls[self._turn]
        self._turn = (self._turn + 1) % len(self._groups)
        states, rewards, terminals = self.venv.receive(rows)
        calls.observe(rewards, terminals)
        self.venv.send_actions(rows, calls.act(states))
        return rows, rewards, terminals


def overlapped_stepper(agent: Any, venv: Any, states: Any) -> OverlappedStepper | None:
    """An :class:`OverlappedStepper` when ``venv`` offers overlapped stepping, else None (synchronous)."""
    # getattr first: the loop asks after every synchronous step until the vector env has decided.
    if getattr(venv, "overlap", None) is True and isinstance(venv, SplitStepVectorEnv) and venv.num_envs >= 2:
        return OverlappedStepper(agent, venv, states)
    return None
