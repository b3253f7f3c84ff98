"""The contract every place that runs experiments implements, and the observed state it reports.

Backends: local processes on this machine (rlcloud.local) and any Kubernetes cluster
(rlcloud.k8s.backend; GKE hands its cluster's client to it). The docstrings of ExperimentBackend (the core
verbs) and SweepCapable (the sweep capability) are the contract the Experiment and Sweep facades rely on.
"""

from __future__ import annotations

import builtins
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from rlcloud.display import shown_rate
from rlcloud.layout import ProgressRecord

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec
    from rlcloud.specs.sweep import SweepSpec

__all__ = [
    "DEFAULT_STALL_TIMEOUT",
    "STATUS_SCHEMA",
    "ExperimentBackend",
    "ExperimentState",
    "ExperimentStatus",
    "RoleState",
    "RoleStatus",
    "RunFacts",
    "SweepCapable",
    "SweepStatus",
    "TrialStatus",
    "stalled_for",
    "sweep_capable",
    "vitals",
]

RoleState = Literal["pending", "running", "succeeded", "failed", "suspended", "unknown"]
ExperimentState = Literal["pending", "running", "succeeded", "failed", "paused", "stopped", "unknown"]
FINISHED_STATES: frozenset[str] = frozenset({"succeeded", "failed", "stopped"})

#: The version of the ``-o json`` status documents (docs/contracts.md): raised when a key changes meaning or
#: goes away; new keys may appear in any version.
STATUS_SCHEMA = 1

#: The stall_timeout of a progress.json that does not carry one (written by a runner before the heartbeat):
#: the spec's default.
DEFAULT_STALL_TIMEOUT = 600.0


def stalled_for(progress: Mapping[str, Any], now: float) -> float | None:
    """Seconds a training learner has gone without advancing, once that reaches its stall_timeout; else None.

    ``progress``: the learner's progress.json (its heartbeat ``advanced_at``, else ``updated``, and
    ``stall_timeout``); ``now``: the wall time to judge at. Only a learner whose progress says "running" can
    stall: one starting (imports, a restore) or finished cannot.
    """
    record = ProgressRecord.of(progress)
    if record.state != "running":
        return None
    beat = record.heartbeat
    if beat is None:
        return None
    timeout = record.stall_timeout or DEFAULT_STALL_TIMEOUT
    idle = now - beat
    return idle if idle >= timeout else None


def vitals(
    progress: Mapping[str, Any],
    *,
    now: float,
    goal: tuple[str, int] | None = None,
    restarts: int = 0,
    price_per_hour: float | None = None,
    running: bool = True,
    budget_usd: float | None = None,
    cost_usd: float | None = None,
) -> dict[str, Any]:
    """The figures that answer "when, how well, how much" of one run, from its progress.json; unknown ones None.

    ``goal``: what the run stops at, ``("timestep", 72000)`` or ``("episode", 500)``; ``restarts``: how often
    the learner was started again after a failure or a stall; ``price_per_hour``: USD per hour of what the
    run occupies (a cluster's node at list price), None when unknown or free; ``running``: False once the
    run has ended (no ETA); ``budget_usd``: the run's budget (rlcloud.budget); ``cost_usd``: its cost so far as
    measured elsewhere (the in-cluster reaper's, from its pods), instead of ``price_per_hour`` x training time.
    Keys: ``percent``, ``eta_s``, ``steps_per_second``, ``mean_return``, ``restarts``, ``checkpoint``,
    ``checkpoint_age_s``, ``elapsed_s``, ``cost_usd``, ``stalled_for_s``, ``budget_usd``, ``budget_percent``.
    """
    from rlcloud.budget import figures as budget_figures

    record = ProgressRecord.of(progress)
    rate = shown_rate(record)
    percent = eta = None
    if goal is not None and goal[1] > 0:
        unit, total = goal
        done = record.count(unit)
        if done is not None:
            percent = round(min(100.0, 100.0 * done / total), 1)
            # timesteps per second, or the episodes that many timesteps make at the run's mean episode length
            per_second = rate
            timestep, episode = record.count("timestep"), record.count("episode")
            if unit == "episode" and rate is not None:
                per_second = rate * episode / timestep if timestep and episode else None
            if per_second and done < total and running:
                eta = round((total - done) / per_second)
            elif done >= total:
                eta = 0
    saved = record.checkpoint_at
    elapsed = record.elapsed
    cost = round(cost_usd, 2) if cost_usd is not None else None
    if cost is None and price_per_hour is not None and elapsed is not None:
        cost = round(price_per_hour * elapsed / 3600, 2)
    stalled = stalled_for(record, now) if running else None
    return {
        "percent": percent,
        "eta_s": eta,
        "steps_per_second": rate,
        "mean_return": record.mean_return,
        "restarts": restarts,
        "checkpoint": record.checkpoint,
        "checkpoint_age_s": round(now - saved) if saved is not None else None,
        "elapsed_s": round(elapsed) if elapsed is not None else None,
        "cost_usd": cost,
        "stalled_for_s": round(stalled) if stalled is not None else None,
        **budget_figures(cost, budget_usd),
    }


