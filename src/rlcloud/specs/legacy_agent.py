"""Import of Tensorforce 0.3/0.4 (and 0.5-renamed) agent specs in Tensorforce 0.6 terms (see rlcloud.specs.legacy).

Keys with a certain mapping are mapped, each reported (rlcloud.specs.legacy_notes); keys the 0.6 agent does not
take are dropped with a warning naming them; what cannot be kept without changing meaning is refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.specs.legacy_network import convert_legacy_network
from rlcloud.specs.legacy_notes import _count, _warn, _warn_at
from rlcloud.specs.tf06 import AGENT_ARGUMENTS, RUNNER_ARGUMENTS

__all__ = [
    "EPSILON_DECAY_STRETCH",
    "LEGACY_AGENT_KEYS",
    "convert_legacy_agent",
    "epsilon_decay_schedule",
    "is_legacy_agent",
]


_AGENT_TYPES = {
    "dqn_agent": "dqn",
    "ddqn_agent": "double_dqn",
    "dueling_dqn_agent": "dueling_dqn",
    "ppo_agent": "ppo",
    "vpg_agent": "vpg",
    "trpo_agent": "trpo",
    "random_agent": "random",
    "constant_agent": "constant",
}
_AGENTS_REFUSED = {
    "naf_agent": "NAF (normalized advantage functions) has no Tensorforce 0.6 equivalent; for continuous "
    "actions use dpg (DDPG) or ppo",
    "dqfd_agent": "DQfD (learning from demonstrations) has no Tensorforce 0.6 agent; use dqn and "
    "Agent.pretrain-style imitation outside rlcloud",
    "dqn_nstep_agent": "0.4's n-step DQN has no exact 0.6 equivalent; use dqn with horizon: N (0.6's n-step "
    "return) after checking it matches your intent",
    "categorical_dqn_agent": "categorical DQN has no Tensorforce 0.6 agent",
}

#: Agent keys only Tensorforce 0.3/0.4 had: an agent holding one is converted as a legacy agent.
LEGACY_AGENT_KEYS = frozenset(
    [
        "update_mode",
        "actions_exploration",
        "step_optimizer",
        "optimization_steps",
        "states_preprocessing",
        "reward_preprocessing",
        "saver_spec",
        "summary_spec",
        "distributed_spec",
        "network_spec",
        "baseline_mode",
        "gae_lambda",
        "double_q_model",
        "batched_observe",
        "memory_capacity",
        "first_update",
        "target_update_frequency",
        "repeat_update",
        "scope",
        "execution",
        "device",
        "ls_max_iterations",
        "cg_max_iterations",
    ]
)

# The unit of batch_size/update_frequency in each Tensorforce 0.6 agent (its docs: "batch_size ... episodes"
# for the policy-gradient agents, timesteps for the memory-based ones).
_BATCH_UNITS_06: dict[str, str] = {
    "ppo": "episodes",
    "vpg": "episodes",
    "trpo": "episodes",
    "a2c": "timesteps",
    "ac": "timesteps",
    "dpg": "timesteps",
    "dqn": "timesteps",
    "double_dqn": "timesteps",
    "dueling_dqn": "timesteps",
}
_DQN_TYPES = ("dqn", "double_dqn", "dueling_dqn")
_PG_TYPES = ("ppo", "vpg", "trpo")

# Renames Tensorforce 0.6 itself names in its TensorforceError.deprecated messages (tensorforce/agents/*.py),
# plus 0.4's TRPO line search, which 0.6 calls linesearch_iterations.
_TERMINAL = {"estimate_terminal": "predict_terminal_values"}
_RENAMED_IN_06: dict[str, dict[str, str]] = {
    "ppo": {
        "optimization_steps": "multi_step",
        "baseline_network": "baseline",
        "critic_network": "baseline",
        "critic_optimizer": "baseline_optimizer",
        **_TERMINAL,
    },
    "trpo": {
        "baseline_network": "baseline",
        "critic_network": "baseline",
        "critic_optimizer": "baseline_optimizer",
        "ls_max_iterations": "linesearch_iterations",
        **_TERMINAL,
    },
    "vpg": {"baseline_network": "baseline", **_TERMINAL},
    "ac": {"critic_network": "critic", **_TERMINAL},
    "dpg": {"critic_network": "critic", **_TERMINAL},
    "dqn": {"first_update": "start_updating", **_TERMINAL},
    "double_dqn": {"first_update": "start_updating", **_TERMINAL},
    "dueling_dqn": {"first_update": "start_updating", **_TERMINAL},
    "a2c": dict(_TERMINAL),
}

# Keys rlcloud sets itself (saving, summaries, placement): a legacy value is dropped with this reason.
_RUNNER_MANAGED = ("saver_spec", "summary_spec", "saver", "summarizer", "execution", "distributed_spec", "device")


# Names Tensorforce 0.5 used and 0.6 refuses with a rename (its TensorforceError.deprecated): such an agent
# is converted too, but it is not a 0.4 agent, so 0.4's defaults are not applied to it.
_RENAMED_05_KEYS = frozenset(["estimate_terminal", "critic_network", "baseline_network"])


def _is_04_agent(agent: Mapping[str, Any]) -> bool:
    type_ = agent.get("type")
    return (isinstance(type_, str) and type_.endswith("_agent")) or bool(LEGACY_AGENT_KEYS & set(agent))


def is_legacy_agent(agent: Mapping[str, Any]) -> bool:
    """True for a Tensorforce 0.3/0.4 agent: a ``*_agent`` type or a key only 0.3/0.4 had.

    Tensorforce 0.6 files spell the type ``agent: ppo`` or ``type: ppo`` and use none of
    :data:`LEGACY_AGENT_KEYS`; they pass through unchanged. A 0.4 ``memory``/``optimizer`` mapping alone
    does not make an agent legacy: 0.6's ``tensorforce`` agent takes those too.
    """
    if "agent" in agent:
        return False
    return _is_04_agent(agent) or bool(_RENAMED_05_KEYS & set(agent))


#: How far past ``timesteps`` the polynomial that follows 0.4's epsilon_decay reaches (see below).
EPSILON_DECAY_STRETCH = 100


def epsilon_decay_schedule(initial: float, final: float, timesteps: int, *, half_lives: float = 10.0) -> dict[str, Any]:
    """0.4's ``epsilon_decay`` exploration as a Tensorforce 0.6 ``polynomial`` decaying schedule.

    0.4 decayed ``final + (initial - final) * 0.5 ** (t / (timesteps / half_lives))``: exponential towards
    ``final``. 0.6's ``exponential`` decay has no final value (it decays towards 0), but its ``polynomial``
    one has: ``final + (initial - final) * (1 - t / D) ** power``, and ``(1 - t / D) ** (k * D)`` tends to
    ``exp(-k * t)`` as D grows. With D = 100 x ``timesteps`` and ``power = half_lives * ln 2 * 100`` the two
    curves differ by at most 0.05% of ``initial - final`` (epsilon 0.55 / 0.21 / 0.13 at 100k / 300k / 500k
    of 1e6, as in 0.4). A single schedule: a piecewise one of many steps makes TensorFlow's
    graph, and the agent, many times bigger and slower.
    """
    decay_steps = EPSILON_DECAY_STRETCH * timesteps
    return {
        "type": "decaying",
        "decay": "polynomial",
        "unit": "timesteps",
        "num_steps": decay_steps - 1,  # Tensorforce passes decay_steps = num_steps + 1 to TensorFlow
        "initial_value": float(initial),
        "final_value": float(final),
        "power": half_lives * math.log(2) * EPSILON_DECAY_STRETCH,
    }


def _convert_exploration(exploration: Any, out: dict[str, Any]) -> None:
    field = "agent.actions_exploration"
    if not isinstance(exploration, dict):
        _warn(f"{field} {exploration!r} has no certain 0.6 equivalent and was dropped", field)
        return
    type_ = exploration.get("type")
    initial = exploration.get("initial_epsilon", 1.0)
    final = exploration.get("final_epsilon", 0.1)
    timesteps = _count(exploration.get("timesteps", 10000), f"{field}.timesteps")
    start = exploration.get("start_timestep", 0)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (initial, final, start)):
        raise SpecError([SpecProblem(field, "initial_epsilon, final_epsilon and start_timestep must be numbers")])
    if type_ == "epsilon_decay":
        half_lives = exploration.get("half_lives", 10)
        if not (isinstance(half_lives, int | float) and not isinstance(half_lives, bool) and half_lives > 0):
            raise SpecError([SpecProblem(f"{field}.half_lives", "must be a number > 0", half_lives)])
        out["exploration"] = epsilon_decay_schedule(float(initial), float(final), timesteps, half_lives=half_lives)
        _warn(
            f"{field} {exploration} became exploration: a polynomial decay that follows 0.4's exponential one "
            f"(half-life {timesteps / half_lives:g} timesteps towards {final}) within 0.05% of its range",
            field,
        )
        if start:
            _warn(f"{field}.start_timestep {start} is not kept: the 0.6 schedule decays from timestep 0", field)
    elif type_ == "epsilon_anneal" and not start:
        out["exploration"] = {
            "type": "linear",
            "unit": "timesteps",
            "num_steps": timesteps,
            "initial_value": float(initial),
            "final_value": float(final),
        }
        _warn(f"{field} {exploration} became exploration {out['exploration']} (0.4 annealed linearly too)", field)
    elif (
        type_ == "gaussian"
        and exploration.get("mu", 0.0) == 0.0
        and isinstance(exploration.get("sigma", 0.3), float | int)
    ):
        # 0.6's exploration on float actions is the standard deviation of added Gaussian noise
        out["exploration"] = float(exploration.get("sigma", 0.3))
        _warn(f"{field} {exploration} became exploration: {out['exploration']} (Gaussian noise std)", field)
    else:
        _warn(f"{field} {exploration} has no certain 0.6 equivalent and was dropped", field)


# 0.4 state preprocessors -> 0.6 preprocessing layers (tensorforce/core/layers/preprocessing.py of 0.6.5).
def _convert_states_preprocessing(steps: Any) -> list[dict[str, Any]] | None:
    field = "agent.states_preprocessing"
    if isinstance(steps, dict) and "type" in steps:
        steps = [steps]
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        _warn(f"{field} {steps!r} (per-state preprocessing) has no certain 0.6 equivalent and was dropped", field)
        return None
    out: list[dict[str, Any]] = []
    said: list[str] = []
    for step in steps:
        kind = step.get("type")
        if kind == "image_resize":
            image = _image_layer(out)
            image["height"], image["width"] = step.get("height"), step.get("width")
            said.append("image_resize -> image height/width")
        elif kind == "grayscale":
            _image_layer(out)["grayscale"] = True if "weights" not in step else list(step["weights"])
            said.append("grayscale -> image grayscale")
        elif kind == "sequence":
            out.append({"type": "sequence", "length": step.get("length", 2)})
            said.append("sequence -> sequence (frames stacked on the last axis)")
        elif kind == "standardize":
            out.append({"type": "instance_normalization"})
            said.append("standardize -> instance_normalization")
        elif kind == "clip":
            out.append({"type": "clipping", "lower": step.get("min_value"), "upper": step.get("max_value")})
            said.append("clip -> clipping")
        elif kind == "deltafier":
            out.append({"type": "deltafier"})
            said.append("deltafier -> deltafier")
        elif kind == "normalize":
            # 0.4 scaled each state to [0, 1] by its own min and max; 0.6's nearest is the space's bounds
            out.append({"type": "linear_normalization"})
            _warn(
                f"{field} step {step} became linear_normalization: 0.4 scaled each state by its own min/max to "
                "[0, 1], 0.6 scales by the observation space's bounds to [-2, 2] (a different input scale)",
                field,
            )
        else:
            # e.g. running_standardize, divide: 0.6 has no such layer
            _warn(f"{field} step {step} has no Tensorforce 0.6 preprocessing layer and was dropped", field)
    if said:
        _warn(f"{field} became state_preprocessing {out} ({'; '.join(said)})", field)
    return out


def _image_layer(layers: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``image`` layer that resize and grayscale share (one 0.6 layer does both), appended if missing."""
    for layer in layers:
        if layer.get("type") == "image":
            return layer
    layers.append({"type": "image"})
    return layers[-1]


