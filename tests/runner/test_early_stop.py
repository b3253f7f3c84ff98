"""Early stopping decided at timestep checkpoints from the store's data (rlcloud.runner.early_stop).

The simulations drive real stoppers over a real (directory) store with synthetic learning curves, in many
interleavings and with one trial slowed, and check every decision against small reference implementations
of the median rule and of ASHA written here, which see the trials in index order.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlcloud.errors import SpecError
from rlcloud.runner.early_stop import (
    EarlyStopper,
    decision_points,
    early_stopping_settings,
    parse_decision,
    percentile,
    record_name,
)
from rlcloud.specs.sweep import EarlyStopping, SweepSpec
from rlcloud.storage import open_store
from tests.support.sweeps import finish_trials, trial_processes

Curve = Callable[[int], float | None]


def _curves(n: int, seed: int) -> list[Curve]:
    """Synthetic running means: each trial learns at its own rate, with a wobble; no episode before ``first``."""
    rng = random.Random(seed)
    curves: list[Curve] = []
    for _ in range(n):
        rate, wobble, first = rng.uniform(0.2, 1.0), rng.uniform(0.0, 0.01), rng.choice([0, 0, 900])

        def curve(ts: int, rate: float = rate, wobble: float = wobble, first: int = first) -> float | None:
            if ts < first:
                return None
            return round(200 * rate * (1 - math.exp(-ts / 4000)) + 8 * math.sin(ts * wobble), 3)

        curves.append(curve)
    return curves


def _crossing(step: int, point: int) -> int:
    """The timestep at which a trial stepping ``step`` at a time first reaches ``point``."""
    return -(-point // step) * step


class _Trial:
    def __init__(self, stopper: EarlyStopper, step: int, total: int) -> None:
        self.stopper, self.step, self.total = stopper, step, total
        self.timestep = 0
        self.pending = False  # reached a decision point whose decision waits


def _simulate(
    settings: dict[str, Any],
    curves: list[Curve],
    steps: list[int],
    totals: list[int],
    location: Path,
    *,
    order_seed: int,
    slow: int | None = None,
) -> dict[str, list[tuple[int, str, float | None]]]:
    """Every trial's decisions, the trials advancing in a random interleaving (random speeds) over one store;
    ``slow`` moves only when no other trial can (it runs last, or everything waits for it)."""
    store = open_store(location)
    names = [f"t{i}" for i in range(len(curves))]
    trials: list[_Trial] = []
    for i, name in enumerate(names):
        box: dict[str, int] = {}
        stopper = EarlyStopper(
            {**settings, "trial": name, "index": i, "peers": str(location)},
            value=lambda i=i, box=box: curves[i](box["t"]),
            stop=lambda reason: None,
            total_timesteps=totals[i],
            store=store,
            peers=names[:i],
        )
        trials.append(_Trial(stopper, steps[i], totals[i]))
        trials[-1].box = box  # type: ignore[attr-defined]

    def end(i: int, state: str) -> None:
        store.write_text(f"{names[i]}/progress.json", json.dumps({"state": state}))
        active.discard(i)

    def move(i: int) -> bool:
        trial = trials[i]
        if not trial.pending:
            trial.timestep += trial.step
            trial.box["t"] = trial.timestep  # type: ignore[attr-defined]
            gate = trial.stopper.next_decision
            trial.pending = gate is not None and trial.timestep >= gate
        if trial.pending:
            if not trial.stopper.step(trial.timestep):
                return False  # waits for earlier trials: no move
            trial.pending = False
            if trial.stopper.stopped is not None:
                end(i, "stopped-early")
                return True
        if trial.timestep >= trial.total:
            end(i, "succeeded")
        return True

    rng = random.Random(order_seed)
    speeds = [rng.uniform(0.2, 1.0) for _ in trials]
    active = set(range(len(trials)))
    while active:
        others = [i for i in sorted(active) if i != slow]
        rng.shuffle(others)
        moved = sum(move(i) for i in others if rng.random() < speeds[i])
        if not moved:
            moved = sum(move(i) for i in others)  # nobody happened to move: everyone tries
        if not moved and slow in active:
            moved = move(slow)
        assert moved, f"no trial can move: {[(i, trials[i].stopper.waiting_for) for i in sorted(active)]}"
    return _decisions(store, settings["rule"], names)


def _decisions(store: Any, rule: str, names: list[str]) -> dict[str, list[tuple[int, str, float | None]]]:
    found: dict[str, list[tuple[int, str, float | None]]] = {name: [] for name in names}
    for info in store.list(f"decisions/{rule}/"):
        record = json.loads(store.read_text(info.name))
        found[record["trial"]].append((record["timestep"], record["decision"], record["value"]))
    return {name: sorted(points) for name, points in found.items()}


def _reference_median(
    curves: list[Curve], steps: list[int], totals: list[int], *, grace: int, interval: int, min_trials: int
) -> dict[str, list[tuple[int, str, float | None]]]:
    """The median stopping rule with the trials arriving in index order: trial i at point t compares its best
    value so far with the median of the values at t of the trials before it that reached t."""
    reached: dict[tuple[int, int], float | None] = {}
    out: dict[str, list[tuple[int, str, float | None]]] = {}
    for i, curve in enumerate(curves):
        out[f"t{i}"], own = [], []
        t = grace if grace > 0 else interval
        while t < totals[i]:
            value = curve(_crossing(steps[i], t))
            own.append(value)
            peers = [reached[(j, t)] for j in range(i) if reached.get((j, t)) is not None]
            reached[(i, t)] = value
            best = max((v for v in own if v is not None), default=None)
            stop = best is not None and len(peers) >= min_trials and best < statistics.median(peers)  # type: ignore[type-var]
            out[f"t{i}"].append((t, "stop" if stop else "continue", value))
            if stop:
                break
            t += interval
    return out


def _reference_asha(
    curves: list[Curve], steps: list[int], totals: list[int], *, grace: int, eta: int
) -> dict[str, list[tuple[int, str, float | None]]]:
    """ASHA's stopping form (Li et al. 2020; Ray Tune's AsyncHyperBandScheduler): rungs grace x eta^k; a trial
    reaching a rung is recorded there and goes on only if it is at least the 1 - 1/eta percentile of the rung's
    recorded values (numpy), the trials arriving in index order."""
    recorded: dict[int, list[float]] = {}
    out: dict[str, list[tuple[int, str, float | None]]] = {}
    for i, curve in enumerate(curves):
        out[f"t{i}"] = []
        rung = grace
        while rung < totals[i]:
            value = curve(_crossing(steps[i], rung))
            stop = False
            if value is not None:
                recorded.setdefault(rung, []).append(value)
                stop = value < float(np.percentile(recorded[rung], (1 - 1 / eta) * 100))
            out[f"t{i}"].append((rung, "stop" if stop else "continue", value))
            if stop:
                break
            rung *= eta
    return out


MEDIAN = {"rule": "median", "grace_timesteps": 1000, "interval_timesteps": 1000, "min_trials": 2}
ASHA = {"rule": "asha", "grace_timesteps": 500, "reduction_factor": 3}


@pytest.mark.parametrize("slow", [None, 0, 3, 9])
def test_median_decisions_are_the_reference_whatever_the_order_and_speed(tmp_path: Path, slow: int | None) -> None:
    curves = _curves(10, seed=7)
    steps = [random.Random(i).choice([32, 50, 64]) for i in range(10)]
    totals = [6000] * 8 + [2500, 6000]  # one trial ends early (a swept budget): it settles by its progress
    expected = _reference_median(curves, steps, totals, grace=1000, interval=1000, min_trials=2)
    assert any(d == "stop" for points in expected.values() for _, d, _ in points)  # the test decides something
    assert any(d == "continue" for points in expected.values() for _, d, _ in points[1:])
    for order in range(2):
        got = _simulate(MEDIAN, curves, steps, totals, tmp_path / f"{slow}-{order}", order_seed=order, slow=slow)
        assert got == expected, (slow, order)


@pytest.mark.parametrize("slow", [None, 0, 5, 11])
def test_asha_rung_decisions_are_the_reference_whatever_the_order_and_speed(tmp_path: Path, slow: int | None) -> None:
    curves = _curves(12, seed=3)
    steps = [random.Random(i).choice([50, 64, 128]) for i in range(12)]
    totals = [14_000] * 12  # rungs 500, 1500, 4500, 13500
    expected = _reference_asha(curves, steps, totals, grace=500, eta=3)
    rungs = {t for points in expected.values() for t, _, _ in points}
    assert rungs == {500, 1500, 4500, 13_500}
    assert sum(d == "stop" for points in expected.values() for _, d, _ in points) >= 4
    for order in range(2):
        got = _simulate(ASHA, curves, steps, totals, tmp_path / f"{slow}-{order}", order_seed=order, slow=slow)
        assert got == expected, (slow, order)


def test_percentile_is_numpys_linear_percentile() -> None:
    rng = random.Random(1)
    for n in range(1, 12):
        values = [rng.uniform(-5, 5) for _ in range(n)]
        for q in (0, 0.25, 0.5, 2 / 3, 0.9, 1):
            assert percentile(values, q) == pytest.approx(float(np.percentile(values, q * 100)))


def test_decision_points() -> None:
    def first(points: Any, n: int) -> list[int]:
        return [next(points) for _ in range(n)]

    assert first(decision_points("median", grace=20_000, interval=10_000), 3) == [20_000, 30_000, 40_000]
    assert first(decision_points("median", grace=0, interval=500), 2) == [500, 1000]
    assert first(decision_points("asha", grace=1000, eta=3), 4) == [1000, 3000, 9000, 27_000]


def _stopper(store: Any, index: int, value: Callable[[], float | None], **settings: Any) -> EarlyStopper:
    return EarlyStopper(
        {**MEDIAN, "min_trials": 1, **settings, "trial": f"t{index}", "index": index, "peers": store.describe()},
        value=value,
        stop=lambda reason: None,
        total_timesteps=10_000,
        store=store,
        peers=[f"t{j}" for j in range(index)],
    )


def test_a_decision_is_made_once_and_a_resumed_trial_takes_it(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    first = _stopper(store, 0, lambda: 50.0)
    assert first.step(1000) and first.next_decision == 2000
    behind = _stopper(store, 1, lambda: 10.0)
    assert behind.step(1000) and behind.stopped is not None and "below the median 50.0" in behind.stopped
    record = json.loads(store.read_text(record_name("median", 1000, "t1")))
    assert record["decision"] == "stop" and record["value"] == 10.0
    assert (record["compared"], record["median"], record["best"]) == (1, 50.0, 10.0)
    # killed and started again (a new pod): it retrains to another value, but the decision stands
    again = _stopper(store, 1, lambda: 99.0)
    assert again.step(1040) and again.stopped == behind.stopped
    assert json.loads(store.read_text(record_name("median", 1000, "t1"))) == record
    # two processes of one trial deciding at once: the create-only write keeps the first
    racing = _stopper(store, 0, lambda: 1.0)
    kept = racing._write(record_name("median", 1000, "t0"), {"timestep": 1000, "value": 1.0, "decision": "stop"})
    assert kept["value"] == 50.0 and kept["decision"] == "continue"


def test_a_decision_waits_for_earlier_trials_and_gives_up_on_a_stop(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    later = _stopper(store, 2, lambda: 10.0, check_seconds=0.01)
    assert not later.step(1000) and later.waiting_for == ["t0", "t1"]  # nothing recorded: it waits
    assert not store.list("decisions/")
    store.write_text("t0/progress.json", json.dumps({"state": "failed"}))  # t0 will never reach 1000
    assert not later.step(1000) and later.waiting_for == ["t1"]
    asked = iter([False, False, True])
    giving_up = _stopper(store, 2, lambda: 10.0, check_seconds=0.01)
    giving_up._stopping = lambda: next(asked)
    holds: list[int] = []
    giving_up._hold = lambda: holds.append(1)
    giving_up.on_decision(1000)  # returns once the run is asked to stop; decided when it resumes
    assert giving_up.next_decision == 1000 and holds and not giving_up.waiting
    assert _stopper(store, 1, lambda: 30.0).step(1000)
    assert later.step(1000) and later.stopped is not None and "median 30.0 of 1 earlier" in later.stopped


BAD_RECORDS = {
    "truncated": b'{"timestep": 1000, "value": 1',
    "nan": b'{"timestep": 1000, "value": NaN, "decision": "stop"}',
    "string-value": b'{"timestep": 1000, "value": "5", "decision": "stop"}',
    "no-decision": b'{"timestep": 1000, "value": 5}',
    "list": b"[1, 2]",
    "bad-timestep": b'{"timestep": -1, "value": 5, "decision": "stop"}',
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "not-utf8": b'{"timestep": 1000}\xff',
}


@pytest.mark.parametrize("name", sorted(BAD_RECORDS))
def test_parse_decision_refuses_what_is_no_record(name: str) -> None:
    with pytest.raises(ValueError):
        parse_decision(BAD_RECORDS[name])


def test_a_bad_peer_record_is_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = open_store(tmp_path)
    store.write_bytes(record_name("median", 1000, "t0"), BAD_RECORDS["nan"])
    assert _stopper(store, 1, lambda: 30.0).step(1000)
    with caplog.at_level("WARNING"):
        later = _stopper(store, 2, lambda: 10.0)
        assert later.step(1000) and later.stopped is not None and "of 1 earlier trials" in later.stopped
    assert "skips decisions/median/000000001000/t0.json" in caplog.text


def test_the_earlier_trials_come_from_the_sweep_of_record(tmp_path: Path) -> None:
    sweep = SweepSpec.model_validate(
        {
            "name": "s",
            "experiment": {"name": "e", "environment": {"type": "gym", "level": "CartPole-v1"},
                           "agent": {"type": "ppo", "batch_size": 5}, "total_timesteps": 5000},
            "parameters": {"agent.learning_rate": [1e-3, 3e-4]},
            "seeds": 2,
            "early_stopping": {"rule": "asha", "grace_timesteps": 1000},
        }
    )  # fmt: skip
    store = open_store(tmp_path)
    store.write_text("sweep.yaml", sweep.to_yaml())
    trial = sweep.trial(2)
    settings = early_stopping_settings(sweep, trial, str(tmp_path))
    assert settings is not None and settings["index"] == 2 and settings["rule"] == "asha"
    stopper = EarlyStopper(settings, value=lambda: 1.0, stop=lambda reason: None, total_timesteps=5000)
    assert stopper._before() == sweep.trial_names()[:2]
    assert not stopper.step(1000) and stopper.waiting_for == sweep.trial_names()[:2]
    assert stopper.next_decision == 1000 and EarlyStopper(settings, value=lambda: 1.0, stop=print,
                                                          total_timesteps=1000).next_decision is None  # fmt: skip


def test_early_stopping_settings_are_checked() -> None:
    assert EarlyStopping().rule == "median" and EarlyStopping(rule="asha").reduction_factor == 3
    for bad in ({"rule": "asha", "grace_timesteps": 0}, {"rule": "hyperband"}, {"reduction_factor": 1}):
        with pytest.raises((SpecError, ValueError)) as info:
            EarlyStopping.model_validate(bad)
        assert "early_stopping" in str(info.value) or "rule" in str(info.value) or "reduction" in str(info.value)


# ------------------------------------------------------------------------------ real trials, one slowed


@pytest.mark.training
@pytest.mark.processes
def test_a_slowed_trial_gets_the_decisions_of_an_unslowed_sweep(tmp_path: Path) -> None:
    """Four real trials, all at once; then the same sweep with trial 0 (the one the others compare with)
    started only once the others wait for it at their first decision point (a machine where it is slow), and
    with trial 3 started only after the others ended (slow the other way): the same decisions, values and
    stopped trials, at the same timesteps."""
    from rlcloud.layout import SWEEP_SPEC
    from rlcloud.waiting import poll_until

    sweep = SweepSpec.model_validate(
        {
            "name": "slow",
            "experiment": {
                "name": "cartpole", "environment": {"type": "gym", "level": "CartPole-v1"},
                "agent": {"type": "ppo", "batch_size": 5, "learning_rate": 1e-3}, "run_mode": "multi-threaded",
                "num_workers": 4, "total_timesteps": 3000, "saver_frequency": None, "summary_frequency": None,
                "evaluation": None,
            },
            # episodes capped at 8 steps return at most 8; uncapped CartPole returns ~20 from the start
            "parameters": {"max_timesteps_per_episode": [500, 8]},
            "seeds": 2,
            "early_stopping": {"grace_timesteps": 1000, "interval_timesteps": 1000, "min_trials": 2,
                               "check_seconds": 0.2},
        }
    )  # fmt: skip
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(sweep.to_yaml())
    names = sweep.trial_names()

    def outcome(location: Path) -> tuple[dict[str, Any], dict[str, tuple[Any, Any]]]:
        store = open_store(location)
        progress = {n: json.loads(store.read_text(f"{n}/progress.json")) for n in names}
        return _decisions(store, "median", names), {n: (p["state"], p["timestep"]) for n, p in progress.items()}

    def prepared(run: str) -> tuple[Path, Path]:
        location, logs = tmp_path / run / "results", tmp_path / run / "logs"
        logs.mkdir(parents=True)
        open_store(location).write_text(SWEEP_SPEC, sweep.to_yaml())  # what Sweep.start records first
        return location, logs

    location, logs = prepared("together")
    finish_trials(trial_processes(sweep_file, location, [0, 1, 2, 3], logs), logs)
    expected = outcome(location)
    decisions, ended = expected
    assert [d for _, d, _ in decisions[names[2]]] == ["stop"] and ended[names[2]] == ("stopped-early", 1000)
    assert ended[names[0]] == ("succeeded", 3000) and [t for t, _, _ in decisions[names[0]]] == [1000, 2000]

    location, logs = prepared("first-slow")
    later = trial_processes(sweep_file, location, [1, 2, 3], logs)

    def all_waiting() -> bool | None:
        return all("waits for" in (logs / f"trial{i}.log").read_text() for i in later) or None

    assert poll_until(all_waiting, time.monotonic() + 1200, interval=0.5), "the later trials never waited"
    later.update(trial_processes(sweep_file, location, [0], logs))
    finish_trials(later, logs)
    assert outcome(location) == expected

    location, logs = prepared("last-slow")
    finish_trials(trial_processes(sweep_file, location, [0, 1, 2], logs), logs)
    finish_trials(trial_processes(sweep_file, location, [3], logs), logs)
    assert outcome(location) == expected


@pytest.mark.training
@pytest.mark.processes
def test_a_trial_killed_while_deciding_decides_once(tmp_path: Path) -> None:
    """kill -9 while a decision waits leaves no record: the trial started again decides when its peer has
    settled. Killed after its record was written (a stop, not acted on yet): started again, it takes the
    record and stops at that point without deciding again."""
    import signal

    from rlcloud.layout import SWEEP_SPEC
    from rlcloud.waiting import poll_until

    sweep = SweepSpec.model_validate(
        {
            "name": "kill",
            "experiment": {
                "name": "cartpole", "environment": {"type": "gym", "level": "CartPole-v1"},
                "agent": {"type": "ppo", "batch_size": 5}, "run_mode": "multi-threaded", "num_workers": 4,
                "total_timesteps": 2000, "saver_frequency": "500t", "summary_frequency": None, "evaluation": None,
            },
            "seeds": 3,
            "early_stopping": {"grace_timesteps": 1000, "interval_timesteps": 1000, "min_trials": 1,
                               "check_seconds": 0.2},
        }
    )  # fmt: skip
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(sweep.to_yaml())
    first, second, third = sweep.trial_names()
    location, logs = tmp_path / "results", tmp_path / "logs"
    logs.mkdir()
    store = open_store(location)
    store.write_text(SWEEP_SPEC, sweep.to_yaml())

    # trial 1 waits at 1000 for trial 0, which has not started: killed there, nothing is recorded
    (waiting,) = trial_processes(sweep_file, location, [1], logs).values()
    log = logs / "trial1.log"
    assert poll_until(lambda: "waits for 1 earlier" in log.read_text() or None, time.monotonic() + 900, interval=0.5)
    waiting.send_signal(signal.SIGKILL)
    waiting.wait(timeout=60)
    assert not store.list("decisions/")
    # trial 0 reached 1000 with a running mean no CartPole agent has that early, then ended
    peer = {"trial": first, "index": 0, "rule": "median", "timestep": 1000, "value": 499.0, "decision": "continue"}
    store.write_text(record_name("median", 1000, first), json.dumps(peer))
    store.write_text(f"{first}/progress.json", json.dumps({"state": "succeeded", "timestep": 1000}))
    finish_trials(trial_processes(sweep_file, location, [1], logs), logs)
    record = json.loads(store.read_text(record_name("median", 1000, second)))
    assert record["decision"] == "stop" and (record["compared"], record["median"]) == (1, 499.0)
    assert json.loads(store.read_text(f"{second}/progress.json"))["timestep"] == 1000

    # trial 2 was killed after writing its decision (a stop) and before acting on it
    mine = {"trial": third, "index": 2, "rule": "median", "timestep": 1000, "value": 1.0, "decision": "stop",
            "reason": "recorded before the kill"}  # fmt: skip
    store.write_text(record_name("median", 1000, third), json.dumps(mine))
    finish_trials(trial_processes(sweep_file, location, [2], logs), logs)
    progress = json.loads(store.read_text(f"{third}/progress.json"))
    assert (progress["state"], progress["timestep"], progress["stop_reason"]) == ("stopped-early", 1000, mine["reason"])
    assert json.loads(store.read_text(record_name("median", 1000, third))) == mine  # not decided again
