"""Held-out confirmation of the look-ahead captain: one compiled sweep, paired by game.

    python experiments/battleship/lookahead/run.py --seeds 100 --first-seed 100 --out heldout
    python experiments/battleship/lookahead/run.py --random 1000 --out random
    python experiments/battleship/lookahead/run.py --seeds 100 --first-seed 200 --stored \
        --out heldout-200
    python experiments/battleship/lookahead/run.py --random 5000 --skip 1000 --pair \
        --out random-1000-4999

Plays the default `LookaheadAgent` structure (8 shot candidates, depth 2, exact outcome tree)
at every (gamma, margin) of the grid below on the paper protocol's 18 synthetic boards (or on
random boards of the paper fleet) with the particle belief (P = 500, 4 sweeps). The point
gamma = 0.95, margin = 1e9 is bayes itself (its shot search never overrides; the zero-budget
test shows such a captain plays bayes's games), so every point is paired with bayes game by
game. `--stored` plays only the default captain and pairs it with bayes's stored games of the
particles-5400 decomposition (seed indices 0-299; the harness replays them exactly). Writes
`--pair` plays only bayes (by name) and the default captain, as two programs, on the same
games (`--skip`: leave out the first random boards); with the suite, seed indices past the
stored ones:

    python experiments/battleship/lookahead/run.py --seeds 100 --first-seed 300 --pair \
        --out heldout-300
 Writes `<out>-games.csv.gz` and
`<out>-table.md` beside this file.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time

import numpy as np
import pandas as pd

from bsjax.battleship.agents.lookahead import LookaheadAgent
from bsjax.battleship.config import PAPER
from bsjax.battleship.game import suites
from bsjax.battleship.harness import api

HERE = pathlib.Path(__file__).parent
STORED = "experiments/battleship/decomposition/particles-5400/runs/bayes/games.jsonl.gz"
GRID = {"gamma": [0.85, 0.95], "margin": [1e9, 0.2, 0.05]}
LABELS = {(0.95, 1e9): "bayes (gamma 0.95, no shot search)",
          (0.85, 1e9): "gamma 0.85, no shot search",
          (0.85, 0.2): "lookahead default (gamma 0.85, shot tree, margin 0.2)",
          (0.85, 0.05): "gamma 0.85, shot tree, margin 0.05",
          (0.95, 0.2): "gamma 0.95, shot tree, margin 0.2",
          (0.95, 0.05): "gamma 0.95, shot tree, margin 0.05"}


def paired(d: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    boot = d[rng.integers(0, len(d), (4000, len(d)))].mean(axis=1)
    return float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--first-seed", type=int, default=100)
    ap.add_argument("--random", type=int, default=0, help="random boards instead of the suite")
    ap.add_argument("--out", default="heldout")
    ap.add_argument("--stored", action="store_true", help="the default only, vs stored bayes")
    ap.add_argument("--pair", action="store_true", help="bayes and the default only")
    ap.add_argument("--skip", type=int, default=0, help="random boards left out first")
    args = ap.parse_args()
    single = args.stored or args.pair
    kw = dict(particles=500, progress=False, batch_size=54, params=None if single else GRID)
    start = time.time()
    if args.random:
        truths = np.array([b.spans for b in suites.random_suite(args.random, 0, PAPER)])
        truths = truths[args.skip:]
        res = api.play(LookaheadAgent(PAPER), truths=truths, seeds=1, **kw)
        if args.pair:
            bayes = api.play("bayes", truths=truths, seeds=1, **kw).to_pandas()
    else:
        res = api.play(LookaheadAgent(PAPER), boards="all", seeds=args.seeds,
                       first_seed=args.first_seed, **kw)
        if args.pair:
            bayes = api.play("bayes", boards="all", seeds=args.seeds,
                             first_seed=args.first_seed, **kw).to_pandas()
    wall = time.time() - start
    df = res.to_pandas()
    if args.pair:
        df = pd.concat([df.assign(gamma=0.85, margin=0.2), bayes.assign(gamma=0.95, margin=1e9)])
    if args.stored:
        stored = pd.read_json(STORED, lines=True)
        stored = stored[stored.seed.isin(df.seed.unique())].assign(gamma=0.95, margin=1e9)
        df = pd.concat([df.assign(gamma=0.85, margin=0.2), stored[list(df.columns) + [
            "gamma", "margin"]]])
    df.to_csv(HERE / f"{args.out}-games.csv.gz", index=False)
    base = df[(df.gamma > 0.94) & (df.margin > 1)].set_index(["board", "seed"])
    rng = np.random.default_rng(0)
    cores = len(os.sched_getaffinity(0))
    lines = [f"{len(base)} games per row ({args.out}); wall {wall:.0f} s for the rows played, "
             f"{cores} core{'s' if cores > 1 else ''}",
             "", "| row | F1 | completion | shots | questions | ΔF1 vs bayes [95% CI] |",
             "|---|---|---|---|---|---|"]
    for (gamma, margin), g in df.groupby(["gamma", "margin"]):
        g = g.set_index(["board", "seed"]).loc[base.index]
        d = (g.f1 - base.f1).to_numpy()
        lo, hi = paired(d, rng)
        label = LABELS[(round(gamma, 2), margin if margin < 1 else 1e9)]
        lines.append(f"| {label} | {g.f1.mean():.4f} | {g.won.mean():.1%} | {g.shots.mean():.2f} "
                     f"| {g.questions.mean():.2f} | {d.mean():+.4f} [{lo:+.4f}, {hi:+.4f}] |")
    (HERE / f"{args.out}-table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
