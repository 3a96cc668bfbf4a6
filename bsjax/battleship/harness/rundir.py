"""A run directory's files: read strictly, written as games finish.

`games.jsonl` rows are appended after their `events.jsonl` events (a game counts as done only
once its row is written). An interruption can leave one torn line at the end of a file, which a
resume drops; anything else that does not read back — a line that is not a row, bytes that are
not UTF-8, a game written twice, more games than the run has — is damage, and every reader
(`--resume`, `report`, `lens`, `h2h`) refuses it with one line naming the file and line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from bsjax.battleship.harness import events as events_lib
from bsjax.core.errors import UsageError

# The fields a reader relies on, and their types.
GAME_FIELDS = {"board": str, "seed": int, "f1": (int, float), "won": (bool, int),
               "turns": int, "shots": int, "hits": int, "questions": int}
EVENT_FIELDS = {"board": str, "seed": int}


def read_rows(path: Path, fields: dict) -> list[dict]:
    """The rows of a JSON-lines file ([] if it does not exist): each line an object with
    `fields` of their types. A last line that does not parse is a torn write and is dropped;
    any other bad line raises `UsageError` naming the file and line."""
    path = Path(path)
    if not path.exists():
        return []
    try:
        lines = path.read_bytes().decode("utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise UsageError(f"{path}: not UTF-8 text (byte {err.start}); the file is damaged") \
            from None
    except OSError as err:
        raise UsageError(f"{path} cannot be read ({err.strerror or err})") from None
    rows = []
    for number, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):  # a torn last line: the interruption it is
                break
            raise UsageError(f"{path}: line {number} is not JSON; the file is damaged") from None
        if not isinstance(row, dict):
            raise UsageError(f"{path}: line {number} is not a JSON object")
        for key, kind in fields.items():
            kinds = kind if isinstance(kind, tuple) else (kind,)
            value = row.get(key)
            if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
                raise UsageError(f"{path}: line {number} has no valid {key!r}")
        rows.append(row)
    return rows


def read_games(path: Path, expected: int | None = None) -> list[dict]:
    """A run's `games.jsonl` (`read_rows`), refused when a game appears twice or there are more
    games than the run's `expected` number: two writers or a damaged file."""
    rows = read_rows(path, GAME_FIELDS)
    seen = {}
    for number, row in enumerate(rows, 1):
        key = (row["board"], row["seed"])
        if key in seen:
            raise UsageError(f"{path}: game {key[0]}:{key[1]} appears twice (lines {seen[key]} "
                             f"and {number}); two processes wrote this run")
        seen[key] = number
    if expected is not None and len(rows) > expected:
        raise UsageError(f"{path}: {len(rows)} games for a run of {expected}")
    return rows


def check_parts(folder: Path) -> None:
    """A run's Parquet event parts can be read and name their games (board, seed)."""
    if not folder.is_dir():
        return
    import pyarrow.parquet as pq
    for path in sorted(folder.glob("part-*.parquet")):
        try:
            names = pq.read_schema(path).names
        except Exception as err:  # pyarrow raises several types for a damaged file
            raise UsageError(f"{path}: not a readable Parquet file "
                             f"({str(err).splitlines()[0][:80]})") from None
        missing = [name for name in EVENT_FIELDS if name not in names]
        if missing:
            raise UsageError(f"{path}: no column {missing[0]!r}")


def read_run_file(path: Path) -> dict:
    """A run's `run.json`: an object whose `config` is an object and `games` an integer."""
    try:
        meta = json.loads(Path(path).read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UsageError(f"{path} is not a valid run file "
                         f"({str(err).splitlines()[0][:80]})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("config", {}), dict):
        raise UsageError(f"{path} is not a valid run file (its config is not an object)")
    games = meta.get("games", 0)
    if not isinstance(games, int) or isinstance(games, bool) or games < 0:
        raise UsageError(f"{path}: games must be a non-negative integer (got {games!r})")
    return meta


def append_jsonl(path: Path, rows: list[dict]) -> None:
    """Append `rows` as JSON lines and sync them to disk."""
    with path.open("a") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def rewrite_clean(out: Path, rows: list[dict]) -> None:
    """Make the files agree with the finished games after an interruption: drop a torn last line
    of games.jsonl and every event of a game that has no row (it will be replayed)."""
    games = out / "games.jsonl"
    if games.exists():
        games.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = {(r["board"], r["seed"]) for r in rows}
    events = out / "events.jsonl"
    if events.exists():
        kept = [e for e in read_rows(events, EVENT_FIELDS) if (e["board"], e["seed"]) in done]
        events.write_text("".join(json.dumps(e) + "\n" for e in kept))
    events_lib.keep_games(out, done)


def game_rows(cfg, sampler: str | None, games: list, result) -> list[dict]:
    """The `games.jsonl` rows of a batch's `games` (`result`: their `batch.BatchResult`), for a
    run of `cfg` (a `RunConfig`) with belief `sampler`."""
    rows = []
    for i, g in enumerate(games):
        cells = int(result.ship_cells[i])
        shots, hits = int(result.shots[i]), int(result.hits[i])
        rows.append({
            "board": g.board_id, "seed": g.seed_index, "game_seed": g.game_seed,
            "agent": cfg.agent, "sampler": sampler,
            "protocol": cfg.protocol, "shots": shots, "hits": hits,
            "questions": int(result.questions[i]),
            "f1": 2 * hits / (shots + cells) if hits else 0.0,
            "won": bool(result.won[i]), "turns": int(result.turns[i]), "ship_cells": cells,
            "llm_calls": int(result.llm_calls[i]) if result.llm_calls is not None else 0,
            "fallbacks": int(result.fallbacks[i]) if result.fallbacks is not None else 0,
        })
    return rows


def write_batch(out: Path, columnar: bool, rows: list[dict], games: list, result) -> None:
    """A finished batch's events (JSON lines, or a Parquet part and the LLM calls' lines),
    then its game rows: a game counts as done only once its row is written after them."""
    turns = events_lib.turn_columns(games, result)
    llm = events_lib.llm_dicts(games, result)
    if columnar:
        events_lib.write_part(out, turns)
        if llm:
            append_jsonl(out / "events.jsonl", llm)
    else:
        append_jsonl(out / "events.jsonl", events_lib.turn_dicts(turns) + llm)
    append_jsonl(out / "games.jsonl", rows)


__all__ = ["EVENT_FIELDS", "GAME_FIELDS", "append_jsonl", "check_parts", "game_rows", "read_games",
           "read_rows",
           "read_run_file", "rewrite_clean", "write_batch"]
