"""The runner images' Dockerfiles, parsed and checked against the code (in seconds, with no container engine;
./scripts/check-images builds the CPU image with podman and trains the example in it, in CI after the tests).

A small parser for the Dockerfile instruction grammar (parser directives, comments, line continuations,
exec-form JSON arrays, ARG substitution in FROM) reads images/*/Dockerfile. The checks: the final stage's
ENTRYPOINT is the command the Kubernetes builders give every container, the runner accepts the arguments
they pass, the modules named exist, the user is not root, every base image is pinned, the files copied
into the image are in the build context, bind-mount targets are absolute (buildah 1.28 refuses relative
ones), and the GPU image installs the locked TensorFlow version with the pinned CUDA wheels
(images/gpu/cuda-wheels.txt), whose resolution is checked as a dry run.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from rlcloud.specs import ExperimentSpec

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "images"
VARIANTS = ("cpu", "gpu")

KNOWN_INSTRUCTIONS = frozenset(
    {
        "ADD",
        "ARG",
        "CMD",
        "COPY",
        "ENTRYPOINT",
        "ENV",
        "EXPOSE",
        "FROM",
        "HEALTHCHECK",
        "LABEL",
        "MAINTAINER",
        "ONBUILD",
        "RUN",
        "SHELL",
        "STOPSIGNAL",
        "USER",
        "VOLUME",
        "WORKDIR",
    }
)
_DIRECTIVE = re.compile(r"^#\s*([a-zA-Z][a-zA-Z0-9_-]*)\s*=\s*(.*?)\s*$")
_VAR = re.compile(
    r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


class DockerfileError(ValueError):
    """The text is not a valid Dockerfile (for the subset of the grammar these images use)."""


@dataclass
class Instruction:
    """One instruction: its keyword (upper case), the argument text with continuations joined, its first line."""

    keyword: str
    args: str
    line: int

    def exec_form(self) -> list[str] | None:
        """The JSON-array ("exec") form's argv, None for the shell form; DockerfileError if the array is malformed."""
        if not self.args.startswith("["):
            return None
        try:
            value = json.loads(self.args)
        except ValueError as exc:
            raise DockerfileError(f"line {self.line}: {self.keyword} array is not valid JSON: {exc}") from exc
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise DockerfileError(f"line {self.line}: {self.keyword} array must hold strings only")
        return value


@dataclass
class Stage:
    """A build stage: its base image (global ARGs substituted), its alias and its instructions."""

    base: str
    alias: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def last(self, keyword: str) -> Instruction | None:
        """The stage's last instruction of this kind (the one that takes effect), or None."""
        found = [i for i in self.instructions if i.keyword == keyword]
        return found[-1] if found else None

    def all(self, keyword: str) -> list[Instruction]:
        """Every instruction of this kind in the stage, in order."""
        return [i for i in self.instructions if i.keyword == keyword]


@dataclass
class Dockerfile:
    """A parsed Dockerfile: parser directives, global ARGs (before the first FROM) and stages."""

    directives: dict[str, str]
    global_args: dict[str, str | None]
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        """The stage that becomes the image."""
        return self.stages[-1]


