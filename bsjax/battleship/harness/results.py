"""Results in memory: what `bsjax.play` returns, and `load_run` for a run directory on disk.

`Results` holds per-game arrays with leading axes `[R, G]` (param points × games) and per-turn
records `[R, G, T]`; `to_pandas()` makes them a DataFrame of games (one row per point and game),
`turns_frame()` one of played turns, `summary()` one row per point with its intervals.
`load_run(dir)` reads a run (or a study) directory back as DataFrames.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from bsjax.battleship.harness import events as events_lib
from bsjax.battleship.harness import summaries
from bsjax.battleship.types import SHOOT
from bsjax.core import files, stats

GAME_FIELDS = ("f1", "won", "shots", "hits", "questions", "turns", "llm_calls", "fallbacks")
CALIBRATION_BINS = (0.0, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0)


def f1_scores(hits: np.ndarray, shots: np.ndarray, ship_cells: np.ndarray) -> np.ndarray:
    """F1 = 2 hits / (shots + ship cells) (0 without hits), as `games.jsonl` writes it."""
    hits, shots, cells = (np.asarray(x, np.float64) for x in (hits, shots, ship_cells))
    return np.where(hits > 0, 2 * hits / np.maximum(shots + cells, 1), 0.0)


@dataclasses.dataclass
class Results:
    """Games played in memory by `bsjax.play`.

    Attributes:
      agent, sampler, protocol: what played.
      points: `R` dicts, the swept param values of each point (`[{}]` without a sweep).
      params: `R` full params pytrees (host arrays), one per point.
      boards: `G` board ids; seeds: `G` seed indices (the same games at every point).
      f1: `[R, G]` float64; won: `[R, G]` bool; shots, hits, questions, turns, llm_calls,
        fallbacks: `[R, G]` int.
      records: per-turn arrays `[R, G, T]` by name (T = the turn budget; turns after a game
        ended have `active` False): the `TurnRecord` fields and the agent's trace (`extras`).
      compile_seconds: compiling the batch program; seconds: playing (compile excluded).
    """

    agent: str
    sampler: str | None
    protocol: str
    points: list[dict[str, Any]]
    params: list[Any]
    boards: list[str]
    seeds: list[int]
    f1: np.ndarray
    won: np.ndarray
    shots: np.ndarray
    hits: np.ndarray
    questions: np.ndarray
    turns: np.ndarray
    llm_calls: np.ndarray
    fallbacks: np.ndarray
    records: dict[str, np.ndarray]
    compile_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def games_per_second(self) -> float:
        return self.f1.size / self.seconds if self.seconds > 0 else 0.0

    def _point_columns(self) -> dict[str, list]:
        names = list(dict.fromkeys(k for p in self.points for k in p))
        return {name: [_plain(p.get(name)) for p in self.points] for name in names}

    def to_pandas(self):
        """One row per param point and game: the swept params, board, seed and the game's
        results (`GAME_FIELDS`)."""
        import pandas as pd
        n_points, n_games = self.f1.shape
        return pd.DataFrame({
            **{name: [v for v in values for _ in range(n_games)]
               for name, values in self._point_columns().items()},
            "board": np.tile(np.asarray(self.boards, dtype=object), n_points),
            "seed": np.tile(np.asarray(self.seeds), n_points),
            **{field: getattr(self, field).reshape(-1) for field in GAME_FIELDS},
        })

    def turns_frame(self):
        """One row per played turn: the point's params, board, seed, turn and every record."""
        import pandas as pd
        active = self.records["active"]
        point, game, turn = np.nonzero(active)
        data = {name: [_plain(values[p]) for p in point]
                for name, values in self._point_columns().items()}
        data.update({"board": np.asarray(self.boards, dtype=object)[game],
                     "seed": np.asarray(self.seeds)[game], "turn": turn})
        for name, values in self.records.items():
            if name != "active":
                data[name] = values[point, game, turn]
        return pd.DataFrame(data)

    def summary(self):
        """One row per param point: games, avg F1 with its normal 95% CI, wins, win rate with
        its Wilson 95% interval, avg shots and questions."""
        import pandas as pd
        rows = []
        for r, point in enumerate(self.points):
            f1, won = self.f1[r], self.won[r]
            n = f1.size
            half = 1.959963984540054 * f1.std(ddof=1) / np.sqrt(n) if n > 1 else 0.0
            low, high = stats.wilson_interval(int(won.sum()), n)
            rows.append({**{k: _plain(v) for k, v in point.items()}, "games": n,
                         "avg_f1": f1.mean(), "f1_ci_low": f1.mean() - half,
                         "f1_ci_high": f1.mean() + half, "wins": int(won.sum()),
                         "win_rate": won.mean(), "win_rate_ci_low": low,
                         "win_rate_ci_high": high, "avg_shots": self.shots[r].mean(),
                         "avg_questions": self.questions[r].mean()})
        return pd.DataFrame(rows)

    def compare(self, baseline: Results, baseline_point: int = 0):
        """Every param point against point `baseline_point` of `baseline` (another agent, belief
        or sweep; or this one), paired over the games both played, a game being its board and
        seed index: one row per point, its params, `n_paired`, `delta_f1` (point − baseline)
        with its 95% paired bootstrap interval (`delta_f1_low`, `delta_f1_high`), the games
        only one of the two completed, the completion difference and McNemar's exact p. With no
        game in common every value but `n_paired` is None. Raises ValueError for a baseline
        point that does not exist."""
        import pandas as pd
        n_base = len(baseline.points)
        if isinstance(baseline_point, bool) or not 0 <= baseline_point < n_base:
            raise ValueError(f"baseline_point must index one of the baseline's {n_base} "
                             f"point(s) (got {baseline_point!r})")
        base = baseline._game_rows(baseline_point)
        return pd.DataFrame([
            {**{k: _plain(v) for k, v in point.items()},
             **summaries.compare_paired(self._game_rows(r), base)}
            for r, point in enumerate(self.points)])

    def _game_rows(self, point: int) -> list[dict]:
        return [{"board": b, "seed": s, "f1": float(f1), "won": bool(won)}
                for b, s, f1, won in zip(self.boards, self.seeds, self.f1[point],
                                         self.won[point])]

    def calibration(self, bins=CALIBRATION_BINS):
        """How well the belief's hit probabilities foretold the shots: one row per param point
        and bin of p, the hit probability of the cell shot when it was shot (bins (lo, hi], the
        first from 0 inclusive): the shots whose p fell in it, their mean p and the share that
        hit. A calibrated belief's hit rate is its mean p in every bin; Σ (1 − p) over a point's
        shots is the misses its belief foretold (`misses_foretold`, a game's mean, beside
        `misses`, the mean made). Turns without a belief's p (NaN) are left out. Raises
        ValueError for bins that are not increasing edges in [0, 1]."""
        import pandas as pd
        edges = np.asarray(bins, float)
        if (edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) <= 0)
                or edges[0] < 0 or edges[-1] > 1):
            raise ValueError(f"bins must be at least two increasing edges in [0, 1] "
                             f"(got {list(bins)!r})")
        shot = self.records["active"] & (self.records["kind"] == SHOOT)
        shot &= np.isfinite(self.records["hit_probability"])
        n_games = self.f1.shape[1]
        rows = []
        for r, point in enumerate(self.points):
            p = self.records["hit_probability"][r][shot[r]].astype(float)
            hit = self.records["outcome"][r][shot[r]].astype(bool)
            which = np.clip(np.searchsorted(edges, p, side="left") - 1, 0, edges.size - 2)
            common = {k: _plain(v) for k, v in point.items()}
            foretold, made = (1.0 - p).sum() / n_games, (~hit).sum() / n_games
            for b in range(edges.size - 1):
                inside = which == b
                rows.append({**common, "p_low": edges[b], "p_high": edges[b + 1],
                             "shots": int(inside.sum()),
                             "mean_p": p[inside].mean() if inside.any() else np.nan,
                             "hit_rate": hit[inside].mean() if inside.any() else np.nan,
                             "misses_foretold": foretold, "misses": made})
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        n_points, n_games = self.f1.shape
        return (f"Results({self.agent}, {self.sampler or 'no belief'}, {self.protocol}: "
                f"{n_points} point(s) x {n_games} games, avg F1 {self.f1.mean():.4f}, "
                f"wins {int(self.won.sum())}/{self.won.size})")


