"""The notebooks run top to bottom (small sizes, set through their parameter cells' environment
variables), so they never rot. A cell that raises fails the test; a probe cell appended to each
notebook sets `probe` from the kernel's variables and prints it as JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SMALL = {"BSJAX_NOTEBOOK_SEEDS": "1", "BSJAX_NOTEBOOK_PARTICLES": "64",
         "BSJAX_NOTEBOOK_BOARDS": "B01,B02,B03"}
N_GAMES = 3  # 3 boards x 1 seed
PROBE_MARK = "PROBE:"


def execute(name: str, probe: str, tmp_path: Path, monkeypatch,
            env: dict[str, str] | None = None) -> tuple[nbformat.NotebookNode, dict]:
    """Run notebook `name` with the small sizes (plus `env`), then `probe` (code that sets a dict
    `probe`); returns the executed notebook and the probe dict."""
    for key, value in {**SMALL, **(env or {})}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebooks' run directories land here
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert all(not cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"), \
        f"{name} is committed with outputs: clear them"
    nb.cells.append(nbformat.v4.new_code_cell(
        f"import json\n{probe}\nprint({PROBE_MARK!r}, json.dumps(probe))"))
    # Raises CellExecutionError on the first failing cell.
    NotebookClient(nb, kernel_name="python3", timeout=300,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            assert output.output_type != "error", f"{output.ename}: {output.evalue}"
    probe_text = stdout(nb.cells[-1])
    return nb, json.loads(probe_text.split(PROBE_MARK, 1)[1])


def tagged(nb, tag: str):
    cells = [cell for cell in nb.cells if tag in cell.metadata.get("tags", [])]
    assert len(cells) == 1, f"expected one cell tagged {tag!r}"
    return cells[0]


def stdout(cell) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def has_image(cell) -> bool:
    return any("image/png" in o.get("data", {}) for o in cell.outputs)


def test_quickstart_notebook(tmp_path, monkeypatch):
    probe = f"""probe = {{
        "turns": int(state.turn), "done": bool(state.done), "shots": int(state.shots),
        "questions": int(state.questions), "f1": f1, "p": [s["p"].tolist() for s in snapshots],
        "files": sorted(path.name for path in run_dir.iterdir()),
        "games": games.to_dict("records"), "res_shape": list(res.f1.shape),
        "summary": summary, "in_tmp": str(run_dir).startswith({str(tmp_path)!r}),
        "loaded": len(run.games), "events": len(run.events),
    }}"""
    nb, got = execute("01_quickstart.ipynb", probe, tmp_path, monkeypatch)

    # The game played turn by turn: finished, one log line and one belief snapshot per turn.
    assert got["done"] and 0.0 <= got["f1"] <= 1.0
    log = stdout(tagged(nb, "turn-log"))
    turn_lines = re.findall(r"^turn +\d+ +(shoot|ask) ", log, re.MULTILINE)
    assert len(turn_lines) == got["turns"]
    assert turn_lines.count("shoot") == got["shots"] and turn_lines.count("ask") == got["questions"]
    assert got["questions"] > 0  # WMA asks on B01
    assert len(got["p"]) == got["turns"] + 1
    heat = got["p"]
    assert all(0.0 <= v <= 1.0 + 1e-6 for snap in heat for v in snap)
    assert abs(sum(heat[0]) - 14.0) < 1e-3  # the prior places exactly the 14 ship cells
    assert has_image(tagged(nb, "belief-heatmaps"))

    # The batch in memory (params x games) and as a run directory in TMPDIR with one row per
    # game and a consistent summary, read back by bsjax.load_run.
    assert got["res_shape"] == [1, N_GAMES]
    assert got["loaded"] == N_GAMES and got["events"] > 0
    assert got["in_tmp"]
    assert {"run.json", "games.jsonl", "events.jsonl", "summary.json"} <= set(got["files"])
    assert len(got["games"]) == got["summary"]["games"] == N_GAMES
    assert {row["board"] for row in got["games"]} == {"B01", "B02", "B03"}
    assert 0.0 <= got["summary"]["avg_f1"] <= 1.0
    assert "B01" in stdout(tagged(nb, "lens"))


def test_scoring_rules_notebook(tmp_path, monkeypatch):
    probe = """import os
