"""pytest-opid: Flink-exact OperatorIDs and operator chains, snapshotted in your tests."""

from __future__ import annotations

from pytest_opid.errors import DocumentError, HashCollisionError, OpidError, TopologyError
from pytest_opid.fingerprint import (
    ChainedOperator,
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    StateOperator,
    compute,
    fingerprint,
)
from pytest_opid.topology import (
    ChainingStrategy,
    Edge,
    ExchangeMode,
    Operator,
    Partitioner,
    SourceKind,
    Topology,
)

__version__ = "0.1.0"

__all__ = [
    "ChainedOperator",
    "ChainingStrategy",
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
    "SourceKind",
    "StateOperator",
    "Topology",
    "TopologyError",
    "compute",
    "fingerprint",
]
