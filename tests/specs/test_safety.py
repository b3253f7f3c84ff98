"""Hostile input (issue 13): every case a clear SpecError naming the field, in bounded time and memory, never a
traceback, never a file outside the spec's places read into it, nothing executed from data.

Each class has more variants than the examples that found it, and goes through the loader and the CLI
(``rlcloud.cli.main`` returns the exit code: 2, and no "Traceback" in what it printed).
"""

from __future__ import annotations

import json
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlcloud.cli import main
from rlcloud.errors import SpecError
from rlcloud.specs import ExperimentSpec
from rlcloud.specs.dotted import code_strings
from rlcloud.specs.experiment import MAX_SEED, MAX_WORKERS
from rlcloud.specs.loading import experiment_from_dict, load_spec, load_spec_text, parse_data_text, parse_json_text
from rlcloud.specs.safeload import MAX_BYTES, MAX_DEPTH, MAX_NODES
from tests.support.specs import minimal_experiment, spec_error

GOOD = "name: demo\nenvironment: {type: gym, level: CartPole-v1}\nagent: {type: ppo, batch_size: 10}\nepisodes: 5\n"


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the CLI in this process; the exit code and everything it printed."""
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


def assert_refused(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """The CLI exits 2, prints no traceback, and says each of ``needles``."""
    code, printed = cli(argv, capsys)
    assert code == 2, printed
    assert "Traceback" not in printed
    for needle in needles:
        assert needle in printed, printed
    return printed


def bounded(build: Callable[[], Any], *, megabytes: int = 64) -> SpecError | None:
    """Run ``build``; return its SpecError (None on success) and check that it stayed within ``megabytes``."""
    tracemalloc.start()
    try:
        build()
        error = None
    except SpecError as exc:
        error = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < megabytes * 2**20, f"peak {peak / 2**20:.0f} MiB"
    return error


# ---------------------------------------------------------------------------------------- the loader


def _laughs(levels: int, fan: int, *, flow: bool = True) -> str:
    lines = ["a0: &a0 [lol]" if flow else "a0: &a0\n  - lol"]
    for i in range(1, levels):
        refs = ", ".join(f"*a{i - 1}" for _ in range(fan))
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


def _chain(first: str, template: str, levels: int) -> str:
    """``first`` anchors ``&x0``; each next line anchors ``&x{i}`` from ``template`` with ``{p}`` the previous."""
    lines = [first]
    for i in range(1, levels):
        lines.append(template.format(i=i, p=f"*x{i - 1}"))
    return "\n".join(lines) + "\n"


ALIAS_BOMBS = {
    "lists, fan 9": _laughs(9, 9),
    "lists, fan 2, 40 levels": _laughs(40, 2),
    "block style root": _laughs(10, 10, flow=False),
    "mappings": _chain("x0: &x0 {a: 1, b: 2, c: 3}", "x{i}: &x{i} {{p: {p}, q: {p}, r: {p}}}", 20),
    "merge keys": _chain("x0: &x0 {a: 1}", "x{i}: &x{i} [{p}, {p}]", 25) + "c: {<<: *x0, y: *x24}\n",
    "inside an experiment": GOOD + _chain("x0: &x0 [x]", "x{i}: &x{i} [{p}, {p}, {p}]", 15),
    "as keys": _chain("x0: &x0 [x, x, x, x, x, x, x, x]", "x{i}: &x{i} {{? {p} : 1, z: [{p}, {p}]}}", 20),
}


@pytest.mark.parametrize("text", ALIAS_BOMBS.values(), ids=ALIAS_BOMBS.keys())
def test_alias_bombs_are_refused_before_anything_expands(text: str) -> None:
    assert len(text.encode()) < 4096  # small files: the danger is in the expansion
    error = bounded(lambda: parse_data_text(text, source="bomb.yaml"))
    assert error is not None
    assert "aliases are expanded" in str(error) and "bomb.yaml" in str(error)


def test_moderate_alias_use_still_loads() -> None:
    data = parse_data_text("base: &b {type: dense, size: 64}\nnet: [*b, *b, {<<: *b, size: 32}]\n")
    assert data["net"][2] == {"type": "dense", "size": 32}


RECURSIVE = {
    "list": "&a [*a]",
    "mapping": "&a {x: *a}",
    "nested": "a: &a [1, [2, [3, *a]]]",
    "mapping value": "a: &a\n  b:\n    c: *a\n",
    "key": "&a {? *a : 1}",
    "merge": "a: &a {b: 1, <<: *a}",
}


@pytest.mark.parametrize("text", RECURSIVE.values(), ids=RECURSIVE.keys())
def test_recursive_aliases_are_refused(text: str) -> None:
    error = bounded(lambda: parse_data_text(text))
    assert error is not None and "cycle" in str(error)


DEEP = {
    "flow lists": "[" * 500 + "]" * 500,
    "flow mappings": "a: " + "{a: " * 500 + "1" + "}" * 500,
    "block mappings": "".join("  " * i + f"k{i}:\n" for i in range(500)) + "  " * 500 + "v: 1\n",
    "block lists": "".join("  " * i + "-\n" for i in range(200)) + "  " * 200 + "- 1\n",
    "inside an experiment": GOOD + "description: " + "[" * 300 + "]" * 300 + "\n",
    "10,000 levels": "[" * 10_000,
}


@pytest.mark.parametrize("text", DEEP.values(), ids=DEEP.keys())
def test_deep_nesting_is_a_field_error_not_a_recursion_error(text: str) -> None:
    error = bounded(lambda: load_spec_text(text, source="deep.yaml"))
    assert error is not None and f"nested more than {MAX_DEPTH} levels" in str(error)


def test_deep_nesting_through_aliases_is_refused() -> None:
    chunk = "[" * 40 + "x" + "]" * 40
    text = f"a: &a {chunk}\nb: &b {'[' * 40}*a{']' * 40}\n"
    error = bounded(lambda: parse_data_text(text))
    assert error is not None and "levels deep" in str(error)


@pytest.mark.parametrize(
    "literal",
    ["1" * 4301, "-" + "9" * 5000, "0x" + "f" * 5000, "0o" + "7" * 5000, "0b" + "1" * 5000, ":".join(["59"] * 3000),
     "1" * 5000 + ".5", "1_" * 3000 + "1"],
    ids=["decimal", "negative", "hex", "octal", "binary", "sexagesimal", "float", "underscores"],
)  # fmt: skip
def test_huge_number_literals_are_refused(literal: str) -> None:
    error = bounded(lambda: load_spec_text(GOOD + f"seed: {literal}\n"))
    assert error is not None
    assert "number literal" in str(error) or "seed" in str(error)
    assert len(str(error)) < 600  # the literal is not echoed


@pytest.mark.parametrize("text", ['{"seed": ' + "1" * 5000 + "}", '{"a": NaN}', '{"a": Infinity}'])
def test_json_numbers_python_refuses_are_spec_errors(text: str) -> None:
    error = bounded(lambda: parse_json_text(text, source="x.json"))
    assert error is not None and "x.json" in str(error)


def test_json_deep_nesting_is_refused() -> None:
    for text in ("[" * 100_000 + "]" * 100_000, json.dumps(json.loads("[" * 100 + "]" * 100))):
        error = bounded(lambda text=text: parse_json_text(text))
        assert error is not None and "levels deep" in str(error)


@pytest.mark.parametrize(
    "text",
    ["x: 2020-13-45", "x: 2020-02-30", "x: !!binary 'a'", "x: !!timestamp nonsense", "x: !!int abc",
     "x: !!float abc", "x: !!python/object/apply:os.system [id]", "x: !!python/name:os.system ''", "? [a, b]\n: 1",
     "--- 1\n--- 2\n", "x: \x00"],
)  # fmt: skip
def test_values_python_cannot_build_are_yaml_errors(text: str) -> None:
    assert bounded(lambda: parse_data_text(text, source="v.yaml")) is not None


def test_python_data_gets_the_same_bounds() -> None:
    cyclic: dict[str, Any] = {"type": "ppo"}
    cyclic["self"] = cyclic
    deep: Any = 1
    for _ in range(500):
        deep = [deep]
    for changes in ({"agent": cyclic}, {"description": deep}, {"network": deep}):
        assert bounded(lambda c=changes: ExperimentSpec.from_dict(minimal_experiment(**c))) is not None


def test_oversized_text_and_files_are_refused(tmp_path: Path) -> None:
    big = GOOD + "description: " + "x" * MAX_BYTES + "\n"
    assert "KiB" in str(bounded(lambda: load_spec_text(big)))
    path = tmp_path / "big.yaml"
    path.write_text(big)
    assert "KiB" in str(bounded(lambda: load_spec(path)))
    # the byte bound keeps plain text under MAX_NODES values: only aliases can pass it (the bombs above)
    assert MAX_BYTES // 2 < MAX_NODES


def test_special_files_are_not_read_forever(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path in (Path("/dev/zero"), Path("/dev/urandom"), fifo, tmp_path):
        error = bounded(lambda path=path: load_spec(path))
        assert error is not None


# ------------------------------------------------------------------------------------- the numbers


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"run_mode": "distributed", "num_workers": 100_000_000}, "num_workers"),
        ({"run_mode": "distributed", "num_workers": 100_000}, "num_workers"),
        ({"run_mode": "multi-threaded", "num_workers": MAX_WORKERS + 1}, "num_workers"),
        ({"seed": 2**64 + 1}, "seed"),
        ({"seed": MAX_SEED + 1}, "seed"),
        ({"episodes": 10**10}, "episodes"),
        ({"total_timesteps": 10**13}, "total_timesteps"),
        ({"max_timesteps_per_episode": 10**13}, "max_timesteps_per_episode"),
        ({"repeat_actions": 10**6}, "repeat_actions"),
        ({"evaluation": {"every": "10e", "episodes": 10**9}}, "evaluation.episodes"),
        ({"saver_frequency": "9" * 400 + "t"}, "saver_frequency"),
        ({"summary_frequency": 10**15}, "summary_frequency"),
        ({"cluster": {"name": "c", "num_nodes": 10**6}}, "cluster.num_nodes"),
        ({"cluster": {"name": "c", "disk_size": 10**9}}, "cluster.disk_size"),
        ({"cluster": {"name": "c", "ttl": "99999d"}}, "cluster.ttl"),
        ({"cluster": {"name": "c", "cpus_per_node": 4, "memory_per_node": float("inf")}}, "cluster.memory_per_node"),
        ({"cluster": {"name": "c", "cpus_per_node": 4, "memory_per_node": float("nan")}}, "cluster.memory_per_node"),
        ({"cluster": {"name": "c", "autoscaling": {"max_nodes": 10**7}}}, "cluster.autoscaling.max_nodes"),
    ],
)
def test_numbers_have_upper_bounds(changes: dict[str, Any], field: str) -> None:
    error = spec_error(lambda: experiment_from_dict(minimal_experiment(**changes)))
    assert field in error.fields, str(error)
    assert len(str(error)) < 1000


def test_upper_bound_messages_say_why() -> None:
    error = spec_error(lambda: experiment_from_dict(minimal_experiment(run_mode="distributed", num_workers=10**5)))
    assert "1024" in str(error) and "open-file limit" in str(error)
    error = spec_error(lambda: experiment_from_dict(minimal_experiment(seed=2**64 + 1)))
    assert "32-bit" in str(error)


@pytest.mark.parametrize(
    "field",
    ["episodes", "total_timesteps", "max_timesteps_per_episode", "repeat_actions", "seed", "num_workers",
     "num_parameter_servers"],
)  # fmt: skip
@pytest.mark.parametrize("value", [True, False])
def test_booleans_are_not_numbers(field: str, value: bool) -> None:
    changes: dict[str, Any] = {field: value}
    if field == "num_workers":
        changes["run_mode"] = "multi-threaded"
    error = spec_error(lambda: experiment_from_dict(minimal_experiment(**changes)))
    assert field in error.fields, str(error)


def test_booleans_are_not_numbers_in_nested_specs() -> None:
    for changes, field in [
        ({"evaluation": {"every": "10e", "episodes": True}}, "evaluation.episodes"),
        ({"resources": {"learner": {"gpus": True}}}, "resources.learner.gpus"),
        ({"cluster": {"name": "c", "num_nodes": True}}, "cluster.num_nodes"),
        ({"saver_frequency": True}, "saver_frequency"),
    ]:
        assert field in spec_error(lambda c=changes: experiment_from_dict(minimal_experiment(**c))).fields


def test_bounds_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "exp.yaml"
    for extra in ("total_timesteps: true", "seed: 18446744073709551617", "run_mode: distributed\nnum_workers: 100000"):
        spec.write_text(GOOD + extra + "\n")
        assert_refused(["spec", "validate", str(spec)], capsys, "INVALID")
        assert_refused(["spec", "show", str(spec)], capsys, "error:")


@pytest.mark.parametrize("mode", ["distributed", "multi-threaded"])
def test_local_runs_are_bounded_by_the_machine(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import resource

    from rlcloud.experiment import Experiment
    from rlcloud.roles import LOCAL_MAX_WORKERS

    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    too_many = ExperimentSpec.from_dict(minimal_experiment(run_mode=mode, num_workers=LOCAL_MAX_WORKERS + 1))
    error = spec_error(lambda: Experiment(too_many, results=str(results)).start())
    assert error.fields == ["num_workers"] and "cluster" in str(error)
    monkeypatch.setattr(resource, "getrlimit", lambda which: (256, 256))
    fits_spec = ExperimentSpec.from_dict(minimal_experiment(run_mode=mode, num_workers=100))
    error = spec_error(lambda: Experiment(fits_spec, results=str(results)).start())
    assert "ulimit -n" in str(error) and "at most 48 workers" in str(error)
    spec = tmp_path / "exp.yaml"
    spec.write_text(GOOD + f"run_mode: {mode}\nnum_workers: 1000\n")
    assert_refused(["experiment", "start", str(spec), "--results", str(results)], capsys, "num_workers")
    assert not results.exists()  # refused before anything was written


# --------------------------------------------------------------------------------- files a spec names


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project directory as the cwd, with its spec in experiments/ and a secret-looking sibling tree."""
    root = tmp_path / "project"
    (root / "experiments").mkdir(parents=True)
    (root / "configs" / "agents").mkdir(parents=True)
    (root / "configs" / "agents" / "ppo.yaml").write_text("type: ppo\nbatch_size: 10\n")
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "agent.yaml").write_text("type: ppo\n")
    monkeypatch.chdir(root)
    return root


