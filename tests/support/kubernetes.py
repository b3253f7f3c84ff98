"""Kubernetes test helpers: specs, a backend over the fake apiserver, the stand-in runner, sweep objects."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client import ApiClient

from rlcloud.k8s.applier import RetryPolicy
from rlcloud.k8s.backend import KubernetesBackend
from rlcloud.k8s.sweep_builders import build_sweep_workloads
from rlcloud.specs import ExperimentSpec
from rlcloud.specs.sweep import SweepSpec
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet


def make_spec(run_mode: str = "single", num_workers: int | None = None, **extra: object) -> ExperimentSpec:
    """A small CartPole PPO spec for the given run mode."""
    data: dict[str, object] = {
        "name": extra.pop("name", "cartpole"),
        "environment": {"type": "gym", "level": "CartPole-v1"},
        "agent": {"type": "ppo", "batch_size": 10},
        "episodes": 20,
        "run_mode": run_mode,
        **extra,
    }
    if num_workers is not None:
        data["num_workers"] = num_workers
    return ExperimentSpec(**data)  # type: ignore[arg-type]


STANDIN = str(Path(__file__).parents[1] / "k8s" / "standin_runner.py")
FAST_RETRY = RetryPolicy(attempts=4, initial=0.01, maximum=0.05)


def standin(argv: list[str]) -> list[str]:
    """The 'image' of these tests: the stand-in runner instead of ``python -m rlcloud.runner``."""
    assert argv[:3] == ["python", "-m", "rlcloud.runner"], argv
    return [sys.executable, STANDIN, *argv[3:]]


def make_backend(api_client: client.ApiClient, namespace: str = "rl") -> KubernetesBackend:
    return KubernetesBackend(
        api_client,
        namespace=namespace,
        image="rlcloud:test",
        retry=FAST_RETRY,
        poll_interval=0.1,
        stop_timeout=20,
        local_results=True,
    )


def kubelet_for(apiserver: FakeKubeApiServer, tmp_path: Path, **env: str) -> FakeKubelet:
    return FakeKubelet(apiserver, tmp_path / "pods", argv_rewrite=standin, extra_env=env, max_grace=10)


def objects(apiserver: FakeKubeApiServer, namespace: str = "rl") -> list[tuple[str, str]]:
    out = []
    for kind in ("ConfigMap", "Service", "Job"):
        out += [(kind, o["metadata"]["name"]) for o in apiserver.list_objects(kind, namespace)]
    return sorted(out)


def as_dicts(objs: list[Any]) -> list[dict[str, Any]]:
    return [ApiClient().sanitize_for_serialization(o) for o in objs]


def container(job: dict[str, Any]) -> dict[str, Any]:
    (c,) = job["spec"]["template"]["spec"]["containers"]
    return c


def env_of(job: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(job).get("env", [])}


def make_sweep(seeds: int, *, max_parallel: int | None = None, name: str = "lr", **extra: Any) -> SweepSpec:
    """Two learning rates x ``seeds`` seeds of the small CartPole spec."""
    return SweepSpec(
        name=name,
        experiment=make_spec(name="base", **extra.pop("experiment", {})),
        parameters={"agent.learning_rate": [1e-3, 3e-4]},
        seeds=seeds,
        max_parallel=max_parallel,
        **extra,
    )


def add_local_queue(apiserver: FakeKubeApiServer, namespace: str, name: str) -> None:
    """A cluster with Kueue installed and a LocalQueue ``name`` in ``namespace`` (made if missing)."""
    apiserver.kueue = True
    if apiserver.get_object("Namespace", namespace) is None:
        apiserver.create_object("Namespace", {"metadata": {"name": namespace}})
    body = {"metadata": {"name": name}, "spec": {"clusterQueue": "cluster-queue"}}
    apiserver.create_object("LocalQueue", body, namespace)


def build(sweep: SweepSpec, **kwargs: Any) -> list[dict[str, Any]]:
    kwargs.setdefault("namespace", "rl")
    kwargs.setdefault("image", "repo/rl:1")
    kwargs.setdefault("results", "gs://bucket/runs")
    return as_dicts(build_sweep_workloads(sweep, **kwargs))


def write_kubeconfig(path: Path, server: str, token: str = "t0k3n") -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": server}}],
                "users": [{"name": "me", "user": {"token": token}}],
                "contexts": [
                    {"name": "one", "context": {"cluster": "fake", "user": "me"}},
                    {"name": "two", "context": {"cluster": "fake", "user": "me", "namespace": "x"}},
                ],
                "current-context": "one",
            }
        )
    )
    return path


#: a client of the directory's fake apiserver (a fixture: tests/k8s and tests/gke conftests import it)
@pytest.fixture
def api_client(apiserver: FakeKubeApiServer) -> Iterator[client.ApiClient]:
    api = client.ApiClient(client.Configuration(host=apiserver.url))
    try:
        yield api
    finally:
        api.close()
