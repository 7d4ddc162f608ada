"""Two versions of a sessionization job for ``opid demonstrate`` (docs/pyspark-demonstrate.md):
applyInPandasWithState counting a user's events in a session that lasts at most
``SESSION_TIMEOUT`` from its first event. The second version shortens the timeout: the plan,
the state's schema and the function's name stay the same, so Spark restarts it on the first
version's checkpoint, and only running both shows what that does to the sessions in flight.

    opid demonstrate --spark examples.spark.sessions:thirty_minutes \\
        --spark examples.spark.sessions:ten_minutes --seed 41 --examples 8 -- /tmp/opid-sessions
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

SCHEMA = "user STRING, page STRING, ts TIMESTAMP"


def _sessions(spark: Any, folder: str, timeout: timedelta) -> Any:
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    limit = timeout // timedelta(milliseconds=1)

    def sessions(key: Any, pdfs: Any, state: Any) -> Any:
        start, n = state.get if state.exists else (None, 0)
        for pdf in pdfs:
            for ts in sorted(pdf["ts"]):
                ms = int(pd.Timestamp(ts).value // 1_000_000)
                if start is None or ms - start > limit:
                    start, n = ms, 0
                n += 1
        state.update((start, n))
        yield pd.DataFrame({"user": [key[0]], "start_ms": [start], "n": [n]})

    os.makedirs(folder, exist_ok=True)
    events = spark.readStream.schema(SCHEMA).json(folder)
    return (
        events.groupBy("user")
        .applyInPandasWithState(
            sessions,
            "user string, start_ms long, n long",
            "start_ms long, n long",
            "Update",
            GroupStateTimeout.NoTimeout,
        )
        .writeStream.outputMode("update")
    )


def thirty_minutes(spark: Any, folder: str) -> Any:
    return _sessions(spark, folder, timedelta(minutes=30))


def ten_minutes(spark: Any, folder: str) -> Any:
    return _sessions(spark, folder, timedelta(minutes=10))
