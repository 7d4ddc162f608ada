"""Spark Connect: a Connect DataFrame or StreamingQuery as the classic one its server runs.

A Connect client holds no plan Spark can fingerprint: only an unresolved plan (a protobuf
``Relation``, ``df._plan.plan(client)``), the output schema and explain text. The server turns
that relation into a classic Dataset with ``SparkConnectPlanner.transformRelation`` in the
client's server-side session (a ``SessionHolder``); this module asks the same planner to do the
same, so the Dataset read is the one the server would run:

- the server in this process (``SparkSession.builder.remote("local[...]")``, the
  ``spark_connect`` fixture, or any Connect service started in this process's JVM): the plan is
  replayed in the client's own server-side session, so its temp views, session confs and
  registered UDFs resolve exactly as the user's query sees them. A StreamingQuery is the
  server's own query object (the Connect service keeps stopped ones for an hour);
- a remote server (``sc://host``): replayed in a fresh session of this process's classic Spark,
  with the remote session's SQL confs, only where nothing it reads is named in a catalog (a
  table or view means the remote's catalog) and the schema it resolves to locally is the one
  the server reported; the fingerprint then says "replayed locally" and which Spark it speaks
  for. Anything else is refused in one line saying why and what to do.

``SparkConnectPlanner`` and ``SessionHolder`` are Spark internals: a plan is only read by the
planner of the Spark version that wrote it, so the client's PySpark and the JVM's Spark must be
one version (one error otherwise). Replay needs Spark 4 (3.5's Connect server has another
internal API and no transformWithState); on 3.5 a Connect object is refused naming the version.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from pytest_opid.errors import OpidError
from pytest_opid.spark.query.connect_deadline import (
    TIMEOUT_VARIABLE,
    bounded_calls,
    connect_timeout,
    current_limit,
)
from pytest_opid.spark.query.connect_settings import copied_setting

_CONNECT = "pyspark.sql.connect"


_SERVICE = "org.apache.spark.sql.connect.service.SparkConnectService$"


_WHAT_TO_DO = (
    "run the marked tests with a Spark Connect server in the test process "
    '(SparkSession.builder.remote("local[2]") or the spark_connect fixture) or with a classic '
    "SparkSession; on Databricks, keep a separate test environment with pyspark installed"
)


class ConnectReplay(NamedTuple):
    """A Connect object's classic twin: the PySpark DataFrame or StreamingQuery that the
    fingerprint reads, and where it was not the server's own, a note saying so."""

    obj: Any
    note: str | None = None


def is_connect(obj: Any) -> bool:
    """Whether ``obj`` is a Spark Connect DataFrame or StreamingQuery (by its module: the
    Connect client may be installed without the classic classes)."""
    return (type(obj).__module__ or "").startswith(_CONNECT)


def replay(obj: Any) -> ConnectReplay:
    """The classic DataFrame or StreamingQuery that ``obj``, a Connect one, stands for. Every
    request to its server gives up within :func:`connect_timeout` seconds in all (PySpark's
    client retries an unreachable server for about ten minutes and waits for a silent one for
    ever); the refusal then names the server."""
    name = f"{type(obj).__module__}.{type(obj).__qualname__}"
    client = _client_of(obj, name)
    with bounded_calls(client, connect_timeout()):
        return _replay(obj, name, client)


def _replay(obj: Any, name: str, client: Any) -> ConnectReplay:
    version = _client_version()
    if int(version.split(".")[0]) < 4:
        raise OpidError(
            f"pytest_opid reads Spark Connect objects on Spark 4 and later; this is PySpark "
            f"{version}, whose Connect server has another planner API: fingerprint the query "
            'with a classic SparkSession (SparkSession.builder.master("local[2]")) instead'
        )
    sc = _local_context()
    if sc is not None:
        _check_versions(version, str(sc.version))
        holder = _own_session(sc, client)
        if holder is None and _serving(sc):
            # The server makes a client's session at its first request, and building a
            # DataFrame sends none: ask it for its version, then look again.
            _ping(obj, name, _address(client))
            holder = _own_session(sc, client)
        if holder is not None:
            if _is_query(obj):
                return ConnectReplay(_server_query(sc, holder, obj, name))
            return ConnectReplay(_in_session(sc, holder, obj))
    return _replay_locally(obj)


