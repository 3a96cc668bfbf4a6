"""The 83-template question catalog and the region DSL, as cell masks and bitboards.

Host side (numpy): the catalog (`CATALOG`, `catalog_cells`, `catalog_bits`, ...; docs/battleship/protocol.md
§6.1); the DSL compiler `compile_spec` lives in `bsjax.battleship.game.region_dsl`. In graph (JAX, one
game): hit clusters (4-connected components of hit cells, §7.4), the hit frontier, the two
state-dependent DSL regions (`frontier_ring`, `cluster_neighborhood`) and the `exists_ship`
answer.

Cells are indexed `c = cols * row + col` (rows A-H top to bottom, columns 1-8); "E5" is cell 36.
Every catalog region includes revealed cells: a template is answered on the full board.
"""

from __future__ import annotations

import dataclasses
import functools
import re

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bsjax.battleship.game import bitboard

BOARD_ROWS = 8
BOARD_COLS = 8
N_CELLS = BOARD_ROWS * BOARD_COLS
ROW_LABELS = "ABCDEFGH"

FAMILIES: tuple[str, ...] = (
    "row", "column", "quadrant", "row-band-2", "column-band-2", "block-2x2")
COARSE_FAMILIES: tuple[str, ...] = ("row", "column", "quadrant")
LOCAL_FAMILIES: tuple[str, ...] = ("row-band-2", "column-band-2", "block-2x2")
QUADRANTS: tuple[str, ...] = ("top-left", "top-right", "bottom-left", "bottom-right")
N_TEMPLATES = 83

PREDICATES: tuple[str, ...] = ("exists_ship",)
REGION_KINDS: tuple[str, ...] = (
    "row", "column", "quadrant", "row_band_2", "column_band_2", "block_2x2",
    "frontier_ring", "cluster_neighborhood")


@dataclasses.dataclass(frozen=True)
class Template:
    """One catalog question: "is there any ship cell in `cells`?".

    Attributes:
      index: catalog index (0-82); catalog order matters (MRA truncates by it).
      family: one of `FAMILIES`.
      qid: reference id, e.g. `row:A`, `block-2x2:A1-B2`.
      text: reference question text.
      cells: sorted cell indices of the region.
    """

    index: int
    family: str
    qid: str
    text: str
    cells: tuple[int, ...]


# ----------------------------------------------------------------------------- coordinates


def cell_name(cell: int, cols: int = BOARD_COLS) -> str:
    """`36 -> "E5"` (row letter, 1-based column)."""
    cell = int(cell)
    row, col = divmod(cell, cols)
    if cell < 0 or row >= len(ROW_LABELS):
        raise ValueError(f"cell index out of range: {cell}")
    return f"{ROW_LABELS[row]}{col + 1}"


_CELL_RE = re.compile(r"^([A-Z])([0-9]+)$")


def cell_index(name: str, rows: int = BOARD_ROWS, cols: int = BOARD_COLS) -> int:
    """`"E5" -> 36`. Case and surrounding whitespace are ignored, as in the reference.

    Raises:
      ValueError: `name` is not a cell id on a `rows` x `cols` board.
    """
    if not isinstance(name, str):
        raise ValueError(f"cell id must be a string like 'E5', got {name!r}")
    match = _CELL_RE.match(name.strip().upper())
    if match is None:
        raise ValueError(f"invalid cell id {name!r} (expected e.g. 'E5')")
    row = ord(match.group(1)) - ord("A")
    col = int(match.group(2)) - 1
    if not (0 <= row < rows and 0 <= col < cols):
        raise ValueError(f"cell id {name!r} is off the {rows}x{cols} board")
    return row * cols + col


def rect_cells(r0: int, r1: int, c0: int, c1: int, cols: int = BOARD_COLS) -> tuple[int, ...]:
    """Cells of rows r0..r1 x columns c0..c1 (inclusive), sorted."""
    return tuple(r * cols + c for r in range(r0, r1 + 1) for c in range(c0, c1 + 1))


QUADRANT_RECTS = {
    "top-left": (0, 3, 0, 3),
    "top-right": (0, 3, 4, 7),
    "bottom-left": (4, 7, 0, 3),
    "bottom-right": (4, 7, 4, 7),
}


# ----------------------------------------------------------------------------- catalog