def _experiment_file(project: Path, agent: str) -> Path:
    spec = project / "experiments" / "exp.yaml"
    spec.write_text(
        f"name: demo\nenvironment: {{type: gym, level: CartPole-v1}}\nagent: {json.dumps(agent)}\nepisodes: 5\n"
    )
    return spec


@pytest.mark.parametrize(
    "reference",
    ["/etc/passwd", "/etc/hostname", "../../secret/agent.yaml", "../../secret/agent", "/proc/self/environ",
     "/dev/zero", "~/.bashrc", "../../../../../../etc/passwd", "./../../secret/agent.yaml"],
)  # fmt: skip
def test_references_outside_the_spec_places_are_refused(project: Path, reference: str) -> None:
    error = spec_error(lambda: load_spec(_experiment_file(project, reference)))
    assert error.fields == ["agent"]
    message = str(error)
    assert "root:" not in message
    assert "points outside" in message or "not found" in message


def test_references_inside_the_places_still_resolve(project: Path) -> None:
    (project / "experiments" / "agents").mkdir()
    (project / "experiments" / "agents" / "a.yaml").write_text("type: dqn\nmemory: 100\n")
    assert load_spec(_experiment_file(project, "agents/a.yaml")).agent["type"] == "dqn"  # type: ignore[union-attr]
    assert load_spec(_experiment_file(project, "../configs/agents/ppo.yaml")).agent["type"] == "ppo"  # type: ignore[union-attr]
    assert load_spec(_experiment_file(project, "ppo")).agent["type"] == "ppo"  # type: ignore[union-attr]


