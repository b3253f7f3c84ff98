"""The local backend: each role of an experiment runs as a background process on this machine, like a pod.

``start()`` launches, per role (:func:`rlcloud.roles.roles_for`), a supervisor
(``python -m rlcloud.local.supervisor``, this backend's ``kubelet``: :mod:`rlcloud.local.supervisor`) in
its own session, which runs ``python -m rlcloud.runner --role ...`` and returns at once: single:
``single-0``; multi-threaded: ``multi-0``; distributed: ``agent-0`` plus ``env-server-0..N-1`` on free
local ports (the agent gets them in ``RLCLOUD_ENV_SERVERS``). What another process needs to find, watch
and stop a run is on disk (:mod:`rlcloud.local.state`).

``stop()`` sends SIGTERM to every runner (it checkpoints and exits within 10 s), then SIGKILL to the
process groups still alive after ``grace_period``. A results root on ``gs://`` runs in a local cache
directory (:func:`rlcloud.results.local_workdir`) and the runner syncs to the bucket (``RLCLOUD_RESULTS``).

The class is composed of its halves (the backend contract's core and its sweep capability,
rlcloud.backend): :class:`LocalExperiments` here, :class:`LocalSweeps <rlcloud.local.sweeps.LocalSweeps>`
(a background scheduler of trials), over :class:`LocalMachine <rlcloud.local.machine.LocalMachine>` (the
settings and the children this Python started).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlcloud.backend import (
    ExperimentBackend,
    ExperimentState,
    ExperimentStatus,
    RoleState,
    RoleStatus,
    RunFacts,
)
from rlcloud.errors import ConflictError, NotFoundError, RecordError, RLCloudError, WaitTimeoutError
from rlcloud.layout import PROGRESS, ProgressRecord, child
from rlcloud.local.machine import (
    LocalMachine,
    code_env,
    keep_child,
    reap_children,
)
from rlcloud.local.state import (
    GROUP_KILL_MARGIN,
    POLL_S,
    STATE_DIR,
    RoleInfo,
    RunState,
    atomic_write,
    flock_held,
    free_ports,
    hold_flock,
    last_line,
    open_log,
    proc_identity,
    recorded_text,
    tail,
)
from rlcloud.local.supervisor import DEFAULT_GRACE_PERIOD
from rlcloud.local.sweeps import LocalSweeps
from rlcloud.results import local_workdir
from rlcloud.roles import (
    LEARNER,
    LEARNER_ROLES,
    Role,
    log_line,
    role_label,
    role_selector,
    roles_for,
)
from rlcloud.runenv import RunnerEnv
from rlcloud.stored import read_record_file
from rlcloud.waiting import poll_until

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec

__all__ = [
    "DEFAULT_GRACE_PERIOD",
    "LOCAL_IDLE_TIMEOUT",
    "LocalBackend",
    "LocalExperiments",
]

logger = logging.getLogger(__name__)

#: How long an env server waits for an agent that never (re)connects before it exits by itself.
LOCAL_IDLE_TIMEOUT = 300.0


class LocalExperiments(LocalMachine, ExperimentBackend):
    """The experiment verbs: each role of an experiment as a background process (see the module docstring)."""

    def _run(self, name: str, root: str | None = None) -> RunState:
        """The run ``name`` (under ``root``, default the results root); NotFoundError when there is none."""
        workdir = self._known.get(name) or local_workdir(root or self.results_root, name)
        exp = RunState(workdir)
        if not exp.exists():
            raise NotFoundError(
                f"no local experiment named {name!r} under {self.results_root} "
                f"(known: {', '.join(self.list()) or 'none'})"
            )
        return exp

    # -- start

    def start(self, spec: ExperimentSpec, results: str) -> bool:
        """Start (or resume) ``spec`` as background processes writing under ``results``; return at once.

        Idempotent: an experiment whose processes are running is left alone (returns False). One that
        ended (stopped, paused, failed, succeeded) starts again; the runner resumes from its latest
        checkpoint (returns True). Starts and stops of one run take turns (the run's control lock), so two
        starts at the same moment launch one set of processes: the second finds them running. Processes of
        a previous start that are still ending (a stop under way, a runner whose supervisor died) are
        waited for, so that one runner at a time writes into the run's directory; ConflictError when one
        outlives the grace period.
        """
        name = spec.name
        workdir = local_workdir(results, name)
        exp = RunState(workdir)
        self._known[name] = workdir
        reap_children()
        workdir.mkdir(parents=True, exist_ok=True)
        _no_links(exp.state_dir, exp.logs_dir)
        exp.state_dir.mkdir(exist_ok=True)
        with hold_flock(exp.control_lock, self._lock_timeout, f"another start or stop of {name}"):
            return self._start_locked(exp, spec, results)

    @property
    def _lock_timeout(self) -> float:
        """How long a start or stop waits for another one of the same run (a stop takes this long at most)."""
        return self.grace_period + GROUP_KILL_MARGIN + 30

    def _start_locked(self, exp: RunState, spec: ExperimentSpec, results: str) -> bool:
        name = spec.name
        if exp.exists():
            previous = exp.read()
            recorded = exp.roles(previous)
            running = [r for r in recorded if exp.role_alive(r)]
            # A stop is under way, a role ended and its supervisor is stopping the others, or a role vanished
            # (its supervisor killed, nobody left to stop the others): the run is ending or broken, not
            # running; end what is left before starting again.
            ending = previous.get("stop_requested") or len(running) < len(recorded)
            if running and not ending:
                logger.info("experiment %s is already running (%s)", name, ", ".join(r.label for r in running))
                return False
            if running:
                exp.stop_roles(running, self.grace_period)
        self._wait_for_previous_processes(exp)
        exp.logs_dir.mkdir(exist_ok=True)
        for old in [
            *exp.state_dir.glob("*.exit"),
            *exp.state_dir.glob("*.runner"),
            *exp.state_dir.glob("*.restarts"),
            *exp.state_dir.glob("*.why"),
        ]:
            old.unlink()
        # The spec the roles run with now; <workdir>/spec.yaml is the run's spec of record (rlcloud.record),
        # which a resume with a longer budget must not replace.
        spec_path = exp.spec_file
        atomic_write(spec_path, spec.to_yaml())

        plan = self._plan(spec)
        env = os.environ.copy()
        env.update(self.env)
        inherited = RunnerEnv.from_env(env)
        run_env = inherited.replace(
            idle_timeout=inherited.idle_timeout or LOCAL_IDLE_TIMEOUT,
            host_map=(),
            results=child(results, name) if results.startswith("gs://") else None,
            **code_env(spec, results, inherited),
        )
        run_env.apply_to(env)
        env_servers = tuple(("127.0.0.1", port) for _role, _index, port in plan if port is not None)

        state: dict[str, Any] = {
            "name": name,
            # Absolute, so that attach() from another working directory finds the same place.
            "results": results if results.startswith("gs://") else str(Path(results).expanduser().resolve()),
            "workdir": str(exp.workdir),
            "run_mode": str(spec.run_mode),
            # what a listing needs of the spec (goal, budget, processes): read here, not parsed from it
            "facts": RunFacts.of_spec(spec).to_record(),
            "started": time.time(),
            "host": socket.gethostname(),
            "roles": [],
            "stop_requested": False,
            "paused": False,
        }
        exp.write(state)  # supervisors read it when a role ends; the roles are added below
        roles: list[dict[str, Any]] = []
        budget = _budget_options(spec, self.run_price(spec))  # the learner's supervisor enforces it
        try:
            # Env servers first: they are listening by the time the agent (slower to import) dials.
            for role, index, port in sorted(plan, key=lambda p: p[0].is_learner):
                role_env = dict(env)
                if port is not None:
                    role_env.update(RunnerEnv(port=port, bind_host="127.0.0.1").to_env())
                if role is Role.AGENT:
                    role_env.update(RunnerEnv(env_servers=env_servers).to_env())
                proc, command = self._launch(exp, role, index, spec_path, role_env, spec.stall_timeout.seconds, budget)
                roles.append(
                    dict(
                        role=str(role), index=index, started=time.time(), port=port, **proc_identity(proc.pid, command)
                    )
                )
                exp.update(roles=roles)
        except BaseException:
            exp.stop_roles([r for r in map(RoleInfo.from_record, roles) if r is not None], self.grace_period)
            raise
        logger.info("started %s locally: %s", name, ", ".join(f"{r['role']}-{r['index']}" for r in roles))
        return True

    def _wait_for_previous_processes(self, exp: RunState) -> None:
        """Wait until no process of an earlier start of this run lives (any role's lock is held while one
        does: a supervisor finishing up, a runner checkpointing after its supervisor died); ConflictError
        naming them when they outlive the grace period."""

        def busy() -> list[str]:
            labels = {p.stem for p in exp.state_dir.glob("*.lock") if p.name != exp.control_lock.name}
            roles = exp.roles() if exp.exists() else []
            busy_roles = {r.label for r in roles if exp.role_busy(r)}
            return sorted(busy_roles | {label for label in labels if flock_held(exp.lock_file(label))})

        if not busy():
            return
        deadline = time.monotonic() + self.grace_period + GROUP_KILL_MARGIN
        poll_until(lambda: True if not busy() else None, deadline, interval=POLL_S)
        left = busy()
        if left:
            raise ConflictError(
                f"processes of an earlier start of {exp.workdir.name} are still running ({', '.join(left)}); "
                f"stop it first: rlcloud experiment stop {exp.workdir.name}"
            )

    @staticmethod
    def _plan(spec: ExperimentSpec) -> list[tuple[Role, int, int | None]]:
        instances = roles_for(spec)
        ports = iter(free_ports(sum(role is Role.ENV_SERVER for role, _ in instances)))
        return [(role, index, next(ports) if role is Role.ENV_SERVER else None) for role, index in instances]

    def _launch(
        self,
        exp: RunState,
        role: Role,
        index: int,
        spec_path: Path,
        env: dict[str, str],
        stall_timeout: float | None = None,
        budget: list[str] | None = None,
    ) -> tuple[subprocess.Popen[bytes], list[str]]:
        label = role_label(role, index)
        log_path = exp.log_file(label)
        # Absolute: the command line names the run's directory, which is what proves a process ours (state.ours).
        workdir = str(exp.workdir.resolve())
        runner = [
            self.python, "-m", "rlcloud.runner", "--role", role, "--index", str(index),
            "--spec", str(spec_path.resolve()), "--workdir", workdir,
        ]  # fmt: skip
        # learners are watched for timesteps, env servers for their heartbeat (a hung one is replaced)
        watch = ["--stall-timeout", str(stall_timeout)] if stall_timeout else []
        if role.is_learner and budget:
            watch += budget  # the learner's supervisor keeps the run's budget (rlcloud.budget)
        command = [
            self.python, "-m", "rlcloud.local.supervisor", "--workdir", workdir,
            "--label", label, "--grace", str(self.grace_period), *watch, "--", *runner,
        ]  # fmt: skip
        # Appended to, never through a link (a copied run directory may hold one: its target is not our log).
        if log_path.is_symlink():
            log_path.unlink()
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "ab") as log:
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
        keep_child(proc)
        return proc, command

    # -- status

    def status(self, name: str) -> ExperimentStatus:
        """State per role (from the processes and their exit codes) plus progress.json."""
        reap_children()
        exp = self._run(name)
        return self._status(name, exp, exp.read())

    def listed(self, names: Sequence[str]) -> Iterator[tuple[str, ExperimentStatus | RLCloudError, str | None]]:
        """For each of ``names``: what ``Experiment.attach(name).status()`` says of the local run and its
        results location, or the RLCloudError that says why not (and None), for a listing of many runs.

        Each run's state.json is read once, its goal, budget and process count taken from the facts recorded
        there at its start (its spec is parsed only for a run started before they were), the results root
        and rlcloud.yaml's rate resolved once for all (issue 36: parsing a spec and resolving the root per run
        made ``experiment list`` of 2,000 runs take seconds)."""
        from dataclasses import replace

        from rlcloud.budget import local_price_per_hour
        from rlcloud.results import check_results_root, results_location

        reap_children()
        root = self.results_root
        rate = self.rate() if names else None
        checked: dict[str, str] = {}  # each recorded results root, checked once (the runs of a root share it)
        for name in names:
            try:
                exp = self._run(name, root)
                state = exp.read()
                status = self._status(name, exp, state)
                facts = RunFacts.of_record(state.get("facts"))
                if facts is None:
                    facts = RunFacts.of_spec(_load_spec(exp.current_spec_file()))
                recorded = recorded_text(state, "results", exp.state_file)
                if recorded not in checked:
                    checked[recorded] = check_results_root(recorded)
            except RLCloudError as exc:
                yield name, exc, None
                continue
            price = None if rate is None else local_price_per_hour(rate, facts.processes)
            status = replace(status, goal=facts.goal, price_per_hour=price, budget_usd=facts.budget_usd)
            yield name, status, results_location(checked[recorded], name)

    def _status(self, name: str, exp: RunState, state: dict[str, Any]) -> ExperimentStatus:
        roles = [self._role_status(exp, r, state) for r in exp.roles(state)]
        progress = ProgressRecord()
        path = exp.workdir / PROGRESS
        try:
            progress = ProgressRecord.clean(read_record_file(path), str(path))
        except FileNotFoundError:
            pass
        except RecordError as exc:  # a record is input: say which, show the rest
            logger.warning("%s", exc)
        overall, message = self._overall(exp, state, roles)
        return ExperimentStatus(
            name=name, state=overall, roles=roles, progress=progress, message=message, backend=self.kind
        )

    def _role_status(self, exp: RunState, role: RoleInfo, state: dict[str, Any]) -> RoleStatus:
        code = exp.exit_code(role.label)
        requested = bool(state.get("stop_requested"))
        restarts = exp.restarts(role.label)  # a stalled runner its supervisor started again
        if code is None:
            if exp.supervisor_alive(role):
                return RoleStatus(role.role, role.index, "running", restarts=restarts)
            if exp.runner_alive(role.label):
                # Its supervisor was killed: the runner got SIGTERM with it, and checkpoints and exits.
                why = "its supervisor is gone: the runner stops after a checkpoint"
                return RoleStatus(role.role, role.index, "running", reason=why)
            if not exp.provable(role):
                # Not started here by this rlcloud (another host's record, one copied into this directory, or
                # one without the identity that proves a process ours): never watched, never signalled.
                why = f"recorded on {role.host or 'an unknown host'}, not provably a process rlcloud started here"
                return RoleStatus(role.role, role.index, "unknown", reason=why)
            vanished = state.get("vanished")
            if requested and role.label not in (vanished if isinstance(vanished, list) else []):
                # ended by a stop that had to kill it (or its supervisor) before a code was written
                return RoleStatus(
                    role.role,
                    role.index,
                    "suspended" if state.get("paused") else "succeeded",
                    reason="stopped on request (no exit code recorded)",
                )
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
            # the supervisor ended it (a stall) and said why; else its log's last error line
            why = exp.why(role.label) or last_line(exp.log_file(role.label), exp.workdir)
            reason = f"exit code {code}: {why}"
        return RoleStatus(role.role, role.index, role_state, restarts=restarts, exit_code=code, reason=reason)

    def _overall(
        self, exp: RunState, state: dict[str, Any], roles: list[RoleStatus]
    ) -> tuple[ExperimentState, str | None]:
        if not roles:
            return "pending", None
        unknown = [r for r in roles if r.state == "unknown"]
        if unknown and not any(r.state == "running" for r in roles):
            return "unknown", (
                f"{unknown[0].label}: {unknown[0].reason}; rlcloud neither watches nor signals it "
                "(start it again to run it here)"
            )
        failed = [r for r in roles if r.state == "failed"]
        if failed:
            # The role that failed first caused the rest (the others were stopped because of it).
            first = min(
                failed,
                key=lambda r: exp.exit_file(r.label).stat().st_mtime if r.exit_code is not None else float("inf"),
            )
            last = tail(exp.log_file(first.label), 15, exp.workdir)
            return "failed", f"{first.label} failed ({first.reason}); last lines of its log:\n{last}"
        running = [r for r in roles if r.state == "running"]
        main = next((r for r in roles if r.role in LEARNER_ROLES), None)
        if main is not None and main.exit_code == 0:
            # The learner finished its budget: a stop or pause that came too late changes nothing.
            return "succeeded", None
        if state.get("stop_requested"):
            if running:
                return "running", "stopping"
            # a supervisor that stopped the run for its budget says so (stop_reason)
            reason = state.get("stop_reason") if isinstance(state.get("stop_reason"), str) else None
            return ("paused", None) if state.get("paused") else ("stopped", reason)
        return "running", None

    def wait(self, name: str, timeout: float | None = None) -> ExperimentStatus:
        """Block until the experiment finishes and all its processes have ended; rlcloud.errors.WaitTimeoutError
        after ``timeout`` seconds (the experiment keeps running)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last: list[ExperimentStatus] = []

        def ended() -> ExperimentStatus | None:
            status = self.status(name)
            last[:] = [status]
            # Finished, and nothing left running: after a failure the supervisors are still stopping
            # the other roles for a moment, and a caller may want to start again right away.
            if (status.finished or status.state == "paused") and not self._any_process_alive(name):
                return status
            return None

        done = poll_until(ended, deadline, interval=POLL_S)
        if done is None:
            status = last[0]
            raise WaitTimeoutError(
                f"experiment {name!r} still {status.state} after {timeout:g} s "
                f"(timestep {status.progress.timestep or 0}); it keeps running: wait again or stop it"
            )
        return done

    def _any_process_alive(self, name: str) -> bool:
        """Whether a process of the experiment still runs (a supervisor may be stopping the other roles, a
        runner whose supervisor died may be checkpointing)."""
        reap_children()
        exp = self._run(name)
        return any(exp.role_busy(r) for r in exp.roles())

    def logs(self, name: str, follow: bool = False, roles: Sequence[str] | None = None) -> Iterator[str]:
        """Log lines as ``"role-index | line"``; with ``follow``, until every role has ended. ``roles``: whose
        (default: every role's, the learner's only when following; see :meth:`Backend.logs`)."""
        selected = role_selector(roles if roles or not follow else [LEARNER])
        exp = self._run(name)
        every = exp.roles()
        shown = [r for r in every if selected(r.label)]
        offsets = {r.label: 0 for r in shown}
        refused: set[str] = set()
        partial = {r.label: b"" for r in shown}
        while True:
            ended = not follow or not any(exp.role_alive(r) for r in every)
            for role in shown:
                path = exp.log_file(role.label)
                try:
                    with os.fdopen(open_log(path, exp.workdir), "rb") as fh:
                        fh.seek(offsets[role.label])
                        chunk = fh.read()
                except FileNotFoundError:
                    continue
                except OSError as exc:  # a link (never followed), a FIFO, a directory
                    if role.label not in refused:
                        refused.add(role.label)
                        yield log_line(role.label, f"(log {path} not read: {exc.strerror or exc})")
                    continue
                offsets[role.label] += len(chunk)
                data = partial[role.label] + chunk
                lines = data.split(b"\n")
                partial[role.label] = lines.pop()
                for line in lines:
                    yield log_line(role.label, line.decode("utf-8", "replace").rstrip())
            if ended:
                # Everything has been read after the last process ended: flush unterminated last lines.
                for role in shown:
                    if partial[role.label]:
                        yield log_line(role.label, partial[role.label].decode("utf-8", "replace").rstrip())
                return
            time.sleep(POLL_S)

    # -- stop, pause, resume

    def stop(self, name: str) -> None:
        """SIGTERM every role (the runner checkpoints), SIGKILL after the grace period. Idempotent.

        A run that has ended is left as it is (a paused one becomes stopped). A runner whose supervisor was
        killed is found by its recorded identity and stopped too.
        """
        self._stop(name, paused=False)

    def pause(self, name: str) -> None:
        """Checkpoint and stop the processes; :meth:`resume` starts them again from the checkpoint.

        A run that has ended is left as it is: pausing it would make a finished run one that never finishes.
        """
        self._stop(name, paused=True)

    def _stop(self, name: str, *, paused: bool) -> bool:
        reap_children()
        exp = self._run(name)
        # Not while a start of the same run is launching its roles: it would launch some after the stop.
        with hold_flock(exp.control_lock, self._lock_timeout, f"a start or stop of {name}"):
            state = exp.read()
            running = [r for r in exp.roles(state) if exp.role_alive(r)]
            if not running:
                if not paused and state.get("paused"):
                    exp.update(paused=False)  # paused, now stopped: nothing runs either way
                    return True
                # Ended already (succeeded, failed, stopped, paused): marking it would turn a finished run
                # into a paused one that never finishes.
                logger.info("experiment %s is not running: nothing to %s", name, "pause" if paused else "stop")
                return False
            # Roles that had vanished before this stop (a killed supervisor) stay failed: the stop did not end them.
            vanished = [r.label for r in exp.roles(state) if r not in running and exp.exit_code(r.label) is None]
            exp.update(stop_requested=True, paused=paused, vanished=vanished)
            # The main role first: it checkpoints; env servers only serve it.
            running.sort(key=lambda r: r.role not in LEARNER_ROLES)
            exp.stop_roles(running, self.grace_period)
        reap_children()
        return True

    def resume(self, name: str) -> None:
        """Start a paused (or stopped) experiment again from its latest checkpoint."""
        exp = self._run(name)
        state = exp.read()
        self.start(_load_spec(exp.current_spec_file()), recorded_text(state, "results", exp.state_file))

    # -- discovery

    def list(self) -> list[str]:
        """Names of the experiments under the results root (and any started from this object)."""
        names = set(self._known)
        root = self.results_root
        base = local_workdir(root, "x").parent
        if base.is_dir():
            names.update(p.parent.parent.name for p in base.glob(f"*/{STATE_DIR}/state.json"))
        return sorted(names)

    def attach(self, name: str) -> tuple[ExperimentSpec, str]:
        """The spec and results root of an experiment started on this machine."""
        exp = self._run(name)
        state = exp.read()
        return _load_spec(exp.current_spec_file()), recorded_text(state, "results", exp.state_file)


