"""How many Kubernetes API requests (and how much time) start / status / stop take, by worker count.

Runs KubernetesBackend with the real ``kubernetes`` client against the fake kube-apiserver
(tests/fakes/kube_apiserver.py) and counts requests from its request log. For status, the pods a
real cluster would have (1 agent + N env servers, Running) are put into the fake directly, so the
status read lists them as it would on a cluster. Times are local round trips on this machine, not a
real API server's latency; the request counts are what carries over.

    uv run --frozen python benchmarks/k8s_submit.py [--workers 1 10 100 1000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fakes

from kubernetes import client
from tests.fakes.kube_apiserver import FakeKubeApiServer

from rlcloud.k8s.backend import KubernetesBackend
from rlcloud.specs import ExperimentSpec


def spec_for(workers: int, name: str = "bench") -> ExperimentSpec:
    return ExperimentSpec(
        name=name,
        environment={"type": "gym", "level": "CartPole-v1"},
        agent={"type": "ppo", "batch_size": 10},
        total_timesteps=100_000,
        run_mode="distributed",
        num_workers=workers,
    )


def add_running_pods(server: FakeKubeApiServer, namespace: str, name: str) -> int:
    """What the Job controller + kubelets would have made: one Running pod per completion."""
    count = 0
    for job in server.list_objects("Job", namespace, f"rlcloud.io/experiment={name}"):
        template = job["spec"]["template"]
        indexed = job["spec"].get("completionMode") == "Indexed"
        for i in range(int(job["spec"].get("completions") or 1)):
            meta = {
                "name": f"{job['metadata']['name']}-{i}-x{i:04d}" if indexed else f"{job['metadata']['name']}-x",
                "labels": dict(template["metadata"]["labels"]),
                "annotations": {"batch.kubernetes.io/job-completion-index": str(i)} if indexed else {},
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": job["metadata"]["name"],
                        "uid": job["metadata"]["uid"],
                    }
                ],
            }
            pod = server.create_object("Pod", {"metadata": meta, "spec": template["spec"]}, namespace)
            server.update_status("Pod", pod["metadata"]["name"], namespace, {"phase": "Running"})
            count += 1
    return count


def measure(server: FakeKubeApiServer, action: str, fn: object) -> dict[str, object]:
    server.clear_requests()
    t0 = time.perf_counter()
    fn()  # type: ignore[operator]
    elapsed = time.perf_counter() - t0
    methods = Counter(r.method for r in server.requests)
    return {
        "action": action,
        "requests": len(server.requests),
        "creates": methods.get("POST", 0),
        "by_method": dict(sorted(methods.items())),
        "seconds": round(elapsed, 4),
    }


def run(workers: int) -> list[dict[str, object]]:
    rows = []
    with FakeKubeApiServer() as server:
        api = client.ApiClient(client.Configuration(host=server.url))
        try:
            backend = KubernetesBackend(api, namespace="bench", image="rlcloud:bench", poll_interval=0.05)
            spec = spec_for(workers)
            rows.append(measure(server, "start (new namespace)", lambda: backend.start(spec, "gs://bucket/runs")))
            other = KubernetesBackend(api, namespace="bench", image="rlcloud:bench", poll_interval=0.05)
            second = spec_for(workers, "bench2")
            rows.append(measure(server, "start (namespace ready)", lambda: other.start(second, "gs://bucket/runs")))
            rows.append(measure(server, "start again (idempotent)", lambda: other.start(second, "gs://bucket/runs")))
            pods = add_running_pods(server, "bench", "bench")
            # status reads progress.json from the store: point it at a local empty directory here
            backend._results["bench"] = ""
            rows.append(measure(server, f"status ({pods} pods)", lambda: backend.status("bench")))
            rows.append(measure(server, "stop", lambda: backend.stop("bench")))
            rows.append(measure(server, "stop again (idempotent)", lambda: backend.stop("bench")))
            job = server.get_object("Job", "bench2-agent", "bench")
            size = len(json.dumps(job))
        finally:
            api.close()
    for row in rows:
        row["workers"] = workers
        row["agent_job_bytes"] = size
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 10, 100, 1000])
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    args = parser.parse_args()
    rows = [row for n in args.workers for row in run(n)]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'workers':>7}  {'action':<26} {'requests':>8} {'creates':>7} {'seconds':>8}  by method")
    for row in rows:
        print(
            f"{row['workers']:>7}  {row['action']:<26} {row['requests']:>8} {row['creates']:>7} "
            f"{row['seconds']:>8.3f}  {row['by_method']}"
        )
    sizes = {row["workers"]: row["agent_job_bytes"] for row in rows}
    print("agent Job size (bytes, grows with the env-server list in RLCLOUD_ENV_SERVERS):", sizes)


if __name__ == "__main__":
    main()
