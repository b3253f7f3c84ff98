"""The package's shape: imports point one way (no cycle, function-level imports included), each concept is
defined in one place, and the public surface is what ``rlcloud.__all__`` says."""

from __future__ import annotations

import ast
import functools
import importlib
import os
import pkgutil
import re
from pathlib import Path

import rlcloud

SRC = Path(rlcloud.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in SRC.rglob("*.py")}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The rlcloud module an import refers to (``from rlcloud.k8s import X`` -> rlcloud.k8s)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _in_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def import_graph() -> dict[str, set[str]]:
    """Module -> the rlcloud modules it imports anywhere (module level or inside functions), except under
    ``if TYPE_CHECKING:``. ``from pkg import sub`` counts as importing ``pkg.sub`` when it is a module.
    A fresh copy of one parse per session (three tests read it: each parse is seconds on a busy machine)."""
    return {name: set(edges) for name, edges in _parsed_import_graph().items()}


@functools.cache
def _parsed_import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        edges: set[str] = set()
        for node in ast.walk(tree):
            if _in_type_checking(node, parents):
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            for target in targets:
                if target.startswith("rlcloud"):
                    found = _resolve(target, modules)
                    if found and found != name:
                        edges.add(found)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _package_of(module: str) -> str:
    """The top-level unit a module belongs to: ``rlcloud.local.sweeper`` -> ``rlcloud.local``."""
    return ".".join(module.split(".")[:2])


def test_no_import_cycles() -> None:
    graph = import_graph()
    # edges from a package's __init__ to its own submodules are re-exports, not dependencies of the package
    for name, edges in graph.items():
        if _modules()[name].name == "__init__.py":
            graph[name] = {e for e in edges if not e.startswith(name + ".")}
    assert _cycles(graph) == []


def test_no_import_cycles_between_packages() -> None:
    # A loop through two packages (runner.main -> local.sweeper while local.supervisor -> runner.lifeline)
    # has no module-level cycle, yet neither package can be understood, moved or tested without the other.
    packages: dict[str, set[str]] = {}
    for name, edges in import_graph().items():
        mine = _package_of(name)
        packages.setdefault(mine, set()).update(p for p in map(_package_of, edges) if p != mine)
    assert _cycles(packages) == []


# Layers, lowest first: a module may import its own layer and those below, never above (CONTRIBUTING.md).
LAYERS: list[tuple[str, ...]] = [
    ("rlcloud.errors", "rlcloud.logsafety", "rlcloud.roles", "rlcloud.timestamps", "rlcloud.waiting"),
    (
        "rlcloud.specs",
        "rlcloud.config",
        "rlcloud.results",
        "rlcloud.layout",
        "rlcloud.backend",
        "rlcloud.stored",
        "rlcloud.runenv",
        "rlcloud.budget",
        "rlcloud.display",
    ),
    ("rlcloud.storage", "rlcloud.record", "rlcloud.plotting", "rlcloud.intervals", "rlcloud.codepack"),
    ("rlcloud.gke", "rlcloud.k8s", "rlcloud.runner", "rlcloud.local"),
    (
        "rlcloud.cluster",
        "rlcloud.experiment",
        "rlcloud.sweep",
        "rlcloud.comparison",
        "rlcloud.validation",
        "rlcloud.smoke",
        "rlcloud.policies",
    ),
    ("rlcloud.cli", "rlcloud.__main__"),
]


def _layer(module: str) -> int | None:
    for level, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return level
    return None


def test_imports_point_down() -> None:
    upward = []
    for name, edges in import_graph().items():
        mine = _layer(name)
        if mine is None:
            continue
        for target in edges:
            theirs = _layer(target)
            if theirs is not None and theirs > mine:
                upward.append(f"{name} -> {target}")
    assert upward == []


def test_every_module_has_a_layer() -> None:
    assert [m for m in _modules() if m != "rlcloud" and _layer(m) is None] == []


def test_every_module_imports() -> None:
    # Every module is importable on its own (no hidden dependency on import order).
    for info in pkgutil.walk_packages([str(SRC)], prefix="rlcloud."):
        if info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)


# -------------------------------------------------------------------------------- one place per concept


