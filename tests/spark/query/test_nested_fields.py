"""A struct's field in a grouping key: Spark's plan JSON names the field beside the expression
(GetStructField's ``name``, GetArrayStructFields' ``field``), not as a child, so the key was
written ``getStructField(payload)`` whichever field it was. Now ``payload.user``: grouping by
another field of the same type is a reinterpretation (a real restart of it is in
tests/data/meaning-restart, case grouping_key_struct_field)."""

from __future__ import annotations

from pyspark.sql import functions as F

import pytest_opid

SCHEMA = "payload struct<user: string, session: string>, xs array<struct<a: string, b: string>>"


def _keys(fp):
    (operator,) = fp.state_operators
    return [value for fact, value in operator.meaning if fact.startswith("key")]


def test_a_struct_field_key_names_the_field(spark, tmp_path):
    events = spark.readStream.schema(SCHEMA).json(str(tmp_path))
    by_user = pytest_opid.fingerprint(events.groupBy(F.col("payload.user").alias("g")).count())
    by_session = pytest_opid.fingerprint(
        events.groupBy(F.col("payload.session").alias("g")).count()
    )
    by_b = pytest_opid.fingerprint(events.groupBy(F.col("xs.b").alias("g")).count())
    assert _keys(by_user) == ["payload.user: string"]
    assert _keys(by_session) == ["payload.session: string"]
    assert _keys(by_b) == ["xs.b: array<string>"]
    check = pytest_opid.check_restore(by_user, by_session)
    assert check.restorable and not check.safe  # Spark restarts; the state means another key
    (finding,) = check.reinterpreted
    assert "key 1 was payload.user: string, is now payload.session: string" in finding.message
