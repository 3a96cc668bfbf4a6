"""The 83-template question catalog, as cell masks and bitboards (host side, numpy).

The catalog (`CATALOG`, `catalog_cells`, `catalog_bits`, ...; docs/battleship/protocol.md §6.1)
and the board's coordinates. The DSL compiler `compile_spec` lives in
`bsjax.battleship.game.region_dsl`; the regions computed in the graph from one game's state
(hit clusters, the frontier, the state-dependent DSL regions, the `exists_ship` answer) in
`bsjax.battleship.game.state_regions`.

Cells are indexed `c = cols * row + col` (rows A-H top to bottom, columns 1-8); "E5" is cell 36.
Every catalog region includes revealed cells: a template is answered on the full board.
"""

from __future__ import annotations

import dataclasses
import functools
import re

import numpy as np

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


@functools.cache
def _coords(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    cells = np.arange(rows * cols, dtype=np.int32)
    return cells // cols, cells % cols


@functools.cache
def manhattan_distances(rows: int, cols: int) -> np.ndarray:
    """`[C, C]` int32 Manhattan distance between every pair of cells."""
    r, c = _coords(rows, cols)
    return (np.abs(r[:, None] - r[None, :]) + np.abs(c[:, None] - c[None, :])).astype(np.int32)


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
