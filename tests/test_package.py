"""The public surface stays small and sorted, and `import rlcloud` / `rlcloud --help` stay light."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import rlcloud

HEAVY = ("tensorflow", "tensorforce", "google.cloud", "kubernetes", "grpc", "pandas", "matplotlib", "gymnasium")


def _imported_modules(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True
    ).stderr
    return {line.rsplit("|", 1)[-1].strip() for line in out.splitlines() if line.startswith("import time:")}


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_all_is_sorted_short_and_importable() -> None:
    assert rlcloud.__all__ == sorted(rlcloud.__all__)
    # the facades, their specs and the types they return (statuses, cluster info), and the error tree
    assert len(rlcloud.__all__) <= 25
    for name in ("ExperimentStatus", "SweepStatus", "ClusterInfo", "PreflightError", "MissingExtraError"):
        assert name in rlcloud.__all__
    for name in rlcloud.__all__:
        assert getattr(rlcloud, name) is not None


def test_facades_resolve_lazily() -> None:
    from rlcloud.cluster import Cluster
    from rlcloud.experiment import Experiment
    from rlcloud.specs import ClusterSpec, ExperimentSpec

    assert rlcloud.Experiment is Experiment
    assert rlcloud.Cluster is Cluster
    assert rlcloud.ExperimentSpec is ExperimentSpec
    assert rlcloud.ClusterSpec is ClusterSpec


@pytest.mark.processes
def test_compare_is_the_function_whatever_was_imported_first() -> None:
    # rlcloud.compare once named both a module and its function; which one a user got depended on import order
    code = (
        "import inspect, rlcloud.comparison, rlcloud.sweep, rlcloud; "
        "assert inspect.isfunction(rlcloud.compare), rlcloud.compare; "
        "assert rlcloud.compare is rlcloud.comparison.compare"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    import inspect

    assert inspect.isfunction(rlcloud.compare)


@pytest.mark.processes
def test_import_rlcloud_imports_nothing_heavy() -> None:
    modules = _imported_modules("import rlcloud")
    assert "rlcloud" in modules
    assert _heavy(modules) == []


@pytest.mark.processes
def test_using_specs_and_facades_imports_nothing_heavy() -> None:
    code = (
        "import rlcloud; from rlcloud import Experiment, Cluster, ExperimentSpec, ClusterSpec\n"
        "s = ExperimentSpec(name='x', environment={'type': 'gym', 'level': 'CartPole-v1'},"
        " agent={'type': 'ppo'}, episodes=1); Experiment(s); Cluster.local()"
    )
    assert _heavy(_imported_modules(code)) == []


@pytest.mark.processes
def test_cli_help_imports_nothing_heavy() -> None:
    modules = _imported_modules(
        "import sys; from rlcloud.cli import main; sys.argv=['rlcloud', '--help']\n"
        "try:\n main()\nexcept SystemExit: pass"
    )
    assert "rlcloud.cli" in modules
    assert _heavy(modules) == []
    # the CLI parser is built without pydantic: --help needs no model construction
    assert not any(m.startswith("pydantic") for m in modules)
    # nor any command module (rlcloud.cli.INDEX lists them), nor shutil (and its bz2/lzma) for the width
    assert sorted(m for m in modules if m.startswith("rlcloud.cli.")) == ["rlcloud.cli._parser"]
    assert "shutil" not in modules


def test_cli_index_is_the_commands_declarations() -> None:
    # `rlcloud --help` lists the first words from rlcloud.cli.INDEX without importing the command modules
    from rlcloud.cli import INDEX, build_parser, commands

    top = [cmd for cmd in commands() if len(cmd.path) == 1]
    assert [(cmd.path[0], cmd.help) for cmd in top] == [(word, help) for word, _module, help in INDEX]
    for word, module, _help in INDEX:
        assert [cmd.path for cmd in commands([module]) if cmd.path[0] == word][:1] == [(word,)]
    assert build_parser(["--help"]).format_help() == build_parser().format_help()


#: Every program of the package started with ``python -m`` (pods, supervisors, sweepers, warm workers).
PROGRAMS = [
    "rlcloud",
    "rlcloud.runner",
    "rlcloud.local.supervisor",
    "rlcloud.local.sweeper",
    "rlcloud.local.worker",
    "rlcloud.gke.doctor",
    "rlcloud.gke.reaper",
]


def test_programs_list_every_main() -> None:
    src = Path(rlcloud.__file__).parent
    mains = {
        ".".join(p.relative_to(src.parent).with_suffix("").parts).removesuffix(".__main__")
        for p in src.rglob("*.py")
        if p.name == "__main__.py" or 'if __name__ == "__main__":' in p.read_text(encoding="utf-8")
    }
    # two developer tools that are not started by rlcloud
    assert mains - {"rlcloud.runner.tf06_tables", "rlcloud.specs.reference"} == set(PROGRAMS)


@pytest.mark.processes
@pytest.mark.parametrize("program", PROGRAMS)
def test_programs_start_without_runpy_warnings(program: str) -> None:
    # A package __init__ that imports the module `-m` runs makes runpy warn "'rlcloud.local.supervisor' found
    # in sys.modules after import of package 'rlcloud.local', but prior to execution" at every start.
    out = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-m", program, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "RuntimeWarning" not in out.stderr and "found in sys.modules" not in out.stderr
    assert out.returncode in (0, 2), out.stderr[-2000:]


def test_errors_tree() -> None:
    assert issubclass(rlcloud.QuotaExceededError, rlcloud.ProvisioningError)
    assert issubclass(rlcloud.CapacityError, rlcloud.ProvisioningError)
    assert issubclass(rlcloud.SpecError, rlcloud.RLCloudError)
    assert issubclass(rlcloud.WaitTimeoutError, TimeoutError)
    err = rlcloud.SpecError("bad")
    assert str(err) == "bad"


def test_nothing_below_the_cli_imports_it() -> None:
    # imports point one way (specs <- backends <- facades <- cli): the library never reaches up into the CLI
    from pathlib import Path

    src = Path(rlcloud.__file__).parent
    upward = [
        f"{path.relative_to(src)}:{number}"
        for path in sorted(src.rglob("*.py"))
        if path.parent.name != "cli" and path.name != "__main__.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if line.lstrip().startswith(("from rlcloud.cli", "import rlcloud.cli", "from rlcloud import cli"))
    ]
    assert upward == []