def parse_instructions(text: str) -> tuple[dict[str, str], list[Instruction]]:
    """Split Dockerfile text into parser directives and instructions.

    Follows Docker's rules: directives (``# syntax=...``, ``# escape=...``) only at the very top;
    comment lines are dropped, also inside a continued instruction; a line ending in the escape
    character continues on the next one.
    """
    lines = text.splitlines()
    directives: dict[str, str] = {}
    start = 0
    for start, raw in enumerate(lines):  # noqa: B007 - start is used after the loop
        match = _DIRECTIVE.match(raw)
        if not match or match.group(1).lower() in directives:
            break
        directives[match.group(1).lower()] = match.group(2)
    else:
        start = len(lines)
    escape = directives.get("escape", "\\")
    if escape not in ("\\", "`"):
        raise DockerfileError(f"escape directive must be \\ or `, not {escape!r}")

    instructions: list[Instruction] = []
    pending: list[str] = []
    pending_line = 0
    for number, raw in enumerate(lines[start:], start=start + 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if not pending:
            pending_line = number
        continued = stripped.endswith(escape)
        pending.append(stripped[:-1].rstrip() if continued else stripped)
        if continued:
            continue
        instructions.append(_instruction(" ".join(part for part in pending if part), pending_line))
        pending = []
    if pending:
        raise DockerfileError(f"line {pending_line}: the file ends inside a continued instruction")
    return directives, instructions


def _instruction(joined: str, line: int) -> Instruction:
    keyword, _, args = joined.partition(" ")
    keyword = keyword.upper()
    if keyword not in KNOWN_INSTRUCTIONS:
        raise DockerfileError(f"line {line}: unknown instruction {keyword!r}")
    args = args.strip()
    if "<<" in args and keyword in ("RUN", "COPY", "ADD"):
        raise DockerfileError(f"line {line}: heredocs are not supported by this parser")
    if not args:
        raise DockerfileError(f"line {line}: {keyword} needs arguments")
    return Instruction(keyword, args, line)


def substitute(value: str, variables: dict[str, str | None]) -> str:
    """Expand ``$VAR``, ``${VAR}`` and ``${VAR:-default}`` as Docker does in FROM lines."""

    def repl(match: re.Match[str]) -> str:
        name = match.group("braced") or match.group("bare")
        current = variables.get(name)
        if current:
            return current
        return match.group("default") or ""

    return _VAR.sub(repl, value)


def parse_dockerfile(text: str) -> Dockerfile:
    """Parse a Dockerfile into stages; DockerfileError for anything Docker would reject (within the subset).

    Stricter than Docker in one place: a CMD/ENTRYPOINT/SHELL that starts with ``[`` but is not a JSON
    array of strings is an error, where Docker would quietly run it through ``/bin/sh -c``.
    """
    directives, instructions = parse_instructions(text)
    global_args: dict[str, str | None] = {}
    stages: list[Stage] = []
    aliases: set[str] = set()
    for ins in instructions:
        if ins.keyword == "FROM":
            words = ins.args.split()
            words = [w for w in words if not w.startswith("--platform=")]
            if len(words) == 3 and words[1].upper() == "AS":
                alias: str | None = words[2].lower()
            elif len(words) == 1:
                alias = None
            else:
                raise DockerfileError(f"line {ins.line}: expected FROM IMAGE [AS NAME], got {ins.args!r}")
            if alias in aliases:
                raise DockerfileError(f"line {ins.line}: duplicate stage name {alias!r}")
            if alias:
                aliases.add(alias)
            stages.append(Stage(substitute(words[0], global_args), alias))
        elif not stages:
            if ins.keyword != "ARG":
                raise DockerfileError(f"line {ins.line}: only ARG may come before the first FROM")
            name, _, default = ins.args.partition("=")
            global_args[name.strip()] = default.strip().strip('"') or None
        else:
            if ins.keyword in ("CMD", "ENTRYPOINT", "SHELL"):
                ins.exec_form()  # a malformed array raises here
            stages[-1].instructions.append(ins)
    if not stages:
        raise DockerfileError("no FROM instruction")
    return Dockerfile(directives, global_args, stages)


def image_tag(reference: str) -> str | None:
    """The tag of an image reference (``None`` when it has none); a registry port is not a tag."""
    name = reference.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore ``patterns`` keep ``path`` (relative, '/'-separated) out of the build context.

    Docker's rules: patterns are matched in order and the last match wins; ``!`` re-includes; a pattern
    that matches a directory matches everything under it.
    """
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        pat = pat.strip("/")
        if any(_match(candidate, pat) for candidate in candidates):
            excluded = not negate
    return excluded


def _match(path: str, pattern: str) -> bool:
    if pattern == "**":
        return True
    if pattern.startswith("**/"):
        tail = pattern[3:]
        return any(fnmatch.fnmatchcase("/".join(path.split("/")[i:]), tail) for i in range(len(path.split("/"))))
    return fnmatch.fnmatchcase(path, pattern)


def read_dockerignore() -> list[str]:
    """The repository's .dockerignore patterns (comments and blank lines dropped)."""
    path = ROOT / ".dockerignore"
    if not path.exists():
        return []
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def load(variant: str) -> Dockerfile:
    """images/<variant>/Dockerfile, parsed."""
    return parse_dockerfile((IMAGES / variant / "Dockerfile").read_text())


# ----------------------------------------------------------------------------------------- the parser


def test_parser_joins_continuations_and_drops_comments_inside_them() -> None:
    text = (
        "# syntax=docker/dockerfile:1\nFROM python:3.11.13-slim AS base\n"
        "RUN apt-get update \\\n# a comment\n    && apt-get install -y curl\n"
    )
    parsed = parse_dockerfile(text)
    assert parsed.directives == {"syntax": "docker/dockerfile:1"}
    (run,) = parsed.final.all("RUN")
    assert run.args == "apt-get update && apt-get install -y curl"
    assert run.line == 3
    assert parsed.final.alias == "base"


def test_parser_substitutes_global_args_in_from() -> None:
    parsed = parse_dockerfile("ARG BASE=python:3.11.13-slim\nARG TAG\nFROM ${BASE}\nFROM repo/x:${TAG:-1.2}\n")
    assert [s.base for s in parsed.stages] == ["python:3.11.13-slim", "repo/x:1.2"]


def test_parser_honours_the_escape_directive() -> None:
    parsed = parse_dockerfile("# escape=`\nFROM a:1\nRUN echo a `\n    b\n")
    assert parsed.final.all("RUN")[0].args == "echo a b"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("FROM a:1\nRUNN echo\n", "unknown instruction 'RUNN'"),
        ('FROM a:1\nENTRYPOINT ["python", \\\n', "ends inside"),
        ('FROM a:1\nENTRYPOINT ["python" "-m"]\n', "not valid JSON"),
        ('FROM a:1\nCMD ["python", 1]\n', "strings only"),
        ("RUN echo\nFROM a:1\n", "only ARG may come before"),
        ("ARG X=1\n", "no FROM"),
        ("FROM a:1 AS b\nFROM c:1 AS b\n", "duplicate stage"),
        ("FROM a:1\nWORKDIR\n", "needs arguments"),
    ],
)
def test_parser_rejects_what_docker_rejects(text: str, message: str) -> None:
    with pytest.raises(DockerfileError, match=re.escape(message)):
        parse_dockerfile(text)


