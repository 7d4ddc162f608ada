"""A click-enrichment job without any uid(): every OperatorID is generated from the graph's
shape, so this is exactly the kind of job a refactor breaks. Its snapshot catches that."""

from __future__ import annotations

import pytest

from pytest_opid.flink.builder import Stream, StreamEnvironment


def enrichment_job() -> tuple[Stream, Stream]:
    """Clicks joined with the customer-profile stream in a keyed two-input operator; late clicks
    leave through a side output to S3; enriched clicks go back to Kafka."""
    env = StreamEnvironment(8)
    clicks = env.source("Kafka clicks").map("Parse click")
    profiles = env.source("Kafka customer profiles").set_parallelism(2)
    profiles = profiles.map("Parse profile").set_parallelism(2)
    enriched = clicks.connect(profiles).key_by().process("Join click with profile")
    main = enriched.sink("Kafka enriched clicks")
    late = enriched.side_output("late-clicks").map("Format late click").sink("S3 late clicks")
    return main, late


@pytest.mark.stable_topology
def test_enrichment_job(opid):
    main, _ = enrichment_job()
    opid.record(main)  # a stream stands for its whole environment, side outputs included
