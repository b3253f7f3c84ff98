"""``rlcloud spec validate``: every check ``experiment start`` runs, for whole specs and for part files.

A file is an Experiment, a Cluster, or one part of an experiment on its own: an agent, a network or an
environment file (tensorforce-client kept those apart, and so may a user). A part is checked by putting
it in a stand-in experiment and reporting only the problems of that part, so an agent file is not told
to "add kind: Experiment" and then that it lacks a name, an environment and a stop condition.

The checks are those of ``Experiment.start`` before anything starts (the model, the legacy conversion,
:func:`rlcloud.runner.envs.validate_experiment`: gymnasium ids, agent and layer types, the agent's
arguments against Tensorforce 0.6's signatures), without importing TensorFlow. ``build=True``
additionally builds the agent with Tensorforce on the CPU and reports a build error as a field problem.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rlcloud.errors import SpecError, SpecProblem

__all__ = [
    "FileReport",
    "PartKind",
    "build_agent",
    "build_environment",
    "code_on_path",
    "infer_part_kind",
    "validate_file",
]

PartKind = Literal["Agent", "Network", "Environment"]

# Stand-ins for the parts a part file does not provide: cheap, valid, and never reported on.
_STAND_INS: dict[str, Any] = {
    "name": "validate",
    "environment": {"type": "gym", "level": "CartPole-v1"},
    "agent": {"type": "ppo", "batch_size": 10},
    "episodes": 1,
    # a PPO memory is sized from the episode length: an environment without a limit would fail the build
    "max_timesteps_per_episode": 200,
}
# Stand-in environments whose states fit what the part expects: images for convolutions and image
# preprocessing, integer states for embeddings.
_IMAGE_ENVIRONMENT = {"type": "gym", "level": "ALE/Pong-v5"}
_INTEGER_ENVIRONMENT = {"type": "gym", "level": "FrozenLake-v1"}
_IMAGE_LAYERS = ("conv2d", "pool2d", "image", "conv2d_transpose")
# Every key a tfc experiment would otherwise get tfc's default (and a note) for.
_TFC_STAND_IN: dict[str, Any] = {
    "type": "experiment",
    "run_mode": "single",
    "num_workers": 1,
    "num_parameter_servers": 0,
    "total_timesteps": 1,
    "max_timesteps_per_episode": 200,
}
_PART_FIELD = {"Agent": "agent", "Network": "network", "Environment": "environment"}
_ENV_TYPES = ("gym", "gymnasium", "openai_gym")


@dataclass
class FileReport:
    """The outcome of validating one file: a one-line summary when it is valid, else its problems."""

    path: str
    kind: str
    summary: str = ""
    problems: list[SpecProblem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the file has no problems (notes are information, not problems)."""
        return not self.problems


def infer_part_kind(data: Any) -> PartKind | None:
    """Agent, Network or Environment for a part file, None for anything else (experiments, clusters)."""
    from rlcloud.runner.envs import TENSORFORCE_AGENT_TYPES, TENSORFORCE_ENVIRONMENT_TYPES

    if isinstance(data, list):
        return "Network"
    if not isinstance(data, dict):
        return None
    kind = data.get("kind")
    if isinstance(kind, str) and kind.capitalize() in ("Agent", "Network", "Environment"):
        return kind.capitalize()  # type: ignore[return-value]
    if "environment" in data or "episodes" in data or "timesteps" in data or "total_timesteps" in data:
        return None
    type_ = data.get("type")
    if isinstance(data.get("agent"), str) or (
        isinstance(type_, str) and (type_ in TENSORFORCE_AGENT_TYPES or type_.endswith("_agent"))
    ):
        return "Agent"
    if "layers" in data and type_ in (None, "layered"):
        return "Network"
    if "gym_id" in data or "level" in data:
        return "Environment"
    if isinstance(type_, str) and (
        type_ in _ENV_TYPES
        or type_ in TENSORFORCE_ENVIRONMENT_TYPES
        or type_.endswith("OpenAIGym")
        or type_.startswith("tensorforce.contrib.")
    ):
        return "Environment"
    return None


