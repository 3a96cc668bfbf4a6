"""Rules of one game: init, shots, noisy answers, termination, F1. Pure; vmap at the edge."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard, refrng
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import ASK, Action, GameState, Observations, View

SPOTTER_SEED_OFFSET = 1000003


def empty_observations(config: GameConfig, ship_lengths: jnp.ndarray) -> Observations:
    words, ships = config.n_words, config.n_ships
    return Observations(
        hit_bits=jnp.zeros(words, jnp.uint32),
        miss_bits=jnp.zeros(words, jnp.uint32),
        colour_bits=jnp.zeros((ships, words), jnp.uint32),
        sunk=jnp.zeros(ships, bool),
        ship_lengths=jnp.asarray(ship_lengths, jnp.int32),
        question_bits=jnp.zeros((config.max_questions, words), jnp.uint32),
        answers=jnp.zeros(config.max_questions, bool),
        n_questions=jnp.int32(0),
    )


def init(config: GameConfig, truth_spans: jnp.ndarray, game_seed: jnp.ndarray) -> GameState:
    """A new game on the board `truth_spans` (`[S]` int32). Deterministic."""
    truth_spans = jnp.asarray(truth_spans, jnp.int32)
    lengths = spans_lib.span_lengths(config, truth_spans)
    if config.fleet is None:
        lengths = jnp.sort(lengths)  # the tracker gives the multiset, not which ship is which
    zero = jnp.int32(0)
    return GameState(
        truth_spans=truth_spans,
        truth_bits=spans_lib.board_bits(config, truth_spans),
        obs=empty_observations(config, lengths),
        shots=zero, hits=zero, questions=zero, turn=zero,
        done=jnp.bool_(False), won=jnp.bool_(False),
        spotter_stream=refrng.jax_seed_state(
            jnp.asarray(game_seed, jnp.int32) + jnp.int32(SPOTTER_SEED_OFFSET)),
    )


def view(config: GameConfig, state: GameState) -> View:
    return View(state.obs, config.max_shots - state.shots, config.max_questions - state.questions,
                state.turn)


def unknown_cells(config: GameConfig, obs: Observations) -> jnp.ndarray:
    """`[C]` bool cells not yet shot."""
    return ~bitboard.unpack(obs.hit_bits | obs.miss_bits, config.n_cells)


def _shoot(config: GameConfig, state: GameState, cell: jnp.ndarray) -> tuple[GameState, jnp.ndarray]:
    cell_bits = bitboard.single(cell, config.n_words)
    is_hit = bitboard.intersects(cell_bits, state.truth_bits)
    obs = state.obs
    hit_bits = jnp.where(is_hit, obs.hit_bits | cell_bits, obs.hit_bits)
    miss_bits = jnp.where(is_hit, obs.miss_bits, obs.miss_bits | cell_bits)
    colour_bits, sunk = obs.colour_bits, obs.sunk
    if config.reveal_colour:
        ship_bits = spans_lib.spans_bits(config, state.truth_spans)        # [S, W]
        hit_ship = bitboard.intersects(ship_bits, cell_bits[None])         # [S]
        colour_bits = jnp.where(hit_ship[:, None], colour_bits | cell_bits[None], colour_bits)
        if config.sunk_feedback:
            sunk = ~bitboard.any_set(ship_bits & ~colour_bits)
    obs = obs.replace(hit_bits=hit_bits, miss_bits=miss_bits, colour_bits=colour_bits, sunk=sunk)
    hits = state.hits + is_hit.astype(jnp.int32)
    return state.replace(obs=obs, shots=state.shots + 1, hits=hits), is_hit


def _answer(key: jax.Array, config: GameConfig, state: GameState, region: jnp.ndarray,
            reference_rng: bool) -> tuple[GameState, jnp.ndarray]:
    """Evaluate `region` on the truth and apply the protocol's noise.

    With `reference_rng` the flip reads the reference spotter stream (one draw per question,
    flip iff u < eps); otherwise it consumes `key`.
    """
    truth = bitboard.intersects(region, state.truth_bits)
    stream = state.spotter_stream
    answer = truth
    if config.env_noise and config.epsilon > 0:
        if reference_rng:
            stream, u32 = refrng.jax_next(stream)
            flip = refrng.u32_to_unit_float(u32, jnp.float64) < config.epsilon
        else:
            flip = jax.random.uniform(key) < config.epsilon
        answer = truth ^ flip
    obs = state.obs
    slot = jnp.minimum(state.questions, config.max_questions - 1)
    obs = obs.replace(
        question_bits=obs.question_bits.at[slot].set(region),
        answers=obs.answers.at[slot].set(answer),
        n_questions=obs.n_questions + 1,
    )
    return state.replace(obs=obs, questions=state.questions + 1, spotter_stream=stream), answer


def step(key: jax.Array, config: GameConfig, state: GameState, action: Action,
         reference_rng: bool = False) -> tuple[GameState, jnp.ndarray]:
    """Apply one action to one game. The key is consumed. A finished game is returned unchanged.

    Returns:
      (new state, `[]` bool outcome: hit for a shot, recorded answer for a question).
    """
    is_ask = (action.kind == ASK) & (state.questions < config.max_questions)
    shot_state, is_hit = _shoot(config, state, action.cell)
    ask_state, answer = _answer(key, config, state, action.question_bits, reference_rng)
    new = jax.tree.map(lambda a, b: jnp.where(is_ask, a, b), ask_state, shot_state)
    outcome = jnp.where(is_ask, answer, is_hit)
    all_sunk = ~bitboard.any_set(new.truth_bits & ~new.obs.hit_bits)
    new = new.replace(
        turn=state.turn + 1,
        won=all_sunk,
        done=all_sunk | (new.shots >= config.max_shots),
    )
    new = jax.tree.map(lambda old, upd: jnp.where(state.done, old, upd), state, new)
    return new, outcome & ~state.done


def n_ship_cells(config: GameConfig, state: GameState) -> jnp.ndarray:
    return bitboard.popcount(state.truth_bits)


def f1_score(shots: jnp.ndarray, hits: jnp.ndarray, n_ship_cells: jnp.ndarray) -> jnp.ndarray:
    """F1 = 2PR/(P+R) with P = hits/shots, R = hits/T; equals 2·hits/(shots + T)."""
    shots = jnp.asarray(shots, jnp.float32)
    hits = jnp.asarray(hits, jnp.float32)
    return jnp.where(hits > 0, 2.0 * hits / (shots + n_ship_cells), 0.0)
