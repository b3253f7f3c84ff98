"""Training in a fresh Python process, for tests that compare runner settings read once per process.

The Tensorforce patches a runner variable selects (``RLCLOUD_INPLACE_BUFFERS``, ``RLCLOUD_UINT8_FRAMES``) are
installed at TensorFlow's first import and stay for the process: each setting a test compares trains in a
process of its own. :data:`TRAIN_STEPS` is the start of such a process's script (the caller appends what to
report), :func:`run_script` runs one and returns the JSON object it printed last.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

#: A script that trains ``case["steps"]`` vector steps of ``case["example"]`` with ``case["overrides"]``
#: (``sys.argv[1]``, JSON) as the runner's loop does, then has ``agent``, ``memory`` (the replay memory),
#: ``actions_seen`` (a hash of every action) and ``weights`` (a hash of the trainable variables).
TRAIN_STEPS = textwrap.dedent(
    """
    import hashlib, json, sys
    from pathlib import Path
    import numpy as np
    from rlcloud.runner.agent_calls import AgentCalls
    from rlcloud.runner.kernels import choose_cpu_kernels
    from rlcloud.runner.loop import build_agent_kwargs, build_vector_env
    from rlcloud.specs import ExperimentSpec

    case = json.loads(sys.argv[1])
    spec = ExperimentSpec.from_file(Path(case["example"])).replace(**case["overrides"])
    venv = build_vector_env(spec)
    choose_cpu_kernels(spec.network, spec.agent, venv.states_spec)
    from rlcloud.runner.compat import import_tensorforce

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
    """
)


#: A convolution the size of a test (one layer of 8 filters, a dense layer of 16): what the frames and in-place
#: comparisons look at is the replay memory and the state preprocessing, which any network shares, while each
#: process pays building the agent's graphs: the example's network (3 convolutions, a dense layer of 512) took
#: 68 s of a 114 s process at load ~18, this one 1.3 s of 26 s. Still a convolution, so the learner keeps
#: oneDNN's kernels as the example does (runner/kernels.py).
SMALL_CONV_NETWORK: list[dict[str, Any]] = [
    {"type": "conv2d", "size": 8, "window": 8, "stride": 4},
    {"type": "flatten"},
    {"type": "dense", "size": 16},
]

#: The Space Invaders example's agent (its frames, preprocessing and DQN) with a memory of 64 frames, a batch of 8
#: and :data:`SMALL_CONV_NETWORK`, in single mode: episodes of at most 30 steps, updates from the 32nd frame, so
#: 200 steps make ~40 updates and wrap the memory three times.
SPACE_INVADERS_SINGLE: dict[str, Any] = {
    "example": "examples/space_invaders_dqn.yaml",
    "overrides": {
        "run_mode": "single",
        "num_workers": 1,
        "seed": 5,
        "max_timesteps_per_episode": 30,
        "agent.memory": 64,
        "agent.start_updating": 32,
        "agent.batch_size": 8,
        "agent.exploration.num_steps": 2000,
        "network": SMALL_CONV_NETWORK,
    },
    "steps": 200,
}


def run_script(script: str, *args: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """Run ``script`` with ``args`` in a fresh Python process in the repository, with exactly ``environ``;
    assert it succeeded and return the JSON object of its last line of output."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(environ),
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))
