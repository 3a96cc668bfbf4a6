"""The region DSL of LLM questions, compiled on the host to a cell mask (docs/battleship/protocol.md §6.3).

`compile_spec` validates a parsed JSON question spec and turns it into a `[64]` bool region with
a one-line `ValueError` for anything invalid; the in-graph twins of the two state-dependent kinds
(`frontier_ring`, `cluster_neighborhood`) are in `bsjax.battleship.game.state_regions`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bsjax.battleship.game.questions import (
    BOARD_COLS,
    BOARD_ROWS,
    N_CELLS,
    PREDICATES,
    QUADRANT_RECTS,
    QUADRANTS,
    REGION_KINDS,
    ROW_LABELS,
    cell_index,
    cell_name,
    manhattan_distances,
    rect_cells,
)


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
    """Validate a region-DSL question spec and compile it to a cell mask (docs/battleship/protocol.md §6.3).

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
        mask = _mask(rect_cells(r, r, 0, last_col))
    elif kind == "column":
        c = _column_number(_field(region, kind, "column"), kind) - 1
        mask = _mask(rect_cells(0, last_row, c, c))
    elif kind == "quadrant":
        name = _field(region, kind, "quadrant")
        if name not in QUADRANT_RECTS:
            raise ValueError(
                f"quadrant: invalid quadrant {name!r} (choose from {', '.join(QUADRANTS)})")
        mask = _mask(rect_cells(*QUADRANT_RECTS[name]))
    elif kind == "row_band_2":
        r = _row_label(_field(region, kind, "start_row", "startRow"), kind)
        if r >= last_row:
            raise ValueError(f"row_band_2 start_row must be A-{ROW_LABELS[last_row - 1]}, "
                             f"got {ROW_LABELS[r]!r}")
        mask = _mask(rect_cells(r, r + 1, 0, last_col))
    elif kind == "column_band_2":
        c = _column_number(_field(region, kind, "start_column", "startColumn"), kind) - 1
        if c >= last_col:
            raise ValueError(f"column_band_2 start_column must be 1-{last_col}, got {c + 1}")
        mask = _mask(rect_cells(0, last_row, c, c + 1))
    elif kind == "block_2x2":
        anchor = _anchor(region, kind)
        r, c = divmod(anchor, BOARD_COLS)
        if r >= last_row or c >= last_col:
            raise ValueError(f"block_2x2 anchor must be a top-left cell A1-"
                             f"{cell_name(last_row * BOARD_COLS - 2)}, got {cell_name(anchor)}")
        mask = _mask(rect_cells(r, r + 1, c, c + 1))
    elif kind == "frontier_ring":
        anchor = _anchor(region, kind)
        radius = _level(region, kind, "radius")
        if not (hit[anchor] or _np_frontier(hit, unknown)[anchor]):
            raise ValueError(f"frontier_ring anchor {cell_name(anchor)} is neither a hit nor a "
                             f"frontier cell")
        dist = manhattan_distances(BOARD_ROWS, BOARD_COLS)[anchor]
        mask = unknown & (dist >= 1) & (dist <= radius)
    else:  # cluster_neighborhood
        anchor = _anchor(region, kind)
        depth = _level(region, kind, "depth")
        if not hit[anchor]:
            raise ValueError(f"cluster_neighborhood anchor {cell_name(anchor)} is not a hit cell")
        cluster = _np_cluster(hit, anchor)
        dist = manhattan_distances(BOARD_ROWS, BOARD_COLS)[:, cluster].min(axis=1)
        mask = unknown & ~cluster & (dist <= depth)

    if not mask.any():
        raise ValueError(f"{kind} region is empty (no unknown cells in range)")
    return mask
