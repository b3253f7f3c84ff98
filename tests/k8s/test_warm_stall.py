"""Stalls in a warm sweep's pods (issue 30): the pod's liveness across its life, a trial's stalls counted per trial.

In this process: the pod's heartbeat (rlcloud.runner.watchdog.PodHeartbeat) and its hand-over to each trial's
watchdog, the probe's reading of it, and a pod that finds a trial its watchdog failed for a second stall.
Then pods of the fake kubelet running the real warm loop (run_share) over the stand-in runner's trials
(tests/k8s/standin_runner.py) with the real watchdog: a trial that stalls again and again costs the pod
two restarts (ignored by the Job) and a failure record, not the pod's other trials; a pod hung between two
trials (the GIL held: no watchdog runs) is killed by its liveness probe and its replacement goes on.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from rlcloud.k8s.sweep_builders import SWEEP_HALTED_EXIT_CODE
from rlcloud.runner import warm as runner_warm
from rlcloud.runner import watchdog
from rlcloud.runner.watchdog import (
    EXIT_STALLED,
    EXIT_STALLED_AGAIN,
    LIVENESS_MARGIN_S,
    PodHeartbeat,
    StallWatchdog,
    liveness_command,
)
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.support.kubernetes import build, kubelet_for, make_sweep
from tests.support.waiting import eventually
from tests.support.warm_sweep import _backend, _pod_args, _record, _share

# ------------------------------------------------------------------------------------ the pod's heartbeat


class _Trainer:
    """What a watchdog reads of a trainer: running, and counters that do not move."""

    running = True
    counters = {"timestep": 0}


def _probe(workdir: Path, max_age: float) -> tuple[int, str]:
    """The liveness probe's program run here (its exit code, its output): what the kubelet runs as ``python -c``."""
    command = liveness_command(str(workdir), max_age)
    argv, out = sys.argv, io.StringIO()
    sys.argv = ["-c", *command[3:]]
    try:
        with contextlib.redirect_stdout(out):
            exec(command[2], {})
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = argv
    return code, out.getvalue()


def test_a_pods_heartbeat_beats_between_trials_and_each_trials_watchdog_takes_it_over(tmp_path: Path) -> None:
    with PodHeartbeat(tmp_path) as pod:
        path = tmp_path / ".heartbeat" / "pod"
        assert path.read_text() == ""  # the probe's own limit between trials
        os.utime(path, (0, 0))
        eventually(lambda: path.stat().st_mtime > 0, what="the pod's thread to beat")
        # while a watchdog holds it, the pod's thread leaves it alone (the watchdog's last advance)
        pod.hold(45)
        assert pod.held and path.read_text() == "45\n"
        os.utime(path, (0, 0))
        rounds = pod.rounds
        eventually(lambda: pod.rounds >= rounds + 2, what="two rounds of the pod's thread")
        assert path.stat().st_mtime == 0
        code, out = _probe(tmp_path, 3600)
        assert code == 1 and out.endswith("(at most 45 s)\n")  # the file's limit wins over the command's
        pod.release()  # handed back: fresh, with the probe's own limit
        assert not pod.held and path.read_text() == "" and time.time() - path.stat().st_mtime < 5
        # a trial's watchdog made in this pod holds the pod's file from its start to its stop
        dog = StallWatchdog(_Trainer(), 600, tmp_path / "trial-3", label="single-0", exit=lambda code: None)
        assert dog.heartbeat == path and not pod.held
        dog.start()
        assert pod.held and path.read_text() == f"{600 + LIVENESS_MARGIN_S:g}\n"
        dog.stop()
        assert not pod.held and path.read_text() == ""
        assert _probe(tmp_path, 30)[0] == 0
        assert not (tmp_path / "trial-3" / ".heartbeat").exists()
    assert not (tmp_path / ".heartbeat").exists()  # the pod's work is over: nothing to judge
    assert watchdog._pod_heartbeat is None
    # outside a pod, a watchdog keeps its own file, which says its limit too
    dog = StallWatchdog(_Trainer(), 5, tmp_path, label="single-0", exit=lambda code: None).start()
    try:
        assert dog.heartbeat == tmp_path / ".heartbeat" / "single-0"
        assert dog.heartbeat.read_text() == f"{5 + LIVENESS_MARGIN_S:g}\n"
    finally:
        dog.stop()


