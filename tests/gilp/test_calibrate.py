"""Simulator calibration (docs/gilp/spec.md §5.2 "Calibration procedure", event 6): the token model's
fit on rendered prompts, a deterministic objective that a fit improves, the residual file, and
the CLI's bad-input cases."""

from __future__ import annotations

import argparse
import json

import jax
import numpy as np
import pytest

from bsjax.core.errors import UsageError
from bsjax.gilp import config
from bsjax.gilp.behaviour import calibrate as cal
from bsjax.gilp.behaviour import calibrate_real, residuals, search, token_model
from bsjax.gilp.behaviour import targets as gilp_targets
from bsjax.gilp.behaviour.params import SimParams, load_params
from bsjax.gilp.cli.calibrate import add_calibrate_parser, cmd_calibrate
from bsjax.gilp.data import generate

# J_K with K = 1 keeps the compiled simulator of these tests small.
CFG = config.GilpConfig(value_horizon=1)


def _tasks(bench: str, count: int, split: str = "val") -> dict:
    return generate.stack_tasks([generate.generate_task(bench, split, i) for i in range(count)])


# --- token model ----------------------------------------------------------------------------------

def test_token_model_fits_rendered_prompts():
    samples = token_model.render_token_samples("taskgraph", _tasks("taskgraph", 12), 2000, seed=0)
    assert len(samples) == 2000
    assert set(np.unique(samples.call_type)) == {0, 1, 2, 3}
    assert samples.n_rows.max() <= token_model.MAX_ROWS and samples.history.max() <= 3
    fit = token_model.fit_token_model(samples)
    assert fit.r2 >= 0.98, fit
    # Longer prompts cost more: a skeleton row and a history line add tokens.
    assert fit.coefs["tok_a_b"] > 0 and fit.coefs["tok_a_w"] > 0
    # A custom tokenizer is used as given (twice the count -> twice the coefficients).
    double = token_model.render_token_samples("taskgraph", _tasks("taskgraph", 12), 50, seed=0,
                                     tokenizer=lambda text: len(text) / 2)
    single = token_model.render_token_samples("taskgraph", _tasks("taskgraph", 12), 50, seed=0)
    np.testing.assert_allclose(double.tokens, 2 * single.tokens)


# --- stage-1 objective --------------------------------------------------------------------------

def _setup(n_tasks: int = 3) -> cal.SimSetup:
    return cal.SimSetup(tasks={"taskgraph": _tasks("taskgraph", n_tasks)}, models={},
                        seeds=(0, 1), root_key=jax.random.key(0), cfg=CFG)


def _synthetic_targets(summary: dict) -> list[gilp_targets.Target]:
    """Stage-1 rows whose targets are the simulator's own values at known parameters."""
    rows = gilp_targets.agent_targets(summary)
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
    result = search.fit_stage(1, objective, start, space, sobol=2, nm_evals=6)
    assert result.objective < result.start_objective
    assert abs(result.values["h0"] - 0.30) < abs(0.05 - 0.30)
    assert result.evaluations <= 1 + 2 + 6


def test_with_values_keeps_the_type_mix_a_distribution():
    p = search.with_values(SimParams(), {"pi_we": 0.6, "pi_dep": 0.6})
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


# --- batched evaluations and the journal ---------------------------------------------------------

class _Counting:
    """An objective that counts the simulations it is asked for (`many` batches, single calls,
    parameter sets) and otherwise delegates."""

    def __init__(self, inner):
        self.inner, self.batches, self.calls, self.sets = inner, [], 0, 0

    def many(self, params_sets):
        self.batches.append(len(params_sets))
        self.sets += len(params_sets)
        return self.inner.many(params_sets)

    def __call__(self, params):
        self.calls += 1
        self.sets += 1
        return self.inner(params)


