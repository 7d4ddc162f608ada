"""The pure-Python ``_metadata`` reader against Flink 2.3.0's own loader, and against bad input.

The 80 savepoints and retained checkpoints of ``tests/data/flink-restore`` (vendored unchanged
from ``../shared/flink-restore``) were written by a real Flink 2.3.0; each case records the
operator states ``Checkpoints.loadCheckpointMetadata`` returned for them. Handle kinds those
files do not contain (older versions, changelog and file-merging handles, ...) are checked on
files built here byte by byte in the same format.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import struct
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.flink.savepoint import (
    OperatorState,
    Savepoint,
    parse_metadata,
    read_savepoint,
    referenced_files,
    render_text,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "flink-restore"
with gzip.open(DATA / "cases.jsonl.gz", "rt", encoding="utf-8") as _f:
    CASES = [json.loads(line) for line in _f]
SEEDS = [case["case"]["seed"] for case in CASES]
BY_SEED = {case["case"]["seed"]: case for case in CASES}


def _root(extracted: Path, seed: int) -> Path:
    return extracted / str(seed) / BY_SEED[seed]["savepoint_root"]


def _metadata(extracted: Path, seed: int) -> bytes:
    return (_root(extracted, seed) / "_metadata").read_bytes()


def _as_reference(savepoint: Savepoint) -> list[dict[str, object]]:
    return [
        {
            "operator_id": op.operator_id,
            "name": op.name,
            "uid": op.uid,
            "parallelism": op.parallelism,
            "max_parallelism": op.max_parallelism,
            "coordinator_state": op.coordinator_state,
            "has_state": op.has_state,
            "fully_finished": op.fully_finished,
            "subtask_states": op.subtask_states,
            "state_kinds": sorted(op.state_kinds),
        }
        for op in savepoint.operators
    ]


def test_the_data_is_all_there() -> None:
    assert len(CASES) == 80
    assert len(set(SEEDS)) == 80


# ---------------------------------------------------------------------------------------------
#  Flink 2.3.0's files
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_reads_what_flink_loaded(extracted: Path, seed: int) -> None:
    case = BY_SEED[seed]
    expected = [dict(m, state_kinds=sorted(m["state_kinds"])) for m in case["metadata"]]
    root = _root(extracted, seed)
    for path in (root, root / "_metadata", str(root)):
        savepoint = read_savepoint(path)
        assert savepoint.checkpoint_id == case["case"]["checkpoint_id"]
        assert savepoint.version == 6
        assert _as_reference(savepoint) == expected
        assert all(op.state_kinds == tuple(sorted(op.state_kinds)) for op in savepoint.operators)


@pytest.mark.parametrize("seed", SEEDS)
def test_state_sizes_and_files(extracted: Path, seed: int) -> None:
    """Sizes: an operator has a size exactly when it has state (no handle in these files is
    empty), and every file handle records the size of the file it points to; every file of the
    archive is one that a handle points to."""
    case = BY_SEED[seed]
    root = _root(extracted, seed)
    savepoint = read_savepoint(root)
    for op in savepoint.operators:
        assert (op.state_size > 0) == (op.has_state or op.coordinator_state), op
    base = extracted / str(seed)
    job_dir = case["savepoint_root"].split("/")[0] + "/"
    in_archive = {
        p.relative_to(base).as_posix()
        for p in base.rglob("*")
        if p.is_file() and p.name != "_metadata"
    }
    assert len(in_archive) == case["case"]["state_files"]
    referenced = set()
    ids = {op.operator_id for op in savepoint.operators}
    for state_file in referenced_files(root):
        assert state_file.operator_id in ids
        if state_file.kind == "relative":
            where = os.path.normpath(f"{case['savepoint_root']}/{state_file.path}")
        else:
            assert state_file.kind == "file"
            where = state_file.path[state_file.path.index(job_dir) :]
        assert where in in_archive, state_file
        assert (base / where).stat().st_size == state_file.size
        referenced.add(where)
    assert referenced == in_archive


def test_to_dict(extracted: Path) -> None:
    savepoint = read_savepoint(_root(extracted, SEEDS[0]))
    as_dict = savepoint.to_dict()
    assert list(as_dict) == ["version", "checkpoint_id", "operators"]
    assert as_dict["version"] == 6
    assert as_dict["checkpoint_id"] == BY_SEED[SEEDS[0]]["case"]["checkpoint_id"]
    operators = as_dict["operators"]
    assert isinstance(operators, list) and len(operators) == len(savepoint.operators)
    for entry, op in zip(operators, savepoint.operators, strict=True):
        assert list(entry) == [
            "operator_id",
            "name",
            "uid",
            "parallelism",
            "max_parallelism",
            "coordinator_state",
            "has_state",
            "state_size",
        ]
        assert entry["operator_id"] == op.operator_id and entry["state_size"] == op.state_size
    assert json.loads(json.dumps(as_dict)) == as_dict


def test_results_are_immutable(extracted: Path) -> None:
    savepoint = read_savepoint(_root(extracted, SEEDS[0]))
    with pytest.raises(AttributeError):
        savepoint.version = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        savepoint.operators[0].name = "x"  # type: ignore[misc]
    assert isinstance(savepoint.operators, tuple)
    assert not hasattr(savepoint, "__dict__")


def test_render_text(extracted: Path) -> None:
    savepoint = read_savepoint(_root(extracted, SEEDS[0]))
    text = render_text(savepoint)
    lines = text.splitlines()
    assert len(lines) == 2 + len(savepoint.operators)
    for op, line in zip(savepoint.operators, lines[2:], strict=True):
        assert line.split()[0] == op.operator_id
        assert f"{op.parallelism}/{op.max_parallelism}" in line


def test_render_text_escapes_names() -> None:
    evil = "evil\n\x1b[31m\u202eoops\u2028\u2029\u0085\u2066x"
    op = OperatorState(
        operator_id="0" * 32,
        name=evil,
        uid="u\r\nid",
        parallelism=1,
        max_parallelism=128,
        coordinator_state=False,
        has_state=True,
        state_size=3,
        fully_finished=False,
        subtask_states=1,
        state_kinds=("managed_keyed",),
    )
    text = render_text(Savepoint(version=6, checkpoint_id=1, operators=(op,)))
    assert len(text.splitlines()) == 3
    for raw in ("\n\x1b", "\x1b", "\u202e", "\u2028", "\u2029", "\u0085", "\u2066", "\r"):
        assert raw not in text.split("\n", 2)[2]
    line = text.splitlines()[2]
    assert "\\n\\u001b[31m\\u202eoops\\u2028\\u2029\\u0085\\u2066x" in line
    assert '"u\\r\\nid"' in line


# ---------------------------------------------------------------------------------------------
#  Bad input: one DocumentError, one line naming the file, nothing else
# ---------------------------------------------------------------------------------------------


def _rejects(data: bytes, origin: str = "some/dir/_metadata") -> str:
    with pytest.raises(DocumentError) as info:
        parse_metadata(data, origin)
    message = str(info.value)
    assert origin in message
    assert "\n" not in message and "\r" not in message
    assert len(message) < 300
    return message


def test_empty_and_short_files() -> None:
    assert "empty" in _rejects(b"")
    assert "too short" in _rejects(b"\x49\x60\x67")
    assert "too short" in _rejects(b"\x49\x60\x67\x2d\x00\x00\x00")


def test_wrong_magic(extracted: Path) -> None:
    data = _metadata(extracted, SEEDS[0])
    assert "not a Flink savepoint" in _rejects(b"PK\x03\x04" + data[4:])
    assert "not a Flink savepoint" in _rejects(b"{}\n" * 40)


@pytest.mark.parametrize("version", [0, 1, 2, 8, 99, -1, 0x7FFFFFFF])
def test_unknown_version(extracted: Path, version: int) -> None:
    data = _metadata(extracted, SEEDS[0])
    patched = data[:4] + struct.pack(">i", version) + data[8:]
    assert f"unsupported _metadata version {version}" in _rejects(patched)


def test_every_truncation_of_a_small_file(extracted: Path) -> None:
    seed = min(SEEDS, key=lambda s: len(_metadata(extracted, s)))
    data = _metadata(extracted, seed)
    # The file's own path can be longer than the 100 characters a message shows of it (a deep
    # temporary directory), so a short name stands for it.
    origin = f"savepoints/{seed}/_metadata"
    for cut in range(len(data)):
        _rejects(data[:cut], origin)
    parse_metadata(data, origin)


def test_truncations_of_the_largest_file(extracted: Path) -> None:
    seed = max(SEEDS, key=lambda s: len(_metadata(extracted, s)))
    data = _metadata(extracted, seed)
    rng = random.Random(1234)
    cuts = [*sorted(rng.sample(range(len(data)), 200)), len(data) - 1, len(data) - 2]
    for cut in cuts:
        message = _rejects(data[:cut])
        assert "truncated" in message or "announced" in message, message


def test_truncated_message_names_what_was_read(extracted: Path) -> None:
    data = _metadata(extracted, SEEDS[0])
    message = _rejects(data[:200])
    assert message.startswith("some/dir/_metadata: ")
    assert "while reading" in message and "of operator" in message


def test_random_byte_flips(extracted: Path) -> None:
    rng = random.Random(20240611)
    files = [_metadata(extracted, seed) for seed in SEEDS[:20]]
    outcomes = {"read": 0, "rejected": 0}
    for _ in range(400):
        data = bytearray(rng.choice(files))
        for _ in range(rng.choice((1, 1, 2, 4))):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        try:
            parse_metadata(bytes(data), "flipped/_metadata")
        except DocumentError as exc:
            message = str(exc)
            assert message.startswith("flipped/_metadata: ") and "\n" not in message
            assert len(message) < 300
            outcomes["rejected"] += 1
        else:
            outcomes["read"] += 1
    assert outcomes["rejected"] > 20


def test_binary_garbage_after_the_header(extracted: Path) -> None:
    header = _metadata(extracted, SEEDS[0])[:8]
    rng = random.Random(7)
    for length in (1, 5, 17, 100, 1000, 5000):
        for _ in range(20):
            garbage = bytes(rng.randrange(256) for _ in range(length))
            try:
                parse_metadata(header + garbage, "garbage/_metadata")
            except DocumentError as exc:
                assert "\n" not in str(exc)


def test_absurd_counts() -> None:
    # Two billion operator states in a file of a few bytes.
    data = _header(6, 1) + struct.pack(">ii", 0, 0x7FFFFFFF)
    assert "2147483647 operator states announced" in _rejects(data)
    data = _header(6, 1) + struct.pack(">ii", 0, -5)
    assert "negative count" in _rejects(data)
    data = _header(6, 1) + struct.pack(">i", -1)
    assert "master states" in _rejects(data)


def test_directory_without_metadata(tmp_path: Path) -> None:
    (tmp_path / "chk-3").mkdir()
    (tmp_path / "chk-3" / "some-state-file").write_bytes(b"x")
    with pytest.raises(DocumentError) as info:
        read_savepoint(tmp_path / "chk-3")
    message = str(info.value)
    assert str(tmp_path / "chk-3") in message and "_metadata" in message
    assert "\n" not in message


def test_nonexistent_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "_metadata"
    with pytest.raises(DocumentError, match="no such file"):
        read_savepoint(missing)
    with pytest.raises(DocumentError):
        read_savepoint(str(tmp_path / "nope"))
    with pytest.raises(DocumentError):
        referenced_files(missing)


def test_not_a_metadata_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    with pytest.raises(DocumentError) as info:
        read_savepoint(path)
    assert str(path) in str(info.value)


def test_odd_paths(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(DocumentError, match="not a regular file"):
        read_savepoint(fifo)
    (tmp_path / "sp" / "_metadata").mkdir(parents=True)
    with pytest.raises(DocumentError, match="no _metadata file"):
        read_savepoint(tmp_path / "sp")
    with pytest.raises(DocumentError):
        read_savepoint(str(tmp_path / "nul\x00byte"))


def test_a_path_with_control_characters_is_escaped(tmp_path: Path) -> None:
    weird = tmp_path / "a\nb\u202e"
    weird.mkdir()
    with pytest.raises(DocumentError) as info:
        read_savepoint(weird)
    message = str(info.value)
    assert "\n" not in message and "\u202e" not in message
    assert "a\\nb\\u202e" in message


# ---------------------------------------------------------------------------------------------
#  Files built here: every version and handle kind, in Flink's byte format
# ---------------------------------------------------------------------------------------------

Emit = Callable[["Out"], None]


class Out:
    """A DataOutputStream: big-endian numbers, ``writeUTF`` strings."""

    def __init__(self) -> None:
        self.data = bytearray()

    def u8(self, value: int) -> None:
        self.data += struct.pack(">B", value)

    def i32(self, value: int) -> None:
        self.data += struct.pack(">i", value)

    def i64(self, value: int) -> None:
        self.data += struct.pack(">q", value)

    def raw(self, data: bytes) -> None:
        self.data += data

    def utf(self, text: str) -> None:
        encoded = _modified_utf8(text)
        self.data += struct.pack(">H", len(encoded)) + encoded


def _modified_utf8(text: str) -> bytes:
    """What Java's ``writeUTF`` writes: UTF-16 units, NUL as two bytes, no 4-byte sequences."""
    units = struct.unpack(
        f"<{len(text.encode('utf-16-le', 'surrogatepass')) // 2}H",
        text.encode("utf-16-le", "surrogatepass"),
    )
    out = bytearray()
    for unit in units:
        if 0 < unit < 0x80:
            out.append(unit)
        elif unit < 0x800:
            out += bytes((0xC0 | unit >> 6, 0x80 | unit & 0x3F))
        else:
            out += bytes((0xE0 | unit >> 12, 0x80 | (unit >> 6) & 0x3F, 0x80 | unit & 0x3F))
    return bytes(out)


