"""`bsjax lens`: read a run directory's files back (never live state) and show one view.

Views: `run` (summary and per-board F1), `game` (one game's turns), `confidence` (one game's
reflective trace: predictions, EMAs, streak, previews, revisions), `llm` (LLM turns, latency,
per-game calls and fallbacks), `compare` (per-board F1 deltas between two runs).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from bsjax.battleship.harness import events as events_lib
from bsjax.battleship.harness import summaries
from bsjax.battleship.harness.summaries import summarize_llm_events
from bsjax.core.files import read_run_json, read_run_jsonl, run_parts

VIEWS = ("run", "game", "confidence", "llm", "compare")
KIND_NAMES = ("coarse_roi_collapse", "late_diffuse_reprobe", "cluster_closeout_bias")


def kind_name(kind: int) -> str:
    """A revision kind's preset name; `preset-K` for a preset beyond the paper's three."""
    return KIND_NAMES[kind] if 0 <= kind < len(KIND_NAMES) else f"preset-{kind}"


class LensError(ValueError):
    """A run directory or selection that cannot be read."""


def load(run_dir: str) -> dict:
    root = Path(run_dir)
    if not any((part / "games.jsonl").is_file() for part in run_parts(root)):
        raise LensError(f"{run_dir} is not a run directory (no games.jsonl)")
    return {"dir": str(root), "config": read_run_json(root).get("config", {}),
            "games": read_run_jsonl(root, "games.jsonl"),
            "events": events_lib.read_events(root)}


def _board_f1(games) -> dict[str, float]:
    return {b: sum(v) / len(v) for b, v in sorted(summaries.f1_by_board(games).items())}


def view_run(run: dict) -> dict:
    summary = summaries.summarize(run["games"])
    summary["per_board_f1"] = _board_f1(run["games"])
    summary["revisions"] = _revisions(run["events"])
    summary["config"] = run["config"]
    return summary


def _revisions(events) -> int:
    """Symbolic revisions (in the turn trace) plus LLM-gate revisions, which the host applies
    after the turn is recorded: each request ends in an LLM revision or a fallback preset."""
    symbolic = sum(1 for e in events if e.get("kind") != "llm" and e.get("revision", -1) >= 0)
    return symbolic + sum(1 for e in events
                          if e.get("kind") == "llm" and e.get("source", "revision") == "revision")


def _select_game(run: dict, game: str | None) -> tuple[str, int]:
    if not game:
        first = run["games"][0]
        return first["board"], first["seed"]
    try:
        board, seed = game.split(":")
        key = (board, int(seed))
    except ValueError:
        raise LensError(f"--game takes BOARD:SEED such as B17:0 (got {game!r})") from None
    if key not in {(g["board"], g["seed"]) for g in run["games"]}:
        raise LensError(f"no game {game} in {run['dir']}")
    return key


def view_game(run: dict, game: str | None) -> dict:
    board, seed = _select_game(run, game)
    turns = [e for e in run["events"] if e["board"] == board and e["seed"] == seed
             and e.get("kind") != "llm"]
    row = next(g for g in run["games"] if g["board"] == board and g["seed"] == seed)
    return {"game": f"{board}:{seed}", "result": row, "turns": turns}


def view_confidence(run: dict, game: str | None) -> dict:
    """Without `--game`: one line per game (mean confidence, low-confidence turns, revisions,
    observed turns); with it, that game's per-turn trace."""
    if not any("confidence" in e for e in run["events"] if e.get("kind") != "llm"):
        raise LensError("this run has no reflective trace (agent without a runtime)")
    tau = run["config"].get("tau")
    tau = 0.72 if tau is None and run["config"].get("agent") in ("mra", "wma-reflective") else (tau or 1.0)
    if not game:
        per_game = defaultdict(list)
        for e in run["events"]:
            per_game[(e["board"], e["seed"])].append(e)
        games = []
        for g in run["games"]:
            events = per_game[(g["board"], g["seed"])]
            turns = [e for e in events if e.get("kind") != "llm"]
            confidence = [e["confidence"] for e in turns]
            games.append({"game": f"{g['board']}:{g['seed']}", "observed_turns": len(turns),
                          "mean_confidence": statistics.fmean(confidence) if confidence else 0.0,
                          "low_confidence_turns": sum(c < tau for c in confidence),
                          "revisions": _revisions(events)})
        return {"tau": tau, "games": games}
    out = view_game(run, game)
    board, seed = out["game"].split(":")
    llm = {e["turn"]: e for e in run["events"] if e.get("kind") == "llm"
           and e["board"] == board and e["seed"] == int(seed)}
    keys = ("turn", "kind", "outcome", "pred_hit_prob", "pred_answer_prob", "pred_gain",
            "pred_error_ema", "calibration_error_ema", "confidence", "streak", "cooldown",
            "next_kind", "next_delta", "revision", "llm", "coarse_budget", "local_budget",
            "late_budget", "salvage_start_turn", "exploit_threshold")
    trace = []
    for e in out["turns"]:
        item = {k: e.get(k) for k in keys}
        item.update({k: v for k, v in e.items() if k.startswith("delta_")})
        if e.get("llm") and e["turn"] in llm:   # the revision the host applied after the turn
            answer = llm[e["turn"]]
            item["llm_revision"] = answer["detail"] if answer["ok"] else "fallback: " + (
                kind_name(e["next_kind"]) if e.get("next_kind", -1) >= 0 else "?")
        trace.append(item)
    return {"game": out["game"], "trace": trace}


