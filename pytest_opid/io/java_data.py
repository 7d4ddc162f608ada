"""Reading what ``java.io.DataOutputStream`` wrote: big-endian integers and modified UTF-8.

Engines write their metadata with Java's data streams (Flink's savepoint ``_metadata``, Spark's
state schema files), so every reader of them needs the same primitives and, above all, the same
reading of ``DataInputStream.readUTF``: NUL is written ``C0 80``, a character past U+FFFF as two
3-byte surrogates, and 4-byte sequences do not exist. Java's ``String`` may hold a lone surrogate;
our text may not (it could not be printed, encoded or compared), so a lone surrogate in a string
we keep is an error naming the field, while a string we only skip is checked as Java checks it.

:class:`DataInput` raises :class:`~pytest_opid.errors.DocumentError` through :meth:`DataInput.fail`,
which a reader overrides to name the file and the field it was reading.
"""

from __future__ import annotations

import re
import struct
from typing import NoReturn

from pytest_opid.errors import DocumentError

__all__ = ["DataInput", "decode_modified_utf8"]

_I16 = struct.Struct(">h").unpack_from
_U16 = struct.Struct(">H").unpack_from
_I32 = struct.Struct(">i").unpack_from
_I64 = struct.Struct(">q").unpack_from
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def decode_modified_utf8(raw: bytes) -> str | None:
    """The UTF-16 units ``DataInputStream.readUTF`` makes of ``raw``, as a string whose
    surrogates are left unpaired (a long text written in chunks may split a pair between two);
    ``None`` where Java throws ``UTFDataFormatException``. Like Java, it takes any 2- or 3-byte
    form (``C0 80`` for NUL among them) and refuses 4-byte sequences and stray continuation
    bytes."""
    if raw.isascii():
        return raw.decode("ascii")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        if max(text) <= "\uffff":  # no 4-byte sequence: plain UTF-8 is modified UTF-8 too
            return text
    units: list[int] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        high = c >> 4
        if high < 8:
            units.append(c)
            i += 1
        elif high in (12, 13):
            if i + 1 >= n or raw[i + 1] & 0xC0 != 0x80:
                return None
            units.append(((c & 0x1F) << 6) | (raw[i + 1] & 0x3F))
            i += 2
        elif high == 14:
            if i + 2 >= n or raw[i + 1] & 0xC0 != 0x80 or raw[i + 2] & 0xC0 != 0x80:
                return None
            units.append(((c & 0x0F) << 12) | ((raw[i + 1] & 0x3F) << 6) | (raw[i + 2] & 0x3F))
            i += 3
        else:
            return None
    return "".join(map(chr, units))


def _malformed(raw: bytes) -> str:
    """Why Java's ``readUTF`` refuses ``raw`` (which :func:`decode_modified_utf8` declined),
    in words: the first byte at fault and what is wrong with it."""
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c < 0x80:
            i += 1
            continue
        if 0xF0 <= c <= 0xF4:
            return f"byte {c:#04x} starts a 4-byte sequence, which modified UTF-8 does not have"
        if c > 0xF4:
            return f"byte {c:#04x}, which UTF-8 never holds"
        if c < 0xC0:
            return f"byte {c:#04x} is not valid there (invalid start byte)"
        need = 1 if c < 0xE0 else 2
        for k in range(1, need + 1):
            if i + k >= n:
                return f"byte {c:#04x} is not valid there (unexpected end of data)"
            if raw[i + k] & 0xC0 != 0x80:
                return f"byte {c:#04x} is not valid there (invalid continuation byte)"
        i += need + 1
    return "not modified UTF-8"


class DataInput:
    """``java.io.DataInputStream`` over bytes in memory, reading from :attr:`pos`. Each read
    checks its length against the bytes left, so a cut or corrupt file is an error at the byte
    where it goes wrong, never an exception of Python's."""

    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.end = len(data)
        self.pos = 0

    # --- errors -------------------------------------------------------------------------------

    def fail(self, problem: str, at: int | None = None) -> NoReturn:
        """Raise the error for ``problem`` at byte ``at`` (the current position if ``None``);
        a reader overrides it to name its file and the field it was reading."""
        raise DocumentError(f"{problem} at byte {self.pos if at is None else at}")

    def truncated(self, at: int) -> NoReturn:
        self.fail("truncated", at)

    # --- primitives ---------------------------------------------------------------------------

    def u8(self) -> int:
        """``readUnsignedByte``."""
        pos = self.pos
        if pos >= self.end:
            self.truncated(pos)
        self.pos = pos + 1
        return self.data[pos]

    def i16(self) -> int:
        """``readShort``."""
        pos = self.pos
        if pos + 2 > self.end:
            self.truncated(pos)
        self.pos = pos + 2
        value: int = _I16(self.data, pos)[0]
        return value

    def i32(self) -> int:
        """``readInt``."""
        pos = self.pos
        if pos + 4 > self.end:
            self.truncated(pos)
        self.pos = pos + 4
        value: int = _I32(self.data, pos)[0]
        return value

    def i64(self) -> int:
        """``readLong``."""
        pos = self.pos
        if pos + 8 > self.end:
            self.truncated(pos)
        self.pos = pos + 8
        value: int = _I64(self.data, pos)[0]
        return value

    def skip(self, count: int, unit: str = "bytes", width: int = 1) -> None:
        """Skip ``count`` items of ``width`` bytes, a count the file gave."""
        pos = self.pos
        if count < 0:
            self.fail(f"negative length {count}", pos)
        if count * width > self.end - pos:
            self.fail(f"{count} {unit} announced, only {self.end - pos} bytes left", pos)
        self.pos = pos + count * width

    def count(self, unit: str) -> int:
        """A count that Java uses to size an array or list (negative ones throw there); each
        item takes at least a byte, so a count larger than the bytes left is corrupt."""
        at = self.pos
        n = self.i32()
        if n < 0:
            self.fail(f"negative count {n} of {unit}", at)
        if n > self.end - self.pos:
            self.fail(f"{n} {unit} announced, only {self.end - self.pos} bytes left", at)
        return n

    # --- strings ------------------------------------------------------------------------------

    def utf_units(self) -> str:
        """``readUTF``'s UTF-16 units, surrogates left unpaired (see
        :func:`decode_modified_utf8`); for a text written in several chunks, joined by the
        caller and made text by :meth:`text`."""
        pos = self.pos
        if pos + 2 > self.end:
            self.truncated(pos)
        start = pos + 2
        stop = start + _U16(self.data, pos)[0]
        if stop > self.end:
            self.truncated(pos)
        self.pos = stop
        return self.modified_utf8(self.data[start:stop], pos)

    def utf(self) -> str:
        """``readUTF`` as text: a surrogate pair is the one character it encodes, a lone
        surrogate is an error."""
        at = self.pos
        return self.text(self.utf_units(), at)

    def modified_utf8(self, raw: bytes, at: int) -> str:
        """``raw`` decoded as :func:`decode_modified_utf8` does; an error where Java throws."""
        units = decode_modified_utf8(raw)
        if units is None:
            self.fail(f"malformed modified UTF-8 string ({_malformed(raw)})", at)
        return units

    def text(self, units: str, at: int) -> str:
        """UTF-16 ``units`` (from :meth:`utf_units`) as text: surrogate pairs joined into the
        character past U+FFFF they encode; a lone surrogate, which is no text, an error."""
        if _SURROGATE.search(units) is None:
            return units
        lone = _SURROGATE.search(_SURROGATE_PAIR.sub("", units))
        if lone is not None:
            self.fail(f"a lone surrogate (U+{ord(lone.group()):04X}), which is not text", at)
        return units.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
