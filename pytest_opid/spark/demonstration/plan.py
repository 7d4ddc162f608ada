"""A streaming query's plan with its file sources moved to folders of ours.

Spark plans a file stream source as a ``StreamingRelation`` leaf holding a ``DataSource`` (the
format, its options with ``path``, the user's schema). The leaf is replaced by one reading JSON
lines from a temporary folder with the same schema and the same output attributes (the same
expression ids), so every operator above it is the query's own, unchanged: the restart is
judged on the query as the user planned it, only fed rows we wrote. Sources that are not files
(``rate``, ``rate-micro-batch``, ...) stay as they are (:func:`other_sources` names them).

The tree is rebuilt bottom-up with an explicit stack (``TreeNode.withNewChildren``); a node is
copied through its case-class constructor, its product elements in order, so the code follows
the fields each Spark line's ``StreamingRelation`` and ``DataSource`` have (Spark 4.3 added
``sourceIdentifyingName`` and a ninth ``DataSource`` field).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.spark.demonstration.tree import nodes

#: File formats Spark's ``FileStreamSource`` reads (``DataSource.className`` as written).
FILE_FORMATS = frozenset({"json", "csv", "parquet", "orc", "text", "avro", "xml"})


@dataclass(frozen=True)
class FileSource:
    """One file stream source of a query: what identifies it across the two versions (its
    format and folder) and the schema of the rows to write for it (Spark type JSON)."""

    identity: str
    schema_json: str


def file_sources(df: Any) -> list[FileSource]:
    """The file sources of a streaming DataFrame, in plan order, each once."""
    found: dict[str, FileSource] = {}
    for node in nodes(df._jdf.queryExecution().logical()):
        source = _file_source(node)
        if source is not None:
            found.setdefault(source.identity, source)
    return list(found.values())


def other_sources(df: Any) -> list[str]:
    """The names of a streaming DataFrame's sources that are not files (``rate-micro-batch``,
    ``kafka``), in plan order: ``StreamingRelationV2.sourceName``, or a ``StreamingRelation``'s
    format."""
    names = []
    for node in nodes(df._jdf.queryExecution().logical()):
        kind = node.nodeName()
        if kind == "StreamingRelationV2":
            names.append(str(node.sourceName()))
        elif kind == "StreamingRelation" and _file_source(node) is None:
            names.append(str(node.dataSource().className()).rsplit(".", 1)[-1])
    return names


def with_sources(df: Any, folders: dict[str, str]) -> Any:
    """``df`` with each file source (by identity) reading JSON lines from ``folders[identity]``."""
    from pyspark.sql import DataFrame

    jvm = df.sparkSession._jvm
    plan = _rebuilt(jvm, df._jdf.queryExecution().logical(), folders)
    jsession = df._jdf.sparkSession()
    return DataFrame(_dataset_of_rows(jvm, jsession, plan), df.sparkSession)


def _file_source(node: Any) -> FileSource | None:
    if node.nodeName() != "StreamingRelation":
        return None
    source = node.dataSource()
    fmt = str(source.className()).lower()
    if fmt.rsplit(".", 1)[-1] not in FILE_FORMATS:
        return None
    options = source.options()
    path = options.get("path")
    folder = path.get() if path.isDefined() else ",".join(_list(source.paths()))
    schema = source.userSpecifiedSchema()
    if not schema.isDefined():
        raise DocumentError(f"the {fmt} stream source at {folder} has no schema: give one")
    return FileSource(identity=f"{fmt}:{folder}", schema_json=str(schema.get().json()))


def _rebuilt(jvm: Any, root: Any, folders: dict[str, str]) -> Any:
    """The tree at ``root`` with its file sources replaced, rebuilt from the leaves up (an
    explicit stack: each node's rebuilt children are the last results when it is finished)."""
    results: list[Any] = []
    todo: list[tuple[Any, bool]] = [(root, False)]
    while todo:
        node, expanded = todo.pop()
        source = _file_source(node)
        if source is not None and source.identity in folders:
            results.append(_moved(jvm, node, folders[source.identity]))
            continue
        children = node.children()
        count = children.size()
        if count == 0:
            results.append(node)
        elif expanded:
            rebuilt = results[-count:]
            del results[-count:]
            results.append(node.withNewChildren(_seq(jvm, rebuilt)))
        else:
            todo.append((node, True))
            todo.extend((children.apply(i), False) for i in range(count - 1, -1, -1))
    return results[0]


def _moved(jvm: Any, relation: Any, folder: str) -> Any:
    """A copy of the ``StreamingRelation`` reading JSON lines from ``folder``."""
    source = relation.dataSource()
    options = source.options().empty().updated("path", folder)
    fields = _elements(source)
    names = _field_names(jvm, source)
    fields[names.index("className")] = "json"
    fields[names.index("options")] = options
    fields[names.index("paths")] = _seq(jvm, [])
    moved_source = _construct(jvm, source, fields)
    relation_fields = _elements(relation)
    relation_names = _field_names(jvm, relation)
    relation_fields[relation_names.index("dataSource")] = moved_source
    return _construct(jvm, relation, relation_fields)


def _field_names(jvm: Any, obj: Any) -> list[str]:
    """A case class instance's field names in order: ``productElementName`` (Scala 2.13, Spark
    4), else (Scala 2.12, Spark 3.5) the run of its class's declared fields that hold its
    product elements in order (lazy values and logger fields come before or after them)."""
    arity = int(obj.productArity())
    try:
        return [str(obj.productElementName(i)) for i in range(arity)]
    except Exception:  # py4j: no productElementName in Scala 2.12
        pass
    fields = list(obj.getClass().getDeclaredFields())
    for field in fields:
        field.setAccessible(True)
    same = jvm.java.util.Objects.equals
    for start in range(len(fields) - arity + 1):
        run = fields[start : start + arity]
        if all(same(f.get(obj), obj.productElement(i)) for i, f in enumerate(run)):
            return [str(f.getName()) for f in run]
    raise DocumentError(f"{obj.getClass().getName()}: its fields could not be matched")


def _elements(obj: Any) -> list[Any]:
    return [obj.productElement(i) for i in range(obj.productArity())]


def _construct(jvm: Any, like: Any, fields: list[Any]) -> Any:
    """A new instance of ``like``'s case class from its product elements."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    assert gateway is not None  # a session is running: the DataFrame was planned in it
    constructor = next(
        c for c in like.getClass().getConstructors() if c.getParameterCount() == len(fields)
    )
    args = gateway.new_array(jvm.java.lang.Object, len(fields))
    for i, value in enumerate(fields):
        args[i] = value
    return constructor.newInstance(args)


def _seq(jvm: Any, items: list[Any]) -> Any:
    array_list = jvm.java.util.ArrayList()
    for item in items:
        array_list.add(item)
    return jvm.scala.collection.JavaConverters.asScalaBuffer(array_list).toList()


def _list(seq: Any) -> list[str]:
    return [str(seq.apply(i)) for i in range(seq.size())]


def _dataset_of_rows(jvm: Any, jsession: Any, plan: Any) -> Any:
    """``Dataset.ofRows``: ``org.apache.spark.sql.classic`` from Spark 4.0, ``sql`` before."""
    try:
        return jvm.org.apache.spark.sql.classic.Dataset.ofRows(jsession, plan)
    except Exception:
        return jvm.org.apache.spark.sql.Dataset.ofRows(jsession, plan)


def schema_of(source: FileSource) -> Any:
    from pyspark.sql.types import StructType

    return StructType.fromJson(json.loads(source.schema_json))