def _session_of(obj: Any) -> Any:
    """The Connect session of a DataFrame (``sparkSession``) or a StreamingQuery, which has
    no ``sparkSession`` but keeps its session as ``_session``."""
    if _is_query(obj):
        return getattr(obj, "_session", None)
    return getattr(obj, "sparkSession", None)


def _client_of(obj: Any, name: str) -> Any:
    client = getattr(_session_of(obj), "client", None)
    if client is None or not hasattr(client, "_session_id"):
        raise TypeError(
            f"pytest_opid.spark accepts a Spark Connect DataFrame or StreamingQuery; got {name}, "
            "which has no Connect session"
        )
    return client


def _client_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def _address(client: Any) -> str:
    url = getattr(getattr(client, "_builder", None), "url", None)
    host = getattr(url, "hostname", None) or "?"
    port = getattr(url, "port", None)
    return f"sc://{host}" + (f":{port}" if port else "")


def _is_query(obj: Any) -> bool:
    # By class: a Connect DataFrame answers any attribute with a Column.
    return type(obj).__name__ == "StreamingQuery"


def _relation_bytes(obj: Any) -> bytes:
    """The DataFrame's unresolved plan as the client would send it (``Relation`` protobuf)."""
    session = obj.sparkSession
    return bytes(obj._plan.plan(session.client).SerializeToString())


def _local_context() -> Any:
    """This process's classic SparkContext, or ``None`` (none started; or PySpark installed as
    the Connect-only pyspark-client, which has no JVM side at all)."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return None
    sc = SparkContext._active_spark_context
    if sc is None or getattr(sc, "_jsc", None) is None:
        return None
    return sc


def _check_versions(client: str, jvm: str) -> None:
    if client != jvm:
        raise OpidError(
            f"cannot replay a Spark Connect plan: the client is PySpark {client} but this "
            f"process's JVM runs Spark {jvm}, and Spark's Connect planner reads only its own "
            "version's plans; install pyspark=={jvm} (or point SPARK_HOME at Spark {client})"
        )


def _service(sc: Any) -> Any:
    return getattr(getattr(sc._jvm, _SERVICE), "MODULE$")


def _serving(sc: Any) -> bool:
    """Whether a Spark Connect service runs in this process's JVM."""
    try:
        service = _service(sc)
        return bool(service.started()) and not service.stopped()
    except Exception:  # no Connect classes on the class path
        return False


def _ping(obj: Any, name: str, where: str) -> str:
    """The server's Spark version (one request, which also makes the client's session)."""
    try:
        return str(_session_of(obj).version)
    except Exception as error:
        raise _no_answer(name, where, error) from None


def _no_answer(name: str, where: str, error: Exception) -> OpidError:
    """One line naming the server that did not answer: within the time limit, or how not."""
    import time

    limit = current_limit()
    if limit is not None and time.monotonic() >= limit[0]:
        how = f"within {limit[1]:g} s ({TIMEOUT_VARIABLE} sets the limit)"
    else:
        how = f"({type(error).__name__}: {_first_line(error)})"
    return OpidError(
        f"cannot fingerprint {name}: the Spark Connect server at {where} did not answer {how}; "
        + _WHAT_TO_DO
    )


def _own_session(sc: Any, client: Any) -> Any:
    """The client's server-side session (a ``SessionHolder``) where the Connect service runs in
    this JVM and holds it, else ``None``. Session ids are random UUIDs, so finding the client's
    id here means the client talks to this process's server."""
    jvm = sc._jvm
    if not _serving(sc):
        return None
    try:
        service = _service(sc)
        # The server files a client without a user under the empty user id.
        key = jvm.org.apache.spark.sql.connect.service.SessionKey(
            client._user_id or "", client._session_id
        )
        found = service.sessionManager().getIsolatedSessionIfPresent(key)
    except Exception:  # no Connect classes on the class path: not this process's server
        return None
    return found.get() if found.isDefined() else None


