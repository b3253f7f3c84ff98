"""The runner install on its own (``pip install 'rlcloud[runner]'``: what the runner images hold) trains the
example with its summaries on.

A virtual environment gets exactly the locked dependencies of the ``runner`` extra (``uv sync --frozen
--no-dev --extra runner``, from uv's cache when it has them): no ``analysis`` extra, no dev group. Its
``rlcloud`` console script trains examples/cartpole_ppo.yaml (summary_frequency set, so TensorBoard's
writers are used) for a few hundred timesteps, and the run's metrics and TensorBoard events are on disk.
TensorFlow 2.21 no longer depends on TensorBoard: without it in the extra, the summaries raise
TBNotInstalledError in every pod (issue 24).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "cartpole_ppo.yaml"

pytestmark = [pytest.mark.slow, pytest.mark.training]


@pytest.fixture(scope="module")
def runner_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding rlcloud with the runner extra alone, from uv.lock (no analysis extra, no dev group)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH (scripts/check puts it there)")
    venv = tmp_path_factory.mktemp("runner") / "venv"
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(venv)}
    env.pop("VIRTUAL_ENV", None)
    command = [uv, "sync", "--frozen", "--no-dev", "--extra", "runner", "--no-editable", "--quiet"]
    command += ["--project", str(ROOT)]
    # from the cache first (what the repository's own environment was installed from); the index otherwise
    done = subprocess.run([*command, "--offline"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot install the runner extra here (no network and not in uv's cache): {done.stderr[-500:]}")
    return venv


def test_the_runner_install_trains_the_example_with_summaries(runner_venv: Path, tmp_path: Path) -> None:
    spec = yaml.safe_load(EXAMPLE.read_text())
    assert spec["summary_frequency"], "the example writes TensorBoard summaries"
    python = runner_venv / "bin" / "python"
    # only the runner extra: what the analysis extra adds is absent (so the run cannot lean on it)
    # (matplotlib is there: tensorforce depends on it)
    probe = "import importlib.util, json; print(json.dumps([m for m in ('scipy', 'ipywidgets', 'pytest') " \
        "if importlib.util.find_spec(m) is None]))"  # fmt: skip
    absent = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True).stdout
    assert json.loads(absent) == ["scipy", "ipywidgets", "pytest"]
    assert importlib.util.find_spec("scipy") is not None  # while the dev environment has them

    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    # fmt: off
    command = [
        str(runner_venv / "bin" / "rlcloud"), "experiment", "run", str(EXAMPLE), "-q",
        "--set", "total_timesteps=400", "--set", "num_workers=4", "--results", str(tmp_path / "results"),
    ]
    # fmt: on
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "TBNotInstalledError" not in done.stderr
    run = tmp_path / "results" / "cartpole-ppo"
    episodes = (run / "metrics.jsonl").read_text().splitlines()
    assert episodes and json.loads(episodes[-1])["timestep"] <= 400 + 4 * 500
    events = sorted(p.relative_to(run).parts[:2] for p in run.rglob("events.out.tfevents.*"))
    # rlcloud's episode scalars (with Tensorforce's update summaries forwarded into them as agent/*) and
    # Tensorforce's own event files, which it writes outside TensorBoard's logdir
    assert ("summaries", "rlcloud") in events and ("tensorforce-summaries", "agent") in events, events
