"""SweepSpec: many runs of one experiment (seeds, a grid or a random search over a few fields), and the trials
it expands to.

    kind: Sweep
    name: lr-sweep
    experiment: cartpole_ppo.yaml          # a file (relative to this one) or an inline experiment
    parameters:
      agent.learning_rate: [1e-3, 3e-4]    # a grid: every combination
      agent.batch_size: [10, 20]
    seeds: 3                               # seeds 1..3 of every configuration (or a list: [1, 7, 42])
    max_parallel: 4

Random search: give a distribution instead of a list (``{loguniform: [1e-5, 1e-2]}``, ``{uniform: [0.9,
0.999]}``, ``{choice: [a, b]}``) and ``samples: N``; sampling is seeded (``sampler_seed``), so the trials
are the same every time the spec is read. Each trial is an ordinary experiment named after what differs
(e.g. ``lr3e-4--bs10--seed2``), written to ``<results>/<sweep>/<trial>/``. Pure data, no I/O except
:meth:`SweepSpec.from_file`.
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import math
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.specs._base import MAX_NAME_LENGTH, StrictModel, Usd, check_dns_label, take_budget_alias
from rlcloud.specs.experiment import ExperimentSpec

__all__ = ["MAX_TRIALS", "Distribution", "EarlyStopping", "SweepSpec", "Trial"]

#: The most trials one sweep may have: a Kubernetes Indexed Job allows 100,000 completions; beyond a few
#: thousand trials a sweep is better split (each trial is a full training run).
MAX_TRIALS = 10_000
#: Seeds must be valid for numpy and TensorFlow (uint32).
MAX_SEED = 2**32 - 1


class Distribution(StrictModel):
    """One random-search distribution: exactly one of ``uniform``, ``loguniform`` or ``choice``."""

    uniform: tuple[float, float] | None = Field(None, description="[low, high]: uniform in between.")
    loguniform: tuple[float, float] | None = Field(
        None, description="[low, high], both > 0: uniform in log space (learning rates, coefficients)."
    )
    choice: list[Any] | None = Field(None, description="Values picked with equal probability.")

    @model_validator(mode="after")
    def _exactly_one(self) -> Distribution:
        given = [k for k in ("uniform", "loguniform", "choice") if getattr(self, k) is not None]
        if len(given) != 1:
            raise PydanticCustomError(
                "distribution", "give exactly one of uniform: [LOW, HIGH], loguniform: [LOW, HIGH], choice: [...]"
            )
        low_high = self.uniform or self.loguniform
        if low_high is not None and not low_high[0] < low_high[1]:
            raise PydanticCustomError("distribution", "needs LOW < HIGH")
        if self.loguniform is not None and self.loguniform[0] <= 0:
            raise PydanticCustomError("distribution", "loguniform needs LOW > 0")
        if self.choice is not None and not self.choice:
            raise PydanticCustomError("distribution", "choice needs at least one value")
        return self

    def sample(self, rng: random.Random) -> Any:
        """One value drawn with ``rng``."""
        if self.uniform is not None:
            return rng.uniform(*self.uniform)
        if self.loguniform is not None:
            low, high = self.loguniform
            return math.exp(rng.uniform(math.log(low), math.log(high)))
        assert self.choice is not None
        return rng.choice(self.choice)


class EarlyStopping(StrictModel):
    """The median stopping rule: a trial stops (checkpointed, state "stopped early") when its best running
    mean return so far is below the median of the other trials' running means at the same timestep."""

    rule: Literal["median"] = Field("median", description="The stopping rule (median: Golovin et al., 2017).")
    grace_timesteps: int = Field(
        10_000, ge=0, le=10**12, description="No trial stops before it has trained this many timesteps."
    )
    min_trials: int = Field(
        3, ge=1, le=MAX_TRIALS, description="Other trials that must have reached the same timestep to compare."
    )
    check_seconds: float = Field(
        10.0, gt=0, le=3600, description="Seconds between checks (each reads its peers' curves: one listing)."
    )