def test_the_probe_reads_the_newest_heartbeats_own_limit(tmp_path: Path) -> None:
    beats = tmp_path / ".heartbeat"
    assert _probe(tmp_path, 1)[0] == 0  # none yet: starting
    beats.mkdir()
    (beats / "pod").write_text("")
    old = time.time() - 100
    os.utime(beats / "pod", (old, old))
    assert _probe(tmp_path, 150)[0] == 0 and _probe(tmp_path, 50)[0] == 1
    (beats / "pod").write_text("500\n")
    os.utime(beats / "pod", (old, old))
    assert _probe(tmp_path, 50)[0] == 0
    (beats / "pod").write_text("60\n")
    os.utime(beats / "pod", (old, old))
    assert _probe(tmp_path, 3600) == (1, "no heartbeat for 100 s (at most 60 s)\n")


def test_a_stall_recorded_under_an_earlier_job_does_not_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "progress.json").write_text(json.dumps({"state": "stalled", "stalls": 1, "job_uid": "job-1"}))
    monkeypatch.setenv("RLCLOUD_JOB_UID", "job-2")
    assert StallWatchdog(_Trainer(), 5, tmp_path, label="single-0").previous_stalls == 0
    monkeypatch.setenv("RLCLOUD_JOB_UID", "job-1")
    assert StallWatchdog(_Trainer(), 5, tmp_path, label="single-0").previous_stalls == 1


# --------------------------------------------------------------------------------- a pod's loop, in here


def _stalled_again(timestep: int, job_uid: str = "job-2") -> dict[str, Any]:
    """A trial's record as its watchdog leaves it when it stalled again after a restart for a stall."""
    what = f"stalled: no timestep for {timestep % 7 + 3} s (stall_timeout 2 s) at timestep {timestep}"
    return {"state": "failed", "stalls": 2, "stalled": what, "timestep": timestep, "job_uid": job_uid}


def test_a_pod_records_a_trial_that_stalled_again_as_failed_and_goes_on(tmp_path: Path, pod_env: Path) -> None:
    sweep = make_sweep(3, max_parallel=2, max_failures=3, smoke_timesteps=0)  # 6 trials: pod 1 runs 1, 3, 5
    names = [name for name, _p, _s in sweep.trial_table()]
    _record(pod_env, names[1], _stalled_again(40))
    for index in (3, 5):
        _record(pod_env, names[index], {"state": "succeeded"})
    assert _share(_pod_args(tmp_path, sweep, 1, 2)) == 0
    record = json.loads((pod_env / names[1] / "progress.json").read_text())
    assert record["state"] == "failed" and record["exit_code"] == EXIT_STALLED_AGAIN and record["job_uid"] == "job-2"
    assert record["signature"] == "exit code 89: stalled: no timestep for # s (stall_timeout # s) at timestep #"
    assert record["stop_reason"].startswith("exit code 89: stalled: no timestep for 8 s")
    assert record["timestep"] == 40 and record["stalls"] == 2  # what it had is kept


def test_trials_that_stalled_again_count_toward_max_failures_as_one_signature(tmp_path: Path, pod_env: Path) -> None:
    sweep = make_sweep(4, max_parallel=2, max_failures=3, smoke_timesteps=0)  # 8 trials: pod 1 runs 1, 3, 5, 7
    names = [name for name, _p, _s in sweep.trial_table()]
    # two of pod 0's trials stalled out (its pod ended with them: no record of a pod's yet), one of pod 1's
    for index, timestep in ((0, 12), (2, 31), (1, 7)):
        _record(pod_env, names[index], _stalled_again(timestep))
    _record(pod_env, names[3], {"state": "stalled", "stalls": 1, "job_uid": "job-2"})  # once: it would resume
    assert _share(_pod_args(tmp_path, sweep, 1, 2)) == SWEEP_HALTED_EXIT_CODE
    assert json.loads((pod_env / names[3] / "progress.json").read_text())["state"] == "stalled"  # not started
    # stalls under an earlier Job of the sweep are not this Job's failures
    for index, timestep in ((0, 12), (2, 31)):
        _record(pod_env, names[index], _stalled_again(timestep, job_uid="job-1"))
    for index in (3, 5, 7):
        _record(pod_env, names[index], {"state": "succeeded"})
    assert _share(_pod_args(tmp_path, sweep, 1, 2)) == 0


# ----------------------------------------------------------------------------- pods of the fake kubelet


def _env(**extra: str) -> dict[str, str]:
    base = {
        "STANDIN_EPISODES": "3",
        "STANDIN_DELAY": "0.05",
        "STANDIN_WATCHDOG": "1",
        "STANDIN_STALL_TIMEOUT": "2",
        "STANDIN_LEASE_S": "10",
    }  # a dead pod's trial is taken over after 10 s
    return {**base, **extra}


def _index_codes(kubelet: Any, index: int) -> list[int]:
    return [code for _, pod, code in kubelet.exits if pod.startswith(f"lr-sweep-{index}-")]


