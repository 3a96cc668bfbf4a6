"""Our default belief: P particles per game, reweighted, resampled and rejuvenated by MH.

Sequential Monte Carlo over the placement posterior, for ONE game (vmapped over particles
inside, over games by the harness). After every observation each particle's weight is multiplied
by the likelihood of the new evidence, the set is resampled (systematic, static shape) when the
effective sample size drops below P/2, and every particle takes a few single-ship MH moves
targeting the new posterior (improved pool: placements covering a miss are masked out up front).

Shot evidence enters the MH target as a steep penalty, -PENALTY per violated shot cell, rather
than -inf: a consistent particle can never move to an inconsistent placement (the pool forbids
it), while a particle that contradicts a new hit is pulled towards placements that cover it. If
every particle contradicts the evidence the weights fall back to the least-violating particles —
never NaN.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
from jax import lax

from bsjax.battleship.belief import constraints, mh_kernel, moves
from bsjax.battleship.belief.base import AnswerModel, BeliefInfo, Sampler, answer_model
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard, refrng
from bsjax.battleship.game import rules as rules_lib
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import Observations
from bsjax.core import fastpath

PENALTY = 30.0  # per violated shot cell; e^-30 ~ 1e-13 makes violations vanish from the weights


@chex.dataclass(frozen=True)
class ParticleState:
    """Attributes:
    spans: `[P, S]` int32 particle placements.
    log_weights: `[P]` float32 unnormalised log importance weights.
    log_target: `[P]` float32 each particle's log target under the evidence seen so far.
    answers: the `AnswerModel` the targets condition on.
    """

    spans: chex.Array
    log_weights: chex.Array
    log_target: chex.Array
    answers: AnswerModel


def violations(config: GameConfig, ship_bits: jnp.ndarray, obs: Observations) -> jnp.ndarray:
    """`[]` int32 shot cells a placement `[S, W]` contradicts (overlaps count too)."""
    board = bitboard.union(ship_bits, axis=0)
    count = (bitboard.popcount(obs.hit_bits & ~board) + bitboard.popcount(obs.miss_bits & board))
    overlap = bitboard.popcount(board) - jnp.sum(bitboard.popcount(ship_bits))
    count = count - overlap  # popcount(union) < sum of popcounts when ships overlap
    if config.reveal_colour:
        count = count + jnp.sum(bitboard.popcount(obs.colour_bits & ~ship_bits))
        exact = bitboard.popcount(ship_bits ^ obs.colour_bits)
        count = count + jnp.sum(jnp.where(obs.sunk, exact, 0))
    return count


def log_target(config: GameConfig, spans: jnp.ndarray, obs: Observations,
               evidence: constraints.AnswerEvidence | None = None,
               likelihood: constraints.LogLikelihood = None) -> jnp.ndarray:
    """`[]` float32 answer log-likelihood minus PENALTY per violated shot cell.

    `evidence` (`constraints.answer_evidence(config, obs)`), when given, reads the answer term
    from its tables instead of intersecting the board with every question (same value);
    `likelihood` is the answer model's (without `evidence`; the protocol's by default)."""
    ship_bits = spans_lib.spans_bits(config, spans)
    if evidence is None:
        board = bitboard.union(ship_bits, axis=0)
        log_likelihood = constraints.answer_log_likelihood(config, board, obs,
                                                           likelihood=likelihood)
    else:
        log_likelihood = constraints.placement_log_likelihood(config, evidence, spans, obs)
    return log_likelihood - PENALTY * violations(config, ship_bits, obs).astype(jnp.float32)


class Resampling(NamedTuple):
    """A systematic resampling, before its search: new particle p is the first index whose
    cumulative weight reaches `(u + p) / P`.

    Attributes:
      cumulative: `[P]` float32 cumulative normalised weights.
      u: `[]` float32 the uniform offset.
      apply: `[]` bool whether to resample at all (else every particle is its own ancestor).
      key_words: `[2]` uint32 the data of the key `u` was drawn with (`mh_kernel` draws it
        again in the kernel, as it makes the cumulative weights there).
    """

    cumulative: chex.Array
    u: chex.Array
    apply: chex.Array
    key_words: chex.Array


def reweighted(log_weights: jnp.ndarray, targets: jnp.ndarray, previous_targets: jnp.ndarray
               ) -> tuple[jnp.ndarray, jnp.ndarray]:
    """`[P]` log weights times the target ratio, over their largest, and `[]` their ESS (the
    reweighting of `ParticleSampler._reweight`; the fused kernel makes the same values)."""
    log_weights = log_weights + (targets - previous_targets)
    log_weights = log_weights - jnp.max(log_weights)
    weights = jnp.exp(log_weights)
    return log_weights, jnp.square(jnp.sum(weights)) / jnp.sum(jnp.square(weights))


def resampling(key: jax.Array, log_weights: jnp.ndarray, apply: jnp.ndarray) -> Resampling:
    """The systematic resampling of `[P]` log weights; the key is consumed."""
    return Resampling(jnp.cumsum(jax.nn.softmax(log_weights)), jax.random.uniform(key), apply,
                      jax.random.key_data(key).astype(jnp.uint32))


def ancestors(plan: Resampling) -> jnp.ndarray:
    """`[P]` int32 ancestor indices of `plan` (static shape)."""
    n = plan.cumulative.shape[0]
    positions = (plan.u + jnp.arange(n)) / n
    # A binary search (`mh_kernel` repeats it step for step on a GPU).
    index = jnp.clip(jnp.searchsorted(plan.cumulative, positions), 0, n - 1)
    return jnp.where(plan.apply, index, jnp.arange(n))


def marginal(config: GameConfig, spans: jnp.ndarray, weights: jnp.ndarray) -> jnp.ndarray:
    """`[C]` the weighted occupancy of `[P, S]` placements with `[P]` weights."""
    return weights @ spans_lib.board_cells(config, spans).astype(jnp.float32)     # [P, C]


def marginal_particles_last(config: GameConfig, spans: jnp.ndarray,
                            weights: jnp.ndarray) -> jnp.ndarray:
    """`marginal` with the occupancy laid out `[C, P]`, particles the minor axis (what a TPU
    runs: `spans.cells_particles_last`). The same sum, up to its order."""
    return spans_lib.cells_particles_last(config, spans).astype(jnp.float32) @ weights


@dataclasses.dataclass(frozen=True)
class ParticleSampler(Sampler):
    """Static configuration (hashable; closed over by jit).

    Attributes:
      n_particles: P.
      sweeps: MH sweeps per observation (a sweep = one move per ship, ships drawn at random).
      init_sweeps: MH sweeps that take the sequential initial draw to the uniform prior.
      mh_kernel: how the MH sweeps run (`mh_kernel.MODES`): "xla", a loop of XLA kernels;
        "pallas", one fused kernel per update (GPUs: ~1 launch instead of ~13 per step);
        "interpret", that kernel in Pallas's interpreter (any backend; tests); "lowering", chosen
        when the program is lowered: the fused kernel for a CUDA GPU, on a TPU the kernel's
        code as plain XLA over all particles (`mh_kernel.rejuvenate_lanes`: particles the
        minor axis, less memory per game), the XLA loop elsewhere (how
        `harness.aot` compiles for a device that is not there); "auto", the XLA loop when the
        default backend is a CPU, else "lowering". All play the same moves.
    """

    config: GameConfig
    n_particles: int = 500
    sweeps: int = 4
    init_sweeps: int = 16
    mh_kernel: str = "auto"

    name = "particles"

    def __post_init__(self):
        if self.mh_kernel not in mh_kernel.MODES:
            raise ValueError(f"unknown mh_kernel {self.mh_kernel!r} "
                             f"(choose from {', '.join(mh_kernel.MODES)})")

    def init(self, key: jax.Array, obs: Observations, game_seed: chex.Array,
             answers: AnswerModel | None = None) -> ParticleState:
        """Draw P placements from the prior, then weight, resample and move them to `obs`.

        The draw ignores the evidence (so the importance weights that follow are exact) and is
        taken to the uniform prior by `init_sweeps` evidence-free MH sweeps. The key is consumed.
        `answers`: the answer model (the protocol's by default).
        """
        del game_seed
        answers = answer_model(self.config) if answers is None else answers
        k_place, k_prior, k_resample, k_mh = jax.random.split(key, 4)
        spans = jax.vmap(lambda k: self._sequential_draw(k, obs))(
            jax.random.split(k_place, self.n_particles))
        zeros = jnp.zeros(self.n_particles, jnp.float32)
        no_evidence = rules_lib.empty_observations(self.config, obs.ship_lengths)
        state = ParticleState(spans=spans, log_weights=zeros, log_target=zeros, answers=answers)
        state, _ = self._observe(None, k_prior, state, no_evidence, self.init_sweeps)
        return self._observe(k_resample, k_mh, state, obs, self.sweeps)[0]

    def update(self, key: jax.Array, state: ParticleState, obs: Observations
               ) -> tuple[ParticleState, BeliefInfo]:
        """Reweight by the new evidence, resample if ESS < P/2, rejuvenate. The key is consumed.
        Info: the ESS of the reweighted particles, the acceptance of the MH moves."""
        k_resample, k_mh = jax.random.split(key)
        return self._observe(k_resample, k_mh, state, obs, self.sweeps)

    def update_or_keep(self, key: jax.Array, state: ParticleState, obs: Observations,
                       keep: jax.Array) -> tuple[ParticleState, BeliefInfo]:
        """`update`, but the state returned is `state` itself where `keep` (`[]` bool); the info
        is the update's either way (`base.update_or_keep`). The fused kernel does the select
        (no kernel of its own per array on a GPU). The key is consumed."""
        k_resample, k_mh = jax.random.split(key)
        return self._observe(k_resample, k_mh, state, obs, self.sweeps, keep=keep)

    def _observe(self, k_resample: jax.Array | None, k_mh: jax.Array, state: ParticleState,
                 obs: Observations, sweeps: int, keep: jax.Array | None = None
                 ) -> tuple[ParticleState, BeliefInfo]:
        """Move the particles to `obs`: reweight (and maybe resample) with `k_resample` (None:
        no reweighting), then `sweeps` MH sweeps with `k_mh`. Runs the sweeps as `mh_kernel`
        says; "auto" is resolved when the program is lowered (the fused kernel for CUDA)."""
        n_steps = sweeps * self.config.n_ships
        mode = mh_kernel.resolve(self.mh_kernel)
        if mode != "xla" and not mh_kernel.applies(self.config, k_mh, self.n_particles,
                                                   n_steps):
            mode = "xla"
        observe = functools.partial(self._observe_with, sweeps=sweeps, keep=keep)
        if mode in ("auto", "lowering"):
            return lax.platform_dependent(k_resample, k_mh, state, obs,
                                          cuda=functools.partial(observe, mode="pallas"),
                                          tpu=functools.partial(observe, mode="xla-direct"),
                                          default=functools.partial(observe, mode="xla"))
        return observe(k_resample, k_mh, state, obs, mode=mode)

    def _observe_with(self, k_resample, k_mh, state, obs, *, sweeps, mode, keep=None):
        # mode "xla" reads each placement's answer term from a `[2**Q]` table built once per
        # observation (`constraints.answer_evidence`); the fused kernel and "xla-direct" (the
        # XLA loop a TPU runs), and the reweighting before them, intersect the board with each
        # question and sum the terms, with no table (128 KiB a game at Q = 15) and no per-span
        # masks to build. The values are equal bit for bit (`constraints.answer_sums`).
        evidence = self._evidence(state, obs) if mode == "xla" else None
        likelihood = state.answers.log_likelihood
        ess, targets, plan = jnp.float32(self.n_particles), state.log_target, None
        before = state
        if k_resample is not None:
            log_weights, targets, plan, ess = self._reweight(k_resample, state, obs, evidence,
                                                             lanes=mode == "xla-direct")
            state = state.replace(log_weights=log_weights)
        n_steps = sweeps * self.config.n_ships
        log_weights = state.log_weights
        if keep is not None:
            log_weights = jnp.where(keep, before.log_weights, log_weights)
        if mode == "xla-direct":  # a TPU: the particles as every array's minor axis
            spans, target, accepted = mh_kernel.rejuvenate_lanes(
                self.config, k_mh, state.spans, targets, obs, likelihood, n_steps, PENALTY,
                resampling=plan, keep=keep, kept_target=before.log_target)
        elif mode == "xla":
            index = None if plan is None else ancestors(plan)
            spans = state.spans if index is None else state.spans[index]
            targets = targets if index is None else targets[index]
            spans, target, accepted = self._sweeps_xla(k_mh, spans, targets, obs, evidence,
                                                       n_steps)
            if keep is not None:
                spans = jnp.where(keep, before.spans, spans)
                target = jnp.where(keep, before.log_target, target)
        else:  # the kernel reweights and resamples the particles itself
            # It writes the new log weights too (the previous where `keep`) and the ESS, from the
            # previous weights and the targets, with `_reweight`'s operations: on a GPU, no
            # kernels of their own (nor the resampling's weights and offset: `mh_kernel`).
            spans, target, accepted, written, drawn_ess = mh_kernel.rejuvenate(
                self.config, k_mh, state.spans, targets, obs,
                likelihood, n_steps, PENALTY, resampling=plan, keep=keep,
                kept_target=before.log_target,
                weights=None if plan is None else before.log_weights,
                interpret=mode == "interpret")
            if plan is not None:  # reweighted (otherwise the weights are as they were)
                log_weights, ess = written, drawn_ess
        acceptance = jnp.sum(accepted).astype(jnp.float32) / (n_steps * self.n_particles)
        return (state.replace(spans=spans, log_target=target, log_weights=log_weights),
                BeliefInfo(ess=ess.astype(jnp.float32), acceptance=acceptance))

    def _reweight(self, key: jax.Array, state: ParticleState, obs: Observations,
                  evidence: constraints.AnswerEvidence | None, lanes: bool = False):
        """Multiply weights by target(obs) / target(previous evidence); resample if ESS < P/2.
        `evidence` is `constraints.answer_evidence` of `obs` (None: the answers are intersected
        with each board).

        Returns:
          (`[P]` the new log weights, `[P]` each particle's target under `obs`, the
          `Resampling`, `[]` the ESS). The particles are not resampled here: the caller (or the
          fused kernel) reads them through the resampling's ancestors.
        """
        likelihood = state.answers.log_likelihood
        if lanes:  # over all particles at once (`mh_kernel.targets_lanes`; the same values)
            targets = mh_kernel.targets_lanes(self.config, state.spans, obs, likelihood, PENALTY)
        else:
            targets = jax.vmap(lambda s: log_target(self.config, s, obs, evidence, likelihood))(
                state.spans)
        log_weights, ess = reweighted(state.log_weights, targets, state.log_target)
        resample = ess < self.n_particles / 2
        return (jnp.where(resample, 0.0, log_weights), targets,
                resampling(key, log_weights, resample), ess)

    def answer_model(self, state: ParticleState) -> AnswerModel:
        return state.answers

    def _evidence(self, state: ParticleState, obs: Observations, table: bool = True
                  ) -> constraints.AnswerEvidence:
        """The answer evidence of `obs` under the state's answer model (`table`: with the
        `[2**Q]` sums table)."""
        return constraints.answer_evidence(self.config, obs, table=table,
                                           likelihood=state.answers.log_likelihood)

    def weighted_particles(self, state: ParticleState) -> tuple[chex.Array, chex.Array]:
        return state.spans, jax.nn.softmax(state.log_weights)

    def hit_probability(self, state: ParticleState) -> chex.Array:
        """`[C]` float32 weighted occupancy marginal."""
        spans, weights = self.weighted_particles(state)
        if mh_kernel.resolve(self.mh_kernel) == "xla":
            return marginal(self.config, spans, weights)
        return lax.platform_dependent(
            spans, weights, tpu=functools.partial(marginal_particles_last, self.config),
            default=functools.partial(marginal, self.config))

    # ----- internals -----

    def _sequential_draw(self, key: jax.Array, obs: Observations) -> jnp.ndarray:
        """One placement from the fleet alone: ships in order, each uniform over the spans that
        avoid the ships already placed. The lengths are permuted when only the multiset is known
        (grand tracker). `[S]` int32."""
        cfg = self.config
        k_perm, k_ships = jax.random.split(key)
        lengths = obs.ship_lengths
        if cfg.fleet is None:
            lengths = jax.random.permutation(k_perm, lengths)
        table_bits = jnp.asarray(spans_lib.table_for(cfg).bits)

        def place(occupied, inputs):
            k, length = inputs
            cand, valid = spans_lib.candidate_spans(cfg, length)
            bits = table_bits[cand]
            ok = valid & ~bitboard.any_set(bits & occupied[None])
            ok = jnp.where(jnp.any(ok), ok, valid)  # dead end: MH and the penalty repair it
            span = cand[fastpath.categorical(k, jnp.where(ok, 0.0, -jnp.inf))]
            return occupied | table_bits[span], span

        keys = jax.random.split(k_ships, cfg.n_ships)
        _, spans = lax.scan(place, jnp.zeros(cfg.n_words, jnp.uint32),
                            (keys, lengths))
        return spans

    def _sweeps_xla(self, key, spans, target, obs, evidence, n_steps):
        """The MH steps as an XLA loop. Returns (`[P, S]` spans, `[P]` targets, `[P]` int32
        moves accepted per particle)."""
        shape = (n_steps, self.n_particles, 4)
        # Step i moves with `bits(key, shape)[i]`, hashed by step i - 1 into the carry: a loop
        # carry is one buffer, so the hash runs once per step (XLA would re-hash fused words in
        # every kernel that reads them) and no [steps, G, P, 4] array is built and transposed.

        def step(carry, i):
            spans, target, words, accepted = carry
            spans, target, accept = jax.vmap(
                lambda s, t, w: self._mh_step(w, s, t, obs, evidence))(spans, target, words)
            return (spans, target, fastpath.bits_row(key, shape, i + 1),
                    accepted + accept), None

        carry = (spans, target, fastpath.bits_row(key, shape, 0),
                 jnp.zeros(self.n_particles, jnp.int32))
        (spans, target, _, accepted), _ = lax.scan(step, carry, jnp.arange(n_steps))
        return spans, target, accepted

    def _mh_step(self, words, spans, target, obs, evidence):
        """One single-ship Metropolis move of one particle. `words`: `[4]` uint32 randomness;
        `evidence`: `constraints.answer_evidence` of `obs`.

        The proposal is symmetric: with probability 1/5 a uniformly random span of the ship's
        length (holding its revealed cells, when hits reveal colour), otherwise one of its four
        one-cell shifts (rejected if it leaves the board). Each move costs one target
        evaluation, not a scan of every placement, so many cheap moves replace a few enumerated
        ones. Overlaps and shot contradictions enter through the target's penalty, so a
        consistent particle effectively never leaves the evidence.
        """
        cfg = self.config
        table = spans_lib.table_for(cfg)
        ship = refrng.u32_times_int_high(words[0], jnp.int32(spans.shape[0]))
        current = spans[ship]
        length = jnp.asarray(table.length)[current]
        kind = refrng.u32_times_int_high(words[1], jnp.int32(5))
        if cfg.reveal_colour:
            # Uniform over the spans that hold the ship's revealed cells: a fixed set given the
            # evidence, so the independence proposal stays symmetric where the target lives.
            cand, valid_cand, cand_bits = spans_lib.candidate_bits(cfg, length)
            holds = valid_cand & bitboard.contains(cand_bits, obs.colour_bits[ship][None])
            n_holding = jnp.sum(holds, dtype=jnp.int32)
            pick = refrng.u32_times_int_high(words[2], n_holding)
            uniform_span = jnp.where(n_holding > 0, cand[moves.nth_true(holds, pick)], current)
        else:
            count = jnp.asarray(table.count)[length]
            uniform_span = (jnp.asarray(table.offset)[length]
                            + refrng.u32_times_int_high(words[2], count))
        shifted = jnp.asarray(table.neighbours)[current, jnp.clip(kind - 1, 0, 3)]
        candidate = jnp.where(kind == 0, uniform_span, shifted)
        valid = candidate >= 0
        proposal = spans.at[ship].set(jnp.where(valid, candidate, current))
        new_target = log_target(cfg, proposal, obs, evidence)
        u = refrng.u32_to_unit_float(words[3], jnp.float32)
        accept = valid & (jnp.log(jnp.maximum(u, 1e-30)) < new_target - target)
        return (jnp.where(accept, proposal, spans), jnp.where(accept, new_target, target),
                accept.astype(jnp.int32))
