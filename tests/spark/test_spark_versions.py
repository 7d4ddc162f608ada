"""Which Spark line a verdict speaks for, without a JVM: fingerprints built by hand, the
restart check judged for one line or another."""

from __future__ import annotations

import json

import pytest

import pytest_opid
from pytest_opid.errors import OpidError
from pytest_opid.result import Fingerprint, StateOperator, StateStore
from pytest_opid.spark.restart.widening import as_nullable
from pytest_opid.spark.versions import engine_line, judged_for, parse_line


def _query(kind: str, value: str, version: str | None = "4.3.0") -> Fingerprint:
    key = (
        '{"type":"struct","fields":[{"name":"user","type":"string","nullable":true,"metadata":{}}]}'
    )
    state = StateOperator(0, "op-0", f"{kind}(user)", kind, (StateStore("default", key, value),))
    return Fingerprint(
        operators=(),
        job_vertices=(),
        state_operators=(state,),
        engine="spark",
        sources=(),
        engine_version=version,
    )


def _value(nullable: bool) -> str:
    field = {"name": "n", "type": "long", "nullable": nullable, "metadata": {}}
    return json.dumps({"type": "struct", "fields": [field]})


def test_transform_with_state_judged_for_35_is_one_line_naming_40() -> None:
    tws = _query("transformWithStateInPandasExec", _value(True))
    with judged_for("3.5"), pytest.raises(OpidError) as caught:
        pytest_opid.check_restore(tws, tws)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("transformWithState needs Spark 4.0 or later; this is Spark 3.5")
    with judged_for("4.0"):
        assert pytest_opid.check_restore(tws, tws).restorable


def test_a_fingerprint_from_another_line_says_so_once() -> None:
    """A's fingerprint made on 3.5.9, judged for 4.3: the verdict says which Spark wrote the
    checkpoint as it judges it, once; on the same line it says nothing of the kind."""
    old = _query("stateStoreSave", _value(False), "3.5.9")
    new = _query("stateStoreSave", _value(False), "4.3.0")
    with judged_for("4.3"):
        check = pytest_opid.check_restore(old, new)
    said = [w for w in check.warnings if "made with PySpark 3.5.9" in w.message]
    assert len(said) == 1
    assert "Spark 4.3's" in said[0].message and "written by Spark 3.5" in said[0].message
    with judged_for("3.5"):
        same = pytest_opid.check_restore(old, _query("stateStoreSave", _value(False), "3.5.9"))
    assert not [w for w in same.warnings if "made with PySpark" in w.message]


def test_nullability_is_compared_on_a_line_that_does_not_widen() -> None:
    """Spark 4.0 on its own checkpoint: a field that could not be null may not become
    nullable (4.0 does not widen state schemas); 4.3 widens both sides on its own."""
    old = _query("stateStoreSave", _value(False), "4.0.5")
    new = _query("stateStoreSave", _value(True), "4.0.5")
    with judged_for("4.0"):
        refused = pytest_opid.check_restore(old, new)
    assert not refused.restorable
    assert "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" in refused.problems[0].message
    assert refused.problems[0].message.startswith("Spark 4.0 ")
    old43 = _query("stateStoreSave", _value(False), "4.3.0")
    new43 = _query("stateStoreSave", _value(True), "4.3.0")
    with judged_for("4.3"):
        assert pytest_opid.check_restore(old43, new43).restorable


def test_as_nullable_widens_every_level() -> None:
    inner = {"type": "array", "elementType": "long", "containsNull": False}
    deep: dict[str, object] = {"type": "map", "keyType": "string", "valueType": inner}
    deep["valueContainsNull"] = False
    for _ in range(50):
        deep = {
            "type": "struct",
            "fields": [{"name": "f", "type": deep, "nullable": False, "metadata": {}}],
        }
    text = as_nullable(json.dumps(deep))
    assert text is not None and '"nullable":false' not in text
    assert '"containsNull":false' not in text and '"valueContainsNull":false' not in text
    assert json.loads(text)["fields"][0]["nullable"] is True
    assert as_nullable(None) is None and as_nullable("not json") == "not json"
    # nested deeper than Python's json reads: returned as it is, no traceback
    too_deep = '{"type":"struct","fields":[{"name":"f","type":' * 5000 + '"long"' + "}]}" * 5000
    assert as_nullable(too_deep) == too_deep


def test_lines() -> None:
    assert engine_line("3.5.9") == parse_line("3.5") and engine_line(None) is None
    assert engine_line("garbage") is None
