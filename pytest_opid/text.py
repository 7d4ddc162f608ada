"""Text that is safe to print: quoting, escaping and column layout shared by every message.

Operator names come from user code and may hold anything: newlines, ANSI escapes, Unicode line
and paragraph separators, bidi overrides. Printed raw, such a name could forge a line of a CI
log (``E   ...``) or break a snapshot into lines that no longer parse. Every name or uid this
package prints goes through :func:`quote` or :func:`printable`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

__all__ = [
    "MASK",
    "columns",
    "escape_unsafe",
    "escape_unsafe_utf8",
    "plural",
    "printable",
    "quote",
    "quote_all",
    "safe_text",
    "shorten",
    "userinfo_span",
    "without_userinfo",
]

# The one set of characters that must not reach a log, a terminal or a snapshot raw, whatever
# prints them: the C0 controls but tab and newline (ANSI escapes, OSC, BEL, carriage returns),
# DEL and the C1 controls (NEL among them), the line and paragraph separators, the bidi marks
# (U+200E, U+200F, U+061C), embeddings, overrides and isolates, the BOM (U+FEFF, a zero-width
# no-break space), and lone surrogates (a path's undecodable bytes). Each becomes a \\uXXXX
# escape, which JSON reads back as the same character. Applied to JSON text it only touches the
# inside of strings: JSON writers put no raw control outside them but newlines.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ufeff\ud800-\udfff]"
)


# The same characters in UTF-8 (a lone surrogate as surrogatepass writes it), to find them in
# bytes already encoded without decoding them first.
_UNSAFE_UTF8 = re.compile(
    rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8-\xae]"
    rb"|\xe2\x81[\xa6-\xa9]|\xef\xbb\xbf|\xed[\xa0-\xbf]"
)

#: Where a URL starts: its scheme and ``//`` (in ``jdbc:postgresql://`` it finds ``postgresql://``).
_URL_START = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
#: Where a URL in a message ends.
_URL_END = re.compile(r"[\s\"'<>`]")
#: Stores whose URLs have no port: a colon after the ``//`` is always a credential's
#: (``s3a://KEY:SECRET@bucket``), whatever the secret holds (AWS secret keys hold ``/``).
_NO_PORT = frozenset(
    {"s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "wasb", "wasbs", "az", "adl", "dbfs",
     "oss", "cos", "cosn", "obs", "r2", "lakefs"}
)  # fmt: skip
#: Azure's ``container@account``: the part before the ``@`` names a container, no credential.
_CONTAINER_AT = frozenset({"abfs", "abfss", "wasb", "wasbs"})
#: The query parameters of a signed URL that are credentials (an Azure SAS token's ``sig``, a
#: presigned S3 or GCS URL's ``X-Amz-Signature``, ``X-Goog-Credential``...).
_SIGNED = re.compile(r"(?i)^(sig|.*(signature|credential|secret|password|token|key))$")
#: What a message shows in place of a URL's credentials.
MASK = "***@"


def userinfo_span(url: str, start: int = 0) -> tuple[int, int] | None:
    """Where the credentials of the URL at ``start`` are, ``@`` included, as ``(start, end)``
    indexes of ``url``; ``None`` where it has none. The credentials run to the last ``@`` of the
    URL when a colon follows the ``//`` (``user:password@``): a secret may hold an unencoded
    ``/``, ``?``, ``#`` or ``@``, so the first of those cannot end it. Only a port (digits
    after the colon, in a scheme that has ports) and an ``@`` further on in the path is read as
    no credential."""
    m = _URL_START.match(url, start)
    if m is None:
        return None
    begin = m.end()
    end = _URL_END.search(url, begin)
    rest = url[begin : end.start() if end else len(url)]
    at = rest.rfind("@")
    if at < 0 or rest[:at] == MASK[:-1]:
        return None
    cut = next((i for i, c in enumerate(rest) if c in "/?#"), len(rest))
    head = rest[:cut]
    user = head.partition("@")[0]
    scheme = m.group(1).lower()
    if ":" in user:
        after = user.partition(":")[2]
        if "@" not in head and scheme not in _NO_PORT and after.isdigit():
            return None  # host:port, and an "@" in the path
        return begin, begin + at + 1
    if "@" in head and scheme not in _CONTAINER_AT:
        return begin, begin + head.rfind("@") + 1  # a user name or a token alone
    return None


def without_userinfo(text: str, mask: str = "") -> str:
    """``text`` with the credentials of every URL in it replaced by ``mask`` (removed by
    default): ``s3a://KEY:SECRET@bucket/out`` is ``s3a://bucket/out``, the values of a signed
    URL's credential parameters (``?sig=...``) are ``***``. Every recorded path and every
    message goes through it, before anything is written."""
    if "://" not in text:
        return text
    out: list[str] = []
    done = 0
    for m in _URL_START.finditer(text):
        if m.start() < done:
            continue
        span = userinfo_span(text, m.start())
        end_match = _URL_END.search(text, m.end())
        end = end_match.start() if end_match else len(text)
        if span is not None:
            out += [text[done : span[0]], mask]
            done = span[1]
        query = text.find("?", done, end)
        if query >= 0:
            out += [text[done : query + 1], _signed(text[query + 1 : end])]
            done = end
    return "".join(out) + text[done:] if out else text


def _signed(query: str) -> str:
    """A URL's query with the values of its credential parameters written ``***``."""
    parts = []
    for part in query.split("&"):
        name, equals, value = part.partition("=")
        parts.append(f"{name}=***" if equals and value and _SIGNED.match(name) else part)
    return "&".join(parts)


