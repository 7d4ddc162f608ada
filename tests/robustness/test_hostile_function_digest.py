"""The function digest against hostile functions (issue 42): the same digest under any
``PYTHONHASHSEED`` and in a fresh interpreter; no user code run while it reads values (``repr``,
``__class__`` properties, ``__getattribute__``, metaclasses, subclasses of builtins, library
objects holding user objects, unpickling); bounded in the values it reads (a 64 MB string, a
million-entry dict or set); one parse per source file; only regular files read."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_opid.spark.function_digest import (
    MAX_SOURCE_BYTES,
    FunctionDigest,
    command_digest,
    digest_of,
)

ROOT = Path(__file__).resolve().parents[2]

#: A module of the user's code whose values hash by string (their order in a set follows the
#: process's hash seed) and whose reading would run its code (each call is logged).
HOSTILE = """
import collections

CALLS = []


class Key:
    def __init__(self, name):
        self.name = name

    def __hash__(self):
        return hash(self.name)

    def __eq__(self, other):
        return isinstance(other, Key) and other.name == self.name

    def __repr__(self):
        CALLS.append("repr")
        return "Key(%r)" % self.name


class Text(str):
    def __repr__(self):
        CALLS.append("str repr")
        return "Text"


class Number(int):
    def __repr__(self):
        CALLS.append("int repr")
        return "Number"


class Disguised:
    @property
    def __class__(self):
        CALLS.append("__class__")
        return dict


class Nosy:
    def __init__(self):
        self.value = 1

    def __getattribute__(self, name):
        CALLS.append("getattribute " + name)
        return object.__getattribute__(self, name)


class Meta(type):
    def __getattribute__(cls, name):
        CALLS.append("meta " + name)
        return type.__getattribute__(cls, name)

    def __repr__(cls):
        CALLS.append("meta repr")
        return "Meta"


class WithMeta(metaclass=Meta):
    limit = 30


class Listing(list):
    def __iter__(self):
        CALLS.append("iter")
        return iter([])

    def __len__(self):
        CALLS.append("len")
        return 0


KEYS = {Key(c) for c in "abcdefghijklmnopqrstuvwxyz"}
BY_KEY = {Key(c): i for i, c in enumerate("qwertyuiop")}
NAMES = {"x", "y", "z", "w", "v", "u"}
FUNCS = {len, max, min}
TEXT = Text("thirty")
NUMBER = Number(30)
DISGUISED = Disguised()
NOSY = Nosy()
LISTING = Listing([1, 2, 3])
HELD = collections.deque([Key("held")])


def update(key, rows, state):
    return (KEYS, BY_KEY, NAMES, FUNCS, TEXT, NUMBER, DISGUISED, NOSY, WithMeta, LISTING, HELD)
