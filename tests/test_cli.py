"""End-to-end tests of the `bsjax` command line (play, boards, bench).

Kept small for a 2-core CPU: the random agent is fast; greedy runs use two boards, one seed and 50
particles. The commands run through `bsjax.cli.main` in this process (a subprocess costs seconds
of imports each), with their stdout, stderr and exit code; one run per command (play, a play
usage error, boards, bench) stays a real subprocess, for what the shell sees.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SUMMARY_KEYS = {"games", "avg_f1", "wins", "win_rate", "win_rate_ci", "avg_shots",
                "avg_questions", "llm_calls", "llm_rate", "fallbacks", "seconds",
                "compile_seconds", "games_per_second"}
ROW_KEYS = {"board", "seed", "game_seed", "agent", "shots", "hits", "questions", "f1", "won",
            "turns", "llm_calls", "fallbacks"}
BENCH_KEYS = {"agent", "sampler", "games", "particles", "device", "compile_seconds", "seconds",
              "games_per_second"}
RUN_FILES = {"run.json", "games.jsonl", "events.jsonl", "summary.json"}

GRAND_CELLS = [12, 12, 13, 13, 15, 10, 11, 10, 15, 9, 15, 9, 15, 15, 11, 18, 13, 11]

# A valid paper-fleet board (R=5, G=4, P=3, O=2) in the Grand text format.
PAPER_BOARD = """\
W,W,W,W,W,W,W,W
W,W,W,W,G,W,W,W
W,W,W,O,G,W,W,W
W,W,W,O,G,W,W,W
W,W,P,W,G,W,W,W
W,W,P,W,W,W,W,W
W,W,P,W,W,W,W,W
R,R,R,R,R,W,W,W
"""
PAPER_BOARD_SHIPS = {(1, 4), (2, 4), (3, 4), (4, 4), (2, 3), (3, 3), (4, 2), (5, 2), (6, 2),
                     (7, 0), (7, 1), (7, 2), (7, 3), (7, 4)}


def _rows(text: str) -> list[str]:
    return text.strip().splitlines()


def _replace_row(text: str, index: int, row: str) -> str:
    rows = _rows(text)
    rows[index] = row
    return "\n".join(rows) + "\n"


BAD_BOARDS = {
    # 7 rows
    "seven_rows": "\n".join(_rows(PAPER_BOARD)[:7]) + "\n",
    # 9 rows
    "nine_rows": PAPER_BOARD + "W,W,W,W,W,W,W,W\n",
    # a row of 7 cells
    "short_row": _replace_row(PAPER_BOARD, 0, "W,W,W,W,W,W,W"),
    # unknown symbol
    "symbol_x": _replace_row(PAPER_BOARD, 0, "W,W,X,W,W,W,W,W"),
    # the 4-ship (G) bent: three cells down column E, the fourth to the right
    "bent_ship": _replace_row(_replace_row(PAPER_BOARD, 4, "W,W,P,W,W,W,W,W"), 3,
                              "W,W,W,O,G,G,W,W"),
    # two separate pieces of the same colour (O in rows C and G, two apart)
    "same_colour_apart": _replace_row(_replace_row(PAPER_BOARD, 3, "W,W,W,W,G,W,W,W"), 6,
                                      "W,W,P,W,W,W,O,W"),
    # a ship with a gap in it
    "gap_in_ship": _replace_row(PAPER_BOARD, 7, "R,R,W,R,R,R,W,W"),
    # a diagonal ship
    "diagonal_ship": _replace_row(_replace_row(PAPER_BOARD, 2, "W,W,W,O,G,W,W,W"), 3,
                                  "W,W,O,W,G,W,W,W"),
    # no O ship at all
    "missing_ship": _replace_row(_replace_row(PAPER_BOARD, 2, "W,W,W,W,G,W,W,W"), 3,
                                 "W,W,W,W,G,W,W,W"),
    # a 6-cell ship (no such length)
    "ship_too_long": _replace_row(PAPER_BOARD, 7, "R,R,R,R,R,R,W,W"),
    # "overlapping": two ships of the same colour side by side merge into a 2x2 blob
    "blob_ship": PAPER_BOARD.replace("W,W,W,O,G,W,W,W\nW,W,W,O,G,W,W,W",
                                     "W,W,O,O,G,W,W,W\nW,W,O,O,G,W,W,W"),
    # the paper fleet needs lengths 5, 4, 3, 2 in R, G, P, O order: swap the R and O ships
    "wrong_fleet_order": PAPER_BOARD.replace("R", "x").replace("O", "R").replace("x", "O"),
    "empty": "",
}


def run_cli(*args: str, cwd: Path, timeout: float = 300,
            shell: bool = False) -> subprocess.CompletedProcess:
    """`bsjax ARGS` in `cwd`: in this process, or as a subprocess of the shell with `shell`."""
    if shell:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]
                                            ).rstrip(os.pathsep)
        return subprocess.run([sys.executable, "-m", "bsjax.cli", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)
    from bsjax.cli import main
    out, err, before = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as stop:  # argparse's own errors
                code = stop.code
    finally:
        os.chdir(before)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def last_json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert lines, proc.stdout
    return json.loads(lines[-1])


TIMING_FIELDS = ("wall_seconds",)


def read_jsonl(path: Path) -> list[dict]:
    """Rows without their wall-clock fields (results must repeat; timings never do)."""
    rows = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    return [{k: v for k, v in row.items() if k not in TIMING_FIELDS} for row in rows]


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file()}


def usage_error_in_process(argv: list[str], cwd: Path, monkeypatch, capsys) -> None:
    """`bsjax ARGV` run in this process exits 2 with one line on stderr and writes nothing."""
    from bsjax.cli import main
    monkeypatch.chdir(cwd)
    before = snapshot(cwd)
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse's own errors
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2, (code, err[-3000:])
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].strip() and "Traceback" not in err, err[-3000:]
    assert snapshot(cwd) == before


def assert_usage_error(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].strip(), proc.stderr
    assert "Traceback" not in proc.stderr


RANDOM_ARGS = ("play", "--agent", "random", "--seeds", "2", "--json")


@pytest.fixture(scope="module")
def random_run(tmp_path_factory):
    """`play --agent random --seeds 2 --json` on the synthetic suite: (run dir, summary)."""
    base = tmp_path_factory.mktemp("random_run")
    out = base / "run"
    summary = last_json(run_cli(*RANDOM_ARGS, "--out", str(out), cwd=base, shell=True))
    return out, summary


# ----- 1. bad input -----

BAD_ARGS = {
    "unknown_agent": ["--agent", "nope"],
    "unknown_protocol": ["--protocol", "nope"],
    "unknown_suite": ["--suite", "nope"],
    "unknown_board": ["--boards", "B99"],
    "unknown_board_in_list": ["--boards", "B01,B99"],
    "empty_board_list": ["--boards", ","],
    "unknown_sampler": ["--sampler", "nope"],
    "unknown_rng": ["--rng", "nope"],
    "particles_zero": ["--particles", "0"],
    "particles_negative": ["--particles", "-5"],
    "seeds_negative": ["--seeds", "-1"],
    "seeds_not_int": ["--seeds", "abc"],
    "tau_above": ["--tau", "1.5"],
    "tau_below": ["--tau", "-0.1"],
    "tau_nan": ["--tau", "nan"],
    "reference_particles": ["--rng", "reference", "--sampler", "particles"],
    "reference_importance": ["--rng", "reference", "--sampler", "importance"],
    "unknown_option": ["--bogus"],
    "missing_board_file": ["--board-file", "does-not-exist.txt"],
}


@pytest.mark.parametrize("name", sorted(BAD_ARGS))
def test_bad_input_exits_2_and_writes_nothing(tmp_path, name, monkeypatch, capsys):
    out = tmp_path / "run"
    usage_error_in_process(["play", "--agent", "random", *BAD_ARGS[name], "--out", str(out)],
                           tmp_path, monkeypatch, capsys)


def test_bad_input_as_the_shell_sees_it(tmp_path):
    out = tmp_path / "run"
    assert_usage_error(run_cli("play", "--agent", "nope", "--out", str(out), cwd=tmp_path,
                               shell=True))
    assert not out.exists()
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


GRAND_BAD_BOARDS = ["seven_rows", "symbol_x", "bent_ship", "same_colour_apart", "missing_ship"]


@pytest.mark.parametrize("name,protocol", [(n, "paper") for n in sorted(BAD_BOARDS)]
                         + [(n, "grand") for n in GRAND_BAD_BOARDS])
def test_bad_board_file_exits_2_and_writes_nothing(tmp_path, name, protocol, monkeypatch,
                                                   capsys):
    board = tmp_path / "board.txt"
    board.write_text(BAD_BOARDS[name])
    out = tmp_path / "run"
    usage_error_in_process(["play", "--agent", "random", "--protocol", protocol, "--board-file",
                            str(board), "--out", str(out)], tmp_path, monkeypatch, capsys)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.txt"]


def test_non_utf8_board_file_exits_2(tmp_path):
    board = tmp_path / "board.txt"
    board.write_bytes(b"\xff\xfe\x00garbage\x80\n" * 8)
    out = tmp_path / "run"
    proc = run_cli("play", "--agent", "random", "--board-file", str(board), "--out", str(out),
                   cwd=tmp_path)
    assert_usage_error(proc)
    assert not out.exists()


def test_bad_board_fixtures_differ_from_valid_board():
    # Guard against a typo that turns a "bad" board into the valid one.
    for name, text in BAD_BOARDS.items():
        assert text.strip() != PAPER_BOARD.strip(), name


def test_boards_unknown_suite_exits_2(tmp_path):
    assert_usage_error(run_cli("boards", "--suite", "nope", "--json", cwd=tmp_path))


@pytest.mark.parametrize("games", ["0", "-3", "abc"])
def test_bench_bad_games_exits_2(tmp_path, games, monkeypatch, capsys):
    usage_error_in_process(["bench", "--agent", "random", "--games", games, "--json"],
                           tmp_path, monkeypatch, capsys)


# ----- 2. boards -----

def _check_board_rows(rows):
    assert isinstance(rows, list) and len(rows) == 8
    for row in rows:
        assert isinstance(row, str) and len(row) == 8
        assert set(row) <= set(".1234")


def test_boards_synthetic_json(tmp_path):
    table = last_json(run_cli("boards", "--suite", "synthetic", "--json", cwd=tmp_path,
                              shell=True))
    assert list(table) == [f"B{k:02d}" for k in range(1, 19)]
    for board_id, rows in table.items():
        _check_board_rows(rows)
        counts = Counter("".join(rows))
        assert [counts[s] for s in "1234"] == [5, 4, 3, 2], board_id
    assert table["B01"][5] == ".11111.."


def test_boards_grand_json(tmp_path):
    table = last_json(run_cli("boards", "--suite", "grand", "--json", cwd=tmp_path))
    assert list(table) == [f"B{k:02d}" for k in range(1, 19)]
    cells = []
    for board_id, rows in table.items():
        _check_board_rows(rows)
        counts = Counter("".join(rows))
        assert all(counts[s] >= 2 for s in "1234"), board_id
        cells.append(sum(counts[s] for s in "1234"))
    assert cells == GRAND_CELLS


# ----- 3. play --agent random -----

def test_play_random_summary_and_rows(random_run):
    out, summary = random_run
    assert SUMMARY_KEYS <= set(summary)
    assert summary["games"] == 36
    assert {p.name for p in out.iterdir()} >= RUN_FILES
    rows = read_jsonl(out / "games.jsonl")
    assert len(rows) == 36
    assert len({(r["board"], r["seed"]) for r in rows}) == 36
    assert {r["board"] for r in rows} == {f"B{k:02d}" for k in range(1, 19)}
    assert {r["seed"] for r in rows} == {0, 1}
    for r in rows:
        assert ROW_KEYS <= set(r), r
        assert r["agent"] == "random"
        assert r["f1"] == pytest.approx(2 * r["hits"] / (r["shots"] + 14))
        assert r["won"] == (r["hits"] == 14)
        assert not r["won"]  # random never completes a board in 40 shots
        assert r["shots"] == 40 and r["questions"] == 0
        assert r["turns"] == r["shots"] + r["questions"]
        assert 0 <= r["hits"] <= r["shots"]
        assert r["llm_calls"] == 0 and r["fallbacks"] == 0
    assert summary["wins"] == 0 and summary["win_rate"] == 0.0
    lo, hi = summary["win_rate_ci"]
    assert 0.0 <= lo <= hi <= 1.0
    assert summary["avg_f1"] == pytest.approx(sum(r["f1"] for r in rows) / 36)
    assert summary["avg_shots"] == pytest.approx(40.0)
    assert summary["avg_questions"] == 0.0
    assert summary["llm_calls"] == 0 and summary["fallbacks"] == 0
    assert summary["games_per_second"] > 0
    assert summary["seconds"] > 0 and summary["compile_seconds"] >= 0
    assert json.loads((out / "summary.json").read_text())["games"] == 36
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["config"]["agent"] == "random"


def test_play_random_events(random_run):
    out, _ = random_run
    rows = read_jsonl(out / "games.jsonl")
    events = read_jsonl(out / "events.jsonl")
    assert len(events) == sum(r["turns"] for r in rows)
    by_game = {}
    for e in events:
        by_game.setdefault((e["board"], e["seed"]), []).append(e)
    for r in rows:
        game = by_game[(r["board"], r["seed"])]
        assert [e["turn"] for e in game] == list(range(r["turns"]))
        shots = [e for e in game if e["kind"] == "shot"]
        assert len(shots) == r["shots"]
        assert len({e["cell"] for e in shots}) == len(shots)  # never the same cell twice
        assert sum(e["outcome"] for e in shots) == r["hits"]


def test_play_random_hits_match_board(random_run, tmp_path):
    out, _ = random_run
    table = last_json(run_cli("boards", "--suite", "synthetic", "--json", cwd=tmp_path))
    for e in read_jsonl(out / "events.jsonl"):
        if e["kind"] == "shot":
            r, c = divmod(e["cell"], 8)
            assert e["outcome"] == (table[e["board"]][r][c] != "."), e


# ----- 4. determinism -----

def test_same_command_same_results(random_run, tmp_path):
    out_a, summary_a = random_run
    out_b = tmp_path / "run"
    summary_b = last_json(run_cli(*RANDOM_ARGS, "--out", str(out_b), cwd=tmp_path))
    assert read_jsonl(out_a / "games.jsonl") == read_jsonl(out_b / "games.jsonl")
    assert read_jsonl(out_a / "events.jsonl") == read_jsonl(out_b / "events.jsonl")
    assert summary_a["avg_f1"] == summary_b["avg_f1"]


def test_results_do_not_depend_on_batch_size(random_run, tmp_path):
    out_a, _ = random_run
    out_b = tmp_path / "run"
    last_json(run_cli("play", "--agent", "random", "--boards", "B01,B02,B03", "--seeds", "2",
                      "--batch-size", "4", "--json", "--out", str(out_b), cwd=tmp_path))
    rows_a = [r for r in read_jsonl(out_a / "games.jsonl") if r["board"] in ("B01", "B02", "B03")]
    assert read_jsonl(out_b / "games.jsonl") == rows_a


# ----- 5. resume -----

def _torn_copy(src: Path, dst: Path, keep: int) -> list[dict]:
    """dst = run.json + the first `keep` game rows (and their events) + a torn partial row."""
    dst.mkdir()
    shutil.copy(src / "run.json", dst / "run.json")
    lines = (src / "games.jsonl").read_text().splitlines(keepends=True)
    torn = lines[keep][: len(lines[keep]) // 2]
    (dst / "games.jsonl").write_text("".join(lines[:keep]) + torn)
    kept = [json.loads(ln) for ln in lines[:keep]]
    keys = {(r["board"], r["seed"]) for r in kept}
    events = [ln for ln in (src / "events.jsonl").read_text().splitlines(keepends=True)
              if (json.loads(ln)["board"], json.loads(ln)["seed"]) in keys]
    (dst / "events.jsonl").write_text("".join(events))
    return kept


def _check_resumed(full: Path, resumed: Path, summary: dict, n_games: int, keep: int) -> None:
    rows_a = read_jsonl(full / "games.jsonl")
    rows_b = read_jsonl(resumed / "games.jsonl")
    keys_b = [(r["board"], r["seed"]) for r in rows_b]
    assert len(rows_b) == n_games
    assert len(set(keys_b)) == len(keys_b), "duplicated games"
    by_key_a = {(r["board"], r["seed"]): r for r in rows_a}
    assert set(keys_b) == set(by_key_a)
    for r in rows_b:
        assert r == by_key_a[(r["board"], r["seed"])]
    assert summary["games"] == n_games
    assert summary.get("played_now", n_games - keep) == n_games - keep
    events_a = read_jsonl(full / "events.jsonl")
    events_b = read_jsonl(resumed / "events.jsonl")
    key = lambda e: (e["board"], e["seed"], e["turn"])  # noqa: E731
    assert len({key(e) for e in events_b}) == len(events_b), "duplicated events"
    assert sorted(events_b, key=key) == sorted(events_a, key=key)


def test_resume_random_after_torn_write(random_run, tmp_path):
    out_a, summary_a = random_run
    out_b = tmp_path / "run"
    _torn_copy(out_a, out_b, keep=10)
    summary_b = last_json(run_cli(*RANDOM_ARGS, "--resume", "--out", str(out_b), cwd=tmp_path))
    _check_resumed(out_a, out_b, summary_b, 36, 10)
    assert summary_b["avg_f1"] == pytest.approx(summary_a["avg_f1"])
    assert summary_b["wins"] == summary_a["wins"]


def test_resume_greedy_after_torn_write(tmp_path):
    args = ("play", "--agent", "greedy", "--boards", "B01,B02", "--seeds", "1",
            "--particles", "50", "--sampler", "particles", "--json")
    out_a, out_b = tmp_path / "a", tmp_path / "b"
    summary_a = last_json(run_cli(*args, "--out", str(out_a), cwd=tmp_path))
    assert summary_a["games"] == 2
    rows_a = read_jsonl(out_a / "games.jsonl")
    for r in rows_a:
        assert ROW_KEYS <= set(r)
        assert r["agent"] == "greedy"
        assert r["f1"] == pytest.approx(2 * r["hits"] / (r["shots"] + 14))
        assert r["won"] == (r["hits"] == 14)
    _torn_copy(out_a, out_b, keep=1)
    summary_b = last_json(run_cli(*args, "--resume", "--out", str(out_b), cwd=tmp_path))
    _check_resumed(out_a, out_b, summary_b, 2, 1)


def test_resume_of_finished_run_plays_nothing(random_run, tmp_path):
    out_a, summary_a = random_run
    out_b = tmp_path / "run"
    shutil.copytree(out_a, out_b)
    before = (out_b / "games.jsonl").read_bytes()
    summary_b = last_json(run_cli(*RANDOM_ARGS, "--resume", "--out", str(out_b), cwd=tmp_path))
    assert summary_b["games"] == 36
    assert summary_b.get("played_now", 0) == 0
    assert summary_b["avg_f1"] == pytest.approx(summary_a["avg_f1"])
    assert (out_b / "games.jsonl").read_bytes() == before
    # The timing stays that of the run that played the games, not the empty resume's.
    written = json.loads((out_b / "summary.json").read_text())
    for name in ("seconds", "compile_seconds", "games_per_second"):
        assert written[name] == summary_a[name]


def test_existing_run_dir_without_resume_exits_2(random_run, tmp_path):
    out_a, _ = random_run
    out_b = tmp_path / "run"
    shutil.copytree(out_a, out_b)
    before = snapshot(out_b)
    assert_usage_error(run_cli(*RANDOM_ARGS, "--out", str(out_b), cwd=tmp_path))
    assert snapshot(out_b) == before


@pytest.mark.parametrize("change", [["--seeds", "3"], ["--run-seed", "7"],
                                    ["--protocol", "grand"]])
def test_resume_with_different_config_exits_2(random_run, tmp_path, change):
    out_a, _ = random_run
    out_b = tmp_path / "run"
    _torn_copy(out_a, out_b, keep=5)
    before = snapshot(out_b)
    args = list(RANDOM_ARGS)
    idx = args.index(change[0]) if change[0] in args else None
    if idx is not None:
        args[idx + 1] = change[1]
    else:
        args += change
    assert_usage_error(run_cli(*args, "--resume", "--out", str(out_b), cwd=tmp_path))
    assert snapshot(out_b) == before


def test_out_that_is_a_file_is_refused(tmp_path):
    out = tmp_path / "run"
    out.write_text("mine")
    assert_usage_error(run_cli(*RANDOM_ARGS, "--out", str(out), cwd=tmp_path))
    assert out.read_text() == "mine"


def test_non_run_dir_is_refused(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert_usage_error(run_cli(*RANDOM_ARGS, "--out", str(out), cwd=tmp_path))
    assert snapshot(out) == {"notes.txt": b"mine"}


# ----- 6. board files -----

def test_play_board_file_paper(tmp_path):
    board = tmp_path / "myboard.txt"
    board.write_text(PAPER_BOARD)
    out = tmp_path / "run"
    summary = last_json(run_cli("play", "--agent", "random", "--protocol", "paper",
                                "--board-file", str(board), "--seeds", "2", "--json",
                                "--out", str(out), cwd=tmp_path))
    assert summary["games"] == 2
    rows = read_jsonl(out / "games.jsonl")
    assert [r["seed"] for r in rows] == [0, 1]
    for r in rows:
        assert ROW_KEYS <= set(r)
        assert r["f1"] == pytest.approx(2 * r["hits"] / (r["shots"] + 14))
        assert r.get("ship_cells", 14) == 14
    for e in read_jsonl(out / "events.jsonl"):
        if e["kind"] == "shot":
            assert e["outcome"] == (divmod(e["cell"], 8) in PAPER_BOARD_SHIPS), e


def test_board_file_with_wrong_fleet_for_paper_exits_2(tmp_path):
    board = tmp_path / "board.txt"
    board.write_text((REPO / "bsjax" / "data" / "grand2025" / "board_B01.txt").read_text())
    out = tmp_path / "run"
    proc = run_cli("play", "--agent", "random", "--protocol", "paper", "--board-file",
                   str(board), "--out", str(out), cwd=tmp_path)
    assert_usage_error(proc)
    assert not out.exists()


# ----- 7. bench -----

def test_bench_random_json(tmp_path):
    proc = run_cli("bench", "--agent", "random", "--games", "4", "--json", cwd=tmp_path,
                   shell=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stdout
    row = json.loads(lines[0])
    assert BENCH_KEYS <= set(row)
    assert row["agent"] == "random"
    assert row["games"] == 4
    assert row["games_per_second"] > 0
    assert row["seconds"] > 0
    assert list(tmp_path.iterdir()) == []  # bench writes no run directory


# ----- 8. grand protocol -----

def test_play_random_grand(tmp_path):
    out = tmp_path / "run"
    summary = last_json(run_cli("play", "--agent", "random", "--protocol", "grand", "--boards",
                                "B01,B02", "--seeds", "1", "--json", "--out", str(out),
                                cwd=tmp_path))
    assert SUMMARY_KEYS <= set(summary)
    assert summary["games"] == 2
    rows = read_jsonl(out / "games.jsonl")
    assert [r["board"] for r in rows] == ["B01", "B02"]
    for r, cells in zip(rows, GRAND_CELLS):
        assert ROW_KEYS <= set(r)
        assert r["ship_cells"] == cells
        assert r["f1"] == pytest.approx(2 * r["hits"] / (r["shots"] + cells))
        assert r["won"] == (r["hits"] == cells)
