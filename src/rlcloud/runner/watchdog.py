"""Stall detection inside the runner: a learner that stops advancing ends itself; a heartbeat file says who is alive.

A learner whose timestep has not advanced for the spec's ``stall_timeout`` is *stalled* (docs/contracts.md).
Something outside the process must act on it even when nobody watches (a laptop closed, a cluster run):

- :class:`StallWatchdog`, a daemon thread in the learner, watches the trainer's counters. When they have not
  moved for ``stall_timeout`` it logs one line and where every thread is, records ``"state": "stalled"`` in
  progress.json (with ``"stalls"``: how many times in a row), pushes that to the results store (bounded) and
  ends the process with :data:`EXIT_STALLED`: the pod's Job (or the local supervisor) starts it again, and it
  resumes from its latest checkpoint. A learner that was started after a stall and stalls again exits with
  :data:`EXIT_STALLED_AGAIN` instead, which fails the run (the Job's ``podFailurePolicy``: FailJob). A thread
  catches a hang in C code that releases the GIL (a blocked socket, a lock, a sleep); one that holds the GIL is
  caught by the heartbeat file below, through the liveness probe (Kubernetes) or the supervisor (locally).
  While the learner waits for a lost env server to come back (the agent's reconnection, which has its own
  timeout) it is not stalled: the env server is.
- The *heartbeat file* (:func:`heartbeat_path`, ``<workdir>/.heartbeat/<role>-<index>``, hidden: never synced)
  has as its mtime the last moment its process was known to make progress: the env server's request loop
  touches it each time round (a server stuck in a step or stopped leaves it old), the learner's watchdog sets
  it to the learner's last advance. :data:`LIVENESS_SCRIPT` (the Kubernetes ``livenessProbe``) and
  :func:`heartbeat_age` (the local supervisor) read it; a missing file is a process still starting. A
  watchdog writes into its heartbeat file the age at which the probe should end it (its own stall_timeout
  plus :data:`LIVENESS_MARGIN_S`): a sweep's trials may each have their own stall_timeout.
- A warm sweep pod (rlcloud.runner.warm: several trials one after another in one process) keeps ONE
  heartbeat for its whole life, :class:`PodHeartbeat` (``<workdir>/.heartbeat/pod``): a daemon thread
  beats it every second through the imports, the wait for the smoke trial and each trial's preparation
  (agent building, restore), which a hang holding the GIL stops; each trial's :class:`StallWatchdog` takes
  it over while the trial trains (its last advance, its limit) and hands it back after. The pod's
  livenessProbe thus reads one file, whatever the pod is doing, and a pod between trials always has a
  fresh one.

Only the standard library at import time: the Kubernetes builders read the constants here.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlcloud import runenv
from rlcloud.layout import PROGRESS, ProgressRecord

if TYPE_CHECKING:
    from rlcloud.waiting import Clock, StampAges

__all__ = [
    "EXIT_STALLED",
    "EXIT_STALLED_AGAIN",
    "HEARTBEAT_DIR",
    "LIVENESS_MARGIN_S",
    "LIVENESS_SCRIPT",
    "POD_HEARTBEAT",
    "STALL_RESTARTS",
    "STARTUP_SCRIPT",
    "PodHeartbeat",
    "StallWatchdog",
    "beat",
    "heartbeat_age",
    "heartbeat_path",
    "liveness_command",
    "on_stall_exit",
    "startup_command",
]

logger = logging.getLogger(__name__)

#: The learner stalled: started again, it resumes from its latest checkpoint (a retry, like a crash).
EXIT_STALLED = 88
#: The learner stalled again after a restart for a stall: the run fails (not retried).
EXIT_STALLED_AGAIN = 89
#: Times a stalled learner is started again before a stall fails the run.
STALL_RESTARTS = 1
#: The heartbeat files' directory under the work directory (hidden: the results syncer skips it).
HEARTBEAT_DIR = ".heartbeat"
#: Seconds a process's start of training gets beyond its stall_timeout (at most the stall_timeout itself):
#: TensorFlow traces and first runs the agent's graphs then (the first act, observe and PPO update of a
#: small agent took 6 s on a busy 2-core machine).
FIRST_STEP_GRACE_S = 60.0
#: Seconds a flush of progress and logs to the results store may take when a stall ends the learner.
FLUSH_TIMEOUT_S = 20.0

#: Seconds a learner's liveness probe allows beyond its stall_timeout: the watchdog acts first (records the
#: stall, pushes it to the store within FLUSH_TIMEOUT_S); the probe ends a learner whose watchdog cannot run.
LIVENESS_MARGIN_S = FLUSH_TIMEOUT_S + 10.0

#: The livenessProbe's program (``python -c SCRIPT DIR MAX_AGE``): exit 1 when the newest heartbeat file in
#: DIR (a pod's: one process keeps one there) is older than its limit, 0 otherwise (none yet: still
#: starting; none any more: training is over). The limit is the number the file holds (a watchdog's:
#: its own stall_timeout plus margin), else MAX_AGE. A directory, because a probe's command gets no ``$(VAR)``
#: expansion to name an env server's index. Inline and standard-library only, so that a probe costs a bare
#: interpreter start, not rlcloud's imports.
LIVENESS_SCRIPT = (
    "import os, sys, time\n"
    "try:\n"
    "    beats = [(e.stat().st_mtime, e.path) for e in os.scandir(sys.argv[1]) if e.is_file()]\n"
    "except FileNotFoundError:\n"
    "    beats = []\n"
    "limit, age = float(sys.argv[2]), 0.0\n"
    "if beats:\n"
    "    mtime, newest = max(beats)\n"
    "    age = time.time() - mtime\n"
    "    try:\n"
    "        with open(newest) as f:\n"
    "            limit = float(f.read(64).split()[0])\n"
    "    except (OSError, ValueError, IndexError):\n"
    "        pass\n"
    "if age > limit:\n"
    "    print(f'no heartbeat for {age:.0f} s (at most {limit:g} s)')\n"
    "    sys.exit(1)\n"
)

#: The startupProbe's program (``python -c SCRIPT DIR``) of a warm sweep pod: exit 0 once DIR holds a
#: heartbeat file (the pod's :class:`PodHeartbeat` beats within a second of the runner's start), 1 before.
STARTUP_SCRIPT = (
    "import os, sys\n"
    "try:\n"
    "    found = any(e.is_file() for e in os.scandir(sys.argv[1]))\n"
    "except FileNotFoundError:\n"
    "    found = False\n"
    "if not found:\n"
    "    print('no heartbeat yet: the runner has not started')\n"
    "    sys.exit(1)\n"
)

#: A warm sweep pod's heartbeat file under ``<workdir>/.heartbeat`` (:class:`PodHeartbeat`).
POD_HEARTBEAT = "pod"
#: Seconds between two beats of a :class:`PodHeartbeat`.
POD_BEAT_S = 1.0


def heartbeat_path(workdir: str | os.PathLike[str], label: str) -> Path:
    """Where the role instance ``label`` (``env-server-0``, ``agent-0``) keeps its heartbeat under ``workdir``."""
    return Path(workdir) / HEARTBEAT_DIR / label


def beat(path: Path, at: float | None = None) -> None:
    """Set the heartbeat file's mtime to ``at`` (default now), creating it; never raises."""
    try:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        when = time.time() if at is None else at
        os.utime(path, (when, when))
    except OSError as exc:  # a full disk must not end a run: the probe then reads it as old
        logger.debug("heartbeat %s: %s", path, exc)


