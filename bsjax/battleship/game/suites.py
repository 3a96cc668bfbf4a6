"""Board suites: the synthetic suite B01–B18, Grand et al.'s 18 boards, uniform random boards, and
user board files. All host-side data; a board enters the graph as `[S]` span indices.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.resources
import re

import numpy as np

from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.game.refrng import SeededRandom

SYMBOLS = {"W": 0, "R": 1, "G": 2, "P": 3, "O": 4}


class BoardError(ValueError):
    """A board that is malformed or breaks the rules."""


@dataclasses.dataclass(frozen=True)
class Board:
    """One target board.

    Attributes:
      board_id: e.g. "B01".
      spans: ship placements as global span indices, in fleet order (ship id 1..S).
      grid: `[rows, cols]` int8, 0 water, k = ship k (1-based).
    """

    board_id: str
    spans: tuple[int, ...]
    grid: np.ndarray

    def rows_text(self) -> list[str]:
        return ["".join("." if v == 0 else str(int(v)) for v in row) for row in self.grid]

    @property
    def ship_lengths(self) -> tuple[int, ...]:
        return tuple(int((self.grid == k + 1).sum()) for k in range(len(self.spans)))


# ----- the reference generator and seeds (docs/battleship/protocol.md §4) -----

def generate_reference_board(seed: int, fleet=(5, 4, 3, 2), rows: int = 8,
                             cols: int = 8) -> list[tuple[int, int, bool]]:
    """`generateBoard(seed)` of the reference, off-by-one included.

    Returns (row, col, horizontal) per ship in fleet order. Raises BoardError if a ship cannot be
    placed in 1000 attempts (the reference throws).
    """
    rng = SeededRandom(seed)
    occupied = np.zeros((rows, cols), bool)
    out = []
    for length in fleet:
        for _ in range(1000):
            horizontal = rng.next() < 0.5
            max_row = rows if horizontal else rows - length
            max_col = cols - length if horizontal else cols
            row = rng.next_int(max_row)
            col = rng.next_int(max_col)
            cells = [(row, col + i) if horizontal else (row + i, col) for i in range(length)]
            if any(occupied[r, c] for r, c in cells):
                continue
            for r, c in cells:
                occupied[r, c] = True
            out.append((row, col, horizontal))
            break
        else:
            raise BoardError(f"generateBoard({seed}) could not place a ship of length {length}")
    return out


def hash_seed(board_id: str, seed_index: int) -> int:
    """The reference game seed `hashSeed(boardId, seedIndex)`."""
    h = 31 * seed_index
    for ch in board_id:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
        if h & 0x80000000:
            h -= 1 << 32
    return abs(h) + 1


def board_from_placements(board_id: str, placements, fleet, rows=8, cols=8,
                          lengths=(2, 3, 4, 5)) -> Board:
    grid = np.zeros((rows, cols), np.int8)
    spans = []
    for ship, ((row, col, horizontal), length) in enumerate(zip(placements, fleet)):
        for i in range(length):
            r, c = (row, col + i) if horizontal else (row + i, col)
            if grid[r, c]:
                raise BoardError(f"{board_id}: ships overlap at {cell_name(r * cols + c, cols)}")
            grid[r, c] = ship + 1
        spans.append(spans_lib.span_index(rows, cols, lengths, length, row, col, horizontal))
    return Board(board_id, tuple(spans), grid)


def synthetic_suite(n_boards: int = 18) -> list[Board]:
    """B01..B18 = generateBoard(1000 + k), bit-exact with the reference."""
    fleet = (5, 4, 3, 2)
    return [board_from_placements(f"B{k:02d}", generate_reference_board(1000 + k, fleet), fleet)
            for k in range(1, n_boards + 1)]


# ----- Grand et al. boards and board files -----

def cell_name(cell: int, cols: int = 8) -> str:
    return f"{'ABCDEFGHIJKLMNOP'[cell // cols]}{cell % cols + 1}"


def parse_board_text(text: str, board_id: str = "FILE", rows: int = 8, cols: int = 8,
                     lengths=(2, 3, 4, 5), n_ships: int = 4) -> Board:
    """Parse the Grand text format (8 lines of 8 comma-separated W/R/G/P/O) into a Board.

    Raises BoardError with a one-line reason for anything malformed or against the rules.
    """
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) != rows:
        raise BoardError(f"{board_id}: expected {rows} rows, found {len(lines)}")
    grid = np.zeros((rows, cols), np.int8)
    for r, line in enumerate(lines):
        symbols = [s.strip().upper() for s in line.split(",")]
        if len(symbols) != cols:
            raise BoardError(f"{board_id}: row {r + 1} has {len(symbols)} cells, expected {cols}")
        for c, s in enumerate(symbols):
            if s not in SYMBOLS:
                raise BoardError(f"{board_id}: unknown symbol {s!r} at row {r + 1}, column {c + 1}")
            grid[r, c] = SYMBOLS[s]
    return board_from_grid(grid, board_id, lengths, n_ships)


def board_from_grid(grid: np.ndarray, board_id: str, lengths=(2, 3, 4, 5),
                    n_ships: int = 4) -> Board:
    rows, cols = grid.shape
    spans = []
    for ship in range(1, n_ships + 1):
        cells = np.argwhere(grid == ship)
        if len(cells) == 0:
            raise BoardError(f"{board_id}: ship {ship} is missing")
        length = len(cells)
        if length not in lengths:
            raise BoardError(f"{board_id}: ship {ship} has {length} cells (allowed {lengths})")
        rs, cs = cells[:, 0], cells[:, 1]
        r0, c0 = int(rs.min()), int(cs.min())
        if len(set(rs)) == 1 and sorted(cs) == list(range(c0, c0 + length)):
            horizontal = True
        elif len(set(cs)) == 1 and sorted(rs) == list(range(r0, r0 + length)):
            horizontal = False
        else:
            raise BoardError(f"{board_id}: ship {ship} is not one straight unbroken line")
        spans.append(spans_lib.span_index(rows, cols, tuple(sorted(lengths)), length, r0, c0,
                                          horizontal))
    extra = set(np.unique(grid).tolist()) - set(range(n_ships + 1))
    if extra:
        raise BoardError(f"{board_id}: unexpected ship ids {sorted(extra)}")
    return Board(board_id, tuple(spans), grid.astype(np.int8))


def _grand_files():
    return importlib.resources.files("bsjax") / "data" / "grand2025"


def _expected_sha256() -> dict[str, str]:
    text = (_grand_files() / "ATTRIBUTION.md").read_text()
    return {name: digest for digest, name in re.findall(r"([0-9a-f]{64})\s+(\S+)", text)}


def grand_suite() -> list[Board]:
    """The 18 published boards, verified against the SHA-256 values of their attribution file."""
    digests = _expected_sha256()
    boards = []
    for k in range(1, 19):
        name = f"board_B{k:02d}.txt"
        raw = (_grand_files() / name).read_bytes()
        if hashlib.sha256(raw).hexdigest() != digests.get(name):
            raise BoardError(f"{name}: SHA-256 does not match ATTRIBUTION.md")
        boards.append(parse_board_text(raw.decode(), f"B{k:02d}"))
    return boards


def random_suite(n_boards: int, seed: int, config: GameConfig) -> list[Board]:
    """Uniformly random valid boards (rejection sampling over labelled placements).

    The paper fleet keeps its fixed lengths; a free fleet draws each length uniformly from
    `config.ship_lengths`.
    """
    rng = np.random.default_rng(seed)
    table = spans_lib.table_for(config)
    boards = []
    while len(boards) < n_boards:
        fleet = config.fleet or tuple(int(x) for x in rng.choice(config.ship_lengths,
                                                                  config.n_ships))
        picks = [int(table.offset[length] + rng.integers(table.count[length])) for length in fleet]
        occ = table.cells[picks]
        if occ.sum(0).max() > 1:
            continue
        grid = np.zeros(config.n_cells, np.int8)
        for ship, span in enumerate(picks):
            grid[table.cells[span]] = ship + 1
        boards.append(Board(f"R{len(boards) + 1:04d}", tuple(picks),
                            grid.reshape(config.rows, config.cols)))
    return boards


def suite(name: str, config: GameConfig, n_random: int = 18, seed: int = 0) -> list[Board]:
    if name == "synthetic":
        return synthetic_suite()
    if name == "grand":
        return grand_suite()
    if name == "random":
        return random_suite(n_random, seed, config)
    raise BoardError(f"unknown suite {name!r} (choose from synthetic, grand, random)")
