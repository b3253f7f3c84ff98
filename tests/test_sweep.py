"""Sweeps: the spec and its trials, the median stopping rule, and real local sweeps with tiny budgets."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rlcloud import Experiment, ExperimentStatus, SpecError, Sweep, SweepSpec
from rlcloud.backend import RoleStatus
from rlcloud.cli import main
from rlcloud.local.sweeper import failure_signature
from tests.support.sweeps import CARTPOLE_SPEC, TINY, _broken_environment, _sweep

# ------------------------------------------------------------------------------------------ the spec


def test_grid_times_seeds_gives_every_combination_with_stable_names() -> None:
    sweep = _sweep(parameters={"agent.learning_rate": [1e-3, 3e-4], "agent.batch_size": [5, 10]}, seeds=2)
    trials = sweep.trials()
    assert len(trials) == sweep.num_trials == 8
    assert [t.name for t in trials[:2]] == ["lr1e-3--bs5--seed1", "lr1e-3--bs5--seed2"]
    assert {(t.params["agent.learning_rate"], t.params["agent.batch_size"], t.seed) for t in trials} == {
        (lr, bs, seed) for lr in (1e-3, 3e-4) for bs in (5, 10) for seed in (1, 2)
    }
    for trial in trials:
        assert trial.spec.name == trial.name
        assert trial.spec.seed == trial.seed
        assert trial.spec.agent["learning_rate"] == trial.params["agent.learning_rate"]
    assert [t.name for t in _sweep(parameters={"agent.learning_rate": [1e-3, 3e-4], "agent.batch_size": [5, 10]},
                                   seeds=2).trials()] == [t.name for t in trials]  # fmt: skip
    assert sweep.trial(5).name == trials[5].name and sweep.trial(5).params == trials[5].params


def test_random_search_is_seeded_and_in_range() -> None:
    fields = {"parameters": {"agent.learning_rate": {"loguniform": [1e-5, 1e-2]}}, "samples": 5, "seeds": [7]}
    first, again = _sweep(**fields).trials(), _sweep(**fields).trials()
    assert [t.params for t in first] == [t.params for t in again]
    assert all(1e-5 <= t.params["agent.learning_rate"] <= 1e-2 for t in first)
    assert len({t.name for t in first}) == 5
    other = _sweep(**fields, sampler_seed=1).trials()
    assert [t.params for t in other] != [t.params for t in first]


def test_trial_names_are_dns_labels_even_for_long_values() -> None:
    sweep = _sweep(parameters={"environment.level": ["CartPole-v1", "CartPole-v0"], "agent.discount": [0.99, 0.9]})
    for trial in sweep.trials():
        assert len(trial.name) <= 40
        assert trial.name[0].isalpha() and trial.name.replace("-", "").isalnum() and trial.name == trial.name.lower()
    long = _sweep(parameters={"agent.a_very_long_parameter_name_indeed": ["x" * 50, "y" * 50]})
    names = [t.name for t in long.trials()]
    assert len(set(names)) == 2 and all(len(n) <= 40 for n in names)


def _assert_unique_labels(names: list[str]) -> None:
    assert len(set(names)) == len(names), names
    for name in names:
        assert 0 < len(name) <= 40 and name[0].isalpha() and name == name.lower(), name
        assert name.replace("-", "").isalnum() and not name.endswith("-"), name


@pytest.mark.parametrize(
    "values",
    [
        ["a", "a", "a-1"],  # the numbered duplicate was the third trial's name
        ["a", "a", "a-1", "a-1-1", "a-0"],
        ["A", "a", "a-2", "a-1"],  # equal once lower-cased
        ["x" * 60 + "1", "x" * 60 + "2", "x" * 60 + "1"],  # equal once shortened, and repeated
        ["1", "1.0", "1-1", "1", "t1"],  # a name starting with a digit gets a "t"
        ["a b", "a-b", "a_b", "a.b"],
    ],
)
@pytest.mark.parametrize("seeds", [1, 2])
def test_trial_names_are_unique_whatever_the_values(values: list[Any], seeds: int) -> None:
    sweep = _sweep(parameters={"description": values}, seeds=seeds)
    _assert_unique_labels([name for name, _, _ in sweep.trial_table()])
    assert [t.name for t in sweep.trials()] == [name for name, _, _ in sweep.trial_table()]


def test_trial_names_are_unique_for_random_values() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    words = st.sampled_from(["a", "a-1", "a-0", "A", "a-1-1", "b", "-", "1", "a--1", "x" * 45])

    @settings(max_examples=150, deadline=None)
    @given(st.lists(words, min_size=2, max_size=8), st.integers(1, 3))
    def check(values: list[str], seeds: int) -> None:
        sweep = _sweep(parameters={"description": values}, seeds=seeds)
        _assert_unique_labels([name for name, _, _ in sweep.trial_table()])

    check()


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"parameters": {"agent.learning_rate": []}}, "parameters", "at least one value"),
        ({"parameters": {"agent.learning_rate": {"uniform": [1, 0]}}}, "parameters", "LOW < HIGH"),
        ({"parameters": {"agent.learning_rate": {"loguniform": [0, 1]}}}, "parameters", "LOW > 0"),
        ({"parameters": {"agent.learning_rate": {"normal": [0, 1]}}}, "parameters", "normal"),
        ({"parameters": {"agent.learning_rate": 3}}, "parameters", "list of values"),
        ({"parameters": {"seed": [1, 2]}}, "parameters", "seeds:"),
        ({"parameters": {"bad key!": [1]}}, "parameters", "dotted field"),
        ({"parameters": {"agent.learning_rate": {"uniform": [0, 1]}}}, "samples", "samples: N"),
        ({"samples": 3}, "samples", "distribution"),
        ({"seeds": 0}, "seeds", "1..10000"),
        ({"seeds": True}, "seeds", "boolean"),
        ({"seeds": [1, 1]}, "seeds", "distinct"),
        ({"seeds": [-1]}, "seeds", "0.."),
        ({"parameters": {"agent.x": list(range(101))}, "seeds": 100}, "seeds", "split the sweep"),
        ({"name": "Bad_Name"}, "name", "DNS-1123"),
        ({"max_parallel": 0}, "max_parallel", "greater than or equal to 1"),
    ],
)
def test_bad_sweeps_name_the_field(fields: dict[str, Any], field: str, says: str) -> None:
    with pytest.raises(SpecError) as info:
        _sweep(**fields)
    assert info.value.fields[0].startswith(field), info.value
    assert says in str(info.value)


def test_an_invalid_trial_is_named_before_anything_starts() -> None:
    sweep = _sweep(parameters={"num_workers": [2, 0]})
    with pytest.raises(SpecError) as info:
        sweep.trials()
    assert info.value.fields == ["parameters.num_workers"]
    assert "trial nw0" in str(info.value)


def test_a_problem_every_trial_shares_is_said_once() -> None:
    sweep = _sweep(parameters={"learning_rate": [1e-3, 3e-4]}, seeds=2)  # agent.learning_rate, mistyped
    with pytest.raises(SpecError) as info:
        sweep.trials()
    assert info.value.fields == ["parameters.learning_rate"], info.value  # not once per trial
    assert "every trial (4): unknown field; did you mean 'agent.learning_rate'?" in str(info.value)
    seeds = _sweep(parameters={"num_workers": [2, 0, -1]}, seeds=3)  # two bad values, three seeds each
    with pytest.raises(SpecError) as info:
        seeds.trials()
    assert info.value.fields == ["parameters.num_workers"], info.value  # one problem, both values
    assert "trials nw0--seed1, nw0--seed2, nw0--seed3 and 3 more: Input should be greater" in str(info.value)
    assert "(got 0, -1)" in str(info.value)


def test_distributed_trials_are_refused_on_a_cluster() -> None:
    from rlcloud.cluster import Cluster

    sweep = Sweep(
        _sweep(experiment={"name": "d", "environment": {"type": "gym", "level": "CartPole-v1"},
                           "agent": {"type": "ppo", "batch_size": 5}, "run_mode": "distributed", "num_workers": 2,
                           "episodes": 10}),
        results="gs://bucket/rl",
        cluster=Cluster.kubernetes(api_client=object()),
    )  # fmt: skip
    with pytest.raises(SpecError, match="Indexed Job"):
        sweep.validate()


def test_sweep_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    (tmp_path / "cartpole.yaml").write_text(CARTPOLE_SPEC.read_text())
    path.write_text(
        "kind: Sweep\nname: lr\nexperiment: cartpole.yaml\nparameters:\n  agent.learning_rate: [1e-3, 3e-4]\n"
        "seeds: 2\nearly_stopping: {grace_timesteps: 100, min_trials: 2}\n"
    )
    spec = SweepSpec.from_file(path, max_parallel=3)
    assert spec.max_parallel == 3 and spec.num_trials == 4
    assert SweepSpec.from_yaml_text(spec.to_yaml()) == spec


@pytest.mark.parametrize(
    "reference",
    ["{outside}/cartpole.yaml", "../outside/cartpole.yaml", "link.yaml", "key.json", "kubeconfig.yaml", "cluster.yaml"],
)
def test_a_sweeps_experiment_file_follows_the_reference_rules(tmp_path: Path, reference: str) -> None:
    """Only a file beside the sweep, in ./configs/experiments or the bundled configs; never a key file,
    a kubeconfig or a cluster spec, and none of their content in the message (issue 25)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "cartpole.yaml").write_text(CARTPOLE_SPEC.read_text())
    here = tmp_path / "project"
    here.mkdir()
    (here / "link.yaml").symlink_to(outside / "cartpole.yaml")
    (here / "key.json").write_text(json.dumps({"type": "service_account", "private_key": "SECRET-KEY"}))
    (here / "kubeconfig.yaml").write_text("kind: Config\nclusters: []\nusers: [{name: u, user: {token: SECRET-KEY}}]\n")
    (here / "cluster.yaml").write_text("kind: Cluster\nname: c\nnum_nodes: 1\nmachine_type: n1-standard-4\n")
    path = here / "sweep.yaml"
    path.write_text(f"kind: Sweep\nname: s\nexperiment: {reference.format(outside=outside)}\nseeds: 2\n")
    with pytest.raises(SpecError) as caught:
        SweepSpec.from_file(path)
    assert caught.value.fields == ["experiment"] and "SECRET" not in str(caught.value), str(caught.value)
    assert main(["sweep", "validate", str(path)]) == 2


