"""Image frames rounded to levels and kept as uint8 in the replay memory (runner/frames.py).

Each comparison trains the Space Invaders example's agent in fresh processes with ``RLCLOUD_UINT8_FRAMES``
set three ways: uint8 frames (the default), the same rounded frames kept as float32, and Tensorforce's own
float32 frames (unrounded). The first two must learn the same thing bit for bit (actions and weights after
many updates, the memory wrapped around); the memory of the first holds what Tensorforce's holds to within
half a level (2/255 on the normalised [-2, 2] scale), the only difference the rounding makes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlcloud.runner.frames import FRAMES_VARIABLE, FrameCodec

ROOT = Path(__file__).resolve().parents[2]

_DRIVE = textwrap.dedent(
    """
    import hashlib, json, sys
    from pathlib import Path
    import numpy as np
    from rlcloud.runner.agent_calls import AgentCalls
    from rlcloud.runner.kernels import choose_cpu_kernels
    from rlcloud.runner.loop import build_agent_kwargs, build_vector_env
    from rlcloud.specs import ExperimentSpec

    case, dump = json.loads(sys.argv[1]), sys.argv[2]
    spec = ExperimentSpec.from_file(Path(case["example"])).replace(**case["overrides"])
    venv = build_vector_env(spec)
    choose_cpu_kernels(spec.network, spec.agent, venv.states_spec)
    from rlcloud.runner.compat import import_tensorforce
    from rlcloud.runner.frames import frame_codec

    tensorforce = import_tensorforce()
    agent = tensorforce.Agent.create(**build_agent_kwargs(spec, venv))
    calls = AgentCalls(agent, np.arange(venv.num_envs))
    actions_seen, states = hashlib.sha256(), venv.reset()
    for _ in range(case["steps"]):
        actions = calls.act(states)
        actions_seen.update(np.asarray(actions).tobytes())
        states, rewards, terminals = venv.step(actions)
        calls.observe(rewards, terminals)
    weights = hashlib.sha256(b"".join(v.numpy().tobytes() for v in agent.model.trainable_variables))
    memory = agent.model.memory
    buffer = [v for v in memory.variables if v.name.endswith("/states-buffer:0")][0]
    # every row the memory holds, read as an update reads it (a uint8 buffer decodes to float32)
    import tensorflow as tf
    rows = memory.retrieve(indices=tf.range(memory.capacity, dtype=tf.int64), values=("states",))["states"]
    np.save(dump, (rows.singleton() if hasattr(rows, "singleton") else rows).numpy())
    codec = frame_codec(agent.model)
    print(json.dumps({
        "codec": None if codec is None else codec.store_uint8, "dtype": buffer.dtype.name,
        "actions": actions_seen.hexdigest(), "weights": weights.hexdigest(), "updates": int(agent.updates),
        "written": int(memory.buffer_index.numpy()), "capacity": memory.capacity,
    }))
    """
)

CASE = {
    # memory 200, episodes of at most 100 steps: updates start after 100 steps, the memory wraps twice.
    "example": "examples/space_invaders_dqn.yaml",
    "overrides": {
        "run_mode": "single",
        "num_workers": 1,
        "seed": 5,
        "max_timesteps_per_episode": 100,
        "agent.memory": 200,
        "agent.exploration.num_steps": 2000,
    },
    "steps": 450,
}


def _run(setting: str, dump: Path) -> dict[str, Any]:
    environ = dict(os.environ, **{FRAMES_VARIABLE: setting})
    done = subprocess.run(
        [sys.executable, "-c", _DRIVE, json.dumps(CASE), str(dump)],
        capture_output=True,
        text=True,
        timeout=600,
        env=environ,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


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