@dataclass(frozen=True)
class Trial:
    """One run of a sweep: its index, its experiment name, the parameter values and seed it has, its spec."""

    index: int
    name: str
    params: dict[str, Any]
    seed: int
    spec: ExperimentSpec

    @property
    def config(self) -> str:
        """The trial's configuration without the seed (trials of one config differ by seed only)."""
        return ",".join(f"{k}={_value_text(v)}" for k, v in self.params.items()) or "base"


class SweepSpec(StrictModel):
    """A sweep: an experiment run over seeds and a grid or random search of some of its fields."""

    name: str = Field(..., description="Sweep name: a DNS-1123 label; results go to <results>/<name>/.")
    description: str | None = Field(None, description="Free text describing the sweep.")
    experiment: ExperimentSpec = Field(
        ..., description="The base experiment: a file (relative to the sweep file) or an inline spec."
    )
    parameters: dict[str, list[Any] | Distribution] = Field(
        default_factory=dict,
        description="Dotted experiment field -> a list of values (grid) or a distribution (random search).",
    )
    samples: int | None = Field(
        None, ge=1, le=MAX_TRIALS, description="Random search: configurations drawn from the distributions."
    )
    sampler_seed: int = Field(0, ge=0, le=MAX_SEED, description="Seed of the random search's sampling.")
    seeds: int | list[int] = Field(
        1, description="Seeds per configuration: a count N (seeds 1..N) or the list of seeds."
    )
    max_parallel: int | None = Field(
        None, ge=1, le=MAX_TRIALS, description="Trials running at once (default: locally the CPU count)."
    )
    objective: Literal["mean_return", "evaluation"] = Field(
        "mean_return",
        description="What ranks trials: the mean return of the last 20 training episodes, or the final "
        "evaluation's mean return.",
    )
    early_stopping: EarlyStopping | None = Field(None, description="Stop clearly worse trials early; empty: off.")
    max_failures: int = Field(
        3,
        ge=0,
        le=MAX_TRIALS,
        description="Stop launching trials once this many have failed the same way (locally: the same exit "
        "code and error line; on Kubernetes: this many failed trials, the Job's maxFailedIndexes); running "
        "trials go on. 0: never stop.",
    )
    smoke_timesteps: int = Field(
        300,
        ge=0,
        le=1_000_000,
        description="The first trial must train this many timesteps (or finish) to prove the base experiment; "
        "if it fails before, no other trial starts. Locally the others start beside it, at most max_failures "
        "in all until then, and are stopped if it fails; on Kubernetes the other pods wait for it. 0: no such "
        "trial.",
    )
    results: str | None = Field(None, description="Results root (gs://bucket/prefix or a directory).")
    trials_per_gpu: int = Field(
        1,
        ge=1,
        le=48,
        description="Trials that share one GPU (a GPU cluster with gpu_sharing, clients_per_gpu at least this): "
        "each trial's pod asks for one shared GPU and its TensorFlow process gets 1/trials_per_gpu of the GPU's "
        "memory (RLCLOUD_GPU_MEMORY_MB). 1: a GPU per trial.",
    )
    budget: Usd | None = Field(
        None,
        description="A money cap for the whole sweep, all its trials together (see the experiment's budget): at "
        "90% a warning, at 100% no trial starts any more and the running ones checkpoint and stop.",
    )

    @model_validator(mode="before")
    @classmethod
    def _budget_alias(cls, data: Any) -> Any:
        return take_budget_alias(data)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_dns_label(value, what="sweep name")

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise PydanticCustomError("seeds", "must be a count or a list of seeds, not a boolean")
        if isinstance(value, int) and not 1 <= value <= MAX_TRIALS:
            raise PydanticCustomError("seeds", f"a count of seeds must be 1..{MAX_TRIALS}")
        if isinstance(value, list):
            if not value:
                raise PydanticCustomError("seeds", "needs at least one seed")
            if any(isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= MAX_SEED for s in value):
                raise PydanticCustomError("seeds", f"each seed must be an integer 0..{MAX_SEED}")
            if len(set(value)) != len(value):
                raise PydanticCustomError("seeds", "seeds must be distinct")
        return value

    @field_validator("parameters", mode="before")
    @classmethod
    def _parameters(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        value = dict(value)
        for key, values in list(value.items()):
            if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*", key):
                raise PydanticCustomError("parameter", f"{key!r} is not a dotted field such as agent.learning_rate")
            if key in ("name", "seed"):
                raise PydanticCustomError("parameter", f"{key!r} is set by the sweep itself (use seeds: for seeds)")
            if isinstance(values, list):
                if not values:
                    raise PydanticCustomError("parameter", f"{key}: give at least one value")
            elif isinstance(values, dict):
                try:
                    value[key] = Distribution.model_validate(values)
                except ValidationError as exc:
                    first = exc.errors()[0]
                    where = ".".join(str(p) for p in first["loc"])
                    raise PydanticCustomError(
                        "parameter", f"{key}: {where + ': ' if where else ''}{first['msg']}"
                    ) from None
            elif not isinstance(values, Distribution):
                raise PydanticCustomError(
                    "parameter",
                    f"{key}: give a list of values (grid) or a distribution such as {{loguniform: [1e-5, 1e-2]}}",
                )
        return value

    @field_validator("samples", mode="after")
    @classmethod
    def _samples(cls, value: int | None, info: ValidationInfo) -> int | None:
        parameters = info.data.get("parameters") or {}
        random_keys = [k for k, v in parameters.items() if isinstance(v, Distribution)]
        if random_keys and value is None:
            raise PydanticCustomError(
                "samples", "random search ({keys}) needs samples: N", {"keys": ", ".join(random_keys)}
            )
        if value is not None and parameters is not None and not random_keys and "parameters" in info.data:
            raise PydanticCustomError("samples", "samples is for random search: give a distribution in parameters")
        return value

    @field_validator("seeds", mode="after")
    @classmethod
    def _size(cls, value: int | list[int], info: ValidationInfo) -> int | list[int]:
        parameters = info.data.get("parameters") or {}
        samples = info.data.get("samples")
        configs = samples or math.prod(len(v) for v in parameters.values() if isinstance(v, list))
        count = configs * (value if isinstance(value, int) else len(value))
        if count > MAX_TRIALS:
            raise PydanticCustomError(
                "trials", "{n} trials is more than {max}: split the sweep", {"n": count, "max": MAX_TRIALS}
            )
        return value

    # ------------------------------------------------------------------------------------------ expansion

    @property
    def seed_list(self) -> list[int]:
        """The seeds every configuration runs with."""
        return list(range(1, self.seeds + 1)) if isinstance(self.seeds, int) else list(self.seeds)

    @property
    def configurations(self) -> int:
        """How many parameter configurations (trials = configurations x seeds)."""
        if self.samples is not None:
            return self.samples
        return math.prod(len(v) for v in self.parameters.values() if isinstance(v, list))

    def _configs(self) -> list[dict[str, Any]]:
        grid = {k: v for k, v in self.parameters.items() if isinstance(v, list)}
        keys = list(grid)
        combos = [dict(zip(keys, values, strict=True)) for values in itertools.product(*grid.values())]
        if self.samples is None:
            return combos
        rng = random.Random(self.sampler_seed)
        configs = []
        for i in range(self.samples):
            config = dict(combos[i % len(combos)]) if combos else {}
            for key, dist in self.parameters.items():
                if isinstance(dist, Distribution):
                    config[key] = _round(dist.sample(rng))
            configs.append({k: config[k] for k in self.parameters})
        return configs

    def trial_table(self) -> list[tuple[str, dict[str, Any], int]]:
        """``(name, params, seed)`` of every trial in index order, without building their specs (cheap)."""
        seeds = self.seed_list
        names = _trial_names(self)
        return [
            (names[i], config, seed) for i, (config, seed) in enumerate((c, s) for c in self._configs() for s in seeds)
        ]

    def trial_params(self, index: int) -> tuple[dict[str, Any], int]:
        """The parameter values and seed of trial ``index`` (configuration-major, seed-minor)."""
        seeds = self.seed_list
        if not 0 <= index < self.configurations * len(seeds):
            raise IndexError(f"sweep {self.name} has no trial {index}")
        return self._configs()[index // len(seeds)], seeds[index % len(seeds)]

    def trials(self) -> list[Trial]:
        """Every trial, in index order; each trial's spec is validated like any experiment's.

        Raises SpecError naming the trial and the field when a combination is not a valid experiment.
        """
        names = _trial_names(self)
        trials: list[Trial] = []
        # (field, message) -> the trials with that problem, and its values: a problem many trials share (a
        # mistyped parameter: all of them) is said once, not once per trial
        problems: dict[tuple[str, str], tuple[list[str], list[Any]]] = {}
        seeds = self.seed_list
        for index, config in enumerate(c for c in self._configs() for _ in seeds):
            seed = seeds[index % len(seeds)]
            try:
                spec = self.experiment.replace(**config, seed=seed, name=names[index])
            except SpecError as exc:
                for p in exc.problems:
                    found, values = problems.setdefault((p.field, p.message), ([], []))
                    found.append(names[index])
                    if p.value not in values:
                        values.append(p.value)
                continue
            trials.append(Trial(index=index, name=names[index], params=config, seed=seed, spec=spec))
        if problems:
            raise SpecError(
                [
                    SpecProblem(
                        f"parameters.{field}",
                        f"{_which_trials(found, len(names))}: {_agent_hint(self.experiment.agent, field, message)}"
                        + ("" if len(values) == 1 else f" (got {', '.join(map(repr, values))})"),
                        values[0] if len(values) == 1 else None,
                    )
                    for (field, message), (found, values) in problems.items()
                ]
            )
        return trials

    def trial(self, index: int) -> Trial:
        """Trial ``index`` alone (what a pod of the sweep's Indexed Job runs)."""
        config, seed = self.trial_params(index)
        name = _trial_names(self)[index]
        spec = self.experiment.replace(**config, seed=seed, name=name)
        return Trial(index=index, name=name, params=config, seed=seed, spec=spec)

    @property
    def num_trials(self) -> int:
        """Configurations x seeds."""
        return self.configurations * len(self.seed_list)

    # -------------------------------------------------------------------------------------------- loading

    @classmethod
    def from_file(cls, path: str | Path, **overrides: Any) -> SweepSpec:
        """Load a sweep file (YAML/JSON, ``kind: Sweep``); ``experiment`` may name a file relative to it.

        Keyword arguments override top-level settings (``max_parallel=2``, ``seeds=5``).
        """
        from rlcloud.specs.building import read_data_file

        path = Path(path)
        data = read_data_file(path)
        if not isinstance(data, dict):
            raise SpecError([SpecProblem("", "a sweep file must be a mapping with kind: Sweep")], source=str(path))
        return cls.from_dict(data, base_dir=path.parent, source=str(path), **overrides)

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], *, base_dir: str | Path | None = None, source: str | None = None, **overrides: Any
    ) -> SweepSpec:
        """Build from a mapping; an ``experiment`` given as a file name resolves against ``base_dir``."""
        from rlcloud.specs.building import build_model, resolve_experiment_reference

        raw = dict(data)
        kind = raw.pop("kind", "Sweep")
        if kind != "Sweep":
            raise SpecError([SpecProblem("kind", "must be Sweep for a sweep file", kind)], source=source)
        raw.update(overrides)
        experiment = raw.get("experiment")
        base = Path(base_dir) if base_dir is not None else Path.cwd()
        if isinstance(experiment, str):
            # the rules of every file reference: nothing outside the sweep's directory, ./configs and the
            # bundled configs, no key file or kubeconfig read into a message (SpecError naming `experiment`)
            try:
                experiment = resolve_experiment_reference(experiment, base, Path(source) if source else None)
            except SpecError as exc:
                raise SpecError(exc.problems, source=source) from None
        try:
            if isinstance(experiment, Path):
                raw["experiment"] = ExperimentSpec.from_file(experiment)
            elif isinstance(experiment, dict):
                raw["experiment"] = ExperimentSpec.from_dict(experiment, base_dir=base)
        except SpecError as exc:
            raise SpecError(
                [SpecProblem(f"experiment.{p.field}".rstrip("."), p.message, p.value) for p in exc.problems],
                source=source,
            ) from exc
        return build_model(cls, raw, source=source)

    def to_yaml(self) -> str:
        """The sweep as YAML (``kind: Sweep`` first, the experiment inline): what a pod reads back. Explicit
        nulls are kept: a trial's ``saver_frequency: null`` left out would come back as the default."""
        from rlcloud.specs.building import dump_spec

        return dump_spec("Sweep", self)

    @classmethod
    def from_yaml_text(cls, text: str) -> SweepSpec:
        """Load what :meth:`to_yaml` wrote."""
        from rlcloud.specs.building import parse_data_text

        data = parse_data_text(text, source="<sweep>")
        if not isinstance(data, dict):
            raise SpecError("a sweep must be a mapping")
        return cls.from_dict(data)


