"""Every file of two corpora keeps its meaning or is refused/warned by name (issue 14).

tests/specs/tfc/ holds files in tensorforce-client's format (Tensorforce 0.4-era, some 0.3), written for
these tests to exercise what tfc's own configs use: 9 agents, 6 networks, 4 environments, 4 experiments,
2 clusters. tests/specs/tf06/ holds Tensorforce 0.6 files in the style of 0.6.5's benchmark configs
(``"agent": "ppo"`` spelling, ``tensorforce`` agents with their own optimizer), which must pass unchanged.

The fast tests check the resolved specs and ``spec validate``; the ``training``-marked ones build every
valid file's agent with Tensorforce and run 100 timesteps for some.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from rlcloud.specs import ExperimentSpec, LegacySpecWarning
from rlcloud.specs.legacy import convert_legacy_agent, epsilon_decay_schedule
from rlcloud.validation import validate_file
from tests.support.specs import minimal_experiment, spec_error

HERE = Path(__file__).parent
TFC = HERE / "tfc"
TF06 = HERE / "tf06"

# Every corpus file: None when it is valid, else the fields its refusal names.
EXPECTED: dict[str, list[str] | None] = {
    "tfc/agents/ddqn_anneal.json": None,
    "tfc/agents/dqn_pixels.json": None,
    "tfc/agents/dueling_0_3.json": None,
    "tfc/agents/naf_continuous.json": ["type"],
    "tfc/agents/ppo_baseline.json": None,
    "tfc/agents/ppo_own_network.json": None,
    "tfc/agents/trpo_linesearch.json": None,
    "tfc/agents/vpg_0_3_batch.json": ["batch_size"],
    "tfc/agents/vpg_custom_baseline.json": None,
    "tfc/clusters/cpu_no_location.json": None,
    "tfc/clusters/p100_zoned.json": None,
    "tfc/environments/breakout_deterministic.json": None,
    "tfc/environments/cartpole.json": None,
    "tfc/environments/space_invaders_sidecar.json": None,
    "tfc/environments/ue4_maze.json": ["type"],
    "tfc/experiments/bare.json": None,
    "tfc/experiments/cartpole_ppo_threads.json": None,
    "tfc/experiments/invaders_dqn.json": None,
    "tfc/experiments/network_precedence.json": None,
    "tfc/networks/cnn_valid_pool.json": None,
    "tfc/networks/dueling_head.json": ["[1].type"],
    "tfc/networks/embedding_lookup.json": None,
    "tfc/networks/lstm_internal.json": None,
    "tfc/networks/mlp_default_relu.json": None,
    "tfc/networks/nonlinearity_dropout.json": None,
    "tf06/ac.json": None,
    "tf06/dqn.json": None,
    "tf06/dueling_dqn.json": None,
    "tf06/experiment.yaml": None,
    "tf06/experiment_bad_arg.yaml": ["agent.likelihood_ratio_clipping"],
    "tf06/experiment_bad_gym.yaml": ["environment.level"],
    "tf06/experiment_bad_layer.yaml": ["network[1].type"],
    "tf06/network_tanh.json": None,
    "tf06/ppo.json": None,
    "tf06/tensorforce.json": None,
    "tf06/trpo.json": None,
    "tf06/vpg.json": None,
}
VALID = sorted(name for name, fields in EXPECTED.items() if fields is None)


def corpus_files() -> list[str]:
    """Every file of both corpora, relative to tests/specs/."""
    return sorted(str(p.relative_to(HERE)) for d in (TFC, TF06) for p in d.rglob("*") if p.is_file())


def load(path: Path, **overrides: Any) -> tuple[ExperimentSpec, list[str]]:
    """A corpus experiment and its LegacySpecWarning messages."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LegacySpecWarning)
        spec = ExperimentSpec.from_file(path, **overrides)
    return spec, [str(w.message) for w in caught if issubclass(w.category, LegacySpecWarning)]


def the(messages: list[str], fragment: str) -> str:
    """The one message holding ``fragment``."""
    hits = [m for m in messages if fragment in m]
    assert len(hits) == 1, (fragment, messages)
    return hits[0]


