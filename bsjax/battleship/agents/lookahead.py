"""Look-ahead over the particle belief on top of bayes (docs/battleship/lookahead.md), ONE game.

Bayes (Bayes-Q, -M, -D) decides first; three searches may then change its action, each off
when its budget is zero, so that with every budget at zero the captain plays bayes's games:

- shots (`n_shots` > 1): bayes's MAP cell and the next `n_shots - 1` cells by hit probability
  are scored by their futures under the MAP base policy for `depth` further shots, either
  exactly over the particles as an outcome tree (`search="tree"`: expected hits; "tree-cross"
  chooses with one half of the particles and counts with the other) or by `n_rollouts`
  truths drawn from the particles (`search="sample"`: expected shots to sink the fleet, the
  rollout's belief the particles filtered by the simulated outcomes, no MCMC inside a
  rollout, the same truths for every candidate). The best replaces bayes's cell only if it
  beats it by more than `margin` (hits for a tree, shots for samples).
- question timing (`ask_depth` > 0): bayes's question waits a turn unless asking it first
  expects more hits over the next `ask_depth` shots than shooting first and asking then.
- question choice (`n_questions` > 1): the question of the `n_questions` best by EIG whose
  answer and `question_depth` shots expect the most hits.

Measured on training seeds, none of the searches beat bayes (docs/battleship/lookahead.md).
"""

from __future__ import annotations

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
from jax import lax

from bsjax.battleship.agents.base import Agent
from bsjax.battleship.agents.bayes import BayesAgent, BayesParams, already_asked, candidate_regions
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard
from bsjax.battleship.planning import eig, scoring, sim
from bsjax.battleship.planning.scoring import summarize_turn
from bsjax.battleship.types import ASK, SHOOT, View
from bsjax.core import fastpath

# Bayes-D's γ per protocol, each chosen on that protocol's training seeds
# (docs/battleship/lookahead.md): asking less pays on the paper's noisy answers, while on
# Grand et al.'s boards bayes's own 0.95 is best. A protocol not listed gets the paper's.
GAMMA_BY_PROTOCOL = {"paper": 0.85, "grand": 0.95}


@chex.dataclass(frozen=True)
class LookaheadParams:
    """The look-ahead's traced params: `[]` float32 each, but bayes.

    Attributes:
      bayes: the base policy's params (γ, scoring).
      tail_shots: shots charged per truth cell unhit at a rollout's horizon.
      margin: what a candidate shot must gain over bayes's cell to replace it (expected hits
        for a tree, mean shots for samples).
      mismatch: the factor a rollout's belief applies to a particle per simulated outcome it
        contradicts (0: hard filtering).
      keep_truth: the weight factor of the particles identical to the rollout's truth in its
        belief (0: left out).
      margin_ask: the expected hits asking now must gain over asking after a shot.
      margin_question: the expected hits a question must gain over bayes's to replace it.
    """

    bayes: BayesParams
    tail_shots: chex.Array
    margin: chex.Array
    mismatch: chex.Array
    keep_truth: chex.Array
    margin_ask: chex.Array
    margin_question: chex.Array


def candidate_shots(p: jax.Array, legal: jax.Array, n_shots: int) -> tuple[jax.Array, jax.Array]:
    """`[n_shots]` int32 cells, the legal ones by hit probability, and `[n_shots]` bool valid
    (a legal cell; fewer legal cells than slots leave the rest invalid).

    The first is bayes's MAP cell (`scoring.best_shot`) whenever a cell is legal: `lax.top_k`
    breaks ties by the lower index, as `best_shot` does. One top-k, with no cell concatenated
    before it: on a GPU that was two kernels more.
    """
    score, cells = lax.top_k(jnp.where(legal, p, -1.0), n_shots)
    return cells.astype(jnp.int32), score >= 0.0


