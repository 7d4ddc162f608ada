"""Hypothesis strategies: random valid topologies, and refactorings with a known effect.

Golden cases prove we agree with Flink on the programs someone thought of; random graphs explore
the rest. The same strategies serve users who test their own topology rules (naming conventions,
"every stateful operator has a uid", a custom chaining rule)::

    from hypothesis import given
    from pytest_opid.strategies import topologies

    @given(topologies())
    def test_my_rule(topology): ...

Graphs are built from primitive draws (a node count, then per node its inputs among the earlier
nodes and a few attributes), so Hypothesis shrinks a failing example to a graph of a few
operators. Every optional feature is switched on by a low-probability draw that shrinks towards
"off", which makes the simplest graph a FORWARD pipeline of default operators.

The implementations live in modules named for what they generate: :mod:`.dags` (random
topologies), :mod:`.refactoring` (edits with their effect), over :mod:`.draws` (the primitive
draws). Only this package imports Hypothesis (the ``hypothesis`` extra).
"""

from __future__ import annotations

from pytest_opid.flink import state_id_changes
from pytest_opid.strategies.dags import topologies
from pytest_opid.strategies.refactoring import REFACTORING_KINDS, Refactoring, refactorings

__all__ = [
    "REFACTORING_KINDS",
    "Refactoring",
    "refactorings",
    "state_id_changes",
    "topologies",
]