def test_a_reference_up_into_the_project_is_refused_with_the_path_that_works(project: Path) -> None:
    (project / "rlcloud.yaml").write_text("results: ./rlcloud-results\n")  # `rlcloud init` made the project
    (project / "agents").mkdir()
    (project / "agents" / "a.yaml").write_text("type: dqn\nmemory: 100\n")
    (project / "mine").mkdir()  # not a configs tree's folder: its references stay in it
    spec = project / "mine" / "exp.yaml"
    write = "name: demo\nenvironment: {{type: gym, level: CartPole-v1}}\nagent: {}\nepisodes: 5\n".format
    spec.write_text(write("../agents/a.yaml"))
    error = spec_error(lambda: load_spec(spec))
    assert "points outside" in str(error)
    # what a new user writes from mine/; the same file named from the project's directory is read
    assert "name it from the project's directory instead: 'agents/a.yaml'" in str(error), error
    spec.write_text(write("agents/a.yaml"))
    assert load_spec(spec).agent["type"] == "dqn"  # type: ignore[union-attr]


def test_bundled_configs_are_the_last_lookup_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no ./configs here
    spec = tmp_path / "exp.yaml"
    spec.write_text("name: demo\nenvironment: cartpole\nagent: ppo\nnetwork: mlp\nepisodes: 5\n")
    loaded = load_spec(spec)
    assert isinstance(loaded, ExperimentSpec) and loaded.agent["type"] == "ppo"


