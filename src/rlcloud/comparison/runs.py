"""Reading runs for a comparison: each run's spec of record and summary, its episodes when needed."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlcloud.errors import NotFoundError, SpecError
from rlcloud.layout import SWEEP_RECORDS, ProgressRecord
from rlcloud.results import is_gcs, results_location, results_root

if TYPE_CHECKING:
    from rlcloud.storage.summary import Episodes


@dataclass
class RunResults:
    """What one run's results location holds, read once: the spec of record and the run's summary (progress,
    objective, evaluation rounds, a curve: :mod:`rlcloud.storage.summary`); its training episodes as arrays
    only when something needs them (another window or budget), read then."""

    name: str
    location: str
    spec: dict[str, Any] | None
    progress: ProgressRecord | None
    #: the run's summary (run-summary.json, or built from its records where that is missing or not current)
    summary: dict[str, Any] = field(default_factory=dict)
    #: the sweep this run is a trial of, when it was named by its sweep (``compare SWEEP``)
    sweep: str | None = None
    _episodes: Episodes | None = field(default=None, repr=False)

    @property
    def seed(self) -> Any:
        """The spec's seed (None when unseeded or no spec was recorded)."""
        return (self.spec or {}).get("seed")

    @property
    def episodes(self) -> Episodes:
        """The training episodes (timestep, return, time arrays), read from metrics.jsonl on first use."""
        if self._episodes is None:
            from rlcloud.storage.runs import read_episodes

            self._episodes = read_episodes([self.location])[0]
        return self._episodes

    @property
    def episode_count(self) -> int:
        """Training episodes recorded."""
        return int(self.summary.get("episodes") or 0)

    def training_objective(self, window: int = 20, until: float | None = None) -> float:
        """Mean return of the last ``window`` training episodes (NaN before the first episode); with
        ``until``, of the last ``window`` episodes that ended by that timestep."""
        if until is None and window == self.summary.get("objective_window"):
            value = self.summary.get("objective")
            return math.nan if value is None else float(value)
        episodes = self.episodes
        returns = episodes.ret if until is None else episodes.ret[episodes.timestep <= until]
        tail = returns[-window:]
        return float(tail.mean()) if len(tail) else math.nan

    def evaluation_means(self) -> list[tuple[int, float]]:
        """``(timestep, mean return)`` of each evaluation round, in timestep order."""
        return [(int(at), float(mean)) for at, mean in self.summary.get("evaluation") or []]

    def final_evaluation(self, until: float | None = None) -> float:
        """Mean return of the last evaluation round (NaN when none ran); with ``until``, of the last round
        at or before that timestep."""
        means = [m for at, m in self.evaluation_means() if until is None or at <= until]
        return means[-1] if means else math.nan

    def curve(self, window: int) -> tuple[list[float], list[float]]:
        """(timesteps, moving mean of the last ``window`` returns): the summary's curve for its window, else
        computed from the episodes."""
        stored = self.summary.get("curve") or {}
        if stored.get("window") == window:
            return [float(t) for t in stored.get("timestep", [])], [float(v) for v in stored.get("mean_return", [])]
        from rlcloud.plotting import moving_mean

        episodes = self.episodes
        return episodes.timestep.tolist(), moving_mean(episodes.ret.tolist(), window)


def _location_of(run: Any, root: str) -> str:
    location = getattr(run, "location", None)
    if isinstance(location, str):  # an Experiment (or any object that knows its results location)
        return location
    if isinstance(run, os.PathLike):
        run = os.fspath(run)
    if not isinstance(run, str) or not run:
        raise SpecError(f"a run is an Experiment, a Sweep, a run name or a results location, not {run!r}")
    if is_gcs(run):
        return run.rstrip("/")
    path = Path(run).expanduser()
    if run.startswith((".", "/", "~")) or ("/" in run and path.exists()):
        return str(path.resolve())
    return results_location(root, run)  # a name: RUN, SWEEP or SWEEP/TRIAL under the results root


def _sweep_trials(run: Any) -> list[str] | None:
    """A Sweep's trial names in its own order (it stands for its started trials); None for anything else."""
    spec = getattr(run, "spec", None)
    if spec is not None and callable(getattr(run, "experiments", None)) and callable(getattr(spec, "trials", None)):
        return [name for name, _, _ in spec.trial_table()]
    return None


def load_runs(runs: Iterable[Any] | Any, *, results: str | None = None) -> list[RunResults]:
    """Read each run's results (spec of record and summary), several at a time.

    A location is listed once (a sweep's too: its trials' records in one listing) and each run's spec and
    summary are read in one request each, concurrently, or taken from the local cache of objects that
    cannot have changed (:mod:`rlcloud.storage.runs`). A run whose summary is missing or older than its
    records is summarised from its records.

    Args:
        runs: Experiments, Sweeps (each stands for its started trials), run names (``RUN``, ``SWEEP`` or
            ``SWEEP/TRIAL``, looked up under ``results``) or results locations (a sweep's location stands for
            its trials; its ``decisions/`` (or older ``curves/``) directory, as a shell's ``SWEEP/*`` lists it, is
            skipped); one run
            alone is accepted too, and runs read before (:class:`RunResults`) are returned as they are.
        results: the results root that run names are under (default: the project's, else
            ./rlcloud-results).

    Returns:
        One :class:`RunResults` per run (per trial for a sweep), in the order given.

    Raises:
        NotFoundError: a run has no results at all (no spec, progress or metrics) and is not a sweep.
    """
    from rlcloud.storage.runs import read_locations

    if isinstance(runs, str | os.PathLike) or hasattr(runs, "location"):
        runs = [runs]
    runs = list(runs)
    if runs and all(isinstance(run, RunResults) for run in runs):  # read already: a table and a plot of them
        return runs
    root = results_root(None, results) if any(isinstance(r, str) for r in runs) else (results or "")
    locations = [_location_of(run, root) for run in runs]
    if not locations:
        return []
    found = read_locations(locations, trials=[_sweep_trials(run) for run in runs])
    out: list[RunResults] = []
    for location, got in zip(locations, found, strict=True):
        if isinstance(got, NotFoundError):
            if location.rstrip("/").rsplit("/", 1)[-1] in SWEEP_RECORDS:
                continue
            raise got
        if isinstance(got, Exception):
            raise got
        for record in got:
            name = str((record.spec or {}).get("name") or record.location.rstrip("/").rsplit("/", 1)[-1])
            out.append(
                RunResults(name, record.location, record.spec, record.progress, record.summary, sweep=record.sweep)
            )
    return out


def _with_episodes(loaded: Sequence[RunResults]) -> None:
    """Read the episodes of the runs that have not had them yet, concurrently (not one run after another)."""
    from rlcloud.storage.runs import read_episodes

    todo = [run for run in loaded if run._episodes is None]
    for run, episodes in zip(todo, read_episodes([run.location for run in todo]), strict=True):
        run._episodes = episodes