def _paper_objective() -> cal.StageObjective:
    setup = _setup()  # the episode shapes of the tests above: one compile of the single-set runs
    targets = cal.drop_empty_buckets(gilp_targets.agent_targets(),
                                     np.asarray(setup.tasks["taskgraph"]["horizon"]))
    return cal.stage_objective(setup, ["Agent-Replan"], targets)


def _fit(objective, batch: int = 1, journal: search.Journal | None = None) -> search.StageResult:
    # Three Sobol points (not a power of two: scipy warns) make one batch of three sets.
    return search.fit_stage(1, objective, SimParams(), (("h0", 0.0, 0.6),), sobol=3, nm_evals=3,
                         batch=batch, journal=journal)


def _same_result(a: search.StageResult, b: search.StageResult) -> None:
    assert a.values == b.values
    assert a.objective == b.objective and a.start_objective == b.start_objective
    assert a.evaluations == b.evaluations
    assert a.rows == b.rows


@pytest.mark.filterwarnings("ignore:The balance properties of Sobol")
def test_batched_evaluations_equal_one_at_a_time():
    objective = _paper_objective()
    one, batched = _Counting(objective), _Counting(objective)
    r1, r4 = _fit(one, batch=1), _fit(batched, batch=4)
    _same_result(r1, r4)
    assert r1.evaluations >= 5 and r1.objective < r1.start_objective
    assert one.batches == [1] * r1.evaluations and one.calls == 0
    # The three Sobol points went out as one sweep; every point was simulated once.
    assert batched.batches.count(3) == 1 and batched.sets == r1.evaluations
    assert len(batched.batches) < len(one.batches)
    # The objective's batch path is the single-set path, set by set.
    start = SimParams()
    sets = [start, search.with_values(start, {"h0": 0.45}), search.with_values(start, {"h0": 0.02})]
    many = objective.many(sets)
    for params, (value, rows, summaries) in zip(sets, many, strict=True):
        assert (value, rows, summaries) == objective(params)
    assert len({value for value, _, _ in many}) == 3


@pytest.mark.filterwarnings("ignore:The balance properties of Sobol")
def test_journal_replays_an_interrupted_calibration(tmp_path):
    objective = _paper_objective()
    path = tmp_path / "evals.jsonl"
    first = _Counting(objective)
    reference = _fit(first, batch=1, journal=search.Journal(path, {"run": 1}))
    assert first.sets == reference.evaluations
    written = path.read_text()
    lines = written.splitlines()
    assert json.loads(lines[0]) == {"fingerprint": {"run": 1}}
    assert len(lines) == 1 + reference.evaluations
    # A re-run with the same fingerprint simulates nothing but (at most) the best point's rows.
    again = _Counting(objective)
    _same_result(_fit(again, batch=4, journal=search.Journal(path, {"run": 1})), reference)
    assert again.batches == [] and again.calls <= 1 and again.sets <= 1
    assert path.read_text() == written  # nothing new to append
    # The same values in batches of one: the keys do not depend on the batching.
    again = _Counting(objective)
    _same_result(_fit(again, batch=1, journal=search.Journal(path, {"run": 1})), reference)
    assert again.batches == [] and again.sets <= 1
    # A different stage is a different key.
    assert search.Journal(path, {"run": 1}).get(2, SimParams()) is None
    assert search.Journal(path, {"run": 1}).get(1, SimParams()) == reference.start_objective
    # A cut last line (an interruption mid-write) is ignored: that evaluation runs again.
    cut = written[:-25]
    path.write_text(cut)
    resumed = _Counting(objective)
    _same_result(_fit(resumed, batch=4, journal=search.Journal(path, {"run": 1})), reference)
    assert resumed.batches == [1] and resumed.sets <= 2
    # Other settings replace the journal: nothing is replayed from it.
    other = search.Journal(path, {"run": 2})
    assert other.values == {}
    assert path.read_text().splitlines() == [json.dumps({"fingerprint": {"run": 2}})]
    assert search.Journal(path, {"run": 1}).values == {}