def _notes(caught: list[warnings.WarningMessage]) -> list[str]:
    from rlcloud.specs.legacy import LegacySpecWarning

    return [str(w.message) for w in caught if issubclass(w.category, LegacySpecWarning)]


def validate_file(path: str | Path, *, build: bool = False) -> FileReport:
    """Validate one spec file as ``experiment start`` would (and build its agent when ``build``)."""
    from rlcloud.specs.experiment import ExperimentSpec
    from rlcloud.specs.legacy import LegacySpecWarning, is_legacy_agent, looks_like_legacy_network
    from rlcloud.specs.loading import experiment_from_dict, load_spec, read_data_file
    from rlcloud.specs.sweep import SweepSpec

    path = Path(path)
    source = str(path)
    report = FileReport(path=source, kind="")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LegacySpecWarning)
        try:
            data = read_data_file(path)
            part = infer_part_kind(data)
            if part is not None:
                report.kind = part
                stand_in = dict(_STAND_INS)
                if isinstance(data, dict):
                    data = {k: v for k, v in data.items() if k != "kind"}
                stand_in[_PART_FIELD[part]] = data
                if part != "Environment":
                    stand_in["environment"] = _stand_in_environment(data)
                if (part == "Network" and looks_like_legacy_network(data)) or (
                    part == "Agent" and isinstance(data, dict) and is_legacy_agent(data)
                ):
                    # a tensorforce-client part: checked as a tfc experiment would use it (0.4 networks converted)
                    stand_in.update(_TFC_STAND_IN)
                spec: Any = experiment_from_dict(stand_in, base_dir=path.parent, source=source)
            else:
                spec = load_spec(path)
                report.kind = _kind_of(spec)
            if isinstance(spec, ExperimentSpec | SweepSpec) and not _runner_installed():
                # the client install: the schema is checked; environment ids and agents need the runner extra
                report.notes.append(
                    "checked without the runner extra: environment ids, agent and network types are checked "
                    "where the experiment runs (pip install 'rlcloud[runner]' to check them here)"
                )
            elif isinstance(spec, ExperimentSpec):
                from rlcloud.runner.envs import validate_experiment

                with code_on_path(spec, path.parent):
                    _pack_check(spec)
                    validate_experiment(spec)
                    build_environment(spec)
                    if build:
                        build_agent(spec)
            elif isinstance(spec, SweepSpec):
                with code_on_path(spec.experiment, path.parent):
                    _pack_check(spec.experiment)
                    _validate_sweep(spec, build=build)
        except SpecError as exc:
            report.problems = [_relative(p, part_field=_PART_FIELD.get(report.kind)) for p in exc.problems]
            report.notes = _notes(caught)
            return report
    report.notes = [*_notes(caught), *report.notes]
    report.summary = _summary(report.kind, spec, data)
    if report.kind == "Network" and _has_default_dense(data) and not report.notes:
        report.notes.append(
            "dense layers without 'activation' are tanh in Tensorforce 0.6 (0.4 meant ReLU): a tensorforce-client "
            "network is converted when a tfc experiment uses it; in any other spec, write activation out"
        )
    return report


@contextlib.contextmanager
def code_on_path(spec: Any, base_dir: Path) -> Iterator[Path]:
    """While checking ``spec``, import its own modules from where its run will: the folder ``code:`` packs
    (its files as they are now), else the project folder a local run imports from (rlcloud.yaml's above
    ``base_dir`` or the working directory, else the working directory: :func:`~rlcloud.specs.building.project_root`).
    """
    import sys

    from rlcloud.specs.building import project_root

    code = getattr(spec, "code", None)
    if code is None:
        from rlcloud.config import load_project_config

        code = load_project_config(base_dir).code
    folder = Path(code.path) if code is not None else project_root(base_dir)
    text = str(folder)
    added = text not in sys.path
    if added:
        sys.path.insert(0, text)
    try:
        yield folder
    finally:
        if added and text in sys.path:
            sys.path.remove(text)


