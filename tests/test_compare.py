"""compare(), summarize(), plot_runs() and Experiment.metrics() on results written by hand in the documented
layout (docs/contracts.md "Results layout"), with known returns, so the statistics can be asserted exactly.
One training test compares two real tiny runs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import yaml

import rlcloud
from rlcloud.compare import (
    RUN_COLUMNS,
    SUMMARY_COLUMNS,
    confidence_interval,
    load_runs,
    plot_runs,
    records,
    summarize,
)
from rlcloud.errors import MissingExtraError, NotFoundError, require, require_installed
from rlcloud.storage import open_store

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_run(
    where: Path | Any,
    name: str,
    *,
    lr: float = 1e-3,
    seed: int | None = 1,
    returns: list[float] | None = None,
    steps_per_episode: int = 10,
    evaluation: dict[int, list[float]] | None = None,
    state: str = "succeeded",
    extra_spec: dict[str, Any] | None = None,
) -> str:
    """One run's results: spec.yaml, metrics.jsonl, progress.json, evaluation.jsonl (into a dir or a Store)."""
    returns = returns if returns is not None else [10.0] * 5
    spec = {
        "kind": "Experiment",
        "name": name,
        "environment": {"type": "gym", "level": "CartPole-v1"},
        "agent": {"type": "ppo", "batch_size": 5, "learning_rate": lr},
        "network": "auto",
        "total_timesteps": 1000,
        "seed": seed,
        "run_mode": "single",
        "results": str(where) if isinstance(where, Path) else None,  # differs by root: must not count
        **(extra_spec or {}),
    }
    metrics = [
        {
            "episode": i + 1,
            "timestep": (i + 1) * steps_per_episode,
            "return": r,
            "length": steps_per_episode,
            "time": 0.5 * (i + 1),
            "worker": 0,
        }
        for i, r in enumerate(returns)
    ]
    evals = [
        {"episode": k + 1, "timestep": at, "return": r, "length": 1, "time": 0.0, "worker": 0, "at_timestep": at}
        for at, values in (evaluation or {}).items()
        for k, r in enumerate(values)
    ]
    progress = {
        "state": state,
        "timestep": len(returns) * steps_per_episode,
        "episode": len(returns),
        "mean_return": None,
        "steps_per_second": 123.0,
        "updated": 0,
        "checkpoint": None,
    }
    files = {
        "spec.yaml": yaml.safe_dump(spec),
        "metrics.jsonl": "".join(json.dumps(m) + "\n" for m in metrics),
        "progress.json": json.dumps(progress),
        "evaluation.jsonl": "".join(json.dumps(e) + "\n" for e in evals),
    }
    if isinstance(where, Path):
        run = where / name
        run.mkdir(parents=True)
        for file, text in files.items():
            (run / file).write_text(text)
        return str(run)
    for file, text in files.items():
        where.child(name).write_text(file, text)
    return name


@pytest.fixture
def grid(tmp_path: Path) -> Path:
    """2 learning rates x 2 seeds: lr 1e-3 ends at 100 (seed 1) and 200 (seed 2), lr 3e-4 at 10 for both."""
    root = tmp_path / "results"
    warmup = [0.0] * 5  # outside the last-20 window: must not count
    write_run(root, "fast-s1", lr=1e-3, seed=1, returns=warmup + [100.0] * 20, evaluation={100: [90, 110]})
    write_run(root, "fast-s2", lr=1e-3, seed=2, returns=warmup + [200.0] * 20, evaluation={100: [1, 3], 250: [7, 9]})
    write_run(root, "slow-s1", lr=3e-4, seed=1, returns=warmup + [10.0] * 20)
    write_run(root, "slow-s2", lr=3e-4, seed=2, returns=warmup + [10.0] * 20, state="running")
    return root


