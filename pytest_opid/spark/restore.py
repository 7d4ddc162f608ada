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
:func:`~pytest_opid.spark.checkpoint.read_checkpoint` and a new query's fingerprint;
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.result import (
    UNKNOWN,
    Fingerprint,
    RestoreCheck,
    RestoreProblem,
    StateOperator,
)
from pytest_opid.spark.checkpoint import Checkpoint
from pytest_opid.spark.meaning import SCHEMA_CHECK_FACT
from pytest_opid.spark.plan import PROPERTIES_STORE
from pytest_opid.spark.reinterpret import checkpoint_meaning, compare_meaning
from pytest_opid.spark.tws import ENCODING_FACT
from pytest_opid.spark.versions import judging_line
from pytest_opid.text import plural, printable, quote

__all__ = [
    "SHORTENED",
    "Source",
    "check_checkpoint",
    "check_fingerprint",
    "parse_source",
    "short_source",
]

ENGINE = "spark"

_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
_ALWAYS_NULLABLE = "spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled"
_SOURCE_EVOLUTION = "spark.sql.streaming.queryEvolution.enableSourceEvolution"
_ENCODING = "spark.sql.streaming.stateStore.encodingFormat"
_SCHEMA_CHECK = "spark.sql.streaming.stateStore.stateSchemaCheck"

#: Operators whose state schema may evolve (``supportsSchemaEvolution``) under Avro encoding.
_TRANSFORM_WITH_STATE = frozenset(
    {"transformWithStateExec", "transformWithStateInPandasExec", "transformWithStateInPySparkExec"}
)
#: Operators whose store Spark opens with ``formatValidationCheckValue=false``: the value
#: (a placeholder) is never compared.
_VALUE_UNCHECKED = frozenset({"dedupe"})

_FIX_NEW_CHECKPOINT = (
    "  - or run the changed query on a new checkpoint location: its state starts empty and "
    "its sources start from their beginning (or startingOffsets)"
)
_FIX_MEANING = (
    "\nFix:\n"
    "  - run the changed query on a new checkpoint location: its state starts empty and "
    "its sources start from their beginning (or startingOffsets)\n"
    "  - or keep the state's definition as it was, and make the change in a new query"
)
_FIX_MIGRATE = (
    '  - or migrate the state: read it with spark.read.format("statestore")'
    '.option("operatorId", {n}).load("<checkpoint>") and rebuild it in the new query '
    "(transformWithState takes it as initialState), on a new checkpoint location"
)


# -- sources --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """One source of a fingerprint (:attr:`~pytest_opid.result.Fingerprint.sources`):
    ``[@<name> ]FileSource <format> <qualified path>`` for a file source, else
    ``[@<name> ]<Spark's source name>`` (``rate-micro-batch``, ``kafka``...). ``name`` is the name
    given with ``.name()`` under source evolution."""

    text: str
    name: str | None
    kind: str
    fmt: str | None = None
    path: str | None = None

    @property
    def is_file(self) -> bool:
        return self.kind == "FileSource"

    def describe(self) -> str:
        body = f"{self.fmt} files in {self.path}" if self.is_file else self.kind
        return f"{quote(self.name)} ({printable(body)})" if self.name else printable(body)


def parse_source(text: str) -> Source:
    """Read one entry of :attr:`Fingerprint.sources <pytest_opid.result.Fingerprint.sources>`."""
    rest = text
    name = None
    if rest.startswith("@"):
        name, _, rest = rest[1:].partition(" ")
    if rest.startswith("FileSource "):
        _, fmt, path = [*rest.split(" ", 2), "", ""][:3]
        return Source(text, name, "FileSource", fmt or None, path or None)
    return Source(text, name, rest)


#: How a snapshot marks a file source's path it shortened to the folder's name.
SHORTENED = "…/"


def short_source(text: str) -> str:
    """A source as a committed snapshot keeps it: a file source's path shortened to its last
    folder's name (``FileSource json …/events``), anything else as it is."""
    source = parse_source(text)
    if not source.is_file or not source.path or source.path.startswith(SHORTENED):
        return text
    folder = source.path.rstrip("/").rsplit("/", 1)[-1]
    prefix = f"@{source.name} " if source.name else ""
    return f"{prefix}FileSource {source.fmt} {SHORTENED}{folder}"


def _same_path(previous: str | None, new: str | None) -> bool:
    """Equal paths; a snapshot's shortened path matches any path ending in its folder."""
    if previous and previous.startswith(SHORTENED) and new:
        return new.rstrip("/").rsplit("/", 1)[-1] == previous[len(SHORTENED) :]
    return previous == new


def _qualified(path: str) -> str:
    """A path as Hadoop's ``makeQualified(...).toString`` spells it: ``file:///x`` and
    ``file://x`` -> ``file:/x`` (the file source log keeps URIs, Spark compares these)."""
    if path.startswith("file://"):
        rest = path[len("file://") :]
        return "file:" + (rest if rest.startswith("/") else "/" + rest)
    if path.startswith("/"):
        return "file:" + path
    return path


# -- what the check reads --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Operator:
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
    meaning: tuple[tuple[str, str], ...] = ()  # spark.meaning's facts; () from a checkpoint


@dataclass(frozen=True)
class _OldSource:
    label: str  # position as text, or the source's name under source evolution
    source: Source | None  # from a fingerprint
    offset: str | None = None  # from a checkpoint
    files: tuple[str, ...] | None = None  # from a checkpoint: a file source's last batch


@dataclass(frozen=True)
class _Old:
    origin: str  # "the checkpoint", "the previous query's checkpoint"
    from_checkpoint: bool
    batches: bool  # a batch ran: Spark restarts rather than starts
    restart_batch: int | None  # the batch id the restart plans first
    last_committed: int | None
    operators: tuple[_Operator, ...]
    sources: tuple[_OldSource, ...] | None
    named: bool  # source evolution: sources matched by name, every one must be named
    nullability_known: bool  # False: the checkpoint predates state schema widening
    avro: bool  # transformWithState values evolve as Avro allows