def _pack_check(spec: Any) -> None:
    """Pack the spec's code as a start would (nothing is uploaded): a folder over the bounds, or without its
    requirements file, is a problem of the spec now rather than of its start."""
    from rlcloud.codepack import pin

    pin(spec)


def build_environment(spec: Any) -> None:
    """Build one environment of ``spec`` as the runner does (rlcloud.runner.envs.make_env: the same arguments,
    the same limits), then close it; a construction error is a SpecProblem on ``environment``.

    Only a user's class is built (what its constructor is given is the question; a gymnasium id is checked
    against the registry, and a Tensorforce type needs TensorFlow: ``--build`` builds it with the agent), and
    only when it is importable here (the client may lack a package the image has).
    """
    from rlcloud.runner.envs import make_env, resolve_class

    environment = spec.environment
    path = environment.get("class") or environment.get("type")
    if not (isinstance(path, str) and (":" in path or "." in path)) or resolve_class(path, missing_ok=True) is None:
        return
    try:
        env = make_env(
            environment, repeat_actions=spec.repeat_actions, max_timesteps_per_episode=spec.max_timesteps_per_episode
        )
    except SpecError:
        raise
    except Exception as exc:  # whatever the user's constructor raises: the runner would exit 3 with it
        message = f"cannot be built: {type(exc).__name__}: {exc}".rstrip(": ")
        raise SpecError([SpecProblem("environment", message)]) from None
    env.close()


def _layer_types(data: Any) -> set[str]:
    """Every ``type`` value anywhere in a part (layers, nested networks, preprocessing)."""
    if isinstance(data, dict):
        found = {data["type"]} if isinstance(data.get("type"), str) else set()
        for value in data.values():
            found |= _layer_types(value)
        return found
    if isinstance(data, list):
        return set().union(*(_layer_types(item) for item in data)) if data else set()
    return set()


def _stand_in_environment(data: Any) -> dict[str, Any]:
    types = _layer_types(data) | {"image"} if _has_image_preprocessing(data) else _layer_types(data)
    if types & set(_IMAGE_LAYERS):
        return dict(_IMAGE_ENVIRONMENT)
    if "embedding" in types:
        return dict(_INTEGER_ENVIRONMENT)
    return dict(_STAND_INS["environment"])


def _has_image_preprocessing(data: Any) -> bool:
    steps = data.get("states_preprocessing") if isinstance(data, dict) else None
    return isinstance(steps, list) and any(
        isinstance(step, dict) and step.get("type") in ("image_resize", "grayscale") for step in steps
    )


def _has_default_dense(data: Any) -> bool:
    layers = data.get("layers", []) if isinstance(data, dict) else data
    return isinstance(layers, list) and any(
        isinstance(layer, dict) and layer.get("type") == "dense" and "activation" not in layer for layer in layers
    )


def _relative(problem: SpecProblem, *, part_field: str | None) -> SpecProblem:
    """For a part file, a problem's field as the file's own key (``agent.batch_size`` -> ``batch_size``)."""
    if part_field is None:
        return problem
    name = problem.field
    if name == part_field:
        name = ""
    elif name.startswith(part_field + ".") or name.startswith(part_field + "["):
        name = name[len(part_field) :].lstrip(".")
    return SpecProblem(name, problem.message, problem.value, problem.source)


def _runner_installed() -> bool:
    from rlcloud.errors import MissingExtraError, require_installed
    from rlcloud.experiment import RUNNER_MODULES

    try:
        require_installed(RUNNER_MODULES, "runner", feature="checking environments and agents")
    except MissingExtraError:
        return False
    return True


def _kind_of(spec: Any) -> str:
    from rlcloud.specs.experiment import ExperimentSpec
    from rlcloud.specs.sweep import SweepSpec

    if isinstance(spec, ExperimentSpec):
        return "Experiment"
    return "Sweep" if isinstance(spec, SweepSpec) else "Cluster"


