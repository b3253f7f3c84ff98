"""Environments for the runner: gymnasium ids (incl. ALE), Tensorforce's own types, a user's class.

Every environment is wrapped in an :class:`EnvAdapter`, one small interface the vector layer and the
training loop use whatever the source:

* ``states_spec`` / ``actions_spec`` in Tensorforce's format (``dict(type=..., shape=..., ...)``),
* ``reset(seed=None) -> state`` and ``step(action) -> (state, reward, terminal)`` with ``terminal`` 0
  (running), 1 (terminated: a real end of the task) or 2 (truncated: a time limit; Tensorforce then
  bootstraps the value instead of treating the state as final),
* ``repeat_actions`` (the action is repeated, rewards summed) and ``max_timesteps_per_episode`` (counted
  in agent timesteps, ends the episode as truncated) applied in one place.

The spec's ``environment`` dict selects the source (docs/contracts.md):

* ``{type: gym | gymnasium, level: <gymnasium id>, **make_kwargs}`` (ALE ids such as
  ``ALE/SpaceInvaders-v5`` are registered from ale-py on demand),
* ``{type: "pkg.mod:Class", **kwargs}`` or ``{class: "pkg.mod.Class", **kwargs}``: a user's class, either a
  ``gymnasium.Env`` or a Tensorforce-style environment (``states()``, ``actions()``, ``reset()``,
  ``execute(actions)``),
* any other ``type``: a Tensorforce environment type (``Environment.create(environment=type, ...)``).

Whatever the source, the arguments Tensorforce's ``Environment.create`` takes for itself are not the
environment's: ``max_episode_timesteps`` is a limit (the smaller of it and the spec's
``max_timesteps_per_episode`` applies, in agent timesteps; for a gymnasium id it replaces the level's own
limit, as Tensorforce's OpenAIGym does), and the remote settings (``remote``, ``blocking``,
``host``, ``port``) are the runner's business (run_mode distributed), refused with a SpecError. A user's
class is constructed with the other keys only, as ``Environment.create`` would construct it.

Nothing heavy is imported at module level: gymnasium and tensorforce load inside the functions.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.specs.dotted import DOTTED_RE, DottedPathError, code_strings, resolve_dotted_class

if TYPE_CHECKING:  # the client calls this module without loading the runner's other parts
    from rlcloud.specs import ExperimentSpec

__all__ = [
    "CREATE_ARGUMENTS",
    "DETERMINISTIC_PROBLEM",
    "GYM_TYPES",
    "TENSORFORCE_AGENT_TYPES",
    "TENSORFORCE_ENVIRONMENT_TYPES",
    "TENSORFORCE_LAYER_TYPES",
    "TENSORFORCE_NETWORK_TYPES",
    "EnvAdapter",
    "GymnasiumAdapter",
    "TensorforceAdapter",
    "gym_space_to_spec",
    "make_env",
    "resolve_class",
    "split_environment",
    "validate_experiment",
]

logger = logging.getLogger(__name__)

GYM_TYPES = frozenset({"gym", "gymnasium", "openai_gym"})

# Tensorforce 0.6.5's registries, copied so that validation on the client does not import TensorFlow
# (an 11 s import on a small machine). tests/runner/test_envs.py checks them against the real module.
TENSORFORCE_AGENT_TYPES = frozenset(
    {
        "a2c", "ac", "constant", "ddpg", "ddqn", "default", "double_dqn", "dpg", "dqn", "dueling_dqn",
        "ppo", "random", "recorder", "reinforce", "tensorforce", "trpo", "vpg",
    }
)  # fmt: skip
TENSORFORCE_ENVIRONMENT_TYPES = frozenset(
    {
        "ale", "arcade_learning_environment", "carla", "carla_environment", "custom_cartpole", "default",
        "open_sim", "openai_retro", "osim", "ple", "pygame_learning_environment", "retro", "vizdoom",
    }
)  # fmt: skip
TENSORFORCE_LAYER_TYPES = frozenset(
    {
        "activation", "batch_normalization", "block", "clipping", "conv1d", "conv1d_transpose", "conv2d",
        "conv2d_transpose", "default", "deltafier", "dense", "dropout", "embedding",
        "exponential_normalization", "flatten", "function", "gru", "image", "input_gru", "input_lstm",
        "input_rnn", "instance_normalization", "keras", "linear", "linear_normalization", "lstm", "pool1d",
        "pool2d", "pooling", "register", "reshape", "retrieve", "reuse", "rnn", "self_attention", "sequence",
    }
)  # fmt: skip
TENSORFORCE_NETWORK_TYPES = frozenset({"auto", "custom", "default", "keras", "layered"})

#: Tensorforce 0.6.5 applies ``deterministic`` only to independent (non-learning) act() calls.
DETERMINISTIC_PROBLEM = SpecProblem(
    "deterministic",
    "Tensorforce 0.6.5 acts deterministically only in independent (non-learning) mode; use 'evaluation' "
    "for deterministic episodes, or set deterministic: false",
    True,
)

_DOTTED = DOTTED_RE

#: Tensorforce 0.6.5's ``Environment.create(environment, max_episode_timesteps, reward_shaping, remote,
#: blocking, host, port, **kwargs)``: its own arguments, never passed on to the environment's constructor.
CREATE_ARGUMENTS = ("max_episode_timesteps", "reward_shaping", "remote", "blocking", "host", "port")
_REMOTE_ARGUMENTS = ("remote", "blocking", "host", "port")
_REMOTE_WHY = (
    "is Environment.create's remote setting; the runner places environments itself: use run_mode distributed "
    "(env servers) or multi-threaded, and remove it"
)


def _limit_problem(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return "must be a whole number >= 1 (timesteps), or absent for the environment's own limit"
    return None


def split_environment(environment: Mapping[str, Any]) -> tuple[dict[str, Any], int | None]:
    """``(the environment's own arguments, max_episode_timesteps)``: an ``environment`` mapping without the
    arguments Tensorforce's ``Environment.create`` keeps for itself (:data:`CREATE_ARGUMENTS`).

    Raises SpecError for a remote setting (``remote``, ``blocking``, ``host``, ``port``) or a limit that is
    not a whole number >= 1. ``reward_shaping`` (an expression Tensorforce evaluates) is refused by
    :func:`rlcloud.specs.dotted.code_strings` before this runs; it is dropped here.
    """
    own = {key: value for key, value in environment.items() if key not in CREATE_ARGUMENTS}
    problems = [SpecProblem(f"environment.{key}", _REMOTE_WHY, environment[key]) for key in _REMOTE_ARGUMENTS
                if key in environment]  # fmt: skip
    limit = environment.get("max_episode_timesteps")
    why = _limit_problem(limit)
    if why:
        problems.append(SpecProblem("environment.max_episode_timesteps", why, limit))
    if problems:
        raise SpecError(problems)
    return own, limit


def _smaller(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


# --------------------------------------------------------------------------------------------- adapters


class EnvAdapter:
    """One environment with Tensorforce-format specs, 0/1/2 terminals, action repeat and a step limit.

    Subclasses implement :meth:`_reset` and :meth:`_step` (one raw environment step returning
    ``(state, reward, terminated, truncated)``); this class applies ``repeat_actions`` and
    ``max_timesteps_per_episode``.
    """

    states_spec: dict[str, Any]
    actions_spec: dict[str, Any]

    def __init__(
        self,
        *,
        repeat_actions: int = 1,
        max_timesteps_per_episode: int | None = None,
        raw_max_steps: int | None = None,
    ) -> None:
        if repeat_actions < 1:
            raise SpecError([SpecProblem("repeat_actions", "must be >= 1", repeat_actions)])
        self.repeat_actions = repeat_actions
        # The environment's own limit is in raw steps; the agent sees one timestep per repeated action.
        own_limit = None if raw_max_steps is None else -(-raw_max_steps // repeat_actions)
        limits = [x for x in (max_timesteps_per_episode, own_limit) if x is not None]
        self.max_episode_timesteps: int | None = min(limits) if limits else None
        self._limit = max_timesteps_per_episode
        self._t = 0

    # -- subclass hooks
    def _reset(self, seed: int | None) -> Any:
        raise NotImplementedError

    def _step(self, action: Any) -> tuple[Any, float, bool, bool]:
        raise NotImplementedError

    # -- public interface
    def reset(self, seed: int | None = None) -> Any:
        """Start a new episode and return its first state (``seed`` seeds the environment's RNG)."""
        self._t = 0
        return self._reset(seed)

    def step(self, action: Any) -> tuple[Any, float, int]:
        """Apply ``action`` (``repeat_actions`` times) and return ``(state, summed reward, terminal 0/1/2)``."""
        total = 0.0
        terminated = truncated = False
        state: Any = None
        for _ in range(self.repeat_actions):
            state, reward, terminated, truncated = self._step(action)
            total += float(reward)
            if terminated or truncated:
                break
        self._t += 1
        if terminated:
            return state, total, 1
        if truncated or (self._limit is not None and self._t >= self._limit):
            return state, total, 2
        return state, total, 0

    def close(self) -> None:
        """Release the environment's resources."""


class GymnasiumAdapter(EnvAdapter):
    """A ``gymnasium.Env`` as an :class:`EnvAdapter` (terminated -> 1, truncated -> 2)."""

    def __init__(self, env: Any, *, repeat_actions: int = 1, max_timesteps_per_episode: int | None = None) -> None:
        spec = getattr(env, "spec", None)
        raw_max = getattr(spec, "max_episode_steps", None) if spec is not None else None
        super().__init__(
            repeat_actions=repeat_actions,
            max_timesteps_per_episode=max_timesteps_per_episode,
            raw_max_steps=raw_max,
        )
        self.env = env
        self.states_spec = gym_space_to_spec(env.observation_space)
        self.actions_spec = gym_space_to_spec(env.action_space, bounded=True)
        self._action_offset = _discrete_offset(env.action_space)
        self._seeded = False

    def _reset(self, seed: int | None) -> Any:
        if seed is not None and not self._seeded:
            # Seeding the action space too keeps any sampling a wrapper does reproducible.
            self.env.action_space.seed(seed)
        state, _info = self.env.reset(seed=seed)
        self._seeded = self._seeded or seed is not None
        return _to_state(state)

    def _step(self, action: Any) -> tuple[Any, float, bool, bool]:
        if self._action_offset:
            action = np.asarray(action) + self._action_offset
        elif isinstance(action, np.ndarray) and action.ndim == 0:
            action = action.item()
        state, reward, terminated, truncated, _info = self.env.step(action)
        return _to_state(state), float(reward), bool(terminated), bool(truncated)

    def close(self) -> None:
        """Close the gymnasium environment."""
        self.env.close()


class TensorforceAdapter(EnvAdapter):
    """A Tensorforce-style environment (``states()``, ``actions()``, ``reset()``, ``execute()``)."""

    def __init__(self, env: Any, *, repeat_actions: int = 1, max_timesteps_per_episode: int | None = None) -> None:
        raw_max = None
        if hasattr(env, "max_episode_timesteps"):
            raw_max = env.max_episode_timesteps()
        super().__init__(
            repeat_actions=repeat_actions,
            max_timesteps_per_episode=max_timesteps_per_episode,
            raw_max_steps=raw_max,
        )
        self.env = env
        self.states_spec = dict(env.states())
        self.actions_spec = dict(env.actions())

    def _reset(self, seed: int | None) -> Any:
        if seed is not None and hasattr(self.env, "seed"):
            self.env.seed(seed)
        return self.env.reset()

    def _step(self, action: Any) -> tuple[Any, float, bool, bool]:
        state, terminal, reward = self.env.execute(actions=action)
        terminal = int(terminal)
        return state, float(reward), terminal == 1, terminal == 2

    def close(self) -> None:
        """Close the Tensorforce environment (a user's class may have no ``close``)."""
        close = getattr(self.env, "close", None)
        if close is not None:
            close()


def _to_state(state: Any) -> Any:
    if isinstance(state, Mapping):
        return {k: _to_state(v) for k, v in state.items()}
    if isinstance(state, tuple):
        return {f"gymtpl{i}": _to_state(v) for i, v in enumerate(state)}
    return np.asarray(state)


def _discrete_offset(space: Any) -> int:
    start = getattr(space, "start", None)
    if start is None or np.ndim(start) != 0:
        return 0
    return int(start)


def _bounds(values: np.ndarray) -> float | np.ndarray | None:
    """Tensorforce min/max value for a Box bound: scalar if uniform, None if any is (near) infinite."""
    if not np.all(np.isfinite(values)) or np.any(np.abs(values) >= 1e6):
        return None
    if np.all(values == values.flat[0]):
        return float(values.flat[0])
    return values.astype(np.float32)


def gym_space_to_spec(space: Any, *, bounded: bool = False) -> dict[str, Any]:
    """Translate a gymnasium space into a Tensorforce states/actions spec.

    Box -> float (min/max when finite), Discrete -> int with num_values, MultiDiscrete -> int (equal sizes)
    or one int per entry, MultiBinary -> bool, Dict/Tuple -> nested specs. ``bounded`` (actions) requires
    finite bounds for continuous actions because Tensorforce's distributions need them to be sensible.
    """
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return dict(type="int", shape=(), num_values=int(space.n))
    if isinstance(space, spaces.MultiBinary):
        return dict(type="bool", shape=tuple(np.atleast_1d(space.n).tolist()))
    if isinstance(space, spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec)
        if np.all(nvec == nvec.flat[0]):
            return dict(type="int", shape=tuple(nvec.shape), num_values=int(nvec.flat[0]))
        raise SpecError(
            [SpecProblem("environment", "MultiDiscrete spaces with unequal sizes are not supported", space)]
        )
    if isinstance(space, spaces.Box):
        spec: dict[str, Any] = dict(type="float", shape=tuple(space.shape))
        low, high = _bounds(np.asarray(space.low)), _bounds(np.asarray(space.high))
        if low is not None and high is not None:
            spec["min_value"], spec["max_value"] = low, high
        return spec
    if isinstance(space, spaces.Dict):
        return {name: gym_space_to_spec(sub, bounded=bounded) for name, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return {f"gymtpl{i}": gym_space_to_spec(sub, bounded=bounded) for i, sub in enumerate(space.spaces)}
    raise SpecError([SpecProblem("environment", f"unsupported gymnasium space {type(space).__name__}", space)])


# -------------------------------------------------------------------------------------------- factories


def resolve_class(
    path: str, *, field: str = "environment.type", kind: str = "environment", missing_ok: bool = False
) -> type | None:
    """Import ``"pkg.mod:Class"`` or ``"pkg.mod.Class"`` and return the class, checked to be of ``kind``
    ("environment", "agent", "network" or "layer") before anything is called (SpecError naming ``field``).

    See :func:`rlcloud.specs.dotted.resolve_dotted_class`: ``subprocess:Popen``, ``os:system`` or
    ``builtins:eval`` are refused, never run. With ``missing_ok`` a module not installed here gives None.
    """
    try:
        return resolve_dotted_class(path, kind, missing_ok=missing_ok)
    except DottedPathError as exc:
        raise SpecError([SpecProblem(field, str(exc), path)]) from None


def _register_ale(level: str) -> None:
    from rlcloud.specs.legacy import is_old_atari_id  # ale-py registers "SpaceInvaders-v0" & co. too

    if level.startswith("ALE/") or "NoFrameskip" in level or is_old_atari_id(level):
        try:
            import ale_py
            import gymnasium

            # the emulator's banner ("A.L.E: Arcade Learning Environment (version ...)", "[Powered by Stella]")
            # on every environment made; its warnings and errors still show, and debug logging keeps all
            if not logging.getLogger().isEnabledFor(logging.DEBUG):
                ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)
            gymnasium.register_envs(ale_py)
        except ImportError:  # pragma: no cover - ale-py is in the runner extra
            logger.warning("ale-py is not installed; Atari ids are unavailable")


def _user_class_path(environment: Mapping[str, Any]) -> str | None:
    if "class" in environment:
        return str(environment["class"])
    env_type = environment.get("type")
    if isinstance(env_type, str) and (":" in env_type or "." in env_type):
        return env_type
    return None


def make_env(
    environment: Mapping[str, Any],
    *,
    repeat_actions: int = 1,
    max_timesteps_per_episode: int | None = None,
) -> EnvAdapter:
    """Build the environment an ExperimentSpec's ``environment`` dict describes, wrapped in an adapter.

    Example: ``make_env({"type": "gym", "level": "CartPole-v1"}, max_timesteps_per_episode=200)``.
    Raises :class:`SpecError` naming the field when the description is invalid.
    """
    env, env_limit = split_environment(environment)
    limit = _smaller(max_timesteps_per_episode, env_limit)
    limits: dict[str, Any] = dict(repeat_actions=repeat_actions, max_timesteps_per_episode=limit)
    class_path = _user_class_path(env)
    if class_path is not None:
        env.pop("class", None)
        env.pop("type", None)
        cls = resolve_class(class_path, field="environment.class" if "class" in environment else "environment.type")
        assert cls is not None  # missing_ok is false: an import failure raised
        instance = cls(**env)
        return _wrap_instance(instance, **limits)
    # Tensorforce's own spelling {environment: gym, level: ...} is accepted as well as {type: ...}.
    env_type = env.pop("type", None) or env.pop("environment", None)
    if env_type in GYM_TYPES:
        import gymnasium

        level = env.pop("level", None)
        if not isinstance(level, str):
            raise SpecError([SpecProblem("environment.level", "a gymnasium id is required", level)])
        _register_ale(level)
        if env_limit is not None and "max_episode_steps" not in env:
            # Tensorforce's limit overwrites the level's own (OpenAIGym): gymnasium's TimeLimit, in raw steps
            env["max_episode_steps"] = env_limit * repeat_actions
        try:
            gym_env = gymnasium.make(level, **env)
        except gymnasium.error.Error as exc:
            raise SpecError([SpecProblem("environment.level", f"gymnasium cannot make it: {exc}", level)]) from exc
        return GymnasiumAdapter(gym_env, **limits)
    if env_type is None:
        raise SpecError([SpecProblem("environment.type", "required: 'gym', a Tensorforce type or 'pkg.mod:Class'")])
    from rlcloud.runner.compat import import_tensorforce

    tensorforce = import_tensorforce()
    tf_env = tensorforce.Environment.create(environment=env_type, **env)
    # Environment.create wraps the env and enforces its own episode limit; use its inner environment
    # so that our adapter is the one place where limits and terminals are handled.
    inner = getattr(tf_env, "_environment", tf_env)
    return TensorforceAdapter(inner, **limits)


def _wrap_instance(instance: Any, **limits: Any) -> EnvAdapter:
    try:
        import gymnasium

        if isinstance(instance, gymnasium.Env):
            return GymnasiumAdapter(instance, **limits)
    except ImportError:  # pragma: no cover
        pass
    if all(hasattr(instance, name) for name in ("states", "actions", "reset", "execute")):
        return TensorforceAdapter(instance, **limits)
    raise SpecError(
        [
            SpecProblem(
                "environment.class",
                "the class must be a gymnasium.Env or define states(), actions(), reset() and execute()",
                type(instance).__name__,
            )
        ]
    )


# ------------------------------------------------------------------------------------------- validation


def _close(word: str, options: Any, n: int = 3) -> str:
    matches = difflib.get_close_matches(word, list(options), n=n, cutoff=0.6)
    if not matches:
        lowered = {o.lower(): o for o in options}
        matches = [lowered[m] for m in difflib.get_close_matches(word.lower(), list(lowered), n=n)]
    return f"; did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""


def _check_class(path: str, field: str, kind: str, problems: list[SpecProblem], missing_ok: bool) -> None:
    try:
        resolve_class(path, field=field, kind=kind, missing_ok=missing_ok)
    except SpecError as exc:
        problems.extend(exc.problems)


def _validate_environment(environment: Any, problems: list[SpecProblem], missing_ok: bool) -> None:
    from rlcloud.specs.tf06 import environment_argument_problems  # the documented types (no TensorFlow)

    if not isinstance(environment, Mapping):
        problems.append(SpecProblem("environment", "must be a mapping such as {type: gym, level: CartPole-v1}"))
        return
    try:
        split_environment(environment)
    except SpecError as exc:
        problems.extend(exc.problems)
    class_path = _user_class_path(environment)
    field = "environment.class" if "class" in environment else "environment.type"
    if class_path is not None:
        _check_class(class_path, field, "environment", problems, missing_ok)
        return
    env_type = environment.get("type") or environment.get("environment")
    if env_type in GYM_TYPES:
        level = environment.get("level")
        if not isinstance(level, str) or not level:
            problems.append(SpecProblem("environment.level", "a gymnasium id is required, e.g. CartPole-v1", level))
            return
        import gymnasium

        _register_ale(level)
        if level not in gymnasium.registry:
            hint = _close(level, gymnasium.registry.keys())
            problems.append(SpecProblem("environment.level", f"unknown gymnasium id{hint}", level))
        problems.extend(environment_argument_problems(environment, gym=True))
        return
    if not isinstance(env_type, str):
        problems.append(
            SpecProblem("environment.type", "required: 'gym', a Tensorforce type or 'pkg.mod:Class'", env_type)
        )
    elif env_type not in TENSORFORCE_ENVIRONMENT_TYPES:
        valid = sorted(GYM_TYPES | TENSORFORCE_ENVIRONMENT_TYPES)
        problems.append(
            SpecProblem(
                "environment.type",
                f"unknown environment type{_close(env_type, valid)} (valid: {', '.join(valid)}, "
                "or 'package.module:Class')",
                env_type,
            )
        )
    else:
        problems.extend(environment_argument_problems(environment, gym=False))


def _validate_agent(agent: Any, problems: list[SpecProblem], missing_ok: bool) -> None:
    if not isinstance(agent, Mapping):
        problems.append(SpecProblem("agent", "must be a mapping such as {type: ppo, batch_size: 10}", agent))
        return
    agent_type = agent.get("type", agent.get("agent"))
    if not isinstance(agent_type, str):
        problems.append(SpecProblem("agent.type", "required, e.g. ppo, dqn, a2c", agent_type))
    elif agent_type not in TENSORFORCE_AGENT_TYPES and not _DOTTED.match(agent_type):
        valid = sorted(TENSORFORCE_AGENT_TYPES)
        problems.append(
            SpecProblem(
                "agent.type",
                f"unknown agent type{_close(agent_type, valid)} (valid: {', '.join(valid)})",
                agent_type,
            )
        )
    elif agent_type not in TENSORFORCE_AGENT_TYPES:
        _check_class(agent_type, "agent.type", "agent", problems, missing_ok)
    for key in ("states", "actions", "max_episode_timesteps", "parallel_interactions"):
        if key in agent:
            problems.append(SpecProblem(f"agent.{key}", "is set by the runner from the environment; remove it"))
    if "network" in agent:
        _validate_network(agent["network"], "agent.network", problems, missing_ok)
    from rlcloud.specs.tf06 import agent_argument_problems

    problems.extend(agent_argument_problems(agent))  # Tensorforce would refuse them only at build time


def _validate_layer(layer: Any, field: str, problems: list[SpecProblem], missing_ok: bool) -> None:
    if isinstance(layer, list):
        for i, sub in enumerate(layer):
            _validate_layer(sub, f"{field}[{i}]", problems, missing_ok)
        return
    if not isinstance(layer, Mapping):
        problems.append(SpecProblem(field, "a layer must be a mapping such as {type: dense, size: 64}", layer))
        return
    layer_type = layer.get("type")
    if not isinstance(layer_type, str):
        problems.append(SpecProblem(f"{field}.type", "required, e.g. dense, conv2d, flatten", layer_type))
    elif layer_type not in TENSORFORCE_LAYER_TYPES and not _DOTTED.match(layer_type):
        from rlcloud.specs.legacy_network import LEGACY_LAYER_HINTS  # old names: say the new one, not a near miss

        hint = f"; {LEGACY_LAYER_HINTS[layer_type]}" if layer_type in LEGACY_LAYER_HINTS else None
        valid = sorted(TENSORFORCE_LAYER_TYPES)
        hint = hint or _close(layer_type, valid)
        problems.append(SpecProblem(f"{field}.type", f"unknown layer type{hint}", layer_type))
    elif layer_type not in TENSORFORCE_LAYER_TYPES:
        _check_class(layer_type, f"{field}.type", "layer", problems, missing_ok)
    size = layer.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
        problems.append(SpecProblem(f"{field}.size", "must be a non-negative integer", size))
    from rlcloud.specs.tf06 import layer_argument_problems  # what Tensorforce refuses only at build time

    problems.extend(layer_argument_problems(layer, field))


def _validate_network(network: Any, field: str, problems: list[SpecProblem], missing_ok: bool) -> None:
    if network is None or network == "auto":
        return
    if isinstance(network, str):
        problems.append(SpecProblem(field, "must be 'auto', a list of layers, or a mapping with a type", network))
        return
    if isinstance(network, list):
        if not network:
            problems.append(SpecProblem(field, "a layered network needs at least one layer", network))
        for i, layer in enumerate(network):
            _validate_layer(layer, f"{field}[{i}]", problems, missing_ok)
        return
    if isinstance(network, Mapping):
        net_type = network.get("type", "layered" if "layers" in network else None)
        if net_type not in TENSORFORCE_NETWORK_TYPES and not (isinstance(net_type, str) and _DOTTED.match(net_type)):
            valid = sorted(TENSORFORCE_NETWORK_TYPES)
            hint = _close(net_type, valid) if isinstance(net_type, str) else ""
            problems.append(
                SpecProblem(f"{field}.type", f"unknown network type{hint} (valid: {', '.join(valid)})", net_type)
            )
        elif isinstance(net_type, str) and net_type not in TENSORFORCE_NETWORK_TYPES:
            _check_class(net_type, f"{field}.type", "network", problems, missing_ok)
        if "layers" in network:
            layers = network["layers"]
            if not isinstance(layers, list) or not layers:
                problems.append(SpecProblem(f"{field}.layers", "must be a non-empty list of layers", layers))
            else:
                for i, layer in enumerate(layers):
                    _validate_layer(layer, f"{field}.layers[{i}]", problems, missing_ok)
        return
    problems.append(SpecProblem(field, "must be 'auto', a list of layers, or a mapping with a type", network))


def validate_experiment(spec: ExperimentSpec | Mapping[str, Any], *, import_user_classes: bool = False) -> None:
    """Check an ExperimentSpec's environment, agent and network before any process starts.

    ``spec`` may also be a mapping with those fields (``environment``, ``agent``, ``network``,
    ``deterministic``), e.g. a spec file's contents not validated as a whole yet; missing ones count
    as unset.

    Raises :class:`SpecError` listing every problem (field, value, close matches). Cheap enough for the
    client: it imports gymnasium (for the id registry) but not TensorFlow or tensorforce. Every class a
    spec names by dotted path (environment, agent, network, layer) is imported and checked to be a class
    of the accepted kind, and nothing is called (``subprocess:Popen`` is refused here, not run). A module
    that is not installed on this machine is an error only with ``import_user_classes`` (the runner):
    the client may lack the user's package, and the runner checks again before it builds anything.
    """
    if isinstance(spec, Mapping):
        environment, agent = spec.get("environment"), spec.get("agent")
        network, deterministic = spec.get("network", "auto"), spec.get("deterministic", False)
    else:
        environment, agent = spec.environment, spec.agent
        network, deterministic = spec.network, spec.deterministic
    problems: list[SpecProblem] = []
    missing_ok = not import_user_classes
    _validate_environment(environment, problems, missing_ok)
    _validate_agent(agent, problems, missing_ok)
    _validate_network(network, "network", problems, missing_ok)
    fields = {"environment": environment, "agent": agent, "network": network}
    for name, value in fields.items():
        # the spec models refuse these too; a dict handed straight to the runner is checked here
        problems += [SpecProblem(path, why) for path, why in code_strings(value, name)]
    if deterministic:
        problems.append(DETERMINISTIC_PROBLEM)
    if not problems:
        problems += _layer_input_problems(environment, agent, network)
    if problems:
        raise SpecError(problems)


def _state_spec(environment: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Tensorforce state spec of a gymnasium environment (one state), or None when it cannot be told
    cheaply: a user's class, a Tensorforce environment, a dict/tuple space, or an id this install cannot
    make (e.g. Atari without ale-py on a client): those are checked by the runner when it builds the agent."""
    if _user_class_path(environment) is not None:
        return None
    env = {key: value for key, value in environment.items() if key not in CREATE_ARGUMENTS}
    if (env.pop("type", None) or env.pop("environment", None)) not in GYM_TYPES:
        return None
    level = env.pop("level", None)
    if not isinstance(level, str):
        return None
    try:
        import gymnasium

        _register_ale(level)
        gym_env = gymnasium.make(level, **env)
    except Exception:  # any failure here only means "cannot tell"; the runner reports it
        return None
    try:
        spec = gym_space_to_spec(gym_env.observation_space)
    except SpecError:
        return None
    finally:
        gym_env.close()
    return spec if isinstance(spec.get("type"), str) else None


def _as_layers(value: Any) -> list[Any] | None:
    if isinstance(value, list):
        return value
    if isinstance(value, Mapping) and "type" in value and value.get("type") != "layered":
        return [value]  # one preprocessing layer
    if isinstance(value, Mapping) and value.get("type", "layered") == "layered" and "layers" in value:
        return value["layers"] if isinstance(value["layers"], list) else None
    return None


def _layer_input_problems(environment: Any, agent: Any, network: Any) -> list[SpecProblem]:
    """Layers that cannot take the environment's states (an embedding on CartPole's
    float states, a dense layer on FrozenLake's int states, conv2d on a vector) are named here, without
    building the TensorFlow graph, instead of failing the run when Tensorforce builds the agent."""
    if not isinstance(environment, Mapping) or not isinstance(agent, Mapping):
        return []
    field, layers = "network", network
    if network in (None, "auto") and "network" in agent:
        field, layers = "agent.network", agent["network"]
    if isinstance(layers, Mapping):
        field = f"{field}.layers"
    network_layers = _as_layers(layers)
    if not network_layers:
        return []
    preprocessing = agent.get("state_preprocessing")
    pre_layers = [] if preprocessing in (None, "linear_normalization") else _as_layers(preprocessing)
    if pre_layers is None:
        return []  # per-state preprocessing (a mapping by state name): not judged here
    state = _state_spec(environment)
    if state is None:
        return []
    from rlcloud.specs.tf06 import layer_flow

    if pre_layers:
        problems, state = layer_flow(pre_layers, state, "agent.state_preprocessing")
        if problems or state is None:
            return problems
    return layer_flow(network_layers, state, field)[0]
