"""The local backend: each role of an experiment runs as a background process on this machine, like a pod.

``start()`` launches, per role, a small supervisor (``python -m rlcloud.backends.local supervise ...``,
the ``kubelet`` of this backend) in its own session, which runs ``python -m rlcloud.runner --role ...``
and returns at once:

- single: ``single-0``; multi-threaded: ``multi-0``; distributed: ``agent-0`` plus ``env-server-0..N-1``
  on free local ports (the agent gets them in ``RLCLOUD_ENV_SERVERS``).

Everything another Python process needs to find, watch and stop the experiment is on disk in the
experiment's work directory (``<results root>/<name>/`` for a local root)::

    spec.yaml               the resolved spec the roles read
    logs/<role>-<index>.log each role's stdout/stderr (appended across restarts)
    .rlcloud-local/state.json   pids, ports, start time, stop/pause requests
    .rlcloud-local/<role>-<index>.exit   the role's exit code, written by its supervisor

The supervisor is what makes status honest from another process: it waits for its runner, records the
exit code, and applies the experiment's lifecycle rules without anyone watching:

- the main role (single/multi/agent) ended: the env servers are told to stop (they exit by themselves
  when the agent finished the run; this also ends them when the agent failed);
- any role failed (an exit code other than 0, or 143/130 after a stop or pause): the other roles are
  stopped, and the experiment is failed.

``stop()`` sends SIGTERM to every runner (it checkpoints and exits within 10 s), then SIGKILL to the
process groups still alive after ``grace_period``. A results root on ``gs://`` runs in a local cache
directory (``~/.cache/rlcloud/local/...``) and the runner syncs to the bucket (``RLCLOUD_RESULTS``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlcloud.backend import ExperimentBackend, ExperimentState, ExperimentStatus, RoleState, RoleStatus
from rlcloud.errors import NotFoundError, SpecError, SpecProblem, WorkloadError
from rlcloud.errors import TimeoutError as RLTimeoutError

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec

__all__ = ["DEFAULT_GRACE_PERIOD", "LocalBackend", "main"]

logger = logging.getLogger(__name__)

#: Seconds a supervisor gives its runner between SIGTERM and SIGKILL. The runner checkpoints and exits
#: within 10 s on an idle machine; a busy one (first save traced by TensorFlow) can take longer, and
#: locally there is no spot-VM deadline to meet.
DEFAULT_GRACE_PERIOD = 30.0
#: Extra seconds stop() waits before it kills a role's whole process group, supervisor included (only
#: when the supervisor itself is stuck: it kills its runner after the grace period).
_GROUP_KILL_MARGIN = 10.0
#: How long an env server waits for an agent that never (re)connects before it exits by itself.
LOCAL_IDLE_TIMEOUT = 300.0
STATE_DIR = ".rlcloud-local"
_MAIN_ROLES = ("single", "multi", "agent")
_POLL_S = 0.2


@dataclass(frozen=True)
class _RoleInfo:
    role: str
    index: int
    pid: int
    started: float
    port: int | None = None
    starttime: str | None = None  # /proc/<pid>/stat field 22: tells our process from a reused pid

    @property
    def label(self) -> str:
        return f"{self.role}-{self.index}"


# ------------------------------------------------------------------------------------------ processes


def _proc_starttime(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after its last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def _alive(pid: int, starttime: str | None) -> bool:
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


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # each supervisor leads its own session: pgid == pid


def _free_ports(count: int) -> list[int]:
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


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------- state


class _Experiment:
    """The on-disk record of one local experiment (see the module docstring)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.state_dir = workdir / STATE_DIR
        self.state_file = self.state_dir / "state.json"
        self.logs_dir = workdir / "logs"

    def exists(self) -> bool:
        return self.state_file.exists()

    def read(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.state_file.read_text(encoding="utf-8")))
        except FileNotFoundError as exc:
            raise NotFoundError(f"no local experiment in {self.workdir}") from exc

    def write(self, state: dict[str, Any]) -> None:
        _atomic_write(self.state_file, json.dumps(state, indent=1) + "\n")

    def update(self, **changes: Any) -> dict[str, Any]:
        state = self.read()
        state.update(changes)
        self.write(state)
        return state

    def roles(self, state: dict[str, Any] | None = None) -> list[_RoleInfo]:
        state = self.read() if state is None else state
        return [_RoleInfo(**r) for r in state.get("roles", [])]

    def exit_file(self, label: str) -> Path:
        return self.state_dir / f"{label}.exit"

    def exit_code(self, label: str) -> int | None:
        try:
            return int(self.exit_file(label).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def log_file(self, label: str) -> Path:
        return self.logs_dir / f"{label}.log"

    def role_alive(self, role: _RoleInfo) -> bool:
        return self.exit_code(role.label) is None and _alive(role.pid, role.starttime)

    def stop_roles(self, roles: Sequence[_RoleInfo], grace_period: float, *, reap: bool = True) -> None:
        """SIGTERM each supervisor (it forwards to its runner and kills it after ``grace_period``);
        SIGKILL the groups still alive a little later. Returns when every role has ended."""
        for role in roles:
            if self.role_alive(role):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(role.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_period + _GROUP_KILL_MARGIN
        # role_alive, not the supervisor's pid: a supervisor may itself be busy stopping the others.
        while time.monotonic() < deadline and any(self.role_alive(r) for r in roles):
            time.sleep(_POLL_S)
        for role in roles:
            if self.role_alive(role):
                logger.warning("%s did not stop within %g s; killing it", role.label, grace_period)
                _signal_group(role.pid, signal.SIGKILL)
        if not reap:
            return
        # Each supervisor exits right after recording its runner's exit code; give them that moment.
        end = time.monotonic() + 5
        while any(_alive(r.pid, r.starttime) for r in roles) and time.monotonic() < end:
            time.sleep(0.05)


# -------------------------------------------------------------------------------------------- backend


class LocalBackend(ExperimentBackend):
    """Runs experiments as background processes on this machine (see the module docstring).

    ``results_root``: where ``status``/``list``/``attach`` look for experiments by name (default: the
    project config's results root, else ./rlcloud-results); ``start`` uses the root it is given.
    ``grace_period``: seconds from SIGTERM to SIGKILL in ``stop``. ``env``: extra environment variables
    for the runner processes (e.g. ``RLCLOUD_IDLE_TIMEOUT``).
    """

    kind = "local"

    def __init__(
        self,
        results_root: str | None = None,
        *,
        grace_period: float = DEFAULT_GRACE_PERIOD,
        env: dict[str, str] | None = None,
        python: str | None = None,
    ) -> None:
        self._root = results_root
        self.grace_period = grace_period
        self.env = dict(env or {})
        self.python = python or sys.executable
        # Experiments started from this object may live under other roots than the default.
        self._known: dict[str, Path] = {}
        self._children: list[subprocess.Popen[bytes]] = []

    # -- locations

    @property
    def results_root(self) -> str:
        """The results root this backend looks in for experiments by name."""
        if self._root:
            return self._root
        from rlcloud.experiment import results_root

        return results_root(None, None)

    @staticmethod
    def _workdir(root: str, name: str) -> Path:
        if root.startswith("gs://"):
            digest = hashlib.sha256(root.rstrip("/").encode()).hexdigest()[:12]
            cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
            return cache / "rlcloud" / "local" / digest / name
        from rlcloud.experiment import results_location

        return Path(results_location(root, name))

    def _experiment(self, name: str) -> _Experiment:
        workdir = self._known.get(name) or self._workdir(self.results_root, name)
        exp = _Experiment(workdir)
        if not exp.exists():
            raise NotFoundError(
                f"no local experiment named {name!r} under {self.results_root} "
                f"(known: {', '.join(self.list()) or 'none'})"
            )
        return exp

    # -- start

    def start(self, spec: ExperimentSpec, results: str) -> None:
        """Start (or resume) ``spec`` as background processes writing under ``results``; return at once.

        Idempotent: an experiment whose processes are running is left alone. One that ended (stopped,
        paused, failed, succeeded) starts again; the runner resumes from its latest checkpoint.
        """
        name = spec.name
        workdir = self._workdir(results, name)
        exp = _Experiment(workdir)
        self._known[name] = workdir
        self._reap()
        if exp.exists():
            previous = exp.read()
            alive = [r for r in exp.roles(previous) if exp.role_alive(r)]
            if alive and not previous.get("stop_requested"):
                logger.info("experiment %s is already running (%s)", name, ", ".join(r.label for r in alive))
                return
            if alive:  # a stop is under way: let it finish before starting again
                exp.stop_roles(alive, self.grace_period)
        workdir.mkdir(parents=True, exist_ok=True)
        exp.state_dir.mkdir(exist_ok=True)
        exp.logs_dir.mkdir(exist_ok=True)
        for old in exp.state_dir.glob("*.exit"):
            old.unlink()
        spec_path = workdir / "spec.yaml"
        _atomic_write(spec_path, spec.to_yaml())

        plan = self._plan(spec)
        env = os.environ.copy()
        env.update(self.env)
        env.setdefault("RLCLOUD_IDLE_TIMEOUT", str(LOCAL_IDLE_TIMEOUT))
        env.pop("RLCLOUD_HOST_MAP", None)
        if results.startswith("gs://"):
            env["RLCLOUD_RESULTS"] = results.rstrip("/") + "/" + name
        else:
            env.pop("RLCLOUD_RESULTS", None)
        env_servers = ",".join(f"127.0.0.1:{port}" for _role, _index, port in plan if port is not None)

        state: dict[str, Any] = {
            "name": name,
            # Absolute, so that attach() from another working directory finds the same place.
            "results": results if results.startswith("gs://") else str(Path(results).expanduser().resolve()),
            "workdir": str(workdir),
            "run_mode": str(spec.run_mode),
            "started": time.time(),
            "host": socket.gethostname(),
            "roles": [],
            "stop_requested": False,
            "paused": False,
        }
        exp.write(state)  # supervisors read it when a role ends; the roles are added below
        roles: list[dict[str, Any]] = []
        try:
            # Env servers first: they are listening by the time the agent (slower to import) dials.
            for role, index, port in sorted(plan, key=lambda p: p[0] in _MAIN_ROLES):
                role_env = dict(env)
                if port is not None:
                    role_env.update(RLCLOUD_PORT=str(port), RLCLOUD_BIND_HOST="127.0.0.1")
                if role == "agent":
                    role_env["RLCLOUD_ENV_SERVERS"] = env_servers
                proc = self._launch(exp, role, index, spec_path, role_env)
                roles.append(
                    dict(
                        role=role,
                        index=index,
                        pid=proc.pid,
                        started=time.time(),
                        port=port,
                        starttime=_proc_starttime(proc.pid),
                    )
                )
                exp.update(roles=roles)
        except BaseException:
            exp.stop_roles([_RoleInfo(**r) for r in roles], self.grace_period)
            raise
        logger.info("started %s locally: %s", name, ", ".join(f"{r['role']}-{r['index']}" for r in roles))

    @staticmethod
    def _plan(spec: ExperimentSpec) -> list[tuple[str, int, int | None]]:
        mode = str(spec.run_mode)
        if mode == "single":
            return [("single", 0, None)]
        if mode == "multi-threaded":
            return [("multi", 0, None)]
        if mode == "distributed":
            ports = _free_ports(spec.num_workers)
            return [("agent", 0, None)] + [("env-server", i, ports[i]) for i in range(spec.num_workers)]
        raise SpecError([SpecProblem("run_mode", "must be single, multi-threaded or distributed", mode)])

    def _launch(
        self, exp: _Experiment, role: str, index: int, spec_path: Path, env: dict[str, str]
    ) -> subprocess.Popen[bytes]:
        label = f"{role}-{index}"
        log_path = exp.log_file(label)
        runner = [
            self.python, "-m", "rlcloud.runner", "--role", role, "--index", str(index),
            "--spec", str(spec_path), "--workdir", str(exp.workdir),
        ]  # fmt: skip
        command = [
            self.python, "-m", "rlcloud.backends.local", "supervise", "--workdir", str(exp.workdir),
            "--label", label, "--grace", str(self.grace_period), "--", *runner,
        ]  # fmt: skip
        with open(log_path, "ab") as log:
            log.write(f"----- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {label}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(exp.workdir),
                start_new_session=True,  # detached: survives this Python, gets no terminal Ctrl-C
                close_fds=True,
            )
        self._children.append(proc)
        return proc

    def _reap(self) -> None:
        """Collect exited supervisors we started, so that they do not linger as zombies."""
        self._children = [p for p in self._children if p.poll() is None]

    # -- status

    def status(self, name: str) -> ExperimentStatus:
        """State per role (from the processes and their exit codes) plus progress.json."""
        self._reap()
        exp = self._experiment(name)
        state = exp.read()
        roles = [self._role_status(exp, r, state) for r in exp.roles(state)]
        progress: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            progress = dict(json.loads((exp.workdir / "progress.json").read_text(encoding="utf-8")))
        overall, message = self._overall(exp, state, roles)
        return ExperimentStatus(
            name=name, state=overall, roles=roles, progress=progress, message=message, backend=self.kind
        )

    def _role_status(self, exp: _Experiment, role: _RoleInfo, state: dict[str, Any]) -> RoleStatus:
        code = exp.exit_code(role.label)
        requested = bool(state.get("stop_requested"))
        if code is None:
            if _alive(role.pid, role.starttime):
                return RoleStatus(role.role, role.index, "running")
            # The supervisor itself was killed (e.g. kill -9 on it or a reboot): no exit code recorded.
            return RoleStatus(role.role, role.index, "failed", reason="the process vanished without an exit code")
        role_state: RoleState
        reason = None
        if code == 0:
            role_state = "succeeded"
        elif requested and code in (143, 130, -signal.SIGTERM, -signal.SIGKILL, 137):
            role_state = "suspended" if state.get("paused") else "succeeded"
            reason = f"stopped on request (exit code {code})"
        else:
            role_state = "failed"
            reason = f"exit code {code}: {_last_line(exp.log_file(role.label))}"
        return RoleStatus(role.role, role.index, role_state, exit_code=code, reason=reason)

    def _overall(
        self, exp: _Experiment, state: dict[str, Any], roles: list[RoleStatus]
    ) -> tuple[ExperimentState, str | None]:
        if not roles:
            return "pending", None
        failed = [r for r in roles if r.state == "failed"]
        if failed:
            # The role that failed first caused the rest (the others were stopped because of it).
            first = min(
                failed,
                key=lambda r: exp.exit_file(r.label).stat().st_mtime if r.exit_code is not None else float("inf"),
            )
            tail = _tail(exp.log_file(first.label), 15)
            return "failed", f"{first.label} failed ({first.reason}); last lines of its log:\n{tail}"
        running = [r for r in roles if r.state == "running"]
        main = next((r for r in roles if r.role in _MAIN_ROLES), None)
        if state.get("stop_requested"):
            if running:
                return "running", "stopping"
            return ("paused", None) if state.get("paused") else ("stopped", None)
        if main is not None and main.state == "succeeded":
            return "succeeded", None
        return "running", None

    def wait(self, name: str, timeout: float | None = None) -> ExperimentStatus:
        """Block until the experiment finishes and all its processes have ended; rlcloud.errors.TimeoutError
        after ``timeout`` seconds (the experiment keeps running)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.status(name)
            # Finished, and nothing left running: after a failure the supervisors are still stopping
            # the other roles for a moment, and a caller may want to start again right away.
            if (status.finished or status.state == "paused") and not self._any_process_alive(name):
                return status
            if deadline is not None and time.monotonic() >= deadline:
                raise RLTimeoutError(
                    f"experiment {name!r} still {status.state} after {timeout:g} s "
                    f"(timestep {status.progress.get('timestep', 0)}); it keeps running: wait again or stop it"
                )
            time.sleep(_POLL_S if deadline is None else max(0.0, min(_POLL_S, deadline - time.monotonic())))

    def _any_process_alive(self, name: str) -> bool:
        """Whether a supervisor of the experiment still runs (it may be stopping the other roles)."""
        self._reap()
        exp = self._experiment(name)
        return any(_alive(r.pid, r.starttime) for r in exp.roles())

    def logs(self, name: str, follow: bool = False) -> Iterator[str]:
        """All roles' log lines as ``"role-index | line"``; with ``follow``, until every role has ended."""
        exp = self._experiment(name)
        roles = exp.roles()
        offsets = {r.label: 0 for r in roles}
        partial = {r.label: b"" for r in roles}
        while True:
            ended = not follow or not any(exp.role_alive(r) for r in roles)
            for role in roles:
                path = exp.log_file(role.label)
                try:
                    with open(path, "rb") as fh:
                        fh.seek(offsets[role.label])
                        chunk = fh.read()
                except FileNotFoundError:
                    continue
                offsets[role.label] += len(chunk)
                data = partial[role.label] + chunk
                lines = data.split(b"\n")
                partial[role.label] = lines.pop()
                for line in lines:
                    yield f"{role.label} | {line.decode('utf-8', 'replace').rstrip()}"
            if ended:
                # Everything has been read after the last process ended: flush unterminated last lines.
                for role in roles:
                    if partial[role.label]:
                        yield f"{role.label} | {partial[role.label].decode('utf-8', 'replace').rstrip()}"
                return
            time.sleep(_POLL_S)

    # -- stop, pause, resume

    def stop(self, name: str) -> None:
        """SIGTERM every role (the runner checkpoints), SIGKILL after the grace period. Idempotent."""
        self._stop(name, paused=False)

    def pause(self, name: str) -> None:
        """Checkpoint and stop the processes; :meth:`resume` starts them again from the checkpoint."""
        self._stop(name, paused=True)

    def _stop(self, name: str, *, paused: bool) -> None:
        exp = self._experiment(name)
        state = exp.read()
        alive = [r for r in exp.roles(state) if exp.role_alive(r)]
        if not alive:
            if paused and not state.get("stop_requested"):
                exp.update(stop_requested=True, paused=True)
            return  # finished already: nothing to stop
        exp.update(stop_requested=True, paused=paused)
        # The main role first: it checkpoints; env servers only serve it.
        alive.sort(key=lambda r: r.role not in _MAIN_ROLES)
        exp.stop_roles(alive, self.grace_period)
        self._reap()

    def resume(self, name: str) -> None:
        """Start a paused (or stopped) experiment again from its latest checkpoint."""
        exp = self._experiment(name)
        state = exp.read()
        self.start(_load_spec(exp.workdir / "spec.yaml"), state["results"])

    # -- discovery

    def list(self) -> list[str]:
        """Names of the experiments under the results root (and any started from this object)."""
        names = set(self._known)
        root = self.results_root
        base = self._workdir(root, "x").parent
        if base.is_dir():
            names.update(p.parent.parent.name for p in base.glob(f"*/{STATE_DIR}/state.json"))
        return sorted(names)

    def attach(self, name: str) -> tuple[ExperimentSpec, str]:
        """The spec and results root of an experiment started on this machine."""
        exp = self._experiment(name)
        state = exp.read()
        return _load_spec(exp.workdir / "spec.yaml"), str(state["results"])


def _load_spec(path: Path) -> ExperimentSpec:
    from rlcloud.specs import ExperimentSpec

    return ExperimentSpec.from_file(path)


def _tail(path: Path, lines: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            text = fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def _last_line(path: Path) -> str:
    """The last error-looking line of a log (what a one-line reason should show)."""
    lines = _tail(path, 40).splitlines()
    for line in reversed(lines):
        if "Error" in line or "ERROR" in line or "error" in line:
            return line.strip()[-300:]
    return lines[-1].strip()[-300:] if lines else ""


# ------------------------------------------------------------------------------------------ supervisor


def _supervise(workdir: Path, label: str, command: list[str], grace_period: float = DEFAULT_GRACE_PERIOD) -> int:
    """Run ``command``, record its exit code, and apply the lifecycle rules (module docstring)."""
    exp = _Experiment(workdir)
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    kill_at: list[float] = []

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)
        if not kill_at:
            kill_at.append(time.monotonic() + grace_period)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    while True:
        try:
            code = child.wait(timeout=_POLL_S)
            break
        except subprocess.TimeoutExpired:
            # A runner that ignores SIGTERM too long (stuck in a wait) is killed here, with everything
            # it started (its process group is ours), after its exit code (137) has been recorded.
            if kill_at and time.monotonic() >= kill_at[0]:
                _atomic_write(exp.exit_file(label), "137\n")
                print(f"----- {label} did not stop within {grace_period:g} s of SIGTERM: killing it", flush=True)
                if os.getpgrp() == os.getpid():  # our own session, as LocalBackend starts us
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
    if code < 0:
        code = 128 - code  # killed by a signal: the shell's convention (SIGKILL -> 137)
    _atomic_write(exp.exit_file(label), f"{code}\n")
    print(f"----- {time.strftime('%Y-%m-%d %H:%M:%S')} {label} exited with code {code}", flush=True)

    role = label.rsplit("-", 1)[0]
    try:
        state = exp.read()
    except (NotFoundError, ValueError):
        return code
    if state.get("stop_requested"):
        return code  # whoever asked stops the others
    others = [r for r in exp.roles(state) if r.label != label]
    if code != 0:
        print(f"----- {label} failed: stopping the other roles", flush=True)
    elif role in _MAIN_ROLES:
        # The agent told its env servers the run is finished; give them a moment to exit by themselves.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(exp.role_alive(r) for r in others):
            time.sleep(_POLL_S)
    else:
        return code  # an env server that ended normally: the agent decides the rest
    exp.stop_roles([r for r in others if exp.role_alive(r)], grace_period, reap=False)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rlcloud.backends.local supervise --workdir DIR --label ROLE-INDEX -- COMMAND...``."""
    parser = argparse.ArgumentParser(prog="python -m rlcloud.backends.local")
    sub = parser.add_subparsers(dest="command", required=True)
    sup = sub.add_parser("supervise", help="run one role and record its exit code (used by LocalBackend)")
    sup.add_argument("--workdir", required=True)
    sup.add_argument("--label", required=True)
    sup.add_argument("--grace", type=float, default=DEFAULT_GRACE_PERIOD, help="seconds from SIGTERM to SIGKILL")
    sup.add_argument("runner", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.runner[1:] if args.runner[:1] == ["--"] else args.runner
    if not command:
        raise WorkloadError("supervise needs a command after --")
    return _supervise(Path(args.workdir), args.label, command, args.grace)


if __name__ == "__main__":
    sys.exit(main())
