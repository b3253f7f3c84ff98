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
