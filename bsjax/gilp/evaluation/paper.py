"""`bsjax gilp paper`: the whole GILP pipeline in one command (docs/gilp/spec.md §7).

generate → train backbones → (calibrate) → evaluate every method on the test splits → the
backbone comparison (Table 4) → the τ_low sweep on val (Table 5b) → tables and figures.

Every stage writes files and skips work already on disk, so an interrupted run resumes: tasks,
labelled data and checkpoints live in the work directory (`training.workdir`), evaluation units in the
run's `main/` and `backbones/NAME/` directories (`harness.gilp`), the sweep in `tau_sweep.json`.

Layout of `OUT`:

    OUT/plan.json                    the plan (profile, benchmarks, backbones, methods)
    OUT/calibration/                 gilp_sim_params.json + CALIBRATION_RESIDUALS.md (if calibrated)
    OUT/main/                        the 13 methods + Oracle with the MPNN backbone (events, summary)
    OUT/backbones/NAME/              MPC and Hybrid-Full with backbone NAME (Table 4)
    OUT/tau_sweep.json               GILP on val for each τ_low (Table 5b)
    OUT/table_N.md|csv, OUT/f*.png   the tables and figures
    OUT/result.json                  the JSON summary (`--json` prints it as the last line)
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import numpy as np

from bsjax.core import files
from bsjax.gilp import config, metrics
from bsjax.gilp.behaviour.params import params_for
from bsjax.gilp.methods import METHOD_NAMES, get_method, with_tau_low
from bsjax.gilp.profiles import ALL_BACKBONES, Profile
from bsjax.gilp.training import workdir

Log = Callable[[str], None]
MAIN_BACKBONE = "MPNN"


def train_all(work: Path, benches: Sequence[str], profile: Profile, log: Log) -> dict:
    """Train (or load) every planned backbone on every benchmark; `{bench: {name: summary}}`."""
    trained: dict[str, dict] = {}
    for bench in benches:
        for name in profile.backbones:
            log(f"train {bench} / {name} ({profile.name})")
            trained.setdefault(bench, {})[name] = workdir.train(work, bench, name, profile)
    return trained


def _backbone_row(summaries: list[dict]) -> dict:
    """Table 4's backbone metrics pooled over benchmarks (means weighted by held-out samples is
    not recorded per metric, so benchmarks count equally)."""
    def mean(split: str, key: str):
        values = [s["metrics"][split].get(key) for s in summaries]
        values = [v for v in values if v is not None and not np.isnan(v)]
        return float(np.mean(values)) if values else None
    return {"params": summaries[0]["params"], "node_mse": mean("pooled", "node_mse"),
            "delta_acc_all": mean("pooled", "delta_acc_all"),
            "delta_acc_changed": mean("pooled", "delta_acc_changed"),
            "valid_acc": mean("pooled", "valid_acc"), "trans_acc": mean("pooled", "trans_acc"),
            "trans_acc_id": mean("id", "trans_acc"), "trans_acc_ood": mean("ood", "trans_acc"),
            "train_seconds": float(sum(s["train_seconds"] for s in summaries)),
            "steps_per_second": float(np.mean([s["steps_per_second"] for s in summaries]))}


def _planner_cells(pooled: dict) -> dict:
    mpc, hybrid = pooled.get("Parametric-WM-MPC", {}), pooled.get("Hybrid-Full", {})
    return {"standalone_sr": mpc.get("sr"), "hybrid_sr": hybrid.get("sr"),
            "hybrid_hsr": hybrid.get("hsr")}


def table4_runs(out: Path, work: Path, names: Sequence[str], benches: Sequence[str],
                profile, params, seeds: int | None = None, run_seed: int = 0, planner=None,
                log: Log = lambda line: None) -> dict:
    """Table 4's planner runs: standalone Parametric-WM-MPC and Hybrid-Full with each backbone
    in `names`, under OUT/backbones/NAME (resumed when present); `{name: run summary}`."""
    from bsjax.gilp.evaluation import harness
    runs = {}
    for name in names:
        log(f"Table 4: planners with {name}")
        runs[name] = harness.run(Path(out) / "backbones" / name, work,
                                 ["Parametric-WM-MPC", "Hybrid-Full"], benches, profile, name,
                                 seeds=seeds, run_seed=run_seed, params=params, resume=True,
                                 progress=log, planner=planner)
        # Each backbone compiles its own planners and simulator, and no later backbone can
        # reuse them: dropping them keeps a six-backbone run's memory at one backbone's.
        jax.clear_caches()
    return runs


def backbone_table(trained: dict, planner_runs: dict) -> dict:
    """Table 4's input: `{scope: {backbone: row}}` with scope a benchmark or "pooled"."""
    table: dict[str, dict] = {"pooled": {}}
    names = sorted({n for per in trained.values() for n in per}, key=ALL_BACKBONES.index)
    for name in names:
        summaries = [per[name] for per in trained.values() if name in per]
        runs = planner_runs.get(name)
        table["pooled"][name] = {**_backbone_row(summaries),
                                 **(_planner_cells(runs["pooled"]) if runs else {})}
        for bench, per in trained.items():
            if name in per:
                # A run summary's by_benchmark is {method: {bench: metrics}}.
                cells = _planner_cells({m: per_bench.get(bench, {}) for m, per_bench
                                        in runs["by_benchmark"].items()}) if runs else {}
                table.setdefault(bench, {})[name] = {**_backbone_row([per[name]]), **cells}
    return table


