"""The topology core: what both engines compute over a :class:`~pytest_opid.model.Topology`.

Pure Python, no engine: :mod:`.structural_hash` gives every operator an ID from its uid or its
place in the graph (Flink's OperatorIDs; the Spark frontend's operator IDs), and :mod:`.chains`
holds an operator chain (a Flink JobVertex, a Spark stage) and the type of a chaining rule. Each
engine brings its own chaining rule and builds its own chains; flink/ and spark/ import this
package, never each other.
"""

from __future__ import annotations

from pytest_opid.topology.chains import Chain, ChainingRule
from pytest_opid.topology.structural_hash import hash_order, operator_ids, uid_operator_id

__all__ = ["Chain", "ChainingRule", "hash_order", "operator_ids", "uid_operator_id"]
