"""tensorforce-client's files (tests/specs/legacy/, written from its documented format) keep their meaning.

Each mapped key is reported once, as a LegacySpecWarning saying what it became. The larger corpus is in
tests/specs/tfc/ (test_tfc_corpus.py).
"""

from __future__ import annotations

import shutil
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rlcloud.specs import ClusterSpec, ExperimentSpec, Frequency, LegacySpecWarning
from rlcloud.specs.legacy import convert_legacy_agent, convert_legacy_environment, legacy_gym_id
from tests.support.specs import minimal_experiment, spec_error

LEGACY = Path(__file__).parent / "legacy"


def load_with_warnings(path: Path, **overrides: Any) -> tuple[ExperimentSpec, list[str]]:
    """Load a legacy experiment; return it and the LegacySpecWarning messages, which must be the only warnings."""
    with pytest.warns(LegacySpecWarning) as record:
        spec = ExperimentSpec.from_file(path, **overrides)
    assert {w.category for w in record} == {LegacySpecWarning}
    return spec, [str(w.message) for w in record]


def assert_reported_once(messages: list[str], *fragments: str) -> None:
    """Each fragment appears in exactly one message, and no message is repeated."""
    repeated = [m for m, n in Counter(messages).items() if n > 1]
    assert not repeated, repeated
    for fragment in fragments:
        hits = [m for m in messages if fragment in m]
        assert len(hits) == 1, (fragment, messages)


# ------------------------------------------------------------------------------------- simple_a3c.json


def test_simple_a3c_loads_with_every_setting_mapped() -> None:
    spec, _ = load_with_warnings(LEGACY / "simple_a3c.json")
    assert spec.name == "simple-a3c"
    # ale-py still registers the v0 id, with v0's random 2-4 frame skip and sticky actions
    assert spec.environment == {"type": "gym", "level": "SpaceInvaders-v0"}
    exploration = spec.agent.pop("exploration")
    assert (exploration["type"], exploration["decay"]) == ("decaying", "polynomial")
    assert spec.agent == {
        "type": "dqn",
        "discount": 0.97,
        "batch_size": 64,
        "update_frequency": 4,
        "memory": 10000,
        "learning_rate": 0.001,
        "state_preprocessing": [
            {"type": "image", "height": 84, "width": 84, "grayscale": True},
            {"type": "linear_normalization"},
            {"type": "sequence", "length": 4},
        ],
        # 0.4's default: every 10000 timesteps; 0.6 counts updates (one per 4 timesteps)
        "target_sync_frequency": 2500,
    }
    assert isinstance(spec.network, list)
    assert [layer["type"] for layer in spec.network] == ["conv2d", "conv2d", "conv2d", "flatten", "dense"]
    assert spec.network[-1]["activation"] == "relu"  # 0.4's dense default
    assert (spec.episodes, spec.total_timesteps, spec.max_timesteps_per_episode) == (1000, 1_000_000, 1000)
    assert (spec.repeat_actions, spec.deterministic, spec.debug_logging) == (4, False, True)
    assert (spec.run_mode, spec.num_workers, spec.num_parameter_servers) == ("distributed", 3, 1)
    assert spec.saver_frequency == Frequency(600, "s")
    assert spec.summary_frequency == Frequency(600, "s")
    assert isinstance(spec.cluster, ClusterSpec)
    assert spec.cluster.name == "small-cluster"
    assert spec.cluster.gpu_type is None
    assert spec.cluster.effective_machine_type == "custom-2-8192"
    assert (spec.cluster.num_nodes, spec.cluster.disk_size, spec.cluster.location) == (3, 100, "us-central1-a")