def _planned(sc: Any, holder: Any, relation: bytes) -> Any:
    """The JVM Dataset of ``relation`` as the Connect server makes it in ``holder``'s session
    (``SparkConnectPlanner.transformRelation``, then ``Dataset.ofRows``, which analyzes it)."""
    jvm = sc._jvm
    proto = jvm.org.apache.spark.connect.proto.Relation.parseFrom(relation)
    planner = jvm.org.apache.spark.sql.connect.planner.SparkConnectPlanner(
        holder, jvm.scala.Option.empty()
    )
    logical = planner.transformRelation(proto)
    return getattr(jvm, "org.apache.spark.sql.classic.Dataset").ofRows(holder.session(), logical)


def _classic_frame(sc: Any, jsession: Any, jdf: Any) -> Any:
    """A classic PySpark DataFrame over a JVM Dataset of ``jsession``. Wrapping the session
    leaves PySpark's active and default sessions as they were."""
    from pyspark.sql import SparkSession
    from pyspark.sql.classic.dataframe import DataFrame

    return DataFrame(jdf, SparkSession(sc, jsession))


def _in_session(sc: Any, holder: Any, obj: Any) -> Any:
    return _classic_frame(sc, holder.session(), _planned(sc, holder, _relation_bytes(obj)))


def _server_query(sc: Any, holder: Any, obj: Any, name: str) -> Any:
    """The server's own StreamingQuery of a Connect one: the Connect service's cache keeps it
    (running or stopped, for an hour after), else the session's active queries."""
    from pyspark.sql.streaming import StreamingQuery

    cached = _service(sc).streamingSessionManager().getCachedValue(obj._query_id, obj._run_id)
    jquery = cached.get().query() if cached.isDefined() else None
    if jquery is None:
        jquery = holder.session().streams().get(obj._query_id)
    if jquery is None:
        raise OpidError(
            f"cannot fingerprint {name}: its server (in this process) no longer knows query "
            f"{obj._query_id} (run {obj._run_id}); fingerprint it while it runs or soon after "
            "it stops"
        )
    return StreamingQuery(jquery)


def replay_locally(obj: Any) -> ConnectReplay:
    """A Connect DataFrame of a server outside this process, replayed in a fresh session of
    this process's classic Spark: no temp views, functions or confs of its own, the remote
    session's SQL confs that decide a plan copied (:func:`copied_setting`). Only where the plan
    names no table or view (they live in the remote's catalog) and resolves to the schema the
    server reported; the note says "replayed locally" and for which Spark version. Requests to
    the server give up as :func:`replay`'s do."""
    name = f"{type(obj).__module__}.{type(obj).__qualname__}"
    client = _client_of(obj, name)
    with bounded_calls(client, connect_timeout()):
        return _replay_locally(obj)


