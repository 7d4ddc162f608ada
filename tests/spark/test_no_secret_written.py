"""No secret is written (issue 48), end to end on a real Spark query: a DataStreamWriter whose
source and sink carry the nine credentials the issue found written verbatim, and a sink path
and checkpoint location with ``user:password@``, go through everything pytest-opid writes:
the snapshot a marked test records and its failure report (text and JUnit XML), the saved
fingerprint, the deploy record (from the query and from an old saved fingerprint that holds
the values verbatim), the pictures (``opid render``: SVG, HTML), ``opid fingerprint``, ``opid
diff`` and ``opid check-restore``, text and ``--json``. None of the planted secrets is found
in any of it. And a deploy record that is not JSON (the path of a local saved fingerprint) is
set aside with one line, never followed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.cli import main
from pytest_opid.spark.checkpoint.files import RECORD_NAME
from tests.core.test_secrets import CHECKPOINT, PLANTED, SECRETS, SINK

pytestmark = pytest.mark.spark_line("4.3", reason="one real query; its checkpoint from 4.3")

#: The team's module: the query, as ``opid ... --spark secret_job:job -- FOLDER SINK CKPT``
#: and a marked test build it.
JOB = """
SECRETS = {secrets!r}


def job(spark, folder, sink, checkpoint, key="user"):
    from pyspark.sql import functions as F

    events = (
        spark.readStream.schema("user STRING, v LONG, ts TIMESTAMP")
        .options(**SECRETS)
        .json(folder)
        .withWatermark("ts", "30 minutes")
    )
    return (
        events.groupBy(F.window("ts", "5 minutes"), key).count()
        .writeStream.format("noop")
        .options(**SECRETS)
        .option("path", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
    )
"""

TEST = """
import pytest
from secret_job import job


@pytest.mark.stable_topology
def test_counts(spark, opid):
    opid.record(job(spark, {folder!r}, {sink!r}, {checkpoint!r}, key={key!r}))
"""


@pytest.fixture
def project(pytester: pytest.Pytester, spark: Any) -> Any:
    """The team's module, its input and a real checkpoint of the query (run with a local
    sink and checkpoint: the credentials in the URLs are never used)."""
    secrets = {key: value for key, (value, _) in SECRETS.items()}
    pytester.makepyfile(secret_job=JOB.format(secrets=secrets))
    pytester.syspathinsert()
    folder = pytester.path / "in"
    folder.mkdir()
    (folder / "part-0.json").write_text(
        "".join(
            json.dumps({"user": f"u{i % 3}", "v": i, "ts": f"2024-01-01T00:{4 * i:02d}:00"}) + "\n"
            for i in range(9)
        )
    )
    import secret_job  # type: ignore[import-not-found]

    checkpoint = pytester.path / "checkpoint"
    writer = secret_job.job(spark.newSession(), str(folder), str(pytester.path / "out"), "")
    query = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    try:
        query.awaitTermination(600)
    finally:
        query.stop()
    assert query.exception() is None and (checkpoint / "commits" / "0").is_file()
    return secret_job, folder, checkpoint


def _old_saved_form(fp: pytest_opid.Fingerprint) -> str:
    """``fp`` as pytest-opid wrote it before the digests: the options verbatim, the
    credentials in the URLs kept."""
    data = fp.to_dict()
    verbatim = {f"option {key}": value for key, (value, _) in SECRETS.items()}
    urls = {"path": SINK, "checkpointLocation": CHECKPOINT}
    data["endpoints"] = [
        [e, f, verbatim.get(f, urls.get(f, v) if e == "sink" else v)]
        for e, f, v in data["endpoints"]
    ]
    return json.dumps(data)


def test_nothing_written_holds_a_planted_secret(
    project: Any,
    pytester: pytest.Pytester,
    spark: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    secret_job, folder, checkpoint = project
    outputs: list[str] = []
    program = ["--spark", "secret_job:job", "--", str(folder), SINK, CHECKPOINT]

    def run(*args: str) -> int:
        code = main(list(args))
        captured = capsys.readouterr()
        outputs.extend((captured.out, captured.err))
        return code

    # the plugin: a snapshot, then a failing run's report (a changed key)
    for key, update in (("user", ["--snapshot-update"]), ("v", [])):
        pytester.makepyfile(
            test_job=TEST.format(folder=str(folder), sink=SINK, checkpoint=CHECKPOINT, key=key)
        )
        result = pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", "-rA", f"--junitxml={pytester.path / 'report.xml'}", *update
        )
        result.assert_outcomes(**({"passed": 1} if update else {"failed": 1}))
        outputs.append(result.stdout.str() + result.stderr.str())

    # saved fingerprints: the new one, and one written before the digests (planted)
    fp = pytest_opid.fingerprint(secret_job.job(spark.newSession(), str(folder), SINK, CHECKPOINT))
    new = tmp_path / "new.json"
    new.write_text(fp.to_json(), encoding="utf-8")
    old = tmp_path / "planted" / "old.json"
    old.parent.mkdir()
    old.write_text(_old_saved_form(fp), encoding="utf-8")
    assert all(part in old.read_text(encoding="utf-8") for part in PLANTED)

    from_file = tmp_path / "from-file"
    shutil.copytree(checkpoint, from_file)
    codes = [
        run("record-deploy", str(checkpoint), *program),
        run("record-deploy", str(from_file), str(old)),
        run("fingerprint", *program),
        run("fingerprint", "--json", *program),
        run("fingerprint", "--json", str(old)),
        run("render", str(old)),
        run("render", "--format", "html", "-o", str(tmp_path / "picture.html"), str(old)),
        run("diff", str(old), str(new)),
        run("diff", "--json", str(old), str(new)),
        run("check-restore", str(checkpoint), *program),
        run("check-restore", "--json", str(checkpoint), *program),
        run(
            "check-restore", "--json", str(from_file), str(new), "--previous-fingerprint", str(old)
        ),
    ]
    assert codes[:2] == [0, 0] and 2 not in codes, (codes, outputs)
    # the old file's values read as the new digests: no change between them
    assert pytest_opid.fingerprint(str(old)).endpoints == fp.endpoints

    planted = {tmp_path / "planted", pytester.path / "secret_job.py", pytester.path / "test_job.py"}
    written = [(checkpoint / RECORD_NAME).read_text(encoding="utf-8")]
    for root in (tmp_path, pytester.path):
        for path in sorted(root.rglob("*")):
            if not path.is_file() or any(p == path or p in path.parents for p in planted):
                continue
            if path.is_relative_to(checkpoint) and path.name != RECORD_NAME:
                continue  # Spark's own files
            if path.is_relative_to(folder) or "__pycache__" in path.parts:
                continue
            written.append(path.read_text(encoding="utf-8", errors="replace"))
    assert len(written) >= 6  # the records (twice), report.xml, the snapshot, new.json...
    found = sorted({part for text in written + outputs for part in PLANTED if part in text})
    assert found == []
    (snapshot,) = pytester.path.rglob("*.opid")
    assert "scrypt:" in snapshot.read_text(encoding="utf-8")


def test_a_record_that_is_not_json_is_never_followed_to_a_local_file(
    project: Any, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record whose body is the path of a local saved fingerprint of the same query: read as
    that file, it was trusted as the deploy record (exit 0, the window's meaning verified by a
    file nobody deployed; a checkpoint keeps no window)."""
    secret_job, folder, kept = project
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(kept, checkpoint)
    fp = pytest_opid.fingerprint(secret_job.job(spark.newSession(), str(folder), SINK, CHECKPOINT))
    local = tmp_path / "deployed.json"
    local.write_text(fp.to_json(), encoding="utf-8")
    (checkpoint / RECORD_NAME).write_text(str(local), encoding="utf-8")
    url = checkpoint.as_uri()

    code = main(["check-restore", "--json", url, str(local)])
    out = json.loads(capsys.readouterr().out)
    assert code != 2, out
    (note,) = [w for w in out["warnings"] if w["kind"] == "recorded_fingerprint"]
    assert note["message"].startswith(f"{RECORD_NAME} in the checkpoint: not a saved fingerprint")
    assert str(local) not in json.dumps(out) and "\n" not in note["message"]
    assert not any("recorded at deploy" in v for v in out["verified"])
