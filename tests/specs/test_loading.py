"""Reading specs from files: references, overrides, kind, round trips, and errors that name field and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlcloud.errors import SpecError
from rlcloud.specs import ClusterSpec, ExperimentSpec, Frequency, GpuType
from rlcloud.specs.loading import load_spec, parse_data_text
from tests.support.specs import minimal_experiment, spec_error


def write(path: Path, data: Any) -> Path:
    """Write ``data`` as JSON (for *.json) or YAML, making parent directories."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data)
    elif path.suffix == ".json":
        path.write_text(json.dumps(data))
    else:
        path.write_text(yaml.safe_dump(data))
    return path


FULL_EXPERIMENT: dict[str, Any] = minimal_experiment(
    name="pong-dist",
    description="Pong, distributed",
    environment={"type": "gym", "level": "ALE/Pong-v5", "frameskip": 4},
    agent={"type": "dqn", "memory": 10000, "batch_size": 32, "learning_rate": 1e-4},
    network=[{"type": "conv2d", "size": 32, "window": 8, "stride": 4}, {"type": "flatten"}, {"type": "dense"}],
    total_timesteps=1_000_000,
    max_timesteps_per_episode=10_000,
    deterministic=True,
    repeat_actions=4,
    debug_logging=True,
    seed=7,
    run_mode="distributed",
    num_workers=6,
    num_parameter_servers=1,
    execution="processes",
    saver_frequency="100e",
    summary_frequency="5000t",
    evaluation={"every": "50e", "episodes": 3},
    resources={"learner": {"cpu": "4", "memory": "16Gi", "gpus": 1}, "env_server": {"cpu": "1", "memory": "2Gi"}},
    image="ghcr.io/me/rlcloud:gpu",
    results="gs://my-bucket/runs",
    cluster={
        "name": "l4",
        "project": "my-rl-project",
        "location": "us-central1",
        "cpus_per_node": 8,
        "memory_per_node": 32,
        "num_nodes": 2,
        "disk_size": 200,
        "gpus_per_node": 1,
        "gpu_type": "nvidia-l4",
        "spot": True,
        "autoscaling": {"min_nodes": 0, "max_nodes": 4},
        "labels": {"team": "rl"},
        "ttl": "6h",
        "fallback_zones": ["us-central1-b"],
    },
)


# -------------------------------------------------------------------------------------------- round trip


def test_full_experiment_round_trips_through_json_and_yaml(tmp_path: Path) -> None:
    spec = ExperimentSpec.from_dict(FULL_EXPERIMENT)
    dumped = spec.model_dump(mode="json")
    assert json.loads(json.dumps(dumped)) == dumped  # plain JSON types only
    assert dumped["saver_frequency"] == "100e"
    assert dumped["cluster"]["ttl"] == "6h"
    assert ExperimentSpec.model_validate(dumped) == spec
    assert ExperimentSpec.from_dict(dumped) == spec

    text = spec.to_yaml()
    assert text.startswith("kind: Experiment\n")
    assert ExperimentSpec.from_yaml_text(text) == spec
    assert ExperimentSpec.from_file(write(tmp_path / "spec.yaml", text)) == spec
    assert ExperimentSpec.from_file(write(tmp_path / "spec.json", {"kind": "Experiment", **dumped})) == spec
    # and again: a second trip changes nothing
    assert ExperimentSpec.from_file(write(tmp_path / "again.yaml", spec.to_yaml())).to_yaml() == text


def test_cluster_round_trips(tmp_path: Path) -> None:
    spec = ClusterSpec.from_dict(FULL_EXPERIMENT["cluster"])
    dumped = spec.model_dump(mode="json")
    assert dumped["gpu_type"] == "nvidia-l4"
    assert ClusterSpec.model_validate(dumped) == spec
    text = spec.to_yaml()
    assert text.startswith("kind: Cluster\n")
    assert ClusterSpec.from_yaml_text(text) == spec
    loaded = ClusterSpec.from_file(write(tmp_path / "c.yaml", text))
    assert loaded == spec
    assert loaded.effective_machine_type == "custom-8-32768"


def test_minimal_round_trip_keeps_defaults(tmp_path: Path) -> None:
    spec = ExperimentSpec.from_dict(minimal_experiment())
    assert ExperimentSpec.from_file(write(tmp_path / "m.yaml", spec.to_yaml())) == spec


