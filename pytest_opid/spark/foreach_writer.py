"""The user's writer inside the function PySpark hands Spark for ``writeStream.foreach``.

``DataStreamWriter.foreach`` (classic PySpark, 3.5 and 4.x) does not pickle the user's
function or writer object itself: it wraps it in a function of its own,
``func_without_process`` for a function of a row, ``func_with_open_process_close`` for an
object with ``process`` (and optional ``open`` and ``close``), which holds the user's writer in
its closure as ``f``, and pickles that wrapper into ``PythonForeachWriter``'s
``PythonFunction``. A digest of the wrapper is a digest of PySpark's code, the same for every
writer; the digest of a foreach sink is the digest of what the wrapper holds."""

from __future__ import annotations

from typing import Any

#: The module and names of PySpark's foreach wrappers (``DataStreamWriter.foreach``).
WRAPPER_MODULE = "pyspark.sql.streaming.readwriter"
WRAPPERS = frozenset({"func_without_process", "func_with_open_process_close"})


def user_writer(func: Any) -> Any:
    """The user's function or writer object a PySpark foreach wrapper holds; ``func`` itself
    where it is not such a wrapper."""
    code = getattr(func, "__code__", None)
    closure = getattr(func, "__closure__", None)
    if (
        code is None
        or closure is None
        or getattr(func, "__module__", None) != WRAPPER_MODULE
        or code.co_name not in WRAPPERS
        or "f" not in code.co_freevars
    ):
        return func
    cell = closure[code.co_freevars.index("f")]
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell: nothing was wrapped
        return func
