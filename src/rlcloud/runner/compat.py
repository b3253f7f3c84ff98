"""Tensorforce 0.6.5 on the current TensorFlow, tf-keras and numpy 2.

Tensorforce's last release (Aug 2021) targets TF 2.6 and numpy 1.19. On TF 2.13-2.21 with tf-keras and
numpy 2 it needs five adjustments (see FACTS.md) plus a sixth found here for checkpoint restore, all
applied here, once, around the first import of tensorforce:

1. ``tensorflow.python.training.tracking.{tracking,data_structures}`` moved to
   ``tensorflow.python.trackable.{autotrackable,data_structures}``: alias modules are registered.
2. ``tensorflow.python.keras.utils.conv_utils`` is gone: an alias to tf-keras' ``conv_utils``.
3. The Keras optimizers lack ``_create_hypers``: tensorforce's optimizer table is pointed at
   ``tf.keras.optimizers.legacy.*``.
4. TF >= 2.13 refuses a tuple argument for a list ``input_signature``: ``SignatureDict.to_list`` returns
   tuples for nested entries (the outer level stays a list).
5. numpy 2 removed ``np.bool8``: aliased to ``np.bool_``.
6. Checkpoint restore sets ``_update_uid`` on trackables, which tensorforce's ``TrackableNestedDict``
   refuses: private attribute names are let through.
7. Not a compatibility fix but a speed one (issue 31): Tensorforce's buffer writes rebuild the whole buffer
   (a replay memory of Atari frames: hundreds of MB per write); runner/inplace.py rewrites them in place,
   computing the same bits (``RLCLOUD_INPLACE_BUFFERS=0`` keeps Tensorforce's).
8. Also for speed and memory (issue 31): an agent whose ``image`` preprocessing feeds ``linear_normalization``
   of 0..255 frames rounds them to integer levels and keeps them as uint8 in its replay memory (4x less
   memory; runner/frames.py, ``RLCLOUD_UINT8_FRAMES=0`` keeps Tensorforce's float32 frames).

``tf.keras`` must be tf-keras (Keras 2) for tensorforce, which TensorFlow decides from
``TF_USE_LEGACY_KERAS`` when it is *first imported*: :func:`prepare_tensorflow` sets it, and refuses with
a clear error if TensorFlow was already imported with Keras 3.

Nothing here imports TensorFlow at module level: ``import rlcloud`` stays light.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
import sys
import tempfile
import threading
import types
import warnings
from collections.abc import Iterator
from typing import Any

from rlcloud.errors import RLCloudError

__all__ = [
    "STARTUP_CHATTER",
    "SUPPORTED_TF",
    "CompatError",
    "TensorforceNoise",
    "import_tensorforce",
    "is_applied",
    "prepare_tensorflow",
]

logger = logging.getLogger(__name__)

#: Inclusive range of TensorFlow (major, minor) versions the five adjustments were verified against.
SUPPORTED_TF: tuple[tuple[int, int], tuple[int, int]] = ((2, 13), (2, 21))

_lock = threading.Lock()


class TensorforceNoise(logging.Filter):
    """Drops Tensorforce's "No min_value bound specified for state." (logged through the root logger for
    every unbounded state, at every agent built): noise in a run's log and on a user's terminal."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for that one message."""
        return not (record.name == "root" and "bound specified" in str(record.msg))


_applied = False


class CompatError(RLCloudError):
    """TensorFlow/tensorforce cannot be made to work together in this process (names the versions)."""


def is_applied() -> bool:
    """Whether :func:`import_tensorforce` has already patched this process."""
    return _applied


def _tf_version_tuple(version: str) -> tuple[int, int]:
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError) as exc:
        raise CompatError(f"cannot parse the TensorFlow version {version!r}") from exc


def _check_tf_version(version: str) -> None:
    low, high = SUPPORTED_TF
    if not low <= _tf_version_tuple(version) <= high:
        raise CompatError(
            f"TensorFlow {version} is not supported by rlcloud's Tensorforce 0.6.5 compatibility layer "
            f"(verified: {low[0]}.{low[1]} to {high[0]}.{high[1]}); install tensorflow-cpu=={high[0]}.{high[1]}.* "
            "and tf-keras of the same version (the 'runner' extra)"
        )