def _header(version: int, checkpoint_id: int) -> bytes:
    return struct.pack(">iiq", 0x4960672D, version, checkpoint_id)


# Stream state handles (MetadataV2V3SerializerBase.serializeStreamStateHandle).
def null(out: Out) -> None:
    out.u8(0)


def inline(data: bytes, name: str = "file:/x/inline") -> Emit:
    def emit(out: Out) -> None:
        out.u8(1)
        out.utf(name)
        out.i32(len(data))
        out.raw(data)

    return emit


def file_handle(path: str, size: int) -> Emit:
    def emit(out: Out) -> None:
        out.u8(2)
        out.i64(size)
        out.utf(path)

    return emit


def relative(path: str, size: int) -> Emit:
    def emit(out: Out) -> None:
        out.u8(6)
        out.utf(path)
        out.i64(size)

    return emit


def segment(path: str, size: int, scope: int = 0) -> Emit:
    def emit(out: Out) -> None:
        out.u8(15)
        out.i64(100)
        out.i64(size)
        out.i32(scope)
        out.utf(path)
        out.utf("logical-file-1")

    return emit


def empty_segment(out: Out) -> None:
    out.u8(16)


def key_groups(inner: Emit, start: int = 0, count: int = 4, tag: int = 3) -> Emit:
    """KEY_GROUPS_HANDLE (3, also valid as a stream handle), _V2 (12) or SAVEPOINT_ (7)."""

    def emit(out: Out) -> None:
        out.u8(tag)
        out.i32(start)
        out.i32(count)
        for i in range(count):
            out.i64(i * 10)
        inner(out)
        if tag == 12:
            out.utf("state-handle-id")

    return emit


