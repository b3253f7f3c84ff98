"""ExperimentSpec: every field rule and the error text users see."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from rlcloud.specs import ClusterSpec, EvaluationSpec, ExperimentSpec, Frequency, Resources
from tests.support.specs import minimal_experiment, spec_error


def experiment(**changes: Any) -> ExperimentSpec:
    """An ExperimentSpec through the loader path (SpecError, file references) from the minimal one."""
    return ExperimentSpec.from_dict(minimal_experiment(**changes))


def only_problem(**changes: Any) -> tuple[str, str]:
    """The single (field, message) a bad experiment gives."""
    error = spec_error(lambda: experiment(**changes))
    assert len(error.problems) == 1, error
    return error.problems[0].field, error.problems[0].message


def test_minimal_experiment_and_its_defaults() -> None:
    spec = experiment()
    assert spec.name == "cartpole"
    assert spec.network == "auto"
    assert spec.run_mode == "single"
    assert spec.num_workers == 1
    assert spec.num_envs == 1
    assert spec.num_parameter_servers == 0
    assert spec.repeat_actions == 1
    assert spec.saver_frequency == Frequency(600, "s")
    assert spec.summary_frequency == Frequency(120, "s")
    assert spec.evaluation is None
    assert spec.resources.learner == Resources()
    assert spec.cluster is None
    assert spec.results is None


# --------------------------------------------------------------------------------------------- name


@pytest.mark.parametrize(
    ("name", "says"),
    [("", "non-empty"), ("x" * 41, "at most 40"), ("CartPole", "DNS-1123"), ("cart_pole", "'cart-pole'")],
)
def test_bad_names(name: str, says: str) -> None:
    field, message = only_problem(name=name)
    assert field == "name"
    assert says in message


def test_forty_character_name_is_fine() -> None:
    assert experiment(name="x" * 40).name == "x" * 40


# ----------------------------------------------------------------------------- environment, agent, network


def test_environment_forms() -> None:
    assert experiment(environment={"type": "gym", "level": "ALE/Pong-v5"}).environment["level"] == "ALE/Pong-v5"
    assert experiment(environment={"type": "mypkg.envs:Maze", "size": 5}).environment["size"] == 5
    assert experiment(environment={"class": "mypkg.envs.Maze"}).environment == {"class": "mypkg.envs.Maze"}


@pytest.mark.parametrize(
    ("environment", "says"),
    [
        ({"level": "CartPole-v1"}, "needs a 'type'"),
        ({"type": "gym"}, "needs 'level'"),
        ({"type": "gymnasium", "level": ""}, "needs 'level'"),
        (5, "valid dictionary"),
    ],
)
def test_bad_environment(environment: Any, says: str) -> None:
    field, message = only_problem(environment=environment)
    assert field == "environment"
    assert says in message


def test_agent_needs_a_type() -> None:
    field, message = only_problem(agent={"batch_size": 10})
    assert field == "agent"
    assert "needs a 'type'" in message


def test_unresolved_reference_in_the_model_says_how_to_load_it() -> None:
    data = minimal_experiment(agent="ppo.yaml")
    with pytest.raises(ValidationError, match="from_file"):
        ExperimentSpec.model_validate(data)


@pytest.mark.parametrize(
    "network", ["auto", [{"type": "dense", "size": 64}, {"type": "dense", "size": 64}], {"type": "auto", "size": 32}]
)
def test_network_forms(network: Any) -> None:
    assert experiment(network=network).network == network


@pytest.mark.parametrize(("network", "says"), [([1, 2], "layer mappings"), (5, "'auto'")])
def test_bad_network(network: Any, says: str) -> None:
    field, message = only_problem(network=network)
    assert field == "network"
    assert says in message


# --------------------------------------------------------------------------------------- stop conditions


def test_a_stop_condition_is_required() -> None:
    field, message = only_problem(episodes=None)
    assert field == "episodes"
    assert "episodes or total_timesteps" in message
    assert experiment(episodes=None, total_timesteps=10_000).total_timesteps == 10_000


@pytest.mark.parametrize(
    "field", ["episodes", "total_timesteps", "max_timesteps_per_episode", "repeat_actions", "num_workers"]
)
def test_counts_are_at_least_one(field: str) -> None:
    changes: dict[str, Any] = {field: 0}
    if field == "num_workers":
        changes["run_mode"] = "distributed"
    at, message = only_problem(**changes)
    assert at == field
    assert "greater than or equal to 1" in message


def test_seed_and_flags() -> None:
    spec = experiment(seed=0, deterministic=True, debug_logging=True, repeat_actions=4, max_timesteps_per_episode=500)
    assert (spec.seed, spec.deterministic, spec.debug_logging, spec.repeat_actions) == (0, True, True, 4)
    assert only_problem(seed=-1)[0] == "seed"
    assert only_problem(deterministic="maybe")[0] == "deterministic"


# ------------------------------------------------------------------------------------------------ run mode


@pytest.mark.parametrize(
    ("run_mode", "workers", "default"), [("single", 1, 1), ("multi-threaded", 8, 4), ("distributed", 1, 2)]
)
def test_run_modes(run_mode: str, workers: int, default: int) -> None:
    assert experiment(run_mode=run_mode, num_workers=workers).num_workers == workers
    assert experiment(run_mode=run_mode).num_workers == default


def test_num_envs_follows_run_mode() -> None:
    assert experiment(run_mode="multi-threaded", num_workers=6).num_envs == 6
    assert experiment(run_mode="distributed", num_workers=3).num_envs == 3
    # overlapped: every env server hosts envs_per_server environments, 2 unless given
    assert experiment(run_mode="distributed", num_workers=3, execution="overlapped").num_envs == 6
    assert experiment(run_mode="distributed", num_workers=3, execution="overlapped", envs_per_server=3).num_envs == 9
    assert experiment(run_mode="distributed", num_workers=3, envs_per_server=2).num_envs == 6


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"run_mode": "multi-threaded", "num_workers": 4, "envs_per_server": 2}, "is for run_mode distributed"),
        ({"run_mode": "distributed", "execution": "overlapped", "envs_per_server": 1}, "must be 2 or more"),
        ({"run_mode": "distributed", "envs_per_server": 9}, "less than or equal to 8"),
        ({"run_mode": "distributed", "envs_per_server": True}, ""),
    ],
)
def test_envs_per_server_is_checked(changes: dict[str, Any], says: str) -> None:
    field, message = only_problem(**changes)
    assert field == "envs_per_server"
    assert says in message


def test_single_mode_runs_one_worker() -> None:
    field, message = only_problem(run_mode="single", num_workers=3)
    assert field == "num_workers"
    assert "multi-threaded or distributed" in message


def test_multi_threaded_needs_two_workers() -> None:
    field, message = only_problem(run_mode="multi-threaded", num_workers=1)
    assert field == "num_workers"
    assert ">= 2" in message


def test_unknown_run_mode_is_one_problem() -> None:
    field, message = only_problem(run_mode="fast")
    assert field == "run_mode"
    assert "'single', 'multi-threaded' or 'distributed'" in message


@pytest.mark.parametrize("servers", [0, 1])
def test_zero_or_one_parameter_server(servers: int) -> None:
    assert experiment(run_mode="distributed", num_parameter_servers=servers).num_parameter_servers == servers


@pytest.mark.parametrize("servers", [2, 8])
def test_more_parameter_servers_are_refused_with_the_reason(servers: int) -> None:
    field, message = only_problem(run_mode="distributed", num_parameter_servers=servers)
    assert field == "num_parameter_servers"
    assert "single learner" in message
    assert "0 or 1" in message
    assert "num_workers" in message


def test_execution() -> None:
    assert experiment(run_mode="multi-threaded", execution="processes").execution == "processes"
    assert only_problem(execution="threads")[0] == "execution"


# ----------------------------------------------------------------------------------------- frequencies


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("600s", Frequency(600, "s")),
        ("100e", Frequency(100, "e")),
        ("5000t", Frequency(5000, "t")),
        (600, Frequency(600, "s")),
        (600.0, Frequency(600, "s")),
        ("10m", Frequency(600, "s")),
        ("1h", Frequency(3600, "s")),
        ("120", Frequency(120, "s")),
    ],
)
def test_saver_frequency_forms(raw: Any, expected: Frequency) -> None:
    assert experiment(saver_frequency=raw).saver_frequency == expected


def test_frequencies_can_be_off() -> None:
    spec = experiment(saver_frequency=None, summary_frequency=None)
    assert spec.saver_frequency is None
    assert spec.summary_frequency is None


@pytest.mark.parametrize("raw", ["120s", "1000t", 60])
def test_summary_frequency_in_seconds_or_timesteps(raw: Any) -> None:
    assert experiment(summary_frequency=raw).summary_frequency is not None


def test_summary_frequency_refuses_episodes() -> None:
    field, message = only_problem(summary_frequency="100e")
    assert field == "summary_frequency"
    assert "cannot count episodes" in message
    assert "'120s'" in message


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("abc", "'100e'"),
        ("10x", "'5000t'"),
        (0, "whole number >= 1"),
        ("1.5s", "whole number >= 1"),
        (True, "number of seconds"),
        ([600], "number of seconds"),
    ],
)
def test_bad_frequencies(raw: Any, says: str) -> None:
    field, message = only_problem(saver_frequency=raw)
    assert field == "saver_frequency"
    assert says in message


# ------------------------------------------------------------------------------------------- evaluation


def test_evaluation() -> None:
    spec = experiment(evaluation={"every": "50e", "episodes": 5})
    assert spec.evaluation == EvaluationSpec(every=Frequency(50, "e"), episodes=5)
    assert experiment(evaluation={"every": "10000t"}).evaluation == EvaluationSpec(every=Frequency(10000, "t"))


@pytest.mark.parametrize(
    ("evaluation", "at", "says"),
    [
        ({"every": "10s"}, "evaluation.every", "not seconds"),
        ({"every": 600}, "evaluation.every", "not seconds"),
        ({"episodes": 3}, "evaluation.every", "required"),
        ({"every": "10e", "episodes": 0}, "evaluation.episodes", "greater than or equal to 1"),
        ({"every": "10e", "deterministic": True}, "evaluation.deterministic", "unknown field"),
        ("10e", "evaluation", "valid dictionary"),
    ],
)
def test_bad_evaluation(evaluation: Any, at: str, says: str) -> None:
    field, message = only_problem(evaluation=evaluation)
    assert field == at
    assert says in message


# ------------------------------------------------------------------------------------------- resources


def test_resources_per_role() -> None:
    spec = experiment(
        run_mode="distributed",
        resources={"learner": {"cpu": "4", "memory": "16Gi", "gpus": 1}, "env_server": {"cpu": "500m"}},
    )
    assert spec.resources.learner == Resources(cpu="4", memory="16Gi", gpus=1)
    assert spec.resources.env_server == Resources(cpu="500m")


def test_numeric_quantities_from_yaml_become_strings() -> None:
    spec = experiment(resources={"learner": {"cpu": 2, "memory": "512Mi"}, "env_server": {"cpu": 0.5}})
    assert spec.resources.learner.cpu == "2"
    assert spec.resources.env_server.cpu == "0.5"


@pytest.mark.parametrize(
    ("resources", "at", "says"),
    [
        ({"learner": {"memory": "4GB"}}, "resources.learner.memory", "not a Kubernetes quantity"),
        ({"learner": {"cpu": "two"}}, "resources.learner.cpu", "'500m'"),
        ({"learner": {"gpus": -1}}, "resources.learner.gpus", "greater than or equal to 0"),
        ({"learner": {"gpus": 17}}, "resources.learner.gpus", "less than or equal to 16"),
        ({"env_server": {"gpus": 1}}, "resources.env_server.gpus", "environment servers run on CPU"),
        ({"learner": {"cpus": "2"}}, "resources.learner.cpus", "did you mean 'cpu'?"),
        ({"trainer": {"cpu": "2"}}, "resources.trainer", "unknown field"),
    ],
)
def test_bad_resources(resources: dict[str, Any], at: str, says: str) -> None:
    field, message = only_problem(resources=resources)
    assert field == at
    assert says in message


# ---------------------------------------------------------------------------------------- results, image


@pytest.mark.parametrize("results", ["gs://my-bucket", "gs://my-bucket/rlcloud/runs", "./results", "/data/rl"])
def test_results_locations(results: str) -> None:
    assert experiment(results=results).results == results


@pytest.mark.parametrize("results", ["gs://A", "gs://", "gs://my bucket/x", "gs:/my-bucket", "gs://b"])
def test_bad_gcs_results(results: str) -> None:
    field, message = only_problem(results=results)
    assert field == "results"
    assert "gs://BUCKET/PREFIX" in message


def test_empty_results_is_refused() -> None:
    assert only_problem(results="  ")[0] == "results"


def test_image() -> None:
    assert experiment(image="ghcr.io/me/rl:1").image == "ghcr.io/me/rl:1"


# --------------------------------------------------------------------------------------------- cluster


def test_cluster_by_name_stays_a_name() -> None:
    assert experiment(cluster="shared-gpus").cluster == "shared-gpus"


def test_inline_cluster() -> None:
    spec = experiment(cluster={"name": "t4", "gpu_type": "nvidia-tesla-t4", "num_nodes": 2})
    assert isinstance(spec.cluster, ClusterSpec)
    assert spec.cluster.gpus_per_node == 1
    assert spec.cluster.num_nodes == 2


@pytest.mark.parametrize(
    ("cluster", "at", "says"),
    [
        ({"name": "t4", "gpu_type": "nvidia-tesla-k80"}, "cluster.gpu_type", "2024-05-01"),
        ({"name": "t4", "num_nodes": 0}, "cluster.num_nodes", "greater than or equal to 1"),
        ({"name": "t4", "cpus_per_node": 2, "memory_per_node": 64}, "cluster.memory_per_node", "1.8-13 GB"),
        ({"name": "t4", "nodes": 2}, "cluster.nodes", "unknown field"),
        ({"num_nodes": 2}, "cluster.name", "required"),
        (5, "cluster", "a mapping or a string"),
    ],
)
def test_bad_inline_cluster(cluster: Any, at: str, says: str) -> None:
    field, message = only_problem(cluster=cluster)
    assert field == at
    assert says in message


# --------------------------------------------------------------------------------------- unknown fields


def test_unknown_field_names_the_close_one() -> None:
    field, message = only_problem(num_worker=2)
    assert field == "num_worker"
    assert "did you mean 'num_workers'?" in message


def test_spec_is_frozen_and_replace_validates() -> None:
    spec = experiment()
    with pytest.raises(ValidationError):
        spec.episodes = 5  # type: ignore[misc]
    assert spec.replace(episodes=5).episodes == 5
    assert spec.replace(**{"resources.learner.cpu": "2"}).resources.learner.cpu == "2"
    assert spec_error(lambda: spec.replace(num_parameter_servers=2)).fields == ["num_parameter_servers"]


@pytest.mark.parametrize(
    ("changes", "at", "says"),
    [
        ({"Seed": 3}, "Seed", "did you mean 'seed'?"),
        ({"resources": {"Learner": {"cpu": "2"}}}, "resources.Learner", "valid fields here: env_server, learner"),
        ({"cluster": {"name": "c", "GPU": 1}}, "cluster.GPU", "valid fields here: autodown, autoscaling,"),
        ({"cluster": {"name": "c", "labels": {"Team": 5}}}, "cluster.labels.Team", "valid string"),
        ({"evaluation": {"Every": "5e"}}, "evaluation.Every", "did you mean 'every'?"),
    ],
)
def test_capitalised_keys_keep_their_place_in_the_path(changes: dict[str, Any], at: str, says: str) -> None:
    error = spec_error(lambda: experiment(**changes))
    assert at in error.fields
    assert says in str(error)


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"agent": {"type": "ppo", "batch_size": float("inf")}}, "agent.batch_size is inf"),
        (
            {"agent": {"type": "ppo", "optimizer": {"learning_rate": float("nan")}}},
            "agent.optimizer.learning_rate is nan",
        ),
        (
            {"network": [{"type": "dense", "size": 64, "l2_regularization": float("-inf")}]},
            "network[0].l2_regularization",
        ),
        (
            {"environment": {"type": "gym", "level": "CartPole-v1", "reward_scale": float("nan")}},
            "environment.reward_scale",
        ),
    ],
)
def test_numbers_that_cannot_train_are_refused_naming_their_place(changes: dict[str, Any], says: str) -> None:
    # YAML's .inf and .nan: refused here, not minutes later inside a pod
    field, message = only_problem(**changes)
    assert field == says.split(".")[0].split("[")[0]
    assert says in message and "finite" in message, message


def test_environment_bounds_may_be_infinite() -> None:
    env = {"type": "gym", "level": "CartPole-v1", "states": {"type": "float", "shape": 4, "min_value": float("-inf")}}
    assert experiment(environment=env).environment["states"]["min_value"] == float("-inf")
