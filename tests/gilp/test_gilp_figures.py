"""GILP figures F1, F2, F4, F5, F6 and tables T4, T7 on hand-built event rows (docs/gilp/spec.md §7)."""

from __future__ import annotations

import json
import math

import pytest

from bsjax.gilp import events, metrics
from bsjax.gilp.report import figures, real_table, tables
from gilp.synthetic import event_row

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


row = event_row


def episode(method: str, task: int, H: int, success: bool, halluc_every: int,
            tokens: int = 150) -> list[dict]:
    """H steps, one committed atom per step; every `halluc_every`-th step's atom is hallucinated
    and its action invalid (0: never). Parametric planners (tokens = 0) make no calls."""
    out = []
    for t in range(H):
        bad = bool(halluc_every) and (t + 1) % halluc_every == 0
        out.append(row(method=method, task=task, H=H, t=t, valid=not bad,
                       calls=1 if tokens else 0, tok_in=tokens * 2 // 3, tok_out=tokens // 3,
                       committed_atoms=[[t, "completed"]], halluc_committed=[int(bad)],
                       done=t == H - 1, success=t == H - 1 and success))
    return out


# (method, tokens per step, hallucinate every k-th step, successes out of 8)
METHODS = [("Agent-Replan", 150, 2, 4), ("Parametric-WM-MPC", 0, 4, 3),
           ("Hybrid-Full", 180, 3, 5), ("GILP", 200, 5, 7), ("GILP-NoCorrGate", 180, 4, 6),
           ("GILP-tau0", 260, 6, 7)]
HORIZONS = (2, 3, 5, 6, 8, 9, 12, 15)


def make_rows() -> list[dict]:
    rows = []
    for method, tokens, every, wins in METHODS:
        for i, h in enumerate(HORIZONS):
            rows += episode(method, i, h, i < wins, every, tokens)
    return rows


@pytest.fixture(scope="module")
def data():
    rows = make_rows()
    return rows, metrics.summarise(rows)


def is_png(path) -> bool:
    return path.is_file() and path.stat().st_size > 0 and path.read_bytes()[:8] == PNG_MAGIC


BACKBONES = {
    "taskgraph": {"MPNN": {"params": 75_000, "node_mse": 0.0004, "standalone_sr": 0.6,
                           "hybrid_sr": 0.8}},
    "pooled": {"MLP": {"params": 79_000, "node_mse": 0.012, "trans_acc_id": 0.9,
                       "standalone_sr": 0.5, "hybrid_sr": None, "hybrid_hsr": 0.07},
               "MPNN": {"params": 75_000, "trans_acc_id": 0.99, "standalone_sr": 0.58,
                        "hybrid_sr": 0.79, "hybrid_hsr": 0.06}},
}


# --- figures -------------------------------------------------------------------------------------

def test_write_figures_writes_every_png(data, tmp_path):
    rows, summary = data
    paths = figures.write_figures(summary, tmp_path, backbones=BACKBONES, rows=rows)
    assert [p.name for p in paths] == [figures.FILES[k] for k in ("f1", "f2", "f4", "f5", "f6")]
    assert all(is_png(p) for p in paths)


def test_summary_json_dict_and_run_dir_inputs(data, tmp_path):
    rows, summary = data
    run = tmp_path / "run"
    (run / "events").mkdir(parents=True)
    events.write_events(run / "events" / "GILP__taskgraph__test_id.jsonl",
                   [r for r in rows if r["method"] == "GILP"])
    (run / "summary.json").write_text(json.dumps({"pooled": summary, "wall": {}}))
    assert figures.pooled_summary(run).keys() == summary.keys()
    assert {r["method"] for r in figures.run_rows(run, figures.F6_METHODS)} == {"GILP"}
    paths = figures.write_figures(run, tmp_path / "figs")               # no backbones: no F4
    assert [p.name for p in paths] == [figures.FILES[k] for k in ("f1", "f2", "f5", "f6")]
    assert all(is_png(p) for p in paths)


def test_absent_methods_skipped_and_nothing_drawn(data, tmp_path):
    _, summary = data
    only_mpc = {"Parametric-WM-MPC": summary["Parametric-WM-MPC"]}
    paths = figures.write_figures(only_mpc, tmp_path)
    # F5 (GILP variants) and F6 (Agent-Replan / Hybrid-Full / GILP) have nothing to draw.
    assert [p.name for p in paths] == [figures.FILES["f1"], figures.FILES["f2"]]
    assert not (tmp_path / figures.FILES["f5"]).exists() and not (tmp_path / figures.FILES["f6"]).exists()
    assert figures.f1_horizons(only_mpc, tmp_path / "x.png", methods=("GILP", "Hybrid-Full")) is None
    assert figures.write_figures({}, tmp_path / "empty", backbones={"pooled": {}}) == []
    assert not list((tmp_path / "empty").glob("*.png"))
    # A backbone with no SR at all is not drawn; one with a single measured SR is.
    assert figures.f4_backbones({"GCN": {"params": 1}}, tmp_path / "b.png") is None
    assert is_png(figures.f4_backbones({"GCN": {"hybrid_sr": 0.7}}, tmp_path / "b.png"))


