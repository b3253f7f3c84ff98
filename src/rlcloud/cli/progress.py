"""Terminal progress for the CLI: a live rich bar while an experiment runs, and summary tables.

Data (names, pod reasons, messages, paths) is shown as text, never read as rich markup: a reason such as
``image gcr.io/p/runner:[tag]`` or a message ``pip install 'rlcloud[runner]'`` must keep its brackets.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlcloud.backend import ExperimentStatus
    from rlcloud.experiment import Experiment


def _num(value: Any, fmt: str = "{:,.0f}") -> str:
    return fmt.format(value) if isinstance(value, int | float) else "-"


def status_table(status: ExperimentStatus) -> Any:
    """A rich Table: the experiment's state and progress, then one row per role."""
    from rich.table import Table
    from rich.text import Text

    prog = status.progress
    table = Table(title=Text(f"{status.name}: {status.state}"), title_justify="left", show_edge=False)
    table.add_column("role")
    table.add_column("state")
    table.add_column("restarts", justify="right")
    table.add_column("detail")
    for role in status.roles:
        detail = role.reason or (f"exit code {role.exit_code}" if role.exit_code not in (None, 0) else "")
        table.add_row(Text(role.label), Text(role.state), str(role.restarts), Text(detail))
    table.caption = Text(
        f"timesteps {_num(prog.get('timestep'))} · episodes {_num(prog.get('episode'))} · "
        f"mean return {_num(prog.get('mean_return'), '{:.1f}')} · steps/s {_num(prog.get('steps_per_second'))}"
        + (f"\n{status.message}" if status.message else "")
    )
    return table


def summary_table(exp: Experiment, status: ExperimentStatus, elapsed: float) -> Any:
    """The table printed when `rlcloud experiment run` ends."""
    from rich.table import Table
    from rich.text import Text

    prog = status.progress
    table = Table(title=Text(f"{exp.name}: {status.state}"), title_justify="left", show_header=False, show_edge=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    rows = [
        ("run mode", f"{exp.spec.run_mode} ({exp.spec.num_workers} worker(s))"),
        ("timesteps", _num(prog.get("timestep"))),
        ("episodes", _num(prog.get("episode"))),
        ("mean return (last 20)", _num(prog.get("mean_return"), "{:.1f}")),
        ("steps/s", _num(prog.get("steps_per_second"))),
        ("wall time", f"{elapsed / 60:.1f} min"),
        ("latest checkpoint", str(prog.get("checkpoint") or "-")),
        ("results", exp.location),
    ]
    for key, value in rows:
        table.add_row(key, Text(value))
    if status.message:
        table.add_row("message", Text(status.message))
    return table


def follow_experiment(exp: Experiment, *, console: Any, quiet: bool = False, stop_on_interrupt: bool = True) -> int:
    """Show a live progress bar until ``exp`` ends, then a summary; returns the CLI exit code.

    Ctrl-C stops the experiment cleanly (the runner checkpoints first) when ``stop_on_interrupt``,
    else just stops following.
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    spec = exp.spec
    unit = "timestep" if spec.total_timesteps else "episode"
    total = spec.total_timesteps or spec.episodes
    started = time.monotonic()
    status = exp.status()
    columns = (
        TextColumn("{task.description}", style="bold", markup=False),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} " + unit + "s"),
        TextColumn("{task.fields[info]}", markup=False),
        TimeElapsedColumn(),
    )
    try:
        with Progress(*columns, console=console, disable=quiet, transient=False) as bar:
            task = bar.add_task(exp.name, total=total, info="starting")
            while not status.finished and status.state != "paused":  # a paused one ends only when resumed
                time.sleep(0.5)
                status = exp.status()
                prog = status.progress
                info = (
                    f"{status.state} · ep {_num(prog.get('episode'))} · ret {_num(prog.get('mean_return'), '{:.1f}')}"
                    f" · {_num(prog.get('steps_per_second'))} steps/s"
                )
                bar.update(task, completed=min(int(prog.get(unit) or 0), total or 0), info=info)
    except KeyboardInterrupt:
        if not stop_on_interrupt:
            console.print(f"stopped following {exp.name}; it keeps running", markup=False)
            return 130
        console.print(f"stopping {exp.name} after a checkpoint ...", markup=False)
        exp.stop()
        status = exp.status()
        console.print(summary_table(exp, status, time.monotonic() - started))
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
    tail = [line for line in exp.logs(follow=False)][-15:]
    if tail:
        console.print("last log lines:\n" + "\n".join(tail), markup=False)
    return 1


def _save_plot(exp: Experiment) -> str | None:
    """Write returns.png into a local results directory (for gs:// results, next to the downloads)."""
    from pathlib import Path

    from rlcloud.results import DEFAULT_RESULTS

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None
    if exp.location.startswith("gs://"):
        path = Path(DEFAULT_RESULTS) / exp.name / "returns.png"
    else:
        path = Path(exp.location) / "returns.png"
    exp.plot(path=path)
    return str(path)
