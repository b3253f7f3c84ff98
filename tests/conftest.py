"""Shared test configuration: the local fake servers' fixtures are plugins every test directory can use."""

from __future__ import annotations

import os

# tf-keras must be what tf.keras is before TensorFlow is first imported anywhere in the test session.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# fake-gcs-server fixtures (session server, per-test buckets) for every test directory
pytest_plugins = ["tests.fakes.gcs_fixtures"]
