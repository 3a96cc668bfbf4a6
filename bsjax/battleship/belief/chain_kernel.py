"""The chain's refresh as one fused kernel (Pallas), for GPUs.

A refresh of the persistent chain (`ChainSampler.update`) is `burn_in + n_samples * thin` (3,500
at the defaults) dependent single-ship MH steps. Compiled by XLA for a GPU each step is about 16
kernels: ~55,000 launches a refresh, which made the chain slower on a GPU than on two CPU cores.
Here the whole refresh, burn-in and thinned samples, is one kernel: a program runs one game's
chain step after step, reading the move tables by gathers, and writes the stored samples.

It repeats `ChainSampler._mh_step` and `_decide` operation for operation, with the same words
(each step's three words hashed in the kernel: `fastpath.bits` of the XLA path), so the chain
visits the same boards: tested game for game in Pallas's interpreter on a CPU.

Scope: JAX keys (not the reference streams), float32, protocols that reveal no colours; the
repair before the refresh and the move tables stay XLA (a few kernels per refresh).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pl_triton

from bsjax.battleship.belief import moves
from bsjax.battleship.belief.mh_kernel import popcount, select
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import refrng
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import Observations
from bsjax.core import fastpath

_WORDS_PER_STEP = 3  # ship, placement, acceptance uniform


def applies(config: GameConfig, keys: tuple[jax.Array, jax.Array], steps: tuple[int, int],
            reference_rng: bool) -> bool:
    """Whether the fused refresh can run these steps (else the XLA loops run them)."""
    return (not reference_rng and not config.reveal_colour
            and all(fastpath.hash_applies(k, (n, _WORDS_PER_STEP))
                    for k, n in zip(keys, steps)))


def _kernel(keys_ref, hit_ref, miss_ref, answers_ref, asked_ref, match_ref,
            mismatch_ref, bits_ref, length_ref, offset_ref, overlap_ref, valid_ref, shot_ok_ref,
            colour_ok_ref, qmask_ref, board_ref, log_post_ref,
            board_out, samples_out, accepted_out, *,
            n_ships: int, n_words: int, n_kwords: int, n_qwords: int, n_questions: int,
            n_lengths: int, burn_in: int, n_samples: int, thin: int):
    hits = [hit_ref[w] for w in range(n_words)]
    misses = [miss_ref[w] for w in range(n_words)]
    answers = [answers_ref[j] != 0 for j in range(n_questions)]
    asked = asked_ref[0]
    log_match, log_mismatch = match_ref[0], mismatch_ref[0]
    neg_inf = jnp.float32(-jnp.inf)

    def words_of(t):
        """`ChainSampler._step_draws`: step t's words, from the burn-in or the collect key."""
        burning = t < burn_in
        k0 = jnp.where(burning, keys_ref[0], keys_ref[2])
        k1 = jnp.where(burning, keys_ref[1], keys_ref[3])
        base = jnp.where(burning, t, t - burn_in).astype(jnp.uint32) * jnp.uint32(_WORDS_PER_STEP)
        return [fastpath.hash_words(k0, k1, base + jnp.uint32(j))
                for j in range(_WORDS_PER_STEP)]

    def ship_bits(span):
        return [bits_ref[span * n_words + w] for w in range(n_words)]

    def pool_words(board, ship, bits):
        """`moves.pool_words`: (`[Kw]` packed pool, span id of candidate 0)."""
        current = select(board, ship)
        length = length_ref[current]
        first = offset_ref[length]
        this = [select([b[w] for b in bits], ship) for w in range(n_words)]
        other = [functools.reduce(jnp.bitwise_or, (jnp.where(ship != k, bits[k][w], 0)
                                                   for k in range(n_ships)))
                 for w in range(n_words)]
        others_fail = functools.reduce(jnp.logical_or, (
            ((hits[w] & ~this[w] & ~other[w]) != 0) | ((misses[w] & ~this[w] & other[w]) != 0)
            for w in range(n_words)))
        blocked = [functools.reduce(jnp.bitwise_or, (
            jnp.where(ship != k, overlap_ref[(board[k] * n_lengths + length) * n_kwords + v], 0)
            for k in range(n_ships))) for v in range(n_kwords)]
        kept = [valid_ref[length * n_kwords + v] & ~blocked[v]
                & shot_ok_ref[current * n_kwords + v] & colour_ok_ref[ship * n_kwords + v]
                for v in range(n_kwords)]
        kept = [jnp.where(others_fail, jnp.uint32(0), x) for x in kept]
        index = current - first  # >= 0: shifts and masks are // 32 and % 32 (Triton lowers
        # jnp's floor division of signed integers with a type error)
        own = [jnp.where((index >> 5) == v,
                         jnp.left_shift(jnp.uint32(1), (index & 31).astype(jnp.uint32)),
                         jnp.uint32(0)) for v in range(n_kwords)]
        differs = [x & ~o for x, o in zip(kept, own)]
        any_differs = functools.reduce(jnp.logical_or, (d != 0 for d in differs))
        return [jnp.where(any_differs, d, k) for d, k in zip(differs, kept)], first

    def nth_set_bit(words, n):
        """`moves.nth_set_bit` of the pool's words."""
        counts = [popcount(x) for x in words]
        before, running = [], jnp.int32(0)
        for c in counts:
            before.append(running)
            running = running + c
        word = functools.reduce(lambda a, b: a + b, (
            ((b + c) <= n).astype(jnp.int32) for b, c in zip(before, counts)))
        word = jnp.clip(word, 0, n_kwords - 1)
        x, rank = select(words, word), n - select(before, word)
        pos = jnp.uint32(0)
        for half in (16, 8, 4, 2, 1):
            low = popcount((x >> pos) & jnp.uint32((1 << half) - 1))
            up = rank >= low
            rank = jnp.where(up, rank - low, rank)
            pos = jnp.where(up, pos + jnp.uint32(half), pos)
        return word * 32 + pos.astype(jnp.int32)

    def log_posterior(spans):
        """`constraints.log_posterior` with the answer terms summed per placement."""
        bits = [ship_bits(s) for s in spans]
        board = [functools.reduce(jnp.bitwise_or, (b[w] for b in bits)) for w in range(n_words)]
        consistent = functools.reduce(jnp.logical_and, (
            ((hits[w] & ~board[w]) == 0) & ((board[w] & misses[w]) == 0)
            for w in range(n_words)))
        meets = [functools.reduce(jnp.bitwise_or, (qmask_ref[s * n_qwords + w] for s in spans))
                 for w in range(n_qwords)]
        total = jnp.float32(0.0)
        for j in range(n_questions):
            word, bit = divmod(j, 32)
            truth = ((meets[word] >> bit) & 1) == 1
            term = jnp.where(truth == answers[j], log_match, log_mismatch)
            total = total + jnp.where(j < asked, term, jnp.float32(0.0))
        return jnp.where(consistent, total, neg_inf)

    def step(t, carry):
        board, log_post, accepted = carry
        w_ship, w_place, w_u = words_of(t)
        ship = refrng.u32_times_int_high(w_ship, jnp.int32(n_ships))
        u = refrng.u32_to_unit_float(w_u, jnp.float32)
        log_u = jnp.log(jnp.maximum(u, jnp.float32(1e-45)))
        bits = [ship_bits(s) for s in board]
        pool, first = pool_words(board, ship, bits)
        pool_size = functools.reduce(lambda a, b: a + b, (popcount(x) for x in pool))
        has_pool = pool_size > 0
        pick = refrng.u32_times_int_high(w_place, pool_size)
        candidate = first + nth_set_bit(pool, pick)
        proposal = [jnp.where(ship == k, candidate, board[k]) for k in range(n_ships)]
        new_log_post = log_posterior(proposal)
        # `ChainSampler._decide`
        finite_new, finite_cur = jnp.isfinite(new_log_post), jnp.isfinite(log_post)
        delta = new_log_post - log_post
        accept = has_pool & finite_new & (~finite_cur | (delta >= 0) | (log_u < delta))
        board = [jnp.where(accept, p, b) for p, b in zip(proposal, board)]
        log_post = jnp.where(accept, new_log_post, log_post)
        done = t + 1 - burn_in

        @pl.when((done > 0) & (lax.rem(done, jnp.int32(thin)) == 0))
        def _():
            for k in range(n_ships):
                samples_out[k, lax.div(done, jnp.int32(thin)) - 1] = board[k]

        return board, log_post, accepted + accept.astype(jnp.int32)

    carry = ([board_ref[k] for k in range(n_ships)], log_post_ref[0], jnp.int32(0))
    board, _, accepted = lax.fori_loop(0, burn_in + n_samples * thin, step, carry)
    for k in range(n_ships):
        board_out[k] = board[k]
    accepted_out[0] = accepted