def test_exec_form_is_told_from_shell_form() -> None:
    stage = parse_dockerfile('FROM a:1\nENTRYPOINT ["python", "-m", "x"]\nCMD python -m y\n').final
    assert stage.last("ENTRYPOINT").exec_form() == ["python", "-m", "x"]  # type: ignore[union-attr]
    assert stage.last("CMD").exec_form() is None  # type: ignore[union-attr]


def test_image_tags_and_dockerignore_matching() -> None:
    assert image_tag("python:3.11.13-slim-bookworm") == "3.11.13-slim-bookworm"
    assert image_tag("localhost:5000/x") is None
    assert image_tag("ghcr.io/astral-sh/uv:0.13.9") == "0.13.9"
    patterns = ["**", "!src", "**/__pycache__"]
    assert dockerignored(".venv/bin/python", patterns)
    assert not dockerignored("src/rlcloud/cli.py", patterns)
    assert dockerignored("src/rlcloud/__pycache__/cli.cpython-311.pyc", patterns)


# ------------------------------------------------------------------------------------------ the images


def _builder_commands() -> list[tuple[list[str], list[str]]]:
    """(command, args) of every container the Kubernetes builders create, over all three run modes."""
    from rlcloud.k8s.builders import build_workloads

    base = ExperimentSpec.from_file(ROOT / "examples" / "cartpole_ppo.yaml", run_mode="single", num_workers=1)
    specs = [
        base,
        base.replace(run_mode="multi-threaded", num_workers=2),
        base.replace(run_mode="distributed", num_workers=2),
    ]
    found = []
    for spec in specs:
        for obj in build_workloads(spec, namespace="rlcloud", image="registry.example/runner:1"):
            if getattr(obj, "kind", None) != "Job":
                continue
            for container in obj.spec.template.spec.containers:
                found.append((list(container.command), list(container.args)))
    return found


