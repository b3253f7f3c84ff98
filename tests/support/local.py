"""Local-backend test helpers: the stand-in runner as a `python`, a run's work directory and what its processes left."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path


def _workdir(tmp_path: Path, name: str) -> Path:
    return tmp_path / "results" / name


def _runners(workdir: Path, role: str = "learner") -> list[int]:
    """The pids of the learner runners (or, with role="env-server", the env servers) the run has had."""
    path = workdir / "runners.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return [int(line.split()[-1]) for line in lines if line.startswith("env-server") == (role == "env-server")]


def _episodes(workdir: Path) -> list[int]:
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    return [int(json.loads(line)["episode"]) for line in lines]


#: the stand-in runner (milliseconds to start) the local tests run for ``-m rlcloud.runner``
STANDIN = Path(__file__).parents[1] / "local" / "standin.py"


def write_standin_python(directory: Path) -> Path:
    """A ``python`` for LocalBackend that runs the stand-in for ``-m rlcloud.runner`` and is Python otherwise."""
    script = directory / "python"
    script.write_text(
        textwrap.dedent(f"""\
            #!/bin/sh
            if [ "$1" = "-m" ] && [ "$2" = "rlcloud.runner" ]; then
                shift 2
                exec {sys.executable} {STANDIN} "$@"
            fi
            exec {sys.executable} "$@"
        """)
    )
    script.chmod(0o755)
    return script


def alive(pid: int) -> bool:
    """Whether the process ``pid`` runs (a zombie, exited but not reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False
