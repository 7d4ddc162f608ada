"""A fluent builder that reads like Flink's DataStream API and produces a :class:`Topology`.

It mirrors what decides an OperatorID or a chain, not what a job computes: there are no
functions, only operators with names, parallelism, uids and the edges between them::

    from pytest_opid.flink.builder import source

    job = (
        source("Kafka")
        .map()
        .key_by()
        .process("Dedupe").uid("dedupe")
        .sink("Kafka")
    )
    fingerprint = pytest_opid.fingerprint(job)

How it follows Flink 2.3 (``StreamGraphGenerator``):

* Every transformation takes the next id of its environment's counter in creation order,
  including the virtual ones Flink creates (``key_by``, ``rebalance`` and friends, ``union``,
  ``side_output`` and the sink transformation), so ids line up with Flink's where a program is
  written the same way. Only the relative order of the sources' ids matters to the hashes.
* Edges are created in creation order of their consumer, inputs in the order given, which is the
  order Flink's translation adds them.
* Parallelism is the environment's at creation time, and ``-1`` (unset) is resolved to the
  environment's parallelism when :meth:`StreamEnvironment.to_topology` runs, as Flink resolves
  it when it builds the StreamGraph. An edge without an explicit partitioner is FORWARD between
  equal parallelisms and REBALANCE otherwise; an explicit ``forward()`` between different
  parallelisms is an error, as in Flink.
* An operator without an explicit slot sharing group inherits its inputs' group when they all
  agree, and ``"default"`` otherwise (Flink's ``determineSlotSharingGroup``).
* Sources are FLIP-27 sources (``"Source: <name>"``) or legacy ``SourceFunction`` sources
  (chaining strategy HEAD, like Flink's ``StreamSource``). A source nothing consumes is left
  out, as Flink leaves out an untranslated source.
* ``sink(name)`` is Flink 2's ``sinkTo``: one writer node named ``"<name>: Writer"`` (a
  yielding operator), carrying the sink's uid, parallelism and slot sharing group. Flink gives
  the writer a fresh id when it expands the sink; here it keeps the sink transformation's id,
  which changes no OperatorID. ``add_sink(name)`` and ``print()`` are legacy sinks
  (``"Sink: <name>"``).
* ``set_parallelism`` marks the operator's parallelism as configured (Flink's
  ``isParallelismConfigured``), which decides job vertex parallelism in ``BATCH`` runtime mode
  (``StreamEnvironment(runtime_mode="BATCH")``).

Which operators keep state (``Operator.stateful``, read by restore checks) is marked only where
the builder knows it without seeing the functions: a FLIP-27 source always stores its split
assignment as coordinator state and its readers' splits as operator state; ``reduce()``,
``window()`` and ``process()`` on a keyed stream keep keyed state; ``print()`` keeps none.
Everything else (maps, filters, legacy sources, non-keyed and two-input functions, sinks, whose
writers keep state only for some connectors) is unknown, which a restore check counts as
stateful; ``set_stateful(True/False)`` says it for one operator.

What the calls record, and how it becomes a StreamGraph, is
:mod:`pytest_opid.flink.transformations`'s; this module is the API.
"""

from __future__ import annotations

import re

from pytest_opid.errors import TopologyError
from pytest_opid.flink.transformations import (
    LEGACY_SINK,
    LEGACY_SOURCE,
    OPERATOR,
    SOURCE,
    WRITER,
    Input,
    Transformation,
    TransformationGraph,
    check_name,
    is_int,
)
from pytest_opid.model import ChainingStrategy, Partitioner, RuntimeMode, Topology

__all__ = [
    "ConnectedStreams",
    "Stream",
    "StreamEnvironment",
    "legacy_source",
    "source",
]

_UID_HASH = re.compile(r"[0-9A-Fa-f]{32}")
_MAX_PARALLELISM_LIMIT = 1 << 15  # Flink's UPPER_BOUND_MAX_PARALLELISM


