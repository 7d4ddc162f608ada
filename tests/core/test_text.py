"""text.py: the one set of unsafe characters and the one way to shorten a text for a message."""

from __future__ import annotations

import pytest

from pytest_opid.text import printable, quote, safe_text, shorten

#: One of each kind the set holds: C0 controls (but tab and newline), DEL, C1 (NEL), the line
#: and paragraph separators, the bidi marks (U+061C among them), embeddings, overrides,
#: isolates, the BOM and a lone surrogate.
UNSAFE = "\x1b\x07\r\x7f\x85\x9b\u2028\u2029\u200e\u200f\u061c\u202a\u202e\u2066\u2069\ufeff\ud800"


@pytest.mark.parametrize("char", UNSAFE)
def test_every_printer_escapes_every_unsafe_character(char: str) -> None:
    escaped = f"\\u{ord(char):04x}"
    for shown in (quote(f"a{char}b"), printable(f"a{char}b"), safe_text(f"a{char}b")):
        assert char not in shown
        assert escaped in shown or (char == "\r" and "\\r" in shown), shown


def test_safe_text_keeps_tabs_and_newlines() -> None:
    assert safe_text("a\tb\nc") == "a\tb\nc"


@pytest.mark.parametrize(
    ("text", "limit", "around", "shown"),
    [
        ("abcdef", 6, None, "abcdef"),
        ("abcdefgh", 3, None, "abc\u2026"),
        ("abcdefgh", 3, 8, "\u2026fgh"),  # the end: a long path's tail
        ("abcdefgh", 2, 4, "\u2026de\u2026"),
        ("abcdefgh", 4, 0, "abcd\u2026"),
    ],
)
def test_shorten_cuts_to_the_limit_and_marks_each_cut(text, limit, around, shown) -> None:
    assert shorten(text, limit, around) == shown


def test_quote_with_a_limit_quotes_the_shortened_text() -> None:
    assert quote("ab\u202ecdef", 4) == '"ab\\u202ec\u2026"'
