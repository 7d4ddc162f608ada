"""Jobs given as topology documents (JSON, e.g. exported from a job's StreamGraph), held stable.

Each file in ``topologies/`` gets its own snapshot, ``test_document[<file name>]``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TOPOLOGIES = sorted((Path(__file__).parent / "topologies").glob("*.json"))


@pytest.mark.stable_topology
@pytest.mark.parametrize("path", TOPOLOGIES, ids=lambda path: path.stem)
def test_document(opid, path):
    opid.record(path)


@pytest.mark.stable_topology(check="chains")
def test_page_view_job_variants(opid):
    """Two variants of one job as inline documents, recorded under two names; only their
    operator chains are held stable (say, while the job is not deployed yet)."""
    base = {
        "nodes": [
            {"id": 1, "name": "Source: Kafka page views", "parallelism": 4, "source": "new"},
            {"id": 2, "name": "Session window", "parallelism": 4},
            {"id": 3, "name": "Sink: Elasticsearch", "parallelism": 4},
        ],
        "edges": [
            {"source": 1, "target": 2, "partitioner": "HASH"},
            {"source": 2, "target": 3},
        ],
    }
    archived = {
        "nodes": [*base["nodes"], {"id": 4, "name": "Sink: S3 archive", "parallelism": 1}],
        "edges": [*base["edges"], {"source": 2, "target": 4, "partitioner": "REBALANCE"}],
    }
    opid.record(base, name="live")
    opid.record(archived, name="with-archive")
