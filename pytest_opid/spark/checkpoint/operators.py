"""The state of each stateful operator: ``state/<n>/_metadata`` (operator metadata v1/v2: name,
stores, partitions, transformWithState's properties), its stores and their schema files; where a
checkpoint has no operator metadata (Spark 3.5) the stores are found from the directories."""

from __future__ import annotations

from typing import Any

from pytest_opid.spark.checkpoint.files import (
    BATCH_NAME,
    LINE_BREAK,
    CheckpointReader,
    batch_files,
    field_of,
    quoted,
)
from pytest_opid.spark.checkpoint.model import (
    StateOperatorMetadata,
    StateStoreMetadata,
    StateVariableInfo,
)
from pytest_opid.spark.checkpoint.schema_files import read_schema_file
from pytest_opid.spark.vocabulary import DEFAULT_STORE_NAME

_MAX_OPERATOR_METADATA_VERSION = 2


def read_operators(
    r: CheckpointReader, last_committed: int | None
) -> tuple[StateOperatorMetadata, ...]:
    # StateMetadataPartitionReader: every state/<operatorId>, metadata v2 where
    # _metadata/v2 exists, else v1.
    if not r.is_dir("state"):
        return ()
    op_dirs: dict[int, str] = {}
    for name in r.listdir("state"):
        if BATCH_NAME.fullmatch(name):
            if int(name) in op_dirs:
                r.fail(
                    f"state/{name}", f"operator {int(name)} is also in state/{op_dirs[int(name)]}"
                )
            op_dirs[int(name)] = name
    for op_id, name in op_dirs.items():
        if name != str(op_id):
            r.fail(f"state/{name}", f"not the folder Spark names operator {op_id} by")
    return tuple(_read_operator(r, op_id, last_committed) for op_id in sorted(op_dirs))


def _read_operator(
    r: CheckpointReader, op_id: int, last_committed: int | None
) -> StateOperatorMetadata:
    op_dir = f"state/{op_id}"
    if r.is_dir(f"{op_dir}/_metadata/v2"):
        # OperatorStateMetadataV2Reader: the latest _metadata/v2/<batch> at or before the batch
        # (the last committed one; 0 when none is committed).
        batch = 0 if last_committed is None else last_committed
        batches = [b for b in batch_files(r, f"{op_dir}/_metadata/v2") if b <= batch]
        if not batches:
            r.fail(f"{op_dir}/_metadata/v2", f"no operator metadata for batch {batch} or before")
        rel = f"{op_dir}/_metadata/v2/{max(batches)}"
        return _read_operator_file(r, rel, op_id, 2)
    rel = f"{op_dir}/_metadata/metadata"
    if r.is_file(rel):
        return _read_operator_file(r, rel, op_id, 1)
    return _discover_operator(r, op_id)


def _read_operator_file(
    r: CheckpointReader, rel: str, op_id: int, expected: int
) -> StateOperatorMetadata:
    # OperatorStateMetadataUtils.readMetadata: version line, then OperatorStateMetadataV1 / V2
    # JSON (operatorInfo, stateStoreInfo[, operatorPropertiesJson]).
    text = r.read_text(rel)
    first = LINE_BREAK.search(text)
    version_line = text if first is None else text[: first.start()]
    version = r.version(rel, version_line, _MAX_OPERATOR_METADATA_VERSION)
    if version != expected:
        r.fail(rel, f"expected version v{expected}, but found v{version}")
    if first is None or not text[first.end() :].strip():
        r.fail(rel, "no operator metadata after the version line")
    obj = r.json(rel, text[first.end() :], "the operator metadata")
    if not isinstance(obj, dict):
        r.fail(rel, "the operator metadata must be a JSON object")
    info = field_of(r, rel, obj, "operatorInfo", "object")
    meta_id = field_of(r, rel, info, "operatorId", "int")
    name = field_of(r, rel, info, "operatorName", "str")
    if meta_id != op_id:
        r.fail(rel, f"operatorId {meta_id} is not its folder's state/{op_id}")
    stores_json = field_of(r, rel, obj, "stateStoreInfo", "array")
    properties: str | None = None
    variables: tuple[StateVariableInfo, ...] = ()
    if version == 2:
        properties = field_of(r, rel, obj, "operatorPropertiesJson", "str")
        variables = _state_variables(r, rel, properties)
    stores: list[StateStoreMetadata] = []
    seen: set[str] = set()
    for store_json in stores_json:
        if not isinstance(store_json, dict):
            r.fail(rel, "every stateStoreInfo entry must be a JSON object")
        store_name = field_of(r, rel, store_json, "storeName", "str")
        if store_name in seen:
            r.fail(rel, f"state store {quoted(store_name)} is listed twice")
        seen.add(store_name)
        stores.append(_read_store(r, rel, op_id, version, store_json))
    partitions = {st.num_partitions for st in stores}
    return StateOperatorMetadata(
        operator_id=op_id,
        operator_name=name,
        stores=tuple(stores),
        num_partitions=partitions.pop() if len(partitions) == 1 else None,
        properties=properties,
        metadata_version=version,
        metadata_file=rel,
        state_variables=variables,
    )


