"""Building specs from YAML/JSON files and dicts: file references, overrides, legacy files, error translation.

The machinery, independent of the models: every function that builds one takes its model class, so the
models (experiment.py, cluster.py, sweep.py) can use it for ``from_file``/``from_dict`` and
:mod:`rlcloud.specs.loading` (which dispatches by ``kind``) can sit above them, with no import cycle.
With specs/safeload.py (the one bounded YAML/JSON reader) this is the only place in specs/ that does I/O:
it reads the spec file and the files it references, then builds the strict models from resolved data.
"""

from __future__ import annotations

import difflib
import json
import os
import types
import typing
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from rlcloud.errors import SpecError, SpecProblem, excerpt
from rlcloud.specs import legacy
from rlcloud.specs.safeload import check_structure, parse_data_text, parse_json_text, read_data_file

__all__ = [
    "SpecKind",
    "apply_overrides",
    "build_model",
    "check_kind",
    "cluster_from_dict",
    "dump_spec",
    "experiment_from_dict",
    "infer_kind",
    "parse_data_text",
    "parse_json_text",
    "read_data_file",
    "validation_to_spec_error",
]

SpecKind = Literal["Experiment", "Cluster", "Sweep"]
M = TypeVar("M", bound=BaseModel)

_CONFIG_DIRS = {
    "environment": "environments",
    "agent": "agents",
    "network": "networks",
    "cluster": "clusters",
    "experiment": "experiments",  # a sweep's base experiment
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


def _bundled_configs() -> Path:
    """The package's own default specs (src/rlcloud/configs), the last place a reference is looked up."""
    return Path(str(resources.files("rlcloud") / "configs"))


def _configs_tree(base_dir: Path) -> Path | None:
    """The configs tree a spec file sits in (``configs/experiments/x.yaml`` -> ``configs``), else None: the
    layout tensorforce-client and ``rlcloud init`` use, whose specs name their parts as ``../agents/a.json``."""
    return base_dir.parent if base_dir.name in ("experiments", "sweeps", *_CONFIG_DIRS.values()) else None


def reference_roots(base_dir: Path) -> list[Path]:
    """The directory trees a spec's file references may point into: the spec file's own directory (the
    whole configs tree when it sits in one, e.g. ``configs/experiments/``), the project's ./configs and
    rlcloud's bundled configs (symlinks resolved). Anything else (``/etc/passwd``, ``../../.ssh/id_rsa``,
    ``~/.kube/config``) is refused: a spec is data, and the files it names are part of it only when they
    sit beside it."""
    tree = _configs_tree(base_dir)
    return [(tree or base_dir).resolve(), (Path.cwd() / "configs").resolve(), _bundled_configs().resolve()]


#: Files that mark a project's directory: rlcloud's project config (config.CONFIG_FILE) and
#: tensorforce-client's project file (tfcli ran from the folder holding it).
PROJECT_MARKERS = ("rlcloud.yaml", ".tensorforce.json")


def project_root(base_dir: Path) -> Path:
    """The project a spec belongs to: the nearest directory holding rlcloud.yaml or .tensorforce.json above the
    spec file, else above the working directory, else the working directory (symlinks resolved).

    tensorforce-client resolved ``"network": "configs/networks/mlp2_network.json"`` against this directory
    (``read_json_spec``), so a tfc project's references hold such paths as often as bare names.
    """
    for start in (base_dir, Path.cwd()):
        here = start.resolve()
        for directory in (here, *here.parents):
            if any((directory / marker).is_file() for marker in PROJECT_MARKERS):
                return directory
    return Path.cwd().resolve()


def _in_project(candidate: Path, project: Path) -> bool:
    """A project-relative reference may name any file of the project except inside hidden directories
    (``.ssh``, ``.kube``, ``.config/gcloud``, ``.git``: where keys and credentials live when the project is a
    home directory) and hidden files."""
    if not candidate.is_relative_to(project) or candidate == project:
        return False
    return not any(part.startswith(".") for part in candidate.relative_to(project).parts)


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _resolve_reference(value: str, kind: str, base_dir: Path) -> Path | None:
    """Find a referenced file: next to the spec file, then ./configs/<kind>s/, then rlcloud's bundled
    configs/<kind>s/ (with or without suffix). A candidate outside those trees (symlinks resolved) is never
    opened: a SpecError says the reference points outside them."""
    if not value or "\0" in value or len(value) > _MAX_REFERENCE or "\n" in value:
        return None
    names = [value] if Path(value).suffix in _SUFFIXES else [value, *(value + s for s in _SUFFIXES)]
    tree = _configs_tree(base_dir)
    dirs = [
        base_dir,
        *([tree / _CONFIG_DIRS[kind]] if tree is not None else []),
        Path.cwd() / "configs" / _CONFIG_DIRS[kind],
        _bundled_configs() / _CONFIG_DIRS[kind],
    ]
    roots = reference_roots(base_dir)
    project = project_root(base_dir)
    outside = False
    # (directory, names, the project tree this candidate is confined to or None for the usual roots)
    places: list[tuple[Path, list[str], Path | None]] = [(d, names, None) for d in dirs]
    places.insert(1, (project, [value], project))  # tfc: a path relative to the project, used as given
    for directory, tried, confined in places:
        for name in tried:
            try:
                candidate = Path(os.path.realpath(directory / name))
            except (OSError, ValueError):  # a name too long for the file system, a loop of symlinks
                continue
            allowed = _in_project(candidate, confined) if confined is not None else _inside(candidate, roots)
            if not allowed:
                if confined is None or os.path.lexists(directory / name):
                    outside = True  # a project path that does not exist is simply not this reference
                continue
            try:
                if candidate.is_file():
                    return candidate
            except OSError:  # ENAMETOOLONG, EACCES on a parent directory: not a usable reference
                continue
    if outside:
        raise SpecError(
            [
                SpecProblem(
                    kind,
                    f"the file reference {excerpt(value)} points outside the places a spec may read from: the "
                    "spec file's directory, the project's files (not hidden ones), ./configs and rlcloud's bundled "
                    "configs (copy the file there" + _from_the_project(value, base_dir, project) + ")",
                )
            ]
        )
    return None


def _from_the_project(value: str, base_dir: Path, project: Path) -> str:
    """``; or name it from the project's directory instead: 'examples/x.yaml'`` when ``value``, read from the
    spec's directory, is a file of the project: a project file is read by its path from the project, and
    ``../examples/x.yaml`` from a spec in the project's ``mine/`` is what people write first."""
    try:
        candidate = Path(os.path.realpath(base_dir / value))
        if not (_in_project(candidate, project) and candidate.is_file()):
            return ""
    except (OSError, ValueError):
        return ""
    return f", or name it from the project's directory instead: {str(candidate.relative_to(project))!r}"


#: Longest file reference read as a path: longer strings are values, not file names (PATH_MAX is 4096).
_MAX_REFERENCE = 4096

# Keys that only credentials and kubeconfigs hold: a referenced file with one of them is refused unread
# into the spec, so a key file named by mistake reaches neither spec.yaml, a ConfigMap, a log nor an error.
_SECRET_KEYS = frozenset(
    {
        "private_key",
        "private_key_id",
        "client_secret",
        "refresh_token",
        "access_token",
        "client-key-data",
        "client-certificate-data",
        "token",
        "password",
        "auth-provider",
    }
)
_CREDENTIAL_TYPES = frozenset(
    {"service_account", "authorized_user", "external_account", "impersonated_service_account"}
)
_KIND_NAMES = {
    "environment": "an environment",
    "agent": "an agent",
    "network": "a network",
    "cluster": "a cluster",
    "experiment": "an experiment",
}


def _secret_key(data: Any) -> str | None:
    """The first credential-only key anywhere in ``data`` (iteratively: the reader bounds its depth)."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and key.lower() in _SECRET_KEYS:
                    return key
                stack.append(item)
        elif isinstance(value, list):
            stack.extend(value)
    return None


def _foreign_kind(data: Any, kind: str) -> str | None:
    """What a referenced file holds when it is not ``kind``'s spec (a key file, a kubeconfig, a cluster or
    experiment spec), described without quoting any of it ("is a kubeconfig"); None when it may be ``kind``'s spec."""
    if isinstance(data, dict):
        secret = _secret_key(data)
        if secret is not None or data.get("type") in _CREDENTIAL_TYPES:
            return "is a credentials file" + (f" (it holds {secret!r})" if secret else "")
        declared = data.get("kind")
        if declared == "Config" or len({"clusters", "contexts", "users", "current-context"} & set(data)) >= 2:
            return "is a kubeconfig"
        if isinstance(declared, str):
            lowered = declared.lower()
            if lowered in ("cluster", "clusterspec") and kind != "cluster":
                return "is a Cluster spec"
            if lowered in ("experiment", "experimentspec"):
                return "is an Experiment spec"
            if lowered not in ("cluster", "clusterspec", kind):
                return f"is a spec of kind {excerpt(declared, 40)}"
        if kind != "cluster" and "name" in data and ({"environment", "agent"} & set(data)):
            return "is an Experiment spec"
        if kind != "cluster" and len(_CLUSTER_KEYS & set(data)) >= 2:
            return "is a Cluster spec"
        return None
    if kind == "network" and isinstance(data, list):
        return None
    what = "nothing" if data is None else f"a {type(data).__name__}"
    return f"holds {what} (not a mapping of settings)"


