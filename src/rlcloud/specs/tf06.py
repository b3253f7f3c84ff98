"""Tensorforce 0.6.5's agent arguments, as data, so that specs are checked without importing TensorFlow.

Importing tensorforce imports TensorFlow (about 10 s of CPU on a small machine), too slow for ``spec
validate`` and for a client that may not even have the runner extra. :data:`AGENT_ARGUMENTS` is generated
from the installed agents' ``__init__`` signatures (rlcloud.runner.tf06_tables), as are :data:`LAYER_ARGUMENTS`
and :data:`ARGUMENT_TYPES`, into tf06.json beside this module; tests/specs/test_tf06.py regenerates them and
fails when they differ (regenerate with ``uv run --frozen python -m rlcloud.runner.tf06_tables >
src/rlcloud/specs/tf06.json``).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

from rlcloud.errors import SpecProblem

__all__ = [
    "AGENT_ARGUMENTS",
    "ARGUMENT_TYPES",
    "LAYER_ARGUMENTS",
    "RUNNER_ARGUMENTS",
    "agent_argument_problems",
    "argument_type_problems",
    "checked_type",
    "environment_argument_problems",
    "layer_argument_problems",
    "layer_flow",
    "tables_json",
    "type_problem",
]

# Arguments the runner passes itself (from the environment and the run mode); a spec must not set them.
RUNNER_ARGUMENTS = frozenset({"states", "actions", "max_episode_timesteps", "parallel_interactions", "fn_act"})

# The tables below are Tensorforce 0.6.5's, generated (see the module docstring) into tf06.json, which ships
# with the package: data, not code. Read when this module is first imported (never by ``import rlcloud``).
_TABLES: dict[str, Any] = json.loads(resources.files("rlcloud.specs").joinpath("tf06.json").read_text(encoding="utf-8"))

#: agent type -> (required arguments, optional arguments), from tensorforce.agents.agents (0.6.5).
AGENT_ARGUMENTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    name: (tuple(required), tuple(optional)) for name, (required, optional) in _TABLES["AGENT_ARGUMENTS"].items()
}

#: layer type -> (required arguments, optional arguments, whether it passes more on to a Keras cell/layer),
#: from tensorforce.core.layer_modules (0.6.5); `input_spec` is Tensorforce's own and left out.
LAYER_ARGUMENTS: dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]] = {
    name: (tuple(required), tuple(optional), bool(more))
    for name, (required, optional, more) in _TABLES["LAYER_ARGUMENTS"].items()
}

#: argument -> its documented type, of every agent, layer and Environment.create (see "argument types" below)
ARGUMENT_TYPES: dict[str, dict[str, str]] = _TABLES["ARGUMENT_TYPES"]


def layer_argument_problems(layer: Mapping[str, Any], field: str) -> list[SpecProblem]:
    """Arguments a Tensorforce 0.6 layer does not take or requires, and 0.4's upper-case padding.

    Tensorforce reports these at build time, some as a bare AssertionError naming no field (``padding:
    "VALID"``). Layer types not in the table (a user's class, ``default``) are not checked.
    """
    layer_type = layer.get("type")
    if not isinstance(layer_type, str) or layer_type not in LAYER_ARGUMENTS:
        return []
    required, optional, passes_more = LAYER_ARGUMENTS[layer_type]
    accepted = {*required, *optional}
    problems: list[SpecProblem] = []
    if not passes_more:
        for key in layer:
            if key != "type" and key not in accepted:
                close = difflib.get_close_matches(key, sorted(accepted), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                problems.append(
                    SpecProblem(
                        f"{field}.{key}", f"Tensorforce 0.6 layer {layer_type!r} takes no argument {key!r}{hint}"
                    )
                )
    for key in required:
        if key not in layer:
            problems.append(SpecProblem(f"{field}.{key}", f"required by Tensorforce 0.6 layer {layer_type!r}"))
    padding = layer.get("padding")
    if isinstance(padding, str) and padding not in ("same", "valid"):
        problems.append(
            SpecProblem(f"{field}.padding", "Tensorforce 0.6 takes 'same' or 'valid' (lower case)", padding)
        )
    types = ARGUMENT_TYPES.get(f"layer {layer_type}", {})
    problems.extend(argument_type_problems(layer, types, field, skip=frozenset({"padding"})))
    return problems


def agent_argument_problems(agent: Mapping[str, Any], field: str = "agent") -> list[SpecProblem]:
    """Arguments of ``agent`` that its Tensorforce 0.6 type does not take, and required ones it lacks.

    Tensorforce reports both only when the agent is built (an unknown one as a bare "invalid argument"),
    after the cluster and the pods are up; this says it before anything starts. Types that are not in the
    table (a user's ``pkg.module:Class``) are not checked.
    """
    agent_type = agent.get("type", agent.get("agent"))
    if not isinstance(agent_type, str) or agent_type not in AGENT_ARGUMENTS:
        return []
    required, optional = AGENT_ARGUMENTS[agent_type]
    accepted = set(required) | set(optional)
    problems: list[SpecProblem] = []
    for key in agent:
        if key in ("type", "agent") or key in RUNNER_ARGUMENTS or key in accepted:
            continue
        close = difflib.get_close_matches(key, sorted(accepted - RUNNER_ARGUMENTS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        problems.append(
            SpecProblem(f"{field}.{key}", f"Tensorforce 0.6 agent {agent_type!r} takes no argument {key!r}{hint}")
        )
    for key in required:
        if key not in RUNNER_ARGUMENTS and agent.get(key) is None:  # absent, or null (`--grid batch_size=,`)
            problems.append(SpecProblem(f"{field}.{key}", f"required by Tensorforce 0.6 agent {agent_type!r}"))
    problems.extend(_learning_rate_problems(agent, field))
    # a number as learning_rate is judged above (Tensorforce's code takes 0.0, which its docstring's "> 0.0" does not)
    skip = frozenset({"learning_rate"}) if isinstance(agent.get("learning_rate"), int | float) else frozenset()
    problems.extend(argument_type_problems(agent, ARGUMENT_TYPES.get(f"agent {agent_type}", {}), field, skip))
    for key in ("optimizer", "baseline_optimizer", "critic_optimizer"):
        if isinstance(agent.get(key), Mapping):
            problems.extend(_learning_rate_problems(agent[key], f"{field}.{key}"))
            if not isinstance(agent[key].get("learning_rate"), int | float):  # numbers: judged just above
                types = {"learning_rate": _LEARNING_RATE}
                problems.extend(argument_type_problems(agent[key], types, f"{field}.{key}"))
    return problems


def _learning_rate_problems(settings: Mapping[str, Any], field: str) -> list[SpecProblem]:
    """A number as ``learning_rate`` that Tensorforce 0.6 refuses only when the agent is built, after the
    cluster and the pods are up: its optimizers take a float >= 0 (tensorforce/core/optimizers/tf_optimizer.py,
    min_value 0.0; core/parameters/constant.py), and an integer fails there as an AttributeError (the
    TensorforceError.dtype it raises does not exist). A schedule (a mapping) is Tensorforce's to judge."""
    value = settings.get("learning_rate")
    if isinstance(value, bool):
        message = "Tensorforce 0.6 takes a float >= 0 such as 1.0e-3, or a schedule (not true/false)"
    elif isinstance(value, int):
        message = "Tensorforce 0.6 takes a float >= 0 such as 1.0e-3 (write 1.0, not 1: an integer fails inside it)"
    elif isinstance(value, float) and value < 0:
        message = "Tensorforce 0.6 takes a float >= 0 such as 1.0e-3 (a learning rate is not negative)"
    else:  # a float >= 0, a schedule (a mapping), or what Tensorforce may resolve itself
        return []
    return [SpecProblem(f"{field}.learning_rate", message, value)]


# What each Tensorforce 0.6.5 layer takes and gives, from its ``default_input_spec`` / ``output_spec``
# (tensorforce/core/layers/*.py): layer type -> (accepted input types, required input rank or None for any,
# output type or None for "the input's", output rank: an int, None for "the input's", or "+1"). Layers whose
# effect depends on their arguments or on other layers (register, retrieve, reuse, block, function, keras,
# reshape) end the check: nothing after them is judged.
_FLOAT = frozenset({"float"})
_ANY = frozenset({"float", "int", "bool"})
LAYER_FLOW: dict[str, tuple[frozenset[str], int | None, str | None, int | str | None]] = {
    "dense": (_FLOAT, 1, "float", 1),
    "linear": (_FLOAT, None, "float", None),
    "embedding": (frozenset({"int", "bool"}), None, "float", "+1"),
    "conv1d": (_FLOAT, 2, "float", 2),
    "conv2d": (_FLOAT, 3, "float", 3),
    "conv1d_transpose": (_FLOAT, 2, "float", 2),
    "conv2d_transpose": (_FLOAT, 3, "float", 3),
    "pool1d": (_FLOAT, 2, "float", 2),
    "pool2d": (_FLOAT, 3, "float", 3),
    "pooling": (_FLOAT, None, "float", 1),
    "flatten": (_ANY, None, None, 1),
    "activation": (_FLOAT, None, "float", None),
    "dropout": (_FLOAT, None, "float", None),
    "clipping": (_FLOAT, None, "float", None),
    "deltafier": (_FLOAT, None, "float", None),
    "sequence": (_FLOAT, None, "float", None),
    "image": (_FLOAT, 3, "float", 3),
    "linear_normalization": (_FLOAT, None, "float", None),
    "exponential_normalization": (_FLOAT, None, "float", None),
    "instance_normalization": (_FLOAT, None, "float", None),
    "batch_normalization": (_FLOAT, None, "float", None),
    "self_attention": (_FLOAT, None, "float", None),
    "rnn": (_FLOAT, 1, "float", 1),
    "gru": (_FLOAT, 1, "float", 1),
    "lstm": (_FLOAT, 1, "float", 1),
    "input_rnn": (_FLOAT, 2, "float", 1),
    "input_gru": (_FLOAT, 2, "float", 1),
    "input_lstm": (_FLOAT, 2, "float", 1),
}


def layer_flow(
    layers: Any, state: Mapping[str, Any], field: str = "network"
) -> tuple[list[SpecProblem], dict[str, Any] | None]:
    """Carry a state spec through layers as Tensorforce's would transform it; name the first that refuses it.

    ``state`` is one Tensorforce state spec (``{"type": "float", "shape": (4,)}``). The type and rank of
    the state are carried through the layers in order; the first layer that would refuse its input is
    returned as a problem (Tensorforce says so only when the agent is built, on the cluster: "Embedding
    input mismatch for argument type: float != ('int', 'bool')"). Also returns the spec (type and rank)
    that leaves the last layer, or None when a layer's effect is not known from its type alone (a
    user's class, register/retrieve, reshape): the check ends there, so nothing is refused that
    Tensorforce might accept.
    """
    if not isinstance(layers, list) or not isinstance(state.get("type"), str):
        return [], None
    kind = str(state["type"])
    shape = state.get("shape", ())
    if not isinstance(shape, tuple | list):
        return [], None
    rank = len(shape)
    for i, layer in enumerate(layers):
        layer_type = layer.get("type") if isinstance(layer, Mapping) else None
        if not isinstance(layer_type, str) or layer_type not in LAYER_FLOW:
            return [], None
        accepts, needs_rank, out_type, out_rank = LAYER_FLOW[layer_type]
        what = f"the {kind} states of rank {rank} that reach it"
        if i == 0:
            what = f"the environment's {kind} states of shape {tuple(shape)}"
        problem = None
        if kind not in accepts:
            hint = ""
            if layer_type == "embedding":
                hint = " (an embedding takes discrete states, e.g. FrozenLake's; use dense layers for float states)"
            elif kind in ("int", "bool"):
                hint = " (discrete states need an embedding layer first)"
            problem = f"takes {' or '.join(sorted(accepts))} input, not {what}{hint}"
        elif needs_rank is not None and rank != needs_rank:
            hint = " (add a flatten layer before it)" if needs_rank == 1 and rank > 1 else ""
            problem = f"takes input of rank {needs_rank}, not {what}{hint}"
        if problem is not None:
            return [
                SpecProblem(f"{field}[{i}].type", f"Tensorforce 0.6 layer {layer_type!r} {problem}", layer_type)
            ], None
        kind = out_type or kind
        rank = rank + 1 if out_rank == "+1" else (rank if out_rank is None else int(out_rank))
    return [], {"type": kind, "shape": (0,) * rank}


# ------------------------------------------------------------------ argument types, as Tensorforce documents them
# Tensorforce 0.6.5 documents each argument's type in its docstring ("batch_size (parameter, int > 0)"); it checks
# them only when the agent is built, on the cluster, after the nodes are paid for (a learning_rate of "abc" or a
# 4,000-digit batch_size failed there with exit 3). ARGUMENT_TYPES holds those documented types (generated, see
# the module docstring); :func:`type_problem` reads that small grammar. An alternative it does not understand
# ("specification", "callable[...]") accepts anything: nothing Tensorforce might take is refused.

#: An optimizer's learning rate, as Tensorforce 0.6.5's optimizers document it (tensorforce/core/optimizers).
_LEARNING_RATE = "parameter, float > 0.0"

#: Largest integer a Tensorforce parameter holds: its integer tensors are TensorFlow int64.
INT64_MAX = 2**63 - 1

#: gymnasium.make's own keywords (gymnasium 1.x signature: ``make(id, max_episode_steps: int | None = None,
#: disable_env_checker: bool | None = None, **kwargs)``); the other keys go to the environment's class.
GYMNASIUM_MAKE_TYPES: dict[str, str] = {"max_episode_steps": "int > 0", "disable_env_checker": "bool"}

_NUMBER_RE = re.compile(
    r"^(?:(?P<low>-?[0-9.]+) (?P<lowop><=?) )?(?P<kind>int|float)"
    r"(?: (?P<op>[<>]=?) (?P<bound>-?[0-9.]+|[a-z_]+))?$"
)


def _split(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside brackets and parentheses."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(char, 0)
        if depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i + len(sep)
    return [*parts, text[start:]]


def _alternatives(text: str) -> list[str]:
    """The alternatives of a documented type: ``"never" | parameter, int > 0`` gives ``"never"``,
    ``parameter`` and ``int > 0`` (``parameter, X``: a schedule, or X)."""
    return [part.strip() for alt in _split(text, " | ") for part in _split(alt, ", ")]


def _matches(value: Any, alt: str) -> bool | None:
    """Whether ``value`` is of the documented alternative ``alt``; None when ``alt`` is not understood."""
    import math

    if alt == "parameter":
        # a parameter is a constant (the alternative after it: "parameter, int > 0") or a schedule, a mapping
        return isinstance(value, Mapping)
    if alt.startswith("dict["):  # per name, or (the prose says) one for all: a mapping, a list, a layer's name
        return None
    if len(alt) >= 2 and alt[0] == alt[-1] and alt[0] in "'\"":
        return isinstance(value, str) and value == alt[1:-1]
    if alt in ("bool", "False", "True"):
        return isinstance(value, bool) and (alt == "bool" or value == (alt == "True"))
    if alt in ("string", "str", "path"):
        return isinstance(value, str)
    for prefix in ("iter[", "list[", "array["):
        if alt.startswith(prefix) and alt.endswith("]"):
            if not isinstance(value, list | tuple):
                return False
            inner = [_matches(item, alt[len(prefix) : -1]) for item in value]
            return None if None in inner else all(inner)
    if alt.startswith("(") and alt.endswith(")"):
        items = [part.strip() for part in _split(alt[1:-1], ", ")]
        if not isinstance(value, list | tuple) or len(value) != len(items):
            return False
        inner = [_matches(item, spec) for item, spec in zip(value, items, strict=True)]
        return None if None in inner else all(inner)
    match = _NUMBER_RE.match(alt)
    if match is None:
        return None
    kind = match["kind"]
    if isinstance(value, bool) or not isinstance(value, int | float) or (kind == "int" and isinstance(value, float)):
        return False
    if isinstance(value, int) and abs(value) > INT64_MAX:
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    ok = True
    if match["low"] is not None:
        low = float(match["low"])
        ok = low <= value if match["lowop"] == "<=" else low < value
    bound = match["bound"]
    if bound is not None and bound[0] in "-0123456789":
        b, op = float(bound), match["op"]
        ok = ok and {">": value > b, ">=": value >= b, "<": value < b, "<=": value <= b}[op]
    return ok


def checked_type(text: str) -> bool:
    """Whether :func:`type_problem` can judge a value against the documented type ``text``: every alternative
    is understood (one it does not understand could take anything)."""
    return all(_matches(_NOT_A_VALUE, alt) is not None for alt in _alternatives(text))


_NOT_A_VALUE = object()


def type_problem(value: Any, text: str) -> str | None:
    """What is wrong with ``value`` as an argument Tensorforce documents as ``text`` (None: nothing, or not
    judged). A whole number past 64 bits is named as such."""
    if value is None:  # Tensorforce's default for an optional argument (a required one is named elsewhere)
        return None
    results = [_matches(value, alt) for alt in _alternatives(text)]
    if None in results or any(results):
        return None
    said = f"Tensorforce 0.6 documents it as ({text})"
    if "parameter" in text:
        said += " (a parameter: such a constant, or a schedule as a mapping)"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT64_MAX:
        return f"{said}; an integer of at most {INT64_MAX:,} (TensorFlow's int64)"
    return said


def argument_type_problems(
    settings: Mapping[str, Any], table: Mapping[str, str], field: str, skip: frozenset[str] = frozenset()
) -> list[SpecProblem]:
    """A problem for every argument of ``settings`` whose value is not of the type ``table`` documents for it."""
    problems = []
    for key, text in table.items():
        if key in settings and key not in skip:
            message = type_problem(settings[key], text)
            if message is not None:
                problems.append(SpecProblem(f"{field}.{key}", message, settings[key]))
    return problems


def environment_argument_problems(environment: Mapping[str, Any], gym: bool) -> list[SpecProblem]:
    """Arguments of an environment spec of the wrong type: gymnasium.make's own (``max_episode_steps``) for a
    gym environment, ``Environment.create``'s (``max_episode_timesteps``) for a Tensorforce one."""
    table = GYMNASIUM_MAKE_TYPES if gym else ARGUMENT_TYPES.get("environment", {})
    return argument_type_problems(environment, table, "environment")


def tables_json(
    agent_arguments: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]],
    layer_arguments: Mapping[str, tuple[tuple[str, ...], tuple[str, ...], bool]],
    argument_types: Mapping[str, Mapping[str, str]],
) -> str:
    """The text of tf06.json for these tables: one agent, layer or argument-type group a line, so that a
    regeneration's diff shows what changed (``python -m rlcloud.runner.tf06_tables`` writes it)."""
    tables: dict[str, Mapping[str, Any]] = {
        "AGENT_ARGUMENTS": agent_arguments,
        "LAYER_ARGUMENTS": layer_arguments,
        "ARGUMENT_TYPES": argument_types,
    }
    parts = []
    for key, table in tables.items():
        rows = ",\n".join(f"  {json.dumps(name)}: {json.dumps(value)}" for name, value in table.items())
        parts.append(f"{json.dumps(key)}: {{\n{rows}\n}}")
    return "{\n" + ",\n".join(parts) + "\n}\n"
