"""``io.json.CountedDefaults``: how many keys a msgspec decoding's objects left out."""

from __future__ import annotations

import msgspec
import pytest

from pytest_opid.io.json import CountedDefaults

DEFAULTS = CountedDefaults()


class Row(msgspec.Struct, forbid_unknown_fields=True):
    a: int
    b: int = DEFAULTS.field(0)
    c: str | None = DEFAULTS.field(None, name="see")


DECODER = msgspec.json.Decoder(list[Row])


@pytest.mark.parametrize(
    ("text", "left_out"),
    [
        (b"[]", 0),
        (b'[{"a": 1, "b": 2, "see": "x"}]', 0),
        (b'[{"a": 1}]', 2),
        (b'[{"a": 1, "b": 0}, {"a": 2, "see": null}, {"a": 3}]', 4),
    ],
)
def test_counts_the_keys_left_out_of_one_decoding(text: bytes, left_out: int) -> None:
    rows, omitted = DEFAULTS.decode(DECODER, text)
    assert omitted == left_out
    assert all(row.b == 0 or row.b == 2 for row in rows)


def test_an_error_passes_through_and_releases_the_lock() -> None:
    for _ in range(2):  # a lock left held would block the second round forever
        with pytest.raises(msgspec.ValidationError):
            DEFAULTS.decode(DECODER, b'[{"a": 1}, {"a": "x"}]')
    assert DEFAULTS.decode(DECODER, b'[{"a": 1}]')[1] == 2


def test_nesting_is_measured_without_parsing() -> None:
    """Issue 48: what an isolated child sends back is measured before it is parsed; brackets
    inside strings (escaped quotes too) are text, not levels."""
    from pytest_opid.io.json import nested_within

    assert nested_within(b"[" * 3 + b"]" * 3, 3)
    assert not nested_within(b"[" * 4 + b"]" * 4, 3)
    assert not nested_within(b"[" * 100_000 + b"]" * 100_000, 200)
    assert nested_within(b'{"a": "[[[[{{{{", "b": ["\\"[[[["]}', 2)
    assert not nested_within(b'{"a": [{"b": [1]}]}', 3)
