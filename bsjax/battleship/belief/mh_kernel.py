"""The particle sampler's MH sweeps as one fused kernel (Pallas), for GPUs.

`ParticleSampler._rejuvenate` is a loop of `sweeps × ships` single-ship MH steps. Compiled by
XLA for a GPU, each step is about 13 kernels, so the 16 steps of an update are ~210 launches
per game-turn — most of a turn at small and medium batches, where a GPU's time is launches, not
arithmetic. Here the whole loop is one Pallas kernel: a program holds a block of one game's
particles in registers and runs every step on them, reading the span tables and the game's
answer table by gathers. One launch per update instead of ~210.

It plays the same moves as the XLA step, draw for draw: the same words (the threefry hash of
each step's counters, computed in the kernel), the same integer arithmetic for the proposal and
the shot violations, the same float32 log-target (the answer term read from the same `[2**Q]`
table) and the same acceptance test. Tested game for game on a CPU in Pallas's interpret mode.

Scope: protocols that reveal no colours (the paper's) with the answer table (Q ≤ 16), under
JAX's default threefry; anything else keeps the XLA loop (`applies`).

Layout: a game's particles are blocks of `BLOCK` lanes (P padded up to a multiple of it), each
ship's spans one `[BLOCK]` row, so every load is contiguous or a table gather. Written for one
game; `vmap` over games adds the games to the kernel's grid (Pallas's batching rule).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pl_triton

from bsjax.battleship.belief import constraints
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import refrng
from bsjax.battleship.game import spans as spans_lib
from bsjax.core import fastpath

BLOCK = 128  # particles per program: one lane each
MODES = ("auto", "xla", "pallas", "interpret")
_WORDS_PER_STEP = 4  # random words per particle per step: ship, move kind, uniform span, u


def applies(config: GameConfig, key: jax.Array, n_particles: int, n_steps: int) -> bool:
    """Whether the fused kernel can play these sweeps (else the XLA loop plays them)."""
    return (not config.reveal_colour
            and (config.max_questions == 0
                 or config.max_questions <= constraints.TABLE_MAX_QUESTIONS)
            and fastpath.hash_applies(key, (n_steps, n_particles, _WORDS_PER_STEP)))


@functools.cache
def _tables(rows: int, cols: int, lengths: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Host tables, flattened for gathers: span bits `[N * W]`, length `[N]`, offset and count
    `[L_max + 1]`, neighbours `[N * 4]`."""
    table = spans_lib.span_table(rows, cols, lengths)
    return (table.bits.reshape(-1).astype(np.uint32), table.length.astype(np.int32),
            table.offset.astype(np.int32), table.count.astype(np.int32),
            table.neighbours.reshape(-1).astype(np.int32))


def _popcount(x: jnp.ndarray) -> jnp.ndarray:
    """Set bits of uint32 words, by shifts and masks (Triton has no legal popcount of a
    tensor of words on every target)."""
    x = x - ((x >> 1) & jnp.uint32(0x55555555))
    x = (x & jnp.uint32(0x33333333)) + ((x >> 2) & jnp.uint32(0x33333333))
    x = (x + (x >> 4)) & jnp.uint32(0x0F0F0F0F)
    return ((x * jnp.uint32(0x01010101)) >> 24).astype(jnp.int32)


