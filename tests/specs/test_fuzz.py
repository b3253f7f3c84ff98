"""Fuzzing the spec loader (hypothesis): whatever the text, the result is a spec or a SpecError, never another
exception, in bounded time and memory.

Inputs are at most a few kilobytes (the interesting failures, alias bombs and deep nesting, are small) and
come in four shapes: YAML-ish token soup, random text, valid specs with random values put into their
fields, and alias chains of random depth and fan-out. The bound: each example under 64 MiB of Python
allocations (an alias bomb used to run for minutes, growing as it went). No time limit: the session's
hypothesis profile (tests/conftest.py) has no deadline, since no test may depend on the machine's speed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, configuration, given, settings
from hypothesis import strategies as st

from rlcloud.cli import main
from rlcloud.errors import SpecError
from rlcloud.specs.loading import load_spec_text

# Hypothesis caches into ./.hypothesis from its first test on: keep the working directory untouched.
configuration.set_hypothesis_home_dir(tempfile.mkdtemp(prefix="rlcloud-hypothesis-"))

#: Largest input tried, in characters.
MAX_INPUT = 4096
#: Most memory one load may allocate (tracemalloc's peak).
MAX_MEMORY = 64 * 2**20

FUZZ = settings(
    max_examples=150,
    database=None,  # nothing written into the working directory
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TOKENS = [
    "[", "]", "{", "}", ": ", ",", "- ", "&a ", "*a", "&b ", "*b", "&c ", "*c", "!!int ", "!!float ", "!!binary ",
    "!!timestamp ", "!!python/object:os.system ", "!!map ", "!!seq ", "? ", "<<: ", "\n", "  ", "'", '"', "#", "|",
    ">", "name", "agent", "environment", "episodes", "network", "cluster", "kind", "Experiment", "Cluster", "type",
    "subprocess:Popen", "os.system", "function", "1e-3", "0x1f", "0o17", "1:30", "9" * 50, "true", "null", "~",
    "%YAML 1.2\n", "---\n", "...\n", "\t", "é", "\x00", "\ufeff", "2020-13-45", ".inf", ".nan", "-", "../",
    "/etc/passwd", "!!map ", "!!str ", "!!seq ", "!!null ", "!!bool ", "!!set ", "!!omap ", "!!pairs ",
]  # fmt: skip

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=25,
)

FIELDS = [
    "name", "environment", "agent", "network", "episodes", "total_timesteps", "max_timesteps_per_episode",
    "repeat_actions", "seed", "run_mode", "num_workers", "num_parameter_servers", "execution", "saver_frequency",
    "summary_frequency", "evaluation", "resources", "results", "cluster", "deterministic", "kind",
]  # fmt: skip

BASE = {
    "name": "demo",
    "environment": {"type": "gym", "level": "CartPole-v1"},
    "agent": {"type": "ppo", "batch_size": 10},
    "episodes": 5,
}


@pytest.fixture(scope="module")
def empty_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where file references resolve: nothing there, so only the text itself is loaded."""
    return tmp_path_factory.mktemp("fuzz")


def load_bounded(text: str, base_dir: Path) -> None:
    """Load ``text``: a spec or a SpecError with a short message; anything else fails the example."""
    assert len(text) <= MAX_INPUT * 4
    tracemalloc.start()
    try:
        load_spec_text(text, base_dir=base_dir, source="fuzz.yaml")
    except SpecError as exc:
        message = str(exc)
        assert message and len(message) < 20_000
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < MAX_MEMORY, f"peak {peak / 2**20:.0f} MiB"


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=300).map("".join))
def test_token_soup(empty_dir: Path, text: str) -> None:
    load_bounded(text[:MAX_INPUT], empty_dir)


@FUZZ
@given(st.text(max_size=MAX_INPUT))
def test_random_text(empty_dir: Path, text: str) -> None:
    load_bounded(text, empty_dir)


@FUZZ
@given(st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES, max_size=6), st.booleans())
def test_valid_specs_with_random_values(empty_dir: Path, changes: dict[str, Any], as_json: bool) -> None:
    data = {**BASE, **changes}
    text = json.dumps(data) if as_json else yaml.safe_dump(data)
    load_bounded(text, empty_dir)