def test_simple_a3c_reports_each_mapped_key_once_saying_what_it_became() -> None:
    _, messages = load_with_warnings(LEGACY / "simple_a3c.json")
    assert_reported_once(
        messages,
        "'timesteps' became total_timesteps",
        "'simple_a3c' became 'simple-a3c'",
        "gym_id: SpaceInvaders-v0} became {type: gym, level: SpaceInvaders-v0}",
        "agent.type 'dqn_agent' became 'dqn'",
        "agent.update_mode",
        "became memory: 10000",
        "became learning_rate: 0.001",
        "agent.actions_exploration",
        "agent.states_preprocessing became state_preprocessing",
        "{'type': 'normalize'} became linear_normalization",
        "agent.target_sync_frequency: 0.4's default 10000 timesteps became 2500 updates",
        "network[4] (dense): activation relu written out",
        "'small_cluster' became 'small-cluster'",
    )
    assert len(messages) == 13
    # numeric frequencies and the file references are valid as they are: nothing to report
    assert not any("frequency" in m and "became" not in m for m in messages)


def test_legacy_files_load_from_anywhere(workdir: Path) -> None:
    # references resolve next to the spec file, not the current directory
    copy = workdir / "old-project" / "experiments"
    shutil.copytree(LEGACY, copy)
    spec, _ = load_with_warnings(copy / "simple_a3c.json")
    assert spec.environment["level"] == "SpaceInvaders-v0"


def test_legacy_spec_round_trips_without_legacy_warnings(tmp_path: Path) -> None:
    spec, _ = load_with_warnings(LEGACY / "simple_a3c.json")
    path = tmp_path / "converted.yaml"
    path.write_text(spec.to_yaml())
    with warnings.catch_warnings():
        warnings.simplefilter("error", LegacySpecWarning)  # the converted spec is plain rlcloud
        assert ExperimentSpec.from_file(path) == spec


def test_legacy_overrides_apply_after_mapping() -> None:
    spec, _ = load_with_warnings(LEGACY / "simple_a3c.json", num_workers=6, **{"agent.batch_size": 32})
    assert spec.num_workers == 6
    assert spec.agent["batch_size"] == 32
    assert spec.agent["memory"] == 10000


# ------------------------------------------------------------------------------------------ clusters


def test_cpu_cluster_with_null_gpu_type() -> None:
    with pytest.warns(LegacySpecWarning, match="'small-cluster'"):
        spec = ClusterSpec.from_file(LEGACY / "small_cluster.json")
    assert spec.gpu_type is None
    assert spec.gpus_per_node == 0
    assert spec.effective_machine_type == "custom-2-8192"


def test_k80_cluster_is_refused_clearly() -> None:
    with pytest.warns(LegacySpecWarning):
        error = spec_error(lambda: ClusterSpec.from_file(LEGACY / "single_node_gpu_cluster.json"))
    assert error.fields == ["gpu_type"]
    message = str(error)
    assert "single_node_gpu_cluster.json" in message
    assert "end of support on 2024-05-01" in message
    assert "nvidia-tesla-t4" in message


def test_k80_cluster_loads_once_the_gpu_type_is_current() -> None:
    with pytest.warns(LegacySpecWarning):
        spec = ClusterSpec.from_file(LEGACY / "single_node_gpu_cluster.json", gpu_type="nvidia-tesla-t4")
    assert spec.name == "single-node-gpu-cluster"
    assert (spec.gpus_per_node, spec.disk_size, spec.location) == (1, 200, "europe-west1-d")
    assert spec.effective_machine_type == "custom-4-16384"
    assert not spec.is_regional


def test_experiment_on_the_k80_cluster_names_the_nested_field() -> None:
    with pytest.warns(LegacySpecWarning):
        error = spec_error(
            lambda: ExperimentSpec.from_file(LEGACY / "simple_a3c.json", cluster="single_node_gpu_cluster.json")
        )
    assert error.fields == ["cluster.gpu_type"]
    assert "2024-05-01" in str(error)


# ---------------------------------------------------------------------------------- ppo_cartpole.json


