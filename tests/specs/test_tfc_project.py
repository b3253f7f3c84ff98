"""tensorforce-client projects as they are on disk (issue 29).

tfc's ``read_json_spec`` used a reference that exists relative to the project directory (the folder holding
``.tensorforce.json``, where tfcli ran) as given, else looked a bare name up in ``configs/<kind>/`` with
``.json`` added. Both forms load here, a minimal tfc file is recognised as legacy by what it names, and a
reference never leaves the project. The last part checks validate = start: layers that cannot take the
environment's states are named by ``spec validate`` instead of failing the run when the agent is built.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from rlcloud.specs import ExperimentSpec, LegacySpecWarning
from rlcloud.validation import validate_file
from tests.support.specs import spec_error

LEGACY = Path(__file__).parent / "legacy"

# A 0.4 PPO agent as tfc's configs/agents/ held it.
PPO_AGENT = {
    "type": "ppo_agent",
    "update_mode": {"unit": "episodes", "batch_size": 10, "frequency": 10},
    "step_optimizer": {"type": "adam", "learning_rate": 1e-3},
    "discount": 0.99,
}
CARTPOLE = {"type": "tensorforce.contrib.openai_gym.OpenAIGym", "gym_id": "CartPole-v0"}


def _write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def tfc_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tfc project: .tensorforce.json at its root, configs/<kind>/ beneath; the shell is somewhere else."""
    root = tmp_path / "my-tfc-project"
    _write(root / ".tensorforce.json", {"project": "p", "zone": "us-central1-a"})
    shutil.copy(LEGACY / "mlp2_network.json", _write(root / "configs/networks/mlp2_network.json", []))
    _write(root / "configs/agents/ppo_agent.json", PPO_AGENT)
    _write(root / "configs/environments/cartpole.json", CARTPOLE)
    _write(root / "configs/clusters/small_cluster.json", json.loads((LEGACY / "small_cluster.json").read_text()))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return root


def _load(path: Path) -> tuple[ExperimentSpec, list[str]]:
    with pytest.warns(LegacySpecWarning) as record:
        spec = ExperimentSpec.from_file(path)
    return spec, [str(w.message) for w in record]


@pytest.mark.parametrize("form", ["project-relative", "bare name", "bare name with .json"])
def test_both_reference_forms_resolve_from_the_project_root(tfc_project: Path, form: str) -> None:
    refs = {
        "project-relative": ("configs/agents/ppo_agent.json", "configs/networks/mlp2_network.json"),
        "bare name": ("ppo_agent", "mlp2_network"),
        "bare name with .json": ("ppo_agent.json", "mlp2_network.json"),
    }[form]
    experiment = {"type": "experiment", "name": "ppo_cartpole", "environment": CARTPOLE, "timesteps": 1000}
    path = _write(tfc_project / "configs/experiments/ppo.json", {**experiment, "agent": refs[0], "network": refs[1]})
    spec, _ = _load(path)
    assert spec.agent["type"] == "ppo"
    assert [layer["size"] for layer in spec.network] == [32, 32]  # type: ignore[index,union-attr]


