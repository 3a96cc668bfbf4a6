"""Simulator calibration (spec/gilp.md §5.2 "Calibration procedure", event 6): the token model's
fit on rendered prompts, a deterministic objective that a fit improves, the residual file, and
the CLI's bad-input cases."""

from __future__ import annotations

import argparse
import json

import jax
import numpy as np
import pytest

from bsjax.gilp import config as C
from bsjax.gilp import generate
from bsjax.gilp.cli_calibrate import add_calibrate_parser, cmd_calibrate
from bsjax.gilp.sim import calibrate as cal
from bsjax.gilp.sim import residuals
from bsjax.gilp.sim import targets as TG
from bsjax.gilp.sim import token_model as TM
from bsjax.gilp.sim.params import SimParams, load_params
from bsjax.harness.experiment import UsageError

# J_K with K = 1 keeps the compiled simulator of these tests small.
CFG = C.GilpConfig(value_horizon=1)


def _tasks(bench: str, count: int, split: str = "val") -> dict:
    return generate.stack_tasks([generate.generate_task(bench, split, i) for i in range(count)])


# --- token model ----------------------------------------------------------------------------------

def test_token_model_fits_rendered_prompts():
    samples = TM.render_token_samples("taskgraph", _tasks("taskgraph", 12), 2000, seed=0)
    assert len(samples) == 2000
    assert set(np.unique(samples.call_type)) == {0, 1, 2, 3}
    assert samples.n_rows.max() <= TM.MAX_ROWS and samples.history.max() <= 3
    fit = TM.fit_token_model(samples)
    assert fit.r2 >= 0.98, fit
    # Longer prompts cost more: a skeleton row and a history line add tokens.
    assert fit.coefs["tok_a_b"] > 0 and fit.coefs["tok_a_w"] > 0
    # A custom tokenizer is used as given (twice the count -> twice the coefficients).
    double = TM.render_token_samples("taskgraph", _tasks("taskgraph", 12), 50, seed=0,
                                     tokenizer=lambda text: len(text) / 2)
    single = TM.render_token_samples("taskgraph", _tasks("taskgraph", 12), 50, seed=0)
    np.testing.assert_allclose(double.tokens, 2 * single.tokens)


# --- stage-1 objective --------------------------------------------------------------------------

def _setup(n_tasks: int = 3) -> cal.SimSetup:
    return cal.SimSetup(tasks={"taskgraph": _tasks("taskgraph", n_tasks)}, models={},
                        seeds=(0, 1), root_key=jax.random.key(0), cfg=CFG)


def _synthetic_targets(summary: dict) -> list[TG.Target]:
    """Stage-1 rows whose targets are the simulator's own values at known parameters."""
    rows = TG.agent_targets(summary)
    return [t for t in rows if t.target is not None]


def test_objective_is_deterministic_and_a_fit_improves_it():
    setup = _setup()
    truth = SimParams(h0=0.30, h1=0.05, q_rec=0.10)
    truth_summary = cal.simulate(setup, ["Agent-Replan"], truth)["Agent-Replan"]
    targets = _synthetic_targets(truth_summary)
    objective = cal.stage_objective(setup, ["Agent-Replan"], targets)
    # At the true parameters the residuals vanish (same common random numbers).
    assert objective(truth)[0] == pytest.approx(0.0, abs=1e-12)
    start = SimParams(h0=0.05, h1=0.05, q_rec=0.10)
    first, second = objective(start)[0], objective(start)[0]
    assert first == second > 0.0
    space = (("h0", 0.0, 0.6),)
    result = cal.fit_stage(1, objective, start, space, sobol=2, nm_evals=6)
    assert result.objective < result.start_objective
    assert abs(result.values["h0"] - 0.30) < abs(0.05 - 0.30)
    assert result.evaluations <= 1 + 2 + 6


def test_with_values_keeps_the_type_mix_a_distribution():
    p = cal.with_values(SimParams(), {"pi_we": 0.6, "pi_dep": 0.6})
    total = p.pi_fc + p.pi_we + p.pi_dep + p.pi_val
    assert total == pytest.approx(1.0)
    assert p.pi_fc / p.pi_val == pytest.approx(0.35 / 0.15)
    assert min(p.pi_fc, p.pi_we, p.pi_dep, p.pi_val) >= 0.0


def test_budgets():
    assert cal.get_budget("quick").tasks >= 1
    assert cal.get_budget("quick", evals=8).nm1 + cal.get_budget("quick", evals=8).sobol1 == 8
    with pytest.raises(ValueError):
        cal.get_budget("huge")
    with pytest.raises(ValueError):
        cal.get_budget("quick", evals=0)
    for budget in cal.BUDGETS.values():
        budget.validate()
    # The presets grow: each simulates at least as much as the one before it.
    sizes = [cal.get_budget(n).tasks * cal.get_budget(n).seeds for n in
             ("smoke", "quick", "standard", "paper")]
    assert sizes == sorted(sizes)


