"""The agent-argument table in rlcloud.specs.tf06 is Tensorforce 0.6.5's, and start/validate use it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlcloud.specs.tf06 import AGENT_ARGUMENTS, agent_argument_problems

EXAMPLE = Path(__file__).parents[2] / "examples" / "cartpole_ppo.yaml"


@pytest.mark.training  # imports tensorforce, hence TensorFlow (~10 s)
def test_the_table_is_what_inspect_signature_reads_from_the_installed_tensorforce() -> None:
    import importlib.util

    if importlib.util.find_spec("tensorforce") is None:  # not importorskip: compat must patch before the import
        pytest.skip("tensorforce is not installed (the runner extra)")
    from rlcloud.runner.tf06_tables import generate_agent_arguments

    assert generate_agent_arguments() == AGENT_ARGUMENTS, "regenerate: uv run --frozen python -m rlcloud.specs.tf06"


def test_known_arguments() -> None:
    required, optional = AGENT_ARGUMENTS["trpo"]
    assert "batch_size" in required
    assert "linesearch_iterations" in optional
    assert "likelihood_ratio_clipping" not in optional  # PPO's, not TRPO's, in 0.6
    assert "likelihood_ratio_clipping" in AGENT_ARGUMENTS["ppo"][1]


@pytest.mark.parametrize(
    ("agent", "problems"),
    [
        ({"type": "ppo", "batch_size": 10}, []),
        ({"agent": "ppo", "batch_size": 10, "baseline": "auto"}, []),
        ({"type": "trpo", "batch_size": 4, "likelihood_ratio_clipping": 0.2}, ["agent.likelihood_ratio_clipping"]),
        ({"type": "vpg"}, ["agent.batch_size"]),
        ({"type": "dqn", "batch_size": 32}, ["agent.memory"]),
        ({"type": "ppo", "batch_size": 1, "learning_rat": 0.1}, ["agent.learning_rat"]),
        ({"type": "pkg.module:Agent", "anything": 1}, []),
        ({"type": "ppo", "batch_size": 1, "states": {}}, []),  # the runner's own keys are reported elsewhere
        # learning rates: Tensorforce 0.6 takes a float >= 0 (or a schedule); an integer fails inside it with an
        # AttributeError (its TensorforceError.dtype does not exist), a negative one when the agent is built
        ({"type": "ppo", "batch_size": 1, "learning_rate": 1e-3}, []),
        ({"type": "ppo", "batch_size": 1, "learning_rate": 0.0}, []),
        (
            {
                "type": "ppo",
                "batch_size": 1,
                "learning_rate": {
                    "type": "exponential",
                    "unit": "updates",
                    "num_steps": 100,
                    "initial_value": 1e-3,
                    "decay_rate": 0.5,
                },
            },
            [],
        ),
        ({"type": "ppo", "batch_size": 1, "learning_rate": 1}, ["agent.learning_rate"]),
        ({"type": "ppo", "batch_size": 1, "learning_rate": -1e-3}, ["agent.learning_rate"]),
        ({"type": "ppo", "batch_size": 1, "learning_rate": True}, ["agent.learning_rate"]),
        (
            {"type": "ppo", "batch_size": 1, "baseline_optimizer": {"optimizer": "adam", "learning_rate": 1}},
            ["agent.baseline_optimizer.learning_rate"],
        ),
        ({"type": "dqn", "memory": 100, "batch_size": 1, "learning_rate": -0.5}, ["agent.learning_rate"]),
    ],
)
def test_agent_argument_problems(agent: dict[str, object], problems: list[str]) -> None:
    found = agent_argument_problems(agent)
    assert [p.field for p in found] == problems
    if "agent.learning_rat" in problems:
        assert "did you mean 'learning_rate'" in found[0].message
    if "agent.learning_rate" in problems:
        assert "a float >= 0 such as 1.0e-3" in found[0].message


def test_spec_validate_refuses_an_integer_learning_rate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rlcloud.cli import main

    spec = tmp_path / "lr.yaml"
    spec.write_text(EXAMPLE.read_text().replace("learning_rate: 1.0e-3\n  baseline:", "learning_rate: 1\n  baseline:"))
    assert main(["spec", "validate", str(spec)]) == 2
    out = capsys.readouterr().err
    assert "agent.learning_rate: Tensorforce 0.6 takes a float >= 0 such as 1.0e-3" in out and "(got 1)" in out
    assert main(["experiment", "run", str(EXAMPLE), "--set", "agent.learning_rate=1", "--results", str(tmp_path)]) == 2
    assert "agent.learning_rate" in capsys.readouterr().err and not list(tmp_path.glob("cartpole-ppo"))


@pytest.mark.training  # imports tensorforce, hence TensorFlow (~10 s)
def test_the_layer_table_is_what_inspect_signature_reads() -> None:
    import importlib.util

    if importlib.util.find_spec("tensorforce") is None:
        pytest.skip("tensorforce is not installed (the runner extra)")
    from rlcloud.runner.tf06_tables import generate_layer_arguments
    from rlcloud.specs.tf06 import LAYER_ARGUMENTS

    assert generate_layer_arguments() == LAYER_ARGUMENTS, "regenerate: uv run --frozen python -m rlcloud.specs.tf06"


@pytest.mark.parametrize(
    ("layer", "problems"),
    [
        ({"type": "dense", "size": 8}, []),
        ({"type": "conv2d", "size": 8, "padding": "VALID"}, ["n[0].padding"]),
        ({"type": "embedding", "indices": 10, "size": 8}, ["n[0].indices"]),
        ({"type": "pool2d", "pooling_type": "max"}, ["n[0].pooling_type", "n[0].reduction"]),
        ({"type": "lstm", "size": 8}, ["n[0].horizon"]),
        ({"type": "input_lstm", "size": 8, "recurrent_dropout": 0.1}, []),  # passed on to the Keras cell
        ({"type": "pkg.module:Layer", "anything": 1}, []),
    ],
)
def test_layer_argument_problems(layer: dict[str, object], problems: list[str]) -> None:
    from rlcloud.specs.tf06 import layer_argument_problems

    assert [p.field for p in layer_argument_problems(layer, "n[0]")] == problems


# ------------------------------------------------------- argument types as Tensorforce documents them (issue 37)


@pytest.mark.training  # imports tensorforce, hence TensorFlow (~10 s)
def test_the_type_table_is_what_the_installed_tensorforce_documents() -> None:
    import importlib.util

    if importlib.util.find_spec("tensorforce") is None:
        pytest.skip("tensorforce is not installed (the runner extra)")
    from rlcloud.runner.tf06_tables import generate_argument_types
    from rlcloud.specs.tf06 import ARGUMENT_TYPES

    assert generate_argument_types() == ARGUMENT_TYPES, (
        "regenerate: uv run --frozen python -m rlcloud.runner.tf06_tables"
    )


def test_documented_types_are_read_from_a_docstring() -> None:
    from rlcloud.runner.tf06_tables import documented_types

    doc = """
        batch_size (<a href="../modules/parameters.html">parameter</a>, int > 0): Number of
            episodes (<span>required</span>).
        activation ('crelu' | 'elu' |
            'tanh'): Activation (<i>default</i>: tanh).
        prose (not an argument) here
    """
    assert documented_types(doc) == {"batch_size": "parameter, int > 0", "activation": "'crelu' | 'elu' | 'tanh'"}


BIG = int("9" * 4000)


@pytest.mark.parametrize(
    ("agent", "problems"),
    [
        ({"type": "ppo", "batch_size": 10, "learning_rate": "abc"}, ["agent.learning_rate"]),
        ({"type": "ppo", "batch_size": BIG}, ["agent.batch_size"]),
        ({"type": "ppo", "batch_size": 2**63}, ["agent.batch_size"]),
        ({"type": "ppo", "batch_size": 2**63 - 1}, []),
        ({"type": "ppo", "batch_size": True}, ["agent.batch_size"]),
        ({"type": "ppo", "batch_size": 10.0}, ["agent.batch_size"]),
        ({"type": "ppo", "batch_size": None}, ["agent.batch_size"]),  # `--grid agent.batch_size=,`
        ({"type": "ppo", "batch_size": "10"}, ["agent.batch_size"]),
        ({"type": "ppo", "batch_size": 0}, ["agent.batch_size"]),
        ({"type": "ppo", "batch_size": {"type": "linear", "unit": "timesteps", "num_steps": 10}}, []),  # a schedule
        ({"type": "ppo", "batch_size": 10, "discount": 1.5}, ["agent.discount"]),
        ({"type": "ppo", "batch_size": 10, "discount": float("nan")}, ["agent.discount"]),
        ({"type": "ppo", "batch_size": 10, "discount": 1}, []),
        ({"type": "ppo", "batch_size": 10, "update_frequency": "never"}, []),
        ({"type": "ppo", "batch_size": 10, "update_frequency": "sometimes"}, ["agent.update_frequency"]),
        ({"type": "ppo", "batch_size": 10, "update_frequency": 0.5}, []),
        ({"type": "ppo", "batch_size": 10, "subsampling_fraction": 1.5}, ["agent.subsampling_fraction"]),
        ({"type": "ppo", "batch_size": 10, "predict_terminal_values": "yes"}, ["agent.predict_terminal_values"]),
        ({"type": "ppo", "batch_size": 10, "state_preprocessing": "linear_normalization"}, []),
        (
            {"type": "ppo", "batch_size": 10, "baseline_optimizer": {"optimizer": "adam", "learning_rate": "x"}},
            ["agent.baseline_optimizer.learning_rate"],
        ),
        (
            {"type": "dqn", "batch_size": 32, "memory": 10_000, "target_sync_frequency": 0},
            ["agent.target_sync_frequency"],
        ),
        ({"type": "dqn", "batch_size": 32, "memory": 10_000, "horizon": 3, "huber_loss": -1.0}, ["agent.huber_loss"]),
        ({"type": "ppo", "batch_size": 10, "learning_rate": 0.0}, []),  # Tensorforce's code takes 0.0
        ({"type": "pkg.module:Agent", "batch_size": "anything"}, []),  # a user's class is its own judge
    ],
)
def test_agent_arguments_of_the_wrong_type(agent: dict[str, object], problems: list[str]) -> None:
    found = agent_argument_problems(agent)
    assert [p.field for p in found] == problems, found
    for problem in found:
        assert "Tensorforce 0.6" in problem.message or "required" in problem.message


@pytest.mark.parametrize(
    ("layer", "problems"),
    [
        ({"type": "dense", "size": "64"}, ["n[0].size"]),
        ({"type": "dense", "size": BIG}, ["n[0].size"]),
        ({"type": "dense", "size": 8, "activation": "relu6"}, ["n[0].activation"]),
        ({"type": "dense", "size": 8, "bias": "no"}, ["n[0].bias"]),
        ({"type": "dense", "size": 8, "dropout": 1.0}, ["n[0].dropout"]),
        ({"type": "conv2d", "size": 8, "window": [3, 3], "stride": 2}, []),
        ({"type": "conv2d", "size": 8, "window": [3, 0]}, ["n[0].window"]),
        ({"type": "conv2d", "size": 8, "window": [3, 3, 3]}, ["n[0].window"]),
    ],
)
def test_layer_arguments_of_the_wrong_type(layer: dict[str, object], problems: list[str]) -> None:
    from rlcloud.specs.tf06 import layer_argument_problems

    assert [p.field for p in layer_argument_problems(layer, "n[0]")] == problems


@pytest.mark.parametrize(
    ("environment", "gym", "problems"),
    [
        ({"type": "gym", "level": "CartPole-v1", "max_episode_steps": "long"}, True, ["environment.max_episode_steps"]),
        ({"type": "gym", "level": "CartPole-v1", "max_episode_steps": 200}, True, []),
        (
            {"type": "gym", "level": "CartPole-v1", "disable_env_checker": "yes"},
            True,
            ["environment.disable_env_checker"],
        ),
        ({"type": "cartpole", "max_episode_timesteps": -5}, False, ["environment.max_episode_timesteps"]),
        ({"type": "cartpole", "max_episode_timesteps": 500}, False, []),
    ],
)
def test_environment_arguments_of_the_wrong_type(
    environment: dict[str, object], gym: bool, problems: list[str]
) -> None:
    from rlcloud.specs.tf06 import environment_argument_problems

    assert [p.field for p in environment_argument_problems(environment, gym)] == problems


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--set", "agent.learning_rate=abc"], "--set agent.learning_rate"),
        (["--set", "agent.batch_size=" + "9" * 4000], "--set agent.batch_size"),
        (["--set", "agent.batch_size=true"], "--set agent.batch_size"),
        (["--set", "agent.discount=2"], "--set agent.discount"),
        (["--set", "network=[{type: dense, size: abc}]"], "size"),
        (["--set", "environment.max_episode_steps=x"], "--set environment.max_episode_steps"),
    ],
)
def test_experiment_start_refuses_wrong_types_before_anything_runs(
    argv: list[str], field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`experiment start --set agent.learning_rate=abc` died inside Tensorforce with exit 3; now exit 2 before a
    process starts or a results directory is written (the fast lane fails a test that starts one)."""
    from rlcloud.cli import main

    code = main(["experiment", "start", str(EXAMPLE), "--results", str(tmp_path / "r"), *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert field in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("grid", "field"),
    [
        (["agent.batch_size=,"], "--grid agent.batch_size"),
        (["agent.batch_size=8,"], "--grid agent.batch_size"),
        (["agent.batch_size=true,false"], "agent.batch_size"),
        (["agent.learning_rate=abc,1e-3"], "agent.learning_rate"),
        (["agent.batch_size=" + "9" * 4000 + ",8"], "agent.batch_size"),
        (["results=a,b"], "results"),
        (["cluster=a,b"], "cluster"),
        (["image=a:1,b:2"], "image"),
        (["agent.batch_size=4,8", "agent.batch_size=16,32"], "given twice"),
        (["agent.batch_size=4,8", " agent.batch_size =16"], "given twice"),
        (["agent.batch_size=4,8", "--set", "agent.batch_size=16"], "also given with --set"),
    ],
)
def test_sweep_grids_refuse_repeats_non_parameters_and_wrong_types(
    grid: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from rlcloud.cli import main

    cut = grid.index("--set") if "--set" in grid else len(grid)
    flags = [*(f for g in grid[:cut] for f in ("--grid", g)), *grid[cut:]]
    argv = ["sweep", "validate", str(EXAMPLE), *flags]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert field in err and "Traceback" not in err


def test_a_sweep_file_varying_a_non_parameter_is_refused() -> None:
    from rlcloud.errors import SpecError
    from rlcloud.specs import ExperimentSpec
    from rlcloud.specs.sweep import SweepSpec

    experiment = ExperimentSpec.from_file(EXAMPLE).model_dump(mode="json")
    with pytest.raises(SpecError, match="results"):
        SweepSpec.from_dict({"name": "s", "experiment": experiment, "parameters": {"results": ["/tmp/a", "/tmp/b"]}})


def test_a_client_without_the_runner_extra_still_checks_the_agent_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster run from a client without Tensorforce skips the runner's checks; the type table needs none."""
    from rlcloud import Cluster, Experiment, ExperimentSpec
    from rlcloud import experiment as experiment_module
    from rlcloud.errors import SpecError

    monkeypatch.setattr(experiment_module, "RUNNER_MODULES", ("rlcloud_no_such_module",))
    spec = ExperimentSpec.from_file(EXAMPLE, **{"agent.learning_rate": "abc"})
    remote = Experiment(spec, results="gs://bucket/x", cluster=Cluster.kubernetes(kubeconfig=str(tmp_path / "k")))
    with pytest.raises(SpecError, match=r"agent\.learning_rate"):
        remote.validate()
