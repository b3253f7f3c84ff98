"""TensorBoard's HParams for a sweep's trials: each trial's parameters and objective, so that TensorBoard's
HParams dashboard shows one row per trial, groups and filters the trials by parameter, and plots the
objective of each as a curve over timesteps.

Whoever starts a trial (the local sweeper, a sweep pod's runner for itself) sets ``RLCLOUD_TRIAL``
(:func:`trial_settings`); the runner then writes, before training, one event file into the trial's
``summaries/`` (:func:`write_hparams`) with

* the experiment's configuration (``hparams_config``): every swept parameter with its domain (a grid's
  values, a distribution's interval or choices) and ``seed``, and the objective as the metric;
* the trial's session (``hparams``): its values of those parameters and its seed, named after the trial.

The metric is not a number written once: it names the scalar the trainer already writes against timesteps
(``episode/mean_return_last_20``, or ``evaluation/mean_return`` for ``objective: evaluation``) in the
``rlcloud`` run below, so the dashboard reads the whole curve (its table shows the latest value).
TensorBoard's plugin (tensorboard.plugins.hparams) is what reads them back; tests/runner/test_hparams.py
does so.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlcloud.layout import SUMMARIES
from rlcloud.runenv import RunnerEnv

if TYPE_CHECKING:
    from rlcloud.specs.sweep import SweepSpec, Trial

__all__ = ["OBJECTIVE_RUN", "objective_tag", "trial_env", "trial_settings", "write_hparams"]

logger = logging.getLogger(__name__)

#: The run (a directory under ``summaries/``) where the trainer writes its scalars, the objective's among them.
OBJECTIVE_RUN = "rlcloud"
#: Episodes in the training objective's running mean (rlcloud.runner.loop.MEAN_WINDOW).
_WINDOW = 20


def objective_tag(objective: str) -> str:
    """The scalar the trainer writes for a sweep's ``objective``, against timesteps."""
    return "evaluation/mean_return" if objective == "evaluation" else f"episode/mean_return_last_{_WINDOW}"


def _plain(value: Any) -> bool | float | str:
    """A parameter's value as HParams holds one (a bool, a number or a string; anything else as its text)."""
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return str(value)


def _domain(values: Any) -> dict[str, Any]:
    """A parameter's domain: ``{"values": [...]}`` (a grid or choices) or ``{"interval": [low, high]}``."""
    from rlcloud.specs.sweep import Distribution

    if isinstance(values, Distribution):
        low_high = values.uniform or values.loguniform
        if low_high is not None:
            return {"interval": [float(low_high[0]), float(low_high[1])]}
        values = values.choice or []
    plain = [_plain(v) for v in values]
    if len({type(v) for v in plain}) > 1:  # HParams' discrete domains hold one type
        plain = [str(v) for v in plain]
    return {"values": list(dict.fromkeys(plain))}


def trial_settings(sweep: SweepSpec, trial: Trial) -> dict[str, Any]:
    """What ``RLCLOUD_TRIAL`` holds for ``trial``: its sweep, name, index, seed, parameter values, the
    objective's scalar and each swept parameter's domain."""
    return {
        "sweep": sweep.name,
        "trial": trial.name,
        "index": trial.index,
        "seed": trial.seed,
        "params": {k: _plain(v) for k, v in trial.params.items()},
        "objective": objective_tag(sweep.objective),
        "domains": {k: _domain(v) for k, v in sweep.parameters.items()},
    }


def trial_env(sweep: SweepSpec, trial: Trial, location: str) -> dict[str, str]:
    """The environment a sweep's trial runs with: its place in the sweep (``RLCLOUD_TRIAL``) and its early
    stopping (``RLCLOUD_EARLY_STOPPING``, when the sweep has some)."""
    from rlcloud.runner.early_stop import early_stopping_settings

    return RunnerEnv(
        early_stopping=early_stopping_settings(sweep, trial, location), trial=trial_settings(sweep, trial)
    ).to_env()


def write_hparams(workdir: str | Path, settings: Mapping[str, Any]) -> Path:
    """Write the trial's HParams (``settings``: :func:`trial_settings`) into ``<workdir>/summaries/``, one
    event file of its own; returns the directory (TensorBoard's run of the trial's session)."""
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp

    params = dict(settings.get("params") or {})
    domains = dict(settings.get("domains") or {})
    hparams: list[Any] = []
    for name in params:
        domain = domains.get(name) or {}
        if "interval" in domain:
            low, high = domain["interval"]
            hparams.append(hp.HParam(name, hp.RealInterval(float(low), float(high))))
        elif domain.get("values"):
            hparams.append(hp.HParam(name, hp.Discrete(list(domain["values"]))))
        else:
            hparams.append(hp.HParam(name))
    hparams.append(hp.HParam("seed"))
    objective = str(settings.get("objective") or objective_tag("mean_return"))
    metric = hp.Metric(objective, group=OBJECTIVE_RUN, display_name="objective", description=objective)
    logdir = Path(workdir) / SUMMARIES
    logdir.mkdir(parents=True, exist_ok=True)
    writer = tf.summary.create_file_writer(str(logdir), filename_suffix=".hparams")
    try:
        with writer.as_default():
            hp.hparams_config(hparams=hparams, metrics=[metric])
            values: dict[Any, Any] = {}
            for h in hparams:
                if h.name in params:
                    value = params[h.name]
                    # a domain of mixed types is held as text (_domain): so is the value
                    texts = isinstance(h.domain, hp.Discrete) and h.domain.dtype is str
                    values[h] = str(value) if texts and not isinstance(value, str) else value
            values["seed"] = int(settings.get("seed") or 0)
            hp.hparams(values, trial_id=str(settings.get("trial") or ""))
        writer.flush()
    finally:
        writer.close()
    return logdir
