"""The digest of the Python code that updates a state (issue 28, item 4): the same for the
same code whatever the process or the function's name, another for another constant, closure
value, global, default, helper or method; iterative on deep and self-referential code."""

from __future__ import annotations

import functools
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_opid.spark.function_digest import (
    MAX_VALUES,
    FunctionDigest,
    digest_of,
    fact_parts,
)

SESSIONS = '''
from datetime import timedelta

SESSION_TIMEOUT = timedelta(minutes={minutes})
LABELS = {{"open", "closed", "late"}}


def limit_ms():
    return SESSION_TIMEOUT // timedelta(milliseconds=1)


def {name}(key, pdfs, state):
    """Sessions of one user."""
    start = state.get[0] if state.exists else None
    for ts in pdfs:
        if start is None or ts - start > limit_ms():  # a new session
            start = ts
    return start, sorted(LABELS)
'''


def _module(tmp_path: Path, name: str, text: str) -> ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sessions(tmp_path: Path, tag: str, minutes: int = 30, name: str = "sessions") -> Any:
    module = _module(tmp_path, f"sessions_{tag}", SESSIONS.format(minutes=minutes, name=name))
    return getattr(module, name)


def test_from_source_and_rename_invariant(tmp_path: Path) -> None:
    a = digest_of(_sessions(tmp_path, "a"))
    renamed = digest_of(_sessions(tmp_path, "b", name="user_sessions"))
    assert a.basis == "source" and not a.uncovered
    assert renamed == a
    assert fact_parts(a.fact) == (a.digest[:16], "source")


def test_a_constant_in_a_helper_global_changes_it(tmp_path: Path) -> None:
    """30 -> 10 minutes in a module constant the function reads through a helper."""
    assert digest_of(_sessions(tmp_path, "a")) != digest_of(_sessions(tmp_path, "b", 10))


def test_the_same_across_processes(tmp_path: Path) -> None:
    """Another process, another string hash seed (the set's order), the same digest."""
    _sessions(tmp_path, "x")
    script = textwrap.dedent(
        f"""
        import importlib.util, json, sys
        spec = importlib.util.spec_from_file_location("m", {str(tmp_path / "sessions_x.py")!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        from pytest_opid.spark.function_digest import digest_of
        ns = {{}}
        exec("def f(a):\\n    return {{a, 'x', 'y', 'z'}}\\n", ns)
        print(json.dumps([digest_of(module.sessions).digest, digest_of(ns["f"]).digest]))
        """
    )
    seen = set()
    for seed in ("1", "2"):
        env = {"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"}
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env=env,
            cwd=Path(__file__).resolve().parents[2],
            check=True,
        )
        seen.add(tuple(json.loads(done.stdout)))
    assert len(seen) == 1
    ns: dict[str, Any] = {}
    exec("def f(a):\n    return {a, 'x', 'y', 'z'}\n", ns)
    assert seen == {(digest_of(_sessions(tmp_path, "y")).digest, digest_of(ns["f"]).digest)}


def _exec(code: str, name: str = "f") -> Any:
    namespace: dict[str, Any] = {}
    exec(textwrap.dedent(code), namespace)
    return namespace[name]


def test_without_source_the_bytecode_and_said_so() -> None:
    """Code run by exec has no source: its instructions, named by the Python minor version;
    a rename keeps them, another constant or operator does not."""
    f = digest_of(_exec("def f(a):\n    return a + 30\n"))
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert f.basis == f"Python {minor} bytecode"
    assert f.fact.endswith(f"(Python {minor} bytecode)")
    assert digest_of(_exec("def g(a):\n    return a + 30\n", "g")) == f
    assert digest_of(_exec("def f(a):\n    return a + 10\n")) != f
    assert digest_of(_exec("def f(a):\n    return a - 30\n")) != f


def test_closure_values_and_defaults() -> None:
    def make(limit: int, labels: tuple[str, ...] = ("a",)) -> Any:
        def inner(x: int, scale: int = 2) -> bool:
            return x * scale > limit and bool(labels)

        return inner

    base = digest_of(make(30))
    assert digest_of(make(30)) == base
    assert digest_of(make(10)) != base
    assert digest_of(make(30, ("b",))) != base

    def other_default(limit: int) -> Any:
        def inner(x: int, scale: int = 3) -> bool:
            return x * scale > limit

        return inner

    assert digest_of(other_default(30)) != digest_of(make(30))


def test_a_helper_function_of_the_users_code_is_followed(tmp_path: Path) -> None:
    code = """
    def helper(x):
        return x * {factor}

    def run(key, pdfs, state):
        return helper(len(pdfs))
    """
    two = _module(tmp_path, "helper_two", code.format(factor=2)).run
    three = _module(tmp_path, "helper_three", code.format(factor=3)).run
    assert digest_of(two) != digest_of(three)


