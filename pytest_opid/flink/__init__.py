"""Flink: OperatorIDs, chains, documents, the builder, plans, savepoints and restore rules."""
