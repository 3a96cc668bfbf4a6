"""The calibration's outputs (docs/gilp/spec.md §5.2): `gilp_sim_params.json` with its residual rows
and meta, and the `CALIBRATION_RESIDUALS.md` table (the paper's file name, App. G)."""

from __future__ import annotations

from pathlib import Path

from bsjax.gilp.behaviour.params import save_params, to_dict


def document(params, tokens, stages, rows3, recheck, summaries, meta) -> dict:
    """The calibration's result document: fitted parameters, token fit, every residual row
    (stages 1-2 fitted, stage 3 predicted), the band re-check, meta and per-method summaries."""
    meta = dict(meta)
    for i, st in enumerate(stages, 1):
        meta[f"stage{i}"] = {"objective": st.objective, "start_objective": st.start_objective,
                             "evaluations": st.evaluations, "seconds": round(st.seconds, 2),
                             "values": st.values}
    rows = [r for st in stages for r in st.rows] + rows3
    return {"params": to_dict(params), "token_model": tokens, "rows": rows,
            "band_recheck": recheck, "meta": meta,
            "summaries": {m: {k: s.get(k) for k in ("episodes", "sr", "hsr", "hsr_draft", "iar",
                                                    "pd", "rwf", "calls_step", "corr_rate",
                                                    "risk_rate", "alpha", "beta", "prop1_hsr")}
                          for m, s in summaries.items()}}


def write_outputs(out: Path, doc: dict, params_name: str, residuals_name: str) -> None:
    """The parameter file (with residual rows and meta) and the residual table."""
    from bsjax.gilp.behaviour.params import from_dict
    out.mkdir(parents=True, exist_ok=True)
    save_params(out / params_name, from_dict(doc["params"]),
                residuals={"rows": doc["rows"], "band_recheck": doc["band_recheck"],
                           "token_model": doc["token_model"]}, meta=doc["meta"])
    (out / residuals_name).write_text(residuals_markdown(doc))


def _fmt(x) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, list):
        return ", ".join(_fmt(v) for v in x)
    return f"{x:.4f}" if isinstance(x, float) else str(x)


def residuals_markdown(doc: dict) -> str:
    """CALIBRATION_RESIDUALS.md: every row of stages 1-3, the band re-check and the token fit."""
    meta = doc["meta"]
    lines = ["# Simulator calibration residuals", "",
             f"Benchmarks: {', '.join(meta['benchmarks'])}; {meta['tasks_per_bench']} tasks × "
             f"{meta['seeds']} seeds per benchmark; {meta['seconds']} s in all.", ""]
    for i in (1, 2):
        st = meta.get(f"stage{i}")
        if st:
            lines.append(f"- Stage {i}: objective {st['objective']:.5f} (start "
                         f"{st['start_objective']:.5f}), {st['evaluations']} evaluations, "
                         f"{st['seconds']} s.")
    head = ["| stage | method | metric | target | value | residual | z | weight | [rev] | band | "
            "pass |", "|---|---|---|---|---|---|---|---|---|---|---|"]

    def table(rows):
        out = list(head)
        for r in rows:
            band = "" if not r["band"] else f"[{r['band'][0]:.3f}, {r['band'][1]:.3f}]"
            ok = "" if r["pass"] is None else ("pass" if r["pass"] else "FAIL")
            out.append(f"| {r['stage']} | {r['method']} | {r['metric']} | {_fmt(r['target'])} | "
                       f"{_fmt(r['value'])} | {_fmt(r['residual'])} | {_fmt(r.get('z'))} | {r['weight']:g} | "
                       f"{'yes' if r['rev'] else ''} | {band} | {ok} |")
        return out

    lines += ["", "## Residuals (stages 1-2 fitted, stage 3 predicted)", "",
              "z is the residual in units of the row's band half-width (0.04 for a rate without "
              "a band, 0.4 for PD); the objective is Σ weight·z².", ""] + table(doc["rows"])
    if doc["band_recheck"]:
        lines += ["", "## Fitted bands re-checked on the stage-3 run", ""]
        lines += table(doc["band_recheck"])
    tok = doc["token_model"]
    if tok:
        lines += ["", "## Token model", "",
                  f"R² = {tok['r2']:.4f} on {tok['prompts']} rendered prompts (pooled; "
                  f"RMSE {tok['rmse']:.1f} tokens; band R² ≥ 0.98: "
                  f"{'pass' if tok['r2'] >= 0.98 else 'FAIL'}).",
                  "Per benchmark: " + ", ".join(f"{b} {r:.4f}"
                                                for b, r in tok["r2_per_bench"].items()), "",
                  "| coefficient | value |", "|---|---|"]
        lines += [f"| {k} | {v:.3f} |" for k, v in tok["coefs"].items()]
    return "\n".join(lines) + "\n"


__all__ = ["document", "residuals_markdown", "write_outputs"]
