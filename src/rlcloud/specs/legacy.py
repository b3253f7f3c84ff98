"""Import of tensorforce-client (2018) spec files, which rlcloud loads unchanged.

Each mapped legacy key is reported once as a :class:`LegacySpecWarning` saying what it became. Agent keys
that Tensorforce 0.6 renamed are mapped where the mapping is certain; others are dropped with a warning that
names them, so a run never silently ignores intent.
"""

from __future__ import annotations

import math
import re
import warnings
from typing import Any

from rlcloud.errors import SpecError, SpecProblem

__all__ = ["LegacySpecWarning", "convert_legacy_cluster", "convert_legacy_experiment", "is_legacy_experiment"]


class LegacySpecWarning(UserWarning):
    """A tensorforce-client setting was mapped to its rlcloud / Tensorforce 0.6 equivalent (or dropped)."""


# Atari games of the Arcade Learning Environment; old gym ids such as "SpaceInvaders-v0" or
# "BreakoutNoFrameskip-v4" become gymnasium's "ALE/<Game>-v5" (ale-py ships the ROMs).
ATARI_GAMES = frozenset(
    [
        "Adventure",
        "AirRaid",
        "Alien",
        "Amidar",
        "Assault",
        "Asterix",
        "Asteroids",
        "Atlantis",
        "BankHeist",
        "BattleZone",
        "BeamRider",
        "Berzerk",
        "Bowling",
        "Boxing",
        "Breakout",
        "Carnival",
        "Centipede",
        "ChopperCommand",
        "CrazyClimber",
        "Defender",
        "DemonAttack",
        "DoubleDunk",
        "ElevatorAction",
        "Enduro",
        "FishingDerby",
        "Freeway",
        "Frostbite",
        "Gopher",
        "Gravitar",
        "Hero",
        "IceHockey",
        "Jamesbond",
        "JourneyEscape",
        "Kangaroo",
        "Krull",
        "KungFuMaster",
        "MontezumaRevenge",
        "MsPacman",
        "NameThisGame",
        "Phoenix",
        "Pitfall",
        "Pong",
        "Pooyan",
        "PrivateEye",
        "Qbert",
        "Riverraid",
        "RoadRunner",
        "Robotank",
        "Seaquest",
        "Skiing",
        "Solaris",
        "SpaceInvaders",
        "StarGunner",
        "Tennis",
        "TimePilot",
        "Tutankham",
        "UpNDown",
        "Venture",
        "VideoPinball",
        "WizardOfWor",
        "YarsRevenge",
        "Zaxxon",
    ]
)
_OLD_ATARI_RE = re.compile(r"^(?P<game>[A-Za-z]+?)(?P<variant>NoFrameskip|Deterministic)?-v[0-4]$")

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
_LEGACY_EXPERIMENT_KEYS_DROPPED = (
    "type",
    "file",
    "path",
    "k8s_config",
    "name_hyphenated",
    "running_json_file",
    "status",
    "has_dedicated_cluster",
)


def _warn(message: str) -> None:
    warnings.warn(message, LegacySpecWarning, stacklevel=4)


def is_legacy_experiment(data: dict[str, Any]) -> bool:
    """True for a tensorforce-client experiment file (``"type": "experiment"`` or its ``timesteps`` key)."""
    return data.get("type") == "experiment" or ("timesteps" in data and "total_timesteps" not in data)


def _hyphenate(name: Any, what: str) -> Any:
    if isinstance(name, str) and "_" in name:
        new = name.replace("_", "-").lower()
        _warn(f"{what} {name!r} became {new!r} (names are DNS-1123 labels now)")
        return new
    return name


def convert_legacy_experiment(data: dict[str, Any]) -> dict[str, Any]:
    """Map a tensorforce-client experiment dict to rlcloud's ExperimentSpec keys."""
    out = dict(data)
    for key in _LEGACY_EXPERIMENT_KEYS_DROPPED:
        if key in out:
            value = out.pop(key)
            if key != "type":
                _warn(f"legacy key {key!r} ({value!r}) is tensorforce-client bookkeeping and was dropped")
    if "timesteps" in out:
        if "total_timesteps" not in out:
            out["total_timesteps"] = out["timesteps"]
            _warn("legacy key 'timesteps' became total_timesteps")
        del out["timesteps"]
    if "name" in out:
        out["name"] = _hyphenate(out["name"], "experiment name")
    if isinstance(out.get("cluster"), dict):
        out["cluster"] = convert_legacy_cluster(out["cluster"])
    return out


def convert_legacy_cluster(data: dict[str, Any]) -> dict[str, Any]:
    """Map a tensorforce-client cluster dict (underscored names, ``gpu_type: null``) to ClusterSpec keys."""
    out = dict(data)
    out.pop("type", None)
    if "name" in out:
        out["name"] = _hyphenate(out["name"], "cluster name")
    if "gpu_type" in out and out["gpu_type"] is None:
        out.pop("gpu_type")
    elif out.get("gpu_type") and out.get("gpus_per_node") == 0:
        # tensorforce-client ignored gpu_type on clusters without GPUs
        _warn(f"cluster gpu_type {out.pop('gpu_type')!r} was dropped: gpus_per_node is 0 (a CPU-only cluster)")
    return out


