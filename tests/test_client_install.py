"""The client install on its own (``pip install rlcloud``: no extra) is a working tool for driving clusters and
reading results, without TensorFlow.

A virtual environment gets exactly the locked client dependencies (``uv sync --frozen --no-dev``, from uv's
cache when it has them), and a script run by that environment's Python drives the local fakes running in this
test process: a GKE cluster is created and deleted on the gRPC ClusterManager fake, an experiment is started
on the fake kube-apiserver with gs:// results on fake-gcs-server, specs are validated (also with the
``rlcloud`` console script), and results in the bucket are read with ``metrics()`` and ``compare()``. What
needs an extra says which one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.gcs import FakeGcsServer
from tests.fakes.gke import FakeClusterManager
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.support.kubernetes import write_kubeconfig
from tests.support.written_runs import write_run

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

CLIENT_SCRIPT = textwrap.dedent(
    """
    import importlib.util, json, logging, subprocess, sys
    from pathlib import Path

    kubeconfig, bucket, examples = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    out = {}
    out["absent"] = [m for m in ("tensorflow", "tensorforce", "gymnasium", "matplotlib", "scipy")
                     if importlib.util.find_spec(m) is None]

    import rlcloud
    from rlcloud import Cluster, ClusterSpec, Experiment, ExperimentSpec, SpecError
    from rlcloud.errors import MissingExtraError

    # specs: the examples load; a bad one names its field; the console script validates too
    spec = ExperimentSpec.from_file(examples / "cartpole_ppo.yaml", total_timesteps=100, name="client-run")
    try:
        ExperimentSpec.from_file(examples / "cartpole_ppo.yaml", num_workers=-1)
    except SpecError as exc:
        out["bad_spec_fields"] = exc.fields
    cli = Path(sys.executable).parent / "rlcloud"
    out["cli_validate"] = subprocess.run([str(cli), "spec", "validate", str(examples / "cartpole_ppo.yaml")],
                                         capture_output=True, text=True).returncode

    # GKE: create, list, delete on the ClusterManager fake
    gke = Cluster.gke(ClusterSpec(name="client-cpu", machine_type="e2-standard-4"), project="client-project")
    out["gke_created"] = gke.create().status
    out["gke_listed"] = [c.name for c in Cluster.list(project="client-project")]
    gke.delete()
    out["gke_after_delete"] = [c.name for c in Cluster.list(project="client-project")]

    # Kubernetes: the experiment starts (its spec checked by schema only, with one warning) and stops
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="LOG %(message)s")
    k8s = Cluster.kubernetes(kubeconfig=kubeconfig, image="rlcloud-runner-cpu:test")
    exp = Experiment(spec, results=f"gs://{bucket}/rl")
    exp.start(cluster=k8s)
    out["k8s_state"] = exp.status().state
    exp.stop()
    # and locally it cannot run: the message names the runner extra
    try:
        Experiment(spec, results="local-results").start()
    except MissingExtraError as exc:
        out["local_start"] = str(exc)

    # results in the bucket: metrics and compare work; statistics and plots name the analysis extra
    table = rlcloud.compare(["a", "b"], results=f"gs://{bucket}/sweep")
    out["objective"] = table["objective"].tolist()
    out["parameters"] = table.attrs["parameters"]
    frame = Experiment(spec.replace(name="a"), results=f"gs://{bucket}/sweep").metrics()
    out["metrics"] = [type(frame).__name__, list(frame.columns), frame["return"].tolist()]
    for name, call in (("summary", lambda: rlcloud.compare(table, by="config")),
                       ("plot", lambda: Experiment(spec.replace(name="a"), results=f"gs://{bucket}/sweep").plot())):
        try:
            call()
        except MissingExtraError as exc:
            out[name] = [exc.extra, str(exc)]
    done = subprocess.run([str(cli), "compare", "a", "b", "--results", f"gs://{bucket}/sweep", "-o", "json"],
                          capture_output=True, text=True)
    out["cli_compare"] = [done.returncode, [row["objective"] for row in json.loads(done.stdout or "[]")]]
    out["heavy"] = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "tensorforce", "matplotlib"))
    print("RESULT " + json.dumps(out))
    """
)


def _uv() -> str | None:
    return shutil.which("uv")


@pytest.fixture(scope="module")
def client_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding the client install alone, from uv.lock (no extra, no dev group)."""
    uv = _uv()
    if uv is None:
        pytest.skip("uv is not on PATH (scripts/check puts it there)")
    venv = tmp_path_factory.mktemp("client") / "venv"
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(venv)}
    env.pop("VIRTUAL_ENV", None)
    command = [uv, "sync", "--frozen", "--no-dev", "--no-editable", "--quiet", "--project", str(ROOT)]
    # from the cache first (what the repository's own environment was installed from); the index otherwise
    done = subprocess.run([*command, "--offline"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot install the client here (no network and not in uv's cache): {done.stderr[-500:]}")
    return venv / "bin" / "python"


@pytest.fixture
def fakes(fake_gcs: FakeGcsServer, tmp_path: Path) -> Iterator[dict[str, Any]]:
    with FakeClusterManager(polls_to_done=0) as gke, FakeKubeApiServer() as apiserver:
        yield {
            "gke": gke,
            "apiserver": apiserver,
            "kubeconfig": write_kubeconfig(tmp_path / "kubeconfig", apiserver.url),
        }


def test_the_client_install_drives_clusters_and_reads_results_without_tensorflow(
    client_python: Path, fakes: dict[str, Any], fake_gcs: FakeGcsServer, gcs_bucket: str, tmp_path: Path
) -> None:
    from rlcloud.gke.project import EMULATOR_ENV
    from rlcloud.storage.gcs import GcsStore

    sweep = GcsStore(gcs_bucket, "sweep", client=fake_gcs.client())
    write_run(sweep, "a", seed=1, returns=[3.0, 5.0])
    write_run(sweep, "b", seed=2, returns=[7.0])
    script = tmp_path / "client.py"
    script.write_text(CLIENT_SCRIPT)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))},
        **fake_gcs.env,
        EMULATOR_ENV: fakes["gke"].address,
    }
    done = subprocess.run(
        [str(client_python), str(script), str(fakes["kubeconfig"]), gcs_bucket, str(ROOT / "examples")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sys.prefix not in client_python.as_posix()
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    out = json.loads(line.removeprefix("RESULT "))
    assert out["absent"] == ["tensorflow", "tensorforce", "gymnasium", "matplotlib", "scipy"]
    assert out["heavy"] == []
    assert out["bad_spec_fields"] == ["num_workers"] and out["cli_validate"] == 0
    assert out["gke_created"] == "RUNNING" and out["gke_listed"] == ["client-cpu"] and out["gke_after_delete"] == []
    assert out["k8s_state"] in ("pending", "running")
    assert "rlcloud[runner]" in out["local_start"]
    warnings = [line for line in done.stdout.splitlines() if line.startswith("LOG ") and "runner extra" in line]
    assert len(warnings) == 1
    assert fakes["apiserver"].requests, "the experiment was submitted to the fake apiserver"
    # the two runs' specs differ in their budgets only (write_run sizes total_timesteps to the returns)
    assert out["objective"] == [4.0, 7.0] and out["parameters"] == ["total_timesteps"]
    assert out["metrics"] == [
        "DataFrame",
        ["episode", "timestep", "return", "length", "time", "worker"],
        [3.0, 5.0],
    ]
    assert out["summary"][0] == "analysis" and "rlcloud[analysis]" in out["summary"][1]
    assert out["plot"][0] == "analysis"
    assert out["cli_compare"] == [0, [4.0, 7.0]]