#: What TensorFlow's C++ side writes to stderr at its import whatever TF_CPP_MIN_LOG_LEVEL says (absl logs
#: before its InitializeLog go straight to stderr): the header of that, and INFO lines ("I0000 00:00:...
#: port.cc:153] oneDNN custom operations are on..."). Warnings and errors are kept.
STARTUP_CHATTER = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$"
    r"|I\d{4} \S+ +\d+ \S+\] )"
)


@contextlib.contextmanager
def _startup_chatter_dropped(already: bool) -> Iterator[None]:
    """Drop :data:`STARTUP_CHATTER` from what file descriptor 2 gets while TensorFlow is first imported;
    every other line is written to stderr afterwards. With debug logging (``rlcloud -vv``, a spec's
    ``debug_logging``) nothing is dropped."""
    if already or logging.getLogger().isEnabledFor(logging.DEBUG):
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no file descriptor 2 to borrow (an embedding without one)
        yield
        return
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            kept = [
                line
                for line in caught.read().decode("utf-8", "replace").splitlines(keepends=True)
                if not STARTUP_CHATTER.match(line)
            ]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


def prepare_tensorflow() -> Any:
    """Import TensorFlow with tf-keras as ``tf.keras`` and return the module.

    Sets ``TF_USE_LEGACY_KERAS=1`` before TensorFlow's first import. Raises :class:`CompatError` naming
    the version if TensorFlow is outside :data:`SUPPORTED_TF`, or was already imported with Keras 3.
    """
    already = "tensorflow" in sys.modules
    if not already:
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
        # TensorFlow's C++ start-up chatter (CPU feature notes) drowns the runner's own log lines.
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        with _startup_chatter_dropped(already):
            import tensorflow as tf
    except ImportError as exc:
        raise CompatError(
            "TensorFlow is not installed; the runner needs the 'runner' extra: pip install 'rlcloud[runner]'"
        ) from exc
    _check_tf_version(tf.__version__)
    if not already:
        # trials sharing a GPU: bound this process's GPU memory before anything touches the GPU
        from rlcloud.runner.gpumem import bound_gpu_memory

        bound_gpu_memory(tf)
    keras_module = getattr(tf.keras, "__name__", "")
    if not keras_module.startswith("tf_keras"):
        hint = (
            "TensorFlow was imported before rlcloud could set TF_USE_LEGACY_KERAS=1"
            if already
            else "tf-keras is not installed"
        )
        raise CompatError(
            f"TensorFlow {tf.__version__}: tf.keras is {keras_module or 'Keras 3'}, but Tensorforce 0.6.5 "
            f"needs tf-keras (Keras 2): {hint}; set TF_USE_LEGACY_KERAS=1 in the environment and install "
            "tf-keras of the same version as TensorFlow"
        )
    return tf


def _alias_module(name: str, target: str) -> None:
    """Register ``name`` in sys.modules as the already-importable module ``target`` (and its parents)."""
    if name in sys.modules:
        return
    module = importlib.import_module(target)
    sys.modules[name] = module
    # Parents must exist too, or `from a.b.c import x` fails on the missing `a.b`.
    parent, _, child = name.rpartition(".")
    while parent:
        existed = True
        if parent not in sys.modules:
            try:
                importlib.import_module(parent)
            except ImportError:
                sys.modules[parent] = types.ModuleType(parent)
                existed = False
        setattr(sys.modules[parent], child, sys.modules[f"{parent}.{child}"])
        if existed:
            break  # a real module: its own parents are linked already
        parent, _, child = parent.rpartition(".")


def _pre_import_patches(tf: Any) -> None:
    import numpy as np

    # (5) numpy 2 removed np.bool8; tensorforce/util.py uses it at import time.
    if "bool8" not in np.__dict__:
        np.bool8 = np.bool_  # type: ignore[attr-defined]

    # (1) the tracking modules moved in TF 2.13.
    _alias_module("tensorflow.python.training.tracking.tracking", "tensorflow.python.trackable.autotrackable")
    _alias_module("tensorflow.python.training.tracking.data_structures", "tensorflow.python.trackable.data_structures")
    # (2) conv_utils left TensorFlow with Keras; tf-keras keeps the same functions.
    try:
        _alias_module("tensorflow.python.keras.utils.conv_utils", "tf_keras.src.utils.conv_utils")
    except ImportError:
        _alias_module("tensorflow.python.keras.utils.conv_utils", "keras.src.utils.conv_utils")


