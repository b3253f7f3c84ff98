"""ConfigMaps stay within the 1 MiB Kubernetes allows: the builders refuse a larger spec by name before
anything is created, and the fake apiserver refuses a larger ConfigMap as the real one does (422)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from rlcloud.errors import SpecError
from rlcloud.k8s.applier import Applier
from rlcloud.k8s.backend import KubernetesBackend
from rlcloud.k8s.builders import MAX_CONFIG_MAP_BYTES, build_workloads
from rlcloud.k8s.sweep_builders import build_sweep_workloads
from tests.fakes.kube_apiserver import ApiError, FakeKubeApiServer
from tests.support.kubernetes import FAST_RETRY, make_spec, make_sweep

#: an environment given a pasted level layout of 1.1 MB as an argument
HUGE_ENVIRONMENT = {"type": "gym", "level": "CartPole-v1", "layout": "#." * 550_000}
FITS_ENVIRONMENT = {"type": "gym", "level": "CartPole-v1", "layout": "#." * 450_000}


def test_the_fake_refuses_a_config_map_over_1_mib(apiserver: FakeKubeApiServer, api_client: client.ApiClient) -> None:
    exactly = {"k": "x" * ((1 << 20) - 1)}  # key and value: 1 MiB
    apiserver.create_object("ConfigMap", {"metadata": {"name": "fits"}, "data": exactly}, "default")
    with pytest.raises(ApiError) as info:
        apiserver.create_object("ConfigMap", {"metadata": {"name": "big"}, "data": {"k": "x" * (1 << 20)}}, "default")
    assert info.value.code == 422
    assert info.value.message == 'ConfigMap "big" is invalid: []: Too long: may not be more than 1048576 bytes'
    # a replace through the API too, which the client sees as the API server's refusal
    bigger = client.V1ConfigMap(
        api_version="v1",
        kind="ConfigMap",
        metadata=client.V1ObjectMeta(name="fits", namespace="default"),
        data={"k": "y" * (1 << 20)},
    )
    with pytest.raises(SpecError, match="Too long"):
        Applier(api_client, FAST_RETRY).replace(bigger)


def test_a_spec_too_large_for_a_config_map_is_refused_by_name_and_nothing_is_created(
    apiserver: FakeKubeApiServer, api_client: client.ApiClient, tmp_path: Path
) -> None:
    spec = make_spec(environment=HUGE_ENVIRONMENT)
    with pytest.raises(SpecError) as info:
        build_workloads(spec, image="i:1", namespace="rl")
    (problem,) = info.value.problems
    assert problem.field == "environment"
    assert "1,048,576 bytes (1 MiB)" in problem.message and "ConfigMap cartpole-spec" in problem.message
    backend = KubernetesBackend(api_client, namespace="rl", image="i:1", retry=FAST_RETRY, local_results=True)
    with pytest.raises(SpecError):
        backend.start(spec, str(tmp_path / "results"))
    assert apiserver.get_object("Namespace", "rl") is None and apiserver.list_objects("Job") == []
    # just under the limit is fine
    (config_map, _) = build_workloads(make_spec(environment=FITS_ENVIRONMENT), image="i:1", namespace="rl")
    assert 900_000 < len(config_map.data["spec.yaml"]) < MAX_CONFIG_MAP_BYTES


def test_a_sweep_too_large_names_its_largest_part() -> None:
    sweep = make_sweep(2)
    sweep = sweep.model_copy(update={"experiment": sweep.experiment.replace(environment=HUGE_ENVIRONMENT)})
    with pytest.raises(SpecError) as info:
        build_sweep_workloads(sweep, image="i:1", namespace="rl")
    assert info.value.fields == ["experiment.environment"]
