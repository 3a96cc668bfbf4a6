"""Regions computed in the graph from ONE game's state (JAX; docs/battleship/protocol.md §7.4).

Hit clusters (4-connected components of hit cells), the hit frontier, the two state-dependent
DSL regions (`frontier_ring`, `cluster_neighborhood`: the in-graph twins of
`region_dsl.compile_spec`'s) and the `exists_ship` answer. Cells are indexed
`c = cols * row + col`, as in `bsjax.battleship.game.questions`.
"""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bsjax.battleship.game import bitboard
from bsjax.battleship.game.questions import manhattan_distances


def _neighbour_any(mask: jnp.ndarray, rows: int, cols: int) -> jnp.ndarray:
    """`[C]` bool cells with at least one orthogonal neighbour in `mask` (`[C]` bool)."""
    grid = jnp.pad(mask.reshape(rows, cols), 1, constant_values=False)
    out = grid[:-2, 1:-1] | grid[2:, 1:-1] | grid[1:-1, :-2] | grid[1:-1, 2:]
    return out.reshape(rows * cols)


def _shift_cells(words: list[jnp.ndarray], k: int) -> list[jnp.ndarray]:
    """A bitboard given as its W uint32 words, each a separate array, with every cell i moved
    to i + k (static k of either sign; cells pushed off either end are dropped)."""
    quotient, bit = divmod(k, 32)       # k = 32 quotient + bit, 0 <= bit < 32
    moved = []
    for w in range(len(words)):
        low, high = w - quotient, w - quotient - 1   # the source words of word w
        out = jnp.zeros_like(words[0])
        if 0 <= low < len(words):
            out = out | (words[low] << jnp.uint32(bit))
        if bit and 0 <= high < len(words):
            out = out | (words[high] >> jnp.uint32(32 - bit))
        moved.append(out)
    return moved


