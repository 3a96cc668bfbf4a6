"""GILP Table 7, the real-LLM validation (docs/gilp/spec.md §7): a real run's events split by
benchmark (`real_by_benchmark`), the table with its paper cells beside the measured ones
(`table7`), and `report_real`, which writes both and the run's `summary.json`.
"""

from __future__ import annotations

from pathlib import Path

from bsjax.core import files
from bsjax.gilp import config, events, paper_numbers
from bsjax.gilp.real import runs as real_runs
from bsjax.gilp.report.table_format import Column, Table, write_table

T7_ARMS = ("Agent-Replan", "GILP")
T7_SUBSET = "taskgraph n=5"


def _delta_pct(agent, gilp) -> float | None:
    return None if agent in (None, 0) or gilp is None else 100.0 * (gilp - agent) / agent


def _paper7(scope: str) -> dict:
    """Table 7's paper cells of one scope (the n = 5 calibration subset has HSRs only)."""
    if scope == T7_SUBSET:
        sub = paper_numbers.TABLE7_CALIBRATION_SUBSET
        return {"paper_n": f"{sub['n']}/{sub['n']}", "paper_hsr_agent": paper_numbers.P(sub["hsr_agent"]),
                "paper_hsr_gilp": paper_numbers.P(sub["hsr_gilp"])}
    ref = paper_numbers.TABLE7.get(scope)
    if ref is None:
        return {}
    return {
        "paper_n": "/".join(map(str, ref["n"])),
        "paper_sr": paper_numbers.P(paper_numbers.TABLE7_SR),
        "paper_hsr_agent": paper_numbers.P(ref["hsr_agent"][0]),
        "paper_hsr_agent_ci": ref["hsr_agent"][1:],
        "paper_hsr_gilp": paper_numbers.P(ref["hsr_gilp"][0]),
        "paper_hsr_gilp_ci": ref["hsr_gilp"][1:],
        "paper_delta_pct": paper_numbers.P(ref["delta_pct"]),
        "paper_tok_agent": paper_numbers.P(ref["tok"][0]),
        "paper_tok_gilp": paper_numbers.P(ref["tok"][1]),
    }


