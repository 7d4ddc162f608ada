"""Spark: PySpark DataFrames and streaming queries as fingerprints, and Spark's restart rules.

Importing the package registers with :mod:`pytest_opid.io.registry` the PySpark frontend,
:class:`~pytest_opid.spark.rules.SparkRules` and a restore source for Structured Streaming
checkpoint directories (a directory with ``metadata`` and ``offsets/``), so that
``pytest_opid.check_restore`` judges a restart on one; PySpark itself is imported only when a
PySpark object is fingerprinted. This module is the package's face: the CLI and the plugin import
from here only. Inside, along the path the data takes:

* :mod:`.vocabulary`: Spark's names (confs, one row per stateful operator kind);
  :mod:`.versions`: the Spark lines and which one a verdict speaks for;
* :mod:`.query`: reading a live query (py4j in :mod:`.query.gateway` and :mod:`.query.jvm`, the
  plan JSON to a graph and a fingerprint, expressions, state meaning, the batch plan tree,
  Spark Connect);
* :mod:`.checkpoint`: reading a checkpoint directory (pure Python, no verdicts);
* :mod:`.restart`: Spark's restart verdict (sources, state matching and schemas,
  transformWithState, meaning); :mod:`.words`: the fixes and names its messages share;
* :mod:`.rules` and :mod:`.plan_changes`: what a change between two fingerprints means.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from pytest_opid.io.registry import (
    Frontend,
    RestoreSource,
    register_engine,
    register_frontend,
    register_hint,
    register_restore_source,
)
from pytest_opid.io.storage import Location
from pytest_opid.result import Fingerprint, RestoreCheck
from pytest_opid.spark.checkpoint.read import read_checkpoint
from pytest_opid.spark.checkpoint.slim import DEFAULT_BUDGET, slim_copy
from pytest_opid.spark.checkpoint.text import render_text as render_checkpoint
from pytest_opid.spark.checkpoint.text import watermark_iso
from pytest_opid.spark.query.connect import is_connect, replay, serve, stop_serving
from pytest_opid.spark.query.fingerprint import fingerprint_graph
from pytest_opid.spark.query.graph import SparkPlanGraph, graph_from_plan
from pytest_opid.spark.query.program import fingerprint_function, parse_conf
from pytest_opid.spark.query.read import read_plan
from pytest_opid.spark.restart.verdict import check_checkpoint
from pytest_opid.spark.rules import SparkRules
from pytest_opid.spark.versions import (
    WIDENING,
    engine_line,
    feature_line,
    installed_line,
    installed_version,
    judged_for,
    judging_line,
)
from pytest_opid.spark.vocabulary import ALWAYS_NULLABLE, SCHEMA_CHECK

__all__ = [
    "DEFAULT_BUDGET",
    "fingerprint",
    "fingerprint_function",
    "judged_for",
    "judging_line",
    "parse_conf",
    "plan_graph",
    "read_checkpoint",
    "register",
    "render_checkpoint",
    "serve",
    "slim_copy",
    "stop_serving",
    "watermark_iso",
]


def fingerprint(obj: Any) -> Fingerprint:
    """The fingerprint of a DataFrame, a streaming DataFrame or a ``StreamingQuery`` (classic
    or Spark Connect: :mod:`.connect` replays a Connect one's plan)."""
    note = None
    if is_connect(obj):
        obj, note = replay(obj)
    fp = fingerprint_graph(plan_graph(obj))
    # the Spark that planned it: its line's restart rules judge a checkpoint it writes
    return dataclasses.replace(fp, note=note, engine_version=installed_version())


def plan_graph(obj: Any) -> SparkPlanGraph:
    """Read the physical plan of ``obj`` from the JVM and convert it."""
    if is_connect(obj):
        obj = replay(obj).obj
    reading = read_plan(obj)
    return graph_from_plan(
        reading.plan_json,
        leaves=reading.leaves,
        streaming=reading.streaming,
        state=reading.state,
        sources=reading.sources,
        output_mode_known=reading.output_mode_known,
        node_texts=reading.node_texts,
        shuffle_partitions=reading.shuffle_partitions,
        schema_check=_schema_check(obj) if reading.streaming else True,
    )


def _schema_check(obj: Any) -> bool:
    """Whether the session checks state schemas at restart
    (``spark.sql.streaming.stateStore.stateSchemaCheck``, a session conf the checkpoint does
    not keep). A query's own session is read through its JVM object."""
    try:
        session = getattr(obj, "sparkSession", None)
        if session is not None:
            value = session.conf.get(SCHEMA_CHECK, "true")
        else:
            execution = obj._jsq.streamingQuery()
            value = execution.sparkSession().conf().get(SCHEMA_CHECK, "true")
    except Exception:  # py4j or a session gone: Spark's default
        return True
    return str(value).strip().lower() != "false"


def _top_module(obj: Any) -> str:
    return (type(obj).__module__ or "").partition(".")[0]


def _pandas_hint(obj: Any) -> str | None:
    if _top_module(obj) == "pandas":
        return "a pandas DataFrame has no plan: fingerprint spark.createDataFrame(pdf) instead"
    return None


def _is_checkpoint(path: Path | Location) -> bool:
    """A Structured Streaming checkpoint directory: its ``metadata`` file and offset log."""
    return path.is_dir() and (path / "offsets").is_dir() and (path / "metadata").is_file()


def _check_checkpoint(
    path: Path | Location, new: Fingerprint, allow_non_restored_state: bool
) -> RestoreCheck:
    """Spark's verdict on restarting ``new`` on the checkpoint at ``path`` (Spark has no
    ``--allowNonRestoredState``: the flag is Flink's and ignored here)."""
    return check_checkpoint(read_checkpoint(path), new)


def _check_program(
    path: Path | Location,
    program: Any,
    allow_non_restored_state: bool,
    previous: Fingerprint | None = None,
) -> RestoreCheck:
    """Spark's verdict on restarting ``program`` on the checkpoint at ``path``, the program
    planned as Spark plans a restarted query: with the settings the checkpoint's offset log
    pins (``OffsetSeqMetadata.setSessionConf``). Of those, the state schema widening decides
    what the new state schemas are: a checkpoint started before Spark 4.3 has none, and 4.3
    then plans the query without it (its nullability as Spark 3.5 to 4.2 build it)."""
    checkpoint = read_checkpoint(path)
    # A Connect DataFrame's session too: its conf is the server-side session's, which the
    # replay plans in (or copies, replaying a remote plan locally).
    new = _fingerprint_widened(program, checkpoint.confs.get(ALWAYS_NULLABLE, "false"))
    if new is None:
        return check_checkpoint(checkpoint, fingerprint(program), previous=previous)
    return check_checkpoint(checkpoint, new, planned=True, previous=previous)


def _fingerprint_widened(program: Any, widened: str) -> Fingerprint | None:
    """``program``'s fingerprint planned with the state schema widening set to ``widened``
    (``"true"``/``"false"``), its session's setting restored after; ``None`` where the
    installed Spark has no such setting or the program no session."""
    session = getattr(program, "sparkSession", None)
    if session is None or installed_line() < feature_line(WIDENING):
        return None
    before = session.conf.get(ALWAYS_NULLABLE, None)
    session.conf.set(ALWAYS_NULLABLE, widened)
    try:
        return fingerprint(program)
    finally:
        if before is None:
            session.conf.unset(ALWAYS_NULLABLE)
        else:
            session.conf.set(ALWAYS_NULLABLE, before)


def _plan_restarted(old: Fingerprint, program: Any) -> Fingerprint:
    """``program`` planned as Spark plans it restarting on the checkpoint of the query ``old``
    describes: a query started before Spark 4.3 pinned no state schema widening, and 4.3
    then plans the restarted query without it (as :func:`_check_program` does from the
    checkpoint's own settings). Where ``old`` names no version, as the program plans now."""
    made_on = engine_line(old.engine_version)
    if made_on is not None and min(made_on, judging_line()) < feature_line(WIDENING):
        planned = _fingerprint_widened(program, "false")
        if planned is not None:
            # said in the fingerprint: its schemas' nullability is then the restart's own
            pinned = (ALWAYS_NULLABLE, "false")
            if pinned in planned.settings:
                return planned
            return dataclasses.replace(planned, settings=(*planned.settings, pinned))
    return fingerprint(program)


def _check_checkpoint_with(
    path: Path | Location, program: Any, allow_non_restored_state: bool, previous: Fingerprint
) -> RestoreCheck:
    """:func:`_check_program` (or for a fingerprint :func:`_check_checkpoint`), the state's
    meaning judged against ``previous``, the fingerprint of the query that wrote the
    checkpoint."""
    if isinstance(program, Fingerprint):
        return check_checkpoint(read_checkpoint(path), program, previous=previous)
    return _check_program(path, program, allow_non_restored_state, previous)


def register() -> None:
    """Register this engine's frontends, data formats and rules (the entry point of the
    ``pytest_opid.engines`` group)."""
    register_frontend(
        Frontend(
            "pyspark",
            lambda obj: _top_module(obj) == "pyspark",
            lambda obj, chaining: fingerprint(obj),
            "a PySpark DataFrame (batch or streaming) or StreamingQuery, classic or Spark Connect",
        )
    )
    register_hint(_pandas_hint)
    register_engine(SparkRules(plan_restarted=_plan_restarted))
    register_restore_source(
        RestoreSource(
            "spark-checkpoint",
            _is_checkpoint,
            _check_checkpoint,
            _check_program,
            check_with_previous=_check_checkpoint_with,
        )
    )
