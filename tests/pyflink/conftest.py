"""PyFlink and Java-jar tests: Flink's own JobGraph is the witness of every fingerprint.

These tests need PyFlink (``pip install 'pytest-opid[flink]'``) and a JDK; ``tox -e flink``
runs them (and ``examples/flink``) in an environment of their own, because PyFlink pins versions
that clash with the main test environment's. Where PyFlink is not installed this directory is
not collected at all (``collect_ignore_glob``), rather than reported as skipped tests.

Every program is checked by :func:`cross_check`: pytest-opid reads the StreamGraph PyFlink
would submit and computes IDs and chains with its own engine; Flink then builds its JobGraph
from the same StreamGraph in the same JVM, and the two must agree on every job vertex (ID, name,
parallelism, max parallelism) and every operator's generated and user-defined ID, in order.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from typing import Any

import pytest

if importlib.util.find_spec("pyflink") is None:
    collect_ignore_glob = ["*"]


@dataclass
class _Tally:
    programs: int = 0
    operators: int = 0
    vertices: int = 0


_TALLY = _Tally()


def flink_vertices(vertices: list[dict[str, Any]], offset: int = 0) -> list[tuple[Any, ...]]:
    """Flink's vertices, with the table planner's ExecNode numbers in names lowered by
    ``offset`` as our reading lowers them."""
    return [
        (
            v["id"],
            re.sub(r"\[(\d+)\]", lambda m: f"[{int(m.group(1)) - offset}]", v["name"]),
            v["parallelism"],
            v["maxParallelism"],
            tuple((g, u) for g, u in v["operators"]),
        )
        for v in vertices
    ]


def our_vertices(fp: Any) -> list[tuple[Any, ...]]:
    return [
        (
            v.id,
            v.name,
            v.parallelism,
            v.max_parallelism,
            tuple((o.generated, o.user_defined) for o in v.operators),
        )
        for v in fp.job_vertices
    ]


def compare_with_flink(reading: Any, vertices: list[dict[str, Any]]) -> Any:
    """Our fingerprint of ``reading`` after asserting it equals Flink's JobGraph."""
    from pytest_opid.flink.stream_graph import fingerprint_reading

    fp = fingerprint_reading(reading)
    ours, theirs = our_vertices(fp), flink_vertices(vertices, reading.exec_node_offset)
    assert ours == theirs, _difference(ours, theirs)
    _TALLY.programs += 1
    _TALLY.operators += len(fp.operators)
    _TALLY.vertices += len(fp.job_vertices)
    return fp


def _difference(ours: list[tuple[Any, ...]], theirs: list[tuple[Any, ...]]) -> str:
    lines = ["pytest-opid and Flink's JobGraph differ:"]
    for i in range(max(len(ours), len(theirs))):
        a = ours[i] if i < len(ours) else None
        b = theirs[i] if i < len(theirs) else None
        mark = "  " if a == b else "!!"
        lines.append(f"{mark} ours:  {a}")
        lines.append(f"{mark} flink: {b}")
    return "\n".join(lines)


@pytest.fixture
def cross_check(flink_jvm: Any) -> Any:
    """``cross_check(obj)``: our fingerprint of a PyFlink environment, DataStream or statement
    set, asserted equal to Flink's JobGraph of the same StreamGraph; also asserts that a second
    fingerprint (the environment must be untouched by the first) is the same."""
    import pytest_opid
    from pytest_opid.flink.pyflink import job_graph_vertices

    def check(obj: Any) -> Any:
        reading, vertices = job_graph_vertices(obj)
        fp = compare_with_flink(reading, vertices)
        again = pytest_opid.fingerprint(obj)
        assert our_vertices(again) == our_vertices(fp)
        assert again.operators == fp.operators
        return fp

    return check


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _TALLY.programs:
        terminalreporter.write_line(
            f"pytest-opid vs Flink's JobGraph: {_TALLY.programs} programs, "
            f"{_TALLY.operators} operators, {_TALLY.vertices} job vertices, all equal"
        )
