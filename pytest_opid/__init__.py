"""pytest-opid: the operator identities your streaming state depends on, held stable in tests.

The public API is this module's ``__all__``; everything else is internal (see
docs/architecture.md). Names load on first use: pytest imports this package for every session
through the plugin, which must stay cheap for sessions that never fingerprint anything.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_opid.comparison import Comparison, compare
    from pytest_opid.engine_rules import Check
    from pytest_opid.errors import DocumentError, HashCollisionError, OpidError, TopologyError
    from pytest_opid.flink import compute
    from pytest_opid.inputs import fingerprint
    from pytest_opid.model import (
        ChainingStrategy,
        Edge,
        ExchangeMode,
        Operator,
        Partitioner,
        SourceKind,
        Topology,
    )
    from pytest_opid.render.explain import explain
    from pytest_opid.restore import check_restore
    from pytest_opid.result import (
        ChainedOperator,
        Fingerprint,
        JobVertex,
        OperatorFingerprint,
        RestoreCheck,
        RestoreProblem,
        StateOperator,
        StateStore,
    )
    from pytest_opid.spark import Demonstration, demonstrate

__version__ = "0.2.0"

_EXPORTS = {
    "Check": "pytest_opid.engine_rules",
    "Comparison": "pytest_opid.comparison",
    "compare": "pytest_opid.comparison",
    "DocumentError": "pytest_opid.errors",
    "HashCollisionError": "pytest_opid.errors",
    "OpidError": "pytest_opid.errors",
    "TopologyError": "pytest_opid.errors",
    "compute": "pytest_opid.flink",
    "check_restore": "pytest_opid.restore",
    "Demonstration": "pytest_opid.spark",
    "demonstrate": "pytest_opid.spark",
    "RestoreCheck": "pytest_opid.result",
    "RestoreProblem": "pytest_opid.result",
    "fingerprint": "pytest_opid.inputs",
    "ChainingStrategy": "pytest_opid.model",
    "Edge": "pytest_opid.model",
    "ExchangeMode": "pytest_opid.model",
    "Operator": "pytest_opid.model",
    "Partitioner": "pytest_opid.model",
    "SourceKind": "pytest_opid.model",
    "Topology": "pytest_opid.model",
    "explain": "pytest_opid.render.explain",
    "ChainedOperator": "pytest_opid.result",
    "Fingerprint": "pytest_opid.result",
    "JobVertex": "pytest_opid.result",
    "OperatorFingerprint": "pytest_opid.result",
    "StateOperator": "pytest_opid.result",
    "StateStore": "pytest_opid.result",
}

__all__ = [
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
    "explain",
    "fingerprint",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_opid' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
