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
from rlcloud.specs.population import Population, check_population
from rlcloud.specs.trial_names import (
    abbreviate,
    label_part,
    numbered,
    pair_key,
    round_sampled,
    value_key,
    value_text,
    which_trials,
)

__all__ = [
    "MAX_TRIALS",
    "Distribution",
    "EarlyStopping",
    "Growth",
    "SweepSpec",
    "Trial",
    "parse_trial_indices",
    "trial_indices_text",
]

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
    """Stopping trials early, decided at timestep checkpoints from the results store's data (the same
    decisions on any machine: rlcloud.runner.early_stop).

    ``median`` (Golovin et al., 2017): at ``grace_timesteps`` and every ``interval_timesteps`` after, a trial
    stops (checkpointed, state "stopped early") when its best running mean return so far is below the
    median of the running means the sweep's earlier trials had at that timestep. ``asha`` (asynchronous
    successive halving, Li et al., 2020): at the rungs ``grace_timesteps`` x ``reduction_factor``^k a trial
    goes on only when it is in the top 1/``reduction_factor`` of the trials that reached that rung before it.
    """

    rule: Literal["median", "asha"] = Field(
        "median", description="The rule: median (the median stopping rule) or asha (asynchronous successive halving)."
    )
    grace_timesteps: int = Field(
        10_000, ge=0, le=10**12, description="No trial stops before this timestep (asha: the first rung; > 0)."
    )
    min_trials: int = Field(
        3, ge=1, le=MAX_TRIALS, description="median: earlier trials that must have reached the timestep to compare."
    )
    interval_timesteps: int = Field(
        10_000, ge=1, le=10**12, description="median: timesteps between decisions after the grace period."
    )
    reduction_factor: int = Field(
        3, ge=2, le=100, description="asha: eta; rungs at grace x eta^k, the top 1/eta of a rung go on."
    )
    check_seconds: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="Seconds between reads of the store while a decision waits for earlier trials to reach its "
        "timestep (never changes a decision).",
    )

    @model_validator(mode="after")
    def _asha_needs_a_first_rung(self) -> EarlyStopping:
        if self.rule == "asha" and self.grace_timesteps < 1:
            raise PydanticCustomError(
                "early_stopping", "asha needs grace_timesteps >= 1: the first rung (rungs at grace x eta^k)"
            )
        return self


class Growth(StrictModel):
    """One step by which a sweep grew after its first start (``rlcloud sweep extend``): new trials of the same
    sweep, indexed after the ones it had, or a larger budget for some of its trials.

    The trials a step adds are those of the sweep with the step's seeds and values added that it did not have
    already, in the sweep's order (configuration-major, seed-minor); the trials it had keep their index and
    name. The same sweep and the same steps give the same trials on any machine.
    """

    seeds: list[int] = Field(default_factory=list, description="Seeds added to every configuration.")
    parameters: dict[str, list[Any]] = Field(
        default_factory=dict, description="Grid field -> values added to it (every new combination runs)."
    )
    trials: list[str] = Field(
        default_factory=list, description="Trials trained further, to total_timesteps (extend --top)."
    )
    total_timesteps: int | None = Field(
        None, ge=1, le=10**12, description="The new budget of the trials listed in trials."
    )

    @model_validator(mode="after")
    def _one_kind(self) -> Growth:
        if bool(self.trials) != (self.total_timesteps is not None):
            raise PydanticCustomError("growth", "trials and total_timesteps go together (extend --top)")
        if self.trials and (self.seeds or self.parameters):
            raise PydanticCustomError("growth", "a step either adds trials (seeds, parameters) or trains some further")
        if not (self.seeds or self.parameters or self.trials):
            raise PydanticCustomError("growth", "a step adds seeds or parameter values, or trains trials further")
        return self

    def summary(self) -> str:
        """One line for people: what the step added."""
        parts = [f"seeds {', '.join(map(str, self.seeds))}"] if self.seeds else []
        parts += [f"{k}: {', '.join(value_text(v) for v in vs)}" for k, vs in self.parameters.items()]
        if self.trials:
            parts.append(f"{len(self.trials)} trial(s) to {self.total_timesteps} timesteps")
        return "; ".join(parts)


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
        return ",".join(f"{k}={value_text(v)}" for k, v in self.params.items()) or "base"


