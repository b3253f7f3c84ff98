"""The specs rlcloud ships (the defaults `rlcloud init` copies into ./configs/, and examples/) are valid.

They load with no legacy warning (they are written in today's format) and round-trip through YAML.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

import rlcloud
from rlcloud.specs import ClusterSpec, ExperimentSpec
from rlcloud.specs.loading import load_spec

PACKAGE_CONFIGS = Path(rlcloud.__file__).parent / "configs"
REPO_ROOT = Path(__file__).parents[2]


def shipped(kind: str) -> list[Path]:
    """The shipped spec files of one kind (experiments, clusters)."""
    return sorted((PACKAGE_CONFIGS / kind).glob("*.yaml"))


@pytest.fixture
def project(workdir: Path) -> Path:
    """A directory laid out like one `rlcloud init` made: the default specs under ./configs/."""
    shutil.copytree(PACKAGE_CONFIGS, workdir / "configs")
    return workdir


def load_cleanly(path: Path) -> ExperimentSpec | ClusterSpec:
    """Load a spec, failing on any warning (a legacy mapping in a shipped file is a bug in the file)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return load_spec(path)


def test_there_are_shipped_specs() -> None:
    assert shipped("experiments")
    assert shipped("clusters")


@pytest.mark.parametrize("path", shipped("experiments"), ids=lambda p: p.name)
def test_shipped_experiments_are_valid(project: Path, path: Path) -> None:
    spec = load_cleanly(project / "configs" / "experiments" / path.name)
    assert isinstance(spec, ExperimentSpec)
    assert ExperimentSpec.from_yaml_text(spec.to_yaml()) == spec


@pytest.mark.parametrize("path", shipped("clusters"), ids=lambda p: p.name)
def test_shipped_clusters_are_valid(project: Path, path: Path) -> None:
    spec = load_cleanly(project / "configs" / "clusters" / path.name)
    assert isinstance(spec, ClusterSpec)
    assert spec.effective_machine_type
    assert ClusterSpec.from_yaml_text(spec.to_yaml()) == spec


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_examples_are_valid(project: Path, path: Path) -> None:
    for example in path.parent.glob("*.yaml"):  # an example may name another (the sweep, its experiment)
        shutil.copy(example, project / example.name)
    spec = load_cleanly(project / path.name)
    assert spec.name
