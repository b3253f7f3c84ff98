"""Spec test helpers: a minimal valid experiment, a small CartPole one, and the SpecError a bad one raises."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rlcloud.errors import SpecError
from rlcloud.specs import ExperimentSpec

#: the gym environment most tests train on
CARTPOLE = {"type": "gym", "level": "CartPole-v1"}


def minimal_experiment(**changes: Any) -> dict[str, Any]:
    """The smallest valid experiment dict, with ``changes`` applied on top."""
    data: dict[str, Any] = {
        "name": "cartpole",
        "environment": {"type": "gym", "level": "CartPole-v1"},
        "agent": {"type": "ppo", "batch_size": 10},
        "episodes": 100,
    }
    data.update(changes)
    return data


def spec_error(build: Callable[[], object]) -> SpecError:
    """Run ``build``, which must raise SpecError, and return the error."""
    with pytest.raises(SpecError) as info:
        build()
    return info.value


def cartpole_spec(name: str = "cartpole", **overrides: object) -> ExperimentSpec:
    """A small CartPole PPO experiment (300 timesteps, seed 1); ``overrides`` replace its top-level fields."""
    data: dict[str, object] = {
        "name": name,
        "environment": dict(CARTPOLE),
        "agent": {"type": "ppo", "batch_size": 10, "learning_rate": 1e-3},
        "network": "auto",
        "total_timesteps": 300,
        "seed": 1,
        **overrides,
    }
    return ExperimentSpec.from_dict(data)
