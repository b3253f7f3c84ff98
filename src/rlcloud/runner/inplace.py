"""Tensorforce's buffer writes made in place: a replay memory's cost no longer grows with its size (issue 31).

Tensorforce 0.6.5 writes into every buffer variable by rebuilding it: ``value = tf.tensor_scatter_nd_update(
tensor=buffer, indices=..., updates=...)`` then ``buffer.assign(value=value)`` (its own in-place versions are
left commented out next to them). The replay memory's states buffer of the Space Invaders example is
10,000 x 84 x 84 float32 (282 MB): each write of 4 timesteps copied it at least once. It got three to four
times worse once TensorFlow's copy-on-read mode set in: the first sparse access to a resource variable (the
first update's ``tf.gather`` of a batch, or any scatter) switches that variable to copy-on-read, after which
every dense read (``ReadVariableOp``, e.g. the ``tensor=buffer`` input of the rebuild above, or ``x[parallel]``)
copies the whole variable. Measured on this machine with TF 2.21, for a 282 MB variable: rebuild + assign
140 ms, 240-380 ms in copy-on-read mode; ``Variable.scatter_nd_update`` 0.3-1 ms; a dense read of one row
80-100 ms in copy-on-read mode, ``tf.gather`` of one row 1 ms. (In the example the first update comes right
after the first episode ends: for ``update_frequency`` in timesteps, Tensorforce's ``core_observe`` sets the
start to 0 once an episode has ended, whatever ``start_updating`` says. That is "slower after the first
episode" of the issue; it is Tensorforce's behaviour and left as it is.)

:func:`apply_inplace_buffers` rewrites, from their source, the Tensorforce methods that write into or read
from buffers (the replay/recent memories' ``enqueue`` and ``reset``, the model's ``core_act``,
``core_observe`` and ``_nonterminal_experience``) so that

* every ``tensor_scatter_nd_update`` of a variable followed by the assignment of the result to that variable
  becomes ``variable.scatter_nd_update(indices, updates)`` (the same values written: the indices of one write
  never repeat);
* every read of rows of a buffer through a slice of the variable (``x[parallel]``, ``x[parallel, :n]``,
  ``terminal_indices[a:b]``) becomes a ``tf.gather``/``tf.gather_nd`` of those rows, which reads only them.

No arithmetic changes and no random op is added or removed (their op seeds stay the same), so a run computes
bit for bit what Tensorforce computes alone (tests/runner/test_inplace.py trains both and compares the actions
and weights). Each rewrite is checked to have matched the number of places it expects in Tensorforce 0.6.5;
a method that does not match is left as it is (logged), so another Tensorforce only loses the speed.
``RLCLOUD_INPLACE_BUFFERS=0`` leaves every method as Tensorforce has it. Applied by the compatibility layer
(runner/compat.py) when it first imports Tensorforce.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
import textwrap
from typing import Any

from rlcloud import runenv
from rlcloud.runenv import RunnerEnv

__all__ = ["INPLACE_VARIABLE", "apply_inplace_buffers", "patched_methods"]

logger = logging.getLogger(__name__)

#: "0" leaves Tensorforce's buffer writes as they are (rebuild + assign); anything else, or unset, rewrites them.
INPLACE_VARIABLE = runenv.INPLACE_BUFFERS

_QUEUE = "tensorforce.core.memories.queue"
_MODEL = "tensorforce.core.models.tensorforce"

# (module, class, method) -> the number of (in-place writes, row reads) the rewrite must make in 0.6.5.
_METHODS: dict[tuple[str, str, str], tuple[int, int]] = {
    (_QUEUE, "Queue", "reset"): (2, 1),
    (_QUEUE, "Queue", "enqueue"): (4, 2),
    (_MODEL, "TensorforceModel", "core_act"): (4, 0),
    (_MODEL, "TensorforceModel", "core_observe"): (7, 7),
    (_MODEL, "TensorforceModel", "_nonterminal_experience"): (0, 5),
}

_patched: list[str] = []

# `value = tf.tensor_scatter_nd_update(tensor=V, indices=I, updates=U)` and, on the next line, a statement
# that assigns `value` to the same V: the pair becomes one in-place scatter into V.
_REBUILD = re.compile(
    r"(?P<indent>[ ]*)value = tf\.tensor_scatter_nd_update\(\s*tensor=(?P<var>[^,]+?),\s*"
    r"indices=(?P<indices>[^,]+?),\s*updates=(?P<updates>[^,()]+?)\s*\)\n"
    r"(?P<indent2>[ ]*)(?P<before>[^\n]*?)(?P=var)\.assign\(value=value\)(?P<after>[^\n]*)\n"
)
# Row reads of a variable: `tf.gather(params=X[parallel], indices=Y)`, `X[parallel, :N]`, `X[A: B]` of
# terminal_indices.
_GATHER_ROW = re.compile(r"tf\.gather\(params=(?P<var>[\w.]+)\[parallel\], indices=(?P<indices>[^()]+?)\)")
_SLICE_ROW = re.compile(r"(?P<var>\b[\w.]+)\[parallel, :(?P<limit>[^\]]+)\]")
_SLICE_TERMINALS = re.compile(r"self\.terminal_indices\[(?P<start>[^:\]]*):(?P<limit>[^\]]+)\]")


def _row_gather(tf: Any, variable: Any, parallel: Any, indices: Any) -> Any:
    """``variable[parallel]`` at ``indices`` (a vector), read as those rows only (``ResourceGatherNd``)."""
    rows = tf.fill(dims=tf.shape(input=indices), value=parallel)
    return tf.gather_nd(params=variable, indices=tf.stack(values=(rows, indices), axis=1))


def rewrite_source(source: str) -> tuple[str, int, int]:
    """The method's source with the in-place writes and row reads, and how many of each were rewritten."""
    # Commented-out code (Tensorforce keeps its old in-place variants as comments) must not match.
    source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#")) + "\n"

    def write(match: re.Match[str]) -> str:
        indices, updates = match["indices"].strip(), match["updates"].strip()
        scatter = f"{match['var']}.scatter_nd_update(indices={indices}, updates={updates})"
        return f"{match['indent2']}{match['before']}{scatter}{match['after']}\n"

    source, writes = _REBUILD.subn(write, source)
    source, gathers = _GATHER_ROW.subn(
        lambda m: f"_rlcloud_row_gather(tf, {m['var']}, parallel, {m['indices'].strip()})", source
    )
    source, slices = _SLICE_ROW.subn(
        lambda m: f"_rlcloud_row_gather(tf, {m['var']}, parallel, tf.range({m['limit'].strip()}))", source
    )
    source, terminals = _SLICE_TERMINALS.subn(
        lambda m: (
            "tf.gather(params=self.terminal_indices, indices=tf.range("
            f"{m['start'].strip() or '0'}, {m['limit'].strip()}))"
        ),
        source,
    )
    return source, writes, gathers + slices + terminals


