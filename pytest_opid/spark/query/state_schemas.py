"""The state stores a stateful operator of a planned streaming query would open, with their key
and value schemas as the operator's ``validateAndMaybeEvolveStateSchema`` builds them and Spark
writes them to ``state/<n>/.../_metadata/schema``: read from the same accessors through py4j,
never handed to Spark's schema checker (which would write them)."""

from __future__ import annotations

from typing import Any

from pytest_opid.errors import OpidError
from pytest_opid.result import StateStore
from pytest_opid.spark.query.gateway import Gateway, has_java_method, is_java_class
from pytest_opid.spark.query.processor_handle import declare, tws_class
from pytest_opid.spark.transform_with_state import ProcessorRecord
from pytest_opid.spark.versions import WIDENING, feature_line, installed_line
from pytest_opid.spark.vocabulary import DEFAULT_STORE_NAME, PROPERTIES_STORE, WIDENED

#: The session window operator's private state manager, by the package Spark files the class
#: in: ``operators.stateful`` from 4.0 on, ``execution.streaming`` in 3.5.
_SESSION_MANAGERS = (
    "org$apache$spark$sql$execution$streaming$operators$stateful$"
    "SessionWindowStateStoreSaveExec$$stateManager",
    "org$apache$spark$sql$execution$streaming$SessionWindowStateStoreSaveExec$$stateManager",
)


def store_schemas(
    gateway: Gateway, node: Any, cls: str, widen: bool, avro: bool
) -> tuple[tuple[StateStore, ...], ProcessorRecord | None]:
    """The state stores of one stateful operator with their (key, value) schemas, as the
    operator's ``validateAndMaybeEvolveStateSchema`` (Spark 4.x) builds them, and for a
    Python transformWithState what its processor's ``init`` declared."""
    jvm = gateway.jvm
    attributes = gateway.constant("fromAttributes", lambda: _from_attributes(jvm))
    pairs: list[tuple[str, Any, Any]] = []  # (store or store/column family, key, value)
    properties = None
    record: ProcessorRecord | None = None
    # The schemas below are the raw ones; Spark widens them as the operator's
    # validateAndMaybeEvolveStateSchema does (the global limit's are fixed, and column
    # family schemas come out of getColFamilySchemas widened already).
    # Spark 3.5 to 4.2 write them as they are (alwaysNullableOutput is 4.3's).
    widen = widen and cls in WIDENED and installed_line() >= feature_line(WIDENING)
    if cls == "StateStoreSaveExec":
        value = node.stateManager().getStateValueSchema()
        pairs.append((DEFAULT_STORE_NAME, attributes(node.keyExpressions()), value))
    elif cls == "SessionWindowStateStoreSaveExec":
        manager = _session_manager(node)
        pairs.append(
            (DEFAULT_STORE_NAME, manager.getStateKeySchema(), manager.getStateValueSchema())
        )
    elif cls in ("StreamingDeduplicateExec", "StreamingDeduplicateWithinWatermarkExec"):
        pairs.append(
            (DEFAULT_STORE_NAME, attributes(node.keyExpressions()), node.schemaForValueRow())
        )
    elif cls in ("FlatMapGroupsWithStateExec", "FlatMapGroupsInPandasWithStateExec"):
        value = node.stateManager().stateSchema()
        pairs.append((DEFAULT_STORE_NAME, attributes(node.groupingAttributes()), value))
    elif cls == "StreamingGlobalLimitExec":
        key = gateway.call_private(node, "keySchema")
        pairs.append((DEFAULT_STORE_NAME, key, gateway.call_private(node, "valueSchema")))
    elif cls == "StreamingSymmetricHashJoinExec":
        version = node.stateFormatVersion()
        if version >= 3:  # one store, a column family per former store
            widen = False
            pairs += _column_families(node.getColFamilySchemas(False))
        else:
            helper, manager = _join_classes(jvm)
            if not has_java_method(jvm, manager, "getSchemaForStateStores"):  # Spark 3.5
                pairs += _join_stores(jvm, node, attributes, version)
                helper = None
            for side, child, keys in (
                (
                    ("LeftSide", node.left(), node.leftKeys()),
                    ("RightSide", node.right(), node.rightKeys()),
                )
                if helper is not None
                else ()
            ):
                module = getattr(helper, f"StreamingSymmetricHashJoinHelper${side}$")
                schemas = manager.getSchemaForStateStores(
                    getattr(module, "MODULE$"), child.output(), keys, version
                ).toList()
                for k in range(schemas.size()):
                    entry = schemas.apply(k)
                    pair = entry._2()
                    pairs.append((entry._1(), pair._1(), pair._2()))
    else:  # transformWithState: a column family per state variable (and internal ones)
        if cls != "TransformWithStateExec":
            record = declare(gateway, node)  # the Python processor's init() declares them
        pairs += _column_families(node.getColFamilySchemas(avro))
        infos = node.getStateVariableInfos().values().toList()
        properties_class = tws_class(jvm, "TransformWithStateOperatorProperties")
        properties = properties_class(
            node.timeMode().toString(), node.outputMode().toString(), infos
        ).json()
    stores = [
        StateStore(
            name,
            (key.asNullable() if widen else key).json(),
            (value.asNullable() if widen else value).json(),
        )
        for name, key, value in pairs
    ]
    if properties is not None:
        stores.append(StateStore(PROPERTIES_STORE, None, properties))
    return tuple(stores), record


