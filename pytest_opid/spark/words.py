"""The sentences Spark's restart verdicts share: the fixes that make a deploy safe (a new
checkpoint location, keeping the state's definition, migrating the state), how a state store and
a stateful operator are named in a message, and how a problem's kind reads in a headline. One
place, so that every verdict offers the same fix in the same words."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pytest_opid.engine_rules import EngineWords
from pytest_opid.spark.restart.findings import StatefulOperator
from pytest_opid.spark.versions import WIDENING, engine_line, feature_line
from pytest_opid.spark.vocabulary import GROUPING_KEY, KIND_BY_NAME, TRANSFORM_WITH_STATE
from pytest_opid.text import printable, quote

#: What a new checkpoint location does to the sink and the sources: every fix that offers one
#: says it, so that no advice trades data for a green build (a file sink kept on its path
#: skips the new query's first batches; foreachBatch is handed everything again).
NEW_LOCATION_EFFECTS = (
    "its sources start from their beginning (a file source reads every file in its path "
    "again, rate starts from 0, Kafka from startingOffsets, by default latest: what arrived "
    "since the old query's last batch is never read), and its sink is handed it all again: "
    "a file sink needs a new, empty output path too (on the old one the new query's batch "
    "ids 0, 1, ... are already in <path>/_spark_metadata and Spark skips them: rows lost); "
    "a foreachBatch writer is handed them again and must skip the rows already written by a "
    "key of the rows, not by batch id (the new query's batch ids 0, 1, ... are the old "
    "query's again: a writer that appends writes the rows twice, one idempotent by batch id "
    "skips the new batches: rows duplicated or lost)"
)



def new_location_fix(lead: str = "  - or run the changed query") -> str:
    """The fix line that offers a new checkpoint location (``lead`` says who runs there),
    always with what that does to the sink and the sources: the one text every such fix uses."""
    return f"{lead} on a new checkpoint location: its state starts empty, " + NEW_LOCATION_EFFECTS


FIX_NEW_CHECKPOINT = new_location_fix()


FIX_MEANING = (
    "\nFix:\n"
    + new_location_fix("  - run the changed query")
    + "\n  - or keep the state's definition as it was, and make the change in a new query"
)


#: The most stateful operators a migration hint names (a query rarely has more).
_MOST_MIGRATED = 4


def fix_migrate(old: Sequence[StatefulOperator]) -> str:
    """The fix that moves the old state over, naming every stateful operator of the OLD
    checkpoint as Spark's state reader reads it back: its ``operatorId`` (the ``state/<n>``
    folder it wrote), a join's ``joinSide`` (its four stores read as one per side) and a
    transformWithState variable's ``stateVarName``, options of
    ``org.apache.spark.sql.execution.datasources.v2.state.StateDataSource``. The same text for
    every problem of one verdict, so that the fixes list it once."""
    reads = []
    for op in sorted(old, key=lambda o: o.number)[:_MOST_MIGRATED]:
        what = f"state/{op.number}" + (f" ({printable(op.name)})" if op.name else "")
        for options in _reader_options(op):
            reads.append(
                'spark.read.format("statestore")'
                + "".join(f".option({json.dumps(k)}, {json.dumps(v)})" for k, v in options)
                + f'.load("<checkpoint>") for {what}'
            )
    if len(old) > _MOST_MIGRATED:
        reads.append(f"and so on for the other {len(old) - _MOST_MIGRATED} operators")
    if not reads:
        return ""
    return (
        "  - or migrate the state: read the old checkpoint's state with Spark's state reader ("
        + "; ".join(reads)
        + ") and rebuild it in the new query (transformWithState takes it as initialState), on "
        "a new checkpoint location, where " + NEW_LOCATION_EFFECTS
    )


def _reader_options(op: StatefulOperator) -> list[list[tuple[str, object]]]:
    """Spark state reader options per read of one old operator's state."""
    base: list[tuple[str, object]] = [("operatorId", op.number)]
    if op.name == "symmetricHashJoin" or any(
        name.rpartition("/")[2].endswith("keyWithIndexToValue") for name in op.stores
    ):
        return [[*base, ("joinSide", side)] for side in ("left", "right")]
    if op.name in TRANSFORM_WITH_STATE:
        variables = sorted(
            {
                family
                for name in op.stores
                for family in [name.partition("/")[2]]
                if family and not family.startswith(("$", "_"))
            }
        )
        if variables:
            return [[*base, ("stateVarName", v)] for v in variables]
        return [base]
    stores = sorted(op.stores)
    if stores and "default" not in stores and len(stores) == 1:
        return [[*base, ("storeName", stores[0])]]
    return [base]


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
        return "group by the same columns with the same types, in the same order"
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


def key_advice(kind: str, stored: object, schema: object) -> str | None:
    """How to keep a key as it was, from the user's own change (the fields of the stored key
    and the new one, Spark's schema JSON): the columns to group by again, to cast back to their
    old type, or to leave out; ``None`` where the fields cannot be read."""
    was, now = _key_fields(stored), _key_fields(schema)
    if was is None or now is None:
        return None
    role = KIND_BY_NAME[kind].role if kind in KIND_BY_NAME else ""
    verb = {"deduplication": "deduplicate on", "join": "join on"}.get(role, "group by")
    steps = []
    names_now = dict(now)
    removed = [n for n, _ in was if n not in names_now]
    added = [n for n, _ in now if n not in dict(was)]
    for name, kind_was in was:
        kind_now = names_now.get(name)
        if kind_now is not None and kind_now != kind_was and kind_was.isalpha():
            steps.append(f'cast {name} back to {kind_was}: F.col("{name}").cast("{kind_was}")')
    if removed:
        steps.append(f"{verb} {', '.join(removed)} again")
    if added:
        steps.append(f"leave {', '.join(added)} out of the key")
    if not steps:
        return None
    order = ", ".join(n for n, _ in was)
    return f"{'; '.join(steps)}; the key was ({order}), in that order"


def _key_fields(schema: object) -> list[tuple[str, str]] | None:
    """A struct schema's top-level (name, type) pairs; a nested type as its JSON kind."""
    try:
        tree = json.loads(schema) if isinstance(schema, str) else schema
    except (ValueError, RecursionError):
        return None
    fields = tree.get("fields") if isinstance(tree, dict) else None
    if not isinstance(fields, list):
        return None
    out = []
    for field in fields:
        if not isinstance(field, dict):
            return None
        kind = field.get("type")
        text = (
            kind
            if isinstance(kind, str)
            else str(kind.get("type"))
            if isinstance(kind, dict)
            else "?"
        )
        out.append((printable(str(field.get("name"))), text))
    return out


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
    "sink": "the sink",
    "checkpoint": "the checkpoint's own files",
    "outputMode": "the output mode",
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
