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

import math
import re
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.specs.legacy_network import LEGACY_LAYER_HINTS, convert_legacy_network, looks_like_legacy_network
from rlcloud.specs.tf06 import AGENT_ARGUMENTS, RUNNER_ARGUMENTS

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


class LegacySpecWarning(UserWarning):
    """A tensorforce-client setting was mapped to its rlcloud / Tensorforce 0.6 equivalent (or dropped)."""


# ------------------------------------------------------------------------------------------------ notes


@dataclass(frozen=True)
class LegacyNote:
    """One reported mapping: the key it is about (``agent.memory``) and what became of it."""

    key: str
    message: str


_NOTES: ContextVar[list[LegacyNote] | None] = ContextVar("rlcloud_legacy_notes", default=None)


def _warn(message: str, key: str = "") -> None:
    """Report a mapping: collected while a spec file is read (see :func:`collecting_notes`), else a warning.

    Outside a collection (a converter called directly) the warning points at the caller's caller, not here.
    """
    collected = _NOTES.get()
    if collected is not None:
        collected.append(LegacyNote(key or message.split(" ", 1)[0], message))
        return
    warnings.warn(message, LegacySpecWarning, stacklevel=3)


@contextmanager
def collecting_notes() -> Iterator[list[LegacyNote]]:
    """Collect the notes of the conversions run inside, instead of warning at once (nests: inner ones pass up)."""
    outer = _NOTES.get()
    notes: list[LegacyNote] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)
        if outer is not None:
            outer.extend(notes)


def _line_of(path: str, key: str) -> int:
    """The first line of ``path`` that holds the key's last part (``"memory"`` or ``memory:``), else 1."""
    name = re.sub(r"\[\d+\]$", "", key.rsplit(".", 1)[-1])
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return 1
    for pattern in (f'"{name}"', f"{name}:"):
        for number, line in enumerate(lines, 1):
            if pattern in line:
                return number
    return 1


def emit_notes(notes: list[LegacyNote], source: str | None, part_sources: Mapping[str, str] | None = None) -> None:
    """Warn once per note, as if from the spec file that holds the key (so Python shows that file and line).

    ``part_sources`` maps ``agent``/``network``/``environment``/``cluster`` to the file they were read from
    when the spec referenced one; other keys belong to ``source``.
    """
    seen: set[str] = set()
    for note in notes:
        if note.message in seen:
            continue
        seen.add(note.message)
        part = note.key.split(".", 1)[0].split("[", 1)[0]
        filename = (part_sources or {}).get(part) or source or "<spec>"
        lineno = _line_of(filename, note.key) if filename and not filename.startswith("<") else 1
        text = note.message if source is None or filename == source else f"{note.message} (in {source})"
        warnings.warn_explicit(text, LegacySpecWarning, filename, lineno, module="rlcloud.specs.legacy")


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


def _warn_at(key: str, message: str) -> None:
    _warn(message, key)


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


def _count(value: Any, field: str) -> int:
    """A whole count from a legacy number such as 1e6 (JSON floats); anything else is a SpecError."""
    number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if number and value == int(value) and value >= 1:
        return int(value)
    raise SpecError([SpecProblem(field, "must be a whole number >= 1", value)])


# --------------------------------------------------------------------------------------------- agents

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
    if out.pop("repeat_update", None) is not None:
        _warn("agent.repeat_update was dropped: no Tensorforce 0.6 equivalent", "agent.repeat_update")
    capacity = out.pop("memory_capacity", None)
    memory = out.get("memory")
    if capacity is not None and (memory is None or isinstance(memory, str)):
        out["memory"] = {"type": memory or "replay", "capacity": capacity}
    if isinstance(out.get("memory"), dict | str):
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