def _undecorated(attribute: Any) -> Any:
    """The plain function under Tensorforce's ``tf_function`` decorator (or the attribute itself)."""
    code = getattr(attribute, "__code__", None)
    if code is not None and "function" in code.co_freevars and attribute.__closure__:
        return attribute.__closure__[code.co_freevars.index("function")].cell_contents
    return attribute


def _rewrite_method(module: Any, cls: Any, name: str, expected: tuple[int, int]) -> bool:
    original = _undecorated(cls.__dict__[name])
    lines = textwrap.dedent(inspect.getsource(original)).splitlines(keepends=True)
    decorators = []
    while lines and lines[0].startswith("@"):
        decorators.append(lines.pop(0).strip()[1:])
    source, writes, reads = rewrite_source("".join(lines))
    if (writes, reads) != expected:
        logger.warning(
            "Tensorforce's %s.%s is not the 0.6.5 code rlcloud rewrites (%d in-place writes and %d row reads "
            "matched, %d and %d expected): its buffer writes stay as they are",
            cls.__name__,
            name,
            writes,
            reads,
            *expected,
        )
        return False
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<rlcloud in-place {inspect.getsourcefile(original)}>", "exec"), module.__dict__, namespace)
    function = namespace[name]
    function.__qualname__ = original.__qualname__  # Tensorforce's decorator keys its graphs on it
    function.__module__ = original.__module__
    for decorator in reversed(decorators):
        function = eval(decorator, module.__dict__)(function)
    setattr(cls, name, function)
    return True


def apply_inplace_buffers(enabled: bool | None = None) -> list[str]:
    """Rewrite Tensorforce's buffer methods (module docstring) once; returns the methods rewritten.

    ``enabled=None`` follows :data:`INPLACE_VARIABLE` (on unless it is "0"). Call it after Tensorforce is
    imported (the compatibility layer does) and before agents are built: an agent whose functions are
    already traced keeps what it traced.
    """
    if enabled is None:
        enabled = RunnerEnv.from_env().inplace_buffers is not False
    if not enabled or _patched:
        return list(_patched)
    import tensorforce

    if getattr(tensorforce, "__version__", None) != "0.6.5":
        logger.debug("Tensorforce %s: its buffer writes stay as they are", getattr(tensorforce, "__version__", "?"))
        return []
    for (module_name, class_name, name), expected in _METHODS.items():
        module = importlib.import_module(module_name)
        module.__dict__.setdefault("_rlcloud_row_gather", _row_gather)
        try:
            done = _rewrite_method(module, getattr(module, class_name), name, expected)
        except (OSError, SyntaxError, KeyError, AttributeError) as error:  # no source, another layout
            logger.warning("Tensorforce's %s.%s could not be rewritten: %s", class_name, name, error)
            done = False
        if done:
            _patched.append(f"{class_name}.{name}")
    logger.debug("Tensorforce's buffers are written in place: %s", ", ".join(_patched))
    return list(_patched)


def patched_methods() -> list[str]:
    """The Tensorforce methods :func:`apply_inplace_buffers` has rewritten in this process."""
    return list(_patched)
