"""What the command handlers share at run time: the console, --set parsing, data output.

Loaded when a handler runs, never for `rlcloud --help`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


def console(stderr: bool = False) -> Any:
    """A rich console for the CLI's own words; data goes through :func:`text` or ``markup=False``."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def text(value: object) -> str:
    """``value`` as rich markup that shows it verbatim: ``rlcloud[runner]`` and ``image:[tag]`` survive."""
    from rich.markup import escape

    return escape(str(value))


def parse_sets(items: Sequence[str] | None) -> dict[str, Any]:
    """--set KEY=VALUE pairs; VALUE is read as YAML (numbers, booleans, lists) so types come out right."""
    from rlcloud.errors import SpecError, SpecProblem

    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise SpecError([SpecProblem("--set", "expected KEY=VALUE, e.g. --set num_workers=8", item)])
        from rlcloud.specs.loading import parse_data_text

        try:
            # the spec files' own YAML reading, so "1e-3" is a float here as it is in a file
            out[key.strip()] = parse_data_text(raw, field=f"--set {key.strip()}") if raw.strip() else None
        except SpecError:
            out[key.strip()] = raw
    return out


def output_format(args: argparse.Namespace, default: str = "table") -> str:
    """The -o/--output given (before or after the command words), else ``default``."""
    return getattr(args, "output", None) or default


def print_data(data: object, fmt: str) -> None:
    """JSON or YAML of plain data on stdout (for -o json|yaml)."""
    if fmt == "yaml":
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
        return
    import json

    print(json.dumps(data, indent=2, default=str))
