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

import rlcloud
from rlcloud.comparison import (
    AT_MAX_COLUMNS,
    RUN_COLUMNS,
    SUMMARY_COLUMNS,
    confidence_interval,
    load_runs,
    plot_runs,
    records,
    row_reasons,
    summarize,
)
from rlcloud.errors import MissingExtraError, NotFoundError, SpecError, require, require_installed
from rlcloud.storage import open_store
from tests.support.written_runs import write_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


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
    write_run(grid, "mid-s1", lr=5e-4, seed=1, returns=[42.0] * 25)
    runs = ["fast-s1", "fast-s2", "slow-s1", "slow-s2", "mid-s1"]
    # slow-s2 is still running, but at the others' 250 timesteps: the same budget
    summary = rlcloud.compare(runs, results=str(grid), by="config")
    # CartPole-v1's returns lie in 0..500 (intervals.RETURN_BOUNDS): the share of seeds at 500 is a column
    assert summary.attrs["return_bounds"] == (0.0, 500.0)
    assert list(summary.columns) == [
        "agent.learning_rate",
        *SUMMARY_COLUMNS[:10],
        *AT_MAX_COLUMNS,
        *SUMMARY_COLUMNS[10:],
    ]
    rows = {row["agent.learning_rate"]: row for row in summary.to_dict("records")}
    fast, slow, mid = rows[1e-3], rows[3e-4], rows[5e-4]
    assert (fast["n"], fast["mean"], fast["iqm"], fast["median"], fast["seeds"]) == (2, 150.0, 150.0, 150.0, [1, 2])
    # two seeds: no statistic has an interval that keeps its promise, and the notes say why
    for row in (fast, slow, mid):
        assert all(math.isnan(row[f"{s}_{end}"]) for s in ("iqm", "mean", "median") for end in ("low", "high"))
    notes = " ".join(summary.attrs["notes"])
    # CartPole caps its returns: the mean has no interval at any n (benchmarks/interval_coverage.py)
    assert "IQM's interval needs 4 seeds" in notes and "the environment caps its returns" in notes
    assert "median's interval needs 5 seeds" in notes
    # ... and in the row itself: no bare NaN
    assert row_reasons(fast["notes"]) == {
        "iqm": "needs 4 seeds",
        "mean": "capped returns",
        "median": "needs 5 seeds",
        "seeds_needed": "best by iqm",
    }
    assert row_reasons(mid["notes"])["seeds_needed"] == "fewer than 2 seeds: no spread to go by"
    assert (fast["at_max"], fast["at_max_low"]) == (0.0, 0.0) and fast["at_max_high"] == pytest.approx(0.8419, abs=1e-4)
    # the best IQM is lr 1e-3's; the others say how many seeds would tell them from it
    assert math.isnan(fast["seeds_needed"]) and slow["seeds_needed"] >= 2
    assert math.isnan(mid["seeds_needed"])  # one seed has no spread to go by
    # summarize() of a table is the same as by="config"
    again = summarize(rlcloud.compare(runs, results=str(grid)))
    pd.testing.assert_frame_equal(again, summary)


def _table(values: Any, seeds: Any = None) -> pd.DataFrame:
    values = list(values)
    table = pd.DataFrame(
        {"run": [f"r{i}" for i in range(len(values))], "objective": values, "seed": seeds or range(len(values))}
    )
    table.attrs["parameters"] = []
    return table


def test_runs_of_different_budgets_are_flagged_and_compared_by_choice(tmp_path: Path) -> None:
    from rlcloud.comparison import BudgetError

    root = tmp_path / "results"
    ramp = [float(i) for i in range(100)]  # return i at timestep 10 (i + 1)
    write_run(root, "full-s1", seed=1, returns=ramp)
    write_run(root, "full-s2", seed=2, returns=[r + 10 for r in ramp])
    budget = {"total_timesteps": 1000}  # the spec's, the same for all three
    write_run(
        root,
        "early-s3",
        seed=3,
        returns=ramp[:40],
        state="stopped-early",
        evaluation={200: [5.0], 400: [9.0]},
        extra_spec=budget,
    )
    runs = ["full-s1", "full-s2", "early-s3"]
    table = rlcloud.compare(runs, results=str(root))
    assert table.attrs["short_runs"] == ["early-s3 (stopped-early at 400 timesteps)"]
    assert list(table["objective"]) == [89.5, 99.5, 29.5]  # the per-run table shows every run as it is
    with pytest.raises(BudgetError, match=r"early-s3 \(stopped-early at 400 timesteps\).*budgets='common'"):
        summarize(table)
    # at the common budget: each run's last 20 episodes by timestep 400 (returns 20..39)
    common = rlcloud.compare(runs, results=str(root), budgets="common")
    assert list(common["objective"]) == [29.5, 39.5, 29.5] and common.attrs["common_budget"] == 400
    summary = summarize(common)
    assert summary.loc[0, "n"] == 3 and "common budget of 400 timesteps" in " ".join(summary.attrs["notes"])
    evaluation = rlcloud.compare(runs, results=str(root), budgets="common", objective="evaluation")
    assert evaluation["objective"].iloc[2] == 9.0  # the round at 400, not after
    # or without the short run
    complete = rlcloud.compare(runs, results=str(root), budgets="complete", by="config")
    assert complete.loc[0, "n"] == 2 and complete.loc[0, "seeds"] == [1, 2]
    assert "early-s3" in " ".join(complete.attrs["notes"])
    with pytest.raises(SpecError, match="budgets must be"):
        rlcloud.compare(runs, results=str(root), budgets="sometimes")  # type: ignore[arg-type]


