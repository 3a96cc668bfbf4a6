"""GILP tables T1, T2, T3, T5 (+ T5b) and T6 (docs/gilp/spec.md §7), built from summarised metrics
(`bsjax.gilp.metrics.summarise`: {method: metrics}), T4 from a backbone table and T7 from a
real-LLM run (`real_by_benchmark`), written as `table_N.md` + `table_N.csv`.

Each measured column with a value in §1.2 has a `paper` column beside it (`bsjax.gilp.
paper_numbers`); [rev] (secondary) paper values are marked † in Markdown and listed in the CSV's
`paper_rev` column; formats: `bsjax.gilp.report.table_format`.
"""

from __future__ import annotations

from pathlib import Path

from bsjax.core import files
from bsjax.gilp import config, events, metrics, paper_numbers
from bsjax.gilp.real import runs as real_runs
from bsjax.gilp.report.table_format import Column, Table


def _ordered(summary: dict, methods=None) -> list[str]:
    if methods is not None:
        return [m for m in methods if m in summary]
    known = [m for m in (*paper_numbers.METHODS, paper_numbers.ORACLE) if m in summary]
    return known + [m for m in summary if m not in known]


def _paper(table: dict, method: str, key: str):
    return paper_numbers.lookup(table, method, key)


_PAPER_NOTE = "Measured on the sim driver with the MPNN backbone; `paper` columns: docs/gilp/spec.md §1.2."


def table1(summary: dict, methods=None) -> Table:
    """T1 main comparison: every method (+ Oracle)."""
    cols = [Column("method", "method", "str"), Column("episodes", "episodes", "int"),
            Column("sr", "SR"), Column("sr_ci", "SR 95% CI", "ci"),
            Column("paper_sr", "paper", "paper_f3"), Column("sr_h10", "SR(H>10)"),
            Column("paper_sr_h10", "paper", "paper_f3"), Column("iar", "IAR"),
            Column("paper_iar", "paper", "paper_f3"), Column("hsr", "HSR"),
            Column("hsr_ci", "HSR 95% CI", "ci"), Column("paper_hsr", "paper", "paper_f3"),
            Column("hsr_excluded", "HSR excl.", "int"), Column("hsr_draft", "HSR_draft"),
            Column("pd", "PD (steps)", "f2"), Column("paper_pd", "paper", "paper_f2"),
            Column("ees", "EES (/step)"), Column("rwf", "RWF"),
            Column("tok_task", "Tok/Task", "tok"), Column("tok_succ", "Tok/Succ", "tok"),
            Column("paper_tok_succ", "paper", "paper_tok"), Column("calls_step", "calls/step", "f2")]
    rows = []
    for m in _ordered(summary, methods):
        s = summary[m]
        row = {c.key: s.get(c.key) for c in cols}
        row["method"] = m
        for key in ("sr", "sr_h10", "iar", "hsr", "pd", "tok_succ"):
            row[f"paper_{key}"] = _paper(paper_numbers.TABLE1, m, key)
        rows.append(row)
    notes = [_PAPER_NOTE,
             "SR: Wilson 95% CI. HSR: mean over episodes with >= 1 committed atom, CI mean ± "
             "1.96·sd/√n within [0, 1]; `HSR excl.` counts episodes without atoms. PD is undefined (—) for "
             "planners without belief. Tokens in thousands; the sim never inflates tokens, so "
             "token columns compare with the paper by ratio only."]
    return Table("table_1", "Table 1 — main comparison (sim, test split)", cols, rows, notes)


T2_METHODS = ("Agent-Replan", "Parametric-WM-MPC", "Parametric-WM-MCTS", "Hybrid-Full", "GILP")