def _replay_locally(obj: Any) -> ConnectReplay:
    from pyspark.sql import SparkSession

    name = f"{type(obj).__module__}.{type(obj).__qualname__}"
    client = _client_of(obj, name)
    where = _address(client)
    sc = _local_context()
    if _is_query(obj):
        raise OpidError(
            f"cannot fingerprint {name}: it runs on the Spark Connect server at {where}, "
            "outside this process, and a Connect client holds no plan of a started query; "
            "fingerprint the streaming DataFrame before .writeStream, or " + _WHAT_TO_DO
        )
    if sc is None:
        raise OpidError(
            f"cannot fingerprint {name}: its plan resolves on the Spark Connect server at "
            f"{where}, outside this process, and there is no local Spark (no active classic "
            f"SparkContext, or the Connect-only pyspark-client package) to replay it in; "
            + _WHAT_TO_DO
        )
    _check_versions(_client_version(), str(sc.version))
    jvm = sc._jvm
    base = SparkSession._instantiatedSession or SparkSession.getActiveSession()
    jbase = base._jsparkSession if base is not None else None
    if jbase is None:
        raise OpidError(
            f"cannot fingerprint {name}: its plan resolves on the Spark Connect server at "
            f"{where} and this process has no classic SparkSession to replay it in; " + _WHAT_TO_DO
        )
    jsession = jbase.newSession()
    remote_version = _ping(obj, name, where)
    try:
        remote_confs = dict(_session_of(obj).conf.getAll)
    except Exception as error:
        raise _no_answer(name, where, error) from None
    conf = jsession.conf()
    for key in sorted(remote_confs):
        if copied_setting(key) and conf.isModifiable(key):
            conf.set(key, remote_confs[key])
    holder = jvm.org.apache.spark.sql.connect.service.SessionHolder(
        client._user_id or "", client._session_id, jsession
    )
    relation = _relation_bytes(obj)
    proto = jvm.org.apache.spark.connect.proto.Relation.parseFrom(relation)
    planner = jvm.org.apache.spark.sql.connect.planner.SparkConnectPlanner(
        holder, jvm.scala.Option.empty()
    )
    try:
        with _quiet_analysis():
            logical = planner.transformRelation(proto)
    except Exception as error:
        raise _unresolved(obj, name, where, error) from None
    named = _catalog_names(logical.treeString())
    if named:
        raise OpidError(
            f"cannot fingerprint {name} locally: it reads {', '.join(named)} from the catalog of "
            f"the Spark Connect server at {where}, which this process cannot see; " + _WHAT_TO_DO
        )
    try:
        with _quiet_analysis():
            jdf = getattr(jvm, "org.apache.spark.sql.classic.Dataset").ofRows(jsession, logical)
    except Exception as error:
        raise _unresolved(obj, name, where, error) from None
    local_schema = str(jdf.schema().json())
    remote_schema, remote_error = _remote_schema(obj)
    if remote_schema is None:
        raise _broken_remotely(name, where, remote_error)
    if _schema(local_schema) != _schema(remote_schema):
        raise OpidError(
            f"cannot fingerprint {name} locally: its plan resolves to another schema here than "
            f"on the Spark Connect server at {where} (it reads data that differs between the "
            "two); " + _WHAT_TO_DO
        )
    local_version = str(sc.version)
    note = f"replayed locally on Spark {local_version}: the plan of a Spark Connect DataFrame"
    note += f" of the server at {where}"
    if remote_version != local_version:
        note += f" (Spark {remote_version}), whose restarts this verdict does not speak for"
    return ConnectReplay(_classic_frame(sc, jsession, jdf), note)


#: PySpark's loggers that print an analysis error, traceback and all, when it is raised: the
#: replay's own errors become one line (``_unresolved``) instead.
_ANALYSIS_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


@contextmanager
def _quiet_analysis() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in _ANALYSIS_LOGGERS]
    before = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, was in zip(loggers, before, strict=True):
            logger.disabled = was


def _remote_schema(obj: Any) -> tuple[str | None, Exception | None]:
    """The schema the server resolves ``obj`` to (as JSON), or the error it answered with."""
    try:
        with _quiet_analysis():
            return str(obj.schema.json()), None
    except Exception as error:
        return None, error


def _broken_remotely(name: str, where: str, error: Exception | None) -> OpidError:
    import time

    limit = current_limit()
    if error is not None and limit is not None and time.monotonic() >= limit[0]:
        return _no_answer(name, where, error)  # the server did not answer in time
    return OpidError(
        f"cannot fingerprint {name}: its plan does not resolve on the Spark Connect server at "
        f"{where} either ({_first_line(error) if error else 'no schema'}): the query itself "
        "is at fault, not where it is read"
    )


def _unresolved(obj: Any, name: str, where: str, error: Exception) -> OpidError:
    """Why a remote plan that fails here cannot be read here, in Spark's own terms: a view or
    table of the server's catalog, a function of the server's session, or (the server resolving
    it alike) another failure; where the server fails on it too, the query is at fault."""
    remote_schema, remote_error = _remote_schema(obj)
    if remote_schema is None:
        return _broken_remotely(name, where, remote_error)
    condition, parameters = _condition(error)
    if condition == "TABLE_OR_VIEW_NOT_FOUND" and parameters.get("relationName"):
        return OpidError(
            f"cannot fingerprint {name} locally: it reads {_unquoted(parameters['relationName'])}"
            f" from the catalog of the Spark Connect server at {where}, which this process "
            "cannot see; " + _WHAT_TO_DO
        )
    if condition == "UNRESOLVED_ROUTINE" and parameters.get("routineName"):
        return OpidError(
            f"cannot fingerprint {name} locally: it calls {_unquoted(parameters['routineName'])},"
            f" a function registered only in the session of the Spark Connect server at {where} "
            "(spark.udf.register there), which this process cannot see; " + _WHAT_TO_DO
        )
    return OpidError(
        f"cannot fingerprint {name} locally: its plan does not resolve in this process "
        f"({_first_line(error)}), only on the Spark Connect server at {where}; " + _WHAT_TO_DO
    )


