"""Every status rendering: what a person sees of a run or a sweep, in a terminal (rich tables, tqdm bars),
a notebook (HTML) or a plain log.

The facades (rlcloud.experiment, rlcloud.sweep), the status types (rlcloud.backend) and the CLI's follower
(rlcloud.cli.progress) ask here; data shown (names, reasons, messages, paths) is escaped for HTML and shown as
text, never read as rich markup.
"""

from __future__ import annotations

import html
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any, Literal

from rlcloud.layout import ProgressRecord

if TYPE_CHECKING:
    from rlcloud.backend import ExperimentStatus, SweepStatus, TrialStatus
    from rlcloud.experiment import Experiment
    from rlcloud.specs import ExperimentSpec

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------- figures


def span(seconds: float, style: Literal["words", "compact", "clock"] = "words") -> str:
    """A length of time for people, the one duration format of every view: ``words`` ``45 s``, ``12 min``,
    ``3.5 h``; ``compact`` (a cluster's age, a ttl) ``45s``, ``12m``, ``1.5h``, ``2d``; ``clock`` (time since a
    start, to the second) ``1:30``, ``2:05:00``."""
    if style == "clock":
        minutes, whole = divmod(int(seconds), 60)
        hours, minutes = divmod(minutes, 60)
        return f"{hours}:{minutes:02d}:{whole:02d}" if hours else f"{minutes}:{whole:02d}"
    if style == "compact":
        seconds = max(seconds, 0.0)
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if seconds >= size:
                return f"{seconds / size:.1f}{unit}".replace(".0", "")
        return f"{seconds:.0f}s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _num(value: Any, fmt: str = "{:,.0f}") -> str:
    """A number in ``fmt``, or "-" for a missing one."""
    return fmt.format(value) if isinstance(value, int | float) and not isinstance(value, bool) else "-"


def shown_rate(record: ProgressRecord) -> float | None:
    """The steps/s every view shows (status, list, bars, -o json): the runner's one figure, timesteps over
    training time (runner/loop.py), for a running or an ended run alike; None while a run is starting, when
    the figure is a previous attempt's."""
    return None if record.state == "starting" else record.steps_per_second


def display_state(status: ExperimentStatus) -> str:
    """The state to show a person: ``starting`` while the experiment runs but its learner has not begun
    training yet (TensorFlow imports, the agent is built, a checkpoint loads: up to a minute; the runner's
    progress.json is absent or says "starting"), else the backend's state."""
    if status.state == "running" and (not status.progress or status.progress.state == "starting"):
        return "starting"
    stalled = status.stalled_for
    if stalled is not None:
        return f"stalled ({span(stalled)} without progress)"
    return status.state


def vitals_rows(status: ExperimentStatus) -> list[tuple[str, str]]:
    """The derived figures worth a line (ETA, restarts, checkpoint age, cost so far), as (label, text)."""
    figures = status.vitals
    rows = []
    if figures["eta_s"] is not None and status.state == "running":
        rows.append(("ETA", span(figures["eta_s"])))
    if figures["restarts"]:
        rows.append(("restarts", str(figures["restarts"])))
    if figures["checkpoint_age_s"] is not None:
        rows.append(("checkpoint", f"{figures['checkpoint']} ({span(figures['checkpoint_age_s'])} ago)"))
    if figures["cost_usd"] is not None or figures["budget_usd"] is not None:
        rows.append(("cost so far", cost_text(figures)))
    return rows


def cost_text(figures: dict[str, Any]) -> str:
    """The cost so far and the budget, for people: ``~$1.20 of $25.00 budget (5%)``, ``~$1.20 (estimate)``,
    ``unknown of $25.00 budget``. Estimates from list prices or rlcloud.yaml's cpu_hour_usd (rlcloud.budget)."""
    cost, budget = figures.get("cost_usd"), figures.get("budget_usd")
    text = f"~${cost:.2f}" if cost is not None else "unknown"
    if budget is None:
        return f"{text} (estimate)"
    percent = figures.get("budget_percent")
    return f"{text} of ${budget:.2f} budget" + (f" ({percent:.0f}%)" if percent is not None else "")


def display_rate(status: ExperimentStatus) -> float | None:
    """Steps per second to show, or None ("-"): :func:`shown_rate`, none while starting."""
    return None if display_state(status) == "starting" else shown_rate(status.progress)


