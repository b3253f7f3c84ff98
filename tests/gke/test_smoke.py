"""`rlcloud doctor --smoke` end to end against the fakes: the GKE ClusterManager (gRPC), a kube-apiserver
reached over TLS with a refreshing google-auth token, the test kubelet that runs the pod's command as a local
process (so the probe is this checkout's `python -m rlcloud.gke.doctor probe`) and fake-gcs-server as the results
store. What only a real project shows (Workload Identity's token exchange, the image pull, a real GPU and its
driver) is listed at the end of docs/gke-setup.md."""

from __future__ import annotations

import base64
import ssl
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from google.oauth2.credentials import Credentials

from rlcloud import Cluster, ClusterSpec
from rlcloud.cli import main
from rlcloud.errors import SpecError
from rlcloud.smoke import SmokeStep, smoke
from tests.fakes.gcs import FakeGcsServer
from tests.fakes.gke import FakeClusterManager
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet
from tests.support.gke import PROJECT, TokenIssuer

SMOKE = "rlcloud.io/experiment"


class World:
    """The fakes of one test, and a GKE cluster made in them."""

    def __init__(self, gke: FakeClusterManager, apiserver: FakeKubeApiServer, gcs: FakeGcsServer) -> None:
        self.gke, self.apiserver, self.gcs = gke, apiserver, gcs
        self.issuer = TokenIssuer()
        self.bucket = gcs.create_bucket()
        self.clients: list[Any] = []

    def cluster(self, spec: ClusterSpec) -> Any:
        client = self.gke.client()
        self.clients.append(client)
        target = Cluster.gke(
            spec,
            project=PROJECT,
            credentials=Credentials(token=None, refresh_handler=self.issuer),
            container_client=client,
            image="rlcloud:test",
            doctor=False,
        )
        target.handle.poll_interval = target.handle.max_poll_interval = 0.01
        target.create()
        return target

    def leftovers(self) -> list[str]:
        """rlcloud's Kubernetes objects and results objects of smoke tests still there."""
        found = [
            f"{kind} {obj['metadata']['name']}"
            for kind in ("Job", "Pod", "ConfigMap")
            for obj in self.apiserver.list_objects(kind)
            if (obj["metadata"].get("labels") or {}).get(SMOKE, "").startswith("rlcloud-smoke-")
        ]
        return found + [b.name for b in self.gcs.client().list_blobs(self.bucket)]


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[World]:
    monkeypatch.chdir(tmp_path)  # no rlcloud.yaml: the cluster's image is the one the pod runs
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    with (
        FakeClusterManager(polls_to_done=0) as gke,
        FakeKubeApiServer(tls=context) as apiserver,
        FakeGcsServer() as gcs,
    ):
        gke.set_master(f"127.0.0.1:{apiserver.port}", base64.b64encode(ca.cert_pem.bytes()).decode())
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.url)
        made = World(gke, apiserver, gcs)
        yield made
        for client in made.clients:
            client.transport.close()


def _by_name(steps: list[SmokeStep]) -> dict[str, SmokeStep]:
    return {s.name: s for s in steps}


@pytest.mark.processes
def test_smoke_runs_one_pod_reads_its_object_back_and_leaves_nothing(world: World, tmp_path: Path) -> None:
    cluster = world.cluster(ClusterSpec(name="rl-smoke"))
    printed: list[SmokeStep] = []
    pods: list[dict[str, Any]] = []

    jobs: list[dict[str, Any]] = []

    def seen(step: SmokeStep) -> None:
        printed.append(step)
        if step.name == "pod started":  # the pod as it ran, before the clean-up deletes it
            pods.extend(world.apiserver.list_objects("Pod", "rlcloud"))
            jobs.extend(world.apiserver.list_objects("Job", "rlcloud"))

    with FakeKubelet(world.apiserver, tmp_path / "pods", extra_env=world.gcs.env):
        steps = smoke(cluster, f"gs://{world.bucket}/smoke", poll_interval=0.05, on_step=seen)
    assert printed == steps  # each step reported as it ended
    assert [(s.name, s.status) for s in steps] == [
        ("cluster", "OK"),
        ("pod started", "OK"),
        ("probe ran", "OK"),
        ("results-store", "OK"),
        ("gpu", "SKIP"),
        ("read back", "OK"),
        ("clean up", "OK"),
        ("total", "OK"),
    ], [str(s) for s in steps]
    by = _by_name(steps)
    assert "gke:rl-smoke RUNNING" in by["cluster"].detail
    # each limit reported with the step it bounds: scheduling (Pending) and running, apart
    assert "rlcloud:test pulled in " in by["pod started"].detail
    assert "of the scheduling limit's 1200 s (priced as 1 x n1-standard-4" in by["pod started"].detail
    assert by["probe ran"].detail.startswith("ended (Succeeded) in ")
    assert by["probe ran"].detail.endswith("of the running limit's 600 s")
    (job,) = jobs
    assert job["spec"]["activeDeadlineSeconds"] == 1800  # the pod never outlives both limits
    assert "with the pod's identity" in by["results-store"].detail
    assert "this machine reads what the pod wrote" in by["read back"].detail
    # every step has its time and an estimated cost (one n1-standard-4 at the table's price)
    assert all(s.cost_usd is not None and s.cost_usd >= 0 for s in steps)
    assert by["total"].cost_usd is not None and 0 < by["total"].cost_usd < 0.05
    assert str(by["total"]).startswith("OK   total (") and "~$" in str(by["total"])
    # the pod ran as an experiment's learner does (the runner's ServiceAccount: Workload Identity), the probe
    # instead of the runner
    (pod,) = pods
    assert pod["spec"]["serviceAccountName"] == "rlcloud-runner"
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "rlcloud:test" and container["command"] == ["python", "-m", "rlcloud.gke.doctor"]
    assert world.leftovers() == []
    assert world.issuer.issued, "the Kubernetes API was reached with a google-auth token"