def test_journal_keeps_the_evaluation_that_replaced_a_cut_line(tmp_path):
    path = tmp_path / "evals.jsonl"
    journal = search.Journal(path, {"run": 1})
    a, b = SimParams(h0=0.1), SimParams(h0=0.2)
    journal.add(1, a, 1.5)
    journal.add(1, b, 2.5)
    path.write_text(path.read_text()[:-10])  # interrupted while writing b
    resumed = search.Journal(path, {"run": 1})
    assert resumed.get(1, a) == 1.5 and resumed.get(1, b) is None
    resumed.add(1, b, 2.5)  # b simulated again
    assert search.Journal(path, {"run": 1}).get(1, b) == 2.5


# --- band-scaled residuals ------------------------------------------------------------------------

def test_residuals_are_scaled_by_their_band_half_width():
    m = "Agent-Replan"
    pd = gilp_targets.Target(1, m, "pd", 2.0, 2.0)                                   # no band: 0.4 steps
    sr = gilp_targets.Target(1, m, "sr", 0.5, 4.0, band=(0.46, 0.54))               # band +-0.04
    iar = gilp_targets.Target(1, m, "iar", 0.10, 3.0, band=(0.0, 0.30))             # band +-0.15
    p_err = gilp_targets.Target(1, m, "p_err@1", 0.2, 1.0)                           # no band: 0.04
    assert gilp_targets.residual_scale(pd) == gilp_targets.PD_SCALE == 0.4
    assert gilp_targets.residual_scale(p_err) == gilp_targets.RATE_SCALE == 0.04
    assert gilp_targets.residual_scale(sr) == pytest.approx(0.04)
    assert gilp_targets.residual_scale(iar) == pytest.approx(0.15)
    assert gilp_targets.residual_scale(gilp_targets.Target(1, m, "pd", 2.0, 1.0, band=(1.0, 4.0))) == 1.5
    summary = {"pd": 2.4, "sr": 0.54, "iar": 0.40, "p_err": [{"p": 0.16}]}
    # One band's width off costs `weight` whatever the unit: PD (steps) and SR (a rate) alike.
    total, rows = gilp_targets.evaluate([pd, sr], {m: summary})
    assert total == pytest.approx(2.0 + 4.0)
    assert [r["z"] for r in rows] == pytest.approx([1.0, 1.0])
    assert [r["residual"] for r in rows] == pytest.approx([0.4, 0.04])
    assert [r["pass"] for r in rows] == [None, True]
    total, rows = gilp_targets.evaluate([iar, p_err], {m: summary})
    assert total == pytest.approx(3.0 * 2.0 ** 2 + 1.0 * 1.0 ** 2)
    assert [r["z"] for r in rows] == pytest.approx([2.0, -1.0])
    assert rows[0]["pass"] is False
    # An undefined value costs MISSING_PENALTY in the metric's units, i.e. weight/scale^2.
    total, rows = gilp_targets.evaluate([pd, sr, p_err], {m: {"pd": None, "sr": None, "p_err": []}})
    assert total == pytest.approx(gilp_targets.MISSING_PENALTY * (2.0 / 0.4 ** 2 + 4.0 / 0.04 ** 2
                                                        + 1.0 / 0.04 ** 2))
    assert all(r["value"] is None and r["residual"] is None and r["z"] is None for r in rows)
    total, _ = gilp_targets.evaluate([pd], {})  # the method itself missing
    assert total == pytest.approx(gilp_targets.MISSING_PENALTY * 2.0 / 0.4 ** 2)
    # A weight-0 row is reported (with its z) but costs nothing.
    total, rows = gilp_targets.evaluate([pd._replace(weight=0.0)], {m: summary})
    assert total == 0.0 and rows[0]["z"] == pytest.approx(1.0)


# --- residual file ------------------------------------------------------------------------------

