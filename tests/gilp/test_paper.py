"""The GILP pipeline commands end to end: `gilp train` → `gilp run` → `gilp report`, and
`gilp paper` (its bad input always; the whole smoke pipeline under `-m slow`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bsjax import cli
from bsjax.gilp import profiles
from bsjax.gilp.cli import main as gilp_cli
from bsjax.gilp.evaluation import paper


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A work directory with a smoke-profile MLP trained on ToolChain."""
    path = tmp_path_factory.mktemp("gilp_work")
    assert cli.main(["gilp", "train", "--bench", "toolchain", "--backbone", "MLP",
                     "--profile", "smoke", "--work", str(path)]) == 0
    return path


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_run_then_report_rebuilds_the_same_tables(work, tmp_path, capsys):
    out = tmp_path / "run"
    variant = "Hybrid-Full[rho_th=0.3]"  # a registry method with another threshold, by name
    argv = ["gilp", "run", "--methods", f"Agent-Replan,Hybrid-Full,{variant},Oracle", "--bench",
            "toolchain", "--backbone", "MLP", "--profile", "smoke", "--work", str(work), "--out",
            str(out), "--json"]
    assert cli.main(argv) == 0
    methods = _last_json(capsys)["methods"]
    assert set(methods) == {"Agent-Replan", "Hybrid-Full", variant, "Oracle"}
    # smoke: (6 ID + 4 OOD tasks) x 2 seeds
    assert all(m["episodes"] == 20 for m in methods.values())
    assert methods["Oracle"]["sr"] >= methods["Agent-Replan"]["sr"]
    assert methods["Oracle"]["hsr"] is None or methods["Oracle"]["hsr"] == 0
    table = (out / "table_1.md").read_text()
    events = sorted(p.name for p in (out / "events").iterdir())
    assert len(events) == 8 and "Hybrid-Full__toolchain__test_ood.jsonl" in events
    assert f"{variant}__toolchain__test_id.jsonl" in events and f"| {variant} |" in table
    assert cli.main(["gilp", "report", str(out), "--json"]) == 0
    assert _last_json(capsys)["methods"] == methods
    assert (out / "table_1.md").read_text() == table
    # A resumed run plays nothing new and gives the same numbers.
    assert cli.main([*argv, "--resume"]) == 0
    assert _last_json(capsys)["methods"] == methods
    # Resuming with other simulator parameters would mix two parameter sets: refused.
    before = sorted(p.name for p in (out / "events").iterdir())
    assert cli.main([*argv, "--resume", "--params", "calibrated"]) == 2
    assert "another configuration" in capsys.readouterr().err
    assert sorted(p.name for p in (out / "events").iterdir()) == before