def _state_variables(
    r: CheckpointReader, rel: str, properties: str
) -> tuple[StateVariableInfo, ...]:
    props = r.json(rel, properties, "operatorPropertiesJson")
    if not isinstance(props, dict):
        r.fail(rel, "operatorPropertiesJson must hold a JSON object")
    out: list[StateVariableInfo] = []
    for var in field_of(r, rel, props, "stateVariables", "array", required=False) or []:
        if not isinstance(var, dict):
            r.fail(rel, "every state variable in operatorPropertiesJson must be an object")
        out.append(
            StateVariableInfo(
                state_name=field_of(r, rel, var, "stateName", "str"),
                state_variable_type=field_of(r, rel, var, "stateVariableType", "str"),
                ttl_enabled=field_of(r, rel, var, "ttlEnabled", "bool"),
            )
        )
    return tuple(out)


def _read_store(
    r: CheckpointReader, rel: str, op_id: int, version: int, store_json: dict[str, Any]
) -> StateStoreMetadata:
    name = field_of(r, rel, store_json, "storeName", "str")
    partitions = field_of(r, rel, store_json, "numPartitions", "int")
    prefix = field_of(r, rel, store_json, "numColsPrefixKey", "int", required=version == 1)
    if version == 1:
        # StateSchemaCompatibilityChecker: partition 0's store folder, _metadata/schema.
        if not safe_component(name):
            r.fail(rel, f"store name {quoted(name)} is not a folder name")
        store_dir = f"state/{op_id}/0" if name == DEFAULT_STORE_NAME else f"state/{op_id}/0/{name}"
        schema_rel = f"{store_dir}/_metadata/schema"
        schema_files: tuple[str, ...] = ()
        if not r.is_file(schema_rel):
            return StateStoreMetadata(name, partitions, prefix, None, None)
    else:
        # StateStoreMetadataV2.stateSchemaFilePaths: absolute paths of the run; the last one is
        # the current schema (StateSchemaCompatibilityChecker takes oldSchemaFilePaths.last).
        paths = field_of(r, rel, store_json, "stateSchemaFilePaths", "array")
        resolved: list[str] = []
        for path in paths:
            if not isinstance(path, str):
                r.fail(rel, "stateSchemaFilePaths must hold strings")
            resolved.append(_resolve_schema_path(r, rel, op_id, path))
        schema_files = tuple(resolved)
        if not schema_files:
            return StateStoreMetadata(name, partitions, prefix, None, None)
        schema_rel = schema_files[-1]
        if not r.is_file(schema_rel):
            r.fail(schema_rel, "missing: the state schema file the operator metadata names")
    schema_version, families = read_schema_file(r, schema_rel)
    return StateStoreMetadata(
        name=name,
        num_partitions=partitions,
        num_cols_prefix_key=prefix,
        schema_version=schema_version,
        schema_file=schema_rel,
        column_families=families,
        schema_files=schema_files,
    )


def safe_component(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name


def _resolve_schema_path(r: CheckpointReader, rel: str, op_id: int, path: str) -> str:
    """A recorded schema file path, as a path inside this checkpoint.

    The path is the run's absolute one (``file:/.../state/<op>/_stateSchema/<store>/<file>``, see
    StateSchemaV3File); the checkpoint may have moved, so only its part from
    ``state/<op>/_stateSchema`` on is used.
    """
    parts = path.split("/")
    for i in range(len(parts) - 3, -1, -1):
        if parts[i : i + 3] == ["state", str(op_id), "_stateSchema"]:
            tail = parts[i + 3 :]
            if tail and all(safe_component(p) for p in tail):
                return "/".join(["state", str(op_id), "_stateSchema", *tail])
            break
    r.fail(rel, f"schema file path {quoted(path)} is not under state/{op_id}/_stateSchema/")


def _discover_operator(r: CheckpointReader, op_id: int) -> StateOperatorMetadata:
    """An operator without metadata (before Spark 3.5): its stores from partition 0's schemas."""
    op_dir = f"state/{op_id}"
    partitions = [n for n in r.listdir(op_dir) if BATCH_NAME.fullmatch(n)]
    stores: list[StateStoreMetadata] = []
    part0 = f"{op_dir}/0"
    if r.is_dir(part0):
        names = [DEFAULT_STORE_NAME] + [
            n
            for n in r.listdir(part0)
            if n[:1] not in "._" and n != DEFAULT_STORE_NAME and r.is_dir(f"{part0}/{n}")
        ]
        for name in names:
            store_dir = part0 if name == DEFAULT_STORE_NAME else f"{part0}/{name}"
            schema_rel = f"{store_dir}/_metadata/schema"
            if r.is_file(schema_rel):
                version, families = read_schema_file(r, schema_rel)
                stores.append(
                    StateStoreMetadata(
                        name, None, None, version, schema_rel, column_families=families
                    )
                )
    return StateOperatorMetadata(
        operator_id=op_id,
        operator_name=None,
        stores=tuple(stores),
        num_partitions=len(partitions) or None,
        properties=None,
        metadata_version=0,
        metadata_file=None,
    )
