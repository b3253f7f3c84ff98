"""The learner's CPU kernels: Eigen for dense-only networks, oneDNN for anything that may convolve.

The rule is checked on specs (no TensorFlow); two fresh runner processes then train the README's CartPole
agent with oneDNN on (chosen by the user) and off (chosen by rlcloud): the kernels must be the ones
intended, and every episode the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rlcloud.runner.kernels import ONEDNN_VARIABLE, choose_cpu_kernels, convolution_free

ROOT = Path(__file__).resolve().parents[2]
VECTOR = {"type": "float", "shape": (4,), "min_value": None, "max_value": None}
IMAGE = {"type": "float", "shape": (84, 84, 1)}
PPO = {"type": "ppo", "batch_size": 5, "baseline": {"type": "auto", "size": 32, "depth": 1}}
CONV = [{"type": "conv2d", "size": 32, "window": 8, "stride": 4}, {"type": "flatten"}, {"type": "dense", "size": 64}]


@pytest.mark.parametrize(
    ("network", "agent", "states", "dense"),
    [
        ("auto", PPO, VECTOR, True),  # CartPole's PPO: auto networks over a vector are dense
        ([{"type": "dense", "size": 64}, {"type": "lstm", "size": 32}], PPO, VECTOR, True),
        ("auto", {"type": "dqn", "memory": 1000, "batch_size": 8}, {"type": "int", "shape": (), "num_values": 9}, True),
        (CONV, PPO, VECTOR, False),  # the spec's network convolves
        ("auto", {**PPO, "baseline": {"type": "custom", "layers": CONV}}, VECTOR, False),  # so does a nested one
        ("auto", {**PPO, "network": [{"type": "pool1d", "reduction": "max"}]}, VECTOR, False),
        ("auto", PPO, IMAGE, False),  # auto makes rank-3 states conv2d
        ("auto", PPO, {"type": "float", "shape": (10, 4)}, False),  # and rank-2 ones conv1d
        ("auto", PPO, {"type": "int", "shape": (6,), "num_values": 4}, False),  # embedded, then conv1d
        ("auto", PPO, {"position": VECTOR, "screen": IMAGE}, False),  # dict states: any component
        ("auto", PPO, {"position": VECTOR, "speed": {"type": "float", "shape": ()}}, True),
        ("my_nets.py", PPO, VECTOR, False),  # a network file or module: its layers are unknown
        ([{"type": "my_pkg.layers:Gated", "size": 8}], PPO, VECTOR, False),  # a layer class of the user's
        ([{"type": "keras", "layer": "Dense", "units": 8}], PPO, VECTOR, False),
        ("auto", {**PPO, "type": "my_pkg.agents:Agent"}, VECTOR, False),
    ],
)
def test_only_known_dense_networks_count_as_convolution_free(
    network: Any, agent: dict[str, Any], states: dict[str, Any], dense: bool
) -> None:
    assert convolution_free(network, agent, states) is dense


def test_the_users_setting_and_an_imported_tensorflow_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ONEDNN_VARIABLE, "1")
    assert choose_cpu_kernels("auto", PPO, VECTOR) is False
    assert os.environ[ONEDNN_VARIABLE] == "1"

    monkeypatch.delenv(ONEDNN_VARIABLE)  # restored (unset) after the test, like the setenv above
    monkeypatch.setitem(sys.modules, "tensorflow", object())  # as if imported before the runner chose
    assert choose_cpu_kernels("auto", PPO, VECTOR) is False
    assert ONEDNN_VARIABLE not in os.environ

    monkeypatch.delitem(sys.modules, "tensorflow")
    assert choose_cpu_kernels(CONV, PPO, VECTOR) is False  # convolutions keep oneDNN
    assert ONEDNN_VARIABLE not in os.environ
    assert choose_cpu_kernels("auto", PPO, VECTOR) is True
    assert os.environ[ONEDNN_VARIABLE] == "0"


_CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from rlcloud.runner.loop import Trainer, read_jsonl
    from rlcloud.specs import ExperimentSpec

    spec = ExperimentSpec.from_file(Path(sys.argv[1])).replace(
        num_workers=4, total_timesteps=3000, saver_frequency=None, summary_frequency=None, evaluation=None
    )
    Trainer(spec, Path(sys.argv[2])).run()
    from tensorflow.python.util import _pywrap_util_port

    episodes = [{k: v for k, v in r.items() if k != "time"} for r in read_jsonl(Path(sys.argv[2]) / "metrics.jsonl")]
    print(json.dumps({"onednn": _pywrap_util_port.IsMklEnabled(), "episodes": episodes}))
    """
)


def _train(workdir: Path, **env: str) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if k != ONEDNN_VARIABLE} | env
    command = [sys.executable, "-c", _CHILD, str(ROOT / "examples" / "cartpole_ppo.yaml"), str(workdir)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=environ, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.training
def test_eigen_kernels_learn_exactly_what_onednn_learns(tmp_path: Path) -> None:
    with_onednn = _train(tmp_path / "onednn", **{ONEDNN_VARIABLE: "1"})
    chosen = _train(tmp_path / "chosen")
    assert with_onednn["onednn"] is True  # the user's setting is kept
    assert chosen["onednn"] is False  # rlcloud chose Eigen for the dense example agent
    assert len(chosen["episodes"]) > 50  # several PPO updates (every 5 episodes) are in the comparison
    assert chosen["episodes"] == with_onednn["episodes"]


@pytest.mark.training
def test_every_convolving_tensorforce_layer_keeps_onednn() -> None:
    from rlcloud.runner.compat import import_tensorforce

    layers = import_tensorforce().core.layers
    convolving = {
        name
        for name, cls in layers.layer_modules.items()
        if cls.__module__.endswith((".convolution", ".pooling")) and cls is not layers.Flatten
    }
    assert {"conv1d", "conv2d", "pool2d"} <= convolving
    for name in convolving:
        assert not convolution_free([{"type": name, "size": 8}], PPO, VECTOR), name
