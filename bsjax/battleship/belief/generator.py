"""The reference `generateBoard(seed)` in JAX (docs/battleship/protocol.md §4.2), off-by-one included.

Used by the chain for its initial board and its repairs; the host port in `game.suites` generates
the synthetic suite, and the tests check the two agree.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import bitboard, refrng
from bsjax.battleship.game import spans as spans_lib

MAX_ATTEMPTS = 1000


def span_id(config: GameConfig, length, row, col, horizontal) -> jnp.ndarray:
    """Global span index of a (length, row, col, orientation), traced."""
    table = spans_lib.table_for(config)
    offset = jnp.asarray(table.offset)[length]
    per_row = config.cols - length + 1
    h_index = row * per_row + col
    v_index = config.rows * per_row + row * config.cols + col
    return offset + jnp.where(horizontal, h_index, v_index)


def reference_board(config: GameConfig, ship_lengths: jnp.ndarray,
                    seed: jnp.ndarray, avoid: jnp.ndarray | None = None
                    ) -> tuple[jnp.ndarray, jnp.ndarray]:
    """`generateBoard(seed)` for one game.

    Args:
      ship_lengths: `[S]` int32 lengths in placement order.
      seed: `[]` int32 seed.
      avoid: optional `[W]` uint32 cells no ship of a wanted board covers (the misses, for a
        search of shot-consistent boards). Once a placed ship covers one, the board is abandoned:
        its later ships are not drawn (span 0), so a batch of boards stops waiting on them.
        Boards that avoid these cells are generated exactly as without `avoid`.
    Returns:
      (`[S]` int32 span ids, `[]` bool every ship placed within 1000 attempts).
    """
    table_bits = jnp.asarray(spans_lib.table_for(config).bits)
    if avoid is None:
        avoid = jnp.zeros(config.n_words, jnp.uint32)

    def place(carry, length):
        stream, occupied, ok, alive = carry

        def attempt(state):
            stream, _, _, tries = state
            stream, _ = refrng.jax_next(stream)
            horizontal = refrng.jax_is_below_half(stream)
            max_row = jnp.where(horizontal, config.rows, config.rows - length)
            max_col = jnp.where(horizontal, config.cols - length, config.cols)
            stream, row = refrng.jax_next_int(stream, max_row)
            stream, col = refrng.jax_next_int(stream, max_col)
            span = span_id(config, length, row, col, horizontal)
            placed = ~bitboard.intersects(table_bits[span], occupied)
            return stream, span, placed, tries + 1

        def keep_trying(state):
            _, _, placed, tries = state
            return alive & ~placed & (tries < MAX_ATTEMPTS)

        stream, span, placed, _ = lax.while_loop(
            keep_trying, attempt, (stream, jnp.int32(0), jnp.bool_(False), jnp.int32(0)))
        occupied = jnp.where(placed, occupied | table_bits[span], occupied)
        alive = alive & ~(placed & bitboard.intersects(table_bits[span], avoid))
        return (stream, occupied, ok & placed, alive), span

    start = (refrng.jax_seed_state(seed), jnp.zeros(config.n_words, jnp.uint32), jnp.bool_(True),
             jnp.bool_(True))
    (_, _, ok, _), spans = lax.scan(place, start, jnp.asarray(ship_lengths, jnp.int32))
    return spans, ok
