"""The chain's repair search: the first `generateBoard(seed), generateBoard(seed + 1), ...` that
agrees with the shots, within a budget of tries (docs/battleship/protocol.md §5.1).

Written for one game, the search would run inside `vmap` as a loop that every game of the batch
executes until the slowest is done: late in a game a stuck chain searches its whole budget (10,000
boards) on every turn, and one such game made the other 53 of a batch generate 10,000 boards each.
So the search has its own batching rule (`jax.custom_batching.custom_vmap`): each round spreads
one pool of lanes over only the games still searching, each game its next seeds in order, and a
game's first consistent lane is its answer. The result is the sequential search's, game for game:
the same board and the same number of tries (which advances the game's seed counter).

A batch sharded over devices pools within each device's games (`groups`), so that the lanes
never gather another device's games; a TPU runs fewer lanes a game (`TPU_LANES_PER_GAME`). Neither
changes a board.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.custom_batching import custom_vmap

from bsjax.battleship.belief import constraints, generator
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.types import Observations

# Lanes per game and round: a batch of G games generates up to LANES_PER_GAME * G boards a round.
# On a TPU fewer: each lane's `[S]` board and `[S, W]` bits are padded to 128-wide tiles there.
LANES_PER_GAME = 256
TPU_LANES_PER_GAME = 32


def _search_batch(config: GameConfig, tries: int, lanes_per_game: int, need, seed, lengths, obs):
    """The search for a batch of G games, with `lanes_per_game` * G lanes a round.

    Args:
      need: `[G]` bool the game searches. seed: `[G]` int32 its first seed.
      lengths: `[G, S]` int32 ship lengths. obs: `Observations`, leaves `[G, ...]`.
    Returns:
      (`[G]` bool found, `[G, S]` int32 board (valid where found), `[G]` int32 tries used: the
      found board's index + 1, or all `tries`).
    """
    games = need.shape[0]
    lanes = lanes_per_game * games
    lane = jnp.arange(lanes, dtype=jnp.int32)
    never = jnp.int32(2**31 - 1)

    def consistent(spans, game):
        # Only the shot fields are read: gather those alone for the lane's game.
        game_obs = obs.replace(hit_bits=obs.hit_bits[game], miss_bits=obs.miss_bits[game],
                               colour_bits=obs.colour_bits[game], sunk=obs.sunk[game])
        return constraints.shot_consistent(spans_lib.spans_bits(config, spans), game_obs,
                                           config.reveal_colour)

    def searching(carry):
        _, _, _, _, active = carry
        return jnp.any(active)

    def round_(carry):
        found, board, used, cursor, active = carry
        # Lane i serves the (i // per)-th game still searching, at offset i % per of its seeds.
        active_before = jnp.cumsum(active, dtype=jnp.int32)                        # [G]
        n_active = active_before[-1]
        per = lanes // jnp.maximum(n_active, 1)
        rank = lane // per
        game = jnp.clip(jnp.searchsorted(active_before, rank + 1), 0, games - 1).astype(jnp.int32)
        offset = lane - rank * per
        valid = (rank < n_active) & (cursor[game] + offset < tries)
        # A board that covers a miss cannot be the answer: it is abandoned at that ship.
        boards, _ = jax.vmap(lambda n, s, m: generator.reference_board(config, n, s, m))(
            lengths[game], seed[game] + cursor[game] + offset, obs.miss_bits[game])
        ok = valid & jax.vmap(consistent)(boards, game)
        first = jax.ops.segment_min(jnp.where(ok, offset, never), game, num_segments=games)
        hit = active & (first < never)
        first_lane = jnp.clip(active_before - 1, 0) * per + first
        board = jnp.where(hit[:, None], boards[jnp.clip(first_lane, 0, lanes - 1)], board)
        used = jnp.where(hit, cursor + first + 1, used)
        cursor = jnp.where(active, cursor + per, cursor)
        active = active & ~hit & (cursor < tries)
        return found | hit, board, used, cursor, active

    zeros = jnp.zeros(games, jnp.int32)
    start = (jnp.zeros(games, bool), jnp.zeros_like(lengths), jnp.full(games, tries, jnp.int32),
             zeros, need)
    found, board, used, _, _ = lax.while_loop(searching, round_, start)
    return found, board, jnp.where(need, used, zeros)


def _search_groups(config: GameConfig, tries: int, groups: int, lanes_per_game: int, need, seed,
                   lengths, obs):
    """The pooled search within each of `groups` contiguous blocks of the batch's games, or over
    the whole batch where `groups` does not divide it. The same boards either way."""
    games = need.shape[0]
    search = functools.partial(_search_batch, config, tries, lanes_per_game)
    if groups <= 1 or games % groups:
        return search(need, seed, lengths, obs)
    blocks = jax.tree.map(lambda x: x.reshape(groups, games // groups, *x.shape[1:]),
                          (need, seed, lengths, obs))
    found = jax.vmap(search)(*blocks)
    return jax.tree.map(lambda x: x.reshape(games, *x.shape[2:]), found)


@functools.cache
def _search(config: GameConfig, tries: int, groups: int, by_platform: bool):
    """The per-game search (a batch of one), with its batching rule (the pooled search)."""

    @custom_vmap
    def search(need, seed, lengths, obs):
        batch = jax.tree.map(lambda x: x[None], (need, seed, lengths, obs))
        return jax.tree.map(lambda x: x[0], _search_batch(config, tries, 1, *batch))

    @search.def_vmap
    def search_batched(axis_size, in_batched, need, seed, lengths, obs):
        args = jax.tree.map(
            lambda x, batched: x if batched else jnp.broadcast_to(x, (axis_size, *x.shape)),
            (need, seed, lengths, obs), tuple(in_batched))
        search = functools.partial(_search_groups, config, tries, groups)
        if not by_platform:
            return search(LANES_PER_GAME, *args), (True, True, True)
        found = lax.platform_dependent(*args, tpu=functools.partial(search, TPU_LANES_PER_GAME),
                                       default=functools.partial(search, LANES_PER_GAME))
        return found, (True, True, True)

    return search


def first_consistent_board(config: GameConfig, tries: int, need: jnp.ndarray, seed: jnp.ndarray,
                           lengths: jnp.ndarray, obs: Observations, groups: int = 1,
                           by_platform: bool = False):
    """For ONE game: the first of `generateBoard(seed + k)`, k < `tries`, consistent with the shots
    of `obs`, when `need`.

    `groups`: the batch's pools (a device's games each); `by_platform`: the lanes a game chosen
    when the program is lowered (`TPU_LANES_PER_GAME` on a TPU), else `LANES_PER_GAME`.

    Returns:
      (`[]` bool found, `[S]` int32 board (valid where found), `[]` int32 tries used: k + 1 of the
      board found, `tries` when none is, 0 when not `need`).
    """
    search = _search(config, tries, groups, by_platform)
    return search(jnp.asarray(need, bool), jnp.asarray(seed, jnp.int32),
                  jnp.asarray(lengths, jnp.int32), obs)
