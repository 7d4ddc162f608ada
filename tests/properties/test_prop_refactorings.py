"""Refactoring effects: each kind of edit changes only the state IDs it declares, and the
comparison the plugin reports names exactly the operators whose state is lost."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_opid import compute
from pytest_opid.strategies import REFACTORING_KINDS, refactorings, topologies

# Topologies on which every kind applies often (insert and repartition need an edge,
# remove_uid a uid, break_chain a chained edge).
_TOPOLOGIES = {
    "insert": topologies(min_operators=2),
    "repartition": topologies(min_operators=2),
    "remove_uid": topologies(uid_probability=0.5),
    "break_chain": topologies(min_operators=2, chaining_disabled=False),
}


def edits(kind: str) -> st.SearchStrategy:
    return _TOPOLOGIES.get(kind, topologies()).flatmap(lambda t: refactorings(t, kinds=(kind,)))


def state_ids(fp) -> dict[int, str]:
    return {op.node: op.state_id for op in fp.operators}


@pytest.mark.parametrize("kind", REFACTORING_KINDS)
@given(data=st.data())
def test_an_edit_changes_only_the_state_ids_it_declares(kind, data):
    """For every kind of edit, the old operators whose state ID changes are within the set the
    edit declares, and, that set being derived from Flink's rules rather than guessed, they are
    exactly that set (up to a murmur3 collision). A rename declares, and changes, nothing."""
    r = data.draw(edits(kind), label="refactoring")
    assert r.kind == kind
    old, new = state_ids(compute(r.before)), state_ids(compute(r.after))
    changed = {node for node, sid in old.items() if new[node] != sid}
    assert changed <= r.may_change, (
        f"{r.description}: undeclared changes {sorted(changed - r.may_change)}"
    )
    assert changed == r.may_change, (
        f"{r.description}: declared but unchanged {sorted(r.may_change - changed)}"
    )
    if kind == "rename":
        assert r.may_change == frozenset()


@pytest.mark.parametrize("kind", REFACTORING_KINDS)
@given(data=st.data())
def test_the_comparison_reports_exactly_the_changed_operators(kind, data):
    """``diff.compare(old, new)`` reports as orphaned exactly the old operators whose state ID
    changed, as added exactly the new operators and those whose state ID changed, and says the
    change loses state exactly when something is orphaned."""
    from pytest_opid.diff import compare  # the plugin's module; the contract is in the brief

    r = data.draw(edits(kind), label="refactoring")
    old_fp, new_fp = compute(r.before), compute(r.after)
    old, new = state_ids(old_fp), state_ids(new_fp)
    changed = {node for node, sid in old.items() if new[node] != sid}
    comparison = compare(old_fp, new_fp)
    assert {op.node for op in comparison.orphaned} == changed, r.description
    assert {op.node for op in comparison.added} == changed | r.added, r.description
    assert comparison.loses_state == bool(changed), r.description
