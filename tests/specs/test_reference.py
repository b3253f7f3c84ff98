"""The generated spec reference: complete, readable, and docs/spec-reference.md kept current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import pytest

from rlcloud.specs import ClusterSpec, ExperimentSpec, Frequency, GpuType
from rlcloud.specs.reference import MODELS, REGENERATE, render, type_name

REPO_ROOT = Path(__file__).parents[2]
DOC = REPO_ROOT / "docs" / "spec-reference.md"


def test_committed_reference_is_current() -> None:
    assert DOC.exists(), f"docs/spec-reference.md is missing; create it with: {REGENERATE}"
    stale = f"docs/spec-reference.md is stale; regenerate it with: {REGENERATE}"
    assert DOC.read_text(encoding="utf-8") == render(), stale


@pytest.mark.processes
def test_module_prints_the_reference() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rlcloud.specs.reference"], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout == render()


@pytest.mark.parametrize(("kind", "model"), MODELS, ids=[m.__name__ for _, m in MODELS])
def test_every_field_is_documented(kind: str, model: Any) -> None:
    text = render()
    section = text.split(f"### {model.__name__}\n", 1)[1].split("\n### ", 1)[0]
    for name, info in model.model_fields.items():
        assert info.description, f"{model.__name__}.{name} has no description"
        rows = [line for line in section.splitlines() if line.startswith(f"| `{name}` |")]
        assert len(rows) == 1, name
        assert info.description.replace("|", "\\|") in rows[0]


def test_rows_show_type_default_and_constraints() -> None:
    text = render()
    assert '| `run_mode` | "single" \\| "multi-threaded" \\| "distributed" | `single` |' in text
    assert "| `saver_frequency` | [Frequency](#frequency) \\| null | `600s` |" in text
    assert "| `num_nodes` | int (>= 1, <= 1000) | `1` |" in text
    assert "| `gpus_per_node` | int (>= 0, <= 16) | `0` |" in text
    assert "| `name` | str | **required** |" in text
    assert "| `num_workers` | int (>= 1, <= 1024) | derived |" in text
    assert "| `labels` | dict[str, str] | `{}` |" in text
    assert "| `cluster` | str \\| [ClusterSpec](#clusterspec) \\| null | `null` |" in text


def test_value_types_and_computed_properties_are_listed() -> None:
    text = render()
    for gpu in GpuType:
        assert f"- `{gpu.value}`" in text
    assert "Refused: `nvidia-tesla-k80`" in text
    assert "2024-05-01" in text
    assert "- `effective_machine_type` (str):" in text
    assert "- `num_envs` (int):" in text
    for anchor in ("#frequency", "#duration", "#gputype", "#autoscaling", "#resources", "#evaluationspec"):
        heading = anchor[1:]
        assert any(line.lower() == f"### {heading}" for line in text.splitlines()), anchor


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (int, "int"),
        (str | None, "str \\| null"),
        (dict[str, Any], "dict[str, any]"),
        (list[str], "list[str]"),
        (Literal["a", "b"], '"a" \\| "b"'),
        (Frequency | None, "[Frequency](#frequency) \\| null"),
        (ClusterSpec, "[ClusterSpec](#clusterspec)"),
        (ExperimentSpec, "[ExperimentSpec](#experimentspec)"),
    ],
)
def test_type_names(annotation: Any, expected: str) -> None:
    assert type_name(annotation) == expected