def _convert_baseline(out: dict[str, Any], type_: str) -> None:
    baseline = out.get("baseline")
    mode = out.pop("baseline_mode", None)
    if baseline is None:
        if mode is not None:
            _warn(f"agent.baseline_mode {mode!r} was dropped: the agent has no baseline", "agent.baseline_mode")
        return
    if type_ not in _PG_TYPES:
        return
    if mode is None and isinstance(baseline, dict) and baseline.get("type") in ("mlp", "cnn", "custom", "network"):
        # 0.4 used a baseline only with a baseline_mode; without one the agent had none
        out.pop("baseline")
        out.pop("baseline_optimizer", None)
        _warn("agent.baseline was dropped: 0.4 used it only with a baseline_mode, which is not set", "agent.baseline")
        return
    if mode not in (None, "states"):
        raise SpecError(
            [
                SpecProblem(
                    "agent.baseline_mode", "only 'states' maps to Tensorforce 0.6 (a separate baseline network)", mode
                )
            ]
        )
    if mode == "states":
        _warn(
            "agent.baseline_mode 'states' was dropped: 0.6's baseline is a state-value network", "agent.baseline_mode"
        )
    if isinstance(baseline, dict) and baseline.get("type") == "mlp":
        sizes = baseline.get("sizes")
        if not (isinstance(sizes, list) and all(isinstance(size, int) for size in sizes)):
            raise SpecError(
                [SpecProblem("agent.baseline.sizes", "an mlp baseline needs a list of integer sizes", sizes)]
            )
        # 0.4's MLP baseline was a stack of 0.4 dense layers (ReLU by default)
        out["baseline"] = [{"type": "dense", "size": size, "activation": "relu"} for size in sizes]
        _warn(f"agent.baseline {baseline} became the layer list {out['baseline']}", "agent.baseline")
    elif isinstance(baseline, dict) and baseline.get("type") in ("custom", "network") and "network" in baseline:
        out["baseline"] = convert_legacy_network(baseline["network"], "agent.baseline", _warn_at)
        _warn(f"agent.baseline {{type: {baseline['type']}, network}} became the 0.6 layer list", "agent.baseline")
    elif isinstance(baseline, dict) and baseline.get("type") in ("cnn", "aggregated"):
        raise SpecError(
            [
                SpecProblem(
                    "agent.baseline.type",
                    f"0.4's {baseline['type']} baseline has no certain 0.6 spelling: write it as a layer list",
                    baseline["type"],
                )
            ]
        )
    elif isinstance(baseline, list):
        out["baseline"] = convert_legacy_network(baseline, "agent.baseline", _warn_at)


