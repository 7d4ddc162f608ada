"""Would Spark 4.3 restart a changed streaming query on a checkpoint? Its own verdict.

Spark checks a restarted query in this order, and stops at the first failure:

1. Sources, when the query starts running (``MicroBatchExecution``). Under source evolution
   (``spark.sql.streaming.queryEvolution.enableSourceEvolution``, pinned in the checkpoint, offset
   log v2) every source must be named and sources are matched by name; otherwise by position,
   and their number must not change (``OffsetSeq.toStreamProgress``: ``AssertionError``). For
   every file source the files of the last committed batch are listed again with the source's
   path as their base (``FileStreamSource.getBatch``): a file outside the new path is
   ``IllegalArgumentException: Wrong basePath``.
2. Stateful operators, when the first batch is planned (``IncrementalExecution``): Spark numbers
   them by their position in the plan (``state/<n>``) and compares ``(n, operatorName)`` with the
   checkpoint's state metadata (``STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA``); a
   stateful query on a checkpoint without state fails with
   ``STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY``.
3. Per operator in that order: every state store's key and value schema against the stored one
   (``StateSchemaCompatibilityChecker``: ``STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE``, then
   ``..._VALUE_...``), then, for transformWithState, its operator properties (time mode, output
   mode, state variable types: ``STATE_STORE_INVALID_CONFIG_AFTER_RESTART``,
   ``STATE_STORE_INVALID_VARIABLE_TYPE_CHANGE``).

The schema rule is ``DataType.equalsIgnoreNameAndCompatibleNullability(new, stored)``: field
names are ignored, the number of fields and their types must be equal, and a field (array
element, map value) stored as nullable may become non-nullable but not the other way round.
Equal schemas are not checked further; a deduplication's value (a placeholder) is never
checked; transformWithState under the Avro encoding may evolve its values as Avro allows.

:func:`check_checkpoint` mirrors these checks on a checkpoint read by
:func:`~pytest_opid.spark.checkpoint.read.read_checkpoint` and a new query's fingerprint;
:func:`check_fingerprint` does the same from the fingerprint of the query that wrote the
checkpoint. Both report every problem, Spark's first one first, and warn about restarts that
succeed but do not do what the code says: settings the checkpoint pins (shuffle partitions),
changes the Structured Streaming guide forbids that Spark does not check (another source in the
same position), and state read by position under new names (a changed aggregate function or
key of the same type). What only the checkpoint knows (which files the last batch read) is, from
a fingerprint, a problem that says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.result import (
    Fingerprint,
    RestoreCheck,
    StateOperator,
)
from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.checkpoint.state_rows import StateSample
from pytest_opid.spark.renamings import current
from pytest_opid.spark.restart.findings import (
    WIDENED_KINDS,
    Findings,
    OldQuery,
    OldSource,
    StatefulOperator,
    plan_of,
    stateful_operator,
)
from pytest_opid.spark.restart.output_modes import check_output_mode
from pytest_opid.spark.restart.sinks import (
    check_endpoints,
    check_new_location,
    check_trigger,
    new_location,
)
from pytest_opid.spark.restart.sources import check_sources
from pytest_opid.spark.restart.state import check_state
from pytest_opid.spark.restart.widening import as_nullable
from pytest_opid.spark.source_entries import parse_source
from pytest_opid.spark.versions import (
    OPERATOR_METADATA,
    WIDENING,
    engine_line,
    feature_line,
    installed_line,
    judging_line,
    require,
)
from pytest_opid.spark.vocabulary import (
    ALWAYS_NULLABLE,
    ENCODING,
    ENCODING_FACT,
    ENGINE,
    SHUFFLE_PARTITIONS,
    SOURCE_EVOLUTION,
    TRANSFORM_WITH_STATE,
)
from pytest_opid.spark.words import capitalized
from pytest_opid.text import printable


def check_checkpoint(
    checkpoint: Checkpoint,
    new: Fingerprint,
    planned: bool = False,
    previous: Fingerprint | None = None,
    samples: Mapping[int, StateSample] | None = None,
    readers: Mapping[int, Mapping[str, Any]] | None = None,
    here: bool = False,
) -> RestoreCheck:
    """The judged Spark line's verdict on restarting the query of ``new`` on ``checkpoint``
    (``here``: on it even where ``new``'s writer names another checkpoint location).
    ``planned``: ``new`` was planned with the settings the checkpoint pins, as Spark plans a
    restarted query (``_check_program`` in :mod:`pytest_opid.spark`). The checkpoint
    keeps the state's schemas and field names, not the plan: what the state means (a window,
    a key or aggregate expression under the same name) is checked against ``previous``, the
    fingerprint of the query that wrote the checkpoint, where given, else against what
    ``samples`` of the state's rows show (a window's bounds), and otherwise said to be
    unverified. ``readers``: what the new query's Python data source readers answer on the
    checkpoint's offsets."""
    _require_streaming(new, "a checkpoint")
    new = current(new)  # in the newest line's names, as the checkpoint's metadata, and
    meanings: dict[int, StateOperator] = {}
    if previous is not None:
        _require_streaming(previous, "a checkpoint")
        previous = current(previous)  # ... the previous fingerprint, wherever it was made
        meanings = {s.state_operator_id: s for s in previous.state_operators or ()}
    confs = checkpoint.confs
    operators = []
    for op in checkpoint.state_operators:
        stores: dict[str, tuple[str | None, str | None]] = {}
        for store in op.stores:
            if store.schema_file is None:
                continue  # no schema yet: Spark writes one at restart, without a check
            for family in store.column_families:
                name = f"{store.name}/{family.name}" if store.schema_version == 3 else store.name
                stores[name] = (family.key_schema_json, family.value_schema_json)
        operators.append(
            StatefulOperator(
                number=op.operator_id,
                name=op.operator_name,
                stores=stores,
                properties=op.properties if op.operator_name in TRANSFORM_WITH_STATE else None,
                partitions=op.num_partitions,
                schemas_known=True,
                meaning=_written_meaning(meanings.get(op.operator_id), op.operator_name),
            )
        )
    named = checkpoint.offset_log_version == 2 or confs.get(SOURCE_EVOLUTION) == "true"
    sources = tuple(
        OldSource(s.source_id if named else str(s.position), None, s.offset, s.files)
        for s in checkpoint.sources
    )
    last, committed = checkpoint.last_batch, checkpoint.last_committed_batch
    restart = None if last is None else (last + 1 if committed == last else last)
    shuffle = confs.get(SHUFFLE_PARTITIONS)
    widened = confs.get(ALWAYS_NULLABLE) == "true"
    old = OldQuery(
        origin="the checkpoint",
        from_checkpoint=True,
        batches=last is not None,
        restart_batch=restart,
        last_committed=committed,
        operators=tuple(operators),
        sources=sources,
        named=named,
        widened=widened,
        operator_metadata=any(op.metadata_version > 0 for op in checkpoint.state_operators),
        avro=confs.get(ENCODING) == "avro",
        with_plan=previous is not None,
        endpoints=None if previous is None else previous.endpoints,
        samples=samples,
        plan=None if previous is None else plan_of(previous),
        readers=readers,
    )
    exact = widened or planned or not _widened_by_its_spark(new)
    partitions = int(shuffle) if shuffle and shuffle.isdigit() else None
    return _judge(Findings(old, new, partitions, nullability_exact=exact), checkpoint, here)


