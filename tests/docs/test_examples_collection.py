"""``pytest examples`` says why it leaves examples/flink out where PyFlink is not installed (the
main environment: PyFlink cannot be installed next to PySpark), instead of passing over it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pytest_examples_says_why_examples_flink_is_not_collected():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "examples/flink", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    said = "examples/flink was not collected: PyFlink is not installed in this environment"
    if importlib.util.find_spec("pyflink") is None:
        assert done.returncode == 5, done.stdout + done.stderr  # no tests ran
        assert said in done.stdout
        assert "tox -e flink runs those examples" in done.stdout
    else:
        assert said not in done.stdout
