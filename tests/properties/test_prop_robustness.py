"""Robustness: documents round-trip, and broken documents fail with the project's own errors."""

from __future__ import annotations

import copy
import json

from hypothesis import given
from hypothesis import strategies as st

from pytest_opid import fingerprint
from pytest_opid.errors import OpidError
from pytest_opid.flink.document import dump_document, topology_from_document
from pytest_opid.result import Fingerprint
from pytest_opid.strategies import topologies


@given(topologies())
def test_every_topology_round_trips_through_its_document(t):
    """Any generated topology serialises to a valid topology document (plain JSON) that loads
    back equal, directly and through JSON text."""
    doc = dump_document(t)
    assert topology_from_document(doc) == t
    text = json.dumps(doc, ensure_ascii=False)
    assert topology_from_document(json.loads(text)) == t


# Values of the wrong type (or out of range) that a hand-written document might contain.
_ODD_VALUES = st.sampled_from(
    [None, "", "x", 1.5, -1, 0, -7, True, False, [], {}, [1], {"a": 1}, 2**64, "FORWARD", "new"]
)
_ODD_KEYS = st.sampled_from(["colour", "uid_hahs", "Parallelism", "", "source "])


@st.composite
def mutated_documents(draw):
    """A valid document with one to three random faults."""
    doc = copy.deepcopy(dump_document(draw(topologies())))
    for _ in range(draw(st.integers(1, 3))):
        objects = [doc]
        if isinstance(doc.get("nodes"), list):
            objects += [n for n in doc["nodes"] if isinstance(n, dict)]
        if isinstance(doc.get("edges"), list):
            objects += [e for e in doc["edges"] if isinstance(e, dict)]
        target = draw(st.sampled_from(objects))
        fault = draw(
            st.sampled_from(
                [
                    "drop key",
                    "odd value",
                    "unknown key",
                    "dangling edge",
                    "self loop",
                    "cycle",
                    "duplicate id",
                    "duplicate uid",
                    "not an object",
                    "drop node",
                ]
            )
        )
        nodes = doc.get("nodes") if isinstance(doc.get("nodes"), list) else None
        edges = doc.get("edges") if isinstance(doc.get("edges"), list) else None
        if fault == "drop key" and target:
            del target[draw(st.sampled_from(sorted(target)))]
        elif fault == "odd value" and target:
            target[draw(st.sampled_from(sorted(target)))] = draw(_ODD_VALUES)
        elif fault == "unknown key":
            target[draw(_ODD_KEYS)] = draw(_ODD_VALUES)
        elif fault == "dangling edge" and edges is not None:
            edges.append({"source": 0, "target": draw(st.integers(10**6, 10**7))})
        elif fault == "self loop" and edges is not None and nodes:
            node = draw(st.sampled_from(nodes))
            if isinstance(node, dict):
                edges.append({"source": node.get("id"), "target": node.get("id")})
        elif fault == "cycle" and edges:
            edge = draw(st.sampled_from(edges))
            if isinstance(edge, dict):
                edges.append({"source": edge.get("target"), "target": edge.get("source")})
        elif fault == "duplicate id" and nodes and len(nodes) > 1:
            a, b = draw(st.permutations(range(len(nodes))))[:2]
            if isinstance(nodes[a], dict) and isinstance(nodes[b], dict):
                nodes[b]["id"] = nodes[a].get("id")
        elif fault == "duplicate uid" and nodes and len(nodes) > 1:
            a, b = draw(st.permutations(range(len(nodes))))[:2]
            for i in (a, b):
                if isinstance(nodes[i], dict):
                    nodes[i]["uid"] = "same"
        elif fault == "not an object" and nodes:
            nodes[draw(st.integers(0, len(nodes) - 1))] = draw(_ODD_VALUES)
        elif fault == "drop node" and nodes:
            del nodes[draw(st.integers(0, len(nodes) - 1))]
    return doc


@given(mutated_documents())
def test_broken_documents_fail_only_with_opid_errors(doc):
    """Fingerprinting a document with random faults (a dropped key, a wrong type, an unknown
    key, a dangling edge, a cycle, a duplicate id or uid, a node that is not an object, a
    missing node) either works or raises one of the project's errors with a message, never
    anything else: a user gets "your document is wrong", not a traceback."""
    for source in (doc, json.dumps(doc)):
        try:
            result = fingerprint(source)
        except OpidError as error:
            assert str(error).strip()
        else:
            assert isinstance(result, Fingerprint)