def test_pareto_front_and_indep_curve():
    points = [("a", 10, 0.5), ("b", 100, 0.7), ("c", 200, 0.6), ("d", 50, 0.5), ("e", 300, 0.9)]
    assert [p[0] for p in figures.pareto_front(points)] == ["a", "b", "e"]
    curve = figures.indep_curve([0.1, 0.2, {"p": 0.5}, None, 0.1])
    assert curve[:3] == pytest.approx([0.1, 1 - 0.9 * 0.8, 1 - 0.9 * 0.8 * 0.5])
    assert curve[3:] == [None, None]
    p10 = [0.1] * 10
    assert figures.indep_curve(p10)[-1] == pytest.approx(metrics.indep_bound(p10))


def test_backbone_scope_reads_flat_and_scoped_tables():
    assert figures.backbone_scope(BACKBONES)["MPNN"]["hybrid_sr"] == 0.79
    assert figures.backbone_scope(BACKBONES, "taskgraph") == BACKBONES["taskgraph"]
    assert figures.backbone_scope({"GPS": {"hybrid_sr": 0.7}}) == {"GPS": {"hybrid_sr": 0.7}}


# --- tables --------------------------------------------------------------------------------------

def test_table4_paper_column_and_dashes():
    t4 = tables.table4(BACKBONES)
    md = t4.markdown()
    assert ("| benchmark | backbone | params | NodeMSE | DeltaAcc-all | DeltaAcc-changed | ValidAcc |"
            " TransAcc ID | paper | TransAcc OOD | standalone SR (MPC) | paper | hybrid SR | paper |"
            " hybrid HSR | paper | train (s) | steps/s |") in md
    assert ("| pooled | MLP | 79000 | 0.012 | — | — | — | 0.900 | 0.843 | — | 0.500 | 0.509 | — | "
            "0.768 | 0.070 | 0.064† | — | — |") in md
    assert "| pooled | MPNN | 75000 | — | — | — | — | 0.990 | 0.992 | — | 0.580 | 0.560† | 0.790 |" in md
    assert "| pooled | GCN | — | — | — | — | — | — | — | — | — | — | — | — | — | — | — | — |" in md
    assert "| pooled | GPS | " in md and "| 0.981† |" in md
    # Per-benchmark rows: no paper values; a small MSE keeps its digits.
    assert "| taskgraph | MPNN | 75000 | 0.0004 | — | — | — | — | — | — | 0.600 | — | 0.800 | — |" in md
    assert [r["backbone"] for r in t4.rows[:6]] == list(tables.T4_BACKBONES)
    assert md.index("| taskgraph |") < md.index("| pooled |")
    csv = t4.csv().splitlines()
    assert csv[0].startswith("scope,backbone,params,node_mse,delta_acc_all,")
    assert "pooled,MLP,79000,0.012,,,,0.9,0.843,,0.5,0.509,,0.768,0.07,0.064,,,paper_hybrid_hsr" \
        in csv
    # A flat table is read as the pooled scope.
    assert tables.table4(BACKBONES["pooled"]).rows[0]["scope"] == "pooled"


def real_arm(n, sr, hsr, tok, **kw) -> dict:
    arm = dict(n=n, sr=sr, sr_ci=[sr - 0.1, 1.0], hsr=hsr,
               hsr_ci=None if hsr is None else [hsr - 0.01, hsr + 0.01], tok_task=tok,
               corr_rate=None, json_fail_rate=0.0, timeouts=0, usd_task=0.0, usd_1k_gpt4o_mini=0.9)
    return {**arm, **kw}


