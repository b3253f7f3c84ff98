"""The CLI's follower of a run: a live bar while an experiment runs (plain lines when there is no terminal),
then its summary; what it shows is rlcloud.display's (the bar Experiment.wait draws, the same lines and tables).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rlcloud.display import PLAIN_INTERVAL_S, ExperimentBar, PlainProgress, message_parts, summary_table

if TYPE_CHECKING:
    from rlcloud.backend import ExperimentStatus
    from rlcloud.experiment import Experiment


def follow_experiment(
    exp: Experiment,
    *,
    console: Any,
    quiet: bool = False,
    stop_on_interrupt: bool = True,
    plain_interval: float = PLAIN_INTERVAL_S,
    poll_interval: float = 0.5,
    resume: tuple[str, str] | None = None,
) -> int:
    """Show progress until ``exp`` ends, then a summary; returns the CLI exit code.

    On a terminal a live bar; without one (CI, nohup, a pod) a plain line every ``plain_interval`` seconds
    and whenever the state changes, which a log keeps readable. ``quiet``: neither. Ctrl-C stops the
    experiment cleanly (the runner checkpoints first) when ``stop_on_interrupt``, else just stops following;
    ``resume``: the commands that resume it then (in the foreground, in the background), printed after a stop.
    """
    started = time.monotonic()
    status = exp.status()
    try:
        if quiet or not console.is_terminal:
            from rlcloud.cli._common import shown

            lines = PlainProgress(exp.spec, file=console.file, interval=plain_interval, clean=shown)
            status = _follow(exp, status, None if quiet else lines, poll_interval, finished_too=False)
        else:
            status = _follow(exp, status, ExperimentBar(exp.spec, file=console.file), poll_interval, finished_too=True)
    except KeyboardInterrupt:
        if not stop_on_interrupt:
            console.print(f"stopped following {exp.name}; it keeps running", markup=False)
            return 130
        console.print(f"stopping {exp.name} after a checkpoint ...", markup=False)
        exp.stop(download=False)  # Ctrl-C should be quick: the results stay where the run wrote them
        status = exp.status()
        console.print(summary_table(exp, status, time.monotonic() - started))
        if resume is not None:
            checkpoint = status.progress.checkpoint
            where = (
                f" at checkpoint {checkpoint}; to resume from it"
                if checkpoint
                else "; to resume from its latest checkpoint"
            )
            console.print(
                f"{exp.name} stopped{where}, run the same command again: {resume[0]}\n"
                f"  or in the background: {resume[1]}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        return 130
    console.print(summary_table(exp, status, time.monotonic() - started))
    if status.state == "paused":
        console.print(f"{exp.name} is paused; resume with: rlcloud experiment resume {exp.name}", markup=False)
        return 0
    if status.state == "succeeded":
        plot = _save_plot(exp)
        if plot:
            console.print(f"returns plot: {plot}", markup=False)
        return 0
    _, details = message_parts(status.message)
    if details:  # the failed role's log tail: printed once, here, not in the table too
        console.print(details, markup=False, highlight=False, soft_wrap=True)
        return 1
    tail = [line for line in exp.logs(follow=False)][-15:]
    if tail:
        console.print("last log lines:\n" + "\n".join(tail), markup=False, highlight=False, soft_wrap=True)
    return 1


def _follow(
    exp: Experiment, status: ExperimentStatus, show: Any, poll: float, *, finished_too: bool
) -> ExperimentStatus:
    """Poll until ``exp`` finishes (or pauses: a paused one ends only when resumed), showing each status to
    ``show`` (the last, finished one too when ``finished_too``: a bar's last frame); ``show`` None: nothing."""
    try:
        while True:
            if show is not None and (finished_too or not status.finished):
                show(status)
            if status.finished or status.state == "paused":
                return status
            time.sleep(poll)
            status = exp.status()
    finally:
        if isinstance(show, ExperimentBar):
            show.close()


def _save_plot(exp: Experiment) -> str | None:
    """Write returns.png into a local results directory (for gs:// results, next to the downloads)."""
    from pathlib import Path

    from rlcloud.layout import RETURNS_PLOT
    from rlcloud.results import DEFAULT_RESULTS

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None
    if exp.location.startswith("gs://"):
        path = Path(DEFAULT_RESULTS) / exp.name / RETURNS_PLOT
    else:
        path = Path(exp.location) / RETURNS_PLOT
    exp.plot(path=path)
    return str(path)
