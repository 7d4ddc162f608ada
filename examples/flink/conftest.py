"""The PyFlink and Java example jobs need PyFlink (``pip install 'pytest-opid[flink]'``) and a
JDK; ``tox -e flink`` runs them. Where PyFlink is not installed this directory is not collected
(so the main test environment, which cannot install PyFlink next to PySpark, never sees it)."""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("pyflink") is None:
    collect_ignore_glob = ["*"]