def test_table7_delta_paper_and_dashes():
    real = {"taskgraph": {"Agent-Replan": real_arm(20, 1.0, 0.2, 2000),
                          "GILP": real_arm(20, 0.95, 0.05, 2500, corr_rate=0.25)},
            "pooled": {"Agent-Replan": real_arm(20, 1.0, 0.2, 2000),
                       "GILP": real_arm(18, 0.95, None, 2500, json_fail_rate=None, timeouts=2)}}
    t7 = real_table.table7(real)
    by_scope = {r["scope"]: r for r in t7.rows}
    assert by_scope["taskgraph"]["delta_pct"] == pytest.approx(100 * (0.05 - 0.2) / 0.2)  # -75
    assert real_table._delta_pct(0.142, 0.040) == pytest.approx(-71.83, abs=0.01)
    assert real_table._delta_pct(0.0, 0.1) is None and by_scope["pooled"]["delta_pct"] is None
    md = t7.markdown()
    # taskgraph: n, SR agent [CI], SR GILP [CI], paper SR, HSR agent [CI] + paper, GILP + paper.
    assert ("| taskgraph | 20/20 | 20/20 | 1.000 | [0.900, 1.000] | 0.950 | [0.850, 1.000] | 1.000 |"
            " 0.200 | [0.190, 0.210] | 0.142 | [0.111, 0.172] | 0.050 | [0.040, 0.060] | 0.040 |"
            " [0.024, 0.055] | -75% | -72% | 2.0k | 2.3k | 2.5k | 2.9k | 0.250 | 0.000 | 0.000 |"
            " 0 | 0 | $0.00 | $0.90 |") in md
    assert ("| pooled | 20/18 | 80/76 |" in md
            and "| — | — | 0.035 | [0.026, 0.044] | — | -80% |" in md
            and "| — | 0.000 | — | 0 | 2 |" in md)
    assert md.index("| taskgraph |") < md.index("| pooled |")
    csv = t7.csv().splitlines()
    assert csv[0].startswith("scope,n,paper_n,sr_agent,sr_agent_ci_lo,sr_agent_ci_hi,sr_gilp,")
    assert ",-75.0,-72," in csv[1]


def test_write_tables_adds_table4_and_table7(data, tmp_path):
    _, summary = data
    real = {"pooled": {"Agent-Replan": real_arm(4, 1.0, 0.2, 2000),
                       "GILP": real_arm(4, 1.0, 0.1, 2400)}}
    names = {p.name for p in tables.write_tables(summary, tmp_path, backbones=BACKBONES, real=real)}
    assert {"table_4.md", "table_4.csv", "table_7.md", "table_7.csv"} <= names
    plain = {p.name for p in tables.write_tables(summary, tmp_path / "plain")}
    assert plain == {f"table_{n}.{e}" for n in ("1", "2", "3", "5", "6") for e in ("md", "csv")}


def test_real_by_benchmark_splits_events_and_sidecar(tmp_path):
    from bsjax.gilp.real import runs as real_runs
    rows, side = [], []
    for bench in ("taskgraph", "toolchain"):
        for task in range(6):
            for method, every in (("Agent-Replan", 2), ("GILP", 0)):
                ep = episode(method, task, 3, True, every)
                rows += [dict(r, bench=bench) for r in ep]
                side.append(dict(method=method, bench=bench, split="id", task=task, calls=3,
                                 backend_calls=3, json_failures=int(bench == "toolchain"),
                                 usd=0.0, usd_gpt4o_mini=0.001, backend_seconds=1.5))
    events.write_events(tmp_path / events.EVENTS_FILE, rows)
    (tmp_path / real_runs.SIDECAR).write_text("".join(json.dumps(s) + "\n" for s in side))
    real = real_table.real_by_benchmark(tmp_path)
    assert list(real) == ["taskgraph", "toolchain", real_table.T7_SUBSET, "pooled"]
    assert real["taskgraph"]["Agent-Replan"]["n"] == 6 and real["pooled"]["GILP"]["n"] == 12
    assert real[real_table.T7_SUBSET]["Agent-Replan"]["n"] == 5
    assert real["taskgraph"]["Agent-Replan"]["json_fail_rate"] == 0.0
    assert real["toolchain"]["GILP"]["json_fail_rate"] == pytest.approx(1 / 3)
    assert real["pooled"]["Agent-Replan"]["hsr"] == pytest.approx(1 / 3)
    md = real_table.table7(real).markdown()
    assert "| taskgraph n=5 | 5/5 | 5/5 |" in md and "| -100% |" in md
    assert not math.isnan(real["pooled"]["GILP"]["hsr"])


# --- what the figures draw (the data behind each panel) --------------------------------------------

@pytest.fixture
def drawn(monkeypatch):
    """The figures as drawn: `_save` keeps each Figure's axes before closing it."""
    kept = {}
    save = figures._save

    def keep(fig, path):
        kept[path.name] = fig.axes
        return save(fig, path)

    monkeypatch.setattr(figures, "_save", keep)
    return kept