def convert_legacy_environment(env: dict[str, Any]) -> dict[str, Any]:
    """Map tensorforce.contrib.openai_gym.OpenAIGym specs to gymnasium ones (Atari ids to ALE/*-v5)."""
    type_ = env.get("type")
    if not (isinstance(type_, str) and (type_.endswith("OpenAIGym") or type_ in ("gym", "openai_gym"))):
        return env
    out = {k: v for k, v in env.items() if k not in ("type", "gym_id", "monitor", "monitor_safe", "monitor_video")}
    level = env.get("gym_id", env.get("level"))
    new_level = legacy_gym_id(level) if isinstance(level, str) else level
    kept = legacy_atari_settings(level) if isinstance(level, str) else {}
    out = {"type": "gym", "level": new_level, **kept, **{k: v for k, v in out.items() if k != "level"}}
    if type_ != "gym" or new_level != level or "gym_id" in env:
        extra = "".join(f", {k}: {v}" for k, v in kept.items() if k not in env)
        _warn(f"environment {{type: {type_}, gym_id: {level}}} became {{type: gym, level: {new_level}{extra}}}")
    for key in ("monitor", "monitor_safe", "monitor_video"):
        if key in env:
            _warn(f"environment.{key} (gym's monitor) has no equivalent in gymnasium and was dropped")
    return out


def legacy_gym_id(gym_id: str) -> str:
    """The gymnasium id for an old gym id: Atari games go to ``ALE/<Game>-v5``; others stay."""
    match = _OLD_ATARI_RE.match(gym_id)
    if match and match.group("game") in ATARI_GAMES:
        return f"ALE/{match.group('game')}-v5"
    return gym_id


def legacy_atari_settings(gym_id: str) -> dict[str, Any]:
    """ALE v5 keyword arguments that keep an old Atari id's behaviour where v5's defaults differ.

    v5 skips 4 frames and repeats the previous action with probability 0.25 (sticky actions). The old
    "NoFrameskip" ids skipped none, and the "-v4" ids had no sticky actions (ALE's "Version History and
    Naming Schemes"). Plain "-v0"/"-v4" skipped a random 2-4 frames; v5's fixed 4 is the closest.
    """
    match = _OLD_ATARI_RE.match(gym_id)
    if not match or match.group("game") not in ATARI_GAMES:
        return {}
    settings: dict[str, Any] = {}
    if match.group("variant") == "NoFrameskip":
        settings["frameskip"] = 1
    if gym_id.endswith("-v4"):
        settings["repeat_action_probability"] = 0.0
    return settings


def _count(value: Any, field: str) -> int:
    """A whole count from a legacy number such as 1e6 (JSON floats); anything else is a SpecError."""
    number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if number and value == int(value) and value >= 1:
        return int(value)
    raise SpecError([SpecProblem(field, "must be a whole number >= 1", value)])


