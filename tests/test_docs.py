"""The documentation site builds: `mkdocs build --strict` (a broken link, a missing page or a
docstring mkdocstrings cannot parse fails it) into a temporary directory, with the key pages
present — the overview, getting started, the API reference and the three executed notebooks."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                                reason="mkdocs is not installed (the `docs` extra)")

PAGES = [
    "index.html",
    "getting-started/index.html",
    "contributing/index.html",
    "battleship/results/index.html",
    "llm/index.html",
    "gilp/index.html",
    "api/index.html",
    "api/core/index.html",
    "api/battleship-game/index.html",
    "api/battleship-belief/index.html",
    "api/battleship-planning/index.html",
    "api/battleship-agents/index.html",
    "api/battleship-runtime/index.html",
    "api/battleship-llm/index.html",
    "api/battleship-harness/index.html",
    "api/battleship-report/index.html",
    "api/gilp/index.html",
    "notebooks/01_quickstart/index.html",
    "notebooks/02_scoring_rules/index.html",
    "notebooks/03_gilp/index.html",
]


def test_docs_build_strict(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(site)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-6000:]}"
    missing = [page for page in PAGES if not (site / page).is_file()]
    assert not missing, f"pages missing from the site: {missing}"

    # The API pages hold rendered docstrings, not just their headings.
    agents = (site / "api/battleship-agents/index.html").read_text()
    assert 'id="bsjax.battleship.agents.base.Agent"' in agents
    assert "register_agent" in agents
    # The notebooks are rendered with their outputs: the quickstart's heat maps are images.
    quickstart = (site / "notebooks/01_quickstart/index.html").read_text()
    assert "data:image/png;base64," in quickstart
