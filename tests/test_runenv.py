"""The runner's environment contract (rlcloud.runenv): one typed object, written and read the same way by every
side, in the formats older images read, checked against docs/contracts.md's table."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import rlcloud
from rlcloud import runenv
from rlcloud.errors import WorkloadError
from rlcloud.runenv import RunnerEnv

SRC = Path(rlcloud.__file__).parent
DOCS = SRC.parent.parent / "docs"

FULL = RunnerEnv(
    results="gs://bucket/runs/exp",
    sweep_results="/data/runs/sweep",
    index=3,
    env_servers=(("exp-env-0.exp", 5000), ("::1", 5001)),
    host_map=(("exp-env-0.exp", ("127.0.0.1", 41000)), ("exp-env-1.exp:5000", ("127.0.0.1", 41001))),
    connect_timeout=1800,
    step_timeout=2.5,
    port=0,
    bind_host="127.0.0.1",
    idle_timeout=3600,
    sync_interval=30,
    early_stopping={"rule": "median", "peers": "gs://bucket/runs/sweep", "trial": "lr=0.1"},
    inline_functions=False,
    inplace_buffers=True,
    timestep_updates=False,
    parent_pid=4242,
    warm_trials=False,
    uint8_frames="float32",
    job_uid="0b9c-job",
    trial={"sweep": "lr", "trial": "lr1e-3--seed1", "index": 0, "params": {"agent.learning_rate": 0.001}},
    code_store="gs://bucket/runs/_code",
    project_dir="/home/me/project",
    gpu_memory_mb=3380,
)


def test_every_field_round_trips_through_the_environment() -> None:
    assert {f.name for f in dataclasses.fields(RunnerEnv)} == set(RunnerEnv.variables())
    assert all(getattr(FULL, name) not in (None, ()) for name in RunnerEnv.variables())
    env = FULL.to_env()
    assert list(env) == list(RunnerEnv.variables().values())  # every variable, in the table's order
    assert RunnerEnv.from_env(env) == FULL
    assert RunnerEnv.from_env(RunnerEnv.from_env(env).to_env()).to_env() == env


def test_values_are_written_as_every_runner_version_reads_them() -> None:
    # Images built from older versions parse these strings: the formats never change.
    env = FULL.to_env()
    assert env["RLCLOUD_CONNECT_TIMEOUT"] == "1800" and env["RLCLOUD_IDLE_TIMEOUT"] == "3600"
    assert env["RLCLOUD_STEP_TIMEOUT"] == "2.5"
    assert env["RLCLOUD_ENV_SERVERS"] == "exp-env-0.exp:5000,[::1]:5001"
    assert env["RLCLOUD_HOST_MAP"] == "exp-env-0.exp=127.0.0.1:41000,exp-env-1.exp:5000=127.0.0.1:41001"
    assert env["RLCLOUD_INLINE_FUNCTIONS"] == "0" and env["RLCLOUD_INPLACE_BUFFERS"] == "1"
    assert env["RLCLOUD_WARM_TRIALS"] == "0"
    assert env["RLCLOUD_PORT"] == "0" and env["RLCLOUD_PARENT_PID"] == "4242" and env["RLCLOUD_INDEX"] == "3"
    assert env["RLCLOUD_EARLY_STOPPING"] == ('{"rule": "median", "peers": "gs://bucket/runs/sweep", "trial": "lr=0.1"}')
    assert RunnerEnv().to_env() == {}


def test_empty_and_unrelated_variables_are_unset() -> None:
    environ = {name: "" for name in RunnerEnv.variables().values()}
    environ["RLCLOUD_REAPER_NAMESPACE"] = "x"  # another program's contract
    environ["PATH"] = "/usr/bin"
    assert RunnerEnv.from_env(environ) == RunnerEnv()


def test_switches_read_the_usual_spellings() -> None:
    for word, value in [("0", False), ("off", False), ("False", False), ("no", False), ("1", True), ("yes", True)]:
        assert RunnerEnv.from_env({"RLCLOUD_WARM_TRIALS": word}).warm_trials is value


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("RLCLOUD_PORT", "http", "is not a TCP port (0-65535)"),
        ("RLCLOUD_PORT", "70000", "is not a TCP port"),
        ("RLCLOUD_CONNECT_TIMEOUT", "soon", "is not a number of seconds"),
        ("RLCLOUD_STEP_TIMEOUT", "-1", "must be a positive number of seconds"),
        ("RLCLOUD_IDLE_TIMEOUT", "0", "must be a positive number of seconds"),
        ("RLCLOUD_SYNC_INTERVAL", "nan", "must be a positive number of seconds"),
        ("RLCLOUD_ENV_SERVERS", "exp-env-0.exp", "is not host:port"),
        ("RLCLOUD_HOST_MAP", "a", "is not name=host:port"),
        ("RLCLOUD_HOST_MAP", "a=b", "is not host:port"),
        ("RLCLOUD_EARLY_STOPPING", "{", "is not JSON"),
        ("RLCLOUD_EARLY_STOPPING", "[1]", "must be a JSON object"),
        ("RLCLOUD_INLINE_FUNCTIONS", "maybe", "use 1 (on) or 0 (off)"),
        ("RLCLOUD_PARENT_PID", "0", "is not a process id"),
        ("RLCLOUD_INDEX", "-1", "is not a whole number"),
    ],
)
def test_a_bad_value_is_refused_naming_the_variable(variable: str, value: str, says: str) -> None:
    with pytest.raises(WorkloadError) as caught:
        RunnerEnv.from_env({variable: value})
    assert str(caught.value).startswith(variable) and says in str(caught.value)


def test_apply_to_replaces_only_the_contract_variables() -> None:
    environ = {"RLCLOUD_RESULTS": "/old", "RLCLOUD_HOST_MAP": "a=127.0.0.1:1", "HOME": "/root"}
    RunnerEnv(results="/new", port=5000).apply_to(environ)
    assert environ == {"RLCLOUD_RESULTS": "/new", "RLCLOUD_PORT": "5000", "HOME": "/root"}
    assert FULL.replace(results=None).results is None and FULL.results is not None


def _docs_table() -> list[tuple[str, str]]:
    text = (DOCS / "contracts.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(RLCLOUD_[A-Z0-9_]+)` \| `([a-z0-9_]+)` \|", text, flags=re.MULTILINE)
    return [(variable, name) for variable, name in rows]


def test_docs_contracts_table_is_the_object() -> None:
    assert _docs_table() == [(variable, name) for name, variable in RunnerEnv.variables().items()]


def test_only_runenv_spells_the_runner_variables() -> None:
    # Another program's variables (the reaper's, the local fakes') live with that program.
    others = {
        "RLCLOUD_REAPER_NAMESPACE",
        "RLCLOUD_METADATA_HOST",
        "RLCLOUD_KUBE_API",
        "RLCLOUD_GKE_EMULATOR_HOST",
        "RLCLOUD_GOOGLE_API_HOST",
        "RLCLOUD_CACHE_MB",  # the reading machine's object cache (storage/cache.py), never a runner's
    }
    assert not others & set(RunnerEnv.variables().values())
    literal = re.compile(r"\"(RLCLOUD_[A-Z0-9_]*)[\"=]")
    spelled = []
    for path in sorted(SRC.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in literal.findall(line):
                if name not in others and path.name != "runenv.py":
                    spelled.append(f"{path.relative_to(SRC)}:{number}: {name}")
    assert spelled == []
    assert set(RunnerEnv.variables().values()) == {
        value for key, value in vars(runenv).items() if key.isupper() and key in runenv.__all__
    }
