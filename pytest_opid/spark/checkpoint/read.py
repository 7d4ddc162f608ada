"""Read a Spark Structured Streaming checkpoint directory, in pure Python (no JVM).

Whether a changed query can restart on an old checkpoint is decided by what Spark wrote there:
the state operators with their names, the key and value schema of every state store, the number
and order of the sources, and the confs the offset log pins (shuffle partitions, state format
versions, state store provider...). :func:`read_checkpoint` reads exactly those files, the way
Spark 4.x reads them, so that a tool can compare them with a new query before it is deployed,
without starting Spark. It reads a few small files (the latest offset and commit log entries,
operator metadata, schema files), never the state data itself.

Every file is untrusted: any problem raises :class:`~pytest_opid.errors.DocumentError` with one
line naming the file and what is wrong.
"""

from __future__ import annotations

import os
from types import MappingProxyType

from pytest_opid.io.storage import Location
from pytest_opid.spark.checkpoint.files import CheckpointReader, batch_files
from pytest_opid.spark.checkpoint.logs import (
    read_commit_watermark,
    read_copied_from,
    read_offsets,
    read_query_id,
    read_sources,
)
from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.checkpoint.operators import read_operators


def read_checkpoint(path: str | os.PathLike[str] | Location) -> Checkpoint:
    """Read the checkpoint directory ``path`` (the query's ``checkpointLocation``): a local
    path or a URL (``s3://``, ``s3a://``, ``gs://``, ``abfss://``...; see
    :mod:`pytest_opid.io.storage`).

    Raises :class:`DocumentError` for anything that is not a readable Spark checkpoint.
    """
    r = CheckpointReader(path)
    root = r.root
    if r.location.is_local:
        if not os.path.isdir(root):
            r.fail("", "not a directory")
    else:
        # One listing of the root: what the checkpoint holds (metadata, offsets/, commits/,
        # state/, sources/), and a missing bucket or folder said at once.
        r.listdir("")
    query_id = read_query_id(r)
    if not r.is_dir("offsets"):
        r.fail("offsets", "missing: not a Spark streaming checkpoint (no offset log)")
    offset_files = batch_files(r, "offsets")
    commit_files = batch_files(r, "commits") if r.is_dir("commits") else {}
    last_batch = max(offset_files) if offset_files else None
    last_committed = max(commit_files) if commit_files else None
    if last_committed is not None and last_committed not in offset_files:
        r.fail(
            f"commits/{commit_files[last_committed]}",
            f"batch {last_committed} is committed but has no offset log entry",
        )

    latest = (
        read_offsets(r, f"offsets/{offset_files[last_batch]}") if last_batch is not None else None
    )
    committed_watermark = (
        read_commit_watermark(r, f"commits/{commit_files[last_committed]}")
        if last_committed is not None
        else None
    )
    sources = read_sources(r, latest, offset_files, last_committed)
    return Checkpoint(
        path=root,
        query_id=query_id,
        offset_log_version=None if latest is None else latest.version,
        last_batch=last_batch,
        last_committed_batch=last_committed,
        batch_watermark_ms=None if latest is None else latest.watermark_ms,
        batch_timestamp_ms=None if latest is None else latest.timestamp_ms,
        committed_watermark_ms=committed_watermark,
        sources=sources,
        confs=MappingProxyType({} if latest is None else dict(latest.confs)),
        state_operators=read_operators(r, last_committed),
        copied_from=read_copied_from(r),
    )
