"""The strategies page's example (docs/strategies.md) runs as written."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "strategies.md"


def test_the_readme_example_properties_pass():
    """The page's first Python block defines properties that hold."""
    text = PAGE.read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, f"{PAGE}", "exec"), namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_")]
    assert len(tests) == 3
    for test in tests:
        test()