def _validate_sweep(sweep: Any, *, build: bool) -> None:
    """Every trial as ``sweep start`` checks it: each configuration's spec once (seeds only differ by seed)."""
    from rlcloud.runner.envs import validate_experiment

    seen: set[str] = set()
    for trial in sweep.trials():
        if trial.config in seen:
            continue
        seen.add(trial.config)
        try:
            validate_experiment(trial.spec)
            if build:
                build_agent(trial.spec)
        except SpecError as exc:
            raise SpecError(
                [SpecProblem(p.field, f"trial {trial.name}: {p.message}", p.value) for p in exc.problems]
            ) from None


def _summary(kind: str, spec: Any, data: Any) -> str:
    from rlcloud.specs.cluster import ClusterSpec
    from rlcloud.specs.experiment import ExperimentSpec

    agent_type = spec.agent.get("type", spec.agent.get("agent")) if isinstance(spec, ExperimentSpec) else None
    if kind == "Agent":
        return f"agent {agent_type}"
    if kind == "Network":
        network = spec.network
        layers = network.get("layers", []) if isinstance(network, dict) else network
        return f"network of {len(layers)} layers" if isinstance(layers, list) else "network"
    if kind == "Environment":
        env = spec.environment
        return f"environment {env.get('level') or env.get('type')}"
    if isinstance(spec, ExperimentSpec):
        stop = ", ".join(
            x
            for x in (
                f"{spec.episodes} episodes" if spec.episodes else "",
                f"{spec.total_timesteps} timesteps" if spec.total_timesteps else "",
            )
            if x
        )
        env = spec.environment.get("level") or spec.environment.get("type")
        return (
            f"experiment {spec.name}: {spec.run_mode} x{spec.num_workers}, env {env}, agent {agent_type}, "
            f"stop after {stop}"
        )
    if kind == "Sweep":
        return f"sweep {spec.name}: {spec.num_trials} trials ({spec.configurations} configurations)"
    assert isinstance(spec, ClusterSpec)
    gpus = f", {spec.gpus_per_node}x {spec.gpu_type.value}" if spec.gpu_type else ""
    return (
        f"cluster {spec.name}: {spec.num_nodes}x {spec.effective_machine_type}{gpus} in {spec.location}"
        f"{' (spot)' if spec.spot else ''}"
    )


_ARGUMENT_RE = re.compile(r"argument:? '?([a-z_]+)'?", re.IGNORECASE)


def build_agent(spec: Any) -> None:
    """Build the spec's agent with Tensorforce on the CPU against one environment, then close both.

    A build error becomes a SpecProblem on ``agent`` (or ``agent.<argument>`` when Tensorforce names one).
    Imports TensorFlow: seconds, not milliseconds.
    """
    import logging
    import os

    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # a CPU build: a check must not take the GPU
    from rlcloud.runner.compat import TensorforceNoise, import_tensorforce
    from rlcloud.runner.loop import build_agent_kwargs, build_vector_env

    single = spec.model_copy(update={"run_mode": "single", "num_workers": 1})
    venv = build_vector_env(single)
    try:
        tensorforce = import_tensorforce()
        kwargs = build_agent_kwargs(single, venv)
        noise = TensorforceNoise()  # its "No min_value bound specified for state." for every unbounded state
        logging.getLogger().addFilter(noise)
        try:
            agent = tensorforce.Agent.create(**kwargs)
        except Exception as exc:  # Tensorforce raises TensorforceError, AssertionError, ValueError, ...
            from rlcloud.specs.tf06 import AGENT_ARGUMENTS

            # "argument X" names an agent argument, or one of a layer's or a memory's: only the first is a key
            match = _ARGUMENT_RE.search(str(exc))
            required, optional = AGENT_ARGUMENTS.get(str(kwargs.get("agent")), ((), ()))
            named = match.group(1) if match and match.group(1) in (*required, *optional) else None
            where = f"agent.{named}" if named else "agent"
            message = f"Tensorforce cannot build the agent: {type(exc).__name__}: {exc}".rstrip(": ")
            raise SpecError([SpecProblem(where, message)]) from None
        finally:
            logging.getLogger().removeFilter(noise)
        agent.close()
    finally:
        venv.close()
