"""The paper-faithful persistent Metropolis chain (docs/battleship/protocol.md §5.1), for ONE game.

One labelled board is moved one ship at a time; after every observation the chain is repaired if
it contradicts a shot, burned in for `burn_in` steps, and `n_samples` boards are stored, `thin`
steps apart. With `reference_rng=True` every draw comes from the reference's own int32 streams in
the reference's order (ship, placement only if the pool is non-empty, uniform only if both
log-posteriors are finite and Δ < 0), so a run reproduces the reference game for game; otherwise
the same chain draws from JAX keys.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
from jax import lax

from bsjax.battleship.belief import chain_kernel, constraints, generator, mh_kernel, moves, repair
from bsjax.battleship.belief.base import AnswerModel, BeliefInfo, Sampler, answer_model
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard, refrng
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import Observations
from bsjax.core import fastpath

BOARD_SEED_OFFSET = 20000


class StepDraws(NamedTuple):
    """One MH step's randomness with JAX keys (leading axes: steps).

    Attributes:
      ship: int32 the ship to move. place: uint32 the word that picks its new placement.
      log_u: ln of the acceptance uniform, in the chain's log dtype.
    """

    ship: chex.Array
    place: chex.Array
    log_u: chex.Array


def _tiny(dtype):
    """The smallest positive float of `dtype` (a zero uniform is accepted like the reference's)."""
    return jnp.asarray(5e-324 if dtype == jnp.float64 else 1e-45, dtype)


class Proposal(NamedTuple):
    """A move proposed by one MH step and decided at the start of the next (`_decide`).

    Attributes:
      ship: `[]` int32 the ship moved. candidate: `[]` int32 its proposed span.
      log_post: `[]` the proposal's log-posterior (chain log dtype).
      has_pool: `[]` bool whether the ship had anywhere to go (else never accepted).
      log_u: `[]` ln u of the acceptance test (JAX keys; reference mode draws it when needed).
    """

    ship: chex.Array
    candidate: chex.Array
    log_post: chex.Array
    has_pool: chex.Array
    log_u: chex.Array


@chex.dataclass(frozen=True)
class ChainState:
    """Attributes:
    board: `[S]` int32 current placement.
    samples: `[S, N]` int32 stored samples of the last refresh, each ship's span in each sample
      (the samples the minor axis: a TPU's (8, 128) tiles pad a minor axis of S = 4 32-fold).
    stream: `[]` int32 reference chain PRNG state (unused with JAX keys).
    board_seed: `[]` int32 next `generateBoard` seed for repairs.
    answers: the `AnswerModel` the chain targets.
    """

    board: chex.Array
    samples: chex.Array
    stream: chex.Array
    board_seed: chex.Array
    answers: AnswerModel


def occupancy_counts(config: GameConfig, samples: chex.Array,
                     samples_last: bool = False) -> chex.Array:
    """`[C]` int32 how many of the `[S, N]` samples cover each cell.

    `samples_last` (what an accelerator runs): counted from each sample's `[W, N]` bitboard in one
    reduction, with no `[N, C]` array (a TPU's tiles pad C = 64 to 128) nor a stored `[C, S, N]`
    one. The same counts.
    """
    if not samples_last:
        return jnp.sum(spans_lib.board_cells(config, samples.T), axis=0, dtype=jnp.int32)
    boards = bitboard.union(spans_lib.spans_bits_lanes(config, samples), axis=0)   # [W, N]
    shifts = jnp.arange(32, dtype=jnp.uint32)[None, :, None]
    bits = (boards[:, None, :] >> shifts) & jnp.uint32(1)                         # [W, 32, N]
    return jnp.sum(bits.reshape(-1, boards.shape[-1])[:config.n_cells], axis=1, dtype=jnp.int32)


def samples_consistent(config: GameConfig, samples: chex.Array, obs: Observations,
                       samples_last: bool = False) -> chex.Array:
    """`[N]` bool whether each of the `[S, N]` samples agrees with the shots
    (`constraints.shot_consistent`). `samples_last` (what an accelerator runs): the samples the
    minor axis of every array (`[N, S, W]` pads W = 2 64-fold on a TPU). The same values."""
    if samples_last:
        return constraints.shot_consistent_lanes(spans_lib.spans_bits_lanes(config, samples),
                                                 obs, config.reveal_colour)
    return jax.vmap(lambda spans: constraints.shot_consistent(
        spans_lib.spans_bits(config, spans), obs, config.reveal_colour))(samples.T)


@dataclasses.dataclass(frozen=True)
class ChainSampler(Sampler):
    """Static configuration of the chain (hashable; closed over by jit).

    `mh_kernel` chooses how a refresh runs, as the particle sampler's does (`mh_kernel.MODES`):
    "xla" two loops of XLA kernels; "pallas" one fused kernel (`chain_kernel`, GPUs);
    "interpret" that kernel in Pallas's interpreter; "lowering" chosen when lowered (the kernel
    for CUDA); "auto" the XLA loops on a CPU host, else "lowering". The same boards either way;
    the reference streams always run the XLA loops.

    `repair_groups`: a batch's repair search (`repair`) pools its lanes within this many equal
    blocks of the batch's games, the devices a batch is sharded over (`Player.sharded` sets
    it), so that no device gathers another's games. The same boards for any value.
    """

    config: GameConfig
    n_samples: int = 500
    thin: int = 5
    reference_rng: bool = False
    mh_kernel: str = "auto"
    repair_groups: int = 1

    def __post_init__(self):
        if self.mh_kernel not in mh_kernel.MODES:
            raise ValueError(f"unknown mh_kernel {self.mh_kernel!r} "
                             f"(choose from {', '.join(mh_kernel.MODES)})")
        if self.repair_groups < 1:
            raise ValueError(f"repair_groups must be positive, got {self.repair_groups}")

    name = "chain"

    @property
    def burn_in(self) -> int:
        return max(200, 2 * self.n_samples)

    @property
    def repair_tries(self) -> int:
        return max(5000, 20 * self.n_samples)

    @property
    def log_dtype(self):
        # The reference sums log-likelihoods in float64; bit-exact runs need it (x64 enabled).
        return jnp.float64 if self.reference_rng else jnp.float32

    # ----- public interface -----

    def init(self, key: jax.Array, obs: Observations, game_seed: chex.Array,
             answers: AnswerModel | None = None) -> ChainState:
        """Initial board `generateBoard(gameSeed + 20000)`, then one refresh. The key is consumed.
        `answers`: the answer model (the protocol's by default; log terms in `log_dtype`)."""
        game_seed = jnp.asarray(game_seed, jnp.int32)
        if answers is None:
            answers = answer_model(self.config, log_dtype=self.log_dtype)
        k_board, k_refresh = jax.random.split(key)
        if self.reference_rng:
            board_seed = game_seed + jnp.int32(BOARD_SEED_OFFSET)
        else:
            board_seed = jax.random.randint(k_board, (), 1, 2**31 - 1, dtype=jnp.int32)
        board, _ = generator.reference_board(self.config, obs.ship_lengths, board_seed)
        state = ChainState(
            board=board,
            samples=jnp.broadcast_to(board[:, None], (board.shape[0], self.n_samples)),
            stream=refrng.jax_seed_state(game_seed),
            board_seed=board_seed + 1,
            answers=answers,
        )
        return self.update(k_refresh, state, obs)[0]

    def update(self, key: jax.Array, state: ChainState, obs: Observations
               ) -> tuple[ChainState, BeliefInfo]:
        """Refresh after an observation: repair, burn in, collect thinned samples. Key consumed.
        Info: ess the samples (equal weights), acceptance over every MH step of the refresh."""
        state = self._repair(state, obs)
        k_burn, k_collect = jax.random.split(key)
        log_post = self._log_post(state, obs)
        # The evidence is fixed for the whole refresh: its move tables are built once.
        tables = moves.move_tables(self.config, state.board, obs, self.log_dtype,
                                   state.answers.log_likelihood)

        mode = mh_kernel.resolve(self.mh_kernel)
        steps = (self.burn_in, self.n_samples * self.thin)
        if mode != "xla" and not chain_kernel.applies(self.config, (k_burn, k_collect), steps,
                                                      self.reference_rng):
            mode = "xla"
        if mode != "xla":
            def fused(k_burn, k_collect, board, log_post, interpret=False):
                return chain_kernel.refresh(self.config, k_burn, k_collect, board, log_post,
                                            tables, obs, self.burn_in, self.n_samples,
                                            self.thin, interpret=interpret)

            def loops(k_burn, k_collect, board, log_post):
                board, samples, _, accepted = self._refresh_xla(
                    k_burn, k_collect, board, log_post, state.stream, obs, tables)
                return board, samples, accepted

            args = (k_burn, k_collect, state.board, log_post)
            if mode in ("auto", "lowering"):
                board, samples, accepted = lax.platform_dependent(*args, cuda=fused,
                                                                  default=loops)
            else:
                board, samples, accepted = fused(*args, interpret=mode == "interpret")
            stream = state.stream  # JAX keys: the reference stream is not read
        else:
            board, samples, stream, accepted = self._refresh_xla(
                k_burn, k_collect, state.board, log_post, state.stream, obs, tables)
        moves_made = self.burn_in + self.n_samples * self.thin
        info = BeliefInfo(ess=jnp.float32(self.n_samples),
                          acceptance=accepted.astype(jnp.float32) / moves_made)
        return state.replace(board=board, samples=samples, stream=stream), info

    def _refresh_xla(self, k_burn, k_collect, board, log_post, stream, obs, tables):
        """Burn-in and thinned collection as XLA loops. Returns (`[S]` board, `[S, N]` samples,
        stream, `[]` int32 moves accepted)."""
        ships = board.shape[0]
        # Never accepted (no pool): deciding it, as the first step does, changes nothing.
        nothing = Proposal(ship=jnp.int32(0), candidate=board[0], log_post=log_post,
                           has_pool=jnp.bool_(False), log_u=jnp.zeros((), self.log_dtype))

        def run(carry, accepted, draws):
            """`len(draws)` MH steps from a decided chain state to a decided chain state;
            `accepted` counts the accepted moves."""
            # Not unrolled: with the packed tables a step is a few small kernels; unrolling by 5
            # cost 25% and compile time, by 2 it gains nothing.
            def step(c, d):
                decided, accept = self._decide(c[0], c[1])
                return (*self._mh_step(d, decided, obs, tables), c[2] + accept), None

            last, proposal, accepted = lax.scan(step, (carry, nothing, accepted), draws)[0]
            decided, accept = self._decide(last, proposal)
            return decided, accepted + accept

        carry = (board, log_post, stream)
        carry, accepted = run(carry, jnp.int32(0), self._step_draws(k_burn, self.burn_in, ships))

        def collect(c, xs):
            carry, accepted, samples = c
            draws, index = xs
            carry, accepted = run(carry, accepted, draws)
            # Written in place as a column, not stacked as a row: the samples stay the minor
            # axis (`ChainState.samples`), with no `[N, S]` copy to transpose.
            samples = lax.dynamic_update_slice(samples, carry[0][:, None], (0, index))
            return (carry, accepted, samples), None

        draws = self._step_draws(k_collect, self.n_samples * self.thin, ships)
        draws = jax.tree.map(lambda x: x.reshape((self.n_samples, self.thin)), draws)
        samples = jnp.zeros((ships, self.n_samples), jnp.int32)
        ((board, _, stream), accepted, samples), _ = lax.scan(
            collect, (carry, accepted, samples), (draws, jnp.arange(self.n_samples)))
        # The first decision of each run is the empty proposal, never accepted: not a move.
        return board, samples, stream, accepted

    def answer_model(self, state: ChainState) -> AnswerModel:
        return state.answers

    def weighted_particles(self, state: ChainState) -> tuple[chex.Array, chex.Array]:
        """`[N, S]` samples and `[N]` equal weights."""
        n = state.samples.shape[1]
        return state.samples.T, jnp.full((n,), 1.0 / n, jnp.float32)

    def hit_probability(self, state: ChainState) -> chex.Array:
        """`[C]` float32 count/N (revealed cells included; callers mask them).

        From integer counts, so argmax ties break as in the reference's sequential float64 sum.
        """
        counts = self._by_platform(
            state.samples, cpu=functools.partial(occupancy_counts, self.config),
            default=functools.partial(occupancy_counts, self.config, samples_last=True))
        return counts.astype(jnp.float32) / jnp.float32(state.samples.shape[1])

    # ----- internals -----

    @property
    def _lowered(self) -> bool:
        """Whether the layouts are chosen when the program is lowered (`mh_kernel` other than
        "xla" as traced now: an accelerator, or `harness.aot`); a CPU host traces its own."""
        return mh_kernel.resolve(self.mh_kernel) != "xla"

    def _by_platform(self, *operands, cpu, default, tpu=None):
        """`cpu(*operands)` where this host traces for itself, else the branch of the platform
        the program is lowered for (`lax.platform_dependent`; not tracing the others on a CPU
        host saves compile time). Every branch computes the same values."""
        if not self._lowered:
            return cpu(*operands)
        return lax.platform_dependent(*operands, cpu=cpu, default=default,
                                      **({"tpu": tpu} if tpu else {}))

    def _step_draws(self, key: jax.Array, n: int, ships: int) -> StepDraws:
        """The randomness of `n` steps, `StepDraws` of `[n]` arrays, drawn in one call rather than
        a key split per step (threefry per step dominated the step cost).

        Each step's three uint32 words (ship, placement, acceptance) are turned into a ship index
        and ln u here, for all steps at once: inside the step XLA's fusion would repeat that
        arithmetic in every kernel that reads the ship. In reference mode the draws are unused
        placeholders: they come from the int32 stream inside the step.
        """
        if self.reference_rng:
            return StepDraws(jnp.zeros((n,), jnp.int32), jnp.zeros((n,), jnp.uint32),
                             jnp.zeros((n,), self.log_dtype))
        words = fastpath.bits(key, (n, 3))
        u = refrng.u32_to_unit_float(words[:, 2], self.log_dtype)
        return StepDraws(ship=refrng.u32_times_int_high(words[:, 0], jnp.int32(ships)),
                         place=words[:, 1], log_u=jnp.log(jnp.maximum(u, _tiny(self.log_dtype))))

    def _log_post(self, state: ChainState, obs: Observations) -> chex.Array:
        """The log-posterior of the state's board under its answer model."""
        return constraints.log_posterior(self.config,
                                         spans_lib.spans_bits(self.config, state.board), obs,
                                         self.log_dtype, likelihood=state.answers.log_likelihood)

    def _repair(self, state: ChainState, obs: Observations) -> ChainState:
        """Replace a shot-inconsistent board by the first consistent stored sample, else by the first
        consistent `generateBoard(seed++)` within `repair_tries`, else keep it."""
        cfg = self.config
        board_ok = constraints.shot_consistent(spans_lib.spans_bits(cfg, state.board), obs,
                                               cfg.reveal_colour)
        sample_ok = self._by_platform(
            state.samples, obs, cpu=functools.partial(samples_consistent, cfg),
            default=functools.partial(samples_consistent, cfg, samples_last=True))
        first = jnp.argmax(sample_ok)
        use_sample = ~board_ok & sample_ok[first]
        found, generated, used = repair.first_consistent_board(
            cfg, self.repair_tries, ~board_ok & ~use_sample, state.board_seed, obs.ship_lengths,
            obs, self.repair_groups, by_platform=self._lowered)
        # A TPU selects the sample by a mask: a gather of a column has it lay the samples out
        # ships-minor, which its tiles pad 32-fold.
        column = lambda samples, n: samples[:, n]  # noqa: E731
        chosen = self._by_platform(
            state.samples, first, cpu=column, default=column,
            tpu=lambda samples, n: jnp.sum(
                jnp.where(jnp.arange(samples.shape[1]) == n, samples, 0), axis=1,
                dtype=jnp.int32))
        board = jnp.where(use_sample, chosen,
                          jnp.where(found, generated, state.board))
        return state.replace(board=board, board_seed=state.board_seed + used)

    def _mh_step(self, draws: StepDraws, carry, obs: Observations, tables: moves.MoveTables):
        """Propose one single-ship move with the reference's enumeration-time shot check.

        `carry` is the decided (board, log_post, stream); `draws` the step's randomness (ignored
        in reference mode); `tables` the move tables of `obs`. Returns (carry, `Proposal`): the
        acceptance test is left to `_decide`, at the start of the next step. Deciding here, XLA's
        CPU fusion computed the proposal's log-posterior once for each consumer of the decision
        (the board and the log-posterior); carried across the step boundary it is computed once.
        """
        board, log_post, stream = carry
        cfg = self.config
        if self.reference_rng:
            stream, ship = refrng.jax_next_int(stream, jnp.int32(board.shape[0]))
        else:
            ship = draws.ship
        ship_bits = spans_lib.spans_bits(cfg, board)                               # [S, W]
        pool, first = moves.pool_words(cfg, tables, board, ship, ship_bits, obs)    # [Kw], []
        pool_size = jnp.sum(jnp.bitwise_count(pool), dtype=jnp.int32)
        has_pool = pool_size > 0

        if self.reference_rng:
            new_stream, pick = refrng.jax_next_int(stream, pool_size)
            stream = jnp.where(has_pool, new_stream, stream)
        else:
            pick = refrng.u32_times_int_high(draws.place, pool_size)
        # With an empty pool the candidate is meaningless and never accepted (has_pool).
        candidate = (first + moves.nth_set_bit(pool, pick)).astype(jnp.int32)
        proposal = board.at[ship].set(candidate)
        # The proposal's bits are read from the proposal, not from `candidate`: XLA's fusion
        # would otherwise copy the whole bit search into each consumer of the candidate.
        proposal_bits = spans_lib.spans_bits(cfg, proposal)
        log_likelihood = constraints.placement_log_likelihood(cfg, tables.answers, proposal, obs)
        new_log_post = constraints.log_posterior(cfg, proposal_bits, obs, self.log_dtype,
                                                 log_likelihood)
        return (board, log_post, stream), Proposal(ship, candidate, new_log_post, has_pool,
                                                   draws.log_u)

    def _decide(self, carry, proposal: Proposal):
        """The Metropolis acceptance of `proposal`: ((board, log_post, stream) decided, `[]`
        int32 1 if it was accepted)."""
        board, log_post, stream = carry
        finite_new = jnp.isfinite(proposal.log_post)
        finite_cur = jnp.isfinite(log_post)
        delta = proposal.log_post - log_post
        needs_uniform = proposal.has_pool & finite_new & finite_cur & (delta < 0)
        if self.reference_rng:
            next_stream, u32 = refrng.jax_next(stream)
            u = refrng.u32_to_unit_float(u32, self.log_dtype)
            stream = jnp.where(needs_uniform, next_stream, stream)
            log_u = jnp.log(jnp.maximum(u, _tiny(self.log_dtype)))
        else:
            log_u = proposal.log_u
        accept_mh = log_u < delta
        accept = proposal.has_pool & finite_new & (~finite_cur | (delta >= 0) | accept_mh)
        ship = proposal.ship
        board = board.at[ship].set(jnp.where(accept, proposal.candidate, board[ship]))
        log_post = jnp.where(accept, proposal.log_post, log_post)
        return (board, log_post, stream), accept.astype(jnp.int32)