class StreamEnvironment:
    """Flink's ``StreamExecutionEnvironment``: the id counter and the job-wide options.

    ``parallelism`` is the default for operators created afterwards (-1: "decided later").
    ``chaining=False`` is ``disableOperatorChaining()``; ``chain_different_max_parallelism``
    is Flink's option of the same meaning; ``runtime_mode`` is ``execution.runtime-mode``
    (``"STREAMING"`` or ``"BATCH"``).
    """

    def __init__(
        self,
        parallelism: int = -1,
        *,
        chaining: bool = True,
        chain_different_max_parallelism: bool = True,
        runtime_mode: RuntimeMode | str = RuntimeMode.STREAMING,
    ) -> None:
        self._graph = TransformationGraph()
        self.parallelism = _check_env_parallelism(parallelism)
        self.chaining_enabled = _check_flag(chaining, "chaining")
        self.chain_different_max_parallelism = _check_flag(
            chain_different_max_parallelism, "chain_different_max_parallelism"
        )
        self.runtime_mode = _check_runtime_mode(runtime_mode)

    # -- options ---------------------------------------------------------------------------

    def set_parallelism(self, parallelism: int) -> StreamEnvironment:
        """Default parallelism of operators created from now on (and of unset ones)."""
        self.parallelism = _check_env_parallelism(parallelism)
        return self

    def set_runtime_mode(self, runtime_mode: RuntimeMode | str) -> StreamEnvironment:
        """``execution.runtime-mode``: ``"STREAMING"`` or ``"BATCH"``."""
        self.runtime_mode = _check_runtime_mode(runtime_mode)
        return self

    def disable_operator_chaining(self) -> StreamEnvironment:
        self.chaining_enabled = False
        return self

    def set_chain_different_max_parallelism(self, allowed: bool) -> StreamEnvironment:
        self.chain_different_max_parallelism = _check_flag(
            allowed, "chain_different_max_parallelism"
        )
        return self

    # -- sources ---------------------------------------------------------------------------

    def source(self, name: str) -> Stream:
        """A FLIP-27 source (``env.fromSource(..., name)``), node name ``"Source: <name>"``."""
        node = self._add_node(SOURCE, name, ChainingStrategy.ALWAYS)
        node.stateful = True  # split enumerator (coordinator) and reader state, always
        return Stream(self, (Input(node.id),), node.id)

    def legacy_source(self, name: str = "Custom Source") -> Stream:
        """A legacy ``SourceFunction`` source (``env.addSource``), chaining strategy HEAD."""
        node = self._add_node(LEGACY_SOURCE, name, ChainingStrategy.HEAD)
        return Stream(self, (Input(node.id),), node.id)

    # -- the result ------------------------------------------------------------------------

    def to_topology(self) -> Topology:
        """The StreamGraph of everything built in this environment so far."""
        operators, edges = self._graph.stream_graph(self.parallelism)
        return Topology(
            operators,
            edges,
            chaining_enabled=self.chaining_enabled,
            chain_different_max_parallelism=self.chain_different_max_parallelism,
            runtime_mode=self.runtime_mode,
        )

    def _add_node(
        self, kind: str, name: str, strategy: ChainingStrategy | None = ChainingStrategy.ALWAYS
    ) -> Transformation:
        """A transformation at the environment's parallelism as it is now (Flink reads it when
        the transformation is created)."""
        return self._graph.add_node(kind, name, strategy, self.parallelism)


