"""The Cluster facade's public API (rlcloud.Cluster) against the local fakes: the GKE verbs through the facade,
the project config read once and handed down to the handle, typed keyword arguments, and the example's imports.

The GKE Container API is tests/fakes/gke.py's FakeClusterManager, reached as a user's code reaches it: through
``RLCLOUD_GKE_EMULATOR_HOST``, with no client passed in; the doctor's Google APIs are the session fake of
tests/fakes/google_api_fixtures.py.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlcloud import Cluster, ClusterSpec, NotFoundError, SpecError
from rlcloud.cluster import GkeTarget, KubernetesTarget, LocalTarget
from rlcloud.gke.project import EMULATOR_ENV
from tests.fakes.gke import FakeClusterManager
from tests.fakes.google_apis import FakeGoogleApis

PROJECT = "rl-facade-project"
REAPER = f"rlcloud-reaper@{PROJECT}.iam.gserviceaccount.com"
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gke_gpu.py"


@pytest.fixture
def gke(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClusterManager]:
    """The fake Container API, where a facade built without a client finds it (as `rlcloud` does from a shell)."""
    with FakeClusterManager(polls_to_done=1) as fake:
        monkeypatch.setenv(EMULATOR_ENV, fake.address)
        yield fake


def test_a_gke_cluster_lives_and_dies_through_the_facade(gke: FakeClusterManager) -> None:
    cluster = Cluster.gke(ClusterSpec(name="rl"), project=PROJECT, doctor=False)
    assert (cluster.kind, cluster.describe(), cluster.dedicated) == ("gke", "gke:rl", False)
    assert not cluster.exists()

    created = cluster.create()
    assert (created.name, created.status) == ("rl", "RUNNING")
    assert cluster.create().status == "RUNNING"  # again: adopted, never made twice
    assert len(gke.requests_of("CreateCluster")) == 1
    assert [i.name for i in Cluster.list(PROJECT)] == ["rl"]

    found = Cluster.get("rl", project=PROJECT, namespace="team-a")  # e.g. from another machine
    assert found.spec.name == "rl" and found.namespace == "team-a" and not found.dedicated
    assert found.status().status == "RUNNING" and found.info().location == created.location

    found.delete()
    assert not cluster.exists() and gke.cluster_names() == []
    cluster.delete()  # idempotent: already gone
    with pytest.raises(NotFoundError):
        Cluster.attach("rl", project=PROJECT)
    assert Cluster.reap(PROJECT, dry_run=True) == []


def test_a_dedicated_cluster_is_labelled_and_found_again_as_dedicated(gke: FakeClusterManager) -> None:
    target = Cluster.from_spec_reference(ClusterSpec(name="rl-exp", project=PROJECT), experiment="cartpole")
    target.prepare_for("cartpole")
    assert target.experiment == "cartpole"
    found = Cluster.get("rl-exp", project=PROJECT)
    assert found.dedicated and found.experiment == "cartpole"
    found.release_after_experiment("cartpole")  # the experiment ended: its cluster goes
    assert gke.cluster_names() == []


def test_the_project_config_is_read_once_and_handed_to_the_handle() -> None:
    config = Path("rlcloud.yaml")  # in the test's own working directory (tests/conftest.py)
    config.write_text(f"project: {PROJECT}\nimage: repo/runner-cpu:1\nreaper_service_account: {REAPER}\n")
    cluster = Cluster.gke(ClusterSpec(name="rl"), container_client=object())
    handle = cluster.handle
    assert handle.project == PROJECT  # the config's project, no Application Default Credentials asked
    assert (handle.reaper_service_account, handle.reaper_image) == (REAPER, "repo/runner-cpu:1")
    assert handle.config.image == "repo/runner-cpu:1"

    config.write_text("project: elsewhere\nimage: repo/runner-cpu:2\n")
    assert cluster.handle.config.image == "repo/runner-cpu:1"  # read once for this cluster
    assert Cluster.gke(ClusterSpec(name="rl"), container_client=object()).handle.project == "elsewhere"


def test_a_handle_built_without_the_facade_reads_no_config() -> None:
    from rlcloud.gke.cluster import GkeCluster

    Path("rlcloud.yaml").write_text(f"project: {PROJECT}\nimage: repo/runner-cpu:1\n")
    handle = GkeCluster(ClusterSpec(name="rl"), project="given", container_client=object())
    assert (handle.reaper_image, handle.config.image, handle.project) == (None, None, "given")


def test_the_doctor_of_a_cluster_checks_the_images_the_config_names(google_apis: FakeGoogleApis) -> None:
    image = "us-docker.pkg.dev/rl-facade-project/rlcloud/runner-cpu:7"
    Path("rlcloud.yaml").write_text(f"project: {PROJECT}\nimage: {image}\n")
    checks = {c.name: c for c in Cluster.gke(ClusterSpec(name="rl"), container_client=object()).doctor()}
    assert set(checks) >= {"apis", "permissions", "gpu-quota", "images", "bucket", "workload-identity"}
    assert image in checks["images"].detail
    assert checks["bucket"].status == "SKIP"  # no gs:// results root in the config


def test_public_cluster_methods_take_typed_keywords_only() -> None:
    for target in (Cluster, LocalTarget, KubernetesTarget, GkeTarget):
        for name, member in inspect.getmembers(target, callable):
            if name.startswith("_"):
                continue
            kinds = {p.kind for p in inspect.signature(member).parameters.values()}
            assert inspect.Parameter.VAR_KEYWORD not in kinds, f"{target.__name__}.{name} takes **kwargs"
    with pytest.raises(TypeError, match="all_clusters"):
        Cluster.get("rl", project=PROJECT, all_clusters=True)  # type: ignore[call-arg]


def test_local_and_kubernetes_targets_need_no_cloud() -> None:
    local = Cluster.local()
    assert (local.kind, local.describe(), local.spec) == ("local", "local", None)
    kube = Cluster.kubernetes(context="kind-rl", gpu_type="t4", queue="team")
    assert (kube.describe(), kube.gpu_type, kube.queue) == ("kubernetes:kind-rl", "nvidia-tesla-t4", "team")
    with pytest.raises(SpecError, match="gpu_type"):
        Cluster.kubernetes(gpu_type="not-a-gpu")
    with pytest.raises(SpecError, match="budget"):
        kube.check_budget("experiment x", None)
