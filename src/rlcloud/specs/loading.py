"""Reading specs from YAML/JSON files and dicts: file references, overrides, legacy files, error translation.

This is the only place in specs/ that does I/O: it reads the spec file and the files it references, then
builds the strict models from resolved data.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.specs import legacy
from rlcloud.specs.cluster import ClusterSpec
from rlcloud.specs.experiment import ExperimentSpec

__all__ = [
    "SpecKind",
    "apply_overrides",
    "cluster_from_dict",
    "experiment_from_dict",
    "load_spec",
    "load_spec_text",
    "read_data_file",
    "spec_to_yaml",
    "validation_to_spec_error",
]

SpecKind = Literal["Experiment", "Cluster"]
M = TypeVar("M", bound=BaseModel)

_CONFIG_DIRS = {
    "environment": "environments",
    "agent": "agents",
    "network": "networks",
    "cluster": "clusters",
}
_SUFFIXES = (".yaml", ".yml", ".json")
_CLUSTER_KEYS = {
    "num_nodes",
    "machine_type",
    "gpu_type",
    "gpus_per_node",
    "cpus_per_node",
    "memory_per_node",
    "disk_size",
    "location",
    "spot",
    "autoscaling",
    "project",
    "labels",
    "ttl",
    "fallback_zones",
}


# ---------------------------------------------------------------------------------------------- reading


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader that reads YAML 1.2 / JSON floats without a dot ("1e-3", "1e6") as numbers, and refuses
    duplicate keys.

    PyYAML follows YAML 1.1, where ``learning_rate: 1e-3`` is the *string* "1e-3"; tensorforce-client's
    JSON files and most users write floats that way. PyYAML also lets a repeated key silently replace the
    first one, which hides the setting a user thinks is in force.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # "<<: *base": explicit keys may override merged ones
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (each setting may appear once)", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_SpecLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def read_data_file(path: str | Path, *, field: str = "") -> Any:
    """Parse a YAML or JSON file; errors name the file and the line (SpecError)."""
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError([SpecProblem(field, f"file not found: {path}", source=source)], source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SpecError([SpecProblem(field, f"cannot read {path}: {reason}", source=source)], source=source) from None
    if path.suffix.lower() == ".json":
        return parse_json_text(text, source=source, field=field)
    return parse_data_text(text, source=source, field=field)


class _DuplicateKeyError(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(f"duplicate key {key!r} (each setting may appear once)")
        out[key] = value
    return out


def parse_json_text(text: str, *, source: str = "<string>", field: str = "") -> Any:
    """Parse JSON text; a syntax error names the line and column."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKeyError as exc:
        raise SpecError([SpecProblem(field, str(exc), source=source)], source=source) from None
    except json.JSONDecodeError as exc:
        message = f"line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
        raise SpecError([SpecProblem(field, message, source=source)], source=source) from None


