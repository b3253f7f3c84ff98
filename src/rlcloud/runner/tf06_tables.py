"""Regenerate rlcloud.specs.tf06's tables from the installed Tensorforce (imports TensorFlow).

``python -m rlcloud.runner.tf06_tables`` prints both tables as Python source to paste into
src/rlcloud/specs/tf06.py; tests/specs/test_tf06.py checks that the tables there still match.
"""

from __future__ import annotations

import inspect
import sys

__all__ = ["generate_agent_arguments", "generate_layer_arguments", "main"]


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


def main() -> int:
    """Print both tables as Python source (``python -m rlcloud.specs.tf06``), to paste into this module."""
    sys.stdout.write("AGENT_ARGUMENTS\n")
    for name, (required, optional) in generate_agent_arguments().items():
        sys.stdout.write(f"    {name!r}: (\n        {required!r},\n        {optional!r},\n    ),\n")
    sys.stdout.write("LAYER_ARGUMENTS\n")
    for name, (required, optional, more) in generate_layer_arguments().items():
        sys.stdout.write(f"    {name!r}: ({required!r}, {optional!r}, {more!r}),\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
