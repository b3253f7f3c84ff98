"""Progress for the CLI: a live rich bar while an experiment runs (plain lines when there is no terminal),
and summary tables.

Data (names, pod reasons, messages, paths) is shown as text, never read as rich markup: a reason such as
``image gcr.io/p/runner:[tag]`` or a message ``pip install 'rlcloud[runner]'`` must keep its brackets.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rlcloud.display import PLAIN_INTERVAL_S, _message_parts, _num, progress_line, summary_table

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
    spec = exp.spec
    unit = "timestep" if spec.total_timesteps else "episode"
    total = spec.total_timesteps or spec.episodes
    started = time.monotonic()
    status = exp.status()
    try:
        if quiet or not console.is_terminal:
            status = _follow_plain(
                exp, status, console, total, unit, started, plain_interval if not quiet else None, poll_interval
            )
        else:
            status = _follow_bar(exp, status, console, total, unit, poll_interval)
    except KeyboardInterrupt:
        if not stop_on_interrupt:
            console.print(f"stopped following {exp.name}; it keeps running", markup=False)
            return 130
        console.print(f"stopping {exp.name} after a checkpoint ...", markup=False)
        exp.stop(download=False)  # Ctrl-C should be quick: the results stay where the run wrote them
        status = exp.status()
        console.print(summary_table(exp, status, time.monotonic() - started))
        if resume is not None:
            checkpoint = status.progress.get("checkpoint")
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
    _, details = _message_parts(status.message)
    if details:  # the failed role's log tail: printed once, here, not in the table too
        console.print(details, markup=False, highlight=False, soft_wrap=True)
        return 1
    tail = [line for line in exp.logs(follow=False)][-15:]
    if tail:
        console.print("last log lines:\n" + "\n".join(tail), markup=False, highlight=False, soft_wrap=True)
    return 1


def _follow_bar(
    exp: Experiment, status: ExperimentStatus, console: Any, total: int | None, unit: str, poll: float
) -> ExperimentStatus:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from rlcloud.display import display_rate, display_state

    columns = (
        TextColumn("{task.description}", style="bold", markup=False),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} " + unit + "s"),
        TextColumn("{task.fields[info]}", markup=False),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task(exp.name, total=total, info=display_state(status))
        while not status.finished and status.state != "paused":  # a paused one ends only when resumed
            time.sleep(poll)
            status = exp.status()
            prog = status.progress
            info = (
                f"{display_state(status)} · ep {_num(prog.get('episode'))} · "
                f"ret {_num(prog.get('mean_return'), '{:.1f}')} · {_num(display_rate(status))} steps/s"
            )
            bar.update(task, completed=min(int(prog.get(unit) or 0), total or 0), info=info)
    return status


def _follow_plain(
    exp: Experiment,
    status: ExperimentStatus,
    console: Any,
    total: int | None,
    unit: str,
    started: float,
    interval: float | None,
    poll: float,
) -> ExperimentStatus:
    """Poll until ``exp`` finishes, writing a plain line every ``interval`` s and on each change of state
    (none when ``interval`` is None). Straight to the file: a console without a terminal would wrap at 80."""
    from rlcloud.cli._common import shown
    from rlcloud.display import display_state

    last_line, last_state = float("-inf"), None
    while True:
        now = time.monotonic()
        state = display_state(status)
        if interval is not None and (now - last_line >= interval or state != last_state) and not status.finished:
            print(shown(progress_line(status, total, unit, now - started)), file=console.file, flush=True)
            last_line, last_state = now, state
        if status.finished or status.state == "paused":  # a paused one ends only when resumed
            return status
        time.sleep(poll)
        status = exp.status()


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
