"""Following a run: plain progress lines without a terminal, the `starting` state, a failure's log tail
printed once, `experiment stop` and Experiment.stop() downloading alike, and finding TensorBoard."""

from __future__ import annotations

import inspect
import io
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlcloud import Experiment, ExperimentSpec
from rlcloud.backend import ExperimentStatus, RoleStatus
from rlcloud.cli import main
from rlcloud.cli.progress import follow_experiment
from rlcloud.display import display_rate, display_state, status_table, summary_table

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "cartpole_ppo.yaml"

TRACEBACK = (
    "agent-0 failed (exit code 1: ValueError: bad batch); last lines of its log:\n"
    "Traceback (most recent call last):\n"
    '  File "loop.py", line 3, in run\n'
    "ValueError: bad batch"
)


def status(state: str = "running", progress: dict[str, Any] | None = None, message: str | None = None) -> Any:
    return ExperimentStatus(
        name="cartpole-ppo",
        state=state,  # type: ignore[arg-type]
        roles=[RoleStatus("agent", 0, "failed" if state == "failed" else "running")],
        progress={} if progress is None else progress,
        message=message,
    )


class Scripted:
    """Stands in for an Experiment: status() returns the next scripted status (the last one repeats)."""

    def __init__(self, statuses: list[ExperimentStatus], tmp_path: Path) -> None:
        self.statuses = statuses
        self.spec = ExperimentSpec.from_file(SPEC, total_timesteps=1000)
        self.name = self.spec.name
        self.location = str(tmp_path / self.name)
        self.logs_read = 0

    def status(self) -> ExperimentStatus:
        return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]

    def logs(self, follow: bool = False, roles: list[str] | None = None) -> Iterator[str]:
        self.logs_read += 1
        return iter(["agent-0 | Traceback (most recent call last):", "agent-0 | ValueError: bad batch"])

    def plot(self, path: Any = None) -> None:
        return None


def rendered(renderable: object) -> str:
    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(renderable)
    return out.getvalue()


# -------------------------------------------------------------------------------- without a terminal


def test_without_a_terminal_progress_is_plain_lines(tmp_path: Path) -> None:
    from rich.console import Console

    running = {"state": "running", "timestep": 250, "episode": 12, "mean_return": 21.5, "steps_per_second": 310.0}
    done = {**running, "state": "succeeded", "timestep": 1000}
    exp = Scripted(
        [status(progress={}), status(progress=running), status(progress=running), status("succeeded", done)],
        tmp_path,
    )
    out = io.StringIO()
    console = Console(file=out, width=80)  # a file: no terminal, as in CI, nohup or a pod
    code = follow_experiment(exp, console=console, plain_interval=0.0, poll_interval=0.0)  # type: ignore[arg-type]
    assert code == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == "cartpole-ppo: starting · timestep -/1,000 · episode - · mean return - · - steps/s · 0:00"
    assert lines[1].startswith("cartpole-ppo: running · timestep 250/1,000 (25%) · episode 12 · mean return 21.5")
    assert "310 steps/s" in lines[1] and len(lines[1]) > 80  # one line each, not wrapped at the console width
    assert "\x1b[" not in out.getvalue()  # no live bar, no cursor movement
    assert "cartpole-ppo: succeeded" in out.getvalue()  # the summary


def test_plain_lines_come_every_interval_and_on_a_change_of_state(tmp_path: Path) -> None:
    from rich.console import Console

    running = {"state": "running", "timestep": 250, "episode": 12}
    statuses = [status(progress=running) for _ in range(5)] + [status("succeeded", {**running, "state": "succeeded"})]
    out = io.StringIO()
    follow_experiment(
        Scripted(statuses, tmp_path),  # type: ignore[arg-type]
        console=Console(file=out),
        plain_interval=3600.0,
        poll_interval=0.0,
    )
    assert sum(line.startswith("cartpole-ppo: running") for line in out.getvalue().splitlines()) == 1
    quiet = io.StringIO()
    follow_experiment(
        Scripted(statuses, tmp_path),  # type: ignore[arg-type]
        console=Console(file=quiet),
        quiet=True,
        poll_interval=0.0,
    )
    assert "cartpole-ppo: running ·" not in quiet.getvalue() and "succeeded" in quiet.getvalue()


