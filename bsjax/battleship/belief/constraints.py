"""Evidence terms shared by every sampler: shot consistency and the answer log-likelihood."""

from __future__ import annotations

import chex
import jax.numpy as jnp

from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import Observations

NEG_INF = -jnp.inf
# (ln L(match), ln L(mismatch)) of an answer model (`belief.base.AnswerModel.log_likelihood`), or
# None: the protocol's own (`GameConfig.log_answer_likelihood`).
LogLikelihood = tuple[jnp.ndarray, jnp.ndarray] | None
# Up to this many questions a placement's answer log-likelihood is read from a `[2**Q]` table of
# every value the sum can take (256 KiB in float32 at Q = 16); beyond it, summed per placement.
TABLE_MAX_QUESTIONS = 16


def shot_consistent(ship_bits: jnp.ndarray, obs: Observations, has_colours: bool = True) -> jnp.ndarray:
    """Whether a placement agrees with every shot.

    Args:
      ship_bits: `[S, W]` uint32 bitboard of each ship.
      obs: the observations.
      has_colours: static; False skips the colour/sunk terms (protocols that reveal no colour).
    Returns:
      `[]` bool: every hit covered, no miss covered, ship k covers the cells revealed as k, and a
      ship known sunk covers exactly its revealed cells.
    """
    board = bitboard.union(ship_bits, axis=0)
    ok = bitboard.contains(board, obs.hit_bits) & ~bitboard.intersects(board, obs.miss_bits)
    if not has_colours:
        return ok
    colour_ok = bitboard.contains(ship_bits, obs.colour_bits)                       # [S]
    sunk_ok = ~obs.sunk | ~bitboard.any_set(ship_bits ^ obs.colour_bits)              # [S]
    return ok & jnp.all(colour_ok & sunk_ok)


def shot_consistent_lanes(ship_bits: jnp.ndarray, obs: Observations,
                          has_colours: bool = True) -> jnp.ndarray:
    """`shot_consistent` of N placements at once, laid out placements last (what a TPU runs:
    `spans.spans_bits_lanes`).

    Args:
      ship_bits: `[S, W, N]` uint32 bitboard of each ship of each placement.
    Returns:
      `[N]` bool, each placement's `shot_consistent`.
    """
    def any_set(bits):  # [..., W, N] -> [..., N]: as `bitboard.any_set`, over the word axis
        folded = bits[..., 0, :]
        for word in range(1, bits.shape[-2]):
            folded = folded | bits[..., word, :]
        return folded != 0

    board = bitboard.union(ship_bits, axis=0)                                       # [W, N]
    ok = (~any_set(obs.hit_bits[:, None] & ~board)
          & ~any_set(board & obs.miss_bits[:, None]))
    if not has_colours:
        return ok
    colours = obs.colour_bits[:, :, None]                                           # [S, W, 1]
    colour_ok = ~any_set(colours & ~ship_bits)                                      # [S, N]
    sunk_ok = ~obs.sunk[:, None] | ~any_set(ship_bits ^ colours)                     # [S, N]
    return ok & jnp.all(colour_ok & sunk_ok, axis=0)


def answer_log_likelihood(config: GameConfig, board: jnp.ndarray, obs: Observations,
                          dtype=jnp.float32, likelihood: LogLikelihood = None) -> jnp.ndarray:
    """Sum over recorded answers of ln L(answer matches the board), in answer order.

    Args:
      board: `[W]` uint32 occupancy.
      likelihood: (ln L(match), ln L(mismatch)) of the answer model (`AnswerModel.
        log_likelihood`); the protocol's by default.
    Returns:
      `[]` log-likelihood of `dtype`.
    """
    truth = bitboard.intersects(obs.question_bits, board[None, :])                   # [Q]
    return sum_answer_terms(config, truth, obs, dtype, likelihood)


