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
import stat
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from rlcloud.errors import ConflictError, NotFoundError, RecordError
from rlcloud.layout import LOGS, SPEC, SWEEP_SPEC, log_path
from rlcloud.roles import role_label
from rlcloud.storage.base import INTERNAL_PREFIX
from rlcloud.storage.local import open_within
from rlcloud.stored import read_record_file
from rlcloud.waiting import poll_until

if TYPE_CHECKING:
    from rlcloud.specs.sweep import SweepSpec

__all__ = [
    "STATE_DIR",
    "SWEEP_STATE_DIR",
    "RoleInfo",
    "RunState",
    "acquire_flock",
    "atomic_write",
    "flock_held",
    "free_ports",
    "hold_flock",
    "last_line",
    "ours",
    "proc_identity",
    "read_sweep_spec",
    "read_sweep_state",
    "recorded_text",
    "scheduler_alive",
    "tail",
    "try_flock",
    "update_sweep_state",
]

logger = logging.getLogger(__name__)

#: Internal (:data:`~rlcloud.storage.base.INTERNAL_PREFIX`): a store never holds, lists or returns it.
STATE_DIR = INTERNAL_PREFIX + "local"
#: Extra seconds a stop waits before it kills a role's whole process group, supervisor included (only
#: when the supervisor itself is stuck: it kills its runner after the grace period).
GROUP_KILL_MARGIN = 10.0
POLL_S = 0.2


@dataclass(frozen=True)
class RoleInfo:
    """One role instance as recorded in state.json: its supervisor's pid and the identity that proves it is
    the process rlcloud started (see :func:`ours`)."""

    role: str
    index: int
    pid: int
    started: float
    port: int | None = None
    starttime: str | None = None  # /proc/<pid>/stat field 22: tells our process from a reused pid
    host: str | None = None
    cmdline: tuple[str, ...] | None = None
    #: Run by a sweep's warm worker (rlcloud.local.worker): ``pid`` goes on to other trials after this one
    worker: bool = False

    @property
    def label(self) -> str:
        """``role-index``."""
        return role_label(self.role, self.index)

    @property
    def identity(self) -> dict[str, Any]:
        """The supervisor's recorded identity, as :func:`ours` checks it."""
        return {"pid": self.pid, "starttime": self.starttime, "host": self.host, "cmdline": self.cmdline}

    @classmethod
    def from_record(cls, record: Any) -> RoleInfo | None:
        """A role from a state.json entry, or None when the entry is not one (a record is input: a planted or
        damaged file must not crash a status or a stop)."""
        if not isinstance(record, dict):
            return None
        role, index, pid = record.get("role"), record.get("index"), record.get("pid")
        started, port, starttime = record.get("started", 0.0), record.get("port"), record.get("starttime")
        host, cmdline = record.get("host"), record.get("cmdline")
        if not (isinstance(role, str) and _is_int(index) and _is_int(pid)):
            return None
        if not isinstance(started, int | float) or isinstance(started, bool):
            started = 0.0
        return cls(
            role=role,
            index=index,
            pid=pid,
            started=float(started),
            port=port if _is_int(port) else None,
            starttime=starttime if isinstance(starttime, str) else None,
            host=host if isinstance(host, str) else None,
            cmdline=tuple(cmdline) if isinstance(cmdline, list) and all(isinstance(a, str) for a in cmdline) else None,
            worker=record.get("worker") is True,
        )


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# ------------------------------------------------------------------------------------------ processes


def _proc_facts(pid: int) -> tuple[str, str, tuple[str, ...]] | None:
    """``(state, start time, command line)`` of ``pid`` as the kernel reports them now, or None when it cannot
    say (no such process, or neither /proc nor ``ps`` answers)."""
    try:
        line = Path(f"/proc/{pid}/stat").read_text()
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return None if Path("/proc/self/stat").exists() else _ps_facts(pid)
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after its last ')'.
    fields = line[line.rindex(")") + 2 :].split()
    if len(fields) <= 19:
        return None
    return fields[0], fields[19], tuple(raw.decode("utf-8", "replace").split("\0")[:-1])


