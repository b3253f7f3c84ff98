"""A code archive's ``requirements:`` installed with uv into an overlay of the runner's environment.

The overlay is a folder of its own (``$XDG_CACHE_HOME/rlcloud/overlays/<key>``), installed with
``uv pip install --target`` and put on ``sys.path`` after the code folder: the runner image's environment
(its virtual environment, owned by root, read-only to the pod's user) is never written to. uv does not read
packages from other places on ``sys.path`` (astral-sh/uv#2500, #7358: it looks only at the target), so
the install sees the image's packages through copies of their metadata laid into the target first and
removed afterwards, and every image package is a constraint at its installed version: a requirement the
image satisfies installs nothing, and one that would replace an image package (another numpy under
TensorFlow) is refused naming the conflict. The image's packages stay what the image was tested with.

Offline first: ``--no-index --no-build-isolation``, which installs what the archive holds (a local package,
``./pkgs/myhelper``, a wheel file) with the image's own build backend (setuptools is there, TensorFlow and
TensorBoard need it). Only when uv says a package is not among the archive's, the index is used (real
clusters reach PyPI; ``UV_INDEX_URL`` and uv's other settings in the environment apply), with isolated
builds. Relative paths in a requirements file are relative to the working directory (pip's and uv's rule):
uv runs in a writable copy of the code folder (setuptools writes ``build/`` and ``*.egg-info`` into a
package's folder; the unpacked archive is read-only).

An overlay is cached by :func:`requirements_key`: the requirements file, the files of the local paths it
names (and of the files it includes with ``-r``/``-c``), and the environment it extends (the Python and
the image's installed distributions). Editing the run's other code reuses the overlay. It is built in a
staging folder and renamed into place whole, under a lock, so the roles of a run on one machine install
once; a finished overlay is read-only.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path, PurePosixPath

from rlcloud.codepack import remove_tree
from rlcloud.errors import SpecError, SpecProblem

__all__ = ["OVERLAYS", "find_uv", "install_requirements", "requirements_key"]

logger = logging.getLogger(__name__)

#: The overlays' folder beside the unpacked archives (rlcloud.codepack.code_cache's parent).
OVERLAYS = "overlays"
#: What uv says when a requirement is not among the archive's files (index lookups disabled): try the index.
_NEEDS_INDEX = re.compile(r"not found in the provided package locations|index lookups were disabled")
#: How much of uv's error output an error message carries.
_ERROR_CHARS = 1200
#: Nested requirement files followed at most this deep (``-r a.txt`` in ``a.txt`` is a mistake, not a loop).
_MAX_DEPTH = 8


def _problem(message: str, value: str | None = None) -> SpecError:
    return SpecError([SpecProblem("code.requirements", message, value)])


def find_uv() -> str:
    """The uv binary: on ``PATH`` (the runner image has it in /usr/local/bin), beside this Python, or the
    ``uv`` package's. SpecError naming ``code.requirements`` when there is none."""
    found = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if found:
        return found
    try:
        import uv  # type: ignore[import-not-found,unused-ignore]

        return str(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        pass
    raise _problem("installing requirements needs uv, which is not installed here: pip install uv")


# --------------------------------------------------------------------------------------------- the key


def _local_path(token: str) -> str | None:
    """The archive-relative path a requirement names (``./pkgs/x``, ``file:pkgs/x``, ``x @ ./pkgs/x``), or None
    for a name the index resolves. SpecError for a path that leaves the code folder."""
    if " @ " in token:
        token = token.split(" @ ", 1)[1].strip()
    if token.startswith("file:"):
        token = token.removeprefix("file:").removeprefix("//")
    elif not token.startswith((".", "/")):
        return None
    return _inside(token.split(";", 1)[0].split("#", 1)[0].strip())


def _inside(token: str) -> str:
    """``token`` as a path inside the code folder; SpecError for one that leaves it."""
    path = PurePosixPath(token)
    if path.is_absolute() or ".." in path.parts:
        raise _problem(f"names {token}, which is not inside the code folder: give a path relative to it", token)
    return path.as_posix()


def _lines(text: str) -> list[str]:
    """A requirements file's logical lines: continuations joined, comments and blank lines left out."""
    joined = re.sub(r"\\\r?\n", " ", text)
    lines = [re.split(r"(^|\s)#", line, maxsplit=1)[0].strip() for line in joined.splitlines()]
    return [line for line in lines if line]


def _add_tree(digest: hashlib._Hash, root: Path, rel: str) -> None:
    target = root / rel
    files = sorted(target.rglob("*")) if target.is_dir() else [target]
    for path in files:
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")


def _walk_requirements(folder: Path, rel: str, digest: hashlib._Hash, depth: int) -> list[str]:
    """Hash ``rel`` and what it names into ``digest``; the requirement lines (for error messages)."""
    path = folder / rel
    if depth > _MAX_DEPTH or not path.is_file():
        raise _problem(f"{rel} is not a file of the code archive", rel)
    text = path.read_text(encoding="utf-8")
    digest.update(rel.encode() + b"\0" + text.encode() + b"\0")
    requirements: list[str] = []
    for line in _lines(text):
        parts = re.split(r"\s+|=", line, maxsplit=1) if line.startswith("-") else [line]
        option, value = parts[0], (parts[1] if len(parts) > 1 else "")
        if option in ("-e", "--editable"):
            raise _problem(f"{line}: an editable install cannot live in a read-only archive: leave out -e", line)
        if option in ("-r", "--requirement", "-c", "--constraint"):
            # nested files are relative to the file naming them (pip's rule, and uv's)
            nested = PurePosixPath(rel).parent / value.strip()
            requirements += _walk_requirements(folder, _inside(nested.as_posix()), digest, depth + 1)
            continue
        if option in ("-f", "--find-links") and _local_path(value.strip()) is not None:
            _add_tree(digest, folder, str(_local_path(value.strip())))  # wheels of the archive's own
            continue
        if not line.startswith("-"):
            requirements.append(line)
            local = _local_path(line)
            if local is not None:
                _add_tree(digest, folder, local)
    return requirements


def _environment() -> tuple[list[Path], list[str]]:
    """The site-packages folders of the running Python and the ``*.dist-info`` folders in them (sorted)."""
    places = []
    for candidate in [*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]:
        path = Path(candidate)
        if path.is_dir() and path not in places:
            places.append(path)
    infos = sorted(p.name for place in places for p in place.iterdir() if p.name.endswith(".dist-info"))
    return places, infos


def requirements_key(folder: Path, requirements: str) -> str:
    """The overlay's cache key: ``sha256-<hex>`` of the requirements (with the local packages and nested files
    they name, from ``folder``) and of the environment they extend (Python's version, its prefix, the
    installed distributions). SpecError naming ``code.requirements`` for a file the archive lacks, an
    editable requirement, or a path leaving the folder."""
    digest = hashlib.sha256()
    _walk_requirements(folder, requirements, digest, 0)
    _places, infos = _environment()
    digest.update(f"{sys.version}\0{os.path.realpath(sys.prefix)}\0".encode() + "\n".join(infos).encode())
    return "sha256-" + digest.hexdigest()


# ------------------------------------------------------------------------------------------ installing


def _mirror(site_dir: Path, scratch: Path, places: list[Path], infos: list[str]) -> tuple[list[str], Path]:
    """Lay the image's distributions' metadata into the target (what uv reads to see them installed) and write
    their versions as constraints. The names laid, and the constraints file."""
    constraints: list[str] = []
    laid: list[str] = []
    for place in places:
        for info in sorted(p for p in place.iterdir() if p.name.endswith(".dist-info")):
            metadata = info / "METADATA"
            if not metadata.is_file() or (site_dir / info.name).exists():
                continue
            (site_dir / info.name).mkdir()
            shutil.copyfile(metadata, site_dir / info.name / "METADATA")
            laid.append(info.name)
            name, _, version = info.name.removesuffix(".dist-info").partition("-")
            constraints.append(f"{name}=={version}")
    path = scratch / "image-constraints.txt"
    path.write_text("\n".join(sorted(set(constraints))) + "\n", encoding="utf-8")
    return laid, path


def _uv(
    uv: str, source: Path, site_dir: Path, constraints: Path, requirements: str, *, offline: bool
) -> tuple[int, str]:
    command = [uv, "pip", "install", "--python", sys.executable, "--target", str(site_dir)]
    command += ["--no-index", "--no-build-isolation"] if offline else []
    command += ["--constraint", str(constraints), "--requirement", requirements]
    env = dict(os.environ, UV_PYTHON_DOWNLOADS="never", UV_LINK_MODE="copy", UV_NO_PROGRESS="1")
    done = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True, check=False)
    return done.returncode, (done.stderr or "") + (done.stdout or "")