# ------------------------------------------------------------------------------- every file, validated


def test_the_expectations_cover_every_corpus_file() -> None:
    assert corpus_files() == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_file_validates_or_is_refused_by_name(name: str) -> None:
    report = validate_file(HERE / name)
    expected = EXPECTED[name]
    if expected is None:
        assert report.ok, [str(p) for p in report.problems]
        assert "None" not in report.summary  # "agent None" was printed for `agent: ppo` spellings
    else:
        assert [p.field for p in report.problems] == expected, [str(p) for p in report.problems]


# ------------------------------------------------------------------------------------ tfc experiments


def test_invaders_dqn_keeps_its_meaning() -> None:
    spec, messages = load(TFC / "experiments" / "invaders_dqn.json")
    # tfc's defaults for what the file leaves out, each reported
    assert (spec.run_mode, spec.num_workers, spec.num_parameter_servers) == ("distributed", 3, 1)
    assert (spec.episodes, spec.total_timesteps, spec.max_timesteps_per_episode) == (10000, 2_000_000, 1000)
    for key in ("run_mode", "num_workers", "num_parameter_servers", "episodes", "max_timesteps_per_episode"):
        assert "tensorforce-client's default" in the(messages, f"{key} was not set")
    # the exact v0 game (frame skip 2-4, sticky actions), no sidecar keys
    assert spec.environment == {"type": "gym", "level": "SpaceInvaders-v0"}
    the(messages, "environment.remote (6025) was dropped")
    the(messages, "environment.image ('tensorforce/space-invaders:latest') was dropped")
    # the 0.4 network, in 0.6 spelling with 0.4's defaults written out
    assert spec.network == [
        {"type": "conv2d", "size": 16, "window": 5, "stride": 2, "padding": "valid", "activation": "relu"},
        {"type": "pool2d", "window": 2, "stride": 2, "padding": "same", "reduction": "max"},
        {"type": "conv2d", "size": 32, "window": 3, "stride": 1, "padding": "valid", "activation": "relu"},
        {"type": "flatten"},
        {"type": "dense", "size": 128, "activation": "relu"},
    ]
    agent = dict(spec.agent)
    assert agent.pop("exploration") == epsilon_decay_schedule(1.0, 0.1, 1_000_000)
    assert agent == {
        "type": "dqn",
        "batch_size": 32,
        "update_frequency": 4,
        "memory": 50000,
        "learning_rate": 2.5e-4,
        "discount": 0.99,
        "huber_loss": 1.0,
        "state_preprocessing": [
            {"type": "image", "height": 42, "width": 42, "grayscale": True},
            {"type": "sequence", "length": 4},
        ],
        "target_sync_frequency": 2000,  # 8000 timesteps, one update per 4 timesteps
    }
    the(messages, "agent.saver_spec was dropped")
    the(messages, "agent.execution was dropped")
    assert spec.cluster is not None and not isinstance(spec.cluster, str)
    assert spec.cluster.name == "cpu-pool"
    assert "gcloud's configured zone" in the(messages, "cluster.location was not set")


def test_cartpole_ppo_threads_keeps_its_meaning() -> None:
    spec, messages = load(TFC / "experiments" / "cartpole_ppo_threads.json")
    assert (spec.run_mode, spec.num_workers, spec.num_parameter_servers) == ("multi-threaded", 2, 0)
    assert spec.total_timesteps == 1_000_000  # tfc's default
    assert spec.network == [
        {"type": "dense", "size": 48, "activation": "relu"},
        {"type": "dense", "size": 48, "activation": "tanh"},
    ]
    assert spec.agent == {
        "type": "ppo",
        "batch_size": 8,
        "update_frequency": 8,
        "learning_rate": 3e-4,
        "multi_step": 20,
        "subsampling_fraction": 0.25,
        "likelihood_ratio_clipping": 0.1,
        "discount": 0.995,
        "entropy_regularization": 0.001,
        "baseline": [
            {"type": "dense", "size": 48, "activation": "relu"},
            {"type": "dense", "size": 48, "activation": "relu"},
        ],
        "baseline_optimizer": {
            "type": "multi_step",
            "optimizer": {"type": "adam", "learning_rate": 1e-3},
            "num_steps": 4,
        },
    }
    the(messages, "agent.baseline_mode 'states' was dropped")


