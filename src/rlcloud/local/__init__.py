"""The local backend: experiments as background processes on this machine.

:mod:`rlcloud.local.backend` (the verbs), :mod:`rlcloud.local.state` (the on-disk record of a run) and
:mod:`rlcloud.local.supervisor` (the program that runs one role and applies the lifecycle rules).
"""

from rlcloud.local.backend import DEFAULT_GRACE_PERIOD, LocalBackend
from rlcloud.local.state import STATE_DIR

__all__ = ["DEFAULT_GRACE_PERIOD", "STATE_DIR", "LocalBackend"]
