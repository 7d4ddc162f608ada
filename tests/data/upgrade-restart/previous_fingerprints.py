"""A's fingerprint as PySpark 3.5 made it, for the upgrade check from a previous fingerprint.

The upgrade pairs (``cases.jsonl``) ran A on PySpark 3.5.9; judging B against A's fingerprint
needs that fingerprint made by 3.5, while B is planned by the 4.x line the test runs on. This
script makes A's fingerprints: run it by hand with PySpark 3.5 installed (the spark35 tox env),
from the repository root:

    .tox/spark35/bin/python tests/data/upgrade-restart/previous_fingerprints.py

It writes ``previous-<pyspark version>.jsonl``: one ``{"pair", "fingerprint"}`` line per pair,
the fingerprint in the saved form (which records the PySpark that made it). A's query is the
pair's ``before_code`` with its ``session_conf_before``, over an empty copy of the inputs'
folders: a fingerprint reads the query's plan, not its data.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def main() -> None:
    import pyspark
    from pyspark.sql import SparkSession

    import pytest_opid

    records: dict[str, dict[str, Any]] = {}
    for line in (HERE / "cases.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["spark_version_a"] == pyspark.__version__:
            records.setdefault(rec["pair"], rec)
    if not records:
        sys.exit(f"no pair ran A on PySpark {pyspark.__version__}")
    builder = SparkSession.builder.appName("previous-fingerprints")
    for key, value in next(iter(records.values()))["spark_env"].items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    out = []
    with tempfile.TemporaryDirectory() as root:
        for pair, rec in sorted(records.items()):
            paths = {}
            for key in ("in0", "in1"):
                folder = Path(root, pair, key)
                folder.mkdir(parents=True)
                paths[key] = str(folder)
            namespace: dict[str, Any] = {}
            exec(rec["before_code"], namespace)  # the data set's own query code
            session = spark.newSession()
            for key, value in rec["session_conf_before"].items():
                session.conf.set(key, value)
            fp = pytest_opid.fingerprint(namespace["build"](session, paths))
            out.append(json.dumps({"pair": pair, "fingerprint": fp.to_dict()}, sort_keys=True))
    target = HERE / f"previous-{pyspark.__version__}.jsonl"
    target.write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"{len(out)} fingerprints -> {target.relative_to(HERE.parents[2])}")


if __name__ == "__main__":
    main()