@dataclass(frozen=True)
class RoleStatus:
    """Observed state of one role instance (a process or a pod): e.g. role "agent", index 0."""

    role: str
    index: int
    state: RoleState
    restarts: int = 0
    exit_code: int | None = None
    reason: str | None = None  # one line: why Pending, why it failed

    @property
    def label(self) -> str:
        """``role-index``, the prefix of this role's log lines."""
        from rlcloud.roles import role_label

        return role_label(self.role, self.index)


@dataclass(frozen=True)
class RunFacts:
    """What the views of a run need of its spec beside its status: ``goal`` (what it stops at, e.g.
    ``("timestep", 72000)``; None without one), ``budget_usd`` (rlcloud.budget) and ``processes`` (what it
    occupies on this machine: the learner, plus its env servers when distributed; a local price is per process).

    A local run records them in its state.json at each start (:meth:`to_record`), so that a listing of many
    runs reads them there instead of parsing each run's spec (issue 36).
    """

    goal: tuple[str, int] | None
    budget_usd: float | None
    processes: int

    @classmethod
    def of_spec(cls, spec: ExperimentSpec) -> RunFacts:
        """The facts of ``spec``."""
        goal = ("timestep", spec.total_timesteps) if spec.total_timesteps else ("episode", spec.episodes or 0)
        return cls(
            goal=goal if goal[1] else None,
            budget_usd=spec.budget.amount if spec.budget is not None else None,
            processes=1 + (spec.num_workers if spec.run_mode == "distributed" else 0),
        )

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready dict, as :meth:`of_record` reads it back."""
        return {
            "goal": list(self.goal) if self.goal else None,
            "budget_usd": self.budget_usd,
            "processes": self.processes,
        }

    @classmethod
    def of_record(cls, record: Any) -> RunFacts | None:
        """The facts of a :meth:`to_record` dict, or None when ``record`` is not one (absent: a run started
        before they were recorded; damaged or planted: a record is input), so the caller reads the spec."""
        if not isinstance(record, dict):
            return None
        goal, budget, processes = record.get("goal"), record.get("budget_usd"), record.get("processes")

        def number(value: Any) -> bool:
            return isinstance(value, int | float) and not isinstance(value, bool)

        if goal is not None:
            if not (
                isinstance(goal, list)
                and len(goal) == 2
                and goal[0] in ("timestep", "episode")
                and isinstance(goal[1], int)
                and not isinstance(goal[1], bool)
                and goal[1] > 0
            ):
                return None
            goal = (goal[0], goal[1])
        if budget is not None and not (number(budget) and budget >= 0):
            return None
        if not (isinstance(processes, int) and not isinstance(processes, bool) and processes >= 1):
            return None
        return cls(goal=goal, budget_usd=None if budget is None else float(budget), processes=processes)


@dataclass(frozen=True)
class ExperimentStatus:
    """Observed state of an experiment, read from the backend and the results store."""

    name: str
    state: ExperimentState
    roles: list[RoleStatus] = field(default_factory=list)
    progress: ProgressRecord = field(default_factory=ProgressRecord)  # progress.json: timestep, episode, ...
    message: str | None = None
    backend: str = ""
    #: wall time of the observation: what a stall and ages are judged against
    observed_at: float = field(default_factory=time.time)
    #: what the run stops at, e.g. ("timestep", 72000); set by the Experiment facade, which has the spec
    goal: tuple[str, int] | None = None
    #: USD per hour of what the run occupies (GKE: its node at list price); None when unknown or free
    price_per_hour: float | None = None
    #: the spec's budget in USD (rlcloud.budget); set by the Experiment facade, which has the spec
    budget_usd: float | None = None
    #: the cost so far as the in-cluster reaper measured it (its pods x their nodes' prices), None: not measured
    cost_usd: float | None = None

    def __post_init__(self) -> None:
        # a plain dict (progress.json as parsed, a caller's own) is read through the typed model
        object.__setattr__(self, "progress", ProgressRecord.of(self.progress))

    @property
    def finished(self) -> bool:
        """True once the experiment will make no more progress by itself (succeeded, failed or stopped)."""
        return self.state in FINISHED_STATES

    @property
    def stalled_for(self) -> float | None:
        """Seconds the running learner has gone without a timestep, once past its stall_timeout; else None."""
        return stalled_for(self.progress, self.observed_at) if self.state == "running" else None

    @property
    def restarts(self) -> int:
        """How often the learner was started again (a failed pod retried, a stalled learner restarted)."""
        from rlcloud.roles import LEARNER_ROLES

        return sum(r.restarts for r in self.roles if r.role in LEARNER_ROLES)

    @property
    def vitals(self) -> dict[str, Any]:
        """Percent done, ETA, steps/s, return, restarts, checkpoint age, cost so far: :func:`vitals`."""
        return vitals(
            self.progress,
            now=self.observed_at,
            goal=self.goal,
            restarts=self.restarts,
            price_per_hour=self.price_per_hour,
            running=self.state == "running",
            budget_usd=self.budget_usd,
            cost_usd=self.cost_usd,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for ``--output json``; schema :data:`STATUS_SCHEMA`, docs/contracts.md)."""
        return {
            "schema": STATUS_SCHEMA,
            "name": self.name,
            # a running learner without progress for its stall_timeout reads "stalled", never "running"
            "state": "stalled" if self.stalled_for is not None else self.state,
            "backend": self.backend,
            "message": self.message,
            "vitals": self.vitals,
            "progress": self.progress,
            "roles": [
                {
                    "role": r.role,
                    "index": r.index,
                    "state": r.state,
                    "restarts": r.restarts,
                    "exit_code": r.exit_code,
                    "reason": r.reason,
                }
                for r in self.roles
            ],
        }


