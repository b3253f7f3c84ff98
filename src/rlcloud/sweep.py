"""The Sweep facade: many runs of one experiment (seeds, a grid or a random search), compared at the end.

    sweep = Sweep(SweepSpec.from_file("examples/cartpole_sweep.yaml"), results="runs")
    sweep.start()                    # locally: a bounded pool of trial processes, in the background
    sweep.wait(progress=True)        # one line per trial
    sweep.results()                  # one row per trial: parameters, seed, state, objective, ...
    sweep.start(cluster=gpu)         # on Kubernetes/GKE: ONE Indexed Job, the laptop may close

Each trial is an ordinary experiment under ``<results>/<sweep>/<trial>/``: ``Experiment.attach(trial,
results="<results>/<sweep>")`` and every tool that reads one experiment work on a trial.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlcloud.display import SweepBar, TrialLog
from rlcloud.errors import WaitTimeoutError
from rlcloud.results import results_location, results_root
from rlcloud.waiting import poll_until

if TYPE_CHECKING:
    from typing import Unpack

    import pandas as pd
    from matplotlib.figure import Figure

    from rlcloud.backend import ExperimentBackend, SweepCapable, SweepStatus
    from rlcloud.cluster import Cluster
    from rlcloud.codepack import CodeArchive
    from rlcloud.comparison import Best, CompareOptions
    from rlcloud.experiment import Experiment
    from rlcloud.policies import Video
    from rlcloud.specs.sweep import SweepSpec

__all__ = ["Sweep", "extend_advice"]

log = logging.getLogger(__name__)


class Sweep:
    """A sweep: its spec, where its results go, and where it runs once started."""

    def __init__(
        self,
        spec: SweepSpec | str | Path,
        results: str | None = None,
        *,
        cluster: Cluster | None = None,
        **overrides: object,
    ) -> None:
        """Make a sweep from a SweepSpec (or a sweep file, with keyword overrides such as ``max_parallel=2``).

        ``results`` is the results root; the trials write to ``<results>/<sweep>/<trial>/``.
        """
        from rlcloud.specs.sweep import SweepSpec

        if isinstance(spec, str | Path):
            spec = SweepSpec.from_file(spec, **overrides)
        elif overrides:
            spec = SweepSpec.model_validate({**spec.model_dump(), **overrides})
        self.spec: SweepSpec = spec
        #: the results root (the trials write to ``<results_root>/<sweep>/<trial>/``)
        self.results_root: str = results_root(spec.results or spec.experiment.results, results)
        self._cluster = cluster
        self._backend: ExperimentBackend | None = None
        #: set by start(): True when the sweep was running already and nothing was started
        self.already_running = False
        #: Why the last stop() did nothing (it had finished already), else None: what the CLI says.
        self.nothing_to_do: str | None = None

    @property
    def name(self) -> str:
        """The sweep's name."""
        return self.spec.name

    @property
    def location(self) -> str:
        """Where the trials' results live (``<results>/<sweep>``): the results root of each trial."""
        return results_location(self.results_root, self.name)

    @property
    def backend(self) -> ExperimentBackend:
        """The backend that runs the trials: local processes unless a cluster was given."""
        if self._backend is None:
            if self._cluster is None:
                from rlcloud.cluster import Cluster

                self._cluster = Cluster.local(results=self.results_root)
            self._backend = self._cluster.backend()
        return self._backend

    @property
    def sweeps(self) -> SweepCapable:
        """The backend's sweep capability (:class:`~rlcloud.backend.SweepCapable`);
        :class:`~rlcloud.errors.UnsupportedError` when the cluster's backend runs no sweeps."""
        from rlcloud.backend import sweep_capable

        return sweep_capable(self.backend)

    def __repr__(self) -> str:
        where = self._cluster.describe() if self._cluster else "local"
        return f"Sweep(name={self.name!r}, trials={self.spec.num_trials}, on={where}, results={self.location!r})"

    # ------------------------------------------------------------------------------------------- verbs

    def validate(self) -> None:
        """Check every trial up front, as an experiment would be checked (SpecError naming the trial)."""
        from rlcloud.errors import SpecError, SpecProblem

        trials = self.spec.trials()  # each trial's spec validated by pydantic
        if (
            self.spec.experiment.run_mode == "distributed"
            and self._cluster is not None
            and self._cluster.kind != "local"
        ):
            raise SpecError(
                [
                    SpecProblem(
                        "experiment.run_mode",
                        "a trial of a sweep on a cluster runs in one pod of an Indexed Job, which cannot hold "
                        "distributed env-server pods: use single or multi-threaded, or run each configuration "
                        "as its own experiment",
                        "distributed",
                    )
                ]
            )
        from rlcloud.experiment import Experiment

        seen: set[str] = set()
        for trial in trials:
            key = trial.config
            if key in seen:
                continue  # trials of one configuration differ by seed only
            seen.add(key)
            Experiment(trial.spec, results=self.location).validate()

    def start(self, cluster: Cluster | None = None, *, validate: bool = True) -> Sweep:
        """Start the sweep and return at once; trials run in the background, ``max_parallel`` at a time.

        Every trial is validated first: nothing starts when one is invalid. The sweep's spec of record
        (``<location>/sweep.yaml``, :func:`rlcloud.record.start_sweep_recorded`) is written at its first
        start; a later start whose grid, seeds, samples or base experiment learning setup differ raises
        :class:`~rlcloud.specs.identity.ChangedSweepError` naming each field, before anything is created.
        Starting a sweep that runs already changes nothing (:attr:`already_running`); one that was stopped
        goes on, keeping the trials that finished and resuming the others.
        """
        if cluster is not None:
            self._cluster, self._backend = cluster, None
        if self.spec.sampler == "tpe" and (self._cluster is None or self._cluster.kind == "local"):
            from rlcloud.errors import SpecError, SpecProblem

            # the local scheduler starts trials from the sweep's table; a tpe trial asks as it starts (a pod)
            why = "sampler: tpe runs on Kubernetes for now; here use a random search (distributions, samples: N)"
            raise SpecError([SpecProblem("sampler", why, "tpe")])
        if validate:
            self.validate()
        self._refuse_an_experiments_name()
        from rlcloud.record import check_sweep_resume, start_sweep_recorded
        from rlcloud.storage import open_store

        store = open_store(self.location)
        archive = self._pin_code()  # every trial runs this one archive: the sweep's record pins its digest
        check_sweep_resume(store, self.spec)  # another sweep of this name: refused before anything is created
        from rlcloud.record import sweep_of_record

        self.spec = sweep_of_record(store, self.spec)  # a sweep that grew starts again with its growth
        if self._cluster is not None:
            self._cluster.check_image(self.spec.experiment.image)  # trials share the experiment's image
            if self.spec.budget is not None:  # enforced there, or refused before anything is created
                self._cluster.check_budget(f"sweep {self.name}", self.spec.experiment.image)
            self._cluster.check_trials_per_gpu(self.spec.trials_per_gpu)
            # a GKE cluster that does not exist yet is created first (a dedicated one goes when the sweep fails
            # to start); nothing is created when a trial is invalid (validated above)
            self._cluster.prepare_for(self.name)
            if self.spec.budget is not None:
                try:
                    self._cluster.enforce_budget(f"sweep {self.name}")
                except BaseException:  # its reaper could not be installed: the sweep does not start unenforced
                    self._cluster.release_after_failure(self.name)
                    raise
        where = self._cluster.describe() if self._cluster is not None else "local"
        try:
            sweeps = self.sweeps  # a backend without the capability is refused before the record is written

            def launch() -> bool:
                if archive is not None:
                    from rlcloud.codepack import code_location, publish

                    with open_store(code_location(self.results_root)) as code_store:
                        publish(archive, code_store)
                return sweeps.start_sweep(self.spec, self.results_root)

            started = start_sweep_recorded(store, self.spec, launch, where=where)
        except BaseException:
            if self._cluster is not None:
                self._cluster.release_after_failure(self.name)
            raise
        self.already_running = not started
        return self

    def extend(
        self,
        *,
        seeds: int | builtins.list[int] | None = None,
        parameters: dict[str, builtins.list[Any]] | None = None,
        top: int | None = None,
        total_timesteps: int | None = None,
        statistic: str = "iqm",
    ) -> builtins.list[str]:
        """Grow the sweep with new trials of the same sweep, or train its best configurations further; return
        the names of the trials this call added (or extended).

        ``seeds``: a count N gives every configuration N seeds in all (the lowest unused ones are added), a list
        adds those seeds. ``parameters``: grid field -> values added to it (every new combination runs with
        every seed). ``top`` K with ``total_timesteps`` T: the trials of the K best configurations (by
        ``statistic`` over their seeds, :meth:`best`'s ranking) train on from their last checkpoint until T.

        Finished trials are not retrained, their names and indices do not change, and new trials are indexed
        after them; the sweep runs them (locally its running scheduler queues them, or it is started again for
        them; on Kubernetes a second Job of the sweep runs the new indices, the running pods go on). Each step
        is recorded create-only beside the sweep of record and in its history (who, what, when), so the same
        sweep and steps give the same trials anywhere, and a call that crashed is completed by the next
        (:func:`rlcloud.record.grow_sweep_recorded`). Raises SpecError for a request that adds nothing valid.
        """
        from rlcloud.errors import SpecError, SpecProblem

        if top is not None or total_timesteps is not None:
            if seeds is not None or parameters:
                raise SpecError([SpecProblem("top", "extend --top trains trials further; add seeds or values in "
                                             "a call of their own", top)])  # fmt: skip
            if top is None or total_timesteps is None or top < 1 or total_timesteps < 1:
                raise SpecError([SpecProblem("top", "give both top K >= 1 and total_timesteps T >= 1 (the K best "
                                             "configurations train on until T)", top)])  # fmt: skip
            ranked = self._ranked_configs(statistic)[:top]
            return self._grow(lambda current: _budget_step(current, ranked, total_timesteps), "extend")
        if seeds is None and not parameters:
            raise SpecError([SpecProblem("seeds", "say what to add: seeds (a count or a list), parameters, or top "
                                         "with total_timesteps", None)])  # fmt: skip
        return self._grow(lambda current: self._checked(current, _trials_step(current, seeds, parameters or {})),
                          "extend")  # fmt: skip

    def _checked(self, current: SweepSpec, step: Any) -> Any:
        """``step``, once each new configuration it makes is checked as :meth:`validate` checks a trial (an
        invalid value is refused before the step is recorded: SpecError naming the trial)."""
        if step is None or not step.parameters:
            return step
        from rlcloud.experiment import Experiment

        seen = {t.config for t in current.trials()}
        for trial in current.with_growth([*current.growth, step]).trials()[current.num_trials :]:
            if trial.config not in seen:
                seen.add(trial.config)
                Experiment(trial.spec, results=self.location).validate()
        return step

    def rerun(self, state: str = "failed") -> builtins.list[str]:
        """Run the trials in ``state`` ("failed" or "stopped") again, each from its last complete checkpoint
        (from scratch if it has none), under the same trial names; ``max_failures`` and the budget apply as at
        the first start. Returns their names (empty: none in that state). Recorded in the sweep's history."""
        from rlcloud.errors import SpecError, SpecProblem

        if state not in ("failed", "stopped"):
            raise SpecError([SpecProblem("state", "rerun takes failed or stopped trials", state)])
        names = [t.name for t in self.status().trials if t.state == state]
        if not names:
            return []
        from rlcloud.record import append_sweep_event, sweep_of_record
        from rlcloud.storage import open_store

        store = open_store(self.location)
        self.spec = sweep_of_record(store, self.spec)
        self.sweeps.grow_sweep(self.spec, self.results_root, run=names)
        where = self._cluster.describe() if self._cluster is not None else "local"
        append_sweep_event(store, self.spec, "rerun", where=where, state=state, trials=names)
        return names

    def _grow(self, plan: Callable[[SweepSpec], Any], what: str) -> builtins.list[str]:
        from rlcloud.record import grow_sweep_recorded
        from rlcloud.storage import open_store

        where = self._cluster.describe() if self._cluster is not None else "local"
        sweeps = self.sweeps

        def apply(grown: SweepSpec) -> None:
            self.spec = grown
            sweeps.grow_sweep(grown, self.results_root)

        _grown, added = grow_sweep_recorded(open_store(self.location), self.spec, plan, apply, where=where)
        log.info("sweep %s: %s: %d trial(s): %s", self.name, what, len(added), ", ".join(added[:10]))
        return added

    def _ranked_configs(self, statistic: str) -> builtins.list[str]:
        """The sweep's configurations (:attr:`Trial.config`) best first by ``statistic`` over their seeds."""
        from rlcloud.comparison import summarize
        from rlcloud.errors import SpecError

        table = self.results()
        configs = {t.name: t.config for t in self.spec.trials()}
        table = table.assign(configuration=[configs.get(run, "") for run in table["run"]])
        table.attrs["parameters"] = ["configuration"]
        summary = summarize(table, statistic=statistic)
        ranked = summary[summary[statistic].notna()].sort_values(statistic, ascending=False, kind="stable")
        if ranked.empty:
            raise SpecError("no trial has a value of the objective yet: nothing to rank for extend --top")
        return [str(c) for c in ranked["configuration"]]

    def _pin_code(self) -> CodeArchive | None:
        """Pack the base experiment's code and pin its digest in the sweep (rlcloud.codepack.pin)."""
        from rlcloud.codepack import pin
        from rlcloud.results import is_gcs

        skip = [] if is_gcs(self.results_root) else [Path(self.results_root).expanduser()]
        experiment, archive = pin(self.spec.experiment, skip=skip)
        self.spec = self.spec.model_copy(update={"experiment": experiment})
        return archive

    def _refuse_an_experiments_name(self) -> None:
        """A sweep may not take the name of an experiment under the same results root (the sweep's location
        is the experiment's: each would shadow the other)."""
        from rlcloud.layout import SPEC
        from rlcloud.storage import open_store

        if open_store(self.location).exists(SPEC):
            from rlcloud.errors import SpecError, SpecProblem

            raise SpecError(
                [
                    SpecProblem(
                        "name",
                        f"an experiment named {self.name!r} has its results at {self.location}: name the sweep "
                        "differently (an experiment and a sweep of one name would shadow each other)",
                        self.name,
                    )
                ]
            )

    def status(self) -> SweepStatus:
        """Each trial's state and progress (state, timestep, episode, mean return), and the overall state;
        ``status.vitals`` and each trial's: percent done, ETA, best return, restarts (docs/contracts.md)."""
        status = self.sweeps.sweep_status(self.name)
        base = self.spec.experiment
        here = self._cluster is None or self._cluster.kind == "local"
        # locally each trial costs cpu_hour_usd per hour (one process); on a cluster the reaper measures the sweep
        price = None
        if here:
            from rlcloud.local.machine import LocalMachine

            price = self.backend.run_price(base) if isinstance(self.backend, LocalMachine) else None
        trials = []
        for trial in status.trials:
            total = trial.params.get("total_timesteps", base.total_timesteps)
            goal = ("timestep", total) if total else ("episode", trial.params.get("episodes", base.episodes) or 0)
            goal_or_none = goal if isinstance(goal[1], int) and goal[1] > 0 else None
            trials.append(replace(trial, goal=goal_or_none, price_per_hour=price))
        budget = self.spec.budget.amount if self.spec.budget is not None else None
        return replace(status, trials=trials, budget_usd=budget)

    def wait(
        self,
        timeout: float | None = None,
        *,
        progress: bool | Callable[[SweepStatus], None] = False,
        poll_interval: float = 2.0,
    ) -> SweepStatus:
        """Block until every trial has finished; return the final status.

        ``progress=True`` shows a bar (tqdm, in a terminal or a notebook): trials finished of all, how many
        run, and the best mean return so far; trial state changes are logged too. A callable gets each
        status instead. Raises rlcloud.WaitTimeoutError after ``timeout`` seconds (the sweep keeps running).
        """
        bar = SweepBar(self.name, self.spec.num_trials) if progress is True else None
        log_changes = TrialLog() if progress is True else None
        callback = progress if callable(progress) else None
        deadline = None if timeout is None else time.monotonic() + timeout
        last: list[SweepStatus] = []

        def settled() -> SweepStatus | None:
            status = self.status()
            last[:] = [status]
            for report in (callback, bar, log_changes):
                if report is not None:
                    report(status)
            return status if status.finished else None

        try:
            done = poll_until(settled, deadline, interval=poll_interval)
            if done is None:
                raise WaitTimeoutError(
                    f"sweep {self.name} still {last[0].state} after {timeout:g} s: {last[0].counts_text()}"
                )
            return done
        finally:
            if bar is not None:
                bar.close()

    def stop(self) -> bool:
        """Stop the sweep: no new trial starts, running trials checkpoint and stop. Idempotent: returns False
        when it had finished already (as :meth:`Experiment.stop`; :attr:`nothing_to_do` says so); the backend
        still clears what it left."""
        status = self.status()
        acted = not status.finished
        self.nothing_to_do = None if acted else f"{self.name} has finished ({status.state}); nothing to stop"
        self.sweeps.stop_sweep(self.name)
        return acted

    # ---------------------------------------------------------------------------------------- notebooks

    def _repr_html_(self) -> str:
        """The sweep for notebooks: its state and figures, and one row per trial with its vitals (state,
        percent done, ETA, steps/s, return: :func:`rlcloud.display.sweep_html`).

        Reads the status only where that is cheap: a local sweep from disk, a cluster's once started or
        attached (never a cluster connection just to draw a cell); otherwise the trials are shown queued.
        """
        from rlcloud.backend import SweepStatus, TrialStatus
        from rlcloud.display import sweep_html

        status = None
        if self._backend is not None or self._cluster is None or self._cluster.kind == "local":
            try:
                status = self.status()
            except Exception:  # not started yet, or the backend is unreachable: the trials as specified
                status = None
        if status is None:
            trials = [TrialStatus(i, name, params, seed, "queued") for i, (name, params, seed) in
                      enumerate(self.spec.trial_table())]  # fmt: skip
            status = SweepStatus(name=self.name, state="pending", trials=trials, message="not started")
        where = self._cluster.describe() if self._cluster else "local"
        return sweep_html(status, rows=[("runs on", where), ("results", self.location)])

    # ----------------------------------------------------------------------------------------- results

    def experiments(self, *, started: bool = False) -> builtins.list[Experiment]:
        """One Experiment per trial, reading its results from ``<results>/<sweep>/<trial>``; with ``started``
        only the trials that have started (their spec of record exists)."""
        from rlcloud.experiment import Experiment
        from rlcloud.layout import SPEC
        from rlcloud.storage import open_store

        runs = [Experiment(trial.spec, results=self.location) for trial in self.spec.trials()]
        if started:  # one listing of the sweep's specs of record, not a request per trial
            have = {i.name.split("/", 1)[0] for i in open_store(self.location).list_named([SPEC]) if "/" in i.name}
            runs = [exp for exp in runs if exp.name in have]
        return runs

    def results(self, **options: Unpack[CompareOptions]) -> pd.DataFrame:
        """One row per trial (pandas DataFrame): the swept parameters, seed, state, timesteps, the objective,
        final evaluation, wall time, steps/s. ``options`` go to :func:`rlcloud.comparison.compare`."""
        from rlcloud.comparison import compare

        options.setdefault("objective", self.spec.objective)
        table = compare(self, **options)  # the started trials, from one listing of the sweep's location
        if self.spec.population is not None and options.get("by", "run") == "run" and "run" in table:
            from rlcloud.runner.population import lineage, read_pbt_records
            from rlcloud.storage import open_store

            # population-based training: each trial's exploits, "<-donor@timestep values; ..." (empty: none)
            paths = lineage(read_pbt_records(open_store(self.location)))
            table["lineage"] = [paths.get(str(run), "") for run in table["run"]]
        return table

    def best(self, statistic: str = "iqm", **options: Unpack[CompareOptions]) -> Best:
        """The best configuration by ``statistic`` (``"iqm"``, ``"mean"`` or ``"median"``) over its seeds, and
        whether its lead over the runner-up is outside the intervals (:class:`rlcloud.comparison.Best`; print it
        for a sentence). ``options`` go to :meth:`results`."""
        from rlcloud.comparison import best

        found = best(self.results(**options), statistic=statistic)
        found.next_step = extend_advice(self.name, found)
        return found

    def trial(self, name: str) -> Experiment:
        """The trial ``name`` (e.g. ``"lr3e-4--seed2"``) as an Experiment reading its results.

        Raises:
            NotFoundError: the sweep has no trial of that name (the message lists a few that it has).
        """
        from rlcloud.errors import NotFoundError

        runs = self.experiments()
        for exp in runs:
            if exp.name == name:
                return exp
        some = ", ".join(exp.name for exp in runs[:5])
        raise NotFoundError(f"sweep {self.name} has no trial {name!r} (it has {len(runs)}: {some}...)")

    def best_trial(self, statistic: str = "iqm", **options: Unpack[CompareOptions]) -> Experiment:
        """The best configuration's (:meth:`best`) best trial: its seed with the highest objective."""
        from rlcloud.comparison import best
        from rlcloud.errors import NotFoundError

        table = self.results(**options)
        chosen = best(table, statistic=statistic)
        rows = table
        for key, value in chosen.parameters.items():
            rows = rows[rows[key] == value]
        rows = rows[rows["objective"].notna()]
        if rows.empty:
            raise NotFoundError(f"sweep {self.name} has no finished trial with an objective")
        location = rows.loc[rows["objective"].idxmax(), "location"]
        return next(exp for exp in self.experiments(started=True) if exp.location == location)

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
        """A video of the best configuration's best trial (:meth:`best_trial`); the options are
        :meth:`rlcloud.Experiment.video`'s."""
        best = self.best_trial()
        return best.video(path, episodes=episodes, checkpoint=checkpoint, seed=seed, fps=fps, progress=progress)

    def plot(
        self, path: str | Path | None = None, *, window: int = 20, points: int = 200, confidence_level: float = 0.95
    ) -> Figure:
        """Mean return per configuration over seeds, with a 95% confidence band (a matplotlib Figure;
        saved as PNG when ``path`` is given)."""
        from rlcloud.comparison import plot_runs

        if self.spec.population is None:
            return plot_runs(
                self, path=path, title=self.name, window=window, points=points, confidence_level=confidence_level
            )
        from rlcloud.plotting import check_plot_path
        from rlcloud.runner.population import mark_exploits, read_pbt_records
        from rlcloud.storage import open_store

        target = None if path is None else check_plot_path(path)  # before anything is read
        figure = plot_runs(
            self, path=None, title=self.name, window=window, points=points, confidence_level=confidence_level
        )
        mark_exploits(figure, read_pbt_records(open_store(self.location)))  # an x where a trial took another's
        if target is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            figure.savefig(str(target))
        return figure

    # --------------------------------------------------------------------------------- finding them again

    @classmethod
    def attach(cls, name: str, cluster: Cluster | None = None, results: str | None = None) -> Sweep:
        """A sweep started earlier (from this or another machine), by name."""
        from rlcloud.backend import sweep_capable
        from rlcloud.cluster import Cluster

        target = cluster or Cluster.local(results=results)
        backend = target.backend()
        spec, root = sweep_capable(backend).attach_sweep(name)
        sweep = cls(spec, results=root, cluster=target)
        sweep._backend = backend
        return sweep

    @classmethod
    def list(cls, cluster: Cluster | None = None, results: str | None = None) -> builtins.list[str]:
        """Names of the sweeps on ``cluster`` (default: this machine's results root)."""
        from rlcloud.backend import sweep_capable
        from rlcloud.cluster import Cluster

        return sweep_capable((cluster or Cluster.local(results=results)).backend()).list_sweeps()


