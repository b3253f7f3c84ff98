"""A code archive's requirements (issue 40): installed with uv into a cached overlay of the runner's environment,
offline from the archive, the index only when needed; clear errors naming the requirement (exit 2)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from rlcloud.codepack import code_location, fetch, pin, publish
from rlcloud.errors import SpecError
from rlcloud.runner.requirements import OVERLAYS, install_requirements, requirements_key
from rlcloud.specs import ExperimentSpec
from rlcloud.specs.code import CodeSpec
from rlcloud.storage import open_store

pytestmark = pytest.mark.processes  # uv runs as a process

HELPER_PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "myhelper"
version = "0.1.0"
dependencies = ["numpy"]
"""


def _project(root: Path, requirements: str, *, helper: str = "def shaped(r):\n    return 2 * r\n") -> Path:
    (root / "pkgs" / "myhelper" / "src" / "myhelper").mkdir(parents=True)
    (root / "pkgs" / "myhelper" / "pyproject.toml").write_text(HELPER_PYPROJECT)
    (root / "pkgs" / "myhelper" / "src" / "myhelper" / "__init__.py").write_text(helper)
    (root / "reqenvs.py").write_text("import myhelper\n\nSCALE = myhelper.shaped(3)\n")
    (root / "requirements.txt").write_text(requirements)
    return root


def _unpacked(tmp_path: Path, root: Path) -> tuple[ExperimentSpec, Path]:
    """The spec pinned to ``root``'s archive, and the archive unpacked as a runner would (read-only)."""
    spec = ExperimentSpec.from_dict(
        {"name": "c", "environment": {"type": "reqenvs:Corridor"}, "agent": {"type": "ppo"}, "episodes": 1}
    )
    pinned, archive = pin(spec.model_copy(update={"code": CodeSpec(path=str(root), requirements="requirements.txt")}))
    assert archive is not None and pinned.code is not None and pinned.code.digest is not None
    location = code_location(str(tmp_path / "results"))
    publish(archive, open_store(location))
    return pinned, fetch(location, archive.digest, cache=tmp_path / "cache" / "code")


def _site_listing() -> list[str]:
    place = Path(sysconfig.get_paths()["purelib"])
    return sorted(p.name for p in place.iterdir())


def test_a_local_package_installs_offline_into_a_cached_read_only_overlay(tmp_path: Path) -> None:
    # numpy: the environment has it, so it is not installed again; myhelper: a package inside the archive
    root = _project(tmp_path / "p", "numpy\n./pkgs/myhelper  # reward shaping\n")
    _spec, folder = _unpacked(tmp_path, root)
    before = _site_listing()
    cache = tmp_path / "cache"
    overlay = install_requirements(folder, "requirements.txt", cache=cache)
    assert overlay.parent == cache / OVERLAYS
    names = sorted(p.name for p in overlay.iterdir())
    assert "myhelper" in names and "myhelper-0.1.0.dist-info" in names
    assert not any(n.startswith("numpy") for n in names)  # the image's numpy, not a copy
    assert not any(n.endswith(".dist-info") and not n.startswith("myhelper") for n in names)  # no mirrored metadata
    assert overlay.stat().st_mode & 0o777 == 0o555
    assert _site_listing() == before  # the running environment is not written to
    assert sorted(p.name for p in (cache / OVERLAYS).iterdir() if p.name.endswith(".partial")) == []
    # the overlay is importable after the code folder, in a process of its own
    probe = "import sys; sys.path[:0] = sys.argv[1:3]; import reqenvs; print(reqenvs.SCALE)"
    done = subprocess.run([sys.executable, "-c", probe, str(folder), str(overlay)], capture_output=True, text=True)
    assert done.stdout.strip() == "6", done.stderr
    # cached: the same requirements over the same environment need no uv at all
    os.environ["PATH"], path = "", os.environ["PATH"]
    try:
        assert install_requirements(folder, "requirements.txt", cache=cache) == overlay
    finally:
        os.environ["PATH"] = path


