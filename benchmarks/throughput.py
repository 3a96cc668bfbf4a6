"""Throughput of agents × samplers × batch sizes: JSON lines and a PNG of games/s vs batch.

Usage: python benchmarks/throughput.py [--sizes 1,8,54,512] [--samplers chain,particles]
       [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bsjax.harness.bench import bench  # noqa: E402
from bsjax.harness.experiment import RunConfig  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,8,54,512")
    parser.add_argument("--samplers", default="chain,particles")
    parser.add_argument("--agent", default="greedy")
    parser.add_argument("--particles", type=int, default=500)
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with (out / "throughput.jsonl").open("a") as fh:
        for sampler in args.samplers.split(","):
            for size in (int(s) for s in args.sizes.split(",")):
                cfg = RunConfig(agent=args.agent, sampler=sampler, particles=args.particles)
                row = bench(cfg, size)
                rows.append(row)
                fh.write(json.dumps(row) + "\n")
                fh.flush()
                print(json.dumps(row), flush=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    for sampler in args.samplers.split(","):
        pts = [(r["games"], r["games_per_second"]) for r in rows if r["sampler"] == sampler]
        ax.plot(*zip(*pts), marker="o", label=f"{args.agent} / {sampler}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("games per batch (G)")
    ax.set_ylabel("games / s")
    ax.set_title(f"bsjax throughput on {rows[0]['device']}")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "throughput.png", dpi=120)


if __name__ == "__main__":
    main()