def _written_meaning(
    state: StateOperator | None, operator_name: str | None
) -> tuple[tuple[str, str], ...]:
    """The state meaning the previous fingerprint records for a checkpoint's operator: only
    where it names the operator the checkpoint's metadata does (else it is another query's)."""
    if state is None or (operator_name is not None and state.kind != operator_name):
        return ()
    return state.meaning


def check_fingerprint(old: Fingerprint, new: Fingerprint) -> RestoreCheck:
    """Spark 4.3's verdict on restarting the query of ``new`` on the checkpoint the query of
    ``old`` wrote (after at least one batch). What only the checkpoint records (the files its
    last batch read, pinned settings) is reported as such."""
    _require_streaming(new, "the previous query's checkpoint")
    old, new = current(old), current(new)  # Spark's renamings between lines are no change
    if old.mode == "batch":
        raise DocumentError(
            "the previous fingerprint is a batch (non-streaming) DataFrame's: a batch job writes "
            "no checkpoint to restart on; fingerprint the streaming query that wrote it"
        )
    parsed = None if old.sources is None else tuple(parse_source(s) for s in old.sources)
    named = bool(parsed) and any(s.name for s in parsed or ())
    sources = (
        None
        if parsed is None
        else tuple(
            OldSource(s.name if named and s.name else str(i), s) for i, s in enumerate(parsed)
        )
    )
    state_ops = old.state_operators or ()
    # The Spark that wrote the checkpoint: the one the previous fingerprint was made with, or
    # the judged one where it does not say (a checkpoint is never from a later line).
    line = judging_line()
    made_on = engine_line(old.engine_version)
    writer = line if made_on is None else min(made_on, line)
    widened = writer >= feature_line(WIDENING)
    found = Findings(
        OldQuery(
            origin="the previous query's checkpoint",
            from_checkpoint=False,
            batches=True,
            restart_batch=1,
            last_committed=None,
            operators=tuple(stateful_operator(s, old, widened) for s in state_ops),
            sources=sources,
            named=named,
            widened=widened,
            operator_metadata=writer >= feature_line(OPERATOR_METADATA),
            # transformWithState's encoding, which the checkpoint pins (recorded as a fact)
            avro=any((ENCODING_FACT, "avro") in s.meaning for s in state_ops),
            endpoints=old.endpoints,
            plan=plan_of(old),
        ),
        new,
        None,
        nullability_exact=widened or not _widened_by_its_spark(new),
    )
    if made_on is not None and made_on != line:
        found.warn(
            "engine_version",
            f"The previous fingerprint was made with PySpark {old.engine_version}; this "
            f"verdict is Spark {line}'s, judged as if the checkpoint was written by Spark "
            f"{writer}"
            + (
                f" (Spark {line} cannot check by name the operators of a checkpoint without "
                "operator metadata)"
                if writer < feature_line(OPERATOR_METADATA) <= line
                else ""
            )
            + ".",
        )
    return _judge(found)


