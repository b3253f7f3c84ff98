"""Fixtures for the local backend: a LocalBackend factory over the stand-in runner."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rlcloud.local import LocalBackend
from rlcloud.local.machine import CHILDREN
from tests.support.local import write_standin_python


@pytest.fixture
def standin_python(tmp_path: Path) -> Path:
    """A ``python`` for LocalBackend that runs the stand-in for ``-m rlcloud.runner`` and is Python otherwise."""
    return write_standin_python(tmp_path)


@pytest.fixture
def make_backend(tmp_path: Path, standin_python: Path) -> Iterator[Callable[..., LocalBackend]]:
    """LocalBackend factory over the stand-in runner; every experiment is stopped afterwards."""
    made: list[LocalBackend] = []

    def make(grace_period: float = 5, root: str | None = None, **env: str) -> LocalBackend:
        root = root or str(tmp_path / "results")
        b = LocalBackend(root, grace_period=grace_period, python=str(standin_python), env=env)
        made.append(b)
        return b

    yield make
    for b in made:
        for name in b.list():
            b.stop(name)
    for child in list(CHILDREN):  # a supervisor exits just after its exit code is recorded
        child.wait(30)