"""


def _module(path: Path, name: str, text: str) -> ModuleType:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def hostile(tmp_path: Path) -> ModuleType:
    module = _module(tmp_path / "hostile_state.py", "hostile_state", HOSTILE)
    yield module
    sys.modules.pop("hostile_state", None)


def test_the_same_under_ten_hash_seeds_and_a_fresh_interpreter(hostile, tmp_path):
    mine = digest_of(hostile.update).digest
    script = textwrap.dedent(
        f"""
        import importlib.util, json, sys
        path = {str(tmp_path / "hostile_state.py")!r}
        spec = importlib.util.spec_from_file_location("hostile_state", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["hostile_state"] = module
        spec.loader.exec_module(module)
        from pytest_opid.spark.function_digest import digest_of
        print(json.dumps([digest_of(module.update).digest, module.CALLS]))
        """
    )
    seen = set()
    for seed in [*map(str, range(1, 10)), None]:  # None: random, a fresh interpreter
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
        if seed is not None:
            env["PYTHONHASHSEED"] = seed
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        digest, calls = json.loads(done.stdout)
        assert calls == []
        seen.add(digest)
    assert seen == {mine}


def test_no_user_code_runs_while_values_are_read(hostile):
    found = digest_of(hostile.update)
    assert hostile.CALLS == []
    assert "objects whose reading would run their own code (written by type)" in found.uncovered
    # what it read still counts: a changed value changes the digest, read without its code
    before = found.digest
    hostile.TEXT = hostile.Text("ten")
    hostile.NUMBER = hostile.Number(10)
    assert digest_of(hostile.update).digest != before
    hostile.NUMBER = hostile.Number(30)
    hostile.TEXT = hostile.Text("thirty")
    assert digest_of(hostile.update).digest == before
    hostile.KEYS.add(hostile.Key("new"))
    assert digest_of(hostile.update).digest != before
    assert hostile.CALLS == []


def _bounded(call: Callable[[], Any]) -> tuple[Any, float, int]:
    tracemalloc.start()
    start = time.perf_counter()
    try:
        result = call()
        took = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, took, peak


def _reading(value: Any) -> Callable[[], FunctionDigest]:
    namespace: dict[str, Any] = {"VALUE": value}
    exec("def read(n):\n    return VALUE\n", namespace)
    return lambda: digest_of(namespace["read"])


def test_a_64_mb_string_is_hashed_in_chunks():
    value = "s" * (64 << 20)
    found, took, peak = _bounded(_reading(value))
    assert peak < 12 << 20 and took < 10, (peak, took)
    assert _reading(value[:-1] + "t")().digest != found.digest


@pytest.mark.parametrize("kind", [dict, set])
def test_a_million_entries_are_measured_before_they_are_sorted(kind):
    value = dict.fromkeys(range(1_000_000), 1) if kind is dict else set(range(1_000_000))
    found, took, peak = _bounded(_reading(value))
    assert peak < 4 << 20 and took < 2, (peak, took)
    assert "values past the first 20000 of an entry" in found.uncovered


def test_one_parse_per_source_file(tmp_path, monkeypatch):
    """200 functions of a 4,000-function module: the file read, parsed and indexed once."""
    import ast

    lines = [f"def f{i}(x):\n    return x + {i}\n" for i in range(4_000)]
    lines.append("def root(x):\n    return " + " + ".join(f"f{i}(x)" for i in range(199)) + "\n")
    module = _module(tmp_path / "wide_module.py", "wide_module", "\n".join(lines))
    parsed: list[str] = []
    parse = ast.parse

    def counted(source: Any, filename: Any = "<unknown>", *args: Any, **kwargs: Any) -> Any:
        parsed.append(str(filename))
        return parse(source, filename, *args, **kwargs)

    walked: list[Any] = []
    walk = ast.walk

    def counted_walk(node: Any) -> Any:
        walked.append(type(node).__name__)
        return walk(node)

    monkeypatch.setattr(ast, "parse", counted)
    monkeypatch.setattr(ast, "walk", counted_walk)
    try:
        start = time.perf_counter()
        found = digest_of(module.root)
        took = time.perf_counter() - start
    finally:
        sys.modules.pop("wide_module", None)
    assert found.basis == "source" and not found.uncovered
    assert parsed == [str(tmp_path / "wide_module.py")]
    assert walked == ["Module"]  # the file indexed once, not walked once per function
    assert took < 20, took  # was 14-54 s: a walk of the whole file per function (3.6 s idle)


def _function_in(filename: str) -> Any:
    namespace: dict[str, Any] = {}
    exec(compile("def f(a):\n    return a + 1\n", filename, "exec"), namespace)
    return namespace["f"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX's")
def test_only_regular_files_of_bounded_size_are_read(tmp_path):
    fifo = tmp_path / "source.fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.py"
    big.write_text("def f(a):\n    return a + 1\n" + "#" * MAX_SOURCE_BYTES)
    for filename in (str(fifo), "/dev/zero", str(big)):
        done: list[FunctionDigest] = []

        def read(into: list[FunctionDigest] = done, name: str = filename) -> None:
            into.append(digest_of(_function_in(name)))

        worker = threading.Thread(target=read)
        start = time.perf_counter()
        worker.start()
        worker.join(10)
        if worker.is_alive():  # a blocked open: unblock it so the test process can end
            with open(fifo, "w"):
                pass
            worker.join()
            pytest.fail(f"{filename}: blocked reading the source")
        assert time.perf_counter() - start < 5
        assert done and done[0].basis.endswith("bytecode"), filename


def test_a_pickled_function_is_unpickled_in_a_child_process(tmp_path):
    """Unpickling runs the user's code (``__setstate__`` here): only in the isolation child.
    The digest it sends back is the one the test process makes of the same function."""
    from pyspark.serializers import CPickleSerializer

    module = _module(
        tmp_path / "pickled_state.py",
        "pickled_state",
        f"""
        import os

        class Marker:
            def __setstate__(self, state):
                with open({str(tmp_path / "unpickled-in")!r}, "w") as f:
                    f.write(str(os.getpid()))

        MARKER = Marker()

        def update(key, rows, state, marker=MARKER):
            return rows
        """,
    )
    sys.path.insert(0, str(tmp_path))
    try:
        command = CPickleSerializer().dumps((module.update, None))
        (tmp_path / "unpickled-in").unlink(missing_ok=True)
        found = command_digest(command)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("pickled_state", None)
    marker = tmp_path / "unpickled-in"
    assert not marker.exists() or int(marker.read_text()) != os.getpid()
    assert found == digest_of(module.update)