@pytest.mark.parametrize("variant", VARIANTS)
def test_entrypoint_is_what_the_kubernetes_builders_run(variant: str) -> None:
    final = load(variant).final
    entrypoint = final.last("ENTRYPOINT")
    assert entrypoint is not None, "the final stage needs an ENTRYPOINT"
    argv = entrypoint.exec_form()
    assert argv is not None, "ENTRYPOINT must be a JSON array (exec form): no shell between Kubernetes and python"
    commands = _builder_commands()
    assert len(commands) == 1 + 1 + 2  # single, multi, distributed agent + env servers
    for command, _ in commands:
        # the pods set `command`, which replaces ENTRYPOINT: both must run the same thing, so that
        # `docker run IMAGE --role ...` behaves like a pod
        assert command == argv


def test_the_runner_accepts_the_arguments_the_builders_pass() -> None:
    from rlcloud.runner.main import ROLES, parse_args

    roles = set()
    for _, args in _builder_commands():
        # Kubernetes expands $(RLCLOUD_INDEX) from the completion index before the runner sees it
        parsed = parse_args([a.replace("$(RLCLOUD_INDEX)", "0") for a in args])
        roles.add(parsed.role)
    assert roles == set(ROLES)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_modules_the_entrypoint_names_exist(variant: str) -> None:
    argv = load(variant).final.last("ENTRYPOINT").exec_form()  # type: ignore[union-attr]
    assert argv is not None and argv[:2] == ["python", "-m"]
    module = argv[2]
    assert importlib.util.find_spec(module) is not None
    # `python -m PACKAGE` runs PACKAGE.__main__
    assert importlib.util.find_spec(f"{module}.__main__") is not None


@pytest.mark.parametrize("variant", VARIANTS)
def test_final_stage_runs_as_a_numeric_non_root_user(variant: str) -> None:
    user = load(variant).final.last("USER")
    assert user is not None, "without USER the container runs as root"
    uid = user.args.split(":", 1)[0]
    assert uid not in ("root", "0")
    # Kubernetes' runAsNonRoot can only check a numeric UID
    assert uid.isdigit()


@pytest.mark.parametrize("variant", VARIANTS)
def test_pods_run_as_the_images_user(variant: str) -> None:
    from rlcloud.k8s.builders import build_workloads

    uid, _, gid = load(variant).final.last("USER").args.partition(":")  # type: ignore[union-attr]
    spec = ExperimentSpec.from_file(ROOT / "examples" / "cartpole_ppo.yaml")
    jobs = [o for o in build_workloads(spec, namespace="rlcloud", image="r/x:1") if getattr(o, "kind", "") == "Job"]
    for job in jobs:
        context = job.spec.template.spec.security_context
        # the mounted key file is 0400 and owned by fsGroup: a pod UID other than the image's cannot read it
        assert (str(context.run_as_user), str(context.run_as_group)) == (uid, gid or uid)
        assert str(context.fs_group) == (gid or uid)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_base_image_is_pinned(variant: str) -> None:
    parsed = load(variant)
    aliases = {s.alias for s in parsed.stages if s.alias}
    external = [s.base for s in parsed.stages if s.base.lower() not in aliases]
    assert external, "no base image"
    for base in external:
        assert "$" not in base, f"{base}: an ARG without a default"
        tag = image_tag(base)
        assert "@sha256:" in base or (tag is not None and tag != "latest"), f"{base} is not pinned"
        # a moving tag such as "3.11-slim" is not a pin either: it must name a patch version
        assert "@sha256:" in base or re.search(r"\d+\.\d+\.\d+", tag or ""), f"{base}: tag without a full version"
    for stage in parsed.stages:
        for copy in stage.all("COPY"):
            source = re.search(r"--from=(\S+)", copy.args)
            if source:
                ref = substitute(source.group(1), parsed.global_args)
                assert ref.lower() in aliases or image_tag(ref) not in (None, "latest"), f"COPY --from={ref} unpinned"