def test_residual_file_has_every_row(tmp_path):
    setup = _setup()  # the same episode shapes as above: one compile
    targets = cal.drop_empty_buckets(gilp_targets.agent_targets(),
                                     np.asarray(setup.tasks["taskgraph"]["horizon"]))
    result = search.fit_stage(1, cal.stage_objective(setup, ["Agent-Replan"], targets), SimParams(),
                           cal.STAGE1_SPACE, sobol=0, nm_evals=0)
    rows3 = gilp_targets.relation_checks(result.summaries)
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
    "unknown_stage": ["--stages", "3"],
    "stages_not_numbers": ["--stages", "one"],
    "missing_start": ["--start", "FILES/none.json"],
    "malformed_start": ["--start", "FILES/bad.json"],
    "start_with_from_real": ["--start", "FILES/good.json", "--from-real", "REAL"],
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_usage_error_and_writes_nothing(tmp_path, name):
    (tmp_path / "REAL").mkdir()
    (tmp_path / "FILES").mkdir()
    (tmp_path / "FILES" / "bad.json").write_text("[1, 2]")
    (tmp_path / "FILES" / "good.json").write_text('{"c_tg": 0.8}')
    argv = [a.replace("REAL", str(tmp_path / "REAL")).replace("FILES", str(tmp_path / "FILES"))
            for a in BAD[name]]
    out = tmp_path / "out"
    work = tmp_path / "work"
    with pytest.raises(UsageError) as err:
        cmd_calibrate(_args(*argv, "--work", str(work), "--out", str(out)))
    assert "\n" not in str(err.value)
    assert not out.exists() and not work.exists()


def test_from_real_refits_stage_one_to_measured_episodes(tmp_path):
    from bsjax.gilp import events
    from bsjax.gilp.behaviour.run import records_to_events, run_simulated
    from bsjax.gilp.envs import registry
    from bsjax.gilp.training import workdir
    work, run_dir, out = tmp_path / "work", tmp_path / "real", tmp_path / "cal"
    tasks = workdir.tasks(work, "taskgraph", "val", 3)
    ids = [config.SPLIT_OFFSET["val"] + i for i in range(3)]  # real_tasks.TaskRef ids of val tasks
    # "Measured" episodes: the simulator at known parameters, written as a real run would be.
    run = run_simulated("Agent-Replan", registry.get("taskgraph"), None, tasks, (0, 1),
                        jax.random.key(0), SimParams(h0=0.3), CFG, task_ids=ids)
    run_dir.mkdir()
    events.write_events(run_dir / "events.jsonl", records_to_events(run))
    budget = cal.CalibrationBudget("test", tasks=3, seeds=2, sobol1=0, nm1=3, sobol2=0, nm2=0,
                                   token_prompts=1)
    doc = calibrate_real.calibrate_from_real(work, out, run_dir, budget, cfg=CFG)
    assert (out / "gilp_sim_params.local.json").is_file()
    assert (out / cal.LOCAL_RESIDUALS_FILE).is_file()
    assert not (out / cal.PARAMS_FILE).exists()
    assert doc["meta"]["stage1"]["objective"] <= doc["meta"]["stage1"]["start_objective"]
    assert {r["note"] for r in doc["rows"] if r["weight"] > 0} == {"measured"}


