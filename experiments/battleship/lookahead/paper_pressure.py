"""The look-ahead captain's ask threshold moved by the questions left, paper protocol, training seeds.

    python experiments/battleship/lookahead/paper_pressure.py --seeds 30 --first-seed 0 \
        --betas 0,-0.05,0.05,0.1
    python experiments/battleship/lookahead/paper_pressure.py --table-only

The default captain (γ 0.85, depth-2 shot tree, margin 0.2) on 4,000 particles, where its
held-out F1 is 0.8001 (`belief-size-table.md`), with γ + β (ρ − ρ0) as the turn's ask threshold:
ρ the questions left per ship cell not yet hit, ρ0 = 15 / 14 (the paper's budget over its
fleet's cells), so β > 0 asks more eagerly while questions are plentiful and less as they run
short. β = 0 is the captain itself. Grand's protocol had the same lever (`grand_levers.py`,
`pressure`); this is the paper protocol's. Training seed indices only (0-99); each call's games
are added to `paper-pressure-games.csv.gz` (a block already there is replaced) and the table
`paper-pressure-table.md` pairs every β with β = 0 of the same seed block, by (board, seed).
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import time

import chex
import jax.numpy as jnp
import numpy as np
import pandas as pd
from lever_agents import questions_per_unhit_cell  # this folder (on sys.path when run)

from bsjax.battleship.agents.lookahead import LookaheadAgent, LookaheadParams
from bsjax.battleship.config import PAPER
from bsjax.battleship.harness import api
from bsjax.core.stats import paired_bootstrap

HERE = pathlib.Path(__file__).parent
GAMES, TABLE = HERE / "paper-pressure-games.csv.gz", HERE / "paper-pressure-table.md"
PARTICLES = 4000


@chex.dataclass(frozen=True)
class PressureParams:
    """The captain's params, β `[]` float32 and ρ0 `[]` float32."""

    look: LookaheadParams
    beta: chex.Array
    rho0: chex.Array


@dataclasses.dataclass(frozen=True)
class PressureLookahead(LookaheadAgent):
    """The look-ahead captain whose γ is γ + β (ρ − ρ0) each turn."""

    name = "lookahead-pressure"

    def default_params(self) -> PressureParams:
        return PressureParams(look=super().default_params(), beta=jnp.float32(0.0),
                              rho0=jnp.float32(15 / 14))

    def decide(self, key, params, view, sampler, belief, state):
        rho = questions_per_unhit_cell(self.config, view)
        look = params.look
        gamma = look.bayes.gamma + params.beta * (rho - params.rho0)
        return super().decide(key, look.replace(bayes=look.bayes.replace(gamma=gamma)), view,
                              sampler, belief, state)


def play(betas: list[float], seeds: int, first_seed: int) -> None:
    """The games of `betas` (β = 0 added) on seeds first_seed .. first_seed + seeds - 1."""
    start = time.time()
    games = api.play(PressureLookahead(PAPER), params={"beta": sorted({0.0, *betas})},
                     protocol="paper", sampler="particles", particles=PARTICLES, boards="all",
                     seeds=seeds, first_seed=first_seed, batch_size=54,
                     progress=True).to_pandas()
    games = games.assign(block=f"{first_seed}-{first_seed + seeds - 1}",
                         wall_s=round(time.time() - start))
    if GAMES.exists():
        kept = pd.read_csv(GAMES)
        games = pd.concat([kept[~((kept.block == games.block.iloc[0])
                                  & kept.beta.isin(games.beta.unique()))], games])
    games.to_csv(GAMES, index=False)


def table() -> str:
    games = pd.read_csv(GAMES)
    lines = [f"Paper protocol, the look-ahead captain (γ 0.85, margin 0.2) on P = {PARTICLES:,} "
             "particles, γ + β (ρ − 15/14); each row paired with β = 0 on its seed block", "",
             "| seeds | β | games | F1 | completion | questions | ΔF1 vs β = 0 [95% CI] | wall s |",
             "|---|---|---|---|---|---|---|---|"]
    key = ["board", "seed"]
    for block, of_block in games.groupby("block", sort=False):
        base = of_block[np.isclose(of_block.beta, 0.0)].set_index(key).sort_index()
        for beta, g in of_block.groupby("beta"):
            g = g.set_index(key).sort_index()
            assert g.index.equals(base.index)
            d = paired_bootstrap(g.f1.to_numpy(), base.f1.to_numpy())
            lines.append(f"| {block} | {beta:g} | {len(g)} | {g.f1.mean():.4f} | "
                         f"{g.won.mean():.1%} | {g.questions.mean():.2f} | "
                         f"{d.mean:+.4f} [{d.low:+.4f}, {d.high:+.4f}] | {g.wall_s.iloc[0]} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--betas", default="-0.05,0.05,0.1")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    if args.first_seed < 0 or args.seeds < 1 or args.first_seed + args.seeds > 100:
        raise SystemExit("training seeds only: 0 <= --first-seed, --first-seed + --seeds <= 100")
    if not args.table_only:
        play([float(b) for b in args.betas.split(",")], args.seeds, args.first_seed)
    TABLE.write_text(table())
    print(TABLE.read_text(), end="")


if __name__ == "__main__":
    main()
