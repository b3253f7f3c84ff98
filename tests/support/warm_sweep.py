"""Warm-sweep test helpers: a backend, a pod's arguments and share, a trial's record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes import client

from rlcloud.k8s.backend import KubernetesBackend
from rlcloud.runner import warm as runner_warm
from rlcloud.runner.main import parse_args
from rlcloud.specs.sweep import SweepSpec
from tests.support.kubernetes import FAST_RETRY


def _pod_args(tmp_path: Path, sweep: SweepSpec, index: int, stride: int) -> Any:
    path = tmp_path / "sweep.yaml"
    path.write_text(sweep.to_yaml())
    argv = ["--role", "single", "--index", str(index), "--sweep", str(path), "--workdir", str(tmp_path / "w"),
            "--stride", str(stride)]  # fmt: skip
    return parse_args(argv)


def _share(args: Any) -> int:
    from rlcloud.runner import main

    return runner_warm.run_share(args, main._prepare_trial, main._train_role)


def _record(location: Path, name: str, progress: dict[str, Any]) -> None:
    (location / name).mkdir(parents=True, exist_ok=True)
    (location / name / "progress.json").write_text(json.dumps(progress))


def _backend(api_client: client.ApiClient) -> KubernetesBackend:
    return KubernetesBackend(
        api_client,
        namespace="rl",
        image="rlcloud:test",
        retry=FAST_RETRY,
        poll_interval=0.2,
        stop_timeout=60,
        local_results=True,
        warm_trials=True,
    )
