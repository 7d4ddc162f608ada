"""Spark's own names, once: the engine's name, the session confs pytest-opid reads or a
checkpoint pins, and one row per stateful operator kind (its physical operator class, the short
name Spark files its state under, its stores and what their key and value hold)."""

from __future__ import annotations

from dataclasses import dataclass

ENGINE = "spark"

#: What the key of most stateful operators holds.
GROUPING_KEY = "the grouping key"


@dataclass(frozen=True)
class StatefulKind:
    """One kind of stateful operator as Spark knows it."""

    exec_class: str  #: the physical operator (``StateStoreSaveExec``)
    short_name: str  #: its ``shortName``, the name ``state/<n>/_metadata`` files its state under
    role: str  #: what it does, in the words messages use: aggregation, deduplication, join...
    key: str = GROUPING_KEY  #: what its stores' key holds ("" where nothing is worth saying)
    value: str = ""  #: what its default store's value holds ("" where it depends on the store)
    #: Spark 4.x widens its state schemas to nullable (``alwaysNullableOutput``)
    widened: bool = True
    #: Spark compares the stored value's schema (``formatValidationCheckValue``)
    value_checked: bool = True
    #: its state schema may evolve under Avro encoding (``supportsSchemaEvolution``)
    evolves: bool = False


#: Every stateful operator kind, one row each.
STATEFUL_KINDS = (
    StatefulKind(
        "StateStoreSaveExec",
        "stateStoreSave",
        "aggregation",
        value="the aggregate functions' buffers",
    ),
    StatefulKind(
        "SessionWindowStateStoreSaveExec",
        "sessionWindowStateStoreSaveExec",
        "aggregation",
        value="the session rows",
    ),
    StatefulKind(
        "StreamingDeduplicateExec",
        "dedupe",
        "deduplication",
        key="the deduplication columns",
        value_checked=False,
    ),
    StatefulKind(
        "StreamingDeduplicateWithinWatermarkExec",
        "dedupeWithinWatermark",
        "deduplication",
        key="the deduplication columns",
    ),
    StatefulKind("StreamingSymmetricHashJoinExec", "symmetricHashJoin", "join", key="the join key"),
    StatefulKind(
        "FlatMapGroupsWithStateExec",
        "flatMapGroupsWithState",
        "group state",
        value="the group state: the state schema you declare",
    ),
    StatefulKind(
        "FlatMapGroupsInPandasWithStateExec",
        "applyInPandasWithState",
        "group state",
        value="the group state: the state schema you declare",
    ),
    StatefulKind(
        "TransformWithStateExec",
        "transformWithStateExec",
        "transformWithState",
        widened=False,
        evolves=True,
    ),
    StatefulKind(
        "TransformWithStateInPandasExec",
        "transformWithStateInPandasExec",
        "transformWithState",
        widened=False,
        evolves=True,
    ),
    StatefulKind(
        "TransformWithStateInPySparkExec",
        "transformWithStateInPySparkExec",
        "transformWithState",
        widened=False,
        evolves=True,
    ),
    StatefulKind("StreamingGlobalLimitExec", "globalLimit", "limit", key="", widened=False),
)
#: A kind by its ``shortName`` (what a checkpoint and a fingerprint record).
KIND_BY_NAME = {k.short_name: k for k in STATEFUL_KINDS}
#: The aggregations' and the group states' short names.
AGGREGATIONS = frozenset(k.short_name for k in STATEFUL_KINDS if k.role == "aggregation")
GROUP_STATES = frozenset(k.short_name for k in STATEFUL_KINDS if k.role == "group state")
#: Physical operators that own state, with the name Spark files them under.
STATEFUL_OPERATORS: dict[str, str] = {k.exec_class: k.short_name for k in STATEFUL_KINDS}
#: Operators whose state schema may evolve under Avro encoding: transformWithState's.
TRANSFORM_WITH_STATE = frozenset(k.short_name for k in STATEFUL_KINDS if k.evolves)
#: Operators whose store Spark opens with ``formatValidationCheckValue=false``: the value
#: (a placeholder) is never compared.
VALUE_UNCHECKED = frozenset(k.short_name for k in STATEFUL_KINDS if not k.value_checked)
#: Operators whose state schemas Spark 4.x widens to nullable under ``ALWAYS_NULLABLE``.
WIDENED = frozenset(k.exec_class for k in STATEFUL_KINDS if k.widened)


#: The pseudo store of a :class:`~pytest_opid.result.StateOperator` that holds, as its value, a
#: transformWithState operator's ``operatorPropertiesJson`` (time mode, output mode, state
#: variables), which Spark checks at restart as it checks the schemas.
PROPERTIES_STORE = "operatorProperties"


#: The session conf that fixes the partitions of the exchanges Spark plans by itself; a batch
#: fingerprint records it once (:attr:`~pytest_opid.result.Fingerprint.settings`) and gives
#: those exchanges' operators parallelism -1.
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


SOURCE_EVOLUTION = "spark.sql.streaming.queryEvolution.enableSourceEvolution"


#: Spark 4.3 widens every state schema to nullable when this is on (its default, and what a new
#: checkpoint pins); the encoding decides transformWithState's column family schemas.
ALWAYS_NULLABLE = "spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled"


ENCODING = "spark.sql.streaming.stateStore.encodingFormat"


AQE = "spark.sql.adaptive.enabled"


#: Past this many values Spark's OptimizeIn makes an IN list an InSet (default 10).
IN_SET_THRESHOLD = "spark.sql.optimizer.inSetConversionThreshold"


#: The session conf that turns Spark's state schema check off; recorded as a fact, since a
#: restart that passes only because of it reads the old state with the new schema.
SCHEMA_CHECK = "spark.sql.streaming.stateStore.stateSchemaCheck"


SCHEMA_CHECK_FACT = "state schema check"


# Spark's StateStoreId.DEFAULT_STORE_NAME and StateStore.DEFAULT_COL_FAMILY_NAME.
DEFAULT_STORE_NAME = "default"


DEFAULT_COL_FAMILY_NAME = "default"


#: The meaning fact of a transformWithState's state encoding (``spark.sql.streaming.stateStore
#: .encodingFormat``, pinned by the checkpoint): under ``avro`` values may evolve.
ENCODING_FACT = "state encoding"


#: The meaning fact of the Python code that updates a state (applyInPandasWithState's
#: function, a transformWithState processor): :mod:`pytest_opid.spark.function_digest`.
FUNCTION_DIGEST_FACT = "function digest"
