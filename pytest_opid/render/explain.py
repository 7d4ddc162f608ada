"""The explanation of a comparison: what a failing check or ``opid diff`` prints.

The words are the engine's own (:meth:`~pytest_opid.engine_rules.EngineRules.explain`), chosen
by the fingerprints' engine tag, so a Spark user reads about state directories and stages, a
Flink user about savepoints and ``setUidHash``.
"""

from __future__ import annotations

from pytest_opid.comparison import Comparison
from pytest_opid.engine_rules import Check

__all__ = ["ACCEPT", "explain", "render"]

#: The command that accepts an intended change.
ACCEPT = "pytest --snapshot-update"


def render(
    comparison: Comparison, check: Check | str = Check.BOTH, *, accept: str | None = ACCEPT
) -> str:
    """The explanation of a comparison, most important first, for a CI log.

    ``check`` decides the verdict in the first line; ``accept`` is the command that accepts the
    change (``None`` leaves that hint out, as ``opid diff`` does).
    """
    return comparison.rules.explain(comparison, Check.parse(check), accept)


#: The public name (``pytest_opid.explain``): ``render`` is also a subpackage's name.
explain = render