def parse_data_text(text: str, *, source: str = "<string>", field: str = "") -> Any:
    """Parse YAML (a superset of JSON) text; a syntax error names the line and column."""
    try:
        return yaml.load(text, Loader=_SpecLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise SpecError([SpecProblem(field, f"{where}{problem}", source=source)], source=source) from None
    except yaml.YAMLError as exc:
        raise SpecError([SpecProblem(field, f"invalid YAML/JSON: {exc}", source=source)], source=source) from None


def _resolve_reference(value: str, kind: str, base_dir: Path) -> Path | None:
    """Find a referenced file: next to the spec file, then ./configs/<kind>s/, then ./ (with or without suffix)."""
    names = [value] if Path(value).suffix in _SUFFIXES else [value, *(value + s for s in _SUFFIXES)]
    dirs = [base_dir, Path.cwd() / "configs" / _CONFIG_DIRS[kind], Path.cwd()]
    for directory in dirs:
        for name in names:
            candidate = (directory / name).expanduser()
            if candidate.is_file():
                return candidate
    return None


def _load_reference(value: str, kind: str, base_dir: Path) -> Any:
    found = _resolve_reference(value, kind, base_dir)
    if found is None:
        tried = f"{base_dir}/, ./configs/{_CONFIG_DIRS[kind]}/ and ./"
        raise SpecError([SpecProblem(kind, f"file {value!r} not found (looked in {tried})", value)])
    data = read_data_file(found, field=kind)
    if isinstance(data, dict):
        data.pop("kind", None)
    return data


# ------------------------------------------------------------------------------------------- overrides


def apply_overrides(data: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``data`` with ``overrides`` applied; dotted keys ("resources.learner.cpu") set nested values."""
    out = dict(data)
    for key, value in overrides.items():
        parts = key.split(".")
        target = out
        for part in parts[:-1]:
            child = target.get(part)
            child = dict(child) if isinstance(child, dict) else {}
            target[part] = child
            target = child
        target[parts[-1]] = value
    return out


# ------------------------------------------------------------------------------------ error translation

_TYPE_ERRORS = {
    "string_type",
    "dict_type",
    "list_type",
    "literal_error",
    "model_type",
    "model_attributes_type",
    "none_required",
    "is_instance_of",
}


def _loc_to_path(loc: tuple[Any, ...], model: type[BaseModel]) -> str:
    """The dotted field path of a pydantic error location, without union branch tags.

    Walks the models along the location: after a field whose type is a union of several types, pydantic
    inserts the branch's tag ("ClusterSpec", "str", "dict[str,any]", ...), which is not a key the user
    wrote. Everything else, capitalised unknown keys such as ``Name`` included, is part of the path.
    """
    path = ""
    current: type[BaseModel] | None = model
    branches: list[type[BaseModel]] = []
    expect_tag = False
    for part in loc:
        if expect_tag and isinstance(part, str):
            expect_tag = False
            current = next((m for m in branches if m.__name__ == part), None)
            continue
        expect_tag = False
        if isinstance(part, int):
            path += f"[{part}]"
            current = None
            continue
        path += ("." if path else "") + str(part)
        if current is None or part not in current.model_fields:
            current = None  # a mapping's key, or an unknown field
            continue
        annotation = current.model_fields[part].annotation
        branches = _submodels(annotation)
        types_ = [a for a in typing.get_args(annotation) if a is not type(None)] if _is_union(annotation) else []
        expect_tag = len(types_) > 1
        current = None if expect_tag or not branches else branches[0]
    return path


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def validation_to_spec_error(exc: ValidationError, *, model: type[BaseModel], source: str | None = None) -> SpecError:
    """Translate pydantic's ValidationError into a SpecError listing every problem with its field path."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for error in exc.errors(include_url=False):
        err: dict[str, Any] = dict(error)
        loc = tuple(err["loc"])
        if err["type"].startswith("at:"):
            loc = (*loc, *err["type"][3:].split("."))
        path = _loc_to_path(loc, model)
        grouped.setdefault(path, []).append(err)

    problems: list[SpecProblem] = []
    for path, errs in grouped.items():
        specific = [e for e in errs if e["type"] not in _TYPE_ERRORS]
        # a union field gives one type error per branch: when a branch has a specific complaint, that one
        # is the useful message; when all are type errors, say every accepted form at once.
        if any(p.field.startswith(path + ".") for p in problems) or (
            not specific and any(k.startswith(path + ".") for k in grouped if k != path)
        ):
            continue
        chosen = specific or errs
        if not specific and len(errs) > 1:
            message = "expected " + " or ".join(sorted({_describe_type_error(e) for e in errs}))
            problems.append(SpecProblem(path, message, _value(errs[0]), source))
            continue
        for err in chosen:
            problems.append(SpecProblem(path, _message(err, model, path), _value(err), source))
    return SpecError(problems, source=source)


def _describe_type_error(err: dict[str, Any]) -> str:
    kind = err["type"]
    if kind == "literal_error":
        return err["msg"].removeprefix("Input should be ")
    return {
        "string_type": "a string",
        "dict_type": "a mapping",
        "list_type": "a list",
        "model_type": "a mapping",
        "model_attributes_type": "a mapping",
        "none_required": "nothing",
    }.get(kind, err["msg"])


def _value(err: dict[str, Any]) -> Any:
    if err["type"].startswith("at:") or err["type"] in ("missing",):
        return None
    value = err.get("input")
    return None if isinstance(value, dict) else value


def _message(err: dict[str, Any], model: type[BaseModel], path: str) -> str:
    kind = err["type"]
    if kind == "missing":
        desc = _field_description(model, path)
        return "required" + (f": {desc}" if desc else "")
    if kind == "extra_forbidden":
        parent, _, name = path.rpartition(".")
        valid = sorted(_fields_at(model, parent))
        close = difflib.get_close_matches(name, valid, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"unknown field; {hint}valid fields here: {', '.join(valid)}"
    msg = err["msg"]
    return msg.removeprefix("Value error, ")


def _submodels(annotation: Any) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    for arg in getattr(annotation, "__args__", ()) or ():
        found += _submodels(arg)
    return found


def _model_at(model: type[BaseModel], path: str) -> type[BaseModel] | None:
    current: type[BaseModel] | None = model
    for part in [p for p in path.split(".") if p]:
        if current is None or part not in current.model_fields:
            return None
        subs = _submodels(current.model_fields[part].annotation)
        current = subs[0] if subs else None
    return current


def _fields_at(model: type[BaseModel], path: str) -> list[str]:
    found = _model_at(model, path)
    return list(found.model_fields) if found else []


def _field_description(model: type[BaseModel], path: str) -> str:
    parent, _, name = path.rpartition(".")
    found = _model_at(model, parent)
    if found and name in found.model_fields:
        return found.model_fields[name].description or ""
    return ""


def build_model(model: type[M], data: Any, *, source: str | None = None) -> M:
    """Validate ``data`` into ``model``, raising SpecError (every problem) instead of ValidationError."""
    if not isinstance(data, dict):
        raise SpecError(
            [SpecProblem("", f"a {model.__name__} must be a mapping of settings, got {type(data).__name__}")],
            source=source,
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_to_spec_error(exc, model=model, source=source) from None


# ----------------------------------------------------------------------------------------- the loaders


def infer_kind(data: Mapping[str, Any]) -> SpecKind:
    """Experiment or Cluster: from an explicit ``kind`` key, else from the keys present."""
    kind = data.get("kind")
    if isinstance(kind, str):
        if kind.lower() in ("experiment", "experimentspec"):
            return "Experiment"
        if kind.lower() in ("cluster", "clusterspec"):
            return "Cluster"
        raise SpecError([SpecProblem("kind", "kind must be Experiment or Cluster", kind)])
    if legacy.is_legacy_experiment(dict(data)) or "environment" in data or "agent" in data:
        return "Experiment"
    if _CLUSTER_KEYS & set(data):
        return "Cluster"
    raise SpecError(
        [
            SpecProblem(
                "kind",
                "cannot tell whether this is an Experiment or a Cluster spec: add "
                "'kind: Experiment' or 'kind: Cluster'",
            )
        ]
    )


def experiment_from_dict(
    data: Mapping[str, Any],
    *,
    base_dir: str | Path | None = None,
    source: str | None = None,
    **overrides: Any,
) -> ExperimentSpec:
    """Build an ExperimentSpec from a dict: legacy keys mapped, file references resolved, overrides applied.

    Each legacy mapping is reported as a LegacySpecWarning from the file that holds the key (the spec file,
    or the agent/network/environment/cluster file it references).
    """
    part_sources: dict[str, str] = {}
    with legacy.collecting_notes() as notes:
        try:
            return _experiment_from_dict(data, base_dir, source, overrides, part_sources)
        finally:
            legacy.emit_notes(notes, source, part_sources)


def _experiment_from_dict(
    data: Mapping[str, Any],
    base_dir: str | Path | None,
    source: str | None,
    overrides: Mapping[str, Any],
    part_sources: dict[str, str],
) -> ExperimentSpec:
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    raw = dict(data)
    raw.pop("kind", None)
    tfc = legacy.is_legacy_experiment(raw)
    if tfc:
        raw = legacy.convert_legacy_experiment(raw)
    # Whole settings are replaced before file references resolve (so `agent="other.yaml"` is read), dotted
    # ones after (so `**{"agent.batch_size": 32}` changes the agent file's content instead of replacing it).
    raw = apply_overrides(raw, {k: v for k, v in overrides.items() if "." not in k})
    problems: list[SpecProblem] = []
    unresolved: set[str] = set()
    for kind in ("environment", "agent", "network", "cluster"):
        value = raw.get(kind)
        if not isinstance(value, str) or (kind == "network" and value == "auto"):
            continue
        found = _resolve_reference(value, kind, base)
        if kind == "cluster" and found is None and "." not in value and "/" not in value:
            continue  # the name of an existing cluster
        try:
            raw[kind] = _load_reference(value, kind, base)
            if found is not None:  # "exp/../agents/a.json" -> "agents/a.json" in the reports
                part_sources[kind] = os.path.normpath(found)
        except SpecError as exc:
            problems += [SpecProblem(kind, p.message, p.value, source) for p in exc.problems]
            unresolved.add(kind)
    if isinstance(raw.get("cluster"), dict) and str(raw["cluster"].get("kind", "")).lower() == "cluster":
        # an inline copy of a cluster file (or of ClusterSpec.to_yaml()) keeps its kind line
        raw["cluster"] = {k: v for k, v in raw["cluster"].items() if k != "kind"}
    converters: dict[str, Any] = {
        "environment": legacy.convert_legacy_environment,
        "agent": legacy.convert_legacy_agent,
        "network": lambda network: legacy.convert_experiment_network(network, tfc=tfc),
        "cluster": lambda cluster: legacy.convert_legacy_cluster(cluster, tfc=tfc),
    }
    for kind, convert in converters.items():
        accepted = dict | list if kind == "network" else dict
        if isinstance(raw.get(kind), accepted) and kind not in unresolved:
            try:
                raw[kind] = convert(raw[kind])
            except SpecError as exc:
                problems += [SpecProblem(p.field, p.message, p.value, source) for p in exc.problems]
                unresolved.add(kind)
    legacy.reconcile_network(raw, tfc=tfc)
    raw = apply_overrides(raw, {k: v for k, v in overrides.items() if "." in k})
    try:
        spec = build_model(ExperimentSpec, raw, source=source)
    except SpecError as exc:
        # a reference that could not be read is reported once, by the resolver, not again by the model
        problems += [p for p in exc.problems if p.field.split(".")[0] not in unresolved]
        raise SpecError(problems, source=source) from None
    if problems:
        raise SpecError(problems, source=source)
    return spec


def cluster_from_dict(data: Mapping[str, Any], *, source: str | None = None, **overrides: Any) -> ClusterSpec:
    """Build a ClusterSpec from a dict (legacy tensorforce-client cluster files included) with overrides."""
    raw = dict(data)
    raw.pop("kind", None)
    with legacy.collecting_notes() as notes:
        try:
            converted = legacy.convert_legacy_cluster(raw)
        finally:
            legacy.emit_notes(notes, source)
    return build_model(ClusterSpec, apply_overrides(converted, overrides), source=source)


def load_spec(path: str | Path, *, kind: SpecKind | None = None, **overrides: Any) -> ExperimentSpec | ClusterSpec:
    """Load an Experiment or Cluster spec from a YAML/JSON file; ``overrides`` replace single settings."""
    path = Path(path)
    return _load_data(read_data_file(path), kind=kind, base_dir=path.parent, source=str(path), **overrides)


def load_spec_text(
    text: str,
    *,
    kind: SpecKind | None = None,
    base_dir: str | Path | None = None,
    source: str = "<string>",
    **overrides: Any,
) -> ExperimentSpec | ClusterSpec:
    """Load a spec from YAML/JSON text (references resolve against ``base_dir``, default the cwd)."""
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    return _load_data(parse_data_text(text, source=source), kind=kind, base_dir=base, source=source, **overrides)


def _load_data(
    data: Any, *, kind: SpecKind | None, base_dir: Path, source: str, **overrides: Any
) -> ExperimentSpec | ClusterSpec:
    if not isinstance(data, dict):
        what = "is empty" if data is None else f"holds a {type(data).__name__}"
        message = f"the file {what}; it must hold a mapping of settings (key: value lines)"
        raise SpecError([SpecProblem("", message, source=source)], source=source)
    try:
        found = infer_kind(data)
    except SpecError as exc:
        problems = [SpecProblem(p.field, p.message, p.value, source) for p in exc.problems]
        raise SpecError(problems, source=source) from None
    if kind is not None and found != kind:
        article = "an" if kind == "Experiment" else "a"
        message = f"expected {article} {kind} spec but this file holds a {found} spec"
        raise SpecError([SpecProblem("kind", message, source=source)], source=source)
    if found == "Experiment":
        return experiment_from_dict(data, base_dir=base_dir, source=source, **overrides)
    return cluster_from_dict(data, source=source, **overrides)


def spec_to_yaml(spec: ExperimentSpec | ClusterSpec) -> str:
    """The spec as YAML with its ``kind`` first; loading it back gives an equal spec."""
    kind = "Experiment" if isinstance(spec, ExperimentSpec) else "Cluster"
    data = {"kind": kind, **spec.model_dump(mode="json")}
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


def spec_to_json(spec: ExperimentSpec | ClusterSpec) -> str:
    """The spec as JSON (with ``kind``)."""
    kind = "Experiment" if isinstance(spec, ExperimentSpec) else "Cluster"
    return json.dumps({"kind": kind, **spec.model_dump(mode="json")}, indent=2)
