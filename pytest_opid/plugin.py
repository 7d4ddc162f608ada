"""pytest plugin (in progress)."""
