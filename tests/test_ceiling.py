"""The information ceiling (`bsjax.battleship.ceiling`): exact placement counts against the
enumeration oracle on tiny boards, the paper fleet's count, and the bound's arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support import tiny

from bsjax.battleship.belief import exact
from bsjax.battleship.config import PAPER
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.report import ceiling

TINY = [tiny(4, 4, (3, 2)), tiny(5, 5, (4, 3, 2)), tiny(4, 5, (3, 3, 2)), tiny(3, 6, (2, 2, 2))]


@pytest.mark.parametrize("config", TINY, ids=lambda c: f"{c.rows}x{c.cols}-{c.fleet}")
def test_counts_equal_the_enumeration(config):
    configurations = exact.enumerate_configurations(config, config.fleet)
    cells = spans_lib.table_for(config).cells
    boards = np.zeros((configurations.shape[0], config.n_cells), bool)
    for k in range(configurations.shape[1]):
        boards |= cells[configurations[:, k]]
    _, multiplicity = np.unique(boards, axis=0, return_counts=True)
    p = multiplicity / multiplicity.sum()
    count = ceiling.placement_count(config)
    assert count.placements == configurations.shape[0]
    assert count.boards == multiplicity.shape[0]
    assert count.board_entropy_bits == pytest.approx(-(p * np.log2(p)).sum(), abs=1e-9)
    assert count.board_entropy_bits <= count.placement_entropy_bits + 1e-12


def test_the_paper_fleet():
    c = ceiling.ceiling(PAPER)
    assert c.count.placements == 21_354_072
    assert c.count.board_entropy_bits == pytest.approx(24.171, abs=1e-3)
    # The table reports read instead of counting again holds exactly this value.
    assert ceiling.KNOWN_BOARD_ENTROPY[(8, 8, (5, 4, 3, 2))] == c.count.board_entropy_bits
    assert c.shots == pytest.approx(19.21, abs=0.01) and c.f1 == pytest.approx(0.843, abs=1e-3)


def test_the_bound_is_tight_where_it_binds_and_monotone():
    t, h = 14, 24.171
    s = ceiling.shot_floor(h, t, 15, 0.1)
    assert s * ceiling.binary_entropy(t / s) == pytest.approx(h - 15 * ceiling.question_capacity(0.1),
                                                              abs=1e-6)
    # More or better questions never need more shots; noiseless questions carry a bit each.
    assert ceiling.shot_floor(h, t, 15, 0.0) <= s <= ceiling.shot_floor(h, t, 5, 0.1)
    assert ceiling.question_capacity(0.0) == 1.0 and ceiling.question_capacity(0.5) == 0.0
    assert ceiling.shot_floor(h, t, 40, 0.0) == t            # 40 clean bits tell the board
    assert ceiling.f1_ceiling(t, t) == 1.0
    assert math.isclose(ceiling.f1_ceiling(t, 2 * t), 2 / 3)


def test_protocol_ceilings():
    from bsjax.battleship.config import GRAND
    assert ceiling.protocol_f1_ceiling(PAPER) == pytest.approx(0.843, abs=1e-3)
    assert ceiling.protocol_f1_ceiling(GRAND) is None       # colour feedback: no bound claimed


def test_the_ledger_adds_each_games_shot_and_question_bits():
    import pandas as pd
    turns = pd.DataFrame({"board": ["B01"] * 4 + ["B02"] * 2, "seed": [0] * 6,
                          "kind": [0, 1, 0, 0, 0, 1],
                          "hit_probability": [0.5, 0.9, 1.0, 0.25, 0.0, 0.3]})
    out = ceiling.ledger(turns, PAPER).set_index("board")
    h = ceiling.binary_entropy
    c = ceiling.question_capacity(PAPER.epsilon)
    assert out.loc["B01", "shot_bits"] == pytest.approx(h(0.5) + h(1.0) + h(0.25))
    assert out.loc["B01", "question_bits"] == pytest.approx(c)
    assert out.loc["B02", "shot_bits"] == 0.0 and out.loc["B02", "question_bits"] == pytest.approx(c)
    bits = ceiling.KNOWN_BOARD_ENTROPY[(8, 8, (5, 4, 3, 2))]
    assert out.loc["B01", "share"] == pytest.approx((1 + h(0.25) + c) / bits)
