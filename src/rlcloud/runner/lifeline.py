"""The runner's parent-death watch: a runner whose supervisor died stops after a checkpoint.

A local runner is started by its supervisor (:mod:`rlcloud.local.supervisor`), which records its exit code
and stops it on request. When the supervisor dies without doing so (``kill -9``, the OOM killer), the runner
would go on training, re-parented to init, where nobody can account for it. Two mechanisms end it:

- :func:`die_with_parent` (Linux), run in the child between fork and exec (``preexec_fn``): the kernel
  sends SIGTERM when the parent dies (``PR_SET_PDEATHSIG``); the runner's handler checkpoints and exits.
- :func:`watch_parent`, called by the runner at start: where no death signal is armed (not Linux, or a
  runner started some other way) and ``RLCLOUD_PARENT_PID`` names the parent, a daemon thread polls
  ``getppid()`` and sends the same SIGTERM to this process when the parent is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
from collections.abc import Callable

from rlcloud import runenv
from rlcloud.runenv import RunnerEnv

__all__ = ["PARENT_ENV", "armed_death_signal", "die_with_parent", "watch_parent"]

#: The environment variable through which a supervisor tells its runner its own pid.
PARENT_ENV = runenv.PARENT_PID

_PR_SET_PDEATHSIG = 1
_PR_GET_PDEATHSIG = 2


def _prctl() -> Callable[..., int] | None:
    """Libc's prctl, or None where there is none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl: Callable[..., int] = libc.prctl
        return prctl
    except (OSError, AttributeError):
        return None


def die_with_parent(parent_pid: int, sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child receive ``sig`` when ``parent_pid`` (the caller) dies.

    Resolve it in the parent (ctypes is loaded before the fork, the child only calls prctl). The kernel
    fires the signal when the *thread* that forked dies: call ``Popen`` from the main thread. A parent that
    died between fork and prctl is caught by comparing ``getppid()`` afterwards: the child then signals
    itself at once. Without prctl (not Linux) the returned function does nothing.
    """
    prctl = _prctl()

    def preexec() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), sig)

    return preexec


def armed_death_signal() -> int:
    """The parent-death signal armed for this process (0: none, or not Linux)."""
    prctl = _prctl()
    if prctl is None:
        return 0
    value = ctypes.c_int(0)
    if prctl(_PR_GET_PDEATHSIG, ctypes.byref(value), 0, 0, 0) != 0:
        return 0
    return int(value.value)


def watch_parent(interval: float = 1.0, sig: int = signal.SIGTERM) -> threading.Thread | None:
    """Send ``sig`` to this process once its parent (``RLCLOUD_PARENT_PID``) is gone; None when not needed.

    Nothing to do when no parent is named, or when the kernel will already signal its death
    (:func:`armed_death_signal`). Otherwise a daemon thread compares ``getppid()`` every ``interval``
    seconds: a re-parented process has another parent (init, or a subreaper).
    """
    parent = RunnerEnv.from_env().parent_pid
    if parent is None:
        return None
    if armed_death_signal():
        return None
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)
        return None
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(interval):
            if os.getppid() != parent:
                with contextlib.suppress(OSError):
                    os.kill(os.getpid(), sig)
                return

    thread = threading.Thread(target=run, name="rlcloud-parent-watch", daemon=True)
    thread.start()
    return thread
