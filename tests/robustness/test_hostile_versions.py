"""A version text built to make a backtracking pattern try every split (``3.5`` and a run of
letters before a bad character: 19 s with 26 letters on the old nested pattern) is refused in
linear time, by the three readers of a Spark version: ``--spark-version`` (CLI),
``--opid-spark-version`` and the marker's ``spark_version=`` (both :func:`parse_line`), and a
recorded engine version (:func:`engine_line`)."""

from __future__ import annotations

import time

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.spark.versions import SparkLine, engine_line, parse_line


@pytest.mark.parametrize(
    "tail", ["a" * 26 + "!", "a" * 5_000 + "!", ".a-" * 2_000 + " x", "1" * 9_000 + "/"]
)
def test_a_hostile_version_is_refused_fast(tail: str) -> None:
    for what in ("--spark-version", "--opid-spark-version", "spark_version="):
        start = time.perf_counter()
        with pytest.raises(DocumentError, match="not a Spark version"):
            parse_line("3.5" + tail, what)
        assert engine_line("3.5" + tail) is None
        assert time.perf_counter() - start < 0.5


def test_the_versions_read_before_still_read() -> None:
    assert parse_line("3.5") == SparkLine(3, 5)
    assert parse_line(" 4.3.0.dev1 ") == SparkLine(4, 3)
    assert parse_line("4.0.0-SNAPSHOT") == SparkLine(4, 0)
    assert engine_line("3.5.9+local.1") == SparkLine(3, 5)
    assert engine_line("35") is None and engine_line("3.") is None
    with pytest.raises(DocumentError, match=r"not 9\.9"):
        parse_line("9.9")
