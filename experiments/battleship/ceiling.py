"""The information ceiling of the paper protocol, and the placement counts of Grand's boards.

Writes OUT/ceiling.json (every figure), OUT/README.md (the tables) and OUT/ledger.csv: the
information ledger of every game of greedy, WMA, MRA and bayes on the paper's 18 boards
(`--ledger-seeds` seed indices each, particle belief). See the docs page "How close to optimal"
for the derivation; `bsjax.battleship.report.ceiling` computes it.

    python experiments/battleship/ceiling.py --out experiments/battleship/ceiling
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
from pathlib import Path

import pandas as pd

import bsjax
from bsjax.battleship.config import GRAND, PAPER
from bsjax.battleship.game import suites
from bsjax.battleship.report import ceiling

# (label, questions, epsilon) of the paper protocol's ceiling table.
SETTINGS = (("the protocol", PAPER.max_questions, PAPER.epsilon),
            ("noiseless answers", PAPER.max_questions, 0.0),
            ("no questions", 0, PAPER.epsilon))


LEDGER_AGENTS = ("greedy", "wma", "mra", "bayes")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ledger-seeds", type=int, default=3)
    args = parser.parse_args(argv)
    count = ceiling.placement_count(PAPER)
    cells = sum(PAPER.fleet)
    paper = []
    for label, questions, epsilon in SETTINGS:
        shots = ceiling.shot_floor(count.board_entropy_bits, cells, questions, epsilon)
        paper.append({"setting": label, "questions": questions, "epsilon": epsilon,
                      "question_bits": questions * ceiling.question_capacity(epsilon),
                      "shot_floor": shots, "f1_ceiling": ceiling.f1_ceiling(cells, shots)})
    multisets = collections.Counter(tuple(sorted(b.ship_lengths, reverse=True))
                                    for b in suites.grand_suite())
    grand = []
    for lengths, boards in sorted(multisets.items()):
        c = ceiling.placement_count(GRAND, lengths)
        grand.append({"lengths": list(lengths), "suite_boards": boards, **dataclasses.asdict(c),
                      "placement_entropy_bits": c.placement_entropy_bits})
    ledgers, ledger_summary = [], []
    for agent in LEDGER_AGENTS:
        played = bsjax.play(agent, boards="all", seeds=args.ledger_seeds, progress=False)
        frame = ceiling.ledger(played.turns_frame(), PAPER).merge(
            played.to_pandas()[["board", "seed", "f1", "won", "shots", "questions"]],
            on=["board", "seed"])
        frame.insert(0, "agent", agent)
        ledgers.append(frame)
        won = frame[frame["won"]]
        ledger_summary.append({"agent": agent, "games": len(frame), "won": len(won),
                               "shot_bits": float(frame["shot_bits"].mean()),
                               "question_bits": float(frame["question_bits"].mean()),
                               "share": float(frame["share"].mean()),
                               "share_won": float(won["share"].mean()) if len(won) else None,
                               "shots_won": float(won["shots"].mean()) if len(won) else None})
    result = {"paper": {"fleet": list(PAPER.fleet), "ship_cells": cells,
                        **dataclasses.asdict(count),
                        "placement_entropy_bits": count.placement_entropy_bits,
                        "ceilings": paper},
              "grand": grand, "ledger": ledger_summary,
              "command": (f"python experiments/battleship/ceiling.py --out {args.out} "
                          f"--ledger-seeds {args.ledger_seeds}")}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ceiling.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = ["# The information ceiling", "",
             f"`{result['command']}` (the derivation: docs/battleship/ceiling.md).", "",
             f"Paper fleet {tuple(PAPER.fleet)} on 8 x 8: {count.placements:,} placements, "
             f"{count.boards:,} distinct boards, H(board) = {count.board_entropy_bits:.3f} bits "
             f"(log2 of the placements: {count.placement_entropy_bits:.3f}).", "",
             "| setting | Q | epsilon | question bits | least mean shots | F1 ceiling |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['setting']} | {r['questions']} | {r['epsilon']} | {r['question_bits']:.2f} "
              f"| {r['shot_floor']:.2f} | {r['f1_ceiling']:.3f} |" for r in paper]
    lines += ["", "Grand et al.'s boards by length multiset (no ceiling: colour and sunk "
              "feedback tell more than the bound counts):", "",
              "| lengths | boards | placements | distinct boards | H(board) bits |",
              "|---|---|---|---|---|"]
    lines += [f"| {tuple(r['lengths'])} | {r['suite_boards']} | {r['placements']:,} | "
              f"{r['boards']:,} | {r['board_entropy_bits']:.3f} |" for r in grand]
    lines += ["", f"Information ledger, {args.ledger_seeds} seed indices x 18 boards per agent, "
              "particle belief (means; `ledger.csv` has every game):", "",
              "| agent | games | won | shot bits | question bits (at most) | share of H(board) "
              "| share, won games | shots, won games |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['agent']} | {r['games']} | {r['won']} | {r['shot_bits']:.2f} | "
              f"{r['question_bits']:.2f} | {r['share']:.3f} | {r['share_won']:.3f} | "
              f"{r['shots_won']:.1f} |" for r in ledger_summary]
    (args.out / "README.md").write_text("\n".join(lines) + "\n")
    pd.concat(ledgers).to_csv(args.out / "ledger.csv", index=False, float_format="%.6g")
    print(json.dumps(paper, indent=2))
    return result


if __name__ == "__main__":
    main()
