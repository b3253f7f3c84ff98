"""The Experiment facade: one experiment, wherever it runs, with its results.

    exp = Experiment(ExperimentSpec.from_file("examples/cartpole_ppo.yaml"), results="gs://bucket/rl")
    exp.start()                       # no cluster: processes on this machine
    exp.wait(); exp.metrics(); exp.plot()
    exp.start(cluster=Cluster.gke(...))   # or on GKE; the results go to the same place

State lives with the backend (processes / Kubernetes objects) and the results store, never only in this
object: ``Experiment.attach(name, cluster=...)`` rebuilds it from another machine or notebook.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlcloud.display import ExperimentBar, PlainProgress, bytes_bar, experiment_html, shows_a_bar, steps_bar
from rlcloud.errors import WaitTimeoutError
from rlcloud.results import DEFAULT_RESULTS, is_gcs, results_location, results_root
from rlcloud.waiting import poll_until

if TYPE_CHECKING:
    from typing import Unpack

    import pandas as pd
    from matplotlib.figure import Figure

    from rlcloud.backend import ExperimentBackend, ExperimentStatus
    from rlcloud.cluster import Cluster
    from rlcloud.codepack import CodeArchive
    from rlcloud.comparison import CompareOptions
    from rlcloud.policies import Video
    from rlcloud.runner.policy import Policy
    from rlcloud.specs import ExperimentSpec

__all__ = ["Experiment"]

log = logging.getLogger(__name__)

#: What the runner extra brings that running or validating an experiment here imports.
RUNNER_MODULES = ("gymnasium", "tensorforce", "tensorflow")


class Experiment:
    """An experiment: its spec, where its results go, and where it runs once started."""

    def __init__(
        self,
        spec: ExperimentSpec | str | Path,
        results: str | None = None,
        *,
        cluster: Cluster | None = None,
        **overrides: object,
    ) -> None:
        """Make an experiment from a spec (or a spec file path, with keyword overrides).

        ``results`` is the results root (gs://bucket/prefix or a directory); the experiment writes to
        ``<results>/<name>/``. Nothing starts until :meth:`start`.
        """
        from rlcloud.specs import ExperimentSpec

        if isinstance(spec, str | Path):
            spec = ExperimentSpec.from_file(spec, **overrides)
        elif overrides:
            spec = spec.replace(**overrides)
        self.spec: ExperimentSpec = spec
        self._cluster: Cluster | None = cluster
        self._backend: ExperimentBackend | None = None
        #: set by start(): True when the experiment was running already and nothing was started
        self.already_running = False
        #: set by pause(), resume() and stop(): why the last of them did nothing (None: it acted)
        self.nothing_to_do: str | None = None
        #: set by stop(): where the results are on this machine (None: not downloaded)
        self.results_here: Path | None = None
        from rlcloud.results import check_results_root

        # `results=""` is an error, not the default; gs:// URLs, file:// URLs and paths are checked alike
        #: the results root (this run writes to ``<results_root>/<name>/``)
        self.results_root: str = check_results_root(
            results if results is not None else results_root(spec.results, None)
        )

    # ------------------------------------------------------------------------------------------ basics

    @property
    def name(self) -> str:
        """The experiment's name (a DNS-1123 label)."""
        return self.spec.name

    @property
    def location(self) -> str:
        """Where this experiment's results live (``<results>/<name>``)."""
        return results_location(self.results_root, self.name)

    @property
    def cluster(self) -> Cluster | None:
        """The cluster it runs on, or None for this machine."""
        return self._cluster

    @property
    def backend(self) -> ExperimentBackend:
        """The backend that runs (or ran) this experiment: local processes unless a cluster was given."""
        if self._backend is None:
            if self._cluster is None:
                from rlcloud.cluster import Cluster

                # the experiment's own results root: status() before start() must look where start() writes
                self._cluster = Cluster.local(results=self.results_root)
            self._backend = self._cluster.backend()
        return self._backend

    def __repr__(self) -> str:
        where = self._cluster.describe() if self._cluster else "local"
        return f"Experiment(name={self.name!r}, run_mode={self.spec.run_mode!r}, on={where}, results={self.location!r})"

    # ------------------------------------------------------------------------------------------- verbs

    def _refuse_a_sweeps_name(self) -> None:
        """A new experiment may not take the name of a sweep under the same results root (its location is
        the sweep's: each would shadow the other)."""
        from rlcloud.layout import SPEC
        from rlcloud.record import sweep_trials

        store = self._store()
        if store.exists(SPEC):
            return  # created before: a resume
        if sweep_trials(store):
            from rlcloud.errors import SpecError, SpecProblem

            raise SpecError(
                [
                    SpecProblem(
                        "name",
                        f"a sweep named {self.name!r} has its trials at {self.location}: name the experiment "
                        "differently (an experiment and a sweep of one name would shadow each other)",
                        self.name,
                    )
                ]
            )

    def start(
        self, cluster: Cluster | None = None, *, validate: bool = True, accept_new_code: bool = False
    ) -> Experiment:
        """Start training and return at once; the experiment runs in the background.

        With no cluster it runs as processes on this machine. With a cluster (Cluster.gke / .kubernetes)
        it runs there; a GKE cluster that does not exist yet is created first, and a dedicated one (the
        spec's own ``cluster``) is deleted again when the experiment ends or fails to start.

        A run is created once, with its spec of record (``<location>/spec.yaml``). Starting it again
        resumes from its latest checkpoint, and may change how long, how often or where it runs (each
        start is added to ``history.jsonl``); a spec that learns something else (environment, agent,
        network, seed, run mode, workers...) is refused with a SpecError naming each changed field,
        before anything is created. Starting an experiment that is running already changes nothing:
        :attr:`already_running` says so afterwards. Other ``code:`` (another archive digest) is refused the
        same way unless ``accept_new_code``: then the run resumes with it, and its history records the change
        with both digests.
        """
        from rlcloud.record import start_recorded

        if cluster is not None:
            self._cluster, self._backend = cluster, None
        elif self._cluster is None and self.spec.cluster is not None:
            from rlcloud.cluster import Cluster

            self._cluster = Cluster.from_spec_reference(self.spec.cluster, experiment=self.name)
        if validate:
            self.validate()
        elif self._runs_here():
            from rlcloud.errors import require_installed

            require_installed(RUNNER_MODULES, "runner", feature=f"running experiment {self.name} on this machine")
        target = self._cluster
        if target is not None:
            target.check_image(self.spec.image)  # before a cluster is created or billed, or the store is read
            if self.spec.budget is not None:
                target.check_budget(f"experiment {self.name}", self.spec.image)  # enforced there, or refused
        if target is None:
            from rlcloud.roles import check_local_capacity

            check_local_capacity(self.spec)  # processes and open files on this machine, before any is written
        self._refuse_a_sweeps_name()
        archive = self._pin_code()

        def launch() -> bool:
            self._publish_code(archive)  # after the record's check: a refused resume uploads nothing
            return self.backend.start(self.spec, self.results_root)

        started = start_recorded(
            self._store(),
            self.spec,
            launch,
            where=target.describe() if target else "local",
            prepare=(lambda: self._prepare(target)) if target is not None else None,
            on_failure=(lambda: target.release_after_failure(self.name)) if target is not None else None,
            accept_new_code=accept_new_code,
        )
        self.already_running = not started
        if started:
            log.info("started experiment %s (%s) writing to %s", self.name, self.backend.kind, self.location)
        else:
            log.info("experiment %s is already running (%s)", self.name, self.backend.kind)
        return self

    def _pin_code(self) -> CodeArchive | None:
        """Pack the spec's code (rlcloud.codepack) and pin its digest in the spec (the spec of record then names
        the archive every role unpacks); the archive to publish, or None without code."""
        from rlcloud.codepack import pin

        skip = [] if is_gcs(self.results_root) else [Path(self.results_root).expanduser()]
        self.spec, archive = pin(self.spec, skip=skip)
        return archive

    def _publish_code(self, archive: CodeArchive | None) -> None:
        """Store the code archive under the results root unless it is there (content-addressed: once)."""
        if archive is None:
            return
        from rlcloud.codepack import code_location, publish
        from rlcloud.storage import open_store

        with open_store(code_location(self.results_root)) as store:
            uploaded = publish(archive, store)
        log.info(
            "code %s (%d files): %s", archive.digest, len(archive.files), "uploaded" if uploaded else "stored already"
        )

    def _prepare(self, target: Cluster) -> None:
        """Before the run starts on ``target``: the cluster exists, and its budget has an enforcer there."""
        target.prepare_for(self.name)
        if self.spec.budget is not None:
            try:
                target.enforce_budget(f"experiment {self.name}")
            except BaseException:  # its reaper could not be installed: the run does not start unenforced
                target.release_after_failure(self.name)
                raise

    def validate(self) -> None:
        """Check that the environment, agent and network can be built, before anything starts.

        Raises SpecError (unknown environment id, unknown agent type, malformed network). The check needs
        the runner extra (gymnasium, Tensorforce, TensorFlow). Without it, an experiment that runs on this
        machine raises :class:`~rlcloud.errors.MissingExtraError` naming ``rlcloud[runner]`` (it could not
        run here anyway); one that runs on a cluster logs a warning once and goes on with the spec checked
        by its schema only (the pods build the environment and report what is wrong).
        """
        from rlcloud.errors import MissingExtraError, require_installed

        try:
            require_installed(RUNNER_MODULES, "runner", feature=f"running experiment {self.name} on this machine")
        except MissingExtraError:
            if self._runs_here():
                raise
            # the agent's arguments against Tensorforce's documented types need no extra (tables, no TensorFlow)
            from rlcloud.errors import SpecError
            from rlcloud.specs.tf06 import agent_argument_problems

            problems = agent_argument_problems(self.spec.agent)
            if problems:
                raise SpecError(problems) from None
            _warn_unvalidated_once(self.name)
            return
        from rlcloud.runner.envs import validate_experiment

        validate_experiment(self.spec)

    def _runs_here(self) -> bool:
        return self._cluster is None or self._cluster.kind == "local"

    def status(self) -> ExperimentStatus:
        """Per-role state and the learner's progress (timesteps, episodes, mean return), with the figures
        derived from them (``status.vitals``: percent done, ETA, checkpoint age, cost so far on GKE)."""
        from rlcloud.backend import RunFacts

        status = self.backend.status(self.name)
        facts = RunFacts.of_spec(self.spec)
        return replace(status, goal=facts.goal, price_per_hour=self._price_per_hour(), budget_usd=facts.budget_usd)

    def _price_per_hour(self) -> float | None:
        """USD per hour of the node the learner runs on, when the cluster is a GKE one with a known price; on this
        machine, rlcloud.yaml's ``cpu_hour_usd`` for each of the run's processes (None when 0: free)."""
        if self._runs_here():
            from rlcloud.local.machine import LocalMachine

            return self.backend.run_price(self.spec) if isinstance(self.backend, LocalMachine) else None
        cluster_spec = getattr(self._cluster, "spec", None) if self._cluster is not None else None
        if cluster_spec is None or getattr(self._cluster, "kind", None) != "gke":
            return None
        try:
            from rlcloud.gke.prices import node_hourly_cost

            price, _what = node_hourly_cost(cluster_spec, gpu=bool(self.spec.resources.learner.gpus))
        except Exception:  # a cluster spec the price table cannot place: no cost rather than no status
            log.debug("no price for %s", self.name, exc_info=True)
            return None
        return price

    def wait(
        self,
        timeout: float | None = None,
        *,
        progress: bool | Callable[[ExperimentStatus], None] = False,
        poll_interval: float = 1.0,
    ) -> ExperimentStatus:
        """Block until the experiment finishes and return its final status.

        ``progress=True`` shows a tqdm bar (notebook-aware); a callable gets each status. Raises
        rlcloud.WaitTimeoutError after ``timeout`` seconds (the experiment keeps running).
        """
        if progress is False:
            status = self.backend.wait(self.name, timeout)
        else:
            status = self._poll_until_finished(timeout, progress, poll_interval)
        if self._cluster is not None:
            # the experiment is over: a dedicated cluster must not keep costing money
            self._cluster.release_after_experiment(self.name)
        return status

    def _poll_until_finished(
        self, timeout: float | None, progress: bool | Callable[[ExperimentStatus], None], poll_interval: float
    ) -> ExperimentStatus:
        if callable(progress):
            callback: Callable[[ExperimentStatus], None] = progress
        else:
            callback = ExperimentBar(self.spec) if shows_a_bar() else PlainProgress(self.spec)
        deadline = None if timeout is None else time.monotonic() + timeout
        last: list[ExperimentStatus] = []

        def settled() -> ExperimentStatus | None:
            status = self.status()
            last[:] = [status]
            callback(status)
            # as backend.wait: a paused one waits for us
            return status if status.finished or status.state == "paused" else None

        try:
            done = poll_until(settled, deadline, interval=poll_interval)
            if done is None:
                raise WaitTimeoutError(f"experiment {self.name} still {last[0].state} after {timeout:g} s")
            return done
        finally:
            close = getattr(callback, "close", None)
            if close:
                close()

    def logs(self, follow: bool = False, roles: Sequence[str] | None = None) -> Iterator[str]:
        """Log lines prefixed "role-index | "; ``follow`` streams them until all roles end.

        ``roles``: whose lines: role names (``"env-server"``), instances (``"env-server-3"``) or
        ``"learner"``. By default every role's, except that ``follow`` streams only the learner's: a
        distributed run's env servers (one log stream each) are followed when asked for,
        ``logs(follow=True, roles=["learner", "env-server"])``.
        """
        return self.backend.logs(self.name, follow=follow, roles=roles)

    def pause(self) -> bool:
        """Checkpoint, then stop computing (processes / pods go away); :meth:`resume` continues.

        Returns False, doing nothing, when the experiment is not running (finished, or paused already):
        :attr:`nothing_to_do` says why. A finished experiment stays finished.
        """
        if not self._can("pause", {"running", "pending", "unknown"}):
            return False
        self.backend.pause(self.name)
        self._record_event("paused")
        return True

    def resume(self) -> bool:
        """Continue a paused (or stopped) experiment from its latest checkpoint.

        Returns False, doing nothing, when it is running already or has finished by itself (succeeded or
        failed): :attr:`nothing_to_do` says why (a failed one starts again with :meth:`start`).
        """
        if not self._can("resume", {"paused", "stopped", "unknown"}):
            return False
        self.backend.resume(self.name)
        self._record_event("resumed")
        return True

    def stop(self, download: bool = True, dest: str | Path | None = None) -> bool:
        """Stop the experiment (after a checkpoint where possible), then bring its results to this machine.

        ``download`` (default True, as `rlcloud experiment stop`; ``download=False`` / ``--no-download``
        skips it): results in Cloud Storage are copied to ``dest`` (default ./rlcloud-results/<name>) after
        the stop, so the final checkpoint is among them; results in a local directory are already here and
        are copied only when ``dest`` is given. :attr:`results_here` says where they are on this machine
        afterwards (None when not downloaded). Idempotent: returns False when it had finished already
        (:attr:`nothing_to_do` says so); the backend still clears what the finished run left (a cluster's
        Jobs), and a dedicated cluster (the spec's own) is deleted afterwards either way; the results stay
        in the store.
        """
        acted = self._can("stop", {"running", "pending", "paused", "unknown"})
        self.backend.stop(self.name)
        if acted:
            self._record_event("stopped")
        if self._cluster is not None:
            self._cluster.release_after_experiment(self.name)
        self.results_here = None
        if download:
            if dest is None and not is_gcs(self.location):
                self.results_here = Path(self.location)
            else:
                self.results_here = self.download(dest)
        return acted

    def _record_event(self, event: str) -> None:
        """Add ``event`` (paused, resumed, stopped) to the run's history.jsonl, as a start adds its own: the
        record says what was done to the run, by which verb, where."""
        from rlcloud.record import append_history

        where = self._cluster.describe() if self._cluster is not None else "local"
        append_history(self._store(), self.spec, event=event, changes=[], where=where)

    def _can(self, verb: str, states: set[str]) -> bool:
        """Whether ``verb`` applies to the experiment in its current state; else say why (nothing_to_do)."""
        status = self.status()
        if status.state in states:
            self.nothing_to_do = None
            return True
        if status.finished:
            reason = f"{self.name} has finished ({status.state}); nothing to {verb}"
            if verb == "resume" and status.state == "failed":
                reason += ": start it again to retry from its latest checkpoint (rlcloud experiment start)"
        elif status.state == "running":
            reason = f"{self.name} is running already; nothing to {verb}"
        else:
            reason = f"{self.name} is {status.state}; nothing to {verb}"
        self.nothing_to_do = reason
        log.info("%s", reason)
        return False

    # ----------------------------------------------------------------------------------------- results

    def _store(self) -> Any:
        from rlcloud.storage import open_store

        return open_store(self.location)

    def download(self, dest: str | Path | None = None, *, progress: bool = True) -> Path:
        """Copy the results to ``dest`` (default ./rlcloud-results/<name>) incrementally, checksums verified."""
        from rlcloud.storage.client import download

        target = Path(dest) if dest else Path(DEFAULT_RESULTS) / self.name
        if not is_gcs(self.location) and Path(self.location).resolve() == target.resolve():
            return target  # already here
        download(self._store(), target, progress=bytes_bar(f"download {self.name}") if progress else None)
        return target

    def metrics(self, evaluation: bool = False) -> pd.DataFrame:
        """The episode records as a pandas DataFrame, one row per episode, oldest first.

        Columns: episode, timestep, return, length, time, worker (the same columns when no episode has
        ended yet); ``evaluation=True`` gives the evaluation episodes instead, with at_episode and
        at_timestep too. Read from the results store without downloading anything else.
        """
        from rlcloud.storage.client import metrics_frame, read_evaluation, read_metrics

        store = self._store()
        if evaluation:
            return metrics_frame(read_evaluation(store), evaluation=True)
        return metrics_frame(read_metrics(store))

    def results(self, **options: Unpack[CompareOptions]) -> pd.DataFrame:
        """This run as one row of :func:`rlcloud.compare`'s table (as :meth:`Sweep.results` gives one per
        trial): seed, state, timesteps, episodes, the objective, final evaluation, wall time, steps/s.
        ``options`` go to :func:`rlcloud.comparison.compare`; :meth:`metrics` has the episodes themselves."""
        from rlcloud.comparison import compare

        return compare([self], **options)

    def plot(self, path: str | Path | None = None, window: int = 20) -> Figure:
        """A matplotlib figure of episode returns (and their moving mean); saved as PNG when ``path`` is given."""
        from rlcloud.plotting import plot_returns
        from rlcloud.storage.client import read_evaluation, read_metrics

        store = self._store()
        return plot_returns(read_metrics(store), read_evaluation(store), title=self.name, window=window, path=path)

    # ----------------------------------------------------------------------------------- the policy

    def _trained_spec(self) -> ExperimentSpec:
        """The spec the run trained with: its spec of record when there is one (an attached run's, or one
        resumed with a longer budget), else this experiment's own."""
        from rlcloud.record import record_in_force
        from rlcloud.specs import ExperimentSpec

        record = record_in_force(self._store())  # with the code a resume accepted since, if any
        return ExperimentSpec.from_dict(record) if record else self.spec

    def agent(self, checkpoint: str | None = None) -> Policy:
        """The trained agent, restored from the latest complete checkpoint (or ``checkpoint``, e.g.
        ``"ckpt-000000050000"``) wherever the results are (a directory, ``gs://``, a sweep's trial).

        Returns a :class:`rlcloud.runner.policy.Policy`: ``.act(state)`` acts deterministically as the
        run's evaluation did, ``.episodes(n)`` plays episodes in the run's environment (same wrappers and
        limits), ``.agent`` is the Tensorforce agent itself. Needs the runner extra (TensorFlow).

        Raises:
            SpecError: the run has no complete checkpoint, or not the one named.
        """
        from rlcloud.policies import load

        return load(self._trained_spec(), self._store(), self.location, checkpoint)

    def export(self, path: str | Path, *, format: str = "saved-model", checkpoint: str | None = None) -> Path:
        """Export the trained policy to the directory ``path``: a TensorFlow SavedModel (Tensorforce's own
        export of its act function, loadable with ``tf.saved_model.load`` and no rlcloud) and
        ``rlcloud-policy.json`` beside it (the spec of record, the checkpoint, the environment). Returns the
        SavedModel's directory."""
        if format != "saved-model":
            from rlcloud.errors import SpecError, SpecProblem

            raise SpecError([SpecProblem("format", "the one export format is 'saved-model'", format)])
        with self.agent(checkpoint) as policy:
            return policy.export(path)

    def video(
        self,
        path: str | Path,
        *,
        episodes: int = 1,
        checkpoint: str | None = None,
        seed: int | None = None,
        fps: int = 50,
        progress: bool = True,
    ) -> Video:
        """Render ``episodes`` episodes of the trained policy to ``path``: a GIF or an MP4 by its suffix (MP4
        needs the video extra). ``seed`` defaults to the run's evaluation seed, so the first episode is the
        one the run's first evaluation played. Returns a :class:`rlcloud.policies.Video` (the returns and
        lengths; it shows inline in a notebook). At most 2,500 frames (runner/policy.py's ``MAX_FRAMES``)."""
        from rlcloud.policies import render

        with self.agent(checkpoint) as policy:
            bar = steps_bar(f"video {self.name}") if progress else None
            try:
                return render(policy, path, episodes=episodes, seed=seed, fps=fps, progress=bar)
            finally:
                if bar is not None:
                    bar(-1)

    # --------------------------------------------------------------------------------- finding them again

    @classmethod
    def attach(cls, name: str, cluster: Cluster | None = None, results: str | None = None) -> Experiment:
        """Rebuild an Experiment from what its backend knows (labels and ConfigMap on a cluster, or the
        local results), e.g. from another machine: ``Experiment.attach("cartpole-ppo", cluster=gpu)``."""
        from rlcloud.cluster import Cluster
        from rlcloud.results import check_results_root

        results = None if results is None else check_results_root(results)
        target = cluster or Cluster.local(results=results)
        backend = target.backend()
        spec, root = backend.attach(name)  # NotFoundError when the backend does not know the name
        exp = cls(spec, results=root, cluster=target)
        exp._backend = backend
        return exp

    @classmethod
    def list(cls, cluster: Cluster | None = None, results: str | None = None) -> list[str]:
        """Names of the experiments on ``cluster`` (default: this machine's results root)."""
        from rlcloud.cluster import Cluster
        from rlcloud.results import check_results_root

        results = None if results is None else check_results_root(results)
        return (cluster or Cluster.local(results=results)).backend().list()

    # ---------------------------------------------------------------------------------------- notebooks

    def _observed_status(self) -> ExperimentStatus | None:
        """The status if it can be read cheaply, else None: never start a backend (or a network call to a
        cluster) just to draw a notebook cell. Local experiments are read from disk; cluster ones only once
        started or attached."""
        if self._backend is None and self._cluster is not None and self._cluster.kind != "local":
            return None
        try:
            return self.status()
        except Exception:  # not started yet, or the backend is unreachable: show the spec only
            return None

    def _repr_html_(self) -> str:
        """A compact table for notebooks: :func:`rlcloud.display.experiment_html`."""
        runs_on = self._cluster.describe() if self._cluster else "local"
        return experiment_html(self, self._observed_status(), runs_on)


_warned_unvalidated = False


def _warn_unvalidated_once(name: str) -> None:
    global _warned_unvalidated
    if not _warned_unvalidated:
        _warned_unvalidated = True
        log.warning(
            "the runner extra is not installed here (pip install 'rlcloud[runner]'): experiment %s was checked "
            "against its schema only, without building its environment and agent; the pods will report "
            "what they cannot build",
            name,
        )
