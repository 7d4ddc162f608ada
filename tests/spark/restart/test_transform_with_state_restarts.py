"""transformWithState restart verdicts against Spark 4.3's own, on real restarts.

``tests/data/tws-restart`` (made by its ``make.py``, by hand) holds 46 real restarts: for
``transformWithStateInPandas`` and the row-based ``transformWithState``, query A ran twice with
``availableNow`` on a new checkpoint, then query B was started on it in another JVM, and Spark's
outcome was recorded; A's checkpoint is kept without its state data. Every pair is judged from
the checkpoint, from A's fingerprint and from A's ``.opid`` snapshot, and compared with Spark.

The queries here are built in a SparkContext whose Python workers cannot start
(``pythonExec`` is a missing program): pytest-opid must learn the processors' state variables by
itself (:mod:`pytest_opid.spark.transform_with_state`), as it must wherever the worker Python
lacks pyspark or pandas. That Spark's own pre-init worker gives the same column families is shown
separately.
"""

from __future__ import annotations

import gzip
import json
import sys
import tarfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.io.snapshot import dumps, loads
from pytest_opid.result import Fingerprint, RestoreCheck
from pytest_opid.spark.checkpoint.read import read_checkpoint
from pytest_opid.spark.checkpoint.text import render_text
from pytest_opid.spark.vocabulary import PROPERTIES_STORE

pytestmark = pytest.mark.spark_line(
    "4.3", reason="the data's truth is Spark 4.3.0's restarts (tests/data/tws-restart)"
)

DATA = Path(__file__).resolve().parents[2] / "data" / "tws-restart"
with gzip.open(DATA / "cases.jsonl.gz", "rt", encoding="utf-8") as _f:
    CASES = {rec["case"]["id"]: rec for rec in map(json.loads, _f)}

#: Spark's failure -> the first problem's kind.
KIND_OF = {
    "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE": "key_schema",
    "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE": "value_schema",
    "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION": "value_schema",
    "STATE_STORE_INVALID_CONFIG_AFTER_RESTART": "state_config",
    "STATE_STORE_INVALID_VARIABLE_TYPE_CHANGE": "state_config",
}
#: Restarts Spark accepts that drop a state variable's state silently: not safe.
DROPS_STATE = {"remove_variable", "rename_variable"}
#: Restarts where the processor's code changed and the state variables it declares did not
#: (``StructType([StructField("c", LongType())])`` -> ``'c long'``): the code that updates the
#: state changed, which the digest of the processor cannot tell from a change of what it does
#: (issue 28, item 4): not safe from A's fingerprint or snapshot until accepted. From a
#: checkpoint, which keeps no code, it is not verified.
CODE_ONLY = {"ddl_string_schema"}

NO_WORKER = "/nonexistent/python3-without-pyspark"


@contextmanager
def python_workers(spark: Any, executable: str) -> Iterator[None]:
    """Python functions built inside run their Python workers with ``executable``."""
    sc = spark.sparkContext
    was = sc.pythonExec
    sc.pythonExec = executable
    try:
        yield
    finally:
        sc.pythonExec = was


def extract(rec: dict[str, Any], root: Path) -> Path:
    """A case's checkpoint under ``root/<case id>/``, its file source log pointed there (the run
    used ``paths_at_run``), and an empty ``in0`` for the queries to read."""
    folder = root / rec["case"]["id"]
    with tarfile.open(DATA / rec["checkpoint"], "r:gz") as tar:
        tar.extractall(folder, filter="data")
    (folder / "in0").mkdir()
    ran_in = Path(rec["paths_at_run"]["checkpoint"]).parent.as_posix()
    old, new = f"file://{ran_in}/", f"file://{folder.resolve().as_posix()}/"
    for log in (folder / "checkpoint" / "sources").glob("*/*"):
        text = log.read_text(encoding="utf-8")
        log.write_text(text.replace(old, new), encoding="utf-8")
    return folder


def build(spark: Any, rec: dict[str, Any], which: str, folder: Path) -> Any:
    namespace: dict[str, Any] = {}
    exec(rec[f"{which}_code"], namespace)  # the data set's own query code
    session = spark.newSession()
    for key, value in rec[f"session_conf_{which}"].items():
        session.conf.set(key, value)
    return namespace["build"](session, {"in0": str(folder / "in0")})


