"""The runner's environment contract: every ``RLCLOUD_*`` variable a runner, env server, supervisor or sweeper
reads, as one typed, frozen object.

Whoever starts a runner (the Kubernetes builders, the local backend and sweeper, the runner of a sweep's pod
for itself) writes these variables with :meth:`RunnerEnv.to_env`; whoever reads them parses them with
:meth:`RunnerEnv.from_env`, which names the variable and what would be valid when a value is bad. The names
and the way values are written never change: images built from older versions read them. docs/contracts.md
has the table (tests/test_runenv.py checks it against this module).

A field left ``None`` (or an empty variable) means unset: the reader's default applies (written next to each
field). The variables of the in-cluster reaper and of the local fakes (``RLCLOUD_REAPER_NAMESPACE``,
``RLCLOUD_METADATA_HOST``, ``RLCLOUD_KUBE_API``, ``RLCLOUD_GKE_EMULATOR_HOST``, ``RLCLOUD_GOOGLE_API_HOST``)
are another program's contract and stay with it (rlcloud.reaper, rlcloud.doctor, rlcloud.gke).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from rlcloud.errors import WorkloadError

__all__ = [
    "BIND_HOST",
    "CODE_STORE",
    "CONNECT_TIMEOUT",
    "EARLY_STOPPING",
    "ENV_SERVERS",
    "GPU_MEMORY_MB",
    "HOST_MAP",
    "IDLE_TIMEOUT",
    "INDEX",
    "INLINE_FUNCTIONS",
    "INPLACE_BUFFERS",
    "JOB_UID",
    "PARENT_PID",
    "PORT",
    "PROJECT_DIR",
    "RESULTS",
    "STEP_TIMEOUT",
    "SWEEP_RESULTS",
    "SYNC_INTERVAL",
    "TIMESTEP_UPDATES",
    "TRIAL",
    "UINT8_FRAMES",
    "WARM_TRIALS",
    "HostPort",
    "RunnerEnv",
    "parse_host_port",
]

RESULTS = "RLCLOUD_RESULTS"
SWEEP_RESULTS = "RLCLOUD_SWEEP_RESULTS"
INDEX = "RLCLOUD_INDEX"
ENV_SERVERS = "RLCLOUD_ENV_SERVERS"
HOST_MAP = "RLCLOUD_HOST_MAP"
CONNECT_TIMEOUT = "RLCLOUD_CONNECT_TIMEOUT"
STEP_TIMEOUT = "RLCLOUD_STEP_TIMEOUT"
PORT = "RLCLOUD_PORT"
BIND_HOST = "RLCLOUD_BIND_HOST"
IDLE_TIMEOUT = "RLCLOUD_IDLE_TIMEOUT"
SYNC_INTERVAL = "RLCLOUD_SYNC_INTERVAL"
EARLY_STOPPING = "RLCLOUD_EARLY_STOPPING"
TRIAL = "RLCLOUD_TRIAL"
INLINE_FUNCTIONS = "RLCLOUD_INLINE_FUNCTIONS"
INPLACE_BUFFERS = "RLCLOUD_INPLACE_BUFFERS"
TIMESTEP_UPDATES = "RLCLOUD_TIMESTEP_UPDATES"
PARENT_PID = "RLCLOUD_PARENT_PID"
WARM_TRIALS = "RLCLOUD_WARM_TRIALS"
UINT8_FRAMES = "RLCLOUD_UINT8_FRAMES"
JOB_UID = "RLCLOUD_JOB_UID"
CODE_STORE = "RLCLOUD_CODE_STORE"
PROJECT_DIR = "RLCLOUD_PROJECT_DIR"
GPU_MEMORY_MB = "RLCLOUD_GPU_MEMORY_MB"

#: ``(host, port)``: an address as written in ``RLCLOUD_ENV_SERVERS`` and ``RLCLOUD_HOST_MAP``.
HostPort = tuple[str, int]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


# ----------------------------------------------------------------------------- parsing and writing values


def parse_host_port(text: str, variable: str) -> HostPort:
    """``host:port`` (``[v6]:port`` too) as ``(host, port)``; a WorkloadError naming ``variable`` otherwise."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")  # [::1]:5000
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise WorkloadError(f"{variable}: {text!r} is not host:port (e.g. exp-env-0.exp:5000 or 127.0.0.1:5000)")
    return host, int(port)


def _host_port_text(address: HostPort) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _text(raw: str, variable: str) -> str:
    return raw


def _seconds(raw: str, variable: str) -> float:
    try:
        value = float(raw)
    except ValueError as exc:
        raise WorkloadError(f"{variable}={raw!r} is not a number of seconds") from exc
    if not value > 0 or value == float("inf"):
        raise WorkloadError(f"{variable}={raw!r} must be a positive number of seconds")
    return value