def test_the_cache_key_follows_the_requirements_and_their_local_packages_not_the_other_code(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", "./pkgs/myhelper\n")
    key = requirements_key(root, "requirements.txt")
    (root / "reqenvs.py").write_text("SCALE = 7\n")  # the run's own code changed: the same overlay
    assert requirements_key(root, "requirements.txt") == key
    (root / "pkgs" / "myhelper" / "src" / "myhelper" / "__init__.py").write_text("def shaped(r):\n    return r\n")
    changed = requirements_key(root, "requirements.txt")
    assert changed != key  # the package changed: installed again
    (root / "requirements.txt").write_text("./pkgs/myhelper\nnumpy\n")
    assert requirements_key(root, "requirements.txt") != changed
    # a nested file is part of the key, relative to the file naming it
    (root / "reqs").mkdir()
    (root / "reqs" / "base.txt").write_text("numpy\n")
    (root / "requirements.txt").write_text("-r reqs/base.txt\n")
    nested = requirements_key(root, "requirements.txt")
    (root / "reqs" / "base.txt").write_text("numpy>=1\n")
    assert requirements_key(root, "requirements.txt") != nested
    # so is a folder of wheels the file points uv at
    (root / "wheels").mkdir()
    (root / "requirements.txt").write_text("--find-links ./wheels\nmyhelper\n")
    links = requirements_key(root, "requirements.txt")
    (root / "wheels" / "myhelper-0.2.0-py3-none-any.whl").write_bytes(b"a wheel")
    assert requirements_key(root, "requirements.txt") != links


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("-e ./pkgs/myhelper", "editable"),
        ("../outside", "not inside the code folder"),
        ("file:///etc/pkg", "not inside the code folder"),
        ("-r ../other.txt", "not inside the code folder"),
        ("-r missing.txt", "missing.txt is not a file of the code archive"),
    ],
)
def test_requirements_that_cannot_come_from_the_archive_are_refused_before_uv_runs(
    tmp_path: Path, line: str, words: str
) -> None:
    root = _project(tmp_path / "p", f"{line}\n")
    with pytest.raises(SpecError, match=words) as caught:
        install_requirements(root, "requirements.txt", cache=tmp_path / "cache")
    assert [p.field for p in caught.value.problems] == ["code.requirements"]
    assert not (tmp_path / "cache" / OVERLAYS).exists() or not any((tmp_path / "cache" / OVERLAYS).iterdir())


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_name_the_archive_lacks_goes_to_the_index_and_its_failure_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an index nothing listens on: uv's connection is refused at once (no retries)
    monkeypatch.setenv("UV_INDEX_URL", f"http://127.0.0.1:{_closed_port()}/simple")
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    root = _project(tmp_path / "p", "./pkgs/myhelper\nrlcloud-no-such-helper==1.0\n")
    cache = tmp_path / "cache"
    with pytest.raises(SpecError) as caught:
        install_requirements(root, "requirements.txt", cache=cache)
    message = str(caught.value)
    assert [p.field for p in caught.value.problems] == ["code.requirements"]
    assert "could not install rlcloud-no-such-helper==1.0" in message and "uv exit code" in message
    assert "127.0.0.1" in message  # uv's own words: it asked the index
    assert [p.name for p in (cache / OVERLAYS).iterdir() if not p.name.endswith(".lock")] == []  # nothing half-made


def test_a_requirement_that_would_replace_an_image_package_is_refused_naming_it(tmp_path: Path) -> None:
    import numpy

    root = _project(tmp_path / "p", "numpy>=999\n")
    with pytest.raises(SpecError, match=rf"numpy>=999.*numpy=={numpy.__version__}") as caught:
        install_requirements(root, "requirements.txt", cache=tmp_path / "cache")
    assert "could not install numpy>=999" in str(caught.value)


def test_the_runner_exits_as_for_a_spec_error_when_requirements_fail(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", "numpy>=999\n")
    spec, _folder = _unpacked(tmp_path, root)
    (tmp_path / "spec.yaml").write_text(spec.to_yaml())
    env = dict(os.environ, RLCLOUD_CODE_STORE=code_location(str(tmp_path / "results")))
    env["XDG_CACHE_HOME"] = str(tmp_path / "pod-cache")
    command = [sys.executable, "-m", "rlcloud.runner", "--role", "single", "--index", "0"]
    command += ["--spec", str(tmp_path / "spec.yaml"), "--workdir", str(tmp_path / "work")]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "code.requirements" in done.stderr and "numpy>=999" in done.stderr
    assert "Traceback" not in done.stderr


CORRIDOR = Path(__file__).resolve().parents[1] / "examples" / "corridor"


@pytest.mark.training
def test_a_local_run_installs_its_requirements_and_its_policy_loads_without_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlcloud import Experiment

    project = tmp_path / "corridor"
    shutil.copytree(CORRIDOR, project, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    results = tmp_path / "results"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "machine"))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))  # install_code adds to it: put back after
    monkeypatch.chdir(tmp_path)  # not the project folder: the runner imports the archive and its overlay only
    exp = Experiment(project / "shaped.yaml", results=str(results), episodes=3).start()
    assert exp.wait(timeout=900).state == "succeeded", exp.logs()
    (overlay,) = (tmp_path / "machine" / "rlcloud" / OVERLAYS).glob("sha256-*")
    assert (overlay / "corridor_rewards" / "__init__.py").is_file()
    # on a laptop without the project folder: the policy's code comes from the store, by the record's digest
    shutil.rmtree(project)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "laptop"))
    monkeypatch.setattr(sys, "path", list(sys.path))
    for module in ("shaped_env", "corridor_env", "corridor_rewards"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    attached = Experiment.attach("corridor-shaped", results=str(results))
    assert attached.spec.code is not None and attached.spec.code.digest is not None
    try:
        with attached.agent() as policy:
            (episode,) = policy.episodes(1)
        assert episode.length > 0
        laptop = tmp_path / "laptop" / "rlcloud"
        assert (laptop / "code" / attached.spec.code.digest.replace(":", "-") / "shaped_env.py").is_file()
        assert str(laptop / OVERLAYS) in str(sys.modules["corridor_rewards"].__file__)
    finally:
        for module in ("shaped_env", "corridor_env", "corridor_rewards"):
            sys.modules.pop(module, None)