def extend_advice(name: str, found: Best, flags: builtins.list[str] | None = None) -> str | None:
    """The command that acts on ``found``'s advice for sweep ``name``: ``rlcloud sweep extend NAME --seeds N``
    when N seeds per configuration would separate the best from the runner-up and the sweep has fewer; None
    otherwise. ``flags``: what finds the sweep again (``--results DIR``, a cluster's flags)."""
    needed = found.seeds_needed
    if needed is None or needed <= found.n:
        return None
    import shlex

    return shlex.join(["rlcloud", "sweep", "extend", name, "--seeds", str(needed), *(flags or [])])


def _trials_step(current: SweepSpec, seeds: int | list[int] | None, parameters: dict[str, list[Any]]) -> Any:
    """The growth step that gives ``current`` the seeds and values asked for, or None when it has them all
    already (a second call: nothing more to record). SpecError when the step would make invalid trials."""
    from rlcloud.errors import SpecError, SpecProblem
    from rlcloud.specs.sweep import Growth

    have = list(current.seed_list)
    for step in current.growth:
        have += [s for s in step.seeds if s not in have]
    if isinstance(seeds, bool) or (seeds is not None and not isinstance(seeds, int | list)):
        raise SpecError([SpecProblem("seeds", "a count of seeds per configuration, or a list of seeds", seeds)])
    if isinstance(seeds, int):
        from rlcloud.specs.sweep import MAX_TRIALS

        if not 1 <= seeds <= MAX_TRIALS:
            raise SpecError([SpecProblem("seeds", f"a count of seeds per configuration is 1..{MAX_TRIALS}", seeds)])
        candidates = (s for s in range(1, 2**32) if s not in have)
        new_seeds = [next(candidates) for _ in range(max(0, seeds - len(have)))]
    else:
        new_seeds = [s for s in seeds or [] if s not in have]
    values: dict[str, list[Any]] = {}
    for key, added in parameters.items():
        known = current.parameters.get(key)
        if not isinstance(known, list):
            values[key] = list(added)  # refused by the spec's validator, naming the field
            continue
        for step in current.growth:
            known = known + step.parameters.get(key, [])
        fresh = [v for v in added if all(v != k or type(v) is not type(k) for k in known)]
        if fresh:
            values[key] = fresh
    if not new_seeds and not values:
        return None
    step = Growth(seeds=new_seeds, parameters=values)
    current.with_growth([*current.growth, step]).trials()  # every new trial valid, or SpecError naming it
    return step


def _budget_step(current: SweepSpec, configs: list[str], total_timesteps: int) -> Any:
    """The growth step that trains the trials of ``configs`` on until ``total_timesteps``, or None when each
    has that budget already."""
    from rlcloud.specs.sweep import Growth

    chosen = set(configs)
    names = [t.name for t in current.trials() if t.config in chosen and (t.spec.total_timesteps or 0) < total_timesteps]
    if not names:
        return None
    step = Growth(trials=names, total_timesteps=total_timesteps)
    current.with_growth([*current.growth, step]).trials()
    return step