def incremental(meta: Emit, shared: list[Emit], private: list[Emit], v2: bool = True) -> Emit:
    def emit(out: Out) -> None:
        out.u8(11 if v2 else 5)
        out.i64(7)
        out.utf("3f1c1a1e-8d7c-4a43-9c4f-1f2e3d4c5b6a")
        out.i32(0)
        out.i32(64)
        if v2:
            out.i64(12345)
        meta(out)
        for handles in (shared, private):
            out.i32(len(handles))
            for i, handle in enumerate(handles):
                out.utf(f"{i:06d}.sst")
                handle(out)
        if v2:
            out.utf("handle-id")

    return emit


def changelog(materialized: list[Emit], increments: list[Emit], v2: bool = True) -> Emit:
    def emit(out: Out) -> None:
        out.u8(14 if v2 else 8)
        out.i32(0)
        out.i32(128)
        out.i64(999)
        out.i32(len(materialized))
        for handle in materialized:
            handle(out)
        out.i32(len(increments))
        for handle in increments:
            handle(out)
        out.i64(3)
        if v2:
            out.i64(4)
        out.utf("changelog-id")

    return emit


def changelog_bytes(changes: list[bytes]) -> Emit:
    def emit(out: Out) -> None:
        out.u8(9)
        out.i32(0)
        out.i32(128)
        out.i64(1)
        out.i64(2)
        out.i32(len(changes))
        for i, change in enumerate(changes):
            out.i32(i - 1)  # -1 is META_KEY_GROUP
            out.i32(len(change))
            out.raw(change)
        out.utf("bytes-id")

    return emit