# ---------------------------------------------------------------------------------------------- names


def _round(value: Any) -> Any:
    """Sampled floats to 4 significant digits: readable names, and the same value on every machine."""
    return float(f"{value:.4g}") if isinstance(value, float) else value


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)  # inf, -inf, nan: no mantissa to shorten (the agent's checks refuse them later)
        if value != 0 and not 1e-2 <= abs(value) < 1e5:
            mantissa, exponent = f"{value:.3e}".split("e")
            return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"  # 3e-4, not 3.000e-04
        return f"{value:g}"
    return str(value)


def _abbreviate(key: str) -> str:
    last = key.rsplit(".", 1)[-1].lower()
    words = [w for w in re.split(r"[_\-]+", last) if w]
    if len(words) > 1:
        return "".join(w[0] for w in words)  # learning_rate -> lr, batch_size -> bs
    return last[:10]


def _label_part(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower().replace(".", "p").replace("+", "")).strip("-")


def _agent_hint(agent: Any, field: str, message: str) -> str:
    """``message``, for a parameter that is no experiment field but an argument of the experiment's agent
    (``learning_rate``), with ``did you mean 'agent.learning_rate'?``: a grid's keys are dotted paths."""
    from rlcloud.specs.tf06 import AGENT_ARGUMENTS

    prefix = "unknown field"
    agent_type = agent.get("type") if isinstance(agent, dict) else None
    if "." in field or not message.startswith(prefix) or "did you mean" in message:
        return message
    required, optional = AGENT_ARGUMENTS.get(agent_type, ((), ())) if isinstance(agent_type, str) else ((), ())
    if field not in (*required, *optional):
        return message
    return f"{prefix}; did you mean 'agent.{field}'?{message[len(prefix) :].lstrip(';')}"


