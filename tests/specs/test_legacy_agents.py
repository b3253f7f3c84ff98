"""The agent specs legacy import produces use only arguments Tensorforce 0.6's agents take.

Read from Tensorforce's source (its agents' ``__init__`` signatures) rather than by importing it: importing
Tensorforce imports TensorFlow, which costs more CPU time than this whole directory's other tests.
"""

from __future__ import annotations

import ast
import importlib.util
import warnings
from functools import cache
from pathlib import Path

import pytest

from rlcloud.specs import ExperimentSpec, LegacySpecWarning
from rlcloud.specs.legacy import convert_legacy_agent

LEGACY = Path(__file__).parent / "legacy"

# 0.6 agent type -> module in tensorforce/agents/
AGENT_MODULES = {
    "ppo": "ppo",
    "dqn": "dqn",
    "double_dqn": "double_dqn",
    "dueling_dqn": "dueling_dqn",
    "vpg": "vpg",
    "trpo": "trpo",
    "a2c": "a2c",
    "ac": "ac",
    "dpg": "dpg",
}


@cache
def agent_arguments(agent_type: str) -> frozenset[str]:
    """The keyword arguments of Tensorforce 0.6's agent ``agent_type``, from its source file."""
    found = importlib.util.find_spec("tensorforce")
    if found is None or found.origin is None:
        pytest.skip("tensorforce is not installed (the runner extra)")
    source = Path(found.origin).parent / "agents" / f"{AGENT_MODULES[agent_type]}.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            args = node.args
            return frozenset(a.arg for a in [*args.args, *args.kwonlyargs] if a.arg != "self")
    raise AssertionError(f"no __init__ in {source}")


def test_source_reading_finds_known_arguments() -> None:
    assert {"batch_size", "multi_step", "baseline", "learning_rate"} <= agent_arguments("ppo")
    assert "gae_lambda" not in agent_arguments("ppo")
    assert {"memory", "batch_size", "update_frequency", "exploration"} <= agent_arguments("dqn")


@pytest.mark.parametrize("name", ["simple_a3c.json", "ppo_cartpole.json"])
def test_mapped_legacy_agents_use_only_06_arguments(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LegacySpecWarning)
        agent = ExperimentSpec.from_file(LEGACY / name).agent
    unknown = set(agent) - {"type"} - agent_arguments(agent["type"])
    assert not unknown, f"{name}: Tensorforce 0.6 {agent['type']} does not take {sorted(unknown)}"


@pytest.mark.parametrize(
    "agent",
    [
        {"type": "ppo_agent", "optimization_steps": 5, "estimate_terminal": True, "gae_lambda": None},
        {"type": "trpo_agent", "critic_network": "auto", "critic_optimizer": {"type": "adam"}},
        {"type": "vpg_agent", "baseline_network": "auto", "baseline_mode": "states"},
        {"type": "dueling_dqn_agent", "estimate_terminal": False, "double_q_model": True, "huber_loss_delta": 1.0},
        {"type": "ac", "critic_network": "auto"},
        {"type": "dpg", "critic_network": "auto"},
        {"type": "a2c", "estimate_terminal": True},
        {"type": "ddqn_agent", "estimate_terminal": True, "target_sync_frequency_": 10},
    ],
)
def test_renamed_and_dropped_keys_leave_only_06_arguments(agent: dict[str, object]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LegacySpecWarning)
        mapped = convert_legacy_agent(agent)
    agent_type = str(mapped["type"])
    assert set(mapped) - {"type"} <= agent_arguments(agent_type)