def changelog_files(handles: list[Emit], size: int, v2: bool = True) -> Emit:
    def emit(out: Out) -> None:
        out.u8(13 if v2 else 10)
        out.i32(0)
        out.i32(128)
        out.i32(len(handles))
        for i, handle in enumerate(handles):
            out.i64(i * 100)
            handle(out)
        out.i64(size)
        out.i64(size)
        out.utf("files-id")
        if v2:
            out.utf("filesystem")

    return emit


def operator_handle(inner: Emit, states: int = 2, merged: bool = False) -> Emit:
    def emit(out: Out) -> None:
        out.u8(17 if merged else 4)
        out.i32(states)
        for i in range(states):
            out.utf(f"state-{i}")
            out.u8(i % 3)
            out.i32(2)
            out.i64(0)
            out.i64(5)
        if merged:
            out.utf("file:/ckp/taskowned")
            out.utf("file:/ckp/shared")
            out.u8(0)
        inner(out)

    return emit


def channel(inner: Emit, size: int, tag: int | None, merged: bool = False) -> Emit:
    """ChannelStateHandleSerializerV1 (``tag`` None) or V2 (tag 1-4)."""

    def emit(out: Out) -> None:
        if tag is not None:
            out.u8(tag)
        out.i32(0)
        if merged:
            out.i64(size)
            inner(out)
            out.i32(3)
            out.raw(b"abc")
            return
        out.i32(1)
        out.i32(2)
        out.i32(2)
        out.i64(0)
        out.i64(10)
        out.i64(size)
        inner(out)

    return emit


def subtask(
    version: int,
    managed_op: Emit | None = None,
    raw_op: Emit | None = None,
    managed_keyed: Emit = null,
    raw_keyed: Emit = null,
    inputs: tuple[Emit, ...] = (),
    outputs: tuple[Emit, ...] = (),
    ref: int | None = None,
) -> Emit:
    def emit(out: Out) -> None:
        for handle in (managed_op, raw_op):
            if handle is None:
                out.i32(0)
            else:
                out.i32(1)
                handle(out)
        managed_keyed(out)
        raw_keyed(out)
        for handles in (inputs, outputs):
            out.i32(len(handles))
            for handle in handles:
                handle(out)
        if version >= 7:
            if ref is None:
                out.u8(0)
            else:
                out.u8(1)
                out.i64(ref)

    return emit


def operator(
    version: int,
    operator_id: str,
    subtasks: list[tuple[int, Emit | None]],
    parallelism: int = 4,
    max_parallelism: int = 128,
    name: str = "",
    uid: str = "",
    coordinator: Emit = null,
    fully_finished: bool = False,
) -> Emit:
    def emit(out: Out) -> None:
        if version >= 5:
            out.utf(name)
            out.utf(uid)
        out.raw(bytes.fromhex(operator_id))
        out.i32(parallelism)
        out.i32(max_parallelism)
        coordinator(out)
        if fully_finished:
            out.i32(-1)
            return
        out.i32(len(subtasks))
        for index, state in subtasks:
            if state is None:
                out.i32(-index - 1)
            else:
                out.i32(index)
                state(out)

    return emit