def _which_trials(names: list[str], of: int) -> str:
    """``trial A``, ``trials A, B, C``, ``trials A, B, C and 5 more`` or ``every trial (8)``."""
    if len(names) == of and of > 1:
        return f"every trial ({of})"
    if len(names) == 1:
        return f"trial {names[0]}"
    shown = ", ".join(names[:3])
    return f"trials {shown}" + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _trial_names(sweep: SweepSpec) -> list[str]:
    """Stable, readable, unique DNS-1123 names, e.g. ``lr3e-4--bs10--seed2`` (same values, same name)."""
    seeds = sweep.seed_list
    varying = [k for k, v in sweep.parameters.items() if isinstance(v, Distribution) or len(v) > 1]
    names: list[str] = []
    for config in sweep._configs():
        for seed in seeds:
            parts = [f"{_abbreviate(k)}{_label_part(_value_text(config[k]))}" for k in varying]
            if len(seeds) > 1 or not parts:
                parts.append(f"seed{seed}")
            name = "--".join(p for p in parts if p)
            if not name[0].isalpha():
                name = "t" + name
            if len(name) > MAX_NAME_LENGTH:
                digest = hashlib.sha256(name.encode()).hexdigest()[:6]
                name = name[: MAX_NAME_LENGTH - 7].rstrip("-") + "-" + digest
            names.append(name)
    # two configurations can read the same once shortened (or once values are rounded, or values repeat):
    # number them by trial index; a numbered name may itself be another trial's (values a, a, a-1 give
    # "a", "a", "a-1"), so a name is taken only when no other trial has it, else numbered further
    counts = collections.Counter(names)
    taken = {name for name in names if counts[name] == 1}
    for i, name in enumerate(names):
        if counts[name] == 1:
            continue
        for extra in itertools.count():
            suffix = f"-{i}" if extra == 0 else f"-{i}-{extra}"
            candidate = name[: MAX_NAME_LENGTH - len(suffix)].rstrip("-") + suffix
            if candidate not in taken:
                break
        taken.add(candidate)
        names[i] = candidate
    return names
