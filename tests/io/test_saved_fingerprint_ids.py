"""The saved-form reader checks every ID of a file at once (one join, one ``bytes.translate``),
not with a pattern per string: any ID that is not 32 lowercase hex digits, wherever it stands,
still sends the input to the precise path, which names it as before."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.io.json import parse_json
from pytest_opid.result import Fingerprint

from .test_saved_fingerprint import set_at

HEX_A, HEX_B, HEX_C = "a" * 32, "b" * 32, "c" * 32


def sample() -> dict[str, Any]:
    return {
        "version": 2,
        "engine": "spark",
        "mode": "streaming",
        "operators": [
            {"node": 1, "name": "Src", "operator_id": HEX_A, "user_operator_id": HEX_C},
            {"node": 2, "name": "Sink", "operator_id": HEX_B},
        ],
        "job_vertices": [
            {
                "id": HEX_A,
                "name": "Src -> Sink",
                "parallelism": 2,
                "operators": [
                    {"generated": HEX_A, "user_defined": HEX_C},
                    {"generated": HEX_B},
                ],
            }
        ],
        "state_operators": [
            {"state_operator_id": 0, "operator_id": HEX_B, "name": "agg", "kind": "agg"}
        ],
    }


PLACES: dict[str, tuple[Any, ...]] = {
    "operator_id": ("operators", 1, "operator_id"),
    "user_operator_id": ("operators", 0, "user_operator_id"),
    "vertex id": ("job_vertices", 0, "id"),
    "generated": ("job_vertices", 0, "operators", 1, "generated"),
    "user_defined": ("job_vertices", 0, "operators", 0, "user_defined"),
    "state operator_id": ("state_operators", 0, "operator_id"),
}
#: 32 characters each, so that only the digits are wrong
WRONG = {
    "upper case": "A" * 32,
    "not hex": "g" * 32,
    "not ASCII": "é" * 32,
    "a digit beyond f": "a" * 31 + "z",
}


def with_(path: tuple[Any, ...], value: Any) -> str:
    return set_at(sample(), path, value)


def precise_error(text: str) -> str:
    with pytest.raises(DocumentError) as info:
        Fingerprint.from_dict(parse_json(text, "the JSON text"))
    return str(info.value)


def test_the_sample_reads_on_the_fast_path() -> None:
    text = json.dumps(sample())
    fast = Fingerprint.decode_fast(text.encode())
    assert fast is not None
    assert fast == Fingerprint.from_dict(parse_json(text, "the JSON text"))
    assert fast.operators[0].job_vertex == HEX_A


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("wrong", sorted(WRONG))
def test_a_wrong_id_anywhere_takes_the_precise_path(place: str, wrong: str) -> None:
    text = with_(PLACES[place], WRONG[wrong])
    assert Fingerprint.decode_fast(text.encode()) is None
    assert Fingerprint.decode_fast(text) is None
    expected = f"the JSON text: {precise_error(text)}"
    with pytest.raises(DocumentError) as info:
        Fingerprint.from_json(text.encode())
    assert str(info.value) == expected


def test_missing_optional_keys_are_filled_by_column() -> None:
    data = sample()
    del data["job_vertices"][0]["operators"][0]["user_defined"]
    data["operators"][1].update(parallelism=3, max_parallelism=64, stateful=False, uid="u")
    text = json.dumps(data)
    fast = Fingerprint.decode_fast(text.encode())
    assert fast is not None
    assert fast == Fingerprint.from_dict(json.loads(text))
    assert fast.job_vertices[0].operators[0].user_defined is None
    assert fast.job_vertices[0].max_parallelism == -1
    assert fast.job_vertices[0].nodes == ()
    assert [op.parallelism for op in fast.operators] == [-1, 3]
    assert [op.stateful for op in fast.operators] == [None, False]


def test_vertices_take_their_own_members() -> None:
    """Each vertex's run of chained operators is cut from one column: sizes 0, 2 and 1."""
    data = sample()
    data["job_vertices"] = [
        {"id": HEX_C, "name": "empty", "parallelism": 1, "operators": []},
        data["job_vertices"][0],
        {"id": HEX_B, "name": "Sink", "parallelism": 1, "operators": [{"generated": HEX_B}]},
    ]
    text = json.dumps(data)
    fast = Fingerprint.decode_fast(text.encode())
    assert fast is not None
    assert fast == Fingerprint.from_dict(json.loads(text))
    assert [len(v.operators) for v in fast.job_vertices] == [0, 2, 1]
    assert fast.operators[1].job_vertex == HEX_B  # a later vertex listing it wins