def table2(summary: dict, methods=T2_METHODS) -> Table:
    """T2: SR per oracle-horizon bucket (with n) and HSR at H > 10."""
    cols = [Column("method", "method", "str")]
    for b in config.HORIZON_BUCKET_NAMES:
        cols += [Column(f"sr_{b}", f"SR {b.replace('H<=', 'H≤')}", "srn"),
                 Column(f"paper_sr_{b}", "paper", "paper_f3")]
    cols += [Column("hsr_h10", "HSR(H>10)"), Column("paper_hsr_h10", "paper", "paper_f3")]
    rows = []
    for m in _ordered(summary, methods):
        s = summary[m]
        row = {"method": m, "hsr_h10": s.get("hsr_h10"),
               "paper_hsr_h10": _paper(paper_numbers.TABLE2, m, "hsr_h10")}
        for b in config.HORIZON_BUCKET_NAMES:
            bucket = s["sr_buckets"][b]
            row[f"sr_{b}"] = (bucket["sr"], bucket["n"])
            row[f"paper_sr_{b}"] = _paper(paper_numbers.TABLE2, m, b)
        rows.append(row)
    return Table("table_2", "Table 2 — SR by oracle-horizon bucket", cols, rows,
                 [_PAPER_NOTE, "n: episodes in the bucket."])


def table3(summary: dict, methods=None, wall: dict | None = None) -> Table:
    """T3 cost: every LLM method and the parametric rows. `wall` optionally gives seconds per
    task by method (the simulator's compute time per task), overriding the rows' `wall_s` sums."""
    cols = [Column("method", "method", "str"), Column("tok_task", "Tok/Task", "tok"),
            Column("tok_succ", "Tok/Succ", "tok"), Column("paper_tok_succ", "paper", "paper_tok"),
            Column("calls_step", "calls/step", "f2"), Column("paper_calls_step", "paper", "paper_f2"),
            Column("corr_rate", "correction rate"), Column("paper_corr_rate", "paper", "paper_f3"),
            Column("risk_rate", "risk-gate rate"), Column("paper_risk_rate", "paper", "paper_f3"),
            Column("wall_task", "wall/task (s)", "sec"), Column("usd_1k", "$/1k tasks", "usd"),
            Column("paper_usd_1k", "paper", "paper_usd")]
    rows = []
    for m in _ordered(summary, methods or paper_numbers.METHODS):
        s = summary[m]
        row = {c.key: s.get(c.key) for c in cols}
        row["method"] = m
        if wall and m in wall:
            row["wall_task"] = wall[m]
        for key in ("tok_succ", "calls_step", "corr_rate", "risk_rate", "usd_1k"):
            row[f"paper_{key}"] = _paper(paper_numbers.TABLE3, m, key)
        rows.append(row)
    notes = [_PAPER_NOTE, "$/1k tasks at GPT-4o-mini prices ($0.15 / $0.60 per million tokens "
             "in / out). The paper's 15.0k vs 13.5k contradicts its own claim that GILP is "
             "cheaper per solved task than Hybrid-Full (§1.3 #2); only GILP < Agent-Replan is "
             "checked."]
    return Table("table_3", "Table 3 — cost", cols, rows, notes)


T5_METHODS = ("Agent-Replan", "Hybrid-ValidityOnly", "Hybrid-DeltaOnly", "Hybrid-RiskOnly",
              "Hybrid-ValueOnly", "Hybrid-Full", "GILP-NoCorrGate", "GILP-NoRiskGate",
              "GILP-tau0", "GILP-tau1", "GILP")


def table5(summary: dict, methods=T5_METHODS) -> Table:
    """T5 ablations."""
    cols = [Column("method", "variant", "str"), Column("sr", "SR"),
            Column("paper_sr", "paper", "paper_f3"), Column("hsr", "HSR"),
            Column("paper_hsr", "paper", "paper_f3"), Column("iar", "IAR"),
            Column("paper_iar", "paper", "paper_f3"), Column("rwf", "RWF"),
            Column("paper_rwf", "paper", "paper_f3"), Column("calls_step", "calls/step", "f2"),
            Column("tok_succ", "Tok/Succ", "tok")]
    rows = []
    for m in _ordered(summary, methods):
        s = summary[m]
        row = {c.key: s.get(c.key) for c in cols}
        row["method"] = "Agent-Replan (NoBackbone)" if m == "Agent-Replan" else m
        for key in ("sr", "hsr", "iar", "rwf"):
            row[f"paper_{key}"] = _paper(paper_numbers.TABLE5, m, key)
        rows.append(row)
    notes = [_PAPER_NOTE] + [f"Paper, {k}: {v}." for k, v in paper_numbers.TABLE5_RELATIONS.items()
                             if k != "tau_low"]
    return Table("table_5", "Table 5 — ablations", cols, rows, notes)


