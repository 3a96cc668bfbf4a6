"""The 83-template question catalog and the region DSL, as cell masks and bitboards.

Host side (numpy): the catalog (`CATALOG`, `catalog_cells`, `catalog_bits`, ...) and the DSL
compiler `compile_spec` (paper-protocol §6.1, §6.3). In graph (JAX, one game): hit clusters
(4-connected components of hit cells, §7.4), the hit frontier, the two state-dependent DSL
regions (`frontier_ring`, `cluster_neighborhood`) and the `exists_ship` answer.

Cells are indexed `c = cols * row + col` (rows A-H top to bottom, columns 1-8); "E5" is cell 36.
Every catalog region includes revealed cells: a template is answered on the full board.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from bsjax.game import bitboard

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


def _rect(r0: int, r1: int, c0: int, c1: int, cols: int = BOARD_COLS) -> tuple[int, ...]:
    """Cells of rows r0..r1 x columns c0..c1 (inclusive), sorted."""
    return tuple(r * cols + c for r in range(r0, r1 + 1) for c in range(c0, c1 + 1))


_QUADRANT_RECTS = {
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
        add("row", f"row:{label}", f"Is there a ship in row {label}?", _rect(r, r, 0, last_col))
    for c in range(BOARD_COLS):
        add("column", f"column:{c + 1}", f"Is there a ship in column {c + 1}?",
            _rect(0, last_row, c, c))
    for name in QUADRANTS:
        add("quadrant", f"quadrant:{name}", f"Is there a ship in the {name} quadrant?",
            _rect(*_QUADRANT_RECTS[name]))
    for r in range(BOARD_ROWS - 1):
        a, b = ROW_LABELS[r], ROW_LABELS[r + 1]
        add("row-band-2", f"row-band-2:{a}-{b}", f"Is there a ship in rows {a}-{b}?",
            _rect(r, r + 1, 0, last_col))
    for c in range(BOARD_COLS - 1):
        add("column-band-2", f"column-band-2:{c + 1}-{c + 2}",
            f"Is there a ship in columns {c + 1}-{c + 2}?", _rect(0, last_row, c, c + 1))
    for r in range(BOARD_ROWS - 1):
        for c in range(BOARD_COLS - 1):
            tl = cell_name(r * BOARD_COLS + c)
            br = cell_name((r + 1) * BOARD_COLS + c + 1)
            add("block-2x2", f"block-2x2:{tl}-{br}", f"Is there a ship in block {tl}-{br}?",
                _rect(r, r + 1, c, c + 1))
    assert len(out) == N_TEMPLATES
    return tuple(out)


CATALOG: tuple[Template, ...] = _build_catalog()
_BY_QID: dict[str, Template] = {t.qid: t for t in CATALOG}


@functools.lru_cache(maxsize=None)
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


@functools.lru_cache(maxsize=None)
def _coords(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    cells = np.arange(rows * cols, dtype=np.int32)
    return cells // cols, cells % cols


@functools.lru_cache(maxsize=None)
def _manhattan(rows: int, cols: int) -> np.ndarray:
    """`[C, C]` int32 Manhattan distance between every pair of cells."""
    r, c = _coords(rows, cols)
    return (np.abs(r[:, None] - r[None, :]) + np.abs(c[:, None] - c[None, :])).astype(np.int32)


def _neighbour_any(mask: jnp.ndarray, rows: int, cols: int) -> jnp.ndarray:
    """`[C]` bool cells with at least one orthogonal neighbour in `mask` (`[C]` bool)."""
    grid = jnp.pad(mask.reshape(rows, cols), 1, constant_values=False)
    out = grid[:-2, 1:-1] | grid[2:, 1:-1] | grid[1:-1, :-2] | grid[1:-1, 2:]
    return out.reshape(rows * cols)


def hit_clusters(hit_cells: jnp.ndarray, rows: int, cols: int) -> jnp.ndarray:
    """Label the 4-connected components of hit cells (paper-protocol §7.4).

    Iterated min-label propagation: every hit cell starts with its own index and repeatedly
    takes the minimum over itself and its hit neighbours, until nothing changes (at most C
    rounds; a component of n cells converges in at most n - 1).

    Args:
      hit_cells: `[C]` bool hit cells.
      rows, cols: static board shape, C = rows * cols.

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

    def cond(carry: tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]) -> jnp.ndarray:
        i, _, changed = carry
        return changed & (i < n_cells)

    def body(carry: tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]):
        i, labels, _ = carry
        new = propagate(labels)
        return i + 1, new, jnp.any(new != labels)

    _, labels, _ = jax.lax.while_loop(cond, body, (jnp.int32(0), init, jnp.bool_(True)))
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

    Anchor validity (a hit or frontier cell) is checked by `compile_spec` on the host, not here.

    Args:
      anchor: `[]` int32 cell index.
      radius: `[]` int32, 1 or 2.
      unknown_cells: `[C]` bool cells not yet shot.
      rows, cols: static board shape.

    Returns:
      `[C]` bool region.
    """
    chex.assert_shape(unknown_cells, (rows * cols,))
    dist = jnp.asarray(_manhattan(rows, cols))[anchor]
    return unknown_cells.astype(bool) & (dist >= 1) & (dist <= radius)


def cluster_neighborhood(anchor: jnp.ndarray, depth: jnp.ndarray, hit_cells: jnp.ndarray,
                         unknown_cells: jnp.ndarray, rows: int, cols: int) -> jnp.ndarray:
    """DSL `cluster_neighborhood`: unknown cells within distance `depth` of `anchor`'s cluster.

    The cluster is the 4-connected component of hit cells containing `anchor`; its own cells
    are excluded. The region is empty when `anchor` is not a hit.

    Args:
      anchor: `[]` int32 cell index.
      depth: `[]` int32, 1 or 2.
      hit_cells: `[C]` bool hit cells.
      unknown_cells: `[C]` bool cells not yet shot.
      rows, cols: static board shape.

    Returns:
      `[C]` bool region.
    """
    n_cells = rows * cols
    chex.assert_shape([hit_cells, unknown_cells], (n_cells,))
    labels = hit_clusters(hit_cells, rows, cols)
    anchor_label = labels[anchor]
    cluster = (labels == anchor_label) & (anchor_label >= 0)                      # [C]
    dist = jnp.asarray(_manhattan(rows, cols))                                    # [C, C]
    to_cluster = jnp.min(jnp.where(cluster[None, :], dist, n_cells), axis=1)      # [C]
    return unknown_cells.astype(bool) & ~cluster & (to_cluster <= depth)


def answer(region_bits: jnp.ndarray, occupancy_bits: jnp.ndarray) -> jnp.ndarray:
    """The `exists_ship` predicate: whether any ship cell lies in the region.

    Args:
      region_bits: `[..., W]` uint32 region bitboard.
      occupancy_bits: `[..., W]` uint32 ship occupancy (broadcasts against `region_bits`).

    Returns:
      `[...]` bool.
    """
    return bitboard.intersects(region_bits, occupancy_bits)


# ----------------------------------------------------------------------------- host DSL


def _np_frontier(hit: np.ndarray, unknown: np.ndarray) -> np.ndarray:
    grid = np.pad(hit.reshape(BOARD_ROWS, BOARD_COLS), 1, constant_values=False)
    near = grid[:-2, 1:-1] | grid[2:, 1:-1] | grid[1:-1, :-2] | grid[1:-1, 2:]
    return unknown & near.reshape(N_CELLS)


def _np_cluster(hit: np.ndarray, anchor: int) -> np.ndarray:
    """`[64]` bool 4-connected component of hit cells containing `anchor` (a hit)."""
    seen = np.zeros(N_CELLS, bool)
    stack = [anchor]
    seen[anchor] = True
    while stack:
        cell = stack.pop()
        r, c = divmod(cell, BOARD_COLS)
        for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if 0 <= rr < BOARD_ROWS and 0 <= cc < BOARD_COLS:
                nb = rr * BOARD_COLS + cc
                if hit[nb] and not seen[nb]:
                    seen[nb] = True
                    stack.append(nb)
    return seen


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _field(region: dict, kind: str, *names: str) -> Any:
    """The first present key of `names` (snake_case, then the reference's camelCase alias)."""
    for name in names:
        if name in region:
            return region[name]
    raise ValueError(f"{kind} region needs field {names[0]!r}")


def _row_label(value: Any, kind: str) -> int:
    if not isinstance(value, str) or value.strip().upper() not in ROW_LABELS:
        raise ValueError(f"{kind}: invalid row label {value!r} (expected A-H)")
    return ROW_LABELS.index(value.strip().upper())


def _column_number(value: Any, kind: str) -> int:
    if not _is_int(value) or not 1 <= int(value) <= BOARD_COLS:
        raise ValueError(f"{kind}: invalid column {value!r} (expected an integer 1-{BOARD_COLS})")
    return int(value)


def _level(region: dict, kind: str, name: str) -> int:
    value = region.get(name, 1)  # the reference defaults radius / depth to 1
    if not _is_int(value) or int(value) not in (1, 2):
        raise ValueError(f"{kind} {name} must be 1 or 2, got {value!r}")
    return int(value)


def _anchor(region: dict, kind: str) -> int:
    value = _field(region, kind, "anchor")
    try:
        return cell_index(value)
    except ValueError as err:
        raise ValueError(f"{kind}: {err}") from None


def _mask(cells: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(N_CELLS, bool)
    out[list(cells)] = True
    return out


def compile_spec(spec: dict, hit_cells: np.ndarray, unknown_cells: np.ndarray) -> np.ndarray:
    """Validate a region-DSL question spec and compile it to a cell mask (paper-protocol §6.3).

    The form is `{"predicate": "exists_ship", "region": {"kind": ..., ...}}` with kinds
    `row` (`"row": "A"`), `column` (`"column": 1..8`), `quadrant` (`"quadrant": "top-left"`, ...),
    `row_band_2` (`"start_row": "A".."G"`), `column_band_2` (`"start_column": 1..7`),
    `block_2x2` (`"anchor": "A1".."G7"`, the top-left cell), `frontier_ring`
    (`"anchor"`, `"radius": 1|2`; anchor a hit or frontier cell) and `cluster_neighborhood`
    (`"anchor"`, `"depth": 1|2`; anchor a hit cell). The reference's camelCase `startRow` /
    `startColumn` are accepted too, labels are case-insensitive, and a missing radius / depth
    defaults to 1, as in the reference. Fixed kinds cover revealed cells as well; the two
    state-dependent kinds cover unknown cells only. Duplicate rejection is the caller's job.

    Args:
      spec: the parsed JSON spec.
      hit_cells: `[64]` bool hit cells.
      unknown_cells: `[64]` bool cells not yet shot.

    Returns:
      `[64]` bool region (never empty).

    Raises:
      ValueError: a one-line description of what is invalid.
    """
    hit = np.asarray(hit_cells, bool)
    unknown = np.asarray(unknown_cells, bool)
    if hit.shape != (N_CELLS,) or unknown.shape != (N_CELLS,):
        raise ValueError(f"hit_cells and unknown_cells must have shape ({N_CELLS},), got "
                         f"{hit.shape} and {unknown.shape}")
    if np.any(hit & unknown):
        raise ValueError("a cell cannot be both hit and unknown")
    if not isinstance(spec, dict):
        raise ValueError(f"question spec must be an object, got {type(spec).__name__}")
    predicate = spec.get("predicate")
    if predicate not in PREDICATES:
        raise ValueError(f"unsupported predicate {predicate!r} (only 'exists_ship')")
    region = spec.get("region")
    if not isinstance(region, dict):
        raise ValueError("question spec needs a 'region' object")
    kind = region.get("kind")
    if kind not in REGION_KINDS:
        raise ValueError(f"unknown region kind {kind!r} (choose from {', '.join(REGION_KINDS)})")

    last_row, last_col = BOARD_ROWS - 1, BOARD_COLS - 1
    if kind == "row":
        r = _row_label(_field(region, kind, "row"), kind)
        mask = _mask(_rect(r, r, 0, last_col))
    elif kind == "column":
        c = _column_number(_field(region, kind, "column"), kind) - 1
        mask = _mask(_rect(0, last_row, c, c))
    elif kind == "quadrant":
        name = _field(region, kind, "quadrant")
        if name not in _QUADRANT_RECTS:
            raise ValueError(
                f"quadrant: invalid quadrant {name!r} (choose from {', '.join(QUADRANTS)})")
        mask = _mask(_rect(*_QUADRANT_RECTS[name]))
    elif kind == "row_band_2":
        r = _row_label(_field(region, kind, "start_row", "startRow"), kind)
        if r >= last_row:
            raise ValueError(f"row_band_2 start_row must be A-{ROW_LABELS[last_row - 1]}, "
                             f"got {ROW_LABELS[r]!r}")
        mask = _mask(_rect(r, r + 1, 0, last_col))
    elif kind == "column_band_2":
        c = _column_number(_field(region, kind, "start_column", "startColumn"), kind) - 1
        if c >= last_col:
            raise ValueError(f"column_band_2 start_column must be 1-{last_col}, got {c + 1}")
        mask = _mask(_rect(0, last_row, c, c + 1))
    elif kind == "block_2x2":
        anchor = _anchor(region, kind)
        r, c = divmod(anchor, BOARD_COLS)
        if r >= last_row or c >= last_col:
            raise ValueError(f"block_2x2 anchor must be a top-left cell A1-"
                             f"{cell_name(last_row * BOARD_COLS - 2)}, got {cell_name(anchor)}")
        mask = _mask(_rect(r, r + 1, c, c + 1))
    elif kind == "frontier_ring":
        anchor = _anchor(region, kind)
        radius = _level(region, kind, "radius")
        if not (hit[anchor] or _np_frontier(hit, unknown)[anchor]):
            raise ValueError(f"frontier_ring anchor {cell_name(anchor)} is neither a hit nor a "
                             f"frontier cell")
        dist = _manhattan(BOARD_ROWS, BOARD_COLS)[anchor]
        mask = unknown & (dist >= 1) & (dist <= radius)
    else:  # cluster_neighborhood
        anchor = _anchor(region, kind)
        depth = _level(region, kind, "depth")
        if not hit[anchor]:
            raise ValueError(f"cluster_neighborhood anchor {cell_name(anchor)} is not a hit cell")
        cluster = _np_cluster(hit, anchor)
        dist = _manhattan(BOARD_ROWS, BOARD_COLS)[:, cluster].min(axis=1)
        mask = unknown & ~cluster & (dist <= depth)

    if not mask.any():
        raise ValueError(f"{kind} region is empty (no unknown cells in range)")
    return mask