@pytest.mark.processes  # the fake kubelet runs the pods as processes
def test_a_trial_that_stalls_twice_fails_alone_and_its_pod_goes_on_with_its_other_trials(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    """2 pods claim 8 trials, and trials 2, 4 and 6 hang every time they run: each stalls (exit 88, its claim
    released: a pod resumes it), stalls again (89), and the next pod that claims it records it failed and goes
    on. Six pod failures, more than an index's backoffLimitPerIndex (4) if one pod had them all: the Job ignores
    them. The third trial failed that way is the sweep's max_failures (3) of one signature: the pod that sees it
    halts the sweep (exit 4)."""
    backend = _backend(api_client)
    sweep = make_sweep(4, max_parallel=2, max_failures=3, smoke_timesteps=0, experiment={"stall_timeout": "2s"})
    root = tmp_path / "results"
    backend.start_sweep(sweep, str(root))  # 8 trials
    env = _env(STANDIN_HANG_AFTER="1", STANDIN_HANG_TRIALS="2,4,6")
    with kubelet_for(apiserver, tmp_path, **env) as kubelet:
        final = eventually(
            lambda: (s := backend.sweep_status("lr")).finished and s, timeout=240, what="the sweep to stop"
        )
        codes = [code for _, _pod, code in kubelet.exits]
    seen = Counter(codes)
    assert seen[EXIT_STALLED] == 3 and seen[EXIT_STALLED_AGAIN] == 3 and seen[SWEEP_HALTED_EXIT_CODE] >= 1, codes
    assert set(codes) <= {0, 143, EXIT_STALLED, EXIT_STALLED_AGAIN, SWEEP_HALTED_EXIT_CODE}, codes
    job = apiserver.get_object("Job", "lr-sweep", "rl")
    (condition,) = [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
    assert condition["reason"] == "PodFailurePolicy"
    assert final.state == "failed" and "max_failures 3" in (final.message or ""), final.to_dict()
    states = {t.name: t.state for t in final.trials}
    names = [name for name, _p, _s in sweep.trial_table()]
    assert [states[names[i]] for i in (0, 2, 4, 6)] == ["succeeded", "failed", "failed", "failed"], final.to_dict()
    signatures = set()
    for index in (2, 4, 6):
        record = json.loads((root / "lr" / names[index] / "progress.json").read_text())
        assert record["exit_code"] == EXIT_STALLED_AGAIN and record["stalls"] == 2
        assert record["job_uid"] == job["metadata"]["uid"]
        signatures.add(record["signature"])
    assert signatures == {"exit code 89: stalled: no timestep for # s (stall_timeout # s) at timestep #"}
    backend.stop_sweep("lr")


@pytest.mark.processes  # the fake kubelet runs the pods as processes
def test_a_stall_the_store_does_not_hold_is_a_counted_retry_so_stalls_never_loop(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    """The Job ignores a stall's exit, so only the trial's record in the store bounds its stalls: when that
    record is lost, the pod exits 1 instead (counted; its claim of the trial left to expire), and
    backoffLimitPerIndex (4) ends an index whose pods claimed it five times."""
    backend = _backend(api_client)
    sweep = make_sweep(2, max_parallel=2, smoke_timesteps=0, experiment={"stall_timeout": "2s"})  # 4 trials
    backend.start_sweep(sweep, str(tmp_path / "results"))
    # each pod trains one more episode of trial 2 before it hangs: enough episodes to outlast the retries
    env = _env(STANDIN_HANG_AFTER="1", STANDIN_HANG_TRIALS="2", STANDIN_LOSE_STALLS="1", STANDIN_EPISODES="20")
    with kubelet_for(apiserver, tmp_path, **env) as kubelet:
        final = eventually(
            lambda: (s := backend.sweep_status("lr")).finished and s, timeout=240, what="the sweep to stop"
        )
        codes = {index: _index_codes(kubelet, index) for index in (0, 1)}
        crashed = [pod for _, pod, code in kubelet.exits if code == runner_warm.EXIT_CRASH]
    logs = [(tmp_path / "pods" / "rl" / pod / "container.log").read_text() for pod in crashed]
    assert set(codes[0] + codes[1]) <= {0, runner_warm.EXIT_CRASH}, codes
    assert max(c.count(runner_warm.EXIT_CRASH) for c in codes.values()) == 5, codes
    assert final.state == "failed", final.to_dict()
    assert all("the results store does not hold its record: exit code 1 instead" in log for log in logs)
    backend.stop_sweep("lr")


@pytest.mark.processes  # the fake kubelet runs the pods as processes
@pytest.mark.slow  # the probe's limit: stall_timeout + 30 s
def test_a_warm_pod_hung_between_trials_is_killed_by_its_liveness_probe_and_its_replacement_goes_on(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    """The pod that claims trial 2 hangs holding the GIL while it prepares it (no trial's watchdog runs yet,
    nor any thread: its claim is not renewed): the pod's heartbeat ages, its liveness probe fails past
    stall_timeout + 30 s, the kubelet kills the pod (SIGKILL after the grace period: 137, a counted retry, or
    1 when the SIGTERM woke it and its lease's fence ended it), and trial 2 is taken over once its claim's lease
    has expired; every trial succeeds."""
    backend = _backend(api_client)
    sweep = make_sweep(4, max_parallel=2, smoke_timesteps=0, experiment={"stall_timeout": "2s"})  # 8 trials
    root = tmp_path / "results"
    backend.start_sweep(sweep, str(root))
    (_cm, job) = build(sweep, warm=True)
    probe = job["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    with kubelet_for(apiserver, tmp_path, **_env(STANDIN_HANG_BEFORE="2")) as kubelet:
        final = eventually(
            lambda: (s := backend.sweep_status("lr")).finished and s, timeout=240, what="the sweep to finish"
        )
        codes = sorted(code for _, _pod, code in kubelet.exits)
        failures = [out for _, _pod, out in kubelet.probe_failures]
    assert final.state == "succeeded", final.to_dict()
    # the other pod, the hung pod's replacement, and the hung pod: killed (137) or, woken by the kubelet's
    # SIGTERM after its claim's lease expired, stopped by its lease's fence (1): a counted retry either way
    assert codes[:2] == [0, 0] and codes[2] in (runner_warm.EXIT_CRASH, 137), codes
    # a startup probe may come before a pod's first beat; the liveness probe's failures say the limit
    liveness = [out for out in failures if "no heartbeat yet" not in out]
    assert len(liveness) == probe["failureThreshold"] and all("(at most 32 s)" in out for out in liveness)
    hung = (root / "lr" / "hung-before-2").stat().st_mtime
    pods = apiserver.list_objects("Pod", "rl")
    (killed,) = [p for p in pods if p["status"]["containerStatuses"][0]["state"].get("terminated", {}).get(
        "exitCode") == codes[2]]  # fmt: skip
    finished = killed["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
    from datetime import datetime

    seconds = datetime.fromisoformat(finished.replace("Z", "+00:00")).timestamp() - hung
    print(f"hang to kill: {seconds:.1f} s (probe limit 32 s, period {probe['periodSeconds']} s)")
    assert seconds >= 32
    backend.stop_sweep("lr")


def test_the_warm_jobs_rules_ignore_stalls_and_its_pods_have_startup_and_liveness_probes() -> None:
    sweep = make_sweep(5, max_parallel=3, max_failures=3, experiment={"stall_timeout": "90s"})  # 10 trials
    for version in ("1.28", "1.29"):
        (_cm, job) = build(sweep, warm=True, kubernetes_version=version)
        rules = job["spec"]["podFailurePolicy"]["rules"]
        stalls = [EXIT_STALLED, EXIT_STALLED_AGAIN]
        assert [(r["action"], (r.get("onExitCodes") or {}).get("values")) for r in rules] == [
            ("Ignore", None), ("FailJob", [2, 3, SWEEP_HALTED_EXIT_CODE]), ("Ignore", stalls)]  # fmt: skip
        container = job["spec"]["template"]["spec"]["containers"][0]
        assert container["livenessProbe"]["exec"]["command"][3:] == ["/var/lib/rlcloud/work/.heartbeat", "120"]
        startup = container["startupProbe"]
        assert startup["exec"]["command"][3:] == ["/var/lib/rlcloud/work/.heartbeat"]
        assert startup["periodSeconds"] * startup["failureThreshold"] == 300
    # a cold sweep's pods have the learner's probe (a trial's own heartbeat), no startup probe
    (_cm, cold) = build(make_sweep(1, experiment={"stall_timeout": "90s"}), kubernetes_version="1.29")
    container = cold["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["exec"]["command"][3:] == ["/var/lib/rlcloud/work/.heartbeat", "120"]
    assert "startupProbe" not in container
    rules = cold["spec"]["podFailurePolicy"]["rules"]
    assert ("FailIndex", [EXIT_STALLED_AGAIN]) in [(r["action"], r["onExitCodes"]["values"]) for r in rules[1:]]
    assert runner_warm.EXIT_HALTED == SWEEP_HALTED_EXIT_CODE