def test_one_row_per_run_with_the_differing_parameters(grid: Path) -> None:
    frame = rlcloud.compare(["fast-s1", "fast-s2", "slow-s1", "slow-s2"], results=str(grid))
    assert list(frame["run"]) == ["fast-s1", "fast-s2", "slow-s1", "slow-s2"]
    assert list(frame.columns) == ["run", "agent.learning_rate", *RUN_COLUMNS]
    table = frame.set_index("run")
    # the results root differs between the specs too, but where results went is not a configuration
    assert table.attrs["parameters"] == ["agent.learning_rate"]
    assert list(table["agent.learning_rate"]) == [1e-3, 1e-3, 3e-4, 3e-4]
    assert list(table["seed"]) == [1, 2, 1, 2]
    assert list(table["state"]) == ["succeeded", "succeeded", "succeeded", "running"]
    assert list(table["timesteps"]) == [250] * 4
    assert list(table["episodes"]) == [25] * 4
    assert list(table["objective"]) == [100.0, 200.0, 10.0, 10.0]  # mean of the last 20 training returns
    assert table.loc["fast-s1", "final_evaluation"] == 100.0
    assert table.loc["fast-s2", "final_evaluation"] == 8.0  # the last round (at 250), not the first
    assert math.isnan(table.loc["slow-s1", "final_evaluation"])
    assert list(table["wall_time"]) == [12.5] * 4
    assert list(table["steps_per_second"]) == [123.0] * 4
    assert table.loc["slow-s1", "location"] == str((grid / "slow-s1").resolve())


def test_evaluation_objective_and_other_ways_to_name_runs(grid: Path) -> None:
    from rlcloud import Experiment, ExperimentSpec

    spec = ExperimentSpec.from_yaml_text((grid / "fast-s2" / "spec.yaml").read_text())
    runs = [str(grid / "fast-s1"), Experiment(spec, results=str(grid)), grid / "slow-s1"]
    table = rlcloud.compare(runs, objective="evaluation")
    assert list(table["run"]) == ["fast-s1", "fast-s2", "slow-s1"]
    assert table.attrs["objective"] == "evaluation"
    assert table["objective"].iloc[:2].tolist() == [100.0, 8.0]
    assert math.isnan(table["objective"].iloc[2])
    # one run alone is a table of one row, and no parameter differs
    single = rlcloud.compare(str(grid / "fast-s1"))
    assert list(single.columns) == ["run", *RUN_COLUMNS]
    # JSON-ready rows: NaN is None
    assert records(single)[0]["final_evaluation"] == 100.0
    assert records(table)[2]["objective"] is None and records(table)[2]["seed"] == 1


def test_runs_without_results_are_named(grid: Path) -> None:
    with pytest.raises(NotFoundError, match="no-such-run"):
        rlcloud.compare(["fast-s1", "no-such-run"], results=str(grid))


def test_summary_over_seeds_per_configuration(grid: Path) -> None:
    write_run(grid, "mid-s1", lr=5e-4, seed=1, returns=[42.0] * 3)
    runs = ["fast-s1", "fast-s2", "slow-s1", "slow-s2", "mid-s1"]
    summary = rlcloud.compare(runs, results=str(grid), by="config")
    assert list(summary.columns) == ["agent.learning_rate", *SUMMARY_COLUMNS]
    rows = {row["agent.learning_rate"]: row for row in summary.to_dict("records")}
    fast, slow, mid = rows[1e-3], rows[3e-4], rows[5e-4]
    assert (fast["n"], fast["mean"], fast["iqm"], fast["seeds"]) == (2, 150.0, 150.0, [1, 2])
    # the bootstrap means of two values are 100, 150 or 200: the 2.5/97.5 percentiles are the extremes
    assert (fast["ci_low"], fast["ci_high"]) == (100.0, 200.0)
    # equal values: the interval is the value; one value: no interval
    assert (slow["n"], slow["mean"], slow["ci_low"], slow["ci_high"]) == (2, 10.0, 10.0, 10.0)
    assert mid["n"] == 1 and mid["mean"] == 42.0 and math.isnan(mid["ci_low"]) and math.isnan(mid["ci_high"])
    # summarize() of a table is the same as by="config"
    again = summarize(rlcloud.compare(runs, results=str(grid)))
    pd.testing.assert_frame_equal(again, summary)