@pytest.mark.processes
def test_smoke_on_a_gpu_pool_asks_tensorflow_for_the_gpu(world: World, tmp_path: Path) -> None:
    """The pod requests the pool's GPU and the probe asks TensorFlow for it; this machine has none (the test
    kubelet runs the pod here), so the step fails with what to look at, and the rest is still cleaned up."""
    cluster = world.cluster(ClusterSpec(name="rl-smoke-t4", gpu_type="nvidia-tesla-t4", spot=True))
    env = {**world.gcs.env, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    with FakeKubelet(world.apiserver, tmp_path / "pods", extra_env=env):
        steps = smoke(cluster, f"gs://{world.bucket}/smoke", poll_interval=0.05)
    by = _by_name(steps)
    assert by["gpu"].status == "FAIL" and "TensorFlow sees no GPU (1 requested)" in by["gpu"].detail
    assert by["results-store"].status == "OK" and by["clean up"].status == "OK"
    assert by["total"].status == "FAIL" and by["total"].detail == "failed: gpu"
    assert "priced as 1 x n1-standard-8 (spot) with 1 x nvidia-tesla-t4" in by["pod started"].detail
    assert world.leftovers() == []


@pytest.mark.processes
def test_smoke_says_why_its_pod_never_started_and_cleans_up(world: World, tmp_path: Path) -> None:
    cluster = world.cluster(ClusterSpec(name="rl-smoke"))
    message = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available"
    with FakeKubelet(world.apiserver, tmp_path / "pods", unschedulable=lambda pod: message):
        steps = smoke(cluster, f"gs://{world.bucket}/smoke", schedule_timeout=1.0, poll_interval=0.05)
    assert [s.name for s in steps] == ["cluster", "pod started", "clean up", "total"]
    by = _by_name(steps)
    assert by["pod started"].status == "FAIL"
    assert by["pod started"].detail == f"not started in 1 s (the scheduling limit): {message}"
    assert by["clean up"].status == "OK" and world.leftovers() == []


@pytest.mark.processes
def test_smoke_says_its_pod_ran_past_the_running_limit_and_cleans_up(world: World, tmp_path: Path) -> None:
    """A pod that starts and hangs fails the running limit (counted from its start, apart from the scheduling
    limit), naming it; the pod is deleted."""
    cluster = world.cluster(ClusterSpec(name="rl-smoke"))

    def hangs(argv: list[str]) -> list[str]:
        assert argv[:3] == ["python", "-m", "rlcloud.gke.doctor"], argv
        return [sys.executable, "-c", "import threading; threading.Event().wait()"]

    with FakeKubelet(world.apiserver, tmp_path / "pods", argv_rewrite=hangs):
        steps = smoke(cluster, f"gs://{world.bucket}/smoke", run_timeout=1.0, poll_interval=0.05)
    assert [(s.name, s.status) for s in steps] == [
        ("cluster", "OK"),
        ("pod started", "OK"),
        ("probe ran", "FAIL"),
        ("clean up", "OK"),
        ("total", "FAIL"),
    ], [str(s) for s in steps]
    by = _by_name(steps)
    assert "of the scheduling limit's 1200 s" in by["pod started"].detail
    assert by["probe ran"].detail.startswith("the probe did not finish in 1 s of running (the running limit")
    assert world.leftovers() == []


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({"schedule_timeout": -1.0}, "schedule_timeout"),
        ({"schedule_timeout": float("nan")}, "schedule_timeout"),
        ({"run_timeout": 0.0}, "run_timeout"),
        ({"run_timeout": 1e400}, "run_timeout"),
        ({"run_timeout": 86400.0 * 7}, "run_timeout"),
    ],
)
def test_smoke_refuses_limits_that_are_no_seconds(world: World, limits: dict[str, float], field: str) -> None:
    cluster = world.cluster(ClusterSpec(name="rl-smoke"))
    with pytest.raises(SpecError) as refused:
        smoke(cluster, f"gs://{world.bucket}/smoke", **limits)  # type: ignore[arg-type]
    assert refused.value.problems[0].field == field and world.leftovers() == []


def test_smoke_refuses_a_local_results_root_and_a_missing_cluster(world: World) -> None:
    cluster = world.cluster(ClusterSpec(name="rl-smoke"))
    with pytest.raises(SpecError, match="gs://BUCKET"):
        smoke(cluster, "./results")
    cluster.delete()
    steps = smoke(cluster, f"gs://{world.bucket}/smoke")
    assert [(s.name, s.status) for s in steps] == [("cluster", "FAIL"), ("total", "FAIL")]
    assert "rl-smoke" in steps[0].detail and world.leftovers() == []


def test_cli_smoke_needs_a_cluster(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rlcloud.yaml").write_text(f"project: {PROJECT}\nresults: gs://b/rl\n")
    assert main(["doctor", "--smoke"]) == 2
    err = capsys.readouterr().err
    assert "--smoke runs on an existing cluster: give -c NAME or -f FILE" in err and "Traceback" not in err