def test_bare_experiment_gets_tensorforce_clients_defaults() -> None:
    spec, _ = load(TFC / "experiments" / "bare.json")
    assert (spec.run_mode, spec.num_workers, spec.num_parameter_servers) == ("distributed", 3, 1)
    assert (spec.episodes, spec.total_timesteps, spec.max_timesteps_per_episode) == (10000, 1_000_000, 1000)
    assert spec.agent["exploration"] == {
        "type": "linear",
        "unit": "timesteps",
        "num_steps": 20000,
        "initial_value": 0.5,
        "final_value": 0.02,
    }
    assert spec.agent["target_sync_frequency"] == 125  # 1000 timesteps, one update per 8


def test_experiment_network_wins_over_the_agents_in_a_tfc_experiment() -> None:
    spec, messages = load(TFC / "experiments" / "network_precedence.json")
    assert spec.agent["network"] == spec.network
    assert spec.network == [
        {"type": "dense", "size": 48, "activation": "relu"},
        {"type": "dense", "size": 48, "activation": "tanh"},
    ]
    the(messages, "agent.network is replaced by the experiment's network")


def test_agent_network_wins_in_an_rlcloud_spec_and_it_says_so() -> None:
    data = minimal_experiment(
        agent={"type": "ppo", "batch_size": 10, "network": [{"type": "dense", "size": 8}]},
        network=[{"type": "dense", "size": 64}],
    )
    with pytest.warns(LegacySpecWarning, match="network is ignored: the agent file has its own agent.network"):
        spec = ExperimentSpec.from_dict(data)
    assert spec.agent["network"] == [{"type": "dense", "size": 8}]


# ------------------------------------------------------------------------------------------- agents


def part(name: str) -> dict[str, Any]:
    """A corpus agent/network/environment file through the legacy conversion, via a stand-in experiment."""
    data = json.loads((TFC / name).read_text())
    kind = name.split("/")[0].rstrip("s")
    stand_in = minimal_experiment(type="experiment", run_mode="single", num_workers=1, num_parameter_servers=0)
    stand_in.update(total_timesteps=1, max_timesteps_per_episode=100, **{kind: data})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LegacySpecWarning)
        spec = ExperimentSpec.from_dict(stand_in)
    return dict(getattr(spec, kind)) if kind != "network" else {"layers": spec.network}


def test_trpo_drops_arguments_0_6_does_not_take_by_name() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LegacySpecWarning)
        agent = convert_legacy_agent(json.loads((TFC / "agents" / "trpo_linesearch.json").read_text()))
    messages = [str(w.message) for w in caught]
    assert agent == {
        "type": "trpo",
        "batch_size": 6,
        "update_frequency": 6,
        "learning_rate": 1e-2,
        "linesearch_iterations": 8,
        "discount": 0.99,
    }
    for key in ("likelihood_ratio_clipping", "cg_max_iterations", "cg_damping"):
        assert "trpo agent has no such argument" in the(messages, f"agent.{key} was dropped")


def test_0_3_batch_size_in_timesteps_is_not_taken_for_episodes() -> None:
    report = validate_file(TFC / "agents" / "vpg_0_3_batch.json")
    assert [p.field for p in report.problems] == ["batch_size"]
    note = the(report.notes, "agent.batch_size 4000 was dropped")
    assert "counted it in timesteps" in note and "counts episodes" in note
    # the user says what it is in episodes, and the file loads
    spec, _ = load(TFC / "experiments" / "bare.json", agent="../agents/vpg_0_3_batch.json", **{"agent.batch_size": 8})
    assert spec.agent["batch_size"] == 8


def test_0_3_dqn_keys_map() -> None:
    agent = part("agents/dueling_0_3.json")
    assert agent == {
        "type": "dueling_dqn",
        "batch_size": 24,
        "memory": 5000,
        "start_updating": 500,
        "update_frequency": 4,
        "learning_rate": 5e-4,
        "discount": 0.95,
        "target_sync_frequency": 100,  # 400 timesteps / 4
    }


