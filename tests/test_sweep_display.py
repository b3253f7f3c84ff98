"""A sweep's notebook view: the Sweep facade and SweepStatus render one row of vitals per trial."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rlcloud import Sweep
from rlcloud.backend import SweepStatus, TrialStatus
from rlcloud.display import sweep_html
from tests.support.sweeps import TINY, _broken_environment, _sweep


def _trial(index: int, state: str, progress: dict[str, object], **fields: object) -> TrialStatus:
    return TrialStatus(
        index,
        f"s-{index}",
        {"agent.learning_rate": 0.001 * (index + 1)},
        index + 1,
        state,  # type: ignore[arg-type]
        progress,
        goal=("timestep", 10_000),
        **fields,  # type: ignore[arg-type]
    )


def test_each_trial_shows_its_state_percent_eta_rate_and_return() -> None:
    now = time.time()
    running = {"state": "running", "timestep": 2_500, "steps_per_second": 250.0, "mean_return": 42.5,
               "updated": now, "advanced_at": now}  # fmt: skip
    status = SweepStatus(
        name="s",
        state="running",
        trials=[
            _trial(0, "succeeded", {"state": "succeeded", "timestep": 10_000, "mean_return": 195.25}),
            _trial(1, "running", running),
            _trial(2, "failed", {}, reason="exit code 3: <no simulator licence> & more"),
            _trial(3, "queued", {}),
        ],
        message="1 trial(s) failed",
    )
    page = status._repr_html_()
    assert page == sweep_html(status)
    assert "<b style='color:#1a73e8'>running</b>" in page
    assert "4: 1 succeeded, 1 running, 1 failed, 1 queued" in page
    # the sweep: (100 + 25 + 100 + 0) / 4 percent done (a failed trial is done too); ETA: the work left
    # (7,500 + 10,000 timesteps) at the running trial's rate
    assert "<progress value='56.2' max='100'></progress> 56.2%" in page
    assert "<th style='text-align:left;padding-right:1em'>ETA</th><td style='text-align:left'>70 s</td>" in page
    assert "best return</th><td style='text-align:left'>195.2" in page
    rows = page.split("<table class='rlcloud-sweep-trials'>", 1)[1].split("</tr>")
    assert [c in rows[0] for c in ("state", "done", "ETA", "steps/s", "return")] == [True] * 5
    running_row = rows[2]
    assert "s-1" in running_row and "agent.learning_rate=0.002" in running_row
    assert "<progress value='25.0' max='100'></progress> 25%" in running_row
    assert ">30 s<" in running_row and ">250.0<" in running_row and ">42.5<" in running_row
    assert "<progress value='100.0' max='100'></progress> 100%" in rows[1] and ">195.2<" in rows[1]
    # what trials and stored records say is escaped
    assert "exit code 3: &lt;no simulator licence&gt; &amp; more" in rows[3]
    assert "<no simulator" not in page
    assert ">queued<" in rows[4] and ">-<" in rows[4]


def test_the_cli_table_counts_the_trials_in_words() -> None:
    import io

    from rich.console import Console

    from rlcloud.display import sweep_table

    status = SweepStatus(
        name="s",
        state="running",
        trials=[_trial(0, "succeeded", {"state": "succeeded", "timestep": 10_000}), _trial(1, "running", {}),
                _trial(2, "queued", {}), _trial(3, "queued", {})],
    )  # fmt: skip
    out = io.StringIO()
    Console(file=out, width=200).print(sweep_table(status))
    title = out.getvalue().splitlines()[0].strip()
    assert title.startswith("s: running  4 trials: 1 succeeded, 1 running, 2 queued  "), title
    assert status.counts_text() == "4 trials: 1 succeeded, 1 running, 2 queued"


def test_a_stopped_sweep_is_as_far_done_as_its_trials_got() -> None:
    # Ctrl-C or `sweep stop` at a quarter of the work: the trials resume from there, nothing is 100% done
    at = {"state": "stopped", "timestep": 2_500}
    status = SweepStatus(name="s", state="stopped", trials=[_trial(0, "stopped", at), _trial(1, "stopped", at)])
    assert status.vitals["percent"] == 25.0
    done = {"state": "succeeded", "timestep": 10_000}  # finished trials count whole: succeeded, failed, early
    status = SweepStatus(name="s", state="stopped", trials=[_trial(0, "succeeded", done), _trial(1, "stopped", at)])
    assert status.vitals["percent"] == 62.5


def test_a_trial_without_progress_for_its_stall_timeout_shows_stalled() -> None:
    old = time.time() - 3600
    progress = {"state": "running", "timestep": 10, "updated": old, "advanced_at": old, "stall_timeout": 60}
    page = sweep_html(SweepStatus(name="s", state="running", trials=[_trial(0, "running", progress)]))
    assert "color:#d93025'>stalled<" in page


def test_an_unstarted_sweep_shows_its_trials_queued(tmp_path: Path) -> None:
    sweep = Sweep(_sweep(seeds=2, parameters={"agent.learning_rate": [1e-3, 3e-4]}), results=str(tmp_path))
    page = sweep._repr_html_()
    assert "not started" in page and "4: 4 queued" in page
    assert "agent.learning_rate=0.0003" in page
    assert str(tmp_path / "s") in page and "local" in page


@pytest.mark.processes  # a real local sweep: the sweeper and its trials are processes
def test_a_broken_local_sweep_renders_its_failures_and_what_did_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _sweep(seeds=4, max_parallel=2, max_failures=2, smoke_timesteps=0)
    base = spec.experiment.replace(**TINY, environment=_broken_environment(tmp_path, monkeypatch))
    sweep = Sweep(spec.model_copy(update={"experiment": base}), results=str(tmp_path / "results")).start()
    status = sweep.wait(timeout=900)
    page = sweep._repr_html_()
    assert "<b style='color:#d93025'>failed</b>" in page
    assert "stopped launching trials" in page
    failed = status.counts()["failed"]
    assert page.count("<span style='color:#d93025'>failed</span>") == failed
    assert page.count("no simulator licence") >= failed
    assert page.count(">queued<") == 4 - failed
