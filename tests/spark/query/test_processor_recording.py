"""spark.transform_with_state without a JVM: what a recording handle learns from a processor's
init(), what it refuses, and the meaning facts read from the column families Spark writes."""

from __future__ import annotations

import contextlib
import json
import socket
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from pytest_opid.result import UNKNOWN, StateStore
from pytest_opid.spark.state_variables import ddl, user_variables
from pytest_opid.spark.transform_with_state import (
    ProcessorRecord,
    StateCall,
    record_processor,
    transform_with_state_meaning,
)
from pytest_opid.spark.vocabulary import PROPERTIES_STORE

COUNT = StructType([StructField("c", LongType())])


class Declares:
    def __init__(self, body: Any) -> None:
        self.body = body

    def init(self, handle: Any) -> None:
        self.body(handle)


def test_the_pseudo_store_name_is_plans() -> None:
    assert PROPERTIES_STORE == PROPERTIES_STORE


def test_every_kind_of_declaration_is_recorded_in_order() -> None:
    def body(handle: Any) -> None:
        handle.getValueState("cnt", COUNT)
        handle.getListState("seen", "id LONG, ts TIMESTAMP", ttlDurationMs=60_000)
        handle.getMapState("per", StructType([StructField("k", StringType())]), "n INT")
        handle.deleteIfExists("old")

    record = record_processor(Declares(body))
    assert record.reason is None
    assert record.processor_class == "tests.spark.query.test_processor_recording.Declares"
    assert record.calls == (
        StateCall("getValueState", "cnt", COUNT.json(), True),
        StateCall("getListState", "seen", "id LONG, ts TIMESTAMP", False, ttl_ms=60_000),
        StateCall(
            "getMapState",
            "per",
            "n INT",
            False,
            StructType([StructField("k", StringType())]).json(),
            True,
        ),
        StateCall("deleteIfExists", "old"),
    )
    assert record.ttl == {"cnt": None, "seen": 60_000, "per": None}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (lambda h: h.registerTimer(1), "registers a timer"),
        (lambda h: h.getValueState("cnt", COUNT).get(), "uses the ValueState 'cnt' (get)"),
        (lambda h: h.getValueState("cnt", IntegerType()), "gives a state schema as a"),
        (lambda h: h.getValueState("cnt", COUNT, ttlDurationMs="1h"), "ttlDurationMs as a str"),
        (lambda h: h.getQueryInfo(), "calls handle.getQueryInfo"),
        (lambda h: 1 / 0, "raised ZeroDivisionError"),
        (lambda h: (h.getValueState("a", COUNT), h.getListState("a", COUNT)), "'a' twice"),
    ],
)
def test_what_cannot_be_recorded_says_why(body: Any, reason: str) -> None:
    record = record_processor(Declares(body))
    assert record.calls is None
    assert record.reason is not None and reason in record.reason
    assert record.reason.startswith(
        "could not inspect tests.spark.query.test_processor_recording.Declares: its init()"
    )


def test_an_init_that_reads_a_file_is_not_recorded(tmp_path: Path) -> None:
    config = tmp_path / "variables.json"
    config.write_text('["cnt"]')

    def body(handle: Any) -> None:
        for name in json.loads(config.read_text()):
            handle.getValueState(name, COUNT)

    record = record_processor(Declares(body))
    assert record.calls is None
    assert f"opens the file '{config}'" in (record.reason or "")
    # outside the recording, files open as usual
    assert json.loads(config.read_text()) == ["cnt"]


def test_an_init_that_swallows_the_refusal_is_still_not_recorded() -> None:
    def body(handle: Any) -> None:
        with contextlib.suppress(Exception):  # the processor carries on without its service
            socket.create_connection(("127.0.0.1", 9), timeout=0.1)
        handle.getValueState("cnt", COUNT)

    record = record_processor(Declares(body))
    assert record.calls is None
    assert "its init() looks up a host name" in (record.reason or "")


def _schema(*fields: tuple[str, Any]) -> str:
    return json.dumps(
        {
            "type": "struct",
            "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields],
        }
    )


# The column families Spark 4.3 wrote for a ValueState with TTL, a MapState and its timers
# (tests/data/tws-restart: transform_with_state_pandas__add_ttl, __value_to_map).
KEY = _schema(("user", "string"))
STORES = (
    StateStore(
        "default/$ttl_cnt", _schema(("expirationMs", "long")), _schema(("__empty__", "void"))
    ),
    StateStore(
        "default/cnt",
        KEY,
        _schema(("value", json.loads(_schema(("c", "long")))), ("ttlExpirationMs", "long")),
    ),
    StateStore(
        "default/per",
        _schema(("key", json.loads(KEY)), ("userKey", json.loads(_schema(("uk", "string"))))),
        _schema(("n", "integer"), ("odd name", "double")),
    ),
    StateStore(
        PROPERTIES_STORE,
        None,
        json.dumps(
            {
                "timeMode": "ProcessingTime",
                "outputMode": "Update",
                "stateVariables": [
                    {"stateName": "cnt", "stateVariableType": "ValueState", "ttlEnabled": True},
                    {"stateName": "per", "stateVariableType": "MapState", "ttlEnabled": False},
                    {
                        "stateName": "$procTimers_keyToTimestamp",
                        "stateVariableType": "TimerState",
                        "ttlEnabled": False,
                    },
                ],
            }
        ),
    ),
)


def test_user_variables_leave_out_timers_and_unwrap_ttl() -> None:
    found = user_variables(STORES)
    assert list(found) == ["cnt", "per"]
    assert found["cnt"]["value"] == json.loads(_schema(("c", "long")))
    assert found["per"]["key"] == json.loads(_schema(("uk", "string")))


def test_meaning_facts() -> None:
    record = ProcessorRecord(
        "Counter", (StateCall("getValueState", "cnt", "c LONG", False, ttl_ms=5000),)
    )
    assert transform_with_state_meaning(STORES, record) == (
        ("processor", "Counter"),
        ("time mode", "ProcessingTime"),
        ("output mode", "Update"),
        ("state variable cnt", "ValueState<c BIGINT>, TTL 5000 ms"),
        ("state variable per", "MapState<uk STRING; n INT,`odd name` DOUBLE>, no TTL"),
    )


def test_meaning_without_stores_says_why() -> None:
    record = ProcessorRecord("Counter", None, "could not inspect Counter: its init() lists timers")
    assert transform_with_state_meaning((), record) == (
        ("processor", "Counter"),
        ("time mode", UNKNOWN),
        ("output mode", UNKNOWN),
        ("state variables", UNKNOWN),
        ("could not inspect", "could not inspect Counter: its init() lists timers"),
    )


def test_ddl_is_sparks() -> None:
    nested = {
        "type": "struct",
        "fields": [
            {"name": "a", "type": "long", "nullable": False, "metadata": {}},
            {
                "name": "b",
                "type": {"type": "array", "elementType": "string", "containsNull": True},
                "nullable": True,
                "metadata": {},
            },
            {
                "name": "c",
                "type": {
                    "type": "map",
                    "keyType": "string",
                    "valueType": "integer",
                    "valueContainsNull": True,
                },
                "nullable": True,
                "metadata": {},
            },
            {"name": "d", "type": "decimal(10,2)", "nullable": True, "metadata": {}},
        ],
    }
    assert ddl(nested) == "a BIGINT NOT NULL,b ARRAY<STRING>,c MAP<STRING, INT>,d DECIMAL(10,2)"
    assert ddl("not json") == UNKNOWN