def test_vpg_custom_baseline_and_gaussian_exploration() -> None:
    agent = part("agents/vpg_custom_baseline.json")
    assert agent["baseline"] == [{"type": "dense", "size": 24, "activation": "relu"}, {"type": "linear", "size": 1}]
    assert agent["exploration"] == 0.2
    assert agent["baseline_optimizer"] == {"type": "adam", "learning_rate": 1e-3}


def polynomial(schedule: dict[str, Any], step: int) -> float:
    """0.6's polynomial decay as TensorFlow's PolynomialDecay computes it (decay_steps = num_steps + 1)."""
    decay_steps = schedule["num_steps"] + 1
    fraction = min(step, decay_steps) / decay_steps
    initial, final = schedule["initial_value"], schedule["final_value"]
    return float((initial - final) * (1 - fraction) ** schedule["power"] + final)


def test_epsilon_decay_follows_0_4s_exponential_curve() -> None:
    # 0.4: final + (initial - final) * 0.5 ** (t / (timesteps / 10)); FACTS.md: 0.55 / 0.21 / 0.13
    schedule = epsilon_decay_schedule(1.0, 0.1, 1_000_000)
    assert (schedule["type"], schedule["decay"], schedule["unit"]) == ("decaying", "polynomial", "timesteps")
    assert [round(polynomial(schedule, t), 2) for t in (100_000, 300_000, 500_000)] == [0.55, 0.21, 0.13]
    for step in range(0, 1_000_001, 7919):
        decaying_04 = 0.9 * 0.5 ** (step / 100_000)
        assert abs((polynomial(schedule, step) - 0.1) - decaying_04) <= 0.0004  # 0.05% of initial - final
    assert abs(polynomial(schedule, 10_000_000) - 0.1) < 1e-6  # 0.4 also ended at final_epsilon
    assert polynomial(schedule, 0) == 1.0


def test_epsilon_decay_half_lives() -> None:
    schedule = epsilon_decay_schedule(0.5, 0.0, 1000, half_lives=2)
    assert round(polynomial(schedule, 500), 3) == 0.25  # one half-life of 1000 / 2 timesteps


# -------------------------------------------------------------------------------------- networks


def test_0_4_layers_become_0_6_layers_with_their_meaning() -> None:
    assert part("networks/embedding_lookup.json")["layers"] == [
        {"type": "embedding", "num_embeddings": 16, "size": 8, "bias": False, "activation": "none"},
        {"type": "flatten"},
        {"type": "dense", "size": 32, "activation": "leaky-relu"},
    ]
    assert part("networks/lstm_internal.json")["layers"] == [
        {"type": "dense", "size": 32, "activation": "relu"},
        {"type": "lstm", "size": 32, "horizon": 10, "bias": False, "activation": "none"},
    ]
    assert part("networks/nonlinearity_dropout.json")["layers"] == [
        {"type": "linear", "size": 32},
        {"type": "activation", "nonlinearity": "relu"},
        {"type": "dropout", "rate": 0.1},
        {"type": "dense", "size": 32, "activation": "relu"},
    ]


def test_a_0_6_spec_with_an_old_layer_name_is_told_the_new_one() -> None:
    report = validate_file(TF06 / "experiment_bad_layer.yaml")
    assert "0.6's lstm" in report.problems[0].message


# ----------------------------------------------------------------------------------- environments


def test_environments() -> None:
    assert part("environments/breakout_deterministic.json") == {
        "type": "gym",
        "level": "ALE/Breakout-v5",
        "frameskip": 4,
        "repeat_action_probability": 0.0,
    }
    assert part("environments/space_invaders_sidecar.json") == {"type": "gym", "level": "SpaceInvaders-v0"}
    error = spec_error(lambda: part("environments/ue4_maze.json"))
    assert error.fields == ["environment.type"]
    assert "Unreal Engine 4" in str(error)


# ------------------------------------------------------------------------------ Tensorforce 0.6 files