def resolve_experiment_reference(value: str, base_dir: Path, origin: Path | None = None) -> Path:
    """The file a sweep's ``experiment:`` names, found by the rules of every other file reference (next to
    the sweep file, then ./configs/experiments/, then the bundled configs; nothing outside them, symlinks
    resolved) and refused unread into any message when it holds a key file, a kubeconfig or a cluster spec.
    SpecError (field ``experiment``) otherwise."""
    found = _resolve_reference(value, "experiment", base_dir)
    if found is None:
        tried = f"{base_dir}/, ./configs/experiments/ and rlcloud's bundled configs"
        raise SpecError([SpecProblem("experiment", f"file {excerpt(value)} not found (looked in {tried})")])
    if origin is not None and found == origin.resolve():
        raise SpecError([SpecProblem("experiment", f"the file reference {excerpt(value)} names the sweep itself")])
    foreign = _foreign_kind(read_data_file(found, field="experiment"), "experiment")
    if foreign is not None and foreign != "is an Experiment spec":
        raise SpecError(
            [
                SpecProblem(
                    "experiment",
                    f"{excerpt(found.name, 80, quote=False)} {foreign}, not an experiment spec: refused, and none "
                    "of its content is used or shown",
                )
            ]
        )
    return found


def _load_reference(value: str, kind: str, base_dir: Path, origin: Path | None = None) -> Any:
    found = _resolve_reference(value, kind, base_dir)
    if found is None:
        tried = (
            f"{base_dir}/, the project {project_root(base_dir)}/, ./configs/{_CONFIG_DIRS[kind]}/ and rlcloud's "
            "bundled configs"
        )
        raise SpecError([SpecProblem(kind, f"file {excerpt(value)} not found (looked in {tried})")])
    if origin is not None and found == origin:
        # references are followed one level only (a referenced file's own references are not), so a
        # spec naming itself is the one cycle there can be
        raise SpecError([SpecProblem(kind, f"the file reference {excerpt(value)} names the spec itself")])
    data = read_data_file(found, field=kind)
    foreign = _foreign_kind(data, kind)
    if foreign is not None:
        raise SpecError(
            [
                SpecProblem(
                    kind,
                    f"{excerpt(found.name, 80, quote=False)} {foreign}, not {_KIND_NAMES[kind]} spec: refused, and "
                    "none of its content is used or shown",
                )
            ]
        )
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
        path = _loc_to_path(tuple(err["loc"]), model)
        if err["type"].startswith("at:"):
            # appended as text, not walked as a location: its parts ("layers[0]") are the user's keys, never
            # union branch tags for _loc_to_path to skip
            suffix = err["type"][3:]
            path = f"{path}.{suffix}" if path and not suffix.startswith("[") else path + suffix
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
        return str(err["msg"]).removeprefix("Input should be ")
    return {
        "string_type": "a string",
        "dict_type": "a mapping",
        "list_type": "a list",
        "model_type": "a mapping",
        "model_attributes_type": "a mapping",
        "none_required": "nothing",
    }.get(kind, str(err["msg"]))


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
    msg = str(err["msg"])
    if kind in ("less_than_equal", "less_than"):
        reason = _field_limit_reason(model, path)
        return msg + (f" ({reason})" if reason else "")
    return msg.removeprefix("Value error, ")


