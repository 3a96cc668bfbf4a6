"""Where a benchmark's figures came from: the git commit they were measured at."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def commit() -> str:
    """The short hash of HEAD; `BSJAX_COMMIT` where the tree is no git checkout (a copy of the
    files on another machine), else "unknown"."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("BSJAX_COMMIT", "unknown")
