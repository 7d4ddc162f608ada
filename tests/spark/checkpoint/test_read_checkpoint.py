"""The checkpoint reader against 66 real Spark 4.3.0 checkpoints, and against broken ones.

``tests/data/spark-restart`` holds, per case, a checkpoint A left behind and what Spark's own
readers said about it (``state-metadata``, ``statestore``), so every expectation here comes from
Spark, not from the reader. No SparkSession: the reader is pure file reading.

Schemas are compared as whole JSON: field names, types, nullability and field metadata. Spark's
``statestore`` reader returns the stored key/value schemas unchanged for every store here
(aggregation, dedup, session window, join stores, applyInPandasWithState, transformWithState
value state), so nothing had to be relaxed; ``schema_fields`` is compared too, as a rule engine
would use it.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import shutil
import struct
import tarfile
from pathlib import Path
from typing import Any

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.checkpoint.read import read_checkpoint
from pytest_opid.spark.checkpoint.text import render_text, schema_fields

DATA = Path(__file__).resolve().parents[2] / "data" / "spark-restart"

with gzip.open(DATA / "cases.jsonl.gz", "rt", encoding="utf-8") as _f:
    CASES: list[dict[str, Any]] = [json.loads(line) for line in _f]
BY_ID = {rec["case"]["id"]: rec for rec in CASES}


@pytest.fixture(scope="module")
def extracted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every case's checkpoint tarball, extracted once: <root>/<case id>/checkpoint/."""
    root = tmp_path_factory.mktemp("spark-restart")
    for rec in CASES:
        with tarfile.open(DATA / rec["checkpoint"], "r:gz") as tar:
            tar.extractall(root / rec["case"]["id"], filter="data")
    return root


def _read(extracted: Path, case_id: str) -> Checkpoint:
    return read_checkpoint(extracted / case_id / "checkpoint")


def test_the_data_set_is_complete() -> None:
    assert len(CASES) == 66
    assert all((DATA / rec["checkpoint"]).is_file() for rec in CASES)


# ---------------------------------------------------------------------------------------------
# The 66 real checkpoints


@pytest.mark.parametrize("case_id", sorted(BY_ID))
def test_state_operators_match_spark_state_metadata(extracted: Path, case_id: str) -> None:
    rec = BY_ID[case_id]
    cp = _read(extracted, case_id)
    rows = rec["state_metadata"]
    # Operators: the distinct (operatorId, operatorName) of Spark's state-metadata rows.
    expected_ops = sorted({(row["operatorId"], row["operatorName"]) for row in rows})
    assert [(op.operator_id, op.operator_name) for op in cp.state_operators] == expected_ops
    for op in cp.state_operators:
        op_rows = [row for row in rows if row["operatorId"] == op.operator_id]
        # Stores, in Spark's order, with their partitions and the operator properties (v2).
        assert [st.name for st in op.stores] == [row["stateStoreName"] for row in op_rows]
        assert [st.num_partitions for st in op.stores] == [row["numPartitions"] for row in op_rows]
        assert {op.num_partitions} == {row["numPartitions"] for row in op_rows}
        assert {op.properties} == {row["operatorProperties"] for row in op_rows}
        assert op.metadata_version == (2 if op.properties is not None else 1)