def _field_limit_reason(model: type[BaseModel], path: str) -> str:
    """Why a field has its bounds (``why()`` in specs/_base.py), for the message of a value out of range."""
    parent, _, name = path.rpartition(".")
    found = _model_at(model, parent)
    extra = found.model_fields[name].json_schema_extra if found and name in found.model_fields else None
    reason = extra.get("limit_reason") if isinstance(extra, dict) else None
    return reason if isinstance(reason, str) else ""


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
    # data built in Python (from_dict, overrides) gets the bounds the reader gives text: no cycle, no
    # nesting deep enough to exhaust the stack in pydantic or yaml.safe_dump
    check_structure(data, source=source or "<data>")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_to_spec_error(exc, model=model, source=source) from None


# ----------------------------------------------------------------------------------------- the loaders


def infer_kind(data: Mapping[str, Any]) -> SpecKind:
    """Experiment, Cluster or Sweep: from an explicit ``kind`` key, else from the keys present."""
    kind = data.get("kind")
    if isinstance(kind, str):
        if kind.lower() in ("experiment", "experimentspec"):
            return "Experiment"
        if kind.lower() in ("cluster", "clusterspec"):
            return "Cluster"
        if kind.lower() in ("sweep", "sweepspec"):
            return "Sweep"
        raise SpecError([SpecProblem("kind", "kind must be Experiment or Cluster (or Sweep, for a sweep)", kind)])
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
    model: type[M],
    base_dir: str | Path | None = None,
    source: str | None = None,
    **overrides: Any,
) -> M:
    """Build an ExperimentSpec from a dict: legacy keys mapped, file references resolved, overrides applied.

    Each legacy mapping is reported as a LegacySpecWarning from the file that holds the key (the spec file,
    or the agent/network/environment/cluster file it references).
    """
    part_sources: dict[str, str] = {}
    with legacy.collecting_notes() as notes:
        try:
            return _experiment_from_dict(model, data, base_dir, source, overrides, part_sources)
        finally:
            legacy.emit_notes(notes, source, part_sources)