def _log_terms(config: GameConfig, dtype, likelihood) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(ln L(match), ln L(mismatch)) as `dtype`: the answer model's, or the protocol's."""
    log_match, log_mismatch = (config.log_answer_likelihood() if likelihood is None
                               else likelihood)
    return jnp.asarray(log_match, dtype), jnp.asarray(log_mismatch, dtype)


def sum_answer_terms(config: GameConfig, truth: jnp.ndarray, obs: Observations,
                     dtype=jnp.float32, likelihood: LogLikelihood = None) -> jnp.ndarray:
    """`answer_log_likelihood` from `[Q]` bool: whether the board meets each question's region.

    The sum is accumulated sequentially (an unrolled chain of adds over the static question
    budget) so that, in float64, it reproduces the reference's left-to-right sum bit for bit.
    """
    log_match, log_mismatch = _log_terms(config, dtype, likelihood)
    terms = jnp.where(truth == obs.answers, log_match, log_mismatch)
    total = jnp.zeros((), dtype)
    for j in range(config.max_questions):  # static, tiny: keeps the reference summation order
        total = total + jnp.where(j < obs.n_questions, terms[j], jnp.zeros((), dtype))
    return total


def span_question_masks(config: GameConfig, obs: Observations) -> jnp.ndarray:
    """`[N, Qw]` uint32, one row per span of the table: bit j set when the span meets the region
    of question j. Built once per observation, it turns a placement's answers into an OR of S
    table rows instead of S x Q bitboard intersections per evaluation."""
    span_bits = jnp.asarray(spans_lib.table_for(config).bits)                       # [N, W]
    return bitboard.pack(bitboard.any_set(span_bits[:, None] & obs.question_bits[None]))


def placement_truth(config: GameConfig, question_masks: jnp.ndarray,
                    spans: jnp.ndarray) -> jnp.ndarray:
    """`[Q]` bool: whether placement `spans` (`[S]` span ids) meets each question's region, from
    `span_question_masks`. Equal to intersecting its bitboard with every question."""
    words = bitboard.union(question_masks[spans], axis=0)                          # [Qw]
    return bitboard.unpack(words, config.max_questions)


@chex.dataclass(frozen=True)
class AnswerEvidence:
    """The answers of one observation, arranged so that a placement's answer log-likelihood is
    an OR of S table rows and one lookup. Built once per observation by `answer_evidence`.

    Attributes:
      question_masks: `[N, Qw]` uint32 `span_question_masks`.
      terms: `[2]` (ln L(match), ln L(mismatch)) of the answer model, in the sum's dtype.
      answers: `[Qw]` uint32 the recorded answers, packed.
      asked: `[Qw]` uint32 bit j set for the questions asked so far.
      sums: `[2**Q]` the answer log-likelihood of every mismatch pattern (bit j set: the
        placement disagrees with answer j); `[1]` when there is no table (Q >
        TABLE_MAX_QUESTIONS, or `answer_evidence(table=False)`): its dtype is then the sum's.
    """

    question_masks: chex.Array
    terms: chex.Array
    answers: chex.Array
    asked: chex.Array
    sums: chex.Array


def answer_sums(config: GameConfig, obs: Observations, dtype=jnp.float32,
                likelihood: LogLikelihood = None) -> jnp.ndarray:
    """`[2**Q]`: entry m is `sum_answer_terms` of a placement that mismatches exactly the answers
    in bit pattern m. Built by the same sequential adds in the same order, so every entry equals
    the per-placement sum bit for bit (float32 and float64 alike)."""
    log_match, log_mismatch = _log_terms(config, dtype, likelihood)
    zero = jnp.zeros((), dtype)
    pattern = jnp.arange(2 ** config.max_questions, dtype=jnp.int32)
    sums = jnp.zeros(pattern.shape, dtype)
    for j in range(config.max_questions):  # the answers in order: bit j is the j-th answer
        term = jnp.where((pattern >> j) & 1 == 1, log_mismatch, log_match)
        sums = sums + jnp.where(j < obs.n_questions, term, zero)
    return sums


def answer_evidence(config: GameConfig, obs: Observations, dtype=jnp.float32,
                    table: bool = True, likelihood: LogLikelihood = None) -> AnswerEvidence:
    """The `AnswerEvidence` of `obs` under the answer model's `likelihood` (the protocol's by
    default); `table=False` (static) leaves out the `sums` table, so `placement_log_likelihood`
    sums the answer terms per placement."""
    n_questions = config.max_questions
    use_table = table and n_questions <= TABLE_MAX_QUESTIONS
    return AnswerEvidence(
        question_masks=span_question_masks(config, obs),
        terms=jnp.stack(_log_terms(config, dtype, likelihood)),
        answers=bitboard.pack(obs.answers),
        asked=bitboard.pack(jnp.arange(n_questions) < obs.n_questions),
        sums=(answer_sums(config, obs, dtype, likelihood) if use_table
              else jnp.zeros((1,), dtype)))


def placement_log_likelihood(config: GameConfig, evidence: AnswerEvidence, spans: jnp.ndarray,
                             obs: Observations) -> jnp.ndarray:
    """`[]` the answer log-likelihood of placement `spans` (`[S]` span ids): equal to
    `answer_log_likelihood` of its board, of the dtype of `evidence.sums`."""
    if evidence.sums.shape[0] == 1:  # no table (Q = 0 too: the sum of no terms)
        truth = placement_truth(config, evidence.question_masks, spans)
        return sum_answer_terms(config, truth, obs, evidence.sums.dtype,
                                (evidence.terms[0], evidence.terms[1]))
    words = bitboard.union(evidence.question_masks[spans], axis=0)                  # [Qw]
    mismatch = (words ^ evidence.answers) & evidence.asked
    return evidence.sums[mismatch[0].astype(jnp.int32)]


def log_posterior(config: GameConfig, ship_bits: jnp.ndarray, obs: Observations,
                  dtype=jnp.float32, log_likelihood: jnp.ndarray | None = None,
                  likelihood: LogLikelihood = None) -> jnp.ndarray:
    """Unnormalised log-posterior of a placement `[S, W]`: -inf if it contradicts a shot.

    `log_likelihood` (its answer log-likelihood, of `dtype`) may be given when the caller has it
    from `placement_log_likelihood`; otherwise it is summed from the bitboards.
    """
    if log_likelihood is None:
        board = bitboard.union(ship_bits, axis=0)
        log_likelihood = answer_log_likelihood(config, board, obs, dtype, likelihood)
    return jnp.where(shot_consistent(ship_bits, obs, config.reveal_colour), log_likelihood,
                     jnp.asarray(NEG_INF, dtype))
