"""A run's per-turn events: built as columns from a batch's records, written as JSON lines
(`events.jsonl`, small runs) or as columnar Parquet parts (`events/part-NNNNNN.parquet`, one per
batch, at scale), and read back from either.

The columns are built with array indexing (no per-turn Python), so writing a batch's events
costs a small fraction of playing it. LLM events (a few per game, other fields) always go to
`events.jsonl`. A part is written under a temporary name and renamed, so a reader never sees
half of one; a resume drops the events of games that have no row yet (`keep_games`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from bsjax.core.files import read_jsonl, run_parts

COLUMNAR_DIR = "events"
# Runs of more games than this write their turn events as Parquet parts ("auto").
COLUMNAR_GAMES = 2000
FORMATS = ("auto", "jsonl", "parquet")


def turn_columns(games: list, result) -> dict[str, np.ndarray]:
    """The played turns of a batch as columns, in game order then turn order (the order of
    `events.jsonl`): board, seed, turn, kind, cell, question_id, outcome, p, llm, then the
    agent's trace and the belief's diagnostics (`result.records["extras"]`)."""
    rec = result.records
    turn, game = np.nonzero(np.asarray(rec["active"]))            # [T, G] -> (t, g)
    order = np.lexsort((turn, game))                              # game, then turn
    turn, game = turn[order], game[order]
    boards = np.asarray([g.board_id for g in games], dtype=object)
    seeds = np.asarray([g.seed_index for g in games], np.int64)
    columns = {
        "board": boards[game], "seed": seeds[game], "turn": turn.astype(np.int64),
        "kind": np.where(np.asarray(rec["kind"])[turn, game] == 1, "question", "shot"
                         ).astype(object),
        "cell": np.asarray(rec["cell"])[turn, game].astype(np.int64),
        "question_id": np.asarray(rec["question_id"])[turn, game].astype(np.int64),
        "outcome": np.asarray(rec["outcome"])[turn, game].astype(bool),
        "p": np.asarray(rec["hit_probability"])[turn, game],
        "llm": np.asarray(rec["llm_request"])[turn, game].astype(bool),
    }
    for name, value in rec["extras"].items():
        columns[name] = np.asarray(value)[turn, game]
    return columns


def _python(values: np.ndarray) -> list:
    """JSON-ready Python values of a column: bools, ints, floats rounded to 6 places."""
    if values.dtype == object:
        return values.tolist()
    if values.dtype == bool:
        return values.tolist()
    if np.issubdtype(values.dtype, np.integer):
        return [int(v) for v in values.tolist()]
    return [round(float(v), 6) for v in values.tolist()]


def turn_dicts(columns: dict[str, np.ndarray]) -> list[dict]:
    """The columns as `events.jsonl` rows."""
    names = list(columns)
    values = [_python(columns[name]) for name in names]
    return [dict(zip(names, row)) for row in zip(*values)]


def llm_dicts(games: list, result) -> list[dict]:
    """The batch's LLM calls as `events.jsonl` rows (kind "llm")."""
    out = []
    for e in result.llm_events:
        g = games[e.game]
        out.append({"board": g.board_id, "seed": g.seed_index, "turn": int(e.turn) - 1,
                    "kind": "llm", "ok": e.ok, "reason": e.reason,
                    "latency": round(e.latency, 4), "detail": e.kind, "source": e.source,
                    "cached": e.cached, "tokens_in": e.tokens_in, "tokens_out": e.tokens_out,
                    "backend_s": round(e.backend_s, 4)})
    return out


def is_columnar(out: Path, fmt: str, n_games: int) -> bool:
    """Whether a run directory's turn events are Parquet parts: as it already holds them, else
    by `fmt` ("auto": more than `COLUMNAR_GAMES` games)."""
    if (out / COLUMNAR_DIR).is_dir():
        return True
    if (out / "events.jsonl").is_file() and (out / "events.jsonl").stat().st_size > 0:
        return False
    return fmt == "parquet" or (fmt == "auto" and n_games > COLUMNAR_GAMES)


def write_part(out: Path, columns: dict[str, np.ndarray]) -> Path:
    """One batch's turn events as the next Parquet part, written atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    folder = out / COLUMNAR_DIR
    folder.mkdir(parents=True, exist_ok=True)
    index = len(list(folder.glob("part-*.parquet")))
    path = folder / f"part-{index:06d}.parquet"
    table = pa.table({name: pa.array(values) for name, values in columns.items()})
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return path


def keep_games(out: Path, done: set[tuple[str, int]]) -> None:
    """Drop from the Parquet parts every event of a game not in `done` (an interrupted batch's
    games are replayed on resume); a part left empty is removed."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    folder = out / COLUMNAR_DIR
    if not folder.is_dir():
        return
    for stale in folder.glob("*.tmp"):
        stale.unlink()
    for path in sorted(folder.glob("part-*.parquet")):
        table = pq.read_table(path)
        keys = zip(table.column("board").to_pylist(), table.column("seed").to_pylist())
        mask = np.asarray([key in done for key in keys], bool)
        if mask.all():
            continue
        if not mask.any():
            path.unlink()
            continue
        tmp = path.with_name(path.name + ".tmp")
        pq.write_table(table.filter(pc.array(mask.tolist())), tmp)
        os.replace(tmp, path)


def read_events(run_dir: Path) -> list[dict]:
    """Every event of a run (its process parts merged): the Parquet parts' turn events, then the
    JSON lines of `events.jsonl` (or of its gzipped copy, where only that exists)."""
    rows = []
    for part in run_parts(Path(run_dir)):
        folder = part / COLUMNAR_DIR
        if folder.is_dir():
            import pyarrow.parquet as pq
            for path in sorted(folder.glob("part-*.parquet")):
                rows.extend(pq.read_table(path).to_pylist())
        plain, packed = part / "events.jsonl", part / "events.jsonl.gz"
        rows.extend(read_jsonl(packed if not plain.exists() and packed.exists() else plain))
    return rows


__all__ = ["COLUMNAR_GAMES", "FORMATS", "is_columnar", "keep_games", "llm_dicts", "read_events",
           "turn_columns", "turn_dicts", "write_part"]
