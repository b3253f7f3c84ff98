"""Which CPU kernels TensorFlow runs the learner's graphs with: oneDNN for convolutions, Eigen otherwise.

TensorFlow on x86 runs its CPU ops through oneDNN unless ``TF_ENABLE_ONEDNN_OPTS=0`` is set before its first
import. oneDNN pays off for convolutions (a DQN update with the Space Invaders example's network: 77 ms with it, 382
ms without), but
the graphs of a small dense network (CartPole's PPO: a 32 x 4 input, layers of 64) are hundreds of tiny ops
whose oneDNN calls cost more than the arithmetic: without it the same run took 22 % less wall time to solve
CartPole (seeds 1-3, 10.7 -> 8.3 s median) and made every action and update identical
(benchmarks/time_to_solve.py, issue 15; tests/runner/test_kernels.py compares the two).

So the learner turns oneDNN off when the agent's networks are known to hold no convolution or pooling:
every state is flat (a Tensorforce ``auto`` network makes rank-2 states conv1d, rank-3 ones conv2d, and
an int state of rank 1 an embedding then conv1d), and no layer or network in the spec is a convolution,
a pooling, a Keras layer or a class or file of the user's (what those hold is unknown). A
``TF_ENABLE_ONEDNN_OPTS`` in the environment is the user's choice and always wins; once TensorFlow is
imported (a notebook that trained before, a Tensorforce environment built first) nothing changes.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from rlcloud.runner.vector import is_single_spec

__all__ = ["ONEDNN_VARIABLE", "choose_cpu_kernels", "convolution_free"]

logger = logging.getLogger(__name__)

#: TensorFlow reads it once, when it is first imported ("0": Eigen kernels; "1": oneDNN).
ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"

# Layer types (substrings) whose ops oneDNN speeds up, or whose contents rlcloud cannot see.
_CONVOLVING = ("conv", "pool", "keras")
# Keys whose string values name a layer, a network or a class: a dotted path or a file is the user's own.
_NAMING_KEYS = ("type", "network", "layer", "layers")


def convolution_free(network: Any, agent: Mapping[str, Any], states_spec: Mapping[str, Any]) -> bool:
    """Whether the agent's networks are known to be dense only (module docstring).

    ``network`` is the spec's ``network`` ("auto", a list of layers, a dict, or a name), ``agent`` the
    spec's agent arguments, ``states_spec`` the environments' Tensorforce states spec (one component, or
    a dict of components).
    """
    if isinstance(network, str) and network != "auto":
        return False  # a module or a file: its layers are not in the spec
    for key, value in _strings(network, "network"):
        if _unknown_or_convolving(key, value):
            return False
    for key, value in _strings(agent, ""):
        if _unknown_or_convolving(key, value):
            return False
    return all(_flat(spec) for spec in _components(states_spec))


def choose_cpu_kernels(network: Any, agent: Mapping[str, Any], states_spec: Mapping[str, Any]) -> bool:
    """Set ``TF_ENABLE_ONEDNN_OPTS=0`` for this process when the networks are dense only and neither the
    user nor an earlier import has decided already. Returns whether it set it."""
    if ONEDNN_VARIABLE in os.environ:
        logger.debug("%s=%s from the environment", ONEDNN_VARIABLE, os.environ[ONEDNN_VARIABLE])
        return False
    if "tensorflow" in sys.modules:
        logger.debug("TensorFlow is already imported: its CPU kernels stay as they are")
        return False
    if not convolution_free(network, agent, states_spec):
        return False
    os.environ[ONEDNN_VARIABLE] = "0"
    logger.info(
        "dense networks only: TensorFlow's oneDNN CPU kernels are off (faster for small ops; set %s=1 to keep them)",
        ONEDNN_VARIABLE,
    )
    return True


def _strings(value: Any, key: str) -> Iterator[tuple[str, str]]:
    """Every string in a nested spec, with the key it is under (a list's items keep their list's key)."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, Mapping):
        for name, item in value.items():
            yield from _strings(item, str(name))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item, key)


def _unknown_or_convolving(key: str, value: str) -> bool:
    lowered = value.lower()
    if any(word in lowered for word in _CONVOLVING):
        return True
    return key in _NAMING_KEYS and ("." in value or ":" in value or "/" in value)


def _components(states_spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if is_single_spec(states_spec):
        return [states_spec]
    return [spec for value in states_spec.values() if isinstance(value, Mapping) for spec in _components(value)]


def _flat(spec: Mapping[str, Any]) -> bool:
    """A state Tensorforce's auto network feeds to dense layers: rank 0, or rank 1 and not int (an int
    state is embedded first, which adds a dimension)."""
    shape = spec.get("shape", ())
    rank = 1 if isinstance(shape, int) else len(tuple(shape))
    return rank == 0 or (rank == 1 and spec.get("type") != "int")
