"""The Spark engine as one object: its frontend, rules and restore entrance, registered with
:mod:`pytest_opid.engines` by :func:`register` (the ``spark`` entry point)."""

from __future__ import annotations

from pytest_opid.engines import Engine, Frontend, register_engine
from pytest_opid.spark.query.frontend import ACCEPTED, fingerprint, is_pyspark, pandas_hint
from pytest_opid.spark.restore import SparkRestore
from pytest_opid.spark.rules import SparkRules
from pytest_opid.spark.vocabulary import ENGINE

__all__ = ["register"]


def register() -> None:
    """Register this engine (the entry point of the ``pytest_opid.engines`` group)."""
    register_engine(
        Engine(
            ENGINE,
            SparkRules(),
            SparkRestore(),
            frontends=(Frontend("pyspark", is_pyspark, lambda obj, _: fingerprint(obj), ACCEPTED),),
            hints=(pandas_hint,),
        )
    )