@pytest.mark.slow
def test_calibrate_end_to_end_keeps_agent_rows_in_stage_two_and_resumes(tmp_path):
    from bsjax.gilp.backbones import make_backbone
    budget = cal.CalibrationBudget("tiny", tasks=2, seeds=1, sobol1=1, nm1=1, sobol2=1, nm2=1,
                                   token_prompts=200, batch=4)
    models = {"taskgraph": make_backbone("MPNN", jax.random.key(0))}
    kwargs = dict(work=tmp_path / "w", benches=["taskgraph"], budget=budget, models=models,
                  cfg=CFG)
    doc = cal.calibrate(out=tmp_path / "out", **kwargs)
    stage2 = [r for r in doc["rows"] if r["stage"] == 2]
    # π is fitted in stage 2 and shared with Agent-Replan: its rows are in stage 2's objective.
    assert {r["method"] for r in stage2} == {"Agent-Replan", *gilp_targets.HYBRIDS}
    assert {"sr", "hsr", "iar"} <= {r["metric"] for r in stage2 if r["method"] == "Agent-Replan"}
    journal = (tmp_path / "out" / cal.JOURNAL_FILE).read_text().splitlines()
    assert len(journal) == 1 + doc["meta"]["stage1"]["evaluations"] + doc["meta"]["stage2"][
        "evaluations"]
    # A re-run replays every evaluation: same parameters, nothing appended.
    again = cal.calibrate(out=tmp_path / "out", **kwargs)
    assert again["params"] == doc["params"]
    assert (tmp_path / "out" / cal.JOURNAL_FILE).read_text().splitlines() == journal
    # --stages 2 --start: stage 1 keeps the start's values (one evaluation, for its rows).
    initial = SimParams(c_tg=0.77, q_rec=0.11)
    refit = cal.calibrate(out=tmp_path / "refit", initial=initial, stages=(2,), **kwargs)
    assert refit["meta"]["stage1"]["evaluations"] == 1
    assert (refit["params"]["c_tg"], refit["params"]["q_rec"]) == (0.77, 0.11)
    # --stages none: a check of the start point, nothing fitted.
    check = cal.calibrate(out=tmp_path / "check", initial=initial.replace(eta_in=0.4), stages=(),
                          **kwargs)
    assert check["meta"]["stage1"]["evaluations"] == check["meta"]["stage2"]["evaluations"] == 1
    assert (check["params"]["c_tg"], check["params"]["eta_in"]) == (0.77, 0.4)


def test_model_digest_tells_retrained_backbones_apart():
    from bsjax.gilp.backbones import make_backbone
    first = cal.model_digest(make_backbone("MLP", jax.random.key(0)))
    assert first == cal.model_digest(make_backbone("MLP", jax.random.key(0)))
    assert first != cal.model_digest(make_backbone("MLP", jax.random.key(1)))


def test_cli_summary_gives_one_verdict_per_band_the_latest(capsys, tmp_path):
    from bsjax.gilp.cli.calibrate import _print

    def row(stage, metric, ok):
        return {"stage": stage, "method": "Agent-Replan", "metric": metric, "pass": ok}
    doc = {"meta": {"stage1": {"objective": 1.0}, "seconds": 1.0},
           "rows": [row(1, "sr", False), row(1, "hsr", True), row(1, "pd", None)],
           "band_recheck": [row(3, "sr", True), row(3, "hsr", False)]}
    _print(doc, tmp_path / "p.json", as_json=False)
    assert "bands: 1/2 pass (failed: Agent-Replan hsr)" in capsys.readouterr().out


def test_stages_option_parses_subsets_of_one_and_two():
    from bsjax.gilp.cli.calibrate import _stages
    assert _stages("1,2") == _stages("2,1") == (1, 2)
    assert _stages("2") == (2,) and _stages("none") == ()
    for bad in ("", "0", "1,3", "two"):
        with pytest.raises(UsageError):
            _stages(bad)


def test_a_parameter_file_with_an_unknown_name_is_a_usage_error(tmp_path):
    from bsjax.gilp.cli.main import load_sim_params
    (tmp_path / "p.json").write_text('{"params": {"c_tg": 0.8, "not_a_parameter": 1}}')
    with pytest.raises(UsageError, match="bad simulator parameter file"):
        load_sim_params(tmp_path / "p.json", ["taskgraph"])
    (tmp_path / "q.json").write_text('{"params": {"c_tg": 0.8}}')
    assert load_sim_params(tmp_path / "q.json").c_tg == 0.8