@dataclass(frozen=True)
class Pair:
    folder: Path
    a: Fingerprint
    from_checkpoint: RestoreCheck
    from_fingerprint: RestoreCheck
    from_snapshot: RestoreCheck


@pytest.fixture(scope="module")
def pair(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Pair]:
    root = tmp_path_factory.mktemp("tws-restart")
    done: dict[str, Pair] = {}

    def get(case_id: str) -> Pair:
        if case_id not in done:
            rec = CASES[case_id]
            folder = extract(rec, root)
            with python_workers(spark, NO_WORKER):
                a = pytest_opid.fingerprint(build(spark, rec, "before", folder))
                b = pytest_opid.fingerprint(build(spark, rec, "after", folder))
            done[case_id] = Pair(
                folder,
                a,
                pytest_opid.check_restore(folder / "checkpoint", b),
                pytest_opid.check_restore(a, b),
                pytest_opid.check_restore(loads(dumps(a)), b),
            )
        return done[case_id]

    return get


def _agrees(check: RestoreCheck, rec: dict[str, Any], code_compared: bool = True) -> bool:
    """Spark's verdict; where Spark failed, the first problem is of the kind of Spark's failure
    and names its error class; a restart that drops a variable's state is not safe, and so is
    one where only the processor's code changed (where the code is compared: not from a
    checkpoint); any other restart is."""
    spark = rec["spark"]
    if check.restorable != spark["restarted"]:
        return False
    if spark["restarted"]:
        refactor = rec["case"]["refactor"]
        unsafe = refactor in DROPS_STATE or (code_compared and refactor in CODE_ONLY)
        if check.safe is None:  # not verified (the code, from a checkpoint): never "safe"
            return not check.meaning_verified and refactor not in DROPS_STATE
        return check.safe == (not unsafe)
    first = check.problems[0]
    return first.kind == KIND_OF[spark["error_class"]] and spark["error_class"] in first.message


def _explain(check: RestoreCheck) -> str:
    return json.dumps(check.to_dict(), indent=1)[:4000]


def test_the_data_set() -> None:
    assert len(CASES) == 46
    apis = {rec["case"]["api"] for rec in CASES.values()}
    assert apis == {"pandas", "row"}
    for rec in CASES.values():
        assert rec["control_fresh_checkpoint_ok"], rec["case"]["id"]
        assert rec["spark"]["restarted"] or rec["spark"]["error_class"] in KIND_OF
        if rec["spark"]["restarted"]:  # B really ran a batch with data on A's state
            assert any(b.get("numInputRows", 0) > 0 for b in rec["spark"]["batches"])


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_restart_on_the_checkpoint(pair: Callable[[str], Pair], case_id: str) -> None:
    check = pair(case_id).from_checkpoint
    assert _agrees(check, CASES[case_id], code_compared=False), _explain(check)
    if CASES[case_id]["spark"]["restarted"]:  # a checkpoint keeps no code: never verified
        assert not check.meaning_verified, _explain(check)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_restart_from_the_fingerprint(pair: Callable[[str], Pair], case_id: str) -> None:
    check = pair(case_id).from_fingerprint
    assert _agrees(check, CASES[case_id]), _explain(check)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_restart_from_the_snapshot(pair: Callable[[str], Pair], case_id: str) -> None:
    check = pair(case_id).from_snapshot
    assert _agrees(check, CASES[case_id]), _explain(check)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_fingerprint_records_what_spark_wrote(pair: Callable[[str], Pair], case_id: str) -> None:
    """A's fingerprint holds every column family of A's checkpoint with the very schemas Spark
    wrote (schema file v3), and the operator properties of its state metadata."""
    p = pair(case_id)
    rec = CASES[case_id]
    (op,) = read_checkpoint(p.folder / "checkpoint").state_operators
    (state,) = p.a.state_operators or ()
    stores = {s.name: (s.key_schema, s.value_schema) for s in state.stores}
    written = {
        f"{st.name}/{cf.name}": (json.loads(cf.key_schema_json), json.loads(cf.value_schema_json))
        for st in op.stores
        for cf in st.column_families
    }
    recorded = {
        name: (json.loads(key or "null"), json.loads(value or "null"))
        for name, (key, value) in stores.items()
        if name != PROPERTIES_STORE
    }
    assert recorded == written
    (metadata,) = rec["state_metadata"]
    assert json.loads(stores[PROPERTIES_STORE][1] or "") == json.loads(
        metadata["operatorProperties"]
    )
    assert state.kind == metadata["operatorName"]


