"""The project's own error types.

Everything pytest-opid raises on bad input derives from :class:`OpidError`, so a caller (the CLI,
the plugin, a user's test) can tell "your topology is wrong" from a bug in pytest-opid.
"""

from __future__ import annotations

__all__ = ["DocumentError", "HashCollisionError", "OpidError", "TopologyError"]


class OpidError(Exception):
    """Base class of every error pytest-opid raises on bad input."""


class TopologyError(OpidError, ValueError):
    """The topology itself is invalid: a cycle, a dangling edge, a duplicate id or uid, ..."""


class DocumentError(OpidError, ValueError):
    """A topology document, Flink plan or saved fingerprint could not be read."""


class HashCollisionError(TopologyError):
    """A uid hashes to an OperatorID already taken, which Flink rejects as well."""