def _roles_summary(status: ExperimentStatus) -> str:
    """One line however many workers there are, e.g. "agent: running; env-server: 3 running, 1 pending"."""
    by_role: dict[str, dict[str, int]] = {}
    for instance in status.roles:
        states = by_role.setdefault(instance.role, {})
        states[instance.state] = states.get(instance.state, 0) + 1
    parts = []
    for role, states in by_role.items():
        counts = ", ".join(state if n == 1 and len(states) == 1 else f"{n} {state}" for state, n in states.items())
        parts.append(f"{role}: {counts}")
    return "; ".join(parts)


def _html_rows(rows: Sequence[tuple[str, str]]) -> str:
    """(label, HTML) pairs as the rows of a two-column table."""
    th, td = "<th style='text-align:left;padding-right:1em'>", "<td style='text-align:left'>"
    return "".join(f"<tr>{th}{label}</th>{td}{value}</td></tr>" for label, value in rows)


def experiment_html(exp: Experiment, status: ExperimentStatus | None, runs_on: str) -> str:
    """An experiment for notebooks: its spec, where it runs (``runs_on``), its state and the learner's
    progress; ``status`` None: not started (or not cheap to read), the spec only. Every text is escaped."""
    spec = exp.spec
    prog = status.progress if status else ProgressRecord()
    stop_unit, stop_total = ("timestep", spec.total_timesteps) if spec.total_timesteps else ("episode", spec.episodes)
    env = spec.environment.get("level") or spec.environment.get("type") or spec.environment.get("class")
    rows: list[tuple[str, str]] = [
        ("experiment", html.escape(exp.name)),
        ("spec", html.escape(f"{spec.agent.get('type')} on {env}")),
        ("run mode", html.escape(f"{spec.run_mode}, {spec.num_workers} worker(s)")),
        ("runs on", html.escape(runs_on)),
    ]
    if status is None:
        rows.append(("state", "not started"))
    else:
        shown = display_state(status)
        state = html.escape(shown)
        color = _COLORS.get(shown.split(" ", 1)[0], "#666")
        rows.append(("state", f"<b style='color:{color}'>{state}</b>"))
        roles = _roles_summary(status)
        if roles:
            rows.append(("roles", html.escape(roles)))
        if status.message:
            rows.append(("message", html.escape(status.message)))
    done = prog.count(stop_unit)
    if stop_total:
        cell = html.escape(f"{_num(done, '{:,}')} / {stop_total:,} {stop_unit}s")
        if done is not None:
            cell = f"<progress value='{min(done, stop_total)}' max='{stop_total}'></progress> {cell}"
        rows.append(("progress", cell))
    if prog:
        other = "episode" if stop_unit == "timestep" else "timestep"
        if prog.count(other) is not None:
            rows.append((f"{other}s", _num(prog.count(other), "{:,}")))
        rows.append(("mean return", _num(prog.mean_return, "{:.1f}")))
        rows.append(("steps/s (training time)", _num(display_rate(status) if status else None, "{:.1f}")))
    if status is not None:
        rows.extend((key, html.escape(value)) for key, value in vitals_rows(status))
    rows.append(("results", html.escape(exp.location)))
    return f"<table class='rlcloud-experiment'>{_html_rows(rows)}</table>"


#: Seconds between two plain progress lines when there is no terminal (CI, nohup, a pod's log).
PLAIN_INTERVAL_S = 30.0


def progress_line(status: ExperimentStatus, total: int | None, unit: str, elapsed: float) -> str:
    """One plain line of progress, for logs without a terminal:
    ``cartpole-ppo: running · timestep 12,000/72,000 (17%) · episode 150 · mean return 85.3 · 420 steps/s · 1:30``.
    """
    prog = status.progress
    done = prog.count(unit)
    amount = f"{unit} {_num(done)}"
    if total:
        amount += f"/{total:,}"
        if done is not None:
            amount += f" ({min(100.0, 100.0 * done / total):.0f}%)"
    other = "episode" if unit == "timestep" else "timestep"
    return (
        f"{status.name}: {display_state(status)} · {amount} · {other} {_num(prog.count(other))} · "
        f"mean return {_num(prog.mean_return, '{:.1f}')} · {_num(display_rate(status))} steps/s · "
        + span(elapsed, "clock")
    )


def shows_a_bar() -> bool:
    """Whether a progress bar can be drawn: a terminal, or a notebook (tqdm.auto draws a widget there)."""
    return sys.stderr.isatty() or "ipykernel" in sys.modules


