"""What a restart check works on and what it finds: the stateful operators and sources of the old
query (from a checkpoint or a fingerprint) and the new one, and the problems (Spark refuses),
reinterpretations (Spark restarts and reads the state as something else) and warnings found."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_opid.result import (
    Fingerprint,
    RestoreProblem,
    StateOperator,
    StateStore,
)
from pytest_opid.spark.checkpoint.state_rows import StateSample
from pytest_opid.spark.restart.widening import as_nullable
from pytest_opid.spark.source_entries import Source
from pytest_opid.spark.versions import WIDENING, feature_line, judging_line
from pytest_opid.spark.vocabulary import (
    KIND_BY_NAME,
    PROPERTIES_STORE,
)

#: The operators (by the name their state is filed under) whose schemas Spark widens.
WIDENED_KINDS = frozenset(name for name, kind in KIND_BY_NAME.items() if kind.widened)


@dataclass(frozen=True)
class StatefulOperator:
    """A stateful operator on either side: its state directory number, name, stores."""

    number: int
    name: str | None  # operatorName in the state metadata; None where the metadata has none
    #: store (``default``, ``left-keyToNumValues``... or ``<store>/<column family>``)
    #: -> (key schema JSON, value schema JSON)
    stores: Mapping[str, tuple[str | None, str | None]]
    properties: str | None = None  # transformWithState's operatorPropertiesJson
    partitions: int | None = None
    schemas_known: bool = True
    label: str = ""  # how the fingerprint names it (StateStoreSave(string)), if known
    operator_id: str | None = None
    #: spark.query.meaning's facts; () from a checkpoint alone
    meaning: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class OldSource:
    label: str  # position as text, or the source's name under source evolution
    source: Source | None  # from a fingerprint
    offset: str | None = None  # from a checkpoint
    files: tuple[str, ...] | None = None  # from a checkpoint: a file source's last batch


@dataclass(frozen=True)
class OldQuery:
    origin: str  # "the checkpoint", "the previous query's checkpoint"
    from_checkpoint: bool
    batches: bool  # a batch ran: Spark restarts rather than starts
    restart_batch: int | None  # the batch id the restart plans first
    last_committed: int | None
    operators: tuple[StatefulOperator, ...]
    sources: tuple[OldSource, ...] | None
    named: bool  # source evolution: sources matched by name, every one must be named
    #: the checkpoint pins alwaysNullableOutput=true (a query started on Spark 4.3 or later):
    #: its state schemas were widened to nullable, and Spark widens the new query's the same
    widened: bool
    #: the checkpoint has operator metadata (written from Spark 4.0 on): Spark can match the
    #: stateful operators by name; without it (Spark 3.5's), only by position
    operator_metadata: bool
    avro: bool  # transformWithState values evolve as Avro allows
    #: a checkpoint judged with the fingerprint of the query that wrote it: its operators
    #: carry that query's state meaning
    with_plan: bool = False
    #: the sink and sources of the query that wrote it, as its fingerprint records them
    #: (:attr:`~pytest_opid.result.Fingerprint.endpoints`); ``None``: not known
    endpoints: tuple[tuple[str, str, str], ...] | None = None
    #: what the checkpoint's state rows show (window bounds), by operator number, where they
    #: were read (:mod:`pytest_opid.spark.query.state_reader`): a sample that is not there was
    #: not read (no session, no window)
    samples: Mapping[int, StateSample] | None = None
    #: the names of the operators between the sources and the sink of the query that wrote
    #: it (:func:`plan_of` its fingerprint); ``None``: not known
    plan: tuple[str, ...] | None = None
    #: the new query's Python data source readers asked about the checkpoint's offsets, by
    #: source position (:func:`pytest_opid.spark.query.python_offsets.read_offsets`); ``None``:
    #: not asked (no live query)
    readers: Mapping[int, Mapping[str, Any]] | None = None


def stateful_operator(s: StateOperator, fp: Fingerprint, widened: bool = False) -> StatefulOperator:
    """One side's stateful operator from a fingerprint; ``widened``: Spark widens its state
    schemas to nullable (a checkpoint of a query started on 4.3)."""
    stores = {st.name: store_schemas(st, s.kind, widened) for st in s.stores}
    properties = stores.pop(PROPERTIES_STORE, (None, None))[1]
    # The partitions of the exchange into the operator are its state's (the shuffle
    # partitions), except for a single partition (a global aggregation: Spark still files its
    # state under every shuffle partition, so nothing is known).
    partitions = next(
        (op.parallelism for op in fp.operators if op.operator_id == s.operator_id), -1
    )
    return StatefulOperator(
        number=s.state_operator_id,
        name=s.kind,
        stores=stores,
        properties=properties,
        partitions=partitions if partitions > 1 else None,
        schemas_known=bool(s.stores),
        label=s.name,
        operator_id=s.operator_id,
        meaning=s.meaning,
    )


def plan_of(fp: Fingerprint) -> tuple[str, ...]:
    """The names of a query's operators between its sources and its sink, in the
    fingerprint's order: no source (``StreamingRelation ...``), no stateful operator (the
    state checks compare those)."""
    state = {s.operator_id for s in fp.state_operators or ()}
    return tuple(
        op.name
        for op in fp.operators
        if not op.stateful
        and op.operator_id not in state
        and not op.name.startswith("StreamingRelation")
    )


def store_schemas(store: StateStore, kind: str, widened: bool) -> tuple[str | None, str | None]:
    """A store's (key, value) schemas as Spark checks them: where it widens them to nullable
    (``widened``), widened here too, as a fingerprint made on a line without the widening does
    not have them; else as recorded."""
    if not widened or kind not in WIDENED_KINDS:
        return store.key_schema, store.value_schema
    return as_nullable(store.key_schema), as_nullable(store.value_schema)


class Findings:
    """What one restart check found: Spark's refusals, what it restarts with but reads as
    something else, and warnings; and the two queries it compares."""

    def __init__(
        self,
        old: OldQuery,
        new: Fingerprint,
        shuffle_partitions: int | None,
        nullability_exact: bool = True,
    ) -> None:
        self.old = old
        self.new = new
        self.shuffle_partitions = shuffle_partitions
        self.problems: list[RestoreProblem] = []
        self.warnings: list[RestoreProblem] = []
        self.reinterpreted: list[RestoreProblem] = []
        #: what decides the state's meaning and could not be checked, with how to check it
        self.unverified: list[RestoreProblem] = []
        #: the Spark line whose restart this predicts, and how its messages name it
        self.line = judging_line()
        self.spark = f"Spark {self.line}"
        # The new query's state schemas as this Spark builds them on this checkpoint: widened
        # to nullable only where the checkpoint pins the widening (a query started on 4.3+).
        widened = old.widened and self.line >= feature_line(WIDENING)
        self.new_ops = tuple(stateful_operator(s, new, widened) for s in new.state_operators or ())
        #: False where the new fingerprint's schemas were widened by its own Spark (4.3) but
        #: this checkpoint's are not: the nullability Spark would plan here is not known, and
        #: only the number and types of the fields are compared
        self.nullability_exact = nullability_exact

    def problem(self, kind: str, message: str, **where: Any) -> None:
        self.problems.append(RestoreProblem(kind, message, **where))

    def warn(self, kind: str, message: str, **where: Any) -> None:
        self.warnings.append(RestoreProblem(kind, message, **where))

    def unverify(self, kind: str, message: str, **where: Any) -> None:
        """What the state means could not be checked from what the old query left."""
        self.unverified.append(RestoreProblem(kind, message, **where))

    def reinterpret(self, kind: str, message: str, **where: Any) -> None:
        """Spark restarts, but the operator reads state written under another definition."""
        self.reinterpreted.append(RestoreProblem(kind, message, **where))
