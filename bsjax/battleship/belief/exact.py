"""Exhaustive posterior on small boards: the test oracle for the samplers (host numpy, float64).

The target is the stationary distribution of docs/battleship/protocol.md §5.1:

    P(x | obs) ∝ 1[x labelled, non-overlapping]                     (uniform prior)
               · 1[x shot-consistent]
               · Π_{asked j} L(answer_j == any(occupancy(x) ∩ region_j))

with `L = config.answer_likelihood()` (the tempered (match, mismatch) pair of §3; with ε ≤ 0 it is
(1, 1e-10), so a contradicted answer leaves a 1e-10 factor rather than an exact zero, as in the
reference). Shot consistency means every hit cell is covered and every miss cell is empty; ship k
must also cover every cell of `obs.colour_bits[k]` and, when `obs.sunk[k]`, equal exactly those
cells (grand §1 / §5.2; colour bits and `sunk` are all-zero / False under the paper protocol, where
these terms are vacuous). These are the terms of `bsjax.battleship.belief.constraints.shot_consistent`.

An unsunk ship under `sunk_feedback` is also informative (it cannot equal its revealed cells), but
the samplers do not use that fact; pass `unsunk_evidence=True` to include it.

Configurations are `[N, S]` int32 rows of global span ids (`bsjax.battleship.game.spans.table_for(config)`),
ship k taking a span of length `ship_lengths[k]`. Ships may touch.

Fixed fleet versus tracker. With `config.fleet` set (paper) ship k's length is known, so the
configurations are those of the given length tuple. With `config.fleet is None` (grand) the
captain knows only the multiset of lengths (the ship tracker), so the posterior enumerates every
distinct assignment of the multiset to the labelled ships (distinct permutations, in sorted order)
and takes the uniform prior over the union of their labelled configurations;
`fleet_configurations` builds that union.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import Observations

# Pair-matrix elements examined per chunk while extending configurations (memory bound).
_CHUNK_PAIRS = 1 << 22
# Configurations scored per chunk in `posterior_weights`.
_CHUNK_CONFIGS = 1 << 20


def _table(config: GameConfig) -> spans_lib.SpanTable:
    return spans_lib.table_for(config)


def _length_spans(table: spans_lib.SpanTable, length: int) -> np.ndarray:
    """Global span ids of one length, ascending."""
    if length < 0 or length >= table.offset.shape[0] or table.offset[length] < 0:
        raise ValueError(f"ship length {length} is not in the span table of this config")
    start = int(table.offset[length])
    return np.arange(start, start + int(table.count[length]), dtype=np.int32)


def enumerate_configurations(config: GameConfig, ship_lengths: Sequence[int],
                             allowed: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """Every labelled, non-overlapping placement of ships of `ship_lengths`.

    Args:
      config: board shape and span table.
      ship_lengths: length of ship k, in ship order.
      allowed: optional per-ship `[n_spans]` bool masks; ship k only takes spans allowed to it.
        Used to prune spans that no consistent configuration can use (exact when the pruned
        configurations would have zero posterior weight anyway).

    Returns:
      `[N, S]` int32 global span ids, in lexicographic order of rows.
    """
    ship_lengths = tuple(int(x) for x in ship_lengths)
    table = _table(config)
    n_ships = len(ship_lengths)
    if n_ships == 0:
        return np.zeros((1, 0), np.int32)
    candidates = []
    for k, length in enumerate(ship_lengths):
        cand = _length_spans(table, length)
        if allowed is not None:
            cand = cand[np.asarray(allowed[k], bool)[cand]]
        candidates.append(cand)

    configs = candidates[0][:, None]                       # [N, 1]
    occ = table.bits[candidates[0]]                        # [N, W]
    for k in range(1, n_ships):
        cand = candidates[k]
        cand_bits = table.bits[cand]                       # [M, W]
        m = cand.shape[0]
        if configs.shape[0] == 0 or m == 0:
            return np.zeros((0, n_ships), np.int32)
        step = max(1, _CHUNK_PAIRS // max(1, m * occ.shape[1]))
        new_configs, new_occ = [], []
        for lo in range(0, configs.shape[0], step):
            part_cfg, part_occ = configs[lo:lo + step], occ[lo:lo + step]
            free = ~np.any(part_occ[:, None, :] & cand_bits[None, :, :], axis=-1)   # [n, M]
            i, j = np.nonzero(free)                        # row-major: lexicographic order
            new_configs.append(np.concatenate([part_cfg[i], cand[j][:, None]], axis=1))
            new_occ.append(part_occ[i] | cand_bits[j])
        configs = np.concatenate(new_configs, axis=0)
        occ = np.concatenate(new_occ, axis=0)
    return np.ascontiguousarray(configs, dtype=np.int32)


def length_assignments(config: GameConfig, ship_lengths: Sequence[int]) -> list[tuple[int, ...]]:
    """The length tuples the posterior ranges over.

    Fixed fleet (`config.fleet` set): just `ship_lengths`. Tracker (`config.fleet is None`): every
    distinct permutation of the multiset `ship_lengths`, in sorted order.
    """
    ship_lengths = tuple(int(x) for x in ship_lengths)
    if config.fleet is not None:
        return [ship_lengths]
    return sorted(set(itertools.permutations(ship_lengths)))


def fleet_configurations(config: GameConfig, ship_lengths: Sequence[int],
                         allowed: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """`enumerate_configurations` over every length assignment of `length_assignments`.

    Returns:
      `[N, S]` int32: the blocks of each assignment concatenated in assignment order (the blocks
      are disjoint since ship k's length differs between assignments).
    """
    blocks = [enumerate_configurations(config, lengths, allowed)
              for lengths in length_assignments(config, ship_lengths)]
    return np.concatenate(blocks, axis=0)


def _obs_np(config: GameConfig, obs: Observations, n_ships: int) -> dict:
    words = config.n_words
    colour = np.asarray(obs.colour_bits, np.uint32).reshape(-1, words)
    sunk = np.asarray(obs.sunk, bool).reshape(-1)
    if colour.shape[0] < n_ships:
        colour = np.concatenate([colour, np.zeros((n_ships - colour.shape[0], words), np.uint32)])
    if sunk.shape[0] < n_ships:
        sunk = np.concatenate([sunk, np.zeros(n_ships - sunk.shape[0], bool)])
    question_bits = np.asarray(obs.question_bits, np.uint32).reshape(-1, words)
    n_questions = int(np.clip(int(np.asarray(obs.n_questions)), 0, question_bits.shape[0]))
    return dict(
        hit=np.asarray(obs.hit_bits, np.uint32).reshape(words),
        miss=np.asarray(obs.miss_bits, np.uint32).reshape(words),
        colour=colour[:n_ships],
        sunk=sunk[:n_ships],
        question_bits=question_bits[:n_questions],
        answers=np.asarray(obs.answers, bool).reshape(-1)[:n_questions],
    )


def _allowed_spans(config: GameConfig, o: dict, n_ships: int) -> list[np.ndarray]:
    """Per-ship span masks implied by single-ship shot constraints (exactness-preserving)."""
    bits = _table(config).bits                                           # [n_spans, W]
    no_miss = ~np.any(bits & o["miss"][None, :], axis=-1)
    out = []
    for k in range(n_ships):
        colour = o["colour"][k]
        ok = no_miss & ~np.any(colour[None, :] & ~bits, axis=-1)        # covers colour cells
        if o["sunk"][k]:
            ok &= np.all(bits == colour[None, :], axis=-1)
        out.append(ok)
    return out


def _log_weights(config: GameConfig, configurations: np.ndarray, o: dict,
                 unsunk_evidence: bool) -> np.ndarray:
    """Unnormalised float64 log-weights, -inf for shot-inconsistent configurations."""
    table = _table(config)
    configurations = np.asarray(configurations, np.int64)
    n = configurations.shape[0]
    out = np.empty(n, np.float64)
    log_match, log_mismatch = (np.log(max(x, 1e-300)) for x in config.answer_likelihood())
    for lo in range(0, n, _CHUNK_CONFIGS):
        cfg = configurations[lo:lo + _CHUNK_CONFIGS]
        ship_bits = table.bits[cfg]                                      # [n, S, W]
        board = np.bitwise_or.reduce(ship_bits, axis=1) if cfg.shape[1] else np.zeros(
            (cfg.shape[0], config.n_words), np.uint32)                   # [n, W]
        ok = ~np.any(o["hit"][None, :] & ~board, axis=-1)
        ok &= ~np.any(o["miss"][None, :] & board, axis=-1)
        colour = o["colour"][None]                                       # [1, S, W]
        ok &= np.all(~np.any(colour & ~ship_bits, axis=-1), axis=-1)
        exact = np.all(ship_bits == colour, axis=-1)                     # [n, S]
        ok &= np.all(~o["sunk"][None, :] | exact, axis=-1)
        if unsunk_evidence and config.sunk_feedback:
            ok &= np.all(o["sunk"][None, :] | ~exact, axis=-1)
        logw = np.zeros(cfg.shape[0], np.float64)
        for region, answer in zip(o["question_bits"], o["answers"]):
            truth = np.any(board & region[None, :], axis=-1)
            logw += np.where(truth == answer, log_match, log_mismatch)
        out[lo:lo + _CHUNK_CONFIGS] = np.where(ok, logw, -np.inf)
    return out


def _normalise(logw: np.ndarray) -> np.ndarray:
    if logw.size == 0 or not np.any(np.isfinite(logw)):
        return np.zeros(logw.shape, np.float64)
    w = np.exp(logw - np.max(logw))
    return w / w.sum()


def posterior_weights(config: GameConfig, configurations: np.ndarray, obs: Observations, *,
                      unsunk_evidence: bool = False) -> np.ndarray:
    """Normalised posterior weights of `configurations` (`[N, S]` span ids) given `obs`.

    The prior is uniform over the rows given (pass `fleet_configurations` for a tracker fleet).

    Returns:
      `[N]` float64 summing to 1, or all zeros when no row is consistent with the evidence.
    """
    configurations = np.asarray(configurations)
    o = _obs_np(config, obs, configurations.shape[1])
    return _normalise(_log_weights(config, configurations, o, unsunk_evidence))


def posterior(config: GameConfig, obs: Observations, ship_lengths: Sequence[int] | None = None,
              *, unsunk_evidence: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The exact posterior: (`[N, S]` int32 configurations, `[N]` float64 weights).

    Enumerates `fleet_configurations` pruned by single-ship shot constraints (misses, colour
    cells, sunk ships), which removes only zero-weight rows. `ship_lengths` defaults to
    `obs.ship_lengths`.
    """
    if ship_lengths is None:
        ship_lengths = tuple(int(x) for x in np.asarray(obs.ship_lengths).reshape(-1))
    ship_lengths = tuple(int(x) for x in ship_lengths)
    o = _obs_np(config, obs, len(ship_lengths))
    allowed = _allowed_spans(config, o, len(ship_lengths))
    configs = fleet_configurations(config, ship_lengths, allowed)
    return configs, _normalise(_log_weights(config, configs, o, unsunk_evidence))


def hit_probability(config: GameConfig, obs: Observations,
                    ship_lengths: Sequence[int] | None = None, *,
                    unsunk_evidence: bool = False) -> np.ndarray:
    """Exact marginal P(some ship covers c | obs) for every cell (revealed cells included).

    Returns:
      `[C]` float64; all zeros when no configuration is consistent with the evidence.
    """
    configs, weights = posterior(config, obs, ship_lengths, unsunk_evidence=unsunk_evidence)
    table = _table(config)
    # Ships never overlap, so the cell marginal is the sum over ships of span marginals.
    span_mass = np.zeros(table.n_spans, np.float64)
    for k in range(configs.shape[1]):
        span_mass += np.bincount(configs[:, k], weights=weights, minlength=table.n_spans)
    return np.clip(span_mass @ table.cells.astype(np.float64), 0.0, 1.0)


def question_yes_probability(config: GameConfig, obs: Observations, region_cells: np.ndarray,
                             ship_lengths: Sequence[int] | None = None, *,
                             unsunk_evidence: bool = False) -> float:
    """Exact raw P(any ship cell in `region_cells` (`[C]` bool) | obs), no answer noise."""
    configs, weights = posterior(config, obs, ship_lengths, unsunk_evidence=unsunk_evidence)
    region = bitboard.pack_np(np.asarray(region_cells, bool).reshape(config.n_cells))
    board = np.bitwise_or.reduce(_table(config).bits[configs], axis=1)  # [N, W]
    yes = np.any(board & region[None, :], axis=-1)
    return float(min(1.0, np.sum(weights[yes])))