# The CheckpointProperties of a real Flink 2.3.0 savepoint: class descriptors, enums, references.
def _real_properties() -> bytes:
    with tarfile.open(DATA / CASES[0]["savepoint"], "r:gz") as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/_metadata"))
        extracted = tar.extractfile(member)
        assert extracted is not None
        data = extracted.read()
    return data[data.rindex(b"\xac\xed\x00\x05") :]


PROPERTIES = _real_properties()


def metadata(
    version: int,
    operators: list[Emit],
    checkpoint_id: int = 42,
    masters: tuple[bytes, ...] = (),
    properties: bytes = PROPERTIES,
) -> bytes:
    out = Out()
    out.raw(_header(version, checkpoint_id))
    out.i32(len(masters))
    for payload in masters:
        inner = Out()
        inner.i32(1)
        inner.utf("master hook")
        inner.i32(len(payload))
        inner.raw(payload)
        out.i32(0xC96B1696 - (1 << 32))
        out.i32(len(inner.data))
        out.raw(bytes(inner.data))
    out.i32(len(operators))
    for emit in operators:
        emit(out)
    if version >= 4:
        out.raw(properties)
    return bytes(out.data)


OP_A = "0123456789abcdef0123456789abcdef"
OP_B = "fedcba9876543210fedcba9876543210"


@pytest.mark.parametrize("version", [3, 4, 5, 6, 7])
def test_every_version(version: int) -> None:
    channel_tags = (None, None) if version < 6 else (1, 2)
    states = [
        (
            0,
            subtask(
                version,
                managed_op=operator_handle(inline(b"12345")),
                managed_keyed=key_groups(relative("abc-def", 300), tag=12),
                inputs=(channel(inline(b"in"), 7, channel_tags[0]),),
                ref=5,
            ),
        ),
        (1, None),  # finished
        (2, subtask(version)),  # empty
        (3, subtask(version, raw_keyed=key_groups(inline(b"xy"), tag=7))),
    ]
    data = metadata(
        version,
        [
            operator(version, OP_A, states, name="Map \u00e9\u20ac\U0001f600", uid="my-uid"),
            operator(
                version,
                OP_B,
                [(0, subtask(version, outputs=(channel(inline(b"o"), 9, channel_tags[1]),)))],
                parallelism=1,
                max_parallelism=1,
                coordinator=inline(b"coord"),
            ),
            operator(version, OP_A[::-1], [], fully_finished=True),
        ],
        masters=(b"payload", b""),
    )
    savepoint = parse_metadata(data, "built/_metadata")
    assert savepoint.version == version and savepoint.checkpoint_id == 42
    first, second, third = savepoint.operators
    assert first.operator_id == OP_A
    if version >= 5:
        assert (first.name, first.uid) == ("Map \u00e9\u20ac\U0001f600", "my-uid")
    else:
        assert (first.name, first.uid) == (None, None)
    assert (second.name, second.uid) == (None, None)
    assert (first.parallelism, first.max_parallelism) == (4, 128)
    assert first.has_state and first.subtask_states == 4 and not first.fully_finished
    assert first.state_kinds == ("input_channel", "managed_keyed", "managed_operator", "raw_keyed")
    assert first.state_size == 5 + 300 + 7 + 2
    assert not first.coordinator_state
    assert second.coordinator_state and second.has_state
    assert second.state_kinds == ("result_subpartition",)
    assert second.state_size == 5 + 9
    assert third.fully_finished and not third.has_state and third.subtask_states == 0
    assert third.state_size == 0 and third.state_kinds == ()
    for cut in range(len(data)):
        _rejects(data[:cut], "built/_metadata")


def test_stream_handle_kinds() -> None:
    inner = [
        inline(b""),
        file_handle("file:/ckp/job/chk-1/a", 1000),
        file_handle("s3://bucket/unknown-size", -1),
        relative("b", 20),
        key_groups(key_groups(inline(b"nested")), start=4, count=2),
        segment("file:/ckp/shared/merged-1", 64, scope=1),
        empty_segment,
    ]
    operators = [
        operator(6, f"{i:032x}", [(0, subtask(6, managed_op=operator_handle(handle)))])
        for i, handle in enumerate(inner)
    ]
    savepoint = parse_metadata(metadata(6, operators), "built/_metadata")
    sizes = [op.state_size for op in savepoint.operators]
    assert sizes == [0, 1000, 0, 20, 6, 64, 0]
    assert all(op.has_state for op in savepoint.operators)


