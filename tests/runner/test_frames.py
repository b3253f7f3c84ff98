"""Image frames rounded to levels and kept as uint8 in the replay memory (runner/frames.py).

Each comparison trains the Space Invaders example's agent (a small convolution for its network: what is compared is
the replay memory, which any network shares) in fresh processes with ``RLCLOUD_UINT8_FRAMES``
set three ways: uint8 frames (the default), the same rounded frames kept as float32, and Tensorforce's own
float32 frames (unrounded). The first two must learn the same thing bit for bit (actions and weights after
many updates, the memory wrapped around); the memory of the first holds what Tensorforce's holds to within
half a level (2/255 on the normalised [-2, 2] scale), the only difference the rounding makes.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlcloud.runner.frames import FRAMES_VARIABLE, FrameCodec
from tests.support.training_process import SMALL_CONV_NETWORK, SPACE_INVADERS_SINGLE, TRAIN_STEPS, run_script

_REPORT = textwrap.dedent(
    """
    from rlcloud.runner.frames import frame_codec
    import tensorflow as tf

    buffer = [v for v in memory.variables if v.name.endswith("/states-buffer:0")][0]
    # every row the memory holds, read as an update reads it (a uint8 buffer decodes to float32)
    rows = memory.retrieve(indices=tf.range(memory.capacity, dtype=tf.int64), values=("states",))["states"]
    np.save(sys.argv[2], (rows.singleton() if hasattr(rows, "singleton") else rows).numpy())
    codec = frame_codec(agent.model)
    print(json.dumps({
        "codec": None if codec is None else codec.store_uint8, "dtype": buffer.dtype.name,
        "actions": actions_seen.hexdigest(), "weights": weights.hexdigest(), "updates": int(agent.updates),
        "written": int(memory.buffer_index.numpy()), "capacity": memory.capacity,
    }))
    """
)


def _run(setting: str, dump: Path) -> dict[str, Any]:
    environ = dict(os.environ, **{FRAMES_VARIABLE: setting})
    return run_script(TRAIN_STEPS + _REPORT, json.dumps(SPACE_INVADERS_SINGLE), str(dump), environ=environ)


@pytest.mark.training
def test_uint8_frames_learn_what_rounded_float_frames_learn_and_stay_within_half_a_level(tmp_path: Path) -> None:
    uint8 = _run("1", tmp_path / "uint8.npy")
    rounded = _run("float32", tmp_path / "rounded.npy")
    plain = _run("0", tmp_path / "plain.npy")
    assert (uint8.pop("codec"), uint8.pop("dtype")) == (True, "uint8")
    assert (rounded.pop("codec"), rounded.pop("dtype")) == (False, "float32")
    assert (plain.pop("codec"), plain.pop("dtype")) == (None, "float32")
    assert uint8["updates"] >= 20 and uint8["written"] > 2 * uint8["capacity"]
    assert uint8 == rounded  # same actions and weights, bit for bit
    stored = {name: np.load(tmp_path / f"{name}.npy") for name in ("uint8", "rounded", "plain")}
    assert np.array_equal(stored["uint8"], stored["rounded"])
    # Exploration picked the same actions in all three runs, so the memories hold the same frames; the
    # rounding moved each pixel by at most half a level of the 255 (2/255 after normalisation to [-2, 2]).
    assert plain["actions"] == uint8["actions"]
    difference = np.abs(stored["uint8"] - stored["plain"])
    assert difference.max() <= 2 / 255 + 1e-6
    assert difference.max() > 1 / 255  # frames were fractional: the rounding did something


def test_codec_levels_round_trip_exactly() -> None:
    from rlcloud.runner.compat import prepare_tensorflow

    tf = prepare_tensorflow()
    codec = FrameCodec(None, 0.0, 255.0, store_uint8=True)
    levels = np.arange(256)
    values = codec.decode(tf, tf.constant(levels, dtype=tf.uint8))
    assert values.dtype == tf.float32 and float(values[0]) == -2.0 and float(values[-1]) == 2.0
    assert np.array_equal(codec.encode(tf, values).numpy(), levels.astype(np.uint8))
    # frames between levels go to the nearest one (ties to even, as tf.round does)
    frames = tf.constant([0.0, 0.49, 0.51, 1.5, 2.5, 254.6, 255.0, 300.0, -3.0])
    assert codec.levels(tf, frames).numpy().tolist() == [0, 0, 1, 2, 2, 255, 255, 255, 0]


_RESUME = textwrap.dedent(
    """
    import json, logging, sys
    from pathlib import Path
    import numpy as np
    from rlcloud.runner import frames
    from rlcloud.runner.loop import Trainer
    from rlcloud.specs import ExperimentSpec

    case, workdir, dump = json.loads(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    frames.CONVERT_CHUNK_BYTES = case["chunk_bytes"]  # several slices, the last one shorter, even here
    logged = []

    class Logged(logging.Handler):
        def emit(self, record):
            logged.append(record.getMessage())

    logging.getLogger(frames.__name__).addHandler(Logged())
    logging.getLogger(frames.__name__).setLevel(logging.INFO)
    spec = ExperimentSpec.from_file(Path(case["example"])).replace(**case["overrides"])

    def memory():
        import tensorflow as tf
        memory = trainer.agent.model.memory
        rows = memory.retrieve(indices=tf.range(memory.capacity, dtype=tf.int64), values=("states",))["states"]
        buffer = [v for v in memory.variables if v.name.endswith("/states-buffer:0")][0]
        rows = rows.singleton() if hasattr(rows, "singleton") else rows
        return rows.numpy(), int(memory.buffer_index.numpy()), buffer.dtype.name

    class AtCheckpoint:
        def on_checkpoint(self, name):
            self.memory = memory()

    hook = AtCheckpoint()
    trainer = Trainer(spec, workdir, hooks=hook)
    trainer.setup()  # restores the run's latest checkpoint, if any
    restored, restored_index, _ = memory()
    result = trainer.run()  # to total_timesteps, then a checkpoint
    saved, saved_index, dtype = hook.memory
    np.save(dump + "-restored.npy", restored)
    np.save(dump + "-saved.npy", saved)
    print(json.dumps({
        "state": result.state, "timesteps": result.timesteps, "dtype": dtype, "restored_index": restored_index,
        "saved_index": saved_index, "converted": [m for m in logged if "checkpoint's replay memory" in m],
    }))
    """
)

RESUME_CASE: dict[str, Any] = {
    # a memory of 64 frames, updates from the 32nd: the memory wraps in the second of the three attempts
    "example": "examples/space_invaders_dqn.yaml",
    "overrides": {
        "run_mode": "single",
        "num_workers": 1,
        "seed": 5,
        "max_timesteps_per_episode": 30,
        "summary_frequency": None,
        "agent.memory": 64,
        "agent.start_updating": 32,
        "agent.batch_size": 8,
        "network": SMALL_CONV_NETWORK,
    },
    "chunk_bytes": 7 * 84 * 84 * 4,  # 7 float32 frames, 28 uint8 frames a slice
}


def _attempt(setting: str, workdir: Path, total_timesteps: int, dump: Path) -> dict[str, Any]:
    """One attempt of the run in ``workdir`` with ``RLCLOUD_UINT8_FRAMES=setting``, to ``total_timesteps``."""
    case = dict(RESUME_CASE, overrides=dict(RESUME_CASE["overrides"], total_timesteps=total_timesteps))
    environ = dict(os.environ, **{FRAMES_VARIABLE: setting})
    result = run_script(_RESUME, json.dumps(case), str(workdir), str(dump), environ=environ)
    assert (result["state"], result["timesteps"]) == ("succeeded", total_timesteps)
    return result


@pytest.mark.training
def test_a_run_resumes_its_replay_memory_across_float32_and_uint8_frames(tmp_path: Path) -> None:
    run = tmp_path / "run"
    # A run whose checkpoints hold Tensorforce's float32 frames (as runs before uint8 frames did), resumed by a
    # runner keeping uint8 levels, then again by one keeping float32 (RLCLOUD_UINT8_FRAMES=0).
    old = _attempt("0", run, 50, tmp_path / "old")
    uint8 = _attempt("1", run, 80, tmp_path / "uint8")
    back = _attempt("0", run, 110, tmp_path / "back")
    assert [attempt["dtype"] for attempt in (old, uint8, back)] == ["float32", "uint8", "float32"]
    assert old["converted"] == [] and len(uint8["converted"]) == len(back["converted"]) == 1  # logged once
    assert uint8["restored_index"] == old["saved_index"] > 0 and back["restored_index"] == uint8["saved_index"]
    assert uint8["saved_index"] > 64  # the uint8 attempt wrote over the converted frames: the memory wrapped

    # float32 into uint8: every frame encoded as the uint8 runner encodes each new one, so within half a level
    saved, restored = np.load(tmp_path / "old-saved.npy"), np.load(tmp_path / "uint8-restored.npy")
    codec = FrameCodec(None, 0.0, 255.0, store_uint8=True)
    levels = np.clip(np.round((saved + np.float32(2.0)) * np.float32(255 / 4)), 0, 255).astype(np.int64)
    assert np.array_equal(restored, codec.table[levels])
    moved = np.abs(restored - saved)[: old["saved_index"]]
    assert 1 / 255 < moved.max() <= 2 / 255 + 1e-6  # unrounded frames: the rounding did something, bounded
    assert "within" in uint8["converted"][0]
    # uint8 levels into float32: the values every read of the uint8 memory gave, bit for bit
    assert np.array_equal(np.load(tmp_path / "back-restored.npy"), np.load(tmp_path / "uint8-saved.npy"))
    assert "exactly" in back["converted"][0]
