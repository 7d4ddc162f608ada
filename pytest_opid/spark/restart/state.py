"""The stateful operators: matched to the checkpoint's ``state/<n>`` by position (and, from Spark
4.0 on, by the name in the operator metadata), then each operator's schemas, settings, state
meaning and partitions."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from pytest_opid.spark.restart.checkpoint_meaning import checkpoint_meaning
from pytest_opid.spark.restart.findings import Findings, StatefulOperator
from pytest_opid.spark.restart.meaning import compare_meaning, evolved_processor
from pytest_opid.spark.restart.schemas import (
    check_schemas,
    unchecked_schemas,
)
from pytest_opid.spark.restart.transform_with_state import (
    check_properties,
)
from pytest_opid.spark.vocabulary import (
    FUNCTION_DIGEST_FACT,
    SCHEMA_CHECK_FACT,
    SHUFFLE_PARTITIONS,
    TRANSFORM_WITH_STATE,
)
from pytest_opid.spark.words import (
    FIX_MEANING,
    FIX_NEW_CHECKPOINT,
    NEW_LOCATION_EFFECTS,
    capitalized,
    fix_migrate,
    operator_label,
)


def check_state(found: Findings) -> None:
    restart = found.old.restart_batch
    if restart is None or restart == 0:
        return  # Spark checks stateful operators only when it restarts after batch 0
    old_ops = {op.number: op for op in found.old.operators}
    new_ops = {op.number: op for op in found.new_ops}
    if not found.line.at_least(4, 0) or (old_ops and not found.old.operator_metadata):
        # Spark 3.5, or a later Spark on a checkpoint 3.5 wrote: no operator metadata, so
        # IncrementalExecution skips the stateful-operator check ("previously run on lower
        # versions") and each operator finds its state by position alone.
        state_by_position(found, old_ops, new_ops)
        return
    known = {n: op.name for n, op in old_ops.items() if op.name is not None}
    if known:
        mismatched = [
            n
            for n in sorted(known.keys() | new_ops.keys())
            if known.get(n, "not found") != (new_ops[n].name if n in new_ops else "not found")
        ]
        if mismatched:
            not_matching(found, known, new_ops, mismatched)
    elif not old_ops and new_ops:
        missing_state_directory(found, new_ops)
    for number in sorted(new_ops):
        new_op, old_op = new_ops[number], old_ops.get(number)
        if old_op is None or (old_op.name is not None and old_op.name != new_op.name):
            continue
        refused = len(found.problems)
        check_schemas(found, old_op, new_op)
        if (SCHEMA_CHECK_FACT, "off") in new_op.meaning and len(found.problems) > refused:
            unchecked_schemas(found, refused, old_op, new_op)
        check_properties(found, old_op, new_op)
        if len(found.problems) == refused:
            check_meaning(found, old_op, new_op)
        check_partitions(found, old_op, new_op)


def state_by_position(
    found: Findings,
    old_ops: Mapping[int, StatefulOperator],
    new_ops: Mapping[int, StatefulOperator],
) -> None:
    """Spark 3.5, or 4.x on a checkpoint 3.5 wrote: no operator metadata, so no
    stateful-operator check. Each operator loads ``state/<n>`` by its position and checks only
    the schemas there, whichever operator wrote it (a removed operator's neighbour reads its
    state); an operator whose ``state/<n>`` was never written fails when its state store loads
    the last batch's delta file, after the schema checks of the others."""
    if found.line.at_least(4, 0):
        why = (
            f"{found.old.origin} has no operator metadata (Spark 3.5 wrote it), so "
            f"{found.spark} cannot match the stateful operators by name and checks only "
            "that the state schemas fit"
        )
    else:
        why = (
            f"{found.spark} writes no operator metadata and checks only that the state schemas fit"
        )
    for number in sorted(new_ops):
        new_op, old_op = new_ops[number], old_ops.get(number)
        if old_op is None:
            continue
        refused = len(found.problems)
        check_schemas(found, old_op, new_op)
        if (SCHEMA_CHECK_FACT, "off") in new_op.meaning and len(found.problems) > refused:
            unchecked_schemas(found, refused, old_op, new_op)
        if len(found.problems) > refused:
            continue
        if old_op.name is not None and new_op.name is not None and old_op.name != new_op.name:
            found.reinterpret(
                "state_operators",
                f"{found.spark} restarts and {new_op.name} {operator_label(new_op)} reads "
                f"state/{number}, which {old_op.name} {operator_label(old_op)} wrote: "
                f"{why}, so the old state is read under another meaning.\n"
                "Fix:\n"
                "  - keep the stateful operators the same and in the same order as in the "
                "query that wrote the checkpoint\n" + FIX_NEW_CHECKPOINT,
                state_id=str(number),
                operator_id=new_op.operator_id,
                name=old_op.name,
            )
        else:
            check_meaning(found, old_op, new_op)
        check_partitions(found, old_op, new_op)
    missing = sorted(n for n in new_ops if n not in old_ops)
    if missing:
        first = missing[0]
        op = new_ops[first]
        batch = found.old.last_committed if found.old.last_committed is not None else "<n>"
        delta = f"<checkpoint>/state/{first}/0/{batch}.delta"
        if found.line.at_least(4, 0):
            failure = (
                "CANNOT_LOAD_STATE_STORE.CANNOT_READ_DELTA_FILE_NOT_EXISTS: An error occurred "
                f"during loading state. Error reading delta file {delta}: it does not exist "
                f"(java.io.FileNotFoundException). {capitalized(found.old.origin)} has no "
                f"operator metadata (Spark 3.5 wrote it), so {found.spark} does not check the "
                "stateful operators by name"
            )
        else:
            failure = f"java.io.FileNotFoundException: File {delta} does not exist"
        found.problem(
            "state_operators",
            f"{found.spark} fails the first batch after the restart with "
            f"{failure}. {op.name} {operator_label(op)} is stateful operator {first} "
            f"now, and {found.old.origin} has no state/{first}: {found.spark} numbers "
            "stateful operators by their position in the plan and loads the state of the "
            "last committed batch for each.\n"
            "Fix:\n"
            "  - keep the stateful operators the same and in the same order as in the query "
            "that wrote the checkpoint (a new stateful operator needs a new checkpoint)\n"
            + FIX_NEW_CHECKPOINT,
            state_id=str(first),
            operator_id=op.operator_id,
        )