def _resolved_update_frequency(out: dict[str, Any]) -> int | None:
    """The 0.6 update frequency in timesteps (0.6's DQN default is a quarter of batch_size)."""
    batch = out.get("batch_size")
    frequency = out.get("update_frequency", 0.25)
    if isinstance(frequency, int) and not isinstance(frequency, bool):
        return frequency
    if isinstance(frequency, float) and isinstance(batch, int):
        return max(1, int(frequency * batch))
    return None


def _convert_target_sync(out: dict[str, Any], type_: str) -> None:
    """0.4 synced DQN's target network every N *timesteps* (default 10000); 0.6 every N *updates* (default 1)."""
    if type_ not in _DQN_TYPES:
        return
    given = "target_sync_frequency" in out or "target_update_frequency" in out
    timesteps = out.pop("target_sync_frequency", out.pop("target_update_frequency", 10000))
    out.pop("target_update_frequency", None)
    if isinstance(timesteps, float) and timesteps.is_integer() and timesteps >= 1:
        timesteps = int(timesteps)  # JSON's 1e4
    frequency = _resolved_update_frequency(out)
    if not isinstance(timesteps, int) or frequency is None:
        out["target_sync_frequency"] = timesteps
        _warn(
            f"agent.target_sync_frequency {timesteps!r} kept as is, but 0.6 counts it in updates, not timesteps "
            "(set update_frequency as an integer to have it converted)",
            "agent.target_sync_frequency",
        )
        return
    out["target_sync_frequency"] = max(1, math.ceil(timesteps / frequency))
    origin = "" if given else "0.4's default "
    _warn(
        f"agent.target_sync_frequency: {origin}{timesteps} timesteps became {out['target_sync_frequency']} updates "
        f"(0.6 counts updates, one every {frequency} timesteps; 0.6's default is every update)",
        "agent.target_sync_frequency",
    )


