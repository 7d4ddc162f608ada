"""``opid fingerprint --spark module:function``: the fingerprint of a query from the team's own
code, outside pytest.

The function is imported (the current directory comes first on ``sys.path``, as with
``python -m``) and called with a local SparkSession and the command's program arguments
(``function(spark, *args)``); it returns a DataFrame, a streaming DataFrame or a
``StreamingQuery``, which is fingerprinted without running it. The session is built with the
settings given as ``--conf KEY=VALUE``: a streaming query's state layout depends on session
settings such as ``spark.sql.shuffle.partitions``, so give production's. Spark's start-up
messages on stderr are kept out of the command's output; when Spark cannot start, the last of
them is the error line.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.inputs import fingerprint
from pytest_opid.result import Fingerprint

#: The session's settings unless ``--conf`` says otherwise: a small local session, adaptive
#: execution off (the plan fingerprinted is the static one), no UI, and the ``spark`` fixture's
#: shuffle partitions (pytest_opid.plugin.spark.SPARK_CONF, held equal by a test), so that a
#: fingerprint made here compares with a test's snapshot without a changed-setting note; give
#: production's with ``--conf`` to compare with production's checkpoint. Every other setting is
#: Spark's default.
BASE_CONF: dict[str, str] = {
    "spark.master": "local[1]",
    "spark.app.name": "opid-fingerprint",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}


def parse_conf(items: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` settings, in order (a later one wins)."""
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise DocumentError(f"--conf {item!r}: expected KEY=VALUE")
        conf[key.strip()] = value
    return conf


