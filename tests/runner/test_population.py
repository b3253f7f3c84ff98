"""Population-based training decided in each trial from the store's data (rlcloud.runner.population).

The simulations drive real population members over a real (directory) store with synthetic curves, in many
interleavings and with one trial slowed, and check every record against a small reference of PBT written
here (Ray Tune's ``PopulationBasedTraining._quantiles`` and ``_explore``, the trials seen in index order).
The training tests run real sweep trials (CartPole, PPO) as an Indexed Job's pods run them.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlcloud.errors import SpecError
from rlcloud.runner.early_stop import record_name
from rlcloud.runner.population import (
    EXPLOIT,
    PopulationMember,
    decision_rng,
    explore,
    lineage,
    mark_exploits,
    quantiles,
    read_pbt_records,
    snapshot_name,
)
from rlcloud.specs import ExperimentSpec
from rlcloud.specs.sweep import Distribution, SweepSpec
from rlcloud.storage import open_store
from tests.support.sweeps import finish_trials, trial_processes

EXPERIMENT = {
    "name": "cartpole", "environment": {"type": "gym", "level": "CartPole-v1"},
    "agent": {"type": "ppo", "batch_size": 5, "learning_rate": 1e-3}, "run_mode": "multi-threaded",
    "num_workers": 4, "total_timesteps": 3000, "saver_frequency": None, "summary_frequency": None,
    "evaluation": None,
}  # fmt: skip
MUTATIONS: dict[str, Any] = {
    "agent.learning_rate": Distribution(loguniform=(1e-4, 1e-2)),
    "agent.discount": [0.95, 0.99, 0.999],
    "agent.entropy_regularization": Distribution(uniform=(0.0, 0.05)),
}


# ------------------------------------------------------------------------------------------ the reference


def _ray_quantiles(scores: list[tuple[str, float | None]], fraction: float) -> tuple[list[str], list[str]]:
    """Ray Tune 2.x ``PopulationBasedTraining._quantiles`` (ray/tune/schedulers/pbt.py), over (trial, score)."""
    trials = [(t, s) for t, s in scores if s is not None and math.isfinite(s)]
    trials.sort(key=lambda ts: ts[1])
    if len(trials) <= 1:
        return [], []
    num_trials_in_quantile = math.ceil(len(trials) * fraction)
    if num_trials_in_quantile > len(trials) / 2:
        num_trials_in_quantile = math.floor(len(trials) / 2)
    return [t for t, _ in trials[:num_trials_in_quantile]], [t for t, _ in trials[-num_trials_in_quantile:]]


def _ray_explore(config: dict[str, Any], mutations: dict[str, Any], rng: random.Random, p: float) -> dict[str, Any]:
    """Ray Tune's ``_explore`` with lists drawn anew (not shifted to a neighbour), keys in sorted order."""
    new = dict(config)
    for key in sorted(mutations):
        space = mutations[key]
        if isinstance(space, list) or space.choice is not None:
            new[key] = rng.choice(space if isinstance(space, list) else space.choice)
        elif not isinstance(config.get(key), int | float) or rng.random() < p:
            new[key] = float(f"{space.sample(rng):.6g}")
        else:
            value = config[key] * rng.choice([0.8, 1.2])
            new[key] = max(1, round(value)) if isinstance(config[key], int) else float(f"{value:.6g}")
    return new


