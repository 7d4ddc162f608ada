"""An operator chain and the type of a chaining rule, shared by the engines.

An engine fuses operators joined by a chainable edge into one task: Flink's JobVertex, Spark's
stage. A :data:`ChainingRule` says which edges are chainable, one flag per edge; each engine has
its own (``pytest_opid.flink.chaining.flink_chaining``, ``spark_chaining`` in the Spark
frontend), and the structural hasher counts the chainable outputs it flags.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from pytest_opid.model import Topology

__all__ = ["Chain", "ChainingRule"]

#: A chaining rule answers, for every edge of a topology in edge order, "is it chainable?".
ChainingRule = Callable[[Topology], Sequence[bool]]


class Chain(NamedTuple):
    """One operator chain: what becomes a JobVertex (Flink) or a stage (Spark).

    ``members`` are operator positions in the order the engine lists them (Flink: depth-first
    post-order over the chain, head last); ``name`` is the chained name in Flink's style
    (``A -> B``, ``A -> (B, C)``), which Spark's stages borrow.
    """

    head: int
    members: tuple[int, ...]
    name: str
    parallelism: int
