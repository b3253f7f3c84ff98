"""Pytest plugin: the fake Google APIs of ``rlcloud doctor`` (:mod:`tests.fakes.google_apis`).

Load it with ``pytest_plugins = ["tests.fakes.google_api_fixtures"]`` (in tests/conftest.py).

- ``_google_apis_for_every_test`` (session, autouse): one fake of a project where everything is set up, and
  ``RLCLOUD_GOOGLE_API_HOST`` pointing at it for the whole session (subprocesses inherit it). Creating a GKE
  cluster runs the doctor's cheap checks first; on the ClusterManager fake they ask this fake, never Google.
- ``google_apis``: a fresh fake for one test, ``RLCLOUD_GOOGLE_API_HOST`` pointing at it; the test sets its
  :attr:`~tests.fakes.google_apis.FakeGoogleApis.state` up (and breaks it) as it needs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from rlcloud.gke.doctor import API_HOST_ENV
from tests.fakes.google_apis import FakeGoogleApis


@pytest.fixture(scope="session", autouse=True)
def _google_apis_for_every_test() -> Iterator[FakeGoogleApis]:
    before = os.environ.get(API_HOST_ENV)
    with FakeGoogleApis() as fake:
        os.environ[API_HOST_ENV] = fake.url
        try:
            yield fake
        finally:
            if before is None:
                os.environ.pop(API_HOST_ENV, None)
            else:
                os.environ[API_HOST_ENV] = before


@pytest.fixture
def google_apis(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGoogleApis]:
    """A fresh fake of the Google APIs the doctor asks, for this test only."""
    with FakeGoogleApis() as fake:
        monkeypatch.setenv(API_HOST_ENV, fake.url)
        yield fake