def tau_sweep(out: Path, work: Path, benches: Sequence[str], profile: Profile, params,
              run_seed: int, log: Log) -> dict:
    """GILP on val for each τ_low (Table 5b); all points share one compiled simulator."""
    from bsjax.gilp.behaviour import run as behaviour_run
    from bsjax.gilp.envs import registry
    path = out / "tau_sweep.json"
    if path.exists():
        return {float(k): v for k, v in json.loads(path.read_text()).items()}
    points = [with_tau_low(get_method("GILP"), tau) for tau in profile.tau_lows]
    rows: dict[float, list] = {tau: [] for tau in profile.tau_lows}
    for bench in benches:
        log(f"tau_low sweep on {bench} val ({len(points)} values)")
        model = workdir.load_backbone(work, bench, MAIN_BACKBONE, profile)
        tasks = workdir.tasks(work, bench, "val", profile.sweep_tasks)
        runs = behaviour_run.run_simulated_many(points, registry.get(bench), model, tasks,
                                          range(profile.sweep_seeds), jax.random.key(run_seed),
                                          params_for(params, bench))
        for tau, run in zip(profile.tau_lows, runs):
            rows[tau].extend(behaviour_run.records_to_events(run, "id"))
    sweep = {tau: metrics.summarise_method(r, tau_low=tau) for tau, r in rows.items()}
    files.write_json_atomic(path, {str(k): v for k, v in sweep.items()})
    return sweep


def result_json(summary: dict, backbones: dict, seconds: float, extra: dict) -> dict:
    """The `--json` document: methods (pooled §6.2 metrics) and backbones (pooled Table 4)."""
    from bsjax.gilp.evaluation.harness import method_json
    return {"methods": {m: method_json(s) for m, s in summary["pooled"].items()},
            "backbones": {name: {"trans_acc": row.get("trans_acc"),
                                 "delta_acc": row.get("delta_acc_all"),
                                 "valid_acc": row.get("valid_acc"), "params": row.get("params"),
                                 "trans_acc_id": row.get("trans_acc_id"),
                                 "trans_acc_ood": row.get("trans_acc_ood"),
                                 "standalone_sr": row.get("standalone_sr"),
                                 "hybrid_sr": row.get("hybrid_sr"),
                                 "hybrid_hsr": row.get("hybrid_hsr"),
                                 "train_seconds": row.get("train_seconds"),
                                 "steps_per_second": row.get("steps_per_second")}
                          for name, row in backbones.get("pooled", {}).items()},
            "seconds": round(seconds, 1), **extra}