def check_checkpoint(checkpoint: Checkpoint, new: Fingerprint) -> RestoreCheck:
    """Spark 4.3's verdict on restarting the query of ``new`` on ``checkpoint``."""
    _require_streaming(new, "a checkpoint")
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
            _Operator(
                number=op.operator_id,
                name=op.operator_name,
                stores=stores,
                properties=op.properties if op.operator_name in _TRANSFORM_WITH_STATE else None,
                partitions=op.num_partitions,
                schemas_known=True,
            )
        )
    named = checkpoint.offset_log_version == 2 or confs.get(_SOURCE_EVOLUTION) == "true"
    sources = tuple(
        _OldSource(s.source_id if named else str(s.position), None, s.offset, s.files)
        for s in checkpoint.sources
    )
    last, committed = checkpoint.last_batch, checkpoint.last_committed_batch
    restart = None if last is None else (last + 1 if committed == last else last)
    shuffle = confs.get(_SHUFFLE_PARTITIONS)
    old = _Old(
        origin="the checkpoint",
        from_checkpoint=True,
        batches=last is not None,
        restart_batch=restart,
        last_committed=committed,
        operators=tuple(operators),
        sources=sources,
        named=named,
        nullability_known=confs.get(_ALWAYS_NULLABLE) == "true",
        avro=confs.get(_ENCODING) == "avro",
    )
    return _Checker(old, new, int(shuffle) if shuffle and shuffle.isdigit() else None).run()


def check_fingerprint(old: Fingerprint, new: Fingerprint) -> RestoreCheck:
    """Spark 4.3's verdict on restarting the query of ``new`` on the checkpoint the query of
    ``old`` wrote (after at least one batch). What only the checkpoint records (the files its
    last batch read, pinned settings) is reported as such."""
    _require_streaming(new, "the previous query's checkpoint")
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
            _OldSource(s.name if named and s.name else str(i), s) for i, s in enumerate(parsed)
        )
    )
    state_ops = old.state_operators or ()
    return _Checker(
        _Old(
            origin="the previous query's checkpoint",
            from_checkpoint=False,
            batches=True,
            restart_batch=1,
            last_committed=None,
            operators=tuple(_operator(s, old) for s in state_ops),
            sources=sources,
            named=named,
            nullability_known=True,
            # transformWithState's encoding, which the checkpoint pins (spark.tws records it)
            avro=any((ENCODING_FACT, "avro") in s.meaning for s in state_ops),
        ),
        new,
        None,
    ).run()


def _require_streaming(new: Fingerprint, what: str) -> None:
    if new.mode == "batch" or new.state_operators is None:
        raise DocumentError(
            f"the new program is a batch (non-streaming) DataFrame: only a streaming query "
            f"restarts on {what}; fingerprint the streaming DataFrame "
            "(spark.readStream...) or its StreamingQuery"
        )