def convert_legacy_agent(agent: dict[str, Any]) -> dict[str, Any]:
    """A Tensorforce 0.3/0.4 agent in 0.6 terms; a 0.6 agent (see :func:`is_legacy_agent`) unchanged.

    Keys with a certain mapping are mapped, each reported; keys the 0.6 agent does not take are dropped
    with a warning naming them; what cannot be kept without changing meaning is refused (SpecError).
    """
    if not is_legacy_agent(agent):
        return agent
    out = dict(agent)
    type_ = _convert_type(out)
    _convert_batch(out, type_)
    if out.pop("repeat_update", None) is not None:
        _warn("agent.repeat_update was dropped: no Tensorforce 0.6 equivalent", "agent.repeat_update")
    _convert_memory(out, type_)
    _convert_optimizers(out)
    if "actions_exploration" in out:
        _convert_exploration(out.pop("actions_exploration"), out)
    if "states_preprocessing" in out:
        layers = _convert_states_preprocessing(out.pop("states_preprocessing"))
        if layers:
            out["state_preprocessing"] = layers
    if out.get("gae_lambda") is not None:
        raise SpecError(
            [
                SpecProblem(
                    "agent.gae_lambda", "Tensorforce 0.6 has no GAE: remove it (or set it to null)", out["gae_lambda"]
                )
            ]
        )
    out.pop("gae_lambda", None)
    for old, new in _RENAMED_IN_06.get(type_, {}).items():
        if old in out and new not in out:
            out[new] = out.pop(old)
            _warn(f"agent.{old} became agent.{new} (renamed in Tensorforce 0.6)", f"agent.{old}")
    _convert_baseline(out, type_)
    if _is_04_agent(agent):
        _convert_target_sync(out, type_)
    for key in ("network", "network_spec"):
        if key in out:
            network = convert_legacy_network(out.pop(key), "agent.network", _warn_at)
            out["network"] = network
            if key == "network_spec":
                _warn("agent.network_spec became agent.network", "agent.network_spec")
    _drop_unknown_arguments(out, type_)
    return out


