"""``python -m pytest_opid``: the ``opid`` command."""

from pytest_opid.cli import main

raise SystemExit(main())
