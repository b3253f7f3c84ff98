"""The contract every place that runs experiments implements, and the observed state it reports.

Backends: local processes on this machine (rlcloud.local) and any Kubernetes cluster
(rlcloud.k8s.backend; GKE hands its cluster's client to it). The docstrings of ExperimentBackend are the
contract the Experiment facade relies on.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec
    from rlcloud.specs.sweep import SweepSpec

__all__ = [
    "ExperimentBackend",
    "ExperimentState",
    "ExperimentStatus",
    "RoleState",
    "RoleStatus",
    "SweepStatus",
    "TrialStatus",
]

RoleState = Literal["pending", "running", "succeeded", "failed", "suspended", "unknown"]
ExperimentState = Literal["pending", "running", "succeeded", "failed", "paused", "stopped", "unknown"]
FINISHED_STATES: frozenset[str] = frozenset({"succeeded", "failed", "stopped"})


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
class ExperimentStatus:
    """Observed state of an experiment, read from the backend and the results store."""

    name: str
    state: ExperimentState
    roles: list[RoleStatus] = field(default_factory=list)
    progress: dict[str, Any] = field(default_factory=dict)  # progress.json: timestep, episode, mean_return, ...
    message: str | None = None
    backend: str = ""

    @property
    def finished(self) -> bool:
        """True once the experiment will make no more progress by itself (succeeded, failed or stopped)."""
        return self.state in FINISHED_STATES

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for ``--output json``)."""
        return {
            "name": self.name,
            "state": self.state,
            "backend": self.backend,
            "message": self.message,
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
    progress: dict[str, Any] = field(default_factory=dict)  # progress.json of the trial
    reason: str | None = None  # why it failed or stopped early

    @property
    def finished(self) -> bool:
        """True once the trial will make no more progress."""
        return self.state in ("succeeded", "stopped early", "failed", "stopped")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "index": self.index,
            "name": self.name,
            "params": self.params,
            "seed": self.seed,
            "state": self.state,
            "timestep": self.progress.get("timestep"),
            "episode": self.progress.get("episode"),
            "mean_return": self.progress.get("mean_return"),
            "steps_per_second": self.progress.get("steps_per_second"),
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

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for ``--output json``)."""
        return {
            "name": self.name,
            "state": self.state,
            "backend": self.backend,
            "message": self.message,
            "counts": self.counts(),
            "trials": [t.to_dict() for t in self.trials],
        }


def trial_state(overall: str, progress: dict[str, Any]) -> TrialState:
    """A trial's state from its experiment's state and progress.json (a trial that stopped by its sweep's
    rule exits 0, and its progress says "stopped-early")."""
    if progress.get("state") == "stopped-early" and overall in ("succeeded", "stopped"):
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

    # Sweeps: many trials of one experiment. A backend that cannot run them keeps these defaults.

    def start_sweep(self, sweep: SweepSpec, results: str) -> bool:
        """Start every trial of ``sweep`` (at most ``max_parallel`` at once) under ``<results>/<sweep>/`` and
        return quickly. Idempotent: False when the sweep is running already."""
        raise NotImplementedError(f"the {self.kind} backend does not run sweeps")

    def sweep_status(self, name: str) -> SweepStatus:
        """Each trial's state and progress; NotFoundError if the sweep is unknown."""
        raise NotImplementedError(f"the {self.kind} backend does not run sweeps")

    def stop_sweep(self, name: str) -> None:
        """Stop the sweep: no trial starts any more, running ones checkpoint and stop. Idempotent."""
        raise NotImplementedError(f"the {self.kind} backend does not run sweeps")

    def list_sweeps(self) -> builtins.list[str]:
        """Names of the sweeps this backend knows."""
        return []

    def attach_sweep(self, name: str) -> tuple[SweepSpec, str]:
        """The spec and results root of a sweep started earlier (from another machine too)."""
        raise NotImplementedError(f"the {self.kind} backend does not run sweeps")
