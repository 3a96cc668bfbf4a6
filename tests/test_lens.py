"""`bsjax lens` on small real runs, through the CLI (docs/battleship/protocol.md §12.2): in-process through
`bsjax.cli.main`, and once as a process.

Three runs are made once per module with `bsjax.battleship.harness.experiment.run`: MRA (symbolic revision),
MRA-LLM with `--llm none` and τ = 1.0 (every LLM request falls back, and is counted), and greedy
(no reflective runtime; two seeds, for `compare`). The views are checked against the run's own
files, and the confidence trace against the per-turn rules of §9.1-9.2.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from bsjax import cli
from bsjax.battleship.harness.experiment import run
from bsjax.battleship.harness.run_config import RunConfig

BOARDS = "B01,B02"
KINDS = ("coarse_roi_collapse", "late_diffuse_reprobe", "cluster_closeout_bias")
DELTA_KEYS = tuple(f"delta_{k}" for k in KINDS)
PREDICTION_KEYS = ("pred_hit_prob", "pred_answer_prob", "pred_gain")
EMA_KEYS = ("pred_error_ema", "calibration_error_ema")
TOL = 3e-6                       # events.jsonl rounds floats to 6 decimals


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lens")
    configs = {
        "mra": RunConfig(agent="mra", sampler="particles", particles=32, boards=BOARDS, seeds=1),
        "llm": RunConfig(agent="mra-llm", sampler="particles", particles=32, boards=BOARDS,
                         seeds=1, llm="none", tau=1.0),
        "greedy": RunConfig(agent="greedy", sampler="particles", particles=32, boards=BOARDS,
                            seeds=2),
    }
    out = {}
    for name, cfg in configs.items():
        summary = run(cfg, root / name)
        out[name] = {"dir": str(root / name), "summary": summary, "tau": cfg.tau or 0.72,
                     "games": read_jsonl(root / name / "games.jsonl"),
                     "events": read_jsonl(root / name / "events.jsonl")}
    return out


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _lens_in_process(*args: str) -> subprocess.CompletedProcess:
    """`bsjax lens ARGS` through `bsjax.cli.main`, with its stdout, stderr and exit code as a
    process would give them (argparse's usage errors exit through SystemExit)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(["lens", *args])
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return subprocess.CompletedProcess(["bsjax", "lens", *args], code, out.getvalue(),
                                       err.getvalue())


def _lens_process(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bsjax.cli", "lens", *args],
                          capture_output=True, text=True, timeout=120)


@functools.cache
def lens(*args: str) -> subprocess.CompletedProcess:
    return _lens_in_process(*args)


def lens_json(*args: str) -> dict:
    proc = lens(*args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def board_f1(games: list[dict]) -> dict[str, float]:
    by_board = defaultdict(list)
    for g in games:
        by_board[g["board"]].append(g["f1"])
    return {b: statistics.fmean(v) for b, v in by_board.items()}


def view_args(runs, name, view):
    args = [runs[name]["dir"], "--view", view]
    if view == "compare":
        args += ["--against", runs["greedy"]["dir"]]
    if view in ("game", "confidence"):
        args += ["--game", "B01:0"]
    return tuple(args)


# ----------------------------------------------------------------------------- every view


@pytest.mark.parametrize("name", ["mra", "llm"])
@pytest.mark.parametrize("view", ["run", "game", "confidence", "llm", "compare"])
def test_views_text_and_json(runs, name, view):
    args = view_args(runs, name, view)
    text = lens(*args)
    assert text.returncode == 0, text.stderr
    assert text.stdout.strip()
    data = lens_json(*args)
    assert isinstance(data, dict) and data


def test_run_view_matches_files(runs):
    for name in ("mra", "llm", "greedy"):
        r = runs[name]
        data = lens_json(r["dir"], "--view", "run")
        assert data["games"] == len(r["games"]) == r["summary"]["games"]
        assert data["avg_f1"] == pytest.approx(r["summary"]["avg_f1"])
        assert data["avg_f1"] == pytest.approx(statistics.fmean(g["f1"] for g in r["games"]))
        assert data["wins"] == sum(g["won"] for g in r["games"])
        assert data["per_board_f1"] == pytest.approx(board_f1(r["games"]))
        symbolic = sum(1 for e in r["events"]
                       if e.get("kind") != "llm" and e.get("revision", -1) >= 0)
        assert data["revisions"] == symbolic + r["summary"]["llm_calls"]
    assert lens_json(runs["mra"]["dir"], "--view", "run")["revisions"] > 0


def test_run_view_counts_llm_path_revisions(runs):
    """§9.5 / §9.6: every LLM request ends in a revision (the LLM's or, on a fallback, the
    symbolic preset's), and each increments revisionCount. With `--llm none` all of them fall
    back, so the run's revisions equal its LLM calls."""
    r = runs["llm"]
    assert r["summary"]["llm_calls"] > 0
    data = lens_json(r["dir"], "--view", "run")
    assert data["revisions"] == r["summary"]["llm_calls"], (
        "lens run view counts only revisions applied inside the jitted turn; the host-applied "
        "LLM/fallback revisions of mra-llm are missing")


def test_game_view_matches_files(runs):
    r = runs["llm"]
    data = lens_json(r["dir"], "--view", "game", "--game", "B02:0")
    row = next(g for g in r["games"] if (g["board"], g["seed"]) == ("B02", 0))
    assert data["game"] == "B02:0" and data["result"] == row
    assert [t["turn"] for t in data["turns"]] == list(range(row["turns"]))
    assert {t["kind"] for t in data["turns"]} <= {"shot", "question"}
    assert sum(t["kind"] == "shot" for t in data["turns"]) == row["shots"]
    assert sum(t["kind"] == "question" for t in data["turns"]) == row["questions"]


# ----------------------------------------------------------------------------- confidence


def confidence_trace(runs, name, game="B01:0"):
    data = lens_json(runs[name]["dir"], "--view", "confidence", "--game", game)
    board, seed = game.split(":")
    row = next(g for g in runs[name]["games"] if g["board"] == board and g["seed"] == int(seed))
    return data, row


@pytest.mark.parametrize("name", ["mra", "llm"])
def test_confidence_view_one_entry_per_turn(runs, name):
    data, row = confidence_trace(runs, name)
    assert data["game"] == "B01:0"
    trace = data["trace"]
    assert len(trace) == row["turns"]
    assert [t["turn"] for t in trace] == list(range(row["turns"]))
    for t in trace:
        for key in PREDICTION_KEYS + EMA_KEYS + DELTA_KEYS + ("confidence", "streak", "revision"):
            assert key in t and t[key] is not None, key
        assert t["kind"] in ("shot", "question")


def test_confidence_view_without_game_covers_every_game(runs):
    """§12.2: `confidence` without `--game` reports per game (average confidence, low-confidence
    turns, revisions, observed turns); only `--game` selects one game's per-turn trace."""
    data = lens_json(runs["mra"]["dir"], "--view", "confidence")
    text = json.dumps(data)
    for game in ("B01:0", "B02:0"):
        assert game in text, f"no per-game entry for {game}: the view shows one game's trace"


@pytest.mark.parametrize("name", ["mra", "llm"])
def test_confidence_trace_follows_the_per_turn_protocol(runs, name):
    """§9.1-9.2 on a real game: EMA recurrences with α = 0.25 (first sets), calErr = predErr/14
    for shots, confidence = max(0, 1 - (a + b)/2), the streak rule, and a finished game that
    only reconciles."""
    trace, _ = confidence_trace(runs, name)
    trace = trace["trace"]
    tau = runs[name]["tau"]
    prev = None
    for i, t in enumerate(trace):
        signal = 1.0 if t["outcome"] else 0.0
        predicted = t["pred_answer_prob"] if t["kind"] == "question" else t["pred_hit_prob"]
        pred_error = abs(signal - predicted)
        expected = pred_error if prev is None else (3 * prev["pred_error_ema"] + pred_error) / 4
        assert t["pred_error_ema"] == pytest.approx(expected, abs=TOL), t["turn"]
        if t["kind"] == "shot":
            cal_error = abs(signal / 14 - t["pred_gain"])
            assert cal_error == pytest.approx(pred_error / 14, abs=TOL)
            expected = (cal_error if prev is None
                        else (3 * prev["calibration_error_ema"] + cal_error) / 4)
            assert t["calibration_error_ema"] == pytest.approx(expected, abs=TOL), t["turn"]
        assert t["confidence"] == pytest.approx(
            max(0.0, 1 - (t["pred_error_ema"] + t["calibration_error_ema"]) / 2), abs=TOL)
        previous_streak = prev["streak"] if prev else 0
        if i == len(trace) - 1:
            assert t["streak"] == previous_streak          # game over: no streak update
        elif abs(t["confidence"] - tau) > TOL:
            assert t["streak"] == (previous_streak + 1 if t["confidence"] < tau else 0), t["turn"]
        prev = t


def test_confidence_trace_revisions_follow_the_gate(runs):
    """MRA: every revision in the trace had an open gate (§9.2) and patched the policy (§9.4)."""
    tau = runs["mra"]["tau"]
    revisions = 0
    for game in ("B01:0", "B02:0"):
        trace = confidence_trace(runs, "mra", game)[0]["trace"]
        prev_budgets = (6, 2, 4)
        prev_cooldown = 0
        for _i, t in enumerate(trace):
            budgets = (t["coarse_budget"], t["local_budget"], t["late_budget"])
            kind = t["revision"]
            if kind >= 0:
                revisions += 1
                assert t["confidence"] < tau and t["streak"] >= 2
                assert prev_cooldown <= 1                     # decremented to 0 first
                assert t["next_kind"] == kind
                assert (t["next_delta"] > 0.01
                        or (kind == 0 and t["delta_coarse_roi_collapse"] >= -0.01 - TOL))
                assert t["cooldown"] == 3
                c, loc, late = prev_budgets
                assert budgets == [(c - 1, loc + 1, late), (c, max(0, loc - 1), late + 1),
                                   (c, loc, late)][kind]
            else:
                assert t["cooldown"] == max(0, prev_cooldown - 1), t["turn"]
                assert budgets == prev_budgets
            prev_budgets, prev_cooldown = budgets, t["cooldown"]
    assert revisions > 0


def test_confidence_trace_marks_llm_requests(runs):
    """MRA-LLM: the trace flags the turns whose gate asked the LLM; their count per game is the
    game's llm_calls; the host's (fallback) revision shows as cooldown 2 on the next turn."""
    for row in runs["llm"]["games"]:
        trace = confidence_trace(runs, "llm", f"{row['board']}:{row['seed']}")[0]["trace"]
        asked = [i for i, t in enumerate(trace) if t["llm"]]
        assert len(asked) == row["llm_calls"]
        for i in asked:
            assert trace[i]["streak"] >= 2 and trace[i]["next_kind"] >= 0
            if i + 1 < len(trace):
                assert trace[i + 1]["cooldown"] == 2


# ----------------------------------------------------------------------------- llm


def test_llm_view_counts_equal_summary(runs):
    r = runs["llm"]
    data = lens_json(r["dir"], "--view", "llm")
    summary = r["summary"]
    assert summary["llm_calls"] > 0
    assert data["llm_turns"] == summary["llm_calls"]
    assert data["fallbacks"] == summary["fallbacks"] == summary["llm_calls"]   # --llm none
    assert data["fallback_reasons"] == summary["fallback_reasons"] == {
        "transport": summary["fallbacks"]}
    assert data["turns"] == sum(g["turns"] for g in r["games"])
    assert data["llm_rate"] == pytest.approx(summary["llm_rate"])
    per_game = {g["game"]: (g["llm_calls"], g["fallbacks"]) for g in data["per_game"]}
    assert per_game == {f"{g['board']}:{g['seed']}": (g["llm_calls"], g["fallbacks"])
                        for g in r["games"] if g["llm_calls"]}
    # The mra run asks no LLM.
    data = lens_json(runs["mra"]["dir"], "--view", "llm")
    assert data["llm_turns"] == data["fallbacks"] == 0 and data["per_game"] == []


# ----------------------------------------------------------------------------- compare


def test_compare_per_board_delta_f1(runs):
    a, b = runs["mra"], runs["greedy"]
    data = lens_json(a["dir"], "--view", "compare", "--against", b["dir"])
    f1_a, f1_b = board_f1(a["games"]), board_f1(b["games"])
    expected = {bd: f1_a[bd] - f1_b[bd] for bd in f1_a}
    assert set(data["per_board_delta_f1"]) == {"B01", "B02"}
    assert data["per_board_delta_f1"] == pytest.approx(expected)
    assert data["deltas"]["avg_f1"] == pytest.approx(
        statistics.fmean(g["f1"] for g in a["games"])
        - statistics.fmean(g["f1"] for g in b["games"]))
    assert data["deltas"]["avg_questions"] == pytest.approx(
        a["summary"]["avg_questions"] - b["summary"]["avg_questions"])
    ranked = sorted(expected.items(), key=lambda kv: kv[1])
    assert [bd for bd, _ in data["best"]][0] == ranked[-1][0]
    assert [bd for bd, _ in data["worst"]][0] == ranked[0][0]
    text = lens(*view_args(runs, "mra", "compare")).stdout
    assert "B01" in text and "B02" in text


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("case", [
    "missing-run", "unknown-view", "game-no-colon", "game-bad-seed", "game-extra-field",
    "unknown-game", "compare-without-against", "compare-missing-against",
    "confidence-on-greedy", "bad-format"])
def test_bad_input_exits_2_with_one_line(runs, case, tmp_path):
    mra, greedy = runs["mra"]["dir"], runs["greedy"]["dir"]
    args = {
        "missing-run": (str(tmp_path / "nope"), "--view", "run"),
        "unknown-view": (mra, "--view", "bogus"),
        "game-no-colon": (mra, "--view", "game", "--game", "B01-0"),
        "game-bad-seed": (mra, "--view", "confidence", "--game", "B01:x"),
        "game-extra-field": (mra, "--view", "game", "--game", "B01:0:1"),
        "unknown-game": (mra, "--view", "game", "--game", "B09:0"),
        "compare-without-against": (mra, "--view", "compare"),
        "compare-missing-against": (mra, "--view", "compare", "--against", str(tmp_path / "x")),
        "confidence-on-greedy": (greedy, "--view", "confidence", "--game", "B01:0"),
        "bad-format": (mra, "--view", "run", "--format", "yaml"),
    }[case]
    proc = _lens_in_process(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bsjax: error:"), proc.stderr


def test_the_command_as_a_process_gives_what_it_gives_in_process(runs):
    """`python -m bsjax.cli lens` (the installed command's entry) prints what the in-process
    calls above read, and a usage error exits 2 with one line there too."""
    args = view_args(runs, "mra", "run")
    proc = _lens_process(*args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == lens_json(*args)
    bad = _lens_process(runs["mra"]["dir"], "--view", "bogus")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == _lens_in_process(
        runs["mra"]["dir"], "--view", "bogus").stderr.strip().splitlines()
