"""Refitting the behavioural simulator to a local model (docs/gilp/spec.md §5.2 "Refitting to a local
model"; `bsjax gilp calibrate --from-real RUN`): stage 1 fitted to the Agent-Replan episodes of a
real-LLM run, on the tasks they ran on, every other parameter kept from a base set."""

from __future__ import annotations

import time
from pathlib import Path

import jax
import numpy as np

from bsjax.gilp import config, metrics
from bsjax.gilp.behaviour import calibrate as cal
from bsjax.gilp.behaviour import residuals
from bsjax.gilp.behaviour import targets as gilp_targets
from bsjax.gilp.behaviour.params import LOCAL_PARAMS_FILE, SimParams
from bsjax.gilp.behaviour.search import Log, fit_stage, with_values


def real_targets_and_tasks(work: str | Path, run_dir: str | Path) -> tuple[list, dict, dict]:
    """Stage-1 targets from a real run's Agent-Replan episodes, and the tasks they ran on
    (`{bench: stacked arrays}`, `{bench: event task ids}`)."""
    from bsjax.gilp import events
    from bsjax.gilp.training import workdir
    rows = events.read_events(Path(run_dir) / "events.jsonl")
    agent = [r for r in rows if r["method"] == "Agent-Replan"]
    if not agent:
        raise ValueError(f"{run_dir}/events.jsonl has no Agent-Replan episodes")
    summary = metrics.summarise(agent)["Agent-Replan"]
    tasks, ids = {}, {}
    for bench in sorted({r["bench"] for r in agent}, key=config.BENCHMARKS.index):
        refs = sorted({(r["split"], r["task"]) for r in agent if r["bench"] == bench})
        picked = []
        for split, task in refs:  # real_tasks.TaskRef ids: val tasks are offset, test ones are not
            source = ("val" if task >= config.SPLIT_OFFSET["val"] else
                      "test_ood" if split == "ood" else "test_id")
            index = task - config.SPLIT_OFFSET["val"] if source == "val" else task
            arrays = workdir.tasks(Path(work), bench, source, index + 1)
            picked.append({k: v[index] for k, v in arrays.items()})
        tasks[bench] = {k: np.stack([p[k] for p in picked]) for k in picked[0]}
        ids[bench] = [task for _, task in refs]
    return gilp_targets.agent_targets(summary), tasks, ids


def calibrate_from_real(work: str | Path, out: str | Path, run_dir: str | Path,
                        budget: cal.CalibrationBudget, base: SimParams | None = None,
                        run_seed: int = 0, cfg: config.GilpConfig = config.GilpConfig(),
                        log: Log = lambda line: None) -> dict:
    """Refit stage 1 to measured real-path Agent-Replan episodes (spec "Refitting to a local
    model"); other parameters come from `base` (the paper-calibrated set when given). Writes
    `gilp_sim_params.local.json` and `CALIBRATION_RESIDUALS.local.md`."""
    budget.validate()
    start = time.perf_counter()
    targets, tasks, ids = real_targets_and_tasks(work, run_dir)
    setup = cal.SimSetup(tasks=tasks, models={}, seeds=tuple(range(budget.seeds)),
                         root_key=jax.random.key(run_seed), task_ids=ids, cfg=cfg)
    objective = cal.agent_objective(setup, targets)
    base = SimParams() if base is None else base
    stage1 = fit_stage(1, objective, base, cal.STAGE1_SPACE, budget.sobol1, budget.nm1, log=log,
                       batch=budget.batch)
    params = with_values(base, stage1.values)
    doc = residuals.document(params, None, [stage1], [], [], stage1.summaries,
                     cal.run_meta(budget, list(tasks), time.perf_counter() - start,
                                  from_real=str(run_dir), run_seed=run_seed))
    residuals.write_outputs(Path(out), doc, LOCAL_PARAMS_FILE, cal.LOCAL_RESIDUALS_FILE)
    log(f"wrote {Path(out) / LOCAL_PARAMS_FILE}")
    return doc


__all__ = ["calibrate_from_real", "real_targets_and_tasks"]