def resolve_function(target: str) -> Callable[..., Any]:
    """The function ``module:function`` names (``package.module:name``, ``name`` may be
    dotted: ``module:Class.method``)."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise DocumentError(f"--spark {target!r}: expected MODULE:FUNCTION, e.g. jobs:page_views")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise DocumentError(f"--spark {target}: cannot import {module_name}: {exc}") from None
    except (Exception, SystemExit) as exc:  # the module's own code failed or exited: one line
        raise DocumentError(
            f"--spark {target}: importing {module_name} failed: {_failure(exc)}"
        ) from None
    for name in attribute.split("."):
        if not hasattr(value, name):
            raise DocumentError(f"--spark {target}: {module_name} has no {attribute}")
        value = getattr(value, name)
    if not callable(value):
        raise DocumentError(f"--spark {target}: {attribute} is not a function")
    return value  # type: ignore[no-any-return]


def fingerprint_function(
    target: str, args: Sequence[str] = (), conf: dict[str, str] | None = None
) -> Fingerprint:
    """Call ``target`` (``module:function``) as ``function(spark, *args)`` in a local session
    with ``conf`` and fingerprint what it returns."""
    with called_function(target, args, conf) as program:
        try:
            return fingerprint(program)
        except TypeError as exc:  # not a DataFrame or query: what fingerprint() takes, in words
            raise DocumentError(f"--spark {target}: the function's result: {exc}") from None


@contextlib.contextmanager
def called_function(
    target: str, args: Sequence[str] = (), conf: dict[str, str] | None = None
) -> Iterator[Any]:
    """What ``target`` (``module:function``) returns, called as ``function(spark, *args)`` in
    a local session with ``conf``, for the ``with`` block (a restart check plans it there with
    the settings a checkpoint pins); the session is stopped, or its settings put back, after."""
    function = resolve_function(target)
    settings = {**BASE_CONF, **(conf or {})}
    spark, created = _session(settings)
    # A session already running in this process (a test's) is reused: the SQL settings are
    # set for the call and put back after it.
    sql = {key: value for key, value in settings.items() if key.startswith("spark.sql.")}
    before = {} if created else {key: spark.conf.get(key, None) for key in sql}
    try:
        set_sql_conf(spark, sql)
        yield call_function(target, function, spark, args)
    finally:
        with contextlib.suppress(Exception):
            if created:
                spark.stop()
            else:
                for key, value in before.items():
                    if value is None:
                        spark.conf.unset(key)
                    else:
                        spark.conf.set(key, value)


def call_function(
    target: str, function: Callable[..., Any], spark: Any, args: Sequence[str]
) -> Any:
    """``function(spark, *args)``, the user's code: what it returns. What it prints goes to
    stderr (stdout holds opid's output alone); an exception or an exit (``sys.exit``, or
    argparse's ``--help`` or usage error in it) is one line, never opid's own exit status: a
    function that exits has returned no query to judge. Ctrl-C still ends opid."""
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return function(spark, *args)
    except (Exception, SystemExit) as exc:
        raise DocumentError(f"--spark {target}: the function failed: {_failure(exc)}") from None


def set_sql_conf(spark: Any, sql: dict[str, str]) -> None:
    """Set the ``spark.sql.*`` settings on ``spark``; a value Spark refuses (``--conf
    spark.sql.shuffle.partitions=abc``) is one line naming it. A session built with such a value
    refuses its first settings access, so that access is checked too."""
    try:
        conf = spark.conf
    except Exception as exc:
        said = _first_line(str(exc))
        if not any(key in said for key in sql):  # Spark 3.5 names the builder, not the setting
            said += " (one of: " + ", ".join(f"{k}={v}" for k, v in sql.items()) + ")"
        raise DocumentError(f"--conf: Spark refuses a setting: {said}") from None
    for key, value in sql.items():
        try:
            conf.set(key, value)
        except Exception as exc:
            raise DocumentError(
                f"--conf {key}={value}: Spark refuses it: {_first_line(str(exc))}"
            ) from None


def _failure(exc: BaseException) -> str:
    """An exception of the user's code in words: ``sys.exit(0)`` is said as an exit."""
    if isinstance(exc, SystemExit):
        return f"it exited (SystemExit: {exc.code!r}) instead of returning a query"
    return f"{type(exc).__name__}: {_first_line(str(exc))}"


def local_session(settings: dict[str, str]) -> tuple[Any, bool]:
    """A session with ``settings`` (the running one, if any, else a new local one, Spark's
    start-up noise kept off the terminal) and whether it was started here."""
    return _session(settings)


def _session(settings: dict[str, str]) -> tuple[Any, bool]:
    """The session to call the function with, and whether it was started here."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise DocumentError(
            "--spark needs PySpark (and Java 17): pip install -e '.[spark]' in the clone"
        ) from None
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    # A SQL setting of the caller's is set on the session after it starts (set_sql_conf, which
    # names a value Spark refuses in one line): built into it, a bad value breaks the session's
    # state, and PySpark 4.1 then loops converting the errors of every later call. A static one
    # (SQLConf.isStaticConfigKey) can only be given at the start: the session is built again.
    held = {
        k: v for k, v in settings.items() if k.startswith("spark.sql.") and BASE_CONF.get(k) != v
    }
    session = _built({k: v for k, v in settings.items() if k not in held})
    static = {k: v for k, v in held.items() if _is_static(session, k)}
    if static:
        session.stop()
        session = _built({k: v for k, v in settings.items() if k not in held or k in static})
    return session, True


def _is_static(session: Any, key: str) -> bool:
    try:
        return bool(session._jvm.org.apache.spark.sql.internal.SQLConf.isStaticConfigKey(key))
    except Exception:  # a JVM without the check: given at the start, as before
        return True


def _built(settings: dict[str, str]) -> Any:
    """A new local session with ``settings``, Spark's start-up noise kept off the terminal."""
    from pyspark.sql import SparkSession  # lazy: pyspark is an optional extra

    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    with _quiet_stderr() as said:
        try:
            session = builder.getOrCreate()
            session.sparkContext.setLogLevel("ERROR")
        except Exception as exc:
            last = next((line for line in reversed(said()) if line.strip()), "")
            raise DocumentError(
                f"--spark: Spark did not start: {_first_line(str(exc))}"
                + (f" ({last.strip()})" if last and last.strip() not in str(exc) else "")
            ) from None
    return session


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[Callable[[], list[str]]]:
    """File descriptor 2 goes to a temporary file while Spark's JVM starts (the JVM keeps it:
    its log lines never reach the terminal); yields a function returning what was written."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield list
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield lambda: _tail(sink)
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _tail(sink: Any) -> list[str]:
    sink.seek(0)
    return list(sink.read()[-4096:].decode("utf-8", "replace").splitlines())


def first_line(text: str) -> str:
    return _first_line(text)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
