"""The look-ahead captain (and bayes) on a larger particle belief, held out, paired by game.

    python experiments/battleship/lookahead/belief_size.py --particles 4000 --agent lookahead \
        --gamma 0.9
    python experiments/battleship/lookahead/belief_size.py --particles 4000 --agent bayes
    python experiments/battleship/lookahead/belief_size.py --particles 4000 --agent lookahead \
        --gamma 0.9 --random 5000
    python experiments/battleship/lookahead/belief_size.py --sampler exact --block 3 \
        --seed-range 100-129
    python experiments/battleship/lookahead/belief_size.py --table-only

Plays `--agent` (the default captain's structure and params, or bayes) on the paper protocol's
18 synthetic boards, seed indices 100-399 (5,400 games), with the particle belief at
`--particles` (4 sweeps) and, with `--gamma`, that ask threshold instead of the agent's default,
in blocks of `--block` seed indices. Each block's games go to
`belief-P<P>[-gamma<G>]/<agent>-s<first seed>.csv.gz` as soon as it is played, and a block already there is
not played again, so an interrupted run resumes where it stopped. The table
(`belief-size-table.md`) pairs every captain with bayes at P = 500 — the stored held-out games
of `pool.py` — by (board, seed): F1, completion, shots, ΔF1 with a 95% percentile bootstrap CI
and McNemar's exact test on the completions (`bsjax.core.stats`: 10,000 resamples, seed 0), and
the wall seconds of the blocks played; a look-ahead row is also paired with bayes at its own
particle count where that was played. `--sampler exact` plays on the exact posterior instead
(every placement scored every turn, 500 exact samples for the searches; `belief-exact/`), and
its rows are also paired with the look-ahead captain at P = 4,000, γ = 0.85 on the same games.
`--random N` plays the first N boards of `random_suite(5000, seed 0)` instead, one game each,
in blocks of 500 boards (`random-b<first board>.csv.gz`), paired with bayes's stored games on those boards
(`random-games.csv.gz`, boards 0-999; `random-1000-4999-games.csv.gz`, 1,000-4,999).
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np
import pandas as pd

from bsjax.battleship.agents.lookahead import LookaheadAgent
from bsjax.battleship.config import PAPER
from bsjax.battleship.game import suites
from bsjax.battleship.harness import api
from bsjax.core.stats import mcnemar_exact, paired_bootstrap

HERE = pathlib.Path(__file__).parent
FIRST, LAST = 100, 399  # held-out seed indices
HELDOUT = ("heldout-games.csv.gz", "heldout-200-games.csv.gz", "heldout-300-games.csv.gz")
TABLE = HERE / "belief-size-table.md"


def folder_for(particles: int, gamma: float | None, sampler: str = "particles") -> pathlib.Path:
    belief = "exact" if sampler == "exact" else f"P{particles}"
    return HERE / (f"belief-{belief}" + ("" if gamma is None else f"-gamma{gamma:g}"))


def _play_block(path: pathlib.Path, agent: str, particles: int, gamma: float | None,
                first: int, sampler: str = "particles", **games_of) -> None:
    """One block of games (`games_of`: `api.play`'s boards/seeds or truths), written whole to
    `path` or not at all; skipped if `path` exists (a resumed run)."""
    if path.exists():
        return
    captain = LookaheadAgent(PAPER) if agent == "lookahead" else "bayes"
    start = time.time()
    games = api.play(captain, sampler=sampler, particles=particles, progress=False,
                     params=None if gamma is None else {"gamma": gamma}, **games_of).to_pandas()
    wall = time.time() - start
    games = games.drop(columns=[c for c in ("gamma",) if c in games.columns])
    if "truths" in games_of:  # random boards are named T0000... within their block
        games["board_index"] = first + games.board.str[1:].astype(int)
    tmp = path.with_suffix(".tmp")
    games.assign(agent=agent, sampler=sampler, particles=particles, block=first,
                 wall_s=round(wall, 1)).to_csv(tmp, index=False, compression="gzip")
    tmp.rename(path)  # a block is there whole or not at all
    print(f"{agent} {sampler} P={particles} {path.name}: {len(games)} games, "
          f"F1 {games.f1.mean():.4f}, {wall:.0f} s", flush=True)


def play(agent: str, particles: int, block: int, gamma: float | None = None,
         first_seed: int = FIRST, last_seed: int = LAST, sampler: str = "particles") -> None:
    """Every missing block of `agent`'s held-out games at `particles` (and `gamma`) on
    `sampler`'s belief whose first seed index is in `first_seed .. last_seed` (two processes
    can split the seeds)."""
    folder = folder_for(particles, gamma, sampler)
    folder.mkdir(exist_ok=True)
    for first in range(FIRST, LAST + 1, block):
        if not first_seed <= first <= last_seed:
            continue
        _play_block(folder / f"{agent}-s{first}.csv.gz", agent, particles, gamma, first, sampler,
                    boards="all", seeds=min(block, LAST + 1 - first), first_seed=first,
                    batch_size=54)


def play_random(agent: str, particles: int, boards: int, gamma: float | None = None,
                block: int = 500, first_board: int = 0) -> None:
    """Every missing block of `agent`'s games on random boards `first_board` to `boards - 1`
    (two processes can share the boards between them)."""
    folder = folder_for(particles, gamma)
    folder.mkdir(exist_ok=True)
    truths = np.array([b.spans for b in suites.random_suite(5000, 0, PAPER)])[:boards]
    for first in range(first_board - first_board % block, boards, block):
        _play_block(folder / f"{agent}-random-b{first}.csv.gz", agent, particles, gamma, first,
                    truths=truths[first:first + block], seeds=1, batch_size=250)


def _played(pattern: str):
    """`(label, games)` of every captain's blocks matching `pattern` (`{agent}` in it), per
    belief folder: "lookahead P=4000, γ=0.9" and so on."""
    for folder in sorted(HERE.glob("belief-*")):
        setting = folder.name[len("belief-"):].replace("-gamma", ", γ=").replace("P", "P=", 1)
        for agent in ("bayes", "lookahead"):
            blocks = sorted(folder.glob(pattern.format(agent=agent)))
            if blocks:
                yield f"{agent} {setting}", pd.concat(pd.read_csv(b) for b in blocks)


def random_table() -> str:
    """Each captain played on random boards, paired with bayes P = 500 by board index."""
    first = pd.read_csv(HERE / "random-games.csv.gz").assign(offset=0)
    rest = pd.read_csv(HERE / "random-1000-4999-games.csv.gz").assign(offset=1000)
    stored = pd.concat([first, rest])
    stored["board_index"] = stored.offset + stored.board.str[1:].astype(int)
    bayes = stored[(stored.gamma.round(2) == 0.95) & (stored.margin > 1)].set_index("board_index")
    lines = []
    for label, games in _played("{agent}-random-b*.csv.gz"):
        games = games.set_index("board_index").sort_index()
        paired = bayes.loc[games.index]
        d = paired_bootstrap(games.f1.to_numpy(), paired.f1.to_numpy())
        m = mcnemar_exact(games.won.to_numpy(), paired.won.to_numpy())
        lines.append(f"| {label} | {len(games)} | {games.f1.mean():.4f} "
                     f"({paired.f1.mean():.4f}) | {games.won.mean():.1%} "
                     f"({paired.won.mean():.1%}) | {d.mean:+.4f} [{d.low:+.4f}, {d.high:+.4f}] "
                     f"| {m.only_a} / {m.only_b} (p = {m.p_value:.2g}) "
                     f"| {games.groupby('block').wall_s.first().sum():.0f} |")
    if not lines:
        return ""
    return ("\nRandom boards of the paper fleet (`random_suite(5000, seed 0)`), one game each, "
            "paired with bayes P=500 by board\n\n| captain | boards | F1 (bayes P=500) "
            "| completion (bayes P=500) | ΔF1 vs bayes P=500 [95% CI] "
            "| completed only by it / by bayes (McNemar p) | wall s |\n"
            "|---|---|---|---|---|---|---|\n" + "\n".join(lines) + "\n")


def stored_p500() -> dict[str, pd.DataFrame]:
    """Bayes and the default captain at P = 500, seeds 100-399 (the files `pool.py` reads)."""
    games = pd.concat([pd.read_csv(HERE / f) for f in HELDOUT])
    look = games[(games.gamma.round(2) == 0.85) & (games.margin.round(2) == 0.2)]
    bayes = games[(games.gamma.round(2) == 0.95) & (games.margin > 1)]
    return {"bayes P=500": bayes.assign(block=0, wall_s=float("nan")),
            "lookahead P=500": look.assign(block=0, wall_s=float("nan"))}


def table() -> str:
    rows = stored_p500()
    rows.update(_played("{agent}-s[0-9]*.csv.gz"))
    base = rows["bayes P=500"].set_index(["board", "seed"]).sort_index()
    lines = ["Paper protocol, particle belief (4 sweeps), 18 boards, held-out seed indices "
             "100-399; each row paired with bayes at P = 500 on the games it played", "",
             "| captain | games | F1 | completion | shots | ΔF1 vs bayes P=500 [95% CI] "
             "| completed only by it / by bayes (McNemar p) | ΔF1 vs bayes, same P [95% CI] "
             "| wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for label, games in rows.items():
        games = games.set_index(["board", "seed"]).sort_index()
        assert games.index.is_unique
        paired = base.loc[games.index]
        if label == "bayes P=500":
            change, completion = "–", "–"
        else:
            d = paired_bootstrap(games.f1.to_numpy(), paired.f1.to_numpy())
            m = mcnemar_exact(games.won.to_numpy(), paired.won.to_numpy())
            change = f"{d.mean:+.4f} [{d.low:+.4f}, {d.high:+.4f}]"
            completion = f"{m.only_a} / {m.only_b} (p = {m.p_value:.2g})"
        same = rows.get("bayes " + label.split(" ")[1].rstrip(","))
        if label.startswith("lookahead") and same is not None:
            same = same.set_index(["board", "seed"]).sort_index()
            common = games.index.intersection(same.index)
            d = paired_bootstrap(games.f1.loc[common].to_numpy(), same.f1.loc[common].to_numpy())
            versus_same = f"{d.mean:+.4f} [{d.low:+.4f}, {d.high:+.4f}] ({len(common)} games)"
        else:
            versus_same = "–"
        wall = games.groupby("block").wall_s.first().sum() if games.wall_s.notna().all() \
            else float("nan")
        lines.append(f"| {label} | {len(games)} | {games.f1.mean():.4f} | {games.won.mean():.1%} "
                     f"| {games.shots.mean():.2f} | {change} | {completion} | {versus_same} | "
                     + ("–" if wall != wall else f"{wall:.0f}") + " |")
    return "\n".join(lines) + "\n" + exact_table(rows) + random_table()


def exact_table(rows: dict[str, pd.DataFrame]) -> str:
    """Each captain on the exact posterior against the look-ahead captain at P = 4,000,
    γ = 0.85, on the games it played."""
    reference = "lookahead P=4000, γ=0.85"
    if reference not in rows:
        return ""
    base = rows[reference].set_index(["board", "seed"]).sort_index()
    lines = []
    for label, games in rows.items():
        if "exact" not in label:
            continue
        games = games.set_index(["board", "seed"]).sort_index()
        paired = base.loc[games.index]
        d = paired_bootstrap(games.f1.to_numpy(), paired.f1.to_numpy())
        m = mcnemar_exact(games.won.to_numpy(), paired.won.to_numpy())
        seeds = games.index.get_level_values("seed")
        lines.append(f"| {label} | {len(games)} (seeds {seeds.min()}-{seeds.max()}) "
                     f"| {games.f1.mean():.4f} ({paired.f1.mean():.4f}) | {games.won.mean():.1%} "
                     f"({paired.won.mean():.1%}) | {d.mean:+.4f} [{d.low:+.4f}, {d.high:+.4f}] "
                     f"| {m.only_a} / {m.only_b} (p = {m.p_value:.2g}) "
                     f"| {games.groupby('block').wall_s.first().sum():.0f} |")
    if not lines:
        return ""
    return (f"\nOn the exact posterior, paired with {reference} on the same games\n\n"
            f"| captain | games | F1 ({reference}) | completion ({reference}) "
            f"| ΔF1 vs {reference} [95% CI] | completed only by it / by the other (McNemar p) "
            "| wall s |\n|---|---|---|---|---|---|---|\n" + "\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", choices=("lookahead", "bayes"), default="lookahead")
    parser.add_argument("--particles", type=int, default=None,
                        help="particles (4000), or with --sampler exact the exact samples of "
                             "the searches (500)")
    parser.add_argument("--sampler", choices=("particles", "exact"), default="particles")
    parser.add_argument("--gamma", type=float, default=None,
                        help="the ask threshold γ (default: the agent's own)")
    parser.add_argument("--block", type=int, default=25, help="seed indices per block")
    parser.add_argument("--random", type=int, default=0,
                        help="the first N random boards instead of the suite's seeds")
    parser.add_argument("--first-board", type=int, default=0,
                        help="with --random: start at this board (another process plays the rest)")
    parser.add_argument("--seed-range", default=f"{FIRST}-{LAST}",
                        help="play only the blocks starting in this range of held-out seed "
                             "indices, e.g. 250-399 (another process plays the rest)")
    parser.add_argument("--table-only", action="store_true", help="play nothing")
    args = parser.parse_args()
    particles = (args.particles if args.particles is not None
                 else 500 if args.sampler == "exact" else 4000)
    if not args.table_only:
        if particles < 1 or args.block < 1:
            raise SystemExit("--particles and --block must be at least 1")
        if not 0 <= args.random <= 5000:
            raise SystemExit("--random takes 0..5000 boards")
        if args.sampler == "exact" and args.random:
            raise SystemExit("--sampler exact plays the held-out seeds only")
        if args.random:
            play_random(args.agent, particles, args.random, args.gamma,
                        first_board=args.first_board)
        else:
            low, _, high = args.seed_range.partition("-")
            if not (low.isdigit() and high.isdigit() and FIRST <= int(low) <= int(high) <= LAST):
                raise SystemExit(f"--seed-range takes A-B within {FIRST}-{LAST}")
            play(args.agent, particles, args.block, args.gamma, int(low), int(high),
                 args.sampler)
    TABLE.write_text(table())
    print(TABLE.read_text(), end="")


if __name__ == "__main__":
    main()
