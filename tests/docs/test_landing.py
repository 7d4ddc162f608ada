"""The README is a landing page (issues 32 and 43): short, in the order a newcomer reads it,
linking the task pages; the options and the marker's whole signature on the plugin page as
pytest itself gives them, and every link into the documentation resolving to a page and a
heading there (GitHub's anchors, which the Sphinx site generates too: docs/conf.py). The
documentation's own links are checked by ``tox -e docs``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"


def headings(text: str) -> list[str]:
    """The headings outside fenced code."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            found.append(line)
    return found


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped but - and _, spaces to -."""
    text = heading.lstrip("#").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def test_the_readme_is_a_landing_page():
    assert len(README.splitlines()) < 250
    assert [h for h in headings(README) if h.startswith("## ")] == [
        "## Getting started",
        "## Tasks",
        "## Documentation",
    ]
    before = README.split("\n## Getting started\n", 1)[0]
    assert "@pytest.mark.stable_topology" in before
    assert "How to fix:" in before and "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE" in before


def _pytest(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        cwd=ROOT / "docs",
        check=True,
    )
    return done.stdout


def test_the_options_table_has_every_option_pytest_lists():
    options = set(re.findall(r"^\s+(--opid-[a-z-]+)", _pytest("--help"), flags=re.M))
    assert options >= {
        "--opid-check",
        "--opid-report",
        "--opid-html",
        "--opid-allow-reinterpreted-state",
    }
    plugin = (DOCS / "plugin.md").read_text(encoding="utf-8")
    table = plugin.split("\n## Options\n", 1)[1].split("\n## ", 1)[0]
    for option in options | {"--snapshot-update"}:
        assert f"| `{option}" in table, option


def test_the_marker_s_whole_signature_is_the_one_pytest_gives():
    markers = _pytest("--markers")
    signature = re.search(r"^@pytest\.mark\.stable_topology\(([^)]*)\)", markers, flags=re.M)
    assert signature is not None
    written = f"@pytest.mark.stable_topology({signature.group(1)})"
    assert "allow_reinterpreted_state=False" in written
    assert written in (DOCS / "plugin.md").read_text(encoding="utf-8")


def test_every_link_into_the_docs_resolves():
    links = re.findall(r"\]\(((?:docs/)?[\w./-]+\.md|LICENSE|CHANGELOG\.md)(#[\w-]+)?\)", README)
    assert any(path.startswith("docs/") for path, _ in links)
    for path, anchor in links:
        page = ROOT / path
        assert page.is_file(), path
        if anchor:
            anchors = {github_anchor(h) for h in headings(page.read_text(encoding="utf-8"))}
            assert anchor[1:] in anchors, f"{path}{anchor}"


def test_every_page_is_in_the_site_s_contents():
    contents = (DOCS / "contents.md").read_text(encoding="utf-8")
    listed = set(contents.split("```{toctree}", 1)[1].split("```", 1)[0].split())
    pages = {p.stem for p in DOCS.glob("*.md")} - {"contents"}
    assert pages <= listed, pages - listed


def test_license_changelog_and_project_urls():
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^license = "Apache-2.0"$', pyproject, flags=re.M)
    urls = pyproject.split("\n[project.urls]\n", 1)[1].split("\n[", 1)[0]
    for name in ("Homepage", "Documentation", "Source", "Issues", "Changelog"):
        assert re.search(rf'^{name} = "https://', urls, flags=re.M), name
    description = re.search(r'^description = "(.*)"$', pyproject, flags=re.M)
    assert description is not None
    assert "Flink" in description.group(1) and "Spark" in description.group(1)
    version = re.search(r'^version = "(.*)"$', pyproject, flags=re.M)
    assert version is not None
    assert f"## {version.group(1)}" in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def test_tox_builds_the_docs_and_the_wheel():
    tox = (ROOT / "tox.ini").read_text(encoding="utf-8")
    envlist = re.search(r"^envlist = (.*)$", tox, flags=re.M)
    assert envlist is not None
    assert {"py311", "lint", "flink", "docs", "wheel"} <= {
        e.strip() for e in envlist.group(1).split(",")
    }
    assert "sphinx-build -W" in tox
    assert "tools/wheel_check.py" in tox


#: The task pages (issue 43), each readable in five minutes.
TASKS = [
    "protect-in-ci.md",
    "check-before-deploy.md",
    "upgrade-spark.md",
    "pyspark-connect.md",
    "flink.md",
]


def test_the_readme_links_every_task_page():
    tasks = README.split("\n## Tasks\n", 1)[1].split("\n## ", 1)[0]
    for page in TASKS:
        assert f"](docs/{page})" in tasks, page


def test_each_task_page_is_short_and_says_first_what_the_reader_will_have():
    """Under 900 words (4.5 minutes at 200 words a minute, code and output included), one H1,
    and the first paragraph says what the reader has at the end."""
    for page in TASKS:
        text = (DOCS / page).read_text(encoding="utf-8")
        assert len(text.split()) < 900, (page, len(text.split()))
        first = text.split("\n\n", 2)[1]
        assert first.startswith("At the end of this page you will"), page
