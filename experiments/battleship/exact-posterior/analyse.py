"""Pair the exact-belief games with the particle games and write the comparison.

    python experiments/battleship/exact-posterior/analyse.py

Reads `runs/{greedy,bayes}-particles/games.jsonl` and every finished chunk
`runs/{greedy,bayes}-exact/s*/`, pairs the games by (board, seed index), and writes
`paired.csv` (one row per agent: n, mean F1 of each belief, ΔF1 = exact − particles with its
95% bootstrap interval, completion and McNemar's exact test) and `timing.csv` (per exact
chunk, and the particle runs for comparison: run seconds without compilation, per game-turn
and per batch turn of 54 games; the particle runs play 540 games in batches of 54). Prints
both.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from bsjax.core.stats import mcnemar_exact, paired_bootstrap

HERE = Path(__file__).parent
RUNS = HERE / "runs"


def _games(folder: Path) -> dict[tuple[str, int], dict]:
    rows = [json.loads(line) for line in (folder / "games.jsonl").read_text().splitlines()
            if line.strip()]
    return {(r["board"], r["seed"]): r for r in rows}


def _chunks(agent: str) -> list[Path]:
    return sorted((p for p in (RUNS / f"{agent}-exact").glob("s*")
                   if (p / "summary.json").exists()), key=lambda p: int(p.name[1:]))


def main() -> None:
    paired, timing = [], []
    for agent in ("greedy", "bayes"):
        chunks = _chunks(agent)
        if not chunks:
            continue
        particles = _games(RUNS / f"{agent}-particles")
        exact_games: dict = {}
        for chunk in [RUNS / f"{agent}-particles"] + chunks:
            games = _games(chunk)
            if chunk.parent == RUNS / f"{agent}-exact":
                exact_games.update(games)
            summary = json.loads((chunk / "summary.json").read_text())
            run_seconds = summary["seconds"] - summary["compile_seconds"]
            turns = sum(g["turns"] for g in games.values())
            batch_turns = max(g["turns"] for g in games.values())
            timing.append(dict(
                agent=agent, run=str(chunk.relative_to(RUNS)), games=len(games),
                run_seconds=round(run_seconds, 2),
                compile_seconds=round(summary["compile_seconds"], 2), game_turns=turns,
                ms_per_game_turn=round(1e3 * run_seconds / turns, 1),
                s_per_batch_turn=round(run_seconds / (-(-len(games) // 54) * batch_turns), 3)))
        keys = sorted(k for k in exact_games if k in particles)
        f1_exact = np.asarray([exact_games[k]["f1"] for k in keys])
        f1_particles = np.asarray([particles[k]["f1"] for k in keys])
        won_exact = np.asarray([exact_games[k]["won"] for k in keys])
        won_particles = np.asarray([particles[k]["won"] for k in keys])
        delta = paired_bootstrap(f1_exact, f1_particles)
        test = mcnemar_exact(won_exact, won_particles)
        q = lambda rows: np.mean([rows[k]["questions"] for k in keys])  # noqa: E731
        s = lambda rows: np.mean([rows[k]["shots"] for k in keys])  # noqa: E731
        paired.append(dict(
            agent=agent, games=len(keys), seeds=f"{len(chunks) * 3} of 30 per board",
            f1_exact=round(float(f1_exact.mean()), 4),
            f1_particles=round(float(f1_particles.mean()), 4),
            delta_f1=round(delta.mean, 4), delta_low=round(delta.low, 4),
            delta_high=round(delta.high, 4),
            completion_exact=round(float(won_exact.mean()), 4),
            completion_particles=round(float(won_particles.mean()), 4),
            only_exact=test.only_a, only_particles=test.only_b,
            mcnemar_p=float(f"{test.p_value:.3g}"),
            shots_exact=round(float(s(exact_games)), 2),
            shots_particles=round(float(s(particles)), 2),
            questions_exact=round(float(q(exact_games)), 2),
            questions_particles=round(float(q(particles)), 2)))
    for name, rows in (("paired.csv", paired), ("timing.csv", timing)):
        if not rows:
            continue
        with open(HERE / name, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(name)
        for row in rows:
            print("  ", row)


if __name__ == "__main__":
    main()
