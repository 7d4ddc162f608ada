"""Spark's restart verdict: would Spark restart a changed streaming query on a checkpoint (or on
the checkpoint the previous query's fingerprint describes), and read its state as what it is?
:func:`~pytest_opid.spark.restart.verdict.check_checkpoint` and
:func:`~pytest_opid.spark.restart.verdict.check_fingerprint` are the entry points; each check
lives in a module of its own, in the order Spark runs them."""
