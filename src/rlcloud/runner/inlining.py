"""Tensorforce's nested functions traced inline: the same computation, traced and started in half the time.

Every method of a Tensorforce module that builds graph (``@tf_function`` in ``tensorforce/core/module.py``)
is its own ``tf.function``. Called while another function is traced (the policy's network inside ``act``,
the optimizer steps, the loss and its gradient inside ``observe``'s update), each of those is traced as a
separate function graph and called through a function-call op: TensorFlow builds a forward/backward
function pair for every such call the gradient passes through, and Grappler inlines them all again when the
outer function first runs. Profiled on the README's PPO agent (issue 15), that machinery was most of the
3.0 s of tracing ``observe`` and much of the 1.5 s of its first run, paid by every run of every trial.

:func:`inline_nested_functions` makes a nested call run the method's Python body in the calling graph
instead, when that gives the body exactly what the function call would have given it: tensors of the
input signature's dtypes and static shapes (otherwise the call goes through ``tf.function`` as before).
The ops are the same ops, and what decides their results is kept equal:

* random ops without an explicit seed take their op seed from a per-graph counter, and a nested function
  graph starts its own counter at 0: the inlined body gets a counter starting at 0 too, and the caller's
  counter is restored after it, so every random op gets the seed it would have got;
* the order of stateful ops (variable reads and writes, the optimizers' assignments) follows program order
  under the automatic control dependencies of the calling function, as it does inside a called function.

What can differ is float rounding: with the ops in one graph, Grappler's remapper fuses a few more of them
(and with several action components the gradients' sums can be added in another order), so an update's
last bits may differ from Tensorforce's. tests/runner/test_inlining.py trains in two fresh processes, with
and without inlining: with the remapper off, every action and the weights after 10+ updates are equal bit
for bit for PPO with a critic, DQN with a replay memory and exploration, and Gaussian actions with
exploration noise; with TensorFlow's defaults the README's agent plays the same episodes through the
Trainer (and solved CartPole at the same timestep as before for every seed the time-to-solve benchmark
runs). ``RLCLOUD_INLINE_FUNCTIONS=0`` keeps Tensorforce's nested graphs, bit for bit what it computes alone.

Top-level calls (``act``, ``observe``, ``independent_act`` from Python) are unchanged ``tf.function`` calls;
the functions stay ``tf.function`` objects (saving and ``get_concrete_function`` work as before). Applied
only in the runner's process (``Trainer.setup``), where rlcloud builds the agents.
"""

from __future__ import annotations

import contextlib
import logging
import types
from collections.abc import Iterator
from typing import Any

from rlcloud import runenv
from rlcloud.runenv import RunnerEnv

__all__ = ["INLINE_VARIABLE", "inline_nested_functions", "is_inlining"]

logger = logging.getLogger(__name__)

#: "0" keeps Tensorforce's nested functions as separate function graphs (bit for bit what Tensorforce
#: alone computes); anything else, or unset, traces them inline.
INLINE_VARIABLE = runenv.INLINE_FUNCTIONS

_state = {"installed": False, "enabled": False}


def is_inlining() -> bool:
    """Whether functions Tensorforce traces from now on have their nested functions inline."""
    return _state["enabled"]


def inline_nested_functions(enabled: bool | None = None) -> bool:
    """Trace Tensorforce's nested module functions inline from now on, or not; returns whether it is on.

    ``enabled=None`` follows :data:`INLINE_VARIABLE` (on unless it is "0"). Applies to what is traced after
    the call, i.e. to agents whose act/observe have not run yet. Leaves Tensorforce as it is (and returns
    False) when this TensorFlow lacks what keeping the random ops' seeds needs.
    """
    if enabled is None:
        enabled = RunnerEnv.from_env().inline_functions is not False
    if enabled and not _state["installed"]:
        _state["installed"] = _install()
        if _state["installed"]:
            logger.info(
                "Tensorforce's nested functions are traced inline (traces in about half the time; %s=0 keeps "
                "them separate, bit for bit as Tensorforce computes)",
                INLINE_VARIABLE,
            )
    _state["enabled"] = enabled and _state["installed"]
    return _state["enabled"]


