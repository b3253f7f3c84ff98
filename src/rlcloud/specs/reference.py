"""The spec reference in Markdown, generated from the models so that it cannot drift from them.

``python -m rlcloud.specs.reference`` prints it; docs/spec-reference.md holds the output, and a test fails when
the file is stale. Every field is listed with its type, default and description, taken from the pydantic
models (their ``Field(description=...)``, constraints and defaults).
"""

from __future__ import annotations

import enum
import inspect
import sys
import types
import typing
from collections.abc import Iterator
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from rlcloud.specs._base import Duration, Frequency, Usd
from rlcloud.specs.cluster import GPU_TYPE_ALIASES, RETIRED_GPU_TYPES, Autoscaling, ClusterSpec, GpuType
from rlcloud.specs.code import CodeSpec
from rlcloud.specs.experiment import EvaluationSpec, ExperimentSpec, Resources, RolesResources

__all__ = ["MODELS", "REGENERATE", "main", "render"]

REGENERATE = "uv run --frozen python -m rlcloud.specs.reference > docs/spec-reference.md"

# In reading order: each spec, then the models nested in it.
MODELS: list[tuple[str, type[BaseModel]]] = [
    ("Experiment", ExperimentSpec),
    ("Experiment", RolesResources),
    ("Experiment", Resources),
    ("Experiment", EvaluationSpec),
    ("Experiment", CodeSpec),
    ("Cluster", ClusterSpec),
    ("Cluster", Autoscaling),
]
_DOCUMENTED: set[type] = {model for _, model in MODELS} | {Frequency, Duration, Usd, GpuType}

# Properties computed from the fields, which a user reads but does not write.
_COMPUTED: dict[type[BaseModel], list[str]] = {
    ExperimentSpec: ["num_envs"],
    ClusterSpec: ["effective_machine_type", "is_regional"],
}


def _anchor(name: str) -> str:
    return name.lower()


def _link(cls: type) -> str:
    return f"[{cls.__name__}](#{_anchor(cls.__name__)})"


def type_name(annotation: Any) -> str:
    """A short, readable rendering of a field's type, linking to the documented models and value types."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None) or annotation is None:
        return "null"
    if annotation is Any:
        return "any"
    if origin is typing.Literal:
        return " \\| ".join(f'"{arg}"' for arg in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_name(arg) for arg in args)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin in (dict, list):
        inner = ", ".join(type_name(arg) for arg in args)
        return f"{origin.__name__}[{inner}]" if inner else origin.__name__
    if isinstance(annotation, type):
        if annotation in _DOCUMENTED:
            return _link(annotation)
        return annotation.__name__
    return str(annotation)


def _constraints(info: FieldInfo) -> str:
    words = []
    for meta in info.metadata:
        for attr, symbol in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            value = getattr(meta, attr, None)
            if value is not None and isinstance(meta, annotated_types.BaseMetadata):
                # 10^12 reads better as 1_000_000_000_000 than as thirteen digits in a row
                shown = f"{value:_}" if isinstance(value, int) and abs(value) >= 100_000 else str(value)
                words.append(f"{symbol} {shown}")
    return ", ".join(words)


def _literal(value: Any) -> str:
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, enum.Enum):
        return f"`{value.value}`"
    if isinstance(value, BaseModel):
        return "all defaults"
    if isinstance(value, dict | list) and not value:
        return f"`{'{}' if isinstance(value, dict) else '[]'}`"
    return f"`{value}`"


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "**required**"
    if info.default_factory is not None:
        return _literal(info.default_factory())  # type: ignore[call-arg]
    if info.default is None and not _allows_none(info.annotation):
        return "derived"  # filled in by a validator, e.g. num_workers by run_mode
    if info.default is PydanticUndefined:
        return "**required**"
    return _literal(info.default)


def _allows_none(annotation: Any) -> bool:
    return annotation is None or type(None) in typing.get_args(annotation)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _model_section(kind: str, model: type[BaseModel]) -> Iterator[str]:
    yield f"### {model.__name__}"
    yield ""
    doc = inspect.cleandoc(model.__doc__ or "")
    if doc:
        yield doc
        yield ""
    yield "| Field | Type | Default | Description |"
    yield "|---|---|---|---|"
    for name, info in model.model_fields.items():
        type_text = type_name(info.annotation)
        limits = _constraints(info)
        if limits:
            type_text += f" ({limits})"
        description = info.description or ""
        extra = info.json_schema_extra
        reason = extra.get("limit_reason") if isinstance(extra, dict) else None
        if reason:
            description += f" Bounded because {reason}."
        yield f"| `{name}` | {type_text} | {_default(info)} | {_cell(description)} |"
    computed = _COMPUTED.get(model, [])
    if computed:
        yield ""
        yield "Computed (read-only):"
        yield ""
        for name in computed:
            prop = getattr(model, name)
            returns = typing.get_type_hints(prop.fget).get("return", Any)
            summary = inspect.cleandoc(prop.__doc__ or "").splitlines()[0]
            yield f"- `{name}` ({type_name(returns)}): {summary}"
    yield ""


def _value_types() -> Iterator[str]:
    yield "## Value types"
    yield ""
    for cls in (Frequency, Duration, Usd):
        yield f"### {cls.__name__}"
        yield ""
        yield inspect.cleandoc(cls.__doc__ or "")
        yield ""
    yield "### GpuType"
    yield ""
    yield inspect.cleandoc(GpuType.__doc__ or "")
    yield ""
    for member in GpuType:
        aliases = [f"`{alias}`" for alias, gpu in GPU_TYPE_ALIASES.items() if gpu is member]
        yield f"- `{member.value}`" + (f" (also {', '.join(aliases)})" if aliases else "")
    yield ""
    for gpu, why in sorted(RETIRED_GPU_TYPES.items()):
        yield f"Refused: `{gpu}` ({why.removeprefix(gpu).strip()})."
    yield ""


def render() -> str:
    """The whole reference as Markdown."""
    lines = [
        "# Spec reference",
        "",
        f"<!-- Generated from the models by `{REGENERATE}`; do not edit by hand. -->",
        "",
        "Specs are YAML or JSON files (`kind: Experiment` or `kind: Cluster`; without `kind` it is inferred) or "
        "keyword arguments: `ExperimentSpec.from_file(path, **overrides)`, where dotted keys such as "
        '`**{"resources.learner.cpu": "2"}` override nested settings. Unknown fields are errors. '
        "In a file, `environment`, `agent`, `network` and `cluster` may name a JSON/YAML file, looked up next to "
        "the spec file, then as a path relative to the project (the directory holding `rlcloud.yaml` or "
        "`.tensorforce.json`, else the working directory), then in `./configs/<kind>s/`, then in rlcloud's "
        "bundled configs; no file outside those "
        "places is read ([security.md](security.md) says what a spec can and cannot do, and the limits). "
        "tensorforce-client's JSON files are read with their meaning kept (or refused/warned by name, see "
        "migrating.md); each legacy setting is reported once as a `LegacySpecWarning` naming the file and key "
        "and saying what it became.",
        "",
    ]
    current = ""
    for kind, model in MODELS:
        if kind != current:
            lines += [f"## {kind}", ""]
            current = kind
        lines += list(_model_section(kind, model))
    lines += list(_value_types())
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> int:
    """Print the reference (``python -m rlcloud.specs.reference``)."""
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