def _plain(value):
    """A param value as a plain Python value (tuples for vectors), for a DataFrame cell."""
    array = np.asarray(value)
    if array.ndim:
        return tuple(array.tolist())
    return array.item()


@dataclasses.dataclass
class Run:
    """A run (or study) directory read back: `config` and `summary` dicts, `games` and `events`
    DataFrames (a study's rows concatenated, with a `row` column)."""

    path: Path
    config: dict
    summary: dict
    games: Any
    events: Any


def _load_one(path: Path) -> Run:
    import pandas as pd
    parts = files.run_parts(path)
    if not parts or not any((p / "run.json").is_file() for p in parts):
        raise ValueError(f"{path} is not a bsjax run directory (no run.json)")
    run = files.read_run_json(path)
    summary_path = path / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    games = pd.DataFrame(files.read_run_jsonl(path, "games.jsonl", stop_at_torn=True))
    events = pd.DataFrame(events_lib.read_events(path))
    return Run(path, run.get("config", {}), summary, games, events)


def load_run(path: str | Path) -> Run:
    """A run directory (`bsjax play`) or a study directory (`bsjax paper`, `bsjax sweep`) as
    DataFrames. Raises ValueError for a directory that is neither."""
    import pandas as pd
    path = Path(path)
    study_json = path / "study.json"
    if not study_json.is_file():
        return _load_one(path)
    study = json.loads(study_json.read_text())
    runs = {row["id"]: _load_one(path / "runs" / row["id"]) for row in study["rows"]
            if (path / "runs" / row["id"]).is_dir()}
    games = pd.concat([r.games.assign(row=row_id) for row_id, r in runs.items()],
                      ignore_index=True) if runs else pd.DataFrame()
    events = pd.concat([r.events.assign(row=row_id) for row_id, r in runs.items()],
                       ignore_index=True) if runs else pd.DataFrame()
    return Run(path, study, {row_id: r.summary for row_id, r in runs.items()}, games, events)


__all__ = ["CALIBRATION_BINS", "GAME_FIELDS", "Results", "Run", "f1_scores", "load_run"]