def _widened_by_its_spark(fp: Fingerprint) -> bool:
    """``fp``'s state schemas may have been widened to nullable by its own Spark (made on
    4.3+, or on an unknown line where the installed one is 4.3+). A field that is not nullable
    in a store Spark widens shows it was planned without the widening (as on a checkpoint
    that pins none)."""
    made_on = engine_line(fp.engine_version) or installed_line()
    if made_on < feature_line(WIDENING) or (ALWAYS_NULLABLE, "false") in fp.settings:
        return False
    for op in fp.state_operators or ():
        if op.kind not in WIDENED_KINDS:
            continue
        for store in op.stores:
            for schema in (store.key_schema, store.value_schema):
                if schema is not None and as_nullable(schema) != _compact(schema):
                    return False
    return True


def _compact(schema: str) -> str | None:
    """The schema JSON as :func:`as_nullable` writes it, to compare the two."""
    try:
        return json.dumps(json.loads(schema), separators=(",", ":"))
    except (ValueError, RecursionError):
        return schema


def _require_streaming(new: Fingerprint, what: str) -> None:
    if new.mode == "batch" or new.state_operators is None:
        raise DocumentError(
            f"the new program is a batch (non-streaming) DataFrame: only a streaming query "
            f"restarts on {what}; fingerprint the streaming DataFrame "
            "(spark.readStream...) or its StreamingQuery"
        )
    # A line without transformWithState (3.5) cannot run the query at all: one line, not a
    # verdict in words that line does not have.
    if any(s.kind in TRANSFORM_WITH_STATE for s in new.state_operators):
        require("transformWithState", judging_line())