def test_interquartile_mean_and_interval_match_scipy() -> None:
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 100.0])
    table = pd.DataFrame({"run": [f"r{i}" for i in range(8)], "objective": values, "seed": range(8)})
    table.attrs["parameters"] = []
    row = summarize(table).iloc[0]
    assert row["iqm"] == 4.5  # the mean of 3, 4, 5, 6: the outlier is cut
    assert row["mean"] == values.mean()
    expected = scipy.stats.bootstrap(
        (values,), np.mean, n_resamples=2000, method="percentile", rng=np.random.default_rng(0)
    ).confidence_interval
    assert (row["ci_low"], row["ci_high"]) == (expected.low, expected.high)
    assert row["ci_low"] < row["mean"] < row["ci_high"]
    # along an axis (the plots' bands): equal columns give the value, one row gives NaN
    low, high = confidence_interval(np.array([[1.0, 5.0], [3.0, 5.0]]), axis=0)
    assert low[1] == high[1] == 5.0 and 1.0 <= low[0] <= high[0] <= 3.0
    one_low, _ = confidence_interval(np.array([[1.0, 5.0]]), axis=0)
    assert np.isnan(one_low).all()


def test_runs_in_cloud_storage_are_read_from_the_bucket(fake_gcs: Any, gcs_bucket: str, monkeypatch: Any) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake_gcs.url)
    root = f"gs://{gcs_bucket}/sweep"
    store = open_store(root)
    write_run(store, "a", lr=1e-3, seed=1, returns=[5.0] * 3)
    write_run(store, "b", lr=1e-3, seed=2, returns=[7.0] * 3)
    table = rlcloud.compare(["a", "b"], results=root)
    assert table.attrs["parameters"] == []
    assert list(table["objective"]) == [5.0, 7.0]
    assert table.set_index("run").loc["b", "location"] == f"{root}/b"
    loaded = load_runs([f"{root}/a"])
    assert loaded[0].spec is not None and loaded[0].spec["seed"] == 1


def test_plot_runs_writes_a_png(grid: Path, tmp_path: Path) -> None:
    path = tmp_path / "plots" / "compare.png"
    fig = plot_runs(["fast-s1", "fast-s2", "slow-s1", "slow-s2"], results=str(grid), path=path)
    assert path.read_bytes().startswith(PNG_MAGIC)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["learning_rate=0.001 (n=2)", "learning_rate=0.0003 (n=2)"]
    assert fig._repr_png_().startswith(PNG_MAGIC)
    # two curves, each with a band, and the evaluation markers of the first configuration
    ax = fig.axes[0]
    assert len(ax.collections) == 2
    xs = sorted(x for line in ax.lines if line.get_marker() == "o" for x in line.get_xdata())
    assert xs == [100, 250]


def test_metrics_is_always_a_dataframe_with_the_documented_columns(tmp_path: Path) -> None:
    from rlcloud import Experiment, ExperimentSpec

    spec = ExperimentSpec(
        name="empty", environment={"type": "gym", "level": "CartPole-v1"}, agent={"type": "ppo"}, episodes=1
    )
    exp = Experiment(spec, results=str(tmp_path))
    empty = exp.metrics()
    assert isinstance(empty, pd.DataFrame) and empty.empty
    assert list(empty.columns) == ["episode", "timestep", "return", "length", "time", "worker"]
    assert str(empty["timestep"].dtype) == "int64" and str(empty["return"].dtype) == "float64"
    assert list(exp.metrics(evaluation=True).columns)[-2:] == ["at_episode", "at_timestep"]
    write_run(tmp_path, "full", returns=[1.0, 2.0], evaluation={20: [3.0]})
    full = Experiment(spec.replace(name="full"), results=str(tmp_path))
    frame = full.metrics()
    assert frame["return"].tolist() == [1.0, 2.0] and frame["timestep"].tolist() == [10, 20]
    assert frame.dtypes.equals(empty.dtypes)
    assert full.metrics(evaluation=True)["at_timestep"].tolist() == [20]