class Stream:
    """A ``DataStream`` handle. Transformations return a new handle; settings (``uid``,
    ``set_parallelism``, ...) change the operator this handle stands for and return it."""

    def __init__(
        self,
        env: StreamEnvironment,
        inputs: tuple[Input, ...],
        node: int | None,
        *,
        what: str = "",
        keyed: bool = False,
    ) -> None:
        self._env = env
        self._inputs = inputs
        self._node_id = node
        self._what = what  # for a virtual stream: which call made it (error messages)
        self._keyed = keyed

    def __repr__(self) -> str:
        if self._node_id is not None:
            return f"<Stream {self._node().describe()}>"
        return f"<Stream {self._what}>"

    @property
    def environment(self) -> StreamEnvironment:
        return self._env

    @property
    def node_id(self) -> int | None:
        """The id of the operator this handle stands for (None for key_by/union/... results)."""
        return self._node_id

    def to_topology(self) -> Topology:
        """The whole environment's topology (so ``pytest_opid.fingerprint(stream)`` works)."""
        return self._env.to_topology()

    # -- one-input operators ---------------------------------------------------------------

    def map(self, name: str = "Map") -> Stream:
        return self._one_input(name)

    def filter(self, name: str = "Filter") -> Stream:
        return self._one_input(name)

    def flat_map(self, name: str = "Flat Map") -> Stream:
        return self._one_input(name)

    def process(self, name: str | None = None) -> Stream:
        """``process()``; on a keyed stream Flink names it ``KeyedProcess`` (keyed state)."""
        keyed = self._keyed
        return self._one_input(
            name or ("KeyedProcess" if keyed else "Process"), True if keyed else None
        )

    def reduce(self, name: str = "Keyed Reduce") -> Stream:
        """``keyBy(...).reduce(...)``: only on a keyed stream, as in Flink (keyed state)."""
        if not self._keyed:
            raise TopologyError(f"reduce() needs a keyed stream (call key_by() first) on {self}")
        return self._one_input(name, True)

    def window(self, name: str = "Window") -> Stream:
        """``keyBy(...).window(...).reduce/aggregate/process(...)``: one window operator, only
        on a keyed stream (its contents and timers are keyed state)."""
        if not self._keyed:
            raise TopologyError(f"window() needs a keyed stream (call key_by() first) on {self}")
        return self._one_input(name, True)

    def _one_input(self, name: str, stateful: bool | None = None) -> Stream:
        self._check_has_output("add an operator to")
        node = self._env._add_node(OPERATOR, name)
        node.stateful = stateful
        self._env._graph.link(self._inputs, node.id, 0)
        return Stream(self._env, (Input(node.id),), node.id)

    # -- partitioning ----------------------------------------------------------------------

    def key_by(self) -> Stream:
        return self._partition(Partitioner.HASH, "key_by()", keyed=True)

    def rebalance(self) -> Stream:
        return self._partition(Partitioner.REBALANCE, "rebalance()")

    def rescale(self) -> Stream:
        return self._partition(Partitioner.RESCALE, "rescale()")

    def shuffle(self) -> Stream:
        return self._partition(Partitioner.SHUFFLE, "shuffle()")

    def broadcast(self) -> Stream:
        return self._partition(Partitioner.BROADCAST, "broadcast()")

    def global_(self) -> Stream:
        return self._partition(Partitioner.GLOBAL, "global_()")

    def forward(self) -> Stream:
        return self._partition(Partitioner.FORWARD, "forward()")

    def partition_custom(self) -> Stream:
        return self._partition(Partitioner.CUSTOM, "partition_custom()")

    def _partition(self, partitioner: Partitioner, what: str, keyed: bool = False) -> Stream:
        # Flink's PartitionTransformation: a virtual node with an id of its own. The partitioner
        # nearest to the consumer wins, for every upstream operator (also through a union).
        self._check_has_output(what)
        self._env._graph.next_id()
        inputs = tuple(Input(i.node, partitioner) for i in self._inputs)
        return Stream(self._env, inputs, None, what=f"{self._label()}.{what}", keyed=keyed)

    # -- several inputs --------------------------------------------------------------------

    def union(self, *others: Stream) -> Stream:
        """Flink's ``union``: the consumer gets every input's edges, this stream's first."""
        self._check_has_output("union()")
        inputs = list(self._inputs)
        for other in others:
            self._check_same_env(other, "union()")
            other._check_has_output("union()")
            inputs.extend(other._inputs)
        self._env._graph.next_id()  # UnionTransformation
        return Stream(self._env, tuple(inputs), None, what=f"{self._label()}.union(...)")

    def connect(self, other: Stream) -> ConnectedStreams:
        """Two streams feeding one two-input operator (input 1: this one, input 2: ``other``)."""
        self._check_has_output("connect()")
        self._check_same_env(other, "connect()")
        other._check_has_output("connect()")
        return ConnectedStreams(self, other)

    def side_output(self, name: str) -> Stream:
        """``getSideOutput(tag)``: records of this operator's side output ``name``."""
        check_name(name, "side output name")
        node = self._node("take a side output of")
        if node.kind in (LEGACY_SINK, WRITER):
            raise TopologyError(f"{node.describe()} is a sink; it has no side outputs")
        self._env._graph.next_id()  # SideOutputTransformation
        return Stream(self._env, (Input(node.id),), None, what=f"{self._label()}.side_output")

    # -- sinks -----------------------------------------------------------------------------

    def sink(self, name: str = "Sink") -> Stream:
        """Flink 2's ``sinkTo``: a writer node named ``"<name>: Writer"`` (yielding)."""
        self._check_has_output("add a sink to")
        node = self._env._add_node(WRITER, name)
        self._env._graph.link(self._inputs, node.id, 0)
        return Stream(self._env, (), node.id)

    def add_sink(self, name: str = "Unnamed") -> Stream:
        """A legacy ``SinkFunction`` sink (``addSink``), named ``"Sink: <name>"``."""
        self._check_has_output("add a sink to")
        node = self._env._add_node(LEGACY_SINK, name)
        self._env._graph.link(self._inputs, node.id, 0)
        return Stream(self._env, (), node.id)

    def print(self) -> Stream:
        """``print()``: the legacy sink ``"Sink: Print to Std. Out"`` (no state)."""
        printed = self.add_sink("Print to Std. Out")
        printed._node().stateful = False
        return printed

    # -- settings of this stream's operator ------------------------------------------------

    def name(self, name: str) -> Stream:
        """The transformation's name (a source shows as ``"Source: <name>"``, a sink's writer
        as ``"<name>: Writer"``, as in Flink)."""
        check_name(name)
        self._node("name").name = name
        return self

    def uid(self, uid: str) -> Stream:
        if not isinstance(uid, str):
            raise TopologyError(f"uid must be a string, got {uid!r}")
        node = self._node("set a uid on")
        taken = self._env._graph.uids
        if uid in taken and taken[uid] != node.id:
            other = self._env._graph.nodes[taken[uid]]
            raise TopologyError(
                f"duplicate uid {uid!r}: {other.describe()} has it already, cannot give it to "
                f"{node.describe()}"
            )
        if node.uid is not None:
            del taken[node.uid]
        taken[uid] = node.id
        node.uid = uid
        return self

    def set_uid_hash(self, uid_hash: str) -> Stream:
        """``setUidHash``: the user-defined OperatorID (32 hex digits) state is restored from."""
        node = self._node("set a uid hash on")
        if not isinstance(uid_hash, str) or not _UID_HASH.fullmatch(uid_hash):
            raise TopologyError(
                f"uid hash of {node.describe()} must be 32 hex digits, got {uid_hash!r}"
            )
        node.uid_hash = uid_hash
        return self

    def set_parallelism(self, parallelism: int) -> Stream:
        node = self._node("set the parallelism of")
        if not is_int(parallelism) or parallelism <= 0:
            raise TopologyError(
                f"parallelism of {node.describe()} must be a positive integer, got {parallelism!r}"
            )
        node.parallelism = parallelism
        node.parallelism_configured = True
        return self

    def set_stateful(self, stateful: bool | None) -> Stream:
        """Whether the operator keeps state (``None``: unknown), for restore checks; the
        builder marks only what it knows without the functions (see the module)."""
        node = self._node("mark the state of")
        if stateful is not None and not isinstance(stateful, bool):
            raise TopologyError(
                f"stateful of {node.describe()} must be True, False or None, got {stateful!r}"
            )
        node.stateful = stateful
        return self

    def set_max_parallelism(self, max_parallelism: int) -> Stream:
        node = self._node("set the max parallelism of")
        if (
            not is_int(max_parallelism)
            or max_parallelism <= 0
            or max_parallelism > _MAX_PARALLELISM_LIMIT
        ):
            raise TopologyError(
                f"max parallelism of {node.describe()} must be between 1 and "
                f"{_MAX_PARALLELISM_LIMIT}, got {max_parallelism!r}"
            )
        node.max_parallelism = max_parallelism
        return self

    def slot_sharing_group(self, name: str) -> Stream:
        check_name(name, "slot sharing group")
        self._node("set the slot sharing group of").slot_sharing_group = name
        return self

    def disable_chaining(self) -> Stream:
        """Chaining strategy NEVER: the operator chains with nothing."""
        return self.set_chaining_strategy(ChainingStrategy.NEVER)

    def start_new_chain(self) -> Stream:
        """Chaining strategy HEAD: the operator starts a chain."""
        return self.set_chaining_strategy(ChainingStrategy.HEAD)

    def set_chaining_strategy(self, strategy: ChainingStrategy | str) -> Stream:
        node = self._node("set the chaining strategy of")
        try:
            node.chaining_strategy = ChainingStrategy(strategy)
        except ValueError:
            allowed = ", ".join(s.value for s in ChainingStrategy)
            raise TopologyError(
                f"unknown chaining strategy {strategy!r} for {node.describe()} "
                f"(expected one of {allowed})"
            ) from None
        return self

    # -- helpers ---------------------------------------------------------------------------

    def _node(self, action: str = "configure") -> Transformation:
        if self._node_id is None:
            raise TopologyError(
                f"cannot {action} {self._what}: it is not an operator (settings apply to the "
                "operator a map/filter/process/source/sink call returned)"
            )
        return self._env._graph.nodes[self._node_id]

    def _label(self) -> str:
        return self._node().describe() if self._node_id is not None else self._what

    def _check_has_output(self, action: str) -> None:
        if not self._inputs:
            raise TopologyError(f"cannot {action} {self._label()}: a sink has no output")

    def _check_same_env(self, other: object, action: str) -> None:
        if not isinstance(other, Stream):
            raise TopologyError(f"{action} takes streams, got {type(other).__name__}")
        if other._env is not self._env:
            raise TopologyError(
                f"{action}: {other._label()} belongs to another environment than "
                f"{self._label()} (build both from one StreamEnvironment)"
            )


