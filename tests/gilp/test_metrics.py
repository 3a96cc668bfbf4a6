"""GILP metrics, event rows and tables on hand-built event logs (docs/gilp/spec.md §6, §7)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from bsjax.core.stats import wilson_interval
from bsjax.gilp import events, metrics, paper_numbers
from bsjax.gilp.report import tables
from gilp.synthetic import event_row

row = event_row


def episode(steps: list[dict], success: bool = False, **ident) -> list[dict]:
    """Rows t = 0..T-1 of one episode; the last is done (and successful if `success`)."""
    out = []
    for t, kw in enumerate(steps):
        last = t == len(steps) - 1
        out.append(row(**{**kw, **ident, "t": t, "done": last, "success": last and success}))
    return out


def atoms(n: int, halluc: int) -> dict:
    """n committed atoms on nodes 0..n-1, the first `halluc` of them hallucinated."""
    return {"committed_atoms": [[v, "completed"] for v in range(n)],
            "halluc_committed": [1] * halluc + [0] * (n - halluc)}


# --- success, buckets ---------------------------------------------------------------------------

def test_sr_wilson_buckets_and_ood_gap():
    rows = []
    spec = [(2, "id", True), (3, "id", False), (5, "id", True), (12, "ood", True),
            (12, "ood", False), (14, "ood", False)]
    for i, (h, split, ok) in enumerate(spec):
        rows += episode([{}], success=ok, task=i, H=h, split=split)
    sr = metrics.success_rate(rows)
    assert sr["sr"] == pytest.approx(0.5) and sr["n"] == 6
    assert sr["ci"] == pytest.approx(list(wilson_interval(3, 6)))
    buckets = metrics.sr_by_bucket(rows)
    assert [buckets[b]["n"] for b in ("H<=3", "4-6", "7-10", ">10")] == [2, 1, 0, 3]
    assert buckets["H<=3"]["sr"] == 0.5 and buckets["4-6"]["sr"] == 1.0
    assert buckets["7-10"]["sr"] is None and buckets[">10"]["sr"] == pytest.approx(1 / 3)
    assert metrics.ood_gap(rows) == pytest.approx(2 / 3 - 1 / 3)


# --- hallucination ------------------------------------------------------------------------------

def test_hsr_excludes_no_atom_episode_and_ci():
    rows = (episode([atoms(2, 0), atoms(2, 0)], task=0)         # HSR_e = 0
            + episode([atoms(4, 1), atoms(0, 0), atoms(2, 2)], task=1)  # 3/6 = 0.5
            + episode([atoms(1, 1)], task=2)                     # 1.0
            + episode([{}, {}], task=3))                         # no atoms: excluded
    h = metrics.hsr(rows)
    assert h["n"] == 3 and h["excluded"] == 1
    assert h["hsr"] == pytest.approx(0.5)
    assert h["sd"] == pytest.approx(0.5)                         # sd of (0, 0.5, 1), ddof = 1
    half = 1.96 * 0.5 / math.sqrt(3)                            # 0.566: clipped to [0, 1]
    assert h["ci"] == pytest.approx([max(0.0, 0.5 - half), min(1.0, 0.5 + half)]) == [0.0, 1.0]
    narrow = metrics.hsr(episode([atoms(4, 4)], task=0) + episode([atoms(4, 3)], task=1)
                   + episode([atoms(4, 4)], task=2))            # 1, 0.75, 1: sd 0.144
    assert narrow["ci"][1] == 1.0 and narrow["ci"][0] == pytest.approx(
        (2.75 / 3) - 1.96 * narrow["sd"] / math.sqrt(3))
    assert metrics.hsr_micro(rows) == pytest.approx(4 / 11)
    assert metrics.hsr(episode([atoms(2, 1)]))["ci"] is None           # n = 1: no CI


def test_hsr_draft_and_all():
    gated = row(draft_atoms=[[1, "completed"], [2, "active"]], halluc_draft=[1, 1],
                committed_atoms=[[1, "active"]], halluc_committed=[0], corrected=True, calls=2,
                cons=0.0, cons_after=1.0)
    rows = episode([gated, atoms(2, 0)])
    assert metrics.hsr(rows)["hsr"] == pytest.approx(0 / 3)
    assert metrics.hsr_draft(rows) == pytest.approx(2 / 4)
    assert metrics.hsr_all(rows) == pytest.approx(2 / 5)               # draft + revision + step 2
    with_calls = [dict(rows[0], halluc_calls=[[1, 1], [0]]), dict(rows[1], halluc_calls=[[0, 0]])]
    assert metrics.hsr_all(with_calls) == pytest.approx(2 / 5)


def test_hallucinated_atom_via_support():
    support = np.zeros((4, 5), bool)
    support[0, [1, 3]] = True      # execute of a fragile node: ACTIVE or FAILED
    support[1, 0] = True           # node 1 cannot change (PENDING)
    support[2, [0, 2]] = True      # node 2 may become COMPLETED
    before = np.array([0, 0, 0, 0])
    claimed = [[0, "active"], [0, "failed"], [0, "completed"], [1, "unknown"], [2, "unknown"],
               [1, 2]]
    assert metrics.hallucinated(claimed, support, before) == [0, 0, 1, 1, 0, 1]


def test_propagation_depth_counts_live_steps():
    steps = [
        # t0: false completion of node 3 (hallucinated) and a true atom on node 1.
        dict(committed_atoms=[[3, "completed"], [1, "completed"]], halluc_committed=[1, 0],
             live_atoms=[], live_false_atoms=0),
        # t1: node 3 still live; a new false atom on node 5 that is never live afterwards.
        dict(committed_atoms=[[5, "active"]], halluc_committed=[1],
             live_atoms=[[3, "completed"]], live_false_atoms=1),
        # t2: node 3 still live; a false atom on node 7.
        dict(committed_atoms=[[7, "completed"]], halluc_committed=[1],
             live_atoms=[[3, "completed"]], live_false_atoms=1),
        # t3: node 3 recovered; node 7 live.
        dict(live_atoms=[[7, "completed"]], live_false_atoms=1),
        # t4: node 7 still live at the last step (counted until episode end).
        dict(live_atoms=[[7, "completed"]], live_false_atoms=1),
    ]
    pd = metrics.propagation_depth(episode(steps))
    assert pd == {"pd": pytest.approx((2 + 0 + 2) / 3), "atoms": 3}
    # A later claim on the same node takes over: the first atom stops after that step.
    over = [dict(committed_atoms=[[3, "completed"]], halluc_committed=[1], live_atoms=[]),
            dict(committed_atoms=[[3, "completed"]], halluc_committed=[1],
                 live_atoms=[[3, "completed"]], live_false_atoms=1),
            dict(live_atoms=[[3, "completed"]], live_false_atoms=1)]
    assert metrics.propagation_depth(episode(over)) == {"pd": pytest.approx((1 + 1) / 2), "atoms": 2}
    # No belief (parametric planners): PD undefined.
    assert metrics.propagation_depth(episode([atoms(1, 1), {}]))["pd"] is None


def test_ees_slope_on_geometric_error_mass():
    # 100 episodes of 8 steps; at step k the total error count is 2^k - 1, so m_k + 0.01 = 0.01·2^k
    # and the slope of ln(m_k + 0.01) on k is exactly ln 2.
    rows = []
    for e in range(100):
        steps = []
        for k in range(1, 9):
            total = 2 ** k - 1
            count = total // 100 + (1 if e < total % 100 else 0)
            halluc = min(count, 1)
            steps.append(dict(atoms(halluc, halluc), live_false_atoms=count - halluc))
        rows += episode(steps, task=e)
    m = metrics.error_mass(rows)
    assert m == pytest.approx([0.01 * (2 ** k - 1) for k in range(1, 9)])
    assert metrics.ees(rows) == pytest.approx(math.log(2))


def test_iar_counts_parse_fail_noops():
    noop = dict(action=None, valid=False, parse_fail=True)
    rows = episode([{}, noop, dict(valid=False), {}], task=0) + episode([noop, {}], task=1)
    assert metrics.invalid_action_rate(rows) == pytest.approx(3 / 6)
    rates = metrics.call_rates(rows)
    assert rates["parse_fail_rate"] == pytest.approx(2 / 6)


def test_rwf_value_and_range():
    rows = (episode([dict(rho_star=1.0, bad_outcome=True)], success=True, task=0)
            + episode([dict(rho_star=0.6, bad_outcome=True), dict(rho_star=1.0)], task=1)
            + episode([dict(rho_star=0.9), {}], task=2))
    rwf = metrics.risk_weighted_failure(rows)
    assert rwf == pytest.approx(0.2)
    assert 0.0 <= rwf <= 1 - metrics.success_rate(rows)["sr"]


def test_tokens_calls_and_cost():
    rows = (episode([dict(tok_in=1000, tok_out=100, calls=2, corrected=True),
                     dict(tok_in=500, tok_out=50, risk_fired=True)], success=True, task=0)
            + episode([dict(tok_in=300, tok_out=30)], task=1))
    assert metrics.tokens_per_task(rows) == pytest.approx((1650 + 330) / 2)
    assert metrics.tokens_per_success(rows) == pytest.approx(1980)
    rates = metrics.call_rates(rows)
    assert rates["calls_step"] == pytest.approx(4 / 3)
    assert rates["corr_rate"] == pytest.approx(1 / 3) and rates["risk_rate"] == pytest.approx(1 / 3)
    usd = [(1500 * 0.15 + 150 * 0.60) * 1e-6, (300 * 0.15 + 30 * 0.60) * 1e-6]
    assert metrics.cost_per_1k(rows) == pytest.approx(1000 * sum(usd) / 2)
    assert metrics.tokens_per_success(episode([{}])) is None


# --- per-step error proxies ---------------------------------------------------------------------

def test_p_err_and_the_30_episode_flag():
    rows = []
    for e in range(40):
        first = atoms(1, 1) if e < 10 else {}                 # 10/40 errors at k = 1
        second = dict(valid=False) if 10 <= e < 16 else {}    # 6/25 at k = 2, other episodes
        steps = [first] + ([second] if e < 25 else [])
        rows += episode(steps, task=e)
    pe = metrics.p_err(rows, k_max=3)
    assert [p["n"] for p in pe] == [40, 25, 0]
    assert pe[0]["p"] == pytest.approx(0.25) and pe[1]["p"] == pytest.approx(0.24)
    assert pe[2]["p"] is None
    assert [p["flagged"] for p in pe] == [False, True, True]
    assert metrics.expected_errors(pe) is None and metrics.expected_errors(pe[:2]) == pytest.approx(0.49)
    assert metrics.indep_bound(pe[:2]) == pytest.approx(1 - 0.75 * 0.76)
    p_any = metrics.p_any(rows, h_max=2)
    assert p_any[0] == {"H": 1, "p": 0.25, "n": 40}
    assert p_any[1]["n"] == 25 and p_any[1]["p"] == pytest.approx(16 / 25)


@pytest.mark.parametrize("method", ["Agent-Replan", "Hybrid-Full", "GILP"])
def test_table6_pairs_from_linear_profile(method):
    paper = paper_numbers.TABLE6[method]
    p10, ee, ib = paper["p_err10"].value, paper["expected_errors"].value, paper["indep_bound"].value
    # The implied p_err(1) (4 decimals) reproduces both published columns to all 3 decimals.
    profile = paper_numbers.linear_p_err(paper["p_err1"].value, p10)
    assert round(metrics.expected_errors(profile), 3) == ee
    assert round(metrics.indep_bound(profile), 3) == ib
    # Rounded to 3 decimals (0.237 / 0.149 / 0.097) it is within 0.0025 and 0.001.
    rounded = paper_numbers.linear_p_err(round(paper["p_err1"].value, 3), p10)
    assert metrics.expected_errors(rounded) == pytest.approx(ee, abs=0.0025)
    assert metrics.indep_bound(rounded) == pytest.approx(ib, abs=0.001)


def test_alpha_beta_and_prop1():
    caught_fixed = row(draft_atoms=[[1, "completed"]], halluc_draft=[1], cons=0.0, corrected=True,
                       committed_atoms=[[1, "active"]], halluc_committed=[0], calls=2)
    caught_kept = dict(caught_fixed, committed_atoms=[[1, "completed"]], halluc_committed=[1])
    missed = row(draft_atoms=[[2, "completed"]], halluc_draft=[1], cons=0.5,
                 committed_atoms=[[2, "completed"]], halluc_committed=[1])
    clean = row(draft_atoms=[[3, "active"]], halluc_draft=[0], cons=0.1, corrected=True, calls=2,
                committed_atoms=[[3, "active"]], halluc_committed=[0])
    rows = (episode([caught_fixed, caught_kept], task=0) + episode([missed, caught_fixed], task=1)
            + episode([clean], task=2))
    ab = metrics.gate_alpha_beta(rows)
    assert ab["alpha"] == pytest.approx(3 / 4) and ab["n_alpha"] == 4
    assert ab["beta"] == pytest.approx(2 / 3) and ab["n_beta"] == 3
    assert ab["alpha_k"] == {1: pytest.approx(0.5), 2: pytest.approx(1.0)}
    assert ab["beta_k"] == {1: pytest.approx(1.0), 2: pytest.approx(0.5)}
    s = metrics.summarise_method(rows)
    assert s["prop1_hsr"] == pytest.approx((1 - 0.75 * 2 / 3) * s["hsr_draft"])


# --- summaries ----------------------------------------------------------------------------------

def _log() -> list[dict]:
    rows = []
    for method, ok_every in (("Agent-Replan", 2), ("GILP", 1)):
        for i in range(8):
            bench = ("taskgraph", "toolchain")[i % 2]
            h, split = (3, "id") if i < 4 else (12, "ood")
            ok = i % ok_every == 0 and not (method == "Agent-Replan" and i >= 6)
            rows += episode([atoms(2, int(method == "Agent-Replan")), atoms(1, 0)], success=ok,
                            method=method, task=i, bench=bench, H=h, split=split)
    return rows


def test_summarise_and_breakdowns():
    rows = _log()
    summary = metrics.summarise(rows)
    assert list(summary) == ["Agent-Replan", "GILP"]
    agent, gilp = summary["Agent-Replan"], summary["GILP"]
    assert agent["episodes"] == 8 and agent["steps"] == 16
    assert agent["sr"] == pytest.approx(3 / 8) and gilp["sr"] == 1.0
    assert agent["hsr"] == pytest.approx(1 / 3) and gilp["hsr"] == 0.0
    assert agent["sr_h10"] == pytest.approx(1 / 4) and agent["ood_gap"] == pytest.approx(0.25)
    assert agent["hsr_excluded"] == 0 and agent["pd"] is None and agent["pd_atoms"] == 0
    buckets = metrics.by_bucket(rows)
    assert list(buckets["Agent-Replan"]) == ["H<=3", ">10"]
    assert buckets["Agent-Replan"][">10"]["sr"] == pytest.approx(1 / 4)
    benches = metrics.by_benchmark(rows)
    assert list(benches["GILP"]) == ["taskgraph", "toolchain"]
    assert benches["Agent-Replan"]["taskgraph"]["episodes"] == 4
    splits = metrics.by_split(rows)
    assert splits["Agent-Replan"]["id"]["sr"] == 0.5 and splits["Agent-Replan"]["ood"]["sr"] == 0.25
    json.dumps(summary)  # JSON-serialisable as it is


# --- event rows ---------------------------------------------------------------------------------

@pytest.mark.parametrize("change, message", [
    ({"valid": None}, "field 'valid' must be true/false"),
    ({"bench": "chess"}, "unknown bench 'chess'"),
    ({"split": "val"}, "split must be one of"),
    ({"committed_atoms": [[1, "done"]], "halluc_committed": [0]}, "malformed atom [1, 'done']"),
    ({"committed_atoms": [[1, "active"]], "halluc_committed": []}, "halluc_committed has 0 flags"),
    ({"halluc_draft": [2]}, "must be a list of 0/1"),
    ({"action": None}, "no-op (action null) must have valid = false"),
    ({"success": True}, "success = true requires done = true"),
    ({"cons": 1.5}, "field 'cons' must be a number in [0, 1]"),
    ({"tok_in": -1}, "field 'tok_in' must be a non-negative integer"),
    ({"live_atoms": [[1, "completed"]], "live_false_atoms": 2}, "live_false_atoms = 2"),
    ({"halluc_calls": [[0], [1]]}, "halluc_calls has 2 lists for 1 calls"),
])
def test_validate_row_rejects_malformed(change, message):
    bad = dict(row(), **change)
    with pytest.raises(events.EventError, match=re.escape(message)):
        events.validate_row(bad)


def test_validate_row_names_missing_fields_and_row():
    bad = row(task=7, seed=3)
    del bad["rho_star"], bad["tok_out"]
    with pytest.raises(events.EventError, match=r"task=7, seed=3, t=0\): missing field\(s\) tok_out, "
                                           r"rho_star"):
        events.validate_row(bad)
    with pytest.raises(events.EventError, match="must be a JSON object"):
        events.validate_row([1, 2])


def test_group_episodes_rejects_gaps_and_incomplete():
    good = episode([{}, {}, {}])
    assert len(events.group_episodes(reversed(good))) == 1      # order of rows does not matter
    with pytest.raises(events.EventError, match=r"t = 0..1 once each, got \[0, 2\]"):
        events.group_episodes([good[0], good[2]])
    with pytest.raises(events.EventError, match="is not done"):
        events.group_episodes(good[:2])
    assert len(events.group_episodes(good[:2], allow_partial=True)[0]) == 2
    with pytest.raises(events.EventError, match="a row before the last has done"):
        events.group_episodes([dict(good[0], done=True), good[1], good[2]])


def test_jsonl_roundtrip_is_byte_stable(tmp_path):
    rows = _log()
    path = events.write_events(tmp_path, rows)
    assert path.name == "events.jsonl"
    first = path.read_bytes()
    assert events.read_events(tmp_path) == rows
    events.write_events(path, list(reversed(events.read_events(path)))[::-1])
    assert path.read_bytes() == first
    with path.open("a") as f:
        f.write('{"method": "GILP", "ben')                # a torn line is skipped
    assert len(events.read_events(path)) == len(rows)
    with pytest.raises(events.EventError):
        events.write_events(tmp_path / "x.jsonl", [dict(rows[0], valid="yes")])
    assert not (tmp_path / "x.jsonl").exists()
    assert events.atoms_from_codes([3, 4], [2, -1]) == [[3, "completed"], [4, "unknown"]]


# --- tables -------------------------------------------------------------------------------------

def test_tables_golden_markdown_and_csv(tmp_path):
    summary = metrics.summarise(_log())
    t1 = tables.table1(summary).markdown()
    assert ("| method | episodes | SR | SR 95% CI | paper | SR(H>10) | paper | IAR | paper | HSR | "
            "HSR 95% CI | paper | HSR excl. | HSR_draft | PD (steps) | paper | EES (/step) | RWF | "
            "Tok/Task | Tok/Succ | paper | calls/step |") in t1
    lo, hi = wilson_interval(3, 8)
    assert (f"| Agent-Replan | 8 | 0.375 | [{lo:.3f}, {hi:.3f}] | 0.668 | 0.250 | 0.471 | 0.000 | "
            "0.169 | 0.333 | [0.333, 0.333] | 0.205 | 0 | 0.333 | — | 2.45 | -4.615 | 0.000 |") in t1
    assert "| 1.51 | 0.000 | 0.000 | 0.3k |" in t1                      # EES of a constant m_k
    assert "| 0.3k | 0.8k | 16.4k† | 1.00 |" in t1
    assert "| GILP | 8 | 1.000 | " in t1 and "| 0.3k | 0.3k | 15.0k | 1.00 |" in t1
    assert "† [rev]: secondary value" in t1

    t2 = tables.table2(summary).markdown()
    assert ("| method | SR H≤3 | paper | SR 4-6 | paper | SR 7-10 | paper | SR >10 | paper | "
            "HSR(H>10) | paper |") in t2
    assert ("| Agent-Replan | 0.500 (n=4) | 0.957 | — (n=0) | 0.899† | — (n=0) | 0.762† | "
            "0.250 (n=4) | 0.471 | 0.333 | 0.222† |") in t2

    t6 = tables.table6(summary).markdown()
    assert "| Agent-Replan | 1.000* | 0.000* | — | — |" in t6
    assert "| GILP | 0.000* | 0.000* | — |" in t6
    assert "| 0.164 | — | 1.303 | — | 0.753 | — | 0.83 |" in t6
    assert "| 0.393 | — | 3.148 | — | 0.978 |" in t6

    csv1 = tables.table1(summary).csv().splitlines()
    assert csv1[0].startswith("method,episodes,sr,sr_ci_lo,sr_ci_hi,paper_sr,sr_h10,")
    assert csv1[0].endswith(",paper_rev")
    assert csv1[1].startswith("Agent-Replan,8,0.375,") and csv1[1].endswith(",paper_tok_succ")
    csv2 = tables.table2(summary).csv().splitlines()
    assert csv2[0].startswith("method,sr_H<=3,sr_H<=3_n,paper_sr_H<=3,")
    assert csv2[1].startswith("Agent-Replan,0.5,4,0.957,,0,0.899,")

    t5 = tables.table5(summary).markdown()
    assert "| Agent-Replan (NoBackbone) | 0.375 | 0.668 | 0.333 | 0.205 |" in t5
    t5b = tables.table5b({0.25: summary["GILP"], 0.2: summary["Agent-Replan"]}).markdown()
    assert t5b.index("| 0.20 | 0.375 |") < t5b.index("| 0.25 | 1.000 |")

    t3 = tables.table3(summary, wall={"GILP": 1.5}).markdown()
    assert "| GILP | 0.3k | 0.3k | 15.0k | 1.00 | 1.30 | 0.000 | 0.220 | 0.000 | 0.080 | 1.50 |" in t3

    paths = tables.write_tables(summary, tmp_path, tau_sweep={0.3: summary["GILP"]})
    names = sorted(p.name for p in paths)
    assert names == sorted(f"table_{n}.{ext}" for n in ("1", "2", "3", "5", "5b", "6")
                           for ext in ("md", "csv"))
    assert (tmp_path / "table_1.md").read_text() == t1
