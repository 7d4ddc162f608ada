"""io/java_data: DataInputStream's primitives and readUTF as Java reads them (java.io.DataInput's
specification of modified UTF-8), with a lone surrogate an error naming the field."""

from __future__ import annotations

import struct
from typing import NoReturn

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.io.java_data import DataInput, decode_modified_utf8


def utf(raw: bytes) -> bytes:
    """What writeUTF writes: an unsigned 16-bit length, then the bytes."""
    return struct.pack(">H", len(raw)) + raw


@pytest.mark.parametrize(
    ("raw", "units"),
    [
        (b"plain", "plain"),
        (b"\xc0\x80", "\x00"),  # NUL as two bytes
        (b"\xc1\xbf", "\x7f"),  # any 2-byte form: Java does not check for overlong ones
        ("\u4e2d".encode(), "\u4e2d"),
        # U+1F680 as two 3-byte surrogates (CESU-8), the units left as Java has them
        (b"\xed\xa0\xbd\xed\xba\x80", "\ud83d\ude80"),
    ],
)
def test_decode_is_java_readutf(raw: bytes, units: str) -> None:
    assert decode_modified_utf8(raw) == units


@pytest.mark.parametrize(
    "raw",
    [
        "\U0001f680".encode(),  # a 4-byte sequence: UTFDataFormatException
        b"\x80",  # a stray continuation byte
        b"a\xe4",  # a cut 3-byte sequence
        b"\xe4\xb8",
        b"\xc3",
        b"\xf8\x80",
    ],
)
def test_decode_refuses_what_java_refuses(raw: bytes) -> None:
    assert decode_modified_utf8(raw) is None


class Named(DataInput):
    """A reader that names its field, as the savepoint reader does."""

    __slots__ = ()

    def fail(self, problem: str, at: int | None = None) -> NoReturn:
        raise DocumentError(f"f.bin: {problem} at byte {at} while reading the name")


def test_text_joins_pairs_and_refuses_a_lone_surrogate() -> None:
    data = Named(utf(b"a\xed\xa0\xbd\xed\xba\x80b") + utf(b"a\xed\xa0\x80b"))
    assert data.utf() == "a\U0001f680b"
    with pytest.raises(DocumentError) as info:
        data.utf()
    assert str(info.value) == (
        "f.bin: a lone surrogate (U+D800), which is not text at byte 10 while reading the name"
    )


def test_units_keep_a_lone_surrogate_for_the_caller_to_join() -> None:
    # A long text written in chunks may split a pair between two of them.
    data = DataInput(utf(b"x\xed\xa0\xbd") + utf(b"\xed\xba\x80y"))
    first, second = data.utf_units(), data.utf_units()
    assert data.text(first + second, 0) == "x\U0001f680y"


def test_primitives_are_big_endian_and_signed() -> None:
    data = DataInput(bytes.fromhex("ff fffe 7fffffff 8000000000000000"))
    assert (data.u8(), data.i16(), data.i32(), data.i64()) == (255, -2, 2**31 - 1, -(2**63))
    assert data.pos == data.end == 15


@pytest.mark.parametrize(
    ("data", "read", "problem"),
    [
        (b"\x00\x00\x00", DataInput.i32, "truncated at byte 0"),
        (b"\x00\x05abc", DataInput.utf, "truncated at byte 0"),
        (
            b"\x00\x01\x80",
            DataInput.utf,
            r"malformed modified UTF-8 string \(byte 0x80 is not valid there "
            r"\(invalid start byte\)\) at byte 0",
        ),
        (b"\xff\xff\xff\xff", lambda d: d.count("items"), "negative count -1 of items at byte 0"),
        (b"\x00\x00\x00\x09", lambda d: d.count("items"), "9 items announced, only 0 bytes"),
    ],
)
def test_a_cut_or_corrupt_stream_is_an_error_at_its_byte(data, read, problem) -> None:
    with pytest.raises(DocumentError, match=problem):
        read(DataInput(data))