def view_llm(run: dict) -> dict:
    llm = [e for e in run["events"] if e.get("kind") == "llm"]
    turns = sum(g["turns"] for g in run["games"])
    calls = summarize_llm_events(llm)
    return {
        "llm_turns": len(llm), "turns": turns, "llm_rate": len(llm) / turns if turns else 0.0,
        "fallbacks": sum(1 for e in llm if not e["ok"]),
        "fallback_reasons": calls["fallback_reasons"], "choices": calls["llm_choices"],
        "cached": calls["llm_cached"], "latency_mean": calls["llm_latency_mean"],
        "latency_median": calls["llm_latency_median"], "latency_p95": calls["llm_latency_p95"],
        "per_game": [{"game": f"{g['board']}:{g['seed']}", "llm_calls": g.get("llm_calls", 0),
                      "fallbacks": g.get("fallbacks", 0)} for g in run["games"]
                     if g.get("llm_calls", 0)],
    }


def view_compare(run: dict, other: dict) -> dict:
    a, b = summaries.summarize(run["games"]), summaries.summarize(other["games"])
    fields = ("avg_f1", "avg_shots", "avg_questions", "wins", "win_rate", "llm_calls", "llm_rate")
    deltas = {k: a[k] - b[k] for k in fields}
    f1_a, f1_b = _board_f1(run["games"]), _board_f1(other["games"])
    per_board = {bd: f1_a[bd] - f1_b[bd] for bd in f1_a if bd in f1_b}
    ranked = sorted(per_board.items(), key=lambda kv: kv[1])
    return {"a": run["dir"], "b": other["dir"], "deltas": deltas, "per_board_delta_f1": per_board,
            "best": ranked[-3:][::-1], "worst": ranked[:3]}