def test_a_repeated_seed_is_refused_unless_asked(tmp_path: Path) -> None:
    from rlcloud.comparison import BudgetError

    root = tmp_path / "results"
    write_run(root, "a", seed=1, returns=[1.0] * 5)
    write_run(root, "b", seed=1, returns=[3.0] * 5)
    write_run(root, "c", seed=2, returns=[5.0] * 5)
    write_run(root, "other-lr", lr=3e-4, seed=1, returns=[7.0] * 5)  # seed 1 of another configuration: fine
    with pytest.raises(BudgetError, match=r"a \(seed 1\), b \(seed 1\).*repeated_seeds=True"):
        rlcloud.compare(["a", "b", "c", "other-lr"], results=str(root), by="config")
    allowed = rlcloud.compare(["a", "b", "c", "other-lr"], results=str(root), by="config", repeated_seeds=True)
    assert list(allowed["n"]) == [3, 1]
    assert rlcloud.compare(["a", "c", "other-lr"], results=str(root), by="config")["n"].tolist() == [2, 1]


def test_each_statistic_has_its_own_interval() -> None:
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 100.0])
    row = summarize(_table(values)).iloc[0]
    assert row["iqm"] == 4.5  # the mean of 3, 4, 5, 6: the outlier is cut
    assert row["mean"] == values.mean() and row["median"] == 4.5
    # the IQM's: Tukey-McLaughlin, the winsorized values 3,3,3,4,5,6,6,6 and t with 3 degrees of freedom
    winsorized = np.array([3.0, 3, 3, 4, 5, 6, 6, 6])
    se = math.sqrt(7 * winsorized.var(ddof=1) / (4 * 3))
    half = scipy.stats.t.ppf(0.975, 3) * se
    # ... and the percentile bootstrap's (resampling moves the outlier across the trimming point): their hull,
    # within the seeds' range (no return bounds known here)
    assert row["iqm_low"] == pytest.approx(4.5 - half)
    assert 4.5 + half < row["iqm_high"] <= 100.0
    from rlcloud import intervals

    assert (row["iqm_low"], row["iqm_high"]) == intervals.iqm_interval(values)  # seeded: reproducible
    # the median's: order statistics; at n=8, x(2)..x(7) covers 93.0%, so x(1)..x(8) (99.2%); at n=10 x(2)..x(9)
    assert (row["median_low"], row["median_high"]) == (1.0, 100.0)
    ten = summarize(_table([*values, 8.0, 9.0])).iloc[0]
    assert (ten["median_low"], ten["median_high"]) == (2.0, 9.0)
    # 8 seeds: no interval of the mean
    assert math.isnan(row["mean_low"]) and "20 seeds" in summarize(_table(values)).attrs["notes"][0]


def test_the_mean_interval_from_20_seeds_is_bootstrap_t_and_seeded() -> None:
    from rlcloud import intervals

    values = np.random.default_rng(3).lognormal(0, 0.5, 20) * 100
    row = summarize(_table(values)).iloc[0]
    assert row["mean_low"] < values.mean() < row["mean_high"]
    assert (row["mean_low"], row["mean_high"]) == intervals.mean_interval(values)  # seeded: reproducible
    # skewed to the right: the studentized interval reaches further above the mean than below
    assert row["mean_high"] - values.mean() > values.mean() - row["mean_low"]
    assert not [note for note in summarize(_table(values)).attrs["notes"] if note.startswith("no ")]
    # within the seeds' range: the environment's bounds are unknown here
    assert values.min() <= row["mean_low"] and row["mean_high"] <= values.max()
    # equal values: no spread to measure, no interval (a zero-width one covers only by luck), and why
    flat = summarize(_table([5.0] * 20)).iloc[0]
    assert all(math.isnan(flat[c]) for c in ("mean_low", "mean_high", "iqm_low", "iqm_high"))
    assert row_reasons(flat["notes"]) == {"iqm": "no spread", "mean": "no spread", "seeds_needed": "best by iqm"}