@pytest.mark.parametrize("case_id", sorted(BY_ID))
def test_state_schemas_match_spark_statestore_reader(extracted: Path, case_id: str) -> None:
    rec = BY_ID[case_id]
    cp = _read(extracted, case_id)
    compared = 0
    for entry in rec["state_schemas"]:
        op = cp.operator(entry["operatorId"])
        assert op is not None
        if "stateVarName" in entry:
            # transformWithState: one column family per state variable in the v3 schema file.
            store = op.store("default")
            assert store is not None and store.schema_version == 3
            assert entry["stateVarName"] in {v.state_name for v in op.state_variables}
            cf = store.column_family(entry["stateVarName"])
        else:
            store = op.store(entry["storeName"])
            assert store is not None and store.schema_version in (1, 2)
            assert store.schema_file == (
                f"state/{op.operator_id}/0/_metadata/schema"
                if store.name == "default"
                else f"state/{op.operator_id}/0/{store.name}/_metadata/schema"
            )
            cf = store.column_family()
            assert cf is not None and store.key_schema == cf.key_schema
        assert cf is not None
        # This set has value states only; list/map states would need their own comparison.
        assert "list_value_schema" not in entry and "map_value_schema" not in entry
        assert cf.key_schema == entry["key_schema"]
        assert cf.value_schema == entry["value_schema"]
        assert schema_fields(cf.key_schema) == schema_fields(entry["key_schema"])
        assert schema_fields(cf.value_schema_json) == schema_fields(entry["value_schema"])
        compared += 1
    # ... and the checkpoint has no schema the reader did not report.
    assert compared == sum(len(st.column_families) for op in cp.state_operators for st in op.stores)


@pytest.mark.parametrize("case_id", sorted(BY_ID))
def test_batches_confs_and_sources(extracted: Path, case_id: str) -> None:
    rec = BY_ID[case_id]
    cp = _read(extracted, case_id)
    assert re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", cp.query_id)
    # A stopped by itself after its last batch: the latest offsets are committed.
    assert cp.last_committed_batch == rec["a_batches"][-1]["batchId"]
    assert cp.last_batch == cp.last_committed_batch
    assert cp.batch_watermark_ms is not None and cp.batch_watermark_ms >= 0
    # Confs A set in its session are the ones the offset log pins.
    for key, value in rec["session_conf_before"].items():
        assert cp.confs[key] == value, key
    assert (
        cp.confs["spark.sql.shuffle.partitions"]
        == rec["session_conf_before"]["spark.sql.shuffle.partitions"]
    )
    # Sources: one per readStream of A's code.
    code = rec["before_code"]
    assert len(cp.sources) == code.count("readStream")
    named = dict(re.findall(r'\.name\("(\w+)"\)\.\w+\(paths\["(\w+)"\]\)', code))
    assert cp.offset_log_version == (2 if named else 1)
    if named:
        assert {s.source_id for s in cp.sources} == set(named)
    else:
        assert [s.source_id for s in cp.sources] == [str(i) for i in range(len(cp.sources))]
    if rec["case"]["template"] == "rate_agg":
        assert all(s.files is None for s in cp.sources)  # not a file source
        return
    # File sources: the last committed batch read A's second input batch, or nothing when it
    # was a no-data batch (watermark queries).
    read_rows = rec["a_batches"][-1]["numInputRows"]
    dirs = {key: rec["paths_at_run"][key] for key in re.findall(r'paths\["(in\d)"\]', code)}
    read_dirs = set()
    for s in cp.sources:
        assert s.files is not None
        assert len(s.files) == (1 if read_rows else 0)
        for path in s.files:
            owner = [key for key, d in dirs.items() if path.startswith(f"file://{d}/")]
            assert len(owner) == 1 and re.search(r"/batch2\.\w+$", path), path
            if named:
                assert owner[0] == named[s.source_id]
            read_dirs.update(owner)
    assert read_dirs == (set(dirs) if read_rows else set())


def test_changed_source_path_fails_only_when_the_last_batch_read_files(extracted: Path) -> None:
    """The docs' rule, checked with what the reader finds in sources/<i>/."""
    cases = [rec for rec in CASES if rec["case"]["refactor_kind"] == "change_source_path"]
    assert len(cases) == 2
    for rec in cases:
        cp = _read(extracted, rec["case"]["id"])
        read_files = any(s.files for s in cp.sources)
        assert rec["spark"]["restarted"] == (not read_files), rec["case"]["id"]