def _build_catalog() -> tuple[Template, ...]:
    out: list[Template] = []

    def add(family: str, qid: str, text: str, cells: tuple[int, ...]) -> None:
        out.append(Template(len(out), family, qid, text, cells))

    last_row, last_col = BOARD_ROWS - 1, BOARD_COLS - 1
    for r in range(BOARD_ROWS):
        label = ROW_LABELS[r]
        add("row", f"row:{label}", f"Is there a ship in row {label}?",
            rect_cells(r, r, 0, last_col))
    for c in range(BOARD_COLS):
        add("column", f"column:{c + 1}", f"Is there a ship in column {c + 1}?",
            rect_cells(0, last_row, c, c))
    for name in QUADRANTS:
        add("quadrant", f"quadrant:{name}", f"Is there a ship in the {name} quadrant?",
            rect_cells(*QUADRANT_RECTS[name]))
    for r in range(BOARD_ROWS - 1):
        a, b = ROW_LABELS[r], ROW_LABELS[r + 1]
        add("row-band-2", f"row-band-2:{a}-{b}", f"Is there a ship in rows {a}-{b}?",
            rect_cells(r, r + 1, 0, last_col))
    for c in range(BOARD_COLS - 1):
        add("column-band-2", f"column-band-2:{c + 1}-{c + 2}",
            f"Is there a ship in columns {c + 1}-{c + 2}?", rect_cells(0, last_row, c, c + 1))
    for r in range(BOARD_ROWS - 1):
        for c in range(BOARD_COLS - 1):
            tl = cell_name(r * BOARD_COLS + c)
            br = cell_name((r + 1) * BOARD_COLS + c + 1)
            add("block-2x2", f"block-2x2:{tl}-{br}", f"Is there a ship in block {tl}-{br}?",
                rect_cells(r, r + 1, c, c + 1))
    assert len(out) == N_TEMPLATES
    return tuple(out)


CATALOG: tuple[Template, ...] = _build_catalog()
_BY_QID: dict[str, Template] = {t.qid: t for t in CATALOG}


@functools.cache
def _catalog_cells_cached() -> np.ndarray:
    cells = np.zeros((N_TEMPLATES, N_CELLS), bool)
    for t in CATALOG:
        cells[t.index, list(t.cells)] = True
    cells.setflags(write=False)
    return cells


def catalog_cells() -> np.ndarray:
    """`[83, 64]` bool region of each template, in catalog order (a fresh copy)."""
    return _catalog_cells_cached().copy()


def catalog_bits() -> np.ndarray:
    """`[83, 2]` uint32 region bitboards of each template, in catalog order."""
    return bitboard.pack_np(_catalog_cells_cached())


def family_ids() -> np.ndarray:
    """`[83]` int32 index into `FAMILIES` of each template."""
    return np.array([FAMILIES.index(t.family) for t in CATALOG], np.int32)


def family_mask(*families: str) -> np.ndarray:
    """`[83]` bool templates whose family is one of `families`.

    Raises:
      ValueError: an unknown family name.
    """
    for family in families:
        if family not in FAMILIES:
            raise ValueError(
                f"unknown question family {family!r} (choose from {', '.join(FAMILIES)})")
    return np.array([t.family in families for t in CATALOG], bool)


def template_by_qid(qid: str) -> Template:
    """The template with reference id `qid` (e.g. `"column:3"`).

    Raises:
      KeyError: no template has that id.
    """
    try:
        return _BY_QID[qid]
    except KeyError:
        raise KeyError(
            f"no catalog template with id {qid!r} (ids look like 'row:A', 'column:1', "
            f"'quadrant:top-left', 'row-band-2:A-B', 'column-band-2:1-2', 'block-2x2:A1-B2')"
        ) from None


# ----------------------------------------------------------------------------- in graph


@functools.cache
def _coords(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    cells = np.arange(rows * cols, dtype=np.int32)
    return cells // cols, cells % cols


@functools.cache
def manhattan_distances(rows: int, cols: int) -> np.ndarray:
    """`[C, C]` int32 Manhattan distance between every pair of cells."""
    r, c = _coords(rows, cols)
    return (np.abs(r[:, None] - r[None, :]) + np.abs(c[:, None] - c[None, :])).astype(np.int32)


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
