"""The supervisor of one local role: the ``kubelet`` of the local backend, a program of its own.

``python -m rlcloud.local.supervisor --workdir DIR --label ROLE-INDEX [--grace S] -- COMMAND...`` runs
the runner command, records its exit code in ``.rlcloud-local/<label>.exit`` and applies the run's
lifecycle rules without anyone watching:

- the learner (single/multi/agent) ended: the env servers are told to stop (they exit by themselves
  when the agent finished the run; this also ends them when the agent failed);
- any role failed (an exit code other than 0, or 143/130 after a stop or pause): the other roles are
  stopped, and the run is failed.

- the run reached its money budget (``--budget-usd`` at ``--price-per-hour`` of training time,
  :mod:`rlcloud.budget`; the training time runs on between the runner's reports, :func:`training_seconds`):
  at 90% a line in the log; at 100% (plus one poll) the run is stopped as ``stop`` stops it (the runner
  checkpoints on SIGTERM, the other roles are stopped), its state "stopped" with the reason (``stop_reason``).
- the learner stalled (``--stall-timeout``: its own watchdog ended it with exit code 88,
  :mod:`rlcloud.runner.watchdog`; or the heartbeat that watchdog keeps is 30 s older than that, a hang the
  watchdog cannot see; or, for a runner without one, its progress.json says "running" but its timestep has
  not advanced for that long, :func:`rlcloud.backend.stalled_for`): the runner is stopped (SIGTERM, then
  SIGKILL after the grace period) and started again once, resuming from its latest checkpoint
  (``.rlcloud-local/<label>.restarts`` counts it); stalled a second time (or exit code 89) it is stopped
  and the role fails, the log's exit line saying why. A restarted runner gets the start-up of a first one: it
  is judged only once it reports training (an earlier runner's progress.json is not its own), its stall time
  counting from that first report.
- time: the runner's stamps (its reports, heartbeat files) are wall-clock times another process wrote; the
  supervisor ages them with its monotonic clock (:class:`rlcloud.waiting.StampAges`), so a step of the wall
  clock (a laptop's sleep, NTP) neither charges a budget nor looks like a stall.
- an env server stopped answering (``--stall-timeout``: its heartbeat file, touched by its request loop,
  is that old): it is killed (SIGTERM + SIGCONT, SIGKILL after a few seconds) and started again on the same
  port, up to three times; the agent reconnects to it and resets its environments, without a restart.

A SIGTERM/SIGINT is forwarded to the runner (it checkpoints and exits); after the grace period the
runner's whole process group is killed. One before the runner started means it never starts.

Every process of the role is accounted for: the supervisor holds the role's lock
(``.rlcloud-local/<label>.lock``, a ``flock`` the runner inherits) for as long as either lives, and
refuses to start a second runner while another process holds it; it records its runner's identity in
``.rlcloud-local/<label>.runner``; and the runner gets SIGTERM when the supervisor dies
(:mod:`rlcloud.runner.lifeline`), so a ``kill -9`` of the supervisor leaves no runner training unseen.

The exit line is written to the log before the exit code is recorded, so whoever sees the role ended also
finds its last lines; with a ``gs://`` results location (``RLCLOUD_RESULTS``) the log is uploaded then too:
the runner's own syncer ran before these lines were written.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlcloud.backend import stalled_for
from rlcloud.budget import decide
from rlcloud.errors import NotFoundError, WorkloadError
from rlcloud.layout import PROGRESS, ProgressRecord, log_path
from rlcloud.local.state import POLL_S, RunState, acquire_flock, atomic_write
from rlcloud.roles import LEARNER_ROLES
from rlcloud.runenv import RunnerEnv
from rlcloud.runner.lifeline import die_with_parent
from rlcloud.runner.watchdog import (
    EXIT_STALLED,
    EXIT_STALLED_AGAIN,
    LIVENESS_MARGIN_S,
    heartbeat_age,
    heartbeat_path,
)
from rlcloud.waiting import SYSTEM_CLOCK, Clock, StampAges, poll_until

__all__ = ["DEFAULT_GRACE_PERIOD", "EXIT_DUPLICATE", "Supervisor", "main", "supervise", "training_seconds"]

#: Seconds a supervisor gives its runner between SIGTERM and SIGKILL. The runner checkpoints and exits
#: within 10 s on an idle machine; a busy one (first save traced by TensorFlow) can take longer, and
#: locally there is no spot-VM deadline to meet.
DEFAULT_GRACE_PERIOD = 30.0

#: The supervisor's exit code when another process of the same role holds the role's lock: nothing was
#: started and no exit code is recorded (the role's record belongs to the process that runs).
EXIT_DUPLICATE = 75

#: Seconds a supervisor waits for the role's lock: a status probe holds it for a moment.
LOCK_WAIT_S = 5.0


#: Times a stalled runner is started again before its role fails.
STALL_RESTARTS = 1

#: Seconds between two reads of progress.json by a supervisor watching for a stall.
STALL_POLL_S = 1.0

#: Times an env server that stopped answering is replaced before its role (and so the run) fails: as often
#: as a Kubernetes env-server pod is retried (k8s.builders.ENV_SERVER_BACKOFF_PER_INDEX).
ENV_SERVER_STALL_RESTARTS = 3

#: Seconds a hung env server gets between SIGTERM and SIGKILL: it has nothing to save.
ENV_SERVER_GRACE_S = 5.0


def supervise(
    workdir: Path,
    label: str,
    command: list[str],
    grace_period: float = DEFAULT_GRACE_PERIOD,
    stall_timeout: float | None = None,
    budget: tuple[float, float] | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> int:
    """Run ``command``, record its exit code, and apply the lifecycle rules (module docstring).

    ``stall_timeout``: seconds a learner may train without a timestep before it is restarted (once), then
    failed, and an env server may go without a heartbeat before it is replaced; None: not watched.
    ``budget``: (USD, USD per hour) of the run: its cost so far is its training time (progress.json
    ``elapsed``, advanced with the wall clock since the live runner's last report: :func:`training_seconds`) x
    the price, checked every poll; at 90% a line in the log, at 100% the runner is stopped as a stop stops it
    (SIGTERM: it checkpoints) and so are the other roles. ``clock``: what time is read from (tests step it);
    the runner's stamps (its reports, its heartbeat) are aged with :class:`~rlcloud.waiting.StampAges`, so a
    step of the wall clock neither charges the budget nor looks like a stall.
    """
    supervisor = Supervisor(workdir, label, command, grace_period, stall_timeout, budget, clock)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, supervisor.forward)
    code = supervisor.start()
    while code is None:
        code = supervisor.step()
    return code


@dataclass
class Supervisor:
    """One role's supervisor as a step loop (fields: :func:`supervise`'s arguments): :meth:`start`, then
    :meth:`step` until it returns the exit code. Its moves (:meth:`runner_ended`, :meth:`look_at_budget`,
    :meth:`idle_seconds`, :meth:`stalled`, :meth:`kill_if_overdue`) return that code when they end the role."""

    workdir: Path
    label: str
    command: list[str]
    grace_period: float = DEFAULT_GRACE_PERIOD
    stall_timeout: float | None = None
    budget: tuple[float, float] | None = None
    clock: Clock = SYSTEM_CLOCK
    received: list[int] = field(default_factory=list)  # the signals received
    kill_at: float | None = None  # monotonic time the runner is killed, its SIGTERM overdue
    child: subprocess.Popen[bytes] | None = None
    launched: float = 0.0  # unix time the runner now alive was started
    first_report: list[float] = field(default_factory=list)  # when it first reported "running" (progress.json)
    next_look: float = 0.0  # monotonic time of the next look for a stall
    restarts: int = 0
    warned: bool = False  # at 90% of the budget

    def __post_init__(self) -> None:
        self.run = RunState(self.workdir)
        self.ages = StampAges(self.clock)
        self.learner = self.label.rsplit("-", 1)[0] in LEARNER_ROLES
        self.heartbeat = heartbeat_path(self.workdir, self.label)
        self.lock = -1
        self.env: dict[str, str] = {}

    def forward(self, signum: int, _frame: Any) -> None:
        """The SIGTERM/SIGINT handler: pass the signal on to the runner, and kill it after the grace period."""
        self.received.append(signum)
        if self.child is None:
            return  # not started yet: it will not be
        with contextlib.suppress(ProcessLookupError):
            self.child.send_signal(signum)
        if self.kill_at is None:
            self.kill_at = self.clock.monotonic() + self.grace_period

    def start(self) -> int | None:
        """Take the role's lock and launch the runner; the exit code when it must not start, else None."""
        lock = acquire_flock(self.run.lock_file(self.label), LOCK_WAIT_S)
        if lock is None:
            held = f"{self.run.lock_file(self.label)}: not starting a second one"
            print(f"----- another process of {self.label} holds {held}", flush=True)
            return EXIT_DUPLICATE
        self.lock = lock
        if self.received:
            return self.finish(128 + self.received[0], "stopped before its runner started")
        self.env = {**os.environ, **RunnerEnv(parent_pid=os.getpid()).to_env()}
        self.launch()
        if self.received and self.kill_at is None:  # a signal between the check above and the fork
            self.forward(self.received[0], None)
        self.next_look = self.clock.monotonic() + STALL_POLL_S
        return None

    def launch(self) -> None:
        """Start the runner (again): it is judged as a new one (its start-up, its first report)."""
        # The runner inherits the role's lock (pass_fds): it stays held while either process lives. Forked
        # from the main thread: the kernel's parent-death signal follows the thread that forked.
        self.child = subprocess.Popen(
            self.command, stdin=subprocess.DEVNULL, env=self.env, pass_fds=(self.lock,),
            preexec_fn=die_with_parent(os.getpid()),
        )  # fmt: skip
        self.run.write_runner(self.label, self.child.pid, self.command)
        self.launched = self.clock.time()
        self.first_report.clear()

    def count_restart(self) -> None:
        """Count a restart of the runner (``<label>.restarts``: the role's status shows it)."""
        self.restarts += 1
        atomic_write(self.run.restarts_file(self.label), f"{self.restarts}\n")

    def step(self) -> int | None:
        """One round: wait a poll for the runner's end, then look at the budget, a stall, an overdue SIGTERM."""
        assert self.child is not None, "start() first"
        try:
            code = self.child.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            pass
        else:
            return self.runner_ended(128 - code if code < 0 else code)  # a signal: the shell's (SIGKILL -> 137)
        if self.budget is not None and not self.received:  # each poll: a stop overruns by at most a poll
            ended = self.look_at_budget()
            if ended is not None:
                return ended
        if self.stall_timeout is not None and not self.received and self.clock.monotonic() >= self.next_look:
            self.next_look = self.clock.monotonic() + STALL_POLL_S
            idle = self.idle_seconds()
            if idle is not None:
                return self.stalled(idle)
        self.kill_if_overdue()
        return None

    def runner_ended(self, code: int) -> int | None:
        """The runner exited with ``code``: a watchdog's stall is a restart (None) or a failure; else the end."""
        if self.learner and code == EXIT_STALLED and not self.received:
            # the runner's own watchdog ended it (rlcloud.runner.watchdog): as a stall seen from here
            if self.restarts >= STALL_RESTARTS:
                return self.finish(code, _stall_why(self.run, "stalled again after a restart"))
            print(f"----- {self.label} stalled (its watchdog ended it): restarting it from its latest checkpoint",
                  flush=True)  # fmt: skip
            self.count_restart()
            self.launch()
            return None
        if self.learner and code == EXIT_STALLED_AGAIN:
            return self.finish(code, _stall_why(self.run, "stalled again after a restart"))
        return self.finish(code)

    def look_at_budget(self) -> int | None:
        """Warn once at 90% of the run's training time x price (:func:`training_seconds`), stop it at 100%."""
        assert self.budget is not None
        seconds = None
        if (record := _read_progress(self.run)) is not None:
            seconds = training_seconds(record, self.clock.time(), self.launched, ages=self.ages)
        decision = decide(self.budget[1] * seconds / 3600 if seconds is not None else None, self.budget[0],
                          warned=self.warned)  # fmt: skip
        if decision.action == "warn":
            self.warned = True
            print(f"----- {self.label} budget: {decision.reason}", flush=True)
        elif decision.action == "stop":
            return self.stop_for_budget(decision.reason)
        return None

    def stop_for_budget(self, reason: str) -> int:
        """Stop the run as ``rlcloud experiment stop`` does (the runner checkpoints on SIGTERM), saying why."""
        assert self.child is not None
        why = f"stopped by its budget: {reason}"
        print(f"----- {self.label} {why}: checkpointing and stopping the run", flush=True)
        # stop_requested first: the other roles' supervisors then treat their ends as requested, not as failures
        self.run.update(stop_requested=True, stop_reason=why)
        code = _end_child(self.child, self.grace_period, self.label)
        with contextlib.suppress(NotFoundError, ValueError):
            others = [r for r in self.run.roles(self.run.read()) if r.label != self.label]
            self.run.stop_roles([r for r in others if self.run.role_alive(r)], self.grace_period, reap=False)
        return self.finish(code, why)

    def idle_seconds(self) -> float | None:
        """Seconds the runner has gone without a sign of life, once past ``stall_timeout``; else None."""
        assert self.stall_timeout is not None
        beat_age = heartbeat_age(self.heartbeat, since=self.launched, ages=self.ages)
        if self.learner and beat_age is not None:
            # the runner's watchdog keeps this heartbeat and ends a stalled runner itself (exit 88, below):
            # this is the backstop for a runner whose watchdog cannot run (a hang that holds the GIL)
            return beat_age if beat_age >= self.stall_timeout + LIVENESS_MARGIN_S else None
        if self.learner:  # a runner without a watchdog: its progress.json heartbeat
            return self.progress_idle()
        # an env server: its request loop's heartbeat (a missing one: still starting)
        return beat_age if beat_age is not None and beat_age >= self.stall_timeout else None

    def progress_idle(self) -> float | None:
        """Seconds the runner now alive has trained without a timestep, once past ``stall_timeout``.

        Only the runner's own reports count: progress.json written before :attr:`launched` is an earlier runner's
        (a restarted learner still importing TensorFlow has not reported yet, and gets the start-up grace of a
        first start). Its idle time counts from its last advance, at the earliest from its first ``"running"``
        report (:attr:`first_report`: building the agent and restoring a checkpoint are no stall), aged by
        :attr:`ages` (a wall-clock step is no stall).
        """
        record = _read_progress(self.run)
        if record is None or record.updated is None or record.updated < self.launched or record.state != "running":
            return None  # no report of this runner yet (it is starting), or it does not train
        if not self.first_report:
            self.first_report.append(record.updated)
        beat = record.heartbeat
        # judged from this runner's start of training at the earliest (a restart's last beat is older)
        beat = max(beat, self.first_report[0]) if beat is not None else self.first_report[0]
        now = beat + self.ages.age("progress.heartbeat", beat)
        return stalled_for(ProgressRecord(record, advanced_at=beat, stall_timeout=self.stall_timeout), now)

    def stalled(self, idle: float) -> int | None:
        """The runner stalled for ``idle`` seconds: end it and start it again (None), or fail the role."""
        assert self.stall_timeout is not None and self.child is not None
        label, learner = self.label, self.learner
        what = "no timestep" if learner else "no heartbeat (it stopped answering)"
        grace = self.grace_period if learner else ENV_SERVER_GRACE_S
        if self.restarts >= (STALL_RESTARTS if learner else ENV_SERVER_STALL_RESTARTS):
            why = f"stalled: {what} for {idle:.0f} s (stall_timeout {self.stall_timeout:g} s), again"
            print(f"----- {label} {why}: stopping it, the role fails", flush=True)
            code = _end_child(self.child, grace, label)
            return self.finish(code if code != 0 else 1, why)
        again = "restarting it from its latest checkpoint" if learner else "replacing it"
        print(f"----- {label} stalled: {what} for {idle:.0f} s (stall_timeout {self.stall_timeout:g} s): {again}",
              flush=True)  # fmt: skip
        self.count_restart()
        # an env server has nothing to save: a short grace, and SIGCONT so that a stopped one dies
        _end_child(self.child, grace, label, resume=not learner)
        if self.received:  # a stop came while it ended: it is not started again
            return self.finish(128 + self.received[0], "stopped during a stall restart")
        self.launch()
        return None

    def kill_if_overdue(self) -> None:
        """Kill a runner that ignored SIGTERM for the grace period, after recording its exit code (137)."""
        # A runner stuck in a wait is killed here, with everything it started (its process group is ours).
        if self.kill_at is None or self.clock.monotonic() < self.kill_at or self.child is None:
            return
        print(f"----- {self.label} did not stop within {self.grace_period:g} s of SIGTERM: killing it", flush=True)
        _ship_log(self.run, self.label)
        atomic_write(self.run.exit_file(self.label), "137\n")
        if os.getpgrp() == os.getpid():  # our own session, as LocalBackend starts us
            os.killpg(os.getpgrp(), signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.child.kill()

    def finish(self, code: int, why: str = "") -> int:
        """Record ``code`` (after its log line) and apply the lifecycle rules to the other roles; ``code``."""
        run, label = self.run, self.label
        suffix = f" ({why})" if why else ""
        print(f"----- {time.strftime('%Y-%m-%d %H:%M:%S')} {label} exited with code {code}{suffix}", flush=True)
        _ship_log(run, label)
        if why:  # before the exit code: whoever reads the code finds the reason
            atomic_write(run.why_file(label), why + "\n")
        atomic_write(run.exit_file(label), f"{code}\n")
        try:
            state = run.read()
        except (NotFoundError, ValueError):
            return code
        if state.get("stop_requested"):
            return code  # whoever asked stops the others
        others = [r for r in run.roles(state) if r.label != label]
        if code != 0:
            print(f"----- {label} failed: stopping the other roles", flush=True)
            _ship_log(run, label)
        elif self.learner:
            # The agent told its env servers the run is finished; give them a moment to exit by themselves.
            poll_until(
                lambda: True if not any(run.role_alive(r) for r in others) else None,
                time.monotonic() + 10,
                interval=POLL_S,
            )
        else:
            return code  # an env server that ended normally: the agent decides the rest
        run.stop_roles([r for r in others if run.role_alive(r)], self.grace_period, reap=False)
        return code


def training_seconds(
    progress: ProgressRecord, now: float, launched: float, *, ages: StampAges | None = None
) -> float | None:
    """A live runner's training seconds at ``now``, all starts together; None when progress.json has none.

    progress.json's ``elapsed`` (all starts: a resumed runner goes on from its checkpoint's) is only as recent as
    its last report, and a report can be a long update away (a first PPO update traced by TensorFlow: 198% of a
    budget before the next one). While the runner that started at ``launched`` (unix time) trains, its training
    clock runs with the wall clock, so its own ``"running"`` report's ``elapsed`` plus the time since that
    report is its training time now, and a budget stop comes at 100% plus one poll, not at the next report. A
    report of an earlier runner (a restart, before its first report) or of one not training (``"starting"``:
    TensorFlow loading, not charged; a final state) is taken as it is: the steps a runner makes before its first
    ``"running"`` report are counted when that report comes.

    The runner's ``elapsed`` is its monotonic training time; the time since its report is the one figure that
    crosses processes (the wall clock, which steps): with ``ages`` it is never more than the reader's monotonic
    clock has run since it first saw that report (:class:`~rlcloud.waiting.StampAges`), so a 2-hour forward step
    of the wall clock (a laptop's sleep, NTP) adds nothing to the cost.

    Args:
        progress: the run's progress.json.
        now: unix time now (the runner's reports are stamped with the same clock: same machine).
        launched: unix time the runner now alive was started.
        ages: the reader's ages of stamps (None: ``now - updated``, unchecked).
    """
    elapsed = progress.elapsed
    updated = progress.updated
    if elapsed is None or progress.state != "running" or updated is None or updated < launched:
        return elapsed
    since = ages.age("progress.updated", updated) if ages is not None else max(0.0, now - updated)
    return elapsed + since


def _stall_why(run: RunState, default: str) -> str:
    """What the runner's watchdog recorded of its stall (progress.json ``"stalled"``), else ``default``."""
    what = (_read_progress(run) or ProgressRecord()).stalled
    return f"{what}, again after a restart" if isinstance(what, str) and what else default


def _read_progress(run: RunState) -> ProgressRecord | None:
    """The run's progress.json; None when absent, caught mid-write (the next poll reads it) or no record."""
    try:
        progress = json.loads((run.workdir / PROGRESS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return ProgressRecord(progress) if isinstance(progress, dict) else None


def _end_child(child: subprocess.Popen[bytes], grace_period: float, label: str, *, resume: bool = False) -> int:
    """SIGTERM the runner (it checkpoints when it can), SIGKILL it after ``grace_period``; its exit code.

    ``resume``: SIGCONT too, so that a stopped process handles its SIGTERM rather than wait for the SIGKILL.
    """
    with contextlib.suppress(ProcessLookupError):
        child.send_signal(signal.SIGTERM)
        if resume:
            child.send_signal(signal.SIGCONT)
    try:
        code = child.wait(timeout=grace_period)
    except subprocess.TimeoutExpired:
        print(f"----- {label} did not stop within {grace_period:g} s of SIGTERM: killing it", flush=True)
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        code = child.wait()
    return 128 - code if code < 0 else code


def _ship_log(run: RunState, label: str) -> None:
    """Upload the role's log to a ``gs://`` results location: its last lines came after the runner's sync.

    A local results location needs nothing: the log is written there. A failed upload is reported in the log
    itself and does not change the role's outcome.
    """
    results = RunnerEnv.from_env().results or ""
    if not results.startswith("gs://"):
        return
    try:
        sys.stdout.flush()
        from rlcloud.storage import open_store

        open_store(results).upload_file(run.log_file(label), log_path(label))
    except Exception as exc:  # the outcome matters more than the copy of the log
        print(f"----- could not upload the last lines of {label}'s log to {results}: {exc}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rlcloud.local.supervisor --workdir DIR --label ROLE-INDEX -- COMMAND...``."""
    parser = argparse.ArgumentParser(prog="python -m rlcloud.local.supervisor")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--grace", type=float, default=DEFAULT_GRACE_PERIOD, help="seconds from SIGTERM to SIGKILL")
    parser.add_argument(
        "--stall-timeout", type=float, default=None, help="seconds without progress (learner) or heartbeat"
    )
    parser.add_argument("--budget-usd", type=float, default=None, help="the run's budget (learner)")
    parser.add_argument("--price-per-hour", type=float, default=None, help="USD per hour of training (learner)")
    parser.add_argument("runner", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.runner[1:] if args.runner[:1] == ["--"] else args.runner
    if not command:
        raise WorkloadError("the supervisor needs a command after --")
    budget = (args.budget_usd, args.price_per_hour) if args.budget_usd and args.price_per_hour else None
    return supervise(Path(args.workdir), args.label, command, args.grace, args.stall_timeout, budget)


if __name__ == "__main__":
    sys.exit(main())