def table7(real: dict) -> Table:
    """T7 real-LLM validation. `real[scope][method]` = a `bsjax.gilp.real.runs.summarise_real` entry
    (n, sr, sr_ci, hsr, hsr_ci, tok_task, corr_rate, json_fail_rate, timeouts, usd_task,
    usd_1k_gpt4o_mini) for the arms Agent-Replan and GILP; scope a benchmark, "pooled" or
    "taskgraph n=5" (see `real_by_benchmark`). Δ% = 100·(HSR_GILP − HSR_agent)/HSR_agent."""
    cols = [
        Column("scope", "benchmark", "str"),
        Column("n", "n (agent/GILP)", "str"),
        Column("paper_n", "paper", "str"),
    ]
    label = {"agent": "agent", "gilp": "GILP"}
    for arm in ("agent", "gilp"):
        cols += [Column(f"sr_{arm}", f"SR {label[arm]}"), Column(f"sr_{arm}_ci", "Wilson 95%", "ci")]
    cols.append(Column("paper_sr", "paper", "paper_f3"))
    for arm in ("agent", "gilp"):
        cols += [
            Column(f"hsr_{arm}", f"HSR {label[arm]}"),
            Column(f"hsr_{arm}_ci", "95% CI", "ci"),
            Column(f"paper_hsr_{arm}", "paper", "paper_f3"),
            Column(f"paper_hsr_{arm}_ci", "paper CI", "ci"),
        ]
    cols += [Column("delta_pct", "Δ%", "pct"), Column("paper_delta_pct", "paper", "paper_pct")]
    for arm in ("agent", "gilp"):
        cols += [
            Column(f"tok_{arm}", f"Tok/Task {label[arm]}", "tok"),
            Column(f"paper_tok_{arm}", "paper", "paper_tok"),
        ]
    cols += [
        Column("corr_rate", "correction rate (GILP)"),
        Column("json_fail_agent", "JSON-fail agent"),
        Column("json_fail_gilp", "JSON-fail GILP"),
        Column("timeouts_agent", "timeouts agent", "int"),
        Column("timeouts_gilp", "timeouts GILP", "int"),
        Column("usd_1k_run", "$/1k tasks (run)", "usd"),
        Column("usd_1k_gpt4o_mini", "$/1k tasks GPT-4o-mini", "usd"),
    ]
    scopes = [b for b in (*config.BENCHMARKS, "pooled", T7_SUBSET) if b in real]
    rows = []
    for scope in scopes + [k for k in real if k not in scopes]:
        agent, gilp = (real[scope].get(m) or {} for m in T7_ARMS)
        arms = {"agent": agent, "gilp": gilp}
        row = {
            "scope": scope,
            "n": f"{agent.get('n', 0)}/{gilp.get('n', 0)}",
            "delta_pct": _delta_pct(agent.get("hsr"), gilp.get("hsr")),
            "corr_rate": gilp.get("corr_rate"),
            **_paper7(scope),
        }
        usd = [s.get("usd_task") for s in arms.values() if s]
        gpt = [s.get("usd_1k_gpt4o_mini") for s in arms.values() if s]
        # One figure per scope: both arms' tasks together, per 1k tasks.
        row["usd_1k_run"] = None if not usd or None in usd else 1000 * sum(usd) / len(usd)
        row["usd_1k_gpt4o_mini"] = None if not gpt or None in gpt else sum(gpt) / len(gpt)
        for arm, s in arms.items():
            row.update(
                {
                    f"sr_{arm}": s.get("sr"),
                    f"sr_{arm}_ci": s.get("sr_ci"),
                    f"hsr_{arm}": s.get("hsr"),
                    f"hsr_{arm}_ci": s.get("hsr_ci"),
                    f"tok_{arm}": s.get("tok_task"),
                    f"json_fail_{arm}": s.get("json_fail_rate"),
                    f"timeouts_{arm}": s.get("timeouts"),
                }
            )
        rows.append(row)
    notes = [
        "Real LLM path (a local model instead of GPT-4o-mini; `paper`: GPT-4o-mini, §5.9). "
        "SR: Wilson 95% CI; HSR CI from per-episode variance. Δ% = 100·(HSR GILP − HSR "
        "agent) / HSR agent. $ columns average the two arms; the run's price row is $0 for "
        "a local model; GPT-4o-mini at $0.15 / $0.60 per million tokens in / out. "
        f"`{T7_SUBSET}`: the first 5 TaskGraph tasks (paper: the calibration subset)."
    ]
    return Table("table_7", "Table 7 — real-LLM validation", cols, rows, notes)


def real_by_benchmark(events_path: str | Path, subset: int = 5) -> dict[str, dict]:
    """Table 7's input from a real run's `events.jsonl` (+ `episodes.jsonl` sidecar):
    {bench: summarise_real, "pooled": ..., "taskgraph n=5": the first `subset` TaskGraph task
    ids}, each summarised by `summarise_real_rows` on its filtered rows."""
    rows, side = real_runs.read_real_run(events_path)
    first = sorted({r["task"] for r in rows if r["bench"] == "taskgraph"})[:subset]
    parts = {b: lambda r, b=b: r["bench"] == b for b in config.BENCHMARKS}
    parts[T7_SUBSET] = lambda r: r["bench"] == "taskgraph" and r["task"] in first
    out = {}
    for scope, keep in parts.items():
        part = [r for r in rows if keep(r)]
        if part and not (scope == T7_SUBSET and len(first) < subset):
            out[scope] = real_runs.summarise_real_rows(part, [s for s in side if keep(s)])
    if rows:
        out["pooled"] = real_runs.summarise_real_rows(rows, side)
    return out


def report_real(out: str | Path) -> dict:
    """Rebuild a real run's T7 table (`table_7.md|csv`) and `summary.json` from its
    `events.jsonl` and sidecar, finished episodes only (a run in progress appends whole
    episodes); returns `{"methods": pooled per method, "by_benchmark": Table 7's input}`.
    Raises ValueError, writing nothing, when no episode has finished."""
    out = Path(out)
    real = real_by_benchmark(out / events.EVENTS_FILE)
    if not real:
        raise ValueError(f"{out / events.EVENTS_FILE} holds no finished episode")
    summary = {"methods": real.get("pooled", {}), "by_benchmark": real}
    write_table(table7(real), out)
    files.write_json_atomic(out / "summary.json", summary)
    return summary
