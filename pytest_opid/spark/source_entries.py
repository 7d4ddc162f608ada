"""The sources of a streaming fingerprint as it writes them, one entry per source in Spark's order
(``[@<name> ]FileSource <format> <qualified path>`` or ``[@<name> ]<Spark's source name>``), and
their reading back: the restart check compares them as Spark matches sources, by position or by
name under source evolution."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_opid.snapshot_locations import snapshot_location
from pytest_opid.text import printable, quote


@dataclass(frozen=True)
class Source:
    """One source of a fingerprint (:attr:`~pytest_opid.result.Fingerprint.sources`):
    ``[@<name> ]FileSource <format> <qualified path>`` for a file source, else
    ``[@<name> ]<Spark's source name>`` (``rate-micro-batch``, ``kafka``...). ``name`` is the name
    given with ``.name()`` under source evolution."""

    text: str
    name: str | None
    kind: str
    fmt: str | None = None
    path: str | None = None

    @property
    def is_file(self) -> bool:
        return self.kind == "FileSource"

    def describe(self) -> str:
        body = f"{self.fmt} files in {self.path}" if self.is_file else self.kind
        return f"{quote(self.name)} ({printable(body)})" if self.name else printable(body)


def parse_source(text: str) -> Source:
    """Read one entry of :attr:`Fingerprint.sources <pytest_opid.result.Fingerprint.sources>`."""
    rest = text
    name = None
    if rest.startswith("@"):
        name, _, rest = rest[1:].partition(" ")
    if rest.startswith("FileSource "):
        _, fmt, path = [*rest.split(" ", 2), "", ""][:3]
        return Source(text, name, "FileSource", fmt or None, path or None)
    return Source(text, name, rest)


def short_source(text: str) -> str:
    """A source as a committed snapshot keeps it: a file source's path as
    :func:`~pytest_opid.snapshot_locations.snapshot_location` keeps it (``FileSource json
    …/events`` under a temporary folder), anything else as it is."""
    source = parse_source(text)
    if not source.is_file or not source.path:
        return text
    kept = snapshot_location(source.path)
    if kept == source.path:
        return text
    prefix = f"@{source.name} " if source.name else ""
    return f"{prefix}FileSource {source.fmt} {kept}"


#: The endpoint facts that name a folder (:attr:`~pytest_opid.result.Fingerprint.endpoints`).
FOLDER_FACTS = frozenset({"path", "checkpointLocation", "option sourceArchiveDir"})


def short_endpoint(row: tuple[str, str, str]) -> tuple[str, str, str]:
    """An endpoint row as a committed snapshot keeps it: a folder as
    :func:`~pytest_opid.snapshot_locations.snapshot_location` keeps it, as
    :func:`short_source` keeps a file source's path."""
    endpoint, fact, value = row
    # a foreachBatch function's write targets (``write path``, ``write 2 path``) too
    folder = fact in FOLDER_FACTS or (fact.startswith("write") and fact.endswith(" path"))
    if not folder or not value:
        return row
    return (endpoint, fact, snapshot_location(value))
