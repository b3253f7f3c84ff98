"""The local backend: experiments as background processes on this machine.

:mod:`rlcloud.local.backend` (the verbs), :mod:`rlcloud.local.state` (the on-disk record of a run) and
:mod:`rlcloud.local.supervisor` (the program that runs one role and applies the lifecycle rules).

The names below load on first use: ``python -m rlcloud.local.supervisor`` imports this package first, and
a package that imported the supervisor itself would make runpy warn ("found in sys.modules ... prior to
execution") at every supervisor start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlcloud.local.backend import DEFAULT_GRACE_PERIOD, LocalBackend
    from rlcloud.local.state import STATE_DIR

__all__ = ["DEFAULT_GRACE_PERIOD", "STATE_DIR", "LocalBackend"]

_LAZY = {
    "DEFAULT_GRACE_PERIOD": "rlcloud.local.backend",
    "LocalBackend": "rlcloud.local.backend",
    "STATE_DIR": "rlcloud.local.state",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'rlcloud.local' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)