def test_the_meaning_names_the_variables(pair: Callable[[str], Pair]) -> None:
    """A's fingerprint and snapshot record the processor and its variables (the TTL's duration
    from the processor itself, which Spark's files do not keep)."""
    p = pair("transform_with_state_pandas__remove_ttl")
    (state,) = p.a.state_operators or ()
    assert state.meaning[:5] == (
        ("processor", "CountProcessor"),
        ("time mode", "ProcessingTime"),
        ("output mode", "Update"),
        ("state variable cnt", "ValueState<c BIGINT>, TTL 3600000 ms"),
        ("state encoding", "unsaferow"),
    )
    snapshot = dumps(p.a)
    assert "[state meaning]" in snapshot
    assert "ValueState<c BIGINT>, TTL 3600000 ms" in snapshot
    (loaded,) = loads(snapshot).state_operators or ()
    assert loaded.meaning == state.meaning


def test_what_spark_does_not_check_is_said(pair: Callable[[str], Pair]) -> None:
    swapped = pair("transform_with_state_row__swap_processor_class").from_fingerprint
    (said,) = [w for w in swapped.warnings if "stateful processor is now" in w.message]
    assert "TotalProcessor instead of CountProcessor" in said.message
    assert swapped.safe
    removed = pair("transform_with_state_pandas__remove_variable").from_checkpoint
    (reinterpreted,) = removed.reinterpreted
    assert '"last" no longer declared' in reinterpreted.message
    assert "dropped silently" in reinterpreted.message
    assert removed.restorable and not removed.safe
    for case_id, change in (
        ("transform_with_state_row__add_ttl", "gains a TTL"),
        ("transform_with_state_pandas__remove_ttl", "loses its TTL"),
    ):
        check = pair(case_id).from_checkpoint
        assert "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" in check.problems[0].message
        (why,) = [w for w in check.warnings if "TTL" in w.message]
        assert f'state variable "cnt" {change}' in why.message, _explain(check)
    longer = pair("transform_with_state_pandas__change_ttl_duration").from_fingerprint
    (said,) = [w for w in longer.warnings if "TTL of state variable" in w.message]
    assert "from 3600000 ms to 7200000 ms" in said.message
    assert longer.safe


def test_opid_checkpoint_lists_the_variables(pair: Callable[[str], Pair]) -> None:
    p = pair("transform_with_state_row__remove_variable")
    cp = read_checkpoint(p.folder / "checkpoint")
    text = render_text(cp)
    assert (
        'state variables (2):\n        "last": ValueState<s STRING>, no TTL\n'
        '        "cnt": ValueState<c BIGINT>, no TTL\n'
    ) in text
    (op,) = cp.to_dict()["state_operators"]
    assert [
        (v["state_name"], v["value_schema"]["fields"][0]["name"]) for v in op["state_variables"]
    ] == [
        ("last", "s"),
        ("cnt", "c"),
    ]


