"""The committed headline results are what the code plays now.

Every row of the paper's table that the README quotes (`experiments/llm/paper/`, what `make run`
plays) is replayed from its committed config, through the same study runner, and compared game by
game with its committed `games.jsonl`: the LLM-free rows by playing them, B6 (the embedded model)
from its committed call cache, with a backend that can only replay (a call not in the cache
fails, falls back and changes the game). A change that moves a game fails here until the
committed results are regenerated (`bsjax paper --out experiments/llm/paper` after removing the
row's run directory, then `bsjax report`). Rows B1–B5 must also keep the published numbers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bsjax.battleship.harness import llm_setup
from bsjax.battleship.harness import study as study_lib
from bsjax.battleship.report.tables import PUBLISHED
from bsjax.core.llm.backends import NoBackend
from bsjax.core.llm.call_cache import CallCache
from bsjax.core.llm.structured import LLMClient

COMMITTED = Path(__file__).resolve().parent.parent / "experiments" / "llm" / "paper"
GAME_FIELDS = ("board", "seed", "game_seed", "agent", "sampler", "protocol", "shots", "hits",
               "questions", "f1", "won", "turns", "ship_cells", "llm_calls", "fallbacks")


def _rows(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted(({k: r.get(k) for k in GAME_FIELDS} for r in rows),
                  key=lambda r: (r["board"], r["seed"]))


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """Every row of the committed study, played now into a temporary study directory."""
    out = tmp_path_factory.mktemp("paper")
    committed = json.loads((COMMITTED / "study.json").read_text())
    study = study_lib.Study(
        committed["kind"], study_lib.RunConfig(**committed["base"]),
        tuple(study_lib.Row(r["id"], r["label"], r.get("layer", ""),
                            tuple(r["overrides"].items()), r.get("needs_llm", False),
                            r.get("against")) for r in committed["rows"]),
        committed.get("title", ""), committed.get("param"), committed.get("baseline"))
    caches = {}

    def replay_only(cfg, caller, cache_path=None, concurrent=False):
        """The local model's client, answering from the committed call cache only."""
        row = cache_path.parent.name
        copy, committed = out / f"{row}-calls.jsonl", COMMITTED / "runs" / row / "calls.jsonl"
        if committed.is_file():  # B5's gate never opens: it made no call
            shutil.copy(committed, copy)
        caches[row] = CallCache(copy)
        options = llm_setup.LLM_OPTIONS[caller] if cfg.llm_format == "schema" else None
        return LLMClient(NoBackend(name="local", model="gemma-3-270m-q4_k_m"), caches[row],
                         options)

    patch = pytest.MonkeyPatch()
    patch.setattr(llm_setup, "make_llm_client",
                  lambda cfg, caller, cache_path=None, concurrent=False: (
                      replay_only(cfg, caller, cache_path) if cfg.llm == "local"
                      else _real_client(cfg, caller, cache_path, concurrent)))
    try:
        study_lib.run(study, out / "study")
    finally:
        patch.undo()
    return out / "study", study


_real_client = llm_setup.make_llm_client


def test_every_committed_row_is_replayed(replayed):
    _, study = replayed
    committed = sorted(p.name for p in (COMMITTED / "runs").iterdir() if p.is_dir())
    assert sorted(row.id for row in study.active_rows()) == committed


@pytest.mark.parametrize("row", ["B1", "B2", "B3", "B4", "B5", "B6", "B6-uniform", "bayes"])
def test_the_code_plays_the_committed_games(replayed, row):
    out, _ = replayed
    now = _rows(out / "runs" / row / "games.jsonl")
    assert len(now) == 54
    assert now == _rows(COMMITTED / "runs" / row / "games.jsonl"), (
        f"row {row} no longer plays its committed games: regenerate experiments/llm/paper")


@pytest.mark.parametrize("row", ["B1", "B2", "B3", "B4", "B5"])
def test_the_committed_rows_keep_the_published_numbers(row):
    f1, wins, games, _, _ = PUBLISHED["paper"][row]
    summary = json.loads((COMMITTED / "runs" / row / "summary.json").read_text())
    assert (round(summary["avg_f1"], 3), summary["wins"], summary["games"]) == (f1, wins, games)