def _same(drawn_values, expected):
    assert len(drawn_values) == len(expected)
    for got, want in zip(drawn_values, expected):
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want)


def test_f1_draws_each_methods_sr_and_hsr_per_bucket(data, tmp_path, drawn):
    rows, summary = data
    figures.f1_horizons(summary, tmp_path / "f1.png", rows=rows)
    left, right = drawn["f1.png"]
    methods = [m for m in figures.F1_METHODS if m in summary]
    assert [c.get_label() for c in left.containers] == methods
    names = figures.config.HORIZON_BUCKET_NAMES
    by_method = figures._episodes_by_method(rows)
    for container, hsr_container, m in zip(left.containers, right.containers, methods):
        sr = [figures._nan(summary[m]["sr_buckets"].get(b, {}).get("sr")) for b in names]
        _same(container.lines[0].get_ydata(), sr)
        hsr = [figures._nan(metrics.hsr([ep for ep in by_method[m]
                                         if lo <= ep[0]["H"] <= hi])["hsr"])
               for lo, hi in figures.config.HORIZON_BUCKETS]
        _same(hsr_container.lines[0].get_ydata(), hsr)


def test_f2_draws_every_method_at_its_cost_and_sr_and_the_frontier(data, tmp_path, drawn):
    _, summary = data
    figures.f2_pareto(summary, tmp_path / "f2.png")
    (ax,) = drawn["f2.png"]
    points = {t.get_text(): t.xy for t in ax.texts}
    expected = {m: (s["tok_task"] if s["tok_task"] > 0 else figures.ZERO_TOKEN_X, s["sr"])
                for m, s in summary.items() if s.get("sr") is not None}
    assert points.keys() == expected.keys()
    for m, (x, y) in expected.items():
        assert points[m] == pytest.approx((x, y))
    frontier = next(line for line in ax.lines if line.get_label() == "Pareto frontier")
    front = figures.pareto_front([(m, x, y) for m, (x, y) in expected.items()])
    assert list(frontier.get_xdata()) == pytest.approx([p[1] for p in front])
    assert list(frontier.get_ydata()) == pytest.approx([p[2] for p in front])
    # The cheapest method on the frontier is the 0-token planner, drawn at x = ZERO_TOKEN_X.
    assert front[0][0] == "Parametric-WM-MPC"


def test_f5_draws_each_variants_sr_and_hsr_bars_and_the_reference(data, tmp_path, drawn):
    _, summary = data
    figures.f5_ablations(summary, tmp_path / "f5.png")
    sr_ax, hsr_ax = drawn["f5.png"]
    methods = [m for m in figures.F5_METHODS if m in summary]
    for ax, key in ((sr_ax, "sr"), (hsr_ax, "hsr")):
        heights = [bar.get_height() for bar in ax.patches]
        _same(heights, [figures._nan(summary[m].get(key)) for m in methods])
        reference = [line for line in ax.lines if line.get_label() == figures.F5_REFERENCE]
        assert reference and reference[0].get_ydata()[0] == pytest.approx(
            summary[figures.F5_REFERENCE][key])


def test_f6_draws_p_any_and_the_independence_bound(data, tmp_path, drawn):
    rows, summary = data
    figures.f6_error_proxies(summary, tmp_path / "f6.png", rows=rows)
    (ax,) = drawn["f6.png"]
    by_method = figures._episodes_by_method(rows)
    lines = {line.get_label(): line for line in ax.lines}
    for m in [m for m in figures.F6_METHODS if m in by_method]:
        p_any = {x["H"]: x["p"] for x in metrics.p_any(by_method[m], figures.H_MAX)}
        _same(lines[f"{m} P̂_any"].get_ydata(),
              [figures._nan(p_any.get(h)) for h in range(1, figures.H_MAX + 1)])
        bound = figures.indep_curve(metrics.p_err(by_method[m], figures.H_MAX))
        _same(lines[f"{m} IndepBound"].get_ydata(), [figures._nan(b) for b in bound])


def test_f4_draws_each_backbones_measured_srs_and_names_the_missing(tmp_path, drawn):
    figures.f4_backbones(BACKBONES, tmp_path / "f4.png")
    (ax,) = drawn["f4.png"]
    standalone, hybrid = ax.containers[:2]
    # Pooled scope: MLP and MPNN standalone; only MPNN has a hybrid SR (MLP's is not measured).
    assert [b.get_height() for b in standalone] == pytest.approx([0.5, 0.58])
    assert [b.get_height() for b in hybrid] == pytest.approx([0.79])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["MLP", "MPNN"]
    assert "not measured: MLP hybrid" in ax.get_title()
