"""The rules' primitives for ONE game: empty observations, the effect of a shot and of a noisy
answer, F1. `game.env` composes them into the environment's contract (init, step, observe).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard, refrng
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import GameState, Observations
from bsjax.core import fastpath


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


def unknown_cells(config: GameConfig, obs: Observations) -> jnp.ndarray:
    """`[C]` bool cells not yet shot."""
    # Each bitboard unpacked apart: a GPU compiler fused their OR into none of its readers at
    # large batches (a kernel of its own).
    return ~bitboard.unpack(obs.hit_bits, config.n_cells) & ~bitboard.unpack(obs.miss_bits,
                                                                             config.n_cells)


def shoot(config: GameConfig, state: GameState, cell: jnp.ndarray) -> tuple[GameState, jnp.ndarray]:
    """The effect of a shot at `cell` (`[]` int32, assumed unknown; `env.step` checks it):
    (state with the cell revealed and the shot counted, `[]` bool hit)."""
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


def answer(key: jax.Array, config: GameConfig, state: GameState, region: jnp.ndarray,
           reference_rng: bool) -> tuple[GameState, jnp.ndarray]:
    """Evaluate `region` (`[W]` uint32) on the truth, apply the protocol's noise and record the
    question: (state, `[]` bool recorded answer). Assumes a question is left (`env.step` checks).

    With `reference_rng` the flip reads the reference spotter stream (one draw per question,
    flip iff u < eps); otherwise it consumes `key`.
    """
    truth = bitboard.intersects(region, state.truth_bits)
    stream = state.spotter_stream
    recorded = truth
    if config.env_noise and config.epsilon > 0:
        if reference_rng:
            stream, u32 = refrng.jax_next(stream)
            flip = refrng.u32_to_unit_float(u32, jnp.float64) < config.epsilon
        else:
            flip = jax.random.uniform(key) < config.epsilon
        recorded = truth ^ flip
    obs = state.obs
    slot = jnp.minimum(state.questions, config.max_questions - 1)
    obs = obs.replace(
        question_bits=fastpath.set_at(obs.question_bits, slot, region),
        answers=fastpath.set_at(obs.answers, slot, recorded),
        n_questions=obs.n_questions + 1,
    )
    return state.replace(obs=obs, questions=state.questions + 1, spotter_stream=stream), recorded


def n_ship_cells(config: GameConfig, state: GameState) -> jnp.ndarray:
    return bitboard.popcount(state.truth_bits)


def f1_score(shots: jnp.ndarray, hits: jnp.ndarray, n_ship_cells: jnp.ndarray) -> jnp.ndarray:
    """F1 = 2PR/(P+R) with P = hits/shots, R = hits/T; equals 2·hits/(shots + T)."""
    shots = jnp.asarray(shots, jnp.float32)
    hits = jnp.asarray(hits, jnp.float32)
    return jnp.where(hits > 0, 2.0 * hits / (shots + n_ship_cells), 0.0)