probe = {
    "games": {name: int(res.f1.size) for name, res in results.items()},
    "f1": {name: float(res.f1.mean()) for name, res in results.items()},
    "questions": {name: float(res.questions.mean()) for name, res in results.items()},
    "f1_delta": float(f1_delta), "head_to_head": float(head_to_head),
    "sweep_shape": list(sweep.f1.shape), "sweep_compiles": sweep.compile_seconds > 0,
    "sweep_mid_equals_single": bool((sweep.f1[1] == candidate.f1[0]).all()),
    "files": sorted(os.listdir(os.environ["TMPDIR"])),
}"""
    nb, got = execute("02_scoring_rules.ipynb", probe, tmp_path, monkeypatch)

    assert set(got["games"]) == {"wma", "wma-split"}
    assert set(got["games"].values()) == {N_GAMES}
    for name in got["f1"]:
        assert 0.0 < got["f1"][name] <= 1.0 and 0.0 < got["questions"][name] <= 15.0
    assert -1.0 <= got["f1_delta"] <= 1.0 and 0.0 <= got["head_to_head"] <= 1.0
    # The sweep: 3 weights x the same games; its 0.03 point is the single call's game for game.
    assert got["sweep_shape"] == [3, N_GAMES] and got["sweep_mid_equals_single"]
    assert got["files"] == []  # bsjax.play writes nothing

    # The printed comparison table: one row per rule, numbers matching the kernel's.
    table = stdout(tagged(nb, "comparison"))
    row = re.compile(r"^(\S+) +(\d+) +([\d.]+) ± ([\d.]+) +([\d.]+)% \[([\d.]+)%, ([\d.]+)%\] +([\d.]+)$",
                     re.MULTILINE)
    printed = {m[0]: m[1:] for m in row.findall(table)}
    assert set(printed) == {"wma", "wma-split"}
    for name, (games, f1, _half, rate, low, high, _questions) in printed.items():
        assert int(games) == N_GAMES
        assert abs(float(f1) - got["f1"][name]) < 1e-3
        assert 0.0 <= float(low) / 100 <= float(rate) / 100 <= float(high) / 100 <= 1.0
    assert "paired F1 difference" in table

    assert has_image(tagged(nb, "bar-chart"))
    assert has_image(tagged(nb, "per-board"))


# The GILP tour at small sizes: 4 val tasks x 1 seed, an MPNN trained on the smoke profile cut to
# 4 tasks per data split (every split the same size: one compiled rollout function).
GILP_SMALL = {"BSJAX_NOTEBOOK_GILP_TASKS": "4", "BSJAX_NOTEBOOK_GILP_PROFILE": "smoke",
              "BSJAX_NOTEBOOK_GILP_DATA_TASKS": "4"}
GILP_EPISODES = 4  # 4 tasks x 1 seed
MPNN_PARAMS = 74_632  # the README's parameter count


# The GILP notebook trains a backbone and compiles the simulator (about a minute even at its
# small sizes); the code it walks through is tested in tests/gilp/, so it runs under -m slow
# (docs/execute_notebooks.py executes it for the rendered copy in the docs).
@pytest.mark.slow
def test_gilp_notebook(tmp_path, monkeypatch):
    probe = f"""probe = {{
    "in_tmp": str(work).startswith({str(tmp_path)!r}), "bench": bench.name, "tasks": TASKS,
    "seeds": SEEDS, "horizon": int(task["horizon"]), "dstar": dstar0, "n_nodes": n_nodes,
    "budget": int(task["budget"]), "n_cand": n_cand, "n_valid": int(ok.sum()),
    "profile": profile.name, "params": summary["params"], "n_params": n_params,
    "metrics": summary["metrics"], "checkpoint": Path(summary["checkpoint"]).is_file(),
    "p_valid": ph1.p_valid[:n_cand].tolist(), "risk": ph1.risk[:n_cand].tolist(),
    "value": ph1.value[:n_cand].tolist(), "skeleton": len(skeleton_rows),
    "names": names, "results": results, "extension": extension, "same_gilp": same_gilp,
    "trace_lengths": trace_lengths, "event_rows": len(events.read_events(events_path)),
    "steps": {{m: s["steps"] for m, s in summaries.items()}},
}}"""
    nb, got = execute("03_gilp.ipynb", probe, tmp_path, monkeypatch, GILP_SMALL)
    assert got["in_tmp"] and got["bench"] == "taskgraph"
    assert (got["tasks"], got["seeds"]) == (4, 1)

    # §2: the task's oracle distance is its horizon, within the ID range and under the budget.
    lo, hi = 3, 10  # TaskGraph's ID horizons
    assert got["dstar"] == got["horizon"] and lo <= got["horizon"] <= hi
    assert got["budget"] == got["horizon"] + max(3, -(-got["horizon"] // 2))
    assert got["n_cand"] == 3 * got["n_nodes"] and 1 <= got["n_valid"] < got["n_cand"]
    graph = stdout(tagged(nb, "task"))
    assert len(re.findall(r"^node_\d+ +subtask ", graph, re.MULTILINE)) == got["n_nodes"]
    assert f"oracle distance d* = {got['dstar']}" in graph and "GOAL" in graph
    listing = stdout(tagged(nb, "candidates"))
    assert len(re.findall(r"^  valid +", listing, re.MULTILINE)) == got["n_valid"]

    # §3: a real MPNN trained and measured on held-out transitions.
    assert got["profile"] == "smoke-n4" and got["checkpoint"]
    assert got["params"] == got["n_params"] == MPNN_PARAMS
    for split in ("id", "ood", "pooled"):
        m = got["metrics"][split]
        for key in ("trans_acc", "valid_acc", "delta_acc_all"):
            assert 0.0 <= m[key] <= 1.0
        assert m["trans_acc"] <= m["valid_acc"]
    training = stdout(tagged(nb, "training"))
    assert f"{MPNN_PARAMS:,} parameters" in training
    pooled = re.search(r"^pooled +([\d.]+) ", training, re.MULTILINE)
    assert pooled and abs(float(pooled[1]) - got["metrics"]["pooled"]["trans_acc"]) < 1e-3

    # §4: Phase-1 table, one row per candidate, probabilities in [0, 1], the skeleton marked.
    assert all(0.0 <= p <= 1.0 for p in got["p_valid"] + got["risk"])
    table = stdout(tagged(nb, "phase1"))
    row = re.compile(r"^([VR ]) (\S+) +([\d.]+) +([-+][\d.]+) +([\d.]+)  .* \| +(True|False) ",
                     re.MULTILINE)
    printed = row.findall(table)
    assert sorted(r[1] for r in printed) == sorted(got["names"])
    assert sum(r[0] != " " for r in printed) == got["skeleton"]
    assert sum(r[0] == "V" for r in printed) == min(4, got["n_cand"])
    by_name = dict(zip(got["names"], zip(got["p_valid"], got["value"], got["risk"])))
    for _, name, p_valid, value, risk, _valid in printed:
        want = by_name[name]
        assert abs(float(p_valid) - want[0]) < 1e-3 and abs(float(value) - want[1]) < 1e-3
        assert abs(float(risk) - want[2]) < 1e-3
    values = [float(r[3]) for r in printed]
    assert values == sorted(values, reverse=True)  # sorted by predicted value

    # §5: three methods on the same 4 episodes, metrics consistent with the printed table.
    results = got["results"]
    assert list(results) == ["Agent-Replan", "Hybrid-Full", "GILP"]
    for _method, r in results.items():
        low, high = r["sr_ci"]
        assert r["episodes"] == GILP_EPISODES
        assert 0.0 <= low <= r["sr"] <= high <= 1.0
        assert r["hsr"] is None or 0.0 <= r["hsr"] <= 1.0
        assert 0.0 <= r["iar"] <= 1.0
    assert results["Agent-Replan"]["calls_step"] == results["Hybrid-Full"]["calls_step"] == 1.0
    assert results["GILP"]["calls_step"] >= 1.0  # a correction call on top of the draft
    assert got["event_rows"] == sum(got["steps"].values())
    assert got["trace_lengths"]["GILP"] <= got["budget"]
    summary_row = re.compile(r"^(\S+) +(\d+) +([\d.]+) \[([\d.]+), ([\d.]+)\] +(\S+) +(\S+) +([\d.]+)$",
                             re.MULTILINE)
    printed = {m[0]: m[1:] for m in summary_row.findall(stdout(tagged(nb, "comparison")))}
    assert set(printed) == set(results)
    for method, (episodes, sr, _low, _high, _hsr, _iar, calls) in printed.items():
        assert int(episodes) == GILP_EPISODES
        assert abs(float(sr) - results[method]["sr"]) < 1e-3
        assert abs(float(calls) - results[method]["calls_step"]) < 1e-3
    assert has_image(tagged(nb, "bar-chart"))
    trace = stdout(tagged(nb, "episode-trace"))
    assert len(re.findall(r"^  t=\d+ ", trace, re.MULTILINE)) == sum(got["trace_lengths"].values())

    # §6: the new methods ran from their configs; GILP's rows reproduce §5's exactly.
    extension = got["extension"]
    assert list(extension) == ["GILP", "GILP-rho0.4", "GILP[tau_low=0.5]"]
    assert got["same_gilp"] and extension["GILP"] == results["GILP"]
    for r in extension.values():
        assert r["episodes"] == GILP_EPISODES and 0.0 <= r["sr"] <= 1.0
    ext_table = stdout(tagged(nb, "extension"))
    assert set(m[0] for m in summary_row.findall(ext_table)) == set(extension)
    assert "identical to §5's: True" in ext_table


def test_how_close_to_optimal_notebook(tmp_path, monkeypatch):
    probe = """probe = {
        "ceiling": top.f1, "no_questions": no_questions.f1, "placements": top.count.placements,
        "captains": list(table.index), "f1": table["F1"].tolist(),
        "share": table["share of ceiling"].tolist(),
        "games": {name: int(res.f1.size) for name, res in results.items()},
        "paired": paired["n_paired"].tolist(),
        "ledger_games": {name: len(frame) for name, frame in ledgers.items()},
        "question_bits": bits["question bits"].tolist(),
        "questions": table["questions"].tolist(),
        "bigger": int(bigger.f1.size), "bigger_particles": int(BIGGER * PARTICLES),
        "calibration_shots": int(cal.shots.sum()),
        "shots": float(results["bayes"].shots.sum()),
    }"""
    nb, got = execute("04_how_close_to_optimal.ipynb", probe, tmp_path, monkeypatch)

    # The ceiling of the paper's protocol (docs/battleship/ceiling.md), with and without questions.
    assert got["placements"] == 21_354_072
    assert abs(got["ceiling"] - 0.843) < 5e-4 and abs(got["no_questions"] - 0.727) < 5e-4
    # Every layer played the same games; its share is its F1 over the ceiling.
    assert got["captains"] == ["greedy", "wma", "mra", "bayes", "lookahead"]
    assert set(got["games"].values()) == {N_GAMES} and got["bigger"] == N_GAMES
    assert got["paired"] == [N_GAMES] * 4
    for f1, share in zip(got["f1"], got["share"]):
        assert abs(share - f1 / got["ceiling"]) < 1e-9
    # The ledger: one row per game; question bits are the questions asked × C(0.1).
    assert set(got["ledger_games"].values()) == {N_GAMES}
    for q_bits, questions in zip(got["question_bits"], got["questions"]):
        assert abs(q_bits - 0.531 * questions) < 0.01 * max(questions, 1)
    assert got["question_bits"][0] == 0.0  # greedy never asks
    # Calibration counts every shot of bayes's once.
    assert got["calibration_shots"] == got["shots"]
    assert got["bigger_particles"] == 4 * 64
    for tag in ("layers-figure", "ledger", "calibration"):
        assert has_image(tagged(nb, tag))
