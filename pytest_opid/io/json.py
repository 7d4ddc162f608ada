"""One strict JSON reader for every input: documents, plans, saved fingerprints.

The standard library accepts more than a topology can represent exactly: ``NaN`` and
``Infinity``, integers of thousands of digits, duplicate keys (the last one silently wins), lone
surrogates that cannot be printed or encoded, and nesting deep enough to exhaust the stack. Each
of those is an error here, in one line that names the input and the place, so that every loader
built on top rejects what it could only misread.
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from collections.abc import Iterable, Iterator
from itertools import repeat
from typing import Any, BinaryIO, TypeVar

import msgspec

from pytest_opid.errors import DocumentError

__all__ = [
    "CountedDefaults",
    "JsonProblem",
    "check_hex_id",
    "decode_text",
    "describe_json",
    "has_lone_surrogate",
    "input_limit",
    "joined",
    "key_count",
    "label",
    "not_regular",
    "open_regular",
    "parse_json",
    "parse_json_bytes",
    "read_bytes",
    "read_json",
    "read_stream",
    "read_text",
    "short",
    "strict_loads",
]

#: Most bytes of one input (a document, plan, saved fingerprint or snapshot; a file or stdin):
#: 1 GiB, or ``OPID_MAX_INPUT_BYTES``. Past it the input is refused in one line instead of
#: read until memory runs out (``/dev/zero``, an endless pipe).
MAX_INPUT_BYTES = 1 << 30
MAX_INPUT_ENV = "OPID_MAX_INPUT_BYTES"
_CHUNK = 1 << 20
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: Longest integer literal we read: 64-bit integers have at most 20 characters.
_MAX_INT_CHARS = 20
_HEX_ID = re.compile(r"[0-9a-f]{32}")
_LONG_DIGITS = re.compile(f"[0-9]{{{_MAX_INT_CHARS}}}")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read and parse a JSON file; every way it can fail is a :class:`DocumentError` that
    names the file."""
    return parse_json_bytes(read_bytes(path), str(path))


def parse_json_bytes(data: bytes, path: str) -> Any:
    """Parse the bytes of the JSON file at ``path`` (already read), as :func:`read_json` does."""
    return parse_json(decode_text(data, path), path, empty="the file is empty")


def input_limit() -> int:
    """The most bytes any input is read to: :data:`MAX_INPUT_BYTES`, or the whole number of
    bytes in the environment variable ``OPID_MAX_INPUT_BYTES``."""
    text = os.environ.get(MAX_INPUT_ENV)
    if text is None or not text.strip():
        return MAX_INPUT_BYTES
    if not (text.strip().isascii() and text.strip().isdigit()) or int(text) <= 0:
        raise DocumentError(f"{MAX_INPUT_ENV}={short(text)}: expected a number of bytes > 0")
    return int(text)


def _too_large(origin: str | os.PathLike[str], size: int | None, limit: int) -> DocumentError:
    held = f"{size} bytes, more than" if size is not None else "longer than"
    return DocumentError(
        f"{origin}: {held} the {limit}-byte limit of an input "
        f"(set {MAX_INPUT_ENV} to read a larger one)"
    )