class PlainProgress:
    """Without a terminal or a notebook (a script under nohup, CI): a plain line (:func:`progress_line`) every
    ``interval`` seconds and at each change of state, where a bar would write a frame about every second.

    ``file``: where (default stderr), straight to the file: a console without a terminal would wrap at 80;
    ``clean``: applied to each line first (the CLI's filter of control characters)."""

    def __init__(
        self,
        spec: ExperimentSpec,
        *,
        file: IO[str] | None = None,
        interval: float = PLAIN_INTERVAL_S,
        clean: Callable[[str], str] = str,
    ) -> None:
        self.unit = "timestep" if spec.total_timesteps else "episode"
        self.total = spec.total_timesteps or spec.episodes
        self.file, self.interval, self.clean = file, interval, clean
        self.started = time.monotonic()
        self.last: tuple[float, str | None] = (float("-inf"), None)

    def __call__(self, status: ExperimentStatus) -> None:
        """Show ``status``."""
        now, state = time.monotonic(), display_state(status)
        if now - self.last[0] >= self.interval or state != self.last[1]:
            self.last = (now, state)
            line = progress_line(status, self.total, self.unit, now - self.started)
            print(self.clean(line), file=self.file or sys.stderr, flush=True)


class ExperimentBar:
    """A tqdm bar over timesteps or episodes (whichever the spec stops on), notebook-aware: Experiment.wait's and
    the CLI's (``file``: where it draws, default stderr)."""

    def __init__(self, spec: ExperimentSpec, *, file: IO[str] | None = None) -> None:
        from tqdm.auto import tqdm

        self.unit = "timestep" if spec.total_timesteps else "episode"
        total = spec.total_timesteps or spec.episodes
        # no rate of tqdm's own beside the run's steps/s: one figure (the runner's, timesteps over training time)
        self.bar = tqdm(
            total=total,
            unit=self.unit[:2] if self.unit == "timestep" else "ep",
            desc=spec.name,
            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]",
            file=file,
        )

    def __call__(self, status: ExperimentStatus) -> None:
        """Show ``status``."""
        done = int(status.progress.count(self.unit) or 0)
        self.bar.n = min(done, self.bar.total or done)
        self.bar.set_postfix(
            state=display_state(status),
            ret=_num(status.progress.mean_return, "{:.1f}"),
            sps=_num(display_rate(status), "{:.1f}"),
            refresh=False,
        )
        self.bar.refresh()

    def close(self) -> None:
        """Close the bar (a notebook keeps its last frame)."""
        self.bar.close()


def bytes_bar(desc: str) -> Callable[[int, int], None]:
    """A progress callback (done_bytes, total_bytes) drawing a tqdm bar."""
    from tqdm.auto import tqdm

    bar = tqdm(total=0, unit="B", unit_scale=True, desc=desc, leave=False)

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()

    return update


def steps_bar(desc: str) -> Callable[[int], None]:
    """A progress callback (steps so far; -1 closes it) drawing a tqdm counter."""
    from tqdm.auto import tqdm

    bar = tqdm(total=None, unit="step", desc=desc, leave=False, mininterval=1.0)

    def update(steps: int) -> None:
        if steps < 0:
            bar.close()
            return
        bar.n = steps
        if steps % 50 == 0:
            bar.refresh()

    return update


#: The most trial rows a notebook table shows, in index order; the rest is summed up in one line.
HTML_MAX_TRIALS = 200

#: A state's colour in a notebook (experiments and trials).
_COLORS = {
    "starting": "#1a73e8",
    "running": "#1a73e8",
    "succeeded": "#188038",
    "stopped early": "#188038",
    "failed": "#d93025",
    "stalled": "#d93025",
    "pending": "#e37400",
    "paused": "#e37400",
    "queued": "#666",
    "stopped": "#666",
}


def _trial_shown_state(trial: TrialStatus) -> str:
    if trial.stalled_for is not None:
        return "stalled"
    if trial.state == "running" and trial.progress.state in (None, "starting"):
        return "starting"
    return trial.state


