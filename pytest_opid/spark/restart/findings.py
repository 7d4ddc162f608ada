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
)
from pytest_opid.spark.source_entries import Source
from pytest_opid.spark.versions import judging_line
from pytest_opid.spark.vocabulary import (
    PROPERTIES_STORE,
)


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
    meaning: tuple[tuple[str, str], ...] = ()  # spark.query.meaning's facts; () from a checkpoint


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
    nullability_known: bool  # False: the checkpoint predates state schema widening
    avro: bool  # transformWithState values evolve as Avro allows


def stateful_operator(s: StateOperator, fp: Fingerprint) -> StatefulOperator:
    stores = {st.name: (st.key_schema, st.value_schema) for st in s.stores}
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


class Findings:
    """What one restart check found: Spark's refusals, what it restarts with but reads as
    something else, and warnings; and the two queries it compares."""

    def __init__(self, old: OldQuery, new: Fingerprint, shuffle_partitions: int | None) -> None:
        self.old = old
        self.new = new
        self.shuffle_partitions = shuffle_partitions
        self.problems: list[RestoreProblem] = []
        self.warnings: list[RestoreProblem] = []
        self.reinterpreted: list[RestoreProblem] = []
        self.new_ops = tuple(stateful_operator(s, new) for s in new.state_operators or ())
        #: the Spark line whose restart this predicts, and how its messages name it
        self.line = judging_line()
        self.spark = f"Spark {self.line}"

    def problem(self, kind: str, message: str, **where: Any) -> None:
        self.problems.append(RestoreProblem(kind, message, **where))

    def warn(self, kind: str, message: str, **where: Any) -> None:
        self.warnings.append(RestoreProblem(kind, message, **where))

    def reinterpret(self, kind: str, message: str, **where: Any) -> None:
        """Spark restarts, but the operator reads state written under another definition."""
        self.reinterpreted.append(RestoreProblem(kind, message, **where))
