"""The package's shape: imports flow one way, no cycles, the public API is ``__all__``."""

from __future__ import annotations

import ast
import importlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_opid

PACKAGE = Path(pytest_opid.__file__).parent

#: Layers, lowest first: a module may import its own layer's modules and lower layers only.
LAYERS = (
    (
        "core",
        (
            "errors",
            "text",
            "gc_pause",
            "time_limits",
            "model",
            "topology",
            "io",
            "result",
            "engine_rules",
            "engines",
            "inputs",
            "comparison",
            "restore",
            "snapshot_locations",
        ),
    ),
    ("engines", ("flink", "spark")),
    ("top", ("render", "plugin", "strategies", "cli", "__main__")),
)


def _modules() -> dict[str, Path]:
    found = {"pytest_opid": PACKAGE / "__init__.py"}
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="pytest_opid."):
        spec = importlib.util.find_spec(info.name)
        assert spec is not None and spec.origin is not None
        found[info.name] = Path(spec.origin)
    return found


def _imports(path: Path, types_too: bool = False) -> set[str]:
    """Every pytest_opid module a file imports, wherever in the file (inside functions too),
    except for type checking unless ``types_too``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if types_too:
            break
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return {n for n in names if n.startswith("pytest_opid")}


MODULES = _modules()
GRAPH = {
    name: {i for i in _imports(path) if i in MODULES and i != name}
    for name, path in MODULES.items()
}
#: GRAPH with the imports made for type checking only: no cycle either, so that no two modules
#: need each other even to be read.
ALL_IMPORTS = {
    name: {i for i in _imports(path, types_too=True) if i in MODULES and i != name}
    for name, path in MODULES.items()
}


def _top(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(name: str) -> int:
    top = _top(name)
    for index, (_, members) in enumerate(LAYERS):
        if top in members:
            return index
    raise AssertionError(f"{name} belongs to no layer; add it to LAYERS")


@pytest.mark.parametrize("name", sorted(n for n in MODULES if not n.endswith("__main__")))
def test_every_module_imports(name):
    importlib.import_module(name)


def test_no_import_cycle():
    """Depth-first search with an explicit stack; a back edge is a cycle. Imports for type
    checking count: the public API's own (``pytest_opid/__init__``'s) included."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in ALL_IMPORTS:
        if start in state:
            continue
        stack = [(start, iter(sorted(ALL_IMPORTS[start])))]
        path = [start]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                state[node] = 2
                continue
            if state.get(child) == 1:
                cycle = [*path[path.index(child) :], child]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if child not in state:
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(ALL_IMPORTS[child]))))


def test_imports_flow_down_the_layers():
    wrong = []
    for name, targets in GRAPH.items():
        if name == "pytest_opid":
            continue  # the public API re-exports from every layer (lazily)
        for target in targets:
            if target == "pytest_opid":
                if name not in ("pytest_opid.cli",):  # the CLI prints __version__
                    wrong.append(f"{name} -> {target}")
                continue
            below = _layer(target) < _layer(name)
            same = _layer(target) == _layer(name)
            if below:
                continue
            if same and (_top(name) == _top(target) or LAYERS[_layer(name)][0] == "core"):
                continue
            if same and LAYERS[_layer(name)][0] == "top":
                continue
            wrong.append(f"{name} -> {target}")
    assert wrong == []


def test_the_core_names_no_engine_module():
    """No core module is named for an engine or imports one, not even for its types."""
    core = LAYERS[0][1]
    named = [n for n in MODULES if _top(n) in core and ("spark" in n or "flink" in n)]
    imports = [
        f"{n} -> {t}"
        for n, ts in ALL_IMPORTS.items()
        if _top(n) in core
        for t in ts
        if _top(t) in LAYERS[1][1]
    ]
    assert (named, imports) == ([], [])


def test_flink_never_imports_spark():
    assert [
        f"{n} -> {t}"
        for n, ts in GRAPH.items()
        for t in ts
        if _top(n) == "flink" and _top(t) == "spark"
    ] == []


def test_spark_imports_no_flink():
    """Spark's operator IDs come from the topology core's structural hasher, not from flink/:
    no spark/ module imports flink/, not even for its types."""
    assert [
        f"{n} -> {t}"
        for n, ts in ALL_IMPORTS.items()
        for t in ts
        if _top(n) == "spark" and _top(t) == "flink"
    ] == []