def sweep_html(status: SweepStatus, rows: Sequence[tuple[str, str]] = ()) -> str:
    """A sweep for notebooks: its state, counts and figures, then one row per trial with its vitals (state,
    percent done, ETA, steps/s, mean return; :func:`vitals`) and why it failed or stopped early.

    ``rows``: extra (label, text) lines for the header (the Sweep facade adds where it runs and its results).
    Every text is escaped: names, parameters and reasons come from specs and stored records.
    """
    esc = html.escape
    figures = status.vitals
    counts = ", ".join(f"{n} {state}" for state, n in status.counts().items()) or "no trials"
    color = _COLORS.get(status.state, "#666")
    head: list[tuple[str, str]] = [
        ("sweep", esc(status.name)),
        ("state", f"<b style='color:{color}'>{esc(status.state)}</b>"),
        ("trials", esc(f"{len(status.trials)}: {counts}")),
    ]
    if status.message:
        head.append(("message", esc(status.message)))
    if figures["percent"] is not None:
        done = figures["percent"]
        head.append(("progress", f"<progress value='{done}' max='100'></progress> {esc(f'{done:.1f}%')}"))
    if figures["eta_s"] is not None:
        head.append(("ETA", esc(span(figures["eta_s"]))))
    if figures["best_return"] is not None:
        head.append(("best return", esc(_num(figures["best_return"], "{:,.1f}"))))
    if figures["stalled"]:
        head.append(("stalled", esc(f"{figures['stalled']} trial(s)")))
    if figures["cost_usd"] is not None:
        head.append(("cost so far", esc(f"~${figures['cost_usd']:.2f} (est.)")))
    head.extend((esc(label), esc(text)) for label, text in rows)
    cell = "<td style='text-align:left;padding-right:1em'>{}</td>"
    columns = ("#", "trial", "parameters", "seed", "state", "done", "ETA", "steps/s", "return", "reason")
    lines = ["<tr>" + "".join(f"<th style='text-align:left'>{c}</th>" for c in columns) + "</tr>"]
    for trial in status.trials[:HTML_MAX_TRIALS]:
        v = trial.vitals
        shown = _trial_shown_state(trial)
        state = f"<span style='color:{_COLORS.get(shown, '#666')}'>{esc(shown)}</span>"
        done, percent = "-", v["percent"]
        if percent is not None:
            done = f"<progress value='{percent}' max='100'></progress> {percent:.0f}%"
        params = ", ".join(f"{key}={value}" for key, value in trial.params.items())
        eta = span(v["eta_s"]) if v["eta_s"] is not None and trial.state == "running" else "-"
        values = (
            esc(str(trial.index)),
            esc(trial.name),
            esc(params),
            esc(str(trial.seed)),
            state,
            done,
            esc(eta),
            esc(_num(v["steps_per_second"], "{:,.1f}")),
            esc(_num(v["mean_return"], "{:,.1f}")),
            esc(trial.reason or ""),
        )
        lines.append("<tr>" + "".join(cell.format(value) for value in values) + "</tr>")
    hidden = len(status.trials) - HTML_MAX_TRIALS
    if hidden > 0:
        lines.append(f"<tr><td colspan='{len(columns)}'>{esc(f'... and {hidden} more trials')}</td></tr>")
    return (
        f"<div class='rlcloud-sweep'><table>{_html_rows(head)}</table>"
        f"<table class='rlcloud-sweep-trials'>{''.join(lines)}</table></div>"
    )


class SweepBar:
    """A tqdm bar over a sweep's trials: done of all, running, best mean return so far (notebook-aware)."""

    def __init__(self, name: str, total: int) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, unit="trial", desc=name)

    def __call__(self, status: SweepStatus) -> None:
        """Show ``status``."""
        done = sum(t.finished for t in status.trials)
        running = sum(t.state == "running" for t in status.trials)
        returns = [(t.progress.mean_return, t.name) for t in status.trials]
        best = max(((r, n) for r, n in returns if r is not None), default=None)
        self.bar.n = done
        self.bar.set_postfix(running=running, best="-" if best is None else f"{best[0]:.1f} ({best[1]})", refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        """Close the bar (a notebook keeps its last frame)."""
        self.bar.close()


class TrialLog:
    """Logs each trial's state as it changes (a line per change, not per poll)."""

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}

    def __call__(self, status: SweepStatus) -> None:
        """Show ``status``."""
        for trial in status.trials:
            if self._seen.get(trial.name) != trial.state:
                self._seen[trial.name] = trial.state
                ret = trial.progress.mean_return
                timestep = trial.progress.timestep
                log.info(
                    "%s: %s (timestep %s, return %s)%s",
                    trial.name,
                    trial.state,
                    "-" if timestep is None else timestep,
                    "-" if ret is None else f"{ret:.1f}",
                    f": {trial.reason}" if trial.reason else "",
                )


def message_parts(message: str | None) -> tuple[str, str]:
    """A status message's first line (for a table cell) and the rest (a log tail or traceback, printed below
    the table once rather than squeezed into the cell)."""
    head, _, rest = (message or "").partition("\n")
    return head, rest.strip("\n")


