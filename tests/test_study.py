"""Studies (`bsjax paper`, `bsjax sweep`, `bsjax report`): definitions, TOML files, tables,
figures, resume and bad input."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import shutil
from pathlib import Path

import pytest

from bsjax import cli
from bsjax.battleship.harness import study as study_lib
from bsjax.battleship.harness.run_config import RunConfig
from bsjax.battleship.report import tables
from bsjax.core.errors import UsageError
from bsjax.core.files import read_jsonl

ROOT = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"
# Tiny but real: particle belief, few particles, two boards, one seed, no LLM.
SMALL = ["--boards", "B01,B17", "--seeds", "1", "--sampler", "particles", "--particles", "32",
         "--llm", "none"]


def _json_tail(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


# --- definitions --------------------------------------------------------------------------------

def test_paper_rows_follow_the_published_table():
    study = study_lib.paper_study(study_lib.paper_base())
    assert [r.id for r in study.rows] == ["B1", "B2", "B3", "B4", "B5", "B6", "B6-uniform",
                                          "bayes"]
    configs = {r.id: r.config(study.base) for r in study.rows}
    assert configs["B1"].agent == "greedy" and configs["B2"].agent == "wma"
    assert (configs["B3"].revision, configs["B4"].revision) == ("off", "on")
    assert (configs["B5"].tau, configs["B6"].tau) == (0.0, 1.0)
    # The null for B6: the same gate, every opening answered by a uniformly random legal reply,
    # whatever backend the base names.
    ollama = study_lib.paper_study(study_lib.paper_base(llm="ollama", model="gemma3:4b"))
    null = {r.id: r.config(ollama.base) for r in ollama.rows}["B6-uniform"]
    assert (null.agent, null.tau, null.llm, null.model) == ("mra-llm", 1.0, "uniform", None)
    assert all(c.sampler == "chain" and c.rng == "reference" and c.particles == 500
               for c in configs.values())
    grand = study_lib.paper_study(study_lib.paper_base("grand"))
    assert [r.id for r in grand.rows][:2] == ["random", "greedy"]
    assert grand.base.sampler == "importance" and grand.base.particles == 1000
    # Another sampler drops the reference streams (they exist for the chain only).
    assert study_lib.paper_base(sampler="particles").rng == "jax"


def test_llm_none_skips_the_l4_rows():
    study = study_lib.paper_study(study_lib.paper_base(llm="none"))
    # The uniform null needs no model: it stays.
    assert [r.id for r in study.active_rows()] == ["B1", "B2", "B3", "B4", "B6-uniform", "bayes"]


def test_experiment_files_match_the_built_in_studies():
    paper = study_lib.load_toml(ROOT / "experiments" / "paper.toml")
    built_in = study_lib.paper_study(study_lib.paper_base())
    assert paper.base == built_in.base
    assert [r.config(paper.base) for r in paper.rows] == \
        [r.config(built_in.base) for r in built_in.rows]
    assert [r.needs_llm for r in paper.rows] == [r.needs_llm for r in built_in.rows]
    grand = study_lib.load_toml(ROOT / "experiments" / "grand.toml")
    assert grand.base == study_lib.paper_base("grand")
    assert [r.id for r in grand.rows] == [r.id for r in study_lib.GRAND_ROWS]
    particles = study_lib.load_toml(ROOT / "experiments" / "paper-particles.toml")
    assert particles.base.sampler == "particles" and len(particles.rows) == 8
    sweep = study_lib.load_toml(ROOT / "experiments" / "tau-sweep.toml", {"seeds": 1})
    assert sweep.kind == "sweep" and sweep.param == "tau" and sweep.base.seeds == 1
    taus = [dict(r.overrides)["tau"] for r in sweep.rows]
    assert taus == pytest.approx([i / 20 for i in range(21)]) and taus[-1] == 1.0


@pytest.mark.parametrize("param, spec, expected", [
    ("tau", "0:1:0.25", [0.0, 0.25, 0.5, 0.75, 1.0]),
    ("tau", "0.1,0.72", [0.1, 0.72]),
    ("particles", "100:300:100", [100, 200, 300]),
    ("revision", "off,on", ["off", "on"]),
    ("tau", [0.0, 1.0], [0.0, 1.0]),
])
def test_sweep_values(param, spec, expected):
    assert study_lib.parse_values(param, spec) == expected


@pytest.mark.parametrize("param, spec, message", [
    ("devices", "1,2", "cannot sweep"),
    ("params", "1,2", "cannot sweep"),
    ("tau", "1:0:0.1", "lo <= hi"),
    ("tau", "0:1:0", "step > 0"),
    ("tau", "0:1", "lo:hi:step"),
    ("revision", "a:b:c", "not numeric"),
    ("tau", "0.1,0.1", "repeated"),
    ("particles", "ten", "not a float"),
])
def test_bad_sweep_values(param, spec, message):
    with pytest.raises(UsageError, match=message):
        study_lib.parse_values(param, spec)


@pytest.mark.parametrize("agent, param", [("greedy", "colour"), ("greedy", "gamma"),
                                          ("bayes", "gama")])
def test_a_sweep_of_a_name_that_is_neither_a_setting_nor_a_param_is_refused(agent, param):
    with pytest.raises(UsageError, match=f"cannot sweep '{param}'.*its params"):
        study_lib.sweep_study(RunConfig(agent=agent), param, "0.1,0.2")
    if agent == "bayes":  # the agent's own param passes
        study_lib.sweep_study(RunConfig(agent=agent), "gamma", "0.1,0.2")


@pytest.mark.parametrize("text, message", [
    ("[experiment\nkind = 'paper'", "not valid TOML"),
    ("[base]\ncolour = 'red'", "unknown setting"),
    ("[experiment]\nkind = 'tournament'", "unknown experiment kind"),
    ("[experiment]\nkind = 'sweep'\n[sweep]\nparam = 'tau'", r"needs \[sweep\] param and values"),
    ("[[rows]]\nagent = 'greedy'", "has no id"),
    ("[[rows]]\nid = 'a'\nagent = 'greedy'\n[[rows]]\nid = 'a'\nagent = 'wma'", "repeated row"),
    ("[[rows]]\nid = 'a'\nagent = 'greedy'\nshots = 3", "unknown setting"),
    ("[experiment]\nbaseline = 'b'\n[[rows]]\nid = 'a'\nagent = 'greedy'",
     "unknown baseline row 'b'"),
])
def test_bad_experiment_files(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        study_lib.load_toml(path)


def test_a_bad_row_is_named_before_anything_runs(tmp_path):
    path = tmp_path / "rows.toml"
    path.write_text("[[rows]]\nid = 'ok'\nagent = 'greedy'\n[[rows]]\nid = 'broken'\n"
                    "agent = 'admiral'\n")
    study = study_lib.load_toml(path)
    with pytest.raises(UsageError, match="row broken: unknown agent"):
        study_lib.run(study, tmp_path / "out")
    assert not (tmp_path / "out").exists()


# --- tables from files --------------------------------------------------------------------------

def _fake_game(board, seed, f1, won, questions=0, llm_calls=0, turns=40):
    return {"board": board, "seed": seed, "f1": f1, "won": won, "shots": 30, "hits": 10,
            "questions": questions, "turns": turns, "llm_calls": llm_calls, "fallbacks": 0,
            "wall_seconds": 0.5}


def _fake_study(root: Path, games: dict[str, list[dict]], protocol="paper", total=4,
                baseline=None) -> None:
    base = dataclasses.asdict(study_lib.paper_base(protocol, llm="none"))
    study = dataclasses.replace(study_lib.paper_study(RunConfig(**base)), baseline=baseline)
    root.mkdir()
    (root / "study.json").write_text(json.dumps(study.to_json()))
    for row_id, rows in games.items():
        (root / "runs" / row_id).mkdir(parents=True)
        (root / "runs" / row_id / "run.json").write_text(json.dumps({"games": total}))
        (root / "runs" / row_id / "games.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows))


def test_table_values_and_board_deltas_from_files(tmp_path):
    off = [_fake_game("B01", 0, 0.5, True), _fake_game("B01", 1, 0.3, False),
           _fake_game("B02", 0, 0.6, True), _fake_game("B02", 1, 0.6, True)]
    on = [_fake_game("B01", 0, 0.7, True, questions=8), _fake_game("B01", 1, 0.5, True),
          _fake_game("B02", 0, 0.4, False, llm_calls=2), _fake_game("B02", 1, 0.4, False)]
    _fake_study(tmp_path / "s", {"B3": off, "B4": on, "B1": off[:2]})
    data = tables.load(tmp_path / "s")
    rows = {r["id"]: r for r in tables.table(data)}
    b4 = rows["B4"]
    assert (b4["wins"], b4["games"], b4["win_rate"]) == (2, 4, 0.5)
    assert b4["avg_f1"] == pytest.approx(0.5) and b4["avg_questions"] == 2.0
    assert b4["llm_rate"] == pytest.approx(2 / 160)
    assert b4["wall_seconds"] == pytest.approx(2.0)
    assert (b4["ci_low"], b4["ci_high"]) == pytest.approx((0.1500, 0.8500), abs=1e-4)
    # published B4: 30/54 = 0.556 lies in [0.15, 0.85]
    assert b4["published_f1"] == 0.551 and b4["published_in_ci"] is True
    assert rows["B1"]["status"] == "partial 2/4"
    assert rows["B2"]["status"] == "not run" and rows["B2"]["games"] is None
    assert rows["B6"]["status"] == "skipped (--llm none)"
    assert tables.board_delta_f1(data) == pytest.approx({"B01": 0.2, "B02": -0.2})
    text = tables.markdown(data, list(rows.values()))
    assert "| B4 | L3 | MRA, revision on | 1.2% | 0.5000 | 59.3% | 2/4 | 50.0% | [15.0, 85.0] " \
        "| 2.0 |" in text                                  # 0.5 of the paper's ceiling, 0.843
    assert b4["ceiling_share"] == pytest.approx(0.5 / 0.8430, abs=1e-4)
    assert "skipped (--llm none)" in text and "partial 2/4" in text
    csv_lines = tables.to_csv(data, list(rows.values())).splitlines()
    assert csv_lines[0].startswith("id,layer,label,agent,status,llm_rate,avg_f1,wins,games")
    assert len(csv_lines) == 9


# Rows B3 (revision off) and B4 (revision on) of the same four games, and B1: two of those games
# in another order and a game B3 never played.
OFF = [_fake_game("B01", 0, 0.5, True), _fake_game("B01", 1, 0.25, False),
       _fake_game("B02", 0, 0.75, True), _fake_game("B02", 1, 0.5, True)]
ON = [_fake_game("B01", 0, 0.75, True), _fake_game("B01", 1, 0.5, True),
      _fake_game("B02", 0, 0.5, False), _fake_game("B02", 1, 0.25, False)]
B1 = [_fake_game("B01", 1, 0.75, True), _fake_game("B01", 0, 0.5, False),
      _fake_game("B09", 0, 1.0, True)]


def test_paired_comparisons_against_a_baseline_row(tmp_path):
    _fake_study(tmp_path / "s", {"B3": OFF, "B4": ON, "B1": B1})
    data = tables.load(tmp_path / "s")
    assert tables.pairing(data) == {}  # the study names no baseline: no paired columns
    plain = tables.table(data)
    assert "n_paired" not in plain[0]
    assert "Paired comparisons" not in tables.markdown(data, plain)

    rows = {r["id"]: r for r in tables.table(data, tables.pairing(data, "B3"))}
    b4 = rows["B4"]
    # ΔF1 per game: +0.25, +0.25, −0.25, −0.25. Completed only by B4: B01/1; only by B3: B02/0,
    # B02/1. McNemar: 2 · P[X <= 1], X ~ Bin(3, 1/2) = 2 · 4/8 -> capped at 1.
    assert (b4["paired_with"], b4["n_paired"]) == ("B3", 4)
    assert b4["delta_f1"] == 0.0 and b4["delta_f1_low"] < 0.0 < b4["delta_f1_high"]
    assert (b4["only_row_completed"], b4["only_baseline_completed"]) == (1, 2)
    assert (b4["delta_completion"], b4["mcnemar_p"]) == (-0.25, 1.0)
    # B1 is paired by board and seed, not by position; B09 (B3 never played it) is left out.
    b1 = rows["B1"]
    assert b1["n_paired"] == 2 and b1["delta_f1"] == pytest.approx(0.25)  # +0.5 and 0
    assert (b1["delta_f1_low"], b1["delta_f1_high"]) == pytest.approx((0.0, 0.5))
    assert (b1["only_row_completed"], b1["only_baseline_completed"]) == (1, 1)
    assert rows["B3"]["paired_with"] is None and rows["B3"]["n_paired"] is None
    assert rows["B2"]["n_paired"] is None  # not run

    text = tables.markdown(data, list(rows.values()))
    assert "## Paired comparisons" in text
    assert "| B4 | B3 | 4 | +0.0000 |" in text and "| 1 / 2 | -25.0% | 1 |" in text
    csv_lines = tables.to_csv(data, list(rows.values())).splitlines()
    assert csv_lines[0].endswith(",".join(tables.PAIRED_COLUMNS)) and len(csv_lines) == 9

    # Adjacent pairs: each row against the nearest row above it that has games.
    adjacent = tables.pairing(data, paired="adjacent")
    assert (adjacent["B2"], adjacent["B3"], adjacent["B4"], adjacent["B5"]) == \
        ("B1", "B1", "B3", "B4")
    assert "B1" not in adjacent
    with pytest.raises(tables.ReportError, match="unknown baseline row 'B7'"):
        tables.pairing(data, "B7")


def test_report_takes_the_studys_baseline_and_the_flags_override_it(tmp_path, capsys):
    _fake_study(tmp_path / "s", {"B3": OFF, "B4": ON, "B1": B1}, baseline="B3")
    assert cli.main(["report", str(tmp_path / "s"), "--json"]) == 0
    rows = {r["id"]: r for r in _json_tail(capsys)["rows"]}
    assert rows["B4"]["paired_with"] == "B3" and rows["B4"]["n_paired"] == 4
    assert "n_paired" in (tmp_path / "s" / "table.csv").read_text().splitlines()[0]
    assert cli.main(["report", str(tmp_path / "s"), "--baseline", "B4", "--json"]) == 0
    rows = {r["id"]: r for r in _json_tail(capsys)["rows"]}
    assert rows["B3"]["paired_with"] == "B4" and rows["B3"]["delta_completion"] == 0.25
    assert cli.main(["report", str(tmp_path / "s"), "--paired", "none", "--json"]) == 0
    assert "n_paired" not in _json_tail(capsys)["rows"][0]
    assert "Paired comparisons" not in (tmp_path / "s" / "table.md").read_text()


def test_a_studys_baseline_from_its_file_and_into_study_json(tmp_path):
    path = tmp_path / "rows.toml"
    path.write_text("[experiment]\nbaseline = 'a'\n[[rows]]\nid = 'a'\nagent = 'random'\n"
                    "[[rows]]\nid = 'b'\nagent = 'greedy'\n")
    study = study_lib.load_toml(path)
    assert study.baseline == "a" and study.to_json()["baseline"] == "a"
    assert study_lib.paper_study(study_lib.paper_base()).baseline is None
    with pytest.raises(UsageError, match="unknown baseline row 'c'"):
        study_lib.validate(dataclasses.replace(study, baseline="c"))
    # A resumed study may change its baseline (it only shapes the report): study.json follows.
    study_json = tmp_path / "study.json"
    study_lib._write_study_json(study, study_json)
    created = json.loads(study_json.read_text())["created"]
    study_lib._write_study_json(dataclasses.replace(study, baseline="b"), study_json)
    assert json.loads(study_json.read_text())["baseline"] == "b"
    assert json.loads(study_json.read_text())["created"] == created


def test_head_to_head_matrix_is_complementary(tmp_path):
    games = {"random": [_fake_game("B01", s, 0.3 + 0.01 * s, False) for s in range(3)],
             "greedy": [_fake_game("B01", s, 0.6, True) for s in range(3)],
             "B2": [_fake_game("B01", s, [0.3, 0.6, 0.8][s], s > 0) for s in range(3)]}
    _fake_study(tmp_path / "g", games, protocol="grand", total=3)
    data = tables.load(tmp_path / "g")
    rows = {r["id"]: r for r in tables.table(data)}
    assert rows["greedy"]["h2h_vs_random"] == 1.0
    # B2 over greedy: 0.3 loses thrice, 0.6 ties thrice, 0.8 wins thrice -> 4.5 / 9
    assert rows["B2"]["h2h_vs_greedy"] == pytest.approx(0.5)
    assert rows["random"]["h2h_vs_random"] is None
    ids, matrix = tables.h2h_matrix(data)
    for i in range(len(ids)):
        for j in range(len(ids)):
            if i != j:
                assert matrix[i][j] + matrix[j][i] == pytest.approx(1.0)
            else:
                assert math.isnan(matrix[i][j])
    written = tables.write(tmp_path / "g")
    assert Path(written["files"]["h2h_png"]).read_bytes().startswith(PNG)
    assert (tmp_path / "g" / "h2h.csv").read_text().startswith("row_over_column,")


def test_report_of_a_directory_that_is_no_run(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "neither a study" in capsys.readouterr().err


# --- the commands, end to end -------------------------------------------------------------------

@pytest.fixture(scope="module")
def paper_run(tmp_path_factory):
    """One small `bsjax paper` run shared by the tests below (each copies it before changing
    it). Returns (directory, its --json result)."""
    out = tmp_path_factory.mktemp("paper") / "paper"
    code, stdout = _main_stdout(["paper", *SMALL, "--out", str(out), "--json"])
    assert code == 0
    return out, json.loads(stdout.strip().splitlines()[-1])


def _main_stdout(argv) -> tuple[int, str]:
    import contextlib
    import io
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = cli.main(argv)
    return code, buffer.getvalue()


def test_paper_command_writes_the_table_and_figures(paper_run, tmp_path, capsys):
    shutil.copytree(paper_run[0], tmp_path / "paper")
    out, result = tmp_path / "paper", paper_run[1]
    rows = {r["id"]: r for r in result["rows"]}
    assert rows["B6"]["status"] == "skipped (--llm none)"
    # The uniform null needs no model: every gate opening answered by a legal random revision.
    null = json.loads((out / "runs" / "B6-uniform" / "summary.json").read_text())
    assert null["llm"] == "uniform" and null["llm_calls"] > 0 and null["fallbacks"] == 0
    assert set(null["llm_choices"]) <= {"coarse_roi_collapse", "late_diffuse_reprobe",
                                        "cluster_closeout_bias"}
    for row_id in ("B1", "B2", "B3", "B4", "B6-uniform", "bayes"):
        assert rows[row_id]["games"] == 2 and 0.0 <= rows[row_id]["avg_f1"] <= 1.0
    assert rows["B1"]["avg_questions"] == 0.0 and rows["B2"]["avg_questions"] > 0
    for name in ("win_rate.png", "board_delta_f1.png"):
        assert (out / name).read_bytes().startswith(PNG)
    table_md = (out / "table.md").read_text()
    assert "| B1 | L1 |" in table_md and "skipped (--llm none)" in table_md

    # The report is rebuilt from the files alone, identically.
    table_csv = (out / "table.csv").read_text()
    for name in ("table.md", "table.csv", "win_rate.png", "board_delta_f1.png"):
        (out / name).unlink()
    assert cli.main(["report", str(out)]) == 0
    assert (out / "table.md").read_text() == table_md
    assert (out / "table.csv").read_text() == table_csv
    assert (out / "win_rate.png").exists() and (out / "board_delta_f1.png").exists()

    # Resume: nothing is replayed and the table is unchanged; without --resume: refused.
    games_b2 = (out / "runs" / "B2" / "games.jsonl").read_bytes()
    assert cli.main(["paper", *SMALL, "--out", str(out), "--resume"]) == 0
    assert (out / "runs" / "B2" / "games.jsonl").read_bytes() == games_b2
    assert (out / "table.md").read_text() == table_md
    capsys.readouterr()
    assert cli.main(["paper", *SMALL, "--out", str(out)]) == 2
    assert "already holds a study" in capsys.readouterr().err
    # A different configuration cannot resume into it.
    assert cli.main(["paper", *SMALL[:-2], "--llm", "local", "--out", str(out), "--resume"]) == 2


def test_report_of_a_played_study_against_a_baseline_row(paper_run, tmp_path, capsys):
    shutil.copytree(paper_run[0], tmp_path / "paper")
    out = tmp_path / "paper"
    table_md = (out / "table.md").read_text()
    assert cli.main(["report", str(out), "--baseline", "B1", "--json"]) == 0
    rows = {r["id"]: r for r in _json_tail(capsys)["rows"]}
    for row_id in ("B2", "B3", "B4", "B6-uniform", "bayes"):
        row = rows[row_id]
        assert (row["paired_with"], row["n_paired"]) == ("B1", 2)
        assert row["delta_f1"] == pytest.approx(row["avg_f1"] - rows["B1"]["avg_f1"])
        assert row["delta_f1_low"] <= row["delta_f1"] <= row["delta_f1_high"]
        assert row["delta_completion"] == pytest.approx(row["win_rate"] - rows["B1"]["win_rate"])
        assert 0.0 < row["mcnemar_p"] <= 1.0
    assert rows["B1"]["n_paired"] is None and rows["B6"]["n_paired"] is None  # B6 skipped
    paired_md = (out / "table.md").read_text()
    assert paired_md.startswith(table_md.rstrip("\n")) and "| B2 | B1 | 2 |" in paired_md
    # The flag is not kept: a plain report is the table without paired columns again.
    assert cli.main(["report", str(out)]) == 0
    assert (out / "table.md").read_text() == table_md


def test_paper_resumes_an_interrupted_row(paper_run, tmp_path):
    shutil.copytree(paper_run[0], tmp_path / "paper")
    out = tmp_path / "paper"
    reference = (out / "table.csv").read_text()
    # Interrupt: B3 lost its last game (torn line), B4 and bayes never ran.
    games = out / "runs" / "B3" / "games.jsonl"
    first = games.read_text().splitlines()[0]
    games.write_text(first + "\n" + '{"board": "B1')
    for row_id in ("B4", "bayes"):
        shutil.rmtree(out / "runs" / row_id)
    assert cli.main(["paper", *SMALL, "--out", str(out), "--resume"]) == 0

    def results(csv_text):  # wall time differs between runs; results must not
        return [line.split(",")[:12] for line in csv_text.splitlines()]
    assert results((out / "table.csv").read_text()) == results(reference)
    assert len((out / "runs" / "B3" / "games.jsonl").read_text().splitlines()) == 2


@pytest.mark.parametrize("argv, message", [
    (["paper", "--protocol", "chess"], "unknown protocol"),
    (["paper", "--seeds", "-1"], "--seeds must be"),
    (["paper", "--particles", "0"], "--particles must be"),
    (["paper", "--sampler", "chain", "--protocol", "grand", "--rng", "reference"],
     "--rng reference"),
    (["paper", "--config", "missing.toml"], "not found"),
    (["paper", "--config", "experiments/tau-sweep.toml"], "defines a sweep"),
    (["sweep", "--agent", "greedy"], "--param NAME=VALUES is required"),
    (["sweep", "--param", "colour=1,2"], "cannot sweep"),
    (["sweep", "--param", "tau=0:2:0.5", "--agent", "mra-llm"], "row tau=1.5: --tau must lie"),
    (["sweep", "--config", "experiments/paper.toml"], "not a sweep"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out"
    assert cli.main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_sweep_command(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", "--agent", "mra-llm", "--param", "tau=0:1:1", "--boards",
            "B01,B04,B09,B17", "--seeds", "1", "--sampler", "particles", "--particles", "32",
            "--llm", "none", "--out", str(out), "--json"]
    assert cli.main(argv) == 0
    rows = _json_tail(capsys)["rows"]
    assert [r["tau"] for r in rows] == [0.0, 1.0]  # each value compiles its own agent
    assert all(r["games"] == 4 for r in rows)
    assert rows[0]["llm_rate"] == 0.0     # the gate never opens at tau = 0
    assert rows[1]["llm_rate"] > 0.0      # and it does at tau = 1 (every call a fallback)
    assert (out / "sweep.png").read_bytes().startswith(PNG)
    header = (out / "table.csv").read_text().splitlines()[0]
    assert header.startswith("tau,id,")


def test_a_row_named_against_another_is_paired_with_it(tmp_path):
    path = tmp_path / "rows.toml"
    path.write_text("[[rows]]\nid = 'wma'\nagent = 'wma'\n[[rows]]\nid = 'mra'\nagent = 'mra'\n"
                    "[[rows]]\nid = 'wma-on'\nagent = 'wma-reflective'\nagent_note = 1\n")
    with pytest.raises(UsageError, match="unknown setting"):
        study_lib.load_toml(path)
    path.write_text(path.read_text().replace("agent_note = 1", "against = 'wma'"))
    study = study_lib.load_toml(path)
    assert study.rows[2].against == "wma" and study.to_json()["rows"][2]["against"] == "wma"
    assert "against" not in study.to_json()["rows"][0]  # unchanged identity of older studies
    adjacent = tables.pairing({"rows": [dict(r, games=[1]) for r in study.to_json()["rows"]]},
                              paired="adjacent")
    assert adjacent == {"mra": "wma", "wma-on": "wma"}
    for bad in ("'nope'", "'wma-on'"):
        path.write_text(path.read_text().replace("against = 'wma'", f"against = {bad}"))
        with pytest.raises(UsageError, match="against must name another row"):
            study_lib.load_toml(path)
        path.write_text(path.read_text().replace(f"against = {bad}", "against = 'wma'"))


def test_a_study_kept_gzipped_reports_as_the_plain_one(tmp_path):
    _fake_study(tmp_path / "s", {"B3": OFF, "B4": ON}, baseline="B3")
    plain = tables.table(tables.load(tmp_path / "s"), {"B4": "B3"})
    for row_id in ("B3", "B4"):
        games = tmp_path / "s" / "runs" / row_id / "games.jsonl"
        (games.parent / "games.jsonl.gz").write_bytes(gzip.compress(games.read_bytes()))
        games.unlink()
    packed = tables.table(tables.load(tmp_path / "s"), {"B4": "B3"})
    assert packed == plain
    assert {r["id"]: r["n_paired"] for r in packed}["B4"] == 4
    # A run resumes from its plain file only: the gzipped copy is for reading.
    assert read_jsonl(tmp_path / "s" / "runs" / "B4" / "games.jsonl") == []
