"""An orders job, described with pytest-opid's builder, with its OperatorIDs and chains held stable.

A real project keeps a function like ``orders_job`` next to its Flink job: it mirrors what decides
OperatorIDs and chains (which operators, in which order, how records are partitioned, parallelism
and uids), not what the functions compute. ``pytest examples`` checks it against the committed
snapshots in ``__snapshots__/``; after an intended change, ``pytest examples --snapshot-update``.
"""

from __future__ import annotations

import pytest

import pytest_opid
from pytest_opid.comparison import compare
from pytest_opid.flink.builder import Stream, StreamEnvironment
from pytest_opid.render.explain import render


def orders_job(*, validate: bool = False, parallelism: int = 4) -> Stream:
    """Kafka orders -> parse -> (validate) -> keyBy customer -> 1-minute revenue window ->
    Postgres. The stateful operators (the Kafka source's offsets, the window, the sink's
    transactions) carry uids; the stateless parse map does not, as is common."""
    env = StreamEnvironment(parallelism)
    orders = env.source("Kafka orders").uid("orders-source")
    parsed = orders.map("Parse order JSON")
    if validate:
        parsed = parsed.filter("Drop invalid orders")
    revenue = parsed.key_by().process("Revenue per customer, 1 min tumbling").uid("revenue-window")
    return revenue.sink("Postgres revenue").uid("revenue-sink")


@pytest.mark.stable_topology
def test_orders_job(opid):
    opid.record(orders_job())


@pytest.mark.stable_topology(check="ids")
@pytest.mark.parametrize("parallelism", [2, 8])
def test_orders_job_rescaled(opid, parallelism):
    rescaled = opid.record(orders_job(parallelism=parallelism))
    # Rescaling changes no OperatorID: Flink hashes the graph's shape, not its parallelism.
    default = pytest_opid.fingerprint(orders_job())
    assert [o.operator_id for o in rescaled.operators] == [o.operator_id for o in default.operators]


def test_validating_orders_keeps_the_state():
    """The diff API directly: a stateless filter inserted in front of the uid-pinned stateful
    operators loses no state. Only the unpinned parse map gets a new generated ID, and it
    holds no state."""
    comparison = compare(
        pytest_opid.fingerprint(orders_job()),
        pytest_opid.fingerprint(orders_job(validate=True)),
    )
    assert [o.name for o in comparison.orphaned] == ["Parse order JSON"], render(comparison)
    kept = {o.name for o, _ in comparison.kept}
    assert {"Source: Kafka orders", "Revenue per customer, 1 min tumbling"} <= kept
