"""Errors shared by every entry point of both domains."""


class UsageError(ValueError):
    """Bad user input: reported as one line on stderr with exit code 2, nothing written."""


class LLMError(RuntimeError):
    """Any failure to get a reply from an LLM backend: server down, refused, timeout, HTTP error,
    empty reply. Callers fall back to the symbolic preset and count the fault."""


class LLMTimeout(LLMError):
    """The backend did not answer within its timeout (counted as `timeout`, not `transport`)."""
