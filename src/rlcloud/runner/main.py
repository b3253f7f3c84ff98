"""The runner's entry point: ``python -m rlcloud.runner --role ROLE --index N --spec PATH --workdir DIR``.

A pod of a sweep's Indexed Job runs ``--sweep SWEEP.yaml --index I`` instead of ``--spec``: it computes
trial ``I`` of the sweep and runs it as an ordinary single/multi learner (:func:`_prepare_trial`).

Roles (docs/contracts.md):

* ``single`` / ``multi``: train in this process (one environment, or ``num_workers`` batched or in
  worker processes) with :class:`rlcloud.runner.loop.Trainer`.
* ``agent``: the learner of the distributed mode: the same loop over a
  :class:`rlcloud.runner.remote.RemoteVectorEnv` built from ``RLCLOUD_ENV_SERVERS``.
* ``env-server``: serve one environment (:func:`rlcloud.runner.envserver.run_env_server`).

Exit codes: 0 done; 2 spec error (do not retry); 3 environment/agent construction error (do not retry);
143 terminated by SIGTERM after a checkpoint (retry ok); 130 interrupted by SIGINT after a checkpoint;
88 stalled (retry ok: it resumes from its checkpoint), 89 stalled again after that retry (do not retry),
see :mod:`rlcloud.runner.watchdog`; anything else is a crash (retry ok).

If ``RLCLOUD_RESULTS`` names a results location other than the work directory, the results syncer
(:func:`rlcloud.storage.sync.make_hooks`) restores the latest stored checkpoint into the work directory
and receives the loop's hooks (``on_tick``, ``on_checkpoint``, ``on_finish``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import signal
import stat
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from rlcloud import runenv
from rlcloud.errors import SpecError
from rlcloud.layout import ProgressRecord, child
from rlcloud.roles import Role, role_label
from rlcloud.runenv import RunnerEnv
from rlcloud.runner.compat import TensorforceNoise
from rlcloud.runner.lifeline import watch_parent

if TYPE_CHECKING:  # loaded when the spec is: the pydantic models are not needed before that
    from rlcloud.runner.loop import Trainer
    from rlcloud.specs import ExperimentSpec
    from rlcloud.specs.sweep import SweepSpec, Trial

__all__ = [
    "EXIT_CONSTRUCTION",
    "EXIT_CRASH",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SPEC",
    "EXIT_TERMINATED",
    "ROLES",
    "SWEEP_RESULTS_ENV",
    "main",
    "parse_args",
]

logger = logging.getLogger("rlcloud.runner")

EXIT_OK = 0
EXIT_CRASH = 1
EXIT_SPEC = 2
EXIT_CONSTRUCTION = 3
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

#: Where a sweep's results go (``<results root>/<sweep>``); each trial writes to ``<that>/<trial>``.
SWEEP_RESULTS_ENV = runenv.SWEEP_RESULTS

#: The ``--role`` choices: every :class:`rlcloud.roles.Role`.
ROLES: tuple[str, ...] = tuple(role.value for role in Role)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the runner's command line."""
    from rlcloud.storage.claims import LEASE_S

    parser = argparse.ArgumentParser(prog="python -m rlcloud.runner", description=__doc__.split("\n")[0])
    parser.add_argument("--role", required=True, choices=ROLES, help="what this process does")
    parser.add_argument("--index", type=int, default=0, help="index of this role (env servers: 0..N-1)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--spec", help="path of the resolved ExperimentSpec (spec.yaml)")
    source.add_argument(
        "--sweep", help="path of a SweepSpec (sweep.yaml): run its trial number --index (a pod of a sweep's Job)"
    )
    parser.add_argument("--workdir", required=True, help="directory for checkpoints, metrics, summaries")
    parser.add_argument(
        "--stride",
        type=int,
        default=None,
        help="with --sweep: this pod is one of STRIDE and runs trials --index, --index+STRIDE, ... one after "
        "another in this process (warm trials: rlcloud.runner.warm)",
    )
    parser.add_argument(
        "--claim",
        type=float,
        nargs="?",
        const=LEASE_S,
        default=None,
        metavar="LEASE_S",
        help="with --stride: claim the sweep's next free trial from its results store instead of taking every "
        f"STRIDE-th one, with a lease of LEASE_S seconds (default {LEASE_S:.0f}; rlcloud.storage.claims)",
    )
    parser.add_argument(
        "--trials",
        default=None,
        help="with --sweep: the trials of this pod's Job in order, such as 6-11,14 (a Job that grows a sweep): "
        "--index I runs the I-th of them",
    )
    args = parser.parse_args(argv)
    if args.claim is not None and (args.sweep is None or not args.stride or not args.claim > 0):
        parser.error(f"--claim {args.claim}: needs --sweep and --stride, and a lease of more than 0 seconds")
    return args