def _seconds_text(value: float) -> str:
    # 1800, not 1800.0: what the builders always wrote (a float parses either)
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _port(raw: str, variable: str) -> int:
    if not raw.isdigit() or not 0 <= int(raw) < 65536:
        raise WorkloadError(f"{variable}={raw!r} is not a TCP port (0-65535)")
    return int(raw)


def _count(raw: str, variable: str) -> int:
    if not raw.strip().isdigit():
        raise WorkloadError(f"{variable}={raw!r} is not a whole number >= 0")
    return int(raw)


def _pid(raw: str, variable: str) -> int:
    if not raw.strip().isdigit() or int(raw) <= 0:
        raise WorkloadError(f"{variable}={raw!r} is not a process id (a whole number > 0)")
    return int(raw)


def _flag(raw: str, variable: str) -> bool:
    word = raw.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise WorkloadError(f"{variable}={raw!r} is not a switch: use 1 (on) or 0 (off)")


def _flag_text(value: bool) -> str:
    return "1" if value else "0"


def _frames(raw: str, variable: str) -> str:
    # a switch, or "float32": rounded frames stored as float32 (runner/frames.py compares the two with it)
    if raw.strip().lower() == "float32":
        return "float32"
    return _flag_text(_flag(raw, variable))


def _servers(raw: str, variable: str) -> tuple[HostPort, ...]:
    return tuple(parse_host_port(item, variable) for item in raw.split(",") if item.strip())


def _servers_text(value: tuple[HostPort, ...]) -> str:
    return ",".join(map(_host_port_text, value))


def _host_map(raw: str, variable: str) -> tuple[tuple[str, HostPort], ...]:
    mapping: dict[str, HostPort] = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        name, sep, target = item.partition("=")
        if not sep or not name.strip():
            raise WorkloadError(f"{variable}: {item!r} is not name=host:port")
        mapping[name.strip()] = parse_host_port(target, variable)
    return tuple(mapping.items())


def _host_map_text(value: tuple[tuple[str, HostPort], ...]) -> str:
    return ",".join(f"{name}={_host_port_text(target)}" for name, target in value)