@pytest.mark.parametrize("case_id", sorted(BY_ID)[::11])
def test_to_dict_and_render_text(extracted: Path, case_id: str) -> None:
    cp = _read(extracted, case_id)
    d = json.loads(json.dumps(cp.to_dict(), allow_nan=False))
    assert d["query_id"] == cp.query_id
    assert d["last_committed_batch"] == cp.last_committed_batch
    assert len(d["sources"]) == len(cp.sources)
    assert [op["operator_name"] for op in d["state_operators"]] == [
        op.operator_name for op in cp.state_operators
    ]
    for op_dict, op in zip(d["state_operators"], cp.state_operators, strict=True):
        for st_dict, st in zip(op_dict["stores"], op.stores, strict=True):
            for cf_dict, cf in zip(st_dict["column_families"], st.column_families, strict=True):
                assert cf_dict["key_schema"] == cf.key_schema
    text = render_text(cp)
    assert cp.query_id in text and text.endswith("\n")
    for op in cp.state_operators:
        assert json.dumps(op.operator_name) in text
    assert read_checkpoint(str(cp.path)) == cp  # str and Path alike; results compare by value


def test_results_are_immutable(extracted: Path) -> None:
    cp = _read(extracted, "transform_with_state_pandas__add_grouping_key__100058")
    with pytest.raises(AttributeError):
        cp.last_batch = 7  # type: ignore[misc]
    with pytest.raises(TypeError):
        cp.confs["spark.sql.shuffle.partitions"] = "9"  # type: ignore[index]
    cf = cp.state_operators[0].stores[0].column_families[0]
    cf.key_schema["fields"].clear()  # a fresh copy each time
    assert cf.key_schema["fields"]
    assert cf.name == "cnt" and cf.key_state_encoder_spec == {
        "keyStateEncoderType": "NoPrefixKeyStateEncoderSpec"
    }
    assert cf.user_key_encoder_schema is None
    assert cp.state_operators[0].state_variables[0].state_variable_type == "ValueState"


# ---------------------------------------------------------------------------------------------
# Broken checkpoints

AGG = "agg_user_sum__add_aggregate__100001"  # v1 operator metadata, schema v2
TWS = "transform_with_state_pandas__add_grouping_key__100058"  # v2 metadata, schema v3
NAMED = "named_sources_union__add_union_source__100049"  # v2 offset log


@pytest.fixture
def copy_of(extracted: Path, tmp_path: Path) -> Any:
    def make(case_id: str) -> Path:
        dest = tmp_path / case_id
        shutil.copytree(extracted / case_id / "checkpoint", dest)
        return dest

    return make


def _fails(path: Path, *fragments: str) -> str:
    with pytest.raises(DocumentError) as info:
        read_checkpoint(path)
    message = str(info.value)
    assert type(info.value) is DocumentError
    assert "\n" not in message and "\r" not in message
    assert len(message) < 300 + len(str(path)), message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_not_a_directory(tmp_path: Path) -> None:
    _fails(tmp_path / "nowhere", "nowhere", "not a directory")
    (tmp_path / "file").write_text("x")
    _fails(tmp_path / "file", "file", "not a directory")


def test_empty_directory(tmp_path: Path) -> None:
    _fails(tmp_path, "metadata", "missing")


def test_missing_offsets(copy_of: Any) -> None:
    cp = copy_of(AGG)
    shutil.rmtree(cp / "offsets")
    _fails(cp, "offsets", "missing")


