"""Kueue: a sweep is only submitted to a LocalQueue that exists (else a clear error, nothing created), and a
sweep waiting in a queue counts as work for the in-cluster reaper, so autodown does not delete the cluster
under it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from rlcloud.errors import SpecError
from rlcloud.gke.reaper import activity, decide
from rlcloud.k8s.builders import to_dict
from rlcloud.k8s.sweep_builders import build_sweep_workloads
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.support.kubernetes import add_local_queue, make_backend, make_sweep


def _nothing_created(apiserver: FakeKubeApiServer) -> bool:
    return apiserver.get_object("Namespace", "rl") is None and not apiserver.list_objects("Job")


def test_a_queue_that_does_not_exist_is_refused_and_nothing_is_created(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    backend = make_backend(api_client)
    backend.queue = "team-a"
    apiserver.kueue = True  # Kueue is installed, the namespace has no such LocalQueue
    with pytest.raises(SpecError) as info:
        backend.start_sweep(make_sweep(2), str(tmp_path))
    (problem,) = info.value.problems
    assert problem.field == "queue" and problem.value == "team-a"
    assert problem.message.startswith("no Kueue LocalQueue 'team-a' in namespace rl")
    assert "kubectl -n rl get localqueues" in problem.message
    assert _nothing_created(apiserver)
    # another queue in the namespace does not make this one exist
    add_local_queue(apiserver, "rl", "team-b")
    with pytest.raises(SpecError, match="no Kueue LocalQueue 'team-a'"):
        backend.start_sweep(make_sweep(2), str(tmp_path))
    add_local_queue(apiserver, "rl", "team-a")
    assert backend.start_sweep(make_sweep(2), str(tmp_path)) is True


def test_a_cluster_without_kueue_is_refused(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    backend = make_backend(api_client)
    backend.queue = "team-a"
    with pytest.raises(SpecError) as info:
        backend.start_sweep(make_sweep(2), str(tmp_path))
    assert "does not serve Kueue's LocalQueues (kueue.x-k8s.io/v1beta1): install Kueue" in str(info.value)
    assert _nothing_created(apiserver)


def test_an_identity_that_may_not_read_local_queues_submits_anyway(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = make_backend(api_client)
    backend.queue = "team-a"
    apiserver.inject_fault("GET", "/localqueues/team-a$", status=403, reason="Forbidden", count=10)
    assert backend.start_sweep(make_sweep(2), str(tmp_path)) is True
    assert "cannot check that Kueue LocalQueue team-a exists" in caplog.text


def _queued_sweep_job() -> dict[str, Any]:
    (_, job) = build_sweep_workloads(make_sweep(2), image="i:1", namespace="rl", queue="team-a")
    data = to_dict(job)
    assert data["spec"]["suspend"] is True  # as Kueue holds it until the queue has quota
    data["metadata"]["creationTimestamp"] = "2027-01-15T08:00:00Z"
    return dict(data)


def test_a_sweep_waiting_in_a_kueue_queue_keeps_the_cluster_from_idle_teardown() -> None:
    seen = activity([_queued_sweep_job()], [], own_namespace="rlcloud-system")
    assert seen.running == 1
    assert seen.running_names == ("job rl/lr-sweep (queued in Kueue queue team-a)",)
    now = seen.last + 5 * 3600  # type: ignore[operator]
    decision = decide(now, created=now - 10 * 3600, expiry=None, autodown=1800, last_activity=seen.last, running=1)
    assert not decision.delete and "postponed" in decision.reason
    # a paused experiment (suspended, no queue) still does not count
    paused = _queued_sweep_job()
    del paused["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert activity([paused], [], own_namespace="rlcloud-system").running == 0