def _ps_facts(pid: int) -> tuple[str, str, tuple[str, ...]] | None:
    """:func:`_proc_facts` where there is no /proc (macOS): ``ps`` gives the state, the start time and the
    arguments joined by spaces (one item: compared with the recorded command line joined the same way)."""
    import subprocess

    try:
        out = subprocess.run(
            ["ps", "-ww", "-p", str(pid), "-o", "stat=", "-o", "lstart=", "-o", "args="],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    parts = out.strip().split(None, 6)  # state, then lstart's 5 words ("Wed Nov 25 22:09:53 2026"), then args
    if len(parts) < 7:
        return None
    return parts[0][:1], " ".join(parts[1:6]), (parts[6],)


def proc_identity(pid: int, command: Sequence[str]) -> dict[str, Any]:
    """What proves later that ``pid`` is the process just started with ``command``:
    ``{"pid", "starttime", "host", "cmdline"}``.

    Called right after the process was started (``subprocess.Popen`` returns once the new program runs, so
    the kernel's command line is ``command``); a start time the system cannot tell is None, and :func:`ours`
    then never says yes.
    """
    facts = _proc_facts(pid)
    return {
        "pid": pid,
        "starttime": facts[1] if facts else None,
        "host": socket.gethostname(),
        "cmdline": [str(arg) for arg in command],
    }


def proc_starttime(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (Linux), which tells our process from a later one with its pid."""
    facts = _proc_facts(pid)
    return facts[1] if facts else None


def ours(identity: Any, *, within: Path | str) -> bool:
    """Whether ``identity`` (a recorded :func:`proc_identity`) is provably a process rlcloud started and that
    still runs: recorded on this host, with the kernel start time the process has now (a pid and its start
    time name one process of a host's life), and a command line, recorded and live, that names ``within``
    (the run's or sweep's directory), so a record copied from elsewhere never names a process here. The live
    command line is not compared whole: a ``python`` wrapper (a shim, a shell script) execs another program.

    Records are input (a results prefix may be shared): anything missing, malformed or different means "not
    ours", and such a process is never signalled or shown as running. A zombie is reaped and is not alive.
    """
    if not isinstance(identity, dict):
        return False
    pid, starttime, host = identity.get("pid"), identity.get("starttime"), identity.get("host")
    cmdline = identity.get("cmdline")
    if not (_is_int(pid) and pid > 1 and isinstance(starttime, str) and host == socket.gethostname()):
        return False
    if not (isinstance(cmdline, list | tuple) and all(isinstance(a, str) for a in cmdline)):
        return False
    where = os.path.realpath(within)
    if not _names(cmdline, where):
        return False
    facts = _proc_facts(pid)
    if facts is None:
        return False
    state, start, command = facts
    if state in ("Z", "X"):
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)  # reap it if it is our child
        return False
    if start != starttime:
        return False
    if not command:
        # A process that is exiting has released its memory, and with it its command line, before it becomes
        # a zombie: the same pid and start time are still the process we started, not yet gone.
        return True
    if len(command) == 1 and " " in command[0]:  # ps joins the arguments with spaces
        return where in command[0]
    return _names(command, where)


def _names(args: Sequence[str], where: str) -> bool:
    """Whether one of ``args`` is the absolute path ``where`` (already resolved)."""
    return any(os.path.isabs(arg) and os.path.realpath(arg) == where for arg in args)


def signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the process group ``pid`` leads (each supervisor leads its own session). Callers have
    proven with :func:`ours` that the group is one rlcloud started."""
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
    return poll_until(lambda: try_flock(path), time.monotonic() + timeout, interval=interval)


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


def open_log(path: Path, root: Path) -> int:
    """A descriptor of the log ``path`` of the run directory ``root``, never through a symbolic link (a run
    directory may have been copied from anywhere: ``logs/agent-0.log -> ~/.ssh/id_rsa`` must not print the
    key). OSError when it is absent, a link or not a regular file."""
    return open_within(root, path)


def tail(path: Path, lines: int, root: Path | None = None) -> str:
    """The last ``lines`` lines of a log (read from its last 16 KiB) of the run directory ``root`` (default:
    the log's directory), never through a link."""
    try:
        with os.fdopen(open_log(path, root or path.parent), "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            text = fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return "(no log)"
    except OSError as exc:
        return f"(log not read: {exc.strerror or exc})"
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def last_line(path: Path, root: Path | None = None) -> str:
    """The last error-looking line of a log (what a one-line reason should show)."""
    lines = tail(path, 40, root).splitlines()
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
        self.logs_dir = workdir / LOGS
        # the spec the roles run with now, named like the spec of record it may extend
        self.spec_file = self.state_dir / SPEC

    def current_spec_file(self) -> Path:
        """The spec the roles last ran with (runs started before it was kept here: the spec of record)."""
        return self.spec_file if self.spec_file.exists() else self.workdir / SPEC

    def exists(self) -> bool:
        """Whether a run was ever started in this work directory."""
        return self.state_file.exists()

    def read(self) -> dict[str, Any]:
        """state.json; NotFoundError when the run was never started, RecordError naming it when it is not one
        rlcloud wrote (too large, too deep, not a mapping: a record is input)."""
        try:
            return dict(read_record_file(self.state_file))
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
        """The recorded role instances (entries that are not one are skipped, with a warning naming the file)."""
        state = self.read() if state is None else state
        records = state.get("roles", [])
        if not isinstance(records, list):
            raise RecordError(f"{self.state_file}: 'roles' holds {type(records).__name__}, expected a list")
        roles = [RoleInfo.from_record(r) for r in records]
        if None in roles:
            logger.warning(
                "%s: skipping %d role entries that are not ones rlcloud writes", self.state_file, roles.count(None)
            )
        return [r for r in roles if r is not None]

    def exit_file(self, label: str) -> Path:
        """Where the supervisor of ``label`` records its runner's exit code."""
        return self.state_dir / f"{label}.exit"

    def exit_code(self, label: str) -> int | None:
        """The recorded exit code of ``label``, or None while it runs (or never ran)."""
        text = _read_small(self.exit_file(label))
        try:
            return int(text.strip()) if text is not None and len(text) < 16 else None
        except ValueError:
            return None

    def restarts_file(self, label: str) -> Path:
        """Where the supervisor of ``label`` counts the times it started a stalled runner again."""
        return self.state_dir / f"{label}.restarts"

    def why_file(self, label: str) -> Path:
        """Where the supervisor of ``label`` says why it ended the runner itself (a stall), when it did."""
        return self.state_dir / f"{label}.why"

    def why(self, label: str) -> str | None:
        """Why the supervisor of ``label`` ended its runner itself (a stall), or None (read as a record: at most
        1,000 bytes of a regular file, never through a link)."""
        text = _read_small(self.why_file(label), 1000)
        return text.strip() or None if text is not None else None

    def restarts(self, label: str) -> int:
        """How often the supervisor of ``label`` restarted its runner in this start of the run (0 when never)."""
        text = _read_small(self.restarts_file(label))  # a record: bounded, never through a link
        try:
            return int(text.strip() or 0) if text is not None and len(text) < 16 else 0
        except ValueError:
            return 0

    def log_file(self, label: str) -> Path:
        """The log file of ``label``."""
        return self.workdir / log_path(label)

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

    def write_runner(self, label: str, pid: int, command: Sequence[str]) -> None:
        """Record the runner process of ``label`` (so that a stop finds it even without its supervisor)."""
        atomic_write(self.runner_file(label), json.dumps(proc_identity(pid, command)) + "\n")

    def runner(self, label: str) -> dict[str, Any] | None:
        """The recorded identity of ``label``'s runner (:func:`proc_identity`), or None when there is none
        that rlcloud wrote."""
        try:
            return dict(read_record_file(self.runner_file(label)))
        except (FileNotFoundError, RecordError):
            return None

    def runner_alive(self, label: str) -> bool:
        """Whether the recorded runner of ``label`` still runs and is provably ours (:func:`ours`)."""
        return ours(self.runner(label), within=self.workdir)

    def supervisor_alive(self, role: RoleInfo) -> bool:
        """Whether ``role``'s supervisor still runs and is provably ours (:func:`ours`)."""
        return ours(role.identity, within=self.workdir)

    def role_alive(self, role: RoleInfo) -> bool:
        """Whether ``role`` still runs: no exit code recorded, and its supervisor or its runner is alive (a
        runner whose supervisor was killed goes on until it notices, checkpoints and exits)."""
        if self.exit_code(role.label) is not None:
            return False
        return self.supervisor_alive(role) or self.runner_alive(role.label)

    def process_alive(self, role: RoleInfo) -> bool:
        """Whether ``role``'s recorded process (its supervisor, or the warm worker that runs it) still runs
        it: a warm worker that recorded the role's exit code has moved on to other trials."""
        if role.worker and self.exit_code(role.label) is not None:
            return False
        return self.supervisor_alive(role)

    def role_busy(self, role: RoleInfo) -> bool:
        """Whether any process of ``role`` still lives: its supervisor (maybe stopping the other roles after
        its runner ended), its runner, or anything else holding the role's lock."""
        return self.process_alive(role) or self.runner_alive(role.label) or flock_held(self.lock_file(role.label))

    def provable(self, role: RoleInfo) -> bool:
        """Whether ``role``'s record could prove its process ours on this machine at all: started here, with
        the identity this version records. A record that cannot (another host's, an old or a planted one)
        is never signalled; its status is "unknown"."""
        return (
            role.host == socket.gethostname()
            and role.starttime is not None
            and role.cmdline is not None
            and _names(role.cmdline, os.path.realpath(self.workdir))
        )

    def stop_roles(self, roles: Sequence[RoleInfo], grace_period: float, *, reap: bool = True) -> None:
        """SIGTERM each supervisor (it forwards to its runner and kills it after ``grace_period``), or the
        runner itself when its supervisor is gone; SIGKILL the groups still alive a little later. Returns when
        every role has ended."""
        for role in roles:
            if not self.role_alive(role):
                continue
            runner = self.runner(role.label)
            if self.supervisor_alive(role):
                target = role.pid
            elif runner is not None and self.runner_alive(role.label):
                target = int(runner["pid"])  # orphaned: nobody forwards the signal for it
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
                runner = self.runner(role.label)
                runner_ours = runner is not None and self.runner_alive(role.label)
                # The runner stays in its supervisor's process group even once the supervisor is dead; the
                # group is signalled only when a process of ours proves it is that group.
                if self.supervisor_alive(role) or (runner_ours and _pgid(int(runner["pid"])) == role.pid):  # type: ignore[index]
                    signal_group(role.pid, signal.SIGKILL)
                if runner is not None and runner_ours:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(int(runner["pid"]), signal.SIGKILL)
        if not reap:
            return
        # Each supervisor exits right after recording its runner's exit code; give them that moment.
        poll_until(
            lambda: True if not any(self.process_alive(r) or self.runner_alive(r.label) for r in roles) else None,
            time.monotonic() + 5,
            interval=0.05,
        )


# ---------------------------------------------------------------------------------------------- sweeps

#: A local sweep's state directory, inside its work directory (state.json, sweep.yaml, sweeper.log).
SWEEP_STATE_DIR = INTERNAL_PREFIX + "sweep"


def read_sweep_state(statedir: Path) -> dict[str, Any]:
    """The sweep's state.json (identity of the scheduler, results root, stop request); {} when absent,
    RecordError naming it when it is not one rlcloud wrote."""
    try:
        return dict(read_record_file(statedir / "state.json"))
    except FileNotFoundError:
        return {}


def read_sweep_spec(statedir: Path) -> SweepSpec:
    """The sweep's spec as its start wrote it (``sweep.yaml``), read as the record it is (bounded, never
    through a link); RecordError or SpecError naming it when it is not one."""
    from rlcloud.specs.sweep import SweepSpec

    return SweepSpec.from_dict(read_record_file(statedir / SWEEP_SPEC, form="yaml"))


def recorded_text(state: dict[str, Any], key: str, where: Path) -> str:
    """``state[key]``, a text rlcloud recorded (a results root, a location); RecordError naming the file
    ``where`` when it is missing or not a text (a record is input)."""
    value = state.get(key)
    if not isinstance(value, str) or not value:
        raise RecordError(f"{where}: {key!r} is missing or not a text; not a record rlcloud wrote")
    return value


def update_sweep_state(statedir: Path, **changes: Any) -> dict[str, Any]:
    """Change keys of state.json atomically; returns the new state."""
    state = read_sweep_state(statedir)
    state.update(changes)
    atomic_write(statedir / "state.json", json.dumps(state, indent=1) + "\n")
    return state


def scheduler_alive(statedir: Path) -> bool:
    """Whether the sweep's scheduler process is running and provably ours (:func:`ours`)."""
    try:
        state = read_sweep_state(statedir)
    except RecordError:
        return False
    return ours(state, within=statedir)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _read_small(path: Path, limit: int = 64) -> str | None:
    """The first ``limit`` bytes of a small regular file (an exit code), never through a link, a FIFO or a
    device; None when it is absent or not one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read(limit).decode("utf-8", "replace")
