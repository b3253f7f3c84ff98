"""Warm trials in a sweep's pod: ``python -m rlcloud.runner --sweep SWEEP.yaml --index I --stride N``.

A cold pod of a sweep's Indexed Job runs one trial and pays Python's start, the TensorFlow and Tensorforce
imports and the agent's first tracing for it (~10-20 s for what may be seconds of training). With
``--stride N`` the Job has ``N`` pods (``completions`` = ``parallelism`` = N,
:func:`rlcloud.k8s.builders.build_sweep_workloads` with ``warm=True``) and pod ``I`` runs trials ``I``,
``I+N``, ``I+2N``... one after another in its one process (:func:`run_share`), so only its first trial pays
the imports.

Each trial is what a cold pod would make of it (:func:`rlcloud.runner.main._prepare_trial`, then the
runner's training role): its spec of record and history, its own results under
``$RLCLOUD_SWEEP_RESULTS/<trial>`` synced from its own scratch work directory, its own
``logs/single-0.log``, the agent built fresh and seeded as in a cold start and closed at the end (the same
episodes for the same seed: tests/k8s/test_warm_sweep.py).

What the Job's per-index accounting did for a cold trial, the pod does per trial:

* a trial that finished (succeeded, stopped early) is skipped, so a restarted pod (a crash, an evicted
  node) resumes its share where it was, the interrupted trial from its checkpoint;
* a crash (exit 1, or any code but those below) is retried in the process :data:`TRIAL_RETRIES` times,
  each resuming from the trial's checkpoint, like ``backoffLimitPerIndex``;
* a trial that fails for good (a spec or construction error, exit 2/3, or out of retries) gets a failure
  record in its ``progress.json`` (``state: failed``, ``exit_code``, ``stop_reason``: the first error
  line, ``job_uid``) and the pod goes on with its next trial;
* before each trial the pod reads the records of the trials handed out so far: once ``max_failures`` of
  them have failed the same way in this Job (:func:`failure_signature`), the pod exits
  :data:`EXIT_HALTED`, which the Job's podFailurePolicy turns into ``FailJob``: Kubernetes stops the
  other pods (SIGTERM: they checkpoint), so a broken sweep stops after ``max_failures`` failed trials.
  Failures recorded by an earlier Job of the sweep (another ``RLCLOUD_JOB_UID``) do not count, and those
  trials run again;
* a trial that stalls (rlcloud.runner.watchdog) ends the whole process, as a cold pod's would: exit 88
  (its first stall) or 89 (stalled again after a restart for one), and the Job's podFailurePolicy
  *ignores* both (a replacement pod, no backoff spent: the stalls are counted per trial, in the store).
  The replacement resumes the trial from its checkpoint after a first stall; a trial whose record says
  it stalled again in this Job gets a failure record (signature ``exit code 89: stalled: ...``, counted
  toward ``max_failures`` like any failure) and the pod goes on with its next trials. Because the Job
  does not count these exits, the pod makes sure the store holds the stall before it ends
  (:func:`_stall_guard`): a stall it cannot record ends the pod with exit 1 instead, a counted retry, so
  that a store that refuses the record never makes a pod stall again and again unbounded;
* the pod's liveness: one heartbeat file for the pod's life (:class:`rlcloud.runner.watchdog.PodHeartbeat`),
  beaten through the imports and between trials, taken over by each trial's watchdog while it trains;
* a SIGTERM/SIGINT during a trial checkpoints it (the runner's own handling) and the pod exits 143/130;
* as locally, the sweep's first trial (pod 0's) is its smoke trial: the other pods import TensorFlow, then
  wait until it has trained ``smoke_timesteps`` (or finished); if it fails before that, every pod exits
  :data:`EXIT_HALTED`, so a broken base experiment fails once.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlcloud import runenv
from rlcloud.layout import DONE_STATES, LOGS, PROGRESS, ProgressRecord, log_path
from rlcloud.runenv import RunnerEnv
from rlcloud.runner.watchdog import (
    EXIT_STALLED_AGAIN,
    FLUSH_TIMEOUT_S,
    STALL_RESTARTS,
    PodHeartbeat,
    on_stall_exit,
)
from rlcloud.waiting import Backoff, poll_until, retry

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec
    from rlcloud.specs.sweep import SweepSpec
    from rlcloud.storage.base import Store

__all__ = [
    "EXIT_HALTED",
    "JOB_UID_ENV",
    "TRIAL_RETRIES",
    "failure_signature",
    "import_for",
    "run_share",
    "share",
]

logger = logging.getLogger("rlcloud.runner")

#: The pod's exit code when it stops launching trials (max_failures reached): the Job's podFailurePolicy
#: fails the Job on it (rlcloud.k8s.builders.SWEEP_HALTED_EXIT_CODE).
EXIT_HALTED = 4

#: The Job's uid (downward API, the pod label ``batch.kubernetes.io/controller-uid``): which Job a
#: failure record belongs to.
JOB_UID_ENV = runenv.JOB_UID

#: How often a crashed trial is started again in the pod before it counts as failed.
TRIAL_RETRIES = 3

#: What varies between trials that fail the same way: numbers (learning rates, timesteps, pids, ports)
#: and addresses. Replaced before failures are grouped (the local sweeper groups them the same way).
_VARYING = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")

#: The runner's exit codes (rlcloud.runner.main, which imports this module: the same numbers, tested)
EXIT_OK, EXIT_CRASH, EXIT_SPEC = 0, 1, 2

#: The runner's environment variable naming the sweep's results (rlcloud.runner.main.SWEEP_RESULTS_ENV).
SWEEP_RESULTS_ENV = runenv.SWEEP_RESULTS

#: Seconds between two looks at the smoke trial's progress while a pod waits for it (one small read).
SMOKE_POLL_S = 2.0

#: Exit codes that end a trial for good (rlcloud.runner.main: EXIT_SPEC, EXIT_CONSTRUCTION).
_FINAL_FAILURES = (2, 3)

#: How a trial is prepared (rlcloud.runner.main._prepare_trial) and trained (rlcloud.runner.main._train_role).
Prepare = Callable[[argparse.Namespace], Any]
Train = Callable[[argparse.Namespace, Any, Path], int]

#: Exit codes of a trial stopped by a signal (after its checkpoint): the pod is being stopped.
_SIGNALLED = (130, 143)


def import_for(spec: ExperimentSpec) -> None:
    """Import what a trial of ``spec`` needs (TensorFlow with the CPU kernels the runner would choose for it,
    Tensorforce) before the trial comes: what a warm process does while it waits (a local warm worker
    beside the smoke trial, a pod while the smoke trial proves the sweep). Raises what the import raises."""
    from rlcloud.runner.code import install_code
    from rlcloud.runner.compat import import_tensorforce
    from rlcloud.runner.inlining import inline_nested_functions
    from rlcloud.runner.kernels import choose_cpu_kernels
    from rlcloud.runner.loop import build_vector_env

    install_code(spec)  # a spec with code: its environment imports from the archive (and its requirements)
    venv = build_vector_env(spec)  # the kernels depend on the states (runner/kernels.py), as in Trainer
    try:
        choose_cpu_kernels(spec.network, spec.agent, venv.states_spec)
    finally:
        venv.close()
    import_tensorforce()
    inline_nested_functions()


def share(index: int, stride: int, num_trials: int) -> list[int]:
    """The trials pod ``index`` of ``stride`` pods runs, in order: ``index``, ``index + stride``, ..."""
    if stride < 1 or not 0 <= index < stride:
        raise ValueError(f"pod index {index} is not one of {stride} pods")
    return list(range(index, num_trials, stride))


def failure_signature(code: int | None, line: str, trial_name: str) -> str:
    """What a failed trial died of, the same for every trial that failed the same way: the exit code and
    the first line of the failure, with numbers and the trial's name blanked."""
    line = line.strip().splitlines()[0] if line.strip() else ""
    line = _VARYING.sub("#", line.replace(trial_name, "<trial>"))[:200]
    return f"exit code {code}: {line}" if code is not None else line


