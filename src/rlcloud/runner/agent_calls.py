"""The training loop's ``act``/``observe`` calls, with Tensorforce's per-call Python work done once.

Profiled at 16 CartPole environments (issue 15), a vector step spent about two thirds of its time in
Tensorforce's Python wrappers around the TensorFlow functions, not in TensorFlow: ``Agent.act`` re-derives
the batching structure of its input, re-checks every argument, rebuilds the all-true action masks and the
``parallel`` tensor, and unbatches the actions into a list of Python scalars; ``Agent.observe`` re-parses
its arguments the same way. The loop always calls with the same structure (a batch of every row, numpy
arrays), so :class:`AgentCalls` does that work once and then calls the agent's model functions
(``Model.act`` / ``Model.observe``, the same TensorFlow functions ``Agent.act``/``observe`` call) directly.
After a function's first call it calls the function's one traced graph (its concrete function) with the flat
list of input tensors: ``tf.function`` would otherwise bind the arguments, match their types against its
traces and cast them again on every call, about 0.3 of the 1.2 ms an act call at 32 CartPoles takes.

It keeps the agent's Python-side state exactly as Tensorforce's own calls would (``timestep_completed``,
``timestep_counter``, the observe buffers, ``timesteps``/``episodes``/``updates``), so the public
``Agent.act``/``observe``/``save`` keep working on the same agent, and a run makes the same TensorFlow calls
with the same values in the same order as through the public API: the same seed learns the same thing
(tests/runner/test_agent_calls.py compares the two). Anything outside that common case (dict states,
action masks in the states, a recorder, a non-Tensorforce agent, a different Tensorforce) goes through
the public API unchanged; :attr:`AgentCalls.direct` says which one is used.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

__all__ = ["AgentCalls"]

logger = logging.getLogger(__name__)

#: The Tensorforce version whose internals the direct calls mirror (``Agent.act``/``observe``, 0.6.5).
_MIRRORED_VERSION = "0.6.5"


class AgentCalls:
    """``act(states)`` / ``observe(rewards, terminals)`` for a fixed set of rows, batched.

    ``agent`` is a Tensorforce agent built with ``parallel_interactions`` covering ``rows``; ``rows`` the
    row indices every call is for (``np.arange(num_envs)``, or one group of them when env servers step
    overlapped). Returns and accepts numpy arrays.
    """

    def __init__(self, agent: Any, rows: np.ndarray) -> None:
        self.agent = agent
        self.rows = np.asarray(rows)
        why = _unsupported(agent)
        #: whether the model functions are called directly (False: through the public Agent API)
        self.direct = why is None
        if why is not None:
            logger.debug("agent calls through Tensorforce's Agent API: %s", why)
            return
        from rlcloud.runner.compat import import_tensorforce

        core = import_tensorforce().core
        self._array_dict = core.ArrayDict
        self._parallel = agent.parallel_spec.to_tensor(value=self.rows, batched=True, name="Agent.act parallel")
        self._auxiliaries = agent.auxiliaries_spec.to_tensor(
            value=_default_auxiliaries(agent, len(self.rows), core.ArrayDict),
            batched=True,
            name="Agent.act auxiliaries",
        )
        self._observe_parallel = [
            agent.parallel_spec.to_tensor(value=int(p), batched=False, name="Agent.observe parallel")
            for p in range(int(agent.parallel_interactions))
        ]
        # The traced TensorFlow functions behind Model.act/observe and their signatures: Tensorforce's
        # wrapper recomputes both signatures on every call, then calls this function inside the model's
        # context (its device and name scope), as _call does.
        model = agent.model
        self._functions = {
            name: (getattr(model, f"_{name}_graphs")["()"], model.input_signature(function=name),
                   model.output_signature(function=name))
            for name in ("act", "observe")
        }  # fmt: skip
        self._terminal_type = agent.terminal_spec.np_type()
        self._reward_type = agent.reward_spec.np_type()
        self._buffer_observe = agent.config.buffer_observe
        # each function's traced graph after its first call (None: keep calling through tf.function)
        self._concrete: dict[str, Any] = {}

    def act(self, states: Any) -> Any:
        """Actions for a batch of states of the rows (an array; a dict of arrays for dict actions)."""
        agent = self.agent
        if not self.direct:
            actions = agent.act(states=states, parallel=self.rows)
            return _as_batch(actions)
        rows = self.rows
        completed = agent.timestep_completed
        if not completed[rows].all():
            return agent.act(states=states, parallel=rows)  # Tensorforce raises its own error
        completed[rows] = False
        states_t = agent.states_spec.to_tensor(
            value=self._array_dict(singleton=np.asarray(states)), batched=True, name="Agent.act states"
        )
        actions, timesteps = self._call("act", states=states_t, auxiliaries=self._auxiliaries, parallel=self._parallel)
        agent.timesteps = timesteps.numpy().item()
        actions = agent.actions_spec.from_tensor(tensor=actions, batched=True, name="Agent.act output actions")
        if agent.model.saver is not None:
            agent.model.save()
        if agent.actions_spec.is_singleton():
            return actions.singleton()
        return dict(actions.items())

    def observe(self, rewards: np.ndarray, terminals: np.ndarray) -> int:
        """Rewards and terminals (0/1/2) of the rows after :meth:`act`; returns the updates performed."""
        agent = self.agent
        if not self.direct:
            return int(agent.observe(reward=rewards, terminal=terminals, parallel=self.rows))
        rows = self.rows
        terminals = np.asarray(terminals)
        completed = agent.timestep_completed
        if completed[rows].any():
            return int(agent.observe(reward=rewards, terminal=terminals, parallel=rows))  # raises
        completed[rows] = True
        counter = agent.timestep_counter
        counter[rows] += 1
        limit = agent.max_episode_timesteps
        if limit is not None and np.logical_and(terminals == 0, counter[rows] > limit).any():
            return int(agent.observe(reward=rewards, terminal=terminals, parallel=rows))  # raises
        counter[rows] = np.where(terminals > 0, 0, counter[rows])

        # Agent.observe: buffer per row; call the model at an episode's end (or when the buffer is full)
        buffer_observe = self._buffer_observe
        terminal_buffer, reward_buffer = agent.terminal_buffer, agent.reward_buffer
        num_updates = 0
        for p, t, r in zip(rows.tolist(), terminals.tolist(), np.asarray(rewards).tolist(), strict=True):
            terminal_buffer[p].append(t)
            reward_buffer[p].append(r)
            if t == 0 and (buffer_observe == "episode" or len(terminal_buffer[p]) < buffer_observe):
                continue
            ts = np.asarray(terminal_buffer[p], dtype=self._terminal_type)
            rs = np.asarray(reward_buffer[p], dtype=self._reward_type)
            terminal_buffer[p].clear()
            reward_buffer[p].clear()
            updated, episodes, updates = self._call(
                "observe",
                terminal=agent.terminal_spec.to_tensor(value=ts, batched=True, name="Agent.observe terminal"),
                reward=agent.reward_spec.to_tensor(value=rs, batched=True, name="Agent.observe reward"),
                parallel=self._observe_parallel[p],
            )
            num_updates += int(updated.numpy().item())
            agent.episodes = episodes.numpy().item()
            agent.updates = updates.numpy().item()
        if agent.model.saver is not None:
            agent.model.save()
        return num_updates

    @property
    def flat(self) -> bool:
        """Whether act and observe are now called as their traced graphs with flat tensors."""
        return all(self._concrete.get(name) is not None for name in ("act", "observe"))

    def _call(self, name: str, **kwargs: Any) -> Any:
        """``Model.<name>(**kwargs)`` as Tensorforce's ``tf_function`` wrapper makes it, with the traced
        function and its signatures looked up once (module.py, ``decorated``)."""
        function, inputs, outputs = self._functions[name]
        args = inputs.kwargs_to_args(kwargs=kwargs, to_dict=False, outer_tuple=True)
        with self.agent.model:
            if name not in self._concrete:  # the first call traces the function
                results = function(*args)
                self._concrete[name] = _concrete_function(function, args)
            elif (concrete := self._concrete[name]) is not None:
                # what tf.function does once it has found this trace for the arguments (tracing_compilation.py)
                results = concrete._call_flat(_flatten(args), concrete.captured_inputs)
            else:
                results = function(*args)
        return outputs.args_to_kwargs(args=results, outer_tuple=True, from_dict=False)


def _flatten(args: Any) -> list[Any]:
    import tensorflow as tf

    return list(tf.nest.flatten(args))


def _concrete_function(function: Any, args: Any) -> Any:
    """The one graph ``function`` traced for ``args`` when it can be called with their flat tensors, else None.

    Tensorforce gives its functions an input signature, so every later call (batches of one row count,
    episodes of any length) uses this trace; the check makes sure the flat inputs are what the graph takes.
    """
    try:
        concrete = function.get_concrete_function(*args)
        flat = _flatten(args)
        specs = [spec for spec in _flatten(concrete.structured_input_signature) if hasattr(spec, "dtype")]
        if not hasattr(concrete, "_call_flat") or len(specs) != len(flat):
            return None
        if not all(
            spec.dtype == arg.dtype and spec.shape.is_compatible_with(arg.shape)
            for spec, arg in zip(specs, flat, strict=True)
        ):
            return None
    except Exception as error:  # any surprise keeps the tf.function call, which always works
        logger.debug("calling %s through tf.function: %s", getattr(function, "__name__", function), error)
        return None
    return concrete


def _unsupported(agent: Any) -> str | None:
    """Why the direct calls cannot stand in for this agent's public ones (None: they can)."""
    from importlib.metadata import version

    from rlcloud.runner.compat import import_tensorforce

    tensorforce = import_tensorforce()
    installed = version("tensorforce")
    if installed != _MIRRORED_VERSION:
        return f"Tensorforce {installed} (the direct calls mirror {_MIRRORED_VERSION})"
    if not getattr(agent, "_is_agent", False) or agent.__class__.fn_act is not tensorforce.Agent.fn_act:
        return "not a Tensorforce model agent"
    if agent.recorder is not None:
        return "the agent records traces"
    if not agent.states_spec.is_singleton():
        return "dict states (action masks may come with the states)"
    for name in ("timestep_completed", "timestep_counter", "terminal_buffer", "reward_buffer", "model"):
        if not hasattr(agent, name):
            return f"the agent has no {name}"
    for name in ("act", "observe"):
        if "()" not in getattr(agent.model, f"_{name}_graphs", {}):
            return f"the model has no traced {name} function"
    return None


def _default_auxiliaries(agent: Any, num_rows: int, array_dict: Any) -> Any:
    """The all-true action masks ``Agent.fn_act`` makes when the states bring none (as it builds them)."""

    def function(name: str | None, spec: Any) -> Any:
        auxiliary = array_dict()
        if agent.config.enable_int_action_masking and spec.type == "int" and spec.num_values is not None:
            auxiliary["mask"] = np.ones(shape=(num_rows, *spec.shape, spec.num_values), dtype=spec.np_type())
        return auxiliary

    return agent.actions_spec.fmap(function=function, cls=array_dict, with_names=True)


def _as_batch(actions: Any) -> Any:
    """The public ``Agent.act``'s batched result (a list of per-row actions) as one array or dict of arrays."""
    if isinstance(actions, dict):
        return {name: np.asarray(value) for name, value in actions.items()}
    if isinstance(actions, list) and actions and isinstance(actions[0], dict):
        return {name: np.stack([np.asarray(row[name]) for row in actions]) for name in actions[0]}
    return np.asarray(actions)
