"""What the builder's calls write down, and the StreamGraph Flink makes of it.

:mod:`pytest_opid.flink.builder` is the face that reads like the DataStream API; this module holds
the program it records (Flink's physical transformations with their settings, the links between
them in creation order, the id counter, the uids taken) and turns it into the operators and edges
of a :class:`~pytest_opid.model.Topology` as Flink 2.3's ``StreamGraphGenerator`` builds its
StreamGraph: unset parallelism resolved, an edge's default partitioner chosen, slot sharing groups
inherited, unconsumed sources left out. Kept apart so that the face holds only the API it mirrors
and the job-wide options.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pytest_opid.errors import TopologyError
from pytest_opid.model import ChainingStrategy, Edge, Operator, Partitioner, SourceKind

__all__ = [
    "LEGACY_SINK",
    "LEGACY_SOURCE",
    "OPERATOR",
    "SOURCE",
    "WRITER",
    "Input",
    "Transformation",
    "TransformationGraph",
    "check_name",
    "is_int",
]

# How a node's Flink name derives from its transformation name, by kind.
SOURCE, LEGACY_SOURCE, OPERATOR, LEGACY_SINK, WRITER = (
    "source",
    "legacy source",
    "operator",
    "legacy sink",
    "sink",
)


@dataclass
class Transformation:
    """A physical transformation while the program is being built (mutable on purpose)."""

    id: int
    kind: str
    name: str
    parallelism: int
    max_parallelism: int = -1
    slot_sharing_group: str | None = None  # None: inherit (Flink's determineSlotSharingGroup)
    chaining_strategy: ChainingStrategy | None = ChainingStrategy.ALWAYS
    uid: str | None = None
    uid_hash: str | None = None
    two_input: bool = False
    parallelism_configured: bool = False
    stateful: bool | None = None  # None: unknown

    @property
    def flink_name(self) -> str:
        if self.kind in (SOURCE, LEGACY_SOURCE):
            return f"Source: {self.name}"
        if self.kind == LEGACY_SINK:
            return f"Sink: {self.name}"
        if self.kind == WRITER:
            return f"{self.name}: Writer"
        return self.name

    def describe(self) -> str:
        return f"{self.flink_name!r} (node {self.id})"


@dataclass(frozen=True)
class Input:
    """One upstream operator as a consumer will see it: which node, and the partitioner the
    program asked for on the way (None: Flink's default, decided in ``stream_graph``)."""

    node: int
    partitioner: Partitioner | None = None


@dataclass(frozen=True)
class _Link:
    source: int
    target: int
    partitioner: Partitioner | None
    type_number: int


class TransformationGraph:
    """One environment's transformations by id, the links between them in the order Flink's
    translation adds edges, the uids taken (uid -> node id) and the id counter, which virtual
    transformations (``key_by``, ``union``, ...) advance too."""

    def __init__(self) -> None:
        self.nodes: dict[int, Transformation] = {}
        self.links: list[_Link] = []
        self.uids: dict[str, int] = {}
        self._counter = 0

    def next_id(self) -> int:
        self._counter += 1
        return self._counter

    def add_node(
        self, kind: str, name: str, strategy: ChainingStrategy | None, parallelism: int
    ) -> Transformation:
        check_name(name)
        node = Transformation(
            id=self.next_id(),
            kind=kind,
            name=name,
            parallelism=parallelism,
            chaining_strategy=strategy,
        )
        self.nodes[node.id] = node
        return node

    def link(self, inputs: Iterable[Input], target: int, type_number: int) -> None:
        links = self.links
        for i in inputs:
            links.append(_Link(i.node, target, i.partitioner, type_number))

    def stream_graph(self, parallelism: int) -> tuple[list[Operator], list[Edge]]:
        """The StreamGraph's operators and edges of everything recorded so far; ``parallelism``
        (the environment's) stands in for every unset one, as Flink resolves it when it builds
        the StreamGraph."""
        consumed = {link.source for link in self.links}
        nodes = [
            n
            for n in self.nodes.values()
            if n.kind not in (SOURCE, LEGACY_SOURCE) or n.id in consumed
        ]
        if not nodes:
            raise TopologyError(
                "the job has no operators (Flink keeps a source only when something consumes it)"
            )
        resolved = {n.id: n.parallelism if n.parallelism != -1 else parallelism for n in nodes}
        inputs: dict[int, list[int]] = {}
        for link in self.links:
            inputs.setdefault(link.target, []).append(link.source)
        groups: dict[int, str] = {}
        for n in nodes:  # creation order: inputs always come first
            groups[n.id] = _slot_sharing_group(n, [groups[i] for i in inputs.get(n.id, ())])
        edges = [self._edge(link, resolved) for link in self.links]
        operators = [
            Operator(
                id=n.id,
                name=n.flink_name,
                parallelism=resolved[n.id],
                max_parallelism=n.max_parallelism,
                slot_sharing_group=groups[n.id],
                chaining_strategy=n.chaining_strategy,
                uid=n.uid,
                uid_hash=n.uid_hash,
                source={SOURCE: SourceKind.NEW, LEGACY_SOURCE: SourceKind.LEGACY}.get(n.kind),
                yielding=n.kind == WRITER,
                parallelism_configured=n.parallelism_configured,
                stateful=n.stateful,
            )
            for n in nodes
        ]
        return operators, edges

    def _edge(self, link: _Link, parallelism: dict[int, int]) -> Edge:
        up, down = parallelism[link.source], parallelism[link.target]
        partitioner = link.partitioner
        if partitioner is None:
            partitioner = Partitioner.FORWARD if up == down else Partitioner.REBALANCE
        elif partitioner is Partitioner.FORWARD and up != down:
            nodes = self.nodes
            raise TopologyError(
                f"forward() between {nodes[link.source].describe()} with parallelism {up} and "
                f"{nodes[link.target].describe()} with parallelism {down}: forward partitioning "
                "does not allow a change of parallelism (use rebalance(), rescale(), shuffle(), "
                "broadcast() or global_())"
            )
        return Edge(link.source, link.target, partitioner, link.type_number)


def _slot_sharing_group(node: Transformation, input_groups: list[str]) -> str:
    if node.slot_sharing_group is not None:
        return node.slot_sharing_group
    if input_groups and all(g == input_groups[0] for g in input_groups):
        return input_groups[0]
    return "default"


def is_int(value: object) -> bool:
    """An integer setting, ``True``/``False`` excluded (Python's bool is an int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_name(name: object, what: str = "operator name") -> None:
    """A name the builder records must be a string: it feeds the hashes and the messages."""
    if not isinstance(name, str):
        raise TopologyError(f"{what} must be a string, got {name!r}")
