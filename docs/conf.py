"""The documentation site: Sphinx with MyST (the pages are plain Markdown that reads the same on
the repository host) and the Furo theme. ``tox -e docs`` builds it with warnings as errors, so a
broken link, page or heading anchor fails the build."""

project = "pytest-opid"
author = "the pytest-opid maintainers"
copyright = "the pytest-opid maintainers, Apache License 2.0"

extensions = ["myst_parser"]
root_doc = "contents"
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "pictures/*.json", "pictures/make.sh", "requirements.txt"]

# GitHub's anchors for every heading down to ####, so that `page.md#a-heading` links work alike
# on the repository host and on the site (and a missing one is a build error).
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]
# The shell transcripts and snapshot excerpts are plain text: no language guessing.
highlight_language = "none"
suppress_warnings = ["misc.highlighting_failure"]

html_theme = "furo"
html_title = "pytest-opid"
