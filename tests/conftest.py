"""Shared test configuration: the local fake servers' fixtures are plugins every test directory can use."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

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

# No test may depend on the machine's speed (CONTRIBUTING.md): hypothesis' per-example deadline (200 ms by
# default) fails tests on a loaded machine (an example that takes 80 ms alone took 6.8 s at load ~10), so
# every hypothesis test runs without one. A test bounds its work by what it counts (memory, sizes), not time.
settings.register_profile("rlcloud", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "rlcloud"))

# fake-gcs-server fixtures (session server, per-test buckets) and the fake Google APIs of `rlcloud doctor` (a
# session fake every cluster create asks, a fresh one per test on demand) for every test directory
# and the finished training run the tests that read one share (tests/support/trained_run.py)
pytest_plugins = ["tests.fakes.gcs_fixtures", "tests.fakes.google_api_fixtures", "tests.support.trained_run"]


@pytest.fixture(scope="session", autouse=True)
def _isolated_working_directory() -> Iterator[Path]:
    """Every test runs in the session's fresh directory (after collection, which needs the repository)."""
    before = Path.cwd()
    os.chdir(_ISOLATED / "work")
    yield _ISOLATED / "work"
    os.chdir(before)


# ------------------------------------------------------------------------------------ the fast lane's markers
# `-m "not training and not processes"` is the fast lane (CONTRIBUTING.md): it spawns no process. A test that
# starts one (a runner, a supervisor, the CLI, a fake server run as a program) is marked `processes`, by hand
# or here when it uses a fixture that starts one; an unmarked test that spawns anyway fails, saying so.

#: Fixtures that start a process (fake-gcs-server is a program of its own).
PROCESS_FIXTURES = frozenset({"fake_gcs", "gcs_bucket", "gcs_store", "gcs_store_via", "faulty_proxy", "trained"})

_SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn"})
#: Probes libraries run once on first use (platform.processor() for TensorFlow's import, matplotlib's font
#: cache): not a test's process, and whichever test comes first would be blamed.
_LIBRARY_PROBES = frozenset({"uname", "fc-list"})
_spawned: list[str] = []
_watching = [False]


class SpawnInFastLaneError(RuntimeError):
    """A test without the ``processes`` marker started a process."""


def _audit(event: str, args: tuple[object, ...]) -> None:
    # Audit hooks cannot be removed: this one only acts while an unmarked test runs. Raising stops the spawn
    # at once (the test fails fast); the record catches code that swallows the error.
    if _watching[0] and event in _SPAWN_EVENTS:
        detail = args[1] if event == "subprocess.Popen" and len(args) > 1 else ""
        if isinstance(detail, (list, tuple)) and detail and Path(str(detail[0])).name in _LIBRARY_PROBES:
            return
        _spawned.append(f"{event} {detail!r}"[:200])
        raise SpawnInFastLaneError(f"started a process without the `processes` marker: {_spawned[-1]}")


sys.addaudithook(_audit)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``processes`` every test that uses a fixture starting a process (before ``-m`` selects)."""
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.processes)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Fail a test of the fast lane (neither ``training`` nor ``processes``) that starts a process."""
    fast = item.get_closest_marker("training") is None and item.get_closest_marker("processes") is None
    _spawned.clear()
    _watching[0] = fast
    try:
        yield
    finally:
        _watching[0] = False
    if fast and _spawned:
        pytest.fail(f"started a process without the `processes` marker: {_spawned[0]}", pytrace=False)
