"""Training-seed sweeps of the look-ahead captain (seed indices 0-99 only), paired by game.

    python experiments/battleship/lookahead/train.py --seeds 12 \
        --structure '{"n_shots": 8, "depth": 2, "search": "tree"}' \
        --params '{"gamma": 0.85, "margin": [1e9, 0.05, 0.1, 0.2]}' --against 'margin > 1'

Plays `LookaheadAgent(PAPER, **structure)` on the 18 synthetic boards x `--seeds` seed indices
from `--first-seed` at every point of `--params` (one compiled program), and prints each
point's F1, completion and paired ΔF1 (95% percentile bootstrap over games) against either a
point of the same sweep (`--against QUERY`, a pandas query on the params' columns) or bayes's
stored games of the particles-5400 decomposition (`--against stored`: the same boards, seeds
and keys; the harness replays them exactly). `--protocol grand` plays Grand et al.'s boards
(give `--against` a point of the sweep there: the stored games are the paper protocol's):

    python experiments/battleship/lookahead/train.py --protocol grand --sampler importance \
        --particles 1000 --params '{"gamma": [0.85, 0.95], "margin": [1e9, 0.2]}' \
        --against 'gamma > 0.9 and margin > 1'
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

from bsjax.battleship.agents.lookahead import LookaheadAgent
from bsjax.battleship.config import GRAND, PAPER
from bsjax.battleship.harness import api

STORED = "experiments/battleship/decomposition/particles-5400/runs/bayes/games.jsonl.gz"
OUTCOMES = ("board", "seed", "f1", "won", "shots", "hits", "questions", "turns", "llm_calls",
            "fallbacks")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--particles", type=int, default=500)
    ap.add_argument("--sweeps", type=int, default=4, help="MH sweeps per belief update")
    ap.add_argument("--protocol", default="paper", choices=("paper", "grand"))
    ap.add_argument("--sampler", default="particles")
    ap.add_argument("--structure", default="{}")
    ap.add_argument("--params", default="{}")
    ap.add_argument("--against", default="stored")
    args = ap.parse_args()
    if args.first_seed + args.seeds > 100:
        raise SystemExit("training seeds are 0-99")
    if args.protocol == "grand" and args.against == "stored":
        raise SystemExit("--protocol grand: give --against a point of the sweep")
    config = GRAND if args.protocol == "grand" else PAPER
    start = time.time()
    res = api.play(LookaheadAgent(config, **json.loads(args.structure)), boards="all",
                   seeds=args.seeds, first_seed=args.first_seed, protocol=args.protocol,
                   sampler=args.sampler, particles=args.particles, sweeps=args.sweeps,
                   progress=False, batch_size=54, params=json.loads(args.params) or None)
    wall = time.time() - start
    df = res.to_pandas()
    axes = [c for c in df.columns if c not in OUTCOMES]
    base = (pd.read_json(STORED, lines=True) if args.against == "stored"
            else df.query(args.against))
    print(f"{args.protocol} {args.sampler} P={args.particles} sweeps={args.sweeps} "
          f"{args.structure} against {args.against}: wall {wall:.1f} s")
    for point, g in (df.groupby(axes) if axes else [((), df)]):
        m = g.merge(base, on=["board", "seed"], suffixes=("", "_b"))
        d = (m.f1 - m.f1_b).to_numpy()
        rng = np.random.default_rng(0)
        boot = d[rng.integers(0, len(d), (2000, len(d)))].mean(axis=1)
        print(f"{dict(zip(axes, point))} n={len(m)} F1 {m.f1.mean():.4f} vs {m.f1_b.mean():.4f} "
              f"dF1 {d.mean():+.4f} [{np.percentile(boot, 2.5):+.4f}, "
              f"{np.percentile(boot, 97.5):+.4f}] won {m.won.mean():.3f} vs {m.won_b.mean():.3f} "
              f"shots {m.shots.mean():.2f} vs {m.shots_b.mean():.2f} "
              f"questions {m.questions.mean():.2f}")


if __name__ == "__main__":
    main()
