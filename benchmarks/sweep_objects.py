"""Objects created and Kubernetes API requests made to start, read and stop a sweep, by number of trials.

Runs KubernetesBackend with the real ``kubernetes`` client against the fake kube-apiserver
(tests/fakes/kube_apiserver.py), in process, and counts requests from its request log. For status, the
sweep is put in the state a cluster would show half-way: the first half of the trials completed
(``status.completedIndexes``), the next ``parallelism`` (at most 100) running as pods, the rest queued;
running trials have a progress.json in the (local) results store, read by status but not counted as API
requests. Times are local round trips, not a real API server's latency; the request counts carry over.

    uv run --frozen python benchmarks/sweep_objects.py [--trials 10 100 1000] [--json]

Measured here (2 cores shared with other work, 2026-11; the namespace already set up; the seconds vary
by 2-3x from run to run on this machine):

    trials  objects  ConfigMap bytes  start requests  status requests  stop requests  status s
        10        2              968               3                3              3     0.025
       100        2              970               3                3              3     0.019
      1000        2              972               3                3              3     0.115

(The ConfigMap differs by the digits of ``seeds: 5`` / ``50`` / ``500``.)

Start = read the Job + create the ConfigMap + create the ONE Indexed Job; status = the Job + the ConfigMap
+ one list of the sweep's pods; stop = delete the Jobs (foreground) + delete the ConfigMaps + one list of
pods (more lists while pods are still terminating on a real cluster). Constant in the number of trials;
only status's local work (parsing the pod list, reading running trials' progress) grows with it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fakes

from kubernetes import client
from tests.fakes.kube_apiserver import FakeKubeApiServer

from rlcloud.k8s.applier import RetryPolicy
from rlcloud.k8s.backend import KubernetesBackend
from rlcloud.specs import ExperimentSpec
from rlcloud.specs.sweep import SweepSpec

NAMESPACE = "bench"


def sweep_for(trials: int) -> SweepSpec:
    """Two learning rates x trials/2 seeds of a CartPole PPO experiment."""
    base = ExperimentSpec(
        name="base",
        environment={"type": "gym", "level": "CartPole-v1"},
        agent={"type": "ppo", "batch_size": 10},
        total_timesteps=100_000,
    )
    return SweepSpec(
        name=f"bench{trials}",
        experiment=base,
        parameters={"agent.learning_rate": [1e-3, 3e-4]},
        seeds=max(1, trials // 2),
    )


def half_way(server: FakeKubeApiServer, sweep: SweepSpec, results: Path) -> None:
    """What the Job controller, kubelets and runners would have left half-way through the sweep."""
    (job,) = server.list_objects("Job", NAMESPACE, f"rlcloud.io/sweep={sweep.name}")
    trials = sweep.num_trials
    done = trials // 2
    running = range(done, min(trials, done + int(job["spec"]["parallelism"])))
    status = {"completedIndexes": f"0-{done - 1}" if done else "", "active": len(running)}
    server.update_status("Job", job["metadata"]["name"], NAMESPACE, status)
    table = sweep.trial_table()
    template = job["spec"]["template"]
    for i in running:
        meta = {
            "name": f"{job['metadata']['name']}-{i}-x{i:04d}",
            "labels": dict(template["metadata"]["labels"]),
            "annotations": {"batch.kubernetes.io/job-completion-index": str(i)},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job["metadata"]["name"],
                    "uid": job["metadata"]["uid"],
                }
            ],
        }
        pod = server.create_object("Pod", {"metadata": meta, "spec": template["spec"]}, NAMESPACE)
        server.update_status("Pod", pod["metadata"]["name"], NAMESPACE, {"phase": "Running"})
        trial_dir = results / sweep.name / table[i][0]
        trial_dir.mkdir(parents=True, exist_ok=True)
        (trial_dir / "progress.json").write_text(json.dumps({"state": "running", "timestep": 1000 + i}))


def measure(server: FakeKubeApiServer, fn: Any) -> tuple[Any, int, float]:
    """(what fn returned, API requests it made, seconds it took)."""
    server.clear_requests()
    t0 = time.perf_counter()
    value = fn()
    return value, len(server.requests), time.perf_counter() - t0


def fake_backend(server: FakeKubeApiServer) -> tuple[client.ApiClient, KubernetesBackend]:
    """The real Kubernetes client and rlcloud's backend against ``server``, its namespace made."""
    api = client.ApiClient(client.Configuration(host=server.url))
    backend = KubernetesBackend(
        api,
        namespace=NAMESPACE,
        image="rlcloud:bench",
        retry=RetryPolicy(attempts=2, initial=0.01, maximum=0.01),
        poll_interval=0.05,
        local_results=True,
    )
    backend.ensure_namespace()
    backend.kubernetes_version()
    return api, backend


def run(trial_counts: list[int]) -> list[dict[str, Any]]:
    """One row of figures per number of trials."""
    rows = []
    with FakeKubeApiServer() as server, tempfile.TemporaryDirectory() as tmp:
        api, backend = fake_backend(server)
        results = Path(tmp)
        for trials in trial_counts:
            sweep = sweep_for(trials)
            server.clear_requests()
            _, start_requests, _ = measure(server, lambda s=sweep: backend.start_sweep(s, str(results)))
            created = [r for r in server.requests if r.method == "POST"]
            config = server.get_object("ConfigMap", f"{sweep.name}-sweep", NAMESPACE) or {}
            half_way(server, sweep, results)
            status, status_requests, status_s = measure(server, lambda s=sweep: backend.sweep_status(s.name))
            assert len(status.trials) == sweep.num_trials
            _, stop_requests, _ = measure(server, lambda s=sweep: backend.stop_sweep(s.name))
            rows.append(
                {
                    "trials": sweep.num_trials,
                    "objects": len(created),
                    "configmap_bytes": len(json.dumps(config.get("data") or {})),
                    "start_requests": start_requests,
                    "status_requests": status_requests,
                    "stop_requests": stop_requests,
                    "status_seconds": round(status_s, 3),
                    "counts": status.counts(),
                }
            )
        api.close()
    return rows


def main() -> None:
    """Print the table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    rows = run(args.trials)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("trials  objects  ConfigMap bytes  start requests  status requests  stop requests  status s")
    for r in rows:
        print(
            f"{r['trials']:>6}  {r['objects']:>7}  {r['configmap_bytes']:>15}  {r['start_requests']:>14}  "
            f"{r['status_requests']:>15}  {r['stop_requests']:>13}  {r['status_seconds']:>8.3f}"
        )


if __name__ == "__main__":
    main()