#: Experiment fields a sweep cannot vary: where its trials' results go and which cluster runs them (the sweep's
#: own), the image (one Job runs every trial) and the spec's kind.
NOT_PARAMETERS = frozenset({"kind", "results", "cluster", "image"})


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
    sampler: Literal["tpe"] | None = Field(
        None,
        description="tpe: each trial asks an Optuna study (TPE) in the sweep's results for its configuration as "
        "it starts (samples: N; the optuna extra; Kubernetes). Unset: a grid, or random search with samples.",
    )
    samples: int | None = Field(
        None, ge=1, le=MAX_TRIALS, description="Random search (or sampler: tpe): configurations to try."
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
    population: Population | None = Field(
        None, description="Population-based training over the trials (rlcloud.specs.population); empty: off."
    )
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
    growth: list[Growth] = Field(
        default_factory=list,
        description="How the sweep grew after its first start, step by step (written by `rlcloud sweep extend`, "
        "kept in its record: not written by hand).",
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
            if key.split(".")[0] in NOT_PARAMETERS:
                raise PydanticCustomError(
                    "parameter",
                    f"{key!r} is not a parameter of training: a sweep's trials share it (set it on the experiment)",
                )
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
        tpe = info.data.get("sampler") == "tpe"
        if tpe and value is None:
            raise PydanticCustomError("samples", "sampler: tpe needs samples: N (how many configurations it proposes)")
        if value is not None and not tpe and parameters is not None and not random_keys and "parameters" in info.data:
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

    @model_validator(mode="after")
    def _growth_steps(self) -> SweepSpec:
        """Each growth step adds to what the sweep has: seeds (valid, distinct), values of grid fields, or a
        larger budget for trials it has; and the sweep stays within MAX_TRIALS."""
        if not self.growth:
            return self
        names = {name for name, _c, _s in self._rows_before(0)}
        for number, step in enumerate(self.growth):
            where = f"growth.{number}"
            for seed in step.seeds:
                if isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
                    raise PydanticCustomError("growth", "{where}.seeds: each seed must be an integer 0..{max}",
                                              {"where": where, "max": MAX_SEED})  # fmt: skip
            if len(set(step.seeds)) != len(step.seeds):
                raise PydanticCustomError("growth", "{where}.seeds: seeds must be distinct", {"where": where})
            for key in step.parameters:
                if not isinstance(self.parameters.get(key), list) or self.samples is not None:
                    grid = [k for k, v in self.parameters.items() if isinstance(v, list)]
                    fields = ", ".join(grid) if grid and self.samples is None else "none (this sweep has no grid)"
                    raise PydanticCustomError(
                        "growth",
                        "{where}.parameters: {key} is not a field of this sweep's grid; values can be added to "
                        "{grid} (a new field or a random search would change what every trial means)",
                        {"where": where, "key": key, "grid": fields},
                    )
                if not step.parameters[key]:
                    raise PydanticCustomError("growth", "{where}.parameters.{key}: give at least one value",
                                              {"where": where, "key": key})  # fmt: skip
            if step.trials and "total_timesteps" in self.parameters:
                raise PydanticCustomError(
                    "growth", "{where}: total_timesteps is a swept parameter; it cannot be extended", {"where": where}
                )
            unknown = [t for t in step.trials if t not in names]
            if unknown:
                raise PydanticCustomError("growth", "{where}.trials: no trial named {names} in the sweep",
                                          {"where": where, "names": ", ".join(unknown[:5])})  # fmt: skip
            names |= {name for name, _c, _s in self._rows_before(number + 1)}
        count = len(self._rows())
        if count > MAX_TRIALS:
            raise PydanticCustomError(
                "trials", "{n} trials is more than {max}: split the sweep", {"n": count, "max": MAX_TRIALS}
            )
        return self

    @model_validator(mode="after")
    def _tpe(self) -> SweepSpec:
        """``sampler: tpe``'s rules (rlcloud.specs.tpe)."""
        from rlcloud.specs.tpe import tpe_problem

        problem = tpe_problem(self) if self.sampler == "tpe" else None
        if problem is not None:
            raise PydanticCustomError("at:sampler", problem)  # the field it names (specs.building)
        return self

    def with_params(self, trial: Trial, params: dict[str, Any]) -> Trial:
        """Trial ``trial`` with the parameter values ``params`` (what ``sampler: tpe`` proposed for it when it
        started); SpecError naming the field when they do not make a valid experiment."""
        spec = self._trial_spec(trial.name, params, trial.seed, self._budgets())
        return Trial(index=trial.index, name=trial.name, params=dict(params), seed=trial.seed, spec=spec)

    @model_validator(mode="after")
    def _population(self) -> SweepSpec:
        """The population section against the rest of the sweep (rlcloud.specs.population.check_population)."""
        if self.population is not None:
            check_population(self, Distribution)
        return self

    def _rows_before(self, steps: int) -> list[tuple[str, dict[str, Any], int]]:
        """The trials of the sweep with its first ``steps`` growth steps only."""
        return self.model_copy(update={"growth": self.growth[:steps]})._rows()

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
        if self.sampler == "tpe":  # proposed when each trial starts (rlcloud.storage.journal.ask_trial)
            return [{} for _ in range(self.samples or 0)]
        combos = [dict(zip(keys, values, strict=True)) for values in itertools.product(*grid.values())]
        if self.samples is None:
            return combos
        rng = random.Random(self.sampler_seed)
        configs = []
        for i in range(self.samples):
            config = dict(combos[i % len(combos)]) if combos else {}
            for key, dist in self.parameters.items():
                if isinstance(dist, Distribution):
                    config[key] = round_sampled(dist.sample(rng))
            configs.append({k: config[k] for k in self.parameters})
        return configs

    def _rows(self) -> list[tuple[str, dict[str, Any], int]]:
        """``(name, params, seed)`` of every trial in index order: the sweep's own, then those each growth step
        added (:class:`Growth`), each named as the grown sweep names it unless that name is taken already."""
        seeds = self.seed_list
        names = _trial_names(self)
        pairs = ((c, s) for c in self._configs() for s in seeds)
        rows = [(names[i], config, seed) for i, (config, seed) in enumerate(pairs)]
        if not self.growth:
            return rows
        taken = set(names)
        have = {pair_key(config, seed) for _, config, seed in rows}
        parameters = dict(self.parameters)
        for step in self.growth:
            seeds = seeds + [s for s in step.seeds if s not in seeds]
            for key, values in step.parameters.items():
                old = parameters.get(key)
                if isinstance(old, list):  # the validator refuses anything else
                    known = {value_key(v) for v in old}
                    parameters[key] = old + [v for v in values if value_key(v) not in known]
            if not (step.seeds or step.parameters):
                continue
            grown = self.model_copy(update={"parameters": parameters, "seeds": seeds, "growth": []})
            grown_pairs = ((c, s) for c in grown._configs() for s in seeds)
            for name, (config, seed) in zip(_trial_names(grown), grown_pairs, strict=True):
                pair = pair_key(config, seed)
                if pair in have:
                    continue  # a trial of the sweep already: kept as it is, under its own name and index
                have.add(pair)
                if name in taken:
                    name = numbered(name, len(rows), taken)
                taken.add(name)
                rows.append((name, config, seed))
        return rows

    def _budgets(self) -> dict[str, int]:
        """Trial name -> the total_timesteps a growth step gave it (``extend --top``; the last step wins)."""
        return {name: step.total_timesteps for step in self.growth if step.total_timesteps for name in step.trials}

    def _trial_spec(self, name: str, config: dict[str, Any], seed: int, budgets: dict[str, int]) -> ExperimentSpec:
        extra: dict[str, Any] = {"total_timesteps": budgets[name]} if name in budgets else {}
        return self.experiment.replace(**config, **extra, seed=seed, name=name)

    def with_growth(self, growth: list[Growth]) -> SweepSpec:
        """This sweep with ``growth`` as its growth steps (validated: SpecError naming ``growth``)."""
        from rlcloud.specs.building import build_model

        data = self.model_dump()
        data["growth"] = [step.model_dump() for step in growth]
        return build_model(SweepSpec, data)

    def trial_table(self) -> list[tuple[str, dict[str, Any], int]]:
        """``(name, params, seed)`` of every trial in index order, without building their specs (cheap)."""
        return self._rows()

    def trial_params(self, index: int) -> tuple[dict[str, Any], int]:
        """The parameter values and seed of trial ``index`` (configuration-major, seed-minor; then the trials
        each growth step added)."""
        if not self.growth:
            seeds = self.seed_list
            if not 0 <= index < self.configurations * len(seeds):
                raise IndexError(f"sweep {self.name} has no trial {index}")
            return self._configs()[index // len(seeds)], seeds[index % len(seeds)]
        rows = self._rows()
        if not 0 <= index < len(rows):
            raise IndexError(f"sweep {self.name} has no trial {index}")
        return rows[index][1], rows[index][2]

    def trials(self) -> list[Trial]:
        """Every trial, in index order; each trial's spec is validated like any experiment's.

        Raises SpecError naming the trial and the field when a combination is not a valid experiment.
        """
        rows = self._rows()
        budgets = self._budgets()
        trials: list[Trial] = []
        # (field, message) -> the trials with that problem, and its values: a problem many trials share (a
        # mistyped parameter: all of them) is said once, not once per trial
        problems: dict[tuple[str, str], tuple[list[str], list[Any]]] = {}
        for index, (name, config, seed) in enumerate(rows):
            try:
                spec = self._trial_spec(name, config, seed, budgets)
            except SpecError as exc:
                for p in exc.problems:
                    found, values = problems.setdefault((p.field, p.message), ([], []))
                    found.append(name)
                    if p.value not in values:
                        values.append(p.value)
                continue
            trials.append(Trial(index=index, name=name, params=config, seed=seed, spec=spec))
        if problems:
            raise SpecError(
                [
                    SpecProblem(
                        f"parameters.{field}",
                        f"{which_trials(found, len(rows))}: {_agent_hint(self.experiment.agent, field, message)}"
                        + ("" if len(values) == 1 else f" (got {', '.join(map(repr, values))})"),
                        values[0] if len(values) == 1 else None,
                    )
                    for (field, message), (found, values) in problems.items()
                ]
            )
        return trials

    def trial_names(self) -> list[str]:
        """Every trial's name, in index order (without building the trials' specs), grown trials included."""
        return [name for name, _, _ in self._rows()] if self.growth else _trial_names(self)

    def trial(self, index: int) -> Trial:
        """Trial ``index`` alone (what a pod of the sweep's Indexed Job runs)."""
        if self.growth:
            rows = self._rows()
            if not 0 <= index < len(rows):
                raise IndexError(f"sweep {self.name} has no trial {index}")
            name, config, seed = rows[index]
        else:
            config, seed = self.trial_params(index)
            name = _trial_names(self)[index]
        return Trial(index=index, name=name, params=config, seed=seed, spec=self._trial_spec(name, config, seed,
                     self._budgets()))  # fmt: skip

    @property
    def num_trials(self) -> int:
        """Configurations x seeds, and the trials growth steps added."""
        if self.growth:
            return len(self._rows())
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
        """Build from a mapping; an ``experiment`` given as a file name resolves against ``base_dir``. A top-level
        ``code:`` (relative to ``base_dir``) is the experiment's code."""
        from rlcloud.specs.building import build_model, resolve_code_path, resolve_experiment_reference

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
        # `code:` of the sweep (relative to the sweep file) is its experiment's: every trial runs that one archive
        code = {"code": resolve_code_path(raw.pop("code"), base)} if "code" in raw else {}
        try:
            if isinstance(experiment, Path):
                raw["experiment"] = ExperimentSpec.from_file(experiment, **code)
            elif isinstance(experiment, dict):
                raw["experiment"] = ExperimentSpec.from_dict(experiment, base_dir=base, **code)
            elif isinstance(experiment, ExperimentSpec) and code:
                raw["experiment"] = experiment.replace(**code)
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


def trial_indices_text(indices: list[int]) -> str:
    """Trial indices as ranges, the way Kubernetes writes an Indexed Job's ``completedIndexes``: ``"0-2,5"``
    (in the order given; consecutive runs become ranges)."""
    parts: list[str] = []
    start = prev = None
    for index in [*indices, None]:
        if start is not None and (index is None or prev is None or index != prev + 1):
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if index is not None:
            start = index if start is None else start
            prev = index
    return ",".join(parts)


def parse_trial_indices(text: str) -> list[int]:
    """``"0-2,5"`` -> [0, 1, 2, 5] (what :func:`trial_indices_text` wrote). ValueError when it is not that."""
    out: list[int] = []
    for part in text.split(","):
        low, sep, high = part.partition("-")
        if not low.isdigit() or (sep and not high.isdigit()):
            raise ValueError(f"expected indices such as 0-2,5, not {text!r}")
        first, last = int(low), int(high) if sep else int(low)
        if last < first or last - first >= MAX_TRIALS:
            raise ValueError(f"{part!r} is no range of trial indices")
        out.extend(range(first, last + 1))
    if len(out) > MAX_TRIALS:
        raise ValueError(f"more than {MAX_TRIALS} trial indices")
    return out


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


def _trial_names(sweep: SweepSpec) -> list[str]:
    """Stable, readable, unique DNS-1123 names, e.g. ``lr3e-4--bs10--seed2`` (same values, same name)."""
    seeds = sweep.seed_list
    if sweep.sampler == "tpe":  # values come when a trial starts: numbered (one seed each)
        return [f"tpe{i + 1}" for i in range(sweep.samples or 0)]
    varying = [k for k, v in sweep.parameters.items() if isinstance(v, Distribution) or len(v) > 1]
    names: list[str] = []
    abbreviations = {k: abbreviate(k) for k in varying}
    for config in sweep._configs():
        named = [f"{abbreviations[k]}{label_part(value_text(config[k]))}" for k in varying]  # once per config
        for seed in seeds:
            parts = list(named)
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
        candidate = numbered(name, i, taken)
        taken.add(candidate)
        names[i] = candidate
    return names