def test_file_merging_operator_state() -> None:
    op = operator(
        6,
        OP_A,
        [
            (0, subtask(6, managed_op=operator_handle(segment("file:/m", 33), merged=True))),
            (1, subtask(6, raw_op=operator_handle(empty_segment, merged=True))),
        ],
    )
    savepoint = parse_metadata(metadata(6, [op]), "built/_metadata")
    assert savepoint.operators[0].state_size == 33
    assert savepoint.operators[0].state_kinds == ("managed_operator", "raw_operator")
    # A file-merging handle must sit in a segment file.
    bad = operator(
        6, OP_A, [(0, subtask(6, managed_op=operator_handle(inline(b"x"), merged=True)))]
    )
    assert "segment file" in _rejects(metadata(6, [bad]))


def test_keyed_handle_kinds() -> None:
    keyed = [
        key_groups(file_handle("file:/f", 11), tag=3),
        key_groups(inline(b"abc"), tag=12),
        key_groups(inline(b"abcd"), tag=7, start=5, count=0),
        incremental(inline(b"meta"), [file_handle("file:/s1", 100)], [relative("p", 5)], v2=False),
        incremental(null, [file_handle("file:/s2", 200), segment("file:/seg", 7)], [], v2=True),
        changelog(
            [key_groups(inline(b"base"), tag=12), null],
            [changelog_bytes([b"xx", b"yyy"]), changelog_files([file_handle("file:/c", 50)], 50)],
            v2=True,
        ),
        changelog([], [changelog_files([], 0, v2=False), null], v2=False),
    ]
    operators = [
        operator(6, f"{i:032x}", [(0, subtask(6, managed_keyed=handle))])
        for i, handle in enumerate(keyed)
    ]
    savepoint = parse_metadata(metadata(6, operators), "built/_metadata")
    assert [op.state_size for op in savepoint.operators] == [11, 3, 4, 109, 207, 59, 0]
    assert all(op.state_kinds == ("managed_keyed",) for op in savepoint.operators)


def test_deeply_nested_handles_do_not_recurse() -> None:
    depth = 5000
    handle: Emit = changelog([key_groups(inline(b"z"), tag=12)], [])
    for _ in range(depth):
        handle = changelog([handle], [])
    wrapped: Emit = inline(b"w")
    for _ in range(depth):
        wrapped = key_groups(wrapped, count=1)
    op = operator(6, OP_A, [(0, subtask(6, managed_keyed=handle, raw_keyed=wrapped))])
    # The emitters here recurse (the reader must not); build the bytes with room to spare.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * depth + 1000))
    try:
        data = metadata(6, [op])
    finally:
        sys.setrecursionlimit(limit)
    savepoint = parse_metadata(data, "built/_metadata")
    assert savepoint.operators[0].state_size == 2


def test_channel_handle_kinds() -> None:
    v6 = subtask(
        6,
        inputs=(channel(inline(b"a"), 3, 1), channel(null, 4, 3, merged=True)),
        outputs=(channel(inline(b"b"), 5, 2), channel(inline(b"c"), 6, 4, merged=True)),
    )
    v5 = subtask(5, inputs=(channel(inline(b"a"), 3, None),), outputs=())
    for version, state in ((6, v6), (5, v5)):
        savepoint = parse_metadata(
            metadata(version, [operator(version, OP_A, [(0, state)])]), "built/_metadata"
        )
        op = savepoint.operators[0]
        assert op.has_state
        if version == 6:
            assert op.state_kinds == ("input_channel", "result_subpartition")
            assert op.state_size == 3 + 4 + 5 + 6
        else:
            assert op.state_kinds == ("input_channel",)


def test_subtask_entries_as_the_loader_keeps_them() -> None:
    # A later entry for the same subtask index replaces the earlier one (OperatorState.putState).
    op = operator(
        6,
        OP_A,
        [(0, subtask(6, managed_keyed=key_groups(inline(b"abc"), tag=12))), (0, subtask(6))],
        parallelism=2,
    )
    result = parse_metadata(metadata(6, [op]), "built/_metadata").operators[0]
    assert result.subtask_states == 1 and not result.has_state and result.state_size == 0


def test_modified_utf8_names() -> None:
    out = Out()
    name = "nul\x00 pair\U0001f680 bmp\u4e2d"
    op = operator(6, OP_A, [], name=name, uid="x")
    result = parse_metadata(metadata(6, [op]), "built/_metadata").operators[0]
    assert result.name == name
    # A lone surrogate (ED A0 80) is not text: an error naming the field (io/java_data's one
    # reading of modified UTF-8; this reader used to make it U+FFFD).
    lone = b"\x00\x05a\xed\xa0\x80b"
    out.raw(_header(6, 1))
    out.i32(0)
    out.i32(1)
    out.raw(lone)
    out.utf("")
    out.raw(bytes.fromhex(OP_A))
    out.i32(1)
    out.i32(1)
    out.u8(0)
    out.i32(0)
    out.raw(PROPERTIES)
    assert (
        "a lone surrogate (U+D800), which is not text at byte 24 while reading the operator "
        "name of operator state #0" in _rejects(bytes(out.data))
    )
    # What Java's readUTF refuses: a 4-byte sequence, a stray continuation byte, a cut sequence.
    for bad in (b"\x00\x04\xf0\x9f\x98\x80", b"\x00\x01\x80", b"\x00\x02a\xe4"):
        data = bytes(out.data).replace(lone, bad)
        assert "malformed modified UTF-8" in _rejects(data)


