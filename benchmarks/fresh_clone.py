"""Time `make run` or `make test` as a newcomer meets them: a fresh clone, a new `.venv`.

Clones this repository's HEAD into a temporary directory and runs the target there, with an
empty pip cache (`--pip-cache empty`, nothing downloaded before) or the user's own (`warm`). The
install is timed to the moment `make` writes its install stamp; the rest is the target's own
work (a cold XLA compilation cache: the clone has none). Appends one JSON line to
OUT/fresh-clone.jsonl: target, wall and install seconds, exit code, the pip cache, the commit,
CPU count, date, and the last lines of the target's output.

    .venv/bin/python benchmarks/fresh_clone.py run --pip-cache empty
    .venv/bin/python benchmarks/fresh_clone.py test --pip-cache warm
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import provenance  # benchmarks/ is on sys.path when this file is run

ROOT = provenance.ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", choices=("run", "test"))
    parser.add_argument("--pip-cache", choices=("empty", "warm"), default="empty")
    parser.add_argument("--python", default="python3.11", help="the Python `make` builds on")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--keep", action="store_true", help="keep the clone (path printed)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bsjax-fresh-"))
    clone = work / "bsjax"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    if args.pip_cache == "empty":
        env["PIP_CACHE_DIR"] = str(work / "pip-cache")
    log = work / "make.log"
    start = time.perf_counter()
    installed = None
    with log.open("w") as out:
        proc = subprocess.Popen(["make", args.target, f"PYTHON={args.python}"], cwd=clone,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            if installed is None and list((clone / ".venv").glob(".installed-*")):
                installed = time.perf_counter() - start
            time.sleep(1)
    wall = time.perf_counter() - start
    row = {"target": f"make {args.target}", "wall_seconds": round(wall, 1),
           "install_seconds": None if installed is None else round(installed, 1),
           "exit_code": proc.returncode, "pip_cache": args.pip_cache,
           "commit": provenance.commit(), "cpus": os.cpu_count(),
           "date": datetime.date.today().isoformat(),
           "tail": log.read_text(errors="replace").splitlines()[-3:]}
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / "fresh-clone.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row))
    if args.keep:
        print(f"clone kept in {clone}", file=sys.stderr)
    else:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
