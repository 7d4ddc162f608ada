"""Reading a live PySpark query: the plan Spark would run, through py4j, turned into a
fingerprint (stages, stateful operators, state stores and what their state means)."""