def test_a_module_of_the_users_code_read_by_attribute(tmp_path: Path) -> None:
    settings = _module(tmp_path, "settings_a", "TIMEOUT_MINUTES = 30\n")
    sys.modules["settings_a"] = settings
    try:
        code = "import settings_a\n\ndef run(s):\n    return settings_a.TIMEOUT_MINUTES\n"
        run = _module(tmp_path, "reader_a", code).run
        before = digest_of(run)
        settings.TIMEOUT_MINUTES = 10
        assert digest_of(run) != before
    finally:
        del sys.modules["settings_a"]


def test_lambdas() -> None:
    first = lambda key, rows, state: len(rows) > 30  # noqa: E731
    second = lambda key, rows, state: len(rows) > 10  # noqa: E731
    same = lambda key, rows, state: len(rows) > 30  # noqa: E731
    assert digest_of(first).basis == "source"
    assert digest_of(first) != digest_of(second)
    assert digest_of(first) == digest_of(same)


def _scaled(key: Any, rows: Any, state: Any, factor: int) -> int:
    return len(rows) * factor


def test_functools_partial() -> None:
    two = functools.partial(_scaled, factor=2)
    assert digest_of(two) == digest_of(functools.partial(_scaled, factor=2))
    assert digest_of(two) != digest_of(functools.partial(_scaled, factor=3))


PROCESSOR = """
class {cls}:
    limit = {limit}

    def __init__(self, label):
        self.label = label

    def init(self, handle):
        self.count = handle.getValueState("count", "c LONG")

    def handleInputRows(self, key, rows, timerValues):
        for rows_ in rows:
            yield rows_[rows_["v"] > self.limit]

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        return iter([])
"""


def test_a_processors_methods_and_attributes(tmp_path: Path) -> None:
    """transformWithState: the processor's class (every method, its attributes, not its name)
    and the instance's attributes."""

    def processor(tag: str, cls: str = "Sessions", limit: int = 30, label: str = "x") -> Any:
        module = _module(tmp_path, f"processor_{tag}", PROCESSOR.format(cls=cls, limit=limit))
        return getattr(module, cls)(label)

    base = digest_of(processor("a"))
    assert digest_of(processor("b", cls="UserSessions")) == base
    assert digest_of(processor("c", limit=10)) != base
    assert digest_of(processor("d", label="y")) != base
    bound = processor("e")
    assert digest_of(bound.handleInputRows) != base  # a bound method: the method and its self
    assert digest_of(bound.handleInputRows) == digest_of(processor("f").handleInputRows)


def _deep(n: int) -> int:
    return _deep(n - 1) if n else 0


def test_no_recursion_on_deep_or_self_referential_code_and_values() -> None:
    """A recursive function, functions that reference each other, a list holding itself and
    one nested deeper than Python's recursion limit: one digest each, no RecursionError."""
    assert digest_of(_deep).basis == "source"
    ns: dict[str, Any] = {}
    exec("def ping(n):\n    return pong(n)\n\ndef pong(n):\n    return ping(n - 1)\n", ns)
    assert digest_of(ns["ping"]) == digest_of(ns["ping"])
    looped: list[Any] = [1]
    looped.append(looped)
    deep: list[Any] = []
    for _ in range(MAX_VALUES + 10):  # deeper than the recursion limit, past the bound
        deep = [deep]
    for value in (looped, deep):
        ns["VALUE"] = value
        exec("def read(n):\n    return VALUE\n", ns)
        digest = digest_of(ns["read"])
        assert isinstance(digest, FunctionDigest)
    assert "values past the first" in " ".join(digest.uncovered)
    assert sys.getrecursionlimit() < MAX_VALUES


def test_library_code_by_name_and_objects_without_a_value_by_type() -> None:
    """pandas' and the standard library's functions are named, not walked; an object whose
    repr holds an address is written by its type (its address differs per process)."""
    import json as json_module

    ns: dict[str, Any] = {"dumps": json_module.dumps, "handle": object()}
    exec("def f(x):\n    return dumps(x), handle\n", ns)
    digest = digest_of(ns["f"])
    assert "objects whose text shows no value (written by type)" in digest.uncovered
    ns["handle"] = object()  # another address
    assert digest_of(ns["f"]) == digest
    assert fact_parts("not a digest") is None


def test_a_class_by_its_attributes_names_not_their_order() -> None:
    """cloudpickle rebuilds a class of exec'd code with its attributes in another order from
    one unpickling to the next: the same class gives the same digest."""
    first = _exec(
        "class P:\n    def init(self, h):\n        pass\n\n"
        "    def handleInputRows(self, k, rows, t):\n        return rows\n",
        "P",
    )
    second = _exec(
        "class P:\n    def handleInputRows(self, k, rows, t):\n        return rows\n\n"
        "    def init(self, h):\n        pass\n",
        "P",
    )
    assert list(vars(first)) != list(vars(second))
    assert digest_of(first()) == digest_of(second())
