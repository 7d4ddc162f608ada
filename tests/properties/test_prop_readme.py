"""The README's strategies example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_example_properties_pass():
    """The Python block in the README's strategies section defines properties that hold."""
    text = README.read_text(encoding="utf-8")
    section = text.split("<!-- section:strategies -->", 1)[1].split("<!-- /section:strategies")[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, f"{README}:strategies", "exec"), namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_")]
    assert len(tests) == 3
    for test in tests:
        test()