# --- residual file ------------------------------------------------------------------------------

def test_residual_file_has_every_row(tmp_path):
    setup = _setup()  # the same episode shapes as above: one compile
    targets = cal.drop_empty_buckets(TG.agent_targets(),
                                     np.asarray(setup.tasks["taskgraph"]["horizon"]))
    result = cal.fit_stage(1, cal.stage_objective(setup, ["Agent-Replan"], targets), SimParams(),
                           cal.STAGE1_SPACE, sobol=0, nm_evals=0)
    rows3 = TG.relation_checks(result.summaries)
    tokens = cal.fit_tokens({"taskgraph": setup.tasks["taskgraph"]}, 200)
    doc = residuals.document(SimParams(), tokens, [result], rows3, [], result.summaries,
                        {"benchmarks": ["taskgraph"], "tasks_per_bench": 3, "seeds": 2,
                         "seconds": 0.0})
    residuals.write_outputs(tmp_path, doc, cal.PARAMS_FILE, cal.RESIDUALS_FILE)
    text = (tmp_path / cal.RESIDUALS_FILE).read_text()
    table = [line for line in text.splitlines() if line.startswith("| 1 |")
             or line.startswith("| 3 |")]
    assert len(table) == len(targets) + len(rows3)
    for t in targets:
        assert f"| Agent-Replan | {t.metric} |" in text
    assert "R² =" in text
    saved = json.loads((tmp_path / cal.PARAMS_FILE).read_text())
    assert len(saved["residuals"]["rows"]) == len(targets) + len(rows3)
    assert saved["meta"]["stage1"]["evaluations"] == 1
    assert isinstance(load_params(tmp_path), SimParams)
    # The [rev] bucket rows carry half weight; SR(H>10) has no val task and is not fitted.
    by_metric = {r["metric"]: r for r in saved["residuals"]["rows"]}
    assert by_metric["sr@4-6"]["weight"] == 0.5 and by_metric["sr@>10"]["weight"] == 0.0


# --- command line -------------------------------------------------------------------------------

def _args(*argv: str):
    parser = argparse.ArgumentParser()
    add_calibrate_parser(parser.add_subparsers(dest="cmd"))
    return parser.parse_args(["calibrate", *argv])


BAD = {
    "unknown_bench": ["--bench", "chess"],
    "unknown_profile": ["--profile", "huge"],
    "unknown_budget": ["--budget", "huge"],
    "budget_name_as_profile": ["--profile", "standard"],
    "bad_evals": ["--evals", "0"],
    "negative_evals": ["--evals", "-3"],
    "bad_backbone": ["--backbone", "Transformer9"],
    "missing_checkpoint": ["--bench", "taskgraph"],
    "from_real_without_events": ["--from-real", "REAL"],
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_usage_error_and_writes_nothing(tmp_path, name):
    (tmp_path / "REAL").mkdir()
    argv = [a.replace("REAL", str(tmp_path / "REAL")) for a in BAD[name]]
    out = tmp_path / "out"
    work = tmp_path / "work"
    with pytest.raises(UsageError) as err:
        cmd_calibrate(_args(*argv, "--work", str(work), "--out", str(out)))
    assert "\n" not in str(err.value)
    assert not out.exists() and not work.exists()


def test_from_real_refits_stage_one_to_measured_episodes(tmp_path):
    from bsjax.gilp import events, pipeline
    from bsjax.gilp.envs import registry
    from bsjax.gilp.sim.run import records_to_events, run_simulated
    work, run_dir, out = tmp_path / "work", tmp_path / "real", tmp_path / "cal"
    tasks = pipeline.tasks(work, "taskgraph", "val", 3)
    ids = [C.SPLIT_OFFSET["val"] + i for i in range(3)]  # real.TaskRef ids of val tasks
    # "Measured" episodes: the simulator at known parameters, written as a real run would be.
    run = run_simulated("Agent-Replan", registry.get("taskgraph"), None, tasks, (0, 1),
                        jax.random.key(0), SimParams(h0=0.3), CFG, task_ids=ids)
    run_dir.mkdir()
    events.write_events(run_dir / "events.jsonl", records_to_events(run))
    budget = cal.CalibrationBudget("test", tasks=3, seeds=2, sobol1=0, nm1=3, sobol2=0, nm2=0,
                                   token_prompts=1)
    doc = cal.calibrate_from_real(work, out, run_dir, budget, cfg=CFG)
    assert (out / "gilp_sim_params.local.json").is_file()
    assert (out / cal.LOCAL_RESIDUALS_FILE).is_file()
    assert not (out / cal.PARAMS_FILE).exists()
    assert doc["meta"]["stage1"]["objective"] <= doc["meta"]["stage1"]["start_objective"]
    assert {r["note"] for r in doc["rows"] if r["weight"] > 0} == {"measured"}