@pytest.mark.processes
@FUZZ
@given(
    st.integers(min_value=1, max_value=40),
    st.integers(min_value=1, max_value=12),
    st.sampled_from(["[{refs}]", "{{a: [{refs}]}}", "{{<<: {first}, b: [{refs}]}}"]),
    st.booleans(),
)
def test_alias_chains(empty_dir: Path, levels: int, fan: int, shape: str, in_spec: bool) -> None:
    lines = ["x0: &x0 {k: [lol, lol]}"]
    for i in range(1, levels):
        refs = ", ".join([f"*x{i - 1}"] * fan)
        lines.append(f"x{i}: &x{i} " + shape.format(refs=refs, first=f"*x{i - 1}"))
    text = "\n".join(lines) + "\n"
    if in_spec:
        text = yaml.safe_dump(BASE) + text
    load_bounded(text, empty_dir)


@settings(FUZZ, max_examples=60)
@given(st.lists(st.sampled_from(TOKENS), max_size=200).map("".join))
def test_cli_exits_0_or_2_without_a_traceback(empty_dir: Path, text: str) -> None:
    path = empty_dir / "spec.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        codes = [main(["spec", "validate", str(path)]), main(["spec", "show", str(path)])]
    assert set(codes) <= {0, 2}, codes
    assert "Traceback" not in out.getvalue() + err.getvalue()


# --------------------------------------------------------------------- stored records are input (issue 25)

#: Every reader of a run's stored records, by the file it reads.
RECORD_FILES = ["spec.yaml", "history.jsonl", "progress.json", "metrics.jsonl", "evaluation.jsonl"]


def read_records_bounded(root: Path, name: str, text: str) -> None:
    """Store ``text`` as ``name`` of a run and read it back with rlcloud's reader of that record: a value or a
    RecordError naming the file, in bounded memory; anything else fails the example."""
    from rlcloud.errors import RecordError
    from rlcloud.record import read_history, read_record
    from rlcloud.storage.client import read_evaluation, read_metrics, read_progress
    from rlcloud.storage.local import LocalStore

    store = LocalStore(root)
    store.write_bytes(name, text.encode("utf-8", "surrogatepass"))
    reader = {
        "spec.yaml": read_record,
        "history.jsonl": read_history,
        "progress.json": read_progress,
        "metrics.jsonl": read_metrics,
        "evaluation.jsonl": read_evaluation,
    }[name]
    tracemalloc.start()
    try:
        reader(store)
    except RecordError as exc:
        message = str(exc)
        assert name in message and len(message) < 2_000, message
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < MAX_MEMORY, f"peak {peak / 2**20:.0f} MiB"


@settings(FUZZ, max_examples=60)
@given(st.sampled_from(RECORD_FILES), st.lists(st.sampled_from(TOKENS), max_size=300).map("".join))
def test_stored_records_token_soup(empty_dir: Path, name: str, text: str) -> None:
    read_records_bounded(empty_dir / "run", name, text)


@settings(FUZZ, max_examples=60)
@given(st.sampled_from(RECORD_FILES), st.lists(JSON_VALUES, max_size=5))
def test_stored_records_of_random_json(empty_dir: Path, name: str, values: list[Any]) -> None:
    text = "\n".join(json.dumps(v) for v in values) if name.endswith(".jsonl") else json.dumps(values[:1])
    read_records_bounded(empty_dir / "run", name, text)


@settings(FUZZ, max_examples=30)
@given(st.integers(min_value=1, max_value=40), st.integers(min_value=1, max_value=12))
def test_stored_spec_of_record_alias_chains(empty_dir: Path, levels: int, fan: int) -> None:
    lines = ["x0: &x0 {k: [lol, lol]}"]
    for i in range(1, levels):
        lines.append(f"x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * fan) + "]")
    read_records_bounded(empty_dir / "run", "spec.yaml", yaml.safe_dump(BASE) + "\n".join(lines) + "\n")


#: Hostile records, one of each kind the issue names and their variants.
HOSTILE_RECORDS = {
    "alias bomb": "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)),
    "alias cycle": "&a [*a]\n",
    "deep brackets": "[" * 3000 + "]" * 3000,
    "deep mappings": '{"a":' * 3000 + "1" + "}" * 3000,
    "long number": "9" * 5000,
    "long number in a mapping": '{"episode": ' + "9" * 5000 + "}",
    "a list": "[1, 2, 3]",
    "huge": "x" * (300 * 1024),
}