def test_a_missing_extra_is_named() -> None:
    with pytest.raises(MissingExtraError, match=r"rlcloud\[analysis\]") as info:
        require("rlcloud_no_such_module", "analysis", feature="plotting")
    assert isinstance(info.value, ImportError) and isinstance(info.value, rlcloud.RLCloudError)
    assert info.value.extra == "analysis" and info.value.name == "rlcloud_no_such_module"
    with pytest.raises(MissingExtraError, match=r"rlcloud\[runner\]"):
        require_installed(["json", "rlcloud_no_such_module"], "runner", feature="running here")
    assert require("json", "analysis", feature="x").dumps([]) == "[]"


def test_without_the_runner_extra_local_runs_refuse_and_cluster_runs_warn(
    tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    from rlcloud import Cluster, Experiment, ExperimentSpec
    from rlcloud import experiment as experiment_module

    monkeypatch.setattr(experiment_module, "RUNNER_MODULES", ("rlcloud_no_such_module",))
    monkeypatch.setattr(experiment_module, "_warned_unvalidated", False)
    spec = ExperimentSpec(
        name="x", environment={"type": "gym", "level": "CartPole-v1"}, agent={"type": "ppo"}, episodes=1
    )
    exp = Experiment(spec, results=str(tmp_path))
    for validate in (True, False):
        with pytest.raises(MissingExtraError, match=r"rlcloud\[runner\]"):
            exp.start(validate=validate)
    assert not (tmp_path / "x").exists()  # refused before anything was written
    remote = Experiment(spec, results="gs://bucket/x", cluster=Cluster.kubernetes(kubeconfig=str(tmp_path / "k")))
    with caplog.at_level("WARNING", logger="rlcloud.experiment"):
        remote.validate()
        remote.validate()
    warnings = [r for r in caplog.records if "runner extra" in r.getMessage()]
    assert len(warnings) == 1 and "schema only" in warnings[0].getMessage()


@pytest.mark.training
def test_two_real_seeds_compared(tmp_path: Path) -> None:
    from rlcloud import Experiment, ExperimentSpec

    base = ExperimentSpec(
        name="tiny-s1",
        environment={"type": "gym", "level": "CartPole-v1"},
        agent={"type": "ppo", "batch_size": 2},
        total_timesteps=300,
        seed=1,
        saver_frequency=None,
        summary_frequency=None,
    )
    runs = [
        Experiment(base, results=str(tmp_path)),
        Experiment(base.replace(name="tiny-s2", seed=2), results=str(tmp_path)),
    ]
    for exp in runs:
        exp.start()
    for exp in runs:
        assert exp.wait(timeout=300).state == "succeeded"
    table = rlcloud.compare(runs)
    assert list(table["run"]) == ["tiny-s1", "tiny-s2"]
    assert table.attrs["parameters"] == []  # only the seed differs
    assert list(table["seed"]) == [1, 2]
    assert (table["state"] == "succeeded").all() and (table["timesteps"] >= 300).all()
    assert (table["episodes"] > 0).all() and table["objective"].notna().all()
    summary = rlcloud.compare(table, by="config")
    assert summary.loc[0, "n"] == 2 and summary.loc[0, "seeds"] == [1, 2]
    assert summary.loc[0, "ci_low"] <= summary.loc[0, "mean"] <= summary.loc[0, "ci_high"]
    plot_runs(runs, path=tmp_path / "two.png")
    assert (tmp_path / "two.png").read_bytes().startswith(PNG_MAGIC)


def test_a_sweeps_results_and_plot_come_from_compare(tmp_path: Path) -> None:
    from rlcloud import Sweep, SweepSpec

    spec = SweepSpec.from_dict(
        {
            "name": "lr",
            "experiment": str(Path(__file__).resolve().parents[1] / "examples" / "cartpole_ppo.yaml"),
            "parameters": {"agent.learning_rate": [1e-3, 3e-4]},
            "seeds": 2,
        }
    )
    sweep = Sweep(spec, results=str(tmp_path))
    for trial in spec.trials()[:3]:  # the fourth trial has not started: no spec of record, no row
        where = tmp_path / "lr"
        write_run(
            where, trial.name, lr=trial.params["agent.learning_rate"], seed=trial.seed, returns=[trial.seed * 1.0]
        )
        (where / trial.name / "spec.yaml").write_text(trial.spec.to_yaml())  # the real spec of record
    table = sweep.results()
    assert list(table["run"]) == [t.name for t in spec.trials()[:3]]
    assert table.attrs["parameters"] == ["agent.learning_rate"]
    assert list(table["seed"]) == [1, 2, 1] and list(table["objective"]) == [1.0, 2.0, 1.0]
    summary = rlcloud.compare(table, by="config")
    assert list(summary["n"]) == [2, 1] and list(summary["mean"]) == [1.5, 1.0]
    sweep.plot(tmp_path / "lr.png")
    assert (tmp_path / "lr.png").read_bytes().startswith(PNG_MAGIC)


def test_cli_compare_prints_tables_json_csv_and_writes_the_plot(
    grid: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlcloud.cli import main

    monkeypatch.setenv("COLUMNS", "200")  # a terminal wide enough that no header wraps

    runs = ["fast-s1", "fast-s2", "slow-s1", "slow-s2"]
    assert main(["compare", *runs, "--results", str(grid)]) == 0
    out = capsys.readouterr().out
    assert "4 runs (mean_return)" in out and "over seeds, per configuration" in out
    assert "agent.learning_rate" in out and "fast-s2" in out

    assert main(["compare", *runs, "--results", str(grid), "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in rows] == runs and [r["objective"] for r in rows] == [100.0, 200.0, 10.0, 10.0]
    assert rows[2]["final_evaluation"] is None  # valid JSON: no NaN

    assert main(["compare", *runs, "--results", str(grid), "--by", "config", "-o", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [(r["agent.learning_rate"], r["n"], r["mean"]) for r in summary] == [(1e-3, 2, 150.0), (3e-4, 2, 10.0)]

    plot = tmp_path / "runs.png"
    code = main(["compare", str(grid / "fast-s1"), str(grid / "slow-s1"), "-o", "csv", "--plot", str(plot)])
    assert code == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("run,agent.learning_rate,seed,state") and len(lines) == 3
    assert plot.read_bytes().startswith(PNG_MAGIC) and "wrote" in captured.err

    assert main(["compare", "fast-s1", "nothing-here", "--results", str(grid)]) == 1
    assert "nothing-here" in capsys.readouterr().err


#: lines one run's metrics.jsonl may hold that are no episode record, with what they mean
BAD_METRIC_LINES = {
    "string-return": '{"episode": 26, "timestep": 260, "return": "lots", "length": 10, "time": 13.0, "worker": 0}',
    "infinite-return": '{"episode": 26, "timestep": 260, "return": Infinity, "length": 10, "time": 13.0}',
    "nan-return": '{"episode": 26, "timestep": 260, "return": NaN, "length": 10, "time": 13.0}',
    "huge-return": '{"episode": 26, "timestep": 260, "return": 1e999, "length": 10, "time": 13.0}',
    "bool-timestep": '{"episode": 26, "timestep": true, "return": 1.0}',
    "negative-episode": '{"episode": -1, "timestep": 260, "return": 1.0}',
    "fractional-timestep": '{"episode": 26, "timestep": 2.5, "return": 1.0}',
    "list-return": '{"episode": 26, "timestep": 260, "return": [1, 2]}',
    "a-list": "[1, 2, 3]",
    "a-string": '"episode"',
    "truncated": '{"episode": 26, "timestep": 260, "ret',
    "digits": '{"episode": 26, "timestep": ' + "9" * 5000 + "}",
    "deep": "[" * 50_000 + "]" * 50_000,
}


@pytest.mark.parametrize("bad", sorted(BAD_METRIC_LINES))
def test_one_bad_metrics_line_never_stops_compare_for_all(
    grid: Path, bad: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    metrics = grid / "slow-s1" / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    lines.insert(3, BAD_METRIC_LINES[bad])  # in the middle: not a writer's torn last line
    metrics.write_text("\n".join(lines) + "\n")
    progress = grid / "fast-s1" / "progress.json"
    progress.write_text('{"state": 7, "timestep": Infinity, "episode": "25", "steps_per_second": NaN}')
    runs = ["fast-s1", "fast-s2", "slow-s1", "slow-s2"]
    table = rlcloud.compare(runs, results=str(grid)).set_index("run")
    assert list(table["objective"]) == [100.0, 200.0, 10.0, 10.0]  # the bad line skipped, the rest counted
    # progress fields of the wrong type are ignored, numbers written as strings taken
    assert table.loc["fast-s1", "state"] == "unknown" and table.loc["fast-s1", "timesteps"] == 250
    assert table.loc["fast-s1", "episodes"] == 25
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("slow-s1" in w and "skipped 1 line(s)" in w for w in warnings), warnings  # names the run
    assert any("fast-s1" in w and "timestep" in w and "state" in w for w in warnings), warnings
    from rlcloud.cli import main

    assert main(["compare", *runs, "--results", str(grid), "-o", "json"]) == 0
    assert [r["objective"] for r in json.loads(capsys.readouterr().out)] == [100.0, 200.0, 10.0, 10.0]


def test_unreadable_progress_of_one_run_is_ignored_with_a_warning(grid: Path, caplog: pytest.LogCaptureFixture) -> None:
    for text in ("{", "[1, 2]", "[" * 50_000):
        (grid / "slow-s2" / "progress.json").write_text(text)
        table = rlcloud.compare(["fast-s1", "slow-s2"], results=str(grid)).set_index("run")
        assert table.loc["slow-s2", "state"] == "unknown" and table.loc["slow-s2", "objective"] == 10.0
        assert "slow-s2" in caplog.text and "progress ignored" in caplog.text
        caplog.clear()


def test_a_torn_last_line_is_skipped_quietly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from rlcloud.storage.client import read_metrics

    store = open_store(tmp_path)
    store.write_text("metrics.jsonl", '{"episode": 1, "timestep": 10, "return": 1.5}\n{"episode": 2, "time')
    with caplog.at_level("DEBUG"):
        assert read_metrics(store) == [{"episode": 1, "timestep": 10, "return": 1.5}]
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    store.write_text("metrics.jsonl", '{"episode": 1, "timestep": "10", "return": "1.5", "time": 2}\n')
    assert read_metrics(store) == [{"episode": 1, "timestep": 10, "return": 1.5, "time": 2.0}]  # coerced


def test_a_sweeps_results_survive_one_trials_bad_records(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from rlcloud import Sweep, SweepSpec

    spec = SweepSpec.from_dict(
        {
            "name": "lr",
            "experiment": str(Path(__file__).resolve().parents[1] / "examples" / "cartpole_ppo.yaml"),
            "parameters": {"agent.learning_rate": [1e-3, 3e-4]},
        }
    )
    where = tmp_path / "lr"
    for trial in spec.trials():
        write_run(where, trial.name, lr=trial.params["agent.learning_rate"], seed=trial.seed, returns=[4.0, 6.0])
        (where / trial.name / "spec.yaml").write_text(trial.spec.to_yaml())
    odd = spec.trials()[0].name
    with (where / odd / "metrics.jsonl").open("a") as fh:
        fh.write('{"episode": 3, "timestep": 30, "return": "n/a"}\n{"episode": 4, "timestep": 40, "return": 8.0}\n')
    (where / odd / "progress.json").write_text('{"state": "succeeded", "timestep": -Infinity, "episode": 4}')
    table = Sweep(spec, results=str(tmp_path)).results().set_index("run")
    assert list(table["objective"]) == [6.0, 5.0] and list(table["episodes"]) == [4, 2]
    assert f"lr/{odd}/metrics.jsonl: skipped 1 line(s)" in caplog.text