def _origin(ndim: int) -> tuple[int, ...]:
    """The block index of a whole array (grid-less kernel)."""
    return (0,) * ndim


@functools.cache
def _tables(config: GameConfig) -> tuple[np.ndarray, ...]:
    """Static tables, flattened: span bits, length, offset, overlap, valid."""
    table = spans_lib.table_for(config)
    overlap, valid = moves.static_tables(config)
    return (table.bits.reshape(-1).astype(np.uint32), table.length.astype(np.int32),
            table.offset.astype(np.int32), overlap.reshape(-1).astype(np.uint32),
            valid.reshape(-1).astype(np.uint32))


def refresh(config: GameConfig, burn_key: jax.Array, collect_key: jax.Array,
            board: jnp.ndarray, log_post: jnp.ndarray, tables: moves.MoveTables,
            obs: Observations, burn_in: int, n_samples: int, thin: int,
            interpret: bool = False) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """One game's refresh in one kernel: `burn_in` MH steps drawn from `burn_key`, then
    `n_samples` boards kept every `thin` steps drawn from `collect_key` (both consumed).

    Args:
      board: `[S]` int32 the (repaired) board. log_post: `[]` float32 its log-posterior.
      tables: `moves.move_tables` of `obs` (float32, no sums table).
      interpret: run Pallas's interpreter (any backend; for tests on a CPU).
    Returns:
      (`[S]` the final board, `[S, n_samples]` int32 the stored samples (`ChainState.samples`),
      `[]` int32 the moves accepted).
    """
    n_ships = board.shape[0]
    static = [jnp.asarray(t) for t in _tables(config)]
    n_lengths = moves.static_tables(config)[1].shape[0]
    keys = jnp.concatenate([jax.random.key_data(burn_key), jax.random.key_data(collect_key)])
    whole = [keys.astype(jnp.uint32), obs.hit_bits, obs.miss_bits, obs.answers, obs.n_questions.reshape(1),
             tables.answers.terms[0].astype(jnp.float32).reshape(1),
             tables.answers.terms[1].astype(jnp.float32).reshape(1), *static,
             tables.shot_ok.reshape(-1), tables.colour_ok.reshape(-1),
             tables.answers.question_masks.reshape(-1), board.astype(jnp.int32),
             jnp.asarray(log_post, jnp.float32).reshape(1)]
    kernel = functools.partial(
        _kernel, n_ships=n_ships, n_words=config.n_words, n_kwords=tables.shot_ok.shape[-1],
        n_qwords=tables.answers.question_masks.shape[-1], n_questions=config.max_questions,
        n_lengths=n_lengths, burn_in=burn_in, n_samples=n_samples, thin=thin)
    full = [pl.BlockSpec(x.shape, functools.partial(_origin, x.ndim)) for x in whole]
    out_shape = [jax.ShapeDtypeStruct((n_ships,), jnp.int32),
                 jax.ShapeDtypeStruct((n_ships, n_samples), jnp.int32),
                 jax.ShapeDtypeStruct((1,), jnp.int32)]
    new_board, samples, accepted = pl.pallas_call(
        kernel, grid=(), in_specs=full,
        out_specs=[pl.BlockSpec(s.shape, functools.partial(_origin, s.ndim)) for s in out_shape],
        out_shape=out_shape,
        # One warp runs the chain; its steps depend on each other, nothing to pipeline.
        compiler_params=pl_triton.CompilerParams(num_warps=1, num_stages=1),
        interpret=interpret, name="chain_refresh")(*whole)
    return new_board, samples, accepted[0]


__all__ = ["applies", "refresh"]
