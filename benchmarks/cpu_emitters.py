"""Compile and run time on a CPU with XLA's fusion emitters (its default) and its classic ones.

`XLA_FLAGS=--xla_cpu_use_fusion_emitters=false` makes XLA's CPU backend generate code with its
classic emitters; `classic-o1` also lowers LLVM's optimisation level from 2 to 1
(`--xla_backend_optimization_level=1`, what the test suite compiles with). For each agent and
setting, `bsjax bench` runs in a fresh process with XLA's persistent cache off (so every
program compiles): compile seconds, steady-state seconds and games/s, and a digest of the games
(identical games give identical digests). Appends one JSON line per point to
OUT/cpu-emitters.jsonl.

    .venv/bin/python benchmarks/cpu_emitters.py --games 540
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import provenance  # benchmarks/ is on sys.path when this file is run

SETTINGS = {"fusion": "", "classic": "--xla_cpu_use_fusion_emitters=false",
            "classic-o1": "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=1"}


def _env(flags: str) -> dict:
    return dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip(),
                JAX_ENABLE_COMPILATION_CACHE="false")


def bench(agent: str, games: int, flags: str) -> dict:
    """`bsjax bench`'s figures: compile seconds, steady-state seconds and games/s."""
    done = subprocess.run([sys.executable, "-m", "bsjax.cli", "bench", "--agent", agent,
                           "--games", str(games), "--repeats", "2", "--json"],
                          env=_env(flags), capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def games_digest(agent: str, flags: str) -> str:
    """A digest of 54 games (`bsjax play --seeds 3`'s games.jsonl, wall times left out)."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "bsjax.cli", "play", "--agent", agent,
                        "--seeds", "3", "--out", f"{tmp}/run"], env=_env(flags),
                       capture_output=True, check=True)
        rows = [json.loads(line) for line in Path(f"{tmp}/run/games.jsonl").read_text().splitlines()]
    for row in rows:
        row.pop("wall_seconds", None)
    return hashlib.sha1(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:12]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="greedy,wma,bayes")
    parser.add_argument("--settings", default=",".join(SETTINGS),
                        help=f"comma-separated, from {', '.join(SETTINGS)}")
    parser.add_argument("--games", type=int, default=540)
    parser.add_argument("--out", default=str(provenance.ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    settings = args.settings.split(",")
    unknown = [name for name in settings if name not in SETTINGS]
    if unknown:
        parser.error(f"unknown setting {unknown[0]!r} (choose from {', '.join(SETTINGS)})")
    out = Path(args.out) / "cpu-emitters.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    for agent in args.agents.split(","):
        for setting in settings:
            flags = SETTINGS[setting]
            figures = bench(agent, args.games, flags)
            row = {"agent": agent, "emitters": setting, "xla_flags": flags, "games": args.games,
                   "compile_seconds": figures["compile_seconds"],
                   "seconds": figures["seconds"], "games_per_second": figures["games_per_second"],
                   "games_digest": games_digest(agent, flags), "commit": provenance.commit(),
                   "cpus": os.cpu_count(), "date": datetime.date.today().isoformat()}
            print(json.dumps(row), flush=True)
            with out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