def _convert_type(out: dict[str, Any]) -> str:
    """The agent's 0.6 type, set in ``out`` (0.4's ``*_agent`` names and ``double_q_model``); refuses 0.4 agents
    0.6 has no equivalent of."""
    type_ = out.get("type")
    if isinstance(type_, str) and type_ in _AGENTS_REFUSED:
        raise SpecError([SpecProblem("agent.type", _AGENTS_REFUSED[type_], type_)])
    if isinstance(type_, str) and type_ in _AGENT_TYPES:
        out["type"] = _AGENT_TYPES[type_]
        _warn(f"agent.type {type_!r} became {out['type']!r}", "agent.type")
    elif isinstance(type_, str) and type_.endswith("_agent"):
        raise SpecError(
            [
                SpecProblem(
                    "agent.type",
                    "no Tensorforce 0.6 equivalent; choose one of ppo, dqn, double_dqn, dueling_dqn, a2c, ac, dpg, "
                    "trpo, vpg, tensorforce",
                    type_,
                )
            ]
        )
    type_ = str(out.get("type"))
    if out.pop("double_q_model", False) and type_ == "dqn":
        out["type"] = type_ = "double_dqn"
        _warn("agent.double_q_model: true became type double_dqn", "agent.double_q_model")
    return type_


def _convert_batch(out: dict[str, Any], type_: str) -> None:
    """0.4's ``update_mode`` (or 0.3's top-level ``batch_size``) as 0.6's batch_size/update_frequency, when they
    count in the unit 0.6's ``type_`` does."""
    unit_06 = _BATCH_UNITS_06.get(type_)
    if isinstance(out.get("update_mode"), dict):
        mode = out.pop("update_mode")
        unit = mode.get("unit")
        if unit in ("timesteps", "episodes") and unit_06 is not None and unit != unit_06:
            # e.g. a PPO batch of 1000 timesteps is not a batch of 1000 episodes: no certain mapping
            _warn(
                f"agent.update_mode {mode} was dropped: Tensorforce 0.6's {type_} counts batch_size "
                f"in {unit_06}, not {unit}; set agent.batch_size and agent.update_frequency in {unit_06}",
                "agent.update_mode",
            )
        else:
            if "batch_size" in mode:
                out["batch_size"] = mode["batch_size"]
            if "frequency" in mode:
                out["update_frequency"] = mode["frequency"]
            _warn(
                f"agent.update_mode {mode} became batch_size/update_frequency (counted in {unit or unit_06})",
                "agent.update_mode",
            )
    elif "batch_size" in out and unit_06 == "episodes":
        # 0.3 had a top-level batch_size counted in timesteps; 0.6's policy-gradient agents count episodes
        value = out.pop("batch_size")
        out.pop("update_frequency", None)
        _warn(
            f"agent.batch_size {value} was dropped: Tensorforce 0.3 counted it in timesteps, 0.6's {type_} counts "
            "episodes; set agent.batch_size in episodes (e.g. --set agent.batch_size=N)",
            "agent.batch_size",
        )
    elif "batch_size" in out:
        _warn(
            f"agent.batch_size {out['batch_size']} kept: counted in timesteps in 0.3 and 0.6 alike", "agent.batch_size"
        )


