"""Fixtures for the storage tests (the GCS fakes are tests/conftest.py's plugins): a store of each kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rlcloud.storage.local import LocalStore


@pytest.fixture(params=["local", "gcs"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    return request.getfixturevalue("gcs_store")
