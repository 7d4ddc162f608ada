"""Writing a test module that pytester runs in this process again after a change."""

from __future__ import annotations

from pathlib import Path

import pytest


def write_module(pytester: pytest.Pytester, name: str, text: str) -> Path:
    """``pytester.makepyfile(name=text)``, and the module's cached bytecode dropped: Python and
    pytest's assertion rewriting take a cached module as current when its source has the same
    size and the same whole-second mtime, so a rewrite of equal length within the second (a
    constant 30 -> 10) would run the old code in an in-process run."""
    path = Path(pytester.makepyfile(**{name: text}))
    for cached in path.parent.glob(f"__pycache__/{name}.*"):
        cached.unlink()
    return path
