"""The TPC-DS-like corpus of ``tests/data/tpcds-like``: its tables and its query texts.

The texts are our own (see that folder's README). :func:`create_tables` creates the tables
empty in a SparkSession's catalog (under its ``spark.sql.warehouse.dir``); no data is needed,
only plans are fingerprinted.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1] / "data" / "tpcds-like"

__all__ = ["ROOT", "create_tables", "statements", "table_names", "texts"]


def statements(sql: str) -> list[str]:
    """The statements of a SQL script: ``--`` comment lines dropped, split at ``;``."""
    kept = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [part.strip() for part in kept.split(";") if part.strip()]


def table_names() -> list[str]:
    """The tables ``tables.sql`` creates, in its order."""
    sql = (ROOT / "tables.sql").read_text(encoding="utf-8")
    return re.findall(r"CREATE TABLE (\w+)", sql)


def create_tables(spark: Any) -> list[str]:
    """Create every table of ``tables.sql`` empty (where it does not exist yet); their names."""
    existing = {row.tableName for row in spark.sql("SHOW TABLES IN default").collect()}
    for statement in statements((ROOT / "tables.sql").read_text(encoding="utf-8")):
        name = re.match(r"CREATE TABLE (\w+)", statement)
        assert name is not None, statement
        if name.group(1) not in existing:
            spark.sql(statement)
    return table_names()


def texts(folder: str) -> dict[str, str]:
    """The query texts of ``folder`` (``queries``, ``variants``, ``controls``) by file stem."""
    return {
        path.stem: path.read_text(encoding="utf-8")
        for path in sorted((ROOT / folder).glob("*.sql"))
    }
