"""The whole path a researcher takes, against the local fakes with the real client libraries:

Experiment.start(cluster=Cluster.gke(...)) creates a dedicated T4 cluster (gRPC ClusterManager fake), reaches
its Kubernetes API over TLS with the cluster's CA and a refreshing google-auth token (fake kube-apiserver),
submits the workloads, a test kubelet runs the real runner, results land in fake GCS, and when the
experiment is over the dedicated cluster is deleted.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from google.oauth2.credentials import Credentials

from rlcloud import Cluster, ClusterSpec, Experiment, ExperimentSpec
from tests.fakes.gcs import FakeGcsServer
from tests.fakes.gke import FakeClusterManager
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet
from tests.support.gke import TokenIssuer

PROJECT = "rl-e2e-project"


@pytest.fixture
def world(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[FakeClusterManager, FakeKubeApiServer, FakeGcsServer, TokenIssuer]]:
    ca = trustme.CA()
    issuer = TokenIssuer()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    with (
        FakeClusterManager(polls_to_done=1) as gke,
        FakeKubeApiServer(tls=context, token_validator=issuer.accepts) as apiserver,
        FakeGcsServer() as gcs,
    ):
        gke.set_master(f"127.0.0.1:{apiserver.port}", base64.b64encode(ca.cert_pem.bytes()).decode())
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.url)
        yield gke, apiserver, gcs, issuer


@pytest.mark.processes
@pytest.mark.training
def test_experiment_on_a_dedicated_gke_gpu_cluster_goes_all_the_way(
    world: tuple[FakeClusterManager, FakeKubeApiServer, FakeGcsServer, TokenIssuer], tmp_path: Path
) -> None:
    gke, apiserver, gcs, issuer = world
    bucket = gcs.create_bucket()
    spec = ExperimentSpec(
        name="e2e-cartpole",
        environment={"type": "gym", "level": "CartPole-v1"},
        agent={"type": "ppo", "batch_size": 10, "learning_rate": 1e-3},
        total_timesteps=1500,
        seed=3,
        saver_frequency="500t",
        results=f"gs://{bucket}/runs",
    )
    container_client = gke.client()
    cluster = Cluster.gke(
        ClusterSpec(name="rl-e2e", gpu_type="nvidia-tesla-t4", machine_type="n1-standard-4", spot=True),
        project=PROJECT,
        credentials=Credentials(token=None, refresh_handler=issuer),
        container_client=container_client,
        image="rlcloud:test",
        dedicated=True,
    )
    cluster.handle.poll_interval = cluster.handle.max_poll_interval = 0.01
    exp = Experiment(spec, cluster=cluster)
    exp.start()

    # the cluster exists, labelled as this experiment's, with a T4 spot pool
    (made,) = gke.clusters.values()
    assert made.resource_labels["experiment"] == "e2e-cartpole"
    pools = {p.name: p for p in made.node_pools}
    gpu_pool = next(p for p in pools.values() if p.config.accelerators)
    assert gpu_pool.config.accelerators[0].accelerator_type == "nvidia-tesla-t4" and gpu_pool.config.spot
    # the learner asks for the GPU; the runner itself runs on CPU under the test kubelet
    (job,) = apiserver.list_objects("Job", label_selector="rlcloud.io/experiment=e2e-cartpole")
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] in ("1", 1)
    assert pod_spec["nodeSelector"]["cloud.google.com/gke-accelerator"] == "nvidia-tesla-t4"
    assert issuer.issued, "the Kubernetes API was reached with a google-auth token"

    env = {**gcs.env, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    with FakeKubelet(apiserver, tmp_path / "pods", extra_env=env, max_grace=60):
        final = exp.wait(timeout=500)
    assert final.state == "succeeded", list(exp.logs())[-30:]

    # the dedicated cluster went away when the experiment ended
    assert not gke.clusters
    # results were read from GCS through the facade, and download brings them home
    metrics = exp.metrics()
    records = metrics.to_dict("records") if hasattr(metrics, "to_dict") else metrics
    assert records and records[-1]["timestep"] >= 1400
    dest = exp.download(tmp_path / "downloaded", progress=False)
    assert (dest / "metrics.jsonl").is_file() and (dest / "checkpoints" / "LATEST").is_file()
    # the runner's final summary reached the store with the records it sums up: readers take it as it is
    from rlcloud.storage.runs import read_locations

    [[record]] = read_locations([exp.location])
    assert not record.rebuilt and record.progress is not None and record.progress.state == "succeeded"
    assert record.summary["last_timestep"] == records[-1]["timestep"]
    figure = exp.plot(path=tmp_path / "returns.png")
    assert figure is not None and (tmp_path / "returns.png").stat().st_size > 1000
    container_client.transport.close()