@pytest.mark.parametrize("name", RECORD_FILES)
@pytest.mark.parametrize("kind", sorted(HOSTILE_RECORDS))
def test_hostile_stored_records_are_refused_or_skipped_naming_the_file(tmp_path: Path, name: str, kind: str) -> None:
    text = HOSTILE_RECORDS[kind]
    if name.endswith(".jsonl"):  # one hostile line among good ones: the good ones are kept
        text = '{"episode": 1, "return": 1.0}\n' + text + '\n{"episode": 2, "return": 2.0}\n'
    read_records_bounded(tmp_path / "run", name, text)
    if name == "metrics.jsonl":
        from rlcloud.storage.client import read_metrics
        from rlcloud.storage.local import LocalStore

        assert [r["episode"] for r in read_metrics(LocalStore(tmp_path / "run"))][-1] == 2


@pytest.mark.parametrize("kind", sorted(HOSTILE_RECORDS))
def test_hostile_local_state_records_never_crash_status(tmp_path: Path, kind: str) -> None:
    """The local backend's own records (state.json, a runner's record, progress.json, sweep.yaml) are read
    the same way: a RecordError naming the file, or the record skipped; never a traceback."""
    from rlcloud.errors import RecordError
    from rlcloud.local import LocalBackend

    run = tmp_path / "results" / "hostile" / ".rlcloud-local"
    run.mkdir(parents=True)
    backend = LocalBackend(str(tmp_path / "results"))
    (run / "state.json").write_text(HOSTILE_RECORDS[kind])
    with pytest.raises(RecordError, match=r"state\.json"):
        backend.status("hostile")
    good = {"name": "hostile", "roles": [{"role": "single", "index": 0, "pid": 1, "started": 0}]}
    (run / "state.json").write_text(json.dumps(good))
    (run / "single-0.runner").write_text(HOSTILE_RECORDS[kind])
    (run.parent / "progress.json").write_text(HOSTILE_RECORDS[kind])
    status = backend.status("hostile")
    assert status.state != "running" and status.progress == {}
    sweep = tmp_path / "results" / "sweep" / ".rlcloud-sweep"
    sweep.mkdir(parents=True)
    (sweep / "state.json").write_text(json.dumps({"name": "sweep", "location": str(tmp_path)}))
    (sweep / "sweep.yaml").write_text(HOSTILE_RECORDS[kind])
    with pytest.raises((RecordError, SpecError), match=r"sweep\.yaml"):
        backend.attach_sweep("sweep")


def test_a_record_that_is_a_link_out_of_the_run_is_not_followed(tmp_path: Path) -> None:
    from rlcloud.errors import RecordError
    from rlcloud.local import LocalBackend

    run = tmp_path / "results" / "linked" / ".rlcloud-local"
    run.mkdir(parents=True)
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"name": "linked", "roles": []}))
    (run / "state.json").symlink_to(secret)
    with pytest.raises(RecordError, match="link"):
        LocalBackend(str(tmp_path / "results")).status("linked")
    fifo = tmp_path / "results" / "linked" / "progress.json"
    os.mkfifo(fifo)
    (run / "state.json").unlink()
    (run / "state.json").write_text(json.dumps({"name": "linked", "roles": []}))
    assert LocalBackend(str(tmp_path / "results")).status("linked").progress == {}  # a FIFO never blocks


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cartpole_ppo.yaml"


@pytest.fixture(scope="module")
def sweep_cli_loaded() -> None:
    """One sweep validation first: its imports (seconds under tracemalloc) are not an example's time."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(["sweep", "validate", str(EXAMPLE)])


@settings(FUZZ, max_examples=40)
@given(st.lists(st.sampled_from([t for t in TOKENS if "," not in t]), max_size=120).map("".join), st.booleans())
def test_grid_and_set_values_exit_0_or_2_without_a_traceback(sweep_cli_loaded: None, text: str, grid: bool) -> None:
    """--grid values go through the bounded reader --set uses: whatever the text, a sweep or exit 2."""
    flag = ["--grid", f"agent.batch_size={text}"] if grid else ["--set", f"agent.batch_size={text}"]
    out, err = io.StringIO(), io.StringIO()
    tracemalloc.start()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["sweep", "validate", str(EXAMPLE), *flag])
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert code in (0, 2), err.getvalue()
    assert "Traceback" not in out.getvalue() + err.getvalue()
    assert peak < MAX_MEMORY


def test_no_hypothesis_test_depends_on_the_machines_speed() -> None:
    # the session's profile (tests/conftest.py) has no deadline, and neither has any settings here or elsewhere
    assert settings.default.deadline is None
    assert FUZZ.deadline is None
    tests = Path(__file__).resolve().parents[1]
    timed_settings = "deadline=" + "timedelta"  # split: this line is no such setting
    timed = [str(p) for p in tests.rglob("*.py") if timed_settings in p.read_text(encoding="utf-8")]
    assert timed == []
