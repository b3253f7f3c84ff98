"""Warm trials: long-lived worker processes that run a local sweep's trials one after another.

A cold trial is a supervisor plus a runner process: each pays Python's start, the TensorFlow and
Tensorforce imports and the agent's first tracing (~20 s wall for a 300-timestep trial on the 2-core VM).
The sweeper (:mod:`rlcloud.local.sweeper`) instead keeps up to ``max_parallel`` workers
(``python -m rlcloud.local.worker``), each reading one trial a line on its stdin, so that only a worker's
first trial pays the imports.

Each trial is still an ordinary local run under ``<results>/<sweep>/<trial>/`` (:mod:`rlcloud.local.state`):
:meth:`WarmPool.start` writes its state.json as :meth:`rlcloud.local.LocalBackend.start` does, with the
worker as the role's process (``"worker": true``); the worker holds the role's lock while the trial runs,
sends the trial's output to ``logs/<role>-0.log``, runs it through the runner's own entry point
(:func:`rlcloud.runner.main.main`: the agent built fresh and seeded as in a cold start, closed with its
environments at the end) and records its exit code in ``<role>-0.exit``, as a supervisor does. So status,
logs, ``experiment stop`` and ``sweep stop`` see a trial as they see a cold one: a SIGTERM to the worker
checkpoints the trial (exit code 143) and the worker exits after it.

A worker exits when its stdin closes (the sweeper ended) or after a trial that was stopped by a signal.
Distributed trials and ``gs://`` results are left to the cold path (:meth:`WarmPool.accepts`);
``RLCLOUD_WARM_TRIALS=0`` in the sweeper's environment turns warm trials off.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any, NoReturn

from rlcloud import runenv
from rlcloud.backend import RunFacts
from rlcloud.local.state import RunState, acquire_flock, atomic_write, hold_flock, proc_identity
from rlcloud.results import is_gcs, local_workdir
from rlcloud.roles import role_label, roles_for
from rlcloud.runenv import RunnerEnv

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec

__all__ = ["WARM_ENV", "WarmPool", "main", "serve", "warm_enabled"]

logger = logging.getLogger(__name__)

#: The sweeper's environment variable that turns warm trials off ("0").
WARM_ENV = runenv.WARM_TRIALS

#: Seconds an env server of a warm trial waits without an agent (unless the trial's environment says).
WARM_IDLE_TIMEOUT = 300.0

#: A worker's exit code for a trial whose role lock another process holds (a supervisor's EXIT_DUPLICATE).
EXIT_DUPLICATE = 75

#: Seconds a worker waits for a trial's role lock: a status probe holds it for a moment.
_LOCK_WAIT_S = 5.0

#: Variables a trial's runner must not inherit from an earlier trial or the sweeper (set per trial instead).
_PER_TRIAL = (runenv.RESULTS, runenv.EARLY_STOPPING, runenv.HOST_MAP, runenv.PARENT_PID)


#: Workers still running a trial when their pool closed (kept referenced: see :meth:`WarmPool.close`).
_RUNNING: list[subprocess.Popen[bytes]] = []


def warm_enabled() -> bool:
    """Whether the sweeper runs trials in warm workers (``RLCLOUD_WARM_TRIALS`` not "0")."""
    return RunnerEnv.from_env().warm_trials is not False


# ------------------------------------------------------------------------------------------- sweeper side


class _Worker:
    def __init__(self, proc: subprocess.Popen[bytes], command: Sequence[str]) -> None:
        self.proc = proc
        self.identity = proc_identity(proc.pid, command)
        self.trial: str | None = None

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


class WarmPool:
    """The sweeper's workers: at most ``size``, started on demand, each given one trial at a time.

    ``statedir``: the sweep's state directory (each worker logs to ``worker-<n>.log`` there).
    """

    def __init__(self, statedir: Path, size: int, trial_dirs: Sequence[Path], python: str | None = None) -> None:
        self.statedir = statedir
        # A worker's command line names every trial directory it may run: what proves it the process of a
        # trial's record (rlcloud.local.state.ours), as a supervisor's names its run's.
        self.trial_dirs = [str(Path(d).expanduser().resolve()) for d in trial_dirs]
        self.size = max(1, size)
        self.python = python or sys.executable
        self._workers: list[_Worker] = []
        self._started = 0

    def accepts(self, spec: ExperimentSpec, location: str) -> bool:
        """Whether a trial can run warm: one learner process (single, multi-threaded) writing to a local
        directory, and no process of an earlier start of it still alive (the cold path waits for those)."""
        if is_gcs(location) or str(spec.run_mode) not in ("single", "multi-threaded"):
            return False
        exp = RunState(local_workdir(location, spec.name))
        if str(exp.workdir.resolve()) not in self.trial_dirs:
            return False
        if not exp.exists():
            return True
        with contextlib.suppress(ValueError, OSError):
            return not any(exp.role_busy(r) for r in exp.roles())
        return False

    def start(self, spec: ExperimentSpec, location: str, env: dict[str, str]) -> bool:
        """Hand ``spec`` (a trial under ``location``) to a free worker; True (the backend's start contract).

        The trial's state.json names the worker as its role's process before the worker gets the trial, so
        a status right after says running, and a stop reaches it.
        """
        worker = self._free_worker()
        name = spec.name
        workdir = local_workdir(location, name)
        exp = RunState(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        exp.state_dir.mkdir(exist_ok=True)
        exp.logs_dir.mkdir(exist_ok=True)
        ((role, index),) = roles_for(spec)
        with hold_flock(exp.control_lock, 30.0, f"another start or stop of {name}"):
            for old in [*exp.state_dir.glob("*.exit"), *exp.state_dir.glob("*.runner")]:
                old.unlink()
            atomic_write(exp.spec_file, spec.to_yaml())
            exp.write(
                {
                    "name": name,
                    "results": str(Path(location).expanduser().resolve()),
                    "workdir": str(workdir),
                    "run_mode": str(spec.run_mode),
                    "facts": RunFacts.of_spec(spec).to_record(),  # what a listing needs of the spec
                    "started": time.time(),
                    "host": os.uname().nodename,
                    "roles": [
                        dict(
                            role=str(role),
                            index=index,
                            started=time.time(),
                            port=None,
                            worker=True,
                            **worker.identity,
                        )
                    ],
                    "stop_requested": False,
                    "paused": False,
                }
            )
        self._send(worker, {"workdir": str(workdir), "role": str(role), "spec": str(exp.spec_file), "env": env})
        worker.trial = name
        logger.info("trial %s runs in warm worker %d", name, worker.proc.pid)
        return True

    def warm_up(self, spec: ExperimentSpec, count: int) -> None:
        """Start ``count`` workers (at most the pool's size) now, each importing TensorFlow and Tensorforce as
        ``spec`` (a trial of the sweep) needs them while nothing waits for it: the workers beside the sweep's
        smoke trial are warm when it has proved the base experiment."""
        path = self.statedir / "warm-up.yaml"
        atomic_write(path, spec.to_yaml())
        while len([w for w in self._workers if w.alive]) < min(count, self.size):
            worker = self._spawn()
            self._send(worker, {"warm_up": str(path)})

    @property
    def processes(self) -> list[subprocess.Popen[bytes]]:
        """The workers started and not yet seen to exit."""
        return [w.proc for w in self._workers if w.alive]

    def finished(self, name: str) -> None:
        """The trial ``name`` has ended: its worker may take the next one."""
        for worker in self._workers:
            if worker.trial == name:
                worker.trial = None

    def close(self) -> None:
        """No more trials: each worker exits once its current trial has ended."""
        for worker in self._workers:
            with contextlib.suppress(OSError):
                if worker.proc.stdin is not None:
                    worker.proc.stdin.close()
        deadline = time.monotonic() + 5
        for worker in self._workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            if worker.alive:
                _RUNNING.append(worker.proc)  # still in a trial: a Popen dropped while it runs warns
        self._workers = []

    def _free_worker(self) -> _Worker:
        for gone in [w for w in self._workers if not w.alive]:
            self._workers.remove(gone)  # stopped by a signal after its trial, or crashed
            with contextlib.suppress(OSError):
                if gone.proc.stdin is not None:
                    gone.proc.stdin.close()
        free = next((w for w in self._workers if w.trial is None), None)
        if free is not None:
            return free
        if len(self._workers) >= self.size:
            raise RuntimeError(f"every warm worker is busy ({self.size}); the sweeper starts one trial per slot")
        return self._spawn()

    @staticmethod
    def _send(worker: _Worker, job: dict[str, Any]) -> None:
        assert worker.proc.stdin is not None
        worker.proc.stdin.write((json.dumps(job) + "\n").encode())
        worker.proc.stdin.flush()

    def _spawn(self) -> _Worker:
        self._started += 1
        log = open(self.statedir / f"worker-{self._started}.log", "ab")  # noqa: SIM115 - the worker keeps it
        try:
            command = [self.python, "-m", "rlcloud.local.worker", *self.trial_dirs]
            proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={k: v for k, v in os.environ.items() if k not in _PER_TRIAL},
                cwd=str(self.statedir),
                start_new_session=True,  # like a supervisor: a stop signals it, not the sweeper's group
                close_fds=True,
            )
        finally:
            log.close()
        worker = _Worker(proc, command)
        self._workers.append(worker)
        return worker


# -------------------------------------------------------------------------------------------- worker side


class _Signals:
    """The worker's own SIGTERM/SIGINT handling between trials (the runner installs its own during one)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.idle = True
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)
        if self.idle:
            raise SystemExit(128 + signum)


def _log_line(text: str) -> None:
    sys.stdout.write(f"----- {time.strftime('%Y-%m-%d %H:%M:%S')} {text}\n")
    sys.stdout.flush()


@contextlib.contextmanager
def _output_to(path: Path) -> Any:
    """Send this process's stdout and stderr (file descriptors 1 and 2, so TensorFlow's C++ lines too)
    to ``path`` for the ``with`` block."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for descriptor in (fd, *saved):
            os.close(descriptor)


@contextlib.contextmanager
def _trial_environ(env: dict[str, str], workdir: Path) -> Any:
    """The trial's environment variables and working directory (a cold runner's) for the ``with`` block."""
    before = dict(os.environ)
    cwd = os.getcwd()
    for key in _PER_TRIAL:
        os.environ.pop(key, None)
    os.environ.update(env)
    if RunnerEnv.from_env().idle_timeout is None:
        os.environ.update(RunnerEnv(idle_timeout=WARM_IDLE_TIMEOUT).to_env())
    os.chdir(workdir)
    try:
        yield
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(before)


def warm_up(spec_path: Path) -> None:
    """Import what a trial of ``spec_path`` needs (TensorFlow with the CPU kernels the runner would choose
    for it, Tensorforce) before the trial comes; a failure is left for the trial itself to report."""
    from rlcloud.runner.warm import import_for
    from rlcloud.specs import ExperimentSpec

    started = time.monotonic()
    try:
        import_for(ExperimentSpec.from_file(spec_path))
    except Exception as exc:
        _log_line(f"warm-up skipped: {exc}")
        return
    # What the imports made (~330,000 objects: modules, functions, TensorFlow's registries) lives as long as
    # the worker: out of the collector's sight, each full collection (the one after every trial, those
    # during training) walks only what trials make: 0.2-0.5 s less after each trial on the 2-core VM.
    gc.collect()
    gc.freeze()
    _log_line(f"warm: TensorFlow and Tensorforce imported in {time.monotonic() - started:.1f} s")


def run_trial(job: dict[str, Any], signals: _Signals) -> int:
    """Run one trial handed over by :meth:`WarmPool.start`; its exit code (recorded like a supervisor's)."""
    from rlcloud.runner.main import main as runner_main
    from rlcloud.runner.watchdog import on_stall_exit

    workdir = Path(job["workdir"])
    run = RunState(workdir)
    label = role_label(job["role"], 0)
    lock = acquire_flock(run.lock_file(label), _LOCK_WAIT_S)
    try:
        with _output_to(run.log_file(label)):
            _log_line(f"starting {label} (warm worker {os.getpid()})")
            if lock is None:
                _log_line(f"another process of {label} holds {run.lock_file(label)}: not starting a second one")
                code = EXIT_DUPLICATE
            elif signals.received or run.read().get("stop_requested"):
                code = 128 + (signals.received[0] if signals.received else signal.SIGTERM)
                _log_line(f"{label} stopped before it started")
            else:
                signals.idle = False
                # a stalled trial's watchdog ends this whole process: its exit code is recorded first
                unhook = on_stall_exit(lambda stalled: atomic_write(run.exit_file(label), f"{stalled}\n"))
                try:
                    with _trial_environ(dict(job.get("env") or {}), workdir):
                        argv = ["--role", job["role"], "--index", "0", "--spec", job["spec"], "--workdir", str(workdir)]
                        code = int(runner_main(argv))
                except Exception:  # the runner's main catches its own; this is the worker's
                    logging.getLogger("rlcloud.runner").exception("%s crashed", label)
                    code = 1
                finally:
                    unhook()
                    signals.idle = True
            _log_line(f"{label} exited with code {code}")
        atomic_write(run.exit_file(label), f"{code}\n")
    finally:
        if lock is not None:
            os.close(lock)  # after the exit code: whoever sees the lock free finds the code
    return code


def serve(lines: IO[str]) -> int:
    """Run the trials read from ``lines`` (one JSON object each) until it ends or a trial is stopped."""
    signals = _Signals()
    _log_line(f"warm worker {os.getpid()} ready")
    for line in lines:
        if not line.strip():
            continue
        job = json.loads(line)
        if "warm_up" in job:
            warm_up(Path(job["warm_up"]))
            continue
        code = run_trial(job, signals)
        _log_line(f"trial {Path(job['workdir']).name}: exit code {code}")
        # Leave nothing of this trial's agent to the next one (the runner closed it and its environments).
        gc.collect()
        if code in (130, 143) or signals.received:
            _log_line("stopped by a signal: exiting")
            return code
    return 0


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """``python -m rlcloud.local.worker [TRIAL_DIR...]``: trials as JSON lines on stdin (written by
    :class:`WarmPool`); the arguments name the trial directories it may run (they prove its identity).
    Exits the process with :func:`serve`'s code."""
    del argv
    # TensorFlow itself is imported by the first trial: it picks the CPU kernels before that import
    # (runner/kernels.py), and every later trial of the worker reuses it.

    code = serve(sys.stdin)
    # Every trial's files are written and closed (its exit code last). The interpreter's teardown with
    # TensorFlow loaded takes ~1 s, and the sweeper waits for its workers before it ends: the sweep's last
    # second. So the worker leaves without it, its log flushed.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