def run_paper(out: Path, work: Path, profile: Profile, benches: Sequence[str] = config.BENCHMARKS,
              run_seed: int = 0, params_file: str | Path | None = None, resume: bool = False,
              log: Log = lambda line: None) -> dict:
    """Run the pipeline; returns the result document (also `OUT/result.json`)."""
    from bsjax.gilp.evaluation import harness
    from bsjax.gilp.report import figures as gilp_figures
    from bsjax.gilp.report import tables as gilp_tables
    start = time.perf_counter()
    say = log
    log = lambda line: say(f"[{time.perf_counter() - start:6.0f} s] {line}")  # noqa: E731
    out, work = Path(out), Path(work)
    plan_doc = {"plan": dataclasses.asdict(profile), "benches": list(benches), "run_seed": run_seed,
                "params_file": None if params_file is None else str(params_file),
                "work": str(work)}
    plan_doc = json.loads(json.dumps(plan_doc))  # tuples -> lists, as read back from disk
    plan_path = out / "plan.json"
    if plan_path.exists():
        if not resume:
            raise ValueError(f"{out} already holds a GILP paper run (use --resume or a new --out)")
        if json.loads(plan_path.read_text()) != plan_doc:
            raise ValueError(f"{out} holds a run with another plan; use a new --out")
    files.write_json_atomic(plan_path, plan_doc)
    stages: dict[str, float] = {}

    def stage(name: str, tick: float) -> None:
        stages[name] = round(time.perf_counter() - tick, 1)

    tick = time.perf_counter()
    trained = train_all(work, benches, profile, log)
    stage("train", tick)

    tick = time.perf_counter()
    params = None
    if params_file is not None:
        from bsjax.gilp.behaviour.params import load_params
        params = {bench: load_params(params_file, bench) for bench in benches}
    elif profile.calibrate is not None:
        from bsjax.gilp.behaviour import calibrate as cal
        from bsjax.gilp.behaviour.params import PARAMS_FILE, load_params
        cal_dir = out / "calibration"
        if not (cal_dir / PARAMS_FILE).exists():
            cal.calibrate(work, cal_dir, benches, cal.get_budget(profile.calibrate), MAIN_BACKBONE,
                          profile.name, log=log)
        params = {bench: load_params(cal_dir / PARAMS_FILE, bench) for bench in benches}
    stage("calibrate", tick)

    tick = time.perf_counter()
    methods = [*METHOD_NAMES, "Oracle"]
    summary = harness.run(out / "main", work, methods, benches, profile, MAIN_BACKBONE,
                          run_seed=run_seed, params=params, resume=True, progress=log,
                          planner=profile.planner)
    stage("evaluate", tick)

    tick = time.perf_counter()
    planner_runs = {MAIN_BACKBONE: summary, **table4_runs(
        out, work, [n for n in profile.table4_backbones if n != MAIN_BACKBONE], benches, profile,
        params, run_seed=run_seed, planner=profile.planner, log=log)}
    backbones = backbone_table(trained, planner_runs)
    files.write_json_atomic(out / "backbones.json", backbones)
    stage("table4", tick)

    tick = time.perf_counter()
    sweep = tau_sweep(out, work, benches, profile, params, run_seed, log)
    stage("tau_sweep", tick)

    tick = time.perf_counter()
    gilp_tables.write_tables(summary["pooled"], out, tau_sweep=sweep,
                             wall=summary.get("wall_per_task"), backbones=backbones)
    figures = gilp_figures.write_figures(out / "main", out, backbones=backbones)
    stage("report", tick)
    result = result_json(summary, backbones, time.perf_counter() - start,
                         {"out": str(out), "profile": profile.name, "benches": list(benches),
                          "stages": stages, "calibrated": params is not None,
                          "figures": [p.name for p in figures]})
    files.write_json_atomic(out / "result.json", result)
    return result


__all__ = ["backbone_table", "result_json", "run_paper",
           "tau_sweep", "train_all"]
