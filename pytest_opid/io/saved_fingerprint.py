"""The saved form of a fingerprint: the JSON that ``opid fingerprint --json`` writes and every
command and :func:`pytest_opid.fingerprint` read back, losslessly.

This is the face :mod:`pytest_opid.result` uses: :func:`read_json` tries the fast reader and
falls back to the strict one. The parts, each one concern: the declarations and versions
(:mod:`~pytest_opid.io.saved_form`), the strict reader that names the entry at fault
(:mod:`~pytest_opid.io.saved_read`), the fast reader that decodes typed rows with msgspec in C
and accepts exactly what the strict one accepts (:mod:`~pytest_opid.io.saved_fast`), and the
chunked writer (:mod:`~pytest_opid.io.saved_write`).
"""

from __future__ import annotations

from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.io.json import parse_json
from pytest_opid.io.saved_fast import decode_fast
from pytest_opid.io.saved_form import ENGINE_VERSION, SAVED_VERSION, Kinds, is_engine_version
from pytest_opid.io.saved_read import read
from pytest_opid.io.saved_write import CHUNK_ROWS, to_dict, to_json, write_json

__all__ = [
    "CHUNK_ROWS",
    "ENGINE_VERSION",
    "SAVED_VERSION",
    "Kinds",
    "decode_fast",
    "is_engine_version",
    "read",
    "read_json",
    "to_dict",
    "to_json",
    "write_json",
]


def read_json(raw: bytes | str, origin: str, kinds: Kinds) -> Any:
    """Read a saved fingerprint from its JSON text (or the file's bytes), as strictly as
    :func:`read` of :func:`~pytest_opid.io.json.parse_json`: typed decoding in C where it can
    vouch for the input (:func:`decode_fast`), else the precise path, whose
    :class:`DocumentError` names ``origin`` and the place at fault."""
    fast = decode_fast(raw, kinds)
    if fast is not None:
        return fast
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DocumentError(
                f"{origin}: cannot read: not UTF-8 text (byte {exc.start} is {raw[exc.start]:#04x})"
            ) from None
    else:
        text = raw
    data = parse_json(text, origin)
    try:
        return read(data, kinds)
    except DocumentError as exc:
        raise DocumentError(f"{origin}: {exc}") from None
