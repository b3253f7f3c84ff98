"""Spec test helpers: a minimal valid experiment and the SpecError a bad one raises."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rlcloud.errors import SpecError


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
