"""The agent-argument table in rlcloud.specs.tf06 is Tensorforce 0.6.5's, and start/validate use it."""

from __future__ import annotations

import pytest

from rlcloud.specs.tf06 import AGENT_ARGUMENTS, agent_argument_problems


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
    ],
)
def test_agent_argument_problems(agent: dict[str, object], problems: list[str]) -> None:
    found = agent_argument_problems(agent)
    assert [p.field for p in found] == problems
    if "agent.learning_rat" in problems:
        assert "did you mean 'learning_rate'" in found[0].message


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
