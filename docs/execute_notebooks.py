"""Execute the notebooks under `notebooks/` into the documentation: `docs/notebooks/NAME.ipynb`.

The site shows these executed copies (mkdocs-jupyter with `execute: false`); the build never runs
a kernel. The notebooks read their sizes from environment variables (as `tests/test_notebooks.py`
does), so the copies are made at sizes that take a minute or two each on a 2-core CPU. Run from
the repository root with the venv's Python, which is also the kernel's:

    .venv/bin/python docs/execute_notebooks.py                   # all four
    .venv/bin/python docs/execute_notebooks.py 01_quickstart     # one (name without .ipynb)

Each notebook runs in a fresh temporary directory (its run directories land there), and the
copy is written without kernel-specific metadata, so re-running changes only what the outputs
changed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "notebooks"
TARGET = ROOT / "docs" / "notebooks"

# The sizes of the executed copies (the notebooks' defaults are the full-size runs quoted in the
# docs; the test suite uses smaller ones still).
SIZES: dict[str, dict[str, str]] = {
    "01_quickstart": {"BSJAX_NOTEBOOK_PARTICLES": "500", "BSJAX_NOTEBOOK_SEEDS": "1",
                      "BSJAX_NOTEBOOK_BOARDS": "all"},
    # at its full size: 540 paired games per rule and the 3-point sweep, all in memory
    "02_scoring_rules": {"BSJAX_NOTEBOOK_PARTICLES": "500", "BSJAX_NOTEBOOK_SEEDS": "30",
                         "BSJAX_NOTEBOOK_BOARDS": "all"},
    # 108 games a captain (18 boards × 6 seeds), five captains and the larger belief
    "04_how_close_to_optimal": {"BSJAX_NOTEBOOK_PARTICLES": "500", "BSJAX_NOTEBOOK_SEEDS": "6",
                                "BSJAX_NOTEBOOK_BOARDS": "all"},
    # the `quick` backbone (the smoke profile's is too weak for GILP's gates to help it)
    "03_gilp": {"BSJAX_NOTEBOOK_GILP_TASKS": "10", "BSJAX_NOTEBOOK_SEEDS": "2",
                "BSJAX_NOTEBOOK_GILP_PROFILE": "quick", "BSJAX_NOTEBOOK_GILP_DATA_TASKS": "0"},
}
TIMEOUT_S = 600  # per cell


def execute(name: str) -> float:
    """Run `notebooks/NAME.ipynb` at its `SIZES` and write `docs/notebooks/NAME.ipynb`; returns
    the wall time in seconds."""
    nb = nbformat.read(SOURCE / f"{name}.ipynb", as_version=4)
    old_env = dict(os.environ)
    tick = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"bsjax-docs-{name}-") as tmp:
        os.environ.update(SIZES.get(name, {}))
        os.environ["TMPDIR"] = tmp  # the notebooks' temporary run directories land here
        os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        try:
            NotebookClient(nb, kernel_name="python3", timeout=TIMEOUT_S, allow_errors=False,
                           resources={"metadata": {"path": tmp}}).execute()
        finally:
            os.environ.clear()
            os.environ.update(old_env)
    seconds = time.perf_counter() - tick
    for cell in nb.cells:
        cell.metadata.pop("execution", None)  # per-cell timestamps: noise in the diff
    nb.metadata.pop("widgets", None)
    nb.metadata["bsjax_docs"] = {"sizes": SIZES.get(name, {}),
                                 "command": f"python docs/execute_notebooks.py {name}"}
    TARGET.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, TARGET / f"{name}.ipynb")
    return seconds


def main(argv: list[str] | None = None) -> int:
    names = sorted(path.stem for path in SOURCE.glob("*.ipynb"))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"notebooks to run (default all: {', '.join(names)})")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in names]
    if unknown:
        parser.error(f"unknown notebook(s) {', '.join(unknown)} (choose from {', '.join(names)})")
    for name in args.names or names:
        seconds = execute(name)
        size = (TARGET / f"{name}.ipynb").stat().st_size
        print(f"{name}: {seconds:.0f} s -> {(TARGET / f'{name}.ipynb').relative_to(ROOT)} "
              f"({size / 1024:.0f} KiB)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