def render(view: str, data: dict) -> str:
    """Plain-text rendering of a view."""
    lines = []
    if view == "run":
        lo, hi = data["win_rate_ci"]
        config = data.get("config", {})
        set_params = ", ".join(f"{k}={v}" for k, v in (config.get("params") or {}).items())
        lines.append(f"{config.get('agent', '?')}, {config.get('protocol', 'paper')} protocol"
                     + (f", params {set_params}" if set_params else ""))
        lines.append(f"{data['games']} games  F1 {data['avg_f1']:.4f}  wins {data['wins']} "
                     f"({100 * data['win_rate']:.1f}%, CI [{100 * lo:.1f}, {100 * hi:.1f}])  "
                     f"questions {data['avg_questions']:.2f}  revisions {data['revisions']}  "
                     f"LLM rate {100 * data['llm_rate']:.2f}%  fallbacks {data['fallbacks']}")
        lines += [f"  {b}  F1 {f:.3f}" for b, f in data["per_board_f1"].items()]
    elif view == "game":
        r = data["result"]
        lines.append(f"game {data['game']}: {r['shots']} shots, {r['hits']} hits, "
                     f"{r['questions']} questions, F1 {r['f1']:.3f}, won {r['won']}")
        for e in data["turns"]:
            what = (f"shoot {_cell(e['cell'])} -> {'hit' if e['outcome'] else 'miss'}"
                    if e["kind"] == "shot" else
                    f"ask q{e['question_id']} -> {'yes' if e['outcome'] else 'no'}")
            lines.append(f"  t{e['turn']:2d}  {what:24s} p={e['p']:.3f}")
    elif view == "confidence" and "games" in data:
        lines.append(f"per game (τ = {data['tau']}): mean confidence, low-confidence turns, "
                     "revisions, observed turns")
        lines += [f"  {g['game']}: {g['mean_confidence']:.3f}  {g['low_confidence_turns']}  "
                  f"{g['revisions']}  {g['observed_turns']}" for g in data["games"]]
    elif view == "confidence":
        lines.append(f"game {data['game']}: turn action outcome | predicted (p, answer, gain) | "
                     "EMAs (pred, cal) confidence streak | preview Δ | revision")
        for t in data["trace"]:
            deltas = " ".join(f"{v:+.3f}" for k, v in sorted(t.items()) if k.startswith("delta_"))
            rev = kind_name(t["revision"]) if t["revision"] is not None and t["revision"] >= 0 \
                else t.get("llm_revision", "LLM asked") if t["llm"] else "-"
            lines.append(
                f"  t{t['turn']:2d} {t['kind']:8s} {int(t['outcome'])} | {t['pred_hit_prob']:.3f} "
                f"{t['pred_answer_prob']:.3f} {t['pred_gain']:.4f} | {t['pred_error_ema']:.3f} "
                f"{t['calibration_error_ema']:.3f} {t['confidence']:.3f} {t['streak']} | "
                f"{deltas} | {rev}")
    elif view == "llm":
        lines.append(f"LLM turns {data['llm_turns']} of {data['turns']} "
                     f"({100 * data['llm_rate']:.2f}%), fallbacks {data['fallbacks']} "
                     f"{data['fallback_reasons']}, choices {data['choices']}, "
                     f"{data['cached']} replayed from the call cache")
        lines.append(f"backend latency per call: mean {data['latency_mean']:.3f} s, median "
                     f"{data['latency_median']:.3f} s, p95 {data['latency_p95']:.3f} s")
        lines += [f"  {g['game']}: {g['llm_calls']} calls, {g['fallbacks']} fallbacks"
                  for g in data["per_game"]]
    elif view == "compare":
        lines.append(f"A = {data['a']}  B = {data['b']}")
        lines += [f"  Δ {k}: {v:+.4f}" for k, v in data["deltas"].items()]
        lines.append("  per-board ΔF1 (A − B): " + ", ".join(
            f"{b} {d:+.3f}" for b, d in sorted(data["per_board_delta_f1"].items())))
        lines.append("  best: " + ", ".join(f"{b} {d:+.3f}" for b, d in data["best"]))
        lines.append("  worst: " + ", ".join(f"{b} {d:+.3f}" for b, d in data["worst"]))
    return "\n".join(lines)


def _cell(cell: int) -> str:
    return f"{'ABCDEFGH'[cell // 8]}{cell % 8 + 1}"


def lens(run_dir: str, view: str, game: str | None = None, against: str | None = None) -> dict:
    if view not in VIEWS:
        raise LensError(f"unknown view {view!r} (choose from {', '.join(VIEWS)})")
    run = load(run_dir)
    if view == "run":
        return view_run(run)
    if view == "game":
        return view_game(run, game)
    if view == "confidence":
        return view_confidence(run, game)
    if view == "llm":
        return view_llm(run)
    if not against:
        raise LensError("--view compare needs --against RUN_DIR")
    return view_compare(run, load(against))
