"""The notebooks run top to bottom (small sizes, set through their parameter cells' environment
variables), so they never rot. A cell that raises fails the test; a probe cell appended to each
notebook sets `probe` from the kernel's variables and prints it as JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SMALL = {"BSJAX_NOTEBOOK_SEEDS": "1", "BSJAX_NOTEBOOK_PARTICLES": "64",
         "BSJAX_NOTEBOOK_BOARDS": "B01,B02,B03"}
N_GAMES = 3  # 3 boards x 1 seed
PROBE_MARK = "PROBE:"


def execute(name: str, probe: str, tmp_path: Path, monkeypatch) -> tuple[nbformat.NotebookNode, dict]:
    """Run notebook `name` with the small sizes, then `probe` (code that sets a dict `probe`);
    returns the executed notebook and the probe dict."""
    for key, value in SMALL.items():
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
        "files": sorted(path.name for path in run_dir.iterdir()), "games": games,
        "summary": summary, "in_tmp": str(run_dir).startswith({str(tmp_path)!r}),
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

    # The batch: a run directory in TMPDIR with one row per game and a consistent summary.
    assert got["in_tmp"]
    assert {"run.json", "games.jsonl", "events.jsonl", "summary.json"} <= set(got["files"])
    assert len(got["games"]) == got["summary"]["games"] == N_GAMES
    assert {row["board"] for row in got["games"]} == {"B01", "B02", "B03"}
    assert 0.0 <= got["summary"]["avg_f1"] <= 1.0
    assert "B01" in stdout(tagged(nb, "lens"))


def test_scoring_rules_notebook(tmp_path, monkeypatch):
    probe = f"""from bsjax.agents import AGENTS
probe = {{
    "registered": AGENTS.get("wma-split") is SplitWMA, "results": results,
    "f1_delta": f1_delta, "head_to_head": head_to_head,
    "in_tmp": str(out_root).startswith({str(tmp_path)!r}),
}}"""
    nb, got = execute("02_scoring_rules.ipynb", probe, tmp_path, monkeypatch)

    assert got["registered"] and got["in_tmp"]
    assert set(got["results"]) == {"wma", "wma-split"}
    for result in got["results"].values():
        low, high = result["win_ci"]
        assert result["games"] == N_GAMES
        assert 0.0 <= result["f1"][0] <= 1.0 and result["f1"][1] >= 0.0
        assert 0.0 <= low <= result["win_rate"] <= high <= 1.0
        assert 0.0 < result["questions"][0] <= 15.0
    assert -1.0 <= got["f1_delta"] <= 1.0 and 0.0 <= got["head_to_head"] <= 1.0

    # The printed comparison table: one row per agent, numbers in [0, 1] matching the kernel's.
    table = stdout(tagged(nb, "comparison"))
    row = re.compile(r"^(\S+) +(\d+) +([\d.]+) ± ([\d.]+) +([\d.]+)% \[([\d.]+)%, ([\d.]+)%\] +([\d.]+)$",
                     re.MULTILINE)
    printed = {m[0]: m[1:] for m in row.findall(table)}
    assert set(printed) == {"wma", "wma-split"}
    for agent, (games, f1, _half, rate, low, high, _questions) in printed.items():
        assert int(games) == N_GAMES
        assert 0.0 <= float(f1) <= 1.0
        assert abs(float(f1) - got["results"][agent]["f1"][0]) < 1e-3
        assert 0.0 <= float(low) / 100 <= float(rate) / 100 <= float(high) / 100 <= 1.0
    assert "paired F1 difference" in table

    assert has_image(tagged(nb, "bar-chart"))
    assert has_image(tagged(nb, "per-board"))