def _condition(error: Exception) -> tuple[str | None, dict[str, str]]:
    """Spark's error condition and its message parameters, from PySpark's converted exception
    or the JVM's ``SparkThrowable`` behind a py4j error."""
    sources: tuple[Any, ...] = (error, getattr(error, "java_exception", None))
    for source in sources:
        get = getattr(source, "getCondition", None)
        if source is None or get is None:
            continue
        try:
            condition = get()
            parameters = source.getMessageParameters() or {}
            return (str(condition) if condition else None), {
                str(k): str(v) for k, v in dict(parameters).items()
            }
        except Exception:  # not a SparkThrowable after all
            continue
    return None, {}


def _unquoted(identifier: str) -> str:
    """``a`.`b`` as Spark quotes it in a message, as ``a.b``."""
    return ".".join(part.strip("`") for part in identifier.split("`.`"))


def _first_line(error: Exception) -> str:
    text = str(getattr(error, "java_exception", None) or error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


def _catalog_names(tree: str) -> list[str]:
    """Names the unresolved plan looks up in a catalog (Spark's ``'UnresolvedRelation [n]``
    lines, subqueries' included), as ``a.b``."""
    names: list[str] = []
    for line in tree.splitlines():
        start = line.find("UnresolvedRelation [")
        if start < 0:
            continue
        inner = line[start + len("UnresolvedRelation [") :]
        parts = inner.split("]", 1)[0]
        label = ".".join(part.strip() for part in parts.split(","))
        if label not in names:
            names.append(label)
    return names


def _schema(text: str) -> Any:
    """A schema's JSON with field metadata left out (Connect and classic may differ there)."""
    import json

    def strip(node: Any) -> Any:
        # Plain loop over an explicit stack: no recursion over nested types.
        stack = [node]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                item.pop("metadata", None)
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
        return node

    return strip(json.loads(text))


class LocalServer(NamedTuple):
    """A Spark Connect service running in this process's JVM: its loopback address and token,
    and whether :func:`serve` started it (and :func:`stop_serving` should stop it)."""

    url: str
    started_here: bool


def serve(session: Any) -> LocalServer:
    """Serve Spark Connect from the JVM of the classic ``session``, on an ephemeral loopback
    port with a random token, so that Connect clients and classic code share one JVM. A service
    already running there (``spark.plugins`` with ``SparkConnectPlugin``, or
    ``builder.remote("local[...]")``) is reused."""
    import os
    import uuid

    sc = session.sparkContext
    service = _service(sc)
    conf = sc._jsc.sc().conf()
    started_here = False
    if not service.started() or service.stopped():
        conf.set("spark.connect.grpc.binding.address", "127.0.0.1")
        conf.set("spark.connect.grpc.binding.port", "0")
        if not conf.contains("spark.connect.authenticate.token"):
            conf.set("spark.connect.authenticate.token", str(uuid.uuid4()))
        service.start(sc._jsc.sc())
        started_here = True
    token = conf.get("spark.connect.authenticate.token", "") or os.environ.get(
        "SPARK_CONNECT_AUTHENTICATE_TOKEN", ""
    )
    # "localhost": the Python client sends a token over plain local gRPC only to that name.
    url = f"sc://localhost:{service.localPort()}"
    return LocalServer(url + (f"/;token={token}" if token else ""), started_here)


def stop_serving(session: Any, server: LocalServer) -> None:
    """Stop the service :func:`serve` started (one already running is left alone)."""
    if server.started_here:
        jvm = session.sparkContext._jvm
        _service(session.sparkContext).stop(jvm.scala.Option.empty(), jvm.scala.Option.empty())