@pytest.mark.parametrize("variant", VARIANTS)
def test_dependencies_come_from_the_lock_file(variant: str) -> None:
    runs = [i.args for s in load(variant).stages for i in s.all("RUN")]
    syncs = [r for r in runs if "uv sync" in r]
    assert syncs, "the environment must be installed with uv sync from uv.lock"
    for run in syncs:
        for flag in ("--frozen", "--no-dev", "--extra runner"):
            assert flag in run, f"{flag!r} missing in: {run}"


@pytest.mark.parametrize("variant", VARIANTS)
def test_copied_files_exist_and_are_in_the_build_context(variant: str) -> None:
    patterns = read_dockerignore()
    sources: list[str] = []
    for stage in load(variant).stages:
        for copy in stage.all("COPY"):
            if "--from=" in copy.args:
                continue
            words = [w for w in copy.args.split() if not w.startswith("--")]
            sources.extend(words[:-1])
        for run in stage.all("RUN"):
            sources.extend(re.findall(r"--mount=type=bind,source=([^,\s]+)", run.args))
    assert {"pyproject.toml", "uv.lock", "README.md", "src"} <= set(sources)
    for source in sources:
        assert (ROOT / source).exists(), f"{source} is not in the repository"
        assert not dockerignored(source, patterns), f"{source} is excluded by .dockerignore"
    # and the context stays small: the local virtual environment never goes in
    assert dockerignored(".venv/lib/python3.11/site-packages/x.py", patterns)
    assert dockerignored("rlcloud-results/cartpole-ppo/metrics.jsonl", patterns)


def _locked_version(package: str) -> str:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    (version,) = [p["version"] for p in lock["package"] if p["name"] == package]
    return str(version)


def test_gpu_image_swaps_tensorflow_cpu_for_the_same_tensorflow_with_cuda() -> None:
    build = load("gpu").stages[1]
    tf_arg = [i.args for i in build.all("ARG") if i.args.startswith("TF_VERSION=")]
    assert tf_arg == [f"TF_VERSION={_locked_version('tensorflow-cpu')}"]
    runs = " ".join(i.args for i in build.all("RUN"))
    assert runs.count("--no-install-package tensorflow-cpu") == runs.count("uv sync")
    assert '"tensorflow[and-cuda]==${TF_VERSION}"' in runs
    # the rest of the environment stays at the locked versions
    assert "uv export --frozen --no-dev --extra runner" in runs
    # without --no-config, pyproject.toml's tensorflow override (false on Linux x86_64) drops the request
    assert "uv pip install --no-config " in runs
    assert "--override /tmp/overrides.txt" in runs
    base = load("gpu").final.base
    assert base.startswith("nvidia/cuda:12.")  # TF 2.21's wheels are built against CUDA 12


def test_cloud_build_config_builds_both_variants() -> None:
    config = yaml.safe_load((IMAGES / "cloudbuild.yaml").read_text())
    (step,) = config["steps"]
    args = step["args"]
    dockerfile = args[args.index("--file") + 1]
    assert dockerfile == "images/${_VARIANT}/Dockerfile"
    for variant in VARIANTS:
        assert (ROOT / dockerfile.replace("${_VARIANT}", variant)).is_file()
    assert config["images"] == ["${_IMAGE}"]
    assert args[-1] == "."  # the repository root is the build context


