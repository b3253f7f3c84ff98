"""A start that fails half-way leaves nothing behind (issue 37, item 11): a Job create answered 500 (after the
retries), 422 or lost took its ConfigMap and Service with it; objects that were there before are kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from rlcloud.errors import BackendError, SpecError
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.support.kubernetes import make_backend, make_spec, make_sweep, objects


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ({"status": 500, "count": 100}, BackendError),  # persistent: every retry answered 500
        ({"status": 503, "count": 100}, BackendError),
        ({"status": 422, "message": 'Job.batch "x" is invalid: spec: bad'}, SpecError),
        ({"status": 403, "reason": "Forbidden", "message": "jobs is forbidden"}, Exception),
    ],
)
@pytest.mark.parametrize(("run_mode", "workers"), [("single", None), ("distributed", 2)])
def test_a_failed_job_create_leaves_no_config_map_or_service(
    fault: dict[str, object],
    error: type[Exception],
    run_mode: str,
    workers: int | None,
    apiserver: FakeKubeApiServer,
    api_client: client.ApiClient,
    tmp_path: Path,
) -> None:
    backend = make_backend(api_client)
    apiserver.inject_fault("POST", r"/jobs$", **fault)  # type: ignore[arg-type]
    with pytest.raises(error):
        backend.start(make_spec(run_mode, workers), str(tmp_path))
    assert objects(apiserver) == []
    apiserver._faults.clear()
    backend.start(make_spec(run_mode, workers), str(tmp_path))  # and it starts cleanly afterwards
    assert ("ConfigMap", "cartpole-spec") in objects(apiserver)


def test_a_lost_answer_then_a_failure_deletes_the_object_the_server_made(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    """The Job's create reached the server but its answer was lost, and the retries failed: the Job exists, and
    is deleted with the ConfigMap."""
    apiserver.inject_fault("POST", r"/jobs$", status=500, after=True)
    apiserver.inject_fault("POST", r"/jobs$", status=500, count=100)
    with pytest.raises(BackendError):
        make_backend(api_client).start(make_spec(), str(tmp_path))
    assert [kind for kind, _ in objects(apiserver) if kind in ("ConfigMap", "Job")] == []


def test_objects_that_were_there_before_are_kept(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    """A ConfigMap of an earlier start of the same spec (a create answered 409) is not ours to delete."""
    backend = make_backend(api_client)
    backend.start(make_spec(), str(tmp_path))
    for kind, name in objects(apiserver):
        if kind == "Job":  # the Job deleted by hand: the next start makes it again, the ConfigMap is there
            apiserver.delete_object("Job", name, "rl")
    apiserver.inject_fault("POST", r"/jobs$", status=500, count=100)
    with pytest.raises(BackendError):
        backend.start(make_spec(), str(tmp_path))
    assert ("ConfigMap", "cartpole-spec") in objects(apiserver)


def test_a_sweep_whose_job_is_refused_leaves_no_config_map(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    backend = make_backend(api_client)
    apiserver.inject_fault("POST", r"/jobs$", status=500, count=100)
    with pytest.raises(BackendError):
        backend.start_sweep(make_sweep(3), str(tmp_path))
    assert objects(apiserver) == []
    apiserver._faults.clear()
    backend.start_sweep(make_sweep(3), str(tmp_path))
    assert len(objects(apiserver)) == 2
