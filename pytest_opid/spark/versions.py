"""Which Spark a verdict speaks for: the PySpark lines pytest-opid supports, the one installed,
and the one a restart check judges for.

Spark's restart rules differ between lines (3.5 writes no operator metadata and so has no
stateful-operator check; its refusals are exceptions, not error classes; 4.0 added
transformWithState), so every verdict names the line whose restart it predicts. By default
that is the installed PySpark's; :func:`judged_for` names another (the CLI's
``--spark-version``, the plugin's ``--opid-spark-version``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from importlib import metadata

from pytest_opid.errors import DocumentError, OpidError

__all__ = [
    "LINES",
    "NEWEST",
    "OPERATOR_METADATA",
    "WIDENING",
    "SparkLine",
    "engine_line",
    "feature_line",
    "installed_line",
    "installed_version",
    "judged_for",
    "judging_line",
    "parse_line",
    "require",
]


@dataclass(frozen=True, order=True)
class SparkLine:
    """A Spark release line (``3.5``, ``4.3``): restart rules change between lines, not
    between patch releases."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def at_least(self, major: int, minor: int) -> bool:
        return (self.major, self.minor) >= (major, minor)


#: The lines pytest-opid is tested on (a tox environment and a constraints file each).
LINES = (
    SparkLine(3, 5),
    SparkLine(4, 0),
    SparkLine(4, 1),
    SparkLine(4, 2),
    SparkLine(4, 3),
)
NEWEST = LINES[-1]

#: Features by the first line that has them: a fingerprint or a verdict that needs one on an
#: older line is refused with one line naming the version that has it.
_FEATURES = {
    "transformWithState": SparkLine(4, 0),
    "transformWithStateInPandas": SparkLine(4, 0),
    "the state-metadata reader": SparkLine(4, 0),
    "operator metadata in the checkpoint": SparkLine(4, 0),
    "Avro state encoding": SparkLine(4, 0),
    # spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled (SQLConf, since 4.3.0)
    "state schemas widened to nullable": SparkLine(4, 3),
}
#: The feature name of the state schema widening (4.3, for queries started on it).
WIDENING = "state schemas widened to nullable"
#: The feature name of the operator metadata a checkpoint holds (4.0).
OPERATOR_METADATA = "operator metadata in the checkpoint"

#: ``X.Y`` and then anything of word characters, dots, pluses and dashes (``.9``, ``.dev1``,
#: ``-SNAPSHOT``, ``+local``): one run of each kind, so a failing match is linear (the nested
#: repetition this replaces backtracked exponentially on ``3.5aaaa...!``).
_VERSION = re.compile(r"(\d+)\.(\d+)(?![\d])[\w.+\-]*")
#: The longest version text read (a PEP 440 version of PySpark is about 20 characters).
_MAX_VERSION_CHARS = 200


def _match(text: str) -> re.Match[str] | None:
    """``text`` as a version (its line's two numbers as groups 1 and 2), or None."""
    if len(text) > _MAX_VERSION_CHARS:
        return None
    return _VERSION.fullmatch(text)


def parse_line(text: str, what: str = "--spark-version") -> SparkLine:
    """``"3.5"``, ``"3.5.9"`` or ``"4.3.0.dev1"`` as its line; an unsupported or malformed one
    is a :class:`DocumentError` naming the supported lines."""
    match = _match(str(text).strip())
    supported = ", ".join(str(line) for line in LINES)
    if match is None:
        raise DocumentError(f"{what} {text!r}: not a Spark version (X.Y, one of {supported})")
    line = SparkLine(int(match.group(1)), int(match.group(2)))
    if line not in LINES:
        raise DocumentError(
            f"{what} {text}: pytest-opid judges restarts for Spark {supported}, not {line}"
        )
    return line


@cache
def installed_version() -> str | None:
    """The installed PySpark's version (from its package metadata, without importing it), or
    ``None`` where PySpark is not installed."""
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        return None


def installed_line() -> SparkLine:
    """The installed PySpark's line; the newest supported where PySpark is not installed
    (judging a saved fingerprint or a checkpoint needs no PySpark)."""
    version = installed_version()
    if version is None:
        return NEWEST
    match = _match(version)
    if match is None:
        return NEWEST
    return SparkLine(int(match.group(1)), int(match.group(2)))


def engine_line(version: str | None) -> SparkLine | None:
    """The line of a recorded Spark version (``"3.5.9"``); ``None`` where none was recorded or
    it is not a version."""
    match = None if version is None else _match(version.strip())
    if match is None:
        return None
    return SparkLine(int(match.group(1)), int(match.group(2)))


_JUDGED_FOR: ContextVar[SparkLine | None] = ContextVar("pytest_opid_spark_line", default=None)


def judging_line() -> SparkLine:
    """The line whose restart a check predicts: the one :func:`judged_for` set, else the
    installed PySpark's."""
    chosen = _JUDGED_FOR.get()
    return chosen if chosen is not None else installed_line()


@contextmanager
def judged_for(version: str | SparkLine | None) -> Iterator[SparkLine]:
    """Within the block, restart checks judge for ``version`` (``None``: the installed one)."""
    if version is None:
        line = installed_line()
    elif isinstance(version, SparkLine):
        line = version
    else:
        line = parse_line(version)
    token = _JUDGED_FOR.set(line)
    try:
        yield line
    finally:
        _JUDGED_FOR.reset(token)


def feature_line(feature: str) -> SparkLine:
    """The first line that has ``feature`` (one of :data:`_FEATURES`' names)."""
    return _FEATURES[feature]


def require(feature: str, line: SparkLine | None = None) -> None:
    """Refuse ``feature`` on a line that lacks it, in one line naming the version that has
    it."""
    have = line if line is not None else installed_line()
    first = _FEATURES[feature]
    if have < first:
        shown = installed_version() if line is None and installed_version() else str(have)
        raise OpidError(
            f"{feature} needs Spark {first} or later; this is Spark {shown}"
            + ("" if line is None else " (the Spark line the restart is judged for)")
        )
