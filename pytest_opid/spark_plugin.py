"""Spark fixtures for pytest (in progress)."""