def heartbeat_age(
    path: Path, now: float | None = None, *, since: float | None = None, ages: StampAges | None = None
) -> float | None:
    """Seconds since the heartbeat at ``path``; None while there is none (the process is starting).

    ``since``: the process's start; an older file is a previous process's and counts as none. ``ages``: the
    reader's :class:`~rlcloud.waiting.StampAges` (another process's mtime is a wall-clock stamp: a step of the
    clock must not age it); None: ``now`` (default the wall clock) minus the mtime.
    """
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return None
    if since is not None and mtime < since:
        return None
    if ages is not None:
        return ages.age(str(path), mtime)
    return max(0.0, (time.time() if now is None else now) - mtime)


def liveness_command(workdir: str, max_age: float) -> list[str]:
    """The exec livenessProbe's command: fails once the newest heartbeat under ``workdir`` (the pod's work
    directory) is ``max_age`` seconds old."""
    return ["python", "-c", LIVENESS_SCRIPT, f"{workdir.rstrip('/')}/{HEARTBEAT_DIR}", f"{max_age:g}"]


def startup_command(workdir: str) -> list[str]:
    """The exec startupProbe's command: succeeds once a heartbeat exists under ``workdir``."""
    return ["python", "-c", STARTUP_SCRIPT, f"{workdir.rstrip('/')}/{HEARTBEAT_DIR}"]


