"""Shared helpers for the spec tests: a minimal valid experiment and a way to read a SpecError's problems."""

from __future__ import annotations

from pathlib import Path

import pytest

SPECS_DIR = Path(__file__).parent


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current directory, so ./configs/ lookups see only what a test puts there."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
