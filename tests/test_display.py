"""Notebook display of Experiment and Cluster: compact HTML tables drawn without a running backend."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from rlcloud import Cluster, ClusterSpec, Experiment, ExperimentSpec
from rlcloud.gke.info import ClusterInfo
from tests.support.display import ScriptedBackend, ScriptedCluster, _distributed_status

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "cartpole_ppo.yaml"
T4 = ROOT / "src" / "rlcloud" / "configs" / "clusters" / "t4.yaml"


def test_experiment_not_started_shows_the_spec(tmp_path: Path) -> None:
    exp = Experiment(ExperimentSpec.from_file(SPEC, total_timesteps=200_000), results=str(tmp_path))
    page = exp._repr_html_()
    assert "<table class='rlcloud-experiment'>" in page
    assert "cartpole-ppo" in page
    assert "ppo on CartPole-v1" in page
    assert "multi-threaded, 32 worker(s)" in page
    assert "not started" in page
    assert "- / 200,000 timesteps" in page
    assert "<progress" not in page
    assert str(tmp_path / "cartpole-ppo") in page


def test_experiment_running_on_a_cluster_shows_progress_and_roles(tmp_path: Path) -> None:
    backend = ScriptedBackend(_distributed_status())
    spec = ExperimentSpec.from_file(SPEC, run_mode="distributed", num_workers=4, total_timesteps=200_000)
    exp = Experiment(spec, results=str(tmp_path)).start(cluster=ScriptedCluster(backend), validate=False)
    assert backend.started == ["cartpole-ppo"]
    page = exp._repr_html_()
    assert "distributed, 4 worker(s)" in page
    assert "kubernetes:test" in page
    assert "<b style='color:#1a73e8'>running</b>" in page
    assert "<progress value='50000' max='200000'></progress> 50,000 / 200,000 timesteps" in page
    assert "agent: running; env-server: 3 running, 1 pending" in page
    assert "<th style='text-align:left;padding-right:1em'>episodes</th><td style='text-align:left'>812</td>" in page
    assert "187.2" in page and "1234.5" in page


def test_experiment_progress_counts_episodes_when_the_spec_stops_on_episodes(tmp_path: Path) -> None:
    status = _distributed_status(state="succeeded", progress={"timestep": 9000, "episode": 300})
    spec = ExperimentSpec.from_file(SPEC, total_timesteps=None, episodes=300)
    exp = Experiment(spec, results=str(tmp_path)).start(
        cluster=ScriptedCluster(ScriptedBackend(status)), validate=False
    )
    page = exp._repr_html_()
    assert "<progress value='300' max='300'></progress> 300 / 300 episodes" in page
    assert "color:#188038'>succeeded" in page
    assert "9,000" in page


def test_experiment_html_is_escaped(tmp_path: Path) -> None:
    status = _distributed_status(state="failed", message="exit 3: <script>alert(1)</script> & more")
    exp = Experiment(ExperimentSpec.from_file(SPEC), results=str(tmp_path))
    exp.start(cluster=ScriptedCluster(ScriptedBackend(status)), validate=False)
    page = exp._repr_html_()
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in page


def test_experiment_on_a_gke_cluster_not_started_makes_no_call() -> None:
    # no credentials, no container client: drawing the cell must not need either
    cluster = Cluster.gke(ClusterSpec.from_file(T4), project="my-project", container_client=object())
    exp = Experiment(ExperimentSpec.from_file(SPEC), results="gs://bucket/rl", cluster=cluster)
    page = exp._repr_html_()
    assert "not started" in page
    assert "gke:rl-t4" in page
    assert "gs://bucket/rl/cartpole-ppo" in page
    assert cluster._backend is None and cluster._handle is None


class _SeenGke:
    """Stands in for rlcloud.gke.GkeCluster: answers info() with a fixed ClusterInfo."""

    def __init__(self, info: ClusterInfo) -> None:
        self._info = info

    def info(self) -> ClusterInfo:
        return self._info


def test_gke_cluster_shows_spec_then_observed_state() -> None:
    cluster = Cluster.gke(ClusterSpec.from_file(T4), project="my-project", container_client=object())
    page = cluster._repr_html_()
    assert "<table class='rlcloud-cluster'>" in page
    for text in ("gke", "rl-t4", "my-project", "us-central1-a", "n1-standard-8 (spot)", "0-2"):
        assert text in page
    assert "1 x nvidia-tesla-t4 per node" in page
    assert "unknown (call create() or info())" in page
    assert "6h" in page

    info = ClusterInfo(
        name="rl-t4",
        project="my-project",
        location="us-central1-a",
        status="RUNNING",
        machine_type="n1-standard-8",
        num_nodes=2,
        gpus_per_node=1,
        gpu_type="nvidia-tesla-t4",
        spot=True,
        node_pools=["default", "gpu"],
        created=dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
        expiry=None,
    )
    cluster._handle = _SeenGke(info)  # type: ignore[assignment]
    assert cluster.info() is info
    page = cluster._repr_html_()
    assert "RUNNING" in page
    assert "2 now (0-2)" in page


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        (Cluster.local(), "background processes on this machine"),
        (Cluster.kubernetes(context="kind-rl", namespace="exp", gpu_type="nvidia-l4"), "kind-rl"),
    ],
)
def test_local_and_kubernetes_clusters(cluster: Cluster, expected: str) -> None:
    page = cluster._repr_html_()
    assert expected in page
    assert f"<td style='text-align:left'>{cluster.kind}</td>" in page
    if cluster.kind == "kubernetes":
        assert "exp" in page and "nvidia-l4" in page


def test_one_duration_format_long_and_compact() -> None:
    from rlcloud.display import span

    assert [span(s) for s in (45, 720, 12600)] == ["45 s", "12 min", "3.5 h"]
    assert [span(s, "clock") for s in (0.4, 90, 7500)] == ["0:00", "1:30", "2:05:00"]
    # a cluster's age and ttl (`cluster list`): the reaper's compact format, whole units without ".0"
    assert [span(s, "compact") for s in (-3, 45, 600, 5400, 14400, 172800)] == [
        "0s",
        "45s",
        "10m",
        "1.5h",
        "4h",
        "2d",
    ]