def not_matching(
    found: Findings,
    known: Mapping[int, str],
    new_ops: Mapping[int, StatefulOperator],
    numbers: Sequence[int],
) -> None:
    before = ", ".join(f"(OperatorId: {n} -> OperatorName: {known[n]})" for n in sorted(known))
    now = ", ".join(
        f"(OperatorId: {n} -> OperatorName: {new_ops[n].name})" for n in sorted(new_ops)
    )
    lines = []
    for n in numbers:
        was = known.get(n)
        op = new_ops.get(n)
        is_now = f"{op.name} {operator_label(op)}".rstrip() if op is not None else None
        if was and is_now:
            lines.append(f"  state/{n}: written by {was}, now read by {is_now}")
        elif was:
            lines.append(f"  state/{n}: written by {was}, no stateful operator reads it now")
        else:
            lines.append(f"  state/{n}: new {is_now}; {found.old.origin} has no state/{n}")
    first = numbers[0]
    op = new_ops.get(first)
    found.problem(
        "state_operators",
        f"{found.spark} fails the first batch after the restart with "
        "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA: Stateful operators in the "
        f"metadata: [{before}]; Stateful operators in current batch: [{now}]. Spark numbers "
        "stateful operators by their position in the plan (state/<n>, parents before "
        "children, left before right):\n" + "\n".join(lines) + "\n"
        "Fix:\n"
        "  - keep the stateful operators (aggregations, dropDuplicates / "
        "dropDuplicatesWithinWatermark, stream-stream joins, applyInPandasWithState / "
        "transformWithState, streaming limits) the same and in the same order as in the "
        "query that wrote the checkpoint\n" + FIX_NEW_CHECKPOINT + _migrate(found),
        state_id=str(first),
        operator_id=op.operator_id if op is not None else None,
        name=known.get(first),
    )


def _migrate(found: Findings) -> str:
    """The migration fix, on its own line, naming the old checkpoint's operators."""
    text = fix_migrate(found.old.operators)
    return "\n" + text if text else ""