def test_a_symlink_out_of_the_spec_directory_is_refused(project: Path, tmp_path: Path) -> None:
    (project / "experiments" / "link.yaml").symlink_to(tmp_path / "secret" / "agent.yaml")
    error = spec_error(lambda: load_spec(_experiment_file(project, "link.yaml")))
    assert "points outside" in str(error)


def test_a_huge_referenced_file_gives_a_short_error(project: Path) -> None:
    (project / "experiments" / "log.txt").write_text("line of a log\n" * 300_000)  # 4 MB
    error = bounded(lambda: load_spec(_experiment_file(project, "log.txt")))
    assert error is not None and len(str(error)) < 500


@pytest.mark.parametrize("size", [100, 10_000, MAX_BYTES - 100])
def test_a_referenced_text_file_is_refused_without_quoting_it(project: Path, size: int) -> None:
    (project / "experiments" / "notes.txt").write_text(("CANARY words " * size)[:size])
    error = spec_error(lambda: load_spec(_experiment_file(project, "notes.txt")))
    assert "CANARY" not in str(error) and "not a mapping" in str(error)


_KEY = {"type": "service_account", "project_id": "p", "private_key_id": "k", "private_key": "CANARY-PEM",
        "client_email": "a@p.iam.gserviceaccount.com"}  # fmt: skip
