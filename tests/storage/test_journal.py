"""An Optuna study's journal in the results store (rlcloud.storage.journal): processes appending at once to a
directory and to fake-gcs-server (no duplicate, no loss, one order), and a short TPE search whose trials, in
several processes, ask and tell through it."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from rlcloud.errors import MissingExtraError
from rlcloud.storage import open_store
from rlcloud.storage.journal import StoreJournal, journal_backend, log_path, open_study, require_optuna
from tests.fakes.gcs import FakeGcsServer

WORKER = Path(__file__).with_name("journal_worker.py")
ROOT = Path(__file__).resolve().parents[2]


def _run_all(args: list[list[str]], env: dict[str, str]) -> list[dict[str, Any]]:
    """Start one worker per ``args``, let them all go at once when all are ready, and return their answers."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), *a],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        )
        for a in args
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    answers = [json.loads(proc.communicate()[0]) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * len(procs)
    return answers


def _location(where: str, tmp_path: Path, fake_gcs: FakeGcsServer, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake_gcs.url)
    return f"gs://{fake_gcs.create_bucket()}/sweep" if where == "gcs" else str(tmp_path / "sweep")


@pytest.mark.processes
@pytest.mark.parametrize("where", ["dir", "gcs"])
def test_processes_appending_at_once_lose_nothing_and_see_one_order(
    where: str, tmp_path: Path, fake_gcs: FakeGcsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = _location(where, tmp_path, fake_gcs, monkeypatch)
    workers, count = 4, 25
    env = fake_gcs.env if where == "gcs" else {}
    answers = _run_all([["append", location, str(w), str(count)] for w in range(workers)], env)
    logs = list(StoreJournal(open_store(location)).read_logs(0))
    assert len(logs) == workers * count
    seen = defaultdict(list)
    for log in logs:
        seen[log["worker"]].append(log["seq"])
    assert dict(seen) == {w: list(range(count)) for w in range(workers)}  # each once, each worker's in its order
    # every reader sees the same order, from any number on
    again = StoreJournal(open_store(location))
    assert list(again.read_logs(0)) == logs and list(again.read_logs(60)) == logs[60:]
    conflicts = sum(a["conflicts"] for a in answers)
    print(f"{where}: {workers} processes, {len(logs)} logs, {conflicts} numbers found taken")


def test_a_log_is_read_once_and_the_journal_has_no_holes(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "sweep"))
    first, second = StoreJournal(store), StoreJournal(store)
    first.append_logs([{"op": 0}, {"op": 1}])
    second.append_logs([{"op": 2}])  # its own view was empty: 0 and 1 are taken, it lands at 2
    first.append_logs([{"op": 3}])
    assert [log["op"] for log in second.read_logs(0)] == [0, 1, 2, 3]
    assert sorted(info.name for info in store.list("study/")) == [log_path(n) for n in range(4)]
    assert second.conflicts == 0 and first.conflicts == 0  # each listed before it wrote
    store.write_text("study/notes.txt", "not a log")  # not one of the journal's names: ignored
    assert [log["op"] for log in first.read_logs(2)] == [2, 3]


@pytest.mark.processes
def test_a_short_tpe_search_in_several_processes_proposes_from_the_earlier_results(
    tmp_path: Path, fake_gcs: FakeGcsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three processes ask and tell 8 trials each through the journal (a cheap objective, -(x - 3)^2, no
    training); then, with those 24 results (past TPE's 10 random startup trials), its next 20 proposals are
    near 3 (median distance under 3.5; 1.8-2.7 over seeds 0-5 in one process), where a uniform draw from
    [-10, 10] lands 5 from it in the median, and differ from what the same seed proposes without them."""
    import optuna

    location = _location("gcs", tmp_path, fake_gcs, monkeypatch)
    answers = _run_all([["tpe", location, "8", str(seed)] for seed in (1, 2, 3)], fake_gcs.env)
    numbers = sorted(n for a in answers for n in a["numbers"])
    assert numbers == list(range(24))  # each trial number once: the journal's one order
    study = open_study(open_store(location), "sweep", seed=4)
    assert len(study.get_trials(states=[optuna.trial.TrialState.COMPLETE])) == 24
    fresh = open_study(open_store(str(tmp_path / "fresh")), "sweep", seed=4)
    later, blind = [], []
    for one, out in ((study, later), (fresh, blind)):
        for _ in range(20 if one is study else 1):
            trial = one.ask()
            x = trial.suggest_float("x", -10, 10)
            one.tell(trial, -((x - 3) ** 2))
            out.append(x)
    assert statistics.median(abs(x - 3) for x in later) < 3.5, later
    assert later[0] != blind[0]
    assert isinstance(journal_backend(open_store(location)), optuna.storages.journal.BaseJournalBackend)


def test_without_optuna_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "optuna", None)  # what an environment without the extra imports
    with pytest.raises(MissingExtraError, match=r"rlcloud\[optuna\]") as exc:
        require_optuna()
    assert "sampler: tpe" in str(exc.value)


def test_a_sweep_trial_asks_once_and_gets_the_same_values_when_it_runs_again(tmp_path: Path) -> None:
    import optuna

    from rlcloud.specs.sweep import Distribution
    from rlcloud.storage.journal import ask_trial, report_trial, tell_trial

    store = open_store(str(tmp_path / "sweep"))
    space: dict[str, Any] = {
        "agent.learning_rate": Distribution(loguniform=(1e-5, 1e-2)),
        "agent.network": Distribution(choice=[[{"type": "dense", "size": 32}], "auto"]),
        "agent.batch_size": [8, 16],
    }
    study = open_study(store, "lr", seed=1)
    first = ask_trial(study, "tpe-1", space)
    assert 1e-5 <= first["agent.learning_rate"] <= 1e-2 and first["agent.batch_size"] in (8, 16)
    assert first["agent.network"] in ([{"type": "dense", "size": 32}], "auto")
    # the trial runs again (another process, another pod): the same values, no new Optuna trial
    again = open_study(open_store(str(tmp_path / "sweep")), "lr", seed=2)
    assert ask_trial(again, "tpe-1", space) == first and len(again.get_trials()) == 1
    report_trial(again, "tpe-1", 1000, 12.5)
    report_trial(again, "tpe-1", 1000, 99.0)  # a rung reported again after a restart: the first value stays
    assert tell_trial(again, "tpe-1", 120.0) and not tell_trial(again, "tpe-1", 130.0)
    ask_trial(again, "tpe-2", space)
    assert tell_trial(again, "tpe-2", None)  # failed
    (done, failed) = open_study(store, "lr").get_trials()
    assert done.value == 120.0 and done.intermediate_values == {1000: 12.5}
    assert done.state == optuna.trial.TrialState.COMPLETE and failed.state == optuna.trial.TrialState.FAIL
