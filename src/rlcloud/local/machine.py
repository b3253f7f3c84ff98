"""What both halves of :class:`~rlcloud.local.backend.LocalBackend` share: the settings of the processes it
starts on this machine, the results root it looks in, and the detached children this Python started.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from rlcloud.local.supervisor import DEFAULT_GRACE_PERIOD
from rlcloud.results import is_gcs, results_root
from rlcloud.runenv import RunnerEnv

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec

__all__ = [
    "CHILDREN",
    "LocalMachine",
    "code_env",
    "keep_child",
    "reap_children",
]

# The detached processes this Python started and has not yet seen exit. Kept here, not on the backend:
# they outlive any backend object, and a Popen dropped while its process runs warns (ResourceWarning) and
# leaves a zombie until something reaps it; each backend call reaps the exited ones.
CHILDREN: list[subprocess.Popen[bytes]] = []
_CHILDREN_LOCK = threading.Lock()


def keep_child(proc: subprocess.Popen[bytes]) -> None:
    """Remember a detached process this Python started (a supervisor, a sweep's scheduler) until it exits."""
    with _CHILDREN_LOCK:
        CHILDREN.append(proc)


def reap_children() -> None:
    """Collect exited supervisors and sweepers we started, so that they do not linger as zombies."""
    with _CHILDREN_LOCK:
        CHILDREN[:] = [p for p in CHILDREN if p.poll() is None]


class LocalMachine:
    """The settings of a :class:`~rlcloud.local.backend.LocalBackend` (whose docstring describes the
    arguments), shared by its experiment and sweep verbs."""

    kind = "local"

    def __init__(
        self,
        results_root: str | None = None,
        *,
        grace_period: float = DEFAULT_GRACE_PERIOD,
        env: dict[str, str] | None = None,
        python: str | None = None,
        cpu_hour_usd: float | None = None,
    ) -> None:
        self._root = results_root
        self._checked_root: str | None = None  # self._root checked and normalised (results_root), once used
        self.grace_period = grace_period
        self.env = dict(env or {})
        self.python = python or sys.executable
        self.cpu_hour_usd = cpu_hour_usd
        # Experiments started from this object may live under other roots than the default.
        self._known: dict[str, Path] = {}

    @property
    def results_root(self) -> str:
        """The results root this backend looks in for experiments by name."""
        if not self._root:  # the project config's, which may change between two calls (rlcloud.yaml, cwd)
            return results_root(None, None)  # checked and normalised: file:///dir is /dir
        if self._checked_root is None:
            # A root given is checked once, on first use: a status of each of a sweep's 2,000 trials (whose
            # backend's root is the sweep's location) resolved it 2,000 times, a third of the time (issue 36).
            self._checked_root = results_root(None, self._root)
        return self._checked_root

    def rate(self) -> float | None:
        """USD per process-hour here: the ``cpu_hour_usd`` handed down (Cluster.local reads rlcloud.yaml once);
        not handed (a backend built directly, a sweep's trials), rlcloud.yaml's now (rlcloud.config)."""
        from rlcloud.config import local_cpu_hour_usd

        return self.cpu_hour_usd if self.cpu_hour_usd is not None else local_cpu_hour_usd()

    def run_price(self, spec: ExperimentSpec) -> float | None:
        """USD per hour of ``spec`` run on this machine: :meth:`rate` x its processes (the learner, plus its env
        servers when distributed); None when the rate is 0 (free) or the config unreadable."""
        from rlcloud.backend import RunFacts
        from rlcloud.budget import local_price_per_hour

        rate = self.rate()
        return None if rate is None else local_price_per_hour(rate, RunFacts.of_spec(spec).processes)


def code_env(spec: ExperimentSpec, results: str, inherited: RunnerEnv) -> dict[str, str | None]:
    """Where a local run's roles import its code from (rlcloud.runner.code): with ``code:``, the archive in the
    results root's code folder (a sweep's trials inherit the sweep's root); without, the project folder
    (rlcloud.yaml's, else the working directory), as ``spec validate`` does."""
    from rlcloud.codepack import code_location
    from rlcloud.specs.building import project_root

    if spec.code is not None:
        # absolute: the roles run in their work directory, not here
        root = results if is_gcs(results) else str(Path(results).expanduser().resolve())
        return {"code_store": inherited.code_store or code_location(root), "project_dir": None}
    return {"code_store": None, "project_dir": inherited.project_dir or str(project_root(Path.cwd()))}
