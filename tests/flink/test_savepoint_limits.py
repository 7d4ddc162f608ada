"""Issue 21 for the ``_metadata`` reader: linear time whatever the Java stream holds, nothing
after the metadata, memory by what the file declares.

The inputs are crafted here, small: a checkpoint-properties stream that is an array of objects
sharing one deep class hierarchy (each object used to cost the depth of its hierarchy), and a
valid header followed by zeros.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.flink.savepoint import object_stream as module
from pytest_opid.flink.savepoint import parse_metadata, read_savepoint

_BASE = 0x7E0000


def utf(text: str) -> bytes:
    encoded = text.encode("ascii")
    return struct.pack(">H", len(encoded)) + encoded


def class_desc(name: str, fields: str = "") -> bytes:
    """TC_CLASSDESC of a serializable class with primitive ``fields`` (type codes), its empty
    annotation; the superclass descriptor follows."""
    out = b"\x72" + utf(name) + struct.pack(">q", 1) + b"\x02" + struct.pack(">h", len(fields))
    for i, code in enumerate(fields):
        out += code.encode() + utf(f"f{i}")
    return out + b"\x78"


def deep_array(depth: int, objects: int, field_at: int | None = None) -> bytes:
    """A Java stream: an Object[] of ``objects`` objects of one class ``depth`` classes deep;
    the class ``field_at`` levels from the top holds one int field, the others none."""
    out = b"\xac\xed\x00\x05\x75" + class_desc("[Ljava.lang.Object;") + b"\x70"
    out += struct.pack(">i", objects)
    # handles: 0 the array's descriptor, 1 the array, 2 .. depth+1 the hierarchy
    hierarchy = b""
    for level in range(depth):
        fields = "I" if field_at is not None and depth - 1 - level == field_at else ""
        hierarchy += class_desc(f"C{depth - level}", fields)
    hierarchy += b"\x70"
    data = struct.pack(">i", 7) if field_at is not None else b""
    for i in range(objects):
        desc = hierarchy if i == 0 else b"\x71" + struct.pack(">i", _BASE + 2)
        out += b"\x73" + desc + data
    return out


def metadata(properties: bytes, version: int = 6) -> bytes:
    head = struct.pack(">iiq", 0x4960672D, version, 42) + struct.pack(">ii", 0, 0)
    return head + properties


@pytest.mark.parametrize("field_at", [None, 0, 150])
def test_a_deep_hierarchy_is_walked_once_not_once_per_object(
    monkeypatch: pytest.MonkeyPatch, field_at: int | None
) -> None:
    calls = 0
    real = module._JavaClassDesc.has_class_data

    def counted(self: module._JavaClassDesc) -> bool:
        nonlocal calls
        calls += 1
        return real(self)

    monkeypatch.setattr(module._JavaClassDesc, "has_class_data", counted)
    depth, objects = 300, 400
    data = metadata(deep_array(depth, objects, field_at))
    assert parse_metadata(data, "deep/_metadata").checkpoint_id == 42
    # Once per class of the hierarchy, not per object: the old walk took depth x objects =
    # 120,000 steps.
    assert calls == depth
    # The int field is read per object: one byte fewer is a stream cut short.
    if field_at is not None:
        with pytest.raises(DocumentError, match="deep/_metadata"):
            parse_metadata(data[:-1], "deep/_metadata")


def test_a_class_hierarchy_with_a_cycle_is_refused() -> None:
    # A descriptor whose superclass is a reference to itself (handle 2).
    stream = b"\xac\xed\x00\x05\x73" + class_desc("Loop") + b"\x71" + struct.pack(">i", _BASE)
    with pytest.raises(DocumentError, match="a class hierarchy with a cycle"):
        parse_metadata(metadata(stream), "loop/_metadata")


@pytest.mark.parametrize("version", [3, 6])
def test_bytes_after_the_metadata_are_refused(version: int) -> None:
    whole = metadata(deep_array(2, 2) if version >= 4 else b"", version)
    assert parse_metadata(whole, "ok/_metadata").operators == ()
    with pytest.raises(DocumentError) as caught:
        parse_metadata(whole + b"\x00" * 1000, "zeros/_metadata")
    assert "1000 bytes after the end of the metadata" in str(caught.value)
    assert str(caught.value).startswith("zeros/_metadata: ")


def test_a_large_file_of_zeros_is_refused_from_its_mapping(tmp_path: Path) -> None:
    """The file is mapped, not read: a valid header followed by 64 MiB of zeros (sparse on
    disk) is refused after the few pages the parser touches."""
    path = tmp_path / "_metadata"
    with path.open("wb") as f:
        f.write(metadata(b"", 3))
        f.truncate(64 << 20)
    with pytest.raises(DocumentError, match=r"bytes after the end of the metadata"):
        read_savepoint(tmp_path)
    empty = tmp_path / "empty" / "_metadata"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    with pytest.raises(DocumentError, match="empty file"):
        read_savepoint(empty)
