"""Flink: OperatorIDs and chains exactly as Flink 2.3 computes them, and its restore rules.

Its ``register()`` hands :mod:`pytest_opid.engines` one engine object with what it contributes: the
fingerprint of a :class:`~pytest_opid.model.Topology` or a builder stream, topology documents
and execution plans as data formats, :class:`~pytest_opid.flink.rules.FlinkRules`, and
savepoints and retained checkpoints (a directory holding ``_metadata``, or that file) as what
``check_restore`` restores from.

Modules: :mod:`.hasher` (``StreamGraphHasherV2``, over the topology core's structural hasher,
:mod:`pytest_opid.topology`), :mod:`.chaining` (``isChainable`` and the
JobGraph's vertices), :mod:`.compute` (both together), :mod:`.document` (topology document
v1), :mod:`.builder` (a DataStream-like builder), :mod:`.plan` (execution plan import),
:mod:`.rules` (savepoint restore by ID, in Flink's words), :mod:`.savepoint` (the ``_metadata``
reader, a package), :mod:`.restore` (Flink's restore verdict from a savepoint or an old
fingerprint), :mod:`.pyflink` and :mod:`.jar` (real jobs through PyFlink's JVM: :mod:`.jvm` loads
the Java side, :mod:`.java_helper`, and :mod:`.stream_graph` reads the StreamGraph it writes;
PyFlink itself is imported only when one is read).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pytest_opid.engines import DataFormat, Engine, Frontend, register_engine
from pytest_opid.flink.chaining import ChainingRule, flink_chaining
from pytest_opid.flink.compute import compute
from pytest_opid.flink.document import decode_document, read_document
from pytest_opid.flink.hasher import state_id_changes
from pytest_opid.flink.jar import fingerprint_jar
from pytest_opid.flink.jvm import FlinkJvm
from pytest_opid.flink.plan import topology_from_plan
from pytest_opid.flink.pyflink import ACCEPTED as PYFLINK_ACCEPTED
from pytest_opid.flink.pyflink import fingerprint_pyflink, is_pyflink
from pytest_opid.flink.restore import pin_lines
from pytest_opid.flink.restore_entrance import FlinkRestore, is_savepoint
from pytest_opid.flink.rules import FlinkRules
from pytest_opid.flink.savepoint import Savepoint, read_savepoint
from pytest_opid.flink.savepoint import render_text as render_savepoint
from pytest_opid.model import Topology
from pytest_opid.result import Fingerprint

#: The face: what the CLI, the plugin and the strategies use; nothing outside flink/ imports past
#: it (tests/architecture says so). spark/ imports nothing of flink/: the structural hasher both
#: engines use is :mod:`pytest_opid.topology`'s.
__all__ = [
    "ChainingRule",
    "FlinkJvm",
    "Savepoint",
    "compute",
    "fingerprint_jar",
    "flink_chaining",
    "is_savepoint",
    "pin_lines",
    "read_savepoint",
    "register",
    "render_savepoint",
    "state_id_changes",
]


def _is_topology(obj: Any) -> bool:
    # Duck-typed (a Topology has to_topology() too), so that a Topology class imported anew
    # (pytester re-imports modules between in-process runs) is still recognised.
    return callable(getattr(type(obj), "to_topology", None))


def _topology_fingerprint(obj: Any, chaining: Any) -> Fingerprint:
    topology: Topology = obj.to_topology()
    return compute(topology, chaining or flink_chaining)


def _is_plan(data: Mapping[str, Any]) -> bool:
    nodes = data.get("nodes")
    if isinstance(nodes, list) and "edges" not in data:
        first = next((n for n in nodes if isinstance(n, Mapping)), {})
        return "pact" in first or "predecessors" in first or "contents" in first
    return False


def _decode_document(raw: bytes, chaining: ChainingRule | None) -> Callable[[], Fingerprint] | None:
    topology = decode_document(raw)
    if topology is None:
        return None
    return lambda: compute(topology, chaining or flink_chaining)


def register() -> None:
    """Register this engine (the entry point of the ``pytest_opid.engines`` group)."""
    rules = FlinkRules()
    register_engine(
        Engine(
            "flink",
            rules,
            FlinkRestore(rules),
            frontends=(
                Frontend(
                    "flink-topology",
                    _is_topology,
                    _topology_fingerprint,
                    "a Topology or a builder stream (anything with to_topology())",
                ),
                Frontend("pyflink", is_pyflink, fingerprint_pyflink, PYFLINK_ACCEPTED),
            ),
            formats=(
                DataFormat(
                    "document",
                    lambda data: "edges" in data,
                    lambda data, chaining: compute(read_document(data), chaining or flink_chaining),
                    "a topology document",
                    _decode_document,
                ),
                DataFormat(
                    "plan",
                    _is_plan,
                    lambda data, chaining: compute(
                        topology_from_plan(data), chaining or flink_chaining
                    ),
                    "a Flink execution plan",
                ),
            ),
        )
    )
