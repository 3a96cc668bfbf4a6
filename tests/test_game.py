"""The world: reference PRNG, synthetic suite, game seeds, Grand boards, span tables, rules."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsjax.battleship.belief import generator
from bsjax.battleship.config import GRAND, PAPER
from bsjax.battleship.game import bitboard, refrng, rules, suites
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.game.env import Env
from bsjax.battleship.types import ask, shoot

# docs/battleship/protocol.md §4.1 test vectors: int32 states after each step, and outputs.
VECTORS = {
    1: ([270369, 67601921, 1815334946], [0.0000629502, 0.0157397988, 0.4226656039]),
    1001: ([265902391, -1156922808, -1959113015], [0.0619102248, 0.7306329180, 0.5438584557]),
    1018: ([261569381, -141980648, 123243709], [0.0609013673, 0.9669425543, 0.0286949121]),
}


@pytest.mark.parametrize("seed", sorted(VECTORS))
def test_reference_prng_vectors_host_and_jax(seed):
    states, outputs = VECTORS[seed]
    rng = refrng.SeededRandom(seed)
    got = [rng.next() for _ in range(3)]
    np.testing.assert_allclose(got, outputs, atol=1e-10)
    state = refrng.jax_seed_state(jnp.int32(seed))
    for expected in states:
        state, _ = refrng.jax_next(state)
        assert int(state) == expected


def test_arithmetic_shift_differs_from_logical():
    rng = refrng.SeededRandom(1001)
    values = [rng.next() for _ in range(4)]
    assert values[2] == pytest.approx(0.5438584557, abs=1e-10)  # logical shift: 0.5437897912
    assert values[3] == pytest.approx(0.6193461847, abs=1e-10)  # logical shift: 0.4353332741


@settings(max_examples=200, deadline=None)
@given(u32=st.integers(0, 2**32 - 1), m=st.integers(1, 2**16 - 1))
def test_next_int_is_exact_high_word(u32, m):
    got = int(refrng.u32_times_int_high(jnp.uint32(u32), jnp.int32(m)))
    assert got == (u32 * m) >> 32


def test_game_seed_hash_values():
    assert [suites.hash_seed(f"B{k:02d}", 0) for k in (1, 9, 10, 18)] == [64964, 64972, 64994, 65002]
    assert [suites.hash_seed(f"B{k:02d}", 1) for k in (1, 9, 10, 18)] == [988485, 988493, 988515,
                                                                          988523]
    assert [suites.hash_seed(f"B{k:02d}", 2) for k in (1, 9, 10, 18)] == [1912006, 1912014,
                                                                          1912036, 1912044]


def test_synthetic_suite_reference_properties():
    boards = suites.synthetic_suite()
    assert [b.board_id for b in boards] == [f"B{k:02d}" for k in range(1, 19)]
    for board in boards:
        assert board.ship_lengths == (5, 4, 3, 2)
        rows, cols = np.nonzero(board.grid == 1)
        # Consecutive seeds: the length-5 ship is horizontal in rows F-H on every board (§4.3).
        assert len(set(rows)) == 1 and rows[0] in (5, 6, 7)
        # Off-by-one: horizontal ships never reach column 8, vertical ones never row H (§4.2).
        for ship in range(1, 5):
            r, c = np.nonzero(board.grid == ship)
            if len(set(r)) == 1:
                assert c.max() < 7
            else:
                assert r.max() < 7
    touching = sum(_ships_touch(b.grid) for b in boards)
    assert touching == 13  # docs/battleship/protocol.md §2.1
    assert boards[0].rows_text() == ['.2......', '.2......', '.2......', '.2...4..', '.....4..',
                                     '.11111..', '........', '.333....']


def _ships_touch(grid: np.ndarray) -> bool:
    a, b = grid[:, :-1], grid[:, 1:]
    c, d = grid[:-1, :], grid[1:, :]
    return bool(np.any((a > 0) & (b > 0) & (a != b)) or np.any((c > 0) & (d > 0) & (c != d)))


def test_in_graph_generator_matches_host_suite():
    gen = jax.jit(lambda seed: generator.reference_board(PAPER, jnp.array([5, 4, 3, 2]), seed))
    for board in suites.synthetic_suite():
        spans, ok = gen(jnp.int32(1000 + int(board.board_id[1:])))
        assert bool(ok) and tuple(int(s) for s in spans) == board.spans


def test_grand_suite_loads_with_checksums_and_cell_counts():
    boards = suites.grand_suite()
    counts = [int((b.grid > 0).sum()) for b in boards]
    assert counts == [12, 12, 13, 13, 15, 10, 11, 10, 15, 9, 15, 9, 15, 15, 11, 18, 13, 11]
    assert sum(counts) == 227
    assert all(sorted(np.unique(b.grid)) == [0, 1, 2, 3, 4] for b in boards)


@pytest.mark.parametrize("text, message", [
    ("W,W\n" * 8, "cells"),
    ("W,W,W,W,W,W,W,W\n" * 7, "rows"),
    ("X,W,W,W,W,W,W,W\n" + "W,W,W,W,W,W,W,W\n" * 7, "symbol"),
    ("R,R,W,W,W,W,W,W\nW,W,R,W,W,W,W,W\n" + "W,W,W,W,W,W,W,W\n" * 6, "ship"),
])
def test_malformed_board_text_is_rejected(text, message):
    with pytest.raises(suites.BoardError, match=message):
        suites.parse_board_text(text, "BAD")


def test_span_table_counts_and_order():
    table = spans_lib.table_for(PAPER)
    assert table.n_spans == 352
    assert [int(table.count[length]) for length in (2, 3, 4, 5)] == [112, 96, 80, 64]
    # Reference enumeration: horizontal first, row then column ascending; then vertical.
    five = table.cells[table.offset[5]:table.offset[5] + 64]
    assert np.flatnonzero(five[0]).tolist() == [0, 1, 2, 3, 4]
    assert np.flatnonzero(five[1]).tolist() == [1, 2, 3, 4, 5]
    assert np.flatnonzero(five[32]).tolist() == [0, 8, 16, 24, 32]
    np.testing.assert_array_equal(bitboard.unpack_np(table.bits, 64), table.cells)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), shots=st.lists(st.integers(0, 63), min_size=1, max_size=64))
def test_rules_shots_are_exact_and_f1_closed_form(seed, shots):
    """Every shot, repeated cells included: a repeat is illegal, uses its shot, reveals nothing."""
    board = suites.random_suite(1, seed, PAPER)[0]
    state = Env(PAPER).init(jnp.asarray(board.spans), jnp.int32(seed + 1))
    occupied = board.grid.reshape(-1) > 0
    shot_cells, hits, n_shots = set(), 0, 0
    for cell in shots:
        if bool(state.done):
            break
        state, outcome = _step(state, cell)
        n_shots += 1
        repeat = cell in shot_cells
        assert bool(outcome) == (bool(occupied[cell]) and not repeat)
        shot_cells.add(cell)
        hits += int(occupied[cell] and not repeat)
    assert int(state.hits) == hits and int(state.shots) == n_shots
    assert int(state.hits) == int(bitboard.popcount(state.obs.hit_bits))
    assert bool(state.won) == (hits == 14)
    f1 = float(rules.f1_score(state.shots, state.hits, 14))
    p, r = hits / max(n_shots, 1), hits / 14
    assert f1 == pytest.approx(2 * p * r / (p + r) if hits else 0.0, abs=1e-6)


_step = jax.jit(lambda s, c: Env(PAPER).step(jax.random.key(0), s, shoot(c, PAPER)))


def test_noisy_answers_flip_at_epsilon():
    board = suites.synthetic_suite()[0]
    state = Env(PAPER).init(jnp.asarray(board.spans), jnp.int32(1))
    region = bitboard.pack(jnp.arange(64) < 8)  # row A: truth is yes on B01
    ask_fn = jax.jit(jax.vmap(lambda k: Env(PAPER).step(k, state, ask(0, region))[1]))
    answers = np.asarray(ask_fn(jax.random.split(jax.random.key(3), 20_000)))
    assert abs((~answers).mean() - 0.1) < 0.01


def test_grand_hits_reveal_colour_and_sinking():
    board = suites.grand_suite()[0]
    state = Env(GRAND).init(jnp.asarray(board.spans), jnp.int32(1))
    assert sorted(np.asarray(state.obs.ship_lengths).tolist()) == sorted(board.ship_lengths)
    orange = np.flatnonzero(board.grid.reshape(-1) == 4)
    step = jax.jit(lambda s, c: Env(GRAND).step(jax.random.key(0), s, shoot(c, GRAND)))
    for cell in orange:
        assert not bool(state.obs.sunk[3])
        state, hit = step(state, int(cell))
        assert bool(hit)
    colour = bitboard.unpack_np(np.asarray(state.obs.colour_bits), 64)
    assert np.flatnonzero(colour[3]).tolist() == orange.tolist()
    assert np.asarray(state.obs.sunk).tolist() == [False, False, False, True]


def test_grand_answers_are_exact():
    board = suites.grand_suite()[0]
    state = Env(GRAND).init(jnp.asarray(board.spans), jnp.int32(1))
    region = bitboard.pack(jnp.arange(64) < 8)  # row A of B01 is all water
    answers = jax.vmap(lambda k: Env(GRAND).step(k, state, ask(0, region))[1])(
        jax.random.split(jax.random.key(0), 500))
    assert not np.asarray(answers).any()
