"""Kubernetes API requests by scale (issue 15, goal 5): status and followed logs of an experiment with N env
servers, status of a sweep with N trials; the goal is requests that do not grow with N.

Runs KubernetesBackend with the real ``kubernetes`` client against the fake kube-apiserver
(tests/fakes/kube_apiserver.py), in process, and counts requests from its request log. An experiment
(run_mode distributed, N env servers) is given one learner pod and N env-server pods (as the Job
controller would create them), each with a log line, then:

- status: ``backend.status(name)`` with every pod Running;
- follow: ``logs(follow=True)`` once every Job has completed (so that following ends): the log streams it
  opens (requests for a pod's log), by default (the learner's only) and with ``roles=["learner",
  "env-server"]`` (what ``rlcloud experiment logs NAME -f --env-servers`` asks for: one stream per pod);

and a sweep of N trials half-way through (benchmarks/sweep_objects.py): ``sweep_status``. Usage::

    uv run --frozen python benchmarks/scale_requests.py [--sizes 10 100 1000]

Measured 2026-11-23 on the 2-core development VM (request counts are exact; the seconds vary)::

    env servers | status requests | logs -f | logs -f --env-servers (streams / requests / lines)
        10 |   3 (0.020 s) |    1 /    3 /    1 |    11 /    13 /    11
       100 |   3 (0.013 s) |    1 /    3 /    1 |   101 /   103 /   101
      1000 |   3 (0.373 s) |    1 /    3 /    1 |  1001 /  1003 /  1001
    sweep: trials | status requests
        10 |   3 (0.033 s)
       100 |   3 (0.060 s)
      1000 |   3 (0.135 s)

1000 / 10: status requests 1.00x, streams of ``logs -f`` 1.00x (the learner's; before issue 15 goal 5 it
opened one per started pod, 1001 for 1000 env servers, as ``--env-servers`` still does on request), sweep
status requests 1.00x. (``logs -f`` requests: one list of Jobs, one of Pods, the learner's stream.)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fakes
sys.path.insert(0, str(Path(__file__).resolve().parent))  # for sweep_objects

import sweep_objects
from tests.fakes.kube_apiserver import FakeKubeApiServer

from rlcloud.k8s.backend import KubernetesBackend
from rlcloud.specs import ExperimentSpec

NAMESPACE = sweep_objects.NAMESPACE


def _pods(server: FakeKubeApiServer, job: dict[str, Any], count: int, role: str) -> list[str]:
    template = job["spec"]["template"]
    names = []
    for i in range(count):
        name = f"{job['metadata']['name']}-{i}-x{i:04d}"
        meta = {
            "name": name,
            "labels": dict(template["metadata"]["labels"]),
            "annotations": {"batch.kubernetes.io/job-completion-index": str(i)},
        }
        server.create_object("Pod", {"metadata": meta, "spec": template["spec"]}, NAMESPACE)
        server.update_status("Pod", name, NAMESPACE, {"phase": "Running"})
        server.append_log(NAMESPACE, name, f"{role} {i} says hello\n".encode())
        names.append(name)
    return names


def experiment_row(
    server: FakeKubeApiServer, backend: KubernetesBackend, results: Path, servers: int
) -> dict[str, Any]:
    """Requests of status and of following the logs, for an experiment with ``servers`` env servers."""
    name = f"wide{servers}"
    spec = ExperimentSpec(
        name=name,
        environment={"type": "gym", "level": "CartPole-v1"},
        agent={"type": "ppo", "batch_size": 10},
        total_timesteps=100_000,
        run_mode="distributed",
        num_workers=servers,
    )
    backend.start(spec, str(results))
    jobs = {j["metadata"]["labels"]["rlcloud.io/role"]: j for j in server.list_objects("Job", NAMESPACE)
            if j["metadata"]["labels"].get("rlcloud.io/experiment") == name}  # fmt: skip
    pods = _pods(server, jobs["agent"], 1, "agent") + _pods(server, jobs["env-server"], servers, "env-server")
    backend.status(name)  # the ConfigMap is read once per backend
    server.clear_requests()
    t0 = time.perf_counter()
    backend.status(name)
    status_s = time.perf_counter() - t0
    status_requests = len(server.requests)
    for pod in pods:
        server.update_status("Pod", pod, NAMESPACE, {"phase": "Succeeded"})
    for job in jobs.values():
        complete = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}
        server.update_status("Job", job["metadata"]["name"], NAMESPACE, complete)
    row: dict[str, Any] = {"env servers": servers, "status requests": status_requests, "status s": status_s}
    for label, roles in (("follow", None), ("follow --env-servers", ["learner", "env-server"])):
        server.clear_requests()
        lines = list(backend.logs(name, follow=True, roles=roles))
        streams = sum(r.path.endswith("/log") for r in server.requests)
        row[label] = (streams, len(server.requests), len(lines))
    return row


def main() -> None:
    """Print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    args = parser.parse_args()
    rows = []
    with FakeKubeApiServer() as server, tempfile.TemporaryDirectory() as tmp:
        api, backend = sweep_objects.fake_backend(server)
        for n in args.sizes:
            rows.append(experiment_row(server, backend, Path(tmp), n))
        api.close()
    sweeps = sweep_objects.run(args.sizes)

    print(f"{os.cpu_count()} CPUs; Kubernetes API requests (fake kube-apiserver, real client)\n")
    print("experiment, distributed: env servers | status requests | logs -f | logs -f --env-servers "
          "(streams / requests / lines)")  # fmt: skip
    for r in rows:
        f, fe = r["follow"], r["follow --env-servers"]
        print(
            f"{r['env servers']:>6} | {r['status requests']:>3} ({r['status s']:.3f} s) | "
            f"{f[0]:>4} / {f[1]:>4} / {f[2]:>4} | {fe[0]:>5} / {fe[1]:>5} / {fe[2]:>5}"
        )
    print("\nsweep: trials | status requests")
    for s in sweeps:
        print(f"{s['trials']:>6} | {s['status_requests']:>3} ({s['status_seconds']:.3f} s)")
    first, last = rows[0], rows[-1]
    print(
        f"\nratio {last['env servers']} / {first['env servers']} env servers: status requests "
        f"{last['status requests'] / first['status requests']:.2f}x, streams of logs -f "
        f"{last['follow'][0] / first['follow'][0]:.2f}x (with --env-servers "
        f"{last['follow --env-servers'][0] / first['follow --env-servers'][0]:.1f}x: one per pod, on request); "
        f"{sweeps[-1]['trials']} / {sweeps[0]['trials']} trials: sweep status requests "
        f"{sweeps[-1]['status_requests'] / sweeps[0]['status_requests']:.2f}x (goal: 1.00x each)"
    )


if __name__ == "__main__":
    main()