def _flood_labels(hit: jnp.ndarray, rows: int, cols: int, rounds: int) -> jnp.ndarray:
    """`hit_clusters`'s labels by `rounds` rounds of flood fill on bitboards: from every hit
    cell at once, the cells it reaches grow by their hit 4-neighbours each round; a cell's
    label is the lowest cell it reached (a component of n cells is reached in n - 1 rounds).

    Every word of every cell's reach is a separate `[C]` array and the neighbours are shifts
    of whole words, so each round is elementwise in the cells: a GPU runs all rounds as one
    kernel. Min-label propagation reads each neighbour's label from another element, and XLA
    recomputes a fused round for each of its readers: it fuses two or three rounds a kernel,
    fewer the larger the batch (MRA's 13 rounds were 5 kernels at 4,096 games, 11 at 65,536).
    """
    n_cells = rows * cols
    n_words = -(-n_cells // 32)
    cells = np.arange(n_cells)

    def words_of(mask: np.ndarray) -> list[jnp.ndarray]:    # a static [C] bool mask
        bits = np.zeros(n_words * 32, bool)
        bits[:n_cells] = mask
        return [jnp.uint32(int(np.sum(bits[32 * w:32 * w + 32].astype(np.uint64)
                                      << np.arange(32, dtype=np.uint64))))
                for w in range(n_words)]

    # The hit bitboard by explicit ORs of its cells (fuses; a packing reduction would not).
    hit_words = []
    for w in range(n_words):
        word = jnp.uint32(0)
        for b in range(min(32, n_cells - 32 * w)):
            word = word | (hit[32 * w + b].astype(jnp.uint32) << jnp.uint32(b))
        hit_words.append(word)
    not_first, not_last = words_of(cells % cols != 0), words_of(cells % cols != cols - 1)
    # [C] per word: cell i's own bit, if it is a hit.
    reach = [jnp.asarray(np.where(cells // 32 == w, np.uint32(1) << (cells % 32), 0)
                         .astype(np.uint32)) & hit_words[w] for w in range(n_words)]
    for _ in range(rounds):
        up, down = _shift_cells(reach, -cols), _shift_cells(reach, cols)
        # From the cell to the left (i - 1 moved to i) unless i starts a row, and right.
        left, right = _shift_cells(reach, 1), _shift_cells(reach, -1)
        reach = [(reach[w] | up[w] | down[w] | (left[w] & not_first[w])
                  | (right[w] & not_last[w])) & hit_words[w] for w in range(n_words)]
    labels = jnp.full(n_cells, -1, jnp.int32)
    for w in reversed(range(n_words)):  # the lowest word with a reached cell decides
        lowest = reach[w] & (~reach[w] + jnp.uint32(1))
        index = 32 * w + 31 - lax.clz(lowest).astype(jnp.int32)
        labels = jnp.where(reach[w] != 0, index, labels)
    return labels


def hit_clusters(hit_cells: jnp.ndarray, rows: int, cols: int,
                 max_hits: int | None = None, unroll: bool | None = None) -> jnp.ndarray:
    """Label the 4-connected components of hit cells (docs/battleship/protocol.md §7.4).

    Iterated min-label propagation: every hit cell starts with its own index and repeatedly
    takes the minimum over itself and its hit neighbours, until nothing changes (at most C
    rounds; a component of n cells converges in at most n - 1). On an accelerator, with
    `max_hits`, a flood fill on bitboards gives the same labels in one kernel.

    Args:
      hit_cells: `[C]` bool hit cells.
      rows, cols: static board shape, C = rows * cols.
      max_hits: static bound on the hit cells (`GameConfig.max_ship_cells`: a hit is a ship
        cell): then `max_hits - 1` rounds of a flood fill on bitboards (`_flood_labels`),
        unrolled, with no data-dependent loop (on a GPU a `while` reads its test back on the
        host every round, on a TPU it is an all-reduce across chips every round, and under
        vmap it waits for the slowest game), where the program runs on an accelerator; a CPU
        still propagates labels until nothing changes (faster there). None: rounds until
        nothing changes everywhere. The labels are the same.
      unroll: with `max_hits`, force the bounded rounds (True) or the loop (False) whatever
        the platform (None: by platform, as above).

    Returns:
      `[C]` int32: for a hit cell, the smallest cell index of its component; -1 elsewhere.
    """
    n_cells = rows * cols
    chex.assert_shape(hit_cells, (n_cells,))
    hit = hit_cells.astype(bool)
    sentinel = jnp.int32(n_cells)
    init = jnp.where(hit, jnp.arange(n_cells, dtype=jnp.int32), sentinel)

    def propagate(labels: jnp.ndarray) -> jnp.ndarray:
        grid = jnp.pad(labels.reshape(rows, cols), 1, constant_values=n_cells)
        best = jnp.minimum(
            jnp.minimum(grid[:-2, 1:-1], grid[2:, 1:-1]),
            jnp.minimum(grid[1:-1, :-2], grid[1:-1, 2:]),
        ).reshape(n_cells)
        return jnp.where(hit, jnp.minimum(labels, best), sentinel)

    def unrolled(labels: jnp.ndarray) -> jnp.ndarray:
        del labels  # the flood fill starts from the hit cells themselves
        return _flood_labels(hit, rows, cols, min(max_hits, n_cells) - 1)

    def cond(carry: tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]) -> jnp.ndarray:
        i, _, changed = carry
        return changed & (i < n_cells)

    def body(carry: tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]):
        i, labels, _ = carry
        new = propagate(labels)
        return i + 1, new, jnp.any(new != labels)

    def until_stable(labels: jnp.ndarray) -> jnp.ndarray:
        return jax.lax.while_loop(cond, body, (jnp.int32(0), labels, jnp.bool_(True)))[1]

    if max_hits is None or unroll is False:
        labels = until_stable(init)
    elif unroll:
        labels = unrolled(init)
    else:  # a CPU stops early (no launches to save); an accelerator runs the bound
        labels = jax.lax.platform_dependent(init, cpu=until_stable, default=unrolled)
    return jnp.where(hit, labels, jnp.int32(-1))


