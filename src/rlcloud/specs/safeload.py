"""The one reader of YAML and JSON data: bounded in size, depth, alias expansion and number length.

Every spec (``spec validate``/``show``, ``experiment start``, the files a spec references, legacy JSON,
a run's ``spec.yaml``, ``rlcloud.yaml``, ``--set`` values) is read here, so that hostile text gives a
:class:`~rlcloud.errors.SpecError` naming the file and line, never a hang, a memory blow-up or a
traceback:

* at most :data:`MAX_BYTES` of text are read (a spec is a few kilobytes; ``/dev/zero`` is not one);
* YAML aliases are counted as if expanded: a document whose expanded size passes :data:`MAX_NODES`
  (the "billion laughs" bomb) or whose aliases form a cycle (``&a [*a]``) is refused before any Python
  object is built, so no later step (validation, ``yaml.safe_dump``, pydantic) walks an exponential tree;
* nesting deeper than :data:`MAX_DEPTH` is refused while composing, before Python's recursion limit;
* integer and float literals longer than :data:`MAX_NUMBER_DIGITS` characters are refused (Python
  refuses to convert ints over 4300 digits, and a sexagesimal ``1:2:3:...`` literal costs quadratic time).

Stored records are input too: :mod:`rlcloud.stored` reads them within the same bounds.

Pure data: nothing is executed, only YAML's safe tags are constructed.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from rlcloud.errors import SpecError, SpecProblem, excerpt

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_NUMBER_DIGITS",
    "check_structure",
    "parse_data_text",
    "parse_json_text",
    "read_data_file",
]

#: Largest spec file or text read, in bytes. The bundled specs are under 1 KiB and tensorforce-client's
#: largest is 3 KiB; 256 KiB leaves room for an inline network of thousands of layers while keeping the
#: pure-Python YAML parser well under a second.
MAX_BYTES = 256 * 1024
#: Deepest nesting of mappings and lists. A spec nests about 6 levels (agent -> policy -> network ->
#: layers -> layer -> value); 64 leaves room and stays far below Python's recursion limit of 1000, which
#: the YAML composer, the JSON decoder and pydantic all recurse into.
MAX_DEPTH = 64
#: Most values (scalars, lists and mappings, keys included) in one document, YAML aliases counted as
#: expanded. 256 KiB of plain text holds at most ~130k values; this bound is what stops an alias bomb.
MAX_NODES = 200_000
#: Longest integer or float literal, in characters: Python's own limit for int() of a decimal string.
MAX_NUMBER_DIGITS = 4300


def _problem(message: str, source: str, field: str) -> SpecError:
    return SpecError([SpecProblem(field, message, source=source)], source=source)


# ---------------------------------------------------------------------------------------------- YAML


class SpecLoader(yaml.SafeLoader):
    """SafeLoader with bounds (depth, expanded size, alias cycles, number length), YAML 1.2 floats and no
    duplicate keys.

    PyYAML follows YAML 1.1, where ``learning_rate: 1e-3`` is the *string* "1e-3"; tensorforce-client's
    JSON files and most users write floats that way. PyYAML also lets a repeated key silently replace the
    first one, which hides the setting a user thinks is in force.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        """Compose one node, refusing nesting deeper than MAX_DEPTH before the recursion gets there."""
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise ComposerError(
                    None,
                    None,
                    f"nested more than {MAX_DEPTH} levels deep (a spec needs a handful)",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]  # PyYAML is untyped
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Node | None:
        """Compose the document, then refuse alias cycles and documents too large once aliases expand."""
        node = super().compose_document()
        if node is not None:
            _check_graph(node)
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        """Build a mapping, refusing a key that appears twice."""
        if not isinstance(node, MappingNode):  # `!!map name`: a tag that does not fit the node
            raise ConstructorError(None, None, f"expected a mapping for the tag {node.tag!r}", node.start_mark)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # "<<: *base": explicit keys may override merged ones
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, list | dict):
                raise ConstructorError(
                    None, None, "a key must be a plain value, not a list or mapping", key_node.start_mark
                )
            if key in seen:
                raise ConstructorError(
                    None, None, f"duplicate key {excerpt(key)} (each setting may appear once)", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_document(self, node: Node) -> Any:
        """Build the document; anything a constructor raises becomes a YAML error at the document's start
        (the root's constructors run here, outside construct_object)."""
        try:
            return super().construct_document(node)
        except yaml.YAMLError:
            raise
        except Exception as exc:
            message = f"cannot read this value: {excerpt(str(exc))}"
            raise ConstructorError(None, None, message, node.start_mark) from None

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        """Build one value; a literal Python cannot convert (a date such as 2020-13-45) is a YAML error."""
        if isinstance(node, ScalarNode) and node.tag in _NUMBER_TAGS and len(node.value) > MAX_NUMBER_DIGITS:
            raise ConstructorError(
                None,
                None,
                f"a number literal of {len(node.value)} characters; at most {MAX_NUMBER_DIGITS} are read",
                node.start_mark,
            )
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # ValueError, OverflowError, TypeError, PyYAML's own AttributeError on bad tags
            raise ConstructorError(
                None, None, f"cannot read this value: {excerpt(str(exc))}", node.start_mark
            ) from None


_NUMBER_TAGS = frozenset({"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"})

SpecLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


_CParser: Any = getattr(getattr(yaml, "_yaml", None), "CParser", None) if yaml.__with_libyaml__ else None

if _CParser is not None:

    class _FastSpecLoader(_CParser, SpecLoader):  # type: ignore[misc]  # libyaml's class is untyped
        """SpecLoader over libyaml's C parser (3x faster): the events come from C, while composing (where
        the bounds are checked) and constructing stay the Python code above. libyaml composes in C, so
        its own get_single_node is replaced by the Python composer's."""

        def __init__(self, stream: Any) -> None:
            _CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            Composer.__init__(self)
            self._depth = 0

        get_single_node = Composer.get_single_node
        check_node = Composer.check_node
        get_node = Composer.get_node
        compose_node = SpecLoader.compose_node
        compose_document = SpecLoader.compose_document
        compose_scalar_node = Composer.compose_scalar_node
        compose_sequence_node = Composer.compose_sequence_node
        compose_mapping_node = Composer.compose_mapping_node

    _LOADER: type[SpecLoader] = _FastSpecLoader
else:  # pragma: no cover - PyYAML wheels ship libyaml
    _LOADER = SpecLoader


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_graph(root: Node) -> None:
    """Refuse an alias cycle, a document of more than MAX_NODES values with aliases expanded, or one nested
    deeper than MAX_DEPTH through aliases. Iterative, and each node is measured once (aliases share node
    objects), so the check itself costs the size of the text, not of the expansion."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            on_path.discard(key)
            if size[key] > MAX_NODES:
                raise ComposerError(
                    None,
                    None,
                    f"more than {MAX_NODES} values once aliases are expanded (an alias bomb?)",
                    node.start_mark,
                )
            if depth[key] > MAX_DEPTH:
                raise ComposerError(
                    None, None, f"nested more than {MAX_DEPTH} levels deep through aliases", node.start_mark
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise ComposerError(None, None, "an alias refers to a value that contains it (a cycle)", node.start_mark)
        on_path.add(key)
        stack.append((node, True))
        for kid in _children(node):
            if id(kid) in on_path:
                raise ComposerError(None, None, "an alias refers to a value that contains it (a cycle)", kid.start_mark)
            if id(kid) not in size:
                stack.append((kid, False))


def parse_data_text(text: str, *, source: str = "<string>", field: str = "") -> Any:
    """Parse YAML (a superset of JSON) text within the bounds above; errors name the line and column."""
    if len(text) > MAX_BYTES:
        raise _problem(f"larger than {MAX_BYTES // 1024} KiB; a spec is a few kilobytes", source, field)
    try:
        return yaml.load(text, Loader=_LOADER)  # a SafeLoader subclass: no arbitrary objects
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise _problem(f"{where}{excerpt(problem, 200, quote=False)}", source, field) from None
    except yaml.YAMLError as exc:
        raise _problem(f"invalid YAML/JSON: {excerpt(str(exc), 200, quote=False)}", source, field) from None
    except RecursionError:  # pragma: no cover - the depth bound comes first; kept so no path can crash
        raise _problem(f"nested more than {MAX_DEPTH} levels deep", source, field) from None
    except Exception as exc:  # pragma: no cover - a PyYAML internal error the constructors did not wrap
        raise _problem(f"invalid YAML: {type(exc).__name__}", source, field) from None


# ---------------------------------------------------------------------------------------------- JSON


class _DuplicateKeyError(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(f"duplicate key {excerpt(key)} (each setting may appear once)")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json_text(text: str, *, source: str = "<string>", field: str = "") -> Any:
    """Parse JSON text within the bounds above; a syntax error names the line and column."""
    if len(text) > MAX_BYTES:
        raise _problem(f"larger than {MAX_BYTES // 1024} KiB; a spec is a few kilobytes", source, field)
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        message = f"line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
        raise _problem(message, source, field) from None
    except RecursionError:
        raise _problem(f"nested more than {MAX_DEPTH} levels deep", source, field) from None
    except ValueError as exc:  # duplicate keys, NaN, an int over Python's 4300 digits
        raise _problem(f"invalid JSON: {excerpt(str(exc), 200, quote=False)}", source, field) from None
    check_structure(data, source=source, field=field)
    return data


def check_structure(data: Any, *, source: str = "<data>", field: str = "") -> None:
    """Refuse data nested deeper than MAX_DEPTH or holding more than MAX_NODES values (iteratively, so a
    deep structure cannot exhaust the stack here). For data built in Python rather than read from text."""
    count = 0
    # (value, level, leaving): a container is entered, its items pushed, and left once they are done, so
    # `ancestors` holds exactly the containers on the current path. A value shared by two branches (an
    # agent's network that is also the experiment's) is fine; one that contains itself is a cycle.
    stack: list[tuple[Any, int, bool]] = [(data, 1, False)]
    ancestors: set[int] = set()
    while stack:
        value, level, leaving = stack.pop()
        if leaving:
            ancestors.discard(id(value))
            continue
        count += 1
        if count > MAX_NODES:
            raise _problem(f"more than {MAX_NODES} values", source, field)
        if level > MAX_DEPTH:
            raise _problem(f"nested more than {MAX_DEPTH} levels deep (a spec needs a handful)", source, field)
        if isinstance(value, dict | list | tuple):
            if id(value) in ancestors:
                raise _problem("a value contains itself (a cycle)", source, field)
            ancestors.add(id(value))
            stack.append((value, level, True))
            items = [*value.keys(), *value.values()] if isinstance(value, dict) else list(value)
            stack.extend((item, level + 1, False) for item in items)


# ---------------------------------------------------------------------------------------------- files


def read_text_bounded(path: Path, *, source: str, field: str = "") -> str:
    """Read a regular file of at most MAX_BYTES as UTF-8 text; SpecError otherwise (never blocks on a
    FIFO or reads /dev/zero forever)."""
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise _problem(f"cannot read {path}: Is a directory (a spec is a file)", source, field)
        if not stat.S_ISREG(info.st_mode):
            raise _problem(f"{path} is not a regular file", source, field)
        # O_NONBLOCK: a file swapped for a FIFO after the stat still cannot block the open
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise _problem(f"file not found: {path}", source, field) from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise _problem(f"cannot read {path}: {reason}", source, field) from None
    if len(raw) > MAX_BYTES:
        raise _problem(f"larger than {MAX_BYTES // 1024} KiB; a spec is a few kilobytes", source, field)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _problem(f"cannot read {path}: not UTF-8 text", source, field) from None


def read_data_file(path: str | Path, *, field: str = "") -> Any:
    """Parse a YAML or JSON file (JSON by its .json suffix); errors name the file and the line (SpecError)."""
    path = Path(path)
    source = str(path)
    text = read_text_bounded(path, source=source, field=field)
    if path.suffix.lower() == ".json":
        return parse_json_text(text, source=source, field=field)
    return parse_data_text(text, source=source, field=field)
