"""transformWithState's grouping key is part of what its state means (issue 28, item 3).

Spark files transformWithState's state under the grouping key, checks only the key's type at a
restart, and so restarts ``groupBy("user")`` on a checkpoint written by ``groupBy("cat")``
(both strings): per-category state is then read as per-user state. The same change on
applyInPandasWithState was caught already; here both transformWithState APIs are judged from
A's fingerprint."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import importlib.util
from pathlib import Path
from typing import Any

import pytest

import pytest_opid

pytestmark = pytest.mark.spark_line("4.0", reason="transformWithState is in PySpark from 4.0 on")

MAKE = Path(__file__).resolve().parents[2] / "data" / "tws-restart" / "make.py"
CNT = ("cnt", "value", "c long", None, None)


def _code() -> Any:
    spec = importlib.util.spec_from_file_location("tws_restart_make", MAKE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.code


def _fingerprint(spark: Any, folder: Path, api: str, key: str) -> Any:
    scope: dict[str, Any] = {}
    exec(_code()(api, (CNT,), key=key), scope)  # the data set's own query code
    return pytest_opid.fingerprint(scope["build"](spark, {"in0": str(folder)}))


@pytest.mark.parametrize(
    "api",
    [
        "pandas",
        pytest.param(
            "row",
            marks=pytest.mark.spark_line(
                "4.1", reason="transformWithState (rows) is PySpark 4.1's; 4.0 has the pandas one"
            ),
        ),
    ],
)
def test_another_grouping_key_of_the_same_type_is_not_safe(
    spark: Any, tmp_path: Path, api: str
) -> None:
    a = _fingerprint(spark, tmp_path, api, '"user"')
    b = _fingerprint(spark, tmp_path, api, '"cat"')
    assert ("key 1", "user: string") in a.state_operators[0].meaning
    check = pytest_opid.check_restore(a, b)
    assert check.restorable and not check.safe, check.to_dict()
    (finding,) = check.reinterpreted
    assert finding.kind == "key_meaning" and finding.state_id == "0"
    assert "key 1 was user: string, is now cat: string" in finding.message
    # the same key written another way is the same state
    same = _fingerprint(spark, tmp_path, api, 'F.col("user")')
    assert pytest_opid.check_restore(a, same).safe
    assert not pytest_opid.check_restore(a, same).warnings