def _experiment_from_dict(
    model: type[M],
    data: Mapping[str, Any],
    base_dir: str | Path | None,
    source: str | None,
    overrides: Mapping[str, Any],
    part_sources: dict[str, str],
) -> M:
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    raw = dict(data)
    raw.pop("kind", None)
    # Whole settings are replaced before file references resolve (so `agent="other.yaml"` is read), dotted
    # ones after (so `**{"agent.batch_size": 32}` changes the agent file's content instead of replacing it).
    raw = apply_overrides(raw, {k: v for k, v in overrides.items() if "." not in k})
    problems: list[SpecProblem] = []
    unresolved: set[str] = set()
    # the spec's own file, so that a reference to it is refused (load_spec passes its path as source)
    origin = Path(os.path.realpath(source)) if source and os.path.isfile(source) else None
    for kind in ("environment", "agent", "network", "cluster"):
        value = raw.get(kind)
        if not isinstance(value, str) or (kind == "network" and value == "auto"):
            continue
        try:
            found = _resolve_reference(value, kind, base)
            if kind == "cluster" and found is None and "." not in value and "/" not in value:
                continue  # the name of an existing cluster
            raw[kind] = _load_reference(value, kind, base, origin)
            if found is not None:  # "exp/../agents/a.json" -> "agents/a.json" in the reports
                part_sources[kind] = os.path.normpath(found)
        except SpecError as exc:
            problems += [SpecProblem(kind, p.message, p.value, source) for p in exc.problems]
            unresolved.add(kind)
    if isinstance(raw.get("cluster"), dict) and str(raw["cluster"].get("kind", "")).lower() == "cluster":
        # an inline copy of a cluster file (or of ClusterSpec.to_yaml()) keeps its kind line
        raw["cluster"] = {k: v for k, v in raw["cluster"].items() if k != "kind"}
    # A tfc experiment is recognised by any of its markers, those of the files it names included (a tfc
    # file may hold only name, environment, agent and cluster, each a file name), hence after resolving.
    tfc = legacy.is_legacy_experiment(raw)
    if tfc:
        raw = legacy.convert_legacy_experiment(raw)
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
    raw["code"] = resolve_code_path(raw.get("code"), base)
    try:
        spec = build_model(model, raw, source=source)
    except SpecError as exc:
        # a reference that could not be read is reported once, by the resolver, not again by the model
        problems += [p for p in exc.problems if p.field.split(".")[0] not in unresolved]
        raise SpecError(problems, source=source) from None
    if problems:
        raise SpecError(problems, source=source)
    return spec


def resolve_code_path(code: Any, base_dir: Path) -> Any:
    """A ``code:`` value with its folder made absolute against the spec file's folder (``code: .`` is the spec's
    own folder); anything else unchanged (the model reports what is wrong with it)."""
    if code is None:
        return None
    data = {"path": code} if isinstance(code, str) else code
    path = data.get("path") if isinstance(data, dict) else None
    if not isinstance(path, str) or not path.strip():
        return code
    return {**data, "path": str((base_dir / Path(path).expanduser()).resolve())}


def cluster_from_dict(data: Mapping[str, Any], *, model: type[M], source: str | None = None, **overrides: Any) -> M:
    """Build a ClusterSpec from a dict (legacy tensorforce-client cluster files included) with overrides."""
    raw = dict(data)
    raw.pop("kind", None)
    with legacy.collecting_notes() as notes:
        try:
            converted = legacy.convert_legacy_cluster(raw)
        finally:
            legacy.emit_notes(notes, source)
    return build_model(model, apply_overrides(converted, overrides), source=source)


def check_kind(data: Any, kind: SpecKind | None, source: str) -> SpecKind:
    """The kind of a spec file's contents (a mapping), which must be ``kind`` when one is expected."""
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
    return found


def dump_spec(kind: SpecKind, spec: BaseModel, fmt: Literal["yaml", "json"] = "yaml") -> str:
    """The spec as YAML (or JSON) with its ``kind`` first; loading it back gives an equal spec."""
    data = {"kind": kind, **spec.model_dump(mode="json")}
    if fmt == "json":
        return json.dumps(data, indent=2)
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
