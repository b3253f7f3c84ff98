"""ExperimentSpec: what to train, how, for how long, where results go (user input, pure data)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from rlcloud.errors import excerpt
from rlcloud.specs._base import (
    BUDGET_DESCRIPTION,
    NOT_BOOL,
    QUANTITY_RE,
    Duration,
    Frequency,
    StrictModel,
    Usd,
    check_dns_label,
    take_budget_alias,
    why,
)
from rlcloud.specs.cluster import ClusterSpec
from rlcloud.specs.code import CodeSpec
from rlcloud.specs.dotted import DottedPathError, code_strings, resolve_dotted_class

RunMode = Literal["single", "multi-threaded", "distributed"]
Execution = Literal["auto", "batched", "processes", "synchronous", "overlapped"]

GS_URL_RE = re.compile(r"^gs://([a-z0-9][a-z0-9._-]{1,220}[a-z0-9])(/.*)?$")
DEFAULT_WORKERS: dict[str, int] = {"single": 1, "multi-threaded": 4, "distributed": 2}

# Upper bounds of the numbers a spec holds (docs/security.md): each far above any real run, low enough that
# a typo (an extra zero, a pasted timestamp) is an error at validation, not a crash after files are written.
#: Environments per run. Distributed, each is an env-server pod (or process) with a port and a socket to the
#: one learner, which steps them all; past 1024 the learner is the bottleneck and a typo (100000) would
#: start a hundred thousand pods. A local run is bounded lower, by the machine (roles.check_local_capacity).
MAX_WORKERS = 1024
#: Environments one env server hosts (distributed): 2-3 keep a server busy while the learner acts; past 8
#: a server's memory, not the learner, is what grows.
MAX_ENVS_PER_SERVER = 8
#: Environments per env server when ``execution: overlapped`` does not say: one steps while the agent acts
#: on the other.
OVERLAPPED_ENVS_PER_SERVER = 2
#: Training episodes: a billion is decades of CartPole at full speed.
MAX_EPISODES = 10**9
#: Timesteps (Tensorforce counts them in int64); 10^12 is years at the fastest measured rates.
MAX_TIMESTEPS = 10**12
#: Action repeats: Atari uses 4; past 1000 an agent no longer acts.
MAX_REPEAT_ACTIONS = 1000
#: Seeds: numpy's legacy seeding (which Tensorforce's config.seed uses) and gymnasium take 0 .. 2^32-1.
MAX_SEED = 2**32 - 1
#: Evaluation episodes per evaluation.
MAX_EVALUATION_EPISODES = 100_000

#: Shortest stall_timeout: the runner writes its heartbeat every second, so less would flag healthy runs.
MIN_STALL_TIMEOUT = 2


def _numbers(value: Any, where: str) -> Iterator[tuple[str, float]]:
    """Every float in a nested spec value, with its dotted place (``agent.optimizer.learning_rate``)."""
    if isinstance(value, float):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _numbers(item, f"{where}[{index}]")


def _check_class(path: Any, kind: str, key: str) -> None:
    """Refuse a dotted path that does not name a class of ``kind``. Its module is imported (importing is
    allowed, calling is not); one that is not installed here passes, and the runner checks it again."""
    try:
        resolve_dotted_class(path, kind, missing_ok=True)
    except DottedPathError as exc:
        raise PydanticCustomError(f"at:{key}", "{why} (got {v})", {"why": str(exc), "v": excerpt(path)}) from None


#: What a container requests on a cluster when the spec gives no ``cpu``/``memory`` (requests only, no
#: limits: a default never throttles or kills a pod). A pod that requests nothing (QoS BestEffort) always
#: fits a node, so it is never Pending and the cluster autoscaler never adds a node for it; it packs onto
#: whatever node exists (a Spot GPU node too) and is evicted first under memory pressure.
#: An env server steps one or a few environments in one process: half a core, 512 MiB (what
#: examples/gke_gpu.py asks for; 7 fit on an e2-standard-4 node of the CPU pool). Measured: 54 MiB
#: resident while it waits for the agent (CartPole); an Atari environment adds ~100-200 MiB.
DEFAULT_ENV_SERVER_REQUESTS: dict[str, str] = {"cpu": "500m", "memory": "512Mi"}
#: The learner holds TensorFlow, the model and its memory: a core and 2 GiB, which fit the smallest
#: node rlcloud creates (e2-standard-4 / n1-standard-4, ~3.9 cores and 12-13 GiB allocatable).
#: Measured: 643 MiB peak resident for the CartPole PPO example (single mode, 30 episodes); a DQN
#: replay memory of 10,000 Atari frames adds ~300 MiB (and a copy of it on each write).
DEFAULT_LEARNER_REQUESTS: dict[str, str] = {"cpu": "1", "memory": "2Gi"}


class Resources(StrictModel):
    """Kubernetes resources for one role's container: a value given is its request and limit; an empty one is
    rlcloud's default request (no limit)."""

    cpu: str | None = Field(
        None,
        description="CPU request and limit, a Kubernetes quantity such as '2' or '500m'. Empty: a request of "
        f"{DEFAULT_LEARNER_REQUESTS['cpu']} (learner) or {DEFAULT_ENV_SERVER_REQUESTS['cpu']} (env server), "
        "no limit.",
    )
    memory: str | None = Field(
        None,
        description="Memory request and limit, a Kubernetes quantity such as '4Gi'. Empty: a request of "
        f"{DEFAULT_LEARNER_REQUESTS['memory']} (learner) or {DEFAULT_ENV_SERVER_REQUESTS['memory']} (env server), "
        "no limit.",
    )
    gpus: Annotated[int | None, NOT_BOOL] = Field(
        None,
        ge=0,
        le=16,
        json_schema_extra=why("a GKE node has at most 16 GPUs"),
        description="GPUs (nvidia.com/gpu); empty means 1 for the learner on a GPU cluster, else 0.",
    )

    @field_validator("cpu", "memory", mode="before")
    @classmethod
    def _quantity(cls, value: Any) -> Any:
        if value is None:
            return value
        # YAML reads `cpu: 2` and `cpu: 0.5` as numbers; Kubernetes quantities are strings
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            return value  # the str type check reports it
        if not QUANTITY_RE.match(value):
            raise PydanticCustomError(
                "quantity",
                "{v} is not a Kubernetes quantity: use e.g. '2', '500m' for CPU and '4Gi', '512Mi' for memory",
                {"v": excerpt(value)},
            )
        return value