def test_missing_or_garbled_stream_metadata(copy_of: Any) -> None:
    cp = copy_of(AGG)
    (cp / "metadata").write_text('{"id": 5}')
    _fails(cp, "metadata", '"id" must be a str')
    (cp / "metadata").write_text('{"id": "a", "id": "b"}')
    _fails(cp, "metadata", "duplicate key")
    (cp / "metadata").unlink()
    # beside an offset log, read as missing: Spark refuses it, and the restart check says so
    # (STREAMING_CHECKPOINT_MISSING_METADATA_FILE, tests/data/sources-sinks)
    assert read_checkpoint(cp).query_id is None
    shutil.rmtree(cp / "offsets")
    _fails(cp, "metadata", "missing")


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        (
            "v1\n{garbled\n{}",
            ("offsets/1", "offset metadata (line 2) is not valid JSON", "garbled"),
        ),
        ('v1\n{}\n{"logOffset": 1', ("offsets/1", "offset on line 3 is not valid JSON")),
        ("v99\n{}\n{}", ("offsets/1", "unsupported version v99", "up to v2")),
        ("x1\n{}\n{}", ("offsets/1", "malformed version line")),
        ("v1", ("offsets/1", "no metadata line")),
        ("", ("offsets/1", "empty")),
        ('v1\n{"batchWatermarkMs": NaN}\n-', ("offsets/1", "NaN is not a number JSON allows")),
        ('v1\n{"batchWatermarkMs": 1e999}\n-', ("offsets/1", "out of range")),
        ('v1\n{"conf": {"a": 1}}\n-', ("offsets/1", "conf", "must be a string")),
        ("v2\n{}\nnocolon", ("offsets/1", "not <sourceId>:<offset>")),
        ("v1\n{}\n" + "[" * 100_000, ("offsets/1", "nested too deeply")),
    ],
)
def test_garbled_offset_log(copy_of: Any, content: str, fragments: tuple[str, ...]) -> None:
    cp = copy_of(AGG)
    (cp / "offsets" / "1").write_text(content, encoding="utf-8")
    _fails(cp, *fragments)


def test_non_utf8_file(copy_of: Any) -> None:
    cp = copy_of(AGG)
    (cp / "offsets" / "1").write_bytes(b'v1\n{"conf": {"k": "\xff\xfe"}}\n-')
    _fails(cp, "offsets/1", "not UTF-8", "0xff")


def test_long_garbage_is_quoted_short(copy_of: Any) -> None:
    cp = copy_of(AGG)
    junk = "\u202e\u2028" + "x" * 5000
    (cp / "offsets" / "1").write_text(f"v1\n{{{junk}\n-", encoding="utf-8")
    message = _fails(cp, "offsets/1", "\\u202e", "\\u2028")
    assert "\u202e" not in message and "\u2028" not in message
    assert "x" * 81 not in message


def test_garbled_commit_log(copy_of: Any) -> None:
    cp = copy_of(AGG)
    (cp / "commits" / "1").write_text("v3\n{}")
    _fails(cp, "commits/1", "unsupported version v3")


@pytest.mark.parametrize("case_id", [AGG, TWS])
def test_truncated_schema_file(copy_of: Any, case_id: str) -> None:
    cp = copy_of(case_id)
    schema = _schema_file(cp)
    data = schema.read_bytes()
    for cut in (1, 3, 7, len(data) // 2, len(data) - 1):
        schema.write_bytes(data[:cut])
        _fails(cp, schema.name, "truncated state schema file")


@pytest.mark.parametrize("case_id", [AGG, TWS])
def test_binary_garbage_schema_file(copy_of: Any, case_id: str) -> None:
    cp = copy_of(case_id)
    schema = _schema_file(cp)
    rng = random.Random(1)
    for _ in range(50):
        schema.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(300))))
        _fails(cp, schema.name)


def test_schema_file_with_unknown_version_or_bad_json(copy_of: Any) -> None:
    cp = copy_of(AGG)
    schema = _schema_file(cp)
    schema.write_bytes(_utf("v4") + _utf("{}") + _utf("{}"))
    _fails(cp, "state/0/0/_metadata/schema", "unsupported version v4", "up to v3")
    schema.write_bytes(_utf("v1") + _utf('{"type":"struct","fields":[]}') + _utf("[1,"))
    _fails(cp, "state/0/0/_metadata/schema", "value schema is not valid JSON")
    schema.write_bytes(_utf("v1") + _utf('{"type":"struct","fields":[]}') + _utf('{"a":1}'))
    _fails(cp, "state/0/0/_metadata/schema", "value schema is not a Spark struct type")
    schema.write_bytes(_utf("v2") + struct.pack(">i", 1_000_000) + _utf("{}"))
    _fails(cp, "state/0/0/_metadata/schema", "impossible string chunk count 1000000")


