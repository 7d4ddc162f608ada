"""The syrupy extension that stores fingerprints as ``.opid`` snapshots.

:class:`TopologySnapshotExtension` plugs the text format of :mod:`pytest_opid.io.snapshot` into
syrupy as a single-file extension (``__snapshots__/<test module>/<test name>.opid``), so
``--snapshot-update``, unused-snapshot detection and pytest-xdist work as they do for syrupy's
own extensions. Its comparison is semantic (:meth:`TopologySnapshotExtension.matches`): names
and other details may differ as long as the engine would restore the same state, except under
``--snapshot-update``, where any difference rewrites the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from pytest_opid.compare import Check, compare
from pytest_opid.errors import DocumentError
from pytest_opid.io.registry import engine_rules, fingerprint
from pytest_opid.io.snapshot import dumps, loads
from pytest_opid.render.explain import render

__all__ = ["TopologySnapshotExtension"]


class TopologySnapshotExtension(SingleFileSnapshotExtension):
    """syrupy extension for topology fingerprints: one ``.opid`` text file per snapshot.

    ``check`` says what must stay stable (:class:`~pytest_opid.compare.Check`); ``exact`` asks for
    byte equality instead, which the plugin sets under ``--snapshot-update`` so that renames are
    written back too. Both are instance attributes the plugin sets per test; syrupy itself
    creates the class without arguments (also on the pytest-xdist controller, to delete unused
    snapshots), which gives the defaults.
    """

    file_extension = "opid"
    _write_mode = WriteMode.TEXT
    check: Check = Check.BOTH
    exact: bool = False

    def serialize(self, data: Any, **kwargs: Any) -> str:
        """Anything :func:`pytest_opid.fingerprint` accepts, as snapshot text."""
        fp = fingerprint(data)
        return dumps(fp, engine_rules(fp.engine).snapshot_preamble(fp))

    def matches(self, *, serialized_data: Any, snapshot_data: Any) -> bool:
        if serialized_data == snapshot_data:
            return True
        if self.exact:
            return False
        try:
            return not compare(loads(str(snapshot_data)), loads(str(serialized_data))).breaks(
                self.check
            )
        except DocumentError:
            return False  # an unreadable snapshot never matches; the plugin explains why

    def diff_lines(self, serialized_data: Any, snapshot_data: Any) -> Iterator[str]:
        """What syrupy prints under a failed ``assert ... == snapshot``: the explanation."""
        try:
            old = loads(str(snapshot_data))
        except DocumentError as exc:
            yield f"{exc}; recreate it with pytest --snapshot-update"
            return
        yield from render(compare(old, loads(str(serialized_data))), self.check).splitlines()