def not_regular(mode: int) -> str:
    """Why a file of ``st_mode`` ``mode`` is not read (it is not a regular file)."""
    if stat.S_ISDIR(mode):
        return "it is a directory, not a file"
    if stat.S_ISFIFO(mode):
        return "it is a FIFO (named pipe), not a regular file; pipe it to - (stdin) instead"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "it is a device, not a regular file"
    return "not a regular file"


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """The regular file at ``path`` (a link is followed), opened for binary reading.

    Anything else is a :class:`DocumentError` naming the path, at once: a FIFO is opened
    without blocking (no writer would otherwise keep ``open`` waiting forever) and refused, as
    are devices (``/dev/zero`` never ends) and directories."""
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | _BINARY | _CLOEXEC)
    except FileNotFoundError:
        raise DocumentError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DocumentError(f"{path}: cannot read: it is a directory, not a file") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise DocumentError(f"{path}: cannot read: {reason}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise DocumentError(f"{path}: cannot read: {not_regular(mode)}")
        if _NONBLOCK:
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """A regular file's bytes, at most ``limit`` (default :func:`input_limit`) of them; a
    missing file, a directory, a FIFO, a device, an unreadable or a larger file is a
    :class:`DocumentError` naming the file."""
    limit = input_limit() if limit is None else limit
    with open_regular(path) as f:
        try:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise _too_large(path, size, limit)
            # What fstat said, then the rest in chunks (the file may have grown since): a
            # read of ``limit`` bytes at once would reserve all of them for a small file.
            chunks: list[bytes] = []
            total, want = 0, min(size, limit) + 1
            while total <= limit:
                chunk = f.read(want)
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
                want = min(_CHUNK, limit + 1 - total)
            data = b"".join(chunks)
        except OSError as exc:
            raise DocumentError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise _too_large(path, None, limit)
    return data


def read_stream(stream: BinaryIO, origin: str, limit: int | None = None) -> bytes:
    """All of ``stream`` (stdin) up to ``limit`` bytes (default :func:`input_limit`), in
    chunks: a NUL byte, which no text input holds, ends the reading at once (``/dev/zero`` on
    stdin), and so does the limit (any other endless stream)."""
    limit = input_limit() if limit is None else limit
    chunks: list[bytes] = []
    total = 0
    while True:
        try:
            chunk = stream.read(min(_CHUNK, limit + 1 - total))
        except OSError as exc:
            raise DocumentError(f"{origin}: cannot read: {exc.strerror or exc}") from None
        if not chunk:
            return b"".join(chunks)
        if b"\x00" in chunk:
            raise DocumentError(f"{origin}: cannot read: binary data (a NUL byte), not text")
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise _too_large(origin, None, limit)


def read_text(path: str | os.PathLike[str]) -> str:
    """A UTF-8 text file's contents; a missing file, a directory, an unreadable file or bytes
    that are not UTF-8 are a :class:`DocumentError` naming the file."""
    return decode_text(read_bytes(path), path)


def decode_text(data: bytes, path: str | os.PathLike[str]) -> str:
    """The UTF-8 text of a file's bytes; bytes that are not UTF-8 are a :class:`DocumentError`
    naming the file."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(
            f"{path}: cannot read: not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})"
        ) from None


def parse_json(text: str, origin: str, empty: str = "the input is empty") -> Any:
    """Parse JSON text strictly; every failure is a :class:`DocumentError` naming ``origin``."""
    if not text.strip():
        raise DocumentError(f"{origin}: {empty}")
    if "\x00" in text:
        raise DocumentError(f"{origin}: cannot read: binary data, not JSON text")
    try:
        return strict_loads(text)
    except JsonProblem as exc:
        raise DocumentError(f"{origin}: {exc}") from None


class JsonProblem(ValueError):
    """Why a text is not strict JSON: the message (``str``), the character offset where the
    parser stopped (``pos``, where known) and ``reason``, the bare why of a syntax error
    (``Expecting value, line 1 column 5``) for a caller that words the rest itself."""

    def __init__(self, message: str, pos: int | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.pos = pos
        self.reason = message if reason is None else reason


def strict_loads(text: str) -> Any:
    """The one strict JSON reader: no repeated key, no NaN or Infinity, no number out of range,
    no integer longer than a 64-bit one, no lone surrogate, no nesting past the interpreter's
    recursion limit. A :class:`JsonProblem` says why."""
    # Integer literals are checked only where a long run of digits appears at all: a callback
    # per integer would cost more than the parse itself on a large input.
    long_digits = _LONG_DIGITS.search(text) is not None
    try:
        data = json.loads(
            text,
            object_pairs_hook=_object,
            parse_constant=_constant,
            parse_int=_integer if long_digits else None,
            parse_float=_float,
        )
    except json.JSONDecodeError as exc:
        raise JsonProblem(
            f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
            exc.pos,
            f"{exc.msg}, line {exc.lineno} column {exc.colno}",
        ) from None
    except _Invalid as exc:
        raise JsonProblem(str(exc)) from None
    except RecursionError:
        # The C decoder stops at the interpreter's recursion limit with this error, before
        # any stack is at risk; everything we do with the parsed value afterwards is iterative.
        raise JsonProblem("JSON nested too deeply") from None
    if _SURROGATE_ESCAPE.search(text):
        _check_surrogates(data)
    return data


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (U+D800-U+DFFF): a Python string can, JSON text
    read by a strict decoder cannot, and no file can hold it as UTF-8."""
    return _SURROGATE.search(text) is not None


def key_count(raw: bytes, strings: Iterable[str | None]) -> int:
    """How many keys the JSON text ``raw`` spells out, counting repeats.

    Schema-driven decoders (msgspec) keep the last of a repeated key silently. A loader that
    decoded ``raw`` with such a decoder compares this count with the keys its objects hold: more
    here means a repeated key, and the loader re-reads the input on the precise path, which names
    it. Outside strings a colon only ever separates a key from its value, so the count is every
    colon less those inside the decoded ``strings`` (every string value that may hold one; keys
    the decoder accepted are known names without colons, ``None`` is skipped). A colon written
    as ``\u003a`` is in a decoded string but not in the bytes, so such input gets -1, which
    matches no object's count: the caller takes the precise path.
    """
    # A backslash at all is rare (memchr finds none quickly); only then look for the escape.
    if b"\\" in raw and b"\\u003" in raw and (b"\\u003a" in raw or b"\\u003A" in raw):
        return -1
    return raw.count(b":") - joined(strings).count(":")


def joined(strings: Iterable[str | None]) -> str:
    """The strings (``None`` skipped) in one text, apart by NUL: one scan in C then answers for
    all of them (a colon count, a lone surrogate)."""
    return "\x00".join(filter(None, strings))


T = TypeVar("T")


class CountedDefaults:
    """Defaults for msgspec struct fields that count how often they are taken.

    Paired with :func:`key_count`: the keys a decoding's objects hold are their fields less the
    keys left out. msgspec fills a missing field by calling its ``default_factory``; here each
    factory is the ``__next__`` of a ``repeat`` iterator of its own, whose length hint drops by
    one per call, so the count costs nothing per object. :meth:`decode` reads it around one
    decoding, under a lock so that another thread's decoding does not mix in."""

    _PLENTY = 2**62

    def __init__(self) -> None:
        self._sources: list[repeat[Any]] = []
        self._lock = threading.Lock()

    def field(self, value: Any, name: str | None = None) -> Any:
        """A struct field defaulting to ``value`` (keyed ``name`` in the text, if given)."""
        source = repeat(value, self._PLENTY)
        self._sources.append(source)
        return msgspec.field(default_factory=source.__next__, name=name)

    def decode(self, decoder: msgspec.json.Decoder[T], raw: bytes | str) -> tuple[T, int]:
        """``decoder.decode(raw)`` and how many keys the text left out (defaults taken).
        msgspec's errors pass through."""
        with self._lock:
            before = self._taken()
            value = decoder.decode(raw)
            return value, self._taken() - before

    def convert(self, value: Any, kind: type[T]) -> T:
        """``msgspec.convert(value, kind)`` (Python objects, e.g. a parsed document: a dict
        holds no repeated key, so nothing to count), under the lock: the defaults it takes must
        not land in another thread's count."""
        with self._lock:
            return msgspec.convert(value, kind)

    def _taken(self) -> int:
        return sum(self._PLENTY - source.__length_hint__() for source in self._sources)


class _Invalid(ValueError):
    """A value JSON allows but a topology cannot hold."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Invalid(f"duplicate key {short(key)} in one object")
            seen.add(key)
    return out


def _constant(name: str) -> Any:
    raise _Invalid(f"{name} is not a number JSON allows")


def _integer(text: str) -> int:
    if len(text) > _MAX_INT_CHARS:
        raise _Invalid(f"integer of {len(text)} digits is too large ({text[:20]}...)")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Invalid(f"number {short(text)} is out of range")
    return value


def _strings(data: Any) -> Iterator[str]:
    """Every string (keys included) of a parsed value, walked with a stack."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


def _check_surrogates(data: Any) -> None:
    for s in _strings(data):
        if _SURROGATE.search(s):
            raise JsonProblem(
                f"the string {short(s)} holds a lone surrogate (\\uD800-\\uDFFF), which is not text"
            )


def describe_json(value: Any) -> str:
    """How an error message names a JSON value's type: "an object", "a list", "a number"..."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "a number"
    return type(value).__name__


def short(value: Any, limit: int = 80) -> str:
    """A value for an error line: JSON-quoted, escaped, at most about ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError):
        text = repr(value)
    except RecursionError:  # a parsed value (a dict) may nest deeper than the stack
        return f"{describe_json(value)} nested too deeply to show"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def label(value: Any, limit: int = 60) -> str:
    """A value for an error message in Python's spelling (``'Map'``, ``3``) where it is a
    scalar, else as :func:`short` gives it: the repr of a container recurses without limit,
    and a parsed document (a dict) may nest deeper than the stack."""
    if value is None or isinstance(value, (bool, int, float, str)):
        text = repr(value)
        return text if len(text) <= limit else text[: limit - 3] + "..."
    return short(value, limit)


def check_hex_id(value: Any, where: str) -> str:
    """An operator ID: exactly 32 lowercase hex digits, as every engine prints them."""
    if not isinstance(value, str) or not _HEX_ID.fullmatch(value):
        raise DocumentError(f"{where}: {short(value)} is not an ID of 32 lowercase hex digits")
    return value


#: A JSON string (skipped whole: brackets in it are text) or a bracket.
_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def nested_within(data: bytes, limit: int) -> bool:
    """Whether the JSON text ``data`` opens at most ``limit`` arrays and objects inside one
    another (brackets inside strings do not count), measured without parsing it: Python's
    parser recurses once per level. Stops at the first level past ``limit``."""
    depth = 0
    for token in _JSON_TOKEN.finditer(data):
        mark = token.group()
        if mark in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return False
        elif mark in (b"]", b"}"):
            depth -= 1
    return True