def table5b(sweep: dict) -> Table:
    """T5b: the τ_low sweep of GILP on the validation split; `sweep` is {τ_low: metrics}."""
    cols = [Column("tau_low", "τ_low", "f2"), Column("sr", "SR"), Column("sr_ci", "SR 95% CI", "ci"),
            Column("hsr", "HSR"), Column("corr_rate", "correction rate"),
            Column("calls_step", "calls/step", "f2"), Column("tok_succ", "Tok/Succ", "tok"),
            Column("alpha", "α̂")]
    rows = [dict({c.key: s.get(c.key) for c in cols}, tau_low=float(tau))
            for tau, s in sorted(sweep.items())]
    return Table("table_5b", "Table 5b — τ_low sweep (GILP, validation split)", cols, rows,
                 [f"Paper: {paper_numbers.TABLE5_RELATIONS['tau_low']}."])


T6_METHODS = ("Agent-Replan", "Hybrid-Full", "GILP")


def table6(summary: dict, methods=T6_METHODS, k_max: int = 10) -> Table:
    """T6 error proxies: p_err(1..k_max), ExpectedErrors@10, IndepBound@10, α̂, β̂ and the
    Prop.-1 prediction (1 − α̂β̂)·p_err,draft(k_max)."""
    cols = [Column("method", "method", "str")]
    cols += [Column(f"p_err_{k}", f"p_err({k})", "perr") for k in range(1, k_max + 1)]
    cols += [Column("paper_p_err10", "paper p_err(10)", "paper_f3"),
             Column("expected_errors", "ExpectedErrors@10"),
             Column("paper_expected_errors", "paper", "paper_f3"),
             Column("indep_bound", "IndepBound@10"), Column("paper_indep_bound", "paper", "paper_f3"),
             Column("alpha", "α̂"), Column("paper_alpha", "paper", "paper_f2"),
             Column("beta", "β̂"), Column("paper_beta", "paper", "paper_f2"),
             Column("p_err_draft", f"p_err,draft({k_max})", "perr"),
             Column("prop1_perr", "Prop.-1 (1−α̂β̂)·p_err,draft")]
    rows = []
    for m in _ordered(summary, methods):
        s = summary[m]
        row = {"method": m, "expected_errors": s.get("expected_errors"),
               "indep_bound": s.get("indep_bound"), "alpha": s.get("alpha"),
               "beta": s.get("beta"), "prop1_perr": s.get("prop1_perr"),
               "p_err_draft": s["p_err_draft"][k_max - 1] if len(s["p_err_draft"]) >= k_max
               else None}
        for entry in s["p_err"][:k_max]:
            row[f"p_err_{entry['k']}"] = entry
        for key in ("expected_errors", "indep_bound", "alpha", "beta"):
            row[f"paper_{key}"] = _paper(paper_numbers.TABLE6, m, key)
        row["paper_p_err10"] = _paper(paper_numbers.TABLE6, m, "p_err10")
        rows.append(row)
    notes = [_PAPER_NOTE,
             "p_err(k): episodes whose step-k committed output holds a hallucinated atom or "
             "whose action is invalid, over episodes that executed step k; * fewer than "
             f"{metrics.P_ERR_MIN_EPISODES} episodes reached k. The paper's α ≈ 0.83 and "
             "β ≈ 0.93 are from §4.7."]
    return Table("table_6", "Table 6 — error proxies at H = 10", cols, rows, notes)


T4_BACKBONES = ("MLP", "GCN", "MPNN", "GPS", "ActionNode", "ErrorAware")
T4_FIELDS = ("params", "node_mse", "delta_acc_all", "delta_acc_changed", "valid_acc",
             "trans_acc_id", "trans_acc_ood", "standalone_sr", "hybrid_sr", "hybrid_hsr",
             "train_seconds", "steps_per_second")