def test_schema_v1_in_modified_utf8(copy_of: Any) -> None:
    """Schema v1 (SchemaV1Reader) with a NUL and a character beyond U+FFFF in a field name."""
    cp = copy_of(AGG)
    name = "a\x00b\U0001f600"
    key = json.dumps({"type": "struct", "fields": [_field(name, "string")]}, ensure_ascii=False)
    value = json.dumps({"type": "struct", "fields": [_field("n", "long", nullable=False)]})
    _schema_file(cp).write_bytes(_utf("v1") + _utf(key) + _utf(value))
    store = read_checkpoint(cp).state_operators[0].stores[0]
    assert store.schema_version == 1
    assert schema_fields(store.key_schema or {}) == ((name, '"string"', True),)
    assert schema_fields(store.value_schema or {}) == (("n", '"long"', False),)
    # A 4-byte UTF-8 sequence is not modified UTF-8: Java's readUTF refuses it too.
    _schema_file(cp).write_bytes(_utf("v1") + _raw_utf(key.encode()) + _utf(value))
    _fails(cp, "schema", "modified UTF-8")


def test_schema_v2_in_chunks(copy_of: Any) -> None:
    """Schema v2 (SchemaV2Reader): a JSON string split over several writeUTF chunks."""
    cp = copy_of(AGG)
    key = json.dumps({"type": "struct", "fields": [_field(f"c{i}", "long") for i in range(3)]})
    value = json.dumps({"type": "struct", "fields": []})
    chunks = [key[:10], key[10:11], key[11:]]
    body = struct.pack(">i", 3) + b"".join(_utf(c) for c in chunks)
    _schema_file(cp).write_bytes(_utf("v2") + body + struct.pack(">i", 1) + _utf(value))
    store = read_checkpoint(cp).state_operators[0].stores[0]
    assert [f[0] for f in schema_fields(store.key_schema or {})] == ["c0", "c1", "c2"]
    assert store.value_schema == {"type": "struct", "fields": []}


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        ("v99\n{}", ("unsupported version v99",)),
        ("v2\n{}", ("expected version v1, but found v2",)),
        ("v1\n", ("no operator metadata after the version line",)),
        ("v1\n{", ("operator metadata is not valid JSON",)),
        ('v1\n{"operatorInfo":{"operatorId":0},"stateStoreInfo":[]}', ('"operatorName"',)),
        (
            'v1\n{"operatorInfo":{"operatorId":3,"operatorName":"x"},"stateStoreInfo":[]}',
            ("operatorId 3 is not its folder's state/0",),
        ),
        (
            'v1\n{"operatorInfo":{"operatorId":0,"operatorName":"x"},'
            '"stateStoreInfo":[{"storeName":"../up","numColsPrefixKey":0,"numPartitions":1}]}',
            ("is not a folder name",),
        ),
    ],
)
def test_garbled_operator_metadata_v1(
    copy_of: Any, content: str, fragments: tuple[str, ...]
) -> None:
    cp = copy_of(AGG)
    (cp / "state" / "0" / "_metadata" / "metadata").write_text(content)
    _fails(cp, "state/0/_metadata/metadata", *fragments)


def test_garbled_operator_metadata_v2(copy_of: Any) -> None:
    cp = copy_of(TWS)
    meta = cp / "state" / "0" / "_metadata" / "v2" / "1"
    original = meta.read_text()
    meta.write_text("v99\n" + original.split("\n", 1)[1])
    _fails(cp, "state/0/_metadata/v2/1", "unsupported version v99")
    meta.write_text("v1\n" + original.split("\n", 1)[1])
    _fails(cp, "state/0/_metadata/v2/1", "expected version v2, but found v1")
    escaping = re.sub(
        r'"stateSchemaFilePaths":\[[^\]]*\]',
        '"stateSchemaFilePaths":["file:/x/state/0/_stateSchema/../../../../etc/passwd"]',
        original,
    )
    meta.write_text(escaping)
    _fails(cp, "state/0/_metadata/v2/1", "is not under state/0/_stateSchema/")
    assert '\\"ttlEnabled\\":false' in original  # JSON text inside a JSON string
    meta.write_text(original.replace('\\"ttlEnabled\\":false', '\\"ttlEnabled\\":\\"no\\"'))
    _fails(cp, "state/0/_metadata/v2/1", '"ttlEnabled" must be a bool')
    meta.write_text(original)
    shutil.rmtree(cp / "state" / "0" / "_stateSchema" / "default")
    _fails(cp, "_stateSchema", "missing: the state schema file the operator metadata names")


