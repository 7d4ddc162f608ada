"""``opid demonstrate --spark A --spark B``: :func:`demonstrate` on two queries from the team's
own code, outside pytest.

Each function is imported and called as ``function(session, *args)``, each in a session of its
own (``SparkSession.newSession()`` of one local session: a setting one version sets does not
reach the other), and returns a streaming DataFrame or ``DataStreamWriter`` (its output mode
is used). Spark's log stays at ERROR; its start-up messages are kept off the terminal.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.spark.demonstration import Demonstration, demonstrate
from pytest_opid.spark.query.program import (
    BASE_CONF,
    call_function,
    local_session,
    resolve_function,
    set_sql_conf,
)

#: Two cores: a demonstration runs two queries at a time (the restarted or previous query
#: beside the one from scratch).
DEMONSTRATE_CONF = {**BASE_CONF, "spark.master": "local[2]", "spark.app.name": "opid-demonstrate"}


def demonstrate_functions(
    previous: str,
    new: str,
    args: Sequence[str] = (),
    conf: dict[str, str] | None = None,
    **knobs: Any,
) -> Demonstration:
    """Call both ``module:function`` targets in a local session with ``conf`` and demonstrate
    the restart from the first's query to the second's."""
    _check_installed()
    functions = [resolve_function(previous), resolve_function(new)]
    from pyspark import cloudpickle

    for function in functions:
        # Spark's Python workers do not see the current folder this process imported the
        # module from: the module's functions (a UDF, an applyInPandasWithState function)
        # travel by value
        module = sys.modules.get(getattr(function, "__module__", "") or "")
        if module is not None and module.__name__ != "__main__":
            cloudpickle.register_pickle_by_value(module)
    spark, created = local_session({**DEMONSTRATE_CONF, **(conf or {})})
    try:
        spark.sparkContext.setLogLevel("OFF")
        queries = []
        for target, function in zip((previous, new), functions, strict=True):
            session = spark.newSession()
            set_sql_conf(
                session, {k: v for k, v in (conf or {}).items() if k.startswith("spark.sql.")}
            )
            queries.append(call_function(target, function, session, args))
        return demonstrate(queries[0], queries[1], **knobs)
    finally:
        with contextlib.suppress(Exception):
            if created:
                spark.stop()
            else:
                spark.sparkContext.setLogLevel("WARN")


def _check_installed() -> None:
    """PySpark runs the queries and Hypothesis draws their rows: either missing is one line
    naming the extra that brings it (both come with ``spark``), before any Spark starts."""
    for module, what in (("pyspark", "PySpark (and Java 17)"), ("hypothesis", "Hypothesis")):
        try:
            importlib.import_module(module)
        except ImportError:
            raise DocumentError(
                f"opid demonstrate needs {what}, which is not installed: "
                "pip install -e '.[spark]' in the clone (or pytest-opid[spark])"
            ) from None
