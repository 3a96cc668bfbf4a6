"""Shared test helpers: tiny board configurations and hand-built observations."""

from __future__ import annotations

import dataclasses

import numpy as np

from bsjax.config import GameConfig
from bsjax.game import bitboard, rules


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
