"""Regenerate rlcloud.specs.tf06's tables from the installed Tensorforce (imports TensorFlow).

``python -m rlcloud.runner.tf06_tables > src/rlcloud/specs/tf06.json`` writes the tables rlcloud.specs.tf06
loads; tests/specs/test_tf06.py checks that the tables there still match.
"""

from __future__ import annotations

import inspect
import re
import sys

__all__ = [
    "documented_types",
    "generate_agent_arguments",
    "generate_argument_types",
    "generate_layer_arguments",
    "main",
]


def generate_agent_arguments() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Read the table from the installed tensorforce (imports TensorFlow: tests and regeneration only)."""
    from rlcloud.runner.compat import import_tensorforce

    import_tensorforce()
    from tensorforce.agents import agents

    table: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for name in sorted(agents):
        required: list[str] = []
        optional: list[str] = []
        for parameter in list(inspect.signature(agents[name].__init__).parameters.values())[1:]:
            if parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
                continue  # **kwargs only carries deprecated names, which tensorforce refuses
            (required if parameter.default is parameter.empty else optional).append(parameter.name)
        table[name] = (tuple(required), tuple(optional))
    return table


def generate_layer_arguments() -> dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]]:
    """Read the layer table from the installed tensorforce (imports TensorFlow: tests and regeneration only)."""
    from rlcloud.runner.compat import import_tensorforce

    import_tensorforce()
    from tensorforce.core import layer_modules

    table: dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]] = {}
    for name in sorted(layer_modules):
        parameters = list(inspect.signature(layer_modules[name].__init__).parameters.values())[1:]
        named = [p for p in parameters if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name != "input_spec"]
        required = tuple(p.name for p in named if p.default is p.empty)
        optional = tuple(p.name for p in named if p.default is not p.empty)
        table[name] = (required, optional, any(p.kind == p.VAR_KEYWORD for p in parameters))
    return table


def documented_types(doc: str | None) -> dict[str, str]:
    """``argument -> type`` as a Tensorforce 0.6.5 docstring gives them (``batch_size (parameter, int > 0):
    ...`` gives ``"parameter, int > 0"``), HTML links removed and a type wrapped over lines joined."""
    found: dict[str, str] = {}
    lines = (doc or "").splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"^\s+(\w+) \((.*)$", line)
        if match is None:
            continue
        name, rest, text, depth = match.group(1), match.group(2), "", 1
        for more in [rest, *(extra.strip() for extra in lines[i + 1 : i + 5])]:
            for k, char in enumerate(more):
                depth += {"(": 1, ")": -1}.get(char, 0)
                if depth == 0:
                    if more[k + 1 : k + 2] == ":":  # "name (type): description", not prose in parentheses
                        found.setdefault(name, " ".join(re.sub(r"<[^>]+>", "", text + more[:k]).split()))
                    break
            else:
                text += more + " "
                continue
            break
    return found


def generate_argument_types() -> dict[str, dict[str, str]]:
    """The documented types of every agent's, layer's and ``Environment.create``'s arguments that
    :func:`rlcloud.specs.tf06.checked_type` can check, keyed ``"agent ppo"``, ``"layer dense"``,
    ``"environment"`` (imports TensorFlow: tests and regeneration only)."""
    from rlcloud.runner.compat import import_tensorforce
    from rlcloud.specs.tf06 import checked_type

    import_tensorforce()
    from tensorforce.agents import agents
    from tensorforce.core import layer_modules
    from tensorforce.environments import Environment

    docs = {
        **{f"agent {name}": agents[name].__doc__ for name in sorted(agents)},
        **{f"layer {name}": layer_modules[name].__doc__ for name in sorted(layer_modules)},
        "environment": Environment.create.__doc__,
    }
    table: dict[str, dict[str, str]] = {}
    for key, doc in docs.items():
        types = {name: text for name, text in documented_types(doc).items() if checked_type(text)}
        if types:
            table[key] = types
    return table


def main() -> int:
    """Print the tables as the text of rlcloud/specs/tf06.json (``python -m rlcloud.runner.tf06_tables >
    src/rlcloud/specs/tf06.json``)."""
    from rlcloud.specs.tf06 import tables_json

    sys.stdout.write(tables_json(generate_agent_arguments(), generate_layer_arguments(), generate_argument_types()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
