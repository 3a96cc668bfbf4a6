"""How much a captain must learn, and the best F1 that information allows.

A game hides one placement of the fleet. `placement_count` counts the legal placements exactly
(labelled ships, no overlaps, touching allowed) and the entropy of the hidden *board* (the
occupied cells, which is what a captain must find): under the uniform prior over labelled
placements, several placements can occupy the same cells (a straight run of 7 cells is 5 + 2 or
2 + 5 or 4 + 3 or 3 + 4), so the board's entropy is a little below log2 of the count.

The bound (derived in the docs, "How close to optimal"). With hit/miss feedback, shot t tells at most
H_b(p_t) bits (p_t: the captain's probability of a hit), and a question answered through a binary
symmetric channel of flip probability ε at most C = 1 - H_b(ε). A captain that wins has learned
the board, so E[Σ_t H_b(p_t)] + Q · C ≥ H(board). For a game won in S shots, Σ_t H_b(p_t) ≤
S · H_b(T / S) (concavity, T ship cells hit in S shots), so S · H_b(T / S) ≥ H(board) - Q · C:
`shot_floor` is the least such S, and a won game's F1 is 2T / (T + S) at best (precision T / S,
recall 1), `f1_ceiling`. The bound assumes anonymous hits: colour and sunk feedback (Grand's
protocol) tell more than H_b(p_t) per shot, and this bound does not cover them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import spans as spans_lib

_CHUNK = 1 << 22  # (partial board, span) pairs examined at once
# H(board) of fleets already counted (rows, cols, lengths) -> bits, so that a report does not
# count 21 million placements again; `tests/test_ceiling.py` recomputes the entry.
KNOWN_BOARD_ENTROPY = {(8, 8, (5, 4, 3, 2)): 24.170979466352378}


@dataclasses.dataclass(frozen=True)
class PlacementCount:
    """Attributes:
      placements: legal labelled placements (ship k has length `lengths[k]`).
      boards: distinct sets of occupied cells among them.
      board_entropy_bits: entropy of the occupied cells under the uniform prior over placements.
    """

    placements: int
    boards: int
    board_entropy_bits: float

    @property
    def placement_entropy_bits(self) -> float:
        return math.log2(self.placements)


def placement_count(config: GameConfig, lengths: Sequence[int] | None = None) -> PlacementCount:
    """Count the legal placements of ships of `lengths` (the config's fleet by default) exactly.

    Ships are placed one length at a time (longest first); partial placements that occupy the
    same cells are merged with their multiplicity, so the work grows with the number of distinct
    partial boards, not of placements (8 x 8, lengths 5, 4, 3, 2: about a second).
    """
    lengths = tuple(config.fleet if lengths is None else lengths)
    if not lengths:
        raise ValueError("no ships to place")
    table = spans_lib.table_for(config)
    if table.bits.shape[1] > 2:
        raise ValueError("placement_count handles boards of up to 64 cells")
    # One uint64 per board (cells 0-31 low, 32-63 high): merging is a 1-D unique.
    words = table.bits.astype(np.uint64)
    span_bits = words[:, 0] | (words[:, 1] << np.uint64(32) if words.shape[1] > 1 else 0)
    boards = np.zeros(1, np.uint64)
    counts = np.ones(1, np.int64)
    for length in sorted(lengths, reverse=True):
        if length >= table.offset.shape[0] or table.offset[length] < 0:
            raise ValueError(f"ship length {length} is not in the span table of this config")
        start, n = int(table.offset[length]), int(table.count[length])
        spans = span_bits[start:start + n]                                        # [n]
        new_boards, new_counts = [], []
        step = max(1, _CHUNK // max(n, 1))
        for lo in range(0, boards.shape[0], step):
            part = boards[lo:lo + step]
            free = (part[:, None] & spans[None]) == 0                             # [m, n]
            rows, cols = np.nonzero(free)
            new_boards.append(part[rows] | spans[cols])
            new_counts.append(counts[lo:lo + step][rows])
        merged, inverse = np.unique(np.concatenate(new_boards), return_inverse=True)
        counts = np.bincount(inverse.reshape(-1), weights=np.concatenate(new_counts),
                             minlength=merged.shape[0]).astype(np.int64)
        boards = merged
    total = int(counts.sum())
    if total == 0:
        return PlacementCount(0, 0, 0.0)
    p = counts / total
    return PlacementCount(total, int(boards.shape[0]), float(-(p * np.log2(p)).sum()))


def binary_entropy(p: float) -> float:
    """H_b(p) in bits."""
    if p <= 0.0 or p >= 1.0:
        return 0.0
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def question_capacity(epsilon: float) -> float:
    """Bits one yes/no answer can carry through a channel that flips it with probability ε."""
    return 1.0 - binary_entropy(epsilon)


def shot_floor(board_bits: float, ship_cells: int, questions: int, epsilon: float) -> float:
    """The least S (real) with S · H_b(T / S) ≥ board_bits - questions · C(ε): the fewest shots
    a captain can win in, on average, with hit/miss feedback. At least T."""
    need = board_bits - questions * question_capacity(epsilon)
    if need <= 0.0:  # the questions alone could tell the board
        return float(ship_cells)

    def told(s: float) -> float:  # increasing in s >= T: d/dS = -log2(1 - T/S) >= 0
        return s * binary_entropy(ship_cells / s)

    lo, hi = float(ship_cells), 2.0 * ship_cells
    while told(hi) < need:
        hi *= 2.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if told(mid) >= need else (mid, hi)
    return hi


def f1_ceiling(ship_cells: int, shots: float) -> float:
    """F1 of a game won in `shots` shots: precision T / S, recall 1."""
    return 2.0 * ship_cells / (ship_cells + shots)


@dataclasses.dataclass(frozen=True)
class Ceiling:
    """The information ceiling of a protocol (see the module docstring)."""

    count: PlacementCount
    ship_cells: int
    questions: int
    epsilon: float
    shots: float
    f1: float


def board_bits(config: GameConfig) -> float:
    """H(board) of the config's fleet: from `KNOWN_BOARD_ENTROPY`, else counted."""
    key = (config.rows, config.cols, tuple(sorted(config.fleet or (), reverse=True)))
    bits = KNOWN_BOARD_ENTROPY.get(key)
    return placement_count(config).board_entropy_bits if bits is None else bits


def protocol_f1_ceiling(config: GameConfig) -> float | None:
    """The F1 ceiling of a protocol's games (its fleet, question budget and spotter noise), or
    None where the bound does not apply (hits that reveal colours, or no fixed fleet)."""
    if config.reveal_colour or config.fleet is None:
        return None
    bits = board_bits(config)
    cells = int(sum(config.fleet))
    epsilon = config.epsilon if config.env_noise else 0.0
    return f1_ceiling(cells, shot_floor(bits, cells, config.max_questions, epsilon))


def ledger(turns, config: GameConfig):
    """Per game, the information the captain's actions could have carried, against the board's.

    Args:
      turns: a turns frame (`bsjax.Results.turns_frame()`, or a run's events): one row per
        played turn with `board`, `seed`, `kind` (0 shot, 1 question) and `hit_probability`
        (for a shot, the belief's probability of a hit on the shot cell).
      config: the protocol the games were played under.
    Returns:
      A DataFrame, one row per (board, seed): `shot_bits` Σ H_b(p) over the shots (the most
      the shots could tell a captain holding that belief), `question_bits` the questions asked
      × C(ε) (the most their answers could tell), `board_bits` H(board), and `share` the sum of
      the two over `board_bits`. A won game needs a share of at least 1 (up to the belief's
      errors: a p that is too confident understates what a shot told).
    """
    import pandas as pd
    bits = board_bits(config)
    epsilon = config.epsilon if config.env_noise else 0.0
    p = turns["hit_probability"].to_numpy(np.float64).clip(0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -(p * np.log2(p) + (1 - p) * np.log2(1 - p))
    shot = turns["kind"].to_numpy() == 0
    frame = pd.DataFrame({"board": turns["board"], "seed": turns["seed"],
                          "shot_bits": np.where(shot, np.nan_to_num(h), 0.0),
                          "question_bits": np.where(shot, 0.0, question_capacity(epsilon))})
    out = frame.groupby(["board", "seed"], sort=False, as_index=False).sum()
    out["board_bits"] = bits
    out["share"] = (out["shot_bits"] + out["question_bits"]) / bits
    return out


def ceiling(config: GameConfig, lengths: Sequence[int] | None = None,
            questions: int | None = None, epsilon: float | None = None) -> Ceiling:
    """The ceiling of `config` (its fleet, question budget and ε unless given)."""
    lengths = tuple(config.fleet if lengths is None else lengths)
    questions = config.max_questions if questions is None else questions
    epsilon = config.epsilon if epsilon is None else epsilon
    count = placement_count(config, lengths)
    cells = int(sum(lengths))
    shots = shot_floor(count.board_entropy_bits, cells, questions, epsilon)
    return Ceiling(count, cells, questions, epsilon, shots, f1_ceiling(cells, shots))


__all__ = ["KNOWN_BOARD_ENTROPY", "Ceiling", "PlacementCount", "binary_entropy", "board_bits",
           "ceiling", "f1_ceiling", "ledger", "placement_count", "protocol_f1_ceiling",
           "question_capacity", "shot_floor"]