def convert_legacy_agent(agent: dict[str, Any]) -> dict[str, Any]:
    """Map Tensorforce 0.3/0.4 agent keys to 0.6 where the mapping is certain; drop and report the rest."""
    out = dict(agent)
    type_ = out.get("type")
    if isinstance(type_, str) and type_ in _AGENT_TYPES:
        out["type"] = _AGENT_TYPES[type_]
        _warn(f"agent.type {type_!r} became {out['type']!r}")
    elif isinstance(type_, str) and type_.endswith("_agent"):
        _warn(
            f"agent.type {type_!r} has no Tensorforce 0.6 equivalent; choose one of ppo, dqn, double_dqn, "
            "dueling_dqn, a2c, ac, dpg, trpo, vpg, tensorforce"
        )
    if isinstance(out.get("update_mode"), dict):
        mode = out.pop("update_mode")
        unit = mode.get("unit")
        unit_06 = _BATCH_UNITS_06.get(str(out.get("type")))
        if unit in ("timesteps", "episodes") and unit_06 is not None and unit != unit_06:
            # e.g. a PPO batch of 1000 timesteps is not a batch of 1000 episodes: no certain mapping
            _warn(
                f"agent.update_mode {mode} was dropped: Tensorforce 0.6's {out.get('type')} counts batch_size "
                f"in {unit_06}, not {unit}; set agent.batch_size and agent.update_frequency in {unit_06}"
            )
        else:
            if "batch_size" in mode:
                out.setdefault("batch_size", mode["batch_size"])
            if "frequency" in mode:
                out.setdefault("update_frequency", mode["frequency"])
            _warn(f"agent.update_mode {mode} became batch_size/update_frequency (counted in {unit or unit_06})")
    if isinstance(out.get("memory"), dict):
        memory = out.pop("memory")
        if memory.get("type") == "replay" and "capacity" in memory:
            out["memory"] = _count(memory["capacity"], "agent.memory.capacity")
            _warn(f"agent.memory {memory} became memory: {out['memory']} (replay capacity)")
        else:
            _warn(f"agent.memory {memory} has no certain Tensorforce 0.6 equivalent and was dropped")
    for key in ("optimizer", "step_optimizer"):
        if isinstance(out.get(key), dict):
            opt = out.pop(key)
            if opt.get("type") == "adam" and "learning_rate" in opt:
                out.setdefault("learning_rate", opt["learning_rate"])
                _warn(f"agent.{key} {opt} became learning_rate: {opt['learning_rate']} (0.6 agents use Adam)")
            else:
                _warn(f"agent.{key} {opt} has no certain Tensorforce 0.6 equivalent and was dropped")
    exploration = out.get("actions_exploration")
    if isinstance(exploration, dict):
        out.pop("actions_exploration")
        if exploration.get("type") in ("epsilon_decay", "epsilon_anneal"):
            out["exploration"] = {
                "type": "linear",
                "unit": "timesteps",
                "num_steps": _count(exploration.get("timesteps", 10000), "agent.actions_exploration.timesteps"),
                "initial_value": exploration.get("initial_epsilon", 1.0),
                "final_value": exploration.get("final_epsilon", 0.1),
            }
            _warn(f"agent.actions_exploration {exploration} became exploration {out['exploration']}")
        else:
            _warn(f"agent.actions_exploration {exploration} has no certain 0.6 equivalent and was dropped")
    _rename_06_keys(out)
    for key in (
        "states_preprocessing",
        "reward_preprocessing",
        "saver_spec",
        "summary_spec",
        "saver",
        "summarizer",
        "execution",
        "distributed_spec",
        "device",
        "optimization_steps",
        "baseline_mode",
        "baseline",
        "baseline_optimizer",
        "gae_lambda",
        "double_q_model",
        "huber_loss_delta",
        "target_sync_frequency_",
    ):
        if key in out and key not in _KEYS_KEPT_IN_06.get(str(out.get("type")), ()):
            value = out.pop(key)
            reason = (
                "rlcloud manages saving and summaries (saver_frequency/summary_frequency)"
                if key
                in (
                    "saver_spec",
                    "summary_spec",
                    "saver",
                    "summarizer",
                    "execution",
                    "distributed_spec",
                    "device",
                )
                else "it has no certain Tensorforce 0.6 equivalent (see tensorforce.readthedocs.io, 0.6 agents)"
            )
            _warn(f"agent.{key} was dropped: {reason}; it was {value!r}")
    return out


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

# Keys whose 0.6 meaning is unchanged for a given agent type, kept as they are. (gae_lambda is no 0.6 argument
# of any agent: 0.6 agents refuse it, so it is dropped with a warning.)
_KEYS_KEPT_IN_06: dict[str, tuple[str, ...]] = {
    "ppo": ("baseline", "baseline_optimizer"),
    "vpg": ("baseline", "baseline_optimizer"),
    "trpo": ("baseline", "baseline_optimizer"),
}

# Renames Tensorforce 0.6 itself names in its TensorforceError.deprecated messages (tensorforce/agents/*.py).
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
        **_TERMINAL,
    },
    "vpg": {"baseline_network": "baseline", **_TERMINAL},
    "ac": {"critic_network": "critic", **_TERMINAL},
    "dpg": {"critic_network": "critic", **_TERMINAL},
    "dqn": dict(_TERMINAL),
    # the same argument, renamed the same way, in the agents whose deprecation checks 0.6 left out
    "double_dqn": dict(_TERMINAL),
    "dueling_dqn": dict(_TERMINAL),
    "a2c": dict(_TERMINAL),
}


def _rename_06_keys(out: dict[str, Any]) -> None:
    """Apply the renames 0.6 reports as deprecated, and the 0.4 MLP baseline, in place."""
    type_ = str(out.get("type"))
    for old, new in _RENAMED_IN_06.get(type_, {}).items():
        if old in out and new not in out:
            out[new] = out.pop(old)
            _warn(f"agent.{old} became agent.{new} (renamed in Tensorforce 0.6)")
    baseline = out.get("baseline")
    if type_ in _KEYS_KEPT_IN_06 and isinstance(baseline, dict) and baseline.get("type") == "mlp":
        sizes = baseline.get("sizes")
        if isinstance(sizes, list) and all(isinstance(size, int) for size in sizes):
            # 0.4's MLP baseline was a stack of dense layers of these sizes; 0.6 takes the layer list itself
            out["baseline"] = [{"type": "dense", "size": size} for size in sizes]
            _warn(f"agent.baseline {baseline} became the layer list {out['baseline']}")
        else:
            out.pop("baseline")
            _warn(f"agent.baseline {baseline} was dropped: an mlp baseline needs a list of integer sizes")
