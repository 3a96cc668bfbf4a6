"""Tables of studies and runs, rebuilt from their files alone (`bsjax report`).

A study directory (`study.json` + `runs/ROW/`) gives the paper's unified table or a sweep table;
a single run directory gives a one-row table. Everything here reads JSON lines, never live state,
so a finished, interrupted or resumed run reports the same way.

The rows of a study play the same games (boards and seeds), so two rows can be compared game by
game: against a baseline row (`--baseline ROW`, or the study's own) or each row against the one
above it (`--paired adjacent`). Those comparisons add the PAIRED_COLUMNS and a second table.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from bsjax.battleship.config import PROTOCOLS
from bsjax.battleship.harness import summaries
from bsjax.battleship.report import ceiling
from bsjax.core import stats
from bsjax.core.files import (
    command_line,
    read_run_json,
    read_run_jsonl,
    run_parts,
    write_text_atomic,
    writer_lock,
)


class ReportError(ValueError):
    """A directory that holds no study or run."""


# Published aggregates (docs/battleship/protocol.md §13.1; docs/battleship/grand-protocol.md §7.2):
# F1, wins, games, questions, LLM rate. Shown beside the measured rows.
PUBLISHED = {
    "paper": {"B1": (0.522, 27, 54, 0.0, 0.0), "B2": (0.539, 40, 54, 11.9, 0.0),
              "B3": (0.552, 31, 54, 8.0, 0.0), "B4": (0.551, 30, 54, 8.0, 0.0),
              "B5": (0.552, 31, 54, 8.0, 0.0), "B6": (0.557, 29, 54, 8.9, 0.043)},
    "grand": {"random": (0.317, 0, 54, 0.0, 0.0), "greedy": (0.614, 51, 54, 0.0, 0.0)},
}

COLUMNS = ("id", "layer", "label", "agent", "status", "llm_rate", "avg_f1", "wins", "games",
           "win_rate", "ci_low", "ci_high", "avg_questions", "wall_seconds", "ceiling_share",
           "published_f1",
           "published_wins", "published_games", "published_in_ci", "h2h_vs_random",
           "h2h_vs_greedy")

# Paired comparisons of a row with another (`paired_with`) over the games both played.
PAIRED_COLUMNS = ("paired_with", "n_paired", "delta_f1", "delta_f1_low", "delta_f1_high",
                  "only_row_completed", "only_baseline_completed", "delta_completion",
                  "mcnemar_p")
# baseline: every row against one row; adjacent: every row against the row above it; none: no
# paired comparisons, even where the study names a baseline.
PAIRED_MODES = ("baseline", "adjacent", "none")


def load(path: str | Path) -> dict:
    """A study or run directory as {"kind", "title", "protocol", "param", "baseline",
    "rows": [...]}; each row has its meta data and `games` (the game rows written so far)."""
    root = Path(path)
    if (root / "study.json").is_file():
        try:
            study = json.loads((root / "study.json").read_text())
        except json.JSONDecodeError:
            raise ReportError(f"{root / 'study.json'} is not valid JSON") from None
        rows = []
        for row in study["rows"]:
            run_dir = root / "runs" / row["id"]
            config = dict(study["base"], **row["overrides"])
            rows.append(dict(row, config=config, total=read_run_json(run_dir).get("games"),
                             games=read_run_jsonl(run_dir, "games.jsonl", stop_at_torn=True)))
        return {"kind": study["kind"], "title": study.get("title", ""),
                "protocol": study["base"]["protocol"], "param": study.get("param"),
                "baseline": study.get("baseline"), "rows": rows}
    if any((part / "games.jsonl").is_file() for part in run_parts(root)):
        run = read_run_json(root)
        config = run.get("config", {})
        row = {"id": root.name, "label": config.get("agent", root.name), "layer": "",
               "overrides": {}, "skipped": False, "config": config, "total": run.get("games"),
               "games": read_run_jsonl(root, "games.jsonl", stop_at_torn=True)}
        return {"kind": "run", "title": f"bsjax run {root.name}",
                "protocol": config.get("protocol", "paper"), "param": None,
                "baseline": None, "rows": [row]}
    raise ReportError(f"{path} is neither a study (study.json) nor a run directory "
                      "(games.jsonl)")


def _status(row: dict) -> str:
    if row.get("skipped"):
        return "skipped (--llm none)"
    if not row["games"]:
        return "not run"
    if row["total"] is not None and len(row["games"]) < row["total"]:
        return f"partial {len(row['games'])}/{row['total']}"
    return "ok"


def pairing(data: dict, baseline: str | None = None, paired: str = "baseline") -> dict[str, str]:
    """Which row each row is compared with game by game: row id -> the other row's id.

    Args:
        data: a study or run, as `load` gives it.
        baseline: the row every other row is compared with (default: the study's baseline, if it
            names one).
        paired: one of PAIRED_MODES. With "adjacent" each row is compared with the row its
            study names as `against`, else the nearest row above it that has games (a skipped or
            unplayed row is passed over).

    Raises:
        ReportError: an unknown mode, a baseline with another mode, or a baseline that is not a
            row.
    """
    if paired not in PAIRED_MODES:
        raise ReportError(f"unknown paired mode {paired!r} (choose from "
                          f"{', '.join(PAIRED_MODES)})")
    if baseline is not None and paired != "baseline":
        raise ReportError(f"a baseline row is for --paired baseline (got --paired {paired})")
    ids = [row["id"] for row in data["rows"]]
    if paired == "adjacent":
        out, above = {}, None
        for row in data["rows"]:
            if row.get("against"):
                out[row["id"]] = row["against"]
            elif above is not None:
                out[row["id"]] = above
            if row["games"]:
                above = row["id"]
        return out
    baseline = baseline if baseline is not None else data.get("baseline")
    if paired == "none" or baseline is None:
        return {}
    if baseline not in ids:
        raise ReportError(f"unknown baseline row {baseline!r} (rows: {', '.join(ids)})")
    return {row_id: baseline for row_id in ids if row_id != baseline}


def table(data: dict, pairs: dict[str, str] | None = None) -> list[dict]:
    """One dict per row with the COLUMNS fields (None where a value does not apply).

    With `pairs` (row id -> the row it is compared with, see `pairing`) every row also has the
    PAIRED_COLUMNS: the paired differences row − other in F1 and completion over the games both
    played (None where the row has no partner or either has no games).
    """
    by_id = {row["id"]: row for row in data["rows"]}
    published = PUBLISHED.get(data["protocol"], {}) if data["kind"] == "paper" else {}
    top = _ceiling(data["protocol"])
    out = []
    for row in data["rows"]:
        summary = summaries.summarize(row["games"]) if row["games"] else None
        entry = dict.fromkeys(COLUMNS)
        entry.update(id=row["id"], layer=row.get("layer", ""), label=row.get("label", ""),
                     agent=row["config"].get("agent"), status=_status(row))
        if data["kind"] == "sweep":
            param, overrides = data["param"], row["overrides"]
            # An agent param's sweep sets it in the row's params (`study.sweep_study`).
            entry[param] = overrides.get(param, (overrides.get("params") or {}).get(param))
        if summary is not None:
            low, high = summary["win_rate_ci"]
            entry.update(llm_rate=summary["llm_rate"], avg_f1=summary["avg_f1"],
                         wins=summary["wins"], games=summary["games"],
                         win_rate=summary["win_rate"], ci_low=low, ci_high=high,
                         avg_questions=summary["avg_questions"],
                         wall_seconds=summary["wall_seconds"],
                         ceiling_share=None if top is None else summary["avg_f1"] / top)
        if row["id"] in published:
            f1, wins, games, _, _ = published[row["id"]]
            entry.update(published_f1=f1, published_wins=wins, published_games=games)
            if summary is not None:
                entry["published_in_ci"] = bool(entry["ci_low"] <= wins / games
                                                <= entry["ci_high"])
        for anchor in ("random", "greedy"):
            if data["protocol"] == "grand" and anchor in by_id and summary is not None \
                    and by_id[anchor]["games"] and anchor != row["id"]:
                entry[f"h2h_vs_{anchor}"] = stats.head_to_head_win_rate(
                    summaries.f1_by_board(row["games"]), summaries.f1_by_board(by_id[anchor]["games"]))
        if pairs:
            entry.update(dict.fromkeys(PAIRED_COLUMNS))
            other = pairs.get(row["id"])
            if other is not None and row["games"] and by_id[other]["games"]:
                entry.update(paired_with=other, **summaries.compare_paired(
                    row["games"], by_id[other]["games"]))
        out.append(entry)
    return out


def h2h_matrix(data: dict) -> tuple[list[str], list[list[float]]]:
    """Pooled head-to-head F1 win rate of every played row over every other (row over column)."""
    played = [row for row in data["rows"] if row["games"]]
    ids = [row["id"] for row in played]
    f1 = [summaries.f1_by_board(row["games"]) for row in played]
    matrix = [[float("nan") if i == j else stats.head_to_head_win_rate(f1[i], f1[j])
               for j in range(len(ids))] for i in range(len(ids))]
    return ids, matrix


def board_delta_f1(data: dict, on: str = "B4", off: str = "B3") -> dict[str, float]:
    """Per-board mean F1 of row `on` minus row `off` (revision on − off), boards both played."""
    rows = {row["id"]: row for row in data["rows"]}
    if on not in rows or off not in rows or not rows[on]["games"] or not rows[off]["games"]:
        return {}
    f1_on, f1_off = summaries.f1_by_board(rows[on]["games"]), summaries.f1_by_board(rows[off]["games"])
    return {b: sum(f1_on[b]) / len(f1_on[b]) - sum(f1_off[b]) / len(f1_off[b])
            for b in sorted(set(f1_on) & set(f1_off))}


def _fmt(value, kind: str) -> str:
    if value is None:
        return "–"
    if kind == "pct":
        return f"{100 * value:.1f}%"
    if kind == "f3":
        return f"{value:.3f}"
    if kind == "f4":
        return f"{value:.4f}"
    if kind == "f1":
        return f"{value:.1f}"
    if kind == "time":
        return f"{value:.0f} s" if value < 600 else f"{value / 60:.1f} min"
    return str(value)


def _has_paired(rows: list[dict]) -> bool:
    return bool(rows) and "n_paired" in rows[0]


def _paired_markdown(rows: list[dict]) -> list[str]:
    """The paired comparisons as a second table (rows that were compared with another)."""
    head = ["row", "against", "paired games", "ΔF1", "ΔF1 95% CI",
            "completed only by row / only by other", "Δ completion", "McNemar p"]
    lines = ["", "## Paired comparisons", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for r in rows:
        if r["paired_with"] is None:
            continue
        cells = [r["id"], r["paired_with"], str(r["n_paired"])]
        if r["n_paired"]:
            cells += [f"{r['delta_f1']:+.4f}",
                      f"[{r['delta_f1_low']:+.4f}, {r['delta_f1_high']:+.4f}]",
                      f"{r['only_row_completed']} / {r['only_baseline_completed']}",
                      f"{100 * r['delta_completion']:+.1f}%", f"{r['mcnemar_p']:.3g}"]
        else:
            cells += ["–"] * (len(head) - len(cells))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Paired over the games both rows played (same board and seed): ΔF1 is the mean "
              "of row − other with a 95% percentile bootstrap interval over the games; "
              "completion is compared by McNemar's exact test on the games only one of the two "
              "completed."]
    return lines


def _ceiling(protocol: str) -> float | None:
    """The protocol's F1 ceiling (`report.ceiling`), None where no bound applies."""
    config = PROTOCOLS.get(protocol)
    return None if config is None else ceiling.protocol_f1_ceiling(config)


