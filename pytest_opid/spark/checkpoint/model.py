"""What a checkpoint holds that a restart depends on, as small immutable types: the sources'
offsets, every stateful operator with its stores, column families and schemas, and the confs the
offset log pins."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from pytest_opid.spark.checkpoint.files import reparse
from pytest_opid.spark.state_variables import user_variables
from pytest_opid.spark.vocabulary import DEFAULT_COL_FAMILY_NAME, DEFAULT_STORE_NAME


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_N = TypeVar("_N", bound=_Named)


def _named(items: Iterable[_N], name: str) -> _N | None:
    """The first of ``items`` called ``name``: a state store and a column family are both
    found by their name."""
    for item in items:
        if item.name == name:
            return item
    return None


@dataclass(frozen=True)
class SourceOffset:
    """One source of the latest offset log entry (``OffsetSeq`` / ``OffsetMap``).

    ``source_id`` is the source's position as text (``"0"``, ``"1"``...) for a v1 offset log,
    whose sources are matched by position, and the source's name for a v2 log (``OffsetMap``,
    named sources). ``offset`` is the offset JSON exactly as Spark wrote it, None for ``-`` (no
    offset yet). For a file source (offset ``{"logOffset": n}``, ``FileStreamSourceOffset``),
    ``files`` are the paths the last committed batch read, from ``sources/<source_id>/``; None
    for other sources.
    """

    position: int
    source_id: str
    offset: str | None
    files: tuple[str, ...] | None = None
    #: a file source whose log folder ``sources/<source_id>`` is missing: the log batch its
    #: last committed batch ended at (Spark cannot list that batch's files again)
    log_missing: int | None = None


@dataclass(frozen=True)
class ColumnFamilySchema:
    """One column family of a state store schema file (``StateStoreColFamilySchema``).

    Schema files v1 and v2 hold one, named ``default``; v3 (``transformWithState``) one per state
    variable and internal column family. Schemas are kept as the JSON text Spark wrote
    (``StructType.json``); :attr:`key_schema` and :attr:`value_schema` parse it.
    """

    name: str
    key_schema_json: str
    value_schema_json: str
    key_schema_id: int | None = None
    value_schema_id: int | None = None
    key_state_encoder_spec_json: str | None = None
    user_key_encoder_schema_json: str | None = None

    @property
    def key_schema(self) -> dict[str, Any]:
        return reparse(self.key_schema_json)

    @property
    def value_schema(self) -> dict[str, Any]:
        return reparse(self.value_schema_json)

    @property
    def key_state_encoder_spec(self) -> dict[str, Any] | None:
        if self.key_state_encoder_spec_json is None:
            return None
        return reparse(self.key_state_encoder_spec_json)

    @property
    def user_key_encoder_schema(self) -> dict[str, Any] | None:
        if self.user_key_encoder_schema_json is None:
            return None
        return reparse(self.user_key_encoder_schema_json)


@dataclass(frozen=True)
class StateStoreMetadata:
    """One state store of a stateful operator (``StateStoreMetadataV1`` / ``V2``) and its schema.

    ``schema_file`` is the schema file Spark compares a restarted query with, relative to the
    checkpoint: ``state/<op>/0[/<store>]/_metadata/schema`` for operator metadata v1, the last
    of ``stateSchemaFilePaths`` for v2. None when there is none (Spark writes one at restart
    then, without a check). ``num_cols_prefix_key`` is None for v2, which does not record it.
    """

    name: str
    num_partitions: int | None
    num_cols_prefix_key: int | None
    schema_version: int | None
    schema_file: str | None
    column_families: tuple[ColumnFamilySchema, ...] = ()
    schema_files: tuple[str, ...] = ()

    def column_family(self, name: str = DEFAULT_COL_FAMILY_NAME) -> ColumnFamilySchema | None:
        return _named(self.column_families, name)

    @property
    def key_schema(self) -> dict[str, Any] | None:
        """The key schema of the ``default`` column family (all a v1/v2 schema file holds)."""
        cf = self.column_family()
        return None if cf is None else cf.key_schema

    @property
    def value_schema(self) -> dict[str, Any] | None:
        cf = self.column_family()
        return None if cf is None else cf.value_schema


@dataclass(frozen=True)
class StateVariableInfo:
    """A ``transformWithState`` state variable (``TransformWithStateVariableInfo``)."""

    state_name: str
    state_variable_type: str
    ttl_enabled: bool


@dataclass(frozen=True)
class StateOperatorMetadata:
    """One stateful operator, from ``state/<operatorId>/_metadata`` (``OperatorStateMetadata``).

    ``metadata_version`` is 1 (``_metadata/metadata``), 2 (``_metadata/v2/<batch>``, the entry
    for the last committed batch, as Spark's ``state-metadata`` reader picks it) or 0 when the
    operator has no metadata (checkpoints of Spark before 3.5): then ``operator_name`` is None and
    the stores are the schema files found under partition 0. ``properties`` is the
    ``operatorPropertiesJson`` text of v2 (``transformWithState``: time mode, output mode, state
    variables), parsed into ``state_variables``.
    """

    operator_id: int
    operator_name: str | None
    stores: tuple[StateStoreMetadata, ...]
    num_partitions: int | None
    properties: str | None
    metadata_version: int
    metadata_file: str | None
    state_variables: tuple[StateVariableInfo, ...] = ()

    def store(self, name: str = DEFAULT_STORE_NAME) -> StateStoreMetadata | None:
        return _named(self.stores, name)


@dataclass(frozen=True)
class Checkpoint:
    """What a checkpoint pins for a restarted query.

    ``last_batch`` is the latest batch of the offset log, ``last_committed_batch`` of the commit
    log (None when there is none). ``sources``, ``confs``, the watermark and timestamp come from
    the latest offset log entry: at restart Spark takes its confs over the session's and matches
    its sources with the query's. ``committed_watermark_ms`` is the last commit's
    ``nextBatchWatermarkMs``.
    """

    path: str
    #: the query id of ``metadata``; ``None`` where that file is missing beside an offset log
    query_id: str | None
    offset_log_version: int | None
    last_batch: int | None
    last_committed_batch: int | None
    batch_watermark_ms: int | None
    batch_timestamp_ms: int | None
    committed_watermark_ms: int | None
    sources: tuple[SourceOffset, ...]
    confs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    state_operators: tuple[StateOperatorMetadata, ...] = ()
    #: a slim copy's: the checkpoint location it was copied from (``_opid_slim.json``), which
    #: a writer names where it restarts on the state this copy holds; ``None`` elsewhere
    copied_from: str | None = None

    def operator(self, operator_id: int) -> StateOperatorMetadata | None:
        for op in self.state_operators:
            if op.operator_id == operator_id:
                return op
        return None

    def to_dict(self) -> dict[str, Any]:
        """Everything read, as plain JSON-able values (schemas as parsed JSON)."""
        return {
            "path": self.path,
            **({"copied_from": self.copied_from} if self.copied_from is not None else {}),
            "query_id": self.query_id,
            "offset_log_version": self.offset_log_version,
            "last_batch": self.last_batch,
            "last_committed_batch": self.last_committed_batch,
            "batch_watermark_ms": self.batch_watermark_ms,
            "batch_timestamp_ms": self.batch_timestamp_ms,
            "committed_watermark_ms": self.committed_watermark_ms,
            "confs": dict(sorted(self.confs.items())),
            "sources": [
                {
                    "position": s.position,
                    "source_id": s.source_id,
                    "offset": s.offset,
                    "files": None if s.files is None else list(s.files),
                }
                for s in self.sources
            ],
            "state_operators": [_operator_dict(op) for op in self.state_operators],
        }


def operator_user_variables(op: StateOperatorMetadata) -> dict[str, dict[str, Any]]:
    """A transformWithState operator's own state variables with their schemas, from its column
    families (:func:`~pytest_opid.spark.state_variables.user_variables`); empty for other
    operators."""
    if not op.state_variables:
        return {}
    families = {
        f"{st.name}/{cf.name}": (cf.key_schema_json, cf.value_schema_json)
        for st in op.stores
        for cf in st.column_families
    }
    return user_variables(families, op.properties)


def _operator_dict(op: StateOperatorMetadata) -> dict[str, Any]:
    schemas = operator_user_variables(op)
    return {
        "operator_id": op.operator_id,
        "operator_name": op.operator_name,
        "metadata_version": op.metadata_version,
        "metadata_file": op.metadata_file,
        "num_partitions": op.num_partitions,
        "properties": op.properties,
        "state_variables": [
            {
                "state_name": v.state_name,
                "state_variable_type": v.state_variable_type,
                "ttl_enabled": v.ttl_enabled,
                # the variable's own schemas (a TTL variable's value without Spark's wrapper;
                # a MapState's user key), None for Spark's timers
                "user_key_schema": schemas.get(v.state_name, {}).get("key"),
                "value_schema": schemas.get(v.state_name, {}).get("value"),
            }
            for v in op.state_variables
        ],
        "stores": [
            {
                "name": st.name,
                "num_partitions": st.num_partitions,
                "num_cols_prefix_key": st.num_cols_prefix_key,
                "schema_version": st.schema_version,
                "schema_file": st.schema_file,
                "schema_files": list(st.schema_files),
                "column_families": [
                    {
                        "name": cf.name,
                        "key_schema_id": cf.key_schema_id,
                        "key_schema": cf.key_schema,
                        "value_schema_id": cf.value_schema_id,
                        "value_schema": cf.value_schema,
                        "key_state_encoder_spec": cf.key_state_encoder_spec,
                        "user_key_encoder_schema": cf.user_key_encoder_schema,
                    }
                    for cf in st.column_families
                ],
            }
            for st in op.stores
        ],
    }