def frontier(hit_cells: jnp.ndarray, unknown_cells: jnp.ndarray, rows: int,
             cols: int) -> jnp.ndarray:
    """Unknown cells orthogonally adjacent to a hit.

    Args:
      hit_cells: `[C]` bool hit cells.
      unknown_cells: `[C]` bool cells not yet shot.
      rows, cols: static board shape.

    Returns:
      `[C]` bool frontier cells.
    """
    chex.assert_shape([hit_cells, unknown_cells], (rows * cols,))
    return unknown_cells.astype(bool) & _neighbour_any(hit_cells.astype(bool), rows, cols)


def frontier_ring(anchor: jnp.ndarray, radius: jnp.ndarray, unknown_cells: jnp.ndarray,
                  rows: int, cols: int) -> jnp.ndarray:
    """DSL `frontier_ring`: unknown cells at Manhattan distance 1..radius from `anchor`.

    Anchor validity (a hit or frontier cell) is checked on the host by
    `region_dsl.compile_spec`, not here.

    Args:
      anchor: `[]` int32 cell index.
      radius: `[]` int32, 1 or 2.
      unknown_cells: `[C]` bool cells not yet shot.
      rows, cols: static board shape.

    Returns:
      `[C]` bool region.
    """
    chex.assert_shape(unknown_cells, (rows * cols,))
    dist = jnp.asarray(manhattan_distances(rows, cols))[anchor]
    return unknown_cells.astype(bool) & (dist >= 1) & (dist <= radius)


def cluster_neighborhood(anchor: jnp.ndarray, depth: jnp.ndarray, hit_cells: jnp.ndarray,
                         unknown_cells: jnp.ndarray, rows: int, cols: int,
                         max_hits: int | None = None) -> jnp.ndarray:
    """DSL `cluster_neighborhood`: unknown cells within distance `depth` of `anchor`'s cluster.

    The cluster is the 4-connected component of hit cells containing `anchor`; its own cells
    are excluded. The region is empty when `anchor` is not a hit.

    Args:
      anchor: `[]` int32 cell index.
      depth: 1 or 2, a Python int (the growth unrolled) or a `[]` int32.
      hit_cells: `[C]` bool hit cells.
      unknown_cells: `[C]` bool cells not yet shot.
      rows, cols: static board shape.
      max_hits: `hit_clusters`'s bound on the hit cells (None: none).

    Returns:
      `[C]` bool region.
    """
    n_cells = rows * cols
    chex.assert_shape([hit_cells, unknown_cells], (n_cells,))
    labels = hit_clusters(hit_cells, rows, cols, max_hits)
    anchor_label = labels[anchor]
    cluster = (labels == anchor_label) & (anchor_label >= 0)                      # [C]
    # The cells within Manhattan distance `depth` of the cluster are the cluster dilated `depth`
    # times by the 4-neighbourhood (on a grid without walls the two sets are the same): no
    # [C, C] distance table per anchor (about an eighth of a Bayes turn in a CPU profile).
    grow = lambda _, m: m | _neighbour_any(m, rows, cols)                          # noqa: E731
    if isinstance(depth, int):  # static: unrolled, no loop whose trip count is data
        near = functools.reduce(lambda m, i: grow(i, m), range(depth), cluster)
    else:
        near = lax.fori_loop(0, depth, grow, cluster)
    return unknown_cells.astype(bool) & ~cluster & near


def answer(region_bits: jnp.ndarray, occupancy_bits: jnp.ndarray) -> jnp.ndarray:
    """The `exists_ship` predicate: whether any ship cell lies in the region.

    Args:
      region_bits: `[..., W]` uint32 region bitboard.
      occupancy_bits: `[..., W]` uint32 ship occupancy (broadcasts against `region_bits`).

    Returns:
      `[...]` bool.
    """
    return bitboard.intersects(region_bits, occupancy_bits)