def test_spark_pre_init_worker_declares_the_same(
    spark: Any, pair: Callable[[str], Pair], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The column families and properties of every distinct A are the same when Spark's own
    pre-init worker runs the processor's init() (a worker Python with pyspark, recording off)."""
    import pytest_opid.spark.query.processor_handle as handle
    from pytest_opid.spark.transform_with_state import ProcessorRecord

    distinct: dict[tuple[str, str], str] = {}  # many cases share their query A
    for case_id in sorted(CASES):
        rec = CASES[case_id]
        key = (rec["before_code"], json.dumps(rec["session_conf_before"], sort_keys=True))
        distinct.setdefault(key, case_id)
    assert len(distinct) == 22
    recorded_pairs = {case_id: pair(case_id) for case_id in distinct.values()}  # recording on
    monkeypatch.setattr(
        handle, "record_command", lambda command, limit: ProcessorRecord("X", None, "off")
    )
    for case_id, p in recorded_pairs.items():
        with python_workers(spark, sys.executable):
            worker = pytest_opid.fingerprint(build(spark, CASES[case_id], "before", p.folder))
        (by_worker,) = worker.state_operators or ()
        (recorded,) = p.a.state_operators or ()
        assert by_worker.stores == recorded.stores, case_id


def test_an_init_that_cannot_be_recorded_nor_run_is_said(
    spark: Any, pair: Callable[[str], Pair], tmp_path: Path
) -> None:
    """A processor whose init() reads a file, in a session whose worker Python cannot start:
    the variables are unknown, the fingerprint says why, and the check says what it could not
    compare (it does not claim Spark's verdict on them)."""
    p = pair("transform_with_state_pandas__value_to_list")
    config = tmp_path / "state.txt"
    config.write_text("cnt")
    code = CASES["transform_with_state_pandas__value_to_list"]["after_code"].replace(
        "self.v_cnt = handle.getListState('cnt',",
        f"self.v_cnt = handle.getListState(open({str(config)!r}).read(),",
    )
    assert code != CASES["transform_with_state_pandas__value_to_list"]["after_code"]
    rec = {**CASES["transform_with_state_pandas__value_to_list"], "after_code": code}
    with python_workers(spark, NO_WORKER):
        b = pytest_opid.fingerprint(build(spark, rec, "after", p.folder))
    (state,) = b.state_operators or ()
    assert state.stores == ()
    facts = dict(state.meaning)
    assert facts["state variables"] == "?"
    assert f"its init() opens the file '{config}'" in facts["could not inspect"]
    assert "Spark's pre-init Python worker failed too" in facts["could not inspect"]
    check = pytest_opid.check_restore(p.folder / "checkpoint", b)
    said = [w.message for w in check.warnings if "could not inspect" in w.message]
    assert said and f"opens the file '{config}'" in said[0], _explain(check)


JOB = """
import pandas as pd
import pytest
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.types import LongType, StructField, StructType


class Counter(StatefulProcessor):
    def init(self, handle):
        self.cnt = handle.{method}("cnt", StructType([StructField("c", LongType())]))

    def handleInputRows(self, key, rows, timerValues):
        yield pd.DataFrame({{"key": [str(key[0])], "count": [0]}})

    def close(self):
        pass


@pytest.mark.stable_topology
def test_counts(opid, spark, tmp_path):
    spark.sparkContext.pythonExec = {no_worker!r}
    session = spark.newSession()
    session.conf.set("spark.sql.streaming.stateStore.providerClass", {rocksdb!r})
    events = session.readStream.schema("user string, v long").json(str(tmp_path))
    opid.record(events.groupBy("user").transformWithStateInPandas(
        Counter(), "key string, count long", "Update", "None"))
"""


def test_a_marked_test_judges_the_variables_from_its_snapshot(pytester: Any, spark: Any) -> None:
    """The snapshot records the processor's variables; a ValueState turned ListState fails the
    marked test with Spark's error class, Python workers unable to start throughout."""
    rocksdb = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    was = spark.sparkContext.pythonExec
    try:
        for method in ("getValueState", "getListState"):
            pytester.makepyfile(
                test_job=JOB.format(method=method, no_worker=NO_WORKER, rocksdb=rocksdb)
            )
            update = ["--snapshot-update"] if method == "getValueState" else []
            result = pytester.runpytest_inprocess("-p", "no:cacheprovider", *update)
            if update:
                result.assert_outcomes(passed=1)
                snapshot = next(pytester.path.rglob("test_counts.opid")).read_text()
                assert '"state variable cnt"  "ValueState<c BIGINT>, no TTL"' in snapshot
            else:
                result.assert_outcomes(failed=1)
                result.stdout.fnmatch_lines(["*STATE_STORE_INVALID_VARIABLE_TYPE_CHANGE*"])
    finally:
        spark.sparkContext.pythonExec = was


def test_the_processors_code_is_judged(pair: Callable[[str], Pair]) -> None:
    """Issue 28, item 4: the processor's code is recorded by its digest. Changed together with
    the variables it declares (one added), each variable is judged and the code change is a
    warning; changed alone, Spark feeds the old state to other code: not safe until accepted.
    A class renamed with the same code is the same processor."""
    added = pair("transform_with_state_pandas__add_variable").from_fingerprint
    assert added.safe, _explain(added)
    (said,) = [w for w in added.warnings if "processor's code changed together" in w.message]
    assert "(processor CountProcessor)" in said.message
    for case_id in ("transform_with_state_pandas__ddl_string_schema",):
        check = pair(case_id).from_fingerprint
        (changed,) = check.reinterpreted
        assert "the function that updates state/0 changed (processor CountProcessor:" in (
            changed.message
        )
        assert "Spark will feed it the old state" in changed.message
    renamed = pair("transform_with_state_row__swap_processor_class").from_fingerprint
    assert renamed.safe and not renamed.reinterpreted
