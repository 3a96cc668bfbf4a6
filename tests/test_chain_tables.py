"""The chain's table-driven pieces against the per-candidate rules they replaced: the move pool
(`moves.pool_words`), the n-th set bit, the question masks (`constraints.placement_truth`) and the
pooled repair search (`repair.first_consistent_board`, batched and not)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import bits, observe, tiny

from bsjax.battleship.belief import chain, constraints, generator, moves, repair
from bsjax.battleship.config import protocol
from bsjax.battleship.game import bitboard, rules
from bsjax.battleship.game import spans as spans_lib

PAPER = protocol("paper")
GRAND = protocol("grand")
CONFIGS = {"paper": PAPER, "grand": GRAND}
SETTINGS = settings(max_examples=40, deadline=None)


# ----- the stored samples, laid out samples last (a TPU's forms) ---------------------------------

@functools.cache
def _sample_forms(config):
    both = lambda f: jax.jit(lambda *a: (f(config, *a), f(config, *a, samples_last=True)))  # noqa: E731
    return both(chain.occupancy_counts), both(chain.samples_consistent)


@pytest.mark.parametrize("name", ["paper", "grand"])
@SETTINGS
@given(seed=st.integers(1, 2**30), revealed=st.integers(0, 14), strays=st.integers(0, 6),
       sunk=st.lists(st.booleans(), min_size=4, max_size=4))
def test_the_samples_last_forms_count_and_check_as_the_samples_first(name, seed, revealed, strays,
                                                                     sunk):
    """64 generated boards as `[S, N]` samples; the shots reveal cells of the first board (in
    grand as its ships' colours, some sunk) and miss cells off it, with a few stray misses on it:
    some samples agree, most do not."""
    config = CONFIGS[name]
    lengths = jnp.asarray(_lengths(config, seed), jnp.int32)
    boards = np.stack([np.asarray(_generate(config)(lengths, jnp.int32(seed + k)))
                       for k in range(64)])                                         # [N, S]
    cells = spans_lib.table_for(config).cells[boards[0]]                            # [S, C]
    rng = np.random.default_rng(seed)
    on, off = np.flatnonzero(cells.any(0)), np.flatnonzero(~cells.any(0))
    hits = rng.choice(on, min(revealed, len(on)), replace=False).tolist()
    misses = (rng.choice(off, 10, replace=False).tolist()
              + rng.choice(on, min(strays, len(on)), replace=False).tolist())
    if config.reveal_colour:
        colour = [sorted(set(hits) & set(np.flatnonzero(c))) for c in cells]
        obs = observe(config, np.asarray(lengths), misses=misses, colour=colour, sunk=sunk)
    else:
        obs = observe(config, np.asarray(lengths), hits=hits, misses=misses)
    counts, consistent = _sample_forms(config)
    first, last = counts(jnp.asarray(boards.T))
    want = spans_lib.table_for(config).cells[boards].any(1).sum(0)
    np.testing.assert_array_equal(first, want)
    np.testing.assert_array_equal(last, want)
    first, last = consistent(jnp.asarray(boards.T), jax.tree.map(jnp.asarray, obs))
    np.testing.assert_array_equal(last, first)


# ----- the move pool -----------------------------------------------------------------------------

def reference_pool(config, board, ship, obs):
    """The per-candidate rule the pool replaced: `[K]` bool, the placements ship `ship` may take."""
    n_ships = board.shape[0]
    ship_bits = spans_lib.spans_bits(config, board)
    this_bits = ship_bits[ship]
    others = jnp.where((jnp.arange(n_ships) == ship)[:, None], jnp.uint32(0), ship_bits)
    other_bits = bitboard.union(others, axis=0)
    cand, valid, cand_bits = spans_lib.candidate_bits(config,
                                                      spans_lib.span_lengths(config, board[ship]))
    hits, misses = obs.hit_bits, obs.miss_bits
    need = hits & this_bits
    if config.reveal_colour:
        need = need | obs.colour_bits[ship]
    blocked = other_bits | (misses & this_bits)
    others_fail = (bitboard.any_set(hits & ~this_bits & ~other_bits)
                   | bitboard.any_set(misses & ~this_bits & other_bits))
    kept = valid & ~bitboard.any_set((cand_bits & blocked[None]) | (need[None] & ~cand_bits))
    kept = kept & ~others_fail
    differs = kept & (cand != board[ship])
    return jnp.where(jnp.any(differs), differs, kept)


@functools.cache
def _pool_fns(config):
    """(table pool, reference pool), jitted once per config: `([K] bool, first span id)` and
    `[K]` bool."""
    k = spans_lib.table_for(config).max_count

    def table_pool(board, ship, obs):
        tables = moves.move_tables(config, board, obs)
        words, first = moves.pool_words(config, tables, board, ship,
                                        spans_lib.spans_bits(config, board), obs)
        return bitboard.unpack(words, k), first

    return jax.jit(table_pool), jax.jit(functools.partial(reference_pool, config))


@functools.cache
def _generate(config):
    return jax.jit(lambda lengths, seed: generator.reference_board(config, lengths, seed)[0])


@st.composite
def pool_cases(draw, config):
    """(board `[S]`, ship, obs): a generated or random (possibly overlapping) board, hits mostly on
    it and misses mostly off it (a few strays each way), and in grand revealed cells of its ships."""
    table = spans_lib.table_for(config)
    if config.fleet is not None:
        lengths = list(config.fleet)
    else:
        lengths = sorted(draw(st.lists(st.sampled_from(config.ship_lengths),
                                       min_size=config.n_ships, max_size=config.n_ships)))
    if draw(st.booleans()):
        seed = draw(st.integers(1, 2**31 - 2))
        board = np.asarray(_generate(config)(jnp.asarray(lengths, jnp.int32), jnp.int32(seed)))
    else:
        board = np.asarray([int(table.offset[n]) + draw(st.integers(0, int(table.count[n]) - 1))
                            for n in lengths], np.int32)
    ship = draw(st.integers(0, config.n_ships - 1))
    ship_cells = [np.flatnonzero(table.cells[s]).tolist() for s in board]
    occupied = table.cells[board].any(0)
    on, off = np.flatnonzero(occupied).tolist(), np.flatnonzero(~occupied).tolist()
    hits = set(draw(st.lists(st.sampled_from(on), max_size=10)))
    misses = set(draw(st.lists(st.sampled_from(off), max_size=14)))
    # Now and then shots the board contradicts: a miss under the moving ship (its moves must
    # leave it), or a miss under another ship or a hit off the board (no move at all), or
    # strays anywhere.
    some = lambda cells: set(draw(st.lists(st.sampled_from(cells), min_size=1,  # noqa: E731
                                           max_size=2)))
    others = sorted(set(on) - set(ship_cells[ship])) or on
    extra = draw(st.integers(0, 8))
    if extra in (4, 5):
        misses |= some(ship_cells[ship])
    elif extra == 6:
        misses |= some(others)
    elif extra == 7:
        hits |= some(off)
    elif extra == 8:
        hits |= some(list(range(config.n_cells)))
        misses |= some(list(range(config.n_cells)))
    misses -= hits
    colour = None
    if config.reveal_colour:
        colour = [sorted(set(draw(st.lists(st.sampled_from(cells), max_size=len(cells)))))
                  if draw(st.booleans()) else [] for cells in ship_cells]
        if draw(st.booleans()):  # as in a game: revealed cells are hits
            hits |= {c for cells in colour for c in cells}
    obs = observe(config, lengths, hits=sorted(hits), misses=sorted(misses))
    if colour is not None:
        obs = obs.replace(colour_bits=np.stack([bits(config, cells) for cells in colour]))
    return board, ship, jax.tree.map(jnp.asarray, obs)


def _check_pool(config, case):
    board, ship, obs = case
    table_pool, ref_pool = _pool_fns(config)
    got, first = table_pool(jnp.asarray(board), jnp.int32(ship), obs)
    got = np.asarray(got)
    want = np.asarray(ref_pool(jnp.asarray(board), jnp.int32(ship), obs))
    table = spans_lib.table_for(config)
    assert int(first) == int(table.offset[table.length[int(board[ship])]])  # candidate 0's span
    np.testing.assert_array_equal(
        got, want, err_msg=(f"board={board.tolist()} ship={ship} "
                            f"hits={np.asarray(obs.hit_bits).tolist()} "
                            f"misses={np.asarray(obs.miss_bits).tolist()} "
                            f"colour={np.asarray(obs.colour_bits).tolist()}"))
    return want


@SETTINGS
@given(case=pool_cases(PAPER))
def test_pool_words_equals_per_candidate_rule_paper(case):
    _check_pool(PAPER, case)


@SETTINGS
@given(case=pool_cases(GRAND))
def test_pool_words_equals_per_candidate_rule_grand(case):
    _check_pool(GRAND, case)


def test_pool_hand_cases():
    """Pinned cases: the pool is not trivially empty or full, and each branch of the rule bites."""
    lengths = (5, 4, 3, 2)
    table = spans_lib.table_for(PAPER)
    ids = lambda n, r, c, h: spans_lib.span_index(8, 8, (2, 3, 4, 5), n, r, c, h)  # noqa: E731
    board = np.asarray([ids(5, 0, 0, True), ids(4, 2, 0, True), ids(3, 4, 0, True),
                        ids(2, 6, 0, True)], np.int32)
    ship = 3  # the 2-ship at A1-A2 of row 6 (cells 48, 49)
    k2 = int(table.count[2])
    empty = _check_pool(PAPER, (board, ship, jax.tree.map(jnp.asarray, observe(PAPER, lengths))))
    # No shots: every 2-span clear of the other three ships, except the current one.
    others = table.cells[board[:3]].any(0)
    clear = ~(table.cells[int(table.offset[2]):int(table.offset[2]) + k2] & others).any(1)
    current = board[ship] - int(table.offset[2])
    expect = clear.copy()
    expect[current] = False
    assert expect.sum() > 10
    np.testing.assert_array_equal(empty[:k2], expect)
    assert not empty[k2:].any()
    # A hit on the ship's cell 48: only the other spans through 48 (vertical 40-48 and 48-56).
    held = _check_pool(PAPER, (board, ship, jax.tree.map(
        jnp.asarray, observe(PAPER, lengths, hits=[48]))))
    through = np.flatnonzero(held) + int(table.offset[2])
    assert through.tolist() == sorted([ids(2, 5, 0, False), ids(2, 6, 0, False)])
    # Both its cells hit and a miss on each neighbour span: only the current placement is left.
    pinned = _check_pool(PAPER, (board, ship, jax.tree.map(
        jnp.asarray, observe(PAPER, lengths, hits=[48, 49], misses=[40, 41, 50, 56, 57]))))
    assert np.flatnonzero(pinned).tolist() == [current]
    # A miss under the ship (cell 49): its moves must leave 49 (the current span leaves too).
    missed = _check_pool(PAPER, (board, ship, jax.tree.map(
        jnp.asarray, observe(PAPER, lengths, misses=[49]))))
    covers_49 = table.cells[int(table.offset[2]):int(table.offset[2]) + k2, 49]
    np.testing.assert_array_equal(missed[:k2], expect & ~covers_49)
    assert missed[ids(2, 6, 1, True) - int(table.offset[2])] == 0
    # A miss under another ship (cell 0, the 5-ship's): no move at all.
    assert not _check_pool(PAPER, (board, ship, jax.tree.map(
        jnp.asarray, observe(PAPER, lengths, misses=[0])))).any()
    # A hit no ship covers: the others contradict a shot, so there is no move at all.
    stray = _check_pool(PAPER, (board, ship, jax.tree.map(
        jnp.asarray, observe(PAPER, lengths, hits=[63]))))
    assert not stray.any()


# ----- the n-th set bit --------------------------------------------------------------------------

_WORD = st.one_of(st.integers(0, 2**32 - 1), st.sampled_from([0, 1, 2**31, 2**32 - 1, 0x80000001]))


@functools.cache
def _nth_fns():
    return jax.jit(moves.nth_set_bit), jax.jit(moves.nth_true)


@settings(max_examples=60, deadline=None)
@given(words=st.lists(_WORD, min_size=4, max_size=4), data=st.data())
def test_nth_set_bit_matches_numpy(words, data):
    words = np.asarray(words, np.uint32)
    set_bits = np.flatnonzero(bitboard.unpack_np(words, 128))
    if len(set_bits) == 0:
        return
    n = data.draw(st.integers(0, len(set_bits) - 1))
    nth_set_bit, nth_true = _nth_fns()
    assert int(nth_set_bit(jnp.asarray(words), jnp.int32(n))) == set_bits[n]
    mask = jnp.asarray(bitboard.unpack_np(words, 112))  # K = 112 on 8x8: a ragged last word
    if n < int(np.sum(set_bits < 112)):
        assert int(nth_true(mask, jnp.int32(n))) == set_bits[n]


def test_nth_set_bit_every_rank_of_dense_and_sparse_words():
    nth_set_bit, _ = _nth_fns()
    for words in ([2**32 - 1] * 4, [0, 0, 0, 2**31], [1, 0, 2**31, 0x00010000]):
        words = np.asarray(words, np.uint32)
        set_bits = np.flatnonzero(bitboard.unpack_np(words, 128))
        got = [int(nth_set_bit(jnp.asarray(words), jnp.int32(n))) for n in range(len(set_bits))]
        assert got == set_bits.tolist()


# ----- question masks ----------------------------------------------------------------------------

# A 5x7 board (35 cells: spans cross the word boundary) with 40 questions (two mask words).
WIDE_Q = tiny(5, 7, (4, 3, 2, 2), max_questions=40)


@functools.cache
def _truth_fns(config):
    def table_truth(spans, obs):
        return constraints.placement_truth(config, constraints.span_question_masks(config, obs),
                                           spans)

    def direct_truth(spans, obs):
        return bitboard.intersects(obs.question_bits,
                                   spans_lib.board_bits(config, spans)[None])

    return jax.jit(table_truth), jax.jit(direct_truth)


@pytest.mark.parametrize("name", ["paper", "paper_no_table", "wide_q"])
@SETTINGS
@given(data=st.data())
def test_placement_truth_equals_bitboard_intersection(name, data):
    config = PAPER if name == "paper" else WIDE_Q
    n_spans = spans_lib.table_for(config).n_spans
    spans = np.asarray(data.draw(st.lists(st.integers(0, n_spans - 1), min_size=config.n_ships,
                                          max_size=config.n_ships)), np.int32)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    # Regions from empty to full, mostly sparse (as questions are): some will miss the board.
    density = rng.choice([0.0, 0.02, 0.05, 0.1, 0.3, 1.0], size=(config.max_questions, 1))
    regions = rng.random((config.max_questions, config.n_cells)) < density
    obs = rules.empty_observations(config, np.full(config.n_ships, 2, np.int32))
    obs = obs.replace(question_bits=jnp.asarray(bitboard.pack_np(regions)))
    table_truth, direct_truth = _truth_fns(config)
    got = np.asarray(table_truth(jnp.asarray(spans), obs))
    want = np.asarray(direct_truth(jnp.asarray(spans), obs))
    np.testing.assert_array_equal(got, want, err_msg=f"spans={spans.tolist()}")
    # The direct rule itself, from cells on the host.
    occupied = spans_lib.table_for(config).cells[spans].any(0)
    np.testing.assert_array_equal(want, (regions & occupied[None]).any(1))


@functools.cache
def _likelihood_fns(config, dtype, table):
    def table_likelihood(spans, obs):
        return constraints.placement_log_likelihood(
            config, constraints.answer_evidence(config, obs, dtype, table), spans, obs)

    def direct_likelihood(spans, obs):
        return constraints.answer_log_likelihood(config, spans_lib.board_bits(config, spans),
                                                 obs, dtype)

    return jax.jit(table_likelihood), jax.jit(direct_likelihood)


@pytest.mark.parametrize("name", ["paper", "paper_no_table", "wide_q"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@SETTINGS
@given(data=st.data())
def test_placement_log_likelihood_equals_the_sum(name, dtype, data):
    """The `[2**Q]` table of answer sums (paper: 15 questions) and the per-placement sums (40
    questions; or no table asked for, as the chain does) give the sequential sum bit for bit,
    in float32 and in float64."""
    config = WIDE_Q if name == "wide_q" else PAPER
    n_spans = spans_lib.table_for(config).n_spans
    spans = np.asarray(data.draw(st.lists(st.integers(0, n_spans - 1), min_size=config.n_ships,
                                          max_size=config.n_ships)), np.int32)
    n_questions = data.draw(st.integers(0, config.max_questions))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    regions = rng.random((config.max_questions, config.n_cells)) < 0.1
    answers = rng.random(config.max_questions) < 0.5
    obs = rules.empty_observations(config, np.full(config.n_ships, 2, np.int32))
    obs = obs.replace(question_bits=jnp.asarray(bitboard.pack_np(regions)),
                      answers=jnp.asarray(answers), n_questions=jnp.int32(n_questions))
    with jax.enable_x64(dtype == "float64"):
        table_likelihood, direct_likelihood = _likelihood_fns(config, jnp.dtype(dtype),
                                                              name != "paper_no_table")
        got = table_likelihood(jnp.asarray(spans), obs)
        want = direct_likelihood(jnp.asarray(spans), obs)
        assert got.dtype == want.dtype == jnp.dtype(dtype)
        assert got.tobytes() == want.tobytes(), (spans.tolist(), n_questions, got, want)


def test_answer_sums_index_mismatches_by_bit():
    """Entry m of the table mismatches exactly the answers in bit pattern m (asked ones only)."""
    obs = rules.empty_observations(PAPER, np.full(4, 2, np.int32)).replace(n_questions=jnp.int32(3))
    log_match, log_mismatch = PAPER.log_answer_likelihood()
    sums = np.asarray(constraints.answer_sums(PAPER, obs))
    assert sums.shape == (2**PAPER.max_questions,)
    np.testing.assert_allclose(sums[0b000], 3 * log_match, rtol=1e-6)
    np.testing.assert_allclose(sums[0b101], log_mismatch + log_match + log_mismatch, rtol=1e-6)
    assert sums[0b1000 | 0b010] == sums[0b010]  # question 3 was not asked


# ----- the repair search -------------------------------------------------------------------------

@functools.cache
def _oracle_fns(config, tries):
    """Jitted: the boards of seeds seed..seed+tries-1, and whether each agrees with the shots."""
    def boards(lengths, seed):
        seeds = seed + jnp.arange(tries, dtype=jnp.int32)
        return jax.vmap(lambda s: generator.reference_board(config, lengths, s)[0])(seeds)

    def consistent(boards, obs):
        return jax.vmap(lambda b: constraints.shot_consistent(spans_lib.spans_bits(config, b), obs,
                                                              config.reveal_colour))(boards)

    return jax.jit(boards), jax.jit(consistent)


def oracle_search(config, tries, need, seed, lengths, obs):
    """The sequential search: (found, board or None, tries used)."""
    if not need:
        return False, None, 0
    boards, consistent = _oracle_fns(config, tries)
    candidates = np.asarray(boards(jnp.asarray(lengths, jnp.int32), jnp.int32(seed)))
    ok = np.asarray(consistent(jnp.asarray(candidates), jax.tree.map(jnp.asarray, obs)))
    for k in range(tries):
        if ok[k]:
            return True, candidates[k], k + 1
    return False, None, tries


def _game(config, kind, seed, lengths, plant=None):
    """Observations of one game. `plant` = k: shots that reveal every cell of generateBoard(seed + k)
    (in grand: each ship's cells as its colour, so that board's index is the first consistent one
    unless an earlier board is the same)."""
    lengths = list(lengths)
    if kind == "empty":
        return observe(config, lengths)
    if kind == "one-hit":
        return observe(config, lengths, hits=[27], misses=[0, 63])
    if kind == "impossible":  # more hit cells than the fleet has
        return observe(config, lengths, hits=list(range(0, 64, 3)))
    assert kind == "planted"
    board = np.asarray(_generate(config)(jnp.asarray(lengths, jnp.int32), jnp.int32(seed + plant)))
    cells = spans_lib.table_for(config).cells[board]                               # [S, C]
    if config.reveal_colour:
        return observe(config, lengths, colour=[np.flatnonzero(c).tolist() for c in cells],
                       sunk=[True, False, True, False])
    occupied = cells.any(0)
    return observe(config, lengths, hits=np.flatnonzero(occupied).tolist(),
                   misses=np.flatnonzero(~occupied)[::5].tolist())


def _lengths(config, i):
    if config.fleet is not None:
        return tuple(config.fleet)
    return ((2, 3, 4, 5), (2, 2, 3, 3), (3, 4, 5, 5), (2, 3, 3, 4))[i % 4]


# (need, kind, plant): a mix of games that stop in the first round, in later rounds, or never.
def _batch_spec(tries):
    return [
        (False, "one-hit", None),            # not searching, though it would find a board
        (True, "one-hit", None),             # found within a few tries
        (True, "planted", tries // 2),       # found after several rounds (256 lanes a game)
        (True, "impossible", None),          # nothing fits: the whole budget
        (True, "planted", tries - 1),        # the very last try
        (True, "empty", None),               # the first board
        (False, "impossible", None),
        (True, "planted", tries + 50),       # planted past the budget: not found
    ]


def _batch(config, tries, base_seed):
    games, want = [], []
    for i, (need, kind, plant) in enumerate(_batch_spec(tries)):
        seed, lengths = base_seed + 7919 * i, _lengths(config, i)
        obs = _game(config, kind, seed, lengths, plant)
        games.append((need, seed, np.asarray(lengths, np.int32), obs))
        want.append(oracle_search(config, tries, need, seed, lengths, obs))
    stack = lambda *xs: np.stack([np.asarray(x) for x in xs])  # noqa: E731
    need, seed, lengths, obs = (jax.tree.map(stack, *parts) for parts in zip(*games))
    return (jnp.asarray(need), jnp.asarray(seed, jnp.int32), jnp.asarray(lengths),
            jax.tree.map(jnp.asarray, obs)), want


def _assert_game(got, want, where):
    found, board, used = (np.asarray(x) for x in got)
    w_found, w_board, w_used = want
    assert (bool(found), int(used)) == (w_found, w_used), f"{where}: got {(found, used)}, want {want}"
    if w_found:
        np.testing.assert_array_equal(board, w_board, err_msg=where)


@functools.cache
def _search_fn(config, tries, nested=False, groups=1):
    search = lambda n, s, ln, o: repair.first_consistent_board(config, tries, n, s, ln, o,  # noqa: E731
                                                               groups)
    return jax.jit(jax.vmap(jax.vmap(search)) if nested else jax.vmap(search))


# Budgets: 1000 boards puts the late plants several 256-lane rounds in; grand tests colours, sunk
# ships and a different fleet per game.
REPAIR_CASES = [("paper", 1000, 1000), ("grand", 600, 424242)]


@pytest.mark.parametrize("name, tries, base_seed", REPAIR_CASES)
def test_batched_repair_equals_sequential_search(name, tries, base_seed):
    config = CONFIGS[name]
    args, want = _batch(config, tries, base_seed)
    # The mix really is a mix: never searched, early, late, last-try and exhausted searches.
    used = [w[2] for w in want]
    assert used[0] == 0 and used[6] == 0
    assert want[1][0] and used[1] <= 50
    assert want[2][0] and used[2] > 256
    assert want[4][0] and used[4] == tries
    assert not want[3][0] and used[3] == tries
    assert not want[7][0] and used[7] == tries
    got = _search_fn(config, tries)(*args)
    for g in range(len(want)):
        _assert_game([x[g] for x in got], want[g], f"{name} game {g}")


# 2 and 4 split the 8 games into blocks (a device's games, `Player.sharded`); 3 does not divide
# them, and the whole batch pools as one.
@pytest.mark.parametrize("groups", [2, 4, 3])
def test_a_repair_pooled_per_device_finds_the_sequential_boards(groups):
    args, want = _batch(PAPER, 1000, 1000)
    got = _search_fn(PAPER, 1000, groups=groups)(*args)
    for g in range(len(want)):
        _assert_game([x[g] for x in got], want[g], f"{groups} groups, game {g}")


def test_a_repair_with_a_tpus_lanes_finds_the_sequential_boards():
    """A TPU's 32 lanes a game (a CPU runs the default branch): the late plants are many
    rounds in, the same boards and tries."""
    tries, lanes = 1000, repair.TPU_LANES_PER_GAME
    args, want = _batch(GRAND, tries, 424242)
    assert sum(w[2] > lanes * len(want) for w in want) >= 2  # several rounds of the whole pool
    got = jax.jit(lambda *a: repair._search_groups(GRAND, tries, 2, lanes, *a))(*args)
    for g in range(len(want)):
        _assert_game([x[g] for x in got], want[g], f"TPU lanes, game {g}")


def test_repair_small_budget_all_stuck_or_idle():
    """tries=300: the stuck games spend the whole budget together, the others none, and the one
    game that can be satisfied still gets its own first board."""
    tries = 300
    specs = [(True, "impossible"), (False, "impossible"), (True, "impossible"), (True, "one-hit"),
             (False, "empty"), (True, "impossible")]
    games, want = [], []
    for i, (need, kind) in enumerate(specs):
        seed, lengths = 31 + 1009 * i, PAPER.fleet
        obs = _game(PAPER, kind, seed, lengths)
        games.append((need, seed, np.asarray(lengths, np.int32), obs))
        want.append(oracle_search(PAPER, tries, need, seed, lengths, obs))
    assert [w[2] for w in want][:3] == [tries, 0, tries]
    stack = lambda *xs: np.stack([np.asarray(x) for x in xs])  # noqa: E731
    need, seed, lengths, obs = (jax.tree.map(stack, *parts) for parts in zip(*games))
    got = _search_fn(PAPER, tries)(jnp.asarray(need), jnp.asarray(seed, jnp.int32),
                                   jnp.asarray(lengths), jax.tree.map(jnp.asarray, obs))
    for g in range(len(want)):
        _assert_game([x[g] for x in got], want[g], f"small budget game {g}")


def test_unbatched_repair_equals_sequential_search():
    tries = 1000
    search = jax.jit(lambda n, s, ln, o: repair.first_consistent_board(PAPER, tries, n, s, ln, o))
    lengths = PAPER.fleet
    # A game alone searches 256 seeds a round: plants on both sides of round boundaries.
    plants = [(True, "planted", k, 5 + k) for k in (255, 256, 511, 512, 700)]
    for need, kind, plant, seed in plants + [(True, "impossible", None, 6),
                                             (False, "one-hit", None, 7), (True, "one-hit", None, 8)]:
        obs = _game(PAPER, kind, seed, lengths, plant)
        want = oracle_search(PAPER, tries, need, seed, lengths, obs)
        if kind == "planted":
            assert want[0] and want[2] == plant + 1
        got = search(jnp.asarray(need), jnp.int32(seed), jnp.asarray(lengths, jnp.int32),
                     jax.tree.map(jnp.asarray, obs))
        _assert_game(got, want, f"unbatched {kind} seed {seed}")


def test_nested_vmap_repair_equals_sequential_search():
    tries = 1000
    args, want = _batch(PAPER, tries, 1000)
    nested = jax.tree.map(lambda x: x.reshape((2, 4) + x.shape[1:]), args)
    got = _search_fn(PAPER, tries, nested=True)(*nested)
    found, board, used = (np.asarray(x).reshape((8,) + np.asarray(x).shape[2:]) for x in got)
    for g in range(len(want)):
        _assert_game((found[g], board[g], used[g]), want[g], f"nested game {g}")


def test_repair_with_shared_unbatched_arguments():
    """vmap over seeds only: the batching rule broadcasts the unbatched need, lengths and obs."""
    tries = 1000
    lengths = PAPER.fleet
    seeds = np.asarray([11, 12, 13, 14], np.int32)
    obs = _game(PAPER, "planted", 11, lengths, plant=400)
    search = jax.jit(jax.vmap(
        lambda s, n, ln, o: repair.first_consistent_board(PAPER, tries, n, s, ln, o),
        in_axes=(0, None, None, None)))
    got = search(jnp.asarray(seeds), jnp.bool_(True), jnp.asarray(lengths, jnp.int32),
                 jax.tree.map(jnp.asarray, obs))
    want = [oracle_search(PAPER, tries, True, int(s), lengths, obs) for s in seeds]
    assert want[0][0] and want[0][2] == 401
    for g in range(len(seeds)):
        _assert_game([x[g] for x in got], want[g], f"shared-args game {g}")
