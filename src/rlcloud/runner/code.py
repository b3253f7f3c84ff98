"""The run's own code on ``sys.path`` before anything the spec names is imported (every role, every mode).

A spec with ``code:`` names its archive by digest (``code.digest``, pinned by the spec of record): the
archive is fetched from ``RLCLOUD_CODE_STORE``, checked and unpacked read-only (:func:`rlcloud.codepack.fetch`),
its ``requirements:`` are installed into an overlay of the image's environment, cached
(:mod:`rlcloud.runner.requirements`), and its folder goes first on ``sys.path``, the overlay after it. A
local run without ``code:`` gets its project folder instead (``RLCLOUD_PROJECT_DIR``), the folder
``spec validate`` imports from. ``PYTHONPATH`` carries both to the processes a role starts (the environment
workers of the multi-threaded mode).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rlcloud.errors import SpecError, SpecProblem, WorkloadError
from rlcloud.runenv import CODE_STORE, RunnerEnv

if TYPE_CHECKING:
    from rlcloud.specs import ExperimentSpec

__all__ = ["code_folder", "install_code", "put_first_on_path"]

logger = logging.getLogger(__name__)


def put_first_on_path(folder: Path) -> None:
    """Make ``folder`` the first place imports look, here and in processes started from here (once)."""
    text = str(folder)
    if text in sys.path:
        sys.path.remove(text)
    sys.path.insert(0, text)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != text]
    os.environ["PYTHONPATH"] = os.pathsep.join([text, *paths])


def code_folder(spec: ExperimentSpec, run_env: RunnerEnv | None = None) -> Path | None:
    """The folder the run imports its own code from: the unpacked archive of ``spec.code.digest``, else the
    project folder of a local run, else None (only what is installed).

    Raises:
        SpecError: ``code:`` without a digest (a spec that was not started by rlcloud).
        WorkloadError: the archive cannot be fetched, or is refused (digest, paths, bounds).
    """
    run_env = run_env or RunnerEnv.from_env()
    code = spec.code
    if code is not None:
        if code.digest is None:
            raise SpecError(
                [
                    SpecProblem(
                        "code.digest", "is not set: start the run with rlcloud, which packs code.path and sets it"
                    )
                ]
            )
        if not run_env.code_store:
            raise WorkloadError(f"{CODE_STORE} is not set: the runner cannot fetch the code archive {code.digest}")
        from rlcloud.codepack import fetch

        folder = fetch(run_env.code_store, code.digest)
        logger.info("code %s from %s in %s", code.digest, run_env.code_store, folder)
        return folder
    if run_env.project_dir:
        return Path(run_env.project_dir)
    return None


def install_code(spec: ExperimentSpec, run_env: RunnerEnv | None = None) -> Path | None:
    """Put the run's code folder (:func:`code_folder`) first on ``sys.path``, and the overlay holding its
    archive's requirements (rlcloud.runner.requirements) right after it; return the code folder (None: none).

    Raises:
        SpecError: as :func:`code_folder`; on ``code.requirements`` when they cannot be installed.
        WorkloadError: as :func:`code_folder`.
    """
    folder = code_folder(spec, run_env)
    if folder is None:
        return None
    if spec.code is not None and spec.code.requirements is not None:
        from rlcloud.codepack import code_cache
        from rlcloud.runner.requirements import activate, install_requirements

        overlay = install_requirements(folder, spec.code.requirements, cache=code_cache().parent)
        activate(overlay)
        put_first_on_path(overlay)
    put_first_on_path(folder)
    return folder
