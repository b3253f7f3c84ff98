"""Results stores: ``gs://bucket/prefix`` (Google Cloud Storage) or a local directory, same semantics.

- :func:`open_store` opens a location (stores.py); :class:`Store` is the interface (base.py).
- :class:`Syncer` mirrors a local results directory to a store incrementally and publishes checkpoints
  atomically (files first, then ``checkpoints/LATEST``); :func:`restore_latest` resumes from one.
- client.py: :func:`download`, :func:`read_metrics`, :func:`read_progress`, :func:`read_logs`,
  :func:`sync_tensorboard` for the Experiment facade and the CLI.

Nothing here imports ``google.cloud`` until a ``gs://`` location is used.
"""

from __future__ import annotations

from rlcloud.storage.base import ObjectInfo, PreconditionFailedError, Store, parse_gs_url
from rlcloud.storage.client import (
    download,
    read_evaluation,
    read_logs,
    read_metrics,
    read_progress,
    sync_tensorboard,
    tail_log,
)
from rlcloud.storage.stores import open_store
from rlcloud.storage.sync import Syncer, SyncHook, SyncReport, restore_latest

__all__ = [
    "ObjectInfo",
    "PreconditionFailedError",
    "Store",
    "SyncHook",
    "SyncReport",
    "Syncer",
    "download",
    "open_store",
    "parse_gs_url",
    "read_evaluation",
    "read_logs",
    "read_metrics",
    "read_progress",
    "restore_latest",
    "sync_tensorboard",
    "tail_log",
]
