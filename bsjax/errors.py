"""Errors shared by every entry point."""


class UsageError(ValueError):
    """Bad user input: reported as one line on stderr with exit code 2, nothing written."""
