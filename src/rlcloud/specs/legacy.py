"""Import of tensorforce-client (tfc, 2018: Tensorforce 0.4-era, some 0.3) spec files, keeping their meaning.

A tfc file is converted to what it meant, in rlcloud and Tensorforce 0.6 terms; what has no certain
equivalent is refused (a SpecError naming the key) or dropped with a warning naming it, never changed
quietly. Every mapping is reported as a :class:`LegacySpecWarning` that names the spec file (and the line
of the key where it can be found) and the key, through :func:`collecting_notes` / :func:`emit_notes`.

Files that are already Tensorforce 0.6 / rlcloud format pass through unchanged: an agent is legacy only
when it uses a spelling 0.6 does not have (a ``*_agent`` type or a key of :data:`LEGACY_AGENT_KEYS`), a
network only inside a tfc experiment or when it uses a 0.4-only layer spelling.

The 0.4/0.3 semantics followed here are docs/migrating.md's table; the numbers that matter (0.4's dense
default, epsilon_decay's half-life, tfc's defaults for missing keys) are in /work/shared/FACTS.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.specs.legacy_agent import (
    LEGACY_AGENT_KEYS,
    _is_04_agent,
    convert_legacy_agent,
    epsilon_decay_schedule,
    is_legacy_agent,
)
from rlcloud.specs.legacy_network import LEGACY_LAYER_HINTS, convert_legacy_network, looks_like_legacy_network
from rlcloud.specs.legacy_notes import (
    LegacyNote,
    LegacySpecWarning,
    _warn,
    _warn_at,
    collecting_notes,
    emit_notes,
)

__all__ = [
    "LEGACY_AGENT_KEYS",
    "LEGACY_LAYER_HINTS",
    "TFC_EXPERIMENT_DEFAULTS",
    "LegacyNote",
    "LegacySpecWarning",
    "collecting_notes",
    "convert_legacy_agent",
    "convert_legacy_cluster",
    "convert_legacy_environment",
    "convert_legacy_experiment",
    "convert_legacy_network",
    "emit_notes",
    "epsilon_decay_schedule",
    "is_legacy_agent",
    "is_legacy_experiment",
    "is_old_atari_id",
    "looks_like_legacy_network",
    "reconcile_network",
]


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
_OLD_ATARI_RE = re.compile(r"^(?P<game>[A-Za-z]+?)(?P<variant>NoFrameskip|Deterministic)?-v(?P<version>[04])$")

# ------------------------------------------------------------------------------------------ experiments

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

#: tensorforce-client's values for keys an experiment file leaves out (its Experiment class's defaults).
TFC_EXPERIMENT_DEFAULTS: dict[str, Any] = {
    "run_mode": "distributed",
    "num_workers": 3,
    "num_parameter_servers": 1,
    "episodes": 10000,
    "total_timesteps": 1_000_000,
    "max_timesteps_per_episode": 1000,
}


def is_legacy_experiment(data: Mapping[str, Any]) -> bool:
    """True for a tensorforce-client experiment, recognised by any one of its markers.

    The markers: ``"type": "experiment"``, its ``timesteps`` key, one of tfc's bookkeeping keys
    (``k8s_config``, ``status``...), an environment in tfc's terms (``gym_id``, a ``tensorforce.contrib``
    or ``OpenAIGym`` type), a Tensorforce 0.3/0.4 agent (``dqn_agent``, a key only 0.4 had) or a cluster
    with tfc's ``type`` key. ``data`` holds the referenced files' contents once they are read, so a tfc
    file with just ``name``, ``environment``, ``agent`` and ``cluster`` is recognised by what it names.
    """
    if data.get("type") == "experiment" or ("timesteps" in data and "total_timesteps" not in data):
        return True
    if any(key in data for key in _LEGACY_EXPERIMENT_KEYS_DROPPED if key != "type"):
        return True
    environment, agent, cluster = data.get("environment"), data.get("agent"), data.get("cluster")
    if isinstance(environment, Mapping) and _is_tfc_environment(environment):
        return True
    if isinstance(agent, Mapping) and "agent" not in agent and _is_04_agent(agent):
        return True
    return isinstance(cluster, Mapping) and "type" in cluster


def _is_tfc_environment(env: Mapping[str, Any]) -> bool:
    type_ = env.get("type")
    tfc_type = isinstance(type_, str) and (type_.startswith("tensorforce.contrib.") or type_.endswith("OpenAIGym"))
    return tfc_type or "gym_id" in env


def _hyphenate(name: Any, what: str, key: str) -> Any:
    if isinstance(name, str) and "_" in name:
        new = name.replace("_", "-").lower()
        _warn(f"{what} {name!r} became {new!r} (names are DNS-1123 labels now)", key)
        return new
    return name


def convert_legacy_experiment(data: dict[str, Any]) -> dict[str, Any]:
    """Map a tensorforce-client experiment dict to rlcloud's ExperimentSpec keys, with tfc's defaults.

    Keys tfc filled in when a file left them out get tfc's values (:data:`TFC_EXPERIMENT_DEFAULTS`), each
    reported: rlcloud's own defaults differ (single mode, no stop condition).
    """
    out = dict(data)
    for key in _LEGACY_EXPERIMENT_KEYS_DROPPED:
        if key in out:
            value = out.pop(key)
            if key != "type":
                _warn(f"legacy key {key!r} ({value!r}) is tensorforce-client bookkeeping and was dropped", key)
    if "timesteps" in out:
        if "total_timesteps" not in out:
            out["total_timesteps"] = out["timesteps"]
            _warn("legacy key 'timesteps' became total_timesteps", "timesteps")
        del out["timesteps"]
    for key, value in TFC_EXPERIMENT_DEFAULTS.items():
        if key == "num_workers" and "run_mode" in out and out["run_mode"] != "distributed":
            continue  # tfc's 3 workers default came with its distributed mode; rlcloud's per-mode default applies
        if key == "num_parameter_servers" and out.get("run_mode", "distributed") != "distributed":
            continue
        if key not in out:
            out[key] = value
            _warn(
                f"{key} was not set: tensorforce-client's default {value} applies (rlcloud's own default differs)", key
            )
    if "name" in out:
        out["name"] = _hyphenate(out["name"], "experiment name", "name")
    return out  # the environment, agent, network and cluster are converted by their own converters


def _is_tfc_cluster(data: Mapping[str, Any]) -> bool:
    name = data.get("name")
    # tfc names had underscores (rlcloud's are DNS labels); rlcloud cluster files have no `type`
    return "type" in data or (isinstance(name, str) and "_" in name)


def convert_legacy_cluster(data: dict[str, Any], *, tfc: bool = False) -> dict[str, Any]:
    """Map a tensorforce-client cluster dict (underscored names, ``gpu_type: null``) to ClusterSpec keys.

    ``tfc`` says the cluster came with a tfc experiment; a cluster file is recognised by its own markers.
    """
    tfc = tfc or _is_tfc_cluster(data)
    out = dict(data)
    out.pop("type", None)
    if "name" in out:
        out["name"] = _hyphenate(out["name"], "cluster name", "cluster.name")
    if "gpu_type" in out and out["gpu_type"] is None:
        out.pop("gpu_type")
    elif out.get("gpu_type") and out.get("gpus_per_node") == 0:
        # tensorforce-client ignored gpu_type on clusters without GPUs
        _warn(
            f"cluster gpu_type {out.pop('gpu_type')!r} was dropped: gpus_per_node is 0 (a CPU-only cluster)",
            "cluster.gpu_type",
        )
    if tfc and "location" not in out:
        _warn(
            "cluster.location was not set: tensorforce-client used gcloud's configured zone (`gcloud config get "
            "compute/zone`); rlcloud uses its default us-central1-a unless you set location",
            "cluster.location",
        )
    return out


def reconcile_network(raw: dict[str, Any], *, tfc: bool) -> None:
    """Say which network is used when the experiment and its agent both name one, in place.

    tensorforce-client passed the experiment's network to the agent as a keyword argument, which replaced
    the agent file's own: for a tfc experiment the experiment's network wins, as it did. In rlcloud specs
    the agent's own ``network`` wins (the runner only fills it in when the agent has none).
    """
    agent = raw.get("agent")
    network = raw.get("network", "auto")
    if not isinstance(agent, dict) or "network" not in agent or network in (None, "auto"):
        return
    if tfc:
        raw["agent"] = {**agent, "network": network}
        _warn(
            "agent.network is replaced by the experiment's network, as tensorforce-client did (it passed the "
            "experiment's network to the agent)",
            "agent.network",
        )
    else:
        _warn("network is ignored: the agent file has its own agent.network, which wins", "network")


def convert_experiment_network(network: Any, *, tfc: bool) -> Any:
    """A tfc experiment's network in 0.6 terms; any other spec's network unchanged.

    Outside a tfc experiment a network is Tensorforce 0.6 (a dense layer without activation is tanh
    there); a 0.4-only spelling in it is reported by validation with its 0.6 name (see LEGACY_LAYER_HINTS).
    """
    if tfc:
        return convert_legacy_network(network, "network", _warn_at)
    return network


# ----------------------------------------------------------------------------------------- environments

# tensorforce.contrib environments other than OpenAI Gym: gone in Tensorforce 0.6 (or needing software that
# no longer installs); a file naming one is refused, not passed on as a class path to import.
_CONTRIB_ENVIRONMENTS = {
    "unreal_engine": "the Unreal Engine 4 environment (tensorforce.contrib.unreal_engine.UE4Environment) was "
    "removed from Tensorforce and has no replacement; wrap your game as a gymnasium.Env and give "
    "{type: 'pkg.module:Class'}",
    "ale": "tensorforce.contrib.ale needs the old ALE interface; use {type: gym, level: ALE/<Game>-v5}",
    "deepmind_lab": "DeepMind Lab is not available for Tensorforce 0.6 here; wrap it as a gymnasium.Env",
    "maze_explorer": "maze_explorer is gone from Tensorforce 0.6; wrap it as a gymnasium.Env",
    "openai_universe": "OpenAI Universe is discontinued; no replacement",
    "state_settable_env": "no Tensorforce 0.6 equivalent",
}


def is_old_atari_id(gym_id: str) -> bool:
    """True for an old gym Atari id (``SpaceInvaders-v0``, ``BreakoutNoFrameskip-v4``, ...)."""
    match = _OLD_ATARI_RE.match(gym_id)
    return bool(match and match.group("game") in ATARI_GAMES)


def convert_legacy_environment(env: dict[str, Any]) -> dict[str, Any]:
    """Map tensorforce.contrib.openai_gym.OpenAIGym specs to gymnasium ones, keeping old Atari semantics."""
    type_ = env.get("type")
    if isinstance(type_, str) and type_.startswith("tensorforce.contrib."):
        module = type_.split(".")[2] if type_.count(".") >= 2 else ""
        if module != "openai_gym":
            reason = _CONTRIB_ENVIRONMENTS.get(module, "tensorforce.contrib is gone from Tensorforce 0.6")
            raise SpecError([SpecProblem("environment.type", reason, type_)])
    if not (isinstance(type_, str) and (type_.endswith("OpenAIGym") or type_ in ("gym", "openai_gym"))):
        return env
    dropped = ("type", "gym_id", "monitor", "monitor_safe", "monitor_video", "remote", "image")
    out = {k: v for k, v in env.items() if k not in dropped}
    level = env.get("gym_id", env.get("level"))
    new_level = legacy_gym_id(level) if isinstance(level, str) else level
    kept = legacy_atari_settings(level) if isinstance(level, str) else {}
    out = {"type": "gym", "level": new_level, **kept, **{k: v for k, v in out.items() if k != "level"}}
    if type_ != "gym" or new_level != level or "gym_id" in env:
        extra = "".join(f", {k}: {v}" for k, v in kept.items() if k not in env)
        why = (
            " (ale-py still registers the old id, with its frame skipping and sticky actions)"
            if (isinstance(level, str) and new_level == level and is_old_atari_id(level))
            else ""
        )
        _warn(
            f"environment {{type: {type_}, gym_id: {level}}} became {{type: gym, level: {new_level}{extra}}}{why}",
            "environment.gym_id",
        )
    for key in ("monitor", "monitor_safe", "monitor_video"):
        if key in env:
            _warn(
                f"environment.{key} (gym's monitor) has no equivalent in gymnasium and was dropped",
                f"environment.{key}",
            )
    for key in ("remote", "image"):
        if key in env:
            _warn(
                f"environment.{key} ({env[key]!r}) was dropped: tensorforce-client ran the game in a separate "
                "container; rlcloud runs environments in its own pods (see run_mode distributed)",
                f"environment.{key}",
            )
    return out


def legacy_gym_id(gym_id: str) -> str:
    """The gymnasium id for an old gym id.

    ale-py still registers the plain and ``NoFrameskip`` Atari ids (``SpaceInvaders-v0`` keeps its random
    2-4 frame skip and 0.25 sticky actions): they stay. The ``Deterministic`` ones are gone and become
    ``ALE/<Game>-v5`` with their settings (see :func:`legacy_atari_settings`). Other ids stay.
    """
    match = _OLD_ATARI_RE.match(gym_id)
    if match and match.group("game") in ATARI_GAMES and match.group("variant") == "Deterministic":
        return f"ALE/{match.group('game')}-v5"
    return gym_id


def legacy_atari_settings(gym_id: str) -> dict[str, Any]:
    """ALE v5 keyword arguments that keep a ``<Game>Deterministic-v0/v4`` id's behaviour.

    Those ids skipped a fixed 4 frames (as v5 does) with sticky actions 0.25 (v0) or none (v4); v5's
    default is 0.25, so v4 needs ``repeat_action_probability: 0.0``.
    """
    match = _OLD_ATARI_RE.match(gym_id)
    if not match or match.group("game") not in ATARI_GAMES or match.group("variant") != "Deterministic":
        return {}
    return {"frameskip": 4, "repeat_action_probability": 0.25 if match.group("version") == "0" else 0.0}