def status_table(status: ExperimentStatus) -> Any:
    """A rich renderable: the experiment's state and progress, one row per role, then the message's
    details (a failed role's log tail) below the table."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    prog = status.progress
    head, details = message_parts(status.message)
    percent = status.vitals["percent"]
    table = Table(title=Text(f"{status.name}: {display_state(status)}"), title_justify="left", show_edge=False)
    table.add_column("role")
    table.add_column("state")
    table.add_column("restarts", justify="right")
    table.add_column("detail")
    for role in status.roles:
        detail = role.reason or (f"exit code {role.exit_code}" if role.exit_code not in (None, 0) else "")
        table.add_row(Text(role.label), Text(role.state), str(role.restarts), Text(detail))
    more = " · ".join(f"{key} {value}" for key, value in vitals_rows(status))
    # below the table, not its caption: a caption is wrapped to the table's width (a few roles make it
    # narrow), which broke the figures and the failure's reason across centred lines
    below = Text(
        f"timesteps {_num(prog.timestep)} · episodes {_num(prog.episode)} · "
        + (f"{percent:.0f}% done · " if percent is not None else "")
        + f"mean return {_num(prog.mean_return, '{:.1f}')} · steps/s {_num(display_rate(status))}"
        + (f"\n{more}" if more else "")
        + (f"\n{head}" if head else "")
    )
    return Group(table, below, Text(details)) if details else Group(table, below)


def summary_table(exp: Experiment, status: ExperimentStatus, elapsed: float) -> Any:
    """The table printed when `rlcloud experiment run` ends (the message's first line only: the rest, a
    failed role's log tail, is for :func:`follow_experiment` to print once below it)."""
    from rich.table import Table
    from rich.text import Text

    prog = status.progress
    table = Table(
        title=Text(f"{exp.name}: {display_state(status)}"), title_justify="left", show_header=False, show_edge=False
    )
    table.add_column("what", style="bold")
    table.add_column("value")
    rows = [
        ("run mode", f"{exp.spec.run_mode} ({exp.spec.num_workers} worker(s))"),
        ("timesteps", _num(prog.timestep)),
        ("episodes", _num(prog.episode)),
        ("mean return (last 20)", _num(prog.mean_return, "{:.1f}")),
        ("steps/s (training time)", _num(display_rate(status))),
        ("wall time", span(elapsed, "clock")),
        ("latest checkpoint", prog.checkpoint or "-"),
        ("results", exp.location),
    ]
    for key, value in rows:
        table.add_row(key, Text(value))
    head, _ = message_parts(status.message)
    if head:
        table.add_row("message", Text(head))
    return table


def sweep_table(status: Any) -> Any:
    """A rich table: one row per trial (values as text, never markup)."""
    from rich.table import Table
    from rich.text import Text

    keys = sorted({k for t in status.trials for k in t.params})
    table = Table(title=Text(f"{status.name}: {status.state}  {status.counts_text()}{vitals_text(status.vitals)}"))
    for column in ("trial", *keys, "seed", "state", "timestep", "return", "steps/s"):
        table.add_column(Text(column))
    for trial in status.trials:
        prog = trial.progress
        ret = prog.mean_return
        cells = [
            trial.name,
            *(str(trial.params.get(k, "")) for k in keys),
            str(trial.seed),
            ("stalled" if trial.stalled_for is not None else trial.state)
            + (f" ({trial.reason})" if trial.reason and trial.state != "succeeded" else ""),
            _num(prog.timestep, "{:,}"),
            "-" if ret is None else f"{ret:.1f}",
            "-" if not prog.steps_per_second else f"{prog.steps_per_second:.0f}",
        ]
        table.add_row(*(Text(c) for c in cells))
    return table


def vitals_text(figures: dict[str, Any]) -> str:
    """The sweep's figures for its table's title: ``  40% done · ETA 12 min · best return 195.0``."""
    parts = []
    if figures["percent"] is not None:
        parts.append(f"{figures['percent']:.0f}% done")
    if figures["eta_s"] is not None:
        parts.append(f"ETA {span(figures['eta_s'])}")
    if figures["best_return"] is not None:
        parts.append(f"best return {figures['best_return']:.1f}")
    if figures["restarts"]:
        parts.append(f"{figures['restarts']} restart(s)")
    if figures["stalled"]:
        parts.append(f"{figures['stalled']} stalled")
    if figures["cost_usd"] is not None or figures.get("budget_usd") is not None:
        parts.append(cost_text(figures))
    return "  " + " · ".join(parts) if parts else ""