@pytest.mark.parametrize("name", sorted(p.name for p in TF06.glob("*.json") if p.name != "network_tanh.json"))
def test_0_6_agents_pass_through_unchanged(name: str) -> None:
    data = json.loads((TF06 / name).read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("error", LegacySpecWarning)
        assert convert_legacy_agent(data) == data
        spec = ExperimentSpec.from_dict(minimal_experiment(agent=data))
    assert spec.agent == data


def test_0_6_network_passes_through_unchanged() -> None:
    layers = json.loads((TF06 / "network_tanh.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("error", LegacySpecWarning)
        assert ExperimentSpec.from_dict(minimal_experiment(network=layers)).network == layers


# --------------------------------------------------------------------------- notes name file and key


def test_notes_name_the_file_and_line_of_the_key() -> None:
    path = TFC / "experiments" / "invaders_dqn.json"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LegacySpecWarning)
        ExperimentSpec.from_file(path)
    by_message = {str(w.message): w for w in caught}
    memory = by_message[the(list(by_message), "agent.memory")]
    agent_file = TFC / "agents" / "dqn_pixels.json"
    assert Path(memory.filename).resolve() == agent_file.resolve()
    assert '"memory"' in agent_file.read_text().splitlines()[memory.lineno - 1]
    timesteps = by_message[the(list(by_message), "'timesteps' became total_timesteps")]
    assert Path(timesteps.filename) == path
    assert '"timesteps"' in path.read_text().splitlines()[timesteps.lineno - 1]
    assert not any("rlcloud/specs" in w.filename for w in caught)


# ------------------------------------------------------------------------------- Tensorforce builds


# gymnasium says CartPole-v0 / SpaceInvaders-v0 are old versions: true, and kept on purpose (their semantics)
OLD_IDS_OK = pytest.mark.filterwarnings("ignore:.*is out of date:DeprecationWarning")


@pytest.mark.training
@OLD_IDS_OK
@pytest.mark.parametrize("name", [n for n in VALID if "/clusters/" not in n])
def test_every_valid_file_builds(name: str) -> None:
    report = validate_file(HERE / name, build=True)
    assert report.ok, [str(p) for p in report.problems]


@pytest.mark.training
@pytest.mark.parametrize("name", [n for n in VALID if "experiment" in n])
def test_a_100_timestep_run(name: str, tmp_path: Path) -> None:
    from rlcloud.runner.loop import train

    spec, _ = load(HERE / name)
    spec = spec.replace(
        run_mode="single", num_workers=1, num_parameter_servers=0, total_timesteps=100, episodes=None, cluster=None
    )
    if spec.agent.get("memory", 0) > 1000:
        # a 50,000-frame replay memory of 42x42x4 images is 1.4 GB of TensorFlow variables, checkpointed at the
        # end: minutes on a small machine, and not what this test is about
        spec = spec.replace(**{"agent.memory": 1000})
    with warnings.catch_warnings():
        # gymnasium's "out of date" notice for the kept v0 ids is a DeprecationWarning, an error under pytest
        warnings.simplefilter("ignore", DeprecationWarning)
        result = train(spec, tmp_path)
    assert result.timesteps >= 100, result


@pytest.mark.training
@OLD_IDS_OK
@pytest.mark.parametrize("name", ["dqn_visual.json", "ppo_cartpole.json", "simple_a3c.json", "mlp2_network.json"])
def test_the_older_legacy_corpus_builds(name: str) -> None:
    report = validate_file(HERE / "legacy" / name, build=True)
    assert report.ok, [str(p) for p in report.problems]


@pytest.mark.training
def test_the_epsilon_schedule_is_what_tensorflow_computes() -> None:
    from rlcloud.runner.compat import prepare_tensorflow

    tf = prepare_tensorflow()
    schedule = epsilon_decay_schedule(1.0, 0.1, 1_000_000)
    decay = tf.keras.optimizers.schedules.PolynomialDecay(
        1.0, schedule["num_steps"] + 1, end_learning_rate=0.1, power=schedule["power"]
    )
    assert [round(float(decay(t)), 2) for t in (100_000, 300_000, 500_000)] == [0.55, 0.21, 0.13]