def _failure(requirements: str, lines: list[str], output: str, code: int) -> SpecError:
    """What failed, naming the requirement(s) uv's output mentions (else all of them) and uv's own words."""
    normal = output.lower().replace("_", "-")
    named = [
        line
        for line in lines
        if re.split(r"[\s;\[<>=!~@]", line, maxsplit=1)[0].lower().replace("_", "-").lstrip("./") in normal
    ]
    errors = [
        line.strip() for line in output.splitlines() if line.strip() and not line.startswith(("Using ", "Resolved "))
    ]
    said = " | ".join(errors)[-_ERROR_CHARS:]
    which = ", ".join(named or lines) or "(none)"
    return _problem(f"{requirements}: could not install {which} (uv exit code {code}): {said}", which)


def _install(folder: Path, requirements: str, lines: list[str], site_dir: Path, scratch: Path) -> None:
    """Install into ``site_dir`` (offline, then with the index when uv asks for it), working in ``scratch``;
    SpecError on failure."""
    uv = find_uv()
    source = scratch / "source"
    shutil.copytree(folder, source)
    for path in [source, *source.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    site_dir.mkdir()
    places, infos = _environment()
    laid, constraints = _mirror(site_dir, scratch, places, infos)
    code, output = _uv(uv, source, site_dir, constraints, requirements, offline=True)
    if code != 0 and _NEEDS_INDEX.search(output):
        logger.info("requirements: not all in the code archive, using the package index")
        code, output = _uv(uv, source, site_dir, constraints, requirements, offline=False)
    if code != 0:
        raise _failure(requirements, lines, output, code)
    for name in laid:
        shutil.rmtree(site_dir / name, ignore_errors=True)
    (site_dir / ".lock").unlink(missing_ok=True)  # uv's own lock on the target, of no use once it is done


def _read_only(root: Path) -> None:
    for folder, dirs, files in os.walk(root, topdown=False):
        for name in files:
            with contextlib.suppress(OSError):
                os.chmod(Path(folder) / name, 0o444, follow_symlinks=False)
        for name in dirs:
            os.chmod(Path(folder) / name, 0o555)
    os.chmod(root, 0o555)


def install_requirements(folder: Path, requirements: str, *, cache: Path) -> Path:
    """The overlay folder holding ``requirements`` (a file inside ``folder``, the unpacked archive) installed
    over the running environment: from ``cache/overlays/<key>`` when it is there, else installed now.

    Raises:
        SpecError: on ``code.requirements``, naming the requirement and uv's error, when it cannot be
            installed (not in the archive nor on the index, a conflict with the image's packages, a build
            that fails), uv is missing, or the file is not in the archive.
    """
    key = requirements_key(folder, requirements)
    dest = cache / OVERLAYS / key
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the roles of a run on one machine install once, one at a time
        if dest.is_dir():
            return dest  # another role installed it while this one waited
        # the overlay is made beside its place and renamed within its folder: moving a directory to another
        # folder needs write permission on the directory itself (its ".." changes), which a read-only one
        # no longer grants to the pod's user (rename(2), EACCES)
        staging = dest.parent / f".{key}.{os.getpid()}.partial"
        scratch = dest.parent / f".{key}.{os.getpid()}.work"
        for path in (staging, scratch):
            remove_tree(path)
        scratch.mkdir()
        try:
            lines = _walk_requirements(folder, requirements, hashlib.sha256(), 0)
            _install(folder, requirements, lines, staging, scratch)
            _read_only(staging)
            os.rename(staging, dest)
        finally:
            remove_tree(staging)
            remove_tree(scratch)
    logger.info("requirements %s installed in %s", requirements, dest)
    return dest


def activate(overlay: Path) -> None:
    """Make the overlay's packages importable: its ``.pth`` files processed (``site.addsitedir``), its folder
    on ``sys.path`` (placed first by the caller, :func:`rlcloud.runner.code.install_code`)."""
    site.addsitedir(str(overlay))
