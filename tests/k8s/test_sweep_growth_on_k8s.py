"""Sweeps that grow on Kubernetes (issue 45): new trials and trials run again go to Indexed Jobs of their own
beside the sweep's first, whose running pods are never touched; the fake kubelet runs the stand-in runner.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client

from rlcloud import Sweep
from rlcloud.k8s.builders import ANNOTATION_TRIAL_INDICES, CONFIG_KEY_GROWN, CONFIG_KEY_SWEEP
from rlcloud.k8s.sweep_builders import build_sweep_growth_job
from rlcloud.record import grow_sweep_recorded, read_history, read_sweep_growth
from rlcloud.specs.sweep import Growth, SweepSpec
from rlcloud.storage import open_store
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet
from tests.support.kubernetes import as_dicts, build, container, make_backend, make_sweep, standin
from tests.support.waiting import eventually


def test_a_growth_job_runs_the_new_indices_from_the_grown_sweep() -> None:
    grown = make_sweep(1, max_parallel=4).with_growth([Growth(seeds=[2, 3])])
    (job,) = as_dicts([build_sweep_growth_job(grown, [2, 3, 4, 5], "g2", namespace="rl", results="gs://b/r")])
    (first,) = [o for o in build(make_sweep(1, max_parallel=4)) if o["kind"] == "Job"]
    assert job["metadata"]["name"] == "lr-sweep-g2" and job["metadata"]["labels"] == first["metadata"]["labels"]
    assert job["metadata"]["annotations"][ANNOTATION_TRIAL_INDICES] == "2-5"
    assert (job["spec"]["completions"], job["spec"]["parallelism"], job["spec"]["completionMode"]) == (4, 4, "Indexed")
    args = container(job)["args"]
    assert args[-2:] == ["--trials", "2-5"] and args[args.index("--sweep") + 1] == f"/etc/rlcloud/{CONFIG_KEY_SWEEP}"
    (volume,) = [v for v in job["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    # its pods read the grown sweep; the first Job's pods read the key that never changes
    assert volume["configMap"]["items"] == [{"key": CONFIG_KEY_GROWN, "path": CONFIG_KEY_SWEEP}]


def test_the_api_server_refuses_growing_a_running_indexed_job(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient
) -> None:
    """Why growth is a second Job: an Indexed Job's completions change only with parallelism, equal to it."""
    apiserver.create_object("Namespace", {"metadata": {"name": "rl"}})
    (_, job) = build(make_sweep(3, max_parallel=2))  # 6 trials, 2 at a time
    batch = client.BatchV1Api(api_client)
    batch.create_namespaced_job("rl", job)
    with pytest.raises(client.ApiException) as info:
        batch.patch_namespaced_job("lr-sweep", "rl", {"spec": {"completions": 8}})
    assert info.value.status == 422 and "completions" in str(info.value.body)
    # elastic: completions and parallelism together, equal (Kubernetes 1.27+) is allowed
    patched = batch.patch_namespaced_job("lr-sweep", "rl", {"spec": {"completions": 8, "parallelism": 8}})
    assert patched.spec.completions == 8


def _snapshot(root: Path, names: list[str]) -> dict[str, tuple[int, bytes]]:
    """Every file of these trials: its mtime and bytes (a trial retrained would change them)."""
    return {
        str(p): (p.stat().st_mtime_ns, p.read_bytes())
        for name in names
        for p in sorted((root / name).rglob("*"))
        if p.is_file()
    }


