"""An independent, deliberately naive model of Flink 2.3's rules, for the property tests.

Written from Flink's ``StreamingJobGraphGenerator.isChainable`` / ``areOperatorsChainable`` /
``createChainedName`` and ``StreamGraphHasherV2`` (as summarised in the golden data's README,
"What the cases exercise"), not from pytest_opid's code: it scans edge lists instead of using
the model's adjacency, recurses instead of walking, and folds hashes byte by byte. The graphs the
properties use are small, so clarity wins over speed here.
"""

from __future__ import annotations

import struct
from functools import cache

import mmh3

from pytest_opid.model import (
    ChainingStrategy,
    ExchangeMode,
    Partitioner,
    SourceKind,
    Topology,
)


def java_utf8(text: str) -> bytes:
    """``String.getBytes(UTF_8)``: an unpaired surrogate becomes ``?``."""
    return "".join("?" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text).encode("utf-8")


def uid_hash(uid: str) -> bytes:
    """Guava's ``murmur3_128(0).hashString(uid, UTF_8)``."""
    return mmh3.hash_bytes(java_utf8(uid), 0)


class FlinkRules:
    """Chaining conditions, chains and OperatorIDs of one topology."""

    def __init__(self, topology: Topology) -> None:
        self.t = topology
        self.by_id = {op.id: op for op in topology.operators}
        self.inputs = {op.id: [] for op in topology.operators}  # node id -> edge indices
        self.outputs = {op.id: [] for op in topology.operators}
        for k, e in enumerate(topology.edges):
            self.inputs[e.target].append(k)
            self.outputs[e.source].append(k)
        self.conditions = cache(self._conditions)
        self.head_of = cache(self._head_of)

    # -- chaining -------------------------------------------------------------------------------

    def _conditions(self, k: int) -> dict[str, bool]:
        """Every condition Flink checks before chaining edge ``k``, by name."""
        t = self.t
        e = t.edges[k]
        up, down = self.by_id[e.source], self.by_id[e.target]
        ins = self.inputs[e.target]
        up_cs, down_cs = up.chaining_strategy, down.chaining_strategy
        if down_cs is ChainingStrategy.ALWAYS:
            down_allows = True
        elif down_cs is ChainingStrategy.HEAD_WITH_SOURCES:
            down_allows = up.source is SourceKind.NEW
        else:
            down_allows = False
        head = self.by_id[self.head_of(e.source)]
        return {
            "chaining enabled": t.chaining_enabled,
            "target has a single input": len(ins) == 1,
            "same slot sharing group": up.slot_sharing_group == down.slot_sharing_group,
            "both operators have a factory": up_cs is not None and down_cs is not None,
            "upstream strategy is not NEVER": up_cs is not ChainingStrategy.NEVER,
            "downstream strategy allows chaining": down_allows,
            "no yielding operator behind a legacy source head": not (
                down.yielding and head.source is SourceKind.LEGACY
            ),
            "equal parallelism": up.parallelism == down.parallelism,
            "equal max parallelism where required": (
                t.chain_different_max_parallelism or up.max_parallelism == down.max_parallelism
            ),
            "forward partitioner": e.partitioner is Partitioner.FORWARD,
            "exchange is not BATCH": e.exchange_mode is not ExchangeMode.BATCH,
            "no other input at the same position (union)": all(
                j == k or t.edges[j].type_number != e.type_number for j in ins
            ),
        }

    def chainable(self, k: int) -> bool:
        return all(self.conditions(k).values())

    def failed(self, k: int) -> list[str]:
        return [name for name, ok in self.conditions(k).items() if not ok]

    def _head_of(self, node: int) -> int:
        """Flink's ``getHeadOperator``: follow a single chainable input back."""
        ins = self.inputs[node]
        if len(ins) == 1 and self.chainable(ins[0]):
            return self.head_of(self.t.edges[ins[0]].source)
        return node

    def chained_outputs(self, node: int) -> list[int]:
        """Targets of ``node``'s chainable outputs, in output order."""
        return [self.t.edges[k].target for k in self.outputs[node] if self.chainable(k)]

    def post_order(self, head: int) -> list[int]:
        """A chain's operators as a JobVertex lists them: children first, head last."""
        out: list[int] = []
        for child in self.chained_outputs(head):
            out += self.post_order(child)
        return [*out, head]

    def chained_name(self, node: int) -> str:
        name = self.by_id[node].name
        children = self.chained_outputs(node)
        if len(children) == 1:
            return f"{name} -> {self.chained_name(children[0])}"
        if children:
            return f"{name} -> ({', '.join(self.chained_name(c) for c in children)})"
        return name

    # -- hashing --------------------------------------------------------------------------------

    def operator_ids(self) -> dict[int, bytes]:
        """OperatorID per node id: the breadth-first walk with revisits."""
        t = self.t
        sources = sorted(op.id for op in t.operators if not self.inputs[op.id])
        hashes: dict[int, bytes] = {}
        queue = list(sources)
        visited = set(sources)
        while queue:
            node = queue.pop(0)
            op = self.by_id[node]
            ups = [t.edges[k].source for k in self.inputs[node]]
            if op.uid is not None:
                digest = uid_hash(op.uid)
            elif all(u in hashes for u in ups):
                counter = struct.pack("<i", len(hashes))
                digest = mmh3.hash_bytes(counter * (1 + len(self.chained_outputs(node))), 0)
                for u in ups:
                    digest = bytes(((digest[j] * 37) % 256) ^ hashes[u][j] for j in range(16))
            else:
                visited.discard(node)
                continue
            hashes[node] = digest
            for k in self.outputs[node]:
                target = t.edges[k].target
                if target not in visited:
                    visited.add(target)
                    queue.append(target)
        return hashes
