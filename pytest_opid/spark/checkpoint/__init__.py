"""Reading a Spark Structured Streaming checkpoint directory, in pure Python (no JVM, no
verdicts): :func:`~pytest_opid.spark.checkpoint.read.read_checkpoint` returns a
:class:`~pytest_opid.spark.checkpoint.model.Checkpoint`; the restart verdict is
:mod:`pytest_opid.spark.restart`'s."""