def test_seeds_needed_grows_as_the_difference_shrinks() -> None:
    from rlcloud import intervals

    rng = np.random.default_rng(0)
    base = rng.normal(0, 1, 10)
    base = (base - base.mean()) / base.std(ddof=1)  # a spread of exactly 1
    # 1 standard deviation apart: two intervals of half width t x 1 / sqrt(n) stop overlapping at ~18 seeds
    wide = intervals.seeds_needed(base + 1.0, base, statistic="mean")
    narrow = intervals.seeds_needed(base + 0.5, base, statistic="mean")
    assert wide is not None and narrow is not None and 17 <= wide <= 20 and narrow > 3 * wide
    iqm = intervals.seeds_needed(base + 1.0, base)  # the IQM's interval is wider for the same spread
    assert iqm is not None and iqm > wide
    # no lead, or no spread at all
    assert intervals.seeds_needed(base, base) is None and intervals.seeds_needed(base, base + 1) is None
    assert intervals.seeds_needed([2.0, 2.0], [1.0, 1.0]) == intervals.min_seeds("iqm", None)


def test_plot_bands_are_the_iqms_interval_along_an_axis() -> None:
    from rlcloud import intervals

    data = np.array([[1.0, 5.0], [3.0, 5.0], [2.0, 5.0]])
    low, high = confidence_interval(data, axis=0, bounds=(0.0, 500.0))
    assert np.isnan(low[1]) and np.isnan(high[1])  # no spread: no band
    assert low[0] < 2.0 < high[0] and low[0] >= 0 and high[0] <= 500
    assert (low[0], high[0]) == pytest.approx(intervals.iqm_interval(data[:, 0], bounds=(0.0, 500.0)))
    unbounded = confidence_interval(data, axis=0)  # no bounds known: never beyond the seeds' range
    assert unbounded[0][0] >= 1.0 and unbounded[1][0] <= 3.0
    two_low, _ = confidence_interval(data[:2], axis=0)
    assert np.isnan(two_low).all()  # 2 seeds: no interval


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
    # two curves, no band (2 seeds have no interval), and the evaluation markers of the first configuration
    ax = fig.axes[0]
    assert ax.get_ylabel() == "IQM over seeds of the mean return over the last 20 episodes"
    assert len(ax.collections) == 0
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
        name="x",
        environment={"type": "gym", "level": "CartPole-v1"},
        agent={"type": "ppo", "batch_size": 4},
        episodes=1,
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
    assert summary.loc[0, "mean"] == table["objective"].mean()
    plot_runs(runs, path=tmp_path / "two.png")
    assert (tmp_path / "two.png").read_bytes().startswith(PNG_MAGIC)