def _reference(
    curves: list[Callable[[int], float | None]],
    steps: list[int],
    totals: list[int],
    initial: list[dict[str, Any]],
    *,
    interval: int,
    quantile: float,
    seed: int,
) -> dict[tuple[int, str], tuple[str, str | None, dict[str, Any] | None]]:
    """(point, trial) -> (decision, donor, explored values): the trials at each point in index order, each
    ranked among the earlier trials that reached the point and itself."""
    names = [f"t{i}" for i in range(len(curves))]
    params = [dict(p) for p in initial]
    out: dict[tuple[int, str], tuple[str, str | None, dict[str, Any] | None]] = {}
    point = interval
    while point < max(totals):
        at_point: list[tuple[str, float | None]] = []
        before = [dict(p) for p in params]  # what each trial trained with up to this point
        for i, curve in enumerate(curves):
            if point >= totals[i]:
                continue
            at_point.append((names[i], curve(-(-point // steps[i]) * steps[i])))
            bottom, top = _ray_quantiles(at_point, quantile)
            if names[i] in bottom:
                rng = decision_rng(seed, point, names[i])
                donor = rng.choice(top)
                explored = _ray_explore(before[names.index(donor)], MUTATIONS, rng, 0.25)
                params[i] = explored
                out[(point, names[i])] = (EXPLOIT, donor, explored)
            else:
                out[(point, names[i])] = ("continue", None, None)
        point += interval
    return out


# ------------------------------------------------------------------------------------------ the members


class _Run:
    """What a population member reads of and does to its training run: the run's spec, counters, objective
    value (a synthetic curve of the timestep) and adoption of another trial's snapshot (the directory's
    ``who`` file says whose it was; the values become the spec). The real Trainer's are tested below."""

    def __init__(self, name: str, curve: Callable[[int], float | None], params: dict[str, Any], total: int) -> None:
        self.name, self.curve = name, curve
        self.base = ExperimentSpec.model_validate({**EXPERIMENT, "name": name, "total_timesteps": total})
        self.spec = self.base.replace(**params)
        self.overrides: dict[str, Any] = {}
        self.timestep, self.resumed_at = 0, 0
        self.decision_at: int | None = None
        self.stop_requested = False
        self.adopted: list[tuple[int, str, dict[str, Any]]] = []
        self.workdir = Path()

    @property
    def counters(self) -> dict[str, int]:
        return {"timestep": self.timestep}

    @property
    def mean_return(self) -> float | None:
        return self.curve(self.timestep)

    def hold(self) -> None:
        pass

    def save(self, directory: Path) -> None:
        (directory / "who").write_text(f"{self.name}@{self.timestep}")

    def adopt(self, overrides: dict[str, Any], directory: Path) -> None:
        self.adopted.append((self.timestep, (directory / "who").read_text(), dict(overrides)))
        self.overrides = dict(overrides)
        self.spec = self.base.replace(**overrides)


def _curves(n: int, seed: int) -> list[Callable[[int], float | None]]:
    rng = random.Random(seed)
    curves = []
    for _ in range(n):
        rate, wobble, first = rng.uniform(0.2, 1.0), rng.uniform(0.0, 0.01), rng.choice([0, 0, 0, 1500])

        def curve(ts: int, rate: float = rate, wobble: float = wobble, first: int = first) -> float | None:
            return None if ts < first else round(200 * rate * (1 - math.exp(-ts / 4000)) + 8 * math.sin(ts * wobble), 3)

        curves.append(curve)
    return curves


def _members(location: Path, runs: list[_Run], settings: dict[str, Any]) -> list[PopulationMember]:
    store = open_store(location)
    names = [run.name for run in runs]
    for run in runs:
        run.workdir = location.parent / "work" / run.name
    return [
        PopulationMember(
            {**settings, "trial": run.name, "index": i, "peers": str(location)},
            trainer=run,
            store=store,
            peers=names[:i],
            save=run.save,
        )
        for i, run in enumerate(runs)
    ]


SETTINGS = {
    "rule": "pbt", "perturbation_interval": 1000, "quantile": 0.25, "resample_probability": 0.25, "seed": 7,
    "objective": "mean_return", "check_seconds": 0.01,
    "mutations": {k: v if isinstance(v, list) else v.model_dump() for k, v in MUTATIONS.items()},
}  # fmt: skip


def _setup(n: int, seed: int) -> tuple[list[int], list[dict[str, Any]]]:
    """Each member's timesteps per step and initial values."""
    rng = random.Random(seed)
    steps = [rng.choice([40, 80, 160]) for _ in range(n)]
    initial = [{"agent.learning_rate": round(10 ** rng.uniform(-4, -2), 6), "agent.discount": 0.99} for _ in range(n)]
    return steps, initial


def _simulate(location: Path, n: int, curve_seed: int, order_seed: int, slow: int | None) -> list[_Run]:
    """Every member advancing in a random interleaving over one store; ``slow`` moves only when no other can."""
    rng = random.Random(order_seed)
    curves = _curves(n, curve_seed)
    steps, initial = _setup(n, curve_seed)
    runs = [_Run(f"t{i}", curves[i], initial[i], 4000 if i % 3 else 3500) for i in range(n)]
    members = _members(location, runs, SETTINGS)
    active, pending = set(range(n)), [False] * n
    store = open_store(location)

    def move(i: int) -> bool:
        run, member = runs[i], members[i]
        if not pending[i]:
            run.timestep += steps[i]
            pending[i] = member.next_decision is not None and run.timestep >= member.next_decision
        if pending[i]:
            if not member.step(run.timestep):
                return False
            pending[i] = False
        if run.timestep >= run.spec.total_timesteps:
            store.write_text(f"{run.name}/progress.json", json.dumps({"state": "succeeded"}))
            active.discard(i)
        return True

    speeds = [rng.uniform(0.2, 1.0) for _ in range(n)]
    while active:
        others = [i for i in sorted(active) if i != slow]
        rng.shuffle(others)
        moved = sum(move(i) for i in others if rng.random() < speeds[i]) or sum(move(i) for i in others)
        if not moved and slow in active:
            moved = move(slow)
        assert moved, "no member can move"
    return runs


@pytest.mark.parametrize("slow", [None, 0, 5])
def test_decisions_are_the_reference_whatever_the_order_and_speed(tmp_path: Path, slow: int | None) -> None:
    """8 members, 3 decision points: every record's decision, donor and explored values are the reference's,
    every exploit adopted the donor's snapshot at that point with those values, and lineage() says so."""
    reference_runs: dict[str, list[tuple[int, str, dict[str, Any]]]] | None = None
    for order_seed in (1, 2):
        location = tmp_path / f"order{order_seed}"
        runs = _simulate(location, 8, curve_seed=4, order_seed=order_seed, slow=slow)
        steps, initial = _setup(8, 4)
        initial = [{**{k: None for k in MUTATIONS}, **p} for p in initial]
        expected = _reference(_curves(8, 4), steps, [r.spec.total_timesteps for r in runs], initial,
                              interval=1000, quantile=0.25, seed=7)  # fmt: skip
        records = read_pbt_records(open_store(location))
        got = {(r["timestep"], r["trial"]): (r["decision"], r.get("donor"), r.get("next_params")) for r in records}
        assert got == expected
        assert any(d == EXPLOIT for d, _, _ in got.values()) and any(d == "continue" for d, _, _ in got.values())
        for r in records:
            run = next(x for x in runs if x.name == r["trial"])
            assert r["checkpoint"] == snapshot_name(r["trial"], r["at"])
            if r["decision"] == EXPLOIT:
                adopted = [(who, values) for t, who, values in run.adopted if t == r["at"]]
                assert adopted == [(f"{r['donor']}@{r['donor_at']}", r["next_params"])]
                assert r["mutations"]["agent.discount"]["to"] == r["next_params"]["agent.discount"]
        paths = lineage(records)
        assert set(paths) == {t for (_, t), (d, _, _) in expected.items() if d == EXPLOIT}
        # the trials' own speeds differ between the orders: the adoptions, not their timing, are the same
        adoptions = {run.name: [(who.split("@")[0], values) for _, who, values in run.adopted] for run in runs}
        if reference_runs is not None:
            assert adoptions == reference_runs
        reference_runs = adoptions


def test_a_recorded_decision_is_taken_again_and_not_redone(tmp_path: Path) -> None:
    """A member started again finds its record (made before a kill): it adopts that record's donor snapshot
    and values when the record is past the checkpoint it resumed from, and leaves it alone when not."""
    location = tmp_path / "sweep"
    store = open_store(location)
    runs = [_Run("t0", lambda ts: 100.0, {}, 3000), _Run("t1", lambda ts: 1.0, {}, 3000)]
    store.write_text(f"{snapshot_name('t0', 1004)}/who", "t0@1004")
    donor = {
        "trial": "t0",
        "index": 0,
        "rule": "pbt",
        "timestep": 1000,
        "at": 1004,
        "value": 100.0,
        "decision": "continue",
        "params": {"agent.learning_rate": 1e-3},
        "checkpoint": snapshot_name("t0", 1004),
    }
    mine = {"trial": "t1", "index": 1, "rule": "pbt", "timestep": 1000, "at": 1008, "value": 1.0, "decision": EXPLOIT,
            "donor": "t0", "donor_checkpoint": snapshot_name("t0", 1004),
            "next_params": {"agent.learning_rate": 5.0e-4}, "reason": "recorded before the kill"}  # fmt: skip
    store.write_text(record_name("pbt", 1000, "t0"), json.dumps(donor))
    store.write_text(record_name("pbt", 1000, "t1"), json.dumps(mine))
    _, member = _members(location, runs, SETTINGS)
    runs[1].timestep = 1008
    assert member.step(1008)
    assert runs[1].adopted == [(1008, "t0@1004", {"agent.learning_rate": 5.0e-4})]
    assert runs[1].spec.agent["learning_rate"] == 5.0e-4
    assert json.loads(store.read_text(record_name("pbt", 1000, "t1"))) == mine  # not decided again
    assert not store.exists(f"{snapshot_name('t1', 1008)}/who")  # nor snapshotted again

    resumed = _Run("t1", lambda ts: 1.0, {}, 3000)
    resumed.resumed_at = 1008  # its checkpoint holds the exploit already
    _, member = _members(location, [runs[0], resumed], SETTINGS)
    assert member.step(1012) and resumed.adopted == []


def test_a_decision_waits_for_earlier_members_and_records_nothing_meanwhile(tmp_path: Path) -> None:
    location = tmp_path / "sweep"
    runs = [_Run("t0", lambda ts: 50.0, {}, 3000), _Run("t1", lambda ts: 1.0, {}, 3000)]
    first, second = _members(location, runs, SETTINGS)
    runs[1].timestep = 1000
    assert not second.step(1000) and second.waiting_for == ["t0"]
    assert not open_store(location).exists(record_name("pbt", 1000, "t1"))
    runs[0].timestep = 1000
    assert first.step(1000)
    assert second.step(1000) and runs[1].adopted[0][1] == "t0@1000"


def test_quantiles_are_ray_tunes() -> None:
    rng = random.Random(0)
    for _ in range(500):
        n = rng.randint(0, 12)
        scores = [
            (f"t{i}", rng.choice([None, math.nan, float(rng.randint(0, 5)), rng.uniform(0, 9)])) for i in range(n)
        ]
        q = rng.choice([0.1, 0.25, 0.3, 0.5])
        assert quantiles(dict(scores), q) == _ray_quantiles(scores, q)


def test_explore_perturbs_numbers_and_draws_lists_the_same_on_every_call() -> None:
    params = {"agent.learning_rate": 1e-3, "agent.discount": 0.99, "agent.update_frequency": 4}
    mutations = {**MUTATIONS, "agent.update_frequency": Distribution(uniform=(1, 10))}
    seen = set()
    for trial in range(40):
        new = explore(params, mutations, decision_rng(1, 1000, f"t{trial}"), resample_probability=0.0)
        assert new == explore(params, mutations, decision_rng(1, 1000, f"t{trial}"), resample_probability=0.0)
        assert new["agent.learning_rate"] in (8e-4, 1.2e-3) and new["agent.discount"] in MUTATIONS["agent.discount"]
        assert new["agent.update_frequency"] in (3, 5) and isinstance(new["agent.update_frequency"], int)
        seen.add(new["agent.learning_rate"])
    assert seen == {8e-4, 1.2e-3}
    drawn = explore({"agent.learning_rate": None}, MUTATIONS, random.Random(3))["agent.learning_rate"]
    assert 1e-4 <= drawn <= 1e-2


def _sweep(**population: Any) -> SweepSpec:
    data: dict[str, Any] = {"name": "pbt", "experiment": EXPERIMENT, "seeds": 4}
    return SweepSpec.from_dict({**data, **population})


def test_the_population_section_is_checked_naming_the_field() -> None:
    sweep = _sweep(
        population={"perturbation_interval": 1000, "mutations": {"agent.learning_rate": {"loguniform": [1e-4, 1e-2]}}}
    )
    assert isinstance(sweep.population and sweep.population.mutations["agent.learning_rate"], Distribution)
    assert SweepSpec.from_yaml_text(sweep.to_yaml()) == sweep
    refused = {
        "agent.batch_size": "cannot change on a restored agent",
        "agent.network": "cannot change on a restored agent",
        "agent.memory": "capacity",
        "num_workers": "no agent argument",
        "agent.nonsense": "not among the agent arguments PBT can change",
    }
    for key, why in refused.items():
        with pytest.raises(SpecError, match=f"population.mutations.{key}: .*{why}"):
            _sweep(population={"perturbation_interval": 1000, "mutations": {key: [1, 2]}})
    dqn = {**EXPERIMENT, "agent": {"type": "dqn", "memory": 10000, "batch_size": 32}}
    replay = {"perturbation_interval": 10, "mutations": {"agent.batch_size": [16, 64]}}
    SweepSpec.from_dict({"name": "pbt", "experiment": dqn, "seeds": 2, "population": replay})
    bad = [
        ({"perturbation_interval": 0, "mutations": {"agent.discount": [0.9]}}, "perturbation_interval"),
        ({"perturbation_interval": 9, "quantile": 0.6, "mutations": {"agent.discount": [0.9]}}, "quantile"),
        ({"perturbation_interval": 9, "mutations": {}}, "mutations"),
        ({"perturbation_interval": 9, "mutations": {"agent.discount": {"uniform": [1, 0]}}}, "LOW < HIGH"),
    ]
    for population, field in bad:
        with pytest.raises(SpecError, match=field):
            _sweep(population=population)
    with pytest.raises(SpecError, match="exclude each other"):
        _sweep(population={"perturbation_interval": 9, "mutations": {"agent.discount": [0.9]}}, early_stopping={})
    with pytest.raises(SpecError, match=r"parameters\.max_timesteps_per_episode: .*other shapes"):
        _sweep(population={"perturbation_interval": 9, "mutations": {"agent.discount": [0.9]}},
               parameters={"max_timesteps_per_episode": [500, 8]})  # fmt: skip


def test_a_local_trial_gets_the_population_settings() -> None:
    """The local sweeper starts trials with rlcloud.runner.hparams.trial_env: rule pbt reaches the runner."""
    from rlcloud.runner.hparams import trial_env

    sweep = _sweep(population={"perturbation_interval": 500, "mutations": {"agent.discount": [0.9, 0.99]}})
    trial = sweep.trial(2)
    settings = json.loads(trial_env(sweep, trial, "/results/pbt")["RLCLOUD_EARLY_STOPPING"])
    assert settings["rule"] == "pbt" and settings["perturbation_interval"] == 500 and settings["index"] == 2
    assert (settings["peers"], settings["trial"], settings["seed"]) == ("/results/pbt", trial.name, 0)


def test_the_plot_marks_exploits() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots()
    axes.plot([0, 2000], [0, 100])
    records = [
        {"decision": EXPLOIT, "at": 1004, "value": 3.5, "trial": "t1", "donor": "t0", "next_params": {"a.lr": 1e-3}},
        {"decision": "continue", "at": 1008, "value": 50.0, "trial": "t0"},
    ]
    assert mark_exploits(figure, records) == 1
    assert "PBT exploit (1)" in [t.get_text() for t in axes.get_legend().get_texts()]
    assert lineage(records) == {"t1": "<-t0@1004 lr=0.001"}
    plt.close(figure)


# ------------------------------------------------------------------------------------ real trials


@pytest.mark.training
@pytest.mark.processes
def test_real_members_exploit_and_explore_with_lineage_and_a_killed_one_decides_the_same(tmp_path: Path) -> None:
    """Three CartPole PPO trials, decisions every 1000 timesteps. Trial 1 started alone waits at 1000 for
    trial 0: killed there (kill -9) it leaves no record. Trial 0 then runs; its records are given a value no
    CartPole agent has that early, so trial 1, started again, is in the bottom at every point: it takes
    trial 0's snapshots with explored values, which its checkpoints keep. Trial 2's record at 1000 (an exploit)
    is written before it starts, as if it had been killed after deciding: it adopts exactly those values."""
    import signal

    from rlcloud.layout import SWEEP_SPEC
    from rlcloud.sweep import Sweep
    from rlcloud.waiting import poll_until

    sweep = SweepSpec.model_validate(
        {
            "name": "pbt", "experiment": {**EXPERIMENT, "saver_frequency": "500t"}, "seeds": 3,
            "population": {"perturbation_interval": 1000, "check_seconds": 0.2,
                           "mutations": {"agent.learning_rate": {"loguniform": [1e-4, 1e-2]},
                                         "agent.discount": [0.95, 0.99]}},
        }
    )  # fmt: skip
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(sweep.to_yaml())
    first, second, third = sweep.trial_names()
    location, logs = tmp_path / "pbt", tmp_path / "logs"
    logs.mkdir()
    store = open_store(location)
    store.write_text(SWEEP_SPEC, sweep.to_yaml())

    (waiting,) = trial_processes(sweep_file, location, [1], logs, mode="ab").values()
    log = logs / "trial1.log"
    assert poll_until(lambda: "waits for 1 earlier" in log.read_text() or None, time.monotonic() + 900, interval=0.5)
    waiting.send_signal(signal.SIGKILL)
    waiting.wait(timeout=60)
    assert not store.list("decisions/")

    finish_trials(trial_processes(sweep_file, location, [0], logs, mode="ab"), logs)
    for point in (1000, 2000):
        name = record_name("pbt", point, first)
        record = json.loads(store.read_text(name))
        assert record["decision"] == "continue" and store.list(record["checkpoint"] + "/")  # first: nobody to rank
        store.write_text(name, json.dumps({**record, "value": 499.0}))

    planted = {"trial": third, "index": 2, "rule": "pbt", "timestep": 1000, "at": 1000, "value": 1.0,
               "decision": EXPLOIT, "donor": first,
               "donor_checkpoint": json.loads(store.read_text(record_name("pbt", 1000, first)))["checkpoint"],
               "next_params": {"agent.learning_rate": 0.00321, "agent.discount": 0.95},
               "reason": "before the kill"}  # fmt: skip
    store.write_text(record_name("pbt", 1000, third), json.dumps(planted))
    finish_trials(trial_processes(sweep_file, location, [1, 2], logs, mode="ab"), logs)

    records = {(r["trial"], r["timestep"]): r for r in read_pbt_records(store)}
    assert set(records) == {(t, p) for t in (first, second, third) for p in (1000, 2000)}
    for point in (1000, 2000):
        mine = records[(second, point)]
        donor = records[(first, point)]
        assert (mine["decision"], mine["donor"], mine["donor_checkpoint"]) == (EXPLOIT, first, donor["checkpoint"])
        rng = decision_rng(0, point, second)
        rng.choice([first])  # the donor's draw
        assert mine["next_params"] == explore(donor["params"], sweep.population.mutations, rng)  # type: ignore[union-attr]
        assert mine["mutations"]["agent.discount"]["from"] == donor["params"]["agent.discount"]
    assert records[(third, 1000)] == planted  # taken, not decided again
    assert "exploit at timestep 1000" in (logs / "trial2.log").read_text()
    # the trials' latest checkpoints carry the arguments they train with now
    for trial, values in ((second, records[(second, 2000)]["next_params"]), (third, None)):
        latest = store.read_text(f"{trial}/checkpoints/LATEST").strip()
        state = json.loads(store.read_text(f"{trial}/checkpoints/{latest}/state.json"))
        if values is not None:
            assert state["overrides"] == values
        else:
            assert set(state["overrides"]) == {"agent.learning_rate", "agent.discount"}
    table = Sweep(sweep, results=str(tmp_path)).results()
    paths = dict(zip(table["run"], table["lineage"], strict=True))
    assert paths[first] == "" and paths[second].count(f"<-{first}@") == 2
    assert paths[third].startswith(f"<-{first}@1000 learning_rate=0.00321, discount=0.95")


@pytest.mark.training
def test_adopt_restores_another_runs_weights_with_new_arguments_kept_over_a_resume(tmp_path: Path) -> None:
    """Trainer.adopt: a new agent with the changed argument holds the donor checkpoint's weights exactly; the
    counters stay the run's own; a trainer started again on the work directory builds its agent with the
    adopted arguments (state.json ``overrides``)."""
    import numpy as np

    from rlcloud.runner.loop import Trainer, latest_checkpoint

    def spec(name: str) -> ExperimentSpec:
        return ExperimentSpec.model_validate({**EXPERIMENT, "name": name, "run_mode": "single", "num_workers": 1,
                                              "total_timesteps": 300})  # fmt: skip

    donor = Trainer(spec("donor"), tmp_path / "donor")
    assert donor.run().state == "succeeded"
    donor_dir = tmp_path / "donor" / "checkpoints" / str(latest_checkpoint(tmp_path / "donor"))
    reread = Trainer(spec("donor"), tmp_path / "donor")
    reread.setup()  # the donor's checkpoint restored: its weights
    donor_weights = [v.numpy() for v in reread.agent.model.trainable_variables]
    reread._close(finished=True)
    mine = Trainer(spec("mine").replace(total_timesteps=200), tmp_path / "mine")
    assert mine.run().state == "succeeded"
    mine.adopt({"agent.learning_rate": 5e-4, "agent.discount": 0.95}, donor_dir)
    assert mine.spec.agent["learning_rate"] == 5e-4 and mine.counters["timestep"] == 200
    assert all(
        np.array_equal(a, v.numpy()) for a, v in zip(donor_weights, mine.agent.model.trainable_variables, strict=True)
    )
    state = json.loads((tmp_path / "mine" / "checkpoints" / "ckpt-000000000200" / "state.json").read_text())
    assert state["overrides"] == {"agent.learning_rate": 5e-4, "agent.discount": 0.95} and state["timestep"] == 200
    mine._close(finished=True)

    again = Trainer(spec("mine"), tmp_path / "mine")
    again.setup()
    assert again.spec.agent["learning_rate"] == 5e-4 and again.spec.agent["discount"] == 0.95
    assert again.resumed_at == 200 and again.overrides == state["overrides"]
    assert all(
        np.array_equal(a, v.numpy()) for a, v in zip(donor_weights, again.agent.model.trainable_variables, strict=True)
    )
    again._close(finished=True)
