"""The PyFlink and Java example jobs need PyFlink (``pip install -e '.[pytest,flink]'`` in an
environment of its own) and a JDK; ``tox -e flink`` runs them. Where PyFlink is not installed
this directory is not collected (the main test environment cannot install PyFlink next to
PySpark), and the session's summary says so, so that ``pytest examples`` does not pass over
them in silence."""

from __future__ import annotations

import importlib.util
from typing import Any

if importlib.util.find_spec("pyflink") is None:
    collect_ignore_glob = ["*"]

    def pytest_terminal_summary(terminalreporter: Any) -> None:
        terminalreporter.write_line(
            "examples/flink was not collected: PyFlink is not installed in this environment "
            "(it cannot be installed next to PySpark); tox -e flink runs those examples"
        )