def test_v2_operator_metadata_follows_the_last_committed_batch(copy_of: Any) -> None:
    """OperatorStateMetadataV2Reader takes the latest entry at or before the committed batch."""
    cp = copy_of(TWS)
    v2 = cp / "state" / "0" / "_metadata" / "v2"
    (v2 / "5").write_text((v2 / "1").read_text().replace("transformWithStateInPandasExec", "x"))
    assert read_checkpoint(cp).state_operators[0].operator_name == "transformWithStateInPandasExec"
    assert read_checkpoint(cp).state_operators[0].metadata_file == "state/0/_metadata/v2/1"
    for name in ("0", "1"):
        (v2 / name).unlink()
    _fails(cp, "state/0/_metadata/v2", "no operator metadata for batch 1 or before")


def test_operator_without_metadata(copy_of: Any) -> None:
    """Checkpoints of Spark before 3.5 have no operator metadata: stores come from schema files."""
    cp = copy_of("join_inner__inner_to_leftOuter__100039")
    (cp / "state" / "0" / "_metadata" / "metadata").unlink()
    op = read_checkpoint(cp).state_operators[0]
    assert op.metadata_version == 0 and op.operator_name is None and op.num_partitions == 3
    assert [st.name for st in op.stores] == [
        "left-keyToNumValues",
        "left-keyWithIndexToValue",
        "right-keyToNumValues",
        "right-keyWithIndexToValue",
    ]
    assert "(no operator metadata)" in render_text(read_checkpoint(cp))


def test_stateless_checkpoint_without_commits(copy_of: Any) -> None:
    cp = copy_of("stateless_udf__no_change__100059")
    shutil.rmtree(cp / "commits")
    result = read_checkpoint(cp)
    assert result.state_operators == () and result.last_committed_batch is None
    assert result.last_batch == 1 and result.sources[0].files == ()
    for f in (cp / "offsets").iterdir():
        f.unlink()
    empty = read_checkpoint(cp)
    assert empty.last_batch is None and empty.sources == () and dict(empty.confs) == {}
    assert "no batch planned yet" in render_text(empty)


def test_file_source_log_compaction(copy_of: Any) -> None:
    """A log batch folded into a "<n>.compact" file (CompactibleFileStreamLog) is found there."""
    cp = copy_of("stateless_udf__no_change__100059")
    src = cp / "sources" / "0"
    entries = [
        json.loads(line) for f in ("0", "1") for line in (src / f).read_text().split("\n")[1:]
    ]
    for f in ("0", "1"):
        (src / f).unlink()
    (src / "1.compact").write_text("v1\n" + "\n".join(json.dumps(e) for e in entries))
    files = read_checkpoint(cp).sources[0].files
    assert files == (entries[1]["path"],)
    (src / "1.compact").unlink()
    _fails(cp, "sources/0", "no log file holds file source batch 1")


def test_named_source_offsets_and_garbled_file_source_log(copy_of: Any) -> None:
    cp = copy_of(NAMED)
    result = read_checkpoint(cp)
    assert result.offset_log_version == 2
    assert sorted(s.source_id for s in result.sources) == ["orders", "returns"]
    (cp / "sources" / "orders" / "1").write_text('v1\n{"path": "p", "batchId": 1}')
    _fails(cp, "sources/orders/1", '"timestamp"')
    (cp / "sources" / "orders" / "1").write_text("v2\n")
    _fails(cp, "sources/orders/1", "unsupported version v2")


