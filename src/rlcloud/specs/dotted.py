"""What a spec may name that is code: dotted class paths, and nothing Tensorforce would evaluate.

A spec is data. It may name a class by dotted path (``environment: {type: "pkg.mod:Class"}``, a
Tensorforce agent, network or layer class as ``"pkg.mod.Class"``); the runner imports that module and
instantiates the class only after checking that it is a class of the accepted kind (runner/envs.py,
``resolve_class``). This module holds the checks that need no import, so that the spec models apply them
everywhere:

* a dotted path is identifiers joined by dots, with an optional ``:Class``; a module named ``__main__``
  (importing it runs a program) or one of the few standard-library modules that act when imported
  (:data:`REFUSED_MODULES`) is refused, since importing is the one thing done with a name before the check;
* Tensorforce evaluates some strings as Python (a ``function`` layer's ``function``, an environment's
  ``reward_shaping``, a bare string where a layer is expected): :func:`code_strings` finds the strings a
  spec holds in those places, or anything that reads as a call, and the spec refuses them.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Iterator
from typing import Any

from rlcloud.errors import excerpt

__all__ = [
    "DOTTED_RE",
    "REFUSED_MODULES",
    "DottedPathError",
    "check_dotted_path",
    "code_strings",
    "resolve_dotted_class",
    "split_dotted_path",
]

log = logging.getLogger(__name__)

#: ``pkg.mod:Class`` or ``pkg.mod.Class``: identifiers only, so a path cannot smuggle an expression.
DOTTED_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*([:.][A-Za-z_]\w*)$")

#: Standard-library modules whose import does something (opens a browser, starts a GUI, prints): a spec
#: may not name them. Any module path with a ``__main__`` part is refused too.
REFUSED_MODULES = frozenset({"antigravity", "this", "idlelib", "turtledemo", "__hello__", "__phello__"})

#: Longest dotted path considered: Python identifiers joined by dots; longer is not a class name.
_MAX_PATH = 300

# Keys whose string value Tensorforce passes to eval(): the function layer and environment reward shaping.
_EVALUATED_KEYS = frozenset({"function", "reward_shaping"})
_INSTEAD = {
    "function": "use a layer type, or your own Layer class by dotted path",
    "reward_shaping": "shape rewards in your own environment class, named by dotted path",
}
# A string that could run code when evaluated needs a call: "(" (or a lambda, which needs one to run).
_CALL_RE = re.compile(r"\(|\blambda\b")


def split_dotted_path(path: str) -> tuple[str, str]:
    """``"pkg.mod:Class"`` or ``"pkg.mod.Class"`` -> ``("pkg.mod", "Class")``."""
    if ":" in path:
        module, _, attr = path.partition(":")
    else:
        module, _, attr = path.rpartition(".")
    return module, attr


def check_dotted_path(path: Any) -> str | None:
    """Why ``path`` cannot name a class in a spec, or None when it may (the kind is checked on import)."""
    if not isinstance(path, str) or len(path) > _MAX_PATH or not DOTTED_RE.match(path):
        return "expected a dotted class path 'package.module:Class' (identifiers joined by dots)"
    module, _ = split_dotted_path(path)
    parts = module.split(".")
    if "__main__" in parts:
        return "a __main__ module runs a program when imported; name the module that defines the class"
    if parts[0] in REFUSED_MODULES:
        return f"the module {parts[0]!r} acts when imported; it holds no environment or agent class"
    return None


class DottedPathError(ValueError):
    """A dotted path that does not name a class of the accepted kind; the message says why."""


# What a dotted path in each place of a spec must name: base classes by (module prefix, name), compared on
# the MRO so that no check needs TensorFlow or tensorforce imported; methods a duck-typed class defines.
_ACCEPTED_KINDS: dict[str, tuple[tuple[tuple[str, str], ...], tuple[str, ...], str]] = {
    "environment": (
        (("gymnasium", "Env"), ("tensorforce.environments", "Environment")),
        ("states", "actions", "reset", "execute"),
        "an environment class: a gymnasium.Env or tensorforce Environment subclass, or a class defining "
        "states(), actions(), reset() and execute()",
    ),
    "agent": ((("tensorforce.agents", "Agent"),), (), "a tensorforce Agent subclass"),
    "network": ((("tensorforce.core.networks", "Network"),), (), "a tensorforce Network subclass"),
    "layer": ((("tensorforce.core.layers", "Layer"),), (), "a tensorforce Layer subclass"),
}


def _is_accepted_class(obj: type, kind: str) -> bool:
    bases, methods, _ = _ACCEPTED_KINDS[kind]
    for cls in obj.__mro__[1:]:  # a strict subclass: naming gymnasium.Env itself builds nothing useful
        module = getattr(cls, "__module__", "") or ""
        for prefix, name in bases:
            if cls.__name__ == name and (module == prefix or module.startswith(prefix + ".")):
                return True
    return bool(methods) and all(callable(getattr(obj, m, None)) for m in methods)


def resolve_dotted_class(path: str, kind: str, *, missing_ok: bool = False) -> type | None:
    """Import the module of ``path`` and return the class it names, checked to be of ``kind``
    ("environment", "agent", "network" or "layer"); raises DottedPathError saying why not.

    Importing the module is the only thing done with the name, and nothing is called: the object must be
    a class, and of the accepted kind (an environment: a gymnasium.Env or tensorforce Environment subclass,
    or a class with states/actions/reset/execute), so ``subprocess:Popen``, ``os:system`` or
    ``builtins:eval`` are refused, never run. With ``missing_ok`` a module that cannot be imported here
    gives None: the client may lack the user's package, and the runner checks again (without it) before
    it builds anything.
    """
    why_not = check_dotted_path(path)
    if why_not:
        raise DottedPathError(why_not)
    module_name, attr = split_dotted_path(path)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if missing_ok:
            log.debug("cannot import %s here; the runner checks it before building anything", module_name)
            return None
        raise DottedPathError(f"cannot import module {module_name!r}: {excerpt(str(exc), 200, quote=False)}") from None
    except Exception as exc:  # the module's own code failed while importing
        raise DottedPathError(
            f"importing module {module_name!r} failed: {type(exc).__name__}: {excerpt(str(exc), 200, quote=False)}"
        ) from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise DottedPathError(f"module {module_name!r} has no class {attr!r}")
    accepted = _ACCEPTED_KINDS[kind][2]
    if not isinstance(obj, type):
        raise DottedPathError(f"{path} is a {type(obj).__name__}, not a class; it must name {accepted}")
    if not _is_accepted_class(obj, kind):
        raise DottedPathError(f"{path} is not {accepted}; it is refused, never instantiated")
    return obj


def code_strings(data: Any, field: str) -> Iterator[tuple[str, str]]:
    """``(field path, why)`` for each string in ``data`` that Tensorforce would evaluate as Python, or that
    reads as code (a call or a lambda). Iterative: the reader bounds the depth, not the stack here."""
    stack: list[tuple[Any, str, str | None]] = [(data, field, None)]
    while stack:
        value, path, key = stack.pop()
        if isinstance(value, dict):
            stack.extend((item, f"{path}.{k}", str(k)) for k, item in value.items())
        elif isinstance(value, list):
            stack.extend((item, f"{path}[{i}]", None) for i, item in enumerate(value))
        elif isinstance(value, str):
            if key in _EVALUATED_KEYS:
                instead = _INSTEAD.get(key, "")
                yield path, f"Tensorforce evaluates a string {key} as Python code, and a spec is data: {instead}"
            elif _CALL_RE.search(value):
                yield path, "looks like Python code (a call or a lambda); a spec is data and holds none"