_USER = {"type": "authorized_user", "client_id": "x", "client_secret": "CANARY", "refresh_token": "CANARY"}
_KUBECONFIG = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "c", "cluster": {"server": "https://CANARY"}}],
               "contexts": [], "current-context": "c"}  # fmt: skip
FOREIGN = {
    "service-account key": (_KEY, "credentials file"),
    "authorized user": (_USER, "credentials"),
    "key with a type field": ({"type": "ppo", "private_key": "CANARY"}, "credentials"),
    "nested token": ({"type": "ppo", "config": {"auth": {"token": "CANARY"}}}, "credentials"),
    "kubeconfig": (_KUBECONFIG, "kubeconfig"),
    "kubeconfig with a user": ({"clusters": [], "users": [{"user": {"client-key-data": "CANARY"}}]}, "credentials"),
    "cluster spec": ({"kind": "Cluster", "name": "c", "num_nodes": 2, "location": "CANARY"}, "Cluster spec"),
    "cluster spec without kind": ({"name": "c", "num_nodes": 3, "project": "CANARY"}, "Cluster spec"),
    "experiment spec": ({"kind": "Experiment", "name": "x", "environment": "CANARY"}, "Experiment spec"),
    "experiment spec without kind": ({"name": "x", "environment": {"type": "CANARY"}}, "Experiment spec"),
    "another kind": ({"kind": "Secret", "type": "ppo", "data": "CANARY"}, "kind"),
}