TrialState = Literal["queued", "pending", "running", "succeeded", "stopped early", "failed", "stopped", "unknown"]


@dataclass(frozen=True)
class TrialStatus:
    """Observed state of one trial of a sweep: its parameters and the learner's progress."""

    index: int
    name: str
    params: dict[str, Any]
    seed: int
    state: TrialState
    progress: ProgressRecord = field(default_factory=ProgressRecord)  # progress.json of the trial
    reason: str | None = None  # why it failed or stopped early
    restarts: int = 0  # how often its learner was started again
    observed_at: float = field(default_factory=time.time)
    goal: tuple[str, int] | None = None  # what it stops at; set by the Sweep facade, which has the spec
    price_per_hour: float | None = None  # USD per hour of what the trial occupies; set by the Sweep facade

    def __post_init__(self) -> None:
        # a plain dict (progress.json as parsed, a caller's own) is read through the typed model
        object.__setattr__(self, "progress", ProgressRecord.of(self.progress))

    @property
    def finished(self) -> bool:
        """True once the trial will make no more progress."""
        return self.state in ("succeeded", "stopped early", "failed", "stopped")

    @property
    def stalled_for(self) -> float | None:
        """Seconds the running trial has gone without a timestep, once past its stall_timeout; else None."""
        return stalled_for(self.progress, self.observed_at) if self.state == "running" else None

    @property
    def vitals(self) -> dict[str, Any]:
        """The trial's figures: :func:`vitals`."""
        return vitals(
            self.progress,
            now=self.observed_at,
            goal=self.goal,
            restarts=self.restarts,
            running=self.state == "running",
            price_per_hour=self.price_per_hour,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "index": self.index,
            "name": self.name,
            "params": self.params,
            "seed": self.seed,
            "state": "stalled" if self.stalled_for is not None else self.state,
            "vitals": self.vitals,
            "timestep": self.progress.timestep,
            "episode": self.progress.episode,
            "mean_return": self.progress.mean_return,
            "steps_per_second": self.progress.steps_per_second,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class SweepStatus:
    """Observed state of a sweep: one TrialStatus per trial, and the sweep's overall state."""

    name: str
    state: ExperimentState
    trials: list[TrialStatus] = field(default_factory=list)
    message: str | None = None
    backend: str = ""
    #: the sweep's budget in USD; set by the Sweep facade, which has the spec
    budget_usd: float | None = None
    #: the sweep's cost so far as the in-cluster reaper measured it (all its trials' pods); None: not measured
    cost_usd: float | None = None

    @property
    def finished(self) -> bool:
        """True once no trial runs or waits any more."""
        return self.state in FINISHED_STATES

    def counts(self) -> dict[str, int]:
        """How many trials are in each state."""
        out: dict[str, int] = {}
        for trial in self.trials:
            out[trial.state] = out.get(trial.state, 0) + 1
        return out

    def counts_text(self) -> str:
        """:meth:`counts` in words, for people: ``4 trials: 1 succeeded, 1 running, 2 queued``."""
        counts = ", ".join(f"{n} {state}" for state, n in self.counts().items()) or "none"
        return f"{len(self.trials)} trial{'' if len(self.trials) == 1 else 's'}: {counts}"

    @property
    def vitals(self) -> dict[str, Any]:
        """The sweep's figures from its trials': ``percent`` (of all trials' work, a finished trial counting
        whole, a stopped one as far as it got; null unless every trial's goal is known), ``eta_s`` (the work
        left at the running trials' summed steps/s), ``best_return``, ``restarts``, ``stalled`` (trials),
        ``cost_usd`` (the reaper's measure, else the trials' sum; null unless known for every trial that ran),
        ``budget_usd``, ``budget_percent``."""
        from rlcloud.budget import figures as budget_figures

        figures = [t.vitals for t in self.trials]
        goals = [t.goal for t in self.trials]
        percent = eta = None
        if self.trials and all(goals):
            # a stopped trial (Ctrl-C, `sweep stop`) resumes where it got to: it counts at its own share
            shares = [
                100.0 if t.finished and t.state != "stopped" else (f["percent"] or 0.0)
                for t, f in zip(self.trials, figures, strict=True)
            ]
            percent = round(sum(shares) / len(shares), 1)
            rate = sum(f["steps_per_second"] or 0.0 for f in figures)
            if self.state == "running" and rate > 0 and all(g is not None and g[0] == "timestep" for g in goals):
                left = sum((100.0 - share) / 100 * g[1] for share, g in zip(shares, goals, strict=True) if g)
                eta = round(left / rate)
        returns = [f["mean_return"] for f in figures if f["mean_return"] is not None]
        costs = [f["cost_usd"] for t, f in zip(self.trials, figures, strict=True) if t.progress]
        cost = round(sum(costs), 2) if costs and None not in costs else None
        if self.cost_usd is not None:
            cost = round(self.cost_usd, 2)
        return {
            "percent": percent,
            "eta_s": eta,
            "best_return": max(returns) if returns else None,
            "restarts": sum(f["restarts"] for f in figures),
            "stalled": sum(1 for t in self.trials if t.stalled_for is not None),
            "cost_usd": cost,
            **budget_figures(cost, self.budget_usd),
        }

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for ``--output json``; schema :data:`STATUS_SCHEMA`, docs/contracts.md)."""
        return {
            "schema": STATUS_SCHEMA,
            "name": self.name,
            "state": self.state,
            "backend": self.backend,
            "message": self.message,
            "counts": self.counts(),
            "vitals": self.vitals,
            "trials": [t.to_dict() for t in self.trials],
        }

    def _repr_html_(self) -> str:
        """The sweep as a notebook table: :func:`rlcloud.display.sweep_html`."""
        from rlcloud.display import sweep_html

        return sweep_html(self)


def trial_state(overall: str, progress: Mapping[str, Any]) -> TrialState:
    """A trial's state from its experiment's state and progress.json (a trial that stopped by its sweep's
    rule exits 0, and its progress says so: :attr:`ProgressRecord.stopped_early`)."""
    if ProgressRecord.of(progress).stopped_early and overall in ("succeeded", "stopped"):
        return "stopped early"
    if overall == "paused":
        return "stopped"
    return overall if overall in ("pending", "running", "succeeded", "failed", "stopped") else "unknown"  # type: ignore[return-value]


class ExperimentBackend(ABC):
    """Where experiments run. One instance serves many experiments, addressed by name."""

    #: short name shown to users ("local", "kubernetes", "gke")
    kind: str = "backend"

    @abstractmethod
    def start(self, spec: ExperimentSpec, results: str) -> bool:
        """Start (or resume) ``spec`` writing to ``results`` and return quickly, without waiting for training.

        Idempotent: starting an experiment that is already running creates nothing twice and returns
        False; otherwise it returns True. Starting one whose results hold a checkpoint resumes from it.
        The facade has checked the run's identity (rlcloud.record) before; backends need not.
        """

    @abstractmethod
    def status(self, name: str) -> ExperimentStatus:
        """The experiment's state per role, plus the learner's progress. NotFoundError if unknown."""

    @abstractmethod
    def wait(self, name: str, timeout: float | None = None) -> ExperimentStatus:
        """Block until the experiment finishes; rlcloud.errors.WaitTimeoutError after ``timeout`` seconds."""

    @abstractmethod
    def logs(self, name: str, follow: bool = False, roles: Sequence[str] | None = None) -> Iterator[str]:
        """Log lines as "role-index | line"; with ``follow``, until every role has ended.

        ``roles``: whose lines (``rlcloud.roles.role_selector``: ``"env-server"``, ``"env-server-3"``,
        ``"learner"``); only their logs are read or streamed. None: every role's, except that ``follow``
        streams the learner's only (one stream per role instance would be 1,000 for a large distributed
        run: ask for ``["learner", "env-server"]`` to follow them all).
        """

    @abstractmethod
    def pause(self, name: str) -> None:
        """Checkpoint and stop computing, keeping everything needed to resume()."""

    @abstractmethod
    def resume(self, name: str) -> None:
        """Continue a paused experiment from its latest checkpoint."""

    @abstractmethod
    def stop(self, name: str) -> None:
        """Stop the experiment (checkpoint first where possible) and remove what it runs. Idempotent."""

    @abstractmethod
    def list(self) -> list[str]:
        """Names of the experiments this backend knows."""

    @abstractmethod
    def attach(self, name: str) -> tuple[ExperimentSpec, str]:
        """The spec and results location of a running or finished experiment (from another machine too)."""


class SweepCapable(ABC):
    """The sweep capability: many trials of one experiment, run by the backend (dstack's ``ComputeWith*``).

    A backend that runs sweeps derives from :class:`ExperimentBackend` and this; one that does not derives
    from :class:`ExperimentBackend` only, and :func:`sweep_capable` says so to the Sweep facade.
    """

    @abstractmethod
    def start_sweep(self, sweep: SweepSpec, results: str) -> bool:
        """Start every trial of ``sweep`` (at most ``max_parallel`` at once) under ``<results>/<sweep>/`` and
        return quickly. Idempotent: False when the sweep is running already."""

    @abstractmethod
    def grow_sweep(self, sweep: SweepSpec, results: str, *, run: Sequence[str] = ()) -> bool:
        """Run the trials of a sweep that grew (``sweep``: its trials of record, the new ones indexed after the
        others) that have not run, the trials named in ``run`` again (from their last checkpoint) and those
        a growth gave a larger budget; finished trials are not retrained and running ones go on untouched.
        Idempotent: calling it again runs nothing twice. A sweep this backend has no trace of (stopped on
        Kubernetes: its objects are gone) is started whole, as :meth:`start_sweep` does (the facade calls this
        only for a sweep whose record exists: :func:`rlcloud.record.grow_sweep_recorded`)."""

    @abstractmethod
    def sweep_status(self, name: str) -> SweepStatus:
        """Each trial's state and progress; NotFoundError if the sweep is unknown."""

    @abstractmethod
    def stop_sweep(self, name: str) -> None:
        """Stop the sweep: no trial starts any more, running ones checkpoint and stop. Idempotent."""

    @abstractmethod
    def list_sweeps(self) -> builtins.list[str]:
        """Names of the sweeps this backend knows."""

    @abstractmethod
    def attach_sweep(self, name: str) -> tuple[SweepSpec, str]:
        """The spec and results root of a sweep started earlier (from another machine too)."""


def sweep_capable(backend: ExperimentBackend) -> SweepCapable:
    """``backend`` as a :class:`SweepCapable`; :class:`~rlcloud.errors.UnsupportedError` naming the backend when
    it cannot run sweeps."""
    if isinstance(backend, SweepCapable):
        return backend
    from rlcloud.errors import UnsupportedError

    raise UnsupportedError(
        f"the {backend.kind} backend does not run sweeps: run the sweep locally or on a Kubernetes or GKE cluster"
    )