def _one_operator(state: Emit, version: int = 6, **kwargs: Any) -> bytes:
    return metadata(version, [operator(version, OP_A, [(0, state)], **kwargs)])


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (_one_operator(subtask(6), parallelism=8, max_parallelism=4), "larger than max"),
        (_one_operator(subtask(6), parallelism=-1, max_parallelism=4), "negative parallelism"),
        (
            metadata(6, [operator(6, OP_A, [(5, subtask(6))], parallelism=2)]),
            "subtask index 5 outside parallelism 2",
        ),
        (_one_operator(subtask(6), coordinator=file_handle("file:/c", 3)), "coordinator"),
        (
            metadata(6, [operator(6, OP_A, [], fully_finished=True, coordinator=inline(b"c"))]),
            "fully finished",
        ),
        (_one_operator(subtask(6, managed_op=null)), "null handle"),
        (_one_operator(subtask(6, managed_keyed=key_groups(null, tag=12))), "null handle"),
        (_one_operator(subtask(6, managed_op=operator_handle(null))), "null handle"),
        (_one_operator(subtask(6, managed_keyed=key_groups(inline(b""), count=-3))), "key-group"),
        (
            _one_operator(subtask(6, managed_keyed=key_groups(inline(b""), start=-2, count=3))),
            "key-group",
        ),
        (
            _one_operator(subtask(6, managed_keyed=changelog([], [key_groups(inline(b""))]))),
            "among changelog increments",
        ),
        (_one_operator(subtask(6, managed_keyed=file_handle("file:/x", 1))), "keyed state handle"),
        (_one_operator(subtask(6, managed_op=operator_handle(file_handle("", 1)))), "empty file"),
        (_one_operator(subtask(6, managed_op=operator_handle(file_handle("file:/x", -7)))), "size"),
        (_one_operator(subtask(6, managed_op=operator_handle(segment("f", 1, 2)))), "scope"),
        (_one_operator(subtask(6, inputs=(channel(inline(b""), 1, 2),))), "channel state handle"),
        (_one_operator(subtask(6, outputs=(channel(inline(b""), 1, 1),))), "channel state handle"),
        (
            _one_operator(subtask(5, inputs=(channel(null, 1, None),)), version=5),
            "null handle",
        ),
        (metadata(6, [], checkpoint_id=-1), "invalid checkpoint id"),
        (metadata(6, [], properties=b"\xac\xed\x00\x04"), "not a Java serialization stream"),
    ],
)
def test_what_flink_refuses(data: bytes, problem: str) -> None:
    assert problem in _rejects(data)


def test_unknown_handle_tags() -> None:
    data = _one_operator(subtask(6, managed_keyed=key_groups(inline(b"abc"), tag=12)))
    tag_at = data.index(bytes.fromhex(OP_A)) + 16 + 4 + 4 + 1 + 4 + 4 + 4 + 4
    assert data[tag_at] == 12
    for tag in (2, 4, 6, 15, 16, 17, 18, 99, 255):
        patched = data[:tag_at] + bytes((tag,)) + data[tag_at + 1 :]
        message = _rejects(patched)
        assert "while reading" in message and OP_A in message


def test_a_master_state_must_fill_its_length() -> None:
    data = metadata(6, [], masters=(b"abc",))
    assert parse_metadata(data, "m/_metadata").operators == ()
    length_at = 8 + 8 + 4 + 4
    longer = data[:length_at] + struct.pack(">i", 100) + data[length_at + 4 :]
    _rejects(longer)
    wrong_magic = data[: length_at - 4] + b"\x00\x00\x00\x00" + data[length_at:]
    assert "magic" in _rejects(wrong_magic)


