"""The reflection search never confirms on a game it was tuned on, and reports paired effects."""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "experiments" / "battleship" / "reflection_search.py"
spec = importlib.util.spec_from_file_location("reflection_search", SCRIPT)
search = importlib.util.module_from_spec(spec)
sys.modules["reflection_search"] = search  # its dataclasses look their module up by name
spec.loader.exec_module(search)


@pytest.mark.parametrize("train, held_out", [((0, 100), (99, 400)), ((0, 100), (0, 300)),
                                             ((50, 60), (0, 51)), ((0, 0), (100, 400)),
                                             ((0, 100), (100, 100))])
def test_overlapping_or_empty_seed_ranges_are_refused(train, held_out):
    with pytest.raises(ValueError):
        search.check_disjoint(train, held_out)


@pytest.mark.parametrize("train, held_out", [((0, 100), (100, 400)), ((200, 300), (0, 200))])
def test_disjoint_seed_ranges_pass(train, held_out):
    search.check_disjoint(train, held_out)


def test_the_command_line_refuses_overlapping_seeds_before_playing(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        search.main(["--train-seeds", "100", "--held-out-first", "50", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "overlap" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def _game(board, seed, f1, won, shots=40):
    return {"board": board, "seed": seed, "f1": f1, "won": won, "shots": shots,
            "hits": 14 if won else 10, "questions": 8}


def test_compare_pairs_games_by_board_and_seed():
    on = [_game("B01", 0, 0.6, True), _game("B01", 1, 0.5, False), _game("B02", 0, 0.4, True)]
    off = [_game("B01", 1, 0.4, False), _game("B01", 0, 0.5, False), _game("B03", 0, 0.9, True)]
    result = search.compare(on, off)
    assert result["n_paired"] == 2
    assert result["delta_f1"] == pytest.approx(0.1)            # both pairs differ by +0.1
    assert result["delta_f1_low"] == pytest.approx(0.1) and result["delta_f1_high"] == pytest.approx(0.1)
    assert (result["only_row_completed"], result["only_baseline_completed"]) == (1, 0)
    assert (result["f1_on"], result["f1_off"]) == (pytest.approx(0.55), pytest.approx(0.45))
    assert (result["completed_on"], result["completed_off"]) == (1, 0)
    assert result["detectable_delta_f1"] == pytest.approx(0.0)  # the two differences are equal


def test_a_setting_that_never_revised_plays_revision_offs_games():
    off = [_game("B01", 0, 0.5, False), _game("B01", 1, 0.7, True)]
    assert search.same_games(list(reversed(off)), off)
    assert not search.same_games([_game("B01", 0, 0.5, False, shots=39)], off)


@pytest.mark.slow
def test_a_small_search_chooses_on_training_seeds_and_confirms_on_others(tmp_path):
    out = tmp_path / "search"
    assert search.main(["--taus", "0.72,1.0", "--cooldowns", "3", "--boards", "B01,B02",
                        "--particles", "64", "--train-seeds", "2", "--held-out-first", "2",
                        "--held-out-seeds", "2", "--preset-sets",
                        "coarse_roi_collapse;cluster_closeout_bias,late_diffuse_reprobe",
                        "--out", str(out)]) == 0
    result = json.loads((out / "confirm.json").read_text())
    assert result["grid_size"] == 2 and result["held_out"]["n_paired"] == 4
    assert result["preset_sets"] == 2
    with open(out / "search.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["stage"] for r in rows] == ["grid", "grid", "presets", "presets"]
    assert rows[3]["presets"] == "cluster_closeout_bias,late_diffuse_reprobe"
    setting = search.Setting(float(rows[3]["tau"]), 3, 0.01, rows[3]["presets"])
    assert (out / "search" / setting.id).is_dir()
    played = {json.loads(line)["seed"] for run in (out / "confirm").iterdir()
              for line in (run / "games.jsonl").read_text().splitlines()}
    assert played == {2, 3}


def test_preset_sets_are_every_proper_subset_or_a_list():
    subsets = search.preset_sets("subsets")
    assert len(subsets) == 6 and "coarse_roi_collapse,late_diffuse_reprobe" in subsets
    assert search.preset_sets("none") == []
    assert search.preset_sets("cluster_closeout_bias; coarse_roi_collapse") == [
        "cluster_closeout_bias", "coarse_roi_collapse"]
    with pytest.raises(ValueError, match="unknown preset"):
        search.preset_sets("closeout")
    assert search.Setting(0.85, 1, 0.01, "a,b").id == "tau=0.85_cooldown=1_mindelta=0.01_presets=a+b"