def test_ppo_cartpole_maps_renamed_agent_keys_and_drops_the_rest_loudly() -> None:
    spec, messages = load_with_warnings(LEGACY / "ppo_cartpole.json")
    assert (spec.run_mode, spec.num_workers) == ("multi-threaded", 4)
    assert spec.environment == {"type": "gym", "level": "CartPole-v0"}
    assert spec.network == [
        {"type": "dense", "size": 32, "activation": "tanh"},
        {"type": "dense", "size": 32, "activation": "tanh"},
    ]
    assert spec.saver_frequency == Frequency(300, "s")
    assert spec.summary_frequency == Frequency(60, "s")
    assert spec.agent == {
        "type": "ppo",
        "subsampling_fraction": 0.1,
        "discount": 0.99,
        "entropy_regularization": 0.01,
        "likelihood_ratio_clipping": 0.2,
        # 0.4's mlp baseline: dense layers with 0.4's default activation, ReLU
        "baseline": [
            {"type": "dense", "size": 32, "activation": "relu"},
            {"type": "dense", "size": 32, "activation": "relu"},
        ],
        # 0.6 still has the multi_step optimizer with these arguments: kept as it was
        "baseline_optimizer": {
            "type": "multi_step",
            "optimizer": {"type": "adam", "learning_rate": 0.001},
            "num_steps": 5,
        },
        "batch_size": 10,
        "update_frequency": 10,
        "learning_rate": 0.001,
        "multi_step": 50,
    }
    assert_reported_once(
        messages,
        "'k8s_config'",
        "'status'",
        "environment.monitor",
        "agent.type 'ppo_agent' became 'ppo'",
        "agent.optimization_steps became agent.multi_step",
        "agent.baseline {'type': 'mlp', 'sizes': [32, 32]} became the layer list",
        "agent.memory",
        "agent.step_optimizer",
        "agent.saver_spec was dropped",
        "agent.baseline_mode 'states' was dropped",
    )


# -------------------------------------------------------------------------------- environments, agents


@pytest.mark.parametrize(
    ("gym_id", "level", "settings"),
    [
        # ale-py registers these exact ids, with their own frame skipping and sticky actions: they stay
        ("SpaceInvaders-v0", "SpaceInvaders-v0", {}),
        ("Pong-v0", "Pong-v0", {}),
        ("BreakoutNoFrameskip-v4", "BreakoutNoFrameskip-v4", {}),
        ("MsPacmanNoFrameskip-v0", "MsPacmanNoFrameskip-v0", {}),
        # the Deterministic ids are gone: v5 with their fixed 4-frame skip and their sticky actions
        ("PongDeterministic-v4", "ALE/Pong-v5", {"frameskip": 4, "repeat_action_probability": 0.0}),
        ("SpaceInvadersDeterministic-v0", "ALE/SpaceInvaders-v5", {"frameskip": 4, "repeat_action_probability": 0.25}),
        ("CartPole-v0", "CartPole-v0", {}),
        ("Pendulum-v0", "Pendulum-v0", {}),
    ],
)
def test_gym_ids_map_to_gymnasium(gym_id: str, level: str, settings: dict[str, Any]) -> None:
    legacy_env = {"type": "tensorforce.contrib.openai_gym.OpenAIGym", "gym_id": gym_id}
    with pytest.warns(LegacySpecWarning, match=f"became {{type: gym, level: {level}"):
        env = convert_legacy_environment(legacy_env)
    assert env == {"type": "gym", "level": level, **settings}
    assert legacy_gym_id(gym_id) == level


def test_user_settings_win_over_the_kept_atari_behaviour() -> None:
    legacy_env = {"type": "openai_gym", "gym_id": "BreakoutDeterministic-v4", "frameskip": 2}
    with pytest.warns(LegacySpecWarning):
        env = convert_legacy_environment(legacy_env)
    assert env["frameskip"] == 2


def test_modern_environments_pass_untouched() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", LegacySpecWarning)
        for env in ({"type": "gym", "level": "ALE/Pong-v5"}, {"type": "gym", "level": "CartPole-v1"}):
            assert convert_legacy_environment(env) == env
            assert ExperimentSpec.from_dict(minimal_experiment(environment=env)).environment == env


def test_modern_agents_pass_untouched() -> None:
    agent = {"type": "ppo", "batch_size": 10, "baseline": [{"type": "dense", "size": 16}], "multi_step": 5}
    with warnings.catch_warnings():
        warnings.simplefilter("error", LegacySpecWarning)
        assert convert_legacy_agent(agent) == agent