class LocalBackend(LocalExperiments, LocalSweeps):
    """Runs experiments as background processes on this machine (see the module docstring).

    ``results_root``: where ``status``/``list``/``attach`` look for experiments by name (default: the
    project config's results root, else ./rlcloud-results); ``start`` uses the root it is given.
    ``grace_period``: seconds from SIGTERM to SIGKILL in ``stop``. ``env``: extra environment variables
    for the runner processes (e.g. ``RLCLOUD_IDLE_TIMEOUT``). ``cpu_hour_usd``: USD per process-hour here, for budgets
    (Cluster.local hands rlcloud.yaml's; None: rlcloud.yaml's when a price is asked).
    """

    def _trials(self, location: str) -> LocalBackend:
        return LocalBackend(location, grace_period=self.grace_period, cpu_hour_usd=self.cpu_hour_usd)


def _no_links(*paths: Path) -> None:
    """Refuse to run where a directory of a run's own is a symbolic link: what is written there (state, logs)
    would land wherever it points."""
    for path in paths:
        if path.is_symlink():
            raise ConflictError(
                f"{path} is a symbolic link; a run's {path.name} is a directory of its own (links in a run "
                "directory are never followed): remove it and start again"
            )


def _load_spec(path: Path) -> ExperimentSpec:
    from rlcloud.specs import ExperimentSpec

    return ExperimentSpec.from_file(path)


def _budget_options(spec: ExperimentSpec, price: float | None) -> list[str]:
    """The learner supervisor's ``--budget-usd B --price-per-hour P`` when the run has a budget and runs at a
    ``price`` (rlcloud.yaml's cpu_hour_usd is set); else none."""
    if spec.budget is None or price is None:
        return []
    return ["--budget-usd", f"{spec.budget.amount:.2f}", "--price-per-hour", repr(price)]
