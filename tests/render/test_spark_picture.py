"""The PySpark guide's picture is what the renderer draws today from the example job's change.

docs/pictures/spark_diff.svg is drawn by ``python -m examples.spark.pictures`` (run by
docs/pictures/make.sh) from :func:`examples.spark.jobs.page_view_stats` changed into
``page_view_stats_with_last_view`` in a real local Spark session: a new aggregate, which Spark
refuses on the old checkpoint. This test draws it again and compares, and checks that it leads
with what breaks.
"""

from __future__ import annotations

import importlib
import xml.etree.ElementTree as ET

from tests.render.fixtures import PICTURES, ROOT
from tests.render.test_pictures import SVG, _statuses, check_markup, groups, texts

COMMITTED = PICTURES / "spark_diff.svg"


def test_the_committed_spark_picture_is_current(spark, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ is imported as make.sh runs it
    drawn = importlib.import_module("examples.spark.pictures").draw(spark)
    assert drawn == COMMITTED.read_text(encoding="utf-8"), (
        "docs/pictures/spark_diff.svg is out of date: run sh docs/pictures/make.sh"
    )


def test_the_spark_picture_leads_with_the_broken_state():
    root: ET.Element = check_markup(COMMITTED.read_text(encoding="utf-8"))
    status = _statuses(root)
    assert [name for name, s in status.items() if s == "lost"] == ["StateStoreSave"]
    assert set(status.values()) == {"unchanged", "lost"}
    title = "".join(next(root.iter(f"{SVG}title")).itertext())
    assert title.startswith("Not restartable from the old checkpoint")
    lost = groups(root, "status-lost")[0]
    lines = ["".join(t.itertext()) for t in lost.iter(f"{SVG}text")]
    assert lines[1] == "CANNOT RESTART: state/0 value schema changed"
    assert "keys: tumbling window(event_time, 5 minutes), page" in lines
    assert any("+max(event_time)" in line for line in lines)
    assert "savepoint" not in " ".join(texts(root)).lower()
