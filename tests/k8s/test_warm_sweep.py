"""Warm trials on Kubernetes: a sweep's pods each run several trials in one process (rlcloud.runner.warm).

The Job (builders), the pure status functions (rlcloud.k8s.warm), a pod's loop in this process (resume,
failure records, halting), then the fake kubelet running the real runner: a broken sweep stops after
max_failures failed trials, and real trials learn in a warm pod what they learn in a cold one.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client

from rlcloud.k8s.builders import SWEEP_RESULTS_ENV
from rlcloud.k8s.sweep_builders import JOB_UID_ENV, SWEEP_HALTED_EXIT_CODE
from rlcloud.k8s.warm import warm_pods, warm_trial_state
from rlcloud.runner import warm as runner_warm
from rlcloud.runner.main import parse_args
from rlcloud.specs.sweep import SweepSpec
from rlcloud.storage.claims import LEASE_S
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet
from tests.support.kubernetes import build, container, env_of, make_spec, make_sweep
from tests.support.waiting import eventually
from tests.support.warm_sweep import _backend, _pod_args, _record, _share

VERSIONS = ["1.28", "1.29", "1.31", "1.33"]


# ----------------------------------------------------------------------------------------------- the Job


@pytest.mark.parametrize("version", VERSIONS)
def test_a_warm_sweep_is_max_parallel_pods_each_running_a_share_of_the_trials(version: str) -> None:
    sweep = make_sweep(5, max_parallel=3, max_failures=3)  # 10 trials
    (_cm, job) = build(sweep, warm=True, kubernetes_version=version)
    kubernetes_validate.validate(job, f"{version}.0", strict=True)
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == 3 and spec["parallelism"] == 3
    assert "maxFailedIndexes" not in spec  # the pods count failed trials, not the Job failed indexes
    if version >= "1.29":
        assert spec["backoffLimitPerIndex"] == 4
    else:
        assert spec["backoffLimit"] == 12
    rules = spec["podFailurePolicy"]["rules"]
    assert rules[0]["action"] == "Ignore"  # preemption is not the sweep's fault
    assert rules[1]["action"] == "FailJob" and rules[1]["onExitCodes"]["values"] == [2, 3, SWEEP_HALTED_EXIT_CODE]
    args = container(job)["args"]
    assert args[-3:] == ["--stride", "3", "--claim"] and "$(RLCLOUD_INDEX)" in args
    parsed = parse_args([a.replace("$(RLCLOUD_INDEX)", "1") for a in args])
    assert parsed.stride == 3 and parsed.claim == LEASE_S
    uid = env_of(job)[JOB_UID_ENV]["fieldRef"]["fieldPath"]
    assert uid == "metadata.labels['batch.kubernetes.io/controller-uid']"
    # the runner's names for the same things
    assert (runner_warm.EXIT_HALTED, runner_warm.JOB_UID_ENV) == (SWEEP_HALTED_EXIT_CODE, JOB_UID_ENV)
    from rlcloud.runner import main

    assert (runner_warm.EXIT_OK, runner_warm.EXIT_CRASH, runner_warm.EXIT_SPEC) == (main.EXIT_OK, main.EXIT_CRASH,
                                                                                   main.EXIT_SPEC)  # fmt: skip
    assert runner_warm.SWEEP_RESULTS_ENV == main.SWEEP_RESULTS_ENV
    assert warm_pods(job, sweep.num_trials) == 3


def test_a_sweep_that_fits_max_parallel_stays_one_pod_per_trial() -> None:
    (_cm, job) = build(make_sweep(1, max_parallel=4), warm=True)  # 2 trials, 4 at a time
    assert job["spec"]["completions"] == 2 and "--stride" not in container(job)["args"]
    assert warm_pods(job, 2) is None
    (_cm, cold) = build(make_sweep(5, max_parallel=3))  # warm is asked for
    assert cold["spec"]["completions"] == 10 and warm_pods(cold, 10) is None


def test_each_pod_runs_every_stride_th_trial() -> None:
    assert [runner_warm.share(i, 3, 10) for i in range(3)] == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert runner_warm.share(1, 2, 1) == []
    with pytest.raises(ValueError, match="not one of 2 pods"):
        runner_warm.share(2, 2, 10)


def test_a_trials_state_comes_from_its_record_while_the_job_runs() -> None:
    running = {"metadata": {"uid": "u1"}, "spec": {}, "status": {"active": 2}}
    failed_job = {**running, "status": {"conditions": [{"type": "Failed", "status": "True"}]}}
    assert warm_trial_state(running, {}) == ("queued", None)
    assert warm_trial_state(running, {"state": "running"}) == ("running", None)
    assert warm_trial_state(running, {"state": "succeeded"}) == ("succeeded", None)
    assert warm_trial_state(running, {"state": "stopped-early", "stop_reason": "worse"}) == ("stopped early", "worse")
    record = {"state": "failed", "stop_reason": "exit code 3: boom", "job_uid": "u1"}
    assert warm_trial_state(running, record) == ("failed", "exit code 3: boom")
    # a failure of an earlier Job of the sweep: this Job runs the trial again
    assert warm_trial_state(running, {**record, "job_uid": "u0"}) == ("queued", None)
    # the runner's own "failed" (no Job's record): a crash its pod is trying again
    assert warm_trial_state(running, {"state": "failed", "timestep": 0}) == ("running", None)
    assert warm_trial_state(failed_job, {"state": "running"})[0] == "stopped"
    assert warm_trial_state(failed_job, {})[0] == "stopped"
    assert warm_trial_state(running, {"state": "stopped"})[0] == "queued"  # its pod's replacement resumes it


def test_status_reads_each_pods_trials_only_as_far_as_the_pod_got() -> None:
    names = [f"t{i}" for i in range(1000)]
    records = {f"t{i}": {"state": "succeeded"} for i in (0, 1, 2, 4)}  # pod 0: 0, 2, 4 done; pod 1: 1 done
    records["t6"] = {"state": "running", "timestep": 5}
    records["t3"] = {"state": "failed", "job_uid": "old"}  # an earlier Job's failure: pod 1 runs it again
    records["t8"] = {"state": "succeeded"}  # done in an earlier Job, beyond where pod 0 is
    batches: list[list[str]] = []

    def read(batch: list[str]) -> dict[str, dict[str, Any]]:
        assert len(batch) <= 2  # at most one trial per pod a round
        batches.append(batch)
        return {name: records.get(name, {}) for name in batch}

    from rlcloud.k8s.warm import read_shares

    got = read_shares(names, 2, read, job_uid="new")
    assert sorted(got, key=lambda n: int(n[1:])) == ["t0", "t1", "t2", "t3", "t4", "t6"]  # 6 reads, not 1,000
    assert got["t6"]["state"] == "running" and got["t3"]["job_uid"] == "old"
    assert batches == [["t0", "t1"], ["t2", "t3"], ["t4"], ["t6"]]
    records["t3"]["job_uid"] = "new"  # this Job's failure: pod 1 went on
    assert "t5" in read_shares(names, 2, read, job_uid="new")


# ------------------------------------------------------------------------------ a pod's loop, in process


def test_a_restarted_pod_skips_the_trials_that_finished(tmp_path: Path, pod_env: Path) -> None:
    sweep = make_sweep(3, max_parallel=2, smoke_timesteps=0)  # 6 trials: pod 1 runs 1, 3, 5
    names = [name for name, _p, _s in sweep.trial_table()]
    for index in (1, 3, 5):
        _record(pod_env, names[index], {"state": "succeeded", "timestep": 10})
    # nothing left to train: the pod ends at once (no TensorFlow imported for it)
    assert _share(_pod_args(tmp_path, sweep, 1, 2)) == 0
    assert not (tmp_path / "w").exists() or not any((tmp_path / "w").iterdir())


def test_claim_needs_a_sweep_a_stride_and_a_positive_lease(capsys: pytest.CaptureFixture[str]) -> None:
    for extra in (["--spec", "s.yaml", "--claim"], ["--sweep", "s.yaml", "--claim"],
                  ["--sweep", "s.yaml", "--stride", "2", "--claim", "0"]):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            parse_args(["--role", "single", "--workdir", "w", *extra])
        assert exc.value.code == 2 and "--claim" in capsys.readouterr().err


def test_a_claiming_pod_marks_finished_trials_done_and_ends_when_every_trial_is(tmp_path: Path, pod_env: Path) -> None:
    sweep = make_sweep(2, max_parallel=2, smoke_timesteps=0)  # 4 trials, finished under an earlier (stride) Job
    names = [name for name, _p, _s in sweep.trial_table()]
    for name in names:
        _record(pod_env, name, {"state": "succeeded", "timestep": 10})
    args = _pod_args(tmp_path, sweep, 1, 2)
    args.claim = 30.0
    assert _share(args) == 0
    claims = {n: json.loads((pod_env / "claims" / f"{n}.json").read_text()) for n in names}
    assert {c["state"] for c in claims.values()} == {"done"} and {c["outcome"] for c in claims.values()} == {
        "succeeded"
    }
    assert _share(args) == 0  # a restarted pod finds every trial final: nothing claimed again
    assert {n: json.loads((pod_env / "claims" / f"{n}.json").read_text()) for n in names} == claims


def test_a_claiming_pod_stops_once_max_failures_trials_failed_the_same_way(tmp_path: Path, pod_env: Path) -> None:
    sweep = make_sweep(5, max_parallel=2, max_failures=3, smoke_timesteps=0)  # 10 trials
    names = [name for name, _p, _s in sweep.trial_table()]
    failure = {"state": "failed", "signature": "exit code 3: no simulator licence", "job_uid": "job-2"}
    for index in (0, 1, 2):
        _record(pod_env, names[index], failure)
    args = _pod_args(tmp_path, sweep, 0, 2)
    args.claim = 30.0
    assert _share(args) == runner_warm.EXIT_HALTED
    assert not (pod_env / names[3]).exists()  # nothing started
    # the halting pod's claim released: a later Job's pod takes it at once
    assert json.loads((pod_env / "claims" / f"{names[0]}.json").read_text())["state"] in ("done", "released")


def test_a_pod_stops_launching_once_max_failures_trials_failed_the_same_way(tmp_path: Path, pod_env: Path) -> None:
    sweep = make_sweep(5, max_parallel=2, max_failures=3, smoke_timesteps=0)  # 10 trials
    names = [name for name, _p, _s in sweep.trial_table()]
    failure = {"state": "failed", "signature": "exit code 3: no simulator licence", "job_uid": "job-2"}
    for index in (0, 1, 2):
        _record(pod_env, names[index], failure)
    assert _share(_pod_args(tmp_path, sweep, 1, 2)) == runner_warm.EXIT_HALTED
    assert not (pod_env / names[3]).exists()  # nothing started
    # the same failures in an earlier Job of the sweep do not count: its trials run again (here: are skipped
    # because they succeeded meanwhile, as a finished trial would be)
    for index in (0, 1, 2):
        _record(pod_env, names[index], {**failure, "job_uid": "job-1"})
    for index in (1, 3, 5, 7, 9):
        _record(pod_env, names[index], {"state": "succeeded"})
    assert _share(_pod_args(tmp_path, sweep, 1, 2)) == 0


def _nolicence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An environment whose construction fails (exit 3), importable here and by the pods."""
    (tmp_path / "nolicence.py").write_text(
        "import gymnasium\n\nclass Env(gymnasium.Env):\n"
        "    def __init__(self):\n        raise RuntimeError('no simulator licence')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return {"type": "nolicence:Env"}


class _Seen(logging.Handler):
    """Sets ``event`` once a log line contains ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


def test_the_other_pods_wait_for_the_smoke_trial(
    tmp_path: Path, pod_env: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rlcloud.runner")
    environment = _nolicence(tmp_path, monkeypatch)
    sweep = make_sweep(2, max_parallel=2, experiment={"environment": environment})  # 4 trials, smoke 300
    names = [name for name, _p, _s in sweep.trial_table()]
    for index in (1, 3):
        _record(pod_env, names[index], {"state": "succeeded"})
    seen = _Seen("waiting for the first trial")
    logging.getLogger().addHandler(seen)
    try:
        # pod 1 waits until trial 0 (pod 0's) has trained smoke_timesteps: written once it says it waits
        def smoke_trains() -> None:
            seen.event.wait(120)  # checked below; written in any case, so that the pod never waits forever
            _record(pod_env, names[0], {"state": "running", "timestep": 350})

        writer = threading.Thread(target=smoke_trains)
        writer.start()
        assert _share(_pod_args(tmp_path, sweep, 1, 2)) == 0
        writer.join()
        assert seen.event.is_set()
        # a smoke trial that failed before its smoke_timesteps in this Job stops every pod
        _record(pod_env, names[0], {"state": "failed", "timestep": 20, "job_uid": "job-2", "signature": "x"})
        (pod_env / names[1] / "progress.json").unlink()
        assert _share(_pod_args(tmp_path, sweep, 1, 2)) == runner_warm.EXIT_HALTED
        assert not (pod_env / names[1] / "progress.json").exists()  # not started
    finally:
        logging.getLogger().removeHandler(seen)


def test_failure_signatures_blank_what_varies_between_trials() -> None:
    a = runner_warm.failure_signature(3, "trial lr-3: env at 0x7f00 failed after 12.5 s\nmore", "lr-3")
    b = runner_warm.failure_signature(3, "trial lr-7: env at 0x7e11 failed after 3 s", "lr-7")
    assert a == b == "exit code 3: trial <trial>: env at # failed after # s"


# ----------------------------------------------------------------------------- pods of the fake kubelet


@pytest.mark.processes  # the fake kubelet runs the pods as processes
def test_a_broken_warm_sweep_stops_after_max_failures_trials(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environment = _nolicence(tmp_path, monkeypatch)
    backend = _backend(api_client)
    sweep = make_sweep(10, max_parallel=2, max_failures=3, smoke_timesteps=0, experiment={"environment": environment})
    root = tmp_path / "results"
    backend.start_sweep(sweep, str(root))
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]), "TF_CPP_MIN_LOG_LEVEL": "2"}
    with FakeKubelet(apiserver, tmp_path / "pods", extra_env=env, max_grace=30) as kubelet:
        final = eventually(
            lambda: (s := backend.sweep_status("lr")).finished and s, timeout=300, what="the sweep to stop"
        )
        pods = list(kubelet.started)
    assert final.state == "failed", final.to_dict()
    failed = [t for t in final.trials if t.state == "failed"]
    assert 3 <= len(failed) <= 4, final.counts()  # the third stops it; the other pod may be in a 4th
    assert "stopped after" in (final.message or "") and "max_failures 3" in (final.message or "")
    assert len(pods) == 2  # two pods for 20 trials, none restarted
    for trial in failed:
        assert trial.reason is not None and "no simulator licence" in trial.reason, trial
        record = json.loads((root / "lr" / trial.name / "progress.json").read_text())
        assert record["exit_code"] == 3 and record["job_uid"] == apiserver.get_object("Job", "lr-sweep", "rl")[
            "metadata"]["uid"]  # fmt: skip
        assert "no simulator licence" in (root / "lr" / trial.name / "logs" / "single-0.log").read_text()
    assert final.counts().get("succeeded", 0) == 0
    job = apiserver.get_object("Job", "lr-sweep", "rl")
    (condition,) = [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
    assert condition["reason"] == "PodFailurePolicy"
    backend.stop_sweep("lr")


@pytest.mark.processes  # the fake kubelet runs the pods as processes
def test_a_broken_warm_sweep_fails_once_on_its_smoke_trial(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environment = _nolicence(tmp_path, monkeypatch)
    backend = _backend(api_client)
    sweep = make_sweep(10, max_parallel=2, experiment={"environment": environment})  # smoke_timesteps 300
    backend.start_sweep(sweep, str(tmp_path / "results"))
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]), "TF_CPP_MIN_LOG_LEVEL": "2"}
    with FakeKubelet(apiserver, tmp_path / "pods", extra_env=env, max_grace=30):
        final = eventually(
            lambda: (s := backend.sweep_status("lr")).finished and s, timeout=300, what="the sweep to stop"
        )
    assert final.state == "failed", final.to_dict()
    assert [t.state for t in final.trials].count("failed") == 1 and final.trials[0].state == "failed"
    assert "the first trial" in (final.message or "") and "smoke_timesteps" in (final.message or "")
    assert "no simulator licence" in (final.message or "")
    backend.stop_sweep("lr")


def _episodes(trial_dir: Path) -> list[tuple[float, int]]:
    lines = (trial_dir / "metrics.jsonl").read_text().splitlines()
    return [(float(r["return"]), int(r["length"])) for r in map(json.loads, lines)]


@pytest.mark.training
def test_warm_trials_learn_what_cold_ones_do_and_keep_their_records(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    from rlcloud.record import read_history
    from rlcloud.storage import open_store

    sweep = SweepSpec(
        name="tiny",
        experiment=make_spec(
            name="base",
            episodes=None,
            total_timesteps=300,
            agent={"type": "ppo", "batch_size": 2},
            saver_frequency=None,
            summary_frequency=None,
        ),
        parameters={"agent.learning_rate": [1e-3, 3e-3, 1e-2]},
        seeds=[1],
        max_parallel=2,
    )
    backend = _backend(api_client)
    root = tmp_path / "results"
    assert backend.start_sweep(sweep, str(root)) is True
    env = {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    with FakeKubelet(apiserver, tmp_path / "pods", extra_env=env, max_grace=60) as kubelet:
        status = eventually(
            lambda: (s := backend.sweep_status("tiny")).finished and s, timeout=600, what="the sweep to finish"
        )
        started = list(kubelet.started)
        successes = list(kubelet.probe_successes)
        failures = [out for _, _, out in kubelet.probe_failures if "no heartbeat yet" not in out]
    assert status.state == "succeeded", status.to_dict()
    assert len(started) == 2  # 3 trials, 2 pods: pod 0 ran trials 0 and 2
    # each pod's runner beat its heartbeat within its startupProbe's time, and no liveness probe failed
    # through the imports, the smoke wait, the trials and what came between them
    assert sorted(pod for _, pod, kind in successes if kind == "startup") == sorted(pod for _, pod in started)
    assert failures == []
    names = [t.name for t in status.trials]
    for trial in status.trials:
        store = open_store(str(root / "tiny" / trial.name))
        assert trial.progress["state"] == "succeeded" and trial.progress["timestep"] >= 300
        assert [h["event"] for h in read_history(store)] == ["created"]
        assert f"learning_rate: {trial.params['agent.learning_rate']}" in store.read_text("spec.yaml")
    # each trial's log is its own (trial 2 ran after trial 0 in the same process)
    for name in names:
        log = (root / "tiny" / name / "logs" / "single-0.log").read_text()
        assert log.count("training: 1 environment(s)") == 1 and log.count("succeeded: ") == 1, log

    # the same trial, cold: its own process, as a one-trial-per-pod Job runs it
    cold_root = tmp_path / "cold"
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(sweep.to_yaml())
    cold_env = {**os.environ, **env, SWEEP_RESULTS_ENV: str(cold_root)}
    argv = ["--role", "single", "--index", "2", "--sweep", str(sweep_file), "--workdir", str(tmp_path / "cw")]
    cold = subprocess.run(
        [sys.executable, "-m", "rlcloud.runner", *argv], env=cold_env, capture_output=True, text=True, timeout=600
    )
    assert cold.returncode == 0, cold.stderr[-3000:]
    warm, cold_episodes = _episodes(root / "tiny" / names[2]), _episodes(cold_root / names[2])
    assert len(cold_episodes) >= 5
    assert warm == cold_episodes
    assert _episodes(root / "tiny" / names[0]) != cold_episodes  # another trial learns something else
    backend.stop_sweep("tiny")


@pytest.mark.training
def test_a_crashed_warm_trial_is_tried_again_in_its_pod(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    # CartPole whose first step crashes once: the flag file is removed by the crash
    flag = tmp_path / "crash-once"
    flag.write_text("")
    (tmp_path / "crashonce.py").write_text(
        "import os\nimport gymnasium\nfrom gymnasium.envs.classic_control import CartPoleEnv\n\n"
        "class Env(CartPoleEnv):\n"
        "    def step(self, action):\n"
        f"        if os.path.exists({str(flag)!r}):\n"
        f"            os.unlink({str(flag)!r})\n"
        "            raise RuntimeError('simulator crashed')\n"
        "        return super().step(action)\n"
    )
    sweep = SweepSpec(
        name="crash",
        experiment=make_spec(
            name="base",
            environment={"type": "crashonce:Env"},
            max_timesteps_per_episode=200,
            episodes=None,
            total_timesteps=200,
            saver_frequency=None,
            summary_frequency=None,
        ),
        seeds=[1, 2],
        max_parallel=1,  # one pod runs both trials
    )
    backend = _backend(api_client)
    root = tmp_path / "results"
    assert backend.start_sweep(sweep, str(root)) is True
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]), "TF_USE_LEGACY_KERAS": "1",
           "TF_CPP_MIN_LOG_LEVEL": "2"}  # fmt: skip
    with FakeKubelet(apiserver, tmp_path / "pods", extra_env=env, max_grace=60) as kubelet:
        final = eventually(
            lambda: (s := backend.sweep_status("crash")).finished and s, timeout=600, what="the sweep to end"
        )
        started = list(kubelet.started)
    assert final.state == "succeeded", (final.message, [(t.state, t.reason, t.progress) for t in final.trials])
    assert len(started) == 1 and not flag.exists()
    from rlcloud.record import read_history
    from rlcloud.storage import open_store

    first = final.trials[0].name
    # started twice under its record, in one pod: the crash was retried in the process
    assert [h["event"] for h in read_history(open_store(str(root / "crash" / first)))] == ["created", "resumed"]
    assert "simulator crashed" in (root / "crash" / first / "logs" / "single-0.log").read_text()
    backend.stop_sweep("crash")
