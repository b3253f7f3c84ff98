"""The on-disk record of one local run, and the process helpers the backend and the supervisor share.

Everything another Python process needs to find, watch and stop a local run lives in its work
directory (``<results root>/<name>/`` for a local root, a cache directory for a gs:// root)::

    spec.yaml                    the run's spec of record (rlcloud.record), written once
    .rlcloud-local/spec.yaml     the resolved spec the roles run with now (budgets may grow on resume)
    logs/<role>-<index>.log      each role's stdout/stderr (appended across restarts)
    .rlcloud-local/state.json    pids, ports, start time, stop/pause requests
    .rlcloud-local/<role>-<index>.exit   the role's exit code, written by its supervisor
    .rlcloud-local/<role>-<index>.runner the role's runner process (pid, start time), written by its supervisor
    .rlcloud-local/<role>-<index>.restarts  how often its supervisor restarted a stalled runner (this start)
    .rlcloud-local/<role>-<index>.why    why its supervisor ended the runner itself (stalled again), if it did
    .rlcloud-local/<role>-<index>.lock   flock-ed by the role's supervisor and runner for as long as they live
    .rlcloud-local/control.lock  flock-ed by a start or a stop while it decides and acts (one at a time)

The locks are ``flock(2)`` locks: the kernel drops them with the last process holding them, so a crash or a
reboot never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlcloud.errors import ConflictError, NotFoundError
from rlcloud.roles import poll_until, role_label

__all__ = [
    "STATE_DIR",
    "SWEEP_STATE_DIR",
    "RoleInfo",
    "RunState",
    "acquire_flock",
    "alive",
    "atomic_write",
    "flock_held",
    "free_ports",
    "hold_flock",
    "last_line",
    "read_sweep_state",
    "scheduler_alive",
    "tail",
    "try_flock",
    "update_sweep_state",
]

logger = logging.getLogger(__name__)

STATE_DIR = ".rlcloud-local"
#: Extra seconds a stop waits before it kills a role's whole process group, supervisor included (only
#: when the supervisor itself is stuck: it kills its runner after the grace period).
GROUP_KILL_MARGIN = 10.0
POLL_S = 0.2


@dataclass(frozen=True)
class RoleInfo:
    """One role instance as recorded in state.json: its supervisor's pid and identity."""

    role: str
    index: int
    pid: int
    started: float
    port: int | None = None
    starttime: str | None = None  # /proc/<pid>/stat field 22: tells our process from a reused pid

    @property
    def label(self) -> str:
        """``role-index``."""
        return role_label(self.role, self.index)


# ------------------------------------------------------------------------------------------ processes


