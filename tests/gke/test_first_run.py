"""Issue 17: autodown and the node service account in the spec and the builders; age, teardown and the cost
so far in `rlcloud cluster list` and the notebook view."""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

import pytest

from rlcloud.cli import main
from rlcloud.errors import SpecError
from rlcloud.gke.builders import build_cluster, build_create_node_pool_request, cluster_labels
from rlcloud.gke.info import ClusterInfo
from rlcloud.gke.prices import PRICES_DATE, estimate_hourly_cost
from rlcloud.specs import ClusterSpec
from tests.fakes.gke import FakeClusterManager
from tests.support.gke import PROJECT

NODES_SA = "rlcloud-nodes@rl-test-project.iam.gserviceaccount.com"


def test_autodown_is_a_duration_of_at_least_ten_minutes() -> None:
    assert ClusterSpec(name="rl", autodown="30m").autodown.seconds == 1800  # type: ignore[union-attr]
    assert ClusterSpec.from_yaml_text(ClusterSpec(name="rl", autodown="2h").to_yaml()).autodown.seconds == 7200  # type: ignore[union-attr]
    with pytest.raises(SpecError, match="at least 10m"):
        ClusterSpec.from_dict({"name": "rl", "autodown": "5m"})
    with pytest.raises(SpecError, match="duration"):
        ClusterSpec.from_dict({"name": "rl", "autodown": "soon"})


def test_service_account_must_be_an_email() -> None:
    assert ClusterSpec(name="rl", service_account=NODES_SA).service_account == NODES_SA
    with pytest.raises(SpecError, match="service account email"):
        ClusterSpec.from_dict({"name": "rl", "service_account": "nodes"})


def test_labels_carry_expiry_and_autodown() -> None:
    labels = cluster_labels(ClusterSpec(name="rl", ttl="6h", autodown="30m"), now=1000)
    assert labels == {"managed-by": "rlcloud", "expiry": str(1000 + 6 * 3600), "autodown": "1800"}


def test_every_pool_runs_as_the_node_service_account() -> None:
    spec = ClusterSpec(name="rl", gpu_type="nvidia-tesla-t4", service_account=NODES_SA)
    cluster = build_cluster(spec, project=PROJECT)
    assert len(cluster.node_pools) == 2
    assert {p.config.service_account for p in cluster.node_pools} == {NODES_SA}
    request = build_create_node_pool_request(spec, project=PROJECT, location="us-central1-a", pool_name="gpu-pool")
    assert request.node_pool.config.service_account == NODES_SA
    # none given: GKE's default (the Compute Engine default service account), as before
    plain = build_cluster(ClusterSpec(name="rl"), project=PROJECT)
    assert [p.config.service_account for p in plain.node_pools] == [""]


def _info(spec: ClusterSpec, created: _dt.datetime) -> ClusterInfo:
    cluster = build_cluster(spec, project=PROJECT, now=created.timestamp())
    cluster.create_time = created.isoformat()
    cluster.location = spec.location
    return ClusterInfo.from_cluster(cluster, PROJECT)


def test_cost_so_far_is_the_hourly_estimate_times_the_age() -> None:
    created = _dt.datetime(2026, 11, 1, tzinfo=_dt.UTC)
    spec = ClusterSpec(name="rl", gpu_type="nvidia-tesla-t4", spot=True, ttl="6h", autodown="30m")
    info = _info(spec, created)
    now = created.timestamp() + 2.5 * 3600
    cost = info.cost_so_far(now)
    assert cost is not None
    assert cost.hours == pytest.approx(2.5)
    assert cost.usd == pytest.approx(2.5 * estimate_hourly_cost(spec).hourly, abs=0.01)
    assert cost.node_hours == pytest.approx(2 * 2.5)  # one CPU and one GPU node
    assert cost.prices_date == PRICES_DATE and "estimate" in str(cost)
    assert info.teardown(now) == "ttl 3.5h left, autodown 30m"  # 6 h - 2.5 h, to the half hour (display.span)
    assert info.teardown(created.timestamp() + 7 * 3600).startswith("ttl expired")
    assert info.to_spec().autodown == spec.autodown
    assert _info(ClusterSpec(name="rl"), created).teardown(now) == "-"


