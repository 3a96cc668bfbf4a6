"""A run directory's files, written as games finish: `games.jsonl` rows appended after their
`events.jsonl` events (a game counts as done only once its row is written), and the clean-up an
interrupted run needs before it resumes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

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
    events = out / "events.jsonl"
    if events.exists():
        done = {(r["board"], r["seed"]) for r in rows}
        kept = [e for e in read_jsonl(events) if (e["board"], e["seed"]) in done]
        events.write_text("".join(json.dumps(e) + "\n" for e in kept))


def _plain(value):
    """A JSON-ready Python scalar."""
    value = np.asarray(value)
    if value.dtype == bool:
        return bool(value)
    if np.issubdtype(value.dtype, np.integer):
        return int(value)
    return round(float(value), 6)


def game_rows(cfg, sampler: str | None, games: list, result) -> tuple[list[dict], list[dict]]:
    """The `games.jsonl` rows and `events.jsonl` events of a batch's `games` (`result`: their
    `loop.BatchResult`), for a run of `cfg` (a `RunConfig`) with belief `sampler`."""
    rows, events = [], []
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
        rec = result.records
        for t in range(rec["active"].shape[0]):
            if not rec["active"][t, i]:
                continue
            events.append({
                "board": g.board_id, "seed": g.seed_index, "turn": t,
                "kind": "question" if rec["kind"][t, i] == 1 else "shot",
                "cell": int(rec["cell"][t, i]), "question_id": int(rec["question_id"][t, i]),
                "outcome": bool(rec["outcome"][t, i]),
                "p": round(float(rec["hit_probability"][t, i]), 6),
                "llm": bool(rec["llm_request"][t, i]),
                **{name: _plain(value[t, i]) for name, value in rec["extras"].items()},
            })
    for e in result.llm_events:
        g = games[e.game]
        events.append({"board": g.board_id, "seed": g.seed_index, "turn": int(e.turn) - 1,
                       "kind": "llm", "ok": e.ok, "reason": e.reason,
                       "latency": round(e.latency, 4), "detail": e.kind, "source": e.source,
                       "cached": e.cached, "tokens_in": e.tokens_in, "tokens_out": e.tokens_out,
                       "backend_s": round(e.backend_s, 4)})
    return rows, events



__all__ = ["append_jsonl", "game_rows", "rewrite_clean"]