def _judge_state_given(found: Findings, checkpoint: Checkpoint, moved: str) -> None:
    """The writer names another checkpoint location than the one judged: it may be a new
    location (Spark starts the query there as a new one) or the judged state's own under a
    name this check cannot resolve (a copy of it, a mount). Say so in one line, and judge the
    state given as a restart on it: what Spark would refuse or read as something else there
    leaves the verdict "not verified", never "safe"."""
    copied = f", a copy of {printable(checkpoint.copied_from)}" if checkpoint.copied_from else ""
    found.warn(
        "checkpoint",
        f"The new query names checkpointLocation {printable(moved)}, not the checkpoint "
        f"judged ({printable(checkpoint.path)}{copied}): judged as a new query there, and "
        "its state as a restart on the checkpoint judged.",
    )
    if not found.old.batches:
        return
    given = Findings(found.old, found.new, found.shuffle_partitions, found.nullability_exact)
    check_sources(given)
    check_state(given)
    for item in (*given.problems, *given.reinterpreted):
        found.unverify(
            "checkpoint location",
            f"If {printable(moved)} is the checkpoint judged under another name, the restart "
            f"on its state is not safe: {item.message}\n"
            f"If it is a new location, {found.spark} starts the query there with empty state. "
            "Check the restart against the checkpoint the new query names "
            "(opid check-restore <that location> PROGRAM).",
            state_id=item.state_id,
            name=item.name,
        )


def _judge(
    found: Findings, checkpoint: Checkpoint | None = None, here: bool = False
) -> RestoreCheck:
    verified: tuple[str, ...] = ()
    # refused when the query starts, before any state is read: the same on every route
    check_output_mode(found)
    moved = None if here else new_location(found, checkpoint)
    if moved is not None:
        # Spark starts the query as a new one there: the old checkpoint's state and offsets
        # are not read, and what the sources read again reaches the sink again.
        check_trigger(found)
        check_new_location(found, checkpoint, moved)
        if checkpoint is not None:
            _judge_state_given(found, checkpoint, moved)
        return RestoreCheck(
            ENGINE,
            not found.problems,
            tuple(found.problems),
            tuple(found.warnings),
            tuple(found.reinterpreted),
            tuple(
                what
                for what in ("checkpoint location", "sink", "sources")
                if not any(u.kind == what for u in found.unverified)
            ),
            tuple(found.unverified) if not found.problems else (),
            resumes=(
                f"{found.spark} starts the new query on a new checkpoint location "
                f"({moved}): empty state, its sources from their beginning"
            ),
        )
    if not found.old.batches:
        found.warn(
            "state_operators",
            f"{found.old.origin} has no batch yet: Spark starts the query as a new one "
            "(nothing is checked or restored).",
        )
    else:
        check_sources(found)
        check_state(found)
        endpoints = check_endpoints(found, checkpoint)
        if not found.nullability_exact and found.new_ops:
            made_with = found.new.engine_version or "installed"
            found.warn(
                "value_schema",
                f"{capitalized(found.old.origin)} was written without the state schema "
                f"widening of Spark 4.3 (a query started on an earlier line), and the new "
                f"fingerprint was made with it (PySpark {made_with}): "
                f"{found.spark} plans the restarted query without it, so whether a field that "
                "could not be null may now be null (which Spark refuses) was not checked. "
                "Check the program itself against the checkpoint "
                "(opid check-restore CHECKPOINT PROGRAM) to have it compared.",
            )
        old = found.old
        if old.from_checkpoint:
            verified = ("sources", "stateful operators", "state schemas", "state field names")
            verified += endpoints
            if old.with_plan:
                verified += ("state meaning (from the previous fingerprint)",)
        else:
            verified = (
                "sources (as the previous fingerprint records them)",
                "stateful operators",
                "state schemas (as the previous fingerprint records them)",
                "state meaning",
                *endpoints,
            )
    return RestoreCheck(
        ENGINE,
        not found.problems,
        tuple(found.problems),
        tuple(found.warnings),
        tuple(found.reinterpreted),
        verified,
        tuple(found.unverified) if not found.problems else (),
        resumes=(
            f"{found.spark} restarts the new query from {found.old.origin}, on its state and "
            "offsets"
        ),
    )
