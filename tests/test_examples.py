"""The examples a user copies: the notebook is executed for real, the scripts' command lines are checked.

The notebook runs in a kernel started from this test's own interpreter (the project's virtual
environment), whatever "python3" kernel the machine may have registered elsewhere.
"""

from __future__ import annotations

import ast
import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import pytest

import rlcloud

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
NOTEBOOK = EXAMPLES / "quickstart.ipynb"


def _run_script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def _rlcloud_imports(source: str) -> list[str]:
    """Every ``rlcloud`` import in ``source``, anywhere (a function's body too), as ``module:name``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{a.name}:" for a in node.names if a.name.split(".")[0] == "rlcloud"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "rlcloud":
            found += [f"{node.module}:{a.name}" for a in node.names]
    return found


def _example_sources() -> list[Any]:
    scripts = [pytest.param(path.read_text(), id=path.name) for path in sorted(EXAMPLES.glob("*.py"))]
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    code = "\n".join(c.source for c in cells if c.cell_type == "code" and not c.source.lstrip().startswith(("%", "!")))
    return [*scripts, pytest.param(code, id=NOTEBOOK.name)]


@pytest.mark.parametrize("source", _example_sources())
def test_an_example_uses_only_rlcloud_public_names(source: str) -> None:
    """A user copies an example: what it imports is rlcloud's public API (``rlcloud.__all__``), nothing a
    release may move."""
    imports = _rlcloud_imports(source)
    assert imports, "an example that imports nothing from rlcloud is not an example of it"
    assert [i for i in imports if i.partition(":")[0] != "rlcloud" or i.partition(":")[2] not in rlcloud.__all__] == []


# ---------------------------------------------------------------------------------------------- scripts


@pytest.mark.processes
def test_quickstart_help_and_argument_checks() -> None:
    done = _run_script("quickstart.py", "--help")
    assert done.returncode == 0, done.stderr
    for option in ("--timesteps", "--episodes", "--workers", "--results", "--plot"):
        assert option in done.stdout
    bad = _run_script("quickstart.py", "--episodes", "0")
    assert bad.returncode == 2
    assert "--timesteps, --episodes and --workers must be at least 1" in bad.stderr


def test_quickstart_builds_the_experiment_it_describes(tmp_path: Path) -> None:
    sys.path.insert(0, str(EXAMPLES))
    try:
        import quickstart
    finally:
        sys.path.remove(str(EXAMPLES))
    args = quickstart.parse_args(["--episodes", "7", "--workers", "3", "--results", str(tmp_path)])
    exp = quickstart.make_experiment(args)
    assert (exp.spec.episodes, exp.spec.total_timesteps, exp.spec.evaluation) == (7, None, None)
    assert (exp.spec.run_mode, exp.spec.num_workers) == ("multi-threaded", 3)
    assert exp.location == str(tmp_path / "cartpole-quickstart")
    # the defaults are the demo's run (the spec as it is); --workers 1 is one environment, as its help says
    default = quickstart.make_experiment(quickstart.parse_args([])).spec
    assert (default.run_mode, default.num_workers, default.total_timesteps, default.episodes) == (
        "multi-threaded",
        32,
        150_000,
        None,
    )
    one = quickstart.make_experiment(quickstart.parse_args(["--workers", "1", "--timesteps", "5000"])).spec
    assert (one.run_mode, one.num_workers, one.total_timesteps) == ("single", 1, 5000)
    rows = pd.DataFrame({"return": [float(r) for r in range(1, 41)], "timestep": [10 * i for i in range(1, 41)]})
    assert quickstart.summarize(rows) == {"episodes": 40, "timesteps": 400, "first_mean": 10.5, "last_mean": 30.5}


@pytest.mark.processes
def test_gke_gpu_help_and_guards() -> None:
    done = _run_script("gke_gpu.py", "--help")
    assert done.returncode == 0, done.stderr
    for option in ("--project", "--results", "--workers", "--keep-cluster"):
        assert option in done.stdout
    # nothing is created without a project, nor with results the pods could not reach
    missing = _run_script("gke_gpu.py", "--results", "gs://b/p")
    assert missing.returncode == 2
    assert "--project" in missing.stderr
    local = _run_script("gke_gpu.py", "--project", "p", "--results", "/tmp/x")
    assert local.returncode == 2
    assert "gs:// URL" in local.stderr


def test_gke_gpu_builds_its_cluster_without_calling_google() -> None:
    sys.path.insert(0, str(EXAMPLES))
    try:
        import gke_gpu
    finally:
        sys.path.remove(str(EXAMPLES))
    args = gke_gpu.parse_args(
        ["--project", "my-project", "--results", "gs://my-bucket/rl", "--location", "us-central1-b"]
    )
    cluster = gke_gpu.make_cluster(args)
    assert cluster.kind == "gke"
    assert cluster.spec.gpu_type.value == "nvidia-tesla-t4"
    assert cluster.spec.location == "us-central1-b"
    if gke_gpu.SPEC_FILE.exists():  # examples/space_invaders_dqn.yaml is maintained with the runner
        exp = gke_gpu.make_experiment(
            gke_gpu.parse_args(["--project", "p", "--results", "gs://my-bucket/rl", "--workers", "2"])
        )
        assert (exp.spec.run_mode, exp.spec.num_workers) == ("distributed", 2)
        # the env servers must fit the T4 cluster's CPU node beside the system pods
        assert exp.spec.resources.env_server.cpu == "500m"
        assert exp.location == f"gs://my-bucket/rl/{exp.name}"


# --------------------------------------------------------------------------------------------- notebook


def _kernel_manager_class() -> type:
    """A KernelManager whose kernel is ipykernel in this very interpreter, whatever "python3" means elsewhere.

    Given as a class (not an instance) so that nbclient owns the kernel and shuts it and its sockets down.
    """
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.manager import KernelManager

    class ThisInterpreterKernel(KernelManager):
        @property
        def kernel_spec(self) -> KernelSpec:
            return KernelSpec(
                argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                display_name=f"Python 3 ({sys.executable})",
                language="python",
                resource_dir=str(EXAMPLES),
            )

    return ThisInterpreterKernel


def _with_parameters(nb: Any, **values: Any) -> Any:
    """A copy of ``nb`` with a cell setting ``values`` right after the cell tagged "parameters" (as papermill does)."""
    nb = copy.deepcopy(nb)
    (index,) = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    source = "\n".join(f"{key} = {value!r}" for key, value in values.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    cell["id"] = "injected-parameters"
    nb.cells.insert(index + 1, cell)
    return nb


def _text(outputs: list[Any]) -> str:
    parts = []
    for out in outputs:
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(str(out.data.get("text/html", "")) + str(out.data.get("text/plain", "")))
    return "".join(parts)


def test_notebook_is_clean_and_valid() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    # committed without outputs: the test below is what shows it runs
    assert all(not c.outputs and c.execution_count is None for c in code)
    source = "\n".join(c.source for c in code)
    assert "exp.wait(progress=True)" in source
    assert "exp.plot()" in source


@pytest.mark.training
def test_notebook_trains_cartpole_and_plots(tmp_path: Path) -> None:
    from nbclient import NotebookClient

    episodes = 20
    nb = _with_parameters(nbformat.read(NOTEBOOK, as_version=4), EPISODES=episodes, RESULTS=str(tmp_path))
    # Jupyter runs a notebook in its own directory
    client = NotebookClient(
        nb,
        kernel_manager_class=_kernel_manager_class(),
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(EXAMPLES)}},
    )
    client.execute()

    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(out.output_type != "error" for c in code for out in c.outputs)
    by_source = {c.source.splitlines()[0]: c for c in code}

    run = by_source["exp.start()"]
    assert "'succeeded'" in _text(run.outputs)
    # the progress bar reached the end (a text bar on stderr without ipywidgets, else a widget)
    bar = _text(run.outputs)
    widget = any("application/vnd.jupyter.widget-view+json" in out.get("data", {}) for out in run.outputs)
    assert widget or f"{episodes}/{episodes}" in bar

    shown = by_source["exp  # spec, state and the learner's final counters"]
    html = next(out.data["text/html"] for out in shown.outputs if "text/html" in out.get("data", {}))
    assert "cartpole-notebook" in html and "succeeded" in html

    metrics = _text(by_source["records = exp.metrics()  # a pandas DataFrame, one row per episode"].outputs)
    assert f"{episodes} episodes" in metrics

    plot = by_source["exp.plot()  # episode returns and their moving mean against timesteps"]
    assert any("image/png" in out.get("data", {}) for out in plot.outputs), "exp.plot() displayed no figure"

    results = tmp_path / "cartpole-notebook"
    assert (results / "metrics.jsonl").read_text().count("\n") == episodes
    assert (results / "checkpoints" / "LATEST").is_file()


def test_one_name_one_experiment_across_the_examples_and_init() -> None:
    """A name a new user meets in the README's examples and in `rlcloud init`'s files is one experiment:
    running init's file after the demo finds the demo's run, never a changed-run refusal."""
    from rlcloud.specs import ExperimentSpec
    from rlcloud.specs.identity import diff_specs

    bundled = Path(rlcloud.__file__).parent / "configs" / "experiments"
    by_name: dict[str, list[ExperimentSpec]] = {}
    for path in [*EXAMPLES.glob("*.yaml"), *bundled.glob("*.yaml")]:
        if "kind: Sweep" in path.read_text():
            continue  # a sweep's trials are named under the sweep: <results>/<sweep>/<trial>
        spec = ExperimentSpec.from_file(path)
        by_name.setdefault(spec.name, []).append(spec)
    shared = {name: specs for name, specs in by_name.items() if len(specs) > 1}
    assert set(shared) >= {"cartpole-ppo", "space-invaders-dqn"}
    for name, (first, *others) in shared.items():
        for other in others:
            assert diff_specs(first, other) == [], name