#: The ellipsis that marks where :func:`shorten` cut a text.
_ELLIPSIS = "\u2026"


def safe_text(text: str) -> str:
    """``text`` as printed by every command and failure message: each character that could
    forge or hide a line written as ``\\uXXXX``, tabs and newlines kept, and a URL's
    credentials masked (:func:`without_userinfo`). Text already escaped (by :func:`quote`)
    holds none of them, so it is never escaped twice."""
    text = without_userinfo(text, MASK)
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape_unsafe(text: str) -> str:
    """``text`` with every unsafe character (see :func:`quote`) written as ``\\uXXXX``. Applied
    to JSON text, whose syntax is ASCII, it only touches the inside of strings, and the
    result reads back as the same values."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def escape_unsafe_utf8(data: bytes) -> bytes:
    """:func:`escape_unsafe` of UTF-8 bytes (whole characters), without decoding them when
    they hold none of the characters (the usual case: one scan in C)."""
    if _UNSAFE_UTF8.search(data) is None:
        return data
    return escape_unsafe(data.decode("utf-8", "surrogatepass")).encode("utf-8")


def quote(text: str, limit: int | None = None, around: int | None = None) -> str:
    """``text`` as a JSON string literal on one line, every unsafe character escaped; at most
    ``limit`` characters of it where given (see :func:`shorten`); a URL's credentials
    masked."""
    text = without_userinfo(text, MASK)
    if limit is not None:
        text = shorten(text, limit, around)
    return _UNSAFE.sub(_escape, json.dumps(text, ensure_ascii=False))


def shorten(text: str, limit: int, around: int | None = None) -> str:
    """At most ``limit`` characters of ``text``: its start, or those around position
    ``around`` (``len(text)`` keeps the end, say of a long path); an ellipsis marks each end
    that was cut. Keeps a message to one readable line whatever a file holds."""
    if len(text) <= limit:
        return text
    start = 0 if around is None else max(0, min(around - limit // 2, len(text) - limit))
    cut = text[start : start + limit]
    return (_ELLIPSIS if start else "") + cut + (_ELLIPSIS if start + limit < len(text) else "")


def quote_all(values: Sequence[str | None], none: str = "") -> list[str]:
    """``[quote(v) for v in values]`` (``none`` for ``None``), with one ``json.dumps`` of the
    whole column: ``", "`` can only occur between the items of a JSON array (a quote inside a
    string is escaped), so the array splits back into its items exactly."""
    present = [without_userinfo(v, MASK) for v in values if v is not None]
    if not present:
        return [none] * len(values)
    text = json.dumps(present, ensure_ascii=False)
    if _UNSAFE.search(text):
        quoted = [quote(v) for v in present]
    else:
        quoted = [f'"{item}"' for item in text[2:-2].split('", "')]
    if len(present) == len(values):
        return quoted
    it = iter(quoted)
    return [none if v is None else next(it) for v in values]


def printable(text: str) -> str:
    """``text`` unquoted where it is plain, else its escaped form without the quotes; a URL's
    credentials masked."""
    text = without_userinfo(text, MASK)
    if text.isprintable() and not _UNSAFE.search(text):
        return text
    return quote(text)[1:-1]


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``"1 operator"``, ``"2 operators"``."""
    return f"{count} {singular if count == 1 else (plural_form or singular + 's')}"


def columns(rows: Sequence[tuple[str, ...]], indent: str = "  ") -> list[str]:
    """Rows as left-aligned columns (the last column unpadded), each line indented."""
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        for row in rows
    ]