def table4(backbones: dict) -> Table:
    """T4 backbones. `backbones[scope][backbone]` = {field: value or None} for the T4_FIELDS,
    scope a benchmark or "pooled" (a flat {backbone: {...}} is read as "pooled"). Every scope
    lists the six spec backbones (unmeasured: —) plus any others given; paper values (§1.2,
    pooled) sit beside the pooled rows."""
    if not any(k == "pooled" or k in config.BENCHMARKS for k in backbones):
        backbones = {"pooled": backbones}
    cols = [Column("scope", "benchmark", "str"), Column("backbone", "backbone", "str"),
            Column("params", "params", "int"), Column("node_mse", "NodeMSE", "g3"),
            Column("delta_acc_all", "DeltaAcc-all"), Column("delta_acc_changed", "DeltaAcc-changed"),
            Column("valid_acc", "ValidAcc"), Column("trans_acc_id", "TransAcc ID"),
            Column("paper_trans_acc", "paper", "paper_f3"), Column("trans_acc_ood", "TransAcc OOD"),
            Column("standalone_sr", "standalone SR (MPC)"),
            Column("paper_standalone_sr", "paper", "paper_f3"),
            Column("hybrid_sr", "hybrid SR"), Column("paper_hybrid_sr", "paper", "paper_f3"),
            Column("hybrid_hsr", "hybrid HSR"), Column("paper_hybrid_hsr", "paper", "paper_f3"),
            Column("train_seconds", "train (s)", "sec"), Column("steps_per_second", "steps/s", "f2")]
    scopes = [b for b in config.BENCHMARKS if b in backbones] + ["pooled"] * ("pooled" in backbones)
    scopes += [k for k in backbones if k not in scopes]
    rows = []
    for scope in scopes:
        given = backbones[scope]
        for name in [*T4_BACKBONES, *(b for b in given if b not in T4_BACKBONES)]:
            row = {"scope": scope, "backbone": name,
                   **{k: (given.get(name) or {}).get(k) for k in T4_FIELDS}}
            if scope == "pooled":
                for key in ("trans_acc", "standalone_sr", "hybrid_sr", "hybrid_hsr"):
                    row[f"paper_{key}"] = _paper(paper_numbers.TABLE4, name, key)
            rows.append(row)
    notes = ["Standalone SR: Parametric-WM-MPC with that backbone; hybrid SR / HSR: Hybrid-Full "
             "with that backbone as the skeleton provider (bsjax reading of the paper's §5.5). Paper "
             "TransAcc is printed beside TransAcc ID. The paper gives no values for GCN, "
             "ActionNode or ErrorAware. —: not measured."]
    return Table("table_4", "Table 4 — backbones", cols, rows, notes)


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


def write_table(table: Table, out_dir: str | Path) -> list[Path]:
    """Writes `NAME.md` and `NAME.csv` into `out_dir`; returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md, cv = out / f"{table.name}.md", out / f"{table.name}.csv"
    md.write_text(table.markdown())
    cv.write_text(table.csv())
    return [md, cv]


def build_tables(
    summary: dict,
    tau_sweep: dict | None = None,
    wall: dict | None = None,
    backbones: dict | None = None,
    real: dict | None = None,
) -> list[Table]:
    """T1, T2, T3, T5, T6 from one summary; T4 with a backbone table, T5b with a τ_low sweep,
    T7 with a real-run summary (`real_by_benchmark`)."""
    tables = [table1(summary), table2(summary), table3(summary, wall=wall)]
    if backbones:
        tables.append(table4(backbones))
    tables.append(table5(summary))
    if tau_sweep:
        tables.append(table5b(tau_sweep))
    tables.append(table6(summary))
    if real:
        tables.append(table7(real))
    return tables


def write_tables(
    summary: dict,
    out_dir: str | Path,
    tau_sweep: dict | None = None,
    wall: dict | None = None,
    backbones: dict | None = None,
    real: dict | None = None,
) -> list[Path]:
    return [
        p for t in build_tables(summary, tau_sweep, wall, backbones, real) for p in write_table(t, out_dir)
    ]