def _column_families(schemas: Any) -> list[tuple[str, Any, Any]]:
    """``Map[String, StateStoreColFamilySchema]`` as (``default/<family>``, key, value)."""
    families = schemas.values().toList()
    out = []
    for k in range(families.size()):
        family = families.apply(k)
        out.append(
            (
                f"{DEFAULT_STORE_NAME}/{family.colFamilyName()}",
                family.keySchema(),
                family.valueSchema(),
            )
        )
    return sorted(out, key=lambda entry: entry[0])


def _from_attributes(jvm: Any) -> Any:
    """Attributes -> StructType: ``DataTypeUtils.fromAttributes`` (Spark 4), else 3.5's
    ``StructType.fromAttributes``."""
    if is_java_class(jvm, "org.apache.spark.sql.catalyst.types.DataTypeUtils"):
        return jvm.org.apache.spark.sql.catalyst.types.DataTypeUtils.fromAttributes
    return jvm.org.apache.spark.sql.types.StructType.fromAttributes


def _session_manager(node: Any) -> Any:
    for name in _SESSION_MANAGERS:
        try:
            return getattr(node, name)()
        except Exception:  # py4j: no such method in this Spark's build
            continue
    raise OpidError("the session window operator's state manager is not reachable")


def _join_classes(jvm: Any) -> tuple[Any, Any]:
    """The stream-stream join's helper package and ``SymmetricHashJoinStateManager``: under
    ``operators.stateful.join`` from Spark 4.0 on; in 3.5 the helper is in
    ``execution.streaming`` and the manager in ``execution.streaming.state``."""
    joins = "org.apache.spark.sql.execution.streaming.operators.stateful.join"
    if is_java_class(jvm, joins + ".SymmetricHashJoinStateManager"):
        package = jvm.org.apache.spark.sql.execution.streaming.operators.stateful.join
        return package, package.SymmetricHashJoinStateManager
    streaming = jvm.org.apache.spark.sql.execution.streaming
    return streaming, streaming.state.SymmetricHashJoinStateManager


def _join_stores(jvm: Any, node: Any, attributes: Any, version: int) -> list[tuple[str, Any, Any]]:
    """A stream-stream join's four stores as Spark 3.5's ``SymmetricHashJoinStateManager``
    builds their schemas (3.5 has no ``getSchemaForStateStores``): per side, keyToNumValues
    (the join keys as ``field<i>`` -> ``value`` long) and keyWithIndexToValue (the keys and an
    ``index`` long -> the side's input row, and from state format 2 on a ``matched`` flag)."""
    types = jvm.org.apache.spark.sql.types
    long_type = types.DataTypes.LongType
    out = []
    for side, child, keys in (
        ("left", node.left(), node.leftKeys()),
        ("right", node.right(), node.rightKeys()),
    ):
        key = types.StructType()
        for i in range(keys.size()):
            expression = keys.apply(i)
            key = key.add(f"field{i}", expression.dataType(), expression.nullable())
        value = attributes(child.output())
        if version >= 2:
            value = value.add("matched", types.DataTypes.BooleanType)
        out.append((f"{side}-keyToNumValues", key, types.StructType().add("value", long_type)))
        out.append((f"{side}-keyWithIndexToValue", key.add("index", long_type), value))
    return out
