"""The trained policy back (rlcloud.policies, rlcloud.runner.policy): restored from a run's checkpoint in a
directory or in Cloud Storage, acting as the run's own evaluation did; exported as a SavedModel that
TensorFlow alone loads; rendered to a GIF and an MP4 with one frame per step; clear errors otherwise.

One real CartPole PPO run (started as a user starts it) is shared by the module's tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlcloud import Experiment, ExperimentSpec
from rlcloud.cli import main
from rlcloud.errors import SpecError
from tests.support.trained_run import SPEC

pytestmark = [pytest.mark.training, pytest.mark.processes]


def _evaluation_returns(exp: Experiment) -> list[float]:
    return [float(r) for r in exp.metrics(evaluation=True)["return"]]


def test_agent_plays_the_runs_own_final_evaluation(trained: Experiment) -> None:
    expected = _evaluation_returns(trained)
    assert len(expected) == 2
    with trained.agent() as policy:
        assert policy.checkpoint.startswith("ckpt-") and policy.state["timestep"] >= 1500
        played = policy.episodes(2)
    assert [e.ret for e in played] == expected
    assert [e.length for e in played] == [int(r) for r in expected]  # CartPole: a reward of 1 per step


def test_agent_from_cloud_storage_is_the_same_policy(
    trained: Experiment, fake_gcs: Any, gcs_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlcloud.storage import open_store
    from rlcloud.storage.base import is_internal

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake_gcs.url)
    root = f"gs://{gcs_bucket}/rl"
    local = Path(trained.location)
    names = [(p, p.relative_to(local).as_posix()) for p in sorted(local.rglob("*")) if p.is_file()]
    files = [(p, name) for p, name in names if not is_internal(name)]  # what a runner syncs
    open_store(f"{root}/{trained.name}").upload_files(files)
    remote = Experiment(trained.spec, results=root)
    with remote.agent() as policy:
        played = policy.episodes(2)
    assert [e.ret for e in played] == _evaluation_returns(trained)
    # a checkpoint named explicitly is fetched the same way
    with remote.agent(checkpoint=policy.checkpoint) as again:
        assert again.checkpoint == policy.checkpoint


def test_savedmodel_acts_as_the_agent_with_tensorflow_alone(trained: Experiment, tmp_path: Path) -> None:
    saved = trained.export(tmp_path / "export")
    info = json.loads((tmp_path / "export" / "rlcloud-policy.json").read_text())
    assert info["run"] == "cp-policy" and info["checkpoint"].startswith("ckpt-") and info["spec"]["seed"] == 5
    with trained.agent() as policy:
        env = policy.environment()
        states = [env.reset(seed=11)]
        actions = []
        for _ in range(40):
            action, _ = policy.act(states[-1])
            actions.append(int(action))
            state, _, terminal = env.step(action)
            states.append(env.reset() if terminal else state)
        env.close()
    np.save(tmp_path / "states.npy", np.asarray(states[:-1], dtype=np.float32))
    # no rlcloud, no Tensorforce in this process: the SavedModel alone
    script = (
        "import sys, numpy as np, tensorflow as tf\n"
        "m = tf.saved_model.load(sys.argv[1])\n"
        "s = np.load(sys.argv[2])\n"
        "a = m.act(s, {'mask': np.ones((len(s), 2), bool)}, True)\n"
        "assert 'rlcloud' not in sys.modules and 'tensorforce' not in sys.modules\n"
        "print(' '.join(str(int(x)) for x in np.asarray(a)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(saved), str(tmp_path / "states.npy")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert [int(x) for x in out.stdout.split()] == actions


def test_a_gif_has_one_frame_per_step_and_an_mp4_too(trained: Experiment, tmp_path: Path) -> None:
    import imageio.v2 as imageio
    from PIL import Image

    gif = trained.video(tmp_path / "cartpole.gif", progress=False)
    assert gif.returns == _evaluation_returns(trained)[:1]
    with Image.open(gif.path) as image:
        assert image.size == (600, 400)  # CartPole's own frame: under MAX_FRAME_PIXELS
        durations = []
        for index in range(image.n_frames):
            image.seek(index)
            durations.append(image.info["duration"])
    assert gif.frames == gif.lengths[0]
    # one frame per step, 50 a second: Pillow stores equal frames in a row as one frame shown as long as they
    # were (a cart that moved less than a pixel), so the frames are counted by their time, 20 ms each
    assert len(durations) <= gif.lengths[0] and sum(durations) == 20 * gif.lengths[0]
    assert "data:image/gif;base64," in gif._repr_html_()  # inline in a notebook
    mp4 = trained.video(tmp_path / "two.mp4", episodes=2, progress=False)
    assert mp4.returns == _evaluation_returns(trained)
    with imageio.get_reader(mp4.path) as reader:
        assert reader.count_frames() == sum(mp4.lengths) == mp4.frames
    assert not list(tmp_path.glob(".*partial*"))


def test_bad_requests_are_refused_by_name(trained: Experiment, tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="path"):
        trained.video(tmp_path / "x.avi", progress=False)
    with pytest.raises(SpecError, match="checkpoint"):
        trained.agent(checkpoint="ckpt-000000000007")
    with pytest.raises(SpecError, match="max_frames"), trained.agent() as policy:
        policy.episodes(1, on_frame=lambda frame: None, max_frames=3)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(SpecError, match="not empty"):
        trained.export(tmp_path / "full")


def test_a_run_without_checkpoints_is_a_clear_error(tmp_path: Path) -> None:
    from rlcloud.record import create_record
    from rlcloud.storage import open_store

    spec = ExperimentSpec(**{**SPEC, "name": "never-saved"})
    create_record(open_store(str(tmp_path / "never-saved")), spec)
    with pytest.raises(SpecError, match="no complete checkpoint"):
        Experiment(spec, results=str(tmp_path)).agent()


def test_cli_export_and_video(trained: Experiment, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = trained.results_root
    assert main(["experiment", "video", "cp-policy", str(tmp_path / "p.gif"), "--results", root, "-q"]) == 0
    out = capsys.readouterr().out
    assert "p.gif" in out and f"returns {_evaluation_returns(trained)[0]:g}" in out
    assert main(["experiment", "export", "cp-policy", str(tmp_path / "dest"), "--results", root]) == 0
    assert (tmp_path / "dest" / "policy" / "saved_model.pb").is_file()
    for argv in (
        ["experiment", "video", "cp-policy", str(tmp_path / "q.gif"), "--episodes", "0"],
        ["experiment", "video", "cp-policy", str(tmp_path / "q.gif"), "--fps", "nan"],
        ["experiment", "video", "cp-policy", str(tmp_path / "q.webm")],
        ["experiment", "export", "cp-policy", str(tmp_path / "d2"), "--checkpoint", "ckpt-1"],
        ["experiment", "video", "no-such-run", str(tmp_path / "q.gif")],
    ):
        code = main([*argv, "--results", root])
        err = capsys.readouterr().err
        assert code in (1, 2) and "Traceback" not in err and err.strip(), argv
        assert code == 2 or "no-such-run" in argv