def _setup_logging(role: str, index: int, debug: bool = False) -> None:
    prefix = role_label(role, index)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"%(asctime)s {prefix} %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    if not debug:
        # Tensorforce logs "No min_value bound specified for state." through the root logger for every
        # unbounded state; absl logs each checkpoint shard: noise in a run's log.
        for name in ("absl", "tensorflow", "h5py"):
            logging.getLogger(name).setLevel(logging.WARNING)
        root.addFilter(TensorforceNoise())


def _load_spec(path: str) -> ExperimentSpec:
    from rlcloud.specs import ExperimentSpec

    return ExperimentSpec.from_file(path)


def _results_elsewhere(workdir: Path) -> str | None:
    """RLCLOUD_RESULTS when it is not the workdir itself (then the workdir is synced to it), else None."""
    results = RunnerEnv.from_env().results
    if not results:
        return None
    if not results.startswith("gs://") and Path(results).resolve() == workdir.resolve():
        return None
    return results


def _log_name(args: argparse.Namespace) -> str | None:
    """The name this role's output is shipped under (logs/<name>.log), or None when it need not be.

    In a pod stdout is a pipe that vanishes with the pod, so the runner copies it into the results. A
    local process's stdout already is a file (the local backend's logs/<role>-<index>.log in the workdir,
    which the syncer uploads): copying it again would write every line twice.
    """
    try:
        if stat.S_ISREG(os.fstat(1).st_mode):
            return None
    except OSError:
        return None
    return role_label(args.role, args.index)


def _make_hooks(workdir: Path, log_name: str | None) -> Any:
    results = _results_elsewhere(workdir)
    if results is None:
        return None
    # Restores the latest stored checkpoint into an empty workdir, then syncs the workdir as it changes.
    from rlcloud.storage.sync import make_hooks

    return make_hooks(results, workdir, log_name=log_name)


def _close_hooks(hooks: Any) -> None:
    """Stop the results syncer of a run that never trained (its error lines reach the store now; a warm
    pod's next trial must not inherit its thread: rlcloud.runner.warm)."""
    if hooks is None:
        return
    try:
        hooks.close()
    except Exception as exc:  # the exit code matters more than the last sync
        logger.warning("could not sync the results a last time: %s", exc)


def _fetch_earlier_checkpoints(hooks: Any, workdir: Path, exc: Exception) -> bool:
    """After ``exc`` (no local checkpoint restores), download the earlier checkpoints the results store
    holds; True when there were any to try."""
    from rlcloud.storage.sync import restore_earlier_checkpoints

    store = getattr(getattr(hooks, "syncer", None), "store", None)
    if store is None:
        return False
    fetched = restore_earlier_checkpoints(store, workdir)
    if fetched:
        logger.warning("%s; trying the earlier checkpoint(s) %s from %s", exc, ", ".join(fetched), store.url)
    return bool(fetched)


def _install_signals(on_signal: Callable[[int], None]) -> Callable[[], None]:
    previous: dict[int, Any] = {}

    def handler(signum: int, _frame: FrameType | None) -> None:
        on_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        previous[signum] = signal.signal(signum, handler)

    def restore() -> None:
        for signum, old in previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signum, old)

    return restore


def _train_role(args: argparse.Namespace, spec: ExperimentSpec, workdir: Path) -> int:
    received: list[int] = []
    trainer_box: list[Trainer] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        name = signal.Signals(signum).name
        if trainer_box and trainer_box[0].running:
            logger.info("received %s: checkpointing and stopping", name)
            trainer_box[0].request_stop(f"signal {name}")
        elif len(received) == 1:
            # Still starting (importing TensorFlow takes ~10 s): nothing new to checkpoint, leave now so
            # that the 10 s a pod gets after SIGTERM are enough.
            logger.info("received %s while starting: stopping without a checkpoint", name)
            raise _StopDuringStartup(signum)

    restore = _install_signals(on_signal)
    try:
        code = _train(args, spec, workdir, received, trainer_box)
    except _StopDuringStartup as stop:
        return EXIT_TERMINATED if stop.signum == signal.SIGTERM else EXIT_INTERRUPTED
    finally:
        restore()
    if getattr(args, "sweep", None) is not None:
        _tell_study(args, spec, workdir, code)
    return code


