"""The rules of ``sampler: tpe`` in a SweepSpec: what a sweep whose trials ask an Optuna study needs.

Each trial asks the study (rlcloud.storage.journal, kept in the sweep's results) for its configuration when it
starts and tells it the trial's mean return at its end, so a configuration runs with one seed, the objective is
the training mean return, and Optuna (the ``optuna`` extra) must be installed where the sweep is started and in
the runner's image. The parameters must be experiment fields: one configuration drawn from them is checked.
"""

from __future__ import annotations

import importlib.util
import random
from typing import TYPE_CHECKING

from rlcloud.errors import SpecError

if TYPE_CHECKING:
    from rlcloud.specs.sweep import SweepSpec

__all__ = ["tpe_problem"]


def tpe_problem(sweep: SweepSpec) -> str | None:
    """What makes ``sweep`` (``sampler: tpe``) invalid, or None."""
    if len(sweep.seed_list) != 1 or any(step.seeds for step in sweep.growth):
        return "sampler: tpe proposes one configuration per trial: give one seed (seeds: 1 or [S])"
    if not sweep.parameters:
        return "sampler: tpe needs parameters to search (distributions or lists of values)"
    if sweep.objective != "mean_return":
        return "sampler: tpe tells the study each trial's mean return: objective must be mean_return"
    if importlib.util.find_spec("optuna") is None:
        return "sampler: tpe needs Optuna, the optuna extra: pip install 'rlcloud[optuna]'"
    rng = random.Random(sweep.sampler_seed)
    probe = {k: v[0] if isinstance(v, list) else v.sample(rng) for k, v in sweep.parameters.items()}
    try:
        sweep.experiment.replace(**probe)
    except SpecError as exc:
        return f"parameters: {exc}"
    return None