def _post_import_patches(tf: Any) -> None:
    # (3) the new Keras optimizers have no _create_hypers: use the legacy ones, which tensorforce knows.
    from tensorforce.core.optimizers import tf_optimizer

    legacy = tf.keras.optimizers.legacy
    table = tf_optimizer.tensorflow_optimizers
    for name in list(table):
        replacement = getattr(legacy, table[name].__name__, None)
        if replacement is not None:
            table[name] = replacement

    # (4) nested input signatures must be tuples on TF >= 2.13; the outer level stays a list.
    from tensorforce.core.utils import dicts

    def to_list(self: Any, to_dict: bool = False, _outer: bool = True) -> Any:
        if self.is_singleton():
            spec = self.singleton()
            if isinstance(spec, self.value_type):
                return spec
            return spec.to_list(_outer=_outer)
        items = [
            spec if isinstance(spec, self.value_type) else (spec.to_dict() if to_dict else spec.to_list(_outer=False))
            for spec in super(dicts.NestedDict, self).values()
            if isinstance(spec, self.value_type) or len(spec) > 0
        ]
        return items if _outer else tuple(items)

    dicts.SignatureDict.to_list = to_list

    # (6, not in FACTS.md) TF >= 2.13's checkpoint restore sets `_update_uid` (formerly a property over
    # `_self_update_uid`) on every trackable; TrackableNestedDict refuses attribute assignment except
    # for `_self_*` names, so Agent.restore() fails. Private names go to the plain object instead.
    original_setattr = dicts.TrackableNestedDict.__setattr__
    if not getattr(original_setattr, "_rlcloud_patched", False):

        def trackable_setattr(self: Any, name: str, value: Any) -> None:
            if name.startswith("_") and not name.startswith("_self_"):
                object.__setattr__(self, name, value)
            else:
                original_setattr(self, name, value)

        trackable_setattr._rlcloud_patched = True  # type: ignore[attr-defined]
        dicts.TrackableNestedDict.__setattr__ = trackable_setattr


def import_tensorforce() -> Any:
    """Return the ``tensorforce`` module, importing it with the compatibility adjustments applied once.

    Safe to call many times and from several threads. Raises :class:`CompatError` (naming the TensorFlow
    version) when this TensorFlow cannot be adapted.
    """
    global _applied
    with _lock:
        if _applied:
            return sys.modules["tensorforce"]
        tf = prepare_tensorflow()
        if "tensorforce" in sys.modules:
            # Someone imported tensorforce first; that only works if the pre-import patches were in place.
            logger.debug("tensorforce was imported before rlcloud's compat layer; patching after the fact")
        _pre_import_patches(tf)
        try:
            with warnings.catch_warnings():
                # Tensorforce's docstrings hold invalid escape sequences ("\e"): a DeprecationWarning
                # (SyntaxWarning from Python 3.12) when its bytecode is compiled, which a warnings-as-errors
                # setting turns into a SyntaxError. Its bytecode may not be cached, so on every import.
                warnings.simplefilter("ignore", SyntaxWarning)
                warnings.simplefilter("ignore", DeprecationWarning)
                tensorforce = importlib.import_module("tensorforce")
        except (ImportError, AttributeError) as exc:
            raise CompatError(f"tensorforce could not be imported on TensorFlow {tf.__version__}: {exc}") from exc
        _post_import_patches(tf)
        # (7) Buffer writes in place (issue 31): a replay memory's cost no longer grows with its size.
        from rlcloud.runner.inplace import apply_inplace_buffers

        apply_inplace_buffers()
        # (8) Image frames rounded to integer levels and kept as uint8 in the replay memory (issue 31).
        from rlcloud.runner.frames import apply_uint8_frames

        apply_uint8_frames()
        # Tensorforce logs a warning per agent about unsupported features on TF 2; those are expected.
        logging.getLogger("tensorflow").setLevel(logging.ERROR)
        _applied = True
        return tensorforce