def proc_starttime(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (Linux), which tells our process from a later one with its pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after its last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def alive(pid: int, starttime: str | None) -> bool:
    """Whether ``pid`` is still the process we started (not a zombie, not a reused pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return starttime is None  # someone else's process: our pid was reused
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): the kill probe is all we have
    after = stat[stat.rindex(")") + 2 :].split()
    if after[0] in ("Z", "X"):
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)  # reap it if it is our child
        return False
    return starttime is None or after[19] == starttime


def signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the process group ``pid`` leads (each supervisor leads its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def free_ports(count: int) -> list[int]:
    """Ports the kernel picks as free now. Held together so that they are distinct; a small race with
    other programs remains until the env servers bind them (SO_REUSEADDR is on)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old or the new content, never a part."""
    # One temporary name per process and thread: two threads writing the same file must not share one.
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def try_flock(path: Path) -> int | None:
    """Open ``path`` and take an exclusive ``flock`` on it without waiting: the open descriptor (the lock is
    held until it is closed in every process that has it), or None when another holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def acquire_flock(path: Path, timeout: float, interval: float = 0.05) -> int | None:
    """:func:`try_flock` until it succeeds or ``timeout`` seconds have passed (then None)."""
    deadline = time.monotonic() + timeout
    while True:
        fd = try_flock(path)
        if fd is not None or time.monotonic() >= deadline:
            return fd
        time.sleep(interval)


@contextlib.contextmanager
def hold_flock(path: Path, timeout: float, what: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` for the ``with`` block, waiting up to ``timeout`` seconds for
    it; ConflictError naming ``what`` holds it when the wait is over."""
    fd = try_flock(path)
    if fd is None:
        # said once, before waiting: what the caller waits for (and what a test can wait on, not a clock)
        logger.info("waiting up to %g s for %s (it holds %s)", timeout, what, path)
        fd = acquire_flock(path, timeout)
    if fd is None:
        raise ConflictError(f"{what} has held {path} for more than {timeout:g} s; try again when it is done")
    try:
        yield
    finally:
        os.close(fd)  # closing the last descriptor drops the lock


def flock_held(path: Path) -> bool:
    """Whether some process holds an exclusive ``flock`` on ``path`` now.

    Probed with a shared lock, which conflicts only with an exclusive one; the probe itself never blocks a
    holder for long (it is released at once), and holders take their lock with a retry for that moment.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a log (read from its last 16 KiB)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            text = fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def last_line(path: Path) -> str:
    """The last error-looking line of a log (what a one-line reason should show)."""
    lines = tail(path, 40).splitlines()
    for line in reversed(lines):
        if "Error" in line or "ERROR" in line or "error" in line:
            return line.strip()[-300:]
    return lines[-1].strip()[-300:] if lines else ""


# ---------------------------------------------------------------------------------------------- state


class RunState:
    """The on-disk record of one local run (see the module docstring)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.state_dir = workdir / STATE_DIR
        self.state_file = self.state_dir / "state.json"
        self.logs_dir = workdir / "logs"
        self.spec_file = self.state_dir / "spec.yaml"

    def current_spec_file(self) -> Path:
        """The spec the roles last ran with (runs started before it was kept here: the spec of record)."""
        return self.spec_file if self.spec_file.exists() else self.workdir / "spec.yaml"

    def exists(self) -> bool:
        """Whether a run was ever started in this work directory."""
        return self.state_file.exists()

    def read(self) -> dict[str, Any]:
        """state.json; NotFoundError when the run was never started."""
        try:
            return dict(json.loads(self.state_file.read_text(encoding="utf-8")))
        except FileNotFoundError as exc:
            raise NotFoundError(f"no local experiment in {self.workdir}") from exc

    def write(self, state: dict[str, Any]) -> None:
        """Replace state.json atomically."""
        atomic_write(self.state_file, json.dumps(state, indent=1) + "\n")

    def update(self, **changes: Any) -> dict[str, Any]:
        """Change some keys of state.json; returns the new state."""
        state = self.read()
        state.update(changes)
        self.write(state)
        return state

    def roles(self, state: dict[str, Any] | None = None) -> list[RoleInfo]:
        """The recorded role instances."""
        state = self.read() if state is None else state
        return [RoleInfo(**r) for r in state.get("roles", [])]

    def exit_file(self, label: str) -> Path:
        """Where the supervisor of ``label`` records its runner's exit code."""
        return self.state_dir / f"{label}.exit"

    def exit_code(self, label: str) -> int | None:
        """The recorded exit code of ``label``, or None while it runs (or never ran)."""
        try:
            return int(self.exit_file(label).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def restarts_file(self, label: str) -> Path:
        """Where the supervisor of ``label`` counts the times it started a stalled runner again."""
        return self.state_dir / f"{label}.restarts"

    def why_file(self, label: str) -> Path:
        """Where the supervisor of ``label`` says why it ended the runner itself (a stall), when it did."""
        return self.state_dir / f"{label}.why"

    def restarts(self, label: str) -> int:
        """How often the supervisor of ``label`` restarted its runner in this start of the run (0 when never)."""
        try:
            return int(self.restarts_file(label).read_text().strip() or 0)
        except (OSError, ValueError):
            return 0

    def log_file(self, label: str) -> Path:
        """The log file of ``label``."""
        return self.logs_dir / f"{label}.log"

    @property
    def control_lock(self) -> Path:
        """The lock a start or a stop holds while it decides and acts, so that two never interleave."""
        return self.state_dir / "control.lock"

    def lock_file(self, label: str) -> Path:
        """The lock ``label``'s supervisor takes, and its runner inherits, for as long as they live."""
        return self.state_dir / f"{label}.lock"

    def runner_file(self, label: str) -> Path:
        """Where the supervisor of ``label`` records its runner's pid and start time."""
        return self.state_dir / f"{label}.runner"

    def write_runner(self, label: str, pid: int) -> None:
        """Record the runner process of ``label`` (so that a stop finds it even without its supervisor)."""
        atomic_write(self.runner_file(label), json.dumps({"pid": pid, "starttime": proc_starttime(pid)}) + "\n")

    def runner(self, label: str) -> tuple[int, str | None] | None:
        """The recorded runner of ``label`` (pid, start time), or None."""
        try:
            data = json.loads(self.runner_file(label).read_text(encoding="utf-8"))
            return int(data["pid"]), data.get("starttime")
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def runner_alive(self, label: str) -> bool:
        """Whether the recorded runner of ``label`` still runs (checked by its identity, not just its pid)."""
        runner = self.runner(label)
        return runner is not None and alive(*runner)

    def role_alive(self, role: RoleInfo) -> bool:
        """Whether ``role`` still runs: no exit code recorded, and its supervisor or its runner is alive (a
        runner whose supervisor was killed goes on until it notices, checkpoints and exits)."""
        if self.exit_code(role.label) is not None:
            return False
        return alive(role.pid, role.starttime) or self.runner_alive(role.label)

    def role_busy(self, role: RoleInfo) -> bool:
        """Whether any process of ``role`` still lives: its supervisor (maybe stopping the other roles after
        its runner ended), its runner, or anything else holding the role's lock."""
        return (
            alive(role.pid, role.starttime) or self.runner_alive(role.label) or flock_held(self.lock_file(role.label))
        )

    def stop_roles(self, roles: Sequence[RoleInfo], grace_period: float, *, reap: bool = True) -> None:
        """SIGTERM each supervisor (it forwards to its runner and kills it after ``grace_period``), or the
        runner itself when its supervisor is gone; SIGKILL the groups still alive a little later. Returns when
        every role has ended."""
        for role in roles:
            if not self.role_alive(role):
                continue
            runner = self.runner(role.label)
            if alive(role.pid, role.starttime):
                target = role.pid
            elif runner is not None and alive(*runner):
                target = runner[0]  # orphaned: nobody forwards the signal for it
            else:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(target, signal.SIGTERM)
        # role_alive, not the supervisor's pid: a supervisor may itself be busy stopping the others.
        poll_until(
            lambda: True if not any(self.role_alive(r) for r in roles) else None,
            time.monotonic() + grace_period + GROUP_KILL_MARGIN,
            interval=POLL_S,
        )
        for role in roles:
            if self.role_alive(role):
                logger.warning("%s did not stop within %g s; killing it", role.label, grace_period)
                # The runner stays in its supervisor's process group even once the supervisor is dead.
                signal_group(role.pid, signal.SIGKILL)
                runner = self.runner(role.label)
                if runner is not None and alive(*runner):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(runner[0], signal.SIGKILL)
        if not reap:
            return
        # Each supervisor exits right after recording its runner's exit code; give them that moment.
        poll_until(
            lambda: True if not any(alive(r.pid, r.starttime) or self.runner_alive(r.label) for r in roles) else None,
            time.monotonic() + 5,
            interval=0.05,
        )


# ---------------------------------------------------------------------------------------------- sweeps

#: A local sweep's state directory, inside its work directory (state.json, sweep.yaml, sweeper.log).
SWEEP_STATE_DIR = ".rlcloud-sweep"


def read_sweep_state(statedir: Path) -> dict[str, Any]:
    """The sweep's state.json (pid of the scheduler, results root, stop request); {} when absent."""
    try:
        return dict(json.loads((statedir / "state.json").read_text(encoding="utf-8")))
    except (FileNotFoundError, ValueError):
        return {}


def update_sweep_state(statedir: Path, **changes: Any) -> dict[str, Any]:
    """Change keys of state.json atomically; returns the new state."""
    state = read_sweep_state(statedir)
    state.update(changes)
    atomic_write(statedir / "state.json", json.dumps(state, indent=1) + "\n")
    return state


def scheduler_alive(statedir: Path) -> bool:
    """Whether the sweep's scheduler process is running."""
    state = read_sweep_state(statedir)
    pid = state.get("pid")
    return isinstance(pid, int) and alive(pid, state.get("starttime"))
