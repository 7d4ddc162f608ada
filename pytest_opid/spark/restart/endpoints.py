"""One side's sink and sources as a restart check reads them: the ``(endpoint, fact, value)``
rows of :attr:`~pytest_opid.result.Fingerprint.endpoints` (:mod:`pytest_opid.spark.query.endpoints`
writes them), the outcome kinds in Spark's words, and paths compared as Spark resolves them."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_opid.spark.checkpoint.sink_log import local_path
from pytest_opid.spark.data_sources import resolve_format
from pytest_opid.spark.source_entries import SHORTENED

#: Reinterpretation kinds: what the sink holds after the restart.
ROWS_LOST = "rows_lost"
ROWS_DUPLICATED = "rows_duplicated"
RESULTS_CHANGED = "results_changed"


#: Sinks ``DataStreamWriter`` makes itself, by no format's name.
_NOT_FORMATS = ("foreachBatch", "foreach", "memory")


@dataclass(frozen=True)
class Endpoints:
    """One side's sink and sources, from a fingerprint's
    :attr:`~pytest_opid.result.Fingerprint.endpoints` rows. ``sink`` is ``None`` where no sink
    was recorded (a DataFrame)."""

    sink: Mapping[str, str] | None
    sources: Mapping[int, Mapping[str, str]]

    @property
    def sink_kind(self) -> str | None:
        return None if self.sink is None else self.sink.get("kind")

    def option(self, position: int, key: str) -> str | None:
        """A source option by its key, as Spark reads options (case-insensitively)."""
        for fact, value in self.sources.get(position, {}).items():
            if fact.lower() == f"option {key.lower()}":
                return value
        return None


def endpoints_of(rows: Sequence[tuple[str, str, str]] | None) -> Endpoints | None:
    if rows is None:
        return None
    sink: dict[str, str] | None = None
    sources: dict[int, dict[str, str]] = {}
    for endpoint, fact, value in rows:
        if endpoint == "sink":
            sink = sink if sink is not None else {}
            sink[fact] = value
        elif endpoint.startswith("source ") and endpoint[7:].isdigit():
            sources.setdefault(int(endpoint[7:]), {})[fact] = value
    if sink is not None and sink.get("format") and sink.get("kind") not in _NOT_FORMATS:
        # as Spark resolves the name (a fingerprint recorded before it did, a hand-made one)
        resolved = resolve_format(sink["format"])
        sink.update(kind=resolved.kind, format=resolved.format)
    return Endpoints(sink, sources)


def same_location(a: str | None, b: str | None) -> bool:
    """Two paths of one folder (a ``file:`` URI or not, trailing slashes, ``..``); a
    snapshot's shortened path (``…/out``) matches any path ending in that folder."""
    if a is None or b is None:
        return a == b
    for short, other in ((a, b), (b, a)):
        if short.startswith(SHORTENED):
            return other.rstrip("/").rsplit("/", 1)[-1] == short[len(SHORTENED) :]
    la, lb = local_path(a), local_path(b)
    if la is not None and lb is not None:
        return os.path.realpath(la) == os.path.realpath(lb)
    return a.rstrip("/") == b.rstrip("/")