class _StopDuringStartup(BaseException):
    """Raised by the signal handler before the training loop runs (BaseException: nothing swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _HookChain:
    """Several loop hooks as one (the results syncer, a sweep trial's early stopper), called in order."""

    def __init__(self, hooks: list[Any]) -> None:
        self.hooks = hooks

    def add(self, hook: Any) -> None:
        if hook is not None:
            self.hooks.append(hook)

    def _call(self, name: str, *args: Any, hooks: list[Any] | None = None) -> None:
        for hook in self.hooks if hooks is None else hooks:
            method = getattr(hook, name, None)
            try:
                if method is not None:
                    method(*args)
            except Exception:  # one hook's failure must neither end training nor skip the others
                logger.exception("hook %s.%s failed", type(hook).__name__, name)

    def on_tick(self) -> None:
        self._call("on_tick")

    def on_checkpoint(self, name: str) -> None:
        self._call("on_checkpoint", name)

    def on_decision(self, timestep: int) -> None:
        self._call("on_decision", timestep)

    def on_finish(self, state: str) -> None:
        self._call("on_finish", state)


def _write_trial_hparams(spec: ExperimentSpec, workdir: Path) -> None:
    """A sweep trial's TensorBoard HParams (``RLCLOUD_TRIAL``; rlcloud.runner.hparams), when it writes summaries."""
    settings = RunnerEnv.from_env().trial
    if settings is None or spec.summary_frequency is None:
        return
    from rlcloud.runner.hparams import write_hparams

    try:
        write_hparams(workdir, settings)
    except Exception as exc:  # TensorBoard's grouping is no reason to lose a training run
        logger.warning("could not write the trial's HParams: %s", exc)


def _early_stopper(trainer: Any) -> Any:
    """The sweep trial's early stopper (``RLCLOUD_EARLY_STOPPING``), or None for an ordinary run: it decides
    when the loop reaches ``trainer.decision_at``, and holds the loop there while earlier trials catch up."""
    from rlcloud.runner.early_stop import EarlyStopper
    from rlcloud.runner.population import PopulationMember

    member = PopulationMember.for_trainer(trainer)  # rule pbt: population-based training's decisions
    if member is not None:
        return member
    return EarlyStopper.from_environ(
        value=lambda: trainer.mean_return,
        stop=lambda reason: trainer.request_stop(reason, early=True),
        gate=lambda point: setattr(trainer, "decision_at", point),
        hold=trainer.hold,
        stopping=lambda: trainer.stop_requested,
        total_timesteps=trainer.spec.total_timesteps,
    )


def _train(
    args: argparse.Namespace, spec: ExperimentSpec, workdir: Path, received: list[int], trainer_box: list[Trainer]
) -> int:
    from rlcloud.runner.loop import CheckpointError, Trainer

    refused = _ready(spec)
    if refused is not None:
        return refused
    # Storage trouble is worth a retry (exit 1 from main), unlike a bad environment (exit 3).
    hooks = _make_hooks(workdir, _log_name(args))
    try:
        vector_env = None
        if args.role == Role.AGENT:
            from rlcloud.runner.remote import RemoteVectorEnv, timeouts_for_stall

            # auto is synchronous: overlapping changes the order of the agent's calls (what a seed learns)
            vector_env = RemoteVectorEnv.from_environ(
                overlap=spec.execution == "overlapped",
                slots=spec.servers_envs,
                defaults=timeouts_for_stall(spec.stall_timeout.seconds),  # a hung server is replaced in time
            )
        from rlcloud.storage.summary import SummaryHook

        # the run's summary first: the results syncer's hook after it uploads it with the records it sums up
        chain = _HookChain([SummaryHook(workdir), *([hooks] if hooks is not None else [])])
        trainer = Trainer(spec, workdir, vector_env=vector_env, hooks=chain)
        trainer_box.append(trainer)
        stopper = _early_stopper(trainer)
        watchdog = _stall_watchdog(args, spec, workdir, trainer, chain, vector_env, stopper)
        chain.hooks.insert(0, watchdog)  # training over (its on_finish), the final upload is not judged
        chain.add(stopper)
        _write_trial_hparams(spec, workdir)
        try:
            trainer.setup()
        except CheckpointError as exc:
            # the store may hold the earlier checkpoints this fresh work directory was not given
            if hooks is None or not _fetch_earlier_checkpoints(hooks, workdir, exc):
                raise
            trainer.setup()
    except SpecError as exc:
        logger.error("invalid spec: %s", exc)
        _close_hooks(hooks)
        return EXIT_SPEC
    except CheckpointError as exc:  # says which checkpoints and why: no traceback needed
        logger.error("%s", exc)
        _close_hooks(hooks)
        return EXIT_CONSTRUCTION
    except Exception as exc:
        logger.exception("could not build the environment or the agent: %s", exc)
        _close_hooks(hooks)
        return EXIT_CONSTRUCTION
    watchdog.start()
    try:
        result = trainer.run()
    finally:
        watchdog.stop()
    logger.info(
        "%s: %d episodes, %d timesteps in %.0f s, mean return %s, checkpoint %s (%s)",
        result.state,
        result.episodes,
        result.timesteps,
        result.elapsed,
        "-" if result.mean_return is None else f"{result.mean_return:.1f}",
        result.checkpoint,
        result.stop_reason,
    )
    if result.state == "stopped":
        return EXIT_TERMINATED if received and received[0] == signal.SIGTERM else EXIT_INTERRUPTED
    return EXIT_OK


def _install_code(spec: ExperimentSpec) -> int | None:
    """The run's code first on sys.path (rlcloud.runner.code), before the spec's classes are imported; an exit
    code when it cannot be: 2 for a spec without its digest, 3 for an archive refused or missing (a retry
    fetches the same), and a store that cannot be read propagates (a crash: worth a retry)."""
    from rlcloud.errors import WorkloadError
    from rlcloud.runner.code import install_code

    try:
        install_code(spec)
    except SpecError as exc:
        logger.error("invalid spec: %s", exc)
        return EXIT_SPEC
    except WorkloadError as exc:
        logger.error("%s", exc)
        return EXIT_CONSTRUCTION
    return None


def _stall_watchdog(
    args: argparse.Namespace,
    spec: ExperimentSpec,
    workdir: Path,
    trainer: Trainer,
    hooks: Any,
    venv: Any,
    stopper: Any = None,
) -> Any:
    """The learner's stall watchdog (rlcloud.runner.watchdog), made before the trainer rewrites progress.json."""
    from rlcloud.runner.watchdog import StallWatchdog

    def waiting() -> bool:
        # the agent waits for a lost env server (the server stalled, not the learner), or an early-stopping
        # decision waits for earlier trials to reach its timestep (they are judged by their own watchdogs)
        return bool(getattr(venv, "waiting_for_servers", False) or getattr(stopper, "waiting", False))

    return StallWatchdog(
        trainer, spec.stall_timeout.seconds, workdir, label=role_label(args.role, args.index), hooks=hooks,
        waiting=waiting,
    )  # fmt: skip


def _prepare_trial(args: argparse.Namespace) -> tuple[ExperimentSpec, Path] | int:
    """``--sweep``: the spec and work directory of trial ``--index`` of the sweep, or an exit code.

    The trial's results location is ``$RLCLOUD_SWEEP_RESULTS/<trial>`` (set as ``RLCLOUD_RESULTS`` for the
    syncer); without that variable the trial trains in ``<workdir>/<trial>``. Like ``Experiment.start``,
    the trial is started under its record (:mod:`rlcloud.record`): a new trial writes its spec of record,
    a retried one is checked against it (a different learning setup is refused: exit 2) and resumes from
    its checkpoint; either way a history line is added. A trial whose progress says it finished (a sweep
    started again after a stop) exits 0 at once.
    """
    from rlcloud.errors import RLCloudError
    from rlcloud.record import start_recorded
    from rlcloud.runner.early_stop import early_stopping_settings
    from rlcloud.runner.hparams import trial_settings
    from rlcloud.specs.safeload import read_text_bounded
    from rlcloud.specs.sweep import SweepSpec
    from rlcloud.storage import open_store, read_progress

    try:
        # Bounded like any spec (a mounted ConfigMap's file is a link, followed here: it is ours).
        sweep = SweepSpec.from_yaml_text(read_text_bounded(Path(args.sweep), source=args.sweep))
        trial = sweep.trial(args.index)
    except (SpecError, IndexError) as exc:
        logger.error("invalid sweep %s (trial %d): %s", args.sweep, args.index, exc)
        return EXIT_SPEC
    except OSError as exc:
        logger.error("cannot read the sweep %s: %s", args.sweep, exc)
        return EXIT_SPEC
    logger.info(
        "sweep %s, trial %d of %d: %s (%s)", sweep.name, trial.index, sweep.num_trials, trial.name, trial.config
    )
    if Role(args.role).run_mode != str(trial.spec.run_mode):  # checked before anything is recorded
        logger.error("role %s serves run_mode %s, but trial %s is %s", args.role, Role(args.role).run_mode,
                     trial.name, trial.spec.run_mode)  # fmt: skip
        return EXIT_SPEC
    workdir = Path(args.workdir)
    run_env = RunnerEnv.from_env()
    location = run_env.sweep_results
    if location:
        results = child(location, trial.name)
        run_env = run_env.replace(results=results)
    else:
        location = str(workdir)
        workdir = workdir / trial.name
        results = str(workdir)
        run_env = run_env.replace(results=None)
    if sweep.sampler == "tpe":
        asked = _tpe_trial(sweep, trial, location)
        if isinstance(asked, int):
            return asked
        trial = asked
    # the syncer, the early stopper and the HParams read them (storage.sync, runner.early_stop, runner.hparams)
    run_env = run_env.replace(
        early_stopping=early_stopping_settings(sweep, trial, location) or run_env.early_stopping,
        trial=trial_settings(sweep, trial),
    )
    run_env.apply_to(os.environ)
    try:
        store = open_store(results)
        progress = read_progress(store)
        if progress is not None and progress.done_at(trial.spec.total_timesteps):
            logger.info("trial %s has finished already (%s): nothing to do", trial.name, progress.state)
            return EXIT_OK
        where = f"sweep {sweep.name} index {trial.index} ({os.environ.get('HOSTNAME') or 'pod'})"
        # the same start path as Experiment.start: a ChangedRunError is a SpecError (not retried); this
        # process is the trial, so "starting" it is returning to train
        start_recorded(store, trial.spec, lambda: True, where=where)
    except SpecError as exc:
        logger.error("trial %s cannot start: %s", trial.name, exc)
        return EXIT_SPEC
    except RLCloudError as exc:  # the results store is unreachable: worth a retry
        logger.error("trial %s: results store %s: %s", trial.name, results, exc)
        return EXIT_CRASH
    return trial.spec, workdir


def _tpe_trial(sweep: SweepSpec, trial: Trial, location: str) -> Trial | int:
    """Trial ``trial`` of a ``sampler: tpe`` sweep with the configuration its study (rlcloud.storage.journal, in
    the sweep's ``location``) proposes for it: asked the first time, the same when it runs again. An exit code
    when it cannot be: EXIT_SPEC without Optuna or with values that make no valid experiment, EXIT_CRASH when
    the store is unreachable (worth a retry)."""
    from rlcloud.errors import MissingExtraError, RLCloudError
    from rlcloud.storage import open_store
    from rlcloud.storage.journal import ask_trial, open_study

    try:
        study = open_study(open_store(location), sweep.name, seed=sweep.sampler_seed + trial.index)
        params = ask_trial(study, trial.name, sweep.parameters)
        logger.info("trial %s: TPE proposes %s", trial.name, params)
        return sweep.with_params(trial, params)
    except (SpecError, MissingExtraError) as exc:
        logger.error("trial %s cannot start: %s", trial.name, exc)
        return EXIT_SPEC
    except RLCloudError as exc:
        logger.error("trial %s: its study in %s: %s", trial.name, location, exc)
        return EXIT_CRASH


def _tell_study(args: argparse.Namespace, spec: ExperimentSpec, workdir: Path, code: int) -> None:
    """At the end of trial ``spec.name`` of a ``sampler: tpe`` sweep (``--sweep``): tell its study the trial's
    mean return (from its progress.json in ``workdir``), or that it failed for good (exit 2/3). A crash is not
    told (the trial runs again); a study that cannot be told is logged, never the trial's failure."""
    from rlcloud.errors import RLCloudError
    from rlcloud.layout import DONE_STATES, PROGRESS
    from rlcloud.specs.safeload import read_text_bounded
    from rlcloud.specs.sweep import SweepSpec
    from rlcloud.storage import open_store
    from rlcloud.storage.journal import open_study, tell_trial

    if code not in (EXIT_OK, EXIT_SPEC, EXIT_CONSTRUCTION):
        return
    try:
        sweep = SweepSpec.from_yaml_text(read_text_bounded(Path(args.sweep), source=args.sweep))
        if sweep.sampler != "tpe":
            return
        index = sweep.trial_names().index(spec.name)
    except (SpecError, ValueError, OSError):
        return
    try:
        progress = ProgressRecord.of(json.loads((workdir / PROGRESS).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        progress = ProgressRecord()
    done = code == EXIT_OK and progress.state in DONE_STATES
    value = progress.mean_return if done else None
    location = RunnerEnv.from_env().sweep_results or str(args.workdir)
    try:
        study = open_study(open_store(location), sweep.name, seed=sweep.sampler_seed + index)
        tell_trial(study, spec.name, float(value) if isinstance(value, int | float) else None)
    except RLCloudError as exc:
        logger.warning("trial %s: could not tell its study the result: %s", spec.name, exc)


def _ready(spec: ExperimentSpec) -> int | None:
    """Install the spec's code, then build its environment as the role will: an exit code when either fails."""
    from rlcloud.runner.envs import validate_experiment

    refused = _install_code(spec)
    if refused is not None:
        return refused
    try:
        validate_experiment(spec, import_user_classes=True)
    except SpecError as exc:
        logger.error("invalid spec: %s", exc)
        return EXIT_SPEC
    return None


def _serve_environment(args: argparse.Namespace, spec: ExperimentSpec, workdir: Path) -> int:
    """The env-server role: the spec's code installed and its environment checked, then served; its exit code."""
    refused = _ready(spec)
    if refused is not None:
        return refused
    envserver = importlib.import_module("rlcloud.runner.envserver")
    results, log_name = _results_elsewhere(workdir), _log_name(args)
    shipper = None
    if results is not None and log_name is not None:
        from rlcloud.storage.sync import ship_logs

        shipper = ship_logs(results, workdir, log_name)  # env-server logs outlive the pod
    try:
        return int(envserver.run_env_server(spec, index=args.index, workdir=workdir))
    except SpecError as exc:
        logger.error("invalid spec: %s", exc)
        return EXIT_SPEC
    finally:
        if shipper is not None:
            try:
                shipper.stop()
            except Exception as exc:  # the run's outcome matters more than its last log lines
                logger.warning("could not ship the last log lines: %s", exc)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one runner role; return its exit code (see the module docstring)."""
    args = parse_args(argv)
    _setup_logging(args.role, args.index)
    watch_parent()  # a runner whose supervisor died stops (after a checkpoint): rlcloud.runner.lifeline
    workdir = Path(args.workdir)
    if args.sweep is not None and args.trials is not None:
        from rlcloud.specs.sweep import parse_trial_indices

        try:
            indices = parse_trial_indices(args.trials)
        except ValueError as exc:
            logger.error("--trials %s: %s", args.trials, exc)
            return EXIT_SPEC
        if args.stride or not 0 <= args.index < len(indices):
            logger.error("--index %d is not one of the %d --trials (or --stride was given)", args.index, len(indices))
            return EXIT_SPEC
        args.index = indices[args.index]  # the trial this pod of a growth Job runs
    if args.sweep is not None and args.stride:
        from rlcloud.runner.warm import run_share

        return run_share(args, _prepare_trial, _train_role)
    if args.sweep is not None:
        prepared = _prepare_trial(args)
        if isinstance(prepared, int):
            return prepared
        spec, workdir = prepared
        # within its trial (an experiment of its own) the learner is instance 0: logs/<role>-0.log
        args.index = 0
    else:
        try:
            spec = _load_spec(args.spec)
        except SpecError as exc:
            logger.error("invalid spec %s: %s", args.spec, exc)
            return EXIT_SPEC
        except OSError as exc:
            logger.error("cannot read the spec %s: %s", args.spec, exc)
            return EXIT_SPEC
    if spec.debug_logging:
        _setup_logging(args.role, args.index, debug=True)
    mode = str(spec.run_mode)
    role = Role(args.role)
    # a spec of another run mode handed to a role is a mistake of the caller
    if role.run_mode != mode:
        logger.error("role %s serves run_mode %s, but the spec says %s", role, role.run_mode, mode)
        return EXIT_SPEC
    try:
        if role is Role.ENV_SERVER:
            return _serve_environment(args, spec, workdir)
        return _train_role(args, spec, workdir)
    except Exception:
        logger.exception("%s crashed", role_label(args.role, args.index))
        return EXIT_CRASH
