"""A sink or checkpoint location that moves between two locations outside the test's temporary
folders fails the marked test against its snapshot, as it fails against the whole fingerprint;
a test writing under ``tmp_path`` keeps a byte-stable snapshot; and a snapshot written before
(every location kept as ``…/<folder>``) still passes where the folder's name is the same.
Before, the snapshot kept only the last folder's name: ``/warehouse/v1/out`` ->
``/warehouse/v2/out`` passed."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytestmark = pytest.mark.spark_line("4.3", reason="one line is enough for the plugin's path")

MODULE = """
import pytest

@pytest.mark.stable_topology
def test_job(opid, spark, tmp_path):
    (tmp_path / "in").mkdir()
    frame = spark.readStream.schema("id INT").json(str(tmp_path / "in"))
    opid.record(frame.writeStream.format("parquet").option("path", {out!r})
                .option("checkpointLocation", {ckpt!r}))
"""


def _record(pytester: pytest.Pytester, out: str, ckpt: str, *args: str) -> Any:
    pytester.makepyfile(test_sink=MODULE.format(out=out, ckpt=ckpt))
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("/warehouse/v1/out", "/warehouse/v2/out"),
        ("s3a://bucket/warehouse/v1/out", "s3a://bucket/warehouse/v2/out"),
    ],
)
def test_a_sink_moved_outside_the_temporary_folders_fails(
    pytester: pytest.Pytester, spark: Any, before: str, after: str
) -> None:
    ckpt = before.replace("/out", "/ckpt")
    _record(pytester, before, ckpt, "--snapshot-update").assert_outcomes(passed=1)
    snapshot = next(pytester.path.rglob("*.opid"))
    assert f'"{before}"' in snapshot.read_text(encoding="utf-8")
    _record(pytester, before.replace("/v1/", "//v1/./") + "/", ckpt).assert_outcomes(passed=1)
    result = _record(pytester, after, ckpt)
    result.assert_outcomes(failed=1)
    assert "path changed" in result.stdout.str()


def test_a_checkpoint_moved_outside_the_temporary_folders_fails(
    pytester: pytest.Pytester, spark: Any
) -> None:
    _record(pytester, "s3a://b/out", "s3a://b/v1/ckpt", "--snapshot-update")
    result = _record(pytester, "s3a://b/out", "s3a://b/v2/ckpt")
    result.assert_outcomes(failed=1)
    assert "checkpoint location" in result.stdout.str()


def test_a_snapshot_written_before_still_passes_where_the_folder_is_the_same(
    pytester: pytest.Pytester, spark: Any
) -> None:
    """Snapshots written before kept ``…/out``: they match any location ending in ``out``
    (docs/snapshots.md: write them again with --snapshot-update to see a move)."""
    _record(pytester, "/warehouse/v1/out", "/warehouse/v1/ckpt", "--snapshot-update")
    snapshot = next(pytester.path.rglob("*.opid"))
    old = re.sub(r'"/warehouse/v1/(\w+)"', r'"…/\1"', snapshot.read_text(encoding="utf-8"))
    snapshot.write_text(old, encoding="utf-8")
    _record(pytester, "/warehouse/v2/out", "/warehouse/v2/ckpt").assert_outcomes(passed=1)
    _record(pytester, "/warehouse/v1/out2", "/warehouse/v1/ckpt").assert_outcomes(failed=1)


def test_a_test_writing_under_tmp_path_keeps_a_byte_stable_snapshot(
    pytester: pytest.Pytester, spark: Any
) -> None:
    module = MODULE.replace("{out!r}", 'str(tmp_path / "out")').replace(
        "{ckpt!r}", 'str(tmp_path / "ckpt")'
    )
    pytester.makepyfile(test_sink=module)
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update")
    snapshot = next(pytester.path.rglob("*.opid"))
    first = snapshot.read_bytes()
    assert b'"\xe2\x80\xa6/out"' in first and b'"\xe2\x80\xa6/ckpt"' in first
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update")
    assert snapshot.read_bytes() == first
