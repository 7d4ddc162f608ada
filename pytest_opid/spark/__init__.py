"""Spark: PySpark DataFrames and streaming queries as fingerprints, and Spark's restart rules.

Its ``register()`` hands :mod:`pytest_opid.engines` one engine object (:mod:`.engine`): the
PySpark frontend (:mod:`.query.frontend`), :class:`~pytest_opid.spark.rules.SparkRules` and the
restore entrance (:mod:`.restore`: Structured Streaming checkpoint directories, a directory with
``metadata`` and ``offsets/``, or a previous query's fingerprint), which every restart check
reaches through ``pytest_opid.check_restore``; PySpark itself is imported only when a PySpark
object is fingerprinted. This module is the package's face: the CLI and the plugin import
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

from pytest_opid.spark.checkpoint.read import read_checkpoint
from pytest_opid.spark.checkpoint.slim import DEFAULT_BUDGET, slim_copy
from pytest_opid.spark.checkpoint.text import render_text as render_checkpoint
from pytest_opid.spark.checkpoint.text import watermark_iso
from pytest_opid.spark.demonstration import Demonstration, demonstrate
from pytest_opid.spark.demonstration.program import demonstrate_functions
from pytest_opid.spark.engine import register
from pytest_opid.spark.query.connect import serve, stop_serving
from pytest_opid.spark.query.frontend import fingerprint, plan_graph
from pytest_opid.spark.query.program import called_function, fingerprint_function, parse_conf
from pytest_opid.spark.restore import record_deploy, restart_settings
from pytest_opid.spark.versions import judged_for, judging_line

__all__ = [
    "DEFAULT_BUDGET",
    "Demonstration",
    "called_function",
    "demonstrate",
    "demonstrate_functions",
    "fingerprint",
    "fingerprint_function",
    "judged_for",
    "judging_line",
    "parse_conf",
    "plan_graph",
    "read_checkpoint",
    "record_deploy",
    "register",
    "render_checkpoint",
    "restart_settings",
    "serve",
    "slim_copy",
    "stop_serving",
    "watermark_iso",
]