#: Run in a fresh interpreter: import Spark's package, fingerprint a Spark plan (a streaming
#: aggregation's plan JSON, read without a JVM), print the flink/ modules then loaded.
SPARK_WITHOUT_FLINK = """
import json, sys
import pytest_opid.spark
from pytest_opid.spark.query.fingerprint import fingerprint_graph
from pytest_opid.spark.query.graph import graph_from_plan

EXEC = "org.apache.spark.sql.execution."
HASH = "org.apache.spark.sql.catalyst.plans.physical.HashPartitioning"
plan = [
    {"class": EXEC + "aggregate.HashAggregateExec", "num-children": 1},
    {"class": EXEC + "streaming.StateStoreSaveExec", "num-children": 1},
    {"class": EXEC + "exchange.ShuffleExchangeExec", "num-children": 1,
     "outputPartitioning": [{"class": HASH, "numPartitions": 4}]},
    {"class": EXEC + "streaming.StreamingRelationExec", "num-children": 0, "sourceName": "F"},
]
fp = fingerprint_graph(graph_from_plan(json.dumps(plan), streaming=True))
assert len(fp.operators) == 3 and len(fp.state_operators) == 1, fp
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[:2] == ["pytest_opid", "flink"])))
"""


def test_spark_loads_no_flink_module():
    """A Spark user loads none of Flink's modules: not by importing ``pytest_opid.spark``, not
    by fingerprinting a plan (its operator IDs come from :mod:`pytest_opid.topology`)."""
    path = os.pathsep.join(filter(None, [str(PACKAGE.parent), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", SPARK_WITHOUT_FLINK],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_public_api_is_all():
    expected = {
        "ChainedOperator",
        "ChainingStrategy",
        "Check",
        "Comparison",
        "Demonstration",
        "DocumentError",
        "Edge",
        "ExchangeMode",
        "Fingerprint",
        "HashCollisionError",
        "JobVertex",
        "Operator",
        "OperatorFingerprint",
        "OpidError",
        "Partitioner",
        "RestoreCheck",
        "RestoreProblem",
        "SourceKind",
        "StateOperator",
        "StateStore",
        "Topology",
        "TopologyError",
        "__version__",
        "check_restore",
        "compare",
        "compute",
        "demonstrate",
        "fingerprint",
        "explain",
    }
    assert set(pytest_opid.__all__) == expected
    assert set(pytest_opid._EXPORTS) | {"__version__"} == expected
    for name in pytest_opid.__all__:
        assert getattr(pytest_opid, name) is not None
    with pytest.raises(AttributeError):
        pytest_opid.gc_paused  # noqa: B018
    # No public name is also a submodule's: importing the submodule would shadow it.
    importlib.import_module("pytest_opid.render.explain")
    importlib.import_module("pytest_opid.comparison")
    assert callable(pytest_opid.compare) and callable(pytest_opid.fingerprint)
    submodules = {n.split(".")[1] for n in MODULES if n.count(".") >= 1}
    assert not submodules & set(pytest_opid.__all__)


@pytest.mark.parametrize(
    "name", sorted(n for n in MODULES if n != "pytest_opid" and not n.endswith("__main__"))
)
def test_module_all_lists_only_its_own_public_names(name):
    module = importlib.import_module(name)
    for exported in getattr(module, "__all__", ()):
        assert not exported.startswith("_"), f"{name}.__all__ exports {exported}"
        assert hasattr(module, exported), f"{name}.__all__ names missing {exported}"


def test_core_modules_do_not_branch_on_an_engine():
    """The engine-neutral core never names an engine in code (docstrings may mention one)."""
    core = LAYERS[0][1]
    offenders = []
    for name, path in MODULES.items():
        if _top(name) not in core:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        }
        for node in ast.walk(tree):
            if id(node) in docstrings:
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value.lower()
                if "spark" in text or "flink" in text:
                    offenders.append(f"{name}: {node.value!r}")
            elif isinstance(node, ast.Name) and ("spark" in node.id.lower()):
                offenders.append(f"{name}: {node.id}")
    assert offenders == []


#: Modules that import parts of the package inside functions, and why: the pytest plugin loads
#: the core only when a test uses it (every pytest session imports the plugin and its four small
#: modules: the marker, the recorder, the session, the snapshot files); the jar command
#: and the flink fixtures need PyFlink, an optional extra; the spark_connect fixture loads the
#: Spark package only when a test asks for it (every pytest session imports the fixtures).
LAZY = {
    "pytest_opid.plugin",
    "pytest_opid.plugin.marker",
    "pytest_opid.plugin.recorder",
    "pytest_opid.plugin.session",
    "pytest_opid.plugin.snapshot_files",
    "pytest_opid.cli.commands",
    "pytest_opid.plugin.flink",
    "pytest_opid.plugin.spark",
}


def test_no_import_inside_a_function_outside_the_lazy_modules():
    found = []
    for name, path in MODULES.items():
        if name in LAZY or name == "pytest_opid":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "pytest_opid"
                ):
                    found.append(f"{name}: {func.name} imports {node.module}")
    assert found == []


@pytest.mark.parametrize("engine", LAYERS[1][1])
def test_an_engine_is_used_through_its_face(engine):
    """Outside an engine's package, code imports the package (its ``__init__``), never past it:
    the CLI, the plugin, the strategies and the public API alike, type-only imports included.
    (``from pytest_opid.flink import compute`` takes the face's ``compute``, not the module of
    that name.)"""
    found = []
    for name, path in MODULES.items():
        if _top(name) == engine:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                targets = [node.module or ""]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            found += [f"{name} -> {t}" for t in targets if t.startswith(f"pytest_opid.{engine}.")]
    assert found == []


def test_no_module_imports_a_private_name_of_another():
    """A name starting with ``_`` stays in its module: a helper two modules need is public, in
    the module named for what it is."""
    offenders = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_opid"):
                offenders += [
                    f"{name}: {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and a.name != "__version__"
                ]
    assert offenders == []


#: Layers above the engines that draw, test and command every engine alike: they ask an
#: engine's rules (``pytest_opid.engines.engine_rules``: its words, ``ids_find_state``)
#: instead of testing its name.
ENGINE_BLIND = ("render", "plugin", "cli")


def engine_name_tests(tree: ast.AST, engines: tuple[str, ...]) -> list[str]:
    """Where ``tree`` tests a string against an engine's name: ``engine == "spark"``,
    ``x in ("", "flink")``, a ``case "spark":`` or a dict keyed by an engine's name (a lookup
    table is a branch too). Each as ``line: code``."""
    found: list[tuple[int, str]] = []

    def named(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in engines
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(named(e) for e in node.elts)
        return False

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            hit = any(named(n) for n in (node.left, *node.comparators))
        elif isinstance(node, ast.MatchValue):
            hit = named(node.value)
        elif isinstance(node, ast.Dict):
            hit = any(k is not None and named(k) for k in node.keys)
        else:
            continue
        if hit:
            found.append((node.lineno, f"{node.lineno}: {ast.unparse(node)[:80]}"))
    return [text for _, text in sorted(found)]


def test_render_plugin_and_cli_never_test_an_engine_name():
    """render/, plugin/ and cli/ serve every engine through its rules object (issue 38): a new
    engine brings its words and choices, and nothing above the engines changes for it."""
    from pytest_opid.engines import engine_rules

    engines = LAYERS[1][1]
    assert [engine_rules(e).name for e in engines] == list(engines)
    offenders = [
        f"{name}:{where}"
        for name, path in MODULES.items()
        if _top(name) in ENGINE_BLIND
        for where in engine_name_tests(ast.parse(path.read_text(encoding="utf-8")), engines)
    ]
    assert offenders == []


def test_the_engine_name_test_finds_each_form():
    """The check above would see a branch on an engine's name in each form it takes."""
    code = (
        'a = engine == "spark"\nb = "flink" != e\nc = e not in ("", "flink")\n'
        'd = {"spark": 1}.get(e)\nmatch e:\n    case "spark":\n        pass\n'
        'ok = e == "sparkle" or f(e, "spark")\n'
    )
    found = engine_name_tests(ast.parse(code), ("flink", "spark"))
    assert [f.split(":")[0] for f in found] == ["1", "2", "3", "4", "6"]


def _syrupy_private_names() -> set[str]:
    """Every ``_name`` (not a dunder) syrupy's installed sources define or set."""
    import syrupy

    names: set[str] = set()
    for path in Path(syrupy.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = None
            if isinstance(node, ast.Attribute):
                name = node.attr
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                name = node.name
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                name = node.id
            if name and name.startswith("_") and not name.startswith("__"):
                names.add(name)
    return names


def test_syrupy_internals_are_touched_in_one_module():
    """syrupy's state beyond its extension API is read and set in plugin/syrupy_compat.py only
    (issue 38): elsewhere, syrupy is imported only for the extension's base class, and no
    syrupy private name is read from an object other than our own (``self``, ``cls``) or
    spelt as a string (``getattr(config, "_syrupy")``)."""
    private = _syrupy_private_names()
    assert {"_syrupy", "_selected_items"} <= private  # the scan sees what syrupy defines
    offenders = []
    for name, path in MODULES.items():
        if _top(name) != "plugin" or name == "pytest_opid.plugin.syrupy_compat":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("syrupy"):
                base = node.module == "syrupy.extensions.single_file" and [
                    a.name for a in node.names
                ] == ["SingleFileSnapshotExtension"]
                if not base:
                    offenders.append(f"{name}:{node.lineno} imports {node.module}")
            elif isinstance(node, ast.Import) and any(
                a.name.startswith("syrupy") for a in node.names
            ):
                offenders.append(f"{name}:{node.lineno} imports syrupy")
            elif isinstance(node, ast.Attribute) and node.attr in private:
                owner = node.value
                if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                    offenders.append(f"{name}:{node.lineno} reads .{node.attr}")
            elif isinstance(node, ast.Constant) and node.value in private:
                offenders.append(f"{name}:{node.lineno} spells {node.value!r}")
    assert offenders == []


#: The longest a module may be: a reader holds one in mind at a time (issue 49).
MAX_MODULE_LINES = 600


def test_no_module_is_over_600_lines():
    """A module past the limit is split by what each part is, into modules named for it."""
    long = {}
    for name, path in MODULES.items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            long[name] = lines
    assert long == {}
