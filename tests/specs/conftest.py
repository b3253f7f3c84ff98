"""Shared helpers for the spec tests: a minimal valid experiment and a way to read a SpecError's problems."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlcloud.errors import SpecError

SPECS_DIR = Path(__file__).parent


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


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current directory, so ./configs/ lookups see only what a test puts there."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