@pytest.mark.processes
def test_a_running_sweep_grows_reruns_its_failed_trial_and_a_crashed_growth_completes(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    backend = make_backend(api_client)
    root = tmp_path / "results"
    sweep = Sweep(make_sweep(1, max_parallel=2), results=str(root))
    sweep._backend = backend  # the stand-in runner writes to a directory: the backend, not a cluster target
    sweep.start(validate=False)
    location = root / "lr"
    # trial 1 checkpoints after 2 episodes and fails; trial 0 trains on while the sweep grows
    env = {"STANDIN_EPISODES": "30", "STANDIN_DELAY": "0.05", "STANDIN_CRASH_TRIAL": "1:2"}
    with FakeKubelet(apiserver, tmp_path / "pods", argv_rewrite=standin, extra_env=env, max_grace=10) as kubelet:
        eventually(lambda: (location / "lr1e-3" / "progress.json").exists(), timeout=60, what="trial 0 training")
        first_pods = {p["metadata"]["name"]: p["metadata"]["uid"] for p in apiserver.list_objects("Pod", "rl")}
        added = sweep.extend(seeds=2)
        assert added == ["lr1e-3--seed2", "lr3e-4--seed2"]
        jobs = {j["metadata"]["name"]: j for j in apiserver.list_objects("Job", "rl")}
        assert sorted(jobs) == ["lr-sweep", "lr-sweep-g2"]
        assert jobs["lr-sweep"]["spec"]["completions"] == 2  # the first Job is as it was
        assert jobs["lr-sweep-g2"]["metadata"]["annotations"][ANNOTATION_TRIAL_INDICES] == "2-3"
        eventually(lambda: sweep.status().finished, timeout=120, what="the grown sweep to finish")
        final = sweep.status()
    assert [(t.name, t.state) for t in final.trials] == [
        ("lr1e-3", "succeeded"), ("lr3e-4", "failed"), ("lr1e-3--seed2", "succeeded"), ("lr3e-4--seed2", "succeeded"),
    ]  # fmt: skip
    # the first Job's pods were never restarted: each ran once, the running one to its end
    still = {p["metadata"]["name"]: p["metadata"]["uid"] for p in apiserver.list_objects("Pod", "rl")}
    assert {n: u for n, u in still.items() if n in first_pods} == first_pods
    by_job: dict[str, list[int]] = {}
    for _, pod, code in kubelet.exits:
        by_job.setdefault(pod.rsplit("-", 2)[0], []).append(code)
    assert sorted(by_job["lr-sweep"]) == [0, 3] and by_job["lr-sweep-g2"] == [0, 0]
    table = sweep.spec.trial_table()
    assert len({(json.dumps(p, sort_keys=True), s) for _, p, s in table}) == len(table) == 4  # no duplicate pair
    done = [t.name for t in final.trials if t.state == "succeeded"]
    before = _snapshot(location, done)

    # the failed trial runs again from its checkpoint, in a Job of its own; nothing else runs
    with FakeKubelet(apiserver, tmp_path / "pods2", argv_rewrite=standin, extra_env={**env, "STANDIN_CRASH_TRIAL": ""},
                     max_grace=10) as kubelet:  # fmt: skip
        assert sweep.rerun("failed") == ["lr3e-4"]
        assert (
            apiserver.get_object("Job", "lr-sweep-r1", "rl")["metadata"]["annotations"][ANNOTATION_TRIAL_INDICES] == "1"
        )
        eventually(lambda: sweep.status().finished, timeout=120, what="the rerun")
        final = sweep.status()
        (rerun_pod,) = [pod for _, pod in kubelet.started]
        log = (tmp_path / "pods2" / "rl" / rerun_pod / "container.log").read_text()
    assert final.counts() == {"succeeded": 4}, final.to_dict()
    assert "resumed from ckpt-2" in log and rerun_pod.startswith("lr-sweep-r1-")
    assert _snapshot(location, done) == before  # 0 finished trials retrained: their files untouched
    assert sweep.extend(seeds=2) == [] and sweep.rerun("failed") == []  # again: nothing more
    assert len(apiserver.list_objects("Job", "rl")) == 3

    # a crash in the middle of a growth: the step is recorded, its Job never made; the next call completes it
    store = open_store(str(location))

    def crash(grown: SweepSpec) -> None:
        raise KeyboardInterrupt("the laptop closed")

    with pytest.raises(KeyboardInterrupt):
        grow_sweep_recorded(store, sweep.spec, lambda s: Growth(seeds=[3]), crash, where="test")
    assert [g.seeds for g in read_sweep_growth(store)] == [[2], [3]]
    assert "lr-sweep-g4" not in {j["metadata"]["name"] for j in apiserver.list_objects("Job", "rl")}
    assert sweep.extend(seeds=3) == ["lr1e-3--seed3", "lr3e-4--seed3"]
    assert (
        apiserver.get_object("Job", "lr-sweep-g4", "rl")["metadata"]["annotations"][ANNOTATION_TRIAL_INDICES] == "4-5"
    )
    with FakeKubelet(apiserver, tmp_path / "pods3", argv_rewrite=standin, extra_env={**env, "STANDIN_CRASH_TRIAL": ""},
                     max_grace=10) as kubelet:  # fmt: skip
        eventually(lambda: sweep.status().counts() == {"succeeded": 6}, timeout=120, what="the finished sweep grown")
        assert sorted(pod.rsplit("-", 2)[0] for _, pod in kubelet.started) == ["lr-sweep-g4"] * 2
    assert _snapshot(location, done) == before
    history = read_history(store)
    assert [(h["event"], h.get("step")) for h in history] == [
        ("created", None), ("grown", 1), ("rerun", None), ("grown", 2),
    ]  # fmt: skip
    assert history[1]["who"] and history[1]["growth"] == {"seeds": [2]}
    again = backend.attach_sweep("lr")[0]
    assert [n for n, _p, _s in again.trial_table()] == [n for n, _p, _s in sweep.spec.trial_table()]
    backend.stop_sweep("lr")
    assert apiserver.list_objects("Job", "rl") == [] and apiserver.list_objects("ConfigMap", "rl") == []


@pytest.mark.processes
def test_a_warm_sweep_grows_beside_its_pods_that_run_several_trials(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    from tests.support.warm_sweep import _backend

    backend = _backend(api_client)  # warm: 2 pods share the 4 trials
    root = tmp_path / "results"
    sweep = Sweep(make_sweep(2, max_parallel=2, smoke_timesteps=0), results=str(root))
    sweep._backend = backend
    sweep.start(validate=False)
    assert "--stride" in container(apiserver.get_object("Job", "lr-sweep", "rl"))["args"]
    env = {"STANDIN_EPISODES": "20", "STANDIN_DELAY": "0.05"}
    with FakeKubelet(apiserver, tmp_path / "pods", argv_rewrite=standin, extra_env=env, max_grace=10):
        eventually(lambda: sweep.status().counts().get("running") == 2, timeout=60, what="two trials running")
        assert sweep.extend(parameters={"agent.learning_rate": [1e-4]}) == ["lr1e-4--seed1", "lr1e-4--seed2"]
        grown = apiserver.get_object("Job", "lr-sweep-g4", "rl")
        assert "--stride" not in container(grown)["args"] and container(grown)["args"][-2:] == ["--trials", "4-5"]
        eventually(lambda: sweep.status().finished, timeout=120, what="the grown warm sweep")
        final = sweep.status()
    assert [(t.index, t.name, t.state) for t in final.trials] == [
        (0, "lr1e-3--seed1", "succeeded"), (1, "lr1e-3--seed2", "succeeded"), (2, "lr3e-4--seed1", "succeeded"),
        (3, "lr3e-4--seed2", "succeeded"), (4, "lr1e-4--seed1", "succeeded"), (5, "lr1e-4--seed2", "succeeded"),
    ]  # fmt: skip
    assert final.state == "succeeded"
    for name, _p, _s in sweep.spec.trial_table():
        assert json.loads((root / "lr" / name / "progress.json").read_text())["state"] == "succeeded", name
