"""`rlcloud cluster create|list|delete|reap` end to end against the ClusterManager fake.

RLCLOUD_GKE_EMULATOR_HOST points GkeCluster's default client at the fake (like STORAGE_EMULATOR_HOST);
operations finish instantly there, so the CLI's default polling never sleeps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlcloud.cli import main
from tests.fakes.gke import FakeClusterManager

PROJECT = "cli-test-project"
BUNDLED = Path(__file__).resolve().parents[2] / "src" / "rlcloud" / "configs" / "clusters"


@pytest.mark.processes
def test_create_list_delete(emulated: FakeClusterManager, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["cluster", "create", "-f", str(BUNDLED / "t4.yaml"), "-n", "cli-t4", "--project", PROJECT, "--yes"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Estimated cost" in out and "estimate" in out
    (request,) = emulated.requests_of("CreateCluster")
    assert request.parent == f"projects/{PROJECT}/locations/us-central1-a"
    assert request.cluster.name == "cli-t4"

    assert main(["cluster", "list", "--project", PROJECT, "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["gpu_type"], r["status"]) for r in rows] == [("cli-t4", "nvidia-tesla-t4", "RUNNING")]
    assert rows[0]["expiry"] is not None and rows[0]["managed"]

    assert main(["cluster", "delete", "-c", "cli-t4", "--project", PROJECT, "--yes"]) == 0
    assert emulated.cluster_names() == []


def test_create_refuses_without_a_terminal_or_yes(emulated: FakeClusterManager) -> None:
    code = main(["cluster", "create", "-f", str(BUNDLED / "t4.yaml"), "--project", PROJECT])
    assert code != 0
    assert emulated.requests_of("CreateCluster") == []


def test_preflight_error_exits_2_before_any_request(
    emulated: FakeClusterManager, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["cluster", "create", "-f", str(BUNDLED / "t4.yaml"), "--machine-type", "e2-standard-8", "--project", PROJECT]
    )
    assert code == 2
    assert capsys.readouterr().err.startswith("error: --machine-type: ")  # the flag's fault, named as the flag
    assert emulated.requests == []


def test_quota_error_exits_1_with_the_quota_named(
    emulated: FakeClusterManager, capsys: pytest.CaptureFixture[str]
) -> None:
    emulated.fail_next_with_quota()
    code = main(["cluster", "create", "-f", str(BUNDLED / "t4.yaml"), "--project", PROJECT, "--yes"])
    assert code == 1
    assert "GPUS_ALL_REGIONS" in capsys.readouterr().err


def test_reap(emulated: FakeClusterManager, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "create", "-f", str(BUNDLED / "cpu.yaml"), "-n", "old", "--project", PROJECT, "--yes"]) == 0
    assert (
        main(["cluster", "create", "-f", str(BUNDLED / "t4.yaml"), "-n", "young", "--project", PROJECT, "--yes"]) == 0
    )
    emulated.clusters[(PROJECT, "us-central1-a", "old")].resource_labels["expiry"] = "1000"
    capsys.readouterr()
    assert main(["cluster", "reap", "--project", PROJECT, "--dry-run"]) == 0
    assert "old" in capsys.readouterr().out and sorted(emulated.cluster_names()) == ["old", "young"]
    assert main(["cluster", "reap", "--project", PROJECT, "--yes"]) == 0
    assert emulated.cluster_names() == ["young"]


def test_a_bad_set_is_blamed_on_the_flag(emulated: FakeClusterManager, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["cluster", "create", "-f", str(BUNDLED / "t4.yaml"), "--set", "num_node=2", "--project", PROJECT])
    assert code == 2
    assert capsys.readouterr().err.startswith("error: --set num_node: unknown field")
    assert emulated.requests == []


# values a label may hold (GCE label values: lowercase letters, digits, '_', '-', international characters)
# that are no unix time in seconds
BAD_EXPIRIES = ["1764100000000", "soon", "-5", "9" * 40, "\u00b2", "", "0", "12_00"]


@pytest.mark.parametrize("bad", BAD_EXPIRIES)
def test_one_unreadable_expiry_label_never_stops_list_or_reap(
    emulated: FakeClusterManager, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, bad: str
) -> None:
    for name in ("odd", "old", "young"):
        create = ["cluster", "create", "-f", str(BUNDLED / "cpu.yaml"), "-n", name, "--project", PROJECT, "--yes"]
        assert main(create) == 0
    emulated.clusters[(PROJECT, "us-central1-a", "odd")].resource_labels["expiry"] = bad
    emulated.clusters[(PROJECT, "us-central1-a", "odd")].resource_labels["autodown"] = bad
    emulated.clusters[(PROJECT, "us-central1-a", "old")].resource_labels["expiry"] = "1000"
    capsys.readouterr()

    assert main(["cluster", "list", "--project", PROJECT, "-o", "json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert sorted(rows) == ["odd", "old", "young"]
    assert rows["odd"]["expiry"] is None and rows["odd"]["autodown_seconds"] is None
    assert "ttl label unreadable" in rows["odd"]["teardown"]
    assert any("label expiry=" in p and "not deleted by its ttl" in p for p in rows["odd"]["problems"])
    assert any("label autodown=" in p for p in rows["odd"]["problems"])
    assert rows["old"]["problems"] == [] and rows["young"]["problems"] == []
    assert "cluster odd in us-central1-a: label expiry=" in caplog.text  # the warning names the cluster

    assert main(["cluster", "list", "--project", PROJECT]) == 0  # the table too
    assert "odd" in capsys.readouterr().out

    # the expired cluster with good labels is deleted; the unreadable one is kept, not guessed at
    assert main(["cluster", "reap", "--project", PROJECT, "--yes"]) == 0
    assert emulated.cluster_names() == ["odd", "young"]


@pytest.mark.processes
def test_the_bundled_ladder_moves_on_a_stockout_and_list_shows_it(
    emulated: FakeClusterManager, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 42: no Spot L4 anywhere in the region; the pool goes on-demand, and `cluster list` says so
    emulated.stockout_region(["us-central1-a", "us-central1-b", "us-central1-c"], "nvidia-l4", rung="spot")
    code = main(["cluster", "create", "-f", str(BUNDLED / "l4-ladder.yaml"), "--project", PROJECT, "--yes"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "capacity ladder of the GPU pool (on a stockout or quota error): spot ~$" in out
    assert main(["cluster", "list", "--project", PROJECT, "-o", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["capacity"], row["capacity_tried"]) == ("on-demand", "spot-a.spot-b.spot-c")
    assert main(["cluster", "list", "--project", PROJECT]) == 0
    assert "on-demand (tried spot-a.spot-b.spot-c)" in capsys.readouterr().out