def _definitions(pattern: str) -> list[str]:
    """``file:line`` of every line in src/rlcloud matching ``pattern``."""
    rx = re.compile(pattern)
    hits = []
    for path in sorted(SRC.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if rx.search(line):
                hits.append(f"{path.relative_to(SRC)}:{number}")
    return hits


def test_each_concept_is_defined_once() -> None:
    # where results live
    assert _definitions(r"^def results_root\(") == ["results.py:" + _line("results.py", "def results_root(")]
    assert len(_definitions(r"^def results_location\(")) == 1
    assert len(_definitions(r"rlcloud-results\"")) == 1  # the default root, spelled once
    assert len(_definitions(r"\.cache.*rlcloud.*local|\"rlcloud\" / \"local\"")) == 1
    # the role vocabulary
    assert [d for d in _definitions(r"_LEARNER_ROLES|_MAIN_ROLES|_ROLE_MODES") if not d.startswith("roles.py")] == []
    assert len(_definitions(r"= \"env-server\"")) == 1
    # RFC 3339 timestamps from Kubernetes and Google APIs: read and written in one module
    assert {d.split(":")[0] for d in _definitions(r"fromisoformat\(|%dT%H:%M:%SZ")} == {"timestamps.py"}
    # waiting and retrying: one module owns the pauses; each caller states its deadline and what is retryable
    for name in ("poll_until", "retry", "sleep_until"):
        assert _definitions(rf"^def {name}\(") == ["waiting.py:" + _line("waiting.py", f"def {name}(")]
    assert _definitions(r"for attempt in range\(") == []  # a hand-made retry loop: use waiting.retry
    sleeps = {d.split(":")[0] for d in _definitions(r"time\.sleep\(") if not d.startswith("waiting.py")}
    assert sleeps <= {
        # not waits for a condition: a log follower's pause between reads (local), a scheduler's tick
        "local/backend.py",
        "local/sweeper.py",
        # not a wait: the runner's stand-in for a costly environment step
        "runner/costly.py",
        # a follower's short pause between reads of a growing file
        "storage/logs.py",
        # the CLI's refresh of a live view
        "cli/progress.py",
        "cli/sweep.py",
    }, sleeps
    # GKE clusters are resolved (project, location, name or spec file) by the facade alone: the CLI holds no
    # cluster handle of its own
    assert [d for d in _definitions(r"GkeCluster|GkeProject|gke\.cluster|gke\.project") if d.startswith("cli/")] == []
    # ...and one cluster has one handle: the facade passes settings to its GkeCluster, never writes its state
    assert _definitions(r"\b_?handle\.[a-z_]+ = ") == []
    # the facade and the CLI read rlcloud.yaml; GKE and local code are handed their settings (issue 39)
    assert [d for d in _definitions(r"load_project_config\(") if d.startswith(("gke/", "local/"))] == []
    # the doctor is built in one place (rlcloud.gke.doctor.doctor_for): ``rlcloud doctor`` and a cluster's checkup
    assert _definitions(r"\bDoctor\(") == ["gke/doctor.py:" + _line("gke/doctor.py", "    return Doctor(")]
    # the "role-index | line" log format
    assert len(_definitions(r"f\"\{[a-z_.]+\} \| \{")) == 1


# What one run keeps under its location (docs/contracts.md, "Results layout"): spelled in layout.py only.
LAYOUT_NAMES = (
    "progress.json",
    "metrics.jsonl",
    "evaluation.jsonl",
    "history.jsonl",
    "checkpoints",
    "checkpoints/LATEST",
    "summaries",
    "tensorforce-summaries",
    "returns.png",
    "curves",
)


def test_the_results_layout_is_spelled_once() -> None:
    outside = lambda pattern: [d for d in _definitions(pattern) if d.split(":")[0] != "layout.py"]  # noqa: E731
    # a name as a string of its own or the end of a path (``/ "LATEST"``, f"{root}/progress.json")
    for name in LAYOUT_NAMES:
        assert outside(rf"[\"'/]{re.escape(name)}[\"']") == [], name
    assert outside(r"/ \"LATEST\"|[\"']logs/[\"{]") == []  # a checkpoint's pointer, a role's log
    # the progress state a sweep's early-stopping rule leaves (the trial state is "stopped early")
    assert outside(r"[\"']stopped-early[\"']") == []
    # a location under another (a sweep's trial, a root's experiment)
    assert outside(r"rstrip\(\"/\"\) \+ \"/\" \+") == []


def _aliases_and_raw_reads(tree: ast.AST) -> list[str]:
    """What reads the layout around its names: a layout name bound again under another (``from rlcloud.layout
    import X as Y``, ``Y = X``, ``Y = layout.X``), and a progress record read by key (``progress.get("state")``,
    ``prog["timestep"]``: a string key of what is called ``progress``, ``prog`` or ``<something>_progress``)."""
    import rlcloud.layout as layout

    froms = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "rlcloud.layout"]
    found = [f"{a.name} as {a.asname}" for n in froms for a in n.names if a.asname not in (None, a.name)]
    names = {n for n in vars(layout) if n.isupper()} | set(layout.__all__)
    refs = {f"{m}.{n}" for m in ("layout", "rlcloud.layout") for n in names}
    refs |= {a.name for n in froms for a in n.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and ast.unparse(node.value) in refs:
            found.append(ast.unparse(node))
        target = key = None
        call = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
        if call and node.args:
            target, key = node.func.value, node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            target, key = node.value, node.slice
        named = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
        if (named in ("progress", "prog") or named.endswith("_progress")) and isinstance(key, ast.Constant):
            found.append(ast.unparse(node))
    return found


def test_layout_names_have_no_alias_and_progress_is_read_by_its_fields() -> None:
    # one name per file of a run (SPEC, not a SPEC_FILE beside it), and one reader of progress.json's fields
    # (ProgressRecord's: a field gets its type and its meaning in one place)
    found = [
        f"{path.relative_to(SRC)}: {text}"
        for path in sorted(SRC.rglob("*.py"))
        if path != SRC / "layout.py"
        for text in _aliases_and_raw_reads(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert found == []


def _line(relative: str, text: str) -> str:
    for number, line in enumerate((SRC / relative).read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith(text):
            return str(number)
    raise AssertionError(f"{text!r} not in {relative}")


# --------------------------------------------------------------------------------------- public surface


def test_all_is_sorted_and_complete() -> None:
    assert rlcloud.__all__ == sorted(rlcloud.__all__)
    for name in rlcloud.__all__:
        assert getattr(rlcloud, name) is not None
    public = {n for n in dir(rlcloud) if not n.startswith("_") and n not in ("TYPE_CHECKING",)}
    # every public name is in __all__ (submodules loaded by other tests are attributes, not API)
    modules = {n for n in public if type(getattr(rlcloud, n)).__name__ == "module"}
    assert public - modules - {"annotations"} <= set(rlcloud.__all__)


def test_the_old_timeout_error_name_still_works_and_says_so() -> None:
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = rlcloud.TimeoutError
    assert old is rlcloud.WaitTimeoutError
    assert [w.category for w in caught] == [DeprecationWarning]


def test_the_suite_runs_outside_the_repository_and_home(tmp_path_factory: object) -> None:
    # conftest.py moved the session into a fresh directory: a results folder left by ./scripts/demo, or the
    # user's ~/.cache and project config, cannot leak into any test
    cwd = Path.cwd().resolve()
    repo = SRC.parent.parent.resolve()
    assert repo not in (cwd, *cwd.parents)
    assert Path.home().resolve() != Path(os.path.expanduser("~root")).resolve() or "rlcloud-tests-" in str(Path.home())
    assert "rlcloud-tests-" in os.environ["XDG_CACHE_HOME"]


def test_no_test_module_imports_another() -> None:
    # shared helpers live in tests/support/, shared fixtures in a conftest (CONTRIBUTING.md): a test module that
    # imports another runs the other's module-level code and ties the two together
    tests = SRC.parent.parent / "tests"
    found = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import | ast.ImportFrom) else []
            if any(re.search(r"(^|\.)(test_\w+|conftest)$", name) for name in names if name.startswith("tests")):
                found.append(f"{path.relative_to(tests)}:{node.lineno}")
    assert found == []


# issue 39's habits: a module a reader can hold, a function a reader can see whole (ruff's C901 and
# PLR0915 in pyproject keep the branches and statements of each function in bounds)
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80


def test_every_module_is_under_800_lines() -> None:
    sizes = {str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines()) for p in SRC.rglob("*.py")}
    long = {name: n for name, n in sizes.items() if n >= MAX_MODULE_LINES}
    assert not long, f"modules of {MAX_MODULE_LINES} lines or more (split them by concern): {long}"


def test_every_function_is_at_most_80_lines() -> None:
    long = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({length} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (name their steps): {long}"