def least_cost(cost: jax.Array, cells: jax.Array, n_cells: int) -> tuple[jax.Array, jax.Array]:
    """The candidate of least `[K]` cost (the first on ties, the first NaN if any): its `[]`
    cell and `[]` cost, equal to `cells[k]` and `cost[k]` with `k = fastpath.first_argmax(-cost)`.

    One reduction, no gather: the candidate's index and cell travel in an integer key beside
    its cost. On a GPU a gather of a per-game index is a kernel of its own; the argmax and the
    gathers took five launches a turn.
    """
    key = jnp.arange(cost.shape[0], dtype=jnp.int32) * n_cells + cells

    def first_of_max(a, b):
        (value_a, key_a), (value_b, key_b) = a, b
        nan_a, nan_b = jnp.isnan(value_a), jnp.isnan(value_b)
        earlier = key_a < key_b
        take_a = jnp.where(nan_a | nan_b, nan_a & (~nan_b | earlier),
                           (value_a > value_b) | ((value_a == value_b) & earlier))
        return jnp.where(take_a, value_a, value_b), jnp.where(take_a, key_a, key_b)

    start = (jnp.array(-jnp.inf, cost.dtype), jnp.int32(jnp.iinfo(jnp.int32).max))
    best, key = lax.reduce((-cost, key), start, first_of_max, (0,))
    return key % n_cells, -best


def rollout_cost(parts: sim.Particles, truth: jax.Array, open_cells: jax.Array,
                 first: jax.Array, depth: int, params: LookaheadParams) -> jax.Array:
    """`[]` float32 shots to sink the fleet from shooting `first`, then the filtered MAP cell.

    Args:
      parts: the turn's particles (`[P, C]` occupancy, `[P]` weights).
      truth: `[]` int32 the particle taken as the true board.
      open_cells: `[C]` bool cells not shot yet.
      first: `[]` int32 the candidate cell.
      depth: static number of shots after `first`.
      params: tail_shots, mismatch and keep_truth are read.
    """
    occ = parts.occupancy                                                       # [P, C]
    truth_cells = occ[truth] > 0.0                                              # [C]
    # 500 particles are a far narrower hypothesis space than the posterior: filtered hard and
    # with the truth among them, a few simulated shots single the truth out. Soft filtering
    # (mismatch) and leaving the truth out (keep_truth) widen the rollout's belief; on
    # training seeds neither helped (docs/battleship/lookahead.md).
    same = jnp.all(parts.bits == parts.bits[truth], axis=-1)                    # [P]
    weights = parts.weights * jnp.where(same, params.keep_truth, 1.0)

    def shoot(carry, cell):
        weights, open_, left, shots = carry
        hit = truth_cells[cell]
        weights = jnp.where((occ[:, cell] > 0.0) == hit, weights, weights * params.mismatch)
        shots = shots + jnp.any(left).astype(jnp.float32)
        return weights, open_.at[cell].set(False), left.at[cell].set(False), shots

    def step(_, carry):
        weights, open_, _, _ = carry
        cell = fastpath.first_argmax(jnp.where(open_, weights @ occ, -1.0))
        return shoot(carry, cell)

    carry = shoot((weights, open_cells, truth_cells & open_cells, jnp.float32(0.0)),
                  first)
    _, _, left, shots = lax.fori_loop(0, depth, step, carry)
    return shots + params.tail_shots * jnp.sum(left).astype(jnp.float32)


def tree_hits(occupancy: jax.Array, choose: jax.Array, value: jax.Array,
              open_cells: jax.Array, first: jax.Array, depth: int,
              bits: jax.Array | None = None) -> jax.Array:
    """`[]` float32 expected hits in `depth + 1` shots: `first`, then the MAP cell of the
    belief filtered by the outcomes so far, expected exactly over the particles.

    The base policy's next shot depends only on the outcomes, so its futures form a binary
    tree of 2^(depth+1) - 1 shot nodes: each level is one `[n, P] @ [P, C]` product. The
    policy's cells are chosen with the `choose` weights and its hits counted with the `value`
    weights (`[P]` each, the value's summing to 1). With the same weights, the max of a
    marginal estimated from the few particles of a deep branch is biased upwards;
    `cross_fit_hits` passes disjoint halves to remove that bias. The Python loop runs over
    the static depth (the node count doubles, so no scan).

    `bits` (`[P, W]` uint32, the same particles as bitboards): on a TPU the shot cells'
    columns are read from them (`_columns_by_word`, the same 0/1 values), not gathered from the
    float occupancy: a TPU copies the whole `[P, C]` occupancy to a particles-minor layout for
    that gather and writes the gathered columns out. Elsewhere the gather, which fuses better
    on a GPU.
    """
    occ = occupancy                                                             # [P, C]
    choose, value, open_, cells = choose[None], value[None], open_cells[None], first[None]
    total = jnp.float32(0.0)
    for level in range(depth + 1):
        hit = (_columns_by_gather(occ, bits, cells) if bits is None                   # [n, P]
               else lax.platform_dependent(occ, bits, cells, tpu=_columns_by_word,
                                           default=_columns_by_gather))
        total = total + jnp.sum(value * hit)
        if level == depth:
            break
        open_ = jnp.where(jnp.arange(occ.shape[1]) == cells[:, None], False, open_)
        choose = jnp.concatenate([choose * hit, choose * (1.0 - hit)])          # [2n, P]
        value = jnp.concatenate([value * hit, value * (1.0 - hit)])
        open_ = jnp.concatenate([open_, open_])                                 # [2n, C]
        cells = jax.vmap(fastpath.first_argmax)(jnp.where(open_, choose @ occ, -1.0))
    return total


