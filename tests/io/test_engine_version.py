"""The engine version a fingerprint was made with, kept by the saved form (version 3) and the
snapshot ([job] ``engine_version``): Spark's restart rules differ between its lines, so a
fingerprint read back must still say which Spark made it. Fingerprints that name no version
(Flink's) are written as before, byte for byte."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.io.snapshot import dumps, loads
from pytest_opid.result import ChainedOperator, Fingerprint, JobVertex, OperatorFingerprint

HEX_A = "a" * 32


def made_with(version: str | None) -> Fingerprint:
    op = OperatorFingerprint(0, "Aggregate", HEX_A, parallelism=2)
    vertex = JobVertex(HEX_A, "stage 0", 2, (ChainedOperator(HEX_A),))
    return Fingerprint((op,), (vertex,), (), engine="spark", engine_version=version)


@pytest.mark.parametrize("version", ["3.5.9", "4.3.0", "4.1.0.dev1", "3.5.0+databricks"])
def test_the_saved_form_keeps_the_version(version: str) -> None:
    fp = made_with(version)
    text = fp.to_json()
    data = json.loads(text)
    assert data["version"] == 3
    assert list(data)[:4] == ["version", "engine", "mode", "engine_version"]
    assert data["engine_version"] == version
    assert text == json.dumps(fp.to_dict(), indent=2, ensure_ascii=False)
    for read in (Fingerprint.from_json(text), Fingerprint.from_dict(data)):
        assert read.engine_version == version
    fast = Fingerprint.decode_fast(text.encode())
    assert fast is not None and fast.engine_version == version


def test_without_a_version_the_saved_form_is_version_2_as_before() -> None:
    data = json.loads(made_with(None).to_json())
    assert data["version"] == 2
    assert "engine_version" not in data
    assert Fingerprint.from_json(json.dumps(data)).engine_version is None


def test_the_version_takes_no_part_in_equality() -> None:
    assert made_with("3.5.9") == made_with("4.3.0") == made_with(None)


@pytest.mark.parametrize(
    ("version", "engine_version", "message"),
    [
        (2, "4.3.0", 'engine_version "4.3.0" needs version 3, the file says 2'),
        (3, "latest", 'engine_version "latest" is not a version number (as spark spells one'),
        (3, "4.3.0\n", "is not a version number"),
        (3, "4" * 60, "is not a version number"),
        (3, 43, "'engine_version' must be a string, got a number"),
    ],
)
def test_a_bad_version_is_named(version: int, engine_version: object, message: str) -> None:
    data = json.loads(made_with("4.3.0").to_json())
    data["version"] = version
    data["engine_version"] = engine_version
    text = json.dumps(data)
    assert Fingerprint.decode_fast(text.encode()) is None
    with pytest.raises(DocumentError, match="engine_version") as info:
        Fingerprint.from_json(text, "old.json")
    assert message in str(info.value)
    assert str(info.value).startswith("old.json")


def test_the_snapshot_keeps_the_version_in_its_job_section() -> None:
    for ids_once in (False, True):
        text = dumps(made_with("3.5.9"), ids_once=ids_once)
        assert 'engine_version  "3.5.9"' in text.splitlines()
        assert loads(text).engine_version == "3.5.9"
        bare = dumps(made_with(None), ids_once=ids_once)
        assert "engine_version" not in bare
        assert loads(bare).engine_version is None


@pytest.mark.parametrize("value", ['"latest"', '"3.5.9 "', "3.5.9", '"4.3.0\\n"'])
def test_a_bad_version_in_a_snapshot_names_the_line(value: str) -> None:
    text = dumps(made_with("3.5.9"), ids_once=True)
    line = next(x for x in text.splitlines() if x.startswith("engine_version"))
    bad = text.replace(line, f"engine_version  {value}")
    with pytest.raises(DocumentError, match=r"snap\.opid.*line \d+"):
        loads(bad, origin="snap.opid")


def test_a_repeated_version_row_is_refused() -> None:
    text = dumps(made_with("3.5.9"), ids_once=True)
    line = next(x for x in text.splitlines() if x.startswith("engine_version"))
    with pytest.raises(DocumentError, match="unexpected \\[job\\] row 'engine_version'"):
        loads(text.replace(line, f"{line}\n{line}"), origin="snap.opid")


def test_a_fingerprint_made_elsewhere_keeps_its_version_through_replace() -> None:
    fp = dataclasses.replace(made_with("3.5.9"), mode="batch")
    assert loads(dumps(fp, ids_once=True)).engine_version == "3.5.9"