@pytest.mark.parametrize("argv, message", [
    (["--profile", "huge"], "unknown profile"),
    (["--bench", "chess"], "unknown benchmark"),
    (["--params", "/nonexistent/params.json"], "bad simulator parameter file"),
])
def test_paper_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert cli.main(["gilp", "paper", *argv, "--work", str(tmp_path / "w"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and not (tmp_path / "w").exists()


def test_paper_refuses_a_foreign_nonempty_out(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert cli.main(["gilp", "paper", "--work", str(tmp_path / "w"), "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_backbone_table_pools_metrics_and_planner_cells():
    def summary(acc):
        split = {"trans_acc": acc, "node_mse": 0.1, "delta_acc_all": 0.9,
                 "delta_acc_changed": float("nan"), "valid_acc": 0.8}
        return {"params": 100, "train_seconds": 2.0, "steps_per_second": 4.0,
                "metrics": {"id": split, "ood": split, "pooled": split}}
    trained = {"taskgraph": {"MLP": summary(0.8)}, "toolchain": {"MLP": summary(0.6)}}
    runs = {"MLP": {"pooled": {"Parametric-WM-MPC": {"sr": 0.5}, "Hybrid-Full": {"sr": 0.7,
                                                                                  "hsr": 0.1}},
                    "by_benchmark": {"Hybrid-Full": {"taskgraph": {"sr": 0.9, "hsr": 0.0}}}}}
    table = paper.backbone_table(trained, runs)
    pooled = table["pooled"]["MLP"]
    assert pooled["trans_acc"] == pytest.approx(0.7) and pooled["train_seconds"] == 4.0
    assert pooled["delta_acc_changed"] is None           # NaN everywhere: not measured
    assert (pooled["standalone_sr"], pooled["hybrid_sr"], pooled["hybrid_hsr"]) == (0.5, 0.7, 0.1)
    assert table["taskgraph"]["MLP"]["hybrid_sr"] == 0.9
    assert table["toolchain"]["MLP"]["standalone_sr"] is None
    doc = paper.result_json({"pooled": {}}, table, 1.0, {})
    assert doc["backbones"]["MLP"]["params"] == 100 and doc["methods"] == {}


@pytest.mark.slow
def test_paper_smoke_pipeline_writes_tables_figures_and_json(tmp_path, capsys):
    out = tmp_path / "paper"
    argv = ["gilp", "paper", "--profile", "smoke", "--bench", "toolchain",
            "--work", str(tmp_path / "w"), "--out", str(out), "--json"]
    assert cli.main(argv) == 0
    doc = _last_json(capsys)
    assert len(doc["methods"]) == 14 and set(doc["backbones"]) == {"MLP", "MPNN"}
    for name in ("table_1", "table_2", "table_4", "table_5", "table_5b", "table_6"):
        assert (out / f"{name}.md").exists() and (out / f"{name}.csv").exists()
    assert {"f1_horizons.png", "f2_pareto.png", "f4_backbones.png"} <= set(doc["figures"])
    assert cli.main([*argv, "--resume"]) == 0            # everything on disk: nothing re-run
    assert _last_json(capsys)["methods"] == doc["methods"]


def test_a_benchmark_gets_its_own_token_coefficients(tmp_path):
    from bsjax.gilp.behaviour.params import SimParams, load_params, params_for, save_params
    path = save_params(tmp_path, SimParams(tok_a_n=10.0, h0=0.2), residuals={
        "token_model": {"coefs_per_bench": {"toolchain": {"tok_a_n": 7.5}}}})
    assert load_params(path).tok_a_n == 10.0
    toolchain, taskgraph = load_params(path, "toolchain"), load_params(path, "taskgraph")
    assert (toolchain.tok_a_n, toolchain.h0) == (7.5, 0.2)      # only the token terms move
    assert taskgraph.tok_a_n == 10.0
    assert params_for({"toolchain": toolchain}, "toolchain") is toolchain
    assert params_for(taskgraph, "toolchain") is taskgraph and params_for(None, "x") is None


def test_paper_config_file_sets_flags_and_given_flags_win(tmp_path):
    from argparse import Namespace
    config = tmp_path / "gilp.toml"
    config.write_text('[paper]\nprofile = "smoke"\nbench = ["toolchain", "taskgraph"]\n'
                      'run-seed = 3\nout = "from-file"\n')
    flags = dict(config=str(config), profile=None, bench=None, work=None, out="from-flag",
                 params=None, run_seed=None)
    settings = gilp_cli.paper_settings(Namespace(**flags))
    assert settings == {"profile": "smoke", "bench": "toolchain,taskgraph",
                        "work": str(gilp_cli.DEFAULT_WORK), "out": "from-flag", "params": None,
                        "run_seed": 3}


@pytest.mark.parametrize("text, message", [
    ('[paper]\nprofil = "quick"\n', "unknown [paper] key(s) profil"),
    ('[paper]\nrun_seed = "zero"\n', "run_seed must be a int"),
    ("[paper\n", "cannot read config"),
])
def test_paper_bad_config_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, text, message):
    config = tmp_path / "gilp.toml"
    config.write_text(text)
    out = tmp_path / "out"
    argv = ["gilp", "paper", "--config", str(config), "--work", str(tmp_path / "w"), "--out",
            str(out)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and not (tmp_path / "w").exists()


def test_the_shipped_gilp_configs_parse():
    from argparse import Namespace
    root = Path(__file__).resolve().parents[2] / "experiments" / "gilp"
    paths = sorted(root.glob("*.toml"))
    assert {p.name for p in paths} >= {"quick.toml", "full.toml"}
    for path in paths:
        flags = dict(config=str(path), profile=None, bench=None, work=None, out=None,
                     params=None, run_seed=None)
        settings = gilp_cli.paper_settings(Namespace(**flags))
        assert profiles.get_profile(settings["profile"]).name in profiles.PROFILES, path