def _columns_by_gather(occupancy: jax.Array, bits, cells: jax.Array) -> jax.Array:
    """`[n, P]` float32 columns `cells` (`[n]` int32) of the `[P, C]` occupancy."""
    del bits
    return occupancy[:, cells].T


def _columns_by_word(occupancy, bits: jax.Array, cells: jax.Array) -> jax.Array:
    """`[n, P]` float32 bit `cells[i]` (`[n]` int32) of each particle's `[P, W]` bitboard."""
    del occupancy
    # Each cell's word picked by a select over the few words, not gathered: the columns then
    # fuse into their readers instead of being written out.
    index, shift = (cells // 32)[:, None], (cells % 32).astype(jnp.uint32)[:, None]
    words = jnp.broadcast_to(bits[:, 0], (cells.shape[0], bits.shape[0]))        # [n, P]
    for word in range(1, bits.shape[1]):                                        # static: W
        words = jnp.where(index == word, bits[:, word][None], words)
    return ((words >> shift) & jnp.uint32(1)).astype(jnp.float32)


def cross_fit_hits(parts: sim.Particles, open_cells: jax.Array, first: jax.Array,
                   depth: int) -> jax.Array:
    """`[]` float32 `tree_hits` with the particles split in two halves (even and odd
    indices): one half chooses, the other counts, and the two ways are averaged."""
    half = (jnp.arange(parts.weights.shape[0]) % 2).astype(jnp.float32)
    a, b = parts.weights * (1.0 - half), parts.weights * half
    a, b = a / jnp.maximum(jnp.sum(a), 1e-30), b / jnp.maximum(jnp.sum(b), 1e-30)
    return 0.5 * (tree_hits(parts.occupancy, a, b, open_cells, first, depth, parts.bits)
                  + tree_hits(parts.occupancy, b, a, open_cells, first, depth, parts.bits))


def script_hits(occupancy: jax.Array, weights: jax.Array, open_cells: jax.Array,
                answers: jax.Array, valid: jax.Array, epsilon: jax.Array,
                script: tuple[str, ...], first: jax.Array | None = None) -> jax.Array:
    """`[]` float32 expected hits of a fixed script of shots ("S": the MAP cell) and questions
    ("Q": the max-EIG region of the pool under the node's belief), exactly over the particles.

    Every op splits each node in two (hit / miss, answered yes / no with the noise ε), so the
    tree has at most 2^len(script) leaves; a question's children carry the answer's
    likelihood, so every level's masses sum to 1.

    Args:
      occupancy: `[P, C]` 0/1 ship cells of each particle.
      weights: `[P]` normalised weights.
      open_cells: `[C]` bool cells not shot yet.
      answers: `[Kq, P]` bool the pool's noise-free answers.
      valid: `[Kq]` bool the askable regions of the pool.
      epsilon: `[]` the answer flip rate.
      script: static ops, e.g. ("Q", "S", "S").
      first: `[P]` bool the answers of a fixed first question (the script starts with "Q").
    """
    occ, ans_f = occupancy, answers.astype(jnp.float32)
    w, open_ = weights[None], open_cells[None]                                  # n = 1
    total = jnp.float32(0.0)
    for i, op in enumerate(script):
        last = i == len(script) - 1
        if op == "S":
            cells = jax.vmap(fastpath.first_argmax)(jnp.where(open_, w @ occ, -1.0))
            hit = occ[:, cells].T                                               # [n, P]
            total = total + jnp.sum(w * hit)
            if last:
                break
            open_ = jnp.where(jnp.arange(occ.shape[1]) == cells[:, None], False, open_)
            split = hit
        elif i == 0 and first is not None:
            split = epsilon + (1.0 - 2.0 * epsilon) * first.astype(jnp.float32)[None]
        else:
            mass = jnp.maximum(jnp.sum(w, axis=1, keepdims=True), 1e-30)
            p_yes = (w @ ans_f.T) / mass                                        # [n, Kq]
            gain = jnp.where(valid, eig.expected_information_gain(p_yes, epsilon), -jnp.inf)
            chosen = ans_f[jax.vmap(fastpath.first_argmax)(gain)]               # [n, P]
            split = epsilon + (1.0 - 2.0 * epsilon) * chosen    # L(recorded yes | particle)
        w = jnp.concatenate([w * split, w * (1.0 - split)])                     # [2n, P]
        open_ = jnp.concatenate([open_, open_])
    return total


@dataclasses.dataclass(frozen=True)
class LookaheadAgent(Agent):
    """bayes plus look-ahead. Static structure (the search budgets change shapes): the config,
    the shot search (`n_shots` candidates, `depth` shots after each, `search`, `n_rollouts`
    sampled truths), the question timing (`ask_depth`) and choice (`n_questions`,
    `question_depth`), and bayes's rule."""

    config: GameConfig
    n_shots: int = 8
    depth: int = 2
    search: str = "tree"
    n_rollouts: int = 16
    ask_depth: int = 0
    n_questions: int = 0
    question_depth: int = 2
    rule: scoring.ScoringRule = scoring.information_gain

    name = "lookahead"
    needs_belief = True

    @property
    def base(self) -> BayesAgent:
        return BayesAgent(self.config, self.rule)

    def default_params(self) -> LookaheadParams:
        # γ per protocol, and a shot margin of 0.2 hits chosen on training seeds 0-11
        # (docs/battleship/lookahead.md): the shot search then rarely overrides bayes.
        gamma = GAMMA_BY_PROTOCOL.get(self.config.name, GAMMA_BY_PROTOCOL["paper"])
        bayes = self.base.default_params().replace(gamma=jnp.float32(gamma))
        return LookaheadParams(bayes=bayes, tail_shots=jnp.float32(1.5),
                               margin=jnp.float32(0.2), mismatch=jnp.float32(0.0),
                               keep_truth=jnp.float32(1.0), margin_ask=jnp.float32(0.0),
                               margin_question=jnp.float32(0.0))

    def init_state(self, params):
        return ()

    def _question_pool(self, view: View, turn):
        """bayes's candidate questions: (`[Kq, W]` regions, `[Kq]` template ids, `[Kq, P]`
        answers of every particle, `[Kq]` valid: not empty, not asked before)."""
        regions, template = candidate_regions(self.config, turn.hit_cells, turn.unknown)
        answers = sim.answers(regions, turn.parts)
        valid = bitboard.any_set(regions) & ~already_asked(regions, view)
        return regions, template, answers, valid

    def _pick_question(self, params: LookaheadParams, view: View, turn, action):
        """Replace bayes's question (max EIG) by the one of the `n_questions` best by EIG whose
        answer then `question_depth` MAP shots expect the most hits, if it gains more than
        `margin_question` hits."""
        regions, template, answers, valid = self._question_pool(view, turn)
        p_yes = answers.astype(jnp.float32) @ turn.parts.weights
        gain = jnp.where(valid, eig.expected_information_gain(p_yes, turn.answers.epsilon),
                         -jnp.inf)
        top_gain, top = lax.top_k(gain, self.n_questions)                       # [Kc]
        script = ("Q",) + ("S",) * self.question_depth

        def hits(q):
            return script_hits(turn.parts.occupancy, turn.parts.weights, turn.unknown, answers,
                               valid, turn.answers.epsilon, script, first=answers[q])

        value = jnp.where(top_gain > -jnp.inf, jax.vmap(hits)(top), -jnp.inf)
        pick = fastpath.first_argmax(value)
        q = jnp.where(value[pick] > value[0] + params.margin_question, top[pick], top[0])
        asks = action.kind == ASK
        return action._replace(question_id=jnp.where(asks, template[q], action.question_id),
                               question_bits=jnp.where(asks, fastpath.row_at(regions, q),
                                                             action.question_bits))

    def _time_question(self, params: LookaheadParams, view: View, turn, action):
        """Let bayes's question wait a turn unless asking it now and then shooting `ask_depth`
        times expects more than `margin_ask` hits over shooting first, then asking the best
        question of each branch, then `ask_depth - 1` shots (the same shots and questions in
        two orders). The search only delays bayes's questions; it adds none."""
        _, _, answers, valid = self._question_pool(view, turn)
        run = functools.partial(script_hits, turn.parts.occupancy, turn.parts.weights,
                                turn.unknown, answers, valid, turn.answers.epsilon)
        shots = ("S",) * (self.ask_depth - 1)
        gain = run(("Q", "S") + shots) - run(("S", "Q") + shots)
        wait = (action.kind == ASK) & (gain <= params.margin_ask)
        return action._replace(kind=jnp.where(wait, SHOOT, action.kind).astype(jnp.int32),
                               cell=jnp.where(wait, turn.best, action.cell),
                               question_id=jnp.where(wait, -1, action.question_id))

    def decide(self, key: jax.Array, params: LookaheadParams, view: View, sampler, belief,
               state):
        """Returns (action, `[]` float32 p of the chosen cell (bayes's for a question), state).
        The key is consumed (the sampled truths)."""
        # Split as when bayes was handed the first half (it reads no key): the same truths.
        _, k_truths = jax.random.split(key)
        turn = summarize_turn(self.config, view, sampler, belief)
        action, p_best = self.base.act(params.bayes, view, turn)
        if self.ask_depth > 0:
            action = self._time_question(params, view, turn, action)
        if self.n_questions > 1:
            action = self._pick_question(params, view, turn, action)
        if self.n_shots > 1 and (self.search != "sample" or self.n_rollouts > 0):
            action = self._pick_shot(k_truths, params, turn, action)
        return action, jnp.where(action.kind == SHOOT, turn.p[action.cell], p_best), state

    def _pick_shot(self, key: jax.Array, params: LookaheadParams, turn, action):
        """bayes's shot replaced by the candidate of the least cost (see the module). The key
        is consumed (the sampled truths)."""
        cells, valid = candidate_shots(turn.p, turn.unknown, self.n_shots)
        if self.search in ("tree", "tree-cross"):
            w = turn.parts.weights
            hits = (functools.partial(tree_hits, turn.parts.occupancy, w, w,
                                      bits=turn.parts.bits)
                    if self.search == "tree"
                    else functools.partial(cross_fit_hits, turn.parts))
            cost = -jax.vmap(lambda c: hits(turn.unknown, c, self.depth))(cells)    # [K]
        else:
            truths = jax.random.categorical(key, jnp.log(turn.parts.weights),
                                            shape=(self.n_rollouts,))           # [N]

            def one(first, truth):
                return rollout_cost(turn.parts, truth, turn.unknown, first, self.depth, params)

            cost = jnp.mean(jax.vmap(lambda c: jax.vmap(lambda t: one(c, t))(truths))(cells),
                            axis=1)                                             # [K]
        # An invalid candidate costs inf, which beats nothing: no validity test is needed.
        cost = jnp.where(valid, cost, jnp.inf)
        cell, least = least_cost(cost, cells, turn.p.shape[0])
        better = (least < cost[0] - params.margin) & (action.kind == SHOOT)
        return action._replace(cell=jnp.where(better, cell, action.cell))


__all__ = ["GAMMA_BY_PROTOCOL", "LookaheadAgent", "LookaheadParams", "candidate_shots",
           "least_cost", "rollout_cost", "tree_hits"]