def _operator(s: StateOperator, fp: Fingerprint) -> _Operator:
    stores = {st.name: (st.key_schema, st.value_schema) for st in s.stores}
    properties = stores.pop(PROPERTIES_STORE, (None, None))[1]
    # The partitions of the exchange into the operator are its state's (the shuffle
    # partitions), except for a single partition (a global aggregation: Spark still files its
    # state under every shuffle partition, so nothing is known).
    partitions = next(
        (op.parallelism for op in fp.operators if op.operator_id == s.operator_id), -1
    )
    return _Operator(
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


# -- the checks ------------------------------------------------------------------------------------


class _Checker:
    def __init__(self, old: _Old, new: Fingerprint, shuffle_partitions: int | None) -> None:
        self.old = old
        self.new = new
        self.shuffle_partitions = shuffle_partitions
        self.problems: list[RestoreProblem] = []
        self.warnings: list[RestoreProblem] = []
        self.reinterpreted: list[RestoreProblem] = []
        self.new_ops = tuple(_operator(s, new) for s in new.state_operators or ())
        #: the Spark line whose restart this predicts, and how its messages name it
        self.line = judging_line()
        self.spark = f"Spark {self.line}"

    def run(self) -> RestoreCheck:
        if not self.old.batches:
            self.warn(
                "state_operators",
                f"{self.old.origin} has no batch yet: Spark starts the query as a new one "
                "(nothing is checked or restored).",
            )
        else:
            self.sources()
            self.state()
        return RestoreCheck(
            ENGINE,
            not self.problems,
            tuple(self.problems),
            tuple(self.warnings),
            tuple(self.reinterpreted),
        )

    def problem(self, kind: str, message: str, **where: Any) -> None:
        self.problems.append(RestoreProblem(kind, message, **where))

    def warn(self, kind: str, message: str, **where: Any) -> None:
        self.warnings.append(RestoreProblem(kind, message, **where))

    def reinterpret(self, kind: str, message: str, **where: Any) -> None:
        """Spark restarts, but the operator reads state written under another definition."""
        self.reinterpreted.append(RestoreProblem(kind, message, **where))

    # Sources ------------------------------------------------------------------------------

    def sources(self) -> None:
        old_sources = self.old.sources
        if old_sources is None or self.new.sources is None:
            missing = "the previous fingerprint" if old_sources is None else "the new fingerprint"
            self.warn(
                "sources",
                f"{missing} records no sources: Spark also checks the number of sources (and, "
                "for file sources, their paths); they were not compared.",
            )
            return
        new = [parse_source(s) for s in self.new.sources]
        new_named = [s for s in new if s.name]
        if self.old.named:
            unnamed = [(i, s) for i, s in enumerate(new) if not s.name]
            if unnamed:
                listed = ", ".join(f"source {i} {s.describe()}" for i, s in unnamed)
                self.problem(
                    "sources",
                    f"{self.spark} stops the restarted query with java.lang.AssertionError: "
                    '"assertion failed: All sources should be named at this point - validation '
                    f'should have happened in analysis". {_cap(self.old.origin)} was written '
                    f"with source evolution ({_SOURCE_EVOLUTION}=true, which the checkpoint "
                    "pins and Spark restores over the session's setting), so every source needs "
                    f"its name; without one now: {listed}.\n"
                    "Fix:\n"
                    '  - name every source again as before: spark.readStream.name("...")...\n'
                    + _FIX_NEW_CHECKPOINT,
                )
                return
            self.named_sources(old_sources, new)
            return
        if new_named:
            names = ", ".join(quote(s.name or "") for s in new_named)
            self.problem(
                "sources",
                f"{self.spark} stops the restarted query with "
                "STREAMING_QUERY_EVOLUTION_ERROR.CANNOT_ENABLE_ON_EXISTING_CHECKPOINT: the "
                f"sources are now named ({names}: source evolution), but "
                f"{self.old.origin}'s checkpoint was written without it (offset log format "
                "version 1), which cannot track sources by name.\n"
                "Fix:\n"
                "  - remove the .name() calls and keep the sources in their old order\n"
                "  - or start the named query on a new checkpoint location",
            )
            return
        if len(old_sources) != len(new):
            before = "; ".join(self.describe_old(s) for s in old_sources) or "none"
            now = "; ".join(f"{i}: {s.describe()}" for i, s in enumerate(new)) or "none"
            self.problem(
                "sources",
                f"{self.spark} stops the restarted query with java.lang.AssertionError: "
                f'"assertion failed: There are [{len(old_sources)}] sources in the checkpoint '
                f"offsets and now there are [{len(new)}] sources requested by the query. "
                'Cannot continue." Spark matches sources by position (sources/<n> in the '
                f"checkpoint). Before: {before}. Now: {now}.\n"
                "Fix:\n"
                "  - keep the same sources in the same order (a stream cannot be added to or "
                "removed from a running query's union or join)\n"
                + _FIX_NEW_CHECKPOINT
                + "\n  - to add or remove sources later, name them on the new checkpoint: "
                f'spark.readStream.name("...") with {_SOURCE_EVOLUTION}=true',
            )
            return
        for old_source, new_source in zip(old_sources, new, strict=True):
            self.same_source(old_source, new_source)

    def named_sources(self, old_sources: Sequence[_OldSource], new: Sequence[Source]) -> None:
        by_name = {s.name: s for s in new}
        for old_source in old_sources:
            found = by_name.pop(old_source.label, None)
            if found is None:
                self.warn(
                    "sources",
                    f"Source {quote(old_source.label)} is no longer read: Spark keeps its last "
                    "offset in the checkpoint and ignores it (it resumes there if a source of "
                    "that name comes back).",
                    name=old_source.label,
                )
            else:
                self.same_source(old_source, found)
        for source in by_name.values():
            self.warn(
                "sources",
                f"Source {source.describe()} is new to the checkpoint: Spark starts it from its "
                "first offset as on a new query (a file source reads every file already in "
                "its path; a renamed source reads its input again).",
                name=source.name,
            )

    def describe_old(self, s: _OldSource) -> str:
        if s.source is not None:
            return f"{s.label}: {s.source.describe()}"
        if s.files:
            read = printable(_directory(s.files[0]))
            return f"{s.label}: a file source (its last batch read {read})"
        if s.files is not None:
            return f"{s.label}: a file source"
        return f"{s.label}: offset {printable(s.offset or '-')}"

    def same_source(self, old: _OldSource, new: Source) -> None:
        label = f"source {old.label}" if not self.old.named else f"source {quote(old.label)}"
        if old.source is not None:  # from a fingerprint
            previous = old.source
            if previous.is_file and new.is_file:
                if not _same_path(previous.path, new.path):
                    # A warning, not a problem: only the checkpoint knows whether Spark fails.
                    # (In tests the inputs usually live in a fresh temporary folder per run.)
                    self.warn(
                        "sources",
                        f"{_cap(label)} now reads {printable(new.path or '?')} instead of "
                        f"{printable(previous.path or '?')}. Whether {self.spark} restarts depends "
                        "on what the checkpoint's last committed batch read: if it read any file "
                        f"from the old path, the restart fails with "
                        f'java.lang.IllegalArgumentException: "Wrong basePath {new.path} for '
                        "the root path: <that file>\" (Spark lists that batch's files again with "
                        "the new path as their base); if it read none (a batch that only "
                        "advanced the watermark), Spark restarts and reads the new path's files "
                        "that are not in its log yet. A fingerprint cannot tell: check the "
                        "checkpoint itself (check_restore(<checkpoint directory>, query)).\n"
                        "Fix:\n"
                        "  - keep reading the old path (move the new input under it)\n"
                        + _FIX_NEW_CHECKPOINT,
                        name=old.label,
                    )
                elif previous.fmt != new.fmt:
                    self.warn(
                        "sources",
                        f"{_cap(label)} reads {printable(new.path or '?')} as {new.fmt} instead "
                        f"of {previous.fmt}. Spark does not check it: files already in its log "
                        "are not read again and new ones are parsed as the new format.",
                        name=old.label,
                    )
            elif previous.kind != new.kind:
                self.swapped(label, previous.describe(), new, old.label)
            return
        # from a checkpoint
        if old.files is not None and new.is_file:
            base = new.path or ""
            outside = [f for f in old.files if not _qualified(f).startswith(base)]
            if outside:
                batch = self.old.last_committed
                self.problem(
                    "sources",
                    f"{self.spark} stops the restarted query with "
                    f'java.lang.IllegalArgumentException: "Wrong basePath {base} for the root '
                    f'path: {_qualified(outside[0])}". {_cap(label)} now reads '
                    f"{printable(base)}, but the checkpoint's last committed batch "
                    f"({batch}) read {plural(len(outside), 'file')} outside it, and at restart "
                    "Spark lists that batch's files again with the new path as their base "
                    "(FileStreamSource.getBatch).\n"
                    "Fix:\n"
                    f"  - keep reading the old path ({printable(_directory(outside[0]))}); put "
                    "the new input under it\n" + _FIX_NEW_CHECKPOINT,
                    name=old.label,
                )
        elif old.files is not None and not new.is_file:
            self.swapped(label, "a file source", new, old.label)
        elif old.files is None and new.is_file and old.offset is not None:
            self.swapped(label, f"a source at offset {printable(old.offset)}", new, old.label)

    def swapped(self, label: str, before: str, new: Source, name: str) -> None:
        self.warn(
            "sources",
            f"{_cap(label)} was {before} and is now {new.describe()}. Spark does not check "
            "it: it hands the new source the old one's last offset, which it may fail to read "
            "or read wrongly; the Structured Streaming guide does not allow changing a "
            "source's type. Use a new checkpoint location for another source.",
            name=name,
        )

    # State ---------------------------------------------------------------------------------

    def state(self) -> None:
        restart = self.old.restart_batch
        if restart is None or restart == 0:
            return  # Spark checks stateful operators only when it restarts after batch 0
        old_ops = {op.number: op for op in self.old.operators}
        new_ops = {op.number: op for op in self.new_ops}
        if not self.line.at_least(4, 0):
            self.state_by_position(old_ops, new_ops)
            return
        known = {n: op.name for n, op in old_ops.items() if op.name is not None}
        if known:
            mismatched = [
                n
                for n in sorted(known.keys() | new_ops.keys())
                if known.get(n, "not found") != (new_ops[n].name if n in new_ops else "not found")
            ]
            if mismatched:
                self.not_matching(known, new_ops, mismatched)
        elif not old_ops and new_ops:
            self.missing_state_directory(new_ops)
        for number in sorted(new_ops):
            new_op, old_op = new_ops[number], old_ops.get(number)
            if old_op is None or (old_op.name is not None and old_op.name != new_op.name):
                continue
            refused = len(self.problems)
            self.schemas(old_op, new_op)
            if (SCHEMA_CHECK_FACT, "off") in new_op.meaning and len(self.problems) > refused:
                self.unchecked_schemas(refused, old_op, new_op)
            self.properties(old_op, new_op)
            if len(self.problems) == refused:
                self.meaning(old_op, new_op)
            self.partitions(old_op, new_op)

    def state_by_position(
        self, old_ops: Mapping[int, _Operator], new_ops: Mapping[int, _Operator]
    ) -> None:
        """Spark 3.5: no operator metadata, so no stateful-operator check. Each operator loads
        ``state/<n>`` by its position and checks only the schemas there, whichever operator
        wrote it (a removed operator's neighbour reads its state); an operator whose
        ``state/<n>`` was never written fails when its state store loads the last batch's
        delta file, after the schema checks of the others."""
        for number in sorted(new_ops):
            new_op, old_op = new_ops[number], old_ops.get(number)
            if old_op is None:
                continue
            refused = len(self.problems)
            self.schemas(old_op, new_op)
            if (SCHEMA_CHECK_FACT, "off") in new_op.meaning and len(self.problems) > refused:
                self.unchecked_schemas(refused, old_op, new_op)
            if len(self.problems) > refused:
                continue
            if old_op.name is not None and new_op.name is not None and old_op.name != new_op.name:
                self.reinterpret(
                    "state_operators",
                    f"{self.spark} restarts and {new_op.name} {_label(new_op)} reads "
                    f"state/{number}, which {old_op.name} {_label(old_op)} wrote: "
                    f"{self.spark} writes no operator metadata and checks only that the state "
                    "schemas fit, so the old state is read under another meaning.\n"
                    "Fix:\n"
                    "  - keep the stateful operators the same and in the same order as in the "
                    "query that wrote the checkpoint\n" + _FIX_NEW_CHECKPOINT,
                    state_id=str(number),
                    operator_id=new_op.operator_id,
                    name=old_op.name,
                )
            else:
                self.meaning(old_op, new_op)
            self.partitions(old_op, new_op)
        missing = sorted(n for n in new_ops if n not in old_ops)
        if missing:
            first = missing[0]
            op = new_ops[first]
            batch = self.old.last_committed if self.old.last_committed is not None else "<n>"
            self.problem(
                "state_operators",
                f"{self.spark} fails the first batch after the restart with "
                f"java.io.FileNotFoundException: File <checkpoint>/state/{first}/0/{batch}.delta "
                f"does not exist. {op.name} {_label(op)} is stateful operator {first} "
                f"now, and {self.old.origin} has no state/{first}: {self.spark} numbers "
                "stateful operators by their position in the plan and loads the state of the "
                "last committed batch for each.\n"
                "Fix:\n"
                "  - keep the stateful operators the same and in the same order as in the query "
                "that wrote the checkpoint (a new stateful operator needs a new checkpoint)\n"
                + _FIX_NEW_CHECKPOINT,
                state_id=str(first),
                operator_id=op.operator_id,
            )

    def not_matching(
        self, known: Mapping[int, str], new_ops: Mapping[int, _Operator], numbers: Sequence[int]
    ) -> None:
        before = ", ".join(f"(OperatorId: {n} -> OperatorName: {known[n]})" for n in sorted(known))
        now = ", ".join(
            f"(OperatorId: {n} -> OperatorName: {new_ops[n].name})" for n in sorted(new_ops)
        )
        lines = []
        for n in numbers:
            was = known.get(n)
            op = new_ops.get(n)
            is_now = f"{op.name} {_label(op)}".rstrip() if op is not None else None
            if was and is_now:
                lines.append(f"  state/{n}: written by {was}, now read by {is_now}")
            elif was:
                lines.append(f"  state/{n}: written by {was}, no stateful operator reads it now")
            else:
                lines.append(f"  state/{n}: new {is_now}; {self.old.origin} has no state/{n}")
        first = numbers[0]
        op = new_ops.get(first)
        self.problem(
            "state_operators",
            f"{self.spark} fails the first batch after the restart with "
            "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA: Stateful operators in the "
            f"metadata: [{before}]; Stateful operators in current batch: [{now}]. Spark numbers "
            "stateful operators by their position in the plan (state/<n>, parents before "
            "children, left before right):\n" + "\n".join(lines) + "\n"
            "Fix:\n"
            "  - keep the stateful operators (aggregations, dropDuplicates / "
            "dropDuplicatesWithinWatermark, stream-stream joins, applyInPandasWithState / "
            "transformWithState, streaming limits) the same and in the same order as in the "
            "query that wrote the checkpoint\n"
            + _FIX_NEW_CHECKPOINT
            + "\n"
            + _FIX_MIGRATE.format(n=first),
            state_id=str(first),
            operator_id=op.operator_id if op is not None else None,
            name=known.get(first),
        )

    def missing_state_directory(self, new_ops: Mapping[int, _Operator]) -> None:
        now = ", ".join(
            f"(OperatorId: {n} -> OperatorName: {new_ops[n].name})" for n in sorted(new_ops)
        )
        first = min(new_ops)
        self.problem(
            "state_operators",
            f"{self.spark} fails the first batch after the restart with "
            "STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY: Cannot restart streaming "
            "query with stateful operators because the state directory is empty or missing. "
            f"Stateful operators in current batch: [{now}]. {_cap(self.old.origin)} has no "
            "state: the query that wrote the checkpoint was stateless.\n"
            "Fix:\n"
            "  - keep the query stateless on this checkpoint\n" + _FIX_NEW_CHECKPOINT,
            state_id=str(first),
            operator_id=new_ops[first].operator_id,
        )

    def schemas(self, old: _Operator, new: _Operator) -> None:
        if not old.schemas_known or not new.schemas_known:
            side = self.old.origin if not old.schemas_known else "the new fingerprint"
            self.warn(
                "value_schema",
                f"state/{new.number} ({new.name}): {side} records no state schemas (a "
                "fingerprint saved before they were recorded, or an operator whose schemas "
                "could not be read); Spark also checks them at restart, they were not compared.",
                state_id=str(new.number),
                operator_id=new.operator_id,
                name=old.name,
            )
            return
        for store, (key, value) in new.stores.items():
            stored = old.stores.get(store)
            if stored is None or key is None or value is None or None in stored:
                continue  # a new store or column family: Spark writes its schema, no check
            self.store(old, new, store, stored, (key, value))

    def store(
        self,
        old: _Operator,
        new: _Operator,
        store: str,
        stored: tuple[str | None, str | None],
        schemas: tuple[str, str],
    ) -> None:
        stored_key, stored_value = (_schema(s) for s in stored)
        key, value = (_schema(s) for s in schemas)
        check_value = new.name not in _VALUE_UNCHECKED
        if stored_key == key and (not check_value or stored_value == value):
            return
        # Spark 3.5 compares the schemas as they were written: nothing is widened to nullable.
        strict = self.old.nullability_known or not self.line.at_least(4, 0)
        where = {"state_id": str(new.number), "operator_id": new.operator_id, "name": old.name}
        if not _compatible(key, stored_key, strict):
            self.problem(
                "key_schema", self.schema_message("KEY", new, store, stored_key, key), **where
            )
            return
        avro = self.old.avro and new.name in _TRANSFORM_WITH_STATE
        if check_value and avro and not _avro_readable(stored_value, value):
            self.problem(
                "value_schema",
                self.schema_message("VALUE", new, store, stored_value, value, avro=True),
                **where,
            )
            return
        if check_value and not avro and not _compatible(value, stored_value, strict):
            self.problem(
                "value_schema",
                self.schema_message("VALUE", new, store, stored_value, value),
                **where,
            )
            return
        renamed = [
            f"{what} {change}"
            for what, before, after in (
                ("key", stored_key, key),
                ("value", stored_value, value if check_value else stored_value),
            )
            for change in _renames(before, after)
        ]
        if renamed:
            self.warn(
                "value_schema" if all(r.startswith("value") for r in renamed) else "key_schema",
                f"state/{new.number} ({new.name}), {_store_words(store)}: the schema is "
                f"compatible but its field names changed ({'; '.join(renamed)}). Spark ignores "
                "names and hands the old state to the new fields by position: check that every "
                "field still means what it meant (a changed aggregate function, grouping or "
                "deduplication column of the same type restarts silently on the old state).",
                **where,
            )

    def schema_message(
        self,
        which: str,
        new: _Operator,
        store: str,
        stored: Any,
        schema: Any,
        avro: bool = False,
    ) -> str:
        part = _part(new.name or "", store, which)
        changes = "; ".join(_differences(stored, schema)) or "the schemas differ"
        lower = which.lower()
        if not self.line.at_least(4, 0):
            head = (
                "org.apache.spark.sql.execution.streaming.state.StateSchemaNotCompatible (or "
                "InvalidUnsafeRowException, when another partition's state store fails first): "
                "Provided schema doesn't match to the schema for existing state! Please note "
                "that Spark allow difference of field name: check count of fields and data type "
                "of each field"
            )
        elif avro:
            head = (
                "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION (the Avro encoding lets a value gain "
                "or lose fields and widen numbers, nothing else)"
            )
        else:
            head = (
                f"STATE_STORE_{which}_SCHEMA_NOT_COMPATIBLE: Provided {lower} schema does not "
                f"match existing state {lower} schema"
            )
        keep = f"keep the state's {lower} as it was: {_keep(new.name or '', store, which)}"
        if (
            which == "VALUE"
            and new.name in ("stateStoreSave", "sessionWindowStateStoreSaveExec")
            and len(_fields(schema)) > len(_fields(stored))
        ):
            keep = (
                "add the new aggregate column in a new query on a new checkpoint location "
                "(this state has no room for it), and keep this query's aggregates as they were"
            )
        return (
            f"{self.spark} fails the first batch after the restart with {head}, for state/"
            f"{new.number} ({new.name}), {_store_words(store)}. The {part} was "
            f"{_type_text(stored)} and is now {_type_text(schema)}: {changes}. Spark compares "
            "it by position: the number of fields and their types must stay, names may change, "
            "a field may become non-nullable but not nullable.\n"
            "Fix:\n"
            f"  - {keep}\n"
            + _FIX_NEW_CHECKPOINT
            + "\n"
            + _FIX_MIGRATE.format(n=new.number)
            + f"\n  - do not set {_SCHEMA_CHECK}=false as Spark's message suggests: the old "
            "state would be read with the new schema, with undefined results"
        )

    def properties(self, old: _Operator, new: _Operator) -> None:
        """transformWithState's operator properties as Spark checks them after the schemas
        (``TransformWithStateExec.validateNewMetadata``): time mode, output mode, a variable's
        kind; then what Spark does not check (a variable no longer declared, the processor
        class, a TTL's duration)."""
        if new.name not in _TRANSFORM_WITH_STATE:
            return
        if not old.properties or not new.properties:
            self.not_inspected(old, new)
            return
        try:
            before, after = json.loads(old.properties), json.loads(new.properties)
        except ValueError:
            return
        if not isinstance(before, dict) or not isinstance(after, dict):
            return
        where = {"state_id": str(new.number), "operator_id": new.operator_id, "name": old.name}
        for setting in ("timeMode", "outputMode"):
            was, now = before.get(setting), after.get(setting)
            if was != now:
                self.problem(
                    "state_config",
                    f"{self.spark} fails the first batch after the restart with "
                    f"STATE_STORE_INVALID_CONFIG_AFTER_RESTART for state/{new.number} "
                    f"({new.name}): Cannot change {setting} from {was} to {now} between "
                    f"restarts. Please set {setting} to {was}, or restart with a new checkpoint "
                    "directory.\n"
                    "Fix:\n"
                    f"  - pass {setting}={_python_value(setting, was)} to transformWithState "
                    "as before\n" + _FIX_NEW_CHECKPOINT,
                    **where,
                )
                return
        old_vars = _variables(before)
        new_vars = _variables(after)
        self.ttl_switched(new, _ttl_enabled(before), _ttl_enabled(after), where)
        for name, kind in old_vars.items():
            if name in new_vars and new_vars[name] != kind:
                self.problem(
                    "state_config",
                    f"{self.spark} fails the first batch after the restart with "
                    f"STATE_STORE_INVALID_VARIABLE_TYPE_CHANGE for state/{new.number} "
                    f"({new.name}): Cannot change {name} to {new_vars[name]} between query "
                    f"restarts. Please set {name} to {kind}, or restart with a new checkpoint "
                    "directory.\n"
                    "Fix:\n"
                    f"  - declare {quote(name)} as a {kind} again, or give the "
                    f"{new_vars[name]} another name (it starts empty)\n" + _FIX_NEW_CHECKPOINT,
                    **where,
                )
                return
        gone = [n for n in old_vars if n not in new_vars]
        added = [n for n in new_vars if n not in old_vars]
        if gone or added:
            parts = []
            if gone:
                parts.append(
                    f"{', '.join(map(quote, gone))} no longer declared (its state stays in the "
                    "checkpoint unused)"
                )
            if added:
                parts.append(f"{', '.join(map(quote, added))} new (starts empty)")
            message = (
                f"state/{new.number} ({new.name}): state variables {'; '.join(parts)}. Spark "
                "matches state variables by name, so a renamed variable loses its state."
            )
            if gone:  # Spark restarts and drops what the processor kept there, silently
                effect = (
                    " Spark restarts, and the results are wrong: the state of "
                    f"{', '.join(map(quote, gone))} is dropped silently, and a variable "
                    "declared under a new name starts empty for every key, as if the processor "
                    "had never seen them."
                    if added
                    else " Spark restarts and its state is dropped silently: what the processor "
                    f"kept in {', '.join(map(quote, gone))} for every key is no longer read; "
                    "if the processor still needs it, the results are wrong."
                )
                self.reinterpret("state_meaning", message + effect + _FIX_MEANING, **where)
            else:
                self.warn("state_config", message, **where)
        self.processor(old, new, [n for n in old_vars if n in new_vars])

    def ttl_switched(
        self,
        new: _Operator,
        before: Mapping[str, bool],
        after: Mapping[str, bool],
        where: Mapping[str, Any],
    ) -> None:
        """A variable that gains or loses a TTL: Spark keeps a TTL variable's values with their
        expiry, so its stored value schema changes (the schema problem says so in Spark's
        words; this says why)."""
        for name, had in before.items():
            if name not in after or after[name] == had:
                continue
            change = "gains a TTL" if after[name] else "loses its TTL"
            self.warn(
                "value_schema",
                f"state/{new.number} ({new.name}): state variable {quote(name)} {change}. Spark "
                "stores a TTL variable's values with their expiry time "
                "(struct<value: <its schema>, ttlExpirationMs: bigint>, and a $ttl_ index), so "
                "the values in the checkpoint no longer match its value schema "
                "(STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE).\n"
                "Fix:\n"
                f"  - keep {quote(name)} {'without' if after[name] else 'with'} a TTL, or "
                "declare the changed variable under a new name (it starts empty)\n"
                + _FIX_NEW_CHECKPOINT,
                **where,
            )

    def not_inspected(self, old: _Operator, new: _Operator) -> None:
        """A transformWithState whose state variables could not be learned (spark.tws)."""
        reason = dict(new.meaning).get("could not inspect") or dict(old.meaning).get(
            "could not inspect"
        )
        if not reason:
            return  # schemas() already says that no schemas were recorded
        self.warn(
            "state_config",
            f"state/{new.number} ({new.name}): {printable(reason)}. Spark runs the processor's "
            "init() when the query starts and checks its state variables against "
            f"{self.old.origin}: their kinds (STATE_STORE_INVALID_VARIABLE_TYPE_CHANGE), key "
            "and value schemas and TTL (STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE, "
            "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE), the time mode and the output mode "
            "(STATE_STORE_INVALID_CONFIG_AFTER_RESTART). None of them was compared: this "
            "verdict covers the operator's name and position only.\n"
            "Fix:\n"
            "  - declare the state variables in init() from values the code holds (no file, "
            "service, timer or state access there)\n"
            "  - or let Spark's pre-init worker run init(): PYSPARK_PYTHON set to a Python "
            "with pyspark and the processor's imports",
            state_id=str(new.number),
            operator_id=new.operator_id,
            name=old.name,
        )

    def processor(self, old: _Operator, new: _Operator, kept: Sequence[str]) -> None:
        """What Spark does not check when a transformWithState restarts: which processor reads
        the variables, and a TTL's duration (facts of the fingerprints, spark.tws)."""
        before, after = dict(old.meaning), dict(new.meaning)
        where = {"state_id": str(new.number), "operator_id": new.operator_id, "name": old.name}
        was, now = before.get("processor"), after.get("processor")
        if was and now and UNKNOWN not in (was, now) and was != now and kept:
            self.warn(
                "state_meaning",
                f"state/{new.number} ({new.name}): the stateful processor is now "
                f"{printable(now)} instead of {printable(was)}. Spark does not check it: "
                f"{printable(now)} gets the state {printable(was)} kept in "
                f"{', '.join(map(quote, kept))} (matched by name) and must read it as "
                f"{printable(was)} wrote it.",
                **where,
            )
        for name in kept:
            old_ttl = _ttl_ms(before.get(f"state variable {name}"))
            new_ttl = _ttl_ms(after.get(f"state variable {name}"))
            if old_ttl is not None and new_ttl is not None and old_ttl != new_ttl:
                self.warn(
                    "state_config",
                    f"state/{new.number} ({new.name}): the TTL of state variable {quote(name)} "
                    f"changes from {old_ttl} ms to {new_ttl} ms. Spark restarts; the values "
                    "already in the state keep the expiry the old TTL gave them until they "
                    "are updated.",
                    **where,
                )

    def unchecked_schemas(self, first: int, old: _Operator, new: _Operator) -> None:
        """The session turned Spark's state schema check off: the schema problems found from
        ``first`` on do not stop the restart where the rows keep their number of fields; Spark
        then reads the old state with the new schema. A row of another width still fails
        Spark's row format validation (``UnsafeRowUtils.validateStructuralIntegrity``, on by
        default)."""
        kept = []
        for problem in self.problems[first:]:
            which = "KEY" if problem.kind == "key_schema" else "VALUE"
            widths = _widths(old, new, 0 if which == "KEY" else 1)
            text = problem.message
            _, _, rest = text.partition(" with ")
            if widths is not None:
                was, now = widths
                kept.append(
                    RestoreProblem(
                        problem.kind,
                        f"{self.spark} fails the first batch after the restart with "
                        f"CANNOT_LOAD_STATE_STORE.{which}_ROW_FORMAT_VALIDATION_FAILURE for "
                        f"state/{new.number} ({new.name}), although {_SCHEMA_CHECK}=false "
                        f"skips the schema check: the stored rows have {was} fields, the new "
                        f"schema {now}. Without the setting it would fail with {rest or text}",
                        state_id=problem.state_id,
                        operator_id=problem.operator_id,
                        name=problem.name,
                    )
                )
                continue
            self.reinterpret(
                problem.kind,
                f"Spark restarts only because {_SCHEMA_CHECK}=false skips its state schema "
                "check, and reads the old state with the new schema: the results are "
                f"undefined. With the check on it would fail with {rest or text}",
                state_id=problem.state_id,
                operator_id=problem.operator_id,
                name=problem.name,
            )
        del self.problems[first:]
        self.problems += kept

    def meaning(self, old: _Operator, new: _Operator) -> None:
        """Restarts Spark accepts whose state the new query reads as something else
        (:mod:`pytest_opid.spark.meaning`): not safe. transformWithState's variables are judged
        with its properties."""
        if new.name in _TRANSFORM_WITH_STATE:
            return
        if self.old.from_checkpoint:
            changes = checkpoint_meaning(
                new.number, new.name or "", old.stores, new.stores, new.meaning
            )
        else:
            changes = compare_meaning(
                new.number, new.name or "", old.meaning, new.meaning, self.old.origin
            )
        where = {"state_id": str(new.number), "operator_id": new.operator_id, "name": old.name}
        for change in changes:
            if change.reinterprets:
                self.reinterpret(change.kind, change.message + _FIX_MEANING, **where)
            else:
                self.warn(change.kind, change.message, **where)

    def partitions(self, old: _Operator, new: _Operator) -> None:
        before = old.partitions or self.shuffle_partitions
        now = new.partitions
        if before is None or now is None or before == now:
            return
        self.warn(
            "state_config",
            f"state/{new.number} ({new.name}) has {before} partitions in {self.old.origin} "
            f"({_SHUFFLE_PARTITIONS}={before}); the new query asks for {now}, which Spark "
            "ignores on this checkpoint: it restores the setting from the checkpoint's offset log "
            f"and keeps {before} state partitions. To change it, start on a new checkpoint "
            "location.",
            state_id=str(new.number),
            operator_id=new.operator_id,
            name=old.name,
        )


# -- schemas ---------------------------------------------------------------------------------------


def _widths(old: _Operator, new: _Operator, part: int) -> tuple[int, int] | None:
    """The (stored, new) number of fields of a store's key (``part`` 0) or value (1) where the
    two differ, for the first store that has both."""
    for store, schemas in new.stores.items():
        stored = old.stores.get(store)
        if stored is None or stored[part] is None or schemas[part] is None:
            continue
        was, now = _schema(stored[part]), _schema(schemas[part])
        if isinstance(was, dict) and isinstance(now, dict):
            a, b = len(was.get("fields") or ()), len(now.get("fields") or ())
            if a != b:
                return a, b
    return None


def _schema(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _compatible(new: Any, stored: Any, strict: bool = True) -> bool:
    """``DataType.equalsIgnoreNameAndCompatibleNullability(new, stored)``; with ``strict``
    off, nullability is not compared (a checkpoint whose schemas were not widened)."""
    stack = [(new, stored)]
    while stack:
        a, b = stack.pop()
        if isinstance(a, dict) and isinstance(b, dict) and a.get("type") == b.get("type"):
            kind = a.get("type")
            if kind == "struct":
                fa, fb = a.get("fields") or [], b.get("fields") or []
                if len(fa) != len(fb):
                    return False
                for x, y in zip(fa, fb, strict=True):
                    if strict and not (y.get("nullable", True) or not x.get("nullable", True)):
                        return False
                    stack.append((x.get("type"), y.get("type")))
                continue
            if kind == "array":
                if strict and not (b.get("containsNull", True) or not a.get("containsNull", True)):
                    return False
                stack.append((a.get("elementType"), b.get("elementType")))
                continue
            if kind == "map":
                if strict and not (
                    b.get("valueContainsNull", True) or not a.get("valueContainsNull", True)
                ):
                    return False
                stack.append((a.get("keyType"), b.get("keyType")))
                stack.append((a.get("valueType"), b.get("valueType")))
                continue
        if a != b:
            return False
    return True


_AVRO_PROMOTIONS = {
    ("integer", "long"),
    ("integer", "float"),
    ("integer", "double"),
    ("long", "float"),
    ("long", "double"),
    ("float", "double"),
    ("string", "binary"),
    ("binary", "string"),
}


def _avro_readable(stored: Any, new: Any) -> bool:
    """Whether Avro schema resolution lets the new value schema read values written with the
    stored one (fields matched by name; a new field reads its default, null; numbers widen)."""
    if isinstance(stored, dict) and isinstance(new, dict):
        if stored.get("type") == new.get("type") == "struct":
            old_fields = {f.get("name"): f.get("type") for f in stored.get("fields") or []}
            return all(
                _avro_readable(old_fields[f.get("name")], f.get("type"))
                for f in new.get("fields") or []
                if f.get("name") in old_fields
            )
        if stored.get("type") == new.get("type") == "array":
            return _avro_readable(stored.get("elementType"), new.get("elementType"))
        if stored.get("type") == new.get("type") == "map":
            return _avro_readable(stored.get("valueType"), new.get("valueType"))
        return bool(stored == new)
    return stored == new or (stored, new) in _AVRO_PROMOTIONS


def _fields(schema: Any) -> list[dict[str, Any]]:
    if isinstance(schema, dict) and isinstance(schema.get("fields"), list):
        return [f for f in schema["fields"] if isinstance(f, dict)]
    return []


def _differences(stored: Any, new: Any) -> list[str]:
    """What changed, field by field, in the words of the rule."""
    old_fields, new_fields = _fields(stored), _fields(new)
    out = []
    if len(old_fields) != len(new_fields):
        before = {f.get("name") for f in old_fields}
        after = {f.get("name") for f in new_fields}
        extra = [n for n in (f.get("name") for f in new_fields) if n not in before]
        lost = [n for n in (f.get("name") for f in old_fields) if n not in after]
        detail = []
        if extra:
            detail.append("added " + ", ".join(printable(str(n)) for n in extra))
        if lost:
            detail.append("removed " + ", ".join(printable(str(n)) for n in lost))
        out.append(
            f"{plural(len(new_fields), 'field')} instead of {len(old_fields)}"
            + (f" ({'; '.join(detail)})" if detail else "")
        )
    if out:
        return out  # fields moved: comparing them by position says nothing more
    for i, (a, b) in enumerate(zip(old_fields, new_fields, strict=False), 1):
        name = printable(str(b.get("name")))
        if a.get("name") != b.get("name"):
            name = f"{printable(str(a.get('name')))}, now {name}"
        if not _compatible(b.get("type"), a.get("type"), strict=False):
            out.append(
                f"field {i} ({name}) was {_type_text(a.get('type'))}, is now "
                f"{_type_text(b.get('type'))}"
            )
        elif not _compatible(b.get("type"), a.get("type")) or (
            b.get("nullable", True) and not a.get("nullable", True)
        ):
            out.append(f"field {i} ({name}) could not be null before and may be null now")
    return out


def _renames(stored: Any, new: Any) -> list[str]:
    out = []
    for a, b in zip(_fields(stored), _fields(new), strict=False):
        if a.get("name") != b.get("name"):
            out.append(f"{printable(str(a.get('name')))} -> {printable(str(b.get('name')))}")
    return out


_TYPE_NAMES = {"integer": "int"}


def _type_text(t: Any, depth: int = 0) -> str:
    """A data type's JSON as short text: ``struct<user: string, k: int>``."""
    if depth > 12:
        return "..."
    if isinstance(t, str):
        return printable(_TYPE_NAMES.get(t, t))
    if isinstance(t, dict):
        kind = t.get("type")
        if kind == "struct":
            inner = ", ".join(
                f"{printable(str(f.get('name')))}: {_type_text(f.get('type'), depth + 1)}"
                for f in _fields(t)
            )
            return f"struct<{inner}>"
        if kind == "array":
            return f"array<{_type_text(t.get('elementType'), depth + 1)}>"
        if kind == "map":
            key = _type_text(t.get("keyType"), depth + 1)
            return f"map<{key}, {_type_text(t.get('valueType'), depth + 1)}>"
        if kind == "udt":
            return f"udt<{_type_text(t.get('sqlType'), depth + 1)}>"
    return "?"


def _store_words(store: str) -> str:
    base, _, family = store.partition("/")
    if family:
        return f"store {quote(base)}, column family {quote(family)}"
    return f"store {quote(store)}"


def _part(kind: str, store: str, which: str) -> str:
    """What a store's key or value holds, in the operator's terms."""
    family = store.partition("/")[2]
    if which == "KEY":
        if kind in ("dedupe", "dedupeWithinWatermark"):
            return "key (the deduplication columns)"
        if kind == "symmetricHashJoin":
            return "key (the join key)"
        if kind == "globalLimit":
            return "key"
        if family:
            return f"key of state variable {quote(family)} (the grouping key)"
        return "key (the grouping key)"
    if kind == "stateStoreSave":
        return "value (the aggregate functions' buffers)"
    if kind == "sessionWindowStateStoreSaveExec":
        return "value (the session rows)"
    if kind == "symmetricHashJoin":
        side = store.split("-", 1)[0]
        if store.endswith("keyWithIndexToValue"):
            return f"value (the buffered rows of the {side} input)"
        return "value (the row count per key)"
    if kind in ("flatMapGroupsWithState", "applyInPandasWithState"):
        return "value (the group state: the state schema you declare)"
    if family:
        return f"value of state variable {quote(family)}"
    return "value"


def _keep(kind: str, store: str, which: str) -> str:
    """How to keep a store's key or value as it was, in the operator's terms."""
    if which == "KEY":
        if kind in ("dedupe", "dedupeWithinWatermark"):
            return "deduplicate on the same columns with the same types, in the same order"
        if kind == "symmetricHashJoin":
            return "join on the same key columns with the same types"
        return (
            "group by the same columns with the same types, in the same order (cast a changed "
            'column back: F.col("k").cast("int"))'
        )
    if kind in ("stateStoreSave", "sessionWindowStateStoreSaveExec"):
        return (
            "keep the same aggregate functions with the same result types, in the same order "
            "(a select after the aggregation that drops an aggregate drops it from the state "
            "too: drop it in a later step instead)"
        )
    if kind == "symmetricHashJoin":
        side = store.split("-", 1)[0]
        return (
            f"keep the {side} input's columns (their number, order and types) as they were: "
            "add a column after the join instead"
        )
    if kind in ("flatMapGroupsWithState", "applyInPandasWithState"):
        return "keep the state schema (stateStructType) with the same field types in the same order"
    if kind in _TRANSFORM_WITH_STATE:
        return (
            "keep the state variable's schema, or declare the changed one under a new name "
            "(it starts empty)"
        )
    return "keep it as it was"


def _label(op: _Operator) -> str:
    return f"({printable(op.label)})" if op.label and op.label != op.name else ""


def _variables(properties: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for var in properties.get("stateVariables") or []:
        if isinstance(var, dict) and isinstance(var.get("stateName"), str):
            out[var["stateName"]] = str(var.get("stateVariableType"))
    return out


def _ttl_enabled(properties: Mapping[str, Any]) -> dict[str, bool]:
    out = {}
    for var in properties.get("stateVariables") or []:
        if isinstance(var, dict) and isinstance(var.get("stateName"), str):
            out[var["stateName"]] = bool(var.get("ttlEnabled"))
    return out


def _ttl_ms(fact: str | None) -> int | None:
    """The TTL of a ``state variable`` meaning fact (``..., TTL 60000 ms``), if it says one."""
    if not fact or not fact.endswith(" ms") or ", TTL " not in fact:
        return None
    text = fact.rsplit(", TTL ", 1)[1][: -len(" ms")]
    return int(text) if text.isdigit() else None


def _python_value(setting: str, value: Any) -> str:
    if setting == "timeMode":
        return quote({"NoTime": "None"}.get(str(value), str(value)))
    return quote(str(value))


def _directory(path: str) -> str:
    return _qualified(path).rsplit("/", 1)[0]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]
