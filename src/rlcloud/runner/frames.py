"""Image frames kept in the replay memory as uint8 (1 byte a pixel) instead of float32 (issue 31).

Tensorforce stores a state in its memory after the state preprocessing, as float32: an 84 x 84 grayscale
Atari frame normalised to [-2, 2] takes 28 KB, so the DQN paper's memory of 1,000,000 frames would need
28 GB. When the preprocessing makes frames whose values are integers of at most 256 levels before the
normalisation, the memory can hold those integers instead and apply the normalisation when a batch is read.
:func:`apply_uint8_frames` makes Tensorforce do that for an agent whose

* states are one float component bounded by integers at most 255 apart (``min_value``/``max_value``; an Atari
  observation is 0..255), and
* ``state_preprocessing`` is one or more ``image`` layers (resize, grayscale) followed by
  ``linear_normalization`` with those bounds (the Space Invaders example's).

For such an agent

1. ``linear_normalization`` rounds its input (the ``image`` layers' output) to the nearest integer level and
   looks the level's normalised value up in a table of 256 float32 values, ``4 * (level - min) / (max - min)
   - 2`` correctly rounded. TensorFlow's bilinear resize and its grayscale weights give fractional values,
   which Tensorforce alone keeps: this rounding is the one change to what the agent sees, in acting and in
   learning alike; each pixel moves by at most half a level, 2/255 (0.0078) on the normalised [-2, 2] scale
   (the table itself differs from Tensorforce's graph arithmetic by at most one float32 ulp). It is what
   the DQN paper's and most Atari pipelines' uint8 frames do (OpenCV's resize of uint8 images rounds);
2. the memory's states buffer is a uint8 variable: a write stores the level each normalised value came from
   (``(y + 2) * (max - min) / 4``, rounded: exact), and every read (the batches an update samples, their
   successor states) maps the levels back through the same table: the states an update reads are the
   float32 values the memory was given, bit for bit.

So with the frames stored as uint8 an agent learns exactly what it learns with the rounded frames stored as
float32 (tests/runner/test_frames.py trains both and compares actions and weights); against Tensorforce
alone the difference is the rounding of (1) alone. ``RLCLOUD_UINT8_FRAMES=0`` keeps Tensorforce's float32
frames without rounding; ``RLCLOUD_UINT8_FRAMES=float32`` rounds but stores float32 (for that comparison).
The reads and writes go through the in-place writes of runner/inplace.py (``Variable.scatter_nd_update``)
and ``tf.gather``; with those rewrites off (``RLCLOUD_INPLACE_BUFFERS=0``) frames stay float32.

Resuming across the two dtypes. Tensorforce saves the replay memory in its checkpoints, in the dtype of the
memory that wrote them; restoring a checkpoint of float32 frames (a run started before uint8 frames, or with
``RLCLOUD_UINT8_FRAMES=0``) into a memory of uint8 levels, or the reverse, fails in TensorFlow's restore
("expected dtype uint8 does not equal original dtype float"), and with every checkpoint of the run written
the same way the run cannot resume at all. :func:`frames_across_dtypes` converts instead: the restore reads
everything else as usual, and the checkpoint's frames are then read in slices of at most 64 MB (the whole
memory is never in memory twice) and converted into the memory the runner built

* uint8 levels into float32: through the table, the values the uint8 memory itself gave to every read:
  exact, nothing changes;
* float32 into uint8 levels: encoded as every new frame is. Frames that were rounded
  (``RLCLOUD_UINT8_FRAMES=float32``) are exactly levels and come back bit for bit; Tensorforce's unrounded
  frames (``0``, or a run older than uint8 frames) move by at most half a level (2/255 on the [-2, 2]
  scale), which is the rounding (1) applies to every frame the runner sees from then on: the memory holds
  what this runner would have stored for the same frames.

The runner's setting decides the dtype, not the checkpoint: the memory is what the runner's configuration
(and the pod's memory request, 4x larger for float32) was sized for, and no frame is dropped or changed by
more than that half level. The conversion is logged once per restore, with the largest change it made.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import numpy as np

from rlcloud import runenv
from rlcloud.runenv import RunnerEnv

__all__ = ["FRAMES_VARIABLE", "FrameCodec", "apply_uint8_frames", "frame_codec", "frames_across_dtypes"]

logger = logging.getLogger(__name__)

#: "0": Tensorforce's float32 frames, unrounded; "float32": rounded frames stored as float32; anything else,
#: or unset: rounded frames stored as uint8 where the agent allows it (module docstring).
FRAMES_VARIABLE = runenv.UINT8_FRAMES

_CODEC_ATTRIBUTE = "_rlcloud_frames"
_applied: dict[str, bool] = {}


class FrameCodec:
    """The map between the levels 0..255 of a frame and the values ``linear_normalization`` makes of them."""

    def __init__(self, layer: Any, min_value: float, max_value: float, *, store_uint8: bool) -> None:
        #: the ``linear_normalization`` layer whose input is turned into levels
        self.layer = layer
        self.min_value = float(min_value)
        self.max_value = float(max_value)
        #: whether the memory stores levels (uint8) rather than the float32 values
        self.store_uint8 = store_uint8
        low, high = np.float32(self.min_value), np.float32(self.max_value)
        levels = np.arange(256, dtype=np.float32) + low
        # LinearNormalization.apply: 4.0 * (x - min_value) / (max_value - min_value) - 2.0, in float32, the
        # same operations in the same order (IEEE float32 rounding is the same in numpy and TensorFlow).
        self.table = (np.float32(4.0) * (levels - low) / (high - low) - np.float32(2.0)).astype(np.float32)

    def levels(self, tf: Any, frames: Any) -> Any:
        """The nearest integer levels 0..255 of frames of values in [min_value, max_value] (int32)."""
        levels = tf.math.round(frames - np.float32(self.min_value))
        return tf.cast(tf.clip_by_value(levels, 0.0, 255.0), tf.int32)

    def encode(self, tf: Any, values: Any) -> Any:
        """uint8 levels of normalised float32 values (which came from integer levels)."""
        scale = np.float32((self.max_value - self.min_value) / 4.0)
        levels = tf.math.round((values + np.float32(2.0)) * scale)
        return tf.cast(tf.clip_by_value(levels, 0.0, 255.0), tf.uint8)

    def decode(self, tf: Any, levels: Any) -> Any:
        """The float32 values of uint8 levels, as ``linear_normalization`` computes them."""
        return tf.gather(params=tf.constant(self.table), indices=tf.cast(levels, tf.int32))  # a 1 KB table


def frame_codec(model: Any) -> FrameCodec | None:
    """The codec of a Tensorforce model whose frames are rounded (and maybe stored as uint8), else None."""
    return getattr(model, _CODEC_ATTRIBUTE, None)


def _flat_layers(layers: Any) -> list[Any]:
    if isinstance(layers, list | tuple):
        return [layer for item in layers for layer in _flat_layers(item)]
    return [layers]


def _eligible(model: Any, store_uint8: bool) -> FrameCodec | None:
    """The codec for ``model`` when its states and preprocessing allow it (module docstring), else None."""
    from tensorforce.core.layers import Image, LinearNormalization

    if not model.states_spec.is_singleton():
        return None
    spec = model.states_spec.singleton()
    preprocessor = model.state_preprocessing[None] if None in model.state_preprocessing else None  # noqa: SIM401
    if spec.type != "float" or preprocessor is None:
        return None
    layers = _flat_layers(preprocessor.layers)
    if len(layers) < 2 or not isinstance(layers[-1], LinearNormalization):
        return None
    if not all(isinstance(layer, Image) for layer in layers[:-1]):
        return None
    low, high = np.unique(layers[-1].min_value), np.unique(layers[-1].max_value)
    if low.size != 1 or high.size != 1 or not np.all(np.isfinite([low[0], high[0]])):
        return None
    low_value, high_value = float(low[0]), float(high[0])
    if low_value != round(low_value) or high_value != round(high_value) or not 0 < high_value - low_value <= 255:
        return None
    if spec.min_value is None or spec.max_value is None:
        return None
    if np.any(np.asarray(spec.min_value) < low_value) or np.any(np.asarray(spec.max_value) > high_value):
        return None  # the inputs could leave the levels
    return FrameCodec(layers[-1], low_value, high_value, store_uint8=store_uint8)


def _frame_buffer_class(tf: Any) -> type:
    from tensorflow.python.ops.resource_variable_ops import ResourceVariable

    class FrameBuffer(ResourceVariable):  # type: ignore[misc]
        """A replay memory's states buffer of uint8 levels: written and read as the normalised float32."""

        _rlcloud_codec: FrameCodec

        def sparse_read(self, indices: Any, name: Any = None) -> Any:  # tf.gather(params=buffer, ...)
            return self._rlcloud_codec.decode(tf, super().sparse_read(indices, name=name))

        def gather_nd(self, indices: Any, name: Any = None) -> Any:
            return self._rlcloud_codec.decode(tf, super().gather_nd(indices, name=name))

        def scatter_nd_update(self, indices: Any, updates: Any, name: Any = None) -> Any:
            return super().scatter_nd_update(indices, self._rlcloud_codec.encode(tf, updates), name=name)

    return FrameBuffer