def test_project_relative_paths_resolve_when_the_shell_is_in_the_project(
    tfc_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tfcli ran from the project directory; an experiment file may sit anywhere in it, even at its root
    monkeypatch.chdir(tfc_project)
    path = _write(
        tfc_project / "ppo.json",
        {"name": "ppo", "environment": "configs/environments/cartpole.json", "agent": "configs/agents/ppo_agent.json"},
    )
    spec, _ = _load(path)
    assert spec.environment["level"] == "CartPole-v0"


def test_an_rlcloud_yaml_marks_the_project_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "proj"
    (root / "specs").mkdir(parents=True)
    (root / "rlcloud.yaml").write_text("project: p\n")
    _write(root / "nets/small.json", [{"type": "dense", "size": 8}])
    spec_file = root / "specs/exp.yaml"
    spec_file.write_text(
        "name: exp\nenvironment: {type: gym, level: CartPole-v1}\nagent: {type: ppo, batch_size: 10}\n"
        "network: nets/small.json\nepisodes: 5\n"
    )
    monkeypatch.chdir(tmp_path)
    assert ExperimentSpec.from_file(spec_file).network == [{"type": "dense", "size": 8}]


def test_a_minimal_tfc_file_is_recognised_by_what_it_names(tfc_project: Path) -> None:
    # just name, environment, agent and cluster, each a file: no "type": "experiment", no timesteps
    path = _write(
        tfc_project / "configs/experiments/minimal.json",
        {
            "name": "ppo_cartpole",
            "environment": "configs/environments/cartpole.json",
            "agent": "ppo_agent",
            "cluster": "configs/clusters/small_cluster.json",
        },
    )
    spec, messages = _load(path)
    assert spec.name == "ppo-cartpole"  # migrated with a warning, not refused for its underscore
    assert spec.agent["type"] == "ppo"
    assert spec.cluster is not None and not isinstance(spec.cluster, str) and spec.cluster.name == "small-cluster"
    # tfc's defaults for the keys it leaves out apply, each named
    assert (spec.run_mode, spec.num_workers, spec.total_timesteps) == ("distributed", 3, 1_000_000)
    for key in ("run_mode", "num_workers", "num_parameter_servers", "episodes", "max_timesteps_per_episode"):
        assert any(m.startswith(f"{key} was not set: tensorforce-client's default") for m in messages), key


@pytest.mark.parametrize(
    "marker",
    [
        {"environment": CARTPOLE},  # tfc's environment type
        {"environment": {"type": "gym", "gym_id": "CartPole-v0"}},  # gym_id
        {"agent": {"type": "dqn_agent", "memory": {"type": "replay", "capacity": 1000}}},  # a *_agent type
        {"k8s_config": "experiment_x.yaml"},  # tfc bookkeeping
        {"cluster": {"type": "cluster", "name": "small_cluster", "num_nodes": 1, "machine_type": "n1-standard-4"}},
    ],
    ids=["contrib-type", "gym_id", "agent-type", "bookkeeping", "cluster-type"],
)
def test_any_one_marker_makes_a_file_legacy(tmp_path: Path, marker: dict[str, Any]) -> None:
    data = {
        "name": "old_name",
        "environment": {"type": "gym", "level": "CartPole-v1"},
        "agent": {"type": "ppo", "batch_size": 10},
        "episodes": 10,
        **marker,
    }
    spec, messages = _load(_write(tmp_path / "exp.json", data))
    assert spec.name == "old-name"
    assert any("old_name" in m for m in messages)


def test_a_modern_file_with_an_underscore_name_is_still_refused(tmp_path: Path) -> None:
    data = {"name": "my_run", "environment": {"type": "gym", "level": "CartPole-v1"}, "agent": {"type": "ppo"}}
    error = spec_error(lambda: ExperimentSpec.from_file(_write(tmp_path / "exp.json", data)))
    assert any(p.field == "name" for p in error.problems)


@pytest.mark.parametrize(
    "reference",
    ["../outside/net.json", "configs/../../outside/net.json", ".secrets/net.json", "configs/.hidden/net.json"],
)
def test_a_project_relative_reference_never_leaves_the_project(tfc_project: Path, reference: str) -> None:
    _write(tfc_project.parent / "outside/net.json", [{"type": "dense", "size": 4}])
    _write(tfc_project / ".secrets/net.json", [{"type": "dense", "size": 4}])
    _write(tfc_project / "configs/.hidden/net.json", [{"type": "dense", "size": 4}])
    path = _write(
        tfc_project / "configs/experiments/e.json",
        {"type": "experiment", "name": "e", "environment": CARTPOLE, "agent": "ppo_agent", "network": reference},
    )
    with pytest.warns(LegacySpecWarning):
        error = spec_error(lambda: ExperimentSpec.from_file(path))
    (problem,) = [p for p in error.problems if p.field == "network"]
    assert "points outside" in problem.message


def test_a_link_inside_the_project_to_a_file_outside_is_refused(tfc_project: Path) -> None:
    outside = _write(tfc_project.parent / "outside/net.json", [{"type": "dense", "size": 4}])
    (tfc_project / "nets").mkdir()
    os.symlink(outside, tfc_project / "nets/net.json")
    path = _write(
        tfc_project / "configs/experiments/e.json",
        {"name": "e", "environment": CARTPOLE, "network": "nets/net.json", "agent": "ppo_agent"},
    )
    with pytest.warns(LegacySpecWarning):
        error = spec_error(lambda: ExperimentSpec.from_file(path))
    assert any("points outside" in p.message for p in error.problems)


def test_a_key_file_inside_the_project_is_refused_unread(tfc_project: Path) -> None:
    _write(tfc_project / "keys/sa.json", {"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----x"})
    path = _write(
        tfc_project / "configs/experiments/e.json",
        {"type": "experiment", "name": "e", "environment": CARTPOLE, "agent": "keys/sa.json"},
    )
    with pytest.warns(LegacySpecWarning):
        error = spec_error(lambda: ExperimentSpec.from_file(path))
    assert "credentials file" in str(error)
    assert "BEGIN PRIVATE KEY" not in str(error)


# -------------------------------------------------------------------------------- validate = start


@pytest.mark.parametrize(
    ("level", "network", "says"),
    [
        (
            "CartPole-v1",
            [{"type": "embedding", "size": 16}],
            "'embedding' takes bool or int input, not the environment's float",
        ),
        ("FrozenLake-v1", [{"type": "dense", "size": 16}], "'dense' takes float input, not the environment's int"),
        ("CartPole-v1", [{"type": "conv2d", "size": 16}], "'conv2d' takes input of rank 3"),
        (
            "CartPole-v1",
            [{"type": "dense", "size": 8}, {"type": "pool2d", "reduction": "max"}],
            "'pool2d' takes input of rank 3, not the float states of rank 1",
        ),
        (
            "FrozenLake-v1",
            [{"type": "embedding", "size": 8}, {"type": "embedding", "size": 8}],
            "'embedding' takes bool or int input",
        ),
    ],
)
def test_layers_that_cannot_take_the_states_are_named_by_validate(
    tmp_path: Path, level: str, network: list[dict[str, Any]], says: str
) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(
        json.dumps(
            {
                "name": "x",
                "environment": {"type": "gym", "level": level},
                "agent": {"type": "ppo", "batch_size": 10},
                "network": network,
                "episodes": 2,
            }
        )
    )
    report = validate_file(path)
    (problem,) = report.problems
    assert problem.field == f"network[{len(network) - 1}].type"
    assert says in problem.message


@pytest.mark.parametrize(
    ("level", "network", "agent"),
    [
        ("FrozenLake-v1", [{"type": "embedding", "size": 8}, {"type": "dense", "size": 8}], {}),
        (
            "CartPole-v1",
            [{"type": "dense", "size": 8}, {"type": "register", "tensor": "x"}, {"type": "conv2d", "size": 4}],
            {},
        ),
        ("CartPole-v1", "auto", {}),
        ("CartPole-v1", None, {"network": {"type": "layered", "layers": [{"type": "dense", "size": 8}]}}),
    ],
    ids=["embedding-then-dense", "unknown-effect-ends-the-check", "auto", "agent-network"],
)
def test_layers_that_fit_or_cannot_be_judged_are_accepted(
    tmp_path: Path, level: str, network: Any, agent: dict[str, Any]
) -> None:
    data: dict[str, Any] = {
        "name": "x",
        "environment": {"type": "gym", "level": level},
        "agent": {"type": "ppo", "batch_size": 10, **agent},
        "episodes": 2,
    }
    if network is not None:
        data["network"] = network
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(data))
    report = validate_file(path)
    assert report.ok, report.problems


def test_the_agents_network_is_checked_too(tmp_path: Path) -> None:
    agent = {
        "type": "ppo",
        "batch_size": 10,
        "network": {"type": "layered", "layers": [{"type": "embedding", "size": 8}]},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(
        json.dumps({"name": "x", "environment": {"type": "gym", "level": "CartPole-v1"}, "agent": agent, "episodes": 2})
    )
    (problem,) = validate_file(path).problems
    assert problem.field == "agent.network.layers[0].type"


@pytest.mark.training
def test_what_validate_refuses_is_what_tensorforce_refuses(tmp_path: Path) -> None:
    # the same network, built for real by Tensorforce on the CPU: it fails at build time with a mismatch
    path = tmp_path / "exp.yaml"
    path.write_text(
        json.dumps(
            {
                "name": "x",
                "environment": {"type": "gym", "level": "CartPole-v1"},
                "agent": {"type": "ppo", "batch_size": 10},
                "network": [{"type": "embedding", "size": 16}],
                "episodes": 2,
            }
        )
    )
    assert not validate_file(path).ok
    report = validate_file(path, build=True)
    assert any("mismatch" in p.message.lower() or "embedding" in p.message for p in report.problems)