# ------------------------------------------------------------------------------------------------ kind


@pytest.mark.parametrize("kind", ["Experiment", "experiment", "ExperimentSpec", None])
def test_experiment_kind_explicit_or_inferred(tmp_path: Path, kind: str | None) -> None:
    data = minimal_experiment() if kind is None else {"kind": kind, **minimal_experiment()}
    assert isinstance(load_spec(write(tmp_path / "e.yaml", data)), ExperimentSpec)


@pytest.mark.parametrize("kind", ["Cluster", "cluster", None])
def test_cluster_kind_explicit_or_inferred(tmp_path: Path, kind: str | None) -> None:
    data = {"name": "c", "num_nodes": 2} if kind is None else {"kind": kind, "name": "c"}
    assert isinstance(load_spec(write(tmp_path / "c.yaml", data)), ClusterSpec)


@pytest.mark.parametrize("key", ["project", "labels", "ttl", "fallback_zones", "gpu_type", "machine_type"])
def test_any_cluster_only_key_makes_a_cluster(tmp_path: Path, key: str) -> None:
    values = {
        "project": "my-rl-project",
        "labels": {"team": "rl"},
        "ttl": "6h",
        "fallback_zones": ["us-central1-b"],
        "gpu_type": "nvidia-l4",
        "machine_type": "n1-standard-4",
    }
    spec = load_spec(write(tmp_path / "c.yaml", {"name": "c", key: values[key]}))
    assert isinstance(spec, ClusterSpec)


def test_unknown_kind(tmp_path: Path) -> None:
    error = spec_error(lambda: load_spec(write(tmp_path / "x.yaml", {"kind": "Job", "name": "x"})))
    assert error.fields == ["kind"]
    assert "Experiment or Cluster" in str(error)


def test_kind_that_cannot_be_inferred(tmp_path: Path) -> None:
    error = spec_error(lambda: load_spec(write(tmp_path / "x.yaml", {"name": "x"})))
    assert error.fields == ["kind"]
    assert "kind: Experiment" in str(error)