@pytest.mark.parametrize(("content", "says"), FOREIGN.values(), ids=FOREIGN.keys())
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_file_of_another_kind_is_refused_and_never_quoted(
    project: Path, content: dict[str, Any], says: str, suffix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "thing" + suffix
    text = json.dumps(content) if suffix == ".json" else yaml.safe_dump(content)
    (project / "experiments" / name).write_text(text)
    spec = _experiment_file(project, name)
    error = spec_error(lambda: load_spec(spec))
    assert error.fields == ["agent"] and says in str(error) and "CANARY" not in str(error)
    for argv in (["spec", "validate", str(spec)], ["spec", "show", str(spec)], ["experiment", "start", str(spec)]):
        printed = assert_refused(argv, capsys, says)
        assert "CANARY" not in printed


def test_a_cluster_file_is_still_accepted_as_the_cluster(project: Path) -> None:
    (project / "experiments" / "gpu.yaml").write_text("kind: Cluster\nname: gpu\nnum_nodes: 2\n")
    spec = project / "experiments" / "exp.yaml"
    spec.write_text(GOOD + "cluster: gpu.yaml\n")
    loaded = load_spec(spec)
    assert isinstance(loaded, ExperimentSpec) and loaded.cluster is not None


@pytest.mark.parametrize("kind", ["agent", "environment", "network", "cluster"])
def test_a_spec_referencing_itself_is_refused(project: Path, kind: str) -> None:
    spec = project / "experiments" / "exp.yaml"
    data = yaml.safe_load(GOOD)
    data[kind] = "exp.yaml"
    spec.write_text(yaml.safe_dump(data))
    error = spec_error(lambda: load_spec(spec))
    assert error.fields == [kind] and "names the spec itself" in str(error)


def test_a_cycle_of_two_specs_is_refused(project: Path) -> None:
    first, second = project / "experiments" / "a.yaml", project / "experiments" / "b.yaml"
    first.write_text(GOOD.replace("agent: {type: ppo, batch_size: 10}", "agent: b.yaml"))
    second.write_text(GOOD.replace("agent: {type: ppo, batch_size: 10}", "agent: a.yaml"))
    for spec in (first, second):
        error = bounded(lambda spec=spec: load_spec(spec))
        assert error is not None and "Experiment spec" in str(error)


@pytest.mark.parametrize("reference", ["x" * 300, "a/" * 3000, "bad\x00name", "line\nbreak", "x" * 5000 + ".yaml"])
def test_odd_reference_strings_are_errors_not_tracebacks(project: Path, reference: str) -> None:
    error = spec_error(lambda: load_spec(_experiment_file(project, reference)))
    assert "agent" in error.fields and len(str(error)) < 700


# --------------------------------------------------------------------------------- nothing executed


CALLABLES = [
    "subprocess:Popen", "subprocess:run", "subprocess.check_call", "os:system", "os.popen", "os:execv",
    "builtins:eval", "builtins:exec", "builtins:open", "builtins:__import__", "shutil:rmtree", "pty:spawn",
    "webbrowser:open", "tests.specs.test_safety:_side_effect", "rlcloud.cli:main", "builtins:type",
    "pathlib:Path", "collections:OrderedDict", "gymnasium:Env", "gymnasium.spaces:Discrete",
]  # fmt: skip

SIDE_EFFECTS: list[str] = []


def _side_effect(*args: Any, **kwargs: Any) -> None:
    """A module-level function with a visible side effect: a spec naming it must not call it."""
    SIDE_EFFECTS.append("called")


@pytest.mark.parametrize("path", CALLABLES)
@pytest.mark.parametrize("key", ["type", "class"])
def test_dotted_callables_are_refused_without_being_called(path: str, key: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    environment = {key: path, "args": ["touch", str(marker)], "command": f"touch {marker}"}
    error = spec_error(lambda: experiment_from_dict(minimal_experiment(environment=environment)))
    assert error.fields == [f"environment.{key}"], str(error)
    assert "class" in str(error)
    assert not marker.exists() and not SIDE_EFFECTS


def test_runner_validation_and_make_env_refuse_callables_too(tmp_path: Path) -> None:
    from rlcloud.runner.envs import make_env, validate_experiment

    marker = tmp_path / "pwned"
    for path in ("subprocess:Popen", "os:system", "tests.specs.test_safety:_side_effect"):
        environment = {"type": path, "args": ["touch", str(marker)]}
        for check in (
            lambda env=environment: validate_experiment({"environment": env, "agent": {"type": "ppo"}}),
            lambda env=environment: validate_experiment(
                {"environment": env, "agent": {"type": "ppo"}}, import_user_classes=True
            ),
            lambda env=environment: make_env(env),
        ):
            assert "environment.type" in spec_error(check).fields
    assert not marker.exists() and not SIDE_EFFECTS


def test_dotted_agent_network_and_layer_types_must_be_tensorforce_classes() -> None:
    from rlcloud.runner.envs import validate_experiment

    base = {"environment": {"type": "gym", "level": "CartPole-v1"}, "agent": {"type": "ppo"}}
    cases = [
        ({"agent": {"type": "subprocess.Popen"}}, "agent.type"),
        ({"agent": {"type": "os.system"}}, "agent.type"),
        ({"network": {"type": "subprocess.Popen"}}, "network.type"),
        ({"network": [{"type": "os.system"}]}, "network[0].type"),
        ({"agent": {"type": "ppo", "network": [{"type": "builtins.eval"}]}}, "agent.network[0].type"),
    ]
    for changes, field in cases:
        assert field in spec_error(lambda c=changes: validate_experiment({**base, **c})).fields
    assert (
        "agent.type" in spec_error(lambda: experiment_from_dict(minimal_experiment(agent={"type": "os.system"}))).fields
    )


@pytest.mark.parametrize(
    "path",
    ["antigravity:Env", "this:Env", "idlelib.idle:Env", "turtledemo.__main__:Env", "pip.__main__:Env",
     "unittest.__main__.Env", "__main__:Env", "os;system:X", "os:system()", "a" * 400 + ":B", "os:", ":Env",
     "os.path/../x:Y"],
)  # fmt: skip
def test_modules_that_act_on_import_and_malformed_paths_are_refused_unimported(path: str) -> None:
    import sys

    before = set(sys.modules)
    error = spec_error(lambda: experiment_from_dict(minimal_experiment(environment={"type": path})))
    assert error.fields == ["environment.type"]
    assert not {"antigravity", "this", "idlelib.idle", "turtledemo.__main__", "pip.__main__"} & (
        set(sys.modules) - before
    )


def test_a_user_class_not_installed_here_is_left_to_the_runner() -> None:
    spec = experiment_from_dict(minimal_experiment(environment={"type": "not_installed_pkg.envs:Maze"}))
    assert spec.environment["type"] == "not_installed_pkg.envs:Maze"
    from rlcloud.runner.envs import validate_experiment

    error = spec_error(lambda: validate_experiment(spec, import_user_classes=True))
    assert "cannot import" in str(error)


def test_real_environment_classes_are_accepted() -> None:
    spec = experiment_from_dict(
        minimal_experiment(environment={"type": "gymnasium.envs.classic_control.cartpole:CartPoleEnv"})
    )
    assert spec.environment["type"].endswith("CartPoleEnv")


CODE = [
    ({"agent": {"type": "ppo", "network": [{"type": "function", "function": "x * 2"}]}}, "agent.network[0].function"),
    ({"network": [{"type": "dense", "size": 8}, {"type": "function", "function": "__import__('os').system('id')"}]},
     "network[1].function"),
    ({"network": {"type": "layered", "layers": [{"type": "default", "function": "x"}]}}, "network.layers[0].function"),
    ({"environment": {"type": "ale", "level": "Pong", "reward_shaping": "reward * 2"}}, "environment.reward_shaping"),
    ({"agent": {"type": "ppo", "reward_processing": "__import__('os').system('id')"}}, "agent.reward_processing"),
    ({"agent": {"type": "ppo", "state_preprocessing": ["lambda x: x"]}}, "agent.state_preprocessing[0]"),
    ({"agent": {"type": "ppo", "baseline": {"network": {"type": "function", "function": "open('/etc/passwd')"}}}},
     "agent.baseline.network.function"),
]  # fmt: skip


@pytest.mark.parametrize(("changes", "field"), CODE)
def test_strings_tensorforce_would_evaluate_are_refused(changes: dict[str, Any], field: str) -> None:
    error = spec_error(lambda: experiment_from_dict(minimal_experiment(**changes)))
    assert field in error.fields, str(error)
    name = next(iter(changes))
    assert next(p for p, _ in code_strings(changes[name], name)) == field


def test_dotted_and_code_strings_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "exp.yaml"
    marker = tmp_path / "pwned"
    bodies = [
        f'environment: {{type: "subprocess:Popen", args: [touch, "{marker}"]}}',
        'environment: {class: "os.system", command: "id"}',
        'environment: {type: "builtins:eval", source: "1"}',
        'environment: {type: gym, level: CartPole-v1}\nnetwork: [{type: function, function: "x"}]',
    ]
    for body in bodies:
        spec.write_text("name: demo\nagent: {type: ppo}\nepisodes: 5\n" + body + "\n")
        for argv in (["spec", "validate", str(spec)], ["spec", "show", str(spec)]):
            assert_refused(argv, capsys)
        assert_refused(["experiment", "run", str(spec), "--results", str(tmp_path / "r")], capsys)
        assert_refused(["experiment", "start", str(spec), "--results", str(tmp_path / "r")], capsys)
    assert not marker.exists() and not (tmp_path / "r").exists()


# ----------------------------------------------------------------------------------------- --results


@pytest.mark.parametrize(
    ("results", "says"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("file://relative/dir", "absolute path"),
        ("s3://bucket/x", "unsupported scheme"),
        ("http://host/x", "unsupported scheme"),
        ("gs://", "bucket"),
        ("gs://Bad_Bucket!", "GCS"),
        ("/proc", "pseudo file system"),
        ("/proc/self/cwd", "pseudo file system"),
        ("/sys/kernel", "pseudo file system"),
        ("/dev/shm/x", "pseudo file system"),
        ("x" * 300, "255 bytes"),
        ("/tmp/" + "y" * 256 + "/z", "255 bytes"),
        ("/" + "a/" * 3000, "4096"),
        ("bad\x00path", "NUL"),
    ],
)
def test_bad_results_roots_are_refused(results: str, says: str) -> None:
    from rlcloud.results import check_results_root

    error = spec_error(lambda: check_results_root(results))
    assert error.fields == ["results"] and says in str(error), str(error)


def test_results_that_are_files_are_refused(tmp_path: Path) -> None:
    from rlcloud.results import check_results_root

    (tmp_path / "file").write_text("x")
    for root in (tmp_path / "file", tmp_path / "file" / "below"):
        assert "existing file" in str(spec_error(lambda root=root: check_results_root(str(root))))
    (tmp_path / "link").symlink_to("/proc/self")
    assert "pseudo" in str(spec_error(lambda: check_results_root(str(tmp_path / "link"))))


def test_file_urls_mean_their_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rlcloud.experiment import Experiment
    from rlcloud.results import check_results_root

    monkeypatch.chdir(tmp_path)
    assert check_results_root(f"file://{tmp_path}/out") == f"{tmp_path}/out"
    assert check_results_root("gs://bucket/prefix") == "gs://bucket/prefix"
    exp = Experiment(ExperimentSpec.from_dict(minimal_experiment()), results=f"file://{tmp_path}/out")
    assert exp.location == f"{tmp_path}/out/cartpole"
    assert "file:" not in exp.location


@pytest.mark.parametrize("results", ["", "file://rel", "/proc/self", "x" * 300, "s3://b"])
def test_bad_results_through_the_cli(
    results: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "exp.yaml"
    spec.write_text(GOOD)
    (tmp_path / "afile").write_text("")
    for argv in (
        ["experiment", "start", str(spec), "--results", results],
        ["experiment", "run", str(spec), "--results", results],
        ["experiment", "start", str(spec), "--results", "afile"],
        ["experiment", "list", "--results", results],
        ["init", "--results", results, "--dir", str(tmp_path / "proj")],
    ):
        assert_refused(argv, capsys, "results")
    assert not (tmp_path / "rlcloud-results").exists() and not (tmp_path / "file:").exists()


# -------------------------------------------------------------------------------------- credentials


def _key(path: Path, private_key: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "my-rl-project",
                "private_key_id": "0" * 40,
                "private_key": private_key,
                "client_email": "sa@my-rl-project.iam.gserviceaccount.com",
                "token_uri": "https://oauth2.googleapis.com/token",
            }
        )
    )
    return path


@pytest.mark.parametrize(
    "private_key",
    ["-----BEGIN PRIVATE KEY-----\nCANARY\n-----END PRIVATE KEY-----\n", "CANARY", "",
     "-----BEGIN RSA PRIVATE KEY-----\nQ0FOQVJZ\n-----END RSA PRIVATE KEY-----\n"],
)  # fmt: skip
def test_a_broken_private_key_fails_at_init_not_later(
    private_key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = _key(tmp_path / "key.json", private_key)
    printed = assert_refused(["init", "--credentials", str(key), "--dir", str(tmp_path / "p")], capsys, "private_key")
    assert "CANARY" not in printed and "Q0FOQVJZ" not in printed
    # a key broken after init: commands that load the project config refuse it the same way
    (tmp_path / "p2").mkdir()
    (tmp_path / "p2" / "rlcloud.yaml").write_text(f"project: my-rl-project\ncredentials: {key}\n")
    monkeypatch.chdir(tmp_path / "p2")
    printed = assert_refused(["cluster", "list"], capsys, "private_key")
    assert "CANARY" not in printed and "Q0FOQVJZ" not in printed
