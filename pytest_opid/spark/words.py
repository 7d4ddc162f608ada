"""The sentences Spark's restart verdicts share: the fixes that make a deploy safe (a new
checkpoint location, keeping the state's definition, migrating the state), how a state store and
a stateful operator are named in a message, and how a problem's kind reads in a headline. One
place, so that every verdict offers the same fix in the same words."""

from __future__ import annotations

from pytest_opid.engine_rules import EngineWords
from pytest_opid.spark.restart.findings import StatefulOperator
from pytest_opid.spark.versions import WIDENING, engine_line, feature_line
from pytest_opid.spark.vocabulary import GROUPING_KEY, KIND_BY_NAME
from pytest_opid.text import printable, quote

FIX_NEW_CHECKPOINT = (
    "  - or run the changed query on a new checkpoint location: its state starts empty and "
    "its sources start from their beginning (or startingOffsets)"
)


FIX_MEANING = (
    "\nFix:\n"
    "  - run the changed query on a new checkpoint location: its state starts empty and "
    "its sources start from their beginning (or startingOffsets)\n"
    "  - or keep the state's definition as it was, and make the change in a new query"
)


FIX_MIGRATE = (
    '  - or migrate the state: read it with spark.read.format("statestore")'
    '.option("operatorId", {n}).load("<checkpoint>") and rebuild it in the new query '
    "(transformWithState takes it as initialState), on a new checkpoint location"
)


def store_words(store: str) -> str:
    base, _, family = store.partition("/")
    if family:
        return f"store {quote(base)}, column family {quote(family)}"
    return f"store {quote(store)}"


def store_part(kind: str, store: str, which: str) -> str:
    """What a store's key or value holds, in the operator's terms (its row of
    :data:`~pytest_opid.spark.vocabulary.STATEFUL_KINDS`)."""
    family = store.partition("/")[2]
    row = KIND_BY_NAME.get(kind)
    if which == "KEY":
        if row is not None and row.key != GROUPING_KEY:
            return f"key ({row.key})" if row.key else "key"
        if family:
            return f"key of state variable {quote(family)} ({GROUPING_KEY})"
        return f"key ({GROUPING_KEY})"
    if row is not None and row.value:
        return f"value ({row.value})"
    if row is not None and row.role == "join":
        side = store.split("-", 1)[0]
        if store.endswith("keyWithIndexToValue"):
            return f"value (the buffered rows of the {side} input)"
        return "value (the row count per key)"
    if family:
        return f"value of state variable {quote(family)}"
    return "value"


def keep_advice(kind: str, store: str, which: str) -> str:
    """How to keep a store's key or value as it was, in the operator's terms."""
    role = KIND_BY_NAME[kind].role if kind in KIND_BY_NAME else ""
    if which == "KEY":
        if role == "deduplication":
            return "deduplicate on the same columns with the same types, in the same order"
        if role == "join":
            return "join on the same key columns with the same types"
        return (
            "group by the same columns with the same types, in the same order (cast a changed "
            'column back: F.col("k").cast("int"))'
        )
    if role == "aggregation":
        return (
            "keep the same aggregate functions with the same result types, in the same order "
            "(a select after the aggregation that drops an aggregate drops it from the state "
            "too: drop it in a later step instead)"
        )
    if role == "join":
        side = store.split("-", 1)[0]
        return (
            f"keep the {side} input's columns (their number, order and types) as they were: "
            "add a column after the join instead"
        )
    if role == "group state":
        return "keep the state schema (stateStructType) with the same field types in the same order"
    if role == "transformWithState":
        return (
            "keep the state variable's schema, or declare the changed one under a new name "
            "(it starts empty)"
        )
    return "keep it as it was"


def operator_label(op: StatefulOperator) -> str:
    return f"({printable(op.label)})" if op.label and op.label != op.name else ""


def capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]


#: A restore problem's kind (spark.restart), as the headline names it.
KIND_WORDS = {
    "key_schema": "the key schema of state/{n}",
    "value_schema": "the value schema of state/{n}",
    "state_config": "the state settings of state/{n}",
    "state_operators": "the stateful operators",
    "sources": "the sources",
}


#: The step after a safe deploy: the snapshot follows production, never the other way round.
RECORD_AFTER = (
    "Then, once the changed query runs one of these ways, record it as the new snapshot: {accept}"
)


def other_version(made_with: str, checked_with: str) -> str:
    """The end of the session's one line on snapshots made with another PySpark: which facts
    the comparison held (those both lines record), and that the snapshots stay as they are."""
    made, checked = engine_line(made_with), engine_line(checked_with)
    if made is None or checked is None or made == checked:
        return (
            f"made with PySpark {made_with} and passed with PySpark {checked_with} (the "
            f"same restart rules); --snapshot-update records {checked_with}"
        )
    widening = feature_line(WIDENING)
    nullability = (
        "; state schemas without their nullability, which Spark "
        f"{widening} widens and Spark {min(made, checked)} does not"
        if min(made, checked) < widening <= max(made, checked)
        else ""
    )
    return (
        f"made with PySpark {made_with} and passed with PySpark {checked_with}, judged "
        f"by Spark {checked}'s restart rules on what both lines record (stateful operators by "
        f"position, state schemas, state meaning, sources, stages{nullability}); they stay the "
        f"record of Spark {made}: --snapshot-update would replace them with Spark {checked}'s"
    )


#: What the pictures and the ``opid fingerprint`` table call things in a Spark job: its chains
#: are stages (an exchange ends one), its operator IDs are pytest-opid's (Spark has none), its
#: parallelism is a stage's partitions, and a stateful operator's state is found by its
#: ``state/<n>`` in the checkpoint (``StateStoreRDD`` opens ``state/<operatorId>``), never by
#: an ID: a new ID alone is harmless, so a diff draws it quiet.
PICTURE_WORDS = EngineWords(
    chain="stage",
    chains="stages",
    operator_id="operator ID",
    parallelism="{} partitions",
    parallelism_unset="partitions: at run time",
    chain_parallelism="{} partitions",
    chain_parallelism_unset="",
    shows_uids=False,
    state_rule="Spark finds state by state/<n>, not by ID",
    saved_state="checkpoint",
    new_operator="NEW",
    topology_legend=(
        ("chain", "box: a stage (operators pipelined in one task; an exchange ends it)"),
        ("plain", "operator: name, operator ID (first 8 hex digits), partitions"),
        ("edge", "arrow label: the exchange between stages"),
    ),
    stateful_legend=("stateful", "state/<n>: the checkpoint directory of its state"),
    diff_legend=(
        (
            "lost",
            "state lost: no operator reads its state/<n> any more, or Spark refuses it "
            "(its key or value schema changed)",
        ),
        (
            "misplaced",
            "wrong state: reads a state/<n> another operator wrote, or one written under "
            "another definition",
        ),
        ("new", "new operator (a new state/<n> starts empty)"),
        ("removed", "removed operator (dashed)"),
        (
            "unchanged",
            "unchanged, or only its operator ID changed: harmless, state is found by state/<n>",
        ),
        ("chain", "box: a stage; marked split or merged where that changed"),
    ),
    batch_diff_legend=(
        ("new", "new operator"),
        ("removed", "removed operator (dashed)"),
        ("unchanged", "unchanged, or only its ID changed (a batch job keeps no state)"),
        ("chain", "box: a stage; marked added or changed where that changed"),
    ),
)
