"""No route to Google (issue 37, item 8): the Container API's own retry runs out with a RetryError, which the
CLI showed as three chained tracebacks; now one line (exit 1: a failure, not bad input) naming what could not
be reached and what to check. The real client against a port that refuses, with a shorter retry than its
default 20 s so the test stays fast."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import grpc
import pytest
from google.api_core import exceptions as gexc
from google.api_core.retry import Retry, if_exception_type
from google.cloud import container_v1
from google.cloud.container_v1.services.cluster_manager.transports import ClusterManagerGrpcTransport

from rlcloud.errors import BackendError
from rlcloud.gke.errors import api_errors, is_transient


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A port nothing listens on (bound, never listening: connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.mark.parametrize("call", ["list_clusters", "get_cluster", "list_operations"])
def test_no_route_to_the_container_api_is_one_line(call: str, refusing_port: int) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{refusing_port}")
    client = container_v1.ClusterManagerClient(transport=ClusterManagerGrpcTransport(channel=channel))
    retry = Retry(initial=0.01, maximum=0.05, timeout=0.3, predicate=if_exception_type(gexc.ServiceUnavailable))
    name = "projects/p/locations/-" if call != "get_cluster" else "projects/p/locations/us-central1/clusters/c"
    kwargs = {"parent": name} if call != "get_cluster" else {"name": name}
    with pytest.raises(BackendError) as caught, api_errors(project="p", action=f"{call} c"):
        getattr(client, call)(**kwargs, retry=retry)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 600
    assert message.startswith(f"{call} c: cannot reach the Google Kubernetes Engine API")
    assert "retried for 0.3 s" in message and "Check the network" in message
    assert isinstance(caught.value.__cause__, gexc.RetryError)
    assert is_transient(caught.value)  # still worth a retry where rlcloud retries reads itself
