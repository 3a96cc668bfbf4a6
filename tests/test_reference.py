"""Conformance: greedy + the reference chain with the reference's own PRNG streams reproduces the
reference run of the paper's row B1 exactly (paper-protocol §13.1: avg F1 0.5219, 27/54)."""

from __future__ import annotations

import jax
import numpy as np

from bsjax.agents import GreedyAgent
from bsjax.belief.chain import ChainSampler
from bsjax.config import PAPER
from bsjax.harness.experiment import game_list
from bsjax.harness.loop import BatchRunner, Player
from bsjax.game import suites


def test_greedy_reference_chain_reproduces_b1_exactly():
    games = game_list(suites.synthetic_suite(), 3)
    with jax.enable_x64(True):
        player = Player(PAPER, GreedyAgent(PAPER), ChainSampler(PAPER, reference_rng=True),
                        reference_rng=True)
        result = BatchRunner(player, len(games)).play(games, run_seed=0)
    f1 = 2 * result.hits / (result.shots + 14)
    assert round(float(f1.mean()), 4) == 0.5219
    assert int(result.won.sum()) == 27
    # A win is all 14 ship cells hit within 40 shots.
    assert np.all(result.won == (result.hits == 14))
