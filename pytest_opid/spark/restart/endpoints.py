"""One side's sink and sources as a restart check reads them: the ``(endpoint, fact, value)``
rows of :attr:`~pytest_opid.result.Fingerprint.endpoints` (:mod:`pytest_opid.spark.query.endpoints`
writes them), the outcome kinds in Spark's words, and paths compared as Spark resolves them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_opid.io import location_identity
from pytest_opid.snapshot_locations import matches_kept
from pytest_opid.spark.data_sources import resolve_format

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
    """Two spellings of one folder, as the store resolves them
    (:func:`pytest_opid.io.location_identity.same_location`: ``s3a://b/q`` and ``s3://b/q/``,
    a ``file:`` URI and its path); a snapshot's kept form (``…/out``, ``<rootdir>/data/out``)
    matches the locations it stands for (:func:`pytest_opid.snapshot_locations.matches_kept`)."""
    if a is None or b is None:
        return a == b
    for kept, other in ((a, b), (b, a)):
        matched = matches_kept(kept, other)
        if matched is not None:
            return matched
    return location_identity.same_location(a, b)
