"""Shared test helpers: tiny board configurations and hand-built observations."""

from __future__ import annotations

import collections
import dataclasses

import numpy as np

from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard, rules


def tiny(rows, cols, fleet, max_questions=4, **kw):
    return GameConfig(name="tiny", rows=rows, cols=cols, fleet=tuple(fleet),
                      ship_lengths=tuple(sorted(set(fleet))), n_ships=len(fleet),
                      max_questions=max_questions, **kw)


def grand_tiny(rows, cols, lengths, max_questions=4):
    return GameConfig(name="tiny-grand", rows=rows, cols=cols, fleet=None,
                      ship_lengths=tuple(sorted(set(lengths))), n_ships=len(lengths),
                      max_questions=max_questions, env_noise=False, evidence_scale=1.0,
                      reveal_colour=True, sunk_feedback=True)


def cells_mask(config, cells):
    mask = np.zeros(config.n_cells, bool)
    mask[list(cells)] = True
    return mask


def bits(config, cells):
    return bitboard.pack_np(cells_mask(config, cells))


def observe(config, lengths, hits=(), misses=(), questions=(), colour=None, sunk=None):
    """Observations with `hits` / `misses` cells, `questions` = [(cells, answer)], grand extras."""
    obs = rules.empty_observations(config, np.asarray(lengths, np.int32))
    qbits = np.zeros((config.max_questions, config.n_words), np.uint32)
    answers = np.zeros(config.max_questions, bool)
    for j, (region, answer) in enumerate(questions):
        qbits[j] = bits(config, region)
        answers[j] = answer
    obs = obs.replace(hit_bits=bits(config, hits), miss_bits=bits(config, misses),
                      question_bits=qbits, answers=answers, n_questions=np.int32(len(questions)))
    if colour is not None:
        cbits = np.stack([bits(config, c) for c in colour])
        obs = obs.replace(colour_bits=cbits,
                          hit_bits=np.bitwise_or.reduce(cbits, axis=0),
                          sunk=np.asarray(sunk if sunk is not None else [False] * len(colour)))
    return obs




@dataclasses.dataclass(frozen=True)
class FakeSampler:
    """A sampler whose belief is `(p [64], spans [P, 4], weights [P])`, all designed by hand."""

    def hit_probability(self, belief):
        return belief[0]

    def weighted_particles(self, belief):
        return belief[1], belief[2]

    def answer_model(self, belief):
        """The paper protocol's answer model (ε = 0.1, κ = 0.8)."""
        from bsjax.battleship.belief.base import answer_model
        from bsjax.battleship.config import PAPER
        return answer_model(PAPER)


def neighbours(cell: int) -> list[int]:
    """The orthogonal neighbours of a cell of the 8x8 board."""
    r, c = divmod(cell, 8)
    return [rr * 8 + cc for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1))
            if 0 <= rr < 8 and 0 <= cc < 8]


def ref_clusters(hit) -> list[set[int]]:
    """4-connected components of the hit cells of an 8x8 board (plain BFS), as sets of cells."""
    seen, out = set(), []
    for start in range(64):
        if not hit[start] or start in seen:
            continue
        comp, queue = {start}, collections.deque([start])
        seen.add(start)
        while queue:
            for nb in neighbours(queue.popleft()):
                if hit[nb] and nb not in seen:
                    seen.add(nb)
                    comp.add(nb)
                    queue.append(nb)
        out.append(comp)
    return out
