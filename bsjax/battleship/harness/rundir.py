"""A run directory's files, written as games finish: `games.jsonl` rows appended after their
`events.jsonl` events (a game counts as done only once its row is written), and the clean-up an
interrupted run needs before it resumes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from bsjax.battleship.harness import events as events_lib
from bsjax.core.files import read_jsonl


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
        kept = [e for e in read_jsonl(events) if (e["board"], e["seed"]) in done]
        events.write_text("".join(json.dumps(e) + "\n" for e in kept))
    events_lib.keep_games(out, done)


def game_rows(cfg, sampler: str | None, games: list, result) -> list[dict]:
    """The `games.jsonl` rows of a batch's `games` (`result`: their `loop.BatchResult`), for a
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


__all__ = ["append_jsonl", "game_rows", "rewrite_clean", "write_batch"]