def markdown(data: dict, rows: list[dict]) -> str:
    """The table as Markdown, in the shape of the paper's unified table."""
    sweep = data["kind"] == "sweep"
    grand = data["protocol"] == "grand"
    has_published = any(r["published_f1"] is not None for r in rows)
    top = _ceiling(data["protocol"])
    head = ([data["param"]] if sweep else ["row", "layer", "agent"]) + [
        "LLM rate", "avg F1"] + (["of ceiling"] if top is not None else []) + [
        "wins", "win rate", "Wilson 95% CI", "avg questions", "games", "wall time"]
    if grand:
        head += ["h2h vs random", "h2h vs greedy"]
    if has_published:
        head += ["published (F1, wins)", "published win rate in CI"]
    lines = [f"# {data['title']}", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for r in rows:
        first = ([_fmt(r[data["param"]], "")] if sweep
                 else [r["id"], r["layer"] or "–", r["label"] or r["agent"]])
        if r["games"] is None:
            cells = first + [r["status"]] + ["–"] * (len(head) - len(first) - 1)
        else:
            cells = first + [
                _fmt(r["llm_rate"], "pct"), _fmt(r["avg_f1"], "f4")] + (
                [_fmt(r["ceiling_share"], "pct")] if top is not None else []) + [
                f"{r['wins']}/{r['games']}", _fmt(r["win_rate"], "pct"),
                f"[{100 * r['ci_low']:.1f}, {100 * r['ci_high']:.1f}]",
                _fmt(r["avg_questions"], "f1"),
                str(r["games"]) + ("" if r["status"] == "ok" else f" ({r['status']})"),
                _fmt(r["wall_seconds"], "time")]
            if grand:
                cells += [_fmt(r["h2h_vs_random"], "f3"), _fmt(r["h2h_vs_greedy"], "f3")]
            if has_published:
                cells += ["–", "–"] if r["published_f1"] is None else [
                    f"{r['published_f1']:.3f}, {r['published_wins']}/{r['published_games']}",
                    "yes" if r["published_in_ci"] else "no"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Win rate is the completion rate (all ship cells hit within the shot budget); "
              "CIs are Wilson 95% intervals; LLM rate is LLM calls per turn."]
    if top is not None:
        lines.append(f"Of ceiling: avg F1 as a share of {top:.3f}, the best mean F1 the "
                     "protocol's information allows (docs: How close to optimal).")
    if grand:
        lines.append("h2h: pooled head-to-head F1 win rate of the row over the anchor "
                     "(Grand et al.'s \"win rate\", ties count 1/2).")
    if has_published:
        lines.append("Published: the paper's numbers at 54 games; \"in CI\" asks whether the "
                     "published win rate lies in this row's Wilson interval.")
    if _has_paired(rows):
        lines += _paired_markdown(rows)
    return "\n".join(lines) + "\n"


def to_csv(data: dict, rows: list[dict]) -> str:
    columns = ([data["param"]] if data["kind"] == "sweep" else []) + list(COLUMNS)
    if _has_paired(rows):
        columns += PAIRED_COLUMNS
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    return buffer.getvalue()


def write(path: str | Path, baseline: str | None = None, paired: str = "baseline") -> dict:
    """(Re)build every report file of a study or run directory; returns what was written.

    `baseline` and `paired` choose the paired comparisons (see `pairing`); they are checked
    before anything is written.
    """
    from bsjax.battleship.report import figures
    root = Path(path)
    data = load(root)
    rows = table(data, pairing(data, baseline, paired))
    text = markdown(data, rows)
    with writer_lock(root, command_line()):  # one writer: not while a run writes here
        write_text_atomic(root / "table.md", text)
        write_text_atomic(root / "table.csv", to_csv(data, rows))
        written = {"table_md": str(root / "table.md"), "table_csv": str(root / "table.csv")}
        if any(r["games"] for r in rows):
            if data["kind"] == "sweep":
                written["sweep_png"] = figures.sweep(data, rows, root / "sweep.png")
            else:
                written["win_rate_png"] = figures.win_rate(data, rows, root / "win_rate.png")
            delta = board_delta_f1(data)
            if delta:
                written["board_delta_f1_png"] = figures.board_delta(delta, root /
                                                                    "board_delta_f1.png")
            if data["protocol"] == "grand" and data["kind"] == "paper":
                ids, matrix = h2h_matrix(data)
                (root / "h2h.csv").write_text(
                    "\n".join([",".join(["row_over_column"] + ids)] +
                              [",".join([a] + ["" if a == b else f"{v:.4f}"
                                               for b, v in zip(ids, line)])
                               for a, line in zip(ids, matrix)]) + "\n")
                written["h2h_csv"] = str(root / "h2h.csv")
                written["h2h_png"] = figures.h2h(ids, matrix, root / "h2h.png")
    return {"table": rows, "markdown": text, "files": written, "kind": data["kind"]}