@pytest.mark.parametrize(
    ("agent", "expected", "says"),
    [
        (
            {"type": "ddqn_agent", "memory": 100, "batch_size": 8},
            # 0.4's target sync every 10000 timesteps, in 0.6's updates (one per 0.25 * 8 timesteps)
            {"type": "double_dqn", "memory": 100, "batch_size": 8, "target_sync_frequency": 5000},
            "became 'double_dqn'",
        ),
        ({"type": "dqn", "estimate_terminal": True}, {"type": "dqn", "predict_terminal_values": True}, "renamed"),
        ({"type": "ac", "critic_network": "auto"}, {"type": "ac", "critic": "auto"}, "agent.critic_network"),
        (
            {"type": "ppo_agent", "optimizer": {"type": "evolutionary", "learning_rate": 0.1}},
            {"type": "ppo"},
            "no certain Tensorforce 0.6 equivalent and was dropped",
        ),
        (
            {"type": "dqn", "update_frequency": 4, "actions_exploration": {"type": "ornstein_uhlenbeck"}},
            {"type": "dqn", "update_frequency": 4, "target_sync_frequency": 2500},
            "no certain 0.6 equivalent",
        ),
        (
            {"type": "ppo", "update_mode": {"unit": "timesteps", "batch_size": 1000, "frequency": 1000}},
            {"type": "ppo"},
            "counts batch_size in episodes, not timesteps",
        ),
        (
            {"type": "dqn", "update_mode": {"unit": "timesteps", "batch_size": 32, "frequency": 4}},
            {"type": "dqn", "batch_size": 32, "update_frequency": 4, "target_sync_frequency": 2500},
            "counted in timesteps",
        ),
    ],
)
def test_agent_mappings(agent: dict[str, Any], expected: dict[str, Any], says: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LegacySpecWarning)
        assert convert_legacy_agent(agent) == expected
    assert any(says in str(w.message) for w in caught), [str(w.message) for w in caught]


@pytest.mark.parametrize(
    ("agent", "field", "says"),
    [
        ({"type": "naf_agent"}, "agent.type", "NAF"),
        ({"type": "foo_agent"}, "agent.type", "no Tensorforce 0.6 equivalent"),
        (
            {"type": "vpg_agent", "baseline_mode": "states", "baseline": {"type": "mlp", "sizes": "big"}},
            "agent.baseline.sizes",
            "integer sizes",
        ),
        ({"type": "ppo_agent", "gae_lambda": 0.95}, "agent.gae_lambda", "no GAE"),
        (
            {"type": "ppo_agent", "baseline_mode": "network", "baseline": {"type": "mlp", "sizes": [8]}},
            "agent.baseline_mode",
            "only 'states'",
        ),
        (
            {"type": "vpg_agent", "baseline_mode": "states", "baseline": {"type": "cnn"}},
            "agent.baseline.type",
            "layer list",
        ),
    ],
)
def test_agents_without_a_certain_mapping_are_refused(agent: dict[str, Any], field: str, says: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LegacySpecWarning)
        error = spec_error(lambda: convert_legacy_agent(agent))
    assert error.fields == [field]
    assert says in str(error)


def test_bad_legacy_count_is_a_spec_error() -> None:
    agent = {"type": "dqn_agent", "actions_exploration": {"type": "epsilon_decay", "timesteps": "forever"}}
    data = minimal_experiment(agent=agent)
    with pytest.warns(LegacySpecWarning):
        error = spec_error(lambda: ExperimentSpec.from_dict(data))
    assert error.fields == ["agent.actions_exploration.timesteps"]
    assert "whole number" in str(error)


def test_hostile_exploration_numbers_are_spec_errors() -> None:
    agent = {"type": "dqn_agent", "actions_exploration": {"type": "epsilon_decay", "half_lives": "ten"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LegacySpecWarning)
        error = spec_error(lambda: convert_legacy_agent(agent))
    assert error.fields == ["agent.actions_exploration.half_lives"]


def test_float_target_sync_frequency_is_converted() -> None:
    agent = {"type": "dqn_agent", "batch_size": 32, "update_frequency": 4, "target_sync_frequency": 1e4}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LegacySpecWarning)
        assert convert_legacy_agent(agent)["target_sync_frequency"] == 2500