@pytest.mark.training
def test_experiment_run_without_a_terminal_and_its_final_evaluation(tmp_path: Path) -> None:
    # a real `rlcloud run` with stderr a pipe: plain lines (starting while TensorFlow loads, then running),
    # no live bar; the evaluation schedule (every 400 timesteps) gets one more at the end (600)
    spec = tmp_path / "exp.yaml"
    spec.write_text(
        "name: tiny\nenvironment: {type: gym, level: CartPole-v1}\nagent: {type: ppo, batch_size: 2}\n"
        "total_timesteps: 600\nseed: 1\nevaluation: {every: 400t, episodes: 1}\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "rlcloud", "run", str(spec), "--results", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert any(line.startswith("tiny: starting · timestep -/600 · ") for line in lines), lines
    assert "\x1b[" not in result.stderr and "tiny: succeeded" in result.stderr
    from rlcloud.runner.loop import read_jsonl

    evaluations = read_jsonl(tmp_path / "r" / "tiny" / "evaluation.jsonl")
    assert [e["at_timestep"] for e in evaluations] == [400, 600]


# ---------------------------------------------------------------------------------------- starting


def test_a_running_experiment_without_training_progress_is_starting() -> None:
    assert display_state(status(progress={})) == "starting"
    # a resumed run: the runner keeps the previous run's counters while it starts
    stale = {"state": "starting", "timestep": 5000, "steps_per_second": 0.6}
    assert display_state(status(progress=stale)) == "starting"
    assert display_rate(status(progress=stale)) is None
    # a run that has just finished (its processes are closing) is not starting again
    finishing = {"state": "succeeded", "timestep": 9000, "steps_per_second": 300.0}
    assert display_state(status(progress=finishing)) == "running"
    live = {"state": "running", "timestep": 5200, "steps_per_second": 412.0}
    assert display_state(status(progress=live)) == "running" and display_rate(status(progress=live)) == 412.0
    assert display_state(status("pending")) == "pending"
    assert display_state(status("succeeded", {"state": "succeeded"})) == "succeeded"
    assert display_rate(status(progress={"state": "running", "steps_per_second": None})) is None


def test_starting_is_shown_in_tables_notebooks_and_the_tqdm_bar(tmp_path: Path) -> None:
    stale = {"state": "starting", "timestep": 5000, "episode": 80, "steps_per_second": 0.6}
    shown = rendered(status_table(status(progress=stale)))
    assert "cartpole-ppo: starting" in shown and "steps/s -" in shown and "0.6" not in shown

    from tests.support.display import ScriptedBackend, ScriptedCluster

    exp = Experiment(ExperimentSpec.from_file(SPEC), results=str(tmp_path))
    exp.start(cluster=ScriptedCluster(ScriptedBackend(status(progress=stale))), validate=False)
    page = exp._repr_html_()
    assert "'>starting</b>" in page and "0.6" not in page

    from rlcloud.display import ExperimentBar

    bar = ExperimentBar(exp.spec)
    bar(status(progress=stale))
    assert bar.bar.postfix is not None and "state=starting" in bar.bar.postfix and "sps=-" in bar.bar.postfix
    bar.close()


def test_the_runner_reports_no_rate_before_its_first_step(tmp_path: Path) -> None:
    import json

    from rlcloud.runner.loop import Trainer

    # the previous run's progress.json and the checkpoint it resumes from: the runner says "starting" at once,
    # with the checkpoint's counters (a dead attempt's counters past it are never shown)
    (tmp_path / "progress.json").write_text(
        json.dumps({"state": "stopped", "timestep": 5200, "episode": 83, "steps_per_second": 310.0})
    )
    checkpoint = tmp_path / "checkpoints" / "ckpt-000000005000"
    checkpoint.mkdir(parents=True)
    (checkpoint / "state.json").write_text(json.dumps({"timestep": 5000, "episode": 80}))
    (tmp_path / "checkpoints" / "LATEST").write_text("ckpt-000000005000\n")
    trainer = Trainer(ExperimentSpec.from_file(SPEC), tmp_path)
    trainer._mark_starting()
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress["state"] == "starting" and progress["timestep"] == 5000 and progress["steps_per_second"] is None
    trainer._counters.timestep = 5000  # resumed from a checkpoint, no step made by this process yet
    trainer._write_progress("running")
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress["timestep"] == 5000 and progress["steps_per_second"] is None
    # a fresh run's: the counters are there from the start, at 0
    (tmp_path / "progress.json").unlink()
    shutil.rmtree(tmp_path / "checkpoints")
    trainer._mark_starting()
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert (progress["state"], progress["timestep"], progress["episode"]) == ("starting", 0, 0)


# ------------------------------------------------------------------------- a failure's traceback once


def test_a_failed_run_prints_its_traceback_once(tmp_path: Path) -> None:
    from rich.console import Console

    exp = Scripted([status("failed", {"state": "failed"}, TRACEBACK)], tmp_path)
    out = io.StringIO()
    code = follow_experiment(exp, console=Console(file=out, width=120), poll_interval=0.0)  # type: ignore[arg-type]
    text = out.getvalue()
    assert code == 1
    assert text.count("Traceback (most recent call last)") == 1
    assert text.count("ValueError: bad batch") == 2  # the message's first line names it, the traceback ends on it
    assert "agent-0 failed (exit code 1: ValueError: bad batch); last lines of its log:" in text
    assert exp.logs_read == 0  # the message carried the log tail: the logs are not printed again
    table = rendered(summary_table(exp, status("failed", {}, TRACEBACK), 1.0))  # type: ignore[arg-type]
    assert "Traceback" not in table
    shown = rendered(status_table(status("failed", {}, TRACEBACK)))
    assert shown.count("Traceback (most recent call last)") == 1


def test_a_failure_without_a_log_tail_prints_the_last_log_lines(tmp_path: Path) -> None:
    from rich.console import Console

    exp = Scripted([status("failed", {}, "agent-0: BackoffLimitExceeded")], tmp_path)
    out = io.StringIO()
    assert follow_experiment(exp, console=Console(file=out, width=120), poll_interval=0.0) == 1  # type: ignore[arg-type]
    assert exp.logs_read == 1 and out.getvalue().count("Traceback (most recent call last)") == 1


# --------------------------------------------------------------------------------- stop and download


def test_stop_downloads_by_default_in_the_api_and_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    assert inspect.signature(Experiment.stop).parameters["download"].default is True
    calls: list[dict[str, Any]] = []

    class Stoppable:
        nothing_to_do = None
        results_here: Path | None = None

        def stop(self, download: bool = True, dest: str | None = None) -> bool:
            calls.append({"download": download, "dest": dest})
            self.results_here = Path("here") if download else None
            return True

    import rlcloud.cli.experiment

    monkeypatch.setattr(rlcloud.cli.experiment, "_experiment", lambda args: Stoppable())
    assert main(["experiment", "stop", "demo"]) == 0
    assert main(["experiment", "stop", "demo", "--no-download"]) == 0
    assert main(["experiment", "stop", "demo", "--dest", "d"]) == 0
    assert calls == [
        {"download": True, "dest": None},
        {"download": False, "dest": None},
        {"download": True, "dest": "d"},
    ]


def test_stop_of_a_local_run_copies_nothing_unless_asked(tmp_path: Path) -> None:
    from tests.support.display import ScriptedBackend

    exp = Experiment(ExperimentSpec.from_file(SPEC), results=str(tmp_path / "results"))
    exp._backend = ScriptedBackend(status("stopped", {}))
    (Path(exp.location) / "logs").mkdir(parents=True)
    (Path(exp.location) / "metrics.jsonl").write_text('{"episode": 1}\n')
    exp.stop()
    assert exp.results_here == Path(exp.location)  # already on this disk
    exp.stop(download=False)
    assert exp.results_here is None
    exp.stop(dest=tmp_path / "copy")
    copied = exp.results_here
    assert copied == tmp_path / "copy" and (copied / "metrics.jsonl").read_text() == '{"episode": 1}\n'


# ------------------------------------------------------------------------------------------ tensorboard


def test_tensorboard_next_to_the_interpreter_is_found_before_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlcloud.cli.experiment import tensorboard_executable

    venv_bin, elsewhere = tmp_path / "venv" / "bin", tmp_path / "elsewhere"
    for directory in (venv_bin, elsewhere):
        directory.mkdir(parents=True)
        program = directory / "tensorboard"
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    monkeypatch.setenv("PATH", str(elsewhere))
    assert tensorboard_executable() == str(venv_bin / "tensorboard")
    (venv_bin / "tensorboard").unlink()  # not in the venv: PATH's
    assert tensorboard_executable() == str(elsewhere / "tensorboard")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert tensorboard_executable() is None


@pytest.mark.training
def test_one_steps_per_second_in_every_view(tmp_path: Path) -> None:
    """The runner's figure is its timesteps over its training time, and the status table, the plain line,
    the vitals of ``list`` and ``-o json`` (running or ended) all show that one figure."""
    import json

    from rlcloud.backend import vitals
    from rlcloud.display import progress_line
    from rlcloud.layout import ProgressRecord
    from rlcloud.runner.loop import Trainer

    spec = ExperimentSpec.from_file(SPEC, total_timesteps=640, evaluation=None, summary_frequency=None)
    result = Trainer(spec, tmp_path).run()
    progress = json.loads((tmp_path / "progress.json").read_text())
    rate = progress["steps_per_second"]
    assert rate == round(result.timesteps / result.elapsed, 1) == round(result.steps_per_second, 1)
    # rate x time = steps (progress.json's elapsed is rounded to 0.1 s: a short run's exact time is the result's)
    assert rate * result.elapsed == pytest.approx(progress["timestep"], rel=0.01)
    assert progress["elapsed"] == round(result.elapsed, 1)
    ended = status(state="succeeded", progress=progress)
    assert display_rate(ended) == rate
    assert vitals(progress, now=0.0, running=False)["steps_per_second"] == rate  # list and -o json
    assert vitals(progress, now=0.0, running=True)["steps_per_second"] == rate
    assert f"{rate:,.0f} steps/s" in progress_line(ended, 640, "timestep", 5.0)
    assert ProgressRecord.of(progress).steps_per_second == rate


def test_without_a_terminal_wait_writes_a_line_per_30_s_not_a_bar(capsys: pytest.CaptureFixture[str]) -> None:
    from rlcloud.display import PlainProgress, shows_a_bar

    assert not shows_a_bar()  # pytest's captured stderr is no terminal, and no notebook kernel runs here
    plain = PlainProgress(ExperimentSpec.from_file(SPEC))
    running = {"state": "running", "timestep": 250, "episode": 12, "mean_return": 21.5, "steps_per_second": 310.0}
    for timestep in (250, 500, 750):  # polled every second: one line, not one frame per poll
        plain(status(progress={**running, "timestep": timestep}))
    plain(status(state="succeeded", progress={**running, "state": "succeeded", "timestep": 150000}))
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("cartpole-ppo: running · timestep 250/150,000") and "310 steps/s" in lines[0]
    assert lines[1].startswith("cartpole-ppo: succeeded · timestep 150,000/150,000 (100%)")