def missing_state_directory(found: Findings, new_ops: Mapping[int, StatefulOperator]) -> None:
    now = ", ".join(
        f"(OperatorId: {n} -> OperatorName: {new_ops[n].name})" for n in sorted(new_ops)
    )
    first = min(new_ops)
    found.problem(
        "state_operators",
        f"{found.spark} fails the first batch after the restart with "
        "STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY: Cannot restart streaming "
        "query with stateful operators because the state directory is empty or missing. "
        f"Stateful operators in current batch: [{now}]. {capitalized(found.old.origin)} has no "
        "state: the query that wrote the checkpoint was stateless.\n"
        "Fix:\n"
        "  - keep the query stateless on this checkpoint\n" + FIX_NEW_CHECKPOINT,
        state_id=str(first),
        operator_id=new_ops[first].operator_id,
    )


def check_meaning(found: Findings, old: StatefulOperator, new: StatefulOperator) -> None:
    """Restarts Spark accepts whose state the new query reads as something else
    (:mod:`pytest_opid.spark.query.meaning`): not safe. transformWithState's variables are judged
    with its properties."""
    evolved = False
    if new.name in TRANSFORM_WITH_STATE:
        # its variables are judged with its properties; its grouping key here, as any key
        evolved = bool(old.meaning) and _declared(old) != _declared(new)
        # (a checkpoint records no key facts: its store keyed by as many fields as the new
        # query's grouping key is the one to read)
        count = sum(1 for fact, _ in new.meaning if fact.startswith("key "))
        old, new = _keys_only(old, count), _keys_only(new, count)
        if not new.meaning or (not old.meaning and not found.old.from_checkpoint):
            return  # a snapshot from before the keys were recorded: nothing to compare
    if found.old.from_checkpoint and not old.meaning:
        samples = found.old.samples
        changes = checkpoint_meaning(
            new.number,
            new.name or "",
            old.stores,
            new.stores,
            new.meaning,
            sample=None if samples is None else samples.get(new.number),
            rows_read=samples is not None,
        )
    else:
        changes = compare_meaning(
            new.number, new.name or "", old.meaning, new.meaning, found.old.origin
        )
    where = {"state_id": str(new.number), "operator_id": new.operator_id, "name": old.name}
    for change in changes:
        if evolved and change.fix is not None:
            change = evolved_processor(change)  # the variables' own rules judged the change
        if change.reinterprets:
            found.reinterpret(change.kind, change.message + (change.fix or FIX_MEANING), **where)
        elif not change.verified:
            found.unverify(change.kind, change.message, **where)
        else:
            found.warn(change.kind, change.message, **where)


def _declared(op: StatefulOperator) -> tuple[tuple[str, str], ...]:
    """What a transformWithState processor declares: its state variables and modes."""
    return tuple(
        f for f in op.meaning if f[0].startswith("state variable") or f[0].endswith(" mode")
    )


def _keys_only(op: StatefulOperator, count: int) -> StatefulOperator:
    """``op`` with only its grouping key facts, and its key schema as the checkpoint files
    it in every column family (the first one's keyed by ``count`` fields: the grouping key's)."""
    keys = tuple(f for f in op.meaning if f[0].startswith("key "))
    # and the processor's code (function_digest), judged as any state function's
    code = tuple(f for f in op.meaning if f[0] in ("processor", FUNCTION_DIGEST_FACT))
    # a value or list variable's column family is keyed by the grouping key alone (a map's by
    # the grouping key and its user key, a timer's by the key and a time)
    first = next(
        (
            key
            for _, (key, _) in sorted(op.stores.items())
            if key is not None and key.count('"name"') == count
        ),
        None,
    )
    stores = {"default": (first, None)} if first is not None else {}
    return dataclasses.replace(op, meaning=keys + code if keys else (), stores=stores)


def check_partitions(found: Findings, old: StatefulOperator, new: StatefulOperator) -> None:
    before = old.partitions or found.shuffle_partitions
    now = new.partitions
    if before is None or now is None or before == now:
        return
    found.warn(
        "state_config",
        f"state/{new.number} ({new.name}) has {before} partitions in {found.old.origin} "
        f"({SHUFFLE_PARTITIONS}={before}); the new query asks for {now}, which Spark "
        "ignores on this checkpoint: it restores the setting from the checkpoint's offset log "
        f"and keeps {before} state partitions. To change it, start on a new checkpoint "
        "location, where " + NEW_LOCATION_EFFECTS + ".",
        state_id=str(new.number),
        operator_id=new.operator_id,
        name=old.name,
    )