def apply_uint8_frames(setting: str | None = None) -> bool:
    """Patch Tensorforce (once) so that eligible agents round and store their frames (module docstring).

    ``setting`` follows :data:`FRAMES_VARIABLE` when None. Call it after runner/inplace.py's rewrites (the
    compatibility layer does). Returns whether the patches are installed.
    """
    if setting is None:
        setting = RunnerEnv.from_env().uint8_frames or "1"
    if setting == "0" or "installed" in _applied:
        return _applied.get("installed", False)
    import tensorflow as tf
    import tensorforce
    from tensorforce.core.layers import normalization as normalization_module
    from tensorforce.core.memories import queue
    from tensorforce.core.models import tensorforce as tensorforce_model

    from rlcloud.runner.inplace import _undecorated, patched_methods

    if getattr(tensorforce, "__version__", None) != "0.6.5" or "Queue.enqueue" not in patched_methods():
        logger.debug("frames stay float32: Tensorforce %s or its writes not in place", tensorforce.__version__)
        _applied["installed"] = False
        return False
    store_uint8 = setting != "float32"
    model_class = tensorforce_model.TensorforceModel
    original_init = model_class.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        codec = _eligible(self, store_uint8)
        object.__setattr__(self, _CODEC_ATTRIBUTE, codec)
        if codec is not None:
            logger.info(
                "image frames rounded to integer levels%s", " and kept as uint8 in the memory" if store_uint8 else ""
            )

    init.__name__, init.__qualname__ = "__init__", original_init.__qualname__
    model_class.__init__ = init

    normalization = _undecorated(normalization_module.LinearNormalization.__dict__["apply"])

    def apply(self: Any, *, x: Any) -> Any:
        codec = frame_codec(self.root)
        if codec is None or codec.layer is not self:
            return normalization(self, x=x)
        return codec.decode(tf, codec.levels(tf, x))  # module docstring, 1

    apply.__qualname__ = normalization.__qualname__  # Tensorforce's decorator keys its graphs on it
    apply.__module__ = normalization.__module__
    normalization_module.LinearNormalization.apply = normalization_module.tf_function(num_args=1)(apply)

    frame_buffer = _frame_buffer_class(tf)
    module_variable = queue.Queue.variable

    def variable(self: Any, *, name: str, spec: Any, initializer: Any, is_trainable: bool, **kwargs: Any) -> Any:
        codec = frame_codec(self.root)
        if (
            codec is None
            or not codec.store_uint8
            or name != "states-buffer"
            or spec.type != "float"
            or is_trainable
            or not isinstance(initializer, str)
            or initializer != "zeros"
            or kwargs.get("initialization_scale") is not None
        ):
            return module_variable(
                self, name=name, spec=spec, initializer=initializer, is_trainable=is_trainable, **kwargs
            )
        buffer = frame_buffer(
            initial_value=tf.zeros(shape=spec.shape, dtype=tf.uint8), trainable=False, name=name, dtype=tf.uint8
        )
        buffer._rlcloud_codec = codec
        buffer.is_saved = kwargs["is_saved"]
        return buffer

    queue.Queue.variable = variable
    _applied["installed"] = True
    return True