def _convert_memory(out: dict[str, Any], type_: str) -> None:
    """0.4's ``memory``/``memory_capacity``: a replay capacity for the agents that take one, else dropped."""
    capacity = out.pop("memory_capacity", None)
    memory = out.get("memory")
    if capacity is not None and (memory is None or isinstance(memory, str)):
        out["memory"] = {"type": memory or "replay", "capacity": capacity}
    if not isinstance(out.get("memory"), dict | str):
        return
    memory = out.pop("memory")
    mem_type = memory.get("type") if isinstance(memory, dict) else memory
    if type_ in (*_DQN_TYPES, "dpg") and mem_type == "replay" and isinstance(memory, dict) and "capacity" in memory:
        out["memory"] = _count(memory["capacity"], "agent.memory.capacity")
        _warn(f"agent.memory {memory} became memory: {out['memory']} (replay capacity)", "agent.memory")
    elif type_ in _PG_TYPES and mem_type in ("latest", None):
        _warn(f"agent.memory {memory} was dropped: 0.6's {type_} keeps the batch it needs itself", "agent.memory")
    else:
        _warn(
            f"agent.memory {memory} has no certain Tensorforce 0.6 equivalent and was dropped (0.6 replay "
            "memories sample uniformly: no prioritized replay)",
            "agent.memory",
        )


def _convert_optimizers(out: dict[str, Any]) -> None:
    """0.4's optimizer mappings: an Adam one's learning rate is kept (0.6 agents use Adam), others dropped."""
    for key in ("optimizer", "step_optimizer"):
        if isinstance(out.get(key), dict):
            opt = out.pop(key)
            if opt.get("type") == "adam" and "learning_rate" in opt:
                out["learning_rate"] = opt["learning_rate"]
                _warn(
                    f"agent.{key} {opt} became learning_rate: {opt['learning_rate']} (0.6 agents use Adam)",
                    f"agent.{key}",
                )
            else:
                _warn(f"agent.{key} {opt} has no certain Tensorforce 0.6 equivalent and was dropped", f"agent.{key}")


def _drop_unknown_arguments(out: dict[str, Any], type_: str) -> None:
    """Drop (with a warning naming each) what the 0.6 agent's signature does not take."""
    if type_ not in AGENT_ARGUMENTS:
        return
    required, optional = AGENT_ARGUMENTS[type_]
    accepted = set(required) | set(optional)
    for key in list(out):
        if key == "type" or (key in accepted and key not in _RUNNER_MANAGED):
            continue
        value = out.pop(key)
        if key in _RUNNER_MANAGED:
            reason = "rlcloud manages saving, summaries and placement (saver_frequency/summary_frequency, resources)"
        elif key in RUNNER_ARGUMENTS:
            reason = "the runner sets it from the environment"
        else:
            reason = f"Tensorforce 0.6's {type_} agent has no such argument"
        _warn(f"agent.{key} was dropped: {reason}; it was {value!r}", f"agent.{key}")
