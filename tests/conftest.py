"""Shared test configuration: the local fake servers' fixtures are plugins every test directory can use."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# No test may depend on the working directory, the user's home or cache (the README's two commands pass in
# either order): the whole session runs in a fresh directory that is its HOME, cache and working directory.
# Set before anything else is imported, so that subprocesses (runners, supervisors) inherit it too.
_ISOLATED = Path(tempfile.mkdtemp(prefix="rlcloud-tests-"))
for _var, _sub in (("HOME", "home"), ("XDG_CACHE_HOME", "cache"), ("XDG_CONFIG_HOME", "config")):
    (_ISOLATED / _sub).mkdir()
    os.environ[_var] = str(_ISOLATED / _sub)
(_ISOLATED / "work").mkdir()
os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
os.environ.pop("KUBECONFIG", None)
os.environ.pop("RLCLOUD_RESULTS", None)

# tf-keras must be what tf.keras is before TensorFlow is first imported anywhere in the test session.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# fake-gcs-server fixtures (session server, per-test buckets) and the fake Google APIs of `rlcloud doctor` (a
# session fake every cluster create asks, a fresh one per test on demand) for every test directory
pytest_plugins = ["tests.fakes.gcs_fixtures", "tests.fakes.google_api_fixtures"]


@pytest.fixture(scope="session", autouse=True)
def _isolated_working_directory() -> Iterator[Path]:
    """Every test runs in the session's fresh directory (after collection, which needs the repository)."""
    before = Path.cwd()
    os.chdir(_ISOLATED / "work")
    yield _ISOLATED / "work"
    os.chdir(before)