#: The most bytes of the checkpoint's frames read at once while converting them (module docstring).
CONVERT_CHUNK_BYTES = 64 << 20


def _states_buffer(model: Any) -> Any:
    """The replay memory's states buffer variable of a Tensorforce model, or None (no memory, several states)."""
    memory = getattr(model, "memory", None)
    found = [v for v in getattr(memory, "variables", ()) if v.name.endswith("/states-buffer:0")]
    return found[0] if len(found) == 1 else None


@contextlib.contextmanager
def frames_across_dtypes(model: Any, prefix: str | None) -> Iterator[None]:
    """Around the restore of ``model`` from the checkpoint ``prefix``: when the checkpoint's replay memory
    holds frames of the other dtype (float32 or uint8 levels), they are left out of the restore and converted
    into the model's memory after it (module docstring); otherwise the restore is Tensorforce's alone.

    Raises:
        ValueError: The checkpoint's frames cannot be converted (another memory size, or a model whose
            preprocessing does not make levels); the restore is not attempted.
    """
    import tensorflow as tf

    buffer = _states_buffer(model)
    key = f"{model.name}/memory/buffers/states/SINGLETON/.ATTRIBUTES/VARIABLE_VALUE"
    saved_dtype = None
    if buffer is not None and prefix is not None:
        reader = tf.train.load_checkpoint(prefix)
        saved_dtype = reader.get_variable_to_dtype_map().get(key)
    if saved_dtype is None or saved_dtype == buffer.dtype or {saved_dtype, buffer.dtype} != {tf.float32, tf.uint8}:
        yield  # the same dtype (or none to convert): Tensorforce's restore alone, which explains any mismatch
        return
    shape = reader.get_variable_to_shape_map()[key]
    if list(shape) != buffer.shape.as_list():
        raise ValueError(f"the checkpoint's replay memory has shape {shape}, this agent's {buffer.shape.as_list()}")
    codec = frame_codec(model) or _eligible(model, store_uint8=False)
    if codec is None:
        raise ValueError(
            f"the checkpoint's replay memory holds {saved_dtype.name} frames and this agent's "
            f"{buffer.dtype.name}, but its state preprocessing does not make frame levels to convert them"
        )
    # Leave the frames out of the restore: without the buffer among its parent's dependencies, the object-based
    # restore finds nothing to bind the checkpointed value to (Tensorforce restores with expect_partial()).
    buffers = model.memory.buffers
    lookup = buffers._lookup_dependency

    def without_states(name: str, cached_dependencies: Any = None) -> Any:
        return None if name == "states" else lookup(name, cached_dependencies)

    object.__setattr__(buffers, "_lookup_dependency", without_states)
    try:
        yield
    finally:
        object.__delattr__(buffers, "_lookup_dependency")
        buffers._deferred_dependencies.pop("states", None)  # the value it set aside for a later "states"
    moved = _convert(tf, codec, buffer, prefix, key, saved_dtype, list(shape))
    logger.info(
        "the checkpoint's replay memory holds %s frames, this runner keeps them as %s (%s=%s): converted, %s",
        saved_dtype.name,
        buffer.dtype.name,
        FRAMES_VARIABLE,
        RunnerEnv.from_env().uint8_frames or "1",
        "exactly" if moved == 0 else f"each value within {moved:.4g} of the checkpoint's (half a level: {2 / 255:.4g})",
    )


def _convert(tf: Any, codec: FrameCodec, buffer: Any, prefix: Any, key: str, saved: Any, shape: list[int]) -> float:
    """Read the checkpoint's frames in slices, convert them into ``buffer``; the largest change of a value."""
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * saved.size
    rows = max(1, CONVERT_CHUNK_BYTES // max(1, row_bytes))
    full_shape = " ".join(str(dim) for dim in shape)
    moved = 0.0
    for start in range(0, shape[0], rows):
        count = min(rows, shape[0] - start)
        extent = ":".join([f"{start},{count}"] + ["-"] * (len(shape) - 1))
        (values,) = tf.raw_ops.RestoreV2(
            prefix=prefix, tensor_names=[key], shape_and_slices=[f"{full_shape} {extent}"], dtypes=[saved]
        )
        if saved == tf.float32:  # into uint8 levels, encoded as every frame is written
            converted = codec.encode(tf, values)
            moved = max(moved, float(tf.reduce_max(tf.abs(codec.decode(tf, converted) - values))))
        else:  # levels into the float32 values every read of them gave
            converted = codec.decode(tf, values)
        # a plain slice assignment: the values are already the buffer's dtype (no codec on the way in)
        buffer[start : start + count].assign(converted)
    return moved