class RolesResources(StrictModel):
    """Resources per role: the learner (single / multi-threaded pod, or the distributed agent) and env servers."""

    learner: Resources = Field(default_factory=Resources, description="The pod that runs the Tensorforce agent.")
    env_server: Resources = Field(
        default_factory=Resources, description="Each environment-server pod (distributed mode); CPU only."
    )

    @model_validator(mode="after")
    def _env_cpu_only(self) -> RolesResources:
        if self.env_server.gpus:
            raise PydanticCustomError(
                "at:env_server.gpus",
                "env_server.gpus must be 0: environment servers run on CPU, the learner uses the GPU",
            )
        return self


class EvaluationSpec(StrictModel):
    """Deterministic evaluation episodes run every so often during training, recorded apart."""

    every: Frequency = Field(
        ..., description="How often to evaluate: every N episodes ('50e') or timesteps ('10000t')."
    )
    episodes: Annotated[int, NOT_BOOL] = Field(
        10,
        ge=1,
        le=MAX_EVALUATION_EPISODES,
        json_schema_extra=why("more would never finish between two evaluations"),
        description="Evaluation episodes per evaluation.",
    )

    @field_validator("every")
    @classmethod
    def _unit(cls, value: Frequency) -> Frequency:
        if value.unit == "s":
            raise PydanticCustomError(
                "frequency", "evaluation.every counts episodes ('50e') or timesteps ('10000t'), not seconds"
            )
        return value