def _java_stream() -> bytes:
    """A Java serialization stream with what the walker must know beyond CheckpointProperties:
    a writeObject class with block data, primitive and object arrays, a long string, an enum,
    a reference back to a string and a class object."""
    out = Out()
    out.raw(b"\xac\xed\x00\x05")
    out.u8(0x73)  # TC_OBJECT
    out.u8(0x72)  # TC_CLASSDESC
    out.utf("com.example.Props")
    out.i64(1)
    out.u8(0x03)  # SC_SERIALIZABLE | SC_WRITE_METHOD
    out.raw(struct.pack(">h", 4))
    out.u8(ord("I"))
    out.utf("count")
    out.u8(ord("["))
    out.utf("ids")
    out.u8(0x74)
    out.utf("[J")  # handle 1
    out.u8(ord("L"))
    out.utf("label")
    out.u8(0x74)
    out.utf("Ljava/lang/String;")  # handle 2
    out.u8(ord("L"))
    out.utf("items")
    out.u8(0x71)
    out.i32(0x7E0000 + 1)  # reference: "[J" again, as a class name
    out.u8(0x78)  # end of class annotation
    out.u8(0x70)  # no superclass
    # handle 3: the object. Its field values:
    out.i32(7)
    out.u8(0x75)  # TC_ARRAY of long
    out.u8(0x72)
    out.utf("[J")
    out.i64(2)
    out.u8(0x02)
    out.raw(struct.pack(">h", 0))
    out.u8(0x78)
    out.u8(0x70)  # handle 4: descriptor, handle 5: the array
    out.i32(3)
    out.raw(b"\x00" * 24)
    out.u8(0x7C)  # TC_LONGSTRING, handle 6
    out.i64(5)
    out.raw(b"hello")
    out.u8(0x75)  # TC_ARRAY of objects
    out.u8(0x72)
    out.utf("[Ljava.lang.Object;")
    out.i64(3)
    out.u8(0x02)
    out.raw(struct.pack(">h", 0))
    out.u8(0x78)
    out.u8(0x70)
    out.i32(3)
    out.u8(0x71)
    out.i32(0x7E0000 + 6)  # the long string again
    out.u8(0x7E)  # TC_ENUM
    out.u8(0x72)
    out.utf("com.example.Mode")
    out.i64(0)
    out.u8(0x12)  # SC_SERIALIZABLE | SC_ENUM
    out.raw(struct.pack(">h", 0))
    out.u8(0x78)
    out.u8(0x70)
    out.u8(0x74)
    out.utf("FAST")
    out.u8(0x76)  # TC_CLASS
    out.u8(0x71)
    out.i32(0x7E0000 + 0)  # the descriptor of com.example.Props
    # writeObject's extra data: block data, an object, end.
    out.u8(0x77)
    out.u8(3)
    out.raw(b"\x01\x02\x03")
    out.u8(0x7A)
    out.i32(2)
    out.raw(b"\x04\x05")
    out.u8(0x74)
    out.utf("extra")
    out.u8(0x78)
    return bytes(out.data)


def test_java_serialization_walker() -> None:
    stream = _java_stream()
    data = metadata(6, [], properties=stream)
    assert parse_metadata(data, "j/_metadata").checkpoint_id == 42
    start = len(data) - len(stream)
    for cut in range(start, len(data)):
        _rejects(data[:cut], "j/_metadata")
    to_long_string = struct.pack(">i", 0x7E0000 + 6)
    assert data.count(to_long_string) == 1
    dangling = data.replace(to_long_string, struct.pack(">i", 0x7E0000 + 99))
    assert "unknown object" in _rejects(dangling, "j/_metadata")
    not_a_string = data.replace(struct.pack(">i", 0x7E0000 + 1), struct.pack(">i", 0x7E0000))
    assert "non-string" in _rejects(not_a_string, "j/_metadata")


def test_java_fields_primitives_first() -> None:
    out = Out()
    out.raw(b"\xac\xed\x00\x05")
    out.u8(0x73)
    out.u8(0x72)
    out.utf("Bad")
    out.i64(0)
    out.u8(0x02)
    out.raw(struct.pack(">h", 2))
    out.u8(ord("L"))
    out.utf("name")
    out.u8(0x74)
    out.utf("Ljava/lang/String;")
    out.u8(ord("I"))
    out.utf("count")
    out.u8(0x78)
    out.u8(0x70)
    out.u8(0x70)
    out.i32(1)
    message = _rejects(metadata(6, [], properties=bytes(out.data)))
    assert "primitive field after an object field" in message


def test_the_real_properties_are_walked_to_their_end(extracted: Path) -> None:
    data = _metadata(extracted, SEEDS[0])
    assert data.endswith(PROPERTIES)
    for cut in range(len(data) - len(PROPERTIES), len(data)):
        _rejects(data[:cut])


def test_version_7_reference_checkpoint_id() -> None:
    state = subtask(7, managed_keyed=key_groups(inline(b"k"), tag=12), ref=123)
    data = _one_operator(state, version=7)
    assert parse_metadata(data, "v7/_metadata").operators[0].state_size == 1
    # The same bytes read as version 6 leave the marker behind: Flink 2.3 would choke as well.
    _rejects(data[:4] + struct.pack(">i", 6) + data[8:])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_metadata_is_not_a_regular_file_not_missing(tmp_path: Path) -> None:
    """Issue 31, finding 7: a FIFO ``_metadata`` was called "no _metadata file"."""
    from pytest_opid import check_restore

    folder = tmp_path / "sp"
    folder.mkdir()
    os.mkfifo(folder / "_metadata")
    expected = (
        f"{folder / '_metadata'}: it is a FIFO (named pipe), not a regular file, so not a "
        "savepoint or checkpoint's metadata"
    )
    with pytest.raises(DocumentError) as info:
        read_savepoint(folder)
    assert str(info.value) == expected
    with pytest.raises(DocumentError) as info:
        check_restore(folder, {"nodes": [{"id": 1, "name": "S"}], "edges": []})
    assert str(info.value) == expected
    (folder / "_metadata").unlink()
    (folder / "_metadata").symlink_to(tmp_path / "gone")
    with pytest.raises(DocumentError, match="it is a broken symbolic link, not a regular file"):
        read_savepoint(folder)