class ConnectedStreams:
    """``a.connect(b)``: the next call creates one two-input operator."""

    def __init__(self, first: Stream, second: Stream) -> None:
        self._first = first
        self._second = second

    def key_by(self) -> ConnectedStreams:
        """``ConnectedStreams.keyBy``: both inputs hash-partitioned."""
        return ConnectedStreams(self._first.key_by(), self._second.key_by())

    def map(self, name: str = "Co-Map") -> Stream:
        return self._two_input(name)

    def flat_map(self, name: str = "Co-Flat Map") -> Stream:
        return self._two_input(name)

    def process(self, name: str = "Co-Process") -> Stream:
        return self._two_input(name)

    def _two_input(self, name: str) -> Stream:
        env = self._first._env
        node = env._add_node(OPERATOR, name)
        node.two_input = True
        env._graph.link(self._first._inputs, node.id, 1)
        env._graph.link(self._second._inputs, node.id, 2)
        return Stream(env, (Input(node.id),), node.id)


def source(name: str, *, env: StreamEnvironment | None = None) -> Stream:
    """A FLIP-27 source in ``env`` (a fresh environment if none is given)."""
    return (env or StreamEnvironment()).source(name)


def legacy_source(name: str = "Custom Source", *, env: StreamEnvironment | None = None) -> Stream:
    """A legacy ``SourceFunction`` source in ``env`` (a fresh environment if none is given)."""
    return (env or StreamEnvironment()).legacy_source(name)


# -- validation helpers -------------------------------------------------------------------------


def _check_flag(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise TopologyError(f"{what} must be True or False, got {value!r}")
    return value


def _check_runtime_mode(mode: object) -> RuntimeMode:
    if isinstance(mode, RuntimeMode):
        return mode
    try:
        return RuntimeMode(mode)
    except ValueError:
        raise TopologyError(f"runtime_mode must be 'STREAMING' or 'BATCH', got {mode!r}") from None


def _check_env_parallelism(parallelism: object) -> int:
    if not is_int(parallelism) or (parallelism <= 0 and parallelism != -1):  # type: ignore[operator]
        raise TopologyError(
            f"environment parallelism must be a positive integer or -1, got {parallelism!r}"
        )
    return parallelism  # type: ignore[return-value]
