"""Bit-exactness against a real Apache Flink 2.3.0.

The expected values in tests/data come from Flink itself (see ../shared/flink-golden/README.md);
they are vendored unchanged. Every operator ID, user-defined ID and job vertex must match.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pytest_opid import fingerprint
from pytest_opid.flink.document import topology_from_document

DATA = Path(__file__).resolve().parents[1] / "data"


def _load_cases() -> list[dict]:
    with (DATA / "cases.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


CASES = _load_cases()


def _case_id(case: dict) -> str:
    meta = case["case"]
    return f"seed{meta['seed']}-{meta['runtime_mode'].lower()}"


def _vertices(fp_dict: dict) -> list[dict]:
    """The job vertex keys the golden cases record (the saved form also has nodes and max
    parallelism)."""
    keys = ("id", "name", "parallelism", "operators")
    return [{k: v[k] for k in keys} for v in fp_dict["job_vertices"]]


def _assert_matches_flink(case: dict) -> None:
    got = fingerprint(topology_from_document(case["topology"])).to_dict()
    expected = case["expected"]
    ids = {str(op["node"]): op["operator_id"] for op in got["operators"]}
    assert ids == expected["operator_ids"]
    user_ids = {
        str(op["node"]): op["user_operator_id"]
        for op in got["operators"]
        if op["user_operator_id"] is not None
    }
    assert user_ids == expected.get("user_operator_ids", {})
    if "job_vertices" not in expected:
        return
    # Every vertex, BATCH ones included: there Flink leaves -1 ("decided at run time by the
    # adaptive batch scheduler") where the program configured no parallelism, which the
    # documents record per node (parallelism_configured).
    assert _vertices(got) == expected["job_vertices"]


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_golden_case(case: dict) -> None:
    _assert_matches_flink(case)


def test_all_290_cases_are_present() -> None:
    assert len(CASES) == 290
    assert sum(c["case"]["runtime_mode"] == "STREAMING" for c in CASES) == 273


def test_large_10k_program() -> None:
    with gzip.open(DATA / "large_10k.jsonl.gz", "rt", encoding="utf-8") as f:
        (case,) = [json.loads(line) for line in f]
    assert len(case["topology"]["nodes"]) == 9820
    _assert_matches_flink(case)


@pytest.mark.parametrize("index", [0, 1], ids=["with-uids", "word-count-without-uids"])
def test_published_job_ids(index: int) -> None:
    case = json.loads((DATA / "published.json").read_text(encoding="utf-8"))[index]
    _assert_matches_flink(case)


def test_published_word_count_first_source_id() -> None:
    """The ID nearly every Flink job without uids shows for its first source."""
    case = json.loads((DATA / "published.json").read_text(encoding="utf-8"))[1]
    fp = fingerprint(case["topology"])
    assert fp.operators[0].operator_id == "cbc357ccb763df2852fee8c4fc7d55f2"
