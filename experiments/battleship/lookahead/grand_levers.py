"""Levers for bayes on Grand et al.'s protocol, on training seeds, paired with bayes.

    python experiments/battleship/lookahead/grand_levers.py            # seeds 0-11, 216 games

Grand's boards (colour and sunk feedback, noiseless answers), importance belief with
P = 1,000, training seed indices 0-11. Every lever is played on the same games as bayes:

- `run_seed`: no lever, bayes itself with run seeds 1-5 (other random draws on the same boards
  and seeds): how far a row may stray from bayes's by chance alone;
- `answer_noise`: the ε of the captain's answer model (bayes's 0.1 is Grand's), lower because
  the environment's answers are noiseless, and higher (a less confident belief asks more; one
  compiled sweep);
- `probe`: a question about the one cell bayes is about to shoot ("is there a ship at D4?"),
  asked instead of the shot when its hit probability is below θ and a question is left; a
  noiseless answer turns a possible miss into a question;
- `pool`: bayes's candidate questions widened by every axis-aligned rectangle of at most 9
  cells (751 regions), or by every rectangle (1,296), on top of its DSL pool of 339;
- `lines`: the pool widened by each hit cell's horizontal and vertical unshot neighbours, within
  1 or 2 cells (two regions a hit cell and reach: "is the ship at D4 horizontal?", roughly);
  the misses next to a wounded ship are the largest class of bayes's (`grand-misses.md`);
- `gamma_noise`: bayes's γ (0.97, 1.0, 1.03) crossed with the answer model's ε (0.1, 0.001);
- `pressure`: γ moved by the questions left per ship cell still unhit, ρ:
  γ + β (ρ − 1.2), β from −0.05 to 0.2 (β = 0 is bayes; 1.2 is about 15 questions over a
  board's 12.6 cells);
- `phase`: one γ while a ship is hit and not yet sunk, another while none is (questions
  asked while a ship is wounded find cells that shots near it would find anyway);
- `hit_gain`: questions scored by EIG + λ (E[max p | answer] − max p), the gain of the next
  shot's hit probability added to the information (λ = 1000: the gain alone; λ of ±0.01 and
  ±0.1: a small nudge either way among questions of about the same information);
- `occupancy`: questions scored by EIG + λ U, with U the expected drop of the unknown cells'
  occupancy uncertainty (Σ H_b(p), Σ min(p, 1 − p), or the cells with 0.1 < p < 0.9): bits
  about where the ships are rather than which is which, since a hit's colour tells that;
- `shot_info`: bayes's shot moved to the unshot cell of the largest p + κ I, with I the
  colour information of a hit there (p H(colour | hit)) or, `full`, the whole outcome's
  (H_b(p) + p H(colour | hit)): on Grand's boards a hit tells which ship it is;
- `questions`: the question budget raised from 15 to 25, 40 and 64, at γ 0.95 and 1.0 (not a
  captain for Grand's game, which allows 15: how much more questions would be worth).

The captains are in `lever_agents.py` beside this script. Writes `grand-levers-216-games.csv.gz`
and `grand-levers-216-table.md` beside this file (ΔF1 by `bsjax.core.stats.paired_bootstrap`);
`--table-only` rebuilds the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import time
from unittest import mock

import numpy as np
import pandas as pd
from lever_agents import (  # the module beside this script
    LinesAgent,
    OccupancyAgent,
    PhaseAgent,
    PressureAgent,
    ProbeAgent,
    ShotInfoAgent,
    WidePoolAgent,
    information_and_hit_gain,
)

from bsjax.battleship import config
from bsjax.battleship.agents import bayes
from bsjax.battleship.config import GRAND
from bsjax.battleship.harness import api
from bsjax.core.stats import paired_bootstrap

HERE = pathlib.Path(__file__).parent
GAMES, TABLE = HERE / "grand-levers-216-games.csv.gz", HERE / "grand-levers-216-table.md"
SEEDS = 12
SETUP = dict(protocol="grand", sampler="importance", particles=1000, boards="all", seeds=SEEDS,
             batch_size=54, progress=False)


LEVERS = ("run_seed", "answer_noise", "probe", "pool", "lines", "gamma_noise", "pressure",
          "phase", "hit_gain", "occupancy", "shot_info", "questions")


def play(levers=LEVERS) -> None:
    """The games (and wall seconds) of `levers` to GAMES, replacing theirs already there."""
    frames = []

    def add(lever, value, frame, start):
        frames.append(frame.assign(lever=lever, value=value, wall_s=round(time.time() - start)))

    if "run_seed" in levers:
        for run_seed in range(1, 6):
            start = time.time()
            frame = api.play("bayes", **SETUP, run_seed=run_seed).to_pandas()
            add("run_seed: bayes itself, run seed", run_seed, frame, start)
    if "answer_noise" in levers:
        start = time.time()
        sweep = api.play("bayes", params={"answer_noise": [0.1, 0.03, 0.01, 0.001, 0.15, 0.2,
                                                          0.3]},
                         **SETUP).to_pandas()
        for value, frame in sweep.groupby("answer_noise"):
            add("answer_noise", value, frame.drop(columns="answer_noise"), start)
    if "probe" in levers:
        start = time.time()
        probes = api.play(ProbeAgent(GRAND), params={"probe": [0.45, 0.6]}, **SETUP).to_pandas()
        for value, frame in probes.groupby("probe"):
            add("probe", value, frame.drop(columns="probe"), start)
    if "pool" in levers:
        for cells in (9, 64):
            start = time.time()
            frame = api.play(WidePoolAgent(GRAND, max_cells=cells), **SETUP).to_pandas()
            add("pool: rectangles up to cells", cells, frame, start)
    if "lines" in levers:
        for reach in (1, 2):
            start = time.time()
            frame = api.play(LinesAgent(GRAND, reach=reach), **SETUP).to_pandas()
            add("lines: reach", reach, frame, start)
    if "gamma_noise" in levers:
        start = time.time()
        sweep = api.play("bayes", params={"answer_noise": [0.1, 0.001],
                                          "gamma": [0.97, 1.0, 1.03]}, **SETUP).to_pandas()
        for (noise, gamma), frame in sweep.groupby(["answer_noise", "gamma"]):
            add(f"gamma_noise: answer_noise {noise:g}, gamma", gamma,
                frame.drop(columns=["answer_noise", "gamma"]), start)
    if "pressure" in levers:
        start = time.time()
        sweep = api.play(PressureAgent(GRAND), params={"beta": [-0.05, 0.05, 0.1, 0.2]},
                         **SETUP).to_pandas()
        for value, frame in sweep.groupby("beta"):
            add("pressure: beta", value, frame.drop(columns="beta"), start)
    if "phase" in levers:
        start = time.time()
        sweep = api.play(PhaseAgent(GRAND), params={"gamma": [0.95, 1.0],
                                                    "gamma_wounded": [0.85, 0.9, 0.95, 1.0]},
                         **SETUP).to_pandas()
        for (gamma, wounded), frame in sweep.groupby(["gamma", "gamma_wounded"]):
            if not (np.isclose(gamma, 0.95) and np.isclose(wounded, 0.95)):  # bayes
                add(f"phase: gamma {gamma:g}, gamma_wounded", wounded,
                    frame.drop(columns=["gamma", "gamma_wounded"]), start)
    if "hit_gain" in levers:
        start = time.time()
        sweep = api.play(bayes.BayesAgent(GRAND, rule=information_and_hit_gain),
                         params={"lam": [0.5, 2.0, 8.0, 1000.0, -0.1, -0.01, 0.01, 0.1]},
                         **SETUP).to_pandas()
        for value, frame in sweep.groupby("lam"):
            add("hit_gain: lambda", value, frame.drop(columns="lam"), start)
    if "occupancy" in levers:
        start = time.time()
        sweep = api.play(OccupancyAgent(GRAND),
                         params={"lam": [0.003, 0.01, 0.03, 0.1, 1.0, 1000.0],
                                 "uncertainty": [0.0, 1.0, 2.0]}, **SETUP).to_pandas()
        names = {0.0: "entropy", 1.0: "min(p, 1-p)", 2.0: "undecided cells"}
        for (kind, lam), frame in sweep.groupby(["uncertainty", "lam"]):
            add(f"occupancy: {names[kind]}, lambda", lam,
                frame.drop(columns=["uncertainty", "lam"]), start)
    if "shot_info" in levers:
        start = time.time()
        sweep = api.play(ShotInfoAgent(GRAND), params={"kappa": [0.02, 0.05, 0.15, 0.4],
                                                      "full": [0.0, 1.0]}, **SETUP).to_pandas()
        for (full, kappa), frame in sweep.groupby(["full", "kappa"]):
            add(f"shot_info: {'outcome' if full else 'colour'}, kappa", kappa,
                frame.drop(columns=["kappa", "full"]), start)
    if "questions" in levers:
        for budget in (25, 40, 64):
            start = time.time()
            grand = dataclasses.replace(GRAND, max_questions=budget)
            # The harness builds its game from the protocol's name: the raised budget is
            # swapped in for these games only.
            with mock.patch.dict(config.PROTOCOLS, {"grand": grand}):
                sweep = api.play(bayes.BayesAgent(grand), params={"gamma": [0.95, 1.0]},
                                 **SETUP).to_pandas()
            for gamma, frame in sweep.groupby("gamma"):
                add(f"questions: budget {budget}, gamma", gamma, frame.drop(columns="gamma"), start)
    if GAMES.exists():  # the other levers' games stay
        kept = pd.read_csv(GAMES)
        frames.insert(0, kept[~kept.lever.str.split(":").str[0].isin(levers)])
    pd.concat(frames).to_csv(GAMES, index=False)


def table() -> str:
    """The paired table of GAMES (bayes: answer_noise 0.1), the levers in `LEVERS` order."""
    order = {lever: i for i, lever in enumerate(LEVERS)}
    games = pd.read_csv(GAMES)
    games = games.sort_values("lever", key=lambda s: s.str.split(":").str[0].map(order),
                              kind="stable")
    key = ["board", "seed"]
    base = games[(games.lever == "answer_noise") & np.isclose(games.value, 0.1)]
    base = base.set_index(key).sort_index()
    lines = [f"Grand protocol, importance belief P = 1000, training seeds 0-{SEEDS - 1}, "
             f"{len(base)} paired games; bayes is answer_noise 0.1", "",
             "| lever | value | F1 | completion | shots | questions | ΔF1 vs bayes [95% CI] "
             "| wall s |", "|---|---|---|---|---|---|---|---|"]
    for (lever, value), g in games.groupby(["lever", "value"], sort=False):
        g = g.set_index(key).sort_index()
        assert g.index.equals(base.index)
        delta = paired_bootstrap(g.f1.to_numpy(), base.f1.to_numpy())
        lines.append(f"| {lever} | {value:g} | {g.f1.mean():.4f} | {g.won.mean():.1%} "
                     f"| {g.shots.mean():.2f} | {g.questions.mean():.2f} "
                     f"| {delta.mean:+.4f} [{delta.low:+.4f}, {delta.high:+.4f}] "
                     f"| {g.wall_s.iloc[0]} |")
    return "\n".join(lines) + "\n"


def _parser(doc: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--table-only", action="store_true",
                        help="rebuild the table from the committed games; play nothing")
    return parser


def _write(make_table, table_path: pathlib.Path) -> None:
    table_path.write_text(make_table())
    print(table_path.read_text(), end="")


def table_cli(doc: str, play_all, make_table, table_path: pathlib.Path) -> None:
    """The command line of a script with one table: play (unless `--table-only`), then write
    and print the table."""
    if not _parser(doc).parse_args().table_only:
        play_all()
    _write(make_table, table_path)


def lever_cli(doc: str, levers, play_levers, make_table, table_path: pathlib.Path) -> None:
    """The command line of a lever script: play some `levers` (the others' games stay), then
    write and print the table."""
    parser = _parser(doc)
    parser.add_argument("--levers", default=",".join(levers),
                        help=f"play only these of {', '.join(levers)} (the others' games stay)")
    args = parser.parse_args()
    chosen = tuple(args.levers.split(","))
    if not set(chosen) <= set(levers):
        raise SystemExit(f"--levers takes some of {', '.join(levers)}")
    if not args.table_only:
        play_levers(chosen)
    _write(make_table, table_path)


def main() -> None:
    lever_cli(__doc__, LEVERS, play, table, TABLE)


if __name__ == "__main__":
    main()