def _kernel(key_ref, hit_ref, miss_ref, qmask_ref, answers_ref, asked_ref, sums_ref,
            bits_ref, length_ref, offset_ref, count_ref, neighbours_ref,
            spans_ref, target_ref, spans_out, target_out, accepted_out, *,
            n_ships: int, n_words: int, n_qwords: int, n_particles: int, n_steps: int,
            table: bool, penalty: float):
    """One program: `n_steps` MH steps of a block of particles (see `ParticleSampler._mh_step`,
    whose arithmetic this repeats operation for operation)."""
    block = target_ref.shape[0]
    lane = pl.program_id(0) * block + lax.broadcasted_iota(jnp.int32, (block,), 0)
    key_hi, key_lo = key_ref[0], key_ref[1]
    hits = [hit_ref[w] for w in range(n_words)]
    misses = [miss_ref[w] for w in range(n_words)]
    answers = [answers_ref[w] for w in range(n_qwords)]
    asked = [asked_ref[w] for w in range(n_qwords)]

    def words_of(step):
        """The step's four words per lane: `fastpath.bits_row` of the XLA loop."""
        base = (step * n_particles + lane).astype(jnp.uint32) * jnp.uint32(_WORDS_PER_STEP)
        out = []
        for j in range(_WORDS_PER_STEP):
            high, low = fastpath.threefry2x32(key_hi, key_lo, jnp.zeros_like(base),
                                              base + jnp.uint32(j))
            out.append(high ^ low)
        return out

    def log_target(spans):
        """`particles.log_target` of a placement given as one `[block]` row per ship."""
        ship_bits = [[bits_ref[span * n_words + w] for w in range(n_words)] for span in spans]
        board = [functools.reduce(jnp.bitwise_or, (b[w] for b in ship_bits))
                 for w in range(n_words)]
        count = (sum(_popcount(hits[w] & ~board[w]) for w in range(n_words))
                 + sum(_popcount(misses[w] & board[w]) for w in range(n_words)))
        overlap = (sum(_popcount(board[w]) for w in range(n_words))
                   - sum(sum(_popcount(b[w]) for w in range(n_words)) for b in ship_bits))
        violations = count - overlap
        if table:
            meets = functools.reduce(jnp.bitwise_or, (qmask_ref[span * n_qwords]
                                                      for span in spans))
            mismatch = (meets ^ answers[0]) & asked[0]
            log_likelihood = sums_ref[mismatch.astype(jnp.int32)]
        else:  # no questions: the sum of no terms
            log_likelihood = jnp.zeros((block,), jnp.float32)
        return log_likelihood - penalty * violations.astype(jnp.float32)

    def step(i, carry):
        spans, target, accepted = carry
        w_ship, w_kind, w_span, w_u = words_of(i)
        ship = refrng.u32_times_int_high(w_ship, jnp.int32(n_ships))
        current = functools.reduce(
            lambda acc, k: jnp.where(ship == k, spans[k], acc), range(1, n_ships), spans[0])
        length = length_ref[current]
        kind = refrng.u32_times_int_high(w_kind, jnp.int32(5))
        uniform_span = offset_ref[length] + refrng.u32_times_int_high(w_span, count_ref[length])
        shifted = neighbours_ref[current * 4 + jnp.clip(kind - 1, 0, 3)]
        candidate = jnp.where(kind == 0, uniform_span, shifted)
        valid = candidate >= 0
        moved = jnp.where(valid, candidate, current)
        proposal = [jnp.where(ship == k, moved, spans[k]) for k in range(n_ships)]
        new_target = log_target(proposal)
        u = refrng.u32_to_unit_float(w_u, jnp.float32)
        accept = valid & (jnp.log(jnp.maximum(u, 1e-30)) < new_target - target)
        spans = [jnp.where(accept, p, s) for p, s in zip(proposal, spans)]
        return spans, jnp.where(accept, new_target, target), accepted + accept.astype(jnp.int32)

    carry = ([spans_ref[k, :] for k in range(n_ships)], target_ref[...],
             jnp.zeros((block,), jnp.int32))
    spans, target, accepted = lax.fori_loop(0, n_steps, step, carry)
    for k in range(n_ships):
        spans_out[k, :] = spans[k]
    target_out[...] = target
    accepted_out[...] = accepted


def rejuvenate(config: GameConfig, key: jax.Array, spans: jnp.ndarray, target: jnp.ndarray,
               hit_bits: jnp.ndarray, miss_bits: jnp.ndarray,
               evidence: constraints.AnswerEvidence, n_steps: int, penalty: float,
               interpret: bool = False) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """`n_steps` MH steps of one game's particles in one kernel; the key is consumed.

    Args:
      spans: `[P, S]` int32. target: `[P]` float32 each particle's log target.
      hit_bits, miss_bits: `[W]` uint32 the shots. evidence: `constraints.answer_evidence` of
        the observation (with its `[2**Q]` table). penalty: the log target per violated shot.
      interpret: run Pallas's interpreter (any backend; for tests on a CPU).
    Returns:
      (`[P, S]` spans, `[P]` targets, `[P]` int32 moves accepted per particle).
    """
    n_particles, n_ships = spans.shape
    n_words = config.n_words
    n_qwords = evidence.question_masks.shape[-1]
    table = evidence.sums.shape[0] > 1
    padded = -(-n_particles // BLOCK) * BLOCK
    pad = padded - n_particles
    spans_t = jnp.pad(spans.T, ((0, 0), (0, pad)))  # padding lanes hold span 0: valid, unused
    target_p = jnp.pad(target, (0, pad))
    tables = [jnp.asarray(t) for t in _tables(config.rows, config.cols,
                                              tuple(sorted(config.ship_lengths)))]
    whole = [jax.random.key_data(key).astype(jnp.uint32), hit_bits, miss_bits,
             evidence.question_masks.reshape(-1), evidence.answers, evidence.asked,
             evidence.sums.astype(jnp.float32), *tables]
    kernel = functools.partial(_kernel, n_ships=n_ships, n_words=n_words, n_qwords=n_qwords,
                               n_particles=n_particles, n_steps=n_steps, table=table,
                               penalty=penalty)
    full = [pl.BlockSpec(x.shape, lambda i, n=x.ndim: (0,) * n) for x in whole]
    rows = pl.BlockSpec((n_ships, BLOCK), lambda i: (0, i))
    lanes = pl.BlockSpec((BLOCK,), lambda i: (i,))
    spans_t, target_p, accepted = pl.pallas_call(
        kernel, grid=(padded // BLOCK,),
        in_specs=[*full, rows, lanes], out_specs=[rows, lanes, lanes],
        out_shape=[jax.ShapeDtypeStruct(spans_t.shape, jnp.int32),
                   jax.ShapeDtypeStruct((padded,), jnp.float32),
                   jax.ShapeDtypeStruct((padded,), jnp.int32)],
        # Triton: one warp group per block of lanes, no software pipelining (the loop's steps
        # depend on each other).
        compiler_params=pl_triton.CompilerParams(num_warps=BLOCK // 32, num_stages=1),
        interpret=interpret, name="mh_sweeps")(*whole, spans_t, target_p)
    return spans_t[:, :n_particles].T, target_p[:n_particles], accepted[:n_particles]


__all__ = ["BLOCK", "MODES", "applies", "rejuvenate"]