class _CrashError(Exception):
    """A trial that crashed (an exit code worth another try), with its outcome (code, error line, work dir)."""

    def __init__(self, outcome: tuple[int, str, Path]) -> None:
        super().__init__(f"crashed (exit code {outcome[0]})")
        self.outcome = outcome


#: A crashed trial starts again at once: a pod restart would not wait either (the Job's backoff is for pods).
_AT_ONCE = Backoff(initial=0.0, maximum=0.0)


class _FirstError(logging.Handler):
    """Keeps the first ERROR line logged during a trial (what its failure record says it died of)."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.line: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.line is None:
            with contextlib.suppress(Exception):
                self.line = record.getMessage().strip().splitlines()[0]


@contextlib.contextmanager
def _trial_environ() -> Iterator[None]:
    """Undo what a trial sets in the environment (RLCLOUD_RESULTS, the early stopper's) after it."""
    before = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(before)


class _Failures:
    """The failure records of the sweep's trials, read from the store; a final record is read once."""

    def __init__(self, store: Store | None, table: list[tuple[str, dict[str, Any], int]], job_uid: str) -> None:
        self.store = store
        self.table = table
        self.names = [name for name, _params, _seed in table]
        self.job_uid = job_uid
        self._final: dict[str, ProgressRecord] = {}

    def progress(self, name: str) -> ProgressRecord:
        """The trial's progress.json (empty when none or unreadable)."""
        if name in self._final:
            return self._final[name]
        if self.store is None:
            return ProgressRecord()
        from rlcloud.errors import RLCloudError
        from rlcloud.storage import read_progress

        try:
            got = read_progress(self.store.child(name)) or ProgressRecord()
        except RLCloudError as exc:
            logger.debug("progress of %s unreadable: %s", name, exc)
            return ProgressRecord()
        if got.state in DONE_STATES or self.failed_here(got):
            self._final[name] = got
        return got

    def failed_here(self, progress: ProgressRecord) -> bool:
        """Whether ``progress`` is a failure record of this Job."""
        return progress.state == "failed" and progress.job_uid == self.job_uid

    def stalled_out(self, name: str) -> bool:
        """Whether trial ``name``'s record says it stalled again after a restart for a stall in this Job (its
        watchdog's record: ``failed`` with ``stalls``) and has no failure record of the pod's yet."""
        got = self.progress(name)
        return self.failed_here(got) and _stalls(got) > STALL_RESTARTS and not got.signature

    def record_failure(self, name: str, code: int, line: str) -> None:
        """Write trial ``name``'s failure record (:func:`_write_failure`) and read it from now on."""
        record = _write_failure(self.store, name, code, line, self.job_uid)
        if record is not None:
            self._final[name] = record

    def smoke_failed(self, name: str, smoke: int) -> bool:
        """Whether trial ``name`` (the smoke trial) failed in this Job before training ``smoke`` timesteps."""
        got = self.progress(name)
        return self.failed_here(got) and (got.timestep or 0) < smoke

    def worst(self, upto: int) -> tuple[str, list[str]] | None:
        """The signature most trials below index ``upto`` failed with in this Job, and those trials."""
        groups: dict[str, list[str]] = {}
        for name in self.names[:upto]:
            got = self.progress(name)
            if self.failed_here(got):
                groups.setdefault(_signature(got, name), []).append(name)
        return max(groups.items(), key=lambda item: len(item[1]), default=None)


def _stalls(progress: dict[str, Any]) -> int:
    """Stalls in a row a trial's record counts (its watchdog's ``stalls``; 0 when none)."""
    stalls = ProgressRecord.of(progress).stalls
    return stalls if isinstance(stalls, int) and not isinstance(stalls, bool) else 0


def _signature(progress: ProgressRecord, name: str) -> str:
    """A failed trial's signature: its failure record's, or for a trial whose watchdog recorded that it
    stalled again (its pod ended with it, before any record of the pod's), the one the pod that finds it
    will write; else "?"."""
    if progress.signature:
        return progress.signature
    if _stalls(progress) > STALL_RESTARTS:
        return failure_signature(EXIT_STALLED_AGAIN, progress.stalled or "stalled", name)
    return "?"


def _write_failure(store: Store | None, name: str, code: int, line: str, job_uid: str) -> ProgressRecord | None:
    """The trial's failure record: its progress.json (counters kept) says failed, why and in which Job.
    Returns the record (None when there is no store or it could not be written)."""
    if store is None:
        return None
    from rlcloud.errors import RLCloudError
    from rlcloud.storage import read_progress

    trial = store.child(name)
    try:
        progress = read_progress(trial) or ProgressRecord()
    except RLCloudError:
        progress = ProgressRecord()
    reason = f"exit code {code}: {line}" if line else f"exit code {code}"
    progress.update(
        state="failed",
        exit_code=code,
        stop_reason=reason[:500],
        signature=failure_signature(code, line, name),
        job_uid=job_uid,
        updated=time.time(),
        steps_per_second=None,
    )
    try:
        trial.write_text(PROGRESS, json.dumps(progress) + "\n")
    except RLCloudError as exc:
        logger.error("could not record the failure of trial %s: %s", name, exc)
        return None
    return progress


def _stall_stored(store: Store | None, name: str, workdir: Path, code: int) -> bool:
    """Whether the results store holds the stall trial ``name``'s watchdog has just recorded in ``workdir``'s
    progress.json (``stalled``, or ``failed`` for :data:`EXIT_STALLED_AGAIN`); pushes that file when not."""
    if store is None:
        return False  # nowhere to count it: the next pod would not know
    from rlcloud.errors import RLCloudError
    from rlcloud.storage import read_progress

    want = "failed" if code == EXIT_STALLED_AGAIN else "stalled"
    trial = store.child(name)

    def stored() -> bool:
        got = read_progress(trial) or ProgressRecord()
        return got.state == want and _stalls(got) > 0

    try:
        if stored():
            return True
        trial.write_text(PROGRESS, (workdir / PROGRESS).read_text(encoding="utf-8"))
        return stored()
    except (RLCloudError, OSError) as exc:
        logger.error("trial %s: could not store its stall: %s", name, exc)
        return False


def _stall_guard(store: Store | None, name: str, workdir: Path) -> Callable[[int], None]:
    """The hook (:func:`rlcloud.runner.watchdog.on_stall_exit`) run when trial ``name``'s watchdog ends the
    pod: the Job ignores a stall's exit code, and only the trial's record in the store makes its next stall
    count, so when the store does not hold it (checked for at most FLUSH_TIMEOUT_S) the pod ends with
    :data:`EXIT_CRASH` instead, which the Job counts toward the index's retries."""

    def guard(code: int) -> None:
        result: list[bool] = []
        checker = threading.Thread(
            target=lambda: result.append(_stall_stored(store, name, workdir, code)),
            name="rlcloud-stall-guard",
            daemon=True,
        )
        checker.start()
        checker.join(FLUSH_TIMEOUT_S)
        if result and result[0]:
            return
        logger.error("trial %s stalled (exit code %d), but the results store does not hold its record: exit "
                     "code %d instead, a counted retry", name, code, EXIT_CRASH)  # fmt: skip
        with contextlib.suppress(Exception):
            logging.shutdown()
        os._exit(EXIT_CRASH)

    return guard


def _ship_log(store: Store | None, name: str, workdir: Path) -> None:
    """Upload the trial's log once more after the trial (its last lines come after the final sync)."""
    logs = workdir / LOGS
    if store is None or not logs.is_dir():
        return
    from rlcloud.errors import RLCloudError

    for path in sorted(logs.glob("*.log")):
        with contextlib.suppress(RLCloudError, OSError):
            store.child(name).upload_file(path, log_path(path.stem))


def _run_trial(
    args: argparse.Namespace, index: int, base: Path, location: str | None, prepare: Prepare, train: Train
) -> tuple[int, str, Path]:
    """Run trial ``index`` once, as a cold pod would: (exit code, first error line, its work directory)."""
    from rlcloud.storage.logs import restore_tees

    trial_args = argparse.Namespace(**vars(args))
    trial_args.index = index
    trial_args.stride = None
    # a scratch directory per trial: the next trial must not find (and restore) this one's checkpoints
    trial_args.workdir = str(base / f"trial-{index}") if location else str(base)
    errors = _FirstError()
    root = logging.getLogger()
    root.addHandler(errors)
    workdir = Path(trial_args.workdir)
    try:
        with _trial_environ():
            prepared = prepare(trial_args)
            if isinstance(prepared, int):
                return prepared, errors.line or "", workdir
            spec, workdir = prepared
            trial_args.index = 0  # within its trial the learner is instance 0: logs/single-0.log
            code = train(trial_args, spec, workdir)
            return code, errors.line or "", workdir
    except Exception:  # what the runner's main catches for a cold pod: a crash of this trial
        logger.exception("trial %d crashed", index)
        return EXIT_CRASH, errors.line or "", workdir
    finally:
        root.removeHandler(errors)
        restore_tees()  # this trial's output goes to its own log, not the next trial's


def _wait_for_smoke(sweep: SweepSpec, failures: _Failures, smoke: int) -> bool:
    """Before this pod's first trial: import TensorFlow, then wait until the sweep's first trial (pod 0's,
    the smoke trial) has trained ``smoke`` timesteps or finished, as a local sweep does, so that a broken
    base experiment fails once, not once per pod. False when the smoke trial failed in this Job."""
    first = sweep.trial_table()[0][0]

    def proven() -> bool | None:
        got = failures.progress(first)
        if failures.smoke_failed(first, smoke):
            return False
        if got.state in DONE_STATES or (got.timestep or 0) >= smoke:
            return True
        return None

    if proven() is not None:
        return bool(proven())
    try:
        import_for(sweep.trial(0).spec)  # meanwhile: the imports every trial of this pod needs
    except Exception as exc:  # left for the trial itself to report
        logger.warning("warm-up skipped: %s", exc)
    logger.info("waiting for the first trial (%s) to train %d timesteps (smoke_timesteps)", first, smoke)
    # no deadline: as locally, the others wait for the smoke trial however long its pod takes to run
    result = poll_until(proven, None, interval=SMOKE_POLL_S)
    if not result:
        logger.error("stopped launching trials: the first trial (%s) failed before training %d timesteps "
                     "(smoke_timesteps)", first, smoke)  # fmt: skip
        return False
    logger.info("the first trial (%s) trains: starting", first)
    return True


def run_share(args: argparse.Namespace, prepare: Prepare, train: Train) -> int:
    """Run pod ``args.index``'s share of the sweep's trials (``--stride`` pods); the pod's exit code.

    ``prepare`` and ``train``: the runner's own steps for one trial of a sweep (rlcloud.runner.main). The
    pod's heartbeat (:class:`~rlcloud.runner.watchdog.PodHeartbeat`, what its livenessProbe reads) beats
    from the first moment to the last.
    """
    with PodHeartbeat(args.workdir):
        return _run_share(args, prepare, train)


@dataclass
class _Pod:
    """What a pod's trials share: its arguments, its sweep, the results store and the failure records."""

    args: argparse.Namespace
    sweep: SweepSpec
    store: Store | None
    failures: _Failures
    location: str | None
    prepare: Prepare
    train: Train
    smoke: int

    def __post_init__(self) -> None:
        self.table = self.failures.table
        self.base = Path(self.args.workdir)


def _run_share(args: argparse.Namespace, prepare: Prepare, train: Train) -> int:
    from rlcloud.errors import RLCloudError
    from rlcloud.specs.safeload import read_text_bounded
    from rlcloud.specs.sweep import SweepSpec
    from rlcloud.storage import open_store

    claiming = getattr(args, "claim", None) is not None
    try:
        sweep: SweepSpec = SweepSpec.from_yaml_text(read_text_bounded(Path(args.sweep), source=args.sweep))
        mine = share(args.index, int(args.stride), sweep.num_trials)
    except (ValueError, OSError) as exc:  # SpecError is a ValueError
        logger.error("invalid sweep %s (pod %d of %s): %s", args.sweep, args.index, args.stride, exc)
        return EXIT_SPEC
    environment = RunnerEnv.from_env()
    location = environment.sweep_results or None
    if claiming and not location:
        logger.error("--claim needs the sweep's results store (%s): the claims are kept there", SWEEP_RESULTS_ENV)
        return EXIT_SPEC
    try:
        store = open_store(location) if location else None
    except RLCloudError as exc:  # the results store is unreachable: worth a retry of the pod
        logger.error("sweep %s: results store %s: %s", sweep.name, location, exc)
        return EXIT_CRASH
    table = sweep.trial_table()
    failures = _Failures(store, table, environment.job_uid or "")
    logger.info("sweep %s: pod %d of %s runs %s of its %d trials, warm", sweep.name, args.index, args.stride,
                "the next free" if claiming else len(mine), sweep.num_trials)  # fmt: skip
    smoke = sweep.smoke_timesteps if int(args.stride) > 1 and sweep.num_trials > 1 else 0
    pod = _Pod(args, sweep, store, failures, location, prepare, train, smoke)
    if smoke and args.index != 0 and (mine or claiming) and _wait_for_smoke(sweep, failures, smoke) is False:
        return EXIT_HALTED
    if claiming:
        assert store is not None
        return _run_claimed(pod, store)
    for position, index in enumerate(mine):
        halted = _halted(pod, index)
        if halted is not None:
            return halted
        if failures.failed_here(failures.progress(table[index][0])):
            logger.info("trial %s failed already in this Job: not running it again", table[index][0])
            continue
        code = _run_one(pod, index, f"{position + 1} of {len(mine)} in this pod")
        if code in _SIGNALLED:
            return code
    return EXIT_OK


def _halted(pod: _Pod, index: int) -> int | None:
    """Before trial ``index``: record a trial that stalled out; :data:`EXIT_HALTED` when the smoke trial failed
    or ``max_failures`` trials failed the same way (the pod stops launching trials), else None."""
    failures, table, smoke = pod.failures, pod.table, pod.smoke
    name = table[index][0]
    if failures.stalled_out(name):
        # its watchdog ended the previous pod (exit 89) with the record of a second stall in a row: a
        # failure of this trial alone, grouped with the others' by its signature; the pod goes on
        stalled = failures.progress(name).stalled or "stalled"
        logger.error("trial %s stalled again after a restart for a stall: failed (%s)", name, stalled)
        failures.record_failure(name, EXIT_STALLED_AGAIN, stalled)
    if smoke and index != 0 and failures.smoke_failed(table[0][0], smoke):
        logger.error("stopped launching trials: the first trial (%s) failed before training %d timesteps "
                     "(smoke_timesteps)", table[0][0], smoke)  # fmt: skip
        return EXIT_HALTED
    if pod.sweep.max_failures:
        worst = failures.worst(upto=min(len(table), index + int(pod.args.stride)))
        if worst is not None and len(worst[1]) >= pod.sweep.max_failures:
            logger.error(
                "stopped launching trials: %d trials failed the same way (%s), max_failures is %d: %s",
                len(worst[1]), ", ".join(worst[1][:5]), pod.sweep.max_failures, worst[0],
            )  # fmt: skip
            return EXIT_HALTED
    return None


def _run_one(pod: _Pod, index: int, which: str, release: Callable[[], object] = lambda: None) -> int:
    """Run trial ``index`` with its retries, stall guard, log shipping and failure record; its exit code.
    ``release``: called when the trial's stall ends the pod, once the store holds the stall (its claim: any
    pod may resume the trial at once, as the pod's replacement would)."""
    args, base, location, store = pod.args, pod.base, pod.location, pod.store
    name = pod.table[index][0]
    started = time.monotonic()

    def attempt(index: int = index) -> tuple[int, str, Path]:
        outcome = _run_trial(args, index, base, location, pod.prepare, pod.train)
        if outcome[0] not in (EXIT_OK, *_SIGNALLED, *_FINAL_FAILURES):
            raise _CrashError(outcome)
        return outcome

    def crashed(exc: Exception, tries: int, _pause: float) -> None:
        logger.warning("trial %s %s, attempt %d of %d: again from its checkpoint", name, exc, tries,
                       TRIAL_RETRIES + 1)  # fmt: skip

    # where _run_trial puts the trial's work directory (the watchdog's progress.json)
    scratch = base / f"trial-{index}" if location else base
    unguard = on_stall_exit(_stall_guard(store, name, scratch))
    unrelease = on_stall_exit(lambda _code: release())  # after the guard: not when the stall is not stored
    try:
        code, line, workdir = retry(
            attempt,
            retryable=lambda exc: isinstance(exc, _CrashError),
            backoff=_AT_ONCE,
            attempts=TRIAL_RETRIES + 1,
            on_retry=crashed,
        )
    except _CrashError as exc:  # out of retries: a failure of its own
        code, line, workdir = exc.outcome
    finally:
        unguard()
        unrelease()
    _ship_log(store, name, workdir)
    logger.info("trial %s (%s): exit code %d in %.1f s", name, which, code, time.monotonic() - started)
    if code in _SIGNALLED:
        return code
    if code != EXIT_OK:
        _write_failure(store, name, code, line, pod.failures.job_uid)
    if location and workdir != base:
        shutil.rmtree(workdir, ignore_errors=True)  # synced to the store: the pod's disk is for the next one
    gc.collect()  # leave nothing of this trial's agent to the next one
    return code


def _lease_lost(name: str) -> Callable[[str], None]:
    """What a pod does when it lost trial ``name``'s claim (rlcloud.storage.claims.Lease): the trial stops at
    once, without a checkpoint (its new holder writes them now), and the pod with it: exit 1, a counted retry,
    whose replacement claims the next free trial."""

    def lost(why: str) -> None:
        logger.error("trial %s: stopped at once: %s", name, why)
        with contextlib.suppress(Exception):
            logging.shutdown()
        os._exit(EXIT_CRASH)

    return lost


def _run_claimed(pod: _Pod, store: Store) -> int:
    """Run the sweep's next free trials, claimed from the store (rlcloud.storage.claims), until every trial is
    final for this Job; the pod's exit code. Pod 0 claims only the smoke trial until it is proven."""
    from rlcloud.storage.claims import Claim, Lease, TrialClaims

    failures, table = pod.failures, pod.table
    claims = TrialClaims(store, [name for name, _p, _s in table], job_uid=failures.job_uid, lease_s=pod.args.claim)
    proven = [not pod.smoke or pod.args.index != 0]

    def allowed(index: int) -> bool:
        if not proven[0] and index != 0:
            got = failures.progress(table[0][0])
            proven[0] = got.get("state") in DONE_STATES or int(got.get("timestep") or 0) >= pod.smoke
        return index == 0 or proven[0]

    def claim_next() -> Claim | bool | None:
        got = claims.claim_next(allowed)
        return None if got is False else got  # None: others hold the rest; look again in a quarter lease

    ran = 0
    while isinstance(claim := poll_until(claim_next, None, interval=claims.lease_s / 4), Claim):
        name, lease = claim.name, Lease(claims, claim, _lease_lost(claim.name))
        halted = _halted(pod, claim.index)
        state = failures.progress(name).get("state")
        if halted is not None:
            lease.release()
            return halted
        if state in DONE_STATES or failures.failed_here(failures.progress(name)):
            logger.info("trial %s is final for this Job (%s): not running it again", name, state)
            lease.finish(str(state))
            continue
        ran += 1
        with lease:
            code = _run_one(pod, claim.index, f"trial {ran} this pod claimed", lease.release)
        if code in _SIGNALLED:
            lease.release()
            return code
        state = failures.progress(name).get("state")
        lease.finish(str(state) if state in DONE_STATES else "succeeded" if code == EXIT_OK else "failed")
    logger.info("every trial of the sweep is done: %d ran in this pod, %d claims lost to other pods", ran,
                claims.conflicts)  # fmt: skip
    return EXIT_OK
