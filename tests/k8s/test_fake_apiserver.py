"""The fake kube-apiserver speaks enough of the real protocol for the real ``kubernetes`` client."""

from __future__ import annotations

import json
import ssl
import threading

import pytest
import trustme
from kubernetes import client, watch

from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.support.waiting import eventually


def _cm(name: str, labels: dict[str, str] | None = None, **data: str) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels), data=data or {"k": "v"})


def _job(name: str) -> client.V1Job:
    pod = client.V1PodSpec(restart_policy="Never", containers=[client.V1Container(name="c", image="busybox")])
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1JobSpec(template=client.V1PodTemplateSpec(spec=pod)),
    )


def test_create_get_conflict_and_not_found(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    created = core.create_namespaced_config_map("default", _cm("a"))
    assert created.metadata.uid and created.metadata.resource_version and created.metadata.creation_timestamp
    with pytest.raises(client.ApiException) as conflict:
        core.create_namespaced_config_map("default", _cm("a"))
    assert conflict.value.status == 409
    body = json.loads(conflict.value.body)
    assert body["reason"] == "AlreadyExists" and body["kind"] == "Status" and body["details"]["name"] == "a"
    assert core.read_namespaced_config_map("a", "default").data == {"k": "v"}
    with pytest.raises(client.ApiException) as missing:
        core.read_namespaced_config_map("nope", "default")
    assert missing.value.status == 404 and json.loads(missing.value.body)["reason"] == "NotFound"
    with pytest.raises(client.ApiException) as no_ns:
        core.create_namespaced_config_map("ghost", _cm("a"))
    assert no_ns.value.status == 404 and "namespaces" in json.loads(no_ns.value.body)["message"]


def test_invalid_name_is_422(api_client: client.ApiClient) -> None:
    with pytest.raises(client.ApiException) as err:
        client.CoreV1Api(api_client).create_namespaced_config_map("default", _cm("Bad_Name"))
    assert err.value.status == 422 and json.loads(err.value.body)["reason"] == "Invalid"


def test_label_selectors(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map("default", _cm("a", {"app": "x", "tier": "1"}))
    core.create_namespaced_config_map("default", _cm("b", {"app": "y", "tier": "2"}))
    core.create_namespaced_config_map("default", _cm("c", {"app": "z"}))

    def names(selector: str) -> list[str]:
        return sorted(
            i.metadata.name for i in core.list_namespaced_config_map("default", label_selector=selector).items
        )

    assert names("app=x") == ["a"]
    assert names("app==y") == ["b"]
    assert names("app!=x") == ["b", "c"]
    assert names("app in (x, z)") == ["a", "c"]
    assert names("app notin (x),tier") == ["b"]
    assert names("!tier") == ["c"]
    assert names("app in (x,y),tier=2") == ["b"]
    all_ns = client.CoreV1Api(api_client).list_config_map_for_all_namespaces(label_selector="app")
    assert len(all_ns.items) == 3


def test_job_defaults_status_subresource_replace_and_patch(api_client: client.ApiClient) -> None:
    batch = client.BatchV1Api(api_client)
    job = batch.create_namespaced_job("default", _job("j"))
    assert job.spec.backoff_limit == 6 and job.spec.selector.match_labels
    assert job.spec.template.metadata.labels["job-name"] == "j"
    suspended = batch.patch_namespaced_job("j", "default", {"spec": {"suspend": True}})
    assert suspended.spec.suspend is True and suspended.metadata.generation == 2
    # the main resource cannot change status, /status can
    patched = batch.patch_namespaced_job("j", "default", {"status": {"active": 3}})
    assert patched.status.active is None
    status = batch.patch_namespaced_job_status("j", "default", {"status": {"active": 1}})
    assert status.status.active == 1 and status.spec.suspend is True
    # replace with a stale resourceVersion: 409 Conflict
    stale = job
    stale.spec.parallelism = 2
    with pytest.raises(client.ApiException) as err:
        batch.replace_namespaced_job("j", "default", stale)
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "Conflict"
    fresh = batch.read_namespaced_job("j", "default")
    fresh.spec.parallelism = 2
    assert batch.replace_namespaced_job("j", "default", fresh).spec.parallelism == 2
    # JSON patch (a list body) works too
    done = batch.patch_namespaced_job("j", "default", [{"op": "replace", "path": "/spec/suspend", "value": False}])
    assert done.spec.suspend is False


def test_delete_returns_object_and_cascades_by_policy(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient
) -> None:
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    for name in ("orphaning", "cascading"):
        job = batch.create_namespaced_job("default", _job(name))
        apiserver.create_object(
            "Pod",
            {
                "metadata": {
                    "name": f"{name}-pod",
                    "ownerReferences": [
                        {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": job.metadata.uid}
                    ],
                },
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
            "default",
        )
    deleted = batch.delete_namespaced_job("orphaning", "default")  # batch/v1 default: Orphan
    assert deleted["metadata"]["name"] == "orphaning"
    assert core.read_namespaced_pod("orphaning-pod", "default").metadata.owner_references is None
    batch.delete_namespaced_job("cascading", "default", propagation_policy="Foreground")
    with pytest.raises(client.ApiException) as err:
        core.read_namespaced_pod("cascading-pod", "default")
    assert err.value.status == 404
    pod = core.delete_namespaced_pod("orphaning-pod", "default")
    assert isinstance(pod, client.V1Pod) and pod.metadata.name == "orphaning-pod"
    with pytest.raises(client.ApiException) as gone:
        batch.delete_namespaced_job("cascading", "default")
    assert gone.value.status == 404


def _requested(apiserver: FakeKubeApiServer, flag: str) -> bool:
    """Whether the fake has received a request with ``flag=true`` (a watch, a log follow)."""
    return any(r.query.get(flag) == ["true"] for r in list(apiserver.requests))


def test_watch_streams_changes_times_out_and_410(apiserver: FakeKubeApiServer, api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map("default", _cm("w", {"app": "x"}))
    rv = core.list_namespaced_config_map("default").metadata.resource_version

    def change() -> None:
        eventually(
            lambda: _requested(apiserver, "watch"), timeout=30, what="the watch"
        )  # the changes come while the watch is open
        core.patch_namespaced_config_map("w", "default", {"data": {"k": "2"}})
        core.create_namespaced_config_map("default", _cm("other", {"app": "y"}))
        core.delete_namespaced_config_map("w", "default")

    threading.Thread(target=change).start()
    events = [
        (e["type"], e["object"].metadata.name)
        for e in watch.Watch().stream(
            core.list_namespaced_config_map, "default", label_selector="app=x", resource_version=rv, timeout_seconds=1
        )
    ]
    assert events == [("MODIFIED", "w"), ("DELETED", "w")]
    # no resourceVersion: the current objects first, as ADDED
    initial = [e["type"] for e in watch.Watch().stream(core.list_namespaced_config_map, "default", timeout_seconds=1)]
    assert initial == ["ADDED"]
    apiserver.compact()
    with pytest.raises(client.ApiException) as err:
        list(watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=1))
    assert err.value.status == 410


def test_pod_logs_pending_plain_and_follow(apiserver: FakeKubeApiServer, api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(
        "default",
        client.V1Pod(
            metadata=client.V1ObjectMeta(name="p"),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="i")]),
        ),
    )
    with pytest.raises(client.ApiException) as err:
        core.read_namespaced_pod_log("p", "default")
    assert err.value.status == 400 and "waiting to start" in err.value.body
    apiserver.update_status("Pod", "p", "default", {"phase": "Running"})
    apiserver.append_log("default", "p", b"one\n")

    def more() -> None:
        eventually(
            lambda: _requested(apiserver, "follow"), timeout=30, what="the log follow"
        )  # the line and the end come while it follows
        apiserver.append_log("default", "p", b"two\n")
        apiserver.update_status("Pod", "p", "default", {"phase": "Succeeded"})

    threading.Thread(target=more).start()
    followed = list(watch.Watch().stream(core.read_namespaced_pod_log, "p", "default", follow=True))
    assert followed == ["one", "two"]
    assert core.read_namespaced_pod_log("p", "default") == "one\ntwo\n"
    assert core.read_namespaced_pod_log("p", "default", tail_lines=1) == "two\n"


def test_fault_injection_and_request_log(apiserver: FakeKubeApiServer, api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    fault = apiserver.inject_fault("POST", r"/configmaps$", status=500, count=2)
    for _ in range(2):
        with pytest.raises(client.ApiException) as err:
            core.create_namespaced_config_map("default", _cm("f"))
        assert err.value.status == 500
    core.create_namespaced_config_map("default", _cm("f"))
    assert fault.hits == 2
    # a lost response: the create happens, the client sees 500, a retry sees 409
    apiserver.inject_fault("POST", r"/configmaps$", status=500, after=True)
    with pytest.raises(client.ApiException):
        core.create_namespaced_config_map("default", _cm("g"))
    assert core.read_namespaced_config_map("g", "default").metadata.name == "g"
    apiserver.inject_fault("PATCH", r"/configmaps/g$", status=422)
    with pytest.raises(client.ApiException) as invalid:
        core.patch_namespaced_config_map("g", "default", {"data": {"x": "y"}})
    assert invalid.value.status == 422 and json.loads(invalid.value.body)["reason"] == "Invalid"
    assert apiserver.request_count("POST", r"/configmaps$") == 4
    assert apiserver.request_count("GET") == 1


def test_tls_and_bearer_token() -> None:
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    tokens = {"good"}
    with (
        FakeKubeApiServer(tls=server_ctx, token_validator=lambda t: t in tokens) as server,
        ca.cert_pem.tempfile() as ca_file,
    ):
        assert server.url.startswith("https://")
        config = client.Configuration(host=server.url)
        config.ssl_ca_cert = ca_file
        config.api_key = {"authorization": "good"}
        config.api_key_prefix = {"authorization": "Bearer"}
        api = client.ApiClient(config)
        try:
            assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"
            tokens.clear()  # the token expired
            with pytest.raises(client.ApiException) as err:
                client.CoreV1Api(api).read_namespace("default")
            assert err.value.status == 401
        finally:
            api.close()
