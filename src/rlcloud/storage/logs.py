"""Ship a process's own output to its results: :func:`tee_output` copies everything written to the
stdout/stderr file descriptors (Python, C++ TensorFlow logs, child processes) into ``logs/<role>-<index>.log``
of the work directory, which the :class:`~rlcloud.storage.sync.Syncer` uploads like any other file, so the
logs outlive the pod. The original streams still receive everything (``kubectl logs`` keeps working).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["drain_output", "restore_tees", "tee_output"]

# Read end of each active tee's pipe -> [bytes read, bytes written to the log], for drain_output().
_active: dict[int, list[int]] = {}

# The restore function of each tee still in place, oldest first, for restore_tees().
_restorers: list[Callable[[], None]] = []


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _pump(read_fd: int, out_fd: int, log: object, lock: threading.Lock, counts: list[int]) -> None:
    # Never stop reading: a writer blocked on a full pipe would hang the whole process.
    while True:
        try:
            chunk = os.read(read_fd, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        counts[0] += len(chunk)
        with contextlib.suppress(OSError):
            _write_all(out_fd, chunk)
        with lock, contextlib.suppress(OSError, ValueError):
            log.write(chunk)  # type: ignore[attr-defined]
        counts[1] += len(chunk)
    _active.pop(read_fd, None)
    os.close(read_fd)


def drain_output(timeout: float = 1.0) -> None:
    """Wait (up to ``timeout``) until what was written so far is in the tee'd log files.

    The copy runs in background threads; a sync that should include the latest lines (the last one, at
    exit) calls this first.
    """
    import fcntl
    import termios
    import time

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    deadline = time.monotonic() + timeout
    for read_fd, counts in list(_active.items()):
        pending = bytearray(4)
        quiet = 0
        while time.monotonic() < deadline and quiet < 2:
            try:
                fcntl.ioctl(read_fd, termios.FIONREAD, pending)
            except OSError:
                break
            # Nothing left in the pipe and what the pump read is in the file, seen twice in a row: the
            # second look covers a chunk the pump had just read but not yet counted.
            drained = int.from_bytes(pending, sys.byteorder) == 0 and counts[0] == counts[1]
            quiet = quiet + 1 if drained else 0
            time.sleep(0.005)


def tee_output(path: str | os.PathLike[str], *, fds: Sequence[int] = (1, 2)) -> Callable[[], None]:
    """Copy what is written to ``fds`` (default stdout and stderr) into ``path`` (appended), from now on.

    Works at the file-descriptor level, so output of C extensions and of child processes that inherit
    the descriptors is captured too. Returns a function that restores the descriptors and waits (up to a
    second) for the copy to catch up; calling it more than once is harmless.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    log = open(target, "ab", buffering=0)  # noqa: SIM115 - closed by the returned function
    lock = threading.Lock()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved: dict[int, int] = {}
    pumps: list[threading.Thread] = []
    for fd in fds:
        read_fd, write_fd = os.pipe()
        saved[fd] = os.dup(fd)
        os.dup2(write_fd, fd)
        os.close(write_fd)
        counts = [0, 0]
        _active[read_fd] = counts
        pump = threading.Thread(
            target=_pump, args=(read_fd, saved[fd], log, lock, counts), name=f"rlcloud-tee-{fd}", daemon=True
        )
        pump.start()
        pumps.append(pump)
    restored = threading.Event()

    def restore() -> None:
        if restored.is_set():
            return
        restored.set()
        with contextlib.suppress(ValueError):
            _restorers.remove(restore)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        for fd, original in saved.items():
            os.dup2(original, fd)  # drops our end of the pipe: the pump sees EOF once children are gone
        for pump in pumps:
            pump.join(1.0)
        for original in saved.values():
            if not any(p.is_alive() for p in pumps):
                os.close(original)
        if not any(p.is_alive() for p in pumps):
            log.close()

    _restorers.append(restore)
    return restore


def restore_tees() -> None:
    """Undo every :func:`tee_output` still in place, newest first: what a process that runs several runs in
    turn (a warm sweep pod, rlcloud.runner.warm) calls between them, so that a run's output goes to its own
    log only."""
    for restore in reversed(list(_restorers)):
        restore()
