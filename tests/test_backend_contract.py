"""One contract, every backend: the same verbs and the same assertions against each place experiments run.

``place`` is parametrized over the local backend (real supervisors, a stand-in for the runner:
tests/local/standin.py) and the Kubernetes backend (the fake kube-apiserver, and the fake kubelet running
the Kubernetes stand-in in its "pods": tests/k8s/standin_runner.py). The core verbs (rlcloud.backend's
``ExperimentBackend``) and the sweep capability (``SweepCapable``) are checked with one test each, whatever
the place. A local sweep's scheduler runs the real runner (it is Python started by the scheduler, not by
the test), so the local sweep trains for real, tiny, and is marked ``training``.

What differs by design is not asserted here: what a stopped experiment's status reads (local processes
leave a stopped run behind, a cluster deletes its objects), and backend-specific details (pods, process
groups), which the backends' own tests cover.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from rlcloud.backend import ExperimentBackend, SweepCapable, sweep_capable
from rlcloud.errors import NotFoundError, UnsupportedError, WaitTimeoutError
from rlcloud.local import LocalBackend
from rlcloud.local.machine import CHILDREN
from rlcloud.specs.sweep import SweepSpec
from tests.fakes.kube_apiserver import FakeKubeApiServer
from tests.fakes.kubelet import FakeKubelet
from tests.support.kubernetes import make_backend, standin
from tests.support.local import write_standin_python
from tests.support.specs import cartpole_spec
from tests.support.waiting import eventually


def _sweep(name: str) -> SweepSpec:
    """Two trials of the tiny spec (two learning rates, one seed), both at once."""
    return SweepSpec(
        name=name,
        experiment=cartpole_spec("base"),
        parameters={"agent.learning_rate": [1e-3, 3e-3]},
        seeds=[1],
        max_parallel=2,
    )


@dataclass
class Place:
    """A backend (core and sweeps), the results root it writes to, and how to reach it from a new object."""

    backend: Any  # an ExperimentBackend that is SweepCapable: both are checked in _backend_of
    results: str
    again: Callable[[], Any]  # another backend object over the same place (another machine, a later session)


def _backend_of(backend: Any) -> Any:
    assert isinstance(backend, ExperimentBackend) and isinstance(backend, SweepCapable)
    return backend


@pytest.fixture(params=["local", "kubernetes"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Place]]:
    """``place(episodes=, delay=)``: the backend of this parameter, its stand-in learners training ``episodes``
    episodes of ``delay`` seconds. Everything it started is stopped afterwards."""
    root = tmp_path / "results"
    with ExitStack() as stack:
        if request.param == "local":
            python = str(write_standin_python(tmp_path))
            made: list[LocalBackend] = []

            def cleanup() -> None:
                for b in made:
                    for name in b.list_sweeps():
                        b.stop_sweep(name)
                    for name in b.list():
                        b.stop(name)
                for child in list(CHILDREN):  # a supervisor exits just after its exit code is recorded
                    child.wait(30)

            stack.callback(cleanup)

            def local(episodes: int = 3, delay: float = 0.05) -> Place:
                env = {"STANDIN_EPISODES": str(episodes), "STANDIN_DELAY": str(delay)}
                backend = LocalBackend(str(root), grace_period=5, python=python, env=env)
                made.append(backend)
                return Place(_backend_of(backend), str(root), lambda: LocalBackend(str(root), grace_period=5))

            yield local
        else:
            apiserver = stack.enter_context(FakeKubeApiServer())
            api = client.ApiClient(client.Configuration(host=apiserver.url))
            stack.callback(api.close)

            def kubernetes(episodes: int = 3, delay: float = 0.05) -> Place:
                env = {"STANDIN_EPISODES": str(episodes), "STANDIN_DELAY": str(delay)}
                kubelet = FakeKubelet(apiserver, tmp_path / "pods", argv_rewrite=standin, extra_env=env, max_grace=10)
                stack.enter_context(kubelet)
                return Place(_backend_of(make_backend(api)), str(root), lambda: make_backend(api))

            yield kubernetes


def _finished_or_gone(backend: Any, name: str) -> bool:
    """After a stop: the experiment reads finished, or the place no longer knows it (a cluster deletes its
    objects); either way nothing of it runs."""
    try:
        return bool(backend.status(name).finished)
    except NotFoundError:
        return True


# ------------------------------------------------------------------------------------------- core verbs


@pytest.mark.processes
def test_a_run_finishes_with_progress_logs_and_is_found_again(place: Callable[..., Place]) -> None:
    where = place(episodes=3)
    backend, spec = where.backend, cartpole_spec("contract-run")
    assert backend.start(spec, where.results) is True
    status = backend.wait(spec.name, timeout=120)
    assert status.state == "succeeded" and status.finished, status
    assert status.backend == backend.kind
    assert [(r.role, r.index, r.state) for r in status.roles] == [("single", 0, "succeeded")]
    assert status.progress.get("episode", 0) >= 1, status.progress
    lines = list(backend.logs(spec.name))
    assert lines and all(re.match(r"^single-0 \| ", line) for line in lines), lines
    assert any("episode" in line for line in lines), lines
    assert (Path(where.results) / spec.name / "progress.json").exists()  # <root>/<name>, as the contract says
    assert spec.name in backend.list()
    attached, root = where.again().attach(spec.name)
    assert attached == spec and root == where.results


@pytest.mark.processes
def test_start_is_idempotent_and_pause_resume_stop_keep_the_checkpoint(place: Callable[..., Place]) -> None:
    where = place(episodes=2000, delay=0.05)
    backend, spec = where.backend, cartpole_spec("contract-long")
    assert backend.start(spec, where.results) is True
    eventually(lambda: backend.status(spec.name).progress.get("episode", 0) >= 2, timeout=60, what="training")
    assert backend.start(spec, where.results) is False  # running: nothing starts twice
    with pytest.raises(WaitTimeoutError):
        backend.wait(spec.name, timeout=0.5)
    backend.pause(spec.name)
    latest = Path(where.results) / spec.name / "checkpoints" / "LATEST"
    assert latest.read_text().strip().startswith("ckpt-")
    assert backend.status(spec.name).state == "paused"
    backend.resume(spec.name)
    eventually(lambda: backend.status(spec.name).state == "running", timeout=60, what="running again")
    backend.stop(spec.name)
    backend.stop(spec.name)  # idempotent
    assert _finished_or_gone(backend, spec.name)


def test_unknown_names_are_not_found(place: Callable[..., Place]) -> None:
    backend = place().backend
    for verb in (backend.status, backend.attach, backend.sweep_status, backend.attach_sweep):
        with pytest.raises(NotFoundError):
            verb("never-started")
    assert "never-started" not in backend.list() and "never-started" not in backend.list_sweeps()


# ----------------------------------------------------------------------------------- sweep capability


@pytest.mark.processes
@pytest.mark.parametrize("place", [pytest.param("local", marks=pytest.mark.training), "kubernetes"], indirect=True)
def test_a_sweep_runs_every_trial_and_is_found_again(place: Callable[..., Place]) -> None:
    where = place(episodes=3)
    backend, sweep = where.backend, _sweep("contract-sweep")
    assert backend.start_sweep(sweep, where.results) is True
    assert backend.start_sweep(sweep, where.results) is False  # running: nothing starts twice
    assert sweep.name in backend.list_sweeps()
    status = eventually(
        lambda: (s := backend.sweep_status(sweep.name)).finished and s, timeout=600, what="every trial finished"
    )
    assert status.state == "succeeded" and status.backend == backend.kind, status
    names = [name for name, _params, _seed in sweep.trial_table()]
    assert [t.name for t in status.trials] == names
    assert [t.state for t in status.trials] == ["succeeded"] * len(names)
    for trial in status.trials:
        assert trial.progress, trial  # the trial's own progress.json, from <root>/<sweep>/<trial>
        assert (Path(where.results) / sweep.name / trial.name / "progress.json").exists()
    attached, root = where.again().attach_sweep(sweep.name)
    assert attached == sweep and root == where.results
    backend.stop_sweep(sweep.name)
    backend.stop_sweep(sweep.name)  # idempotent


def test_a_backend_without_the_sweep_capability_is_refused_by_the_facade(tmp_path: Path) -> None:
    from rlcloud import Sweep
    from tests.support.display import ScriptedBackend, ScriptedCluster, _distributed_status

    core_only = ScriptedBackend(_distributed_status())
    with pytest.raises(UnsupportedError, match="the scripted backend does not run sweeps"):
        sweep_capable(core_only)
    cluster = ScriptedCluster(core_only)
    sweep = Sweep(_sweep("nowhere"), results=str(tmp_path / "results"), cluster=cluster)
    with pytest.raises(UnsupportedError, match="does not run sweeps"):
        sweep.start(validate=False)
    assert not (tmp_path / "results" / "nowhere" / "sweep.yaml").exists()  # refused before its record is written
    for verb in (sweep.status, sweep.stop):
        with pytest.raises(UnsupportedError):
            verb()
    with pytest.raises(UnsupportedError):
        Sweep.attach("nowhere", cluster=cluster)
    with pytest.raises(UnsupportedError):
        Sweep.list(cluster=cluster)