def _json_object(raw: str, variable: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise WorkloadError(f"{variable} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise WorkloadError(f"{variable} must be a JSON object, not {type(value).__name__}")
    return value


def _json_text(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value))


def _var(name: str, parse: Callable[[str, str], Any], write: Callable[[Any], str] = str, default: Any = None) -> Any:
    """A field of :class:`RunnerEnv`: its variable, how a value is read and written back."""
    return field(default=default, metadata={"variable": name, "parse": parse, "write": write})


# ----------------------------------------------------------------------------------------------- the object


@dataclass(frozen=True)
class RunnerEnv:
    """The ``RLCLOUD_*`` environment of a runner (and of the supervisor or sweeper around it).

    Every field is optional: ``None`` (or ``()`` for the lists) is an unset variable, and the reader's
    default applies. Build one with the fields a role needs and write it with :meth:`to_env`; read one
    with :meth:`from_env`.
    """

    #: RLCLOUD_RESULTS: the run's results location (gs:// URL or directory) the workdir syncs to; unset:
    #: the workdir is the results location.
    results: str | None = _var(RESULTS, _text)
    #: RLCLOUD_SWEEP_RESULTS: a sweep pod's ``<results root>/<sweep>``; its trial writes to ``<that>/<trial>``.
    sweep_results: str | None = _var(SWEEP_RESULTS, _text)
    #: RLCLOUD_INDEX: a pod's Job completion index (Kubernetes fills it from the downward API for ``--index``).
    index: int | None = _var(INDEX, _count)
    #: RLCLOUD_ENV_SERVERS: the agent's env servers, ``host:port,...`` (distributed mode).
    env_servers: tuple[HostPort, ...] = _var(ENV_SERVERS, _servers, _servers_text, ())
    #: RLCLOUD_HOST_MAP: ``name=host:port,...``, where to dial a server named ``name`` or ``name:port`` (tests).
    host_map: tuple[tuple[str, HostPort], ...] = _var(HOST_MAP, _host_map, _host_map_text, ())
    #: RLCLOUD_CONNECT_TIMEOUT: seconds the agent waits for every env server (default 300).
    connect_timeout: float | None = _var(CONNECT_TIMEOUT, _seconds, _seconds_text)
    #: RLCLOUD_STEP_TIMEOUT: seconds one env step may take before its server counts as dead (default 120).
    step_timeout: float | None = _var(STEP_TIMEOUT, _seconds, _seconds_text)
    #: RLCLOUD_PORT: the env server's TCP port (default 5000; 0 picks a free one).
    port: int | None = _var(PORT, _port)
    #: RLCLOUD_BIND_HOST: the env server's listen address (default 0.0.0.0).
    bind_host: str | None = _var(BIND_HOST, _text)
    #: RLCLOUD_IDLE_TIMEOUT: seconds an env server waits without an agent before it exits 0 (default 900).
    idle_timeout: float | None = _var(IDLE_TIMEOUT, _seconds, _seconds_text)
    #: RLCLOUD_SYNC_INTERVAL: seconds between two syncs of the workdir to RLCLOUD_RESULTS (default 30).
    sync_interval: float | None = _var(SYNC_INTERVAL, _seconds, _seconds_text)
    #: RLCLOUD_EARLY_STOPPING: a sweep trial's early-stopping settings (JSON object; rlcloud.runner.early_stop).
    early_stopping: Mapping[str, Any] | None = _var(EARLY_STOPPING, _json_object, _json_text)
    #: RLCLOUD_INLINE_FUNCTIONS: 0 keeps Tensorforce's nested function graphs (default 1: inlined).
    inline_functions: bool | None = _var(INLINE_FUNCTIONS, _flag, _flag_text)
    #: RLCLOUD_INPLACE_BUFFERS: 0 keeps Tensorforce's buffer rebuilds (default 1: written in place).
    inplace_buffers: bool | None = _var(INPLACE_BUFFERS, _flag, _flag_text)
    #: RLCLOUD_TIMESTEP_UPDATES: 0 keeps Tensorforce's one update per observe with several environments
    #: (default 1: one per update_frequency timesteps, as with one environment; runner/updates.py).
    timestep_updates: bool | None = _var(TIMESTEP_UPDATES, _flag, _flag_text)
    #: RLCLOUD_PARENT_PID: the local supervisor's pid; the runner exits when it is gone.
    parent_pid: int | None = _var(PARENT_PID, _pid)
    #: RLCLOUD_WARM_TRIALS: 0 gives every local sweep trial its own processes (default 1: warm workers).
    warm_trials: bool | None = _var(WARM_TRIALS, _flag, _flag_text)
    #: RLCLOUD_UINT8_FRAMES: 0 keeps Tensorforce's float32 frames, float32 rounds them but stores float32
    #: (default 1: rounded, stored as uint8 where the agent allows it; runner/frames.py).
    uint8_frames: str | None = _var(UINT8_FRAMES, _frames)
    #: RLCLOUD_JOB_UID: a warm sweep pod's Job uid (downward API), so that an earlier Job's failures do not count.
    job_uid: str | None = _var(JOB_UID, _text)
    #: RLCLOUD_TRIAL: a sweep trial's place in its sweep (JSON object: sweep, trial, index, seed, params, the
    #: objective's scalar and each parameter's domain), for TensorBoard's HParams (rlcloud.runner.hparams).
    trial: Mapping[str, Any] | None = _var(TRIAL, _json_object, _json_text)
    #: RLCLOUD_CODE_STORE: where the run's code archives are (``<results root>/_code``): a spec whose
    #: ``code.digest`` is set fetches that archive from here before it imports anything (rlcloud.codepack).
    code_store: str | None = _var(CODE_STORE, _text)
    #: RLCLOUD_PROJECT_DIR: a local run without ``code:``: the project folder its roles import from, as
    #: ``spec validate`` does (unset: only what is installed).
    project_dir: str | None = _var(PROJECT_DIR, _text)
    #: RLCLOUD_GPU_MEMORY_MB: the GPU memory (MiB) this process's TensorFlow may take, for trials that share a
    #: GPU (a sweep's trials_per_gpu; runner/gpumem.py). Unset: TensorFlow's default, the whole GPU.
    gpu_memory_mb: int | None = _var(GPU_MEMORY_MB, _pid)

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Field name -> environment variable, in the order :meth:`to_env` writes them."""
        return {f.name: f.metadata["variable"] for f in dataclasses.fields(cls)}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RunnerEnv:
        """Read every variable of ``environ`` (default ``os.environ``); an empty one counts as unset.

        Raises:
            WorkloadError: a value is not what its variable holds (the message names the variable and
                what would be valid).
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = env.get(f.metadata["variable"])
            if raw is not None and raw.strip():
                values[f.name] = f.metadata["parse"](raw, f.metadata["variable"])
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """The set fields as environment variables, written the way every version of the runner reads them."""
        env: dict[str, str] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None or value == ():
                continue
            env[f.metadata["variable"]] = f.metadata["write"](value)
        return env

    def apply_to(self, environ: MutableMapping[str, str]) -> None:
        """Make ``environ``'s contract variables this object's: set the set fields, remove the others (other
        variables are left alone)."""
        for variable in self.variables().values():
            environ.pop(variable, None)
        environ.update(self.to_env())

    def replace(self, **changes: Any) -> RunnerEnv:
        """A copy with ``changes`` (``None`` unsets a field)."""
        return dataclasses.replace(self, **changes)