def test_cluster_list_shows_age_teardown_and_estimated_cost(
    emulated: FakeClusterManager, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the whole table on one line per cluster
    spec = Path("rl.yaml")
    spec.write_text("kind: Cluster\nname: rl\nttl: 6h\nautodown: 30m\n")
    code = main(["cluster", "create", "-f", str(spec), "--project", PROJECT, "--yes"])
    out = " ".join(capsys.readouterr().out.split())  # rich wraps at the terminal's width
    assert code == 0, out
    assert "deleted after 30m idle" in out
    assert "no in-cluster reaper" in out  # no rlcloud.yaml here: said in one line, the create went on
    assert main(["cluster", "list", "--project", PROJECT, "-o", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["autodown_seconds"] == 1800 and row["teardown"].startswith("ttl ")
    assert row["estimated_cost_usd"] is not None and row["cost_prices_date"] == PRICES_DATE
    assert main(["cluster", "list", "--project", PROJECT]) == 0
    table = " ".join(capsys.readouterr().out.split())
    assert "autodown 30m" in table and "cost so far" in table
    assert f"list prices of {PRICES_DATE}" in table and "estimate" in table


def test_notebook_view_shows_teardown_and_cost_once_seen() -> None:
    from rlcloud import Cluster

    spec = ClusterSpec(name="rl", ttl="6h", autodown="30m")
    cluster = Cluster.gke(spec, project=PROJECT, container_client=object())
    page = cluster._repr_html_()
    assert "30m idle" in page and "cost so far" not in page  # nothing seen yet: no call, no cost
    created = _dt.datetime.now(_dt.UTC) - _dt.timedelta(hours=1)
    cluster._last_info = _info(spec, created)  # type: ignore[attr-defined]
    page = cluster._repr_html_()
    assert "cost so far" in page and f"list prices of {PRICES_DATE}" in page and "autodown 30m" in page


# ------------------------------------------------------------------------------------------ images and init


def test_starting_on_a_cluster_without_an_image_is_refused_before_anything_is_made(
    emulated: FakeClusterManager,
) -> None:
    from rlcloud import Cluster, Experiment, ExperimentSpec

    spec = ExperimentSpec(
        name="cp",
        environment={"type": "gym", "level": "CartPole-v1"},
        agent={"type": "ppo", "batch_size": 10},
        episodes=5,
    )
    cluster = Cluster.gke(ClusterSpec(name="rl", gpu_type="nvidia-tesla-t4"), project=PROJECT)
    with pytest.raises(SpecError) as info:
        Experiment(spec, results="gs://bucket/rl").start(cluster=cluster, validate=False)
    assert info.value.fields == ["image"]
    assert "docs/images.md" in str(info.value) and "gpu_image" in str(info.value)
    assert emulated.requests == []  # no cluster was created, nothing billed
    # an image from the experiment, the cluster or rlcloud.yaml is enough
    cluster.check_image("repo/runner-gpu:1")
    Cluster.kubernetes(api_client=object(), image="repo/runner-cpu:1").check_image(None)
    Path("rlcloud.yaml").write_text("image: repo/runner-cpu:2\n")
    Cluster.kubernetes(api_client=object()).check_image(None)
    with pytest.raises(SpecError, match="gpu_image"):
        Cluster.kubernetes(api_client=object(), gpu_type="nvidia-l4").check_image(None)
    Cluster.local().check_image(None)  # local runs use no image


def test_the_default_image_names_no_registry() -> None:
    from rlcloud.config import DEFAULT_GPU_IMAGE, DEFAULT_IMAGE

    for image in (DEFAULT_IMAGE, DEFAULT_GPU_IMAGE):
        assert "/" not in image and image.endswith(":local")


def test_init_writes_commented_placeholders(tmp_path: Path) -> None:
    import yaml

    from rlcloud.cli.project import init_project

    init_project(tmp_path, project="my-rl-project")
    text = (tmp_path / "rlcloud.yaml").read_text()
    for key in ("location", "image", "gpu_image", "gcp_service_account", "reaper_service_account"):
        (line,) = [x for x in text.splitlines() if x.startswith(f"# {key}: ")]
        assert "my-rl-project" in line or key == "location"
    # commented: what init wrote still loads as just the settings given
    assert set(yaml.safe_load(text)) == {"project", "results"}
    for key in ("image", "gpu_image"):
        ask = text.splitlines()[
            text.splitlines().index(next(x for x in text.splitlines() if x.startswith(f"# {key}:"))) - 1
        ]
        assert "docs/images.md" in ask
