"""Sweeps that grow (issue 45): more seeds or grid values, a larger budget for the best, failed trials run
again; with the same sweep identity, recorded step by step, and crash-safe. The spec and record here; real
local sweeps below (training); on Kubernetes in tests/k8s/test_sweep_growth_on_k8s.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from rlcloud import SpecError, Sweep, SweepSpec
from rlcloud.cli import main
from rlcloud.comparison import Best
from rlcloud.record import grow_sweep_recorded, read_history, read_sweep_growth, start_sweep_recorded
from rlcloud.specs.sweep import Growth
from rlcloud.storage import open_store
from tests.support.sweeps import TINY, _sweep
from tests.support.waiting import eventually


def _pairs(spec: SweepSpec) -> list[tuple[str, int]]:
    return [(json.dumps(params, sort_keys=True), seed) for _name, params, seed in spec.trial_table()]


def test_growth_appends_trials_and_keeps_the_names_and_indices_it_had() -> None:
    spec = _sweep(parameters={"agent.learning_rate": [1e-3, 3e-4]}, seeds=1)
    before = spec.trial_table()
    grown = spec.with_growth([Growth(seeds=[2, 3]), Growth(parameters={"agent.learning_rate": [1e-4, 1e-3]})])
    table = grown.trial_table()
    assert table[: len(before)] == before  # the first trials: same names, same index (no "--seed1" added)
    assert [name for name, _p, _s in table[2:]] == [
        "lr1e-3--seed2", "lr1e-3--seed3", "lr3e-4--seed2", "lr3e-4--seed3",  # step 1: seeds for every config
        "lr1e-4--seed1", "lr1e-4--seed2", "lr1e-4--seed3",  # step 2: the new value with every seed; 1e-3 is there
    ]  # fmt: skip
    pairs = _pairs(grown)
    assert len(set(pairs)) == len(pairs) == grown.num_trials == 9  # 0 duplicate (config, seed) pairs
    assert len({name for name, _p, _s in table}) == 9
    # the same spec and the same steps give the same trials anywhere: through YAML, and trial by trial
    again = SweepSpec.from_yaml_text(grown.to_yaml())
    assert again.trial_table() == table
    assert [again.trial(i).name for i in range(9)] == [name for name, _p, _s in table]
    assert again.trial(5).spec.seed == 3 and again.trial(5).spec.agent["learning_rate"] == 3e-4


def test_a_larger_budget_changes_those_trials_only_and_the_identity_never() -> None:
    from rlcloud.specs.identity import sweep_fingerprint

    spec = _sweep(parameters={"agent.learning_rate": [1e-3, 3e-4]}, seeds=2)
    names = [t.name for t in spec.trials()]
    grown = spec.with_growth([Growth(trials=names[:2], total_timesteps=10**6)])
    budgets = {t.name: t.spec.total_timesteps for t in grown.trials()}
    assert budgets[names[0]] == budgets[names[1]] == 10**6
    assert {budgets[n] for n in names[2:]} == {spec.experiment.total_timesteps}
    assert grown.trial_table() == spec.trial_table()  # the same trials, under the same names
    assert sweep_fingerprint(grown) == sweep_fingerprint(spec)  # the same sweep


@pytest.mark.parametrize(
    ("step", "says"),
    [
        ({"parameters": {"agent.batch_size": [5]}}, "not a field of this sweep's grid"),
        ({"trials": ["nope"], "total_timesteps": 5000}, "no trial named nope"),
        ({"seeds": [4, 4]}, "distinct"),
        ({"seeds": [-1]}, "0..4294967295"),
        ({"trials": ["lr1e-3--seed1"]}, "go together"),
        ({}, "adds seeds or parameter values"),
    ],
)
def test_bad_growth_steps_name_the_field(step: dict[str, Any], says: str) -> None:
    data = {"parameters": {"agent.learning_rate": [1e-3, 3e-4]}, "seeds": 2, "growth": [step]}
    with pytest.raises(SpecError, match="growth") as caught:
        _sweep(**data)
    assert says in str(caught.value)


def test_a_growth_is_recorded_once_and_a_crash_in_the_middle_is_completed_by_the_next_call(tmp_path: Path) -> None:
    spec = _sweep(parameters={"agent.learning_rate": [1e-3, 3e-4]}, seeds=1)
    store = open_store(str(tmp_path / "s"))
    assert start_sweep_recorded(store, spec, lambda: True, where="here")
    applied: list[int] = []

    def plan(current: SweepSpec) -> Growth | None:
        return None if 2 in [s for g in current.growth for s in g.seeds] else Growth(seeds=[2])

    def crash(grown: SweepSpec) -> None:
        raise KeyboardInterrupt("killed between the record and the start")

    with pytest.raises(KeyboardInterrupt):
        grow_sweep_recorded(store, spec, plan, crash, where="here")
    assert [g.seeds for g in read_sweep_growth(store)] == [[2]]
    assert [h["event"] for h in read_history(store)] == ["created"]  # not grown until it ran
    grown, added = grow_sweep_recorded(store, spec, plan, lambda g: applied.append(g.num_trials), where="there")
    assert added == ["lr1e-3--seed2", "lr3e-4--seed2"] and applied == [4]
    grown, again = grow_sweep_recorded(store, spec, plan, lambda g: applied.append(g.num_trials), where="there")
    assert again == [] and applied == [4, 4]  # idempotent: applied again (runs what is missing), recorded once
    history = read_history(store)
    assert [(h["event"], h.get("step")) for h in history] == [("created", None), ("grown", 1)]
    assert history[1]["growth"] == {"seeds": [2]} and history[1]["added"] == added
    assert "@" in history[1]["who"] and history[1]["trials"] == 4 and history[1]["time"] > 0
    assert os.listdir(tmp_path / "s" / "growth") == ["000001.json"]
    # a start with the original file goes on with the growth of record
    from rlcloud.record import sweep_of_record

    assert sweep_of_record(store, spec).trial_table() == grown.trial_table()


def test_a_grown_sweep_is_refused_when_it_is_another_sweep(tmp_path: Path) -> None:
    from rlcloud.specs.identity import ChangedSweepError

    spec = _sweep(parameters={"agent.learning_rate": [1e-3, 3e-4]}, seeds=1)
    store = open_store(str(tmp_path / "s"))
    with pytest.raises(Exception, match="start it first"):
        grow_sweep_recorded(store, spec, lambda s: Growth(seeds=[2]), lambda g: None, where="here")
    start_sweep_recorded(store, spec, lambda: True, where="here")
    other = _sweep(parameters={"agent.learning_rate": [1e-2]}, seeds=1)
    with pytest.raises(ChangedSweepError):
        grow_sweep_recorded(store, other, lambda s: Growth(seeds=[2]), lambda g: None, where="here")
    assert read_sweep_growth(store) == []


def test_best_names_the_command_that_follows_its_advice() -> None:
    found = Best("iqm", {"agent.learning_rate": 1e-3}, 20.0, 18.0, 22.0, 2, seeds_needed=8)
    found.runner_up, found.runner_up_value, found.runner_up_low, found.runner_up_high = {"lr": 3e-4}, 19.0, 17.0, 21.0
    assert "~8 seeds each would separate them at this spread" in str(found)
    found.next_step = "rlcloud sweep extend cartpole-lr --seeds 8"
    assert str(found).endswith("~8 seeds each would separate them at this spread (rlcloud sweep extend cartpole-lr "
                               "--seeds 8)")  # fmt: skip


def test_extend_refuses_what_adds_nothing_valid_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = Sweep(_sweep(parameters={"agent.learning_rate": [1e-3, 3e-4]}), results=str(tmp_path))
    for kwargs, field in [({}, "seeds"), ({"top": 2}, "top"), ({"top": 1, "total_timesteps": 9, "seeds": 3}, "top")]:
        with pytest.raises(SpecError, match=field):
            sweep.extend(**kwargs)
    with pytest.raises(SpecError, match="state"):
        sweep.rerun("running")
    assert main(["sweep", "extend", "nothing-here", "--seeds", "3", "--results", str(tmp_path)]) != 0
    assert not (tmp_path / "nothing-here" / "growth").exists()


# ------------------------------------------------------------------------------------ real local sweeps


def _snapshot(location: Path, names: list[str]) -> dict[str, tuple[int, bytes]]:
    """Every file of these trials: its mtime and bytes (a trial retrained would change them)."""
    return {
        str(p): (p.stat().st_mtime_ns, p.read_bytes())
        for name in names
        for p in sorted((location / name).rglob("*"))
        if p.is_file()
    }


@pytest.mark.processes
@pytest.mark.training
def test_a_finished_local_sweep_grows_its_seeds_then_trains_its_best_further(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _sweep(parameters={"agent.learning_rate": [1e-3, 3e-4]}, seeds=1, max_parallel=2)
    spec = spec.model_copy(update={"experiment": spec.experiment.replace(**TINY)})
    root = str(tmp_path / "results")
    sweep = Sweep(spec, results=root).start()
    assert sweep.wait(timeout=900).counts() == {"succeeded": 2}
    location = Path(sweep.location)
    first = _snapshot(location, ["lr1e-3", "lr3e-4"])
    # the CLI, as best()'s advice says it
    capsys.readouterr()
    assert main(["sweep", "extend", "s", "--seeds", "2", "--results", root]) == 0
    assert "2 trial(s) added: lr1e-3--seed2, lr3e-4--seed2; 4 trials in all" in capsys.readouterr().out
    attached = Sweep.attach("s", results=root)
    status = attached.wait(timeout=900)
    assert [(t.name, t.seed, t.state) for t in status.trials] == [
        ("lr1e-3", 1, "succeeded"), ("lr3e-4", 1, "succeeded"),
        ("lr1e-3--seed2", 2, "succeeded"), ("lr3e-4--seed2", 2, "succeeded"),
    ]  # fmt: skip
    assert _snapshot(location, ["lr1e-3", "lr3e-4"]) == first  # 0 finished trials retrained
    assert len(set(_pairs(attached.spec))) == 4
    assert len(attached.results()) == 4  # compare reads the grown sweep: n=2 per configuration
    advice = attached.best()
    assert advice.next_step is None or advice.next_step.startswith("rlcloud sweep extend s --seeds ")
    assert main(["sweep", "extend", "s", "--seeds", "2", "--results", root]) == 0  # again: nothing to add
    assert "nothing to add" in capsys.readouterr().out

    # the best configuration's two trials train on from their checkpoints; the others are left as they are
    best = attached._ranked_configs("iqm")[0]
    extended = attached.extend(top=1, total_timesteps=600)
    assert sorted(extended) == sorted(t.name for t in attached.spec.trials() if t.config == best)
    others = [t.name for t in attached.spec.trials() if t.name not in extended]
    kept = _snapshot(location, others)
    status = attached.wait(timeout=900)
    assert status.counts() == {"succeeded": 4}
    for trial in status.trials:
        steps = trial.progress["timestep"]
        assert (steps >= 600) == (trial.name in extended), (trial.name, steps)
        if trial.name in extended:
            log = (location / trial.name / "logs" / "single-0.log").read_text()
            assert "resumed from checkpoint" in log, log[-2000:]
            events = [h["event"] for h in read_history(open_store(str(location / trial.name)))]
            assert events == ["created", "resumed"]
    assert _snapshot(location, others) == kept
    events = [(h["event"], h.get("step")) for h in read_history(open_store(str(location)))]
    assert events == [("created", None), ("grown", 1), ("grown", 2)]


@pytest.mark.processes
@pytest.mark.training
def test_a_running_local_sweep_takes_new_trials_and_a_stopped_trial_reruns_from_its_checkpoint(
    tmp_path: Path,
) -> None:
    from rlcloud.local.state import read_sweep_state

    # long trials, one at a time: the first is still training when the sweep grows and when it is stopped
    spec = _sweep(parameters={"agent.learning_rate": [1e-3, 3e-4]}, seeds=1, max_parallel=1, smoke_timesteps=0)
    spec = spec.model_copy(update={"experiment": spec.experiment.replace(**{**TINY, "total_timesteps": 10**6})})
    root = str(tmp_path / "results")
    sweep = Sweep(spec, results=root).start()
    location = Path(sweep.location)
    statedir = location / ".rlcloud-sweep"
    scheduler = read_sweep_state(statedir)["pid"]

    def training() -> bool:
        return any((t.progress.timestep or 0) > 0 for t in sweep.status().trials if t.state == "running")

    eventually(training, timeout=600, what="the first trial training")
    assert sweep.extend(seeds=2) == ["lr1e-3--seed2", "lr3e-4--seed2"]
    state = read_sweep_state(statedir)
    assert state["pid"] == scheduler and state["grow_seen"] == state["grow_request"] == 1  # the same scheduler
    status = sweep.status()
    assert [(t.name, t.state) for t in status.trials] == [
        ("lr1e-3", "running"), ("lr3e-4", "queued"), ("lr1e-3--seed2", "queued"), ("lr3e-4--seed2", "queued"),
    ]  # fmt: skip
    # stopped while it trains (it checkpoints), then run again: it resumes from that checkpoint
    sweep.stop()
    after_stop = sweep.status()
    assert [t.name for t in after_stop.trials if t.state == "stopped"] == ["lr1e-3"], after_stop.to_dict()
    assert sweep.rerun("stopped") == ["lr1e-3"]
    log = location / "lr1e-3" / "logs" / "single-0.log"
    eventually(lambda: "resumed from checkpoint" in log.read_text(), timeout=600, what="the resume")
    history = read_history(open_store(str(location / "lr1e-3")))
    assert [h["event"] for h in history] == ["created", "resumed"]
    assert [h["event"] for h in read_history(open_store(sweep.location))] == ["created", "grown", "rerun"]
    sweep.stop()


def test_an_invalid_value_added_to_the_grid_is_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    spec = _sweep(parameters={"max_timesteps_per_episode": [500, 200]}, seeds=1)
    sweep = Sweep(spec, results=str(tmp_path))
    store = open_store(sweep.location)
    start_sweep_recorded(store, spec, lambda: True, where="here")  # as if started: its record exists
    with pytest.raises(SpecError, match="max_timesteps_per_episode"):
        sweep.extend(parameters={"max_timesteps_per_episode": [-5]})
    with pytest.raises(SpecError, match="not a field of this sweep's grid"):
        sweep.extend(parameters={"agent.learning_rate": [1e-3]})
    assert read_sweep_growth(store) == [] and not (tmp_path / "s" / "growth").exists()
    assert [h["event"] for h in read_history(store)] == ["created"]