def test_cli_validates_a_sweep_built_from_an_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sweep", "validate", str(CARTPOLE_SPEC), "--seeds", "3", "--grid", "agent.learning_rate=1e-3,3e-4"])
    assert code == 0
    assert "cartpole-ppo-sweep: 6 trials OK (2 configurations)" in capsys.readouterr().out
    assert main(["sweep", "validate", str(CARTPOLE_SPEC), "--grid", "agent.learning_rate"]) == 2
    assert "--grid" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- real local sweeps


@pytest.mark.training
def test_local_grid_sweep_runs_every_trial(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _sweep(
        parameters={"agent.learning_rate": [1e-3, 3e-4], "agent.batch_size": [5, 10]},
        seeds=2,
        max_parallel=2,
    )
    spec = spec.model_copy(update={"experiment": spec.experiment.replace(**TINY)})
    sweep = Sweep(spec, results=str(tmp_path / "results")).start()
    status = sweep.wait(timeout=900)
    assert status.state == "succeeded", status.to_dict()
    assert status.counts() == {"succeeded": 8}
    for trial in status.trials:
        assert trial.progress["timestep"] >= 300
        # each trial is an ordinary experiment: attach finds it, its spec says its parameters
        exp = Experiment.attach(trial.name, results=sweep.location)
        assert exp.spec.agent["learning_rate"] == trial.params["agent.learning_rate"]
        assert exp.spec.seed == trial.seed
    # the verbs rhyme: an experiment's results() is its row of the sweep's results()
    row = exp.results()
    assert list(row["run"]) == [exp.name] and row["objective"].notna().all()
    frame = sweep.results()
    assert len(frame) == 8
    rows = set(zip(frame["agent.learning_rate"], frame["agent.batch_size"], frame["seed"], strict=True))
    assert rows == {(lr, bs, seed) for lr in (1e-3, 3e-4) for bs in (5, 10) for seed in (1, 2)}
    assert frame["objective"].notna().all()
    assert Sweep.list(results=str(tmp_path / "results")) == ["s"]
    again = Sweep.attach("s", results=str(tmp_path / "results"))
    assert [t.name for t in again.spec.trials()] == [t.name for t in spec.trials()]
    assert again.status().state == "succeeded"
    assert again.stop() is False  # finished: nothing to stop, as Experiment.stop says

    # the CLI: a table of the trials as experiments, and one TensorBoard over the whole sweep
    capsys.readouterr()
    assert main(["experiment", "list", "--results", sweep.location, "-o", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted(r["name"] for r in listed) == sorted(t.name for t in status.trials)
    assert {r["state"] for r in listed} == {"succeeded"} and all(r["timestep"] >= 300 for r in listed)
    assert main(["tensorboard", "s", "--results", str(tmp_path / "results"), "--print-only"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("s/") for line in printed) == 8

    # the sweep's name is the handle wherever results are read
    import rlcloud

    root = str(tmp_path / "results")
    assert list(rlcloud.compare(sweep)["run"]) == [t.name for t in spec.trials()]
    assert main(["sweep", "results", "s", "--results", root]) == 0
    out = capsys.readouterr().out
    assert "s: trials" in out and "s: over seeds, per configuration" in out
    assert main(["compare", "s", "--results", root, "-o", "json"]) == 0
    assert [r["n"] for r in json.loads(capsys.readouterr().out)] == [2, 2, 2, 2]
    trial = spec.trials()[0].name
    assert main(["compare", f"s/{trial}", "--results", root, "-o", "json"]) == 0
    assert [r["run"] for r in json.loads(capsys.readouterr().out)] == [trial]
    # piped, a table keeps every column: `rlcloud experiment list | cat`
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    piped = subprocess.run(
        [sys.executable, "-m", "rlcloud", "experiment", "list", "--results", sweep.location],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    rows = [line for line in piped.splitlines() if any(t.name in line for t in status.trials)]
    assert len(rows) == 8 and all("succeeded" in row for row in rows)
    assert all(column in piped.splitlines()[1] for column in ("name", "state", "timestep", "results"))


@pytest.mark.training
@pytest.mark.parametrize("rule", ["median", "asha"])
def test_early_stopping_stops_a_configuration_that_cannot_learn(tmp_path: Path, rule: str) -> None:
    # episodes capped at 8 steps cannot return more than 8; uncapped CartPole returns ~20 from the start
    spec = _sweep(
        parameters={"max_timesteps_per_episode": [500, 8]},
        seeds=2,
        max_parallel=2,
        early_stopping={"rule": rule, "grace_timesteps": 1000, "min_trials": 2, "check_seconds": 1},
    )
    spec = spec.model_copy(update={"experiment": spec.experiment.replace(**{**TINY, "total_timesteps": 4000})})
    sweep = Sweep(spec, results=str(tmp_path / "results")).start()
    status = sweep.wait(timeout=900)
    by_cap = {t.params["max_timesteps_per_episode"]: [] for t in status.trials}  # type: dict[int, list[Any]]
    for trial in status.trials:
        by_cap[trial.params["max_timesteps_per_episode"]].append(trial)
    if rule == "median":  # the first two trials have fewer than min_trials earlier ones: never stopped
        assert all(t.state == "succeeded" and t.progress["timestep"] >= 4000 for t in by_cap[500])
    for trial in by_cap[8]:
        assert trial.state == "stopped early", trial
        assert ("median stopping rule" if rule == "median" else "(ASHA)") in (trial.reason or "")
        # decided at the first decision point, and stopped there (one environment: a timestep a step)
        assert trial.progress["timestep"] == 1000
        record = json.loads((Path(sweep.location) / f"decisions/{rule}/000000001000/{trial.name}.json").read_text())
        assert record["decision"] == "stop" and record["value"] <= 8
    assert status.state == "succeeded"


# ------------------------------------------------------------------------------------------- fail-fast


def test_failures_of_one_kind_share_a_signature_whatever_their_numbers() -> None:
    def failed(trial: str, line: str, code: int = 3) -> str:
        role = RoleStatus("single", 0, "failed", exit_code=code, reason=f"exit code {code}: {line}")
        return failure_signature(ExperimentStatus(trial, "failed", [role]), trial)

    a = failed("lr1e-3--seed1", "RuntimeError: lr1e-3--seed1 diverged at timestep 1200 (loss 3.5e+08)")
    b = failed("lr3e-4--seed2", "RuntimeError: lr3e-4--seed2 diverged at timestep 977 (loss 12.25)")
    assert a == b == "exit code 3: RuntimeError: <trial> diverged at timestep # (loss #)"
    assert failed("x", "RuntimeError: other") != failed("x", "RuntimeError: other", code=2)
    assert failed("x", "MemoryError: ...") != failed("x", "RuntimeError: other")


@pytest.mark.processes
@pytest.mark.slow
def test_a_broken_local_sweep_stops_launching_after_max_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _sweep(seeds=6, max_parallel=2, max_failures=2, smoke_timesteps=0)
    base = spec.experiment.replace(**TINY, environment=_broken_environment(tmp_path, monkeypatch))
    sweep = Sweep(spec.model_copy(update={"experiment": base}), results=str(tmp_path / "results")).start()
    status = sweep.wait(timeout=900)
    counts = status.counts()
    # the second failure of one kind stops the launches; the trial running beside it may fail too
    assert 2 <= counts["failed"] <= 3 and counts["queued"] == 6 - counts["failed"], counts
    assert status.state == "failed"
    assert "stopped launching trials" in (status.message or "") and "no simulator licence" in (status.message or "")
    assert "max_failures is 2" in (status.message or "")


@pytest.mark.processes
@pytest.mark.slow
def test_a_broken_base_experiment_fails_at_most_max_failures_trials_beside_the_smoke_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # smoke_timesteps 300 by default: until the first trial has trained that, 2 trials (max_failures) start
    spec = _sweep(seeds=5, max_parallel=4, max_failures=2)
    base = spec.experiment.replace(**TINY, environment=_broken_environment(tmp_path, monkeypatch))
    sweep = Sweep(spec.model_copy(update={"experiment": base}), results=str(tmp_path / "results")).start()
    status = sweep.wait(timeout=900)
    counts = status.counts()
    # the trial beside the smoke trial fails too, or is stopped first when the smoke trial fails
    assert counts["queued"] == 3 and counts["failed"] + counts.get("stopped", 0) == 2, counts
    assert status.trials[0].state == "failed"
    assert status.state == "failed"
    assert "failed before training 300 timesteps" in (status.message or "")
    # the CLI on the finished sweep: its counts in words, and a stop that says there was nothing to stop
    target = ["--results", str(tmp_path / "results")]
    capsys.readouterr()
    assert main(["sweep", "status", "s", *target]) == 0
    out = capsys.readouterr().out
    assert "s: failed  5 trials: " in out and "3 queued" in out and "{" not in out
    assert main(["sweep", "stop", "s", *target]) == 0
    assert capsys.readouterr().out == "s has finished (failed); nothing to stop\n"
    assert sweep.stop() is False and sweep.nothing_to_do == "s has finished (failed); nothing to stop"


@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.training
def test_the_trials_beside_a_failed_smoke_trial_are_stopped_and_none_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an environment that fails in the first trial only (trials run in their work directory) and is
    # CartPole in the others
    (tmp_path / "firstbroken.py").write_text(
        textwrap.dedent(
            """
            import os

            import gymnasium

            class Env(gymnasium.Wrapper):
                def __init__(self):
                    if os.path.basename(os.getcwd()) == "seed1":
                        raise RuntimeError("no simulator licence")
                    super().__init__(gymnasium.make("CartPole-v1"))
            """
        )
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the sweeper and its trials inherit it
    spec = _sweep(seeds=4, max_parallel=2)
    # the second trial trains until it is stopped (a long budget: it is still running when the first fails)
    base = spec.experiment.replace(**{**TINY, "total_timesteps": 100_000}, environment={"type": "firstbroken:Env"})
    sweep = Sweep(spec.model_copy(update={"experiment": base}), results=str(tmp_path / "results")).start()
    status = sweep.wait(timeout=900)
    assert [t.state for t in status.trials] == ["failed", "stopped", "queued", "queued"], status.to_dict()
    assert status.state == "failed"
    assert "the first trial (seed1) failed before training 300 timesteps" in (status.message or "")
    # its checkpoint, if it had trained at all, is where a later start of the sweep resumes it
    assert (tmp_path / "results" / "s" / "seed2" / "history.jsonl").exists()


def test_wait_with_progress_shows_a_bar_of_trials_running_and_the_best(capsys: pytest.CaptureFixture[str]) -> None:
    from rlcloud.backend import SweepStatus, TrialStatus
    from rlcloud.display import SweepBar

    def trial(index: int, state: Any, ret: float | None) -> TrialStatus:
        return TrialStatus(index, f"lr{index}", {}, 1, state, {"mean_return": ret, "timestep": 100})

    bar = SweepBar("lr-sweep", 4)
    bar(SweepStatus("lr-sweep", "running", [trial(0, "running", None), trial(1, "queued", None)]))
    bar(
        SweepStatus(
            "lr-sweep",
            "running",
            [trial(0, "succeeded", 41.5), trial(1, "stopped early", 12.0), trial(2, "running", 60.25)],
        )
    )
    bar.close()
    shown = capsys.readouterr().err.replace("\r", "\n").splitlines()
    assert any("lr-sweep" in line and "0/4" in line and "running=1" in line and "best=-" in line for line in shown)
    last = [line for line in shown if "2/4" in line][-1]
    assert "running=1" in last and "best=60.2 (lr2)" in last


# ------------------------------------------------------------------ following a sweep without a terminal


@pytest.mark.processes
@pytest.mark.slow
def test_a_followed_sweep_without_a_terminal_prints_its_figures_every_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rlcloud.cli.sweep import _follow

    spec = _sweep(seeds=2, max_parallel=1, max_failures=0, smoke_timesteps=0)
    base = spec.experiment.replace(**TINY, environment=_broken_environment(tmp_path, monkeypatch))
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(spec.model_copy(update={"experiment": base}).to_yaml())
    results = str(tmp_path / "results")
    assert main(["sweep", "start", str(spec_file), "--results", results]) == 0
    # the commands it suggests find the sweep: they carry --results
    assert f"follow it with: rlcloud sweep status s --results {results}" in capsys.readouterr().out
    sweep = Sweep.attach("s", results=results)
    status = _follow(sweep, quiet=False, interval=0.0)  # every poll, not every 30 s
    assert status.finished
    lines = capsys.readouterr().err.splitlines()
    figures = [line for line in lines if line.startswith("s: running · 2 trials: ")]
    assert figures, lines  # the sweep's own line, beside the trials' changes of state
    assert all("{" not in line for line in figures)


@pytest.mark.training
@pytest.mark.processes
def test_ctrl_c_on_a_followed_sweep_stops_it_and_says_how_to_resume(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    spec = _sweep(seeds=1, max_parallel=1, smoke_timesteps=0)
    spec = spec.model_copy(update={"experiment": spec.experiment.replace(**{**TINY, "total_timesteps": 10**8})})
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(spec.to_yaml())
    results = str(tmp_path / "results")
    argv = ["sweep", "run", str(spec_file), "--results", results]
    proc = subprocess.Popen(
        [sys.executable, "-c", f"import sys; from rlcloud.cli import main; sys.exit(main({argv!r}))"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ.copy(),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a shell's foreground job
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # a trial has started: the sweep is being followed
        seen.append(line)
        if ": running, timestep" in line:
            break
    else:
        raise AssertionError("".join(seen))
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()
    proc.stdout.close()
    assert proc.wait(120) == 130, out
    assert "Traceback" not in out
    assert "interrupted: stopping the sweep" in out
    assert f"to resume it (finished trials are kept, the others resume from their checkpoints), run the same " \
        f"command again: rlcloud sweep run {spec_file} --results {results}" in out  # fmt: skip
    status = Sweep.attach("s", results=results).status()
    assert [t.state for t in status.trials] == ["stopped"]
    assert status.state == "stopped", status  # not "succeeded": its trial has more to train
    # nothing left running: the trial's warm worker ends once its trial has checkpointed
    from rlcloud.local.state import RunState, ours
    from tests.support.waiting import eventually

    trial_dir = tmp_path / "results" / "s" / spec.trials()[0].name
    identity = RunState(trial_dir).roles()[0].identity
    eventually(lambda: not ours(identity, within=trial_dir), timeout=60, what="the worker to end after the stop")