def _install() -> bool:
    """Give tensorforce/core/module.py a ``tf.function`` whose functions inline their nested calls."""
    from rlcloud.runner.compat import import_tensorforce

    import_tensorforce()
    import tensorflow as tf
    from tensorforce.core import module

    try:
        from tensorflow.python.framework import random_seed

        seeds = random_seed._graph_to_seed_dict
        function_class = type(tf.function(lambda: None, input_signature=(), autograph=False))
    except (ImportError, AttributeError) as error:
        logger.debug("Tensorforce's nested functions stay separate function graphs: %s", error)
        return False

    class InliningFunction(function_class):  # type: ignore[misc, valid-type]
        """A ``tf.function`` whose calls from inside another traced function run its body there."""

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            if kwargs or not _state["enabled"] or not tf.inside_function():
                return super().__call__(*args, **kwargs)
            inputs = _signature_inputs(tf, self.input_signature, args)
            if inputs is None:
                return super().__call__(*args)
            with _fresh_seed_counter(seeds, tf.compat.v1.get_default_graph()):
                return self.python_function(*inputs)

    def function(*args: Any, **kwargs: Any) -> Any:
        created = tf.function(*args, **kwargs)
        if type(created) is function_class:
            created.__class__ = InliningFunction
        return created

    # tensorforce/core/module.py creates its functions with `tf.function(...)`: that module alone sees a
    # TensorFlow whose `function` makes inlining ones; every other name is TensorFlow's own.
    proxy = types.ModuleType(tf.__name__)
    proxy.__dict__.update(tf.__dict__)
    proxy.__getattr__ = lambda name: getattr(tf, name)  # type: ignore[method-assign]  # lazily loaded names
    proxy.function = function  # type: ignore[attr-defined]
    module.tf = proxy
    return True


def _signature_inputs(tf: Any, signature: Any, args: tuple[Any, ...]) -> list[Any] | None:
    """``args`` as the traced function's body would receive them, or None where that is not certain.

    Tensors must already have the signature's dtype and static shape (the body sees placeholders of the
    signature, and Tensorforce's Python branches on static shapes); Python numbers and numpy values become
    constants of the signature's dtype, as ``tf.function`` converts them.
    """
    if signature is None:
        return None
    specs = tf.nest.flatten(signature)
    try:
        flat = tf.nest.flatten(args)
    except (TypeError, ValueError):
        return None
    if len(flat) != len(specs) or not all(isinstance(spec, tf.TensorSpec) for spec in specs):
        return None
    converted = []
    for spec, arg in zip(specs, flat, strict=True):
        if isinstance(arg, tf.Tensor):
            if arg.dtype != spec.dtype or not _same_static_shape(arg.shape, spec.shape):
                return None
            converted.append(arg)
        elif isinstance(arg, (bool, int, float)) or type(arg).__module__ == "numpy":
            try:
                tensor = tf.convert_to_tensor(arg, dtype=spec.dtype)
            except (TypeError, ValueError):
                return None
            if not _same_static_shape(tensor.shape, spec.shape):
                return None
            converted.append(tensor)
        else:  # variables, composite tensors: the function call knows how to pass those
            return None
    try:
        packed = tf.nest.pack_sequence_as(list(signature), converted)
    except (TypeError, ValueError):
        return None
    return list(packed)


def _same_static_shape(shape: Any, spec_shape: Any) -> bool:
    if shape.rank is None or spec_shape.rank is None:
        return shape.rank is None and spec_shape.rank is None
    return bool(shape.as_list() == spec_shape.as_list())


@contextlib.contextmanager
def _fresh_seed_counter(seeds: Any, graph: Any) -> Iterator[None]:
    """Random ops created inside count their op seeds from 0, as in the function graph of their own they
    would have had; the calling graph's count continues afterwards as if the body had not been there."""
    missing = object()
    saved = seeds.get(graph, missing)
    seeds[graph] = 0
    try:
        yield
    finally:
        if saved is missing:
            seeds.pop(graph, None)
        else:
            seeds[graph] = saved