def test_wrong_kind_for_the_loader(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", {"kind": "Cluster", "name": "c"})
    error = spec_error(lambda: ExperimentSpec.from_file(path))
    assert error.fields == ["kind"]
    assert "expected an Experiment spec but this file holds a Cluster spec" in str(error)


# ------------------------------------------------------------------------------------------- overrides


def test_keyword_overrides_replace_settings(tmp_path: Path) -> None:
    path = write(tmp_path / "e.yaml", minimal_experiment())
    spec = ExperimentSpec.from_file(path, run_mode="multi-threaded", num_workers=8, episodes=5)
    assert (spec.run_mode, spec.num_workers, spec.episodes) == ("multi-threaded", 8, 5)


def test_dotted_overrides_set_nested_settings(tmp_path: Path) -> None:
    path = write(tmp_path / "e.yaml", minimal_experiment(resources={"learner": {"memory": "8Gi"}}))
    spec = ExperimentSpec.from_file(
        path,
        **{
            "resources.learner.cpu": "2",
            "agent.batch_size": 64,
            "evaluation.every": "20e",
            "environment.level": "Acrobot-v1",
        },
    )
    assert spec.resources.learner.cpu == "2"
    assert spec.resources.learner.memory == "8Gi"  # siblings stay
    assert spec.agent == {"type": "ppo", "batch_size": 64}
    assert spec.evaluation is not None and spec.evaluation.every == Frequency(20, "e")
    assert spec.environment["level"] == "Acrobot-v1"


def test_dotted_override_changes_a_referenced_file_not_replaces_it(tmp_path: Path) -> None:
    write(tmp_path / "ppo.yaml", {"type": "ppo", "batch_size": 10, "discount": 0.99})
    path = write(tmp_path / "e.yaml", minimal_experiment(agent="ppo.yaml"))
    spec = ExperimentSpec.from_file(path, **{"agent.batch_size": 32})
    assert spec.agent == {"type": "ppo", "batch_size": 32, "discount": 0.99}


def test_override_with_a_file_reference_is_resolved(workdir: Path) -> None:
    write(workdir / "configs" / "agents" / "dqn.yaml", {"type": "dqn", "memory": 1000})
    path = write(workdir / "exp" / "e.yaml", minimal_experiment())
    assert ExperimentSpec.from_file(path, agent="dqn").agent == {"type": "dqn", "memory": 1000}


def test_override_into_inline_cluster(tmp_path: Path) -> None:
    path = write(tmp_path / "e.yaml", minimal_experiment(cluster={"name": "c", "gpu_type": "nvidia-tesla-t4"}))
    spec = ExperimentSpec.from_file(path, **{"cluster.num_nodes": 3, "cluster.spot": True})
    assert isinstance(spec.cluster, ClusterSpec)
    assert (spec.cluster.num_nodes, spec.cluster.spot, spec.cluster.gpu_type) == (3, True, "nvidia-tesla-t4")


def test_dotted_override_into_a_referenced_cluster_file(tmp_path: Path) -> None:
    write(tmp_path / "t4.yaml", {"kind": "Cluster", "name": "t4", "gpu_type": "nvidia-tesla-t4"})
    path = write(tmp_path / "e.yaml", minimal_experiment(cluster="t4.yaml"))
    spec = ExperimentSpec.from_file(path, **{"cluster.num_nodes": 4})
    assert spec.cluster == ClusterSpec(name="t4", gpu_type=GpuType.T4, num_nodes=4)


def test_inline_cluster_may_keep_its_kind_line() -> None:
    cluster = ClusterSpec(name="inline", num_nodes=2)
    inline = yaml.safe_load(cluster.to_yaml())
    assert inline["kind"] == "Cluster"
    assert ExperimentSpec.from_dict(minimal_experiment(cluster=inline)).cluster == cluster


def test_cluster_overrides(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", {"name": "c", "num_nodes": 1})
    spec = ClusterSpec.from_file(path, num_nodes=4, **{"autoscaling.max_nodes": 8})
    assert spec.num_nodes == 4
    assert spec.autoscaling is not None and spec.autoscaling.max_nodes == 8


def test_bad_override_is_a_spec_error_naming_the_field(tmp_path: Path) -> None:
    path = write(tmp_path / "e.yaml", minimal_experiment())
    assert spec_error(lambda: ExperimentSpec.from_file(path, num_parameter_servers=3)).fields == [
        "num_parameter_servers"
    ]
    assert spec_error(lambda: ExperimentSpec.from_file(path, **{"resources.learner.cpu": "lots"})).fields == [
        "resources.learner.cpu"
    ]


def test_from_file_does_not_mutate_on_override(tmp_path: Path) -> None:
    path = write(tmp_path / "e.yaml", minimal_experiment())
    ExperimentSpec.from_file(path, episodes=3)
    assert ExperimentSpec.from_file(path).episodes == 100


# ------------------------------------------------------------------------------------ file references


def test_references_resolve_relative_to_the_spec_file(workdir: Path) -> None:
    spec_dir = workdir / "project" / "experiments"
    write(spec_dir / "env.yaml", {"type": "gym", "level": "Acrobot-v1"})
    write(spec_dir / "agents" / "ppo.json", {"type": "ppo", "batch_size": 5})
    write(spec_dir / "net.yaml", [{"type": "dense", "size": 32}])
    write(spec_dir / "cluster.yaml", {"kind": "Cluster", "name": "small", "num_nodes": 2})
    path = write(
        spec_dir / "e.yaml",
        minimal_experiment(environment="env.yaml", agent="agents/ppo.json", network="net.yaml", cluster="cluster.yaml"),
    )
    spec = ExperimentSpec.from_file(path)
    assert spec.environment == {"type": "gym", "level": "Acrobot-v1"}
    assert spec.agent == {"type": "ppo", "batch_size": 5}
    assert spec.network == [{"type": "dense", "size": 32}]
    assert spec.cluster == ClusterSpec(name="small", num_nodes=2)


def test_references_fall_back_to_configs_dirs(workdir: Path) -> None:
    for kind, data in [
        ("environments", {"type": "gym", "level": "Pendulum-v1"}),
        ("agents", {"type": "ddpg"}),
        ("networks", [{"type": "dense", "size": 8}]),
        ("clusters", {"name": "from-configs"}),
    ]:
        write(workdir / "configs" / kind / "shared.yaml", data)
    path = write(
        workdir / "specs" / "e.yaml",
        minimal_experiment(environment="shared", agent="shared.yaml", network="shared", cluster="shared.yaml"),
    )
    spec = ExperimentSpec.from_file(path)
    assert spec.environment["level"] == "Pendulum-v1"
    assert spec.agent == {"type": "ddpg"}
    assert spec.network == [{"type": "dense", "size": 8}]
    assert spec.cluster == ClusterSpec(name="from-configs")


def test_file_next_to_the_spec_wins_over_configs(workdir: Path) -> None:
    write(workdir / "configs" / "agents" / "a.yaml", {"type": "dqn"})
    write(workdir / "specs" / "a.yaml", {"type": "ppo"})
    path = write(workdir / "specs" / "e.yaml", minimal_experiment(agent="a.yaml"))
    assert ExperimentSpec.from_file(path).agent == {"type": "ppo"}


def test_from_dict_resolves_against_base_dir(tmp_path: Path) -> None:
    write(tmp_path / "agent.yaml", {"type": "a2c"})
    spec = ExperimentSpec.from_dict(minimal_experiment(agent="agent.yaml"), base_dir=tmp_path)
    assert spec.agent == {"type": "a2c"}


@pytest.mark.parametrize("kind", ["environment", "agent", "network", "cluster"])
def test_missing_reference_names_the_field_and_the_file(workdir: Path, kind: str) -> None:
    path = write(workdir / "e.yaml", minimal_experiment(**{kind: "nowhere.yaml"}))
    error = spec_error(lambda: ExperimentSpec.from_file(path))
    assert error.fields == [kind]
    assert "'nowhere.yaml' not found" in str(error)
    assert "configs/" in str(error)
    assert str(path) in str(error)


def test_missing_reference_and_other_problems_are_reported_together(workdir: Path) -> None:
    path = write(workdir / "e.yaml", minimal_experiment(agent="gone.json", num_parameter_servers=4, name="Bad"))
    error = spec_error(lambda: ExperimentSpec.from_file(path))
    assert sorted(error.fields) == ["agent", "name", "num_parameter_servers"]


def test_broken_referenced_file_names_the_field_and_line(tmp_path: Path) -> None:
    write(tmp_path / "agent.yaml", "type: ppo\nbatch_size: [1, 2\n")
    path = write(tmp_path / "e.yaml", minimal_experiment(agent="agent.yaml"))
    error = spec_error(lambda: ExperimentSpec.from_file(path))
    assert error.fields == ["agent"]
    assert "line " in error.problems[0].message


def test_referenced_cluster_file_problems_name_the_nested_field(tmp_path: Path) -> None:
    write(tmp_path / "k80.json", {"name": "old", "gpu_type": "nvidia-tesla-k80"})
    path = write(tmp_path / "e.yaml", minimal_experiment(cluster="k80.json"))
    error = spec_error(lambda: ExperimentSpec.from_file(path))
    assert error.fields == ["cluster.gpu_type"]


def test_plain_cluster_name_is_not_a_file(workdir: Path) -> None:
    path = write(workdir / "e.yaml", minimal_experiment(cluster="shared-t4"))
    assert ExperimentSpec.from_file(path).cluster == "shared-t4"


# ---------------------------------------------------------------------------------- numbers and parsing


def test_exponent_floats_are_numbers_in_yaml_and_json(tmp_path: Path) -> None:
    # PyYAML's YAML 1.1 reads `1e-3` as a string; spec files write learning rates that way
    agent = "type: ppo\nlearning_rate: 1e-3\nclip: 2E+1\nname: 1e3x\n"
    write(tmp_path / "agent.yaml", agent)
    (tmp_path / "agent2.json").write_text('{"type": "ppo", "learning_rate": 1e-3, "steps": 1e6}')
    spec = ExperimentSpec.from_file(write(tmp_path / "e.yaml", minimal_experiment(agent="agent.yaml")))
    assert spec.agent == {"type": "ppo", "learning_rate": 0.001, "clip": 20.0, "name": "1e3x"}
    spec = ExperimentSpec.from_file(write(tmp_path / "e2.yaml", minimal_experiment(agent="agent2.json")))
    assert spec.agent == {"type": "ppo", "learning_rate": 0.001, "steps": 1e6}


def test_from_yaml_text_overrides_and_errors(tmp_path: Path) -> None:
    write(tmp_path / "agent.yaml", {"type": "vpg"})
    text = yaml.safe_dump(minimal_experiment(agent="agent.yaml"))
    spec = ExperimentSpec.from_yaml_text(text, base_dir=tmp_path, episodes=7)
    assert (spec.agent, spec.episodes) == ({"type": "vpg"}, 7)
    assert spec_error(lambda: ExperimentSpec.from_yaml_text("name: x\nepisodes: [\n")).fields == [""]
    assert spec_error(lambda: ClusterSpec.from_yaml_text("name: c\ngpu_type: nvidia-tesla-k80\n")).fields == [
        "gpu_type"
    ]


def test_duplicate_keys_are_refused_with_the_line(tmp_path: Path) -> None:
    text = "name: x\nagent:\n  type: ppo\n  batch_size: 5\n  batch_size: 10\n"
    error = spec_error(lambda: parse_data_text(text, source="dup.yaml"))
    assert "line 5, column 3: duplicate key 'batch_size'" in str(error)
    path = tmp_path / "dup.json"
    path.write_text('{"kind": "Cluster", "name": "a", "name": "b"}')
    assert "duplicate key 'name'" in str(spec_error(lambda: load_spec(path)))


def test_yaml_merge_keys_may_override() -> None:
    text = "base: &b {type: ppo, batch_size: 5}\nagent:\n  <<: *b\n  batch_size: 10\n"
    assert parse_data_text(text)["agent"] == {"type": "ppo", "batch_size": 10}


def test_parse_data_text_keeps_ordinary_yaml() -> None:
    assert parse_data_text("a: 1\nb: 1.5\nc: yes\nd: '1e3'\ne: 10s\n") == {
        "a": 1,
        "b": 1.5,
        "c": True,
        "d": "1e3",
        "e": "10s",
    }


# ------------------------------------------------------------------------------------- errors, in bulk


def test_several_problems_are_reported_at_once() -> None:
    data = minimal_experiment(
        name="Not_Valid",
        num_parameter_servers=2,
        summary_frequency="10e",
        results="gs://X",
        resources={"learner": {"memory": "4GB"}},
        cluster={"name": "c", "gpu_type": "nvidia-tesla-k80", "disk_size": 1},
        colour="blue",
    )
    error = spec_error(lambda: ExperimentSpec.from_dict(data))
    assert sorted(error.fields) == sorted(
        [
            "name",
            "num_parameter_servers",
            "summary_frequency",
            "results",
            "resources.learner.memory",
            "cluster.gpu_type",
            "cluster.disk_size",
            "colour",
        ]
    )
    text = str(error)
    assert text.startswith("8 problems")
    for field in error.fields:
        assert f"  - {field}: " in text


def test_problems_carry_value_and_source(tmp_path: Path) -> None:
    path = write(tmp_path / "e.yaml", minimal_experiment(repeat_actions=0))
    error = spec_error(lambda: ExperimentSpec.from_file(path))
    (problem,) = error.problems
    assert (problem.field, problem.value, problem.source) == ("repeat_actions", 0, str(path))
    assert str(error) == f"{path}: repeat_actions: Input should be greater than or equal to 1 (got 0)"


def test_broken_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "e.yaml", "name: x\nagent: {type: ppo\nepisodes: 3\n")
    error = spec_error(lambda: load_spec(path))
    assert "line 3" in str(error)
    assert str(path) in str(error)


def test_broken_json_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "e.json", '{\n  "name": "x",\n  "episodes": 3,\n}\n')
    error = spec_error(lambda: load_spec(path))
    assert "line 4" in str(error)
    assert str(path) in str(error)


@pytest.mark.parametrize("content", ["", "- a\n- b\n", "just text\n", "42\n"])
def test_file_that_is_not_a_mapping(tmp_path: Path, content: str) -> None:
    path = write(tmp_path / "e.yaml", content)
    error = spec_error(lambda: load_spec(path))
    assert "mapping of settings" in str(error)


def test_unreadable_files(tmp_path: Path) -> None:
    (tmp_path / "dir.yaml").mkdir()
    (tmp_path / "bin.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    assert "Is a directory" in str(spec_error(lambda: load_spec(tmp_path / "dir.yaml")))
    assert "cannot read" in str(spec_error(lambda: load_spec(tmp_path / "bin.yaml")))
    assert "file not found" in str(spec_error(lambda: load_spec(tmp_path / "none.yaml")))


def test_spec_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        ExperimentSpec.from_dict(minimal_experiment(episodes=0))
    assert issubclass(SpecError, ValueError)