def test_bind_mount_targets_are_absolute() -> None:
    # buildah 1.28 (Debian 12's) refuses a relative target ("must be an absolute path"); BuildKit takes both
    for variant in VARIANTS:
        for stage in load(variant).stages:
            for run in stage.all("RUN"):
                for target in re.findall(r"--mount=type=bind,[^\s]*target=([^,\s]+)", run.args):
                    assert target.startswith("/"), f"{variant}: bind-mount target {target} is relative"


CUDA_WHEELS = IMAGES / "gpu" / "cuda-wheels.txt"


def _cuda_pins() -> tuple[str, dict[str, str]]:
    """(the TensorFlow version the file was resolved for, {wheel: version})."""
    text = CUDA_WHEELS.read_text()
    (tf,) = re.findall(r"tensorflow\[and-cuda\]==(\S+) for Linux x86_64", text)
    pins = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name] = version
    return tf, pins


def test_gpu_image_installs_the_committed_cuda_wheels() -> None:
    tf, pins = _cuda_pins()
    # resolved for the TensorFlow the lock holds: after an upgrade, ./scripts/pin-gpu-wheels writes it again
    assert tf == _locked_version("tensorflow-cpu"), "images/gpu/cuda-wheels.txt is stale: run ./scripts/pin-gpu-wheels"
    assert re.search(r"Generated by \./scripts/pin-gpu-wheels on \d{4}-\d{2}-\d{2}", CUDA_WHEELS.read_text())
    # every CUDA 12 library TensorFlow's and-cuda extra brings, each at one exact version
    assert {"nvidia-cublas-cu12", "nvidia-cudnn-cu12", "nvidia-nccl-cu12", "nvidia-cuda-runtime-cu12"} <= set(pins)
    for name, version in pins.items():
        assert re.fullmatch(r"nvidia-[a-z0-9-]+-cu12", name) and re.fullmatch(r"[0-9][0-9.]*", version), name
    build = load("gpu").stages[1]
    runs = " ".join(i.args for i in build.all("RUN"))
    assert "--mount=type=bind,source=images/gpu/cuda-wheels.txt,target=/src/cuda-wheels.txt" in runs
    assert '--constraint /src/cuda-wheels.txt "tensorflow[and-cuda]==${TF_VERSION}"' in runs


@pytest.mark.processes
@pytest.mark.slow
def test_the_cuda_pins_resolve_with_tensorflow_and_the_lock(tmp_path: Path) -> None:
    """The GPU image's install step, as a dry run: tensorflow[and-cuda] with the lock's versions as overrides
    and the pins as constraints resolves (from uv's cache when it can), to exactly the pinned wheels."""
    import shutil
    import subprocess

    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH (scripts/check puts it there)")
    tf, pins = _cuda_pins()
    locked = tmp_path / "locked.txt"
    export = [uv, "export", "--frozen", "--quiet", "--no-dev", "--extra", "runner", "--no-hashes"]
    export += ["--no-emit-project", "--no-header", "--output-file", str(locked), "--project", str(ROOT)]
    subprocess.run(export, check=True, cwd=ROOT)
    overrides = tmp_path / "overrides.txt"
    overrides.write_text(
        "".join(line + "\n" for line in locked.read_text().splitlines() if not line.startswith("tensorflow=="))
    )
    request = tmp_path / "request.txt"
    request.write_text(f"tensorflow[and-cuda]=={tf}\n")
    # fmt: off
    command = [
        uv, "pip", "compile", "--quiet", "--no-config", "--python-platform", "x86_64-manylinux_2_35",
        "--python-version", "3.11", "--override", str(overrides), "--constraint", str(CUDA_WHEELS),
        "--no-header", "--no-annotate", str(request),
    ]
    # fmt: on
    done = subprocess.run([*command, "--offline"], capture_output=True, text=True, cwd=tmp_path)
    if done.returncode != 0:
        done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    if done.returncode != 0 and ("offline" in done.stderr or "network" in done.stderr.lower()):
        pytest.skip(f"cannot resolve here (no network and not in uv's cache): {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr
    resolved = dict(line.split("==", 1) for line in done.stdout.splitlines() if line.startswith("nvidia-"))
    assert resolved == pins
