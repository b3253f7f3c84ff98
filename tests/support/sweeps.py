"""Sweep test helpers: a sweep over the CartPole example, a tiny one, and an environment that breaks."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from rlcloud import SweepSpec

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE_SPEC = ROOT / "examples" / "cartpole_ppo.yaml"


def _sweep(**fields: Any) -> SweepSpec:
    # a file reference resolves next to the sweep (base_dir), as every spec's file references do
    data: dict[str, Any] = {"name": "s", "experiment": CARTPOLE_SPEC.name, **fields}
    return SweepSpec.from_dict(data, base_dir=CARTPOLE_SPEC.parent)


TINY = {
    "total_timesteps": 300, "run_mode": "single", "num_workers": 1, "saver_frequency": None, "summary_frequency": None,
    "evaluation": None,
}  # fmt: skip


def _broken_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """An environment whose construction fails in every trial (exit 3), importable by the trials' runners."""
    (tmp_path / "brokenenv.py").write_text(
        textwrap.dedent(
            """
            import gymnasium

            class Env(gymnasium.Env):
                def __init__(self):
                    raise RuntimeError("no simulator licence")
            """
        )
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the sweeper and its trials inherit it
    return {"type": "brokenenv:Env"}


def trial_processes(
    sweep_file: Path, location: Path, indexes: list[int], logs: Path, mode: str = "wb"
) -> dict[int, Any]:
    """Sweep-pod runners (``--sweep FILE --index I``, what an Indexed Job's pod runs) for ``indexes``, each
    writing ``logs/trial<i>.log`` (``mode`` "ab": a restarted trial's lines follow its killed run's)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "RLCLOUD_SWEEP_RESULTS": str(location)}
    started = {}
    for i in indexes:
        argv = [sys.executable, "-m", "rlcloud.runner", "--role", "multi", "--index", str(i), "--sweep",
                str(sweep_file), "--workdir", str(logs / f"work{i}")]  # fmt: skip
        with open(logs / f"trial{i}.log", mode) as out:
            started[i] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    return started


def finish_trials(processes: dict[int, Any], logs: Path) -> None:
    """Wait for each trial's runner; exit 0 or the end of its log."""
    for i, process in processes.items():
        assert process.wait(timeout=1200) == 0, (logs / f"trial{i}.log").read_text()[-3000:]
