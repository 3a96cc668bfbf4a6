"""The particle sampler's MH sweeps as one fused kernel (Pallas), for GPUs.

`ParticleSampler`'s update is a loop of `sweeps × ships` single-ship MH steps. Compiled by XLA
for a GPU, each step is about 13 kernels, so the 16 steps of an update are ~210 launches per
game-turn — most of a turn at small and medium batches, where a GPU's time is launches, not
arithmetic. Here the whole loop is one Pallas kernel: a program holds a block of one game's
particles in registers and runs every step on them, reading the span tables by gathers, after
doing the update's reweighting and systematic resampling (the ESS and its test, the weights,
the offset, the search and the gather). One launch per update: the kernel also writes the new
log weights and the ESS and, for a game that has just ended, keeps its belief.

It plays the same moves as the XLA step, draw for draw: the same words (the threefry hash of
each step's counters, computed in the kernel), the same integer arithmetic for the proposal and
the shot violations, the same float32 log-target (the answer terms summed in the order the
XLA path's table was built in) and the same acceptance test. Tested game for game on a CPU in
Pallas's interpret mode.

The program is written over lanes (`_sweeps`: every value a `[B]` vector per ship or bitboard
word), so the same code also runs as plain XLA over all P particles at once
(`rejuvenate_lanes`, `targets_lanes`): what a TPU runs, since there the particles as the minor
axis of every array keep its (8, 128) tiles full.

Scope: protocols that reveal no colours (the paper's), under JAX's default threefry; anything
else keeps the XLA loop (`applies`). Written for one game; `vmap` over games adds the games to
the kernel's grid (Pallas's batching rule). Blocks are `BLOCK` lanes; the last block's lanes
past P compute and write nothing.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pl_triton

from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import refrng
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import Observations
from bsjax.core import fastpath

BLOCK = 128  # particles per program: one lane each
MODES = ("auto", "xla", "pallas", "interpret", "lowering")
_WORDS_PER_STEP = 4  # random words per particle per step: ship, move kind, uniform span, u


def resolve(mode: str) -> str:
    """`mode` as traced now: "auto" on a CPU host is the XLA loop, decided at trace time
    (tracing the other platforms' branches costs compile time); otherwise unchanged."""
    return "xla" if mode == "auto" and jax.default_backend() == "cpu" else mode


def applies(config: GameConfig, key: jax.Array, n_particles: int, n_steps: int) -> bool:
    """Whether the fused kernel can play these sweeps (else the XLA loop plays them)."""
    return (not config.reveal_colour
            and fastpath.hash_applies(key, (n_steps, n_particles, _WORDS_PER_STEP)))


@functools.cache
def _tables(rows: int, cols: int, lengths: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Host tables, flattened for gathers: span bits `[N * W]`, length `[N]`, offset and count
    `[L_max + 1]`, neighbours `[N * 4]`."""
    table = spans_lib.span_table(rows, cols, lengths)
    return (table.bits.reshape(-1).astype(np.uint32), table.length.astype(np.int32),
            table.offset.astype(np.int32), table.count.astype(np.int32),
            table.neighbours.reshape(-1).astype(np.int32))


def popcount(x: jnp.ndarray) -> jnp.ndarray:
    """Set bits of uint32 words, by shifts and masks (Triton has no legal popcount of a
    tensor of words on every target)."""
    x = x - ((x >> 1) & jnp.uint32(0x55555555))
    x = (x & jnp.uint32(0x33333333)) + ((x >> 2) & jnp.uint32(0x33333333))
    x = (x + (x >> 4)) & jnp.uint32(0x0F0F0F0F)
    return ((x * jnp.uint32(0x01010101)) >> 24).astype(jnp.int32)


def select(values: list, index):
    """values[index] of a list of lane vectors (or scalars), by selects: a kernel cannot
    index a Python list with a traced value."""
    return functools.reduce(lambda acc, k: jnp.where(index == k, values[k], acc),
                            range(1, len(values)), values[0])


# The inputs of the sweeps, in order: the kernel's refs, or the arrays of `sweep_lanes`.
INPUTS = ("key", "hit", "miss", "question", "answers", "asked", "match", "mismatch", "bits",
          "length", "offset", "count", "neighbours", "spans", "target", "cumulative", "u",
          "key_words", "apply", "keep", "kept_target", "log_weights")


def search(read, lane, n_particles: int) -> jnp.ndarray:
    """`[B]` int32 each lane's systematic-resampling ancestor (`particles.ancestors`, searched
    step for step: lane p takes the first particle whose "cumulative" weight reaches
    (u + p) / P, at most P - 1)."""
    position = (read("u", 0) + lane.astype(jnp.float32)) / n_particles
    low, high = jnp.zeros_like(lane, jnp.uint32), jnp.full(lane.shape, n_particles, jnp.uint32)
    for _ in range(int(np.ceil(np.log2(n_particles + 1)))):
        mid = low + (high - low) // 2
        left = position <= read("cumulative", mid.astype(jnp.int32))
        low, high = jnp.where(left, low, mid), jnp.where(left, mid, high)
    return jnp.clip(high.astype(jnp.int32), 0, n_particles - 1)


def _reweighted(read, index):
    """The log weights at `index` times the target ratio, before their largest is subtracted
    (`ParticleSampler._reweight`'s operations, in its order)."""
    return read("log_weights", index) + (read("target", index) - read("kept_target", index))


def drawn_resampling(read, n_particles: int, width: int):
    """The reweighting and the resampling as the kernel makes them, with the operations outside
    it: the log weights times the target ratio over their largest and their ESS
    (`ParticleSampler._reweight`), their softmax's cumulative sum and the offset
    `jax.random.uniform` draws (`particles.resampling`), over the P particles padded with zero
    weights to W ≥ P (on a GPU a power of two). There these were six to nine kernels of their
    own; its sums may round in another order than the host's, as XLA's own did there.

    Returns:
      (`[W]` cumulative weights, `[]` offset u, `[]` the largest reweighted log weight, `[]` ESS).
    """
    index = lax.broadcasted_iota(jnp.int32, (width,), 0)
    own = jnp.minimum(index, n_particles - 1)
    reweighted = jnp.where(index < n_particles, _reweighted(read, own), -jnp.inf)
    top = jnp.max(reweighted)
    log_weights = reweighted - top
    weights = jnp.exp(log_weights)
    ess = jnp.square(jnp.sum(weights)) / jnp.sum(jnp.square(weights))
    unnormalized = jnp.exp(log_weights - jnp.max(log_weights))   # `jax.nn.softmax`'s
    cumulative = jnp.cumsum(unnormalized / jnp.sum(unnormalized))
    u = fastpath.unit_float(fastpath.hash_words(read("key_words", 0), read("key_words", 1),
                                                jnp.uint32(0)))
    return cumulative, u, top, ess


def _sweeps(read, lane, real, *, n_ships: int, n_words: int, n_questions: int,
            n_particles: int, n_steps: int, penalty: float, targets_only: bool = False):
    """`n_steps` MH steps of the particles `lane` (`[B]` int32; `real` `[B]` bool those < P),
    repeating `ParticleSampler._mh_step` operation for operation. `read(name, index)` reads
    input `name` (`INPUTS`) at `index` (an int or a `[B]` gather). Written over lanes, so the
    same code is a Pallas program (a block of lanes) and an XLA program over all P particles
    (particles as the minor axis of every array). Returns (S `[B]` spans, `[B]` targets,
    `[B]` int32 moves accepted); with `targets_only`, only `[B]` the lanes' log targets under
    the observation (the reweighting's), nothing moved."""
    block = lane.shape[0]
    key_hi, key_lo = read("key", 0), read("key", 1)
    hits = [read("hit", w) for w in range(n_words)]
    misses = [read("miss", w) for w in range(n_words)]
    questions = [[read("question", j * n_words + w) for w in range(n_words)]
                 for j in range(n_questions)]
    answers = [read("answers", j) != 0 for j in range(n_questions)]
    asked = read("asked", 0)
    log_match, log_mismatch = read("match", 0), read("mismatch", 0)

    def words_of(step):
        """The step's four words per lane: `fastpath.bits_row` of the XLA loop."""
        base = (step * n_particles + lane).astype(jnp.uint32) * jnp.uint32(_WORDS_PER_STEP)
        return [fastpath.hash_words(key_hi, key_lo, base + jnp.uint32(j))
                for j in range(_WORDS_PER_STEP)]

    def log_likelihood(board):
        """`constraints.answer_log_likelihood`: the answers in order, one add each."""
        total = jnp.zeros((block,), jnp.float32)
        for j, region in enumerate(questions):
            meets = functools.reduce(jnp.bitwise_or, (board[w] & region[w]
                                                      for w in range(n_words))) != 0
            term = jnp.where(meets == answers[j], log_match, log_mismatch)
            total = total + jnp.where(j < asked, term, 0.0)
        return total

    def log_target(spans):
        """`particles.log_target` of a placement given as one `[block]` row per ship."""
        ship_bits = [[read("bits", span * n_words + w) for w in range(n_words)] for span in spans]
        board = [functools.reduce(jnp.bitwise_or, (b[w] for b in ship_bits))
                 for w in range(n_words)]
        count = (sum(popcount(hits[w] & ~board[w]) for w in range(n_words))
                 + sum(popcount(misses[w] & board[w]) for w in range(n_words)))
        overlap = (sum(popcount(board[w]) for w in range(n_words))
                   - sum(sum(popcount(b[w]) for w in range(n_words)) for b in ship_bits))
        violations = count - overlap
        return log_likelihood(board) - penalty * violations.astype(jnp.float32)

    if targets_only:
        return log_target([read("spans", lane * n_ships + k) for k in range(n_ships)])

    def step(i, carry):
        spans, target, accepted = carry
        w_ship, w_kind, w_span, w_u = words_of(i)
        ship = refrng.u32_times_int_high(w_ship, jnp.int32(n_ships))
        current = select(spans, ship)
        length = read("length", current)
        kind = refrng.u32_times_int_high(w_kind, jnp.int32(5))
        uniform_span = read("offset", length) + refrng.u32_times_int_high(w_span, read("count", length))
        shifted = read("neighbours", current * 4 + jnp.clip(kind - 1, 0, 3))
        candidate = jnp.where(kind == 0, uniform_span, shifted)
        valid = candidate >= 0
        moved = jnp.where(valid, candidate, current)
        proposal = [jnp.where(ship == k, moved, spans[k]) for k in range(n_ships)]
        new_target = log_target(proposal)
        u = refrng.u32_to_unit_float(w_u, jnp.float32)
        accept = valid & (jnp.log(jnp.maximum(u, 1e-30)) < new_target - target)
        spans = [jnp.where(accept, p, s) for p, s in zip(proposal, spans)]
        return spans, jnp.where(accept, new_target, target), accepted + accept.astype(jnp.int32)

    # Each lane starts from its ancestor; lanes past P compute a particle and write nothing.
    searched = search(read, lane, n_particles)
    ancestor = jnp.where(read("apply", 0) != 0, jnp.where(real, searched, 0), lane * real)
    carry = ([read("spans", ancestor * n_ships + k) for k in range(n_ships)],
             read("target", ancestor), jnp.zeros((block,), jnp.int32))
    return lax.fori_loop(0, n_steps, step, carry)


def _log_weights(read, own):
    """`[B]` the lanes' log weights after the update (`ParticleSampler._reweight`'s, the same
    operations: the previous weight times the target ratio, over the game's largest, zero when
    resampled; where "keep" the previous). Written by the kernel, not by a kernel of its own."""
    previous = read("log_weights", own)
    new = _reweighted(read, own) - read("top", 0)
    new = jnp.where(read("apply", 0) != 0, jnp.float32(0.0), new)
    return jnp.where(read("keep", 0) != 0, previous, new)


def _kernel(*refs, interpret: bool, width: int, resample: bool, **static):
    """One Pallas program: the sweeps of a block of `BLOCK` particles (the last block may run
    past P: its extra lanes compute and write nothing)."""
    inputs = dict(zip(INPUTS, refs))
    spans_out, target_out, accepted_out, weights_out, cumulative_out, ess_out = refs[len(INPUTS):]
    lane = pl.program_id(0) * BLOCK + lax.broadcasted_iota(jnp.int32, (BLOCK,), 0)
    real = lane < static["n_particles"]
    read = lambda name, index: inputs[name][index]  # noqa: E731
    # The resampling's weights are made by every program of the game and written to a buffer
    # of the game's (the same values from each), which the search then reads by gathers: a
    # kernel cannot gather from a vector it holds. The barrier makes the program's own writes
    # visible to all its threads (the interpreter runs one program at a time: none there).
    # Every program also finds the game's ESS and whether it resamples (below P / 2, as
    # `_reweight`), and writes the ESS (the same value from each).
    cumulative, u, top, ess = drawn_resampling(read, static["n_particles"], width)
    pl_triton.store(cumulative_out.at[pl.ds(0, cumulative.shape[0])], cumulative)
    pl_triton.store(ess_out.at[pl.ds(0, 1)], ess.reshape(1))
    if not interpret:
        pl_triton.debug_barrier()
    apply = (ess < static["n_particles"] / 2) & resample
    drawn = {"cumulative": cumulative_out, "u": u.reshape(1), "top": top.reshape(1),
             "apply": apply.astype(jnp.int32).reshape(1)}
    read = lambda name, index: (drawn[name] if name in drawn else inputs[name])[index]  # noqa: E731
    spans, target, accepted = _sweeps(read, lane, real, **static)
    # A game that has just ended keeps its belief (`Player`): selected here, as the kernel
    # writes, rather than by a kernel of its own per array after it.
    keep, own = read("keep", 0) != 0, lane * real
    spans = [jnp.where(keep, read("spans", own * static["n_ships"] + k), s)
             for k, s in enumerate(spans)]
    target = jnp.where(keep, read("kept_target", own), target)
    rows = pl.ds(0, BLOCK)
    for k in range(static["n_ships"]):
        pl_triton.store(spans_out.at[rows, jnp.int32(k)], spans[k], mask=real)
    pl_triton.store(target_out.at[rows], target, mask=real)
    pl_triton.store(accepted_out.at[rows], accepted, mask=real)
    pl_triton.store(weights_out.at[rows], _log_weights(read, lane * real), mask=real)


def _inputs(config: GameConfig, key, spans, target, obs, likelihood, resampling, keep=None,
            kept_target=None, weights=None, drawn=True):
    """The `INPUTS` arrays, every one as the turn has it (reshapes are free). Without `drawn`
    (the kernel, which decides whether to resample, draws the offset and makes the cumulative
    weights itself: `drawn_resampling`), "cumulative", "u" and "apply" are placeholders, so
    that nothing outside it computes them."""
    n_particles = spans.shape[0]
    if resampling is None:  # each particle moves from itself
        cumulative, u = jnp.zeros((n_particles,), jnp.float32), jnp.float32(0.0)
        key_words, apply = jnp.zeros((2,), jnp.uint32), jnp.zeros((1,), jnp.int32)
    else:
        cumulative, u = resampling.cumulative, resampling.u
        key_words, apply = resampling.key_words, resampling.apply.astype(jnp.int32).reshape(1)
    if not drawn:
        cumulative, u, apply = (jnp.zeros((1,), jnp.float32), jnp.float32(0.0),
                                jnp.zeros((1,), jnp.int32))
    tables = [jnp.asarray(t) for t in _tables(config.rows, config.cols,
                                              tuple(sorted(config.ship_lengths)))]
    log_match, log_mismatch = (jnp.asarray(x, jnp.float32).reshape(1) for x in likelihood)
    return [jax.random.key_data(key).astype(jnp.uint32), obs.hit_bits, obs.miss_bits,
            obs.question_bits.reshape(-1), obs.answers, obs.n_questions.reshape(1),
            log_match, log_mismatch, *tables, spans.reshape(-1), target, cumulative,
            u.astype(jnp.float32).reshape(1), key_words, apply,
            jnp.zeros((1,), jnp.int32) if keep is None else keep.astype(jnp.int32).reshape(1),
            target if kept_target is None else kept_target,
            jnp.zeros((n_particles,), jnp.float32) if weights is None else weights]


def rejuvenate(config: GameConfig, key: jax.Array, spans: jnp.ndarray, target: jnp.ndarray,
               obs: Observations, likelihood: tuple[jnp.ndarray, jnp.ndarray], n_steps: int,
               penalty: float, resampling=None, keep=None, kept_target=None, weights=None,
               interpret: bool = False
               ) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """`n_steps` MH steps of one game's particles in one kernel; the key is consumed.

    Args:
      spans: `[P, S]` int32. target: `[P]` float32 each particle's log target.
      obs: the observation the steps target (shots, questions, answers).
      likelihood: (`[]` ln L(match), `[]` ln L(mismatch)) of the answer model, float32.
      penalty: the log target per violated shot.
      resampling: a `particles.Resampling` to apply first (its search and gather are done in
        the kernel); None: each particle moves from itself.
      keep, kept_target: `[]` bool and `[P]` float32: where `keep`, return `spans` as given and
        `kept_target` (the game's belief unchanged); the moves are counted as without it.
      weights: `[P]` the previous log weights, from which (with `target` and `kept_target`)
        the kernel reweights, decides whether to resample and writes the new log weights as
        `ParticleSampler._reweight` does; `resampling` then gives only the resampling's key.
        None: zeros are written, and nothing is resampled.
      interpret: run Pallas's interpreter (any backend; for tests on a CPU).
    Returns:
      (`[P, S]` spans, `[P]` targets, `[P]` int32 moves accepted per particle, `[P]` log
      weights, `[]` the reweighting's ESS).
    """
    n_particles, n_ships = spans.shape
    whole = _inputs(config, key, spans, target, obs, likelihood, resampling, keep, kept_target,
                    weights, drawn=False)
    # The resampling's weights (a scratch): a Triton vector's length is a power of two. The
    # interpreter keeps P, whose sums are those of the XLA path bit for bit (a CPU's sum of a
    # longer vector may round otherwise).
    width = n_particles if interpret else pl.next_power_of_2(n_particles)
    kernel = functools.partial(
        _kernel, n_ships=n_ships, n_words=config.n_words, n_questions=config.max_questions,
        n_particles=n_particles, n_steps=n_steps, penalty=penalty, interpret=interpret,
        width=width, resample=resampling is not None and weights is not None)
    full = [pl.BlockSpec(x.shape, lambda i, n=x.ndim: (0,) * n) for x in whole]
    rows = pl.BlockSpec((BLOCK, n_ships), lambda i: (i, 0))
    lanes = pl.BlockSpec((BLOCK,), lambda i: (i,))
    *moved, _, ess = pl.pallas_call(
        kernel, grid=(pl.cdiv(n_particles, BLOCK),),
        in_specs=full,
        out_specs=[rows, lanes, lanes, lanes, pl.BlockSpec((width,), lambda i: (0,)),
                   pl.BlockSpec((1,), lambda i: (0,))],
        out_shape=[jax.ShapeDtypeStruct(spans.shape, jnp.int32),
                   jax.ShapeDtypeStruct((n_particles,), jnp.float32),
                   jax.ShapeDtypeStruct((n_particles,), jnp.int32),
                   jax.ShapeDtypeStruct((n_particles,), jnp.float32),
                   jax.ShapeDtypeStruct((width,), jnp.float32),
                   jax.ShapeDtypeStruct((1,), jnp.float32)],
        # Triton: a warp per 32 lanes, no software pipelining (the steps depend on each other).
        compiler_params=pl_triton.CompilerParams(num_warps=BLOCK // 32, num_stages=1),
        interpret=interpret, name="mh_sweeps")(*whole)
    return (*moved, ess[0])


def rejuvenate_lanes(config: GameConfig, key: jax.Array, spans: jnp.ndarray,
                     target: jnp.ndarray, obs: Observations,
                     likelihood: tuple[jnp.ndarray, jnp.ndarray], n_steps: int, penalty: float,
                     resampling=None, keep=None, kept_target=None
                     ) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """`rejuvenate`'s program as plain XLA over all P particles at once (what a TPU runs):
    every intermediate is `[P]` per ship or word, the particles its minor axis, where the
    per-particle formulation makes `[P, 4]` and `[P, 2]` arrays that a TPU's (8, 128) tiles pad
    32- and 64-fold. The same moves (it is the kernel's code). Arguments and returns as
    `rejuvenate`'s, without the log weights (a TPU has no launches to save: the caller's select
    writes them)."""
    n_particles, n_ships = spans.shape
    inputs = dict(zip(INPUTS, _inputs(config, key, spans, target, obs, likelihood,
                                      resampling, keep, kept_target)))
    lane = jnp.arange(n_particles, dtype=jnp.int32)
    rows, target, accepted = _sweeps(
        lambda name, index: inputs[name][index], lane, jnp.ones((n_particles,), bool),
        n_ships=n_ships, n_words=config.n_words, n_questions=config.max_questions,
        n_particles=n_particles, n_steps=n_steps, penalty=penalty)
    moved = jnp.stack(rows, axis=-1)
    if keep is not None:  # selected whole, as the particles came (no per-ship copies)
        moved, target = jnp.where(keep, spans, moved), jnp.where(keep, kept_target, target)
    return moved, target, accepted


def targets_lanes(config: GameConfig, spans: jnp.ndarray, obs: Observations,
                  likelihood: tuple[jnp.ndarray, jnp.ndarray], penalty: float) -> jnp.ndarray:
    """`[P]` float32 each particle's `particles.log_target` under `obs` (the answer terms
    summed), computed over lanes as `rejuvenate_lanes` does (equal values)."""
    n_particles, n_ships = spans.shape
    inputs = dict(zip(INPUTS, _inputs(config, jax.random.key(0), spans,
                                      jnp.zeros((n_particles,), jnp.float32), obs, likelihood,
                                      None)))
    return _sweeps(lambda name, index: inputs[name][index],
                   jnp.arange(n_particles, dtype=jnp.int32), jnp.ones((n_particles,), bool),
                   n_ships=n_ships, n_words=config.n_words, n_questions=config.max_questions,
                   n_particles=n_particles, n_steps=0, penalty=penalty, targets_only=True)


__all__ = ["BLOCK", "INPUTS", "MODES", "applies", "popcount", "rejuvenate", "rejuvenate_lanes",
           "resolve", "select", "targets_lanes"]
