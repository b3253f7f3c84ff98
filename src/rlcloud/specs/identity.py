"""A run's identity: the fields of an ExperimentSpec that change *what is learned*, and how two specs differ.

A run is created once, with a spec of record. Starting it again resumes it, which is only honest when
the learning setup is the same: the environment, agent, network, seed, run mode, workers, episode
cap, action repeat, deterministic acting, environments per server (and overlapped execution), and the
code archive's digest. Fields
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
    from rlcloud.specs.sweep import SweepSpec

__all__ = [
    "LEARNING_FIELDS",
    "SWEEP_FIELDS",
    "Change",
    "ChangedRunError",
    "ChangedSweepError",
    "diff_specs",
    "diff_sweeps",
    "fingerprint",
    "split_changes",
    "sweep_fingerprint",
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

        ``code`` does through its archive's digest only (``code.digest``, or code added or removed).
        ``execution`` does only to or from ``overlapped``: that gives every env server two environments
        (twice the agent's rows, which a checkpoint cannot change) and another order of the agent's calls;
        the other values step the same rows in the same order.
        """
        if self.field == "execution":
            return "overlapped" in (self.before, self.after)
        if self.field.split(".", 1)[0] == "code":
            # the code is its archive: the same digest from another folder or with other patterns learns the same
            return self.field in ("code", "code.digest")
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
    for name in sorted((set(old) | set(new)) - _IGNORED_FIELDS - {"kind"}, key=str):  # a stored record's keys
        before = old.get(name, defaults.get(name, _MISSING))  # may be anything YAML has: 1, null, true
        after = new.get(name, defaults.get(name, _MISSING))
        _walk(str(name), before, after, changes)
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
    code = data.get("code")
    if isinstance(code, dict):  # see Change.learning; absent without code, as before it existed
        learning["code"] = code.get("digest")
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
            + (
                " To resume it with this code, as a change recorded in its history with both digests: "
                "`--accept-new-code` (Experiment.start(accept_new_code=True))."
                if any(c.field.split(".", 1)[0] == "code" for c in getattr(self, "changes", []))
                else ""
            )
        )


# ------------------------------------------------------------------------------------------------- sweeps

#: The fields of a SweepSpec that decide which trials it has (with the base experiment's learning fields,
#: ``experiment.<LEARNING_FIELDS>``): a sweep cannot go on with any of them changed. ``max_parallel``,
#: ``objective``, ``early_stopping``, ``max_failures``, ``smoke_timesteps``, ``description``, ``results`` and
#: the experiment's other fields (its budget, schedules, resources) may change, as for one experiment.
SWEEP_FIELDS: tuple[str, ...] = ("parameters", "samples", "sampler_seed", "seeds")
#: ``growth`` is recorded step by step beside the sweep of record (rlcloud.record.grow_sweep_recorded): a sweep
#: that grew is the same sweep.
_SWEEP_IGNORED = frozenset({"name", "kind", "experiment", "growth"})


def _sweep_dump(sweep: SweepSpec | dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = dict(sweep) if isinstance(sweep, dict) else sweep.model_dump(mode="json")
    seeds = data.get("seeds", 1)
    if isinstance(seeds, int) and not isinstance(seeds, bool):  # 3 and [1, 2, 3] are the same trials
        data["seeds"] = list(range(1, seeds + 1))
    return data


def _sweep_defaults() -> dict[str, Any]:
    from rlcloud.specs.sweep import SweepSpec

    defaults: dict[str, Any] = {}
    for name, info in SweepSpec.model_fields.items():
        if not info.is_required():
            value = info.get_default(call_default_factory=True)
            defaults[name] = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
    return _sweep_dump(defaults)


def diff_sweeps(
    record: SweepSpec | dict[str, Any], sweep: SweepSpec | dict[str, Any]
) -> tuple[list[Change], list[Change]]:
    """``(refused, allowed)``: where ``sweep`` differs from the sweep of ``record``, split into the changes
    that make it another sweep (:data:`SWEEP_FIELDS`, the base experiment's learning fields, named
    ``experiment.<field>``) and those that may change between starts."""
    old, new = _sweep_dump(record), _sweep_dump(sweep)
    defaults = _sweep_defaults()
    changes: list[Change] = []
    for name in sorted((set(old) | set(new)) - _SWEEP_IGNORED, key=str):
        before, after = old.get(name, defaults.get(name, _MISSING)), new.get(name, defaults.get(name, _MISSING))
        _walk(str(name), before, after, changes)
    before_exp = old.get("experiment")
    after_exp = new.get("experiment")
    experiment = diff_specs(
        before_exp if isinstance(before_exp, dict) else {}, after_exp if isinstance(after_exp, dict) else {}
    )
    refused = [c for c in changes if c.field.split(".", 1)[0] in SWEEP_FIELDS]
    allowed = [c for c in changes if c.field.split(".", 1)[0] not in SWEEP_FIELDS]
    for change in experiment:
        named = Change(f"experiment.{change.field}", change.before, change.after)
        (refused if change.learning else allowed).append(named)
    return refused, allowed


def sweep_fingerprint(sweep: SweepSpec | dict[str, Any]) -> str:
    """A short stable hash of what decides a sweep's trials (equal for sweeps with the same trials)."""
    data = _sweep_dump(sweep)
    defaults = _sweep_defaults()
    ident = {name: data.get(name, defaults.get(name)) for name in SWEEP_FIELDS}
    experiment = data.get("experiment")
    ident["experiment"] = fingerprint(experiment if isinstance(experiment, dict) else {})
    canonical = json.dumps(ident, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class ChangedSweepError(ChangedRunError):
    """A start asked a sweep that exists to go on with other trials (another grid, seeds, or base experiment
    learning setup); nothing was started. ``changes`` lists each differing field."""

    def _render(self) -> str:
        lines = "\n".join(f"  - {c}" for c in getattr(self, "changes", []))
        name = getattr(self, "name", "?")
        return (
            f"sweep {name!r} already exists in {getattr(self, 'location', '?')} with other trials; going on would "
            f"report trials of two sweeps as one. Changed:\n{lines}\n"
            f"Give this sweep a new name (`--name {name}-2`, or name: in the sweep file), or start the recorded one "
            "again as it was (`rlcloud sweep start` with the same file). Fields that may change: max_parallel, "
            "objective, early_stopping, max_failures, smoke_timesteps, description, results, and the experiment's "
            "budget, schedules and resources."
        )
