"""Fixtures for the storage tests: the GCS fakes (tests/fakes/gcs_fixtures.py).

Once tests/conftest.py lists ``pytest_plugins = ["tests.fakes.gcs_fixtures"]`` this import is redundant
(and harmless: these definitions shadow the plugin's for this directory only).
"""

from tests.fakes.gcs_fixtures import (  # noqa: F401 - fixtures are found by name
    fake_gcs,
    faulty_proxy,
    gcs_bucket,
    gcs_store,
    gcs_store_via,
)