class ExperimentSpec(StrictModel):
    """A Tensorforce experiment: environment, agent, network, stop conditions, run mode, outputs.

    File references in environment/agent/network/cluster are resolved by ``from_file``/``from_dict``
    (relative to the spec file, then to the project, then ``./configs/<kind>s/``, then the bundled configs;
    nothing outside them is read); the model itself holds resolved data only. A spec is data: see docs/security.md.
    """

    name: str = Field(..., description="Experiment name: a DNS-1123 label of at most 40 characters.")
    description: str | None = Field(None, description="Free text describing the experiment.")
    environment: dict[str, Any] = Field(
        ...,
        description="Tensorforce environment spec, e.g. {type: gym, level: CartPole-v1} (gymnasium ids incl. "
        "'ALE/...'), another Tensorforce environment type, or {type: 'pkg.module:Class'} for your own class; "
        "in a file also a path to a JSON/YAML file.",
    )
    agent: dict[str, Any] = Field(
        ...,
        description="Tensorforce agent spec, e.g. {type: ppo, batch_size: 10}; in a file also a JSON/YAML file path. "
        "Image frames (state_preprocessing of image layers then linear_normalization, states bounded 0..255) are "
        "rounded to integer levels and kept as uint8 in the replay memory, normalised when a batch is read: 7 KB "
        "an 84x84 frame instead of 28 KB, so 1,000,000 frames take 7 GB (RLCLOUD_UINT8_FRAMES=0: Tensorforce's "
        "float32). A run resumes from checkpoints of either kind: their frames are converted to the runner's "
        "(uint8 to float32 exactly, float32 to uint8 within half a level).",
    )
    network: dict[str, Any] | list[Any] | Literal["auto"] = Field(
        "auto",
        description="Tensorforce network spec (a layer list or dict), or 'auto'; in a file also a path.",
    )
    episodes: Annotated[int | None, NOT_BOOL] = Field(
        None,
        ge=1,
        le=MAX_EPISODES,
        json_schema_extra=why("a billion episodes is more than any run"),
        description="Stop after this many training episodes (all workers together).",
    )
    total_timesteps: Annotated[int | None, NOT_BOOL] = Field(
        None,
        ge=1,
        le=MAX_TIMESTEPS,
        json_schema_extra=why("10^12 timesteps is years of training"),
        description="Stop after this many timesteps (all workers together).",
    )
    max_timesteps_per_episode: Annotated[int | None, NOT_BOOL] = Field(
        None,
        ge=1,
        le=MAX_TIMESTEPS,
        json_schema_extra=why("10^12 timesteps is years of training"),
        description="Truncate episodes after this many timesteps (empty: the environment's own limit).",
    )
    deterministic: bool = Field(False, description="Act deterministically (no sampling/exploration) while training.")
    repeat_actions: Annotated[int, NOT_BOOL] = Field(
        1,
        ge=1,
        le=MAX_REPEAT_ACTIONS,
        json_schema_extra=why("Atari uses 4; past 1000 the agent no longer acts"),
        description="Repeat each action this many times, summing the rewards.",
    )
    debug_logging: bool = Field(
        False, description="Verbose runner logs, and Tensorforce's in-graph argument checks (slower; same learning)."
    )
    seed: Annotated[int | None, NOT_BOOL] = Field(
        None,
        ge=0,
        le=MAX_SEED,
        json_schema_extra=why("numpy and gymnasium take 32-bit seeds"),
        description="Random seed; single mode is reproducible with a fixed seed.",
    )
    run_mode: RunMode = Field(
        "single",
        description="single: one env, one agent; multi-threaded: num_workers envs feeding one agent in one "
        "process/pod; distributed: one agent plus num_workers environment-server processes/pods.",
    )
    num_workers: Annotated[int, NOT_BOOL] = Field(
        None,  # type: ignore[assignment]  # filled per run_mode by the validator below
        ge=1,
        le=MAX_WORKERS,
        json_schema_extra=why(
            "each environment is a process or pod with a socket and a port to the one learner; a local run "
            "is limited further by the machine (256 processes and its open-file limit)"
        ),
        description="Environments (multi-threaded) or environment servers (distributed); single: 1. "
        "Default: 1 / 4 / 2 by run_mode.",
    )
    num_parameter_servers: Annotated[int, NOT_BOOL] = Field(
        0, ge=0, description="0 or 1: Tensorforce 0.6 has one learner, which is the parameter server."
    )
    execution: Execution = Field(
        "auto",
        description="multi-threaded stepping: 'batched' in-process (cheap envs), 'processes' (slow envs); "
        "distributed: 'overlapped' (each env server hosts envs_per_server environments, 2 by default, and "
        "steps one while the agent acts on another: servers never wait for the agent) or "
        "'synchronous' (all step, then the agent acts on all; batched/processes read as auto there). 'auto': "
        "multi-threaded chooses by the measured cost of an env step, distributed is synchronous (overlapped "
        "learns another run: more environments, another order of the agent's calls; a run cannot switch to "
        "or from it).",
    )
    envs_per_server: Annotated[int | None, NOT_BOOL] = Field(
        None,
        ge=1,
        le=MAX_ENVS_PER_SERVER,
        json_schema_extra=why("each is a full environment in the server's memory, stepped one after another"),
        description="distributed: environments each env server hosts and steps one after another (the agent "
        "has num_workers x this many). Empty: 2 with execution overlapped, else 1. With overlapped, 3 keeps "
        "many or uneven servers busier (16 servers of 5 ms steps sharing 2 CPUs: 81 % of the ideal against 75 % "
        "with 2; up to 8 servers 2 reach 84-85 %).",
    )
    saver_frequency: Frequency | None = Field(
        Frequency(600, "s"),
        description="Checkpoint every N seconds ('600s'), episodes ('100e') or timesteps ('5000t'); empty: at the end.",
    )
    stall_timeout: Duration = Field(
        Duration(600),
        json_schema_extra=why(
            "a learner whose timestep has not advanced for this long is shown as stalled, ends itself and is "
            "restarted once from its latest checkpoint, then failed, locally and on Kubernetes alike (a slow env "
            "step or a long evaluation must fit in it: evaluation episodes count as progress; the start of "
            "training gets min(60 s, this) more); an env server that has not answered for this long is replaced "
            "and the learner rejoins it (docs/contracts.md)"
        ),
        description="How long a training learner may go without a timestep before it counts as stalled "
        "('10m', '90s'; at least 2 s: the runner reports every second). Longer than a checkpoint save takes.",
    )
    summary_frequency: Frequency | None = Field(
        Frequency(120, "s"),
        description="TensorBoard summaries every N seconds ('120s') or timesteps ('1000t'); empty: none.",
    )
    evaluation: EvaluationSpec | None = Field(None, description="Periodic deterministic evaluation; empty: none.")
    max_runtime: Duration | None = Field(
        None,
        description="On Kubernetes and GKE: the longest each of the experiment's Jobs may run, e.g. '12h' (the Job's "
        "activeDeadlineSeconds): past it Kubernetes stops its pods (the learner checkpoints on SIGTERM) and the "
        "experiment fails with DeadlineExceeded, so a hung run does not hold a GPU node. A pause restarts the "
        "clock. Empty: no limit. Local runs ignore it; sweeps refuse it (their trials share one Job).",
    )
    budget: Usd | None = Field(None, description=BUDGET_DESCRIPTION)
    resources: RolesResources = Field(default_factory=RolesResources, description="Per-role CPU/memory/GPU.")
    image: str | None = Field(None, description="Container image for the pods; empty: rlcloud's default image.")
    code: CodeSpec | None = Field(
        None,
        description="Your project's code, packed and taken into every pod or process of the run (no image to "
        "rebuild): a folder (code: .) or {path, include, exclude, requirements}; see rlcloud.specs.code. "
        "Empty: rlcloud.yaml's code, else none (a local run then imports from the project folder).",
    )
    results: str | None = Field(
        None, description="Where results go: 'gs://bucket/prefix' or a directory; empty: ./rlcloud-results."
    )
    cluster: str | ClusterSpec | None = Field(
        None,
        description="Where to run: the name of an existing cluster, a cluster file, or an inline ClusterSpec "
        "(a dedicated cluster, created for this experiment and deleted after it); empty: this machine.",
    )

    @model_validator(mode="before")
    @classmethod
    def _fill_workers(cls, data: Any) -> Any:
        data = take_budget_alias(data)
        if isinstance(data, dict) and data.get("num_workers") is None:
            mode = data.get("run_mode", "single")
            # an invalid run_mode is reported on run_mode alone; 1 keeps num_workers from adding a second,
            # misleading "not a valid integer" problem
            data = {**data, "num_workers": DEFAULT_WORKERS.get(mode, 1) if isinstance(mode, str) else 1}
        return data

    @field_validator("stall_timeout")
    @classmethod
    def _stall_timeout(cls, value: Duration) -> Duration:
        if value.seconds < MIN_STALL_TIMEOUT:
            raise PydanticCustomError(
                "stall_timeout",
                "stall_timeout must be at least {min} s (the runner reports its progress every second), "
                "e.g. '10m' (the default) or '90s'",
                {"min": MIN_STALL_TIMEOUT},
            )
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_dns_label(value, what="experiment name")

    @field_validator("environment", "agent", mode="before")
    @classmethod
    def _no_unresolved_path(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise PydanticCustomError(
                "unresolved_file",
                "{v} looks like a file reference: load the spec with ExperimentSpec.from_file() or "
                "from_dict(), which resolve files, or give the spec inline as a mapping",
                {"v": excerpt(value)},
            )
        return value

    @field_validator("environment")
    @classmethod
    def _environment(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "type" not in value and "class" not in value and "environment" not in value:
            raise PydanticCustomError(
                "environment",
                "environment needs a 'type' (e.g. {type: gym, level: CartPole-v1}, or {type: 'pkg.module:Class'})",
            )
        if value.get("type") in ("gym", "gymnasium") and not value.get("level"):
            raise PydanticCustomError(
                "environment",
                "a gym environment needs 'level', the gymnasium id (e.g. CartPole-v1 or ALE/Pong-v5)",
            )
        # the user's class, as the runner finds it (runner/envs.py _user_class_path): `class`, else a dotted type
        env_type = value.get("type")
        key = "class" if "class" in value else "type"
        if key == "class" or (isinstance(env_type, str) and (":" in env_type or "." in env_type)):
            _check_class(value[key], "environment", key)
        return value

    @field_validator("environment", "agent", "network")
    @classmethod
    def _finite(cls, value: Any, info: ValidationInfo) -> Any:
        # YAML's .nan and .inf reach Tensorforce as a learning rate or a batch size it cannot use, and fail
        # minutes later inside a pod; bounds (min_value/max_value) of an environment may be infinite.
        for where, number in _numbers(value, info.field_name or "spec"):
            bound = where.rsplit(".", 1)[-1] in ("min_value", "max_value")
            if math.isnan(number) or (math.isinf(number) and not bound):
                raise PydanticCustomError(
                    "finite", "{where} is {v}: give a finite number", {"where": where, "v": str(number)}
                )
        return value

    @field_validator("agent")
    @classmethod
    def _agent(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "type" not in value and "agent" not in value:
            raise PydanticCustomError(
                "agent",
                "agent needs a 'type', e.g. ppo, dqn, a2c, ac, dpg, dueling_dqn, trpo, vpg, tensorforce",
            )
        agent_type = value.get("type", value.get("agent"))
        if isinstance(agent_type, str) and ("." in agent_type or ":" in agent_type):
            _check_class(agent_type, "agent", "type" if "type" in value else "agent")
        return value

    @field_validator("network", mode="before")
    @classmethod
    def _network(cls, value: Any) -> Any:
        if isinstance(value, str) and value != "auto":
            raise PydanticCustomError(
                "unresolved_file",
                "network {v} is neither 'auto' nor a layer spec; file references are resolved by "
                "ExperimentSpec.from_file()/from_dict()",
                {"v": excerpt(value)},
            )
        if isinstance(value, list) and not all(isinstance(layer, dict | list) for layer in value):
            raise PydanticCustomError(
                "network", "a network layer list holds layer mappings such as {type: dense, size: 64}"
            )
        return value

    @field_validator("num_parameter_servers")
    @classmethod
    def _parameter_servers(cls, value: int) -> int:
        if value > 1:
            raise PydanticCustomError(
                "parameter_servers",
                "Tensorforce 0.6 has a single learner, which holds the parameters: num_parameter_servers must "
                "be 0 or 1; scale with num_workers instead",
            )
        return value

    @field_validator("summary_frequency")
    @classmethod
    def _summary_unit(cls, value: Frequency | None) -> Frequency | None:
        if value is not None and value.unit == "e":
            raise PydanticCustomError(
                "frequency",
                "summary_frequency cannot count episodes (Tensorforce summaries follow seconds or timesteps): "
                "use e.g. '120s' or '1000t'",
            )
        return value

    @field_validator("results")
    @classmethod
    def _results(cls, value: str | None) -> str | None:
        if value is not None and value.startswith("gs:") and not GS_URL_RE.match(value):
            raise PydanticCustomError(
                "results",
                "{v} is not a valid GCS location: use gs://BUCKET or gs://BUCKET/PREFIX (bucket names are "
                "3-222 lowercase letters, digits, '-', '_' and '.')",
                {"v": excerpt(value)},
            )
        if value is not None and not value.strip():
            raise PydanticCustomError("results", "results must be gs://BUCKET[/PREFIX] or a directory, not empty")
        return value

    @model_validator(mode="after")
    def _no_code(self) -> ExperimentSpec:
        # Tensorforce eval()s some strings (a function layer, reward shaping): a spec holds no code
        for name in ("environment", "agent", "network"):
            for path, reason in code_strings(getattr(self, name), name):
                raise PydanticCustomError(f"at:{path}", reason)
        return self

    @model_validator(mode="after")
    def _consistency(self) -> ExperimentSpec:
        if self.episodes is None and self.total_timesteps is None:
            raise PydanticCustomError("at:episodes", "give at least one stop condition: episodes or total_timesteps")
        if self.run_mode == "single" and self.num_workers != 1:
            raise PydanticCustomError(
                "at:num_workers",
                "run_mode single runs one worker; for num_workers={n} use run_mode multi-threaded or distributed",
                {"n": self.num_workers},
            )
        if self.execution in ("synchronous", "overlapped") and self.run_mode != "distributed":
            raise PydanticCustomError(
                "at:execution",
                "execution {value} is for run_mode distributed; multi-threaded takes auto, batched or processes",
                {"value": self.execution},
            )
        if self.envs_per_server is not None and self.run_mode != "distributed":
            raise PydanticCustomError(
                "at:envs_per_server",
                "envs_per_server is for run_mode distributed (multi-threaded: num_workers environments already)",
            )
        if self.execution == "overlapped" and self.envs_per_server == 1:
            raise PydanticCustomError(
                "at:envs_per_server",
                "execution overlapped steps one environment of each server while the agent acts on another: "
                "envs_per_server must be 2 or more (or empty: 2)",
            )
        if self.run_mode == "multi-threaded" and self.num_workers < 2:
            raise PydanticCustomError(
                "at:num_workers",
                "run_mode multi-threaded needs num_workers >= 2 (use run_mode single for one)",
            )
        return self

    @property
    def servers_envs(self) -> int:
        """Environments per env server (distributed; 1 otherwise): ``envs_per_server``, or its default."""
        if self.run_mode != "distributed":
            return 1
        if self.envs_per_server is not None:
            return self.envs_per_server
        return OVERLAPPED_ENVS_PER_SERVER if self.execution == "overlapped" else 1

    @property
    def num_envs(self) -> int:
        """Environments feeding the agent: 1 in single mode, num_workers (x servers_envs) otherwise."""
        return 1 if self.run_mode == "single" else self.num_workers * self.servers_envs

    @classmethod
    def from_file(cls, path: str | Path, **overrides: Any) -> ExperimentSpec:
        """Load from a YAML/JSON file (tensorforce-client files too); keyword arguments override settings.

        File references (environment/agent/network/cluster) resolve relative to the file, then to the
        project (the directory holding rlcloud.yaml or .tensorforce.json, else the working directory),
        then ./configs/<kind>s/, then rlcloud's bundled configs; a file outside those places is refused.
        Dotted keys override nested settings: ``**{"resources.learner.cpu": "2"}``.
        """
        from rlcloud.specs.building import check_kind, experiment_from_dict, read_data_file

        path = Path(path)
        data = read_data_file(path)
        check_kind(data, "Experiment", str(path))
        return experiment_from_dict(data, model=cls, base_dir=path.parent, source=str(path), **overrides)

    @classmethod
    def from_dict(cls, data: dict[str, Any], base_dir: str | Path | None = None, **overrides: Any) -> ExperimentSpec:
        """Build from a dict, resolving file references relative to ``base_dir`` (default: the cwd)."""
        from rlcloud.specs.building import experiment_from_dict

        return experiment_from_dict(data, model=cls, base_dir=base_dir, **overrides)

    @classmethod
    def from_yaml_text(cls, text: str, base_dir: str | Path | None = None, **overrides: Any) -> ExperimentSpec:
        """Load from YAML/JSON text, e.g. what ``to_yaml()`` wrote; references resolve against ``base_dir``."""
        from rlcloud.specs.building import check_kind, experiment_from_dict, parse_data_text

        data = parse_data_text(text, source="<string>")
        check_kind(data, "Experiment", "<string>")
        base = Path(base_dir) if base_dir is not None else Path.cwd()
        return experiment_from_dict(data, model=cls, base_dir=base, source="<string>", **overrides)

    def to_yaml(self) -> str:
        """This spec as YAML (with ``kind: Experiment``); loading it back gives an equal spec."""
        from rlcloud.specs.building import dump_spec

        return dump_spec("Experiment", self)

    def replace(self, **overrides: Any) -> ExperimentSpec:
        """A validated copy with some settings changed (dotted keys for nested ones)."""
        from rlcloud.specs.building import apply_overrides, build_model

        return build_model(ExperimentSpec, apply_overrides(self.model_dump(mode="json"), overrides))
