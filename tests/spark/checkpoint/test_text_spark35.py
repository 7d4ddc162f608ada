"""``opid checkpoint`` on a checkpoint PySpark 3.5.9 wrote (tests/data/spark-restart-35): Spark 3.5
writes no operator metadata, so a store has no partition count of its own; the text says what
is known (the operator's partition folders) and never prints ``None``.
"""

from __future__ import annotations

import contextlib
import io
import tarfile
from pathlib import Path

from pytest_opid.cli import main

DATA = Path(__file__).resolve().parents[2] / "data" / "spark-restart-35" / "checkpoints"


def test_a_3_5_checkpoint_prints_no_none(tmp_path: Path) -> None:
    with tarfile.open(DATA / "agg_cat_complete__no_change__150006.tar.gz", "r:gz") as tar:
        tar.extractall(tmp_path, filter="data")
    checkpoint = tmp_path / "checkpoint"
    # What Spark 3.5 left: no state/0/_metadata, three partition folders (spark.sql.shuffle
    # .partitions as the run set it).
    assert not (checkpoint / "state" / "0" / "_metadata").exists()
    folders = sorted(p.name for p in (checkpoint / "state" / "0").iterdir())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["checkpoint", str(checkpoint)]) == 0
    text = out.getvalue()
    assert "None" not in text
    assert f"metadata v0, {len(folders)} partitions" in text
    assert 'store "default" (schema v2)' in text
