"""A run's identity: the fields of an ExperimentSpec that change *what is learned*, and how two specs differ.

A run is created once, with a spec of record. Starting it again resumes it, which is only honest when
the learning setup is the same: the environment, agent, network, seed, run mode, workers, episode
cap, action repeat, deterministic acting, environments per server (and overlapped execution). Fields
that only say how long, how often or where (episodes, total_timesteps, saver/summary/evaluation
schedules, resources, image, results, cluster, logging) may change between starts. Pure functions; no I/O.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlcloud.errors import SpecError, SpecProblem

if TYPE_CHECKING:
    from rlcloud.specs.experiment import ExperimentSpec

__all__ = [
    "LEARNING_FIELDS",
    "Change",
    "ChangedRunError",
    "diff_specs",
    "fingerprint",
    "split_changes",
]

#: The fields that decide what a run learns: a run cannot resume with any of them changed.
LEARNING_FIELDS: tuple[str, ...] = (
    "environment",
    "agent",
    "network",
    "seed",
    "run_mode",
    "num_workers",
    "num_parameter_servers",
    "max_timesteps_per_episode",
    "repeat_actions",
    "deterministic",
    "envs_per_server",
)
#: Learning fields added after runs were recorded, with the value they had implicitly before: left out of
#: the fingerprint at that value, so that fingerprints of specs written before them stay the same.
_LATER_FIELDS: dict[str, Any] = {"envs_per_server": None}
#: Fields that are neither learning nor worth a history line (the name is the run itself).
_IGNORED_FIELDS = frozenset({"name"})


@dataclass(frozen=True)
class Change:
    """One field (a dotted path, e.g. ``agent.learning_rate``) that differs: the recorded and the new value."""

    field: str
    before: Any
    after: Any

    @property
    def learning(self) -> bool:
        """Whether the field changes what is learned (see :data:`LEARNING_FIELDS`).

        ``execution`` does only to or from ``overlapped``: that gives every env server two environments
        (twice the agent's rows, which a checkpoint cannot change) and another order of the agent's calls;
        the other values step the same rows in the same order.
        """
        if self.field == "execution":
            return "overlapped" in (self.before, self.after)
        return self.field.split(".", 1)[0] in LEARNING_FIELDS

    def to_dict(self) -> dict[str, Any]:
        """``{"field", "from", "to"}`` for the history file and ``-o json``."""
        return {"field": self.field, "from": self.before, "to": self.after}

    def __str__(self) -> str:
        return f"{self.field}: {_show(self.before)} (recorded) -> {_show(self.after)} (now)"


_MISSING = object()


def _show(value: Any) -> str:
    if value is _MISSING:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _dump(spec: ExperimentSpec | dict[str, Any]) -> dict[str, Any]:
    if isinstance(spec, dict):
        return spec
    dumped: dict[str, Any] = spec.model_dump(mode="json")
    return dumped


def _defaults() -> dict[str, Any]:
    # A record written by an older rlcloud lacks fields added since: they count as their default then.
    from rlcloud.specs.experiment import ExperimentSpec

    defaults: dict[str, Any] = {}
    for name, info in ExperimentSpec.model_fields.items():
        if not info.is_required():
            value = info.get_default(call_default_factory=True)
            defaults[name] = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
    return defaults


def _walk(path: str, before: Any, after: Any, out: list[Change]) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=str):
            _walk(f"{path}.{key}", before.get(key, _MISSING), after.get(key, _MISSING), out)
        return
    if before != after or (type(before) is not type(after) and not _same_number(before, after)):
        out.append(Change(path, before, after))


def _same_number(a: Any, b: Any) -> bool:
    # YAML reads 0.001 back as float and 1e3 as a string in some dumpers: numbers compare by value
    numeric = (int, float)
    return isinstance(a, numeric) and isinstance(b, numeric) and not isinstance(a, bool) and a == b


def diff_specs(record: ExperimentSpec | dict[str, Any], spec: ExperimentSpec | dict[str, Any]) -> list[Change]:
    """Every field where ``spec`` differs from ``record`` (dicts compared key by key: ``agent.learning_rate``).

    ``record`` may be the raw mapping read back from a stored spec.yaml (``kind`` is ignored).
    """
    old, new = _dump(record), _dump(spec)
    defaults = _defaults()
    changes: list[Change] = []
    for name in sorted((set(old) | set(new)) - _IGNORED_FIELDS - {"kind"}):
        before = old.get(name, defaults.get(name, _MISSING))
        after = new.get(name, defaults.get(name, _MISSING))
        _walk(name, before, after, changes)
    return changes


def split_changes(changes: list[Change]) -> tuple[list[Change], list[Change]]:
    """``(learning, other)``: the changes that forbid a resume, and those that only say how long/often/where."""
    return [c for c in changes if c.learning], [c for c in changes if not c.learning]


def fingerprint(spec: ExperimentSpec | dict[str, Any]) -> str:
    """A short stable hash of the learning fields (equal for specs that learn the same thing)."""
    data = _dump(spec)
    defaults = _defaults()
    learning = {name: data.get(name, defaults.get(name)) for name in LEARNING_FIELDS}
    for name, before in _LATER_FIELDS.items():
        if learning.get(name) == before:
            del learning[name]
    if data.get("execution") == "overlapped":  # see Change.learning; absent otherwise, as before it existed
        learning["execution"] = "overlapped"
    canonical = json.dumps(learning, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class ChangedRunError(SpecError):
    """A start asked a run that exists to resume with a different learning setup; nothing was started.

    ``changes`` lists each differing learning field with its recorded and new value.
    """

    def __init__(self, name: str, location: str, changes: list[Change]) -> None:
        self.name = name
        self.location = location.removeprefix("file://")  # a directory reads as a path
        self.changes = changes
        problems = [
            SpecProblem(c.field, f"differs from the recorded run: {_show(c.before)} -> {_show(c.after)}")
            for c in changes
        ]
        super().__init__(problems, source=None)

    def _render(self) -> str:
        lines = "\n".join(f"  - {c}" for c in getattr(self, "changes", []))
        name = getattr(self, "name", "?")
        return (
            f"experiment {name!r} already exists in {getattr(self, 'location', '?')} and learns something else; "
            f"resuming it would mix two runs. Changed:\n{lines}\n"
            f"Either give this run a new name (`--set name={name}-2`, or name= in the spec), or run the "
            "variants side by side as a sweep (`rlcloud sweep run SPEC --grid FIELD=A,B --seeds N`). "
            "Fields that may change on resume: episodes, total_timesteps, saver/summary frequency, "
            "evaluation, resources, image, results, cluster."
        )