def test_names_are_escaped_in_text_and_messages(copy_of: Any) -> None:
    cp = copy_of(AGG)
    meta = cp / "state" / "0" / "_metadata" / "metadata"
    evil = "save\n\u202eevil\u2066\u0085\u2029"
    meta.write_text(meta.read_text().replace("stateStoreSave", json.dumps(evil)[1:-1]))
    result = read_checkpoint(cp)
    assert result.state_operators[0].operator_name == evil
    text = render_text(result)
    for ch in "\u202e\u2066\u0085\u2029":
        assert ch not in text
    assert "save\\n\\u202eevil\\u2066\\u0085\\u2029" in text
    bad = cp / "offsets" / "1"
    bad.write_text(f"v1\n{{}}\n{evil}")
    message = _fails(cp, "offsets/1")
    assert not any(ch in message for ch in "\n\u202e\u2066\u0085\u2029")


def test_random_corruption_raises_document_error_only(copy_of: Any) -> None:
    """Flipped bytes, cut files, inserted junk: a result or a DocumentError, nothing else."""
    rng = random.Random(7)
    for case_id in (AGG, TWS, NAMED, "join_left_outer__no_change__100043"):
        cp = copy_of(case_id)
        files = sorted(
            p for p in cp.rglob("*") if p.is_file() and p.suffix not in (".crc", ".delta", ".zip")
        )
        originals = {p: p.read_bytes() for p in files}
        for _ in range(60):
            target = rng.choice(files)
            data = bytearray(originals[target])
            how = rng.randrange(3)
            if how == 0 and data:
                for _ in range(rng.randrange(1, 4)):
                    data[rng.randrange(len(data))] = rng.randrange(256)
            elif how == 1:
                del data[rng.randrange(len(data) + 1) :]
            else:
                data[rng.randrange(len(data) + 1) : 0] = bytes(
                    rng.randrange(256) for _ in range(rng.randrange(1, 20))
                )
            target.write_bytes(bytes(data))
            try:
                render_text(read_checkpoint(cp))
            except DocumentError as exc:
                assert "\n" not in str(exc)
            target.write_bytes(originals[target])


# ---------------------------------------------------------------------------------------------
# schema_fields


def test_schema_fields() -> None:
    schema = {
        "type": "struct",
        "fields": [
            _field("k", "string"),
            {
                "name": "w",
                "type": {"type": "struct", "fields": [_field("start", "timestamp")]},
                "nullable": False,
                "metadata": {"spark.timeWindow": True},
            },
        ],
    }
    fields = schema_fields(schema)
    assert fields[0] == ("k", '"string"', True)
    assert fields[1][0] == "w" and fields[1][2] is False
    assert json.loads(fields[1][1])["fields"][0]["name"] == "start"
    assert schema_fields(json.dumps(schema)) == fields
    for bad in ("{", '{"type": "array"}', '{"type": "struct", "fields": [{"name": 1}]}', "[]"):
        with pytest.raises(DocumentError):
            schema_fields(bad)


# ---------------------------------------------------------------------------------------------
# Helpers


def _schema_file(cp: Path) -> Path:
    v1 = cp / "state" / "0" / "0" / "_metadata" / "schema"
    if v1.exists():
        return v1
    folder = cp / "state" / "0" / "_stateSchema" / "default"
    (only,) = (p for p in folder.iterdir() if not p.name.startswith("."))
    return only


def _field(name: str, type_: str, *, nullable: bool = True) -> dict[str, Any]:
    return {"name": name, "type": type_, "nullable": nullable, "metadata": {}}


def _raw_utf(data: bytes) -> bytes:
    return struct.pack(">H", len(data)) + data


def _utf(text: str) -> bytes:
    """java.io.DataOutputStream.writeUTF: modified UTF-8 with a 2-byte length."""
    out = bytearray()
    for unit in struct.unpack(f"<{len(text.encode('utf-16-le')) // 2}H", text.encode("utf-16-le")):
        if 0 < unit < 0x80:
            out.append(unit)
        elif unit < 0x800:
            out += bytes([0xC0 | unit >> 6, 0x80 | unit & 0x3F])
        else:
            out += bytes([0xE0 | unit >> 12, 0x80 | unit >> 6 & 0x3F, 0x80 | unit & 0x3F])
    return _raw_utf(bytes(out))
