"""Print a Markdown table of throughput measurements (for pasting into the README).

    python benchmarks/summarize.py [benchmarks/results/throughput.jsonl ...] [--metric ms_per_turn]

Rows: agent / sampler / particles (and the device setup when the files mix several); columns:
batch sizes G; cells: games/s (or ms per batched turn); last column: compile seconds, min–max over
the batch sizes. A point measured more than once shows its latest measurement.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bsjax.battleship.harness import bench


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("jsonl", nargs="*", default=["benchmarks/results/throughput.jsonl"],
                   help="throughput JSON lines (default %(default)s)")
    p.add_argument("--metric", default="games_per_second", choices=["games_per_second", "ms_per_turn"])
    args = p.parse_args(argv)
    rows = []
    for name in args.jsonl:
        if not Path(name).is_file():
            print(f"summarize: error: {name} not found", file=sys.stderr)
            return 2
        rows.extend(bench.load_rows(name))
    if args.metric != "games_per_second" and not any(args.metric in r for r in rows):
        print(f"summarize: error: no row records {args.metric}", file=sys.stderr)
        return 2
    print(bench.markdown_table(rows, args.metric), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
