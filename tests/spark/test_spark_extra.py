"""Issue 28, item 7: the ``spark`` extra installs what transformWithStateInPandas imports.

PySpark's state server client (``pyspark.sql.streaming.proto``) is protobuf generated code that
refuses a runtime older than its generator, and PySpark lists protobuf under no extra of its
own: without it a fresh ``pip install -e ".[spark]"`` failed with "cannot import name
'descriptor' from 'google.protobuf'". Checked by hand in a fresh virtual environment (the
query of ``test_tws_restart`` runs there); here: the extra names protobuf, in a range the
installed PySpark's generated code accepts.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version


def _extra(name: str) -> list[Requirement]:
    found = []
    for text in importlib.metadata.requires("pytest-opid") or ():
        req = Requirement(text)
        if req.marker is not None and req.marker.evaluate({"extra": name}):
            found.append(req)
    return found


@pytest.mark.spark_line(
    "4.0", reason="transformWithState's protobuf messages are in PySpark from 4.0 on"
)
def test_the_spark_extra_installs_protobuf_that_pysparks_generated_code_accepts() -> None:
    import pyspark

    protobuf = [r for r in _extra("spark") if r.name == "protobuf"]
    assert len(protobuf) == 1, _extra("spark")
    generated = Path(pyspark.__file__).parent / "sql" / "streaming" / "proto"
    stamp = re.search(
        r"Protobuf Python Version: (\S+)",
        (generated / "StateMessage_pb2.py").read_text(encoding="utf-8"),
    )
    assert stamp is not None
    gencode = Version(stamp.group(1))
    assert protobuf[0].specifier.contains(gencode), (protobuf[0], gencode)
    # a runtime older than the generated code is refused: the floor is not below it
    floor = min(Version(s.version) for s in protobuf[0].specifier if s.operator == ">=")
    assert floor >= gencode
    # and the installed runtime loads it
    import google.protobuf
    from pyspark.sql.streaming.proto import StateMessage_pb2

    assert protobuf[0].specifier.contains(google.protobuf.__version__)
    assert StateMessage_pb2.DESCRIPTOR.name.endswith("StateMessage.proto")