def _declare(path: Path, limit: float | None) -> None:
    """Write into the heartbeat file the age at which its liveness probe should fail (None: the probe's own)
    and beat it; never raises. Written in place: its fresh mtime means no probe can fail on a half-written
    file (an empty one reads as the probe's own limit)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("" if limit is None else f"{limit:g}\n", encoding="utf-8")
    except OSError as exc:
        logger.debug("heartbeat %s: %s", path, exc)
    beat(path)


#: The process's :class:`PodHeartbeat` while one runs (a warm sweep pod's), which watchdogs take over.
_pod_heartbeat: PodHeartbeat | None = None


class PodHeartbeat:
    """A warm sweep pod's one heartbeat, ``<workdir>/.heartbeat/pod``, for the pod's whole life.

    A daemon thread beats it every :data:`POD_BEAT_S` while no trial trains: through the imports, the wait
    for the smoke trial and a trial's preparation (a hang that holds the GIL stops it, and the probe ends
    the pod after its limit). While a :class:`StallWatchdog` made during its life runs, the watchdog owns
    the file (:meth:`hold`: its last advance, its limit) and the thread leaves it alone; the watchdog's
    :meth:`StallWatchdog.stop` hands it back (:meth:`release`), beaten, so that a pod between trials is
    never seen old. Use as a context manager around the pod's work; it removes the file at the end.
    """

    def __init__(self, workdir: str | os.PathLike[str]) -> None:
        self.path = heartbeat_path(workdir, POD_HEARTBEAT)
        self._lock = threading.Lock()
        self._held = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: times round the thread's loop (beaten or not)
        self.rounds = 0

    def start(self) -> PodHeartbeat:
        """Beat now and from a daemon thread; from now on this process's watchdogs take this file over."""
        global _pod_heartbeat
        _declare(self.path, None)
        _pod_heartbeat = self
        self._thread = threading.Thread(target=self._run, name="rlcloud-pod-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop beating and remove the file (the pod's work is over: no heartbeat reads as nothing to judge)."""
        global _pod_heartbeat
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if _pod_heartbeat is self:
            _pod_heartbeat = None
        with contextlib.suppress(OSError):
            self.path.unlink()
            self.path.parent.rmdir()  # when empty: the pod leaves its work directory as it found it

    def __enter__(self) -> PodHeartbeat:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def held(self) -> bool:
        """Whether a watchdog owns the file now."""
        return self._held

    def hold(self, limit: float) -> Path:
        """A watchdog takes the file over (with its probe ``limit``); returns the file's path."""
        with self._lock:
            self._held = True
            _declare(self.path, limit)
        return self.path

    def release(self) -> None:
        """The watchdog hands the file back: beaten now, the probe's own limit, the thread beats it again."""
        with self._lock:
            self._held = False
            _declare(self.path, None)

    def _run(self) -> None:
        while not self._stop.wait(POD_BEAT_S):
            with self._lock:
                if not self._held:
                    beat(self.path)
            self.rounds += 1


def _job_uid() -> str | None:
    """The Job's uid of a warm sweep pod (rlcloud.runenv.JOB_UID); None elsewhere."""
    return runenv.RunnerEnv.from_env().job_uid


def _previous_stalls(workdir: Path) -> int:
    """Stalls in a row before this process: the previous process's, when a stall ended it; else 0. A stall
    recorded under another Job (a warm sweep started again) does not count."""
    try:
        progress = json.loads((workdir / PROGRESS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    record = ProgressRecord.of(progress if isinstance(progress, dict) else {})
    if record.state != "stalled":
        return 0
    if record.job_uid and _job_uid() and record.job_uid != _job_uid():
        return 0
    return record.stalls if record.stalls is not None and record.stalls > 0 else 1


#: Called with the exit code just before a watchdog ends the process (:func:`on_stall_exit`).
_EXIT_HOOKS: list[Callable[[int], object]] = []


def on_stall_exit(hook: Callable[[int], object]) -> Callable[[], None]:
    """Have ``hook(code)`` called just before a watchdog ends this process for a stall (a warm worker that
    runs trials in-process records the trial's exit code, as a supervisor would); returns the unregistration."""
    _EXIT_HOOKS.append(hook)

    def remove() -> None:
        with contextlib.suppress(ValueError):
            _EXIT_HOOKS.remove(hook)

    return remove


class StallWatchdog:
    """Ends a learner whose trainer has not advanced for ``stall_timeout`` seconds (module docstring).

    ``trainer``: the :class:`~rlcloud.runner.loop.Trainer` (its ``running`` flag and ``counters`` are read);
    ``workdir``: where progress.json is; ``hooks``: the loop's hooks, whose ``on_finish`` pushes the work
    directory to the results store; ``label``: the role instance (heartbeat file, log line);
    ``waiting``: returns True while the learner waits for its env servers (not a stall of its own);
    ``exit``: how the process ends (``os._exit``: the main thread may be stuck where nothing else reaches);
    ``heartbeat``: its heartbeat file (default: the running :class:`PodHeartbeat`'s in a warm sweep pod,
    taken over from :meth:`start` to :meth:`stop`; else :func:`heartbeat_path` of ``workdir`` and ``label``);
    ``clock``: what it reads time from (default the system's; a test steps it). A stall is measured with the
    monotonic clock, so a step of the wall clock (a laptop's sleep, NTP) is no stall; the wall clock only stamps
    the heartbeat file, which other processes read.
    Call :meth:`start` before training and :meth:`stop` after; it reads progress.json at construction, before
    the trainer rewrites it, to know whether the previous process stalled.
    """

    def __init__(
        self,
        trainer: Any,
        stall_timeout: float,
        workdir: str | os.PathLike[str],
        *,
        label: str,
        hooks: Any = None,
        waiting: Callable[[], bool] | None = None,
        exit: Callable[[int], object] = os._exit,
        heartbeat: Path | None = None,
        clock: Clock | None = None,
    ) -> None:
        from rlcloud.waiting import SYSTEM_CLOCK

        self.clock = clock or SYSTEM_CLOCK
        self.trainer = trainer
        self.stall_timeout = float(stall_timeout)
        self.workdir = Path(workdir)
        self.label = label
        self.hooks = hooks
        self.waiting = waiting
        self._exit = exit
        #: stalls in a row before this process (a previous process ended by a stall)
        self.previous_stalls = _previous_stalls(self.workdir)
        #: the warm sweep pod's heartbeat this watchdog takes over (None: a heartbeat of its own)
        self._pod = _pod_heartbeat if heartbeat is None else None
        if heartbeat is not None:
            self.heartbeat = heartbeat
        elif self._pod is not None:
            self.heartbeat = self._pod.path
        else:
            self.heartbeat = heartbeat_path(self.workdir, label)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = (0, 0)
        #: the exit code it ended the process with (None: it has not)
        self.fired: int | None = None

    def start(self) -> StallWatchdog:
        """Start watching in a daemon thread (the trainer's counters now are where it starts from)."""
        self._start = self._position()
        # from now on a heartbeat exists: one that stops here is a hang before training (the GIL held). It
        # says the age at which the probe should end this process: after this watchdog would have (a
        # sweep's trials may each have their own stall_timeout; the probe's own limit is the base spec's)
        limit = self.stall_timeout + LIVENESS_MARGIN_S
        if self._pod is not None:
            self._pod.hold(limit)
        else:
            _declare(self.heartbeat, limit)
        self._thread = threading.Thread(target=self._run, name="rlcloud-stall-watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching (training ended) and remove the heartbeat: a final upload is no stall."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if self._pod is not None:
            if self._thread is not None:  # started: it holds the pod's heartbeat, handed back beaten
                self._pod.release()
            return
        with contextlib.suppress(OSError):
            self.heartbeat.unlink()

    def on_finish(self, state: str) -> None:
        """The loop hook: training ended (the final checkpoint is written), so the final upload that follows,
        however long, is no stall. Put it before the results syncer's hook."""
        self.stop()

    def _position(self) -> tuple[int, int]:
        counters = self.trainer.counters
        return int(counters.get("timestep", 0)), int(counters.get("evaluation_episode", 0))

    def _run(self) -> None:
        # A tick well under the timeout: the stall is acted on within stall_timeout plus one tick.
        tick = min(1.0, self.stall_timeout / 4)
        grace = min(FIRST_STEP_GRACE_S, self.stall_timeout)
        seen = self._start
        # monotonic seconds (this process's own durations); the heartbeat file gets the wall time they stand for
        running_since: float | None = None
        advanced_at: float | None = None  # this process's last advance (None: no step yet)
        while not self._stop.wait(tick):
            now, wall = self.clock.monotonic(), self.clock.time()
            if not getattr(self.trainer, "running", False):
                beat(self.heartbeat, wall)  # starting (the loop's first second, a restore): not judged
                continue
            running_since = running_since or now
            position = self._position()
            if position != seen or (self.waiting is not None and self.waiting()):
                seen, advanced_at = position, now
            # TensorFlow traces and first runs the agent's graphs (act, observe, the first update) early in
            # training, slowly on a busy machine: that start is given `grace` more; the heartbeat (what the
            # liveness probe reads) says the same
            beat_at = min(now, max(advanced_at or running_since, running_since + grace))
            beat(self.heartbeat, wall - (now - beat_at))
            if now - beat_at >= self.stall_timeout:
                self._fire(now - (advanced_at or running_since))
                return

    def _fire(self, idle: float) -> None:
        stalls = self.previous_stalls + 1
        again = self.previous_stalls >= STALL_RESTARTS
        timestep, _ = self._position()
        what = f"stalled: no timestep for {idle:.0f} s (stall_timeout {self.stall_timeout:g} s) at timestep {timestep}"
        if again:
            logger.error("%s, again after a restart for a stall: the run fails", what)
        else:
            logger.error("%s: ending this process so that it restarts from its latest checkpoint", what)
        # where it hangs, for whoever reads the log (faulthandler reads the frames without the GIL)
        with contextlib.suppress(Exception):
            sys.stderr.flush()
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        self._record(stalls, again, what)
        self._flush()
        code = EXIT_STALLED_AGAIN if again else EXIT_STALLED
        self.fired = code
        for hook in list(_EXIT_HOOKS):
            try:
                hook(code)
            except Exception:
                logger.exception("a stall exit hook failed")
        with contextlib.suppress(Exception):
            logging.shutdown()
        self._exit(code)

    def _record(self, stalls: int, again: bool, what: str) -> None:
        path = self.workdir / PROGRESS
        try:
            progress = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            progress = {}
        if not isinstance(progress, dict):
            progress = {}
        # "failed" when it will not be started again: a later start (a resume) gets its restart afresh
        progress.update(state="failed" if again else "stalled", stalls=stalls, stalled=what, updated=time.time())
        if _job_uid():  # a warm sweep pod's: the pod that runs the trial next knows the record is this Job's
            progress["job_uid"] = _job_uid()
        tmp = path.with_name(f".{PROGRESS}.tmp-{os.getpid()}")
        try:
            tmp.write_text(json.dumps(progress) + "\n", encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            logger.exception("could not record the stall in progress.json")

    def _flush(self) -> None:
        """Push progress.json and the log to the results store, for at most :data:`FLUSH_TIMEOUT_S`: the
        main thread may hold the syncer where it hangs, and nothing must keep the process alive then."""
        finish = getattr(self.hooks, "on_finish", None)
        if finish is None:
            return

        def run() -> None:
            try:
                finish("stalled")
            except Exception:
                logger.exception("could not push the stall to the results store")

        flusher = threading.Thread(target=run, name="rlcloud-stall-flush", daemon=True)
        flusher.start()
        flusher.join(FLUSH_TIMEOUT_S)
