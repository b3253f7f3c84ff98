"""Scripted backends and statuses for the display and CLI-progress tests (no process, no cluster)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from rlcloud import ExperimentSpec
from rlcloud.backend import ExperimentBackend, ExperimentStatus, RoleStatus
from rlcloud.cluster import KubernetesTarget


class ScriptedBackend(ExperimentBackend):
    """Reports a fixed status for whatever it started; records what it was asked."""

    kind = "scripted"

    def __init__(self, status: ExperimentStatus) -> None:
        self.scripted = status
        self.started: list[str] = []

    def start(self, spec: ExperimentSpec, results: str) -> None:
        self.started.append(spec.name)

    def status(self, name: str) -> ExperimentStatus:
        return self.scripted

    def wait(self, name: str, timeout: float | None = None) -> ExperimentStatus:
        return self.scripted

    def logs(self, name: str, follow: bool = False, roles: Sequence[str] | None = None) -> Iterator[str]:
        return iter(())

    def pause(self, name: str) -> None: ...

    def resume(self, name: str) -> None: ...

    def stop(self, name: str) -> None: ...

    def list(self) -> list[str]:
        return self.started

    def attach(self, name: str) -> tuple[ExperimentSpec, str]:
        raise NotImplementedError


class ScriptedCluster(KubernetesTarget):
    """A Kubernetes-kind cluster whose backend is a ScriptedBackend."""

    def __init__(self, backend: ExperimentBackend) -> None:
        super().__init__(context="test", namespace="rl", image="rlcloud:test")  # a cluster run needs an image
        self.scripted_backend = backend

    def backend(self) -> ExperimentBackend:
        return self.scripted_backend


def _distributed_status(**changes: Any) -> ExperimentStatus:
    roles = [RoleStatus("agent", 0, "running")]
    roles += [RoleStatus("env-server", i, "running") for i in range(3)]
    roles.append(RoleStatus("env-server", 3, "pending", reason="Insufficient nvidia.com/gpu"))
    fields: dict[str, Any] = {
        "name": "cartpole-ppo",
        "state": "running",
        "roles": roles,
        "progress": {"timestep": 50_000, "episode": 812, "mean_return": 187.25, "steps_per_second": 1234.5},
        "backend": "scripted",
    }
    fields.update(changes)
    return ExperimentStatus(**fields)