def test_a_sweeps_results_and_plot_come_from_compare(tmp_path: Path) -> None:
    from rlcloud import Sweep, SweepSpec

    spec = SweepSpec.from_dict(
        {
            "name": "lr",
            "experiment": "cartpole_ppo.yaml",
            "parameters": {"agent.learning_rate": [1e-3, 3e-4]},
            "seeds": 2,
        },
        base_dir=Path(__file__).resolve().parents[1] / "examples",
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
    found = sweep.best()
    assert found.parameters == {"agent.learning_rate": 1e-3} and found.value == 1.5 and found.n == 2
    assert found.separated is None and "the lead cannot be judged" in str(found)  # 2 seeds and 1: no intervals
    assert "the best has no iqm interval (needs 4 seeds)" in found.why_not_judged
    sweep.plot(tmp_path / "lr.png")
    assert (tmp_path / "lr.png").read_bytes().startswith(PNG_MAGIC)


def test_cli_compare_prints_tables_json_csv_and_writes_the_plot(
    grid: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlcloud.cli import main

    monkeypatch.setenv("COLUMNS", "200")  # a terminal wide enough that no header wraps

    runs = ["fast-s1", "fast-s2", "slow-s1", "slow-s2"]
    # slow-s3 is still running, 100 timesteps in: the per-run table, no statistics until a budget is chosen
    write_run(grid, "slow-s3", lr=3e-4, seed=3, returns=[10.0] * 10, state="running")
    assert main(["compare", *runs, "slow-s3", "--results", str(grid)]) == 0
    captured = capsys.readouterr()
    assert "5 runs (mean_return)" in captured.out and "over seeds" not in captured.out
    assert "slow-s3 (running at 100 timesteps)" in captured.err and "--budgets common" in captured.err
    assert main(["compare", *runs, "slow-s3", "--results", str(grid), "--by", "config", "-o", "json"]) == 2
    assert "--budgets complete" in capsys.readouterr().err
    assert main(["compare", *runs, "slow-s3", "--results", str(grid), "--budgets", "complete"]) == 0
    assert "left out (budgets='complete'): slow-s3" in capsys.readouterr().out
    assert main(["compare", *runs, "--results", str(grid)]) == 0
    out = capsys.readouterr().out
    assert "4 runs (mean_return)" in out and "over seeds, per configuration" in out
    assert "no iqm interval: the IQM's interval needs 4 seeds" in out  # 2 seeds each: says why, no bounds
    assert main(["compare", "fast-s1", "--results", str(grid)]) == 0
    assert "1 run (mean_return)" in capsys.readouterr().out  # not "1 runs"
    assert "agent.learning_rate" in out and "fast-s2" in out

    assert main(["compare", *runs, "--results", str(grid), "-o", "json"]) == 0  # rows need no choice
    rows = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in rows] == runs and [r["objective"] for r in rows] == [100.0, 200.0, 10.0, 10.0]
    assert rows[2]["final_evaluation"] is None  # valid JSON: no NaN

    assert (
        main(["compare", *runs, "--results", str(grid), "--by", "config", "--budgets", "complete", "-o", "json"]) == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert [(r["agent.learning_rate"], r["n"], r["mean"]) for r in summary] == [(1e-3, 2, 150.0), (3e-4, 2, 10.0)]

    plot = tmp_path / "runs.png"
    code = main(["compare", str(grid / "fast-s1"), str(grid / "slow-s1"), "-o", "csv", "--plot", str(plot)])
    assert code == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("run,agent.learning_rate,seed,state") and len(lines) == 3
    assert plot.read_bytes().startswith(PNG_MAGIC) and "wrote" in captured.err

    assert main(["compare", "fast-s1", "nothing-here", "--results", str(grid)]) == 2  # a name naming nothing
    assert "nothing-here" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ against rliable

REFERENCE = json.loads((Path(__file__).parent / "data" / "rliable_reference.json").read_text())


@pytest.mark.parametrize("case", REFERENCE["cases"], ids=[c["name"] for c in REFERENCE["cases"]])
def test_statistics_and_comparisons_match_rliable(case: dict[str, Any]) -> None:
    """rliable 1.2.0's outputs on the same inputs (tests/data/rliable_reference.py computed them once)."""
    from rlcloud import intervals

    x, y, taus = np.array(case["x"]), np.array(case["y"]), np.array(case["taus"])
    assert float(intervals.iqm(x)) == pytest.approx(case["iqm"], abs=1e-3)
    # rliable's aggregate median is the median over tasks of each task's mean: with one task, the mean
    assert float(x.mean()) == pytest.approx(case["mean"], abs=1e-3) == pytest.approx(case["median"], abs=1e-3)
    assert intervals.probability_of_improvement(x, y) == pytest.approx(case["probability_of_improvement"], abs=1e-3)
    assert intervals.performance_profile(x, taus) == pytest.approx(case["performance_profile"], abs=1e-3)
    # the intervals are percentile bootstraps of the same resampling scheme (each side within itself), 20,000
    # resamples each; rliable draws with arch's generator and rlcloud with numpy's: the bounds of these
    # small-sample statistics move in steps of 1/(n m) or 1/n, and land on the same step
    low, high = intervals.probability_of_improvement_interval(x, y)
    assert (low, high) == pytest.approx(case["probability_of_improvement_interval"], abs=1e-3)
    plow, phigh = intervals.performance_profile_interval(x, taus)
    assert plow == pytest.approx(case["performance_profile_interval"][0], abs=1e-3)
    assert phigh == pytest.approx(case["performance_profile_interval"][1], abs=1e-3)


def test_best_says_whether_the_lead_is_outside_the_intervals() -> None:
    from rlcloud.comparison import best, performance_profiles

    first = [450.0, 462, 441, 455, 447, 458]
    far = [*first, *(v - 150 for v in first), 446, 455, 436, 451, 443, 449]
    table = pd.DataFrame(
        {
            "run": [f"r{i}" for i in range(18)],
            "agent.learning_rate": [1e-3] * 6 + [1e-4] * 6 + [3e-4] * 6,
            "objective": far,
            "seed": list(range(1, 7)) * 3,
        }
    )
    table.attrs["parameters"] = ["agent.learning_rate"]
    table.attrs["return_bounds"] = (0.0, 500.0)  # CartPole-v1's
    found = best(table)
    assert found.parameters == {"agent.learning_rate": 1e-3} and found.runner_up == {"agent.learning_rate": 3e-4}
    assert found.statistic == "iqm" and found.n == 6 and found.low < found.value < found.high
    assert found.separated is False  # 452 vs 447 with a spread of 6-8: the intervals overlap
    assert 0.5 < found.probability_of_improvement <= 1 and found.seeds_needed is not None
    assert "not separated" in str(found) and "learning_rate=0.001" in str(found)
    # 6 runs each: the bootstrap of P(improvement) covers too little below 10 (benchmarks/interval_coverage.py)
    assert math.isnan(found.probability_of_improvement_low) and "no interval below 10 runs each" in str(found)
    assert any("needs 10 runs" in note for note in found.notes)
    ten = pd.concat([table, table.assign(seed=table["seed"] + 6)], ignore_index=True).__finalize__(table)
    wider = best(ten)
    assert (
        wider.probability_of_improvement_low
        <= wider.probability_of_improvement
        <= wider.probability_of_improvement_high
    )
    # 1e-3 against 1e-4 alone: 150 apart, separated, every run of one beats every run of the other
    apart = best(table[table["agent.learning_rate"] != 3e-4].copy().__finalize__(table), statistic="median")
    assert apart.separated is True and apart.probability_of_improvement == 1.0
    assert "separated: the best's interval lies above the runner-up's" in str(apart)
    assert apart.seeds_needed is None and "seeds each" not in str(apart)  # separated: nothing to advise
    profiles = performance_profiles(table, [0.0, 400.0, 1000.0])
    assert list(profiles.columns) == ["agent.learning_rate", "threshold", "fraction", "low", "high", "n"]
    by = profiles.set_index(["agent.learning_rate", "threshold"])["fraction"]
    assert (by[(1e-3, 0.0)], by[(1e-3, 400.0)], by[(1e-4, 400.0)], by[(1e-3, 1000.0)]) == (1.0, 1.0, 0.0, 0.0)


# --------------------------------------------------------------------------------- the sweep as the handle


def _hand_written_sweep(tmp_path: Path) -> tuple[Any, Path]:
    from rlcloud import Sweep, SweepSpec

    spec = SweepSpec.from_dict(
        {
            "name": "lr",
            "experiment": "cartpole_ppo.yaml",
            "parameters": {"agent.learning_rate": [1e-3, 3e-4]},
            "seeds": 3,
        },
        base_dir=Path(__file__).resolve().parents[1] / "examples",  # references resolve beside the sweep
    )
    root = tmp_path / "results"
    where = root / "lr"
    for trial in spec.trials():
        fast = trial.params["agent.learning_rate"] == 1e-3
        write_run(where, trial.name, seed=trial.seed, returns=[(100.0 if fast else 10.0) + trial.seed] * 25)
        (where / trial.name / "spec.yaml").write_text(trial.spec.replace(total_timesteps=250).to_yaml())
    (where / "curves").mkdir()  # the median stopping rule's notes, one JSON per trial: not a run
    (where / "curves" / f"{spec.trials()[0].name}.json").write_text("{}")
    return Sweep(spec, results=str(root)), root


def test_a_sweep_is_named_wherever_results_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlcloud.cli import main

    monkeypatch.setenv("COLUMNS", "250")
    sweep, root = _hand_written_sweep(tmp_path)
    names = [t.name for t in sweep.spec.trials()]
    # the Sweep object, its name and its location stand for its trials
    assert list(rlcloud.compare(sweep)["run"]) == names
    assert list(rlcloud.compare("lr", results=str(root))["run"]) == names
    assert list(rlcloud.compare(str(root / "lr"))["run"]) == names
    # SWEEP/TRIAL is one trial; the shell's SWEEP/* (curves/ included) is every trial
    one = rlcloud.compare(f"lr/{names[1]}", results=str(root))
    assert list(one["run"]) == [names[1]] and one["seed"].iloc[0] == 2
    assert list(rlcloud.compare(sorted(str(p) for p in (root / "lr").iterdir()))["run"]) == sorted(names)
    summary = rlcloud.compare(sweep, by="config")
    assert list(summary["n"]) == [3, 3] and list(summary["iqm"]) == [102.0, 12.0]

    # rlcloud compare SWEEP: the configurations over their seeds and the best; --trials adds the rows
    assert main(["compare", "lr", "--results", str(root)]) == 0
    out = capsys.readouterr().out
    assert "lr: over seeds, per configuration" in out and names[0] not in out
    assert "best by iqm: agent.learning_rate=0.001: 102" in out and "the lead cannot be judged" in out
    assert main(["compare", "lr", "--results", str(root), "--trials"]) == 0
    out = capsys.readouterr().out
    assert "6 runs (mean_return)" in out and names[0] in out and "per configuration" in out
    assert main(["compare", "lr", "--results", str(root), "-o", "json"]) == 0
    assert [r["n"] for r in json.loads(capsys.readouterr().out)] == [3, 3]  # a sweep's JSON: configurations
    assert main(["compare", f"lr/{names[0]}", "--results", str(root), "-o", "json"]) == 0
    assert [r["run"] for r in json.loads(capsys.readouterr().out)] == [names[0]]
    assert main(["compare", *sorted(str(p) for p in (root / "lr").iterdir()), "-o", "csv"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 7  # trials named one by one are runs: a row each


def test_an_experiment_and_a_sweep_of_one_name_are_refused(tmp_path: Path) -> None:
    from rlcloud import Experiment, ExperimentSpec, Sweep

    sweep, root = _hand_written_sweep(tmp_path)
    spec = ExperimentSpec.from_file(Path(__file__).resolve().parents[1] / "examples" / "cartpole_ppo.yaml")
    with pytest.raises(SpecError, match="a sweep named 'lr' has its trials") as info:
        Experiment(spec.replace(name="lr"), results=str(root)).start(validate=False)
    assert info.value.fields == ["name"]
    assert not (root / "lr" / "spec.yaml").exists()  # refused before anything was written
    write_run(root, "solo", seed=1)
    clash = Sweep(sweep.spec.model_copy(update={"name": "solo"}), results=str(root))
    with pytest.raises(SpecError, match="an experiment named 'solo' has its results") as info:
        clash.start(validate=False)
    assert info.value.fields == ["name"]


def test_one_configurations_plot_says_what_is_drawn(tmp_path: Path) -> None:
    root = tmp_path / "results"
    for seed in (1, 2, 3, 4):
        write_run(root, f"seed{seed}", seed=seed, returns=[float(seed * i) for i in range(30)], evaluation={150: [9.0]})
    fig = plot_runs(["seed1", "seed2", "seed3", "seed4"], results=str(root))
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["4 seeds"]  # not "seed1 (n=4)"
    assert "interval of the IQM" in legend.get_title().get_text()
    assert "evaluation mean (n=4)" in legend.get_title().get_text()
    assert ax.get_ylabel() == "IQM over seeds of the mean return over the last 20 episodes"
    assert len(ax.collections) == 1  # 4 seeds of CartPole (bounds known): the IQM's band
    assert ax.get_title() == "4 runs, 1 configuration"


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
            "experiment": "cartpole_ppo.yaml",
            "parameters": {"agent.learning_rate": [1e-3, 3e-4]},
        },
        base_dir=Path(__file__).resolve().parents[1] / "examples",  # references resolve beside the sweep
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


def test_evaluation_episodes_of_the_runner_are_read(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # the runner writes its evaluation episodes with worker -1 (runner/loop.py): they are records, not bad
    # lines; a worker below -1 is not
    from rlcloud.storage.client import read_evaluation

    store = open_store(tmp_path)
    line = '{"episode": 1, "timestep": 50, "return": 77.0, "length": 77, "time": 2.5, "worker": -1, "at_timestep": 50}'
    store.write_text("evaluation.jsonl", line + "\n" + line.replace('"worker": -1', '"worker": -2') + "\n")
    with caplog.at_level("WARNING"):
        records = read_evaluation(store)
    assert [r["worker"] for r in records] == [-1]
    assert "skipped 1 line(s)" in caplog.text and "'worker' is '-2', not a whole number >= -1" in caplog.text


# ------------------------------------------------------------------- RL's own returns: capped, tied, censored


def _config_table(groups: dict[float, list[float]], bounds: tuple[float, float] | None = (0.0, 500.0)) -> pd.DataFrame:
    """A compare() table of configurations by learning rate, with CartPole-v1's return bounds by default."""
    rows = [
        {"run": f"lr{lr}-s{i}", "agent.learning_rate": lr, "objective": v, "seed": i}
        for lr, values in groups.items()
        for i, v in enumerate(values)
    ]
    table = pd.DataFrame(rows)
    table.attrs["parameters"] = ["agent.learning_rate"]
    table.attrs["return_bounds"] = bounds
    return table


def test_capped_returns_never_reach_beyond_the_cap_and_report_the_share_at_it() -> None:
    from rlcloud import intervals

    # the final evaluation: four seeds at CartPole's 500 and one at 475.8 printed "500 [500, 500]"
    summary = summarize(_config_table({1e-3: [500.0, 500.0, 475.8, 500.0, 500.0]}))
    row = summary.iloc[0]
    assert row["iqm"] == 500.0 and math.isnan(row["iqm_low"]) and math.isnan(row["iqm_high"])
    assert row_reasons(row["notes"])["iqm"] == "no spread"
    # what is honest there: 4 of 5 seeds at the cap, with the exact binomial (Clopper-Pearson) interval
    assert row["at_max"] == 0.8
    low, high = scipy.stats.binomtest(4, 5).proportion_ci(method="exact")
    assert (row["at_max_low"], row["at_max_high"]) == pytest.approx((low, high))
    assert row["median_low"] == 475.8 and row["median_high"] == 500.0  # 5 seeds: min..max, 93.75%
    # the training objective: an IQM interval that reached 510.8 stops at the cap, and a seed at the
    # cap takes the interval up to it (a few seeds cannot place the mass there)
    seeds = [299.9, 350.0, 405.2, 500.0, 498.0]
    low, high = intervals.iqm_interval(seeds, bounds=(0.0, 500.0))
    assert high == 500.0 and 0.0 <= low < intervals.iqm(seeds)
    free_low, free_high = intervals.iqm_interval(seeds, bounds=(-math.inf, math.inf))
    assert free_high > 500.0 and free_low == low
    # bounds unknown: never beyond the seeds' own range, and no IQM interval below 8 seeds
    unknown = summarize(_config_table({1e-3: seeds}, bounds=None)).iloc[0]
    assert math.isnan(unknown["iqm_low"]) and row_reasons(unknown["notes"])["iqm"] == "needs 8 seeds"
    assert "at_max" not in unknown.index
    six = intervals.iqm_interval([*seeds, 420.0])
    assert min(seeds) <= six[0] and six[1] <= max(seeds)
    # the mean of capped returns has no interval at any n (it kept < 90% at 20 seeds), and says so
    twenty = summarize(_config_table({1e-3: [500.0] * 12 + [300.0 + i for i in range(8)]})).iloc[0]
    assert math.isnan(twenty["mean_low"]) and row_reasons(twenty["notes"])["mean"] == "capped returns"
    assert twenty["iqm_high"] == 500.0 and twenty["at_max"] == 0.6


def test_return_bounds_come_from_the_environment_and_its_episode_limit() -> None:
    from rlcloud import intervals

    cartpole = {"type": "gym", "level": "CartPole-v1"}
    assert intervals.return_bounds(cartpole) == (0.0, 500.0)
    assert intervals.return_bounds(cartpole, 200) == (0.0, 200.0)  # max_timesteps_per_episode cuts episodes
    assert intervals.return_bounds({"type": "gym", "level": "MountainCar-v0"}) == (-200.0, 0.0)
    assert intervals.return_bounds({"type": "gym", "level": "ALE/Pong-v5"}) is None
    assert intervals.return_bounds("cartpole") is None


def test_tied_returns_count_as_fewer_degrees_of_freedom() -> None:
    from rlcloud import intervals

    # 8 seeds, the IQM keeps 2, 2, 2, 3: two distinct values, so t with 1 degree of freedom, not h - 1 = 3
    values = np.array([1.0, 2, 2, 2, 2, 3, 3, 3])
    low, high = intervals.iqm_interval(values, bounds=(-math.inf, math.inf))
    winsorized = np.array([2.0, 2, 2, 2, 2, 3, 3, 3])
    se = math.sqrt(7 * winsorized.var(ddof=1) / (4 * 3))
    assert (low, high) == pytest.approx(
        (2.25 - scipy.stats.t.ppf(0.975, 1) * se, 2.25 + scipy.stats.t.ppf(0.975, 1) * se)
    )
    # every kept seed tied: no interval, and the row says why
    tied = summarize(_config_table({1e-3: [100.0, 100, 100, 100, 100, 150]})).iloc[0]
    assert math.isnan(tied["iqm_low"]) and row_reasons(tied["notes"])["iqm"] == "no spread"
    # the median's order-statistic interval is closed: it holds with ties and needs no spread
    assert (tied["median_low"], tied["median_high"]) == (100.0, 150.0)


def _verdict_cases() -> list[pd.DataFrame]:
    rng = np.random.default_rng(38)
    cases = []
    for _ in range(40):
        n = int(rng.integers(3, 12))
        shift = float(rng.choice([0.0, 10.0, 40.0, 120.0]))
        capped = bool(rng.integers(2))
        a, b = rng.normal(300 + shift, 60, n), rng.normal(300, 60, int(rng.integers(3, 12)))
        if capped:
            a, b = np.minimum(a + 150, 500.0), np.minimum(b + 150, 500.0)
        cases.append(_config_table({1e-3: a.tolist(), 3e-4: b.tolist()}, bounds=(0.0, 500.0) if capped else None))
    return cases


@pytest.mark.parametrize("statistic", ["iqm", "median", "mean"])
def test_one_verdict_one_statistic(statistic: str) -> None:
    """The statistic that ranks is the one whose intervals decide "separated", whose seeds to separate are
    printed, and the sentence never says "separated" and "would separate them" at once."""
    from rlcloud.comparison import best

    for table in _verdict_cases():
        found = best(table, statistic=statistic)
        text = str(found)
        summary = summarize(table, statistic=statistic).set_index("agent.learning_rate")
        top = summary.loc[found.parameters["agent.learning_rate"]]
        second = summary.loc[found.runner_up["agent.learning_rate"]]  # type: ignore[index]
        assert found.value == top[statistic] >= second[statistic]
        assert (found.low, found.runner_up_high) == (top[f"{statistic}_low"], second[f"{statistic}_high"]) or (
            math.isnan(found.low) or math.isnan(found.runner_up_high)
        )
        if found.separated is None:
            assert "cannot be judged" in text and f"no {statistic} interval" in text
        elif found.separated:
            assert found.low > found.runner_up_high
            assert found.seeds_needed is None and "seeds each" not in text and text.count("separated") == 1
        else:
            assert found.low <= found.runner_up_high and "not separated: the intervals overlap" in text
        if found.seeds_needed is not None:
            # the summary's figure by the same statistic, never fewer seeds than the ones that did not separate
            assert found.seeds_needed == second["seeds_needed"] and found.seeds_needed > max(found.n, found.runner_up_n)
            assert f"~{found.seeds_needed} seeds each would separate them" in text
        if found.separated:
            assert row_reasons(second["notes"])["seeds_needed"] == "separated from the best already"


def test_a_notebook_table_never_shows_a_bare_nan(grid: Path) -> None:
    summary = rlcloud.compare(["fast-s1", "fast-s2", "slow-s1", "slow-s2"], results=str(grid), by="config")
    html = summary._repr_html_()
    assert "NaN" not in html and ">nan<" not in html and "<td>None</td>" not in html
    assert "(needs 4 seeds)" in html and "(capped returns)" in html and "(best by iqm)" in html
    assert summary["iqm_low"].isna().all()  # the data stay numbers for code
    table = rlcloud.compare(["fast-s1", "fast-s2", "slow-s1", "slow-s2"], results=str(grid))
    html = table._repr_html_()
    assert "NaN" not in html and "(no evaluation round)" in html
    import pickle

    again = pickle.loads(pickle.dumps(summary))  # a notebook's frame can be saved and read back
    pd.testing.assert_frame_equal(again, summary)
    assert type(again).__name__ == "ExplainedFrame" and "NaN" not in again._repr_html_()
    rows = records(summary)  # -o json: NaN is null and the row's notes say why
    assert rows[0]["iqm_low"] is None and "iqm: needs 4 seeds" in rows[0]["notes"]


def test_best_over_500_seeds_each_stays_small() -> None:
    """P(improvement)'s interval used 20,000 x n x n comparisons (MemoryError at 2 x 500 seeds)."""
    import tracemalloc

    from rlcloud.comparison import best

    rng = np.random.default_rng(0)
    table = _config_table({1e-3: rng.normal(300, 50, 500).tolist(), 3e-4: rng.normal(295, 50, 500).tolist()}, None)
    summarize(table)  # imports and caches outside the measurement
    tracemalloc.start()
    try:
        found = best(table)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (
        found.probability_of_improvement_low < found.probability_of_improvement < found.probability_of_improvement_high
    )
    assert peak < 120 * 2**20, f"{peak / 2**20:.0f} MiB"  # 500 x 500 x 20,000 booleans alone are 5 GB


def test_time_to_threshold_per_run_and_per_configuration_with_censored_runs(tmp_path: Path) -> None:
    from rlcloud.comparison import time_to_threshold

    root = tmp_path / "results"
    # returns climb 10 per episode (10 timesteps, 0.5 s each); the mean of the last 5 reaches 100 when they
    # are 80..120: the 13th episode, timestep 130, 6.5 s
    ramp = [10.0 * i for i in range(30)]
    write_run(root, "a-s1", seed=1, returns=ramp)
    write_run(root, "a-s2", seed=2, returns=[r + 20 for r in ramp])  # 2 episodes earlier
    write_run(root, "a-s3", seed=3, returns=[5.0] * 30)  # never: censored at its 300 timesteps
    for seed in (1, 2, 3, 4, 5):
        write_run(root, f"b-s{seed}", lr=3e-4, seed=seed, returns=[r + 10 * seed for r in ramp])
    runs = ["a-s1", "a-s2", "a-s3", *(f"b-s{s}" for s in (1, 2, 3, 4, 5))]
    table = rlcloud.compare(runs, results=str(root), threshold=100.0, window=5).set_index("run")
    assert table.loc["a-s1", "threshold_timesteps"] == 130 and table.loc["a-s1", "threshold_wall_time"] == 6.5
    assert table.loc["a-s2", "threshold_timesteps"] == 110
    assert math.isnan(table.loc["a-s3", "threshold_timesteps"])
    # one lucky first episode is not a mean over the window
    assert all(math.isnan(v) for v in time_to_threshold([{"timestep": 10, "return": 500.0}], 100.0, window=5))
    summary = rlcloud.compare(runs, results=str(root), threshold=100.0, window=5, by="config")
    rows = {r["agent.learning_rate"]: r for r in summary.to_dict("records")}
    a, b = rows[1e-3], rows[3e-4]
    # 2 of 3 reached it: the share with its exact binomial interval; the median counts the censored run as
    # later than both, so it is the later of the two; 3 seeds have no order-statistic interval
    assert a["reached"] == pytest.approx(2 / 3) and a["reached_low"] < 2 / 3 < a["reached_high"]
    assert a["threshold_timesteps"] == 130 and math.isnan(a["threshold_timesteps_low"])
    assert row_reasons(a["notes"])["threshold_timesteps_low"] == "needs 5 seeds"
    assert b["reached"] == 1.0 and b["threshold_timesteps"] == 100 and b["threshold_wall_time"] == 5.0
    assert (b["threshold_timesteps_low"], b["threshold_timesteps_high"]) == (80, 120)  # min..max of 5
    # most never reach it: no median, and the row says why
    late = rlcloud.compare(runs, results=str(root), threshold=275.0, window=5, by="config")
    first = late.iloc[0]
    assert math.isnan(first["threshold_timesteps"])
    assert row_reasons(first["notes"])["threshold_timesteps"] == "half the seeds or more never reached it"
    assert "NaN" not in late._repr_html_()


def test_cli_compare_threshold_and_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlcloud.cli import main

    monkeypatch.setenv("COLUMNS", "300")
    root = tmp_path / "results"
    ramp = [10.0 * i for i in range(30)]
    for seed in (1, 2, 3):
        write_run(root, f"s{seed}", seed=seed, returns=[r + 10 * seed for r in ramp])
    runs = ["s1", "s2", "s3", "--results", str(root)]
    assert main(["compare", *runs, "--threshold", "100", "--window", "5"]) == 0
    out = capsys.readouterr().out
    assert "threshold_timesteps" in out and "reached" in out and "timesteps to it" in out
    assert "100% [29%, 100%]" in out  # 3 of 3 reached it: the exact binomial interval
    assert "110 (needs 5 seeds)" in out  # the median time, and why it has no interval at 3 seeds
    assert main(["compare", *runs, "--threshold", "100", "--window", "5", "--by", "config", "-o", "json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["threshold_timesteps"] == 110 and row["threshold_timesteps_low"] is None
    assert "threshold_timesteps_low: needs 5 seeds" in row["notes"]
    assert main(["compare", *runs, "--window", "0"]) == 2
    assert "--window" in capsys.readouterr().err
