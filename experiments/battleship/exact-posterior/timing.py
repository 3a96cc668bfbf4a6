"""Wall time of one exact-belief update (and of its posterior samples) for G games at once.

    python experiments/battleship/exact-posterior/timing.py [G ...] [--only SITUATION]
        [--repeat N] [--out FILE]

Every game of the batch holds the same evidence (the loop's work is set by the batch's largest
count, so a batch of different games costs what its least-informed game costs). Situations:
the start (no evidence), three questions and no shot (what bayes faces on its first turns),
and shot evidence of a game under way. Each is compiled once, then timed over `--repeat` calls
(3; the median); the rows go to `--out` (`timing_update.csv`).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.battleship.belief.enumerated import ExactSampler
from bsjax.battleship.config import PAPER
from bsjax.battleship.game import bitboard, rules

HERE = Path(__file__).parent
ROW = lambda r: list(range(8 * r, 8 * r + 8))  # noqa: E731

SITUATIONS = {
    "start": dict(),
    "3 questions": dict(questions=[(ROW(0) + ROW(1), False), (ROW(3) + ROW(4), True),
                                   (list(range(0, 64, 8)), False)]),
    "2 hits, 5 misses": dict(hits=[27, 28], misses=[0, 9, 18, 45, 50]),
    "5 hits, 12 misses, 6 questions": dict(
        hits=[27, 28, 29, 40, 48], misses=[0, 9, 18, 45, 50, 3, 12, 21, 54, 63, 36, 7],
        questions=[(ROW(r), r % 2 == 0) for r in range(6)]),
}


def _bits(cells):
    mask = np.zeros(64, bool)
    mask[list(cells)] = True
    return bitboard.pack_np(mask)


def observations(hits=(), misses=(), questions=()):
    obs = rules.empty_observations(PAPER, np.asarray(PAPER.fleet, np.int32))
    qbits = np.zeros((PAPER.max_questions, PAPER.n_words), np.uint32)
    answers = np.zeros(PAPER.max_questions, bool)
    for j, (region, answer) in enumerate(questions):
        qbits[j], answers[j] = _bits(region), answer
    return obs.replace(hit_bits=_bits(hits), miss_bits=_bits(misses), question_bits=qbits,
                       answers=answers, n_questions=np.int32(len(questions)))


def _median_seconds(fn, *args, repeat: int = 3) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(sizes: list[int], only: str | None, repeat: int, out: Path) -> None:
    sampler = ExactSampler(PAPER)
    update = jax.jit(jax.vmap(lambda k, o: sampler.init(k, o, jnp.int32(0))))
    samples = jax.jit(jax.vmap(sampler.weighted_particles))
    rows = []
    for games in sizes:
        keys = jax.random.split(jax.random.key(0), games)
        for name, evidence in SITUATIONS.items():
            if only is not None and name != only:
                continue
            obs = jax.tree.map(lambda x: jnp.broadcast_to(jnp.asarray(x), (games,) + np.shape(x)),
                               observations(**evidence))
            seconds = _median_seconds(update, keys, obs, repeat=repeat)
            state = update(keys, obs)
            sample_seconds = _median_seconds(samples, state, repeat=repeat)
            rows.append(dict(games=games, situation=name, update_s=round(seconds, 3),
                             update_ms_per_game=round(1e3 * seconds / games, 1),
                             samples_s=round(sample_seconds, 3),
                             samples_ms_per_game=round(1e3 * sample_seconds / games, 1),
                             device=str(jax.devices()[0])))
            print(rows[-1], flush=True)
    with open(out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("games", type=int, nargs="*", default=[54])
    parser.add_argument("--only", choices=list(SITUATIONS), default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "timing_update.csv")
    args = parser.parse_args()
    main(args.games, args.only, args.repeat, args.out)
