"""Loading any spec file: its ``kind`` (Experiment, Cluster or Sweep) decides which model is built.

The top of specs/: it knows every model. The machinery (file references, overrides, legacy files, error
translation) is :mod:`rlcloud.specs.building`, which the models use themselves; the names most callers
need are re-exported here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlcloud.specs import building
from rlcloud.specs.building import (
    SpecKind,
    apply_overrides,
    build_model,
    check_kind,
    infer_kind,
    parse_data_text,
    parse_json_text,
    read_data_file,
    validation_to_spec_error,
)
from rlcloud.specs.cluster import ClusterSpec
from rlcloud.specs.experiment import ExperimentSpec
from rlcloud.specs.sweep import SweepSpec

__all__ = [
    "SpecKind",
    "apply_overrides",
    "build_model",
    "cluster_from_dict",
    "experiment_from_dict",
    "infer_kind",
    "load_spec",
    "load_spec_text",
    "parse_data_text",
    "parse_json_text",
    "read_data_file",
    "spec_to_json",
    "spec_to_yaml",
    "validation_to_spec_error",
]

AnySpec = ExperimentSpec | ClusterSpec | SweepSpec


def experiment_from_dict(
    data: Any, *, base_dir: str | Path | None = None, source: str | None = None, **overrides: Any
) -> ExperimentSpec:
    """Build an ExperimentSpec from a dict: legacy keys mapped, file references resolved, overrides applied."""
    return building.experiment_from_dict(data, model=ExperimentSpec, base_dir=base_dir, source=source, **overrides)


def cluster_from_dict(data: Any, *, source: str | None = None, **overrides: Any) -> ClusterSpec:
    """Build a ClusterSpec from a dict (legacy tensorforce-client cluster files included) with overrides."""
    return building.cluster_from_dict(data, model=ClusterSpec, source=source, **overrides)


def load_spec(path: str | Path, *, kind: SpecKind | None = None, **overrides: Any) -> AnySpec:
    """Load an Experiment, Cluster or Sweep spec from a YAML/JSON file; ``overrides`` replace single settings."""
    path = Path(path)
    return _load_data(read_data_file(path), kind=kind, base_dir=path.parent, source=str(path), **overrides)


def load_spec_text(
    text: str,
    *,
    kind: SpecKind | None = None,
    base_dir: str | Path | None = None,
    source: str = "<string>",
    **overrides: Any,
) -> AnySpec:
    """Load a spec from YAML/JSON text (references resolve against ``base_dir``, default the cwd)."""
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    return _load_data(parse_data_text(text, source=source), kind=kind, base_dir=base, source=source, **overrides)


def _load_data(data: Any, *, kind: SpecKind | None, base_dir: Path, source: str, **overrides: Any) -> AnySpec:
    found = check_kind(data, kind, source)
    if found == "Experiment":
        return experiment_from_dict(data, base_dir=base_dir, source=source, **overrides)
    if found == "Sweep":
        return SweepSpec.from_dict(data, base_dir=base_dir, source=source, **overrides)
    return cluster_from_dict(data, source=source, **overrides)


def _kind(spec: AnySpec) -> SpecKind:
    if isinstance(spec, ExperimentSpec):
        return "Experiment"
    return "Sweep" if isinstance(spec, SweepSpec) else "Cluster"


def spec_to_yaml(spec: AnySpec) -> str:
    """The spec as YAML with its ``kind`` first; loading it back gives an equal spec."""
    return building.dump_spec(_kind(spec), spec)


def spec_to_json(spec: AnySpec) -> str:
    """The spec as JSON (with ``kind``)."""
    return building.dump_spec(_kind(spec), spec, "json")
