"""Calibration of the behavioural LLM simulator (docs/gilp/spec.md §5.2 "Calibration procedure",
"Acceptance bands"; `bsjax gilp calibrate`). Refitting to a local model: `behaviour.calibrate_real`.

- Token model: least squares on prompts rendered with the real templates (`token_model`).
- Stage 1: `{c_tg, t_slip, h0, h1, h2, q_fb, q_rec}` on Agent-Replan (val split).
- Stage 2: `{kappa_delta, eta_ground, kappa_rec, eta_val, eta_risk, eta_value, eta_in, pi_we,
  pi_dep}` on the five Hybrid variants (one `run_simulated_sweep` call per benchmark), stage 1
  frozen; π_fc and π_val are rescaled so π sums to 1. Agent-Replan's stage-1 rows stay in the
  objective because π is shared with it.
- Stage 3: GILP and its ablations as predictions (no free parameters), with the bands.

Each fitted stage is a Sobol search followed by Nelder–Mead in logit coordinates (parameters stay
inside their boxes; `search.fit_stage`). The root key is fixed, so every evaluation sees the same
common random numbers and the objective is a deterministic function of the parameters.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import jax
import numpy as np

from bsjax.gilp import config, metrics, profiles
from bsjax.gilp.behaviour import residuals, token_model
from bsjax.gilp.behaviour import targets as gilp_targets
from bsjax.gilp.behaviour.params import LOCAL_PARAMS_FILE, PARAMS_FILE, SimParams
from bsjax.gilp.behaviour.run import records_to_events, run_simulated_sweep
from bsjax.gilp.behaviour.search import Journal, Log, StageResult, fit_stage, with_values
from bsjax.gilp.envs import registry

RESIDUALS_FILE = "CALIBRATION_RESIDUALS.md"
LOCAL_RESIDUALS_FILE = "CALIBRATION_RESIDUALS.local.md"
# Every evaluation's objective, appended as it is computed: an interrupted calibration re-run
# with the same settings replays them instead of simulating again (the search is deterministic).
JOURNAL_FILE = "calibration_evals.jsonl"
OBJECTIVE = "weighted squared band-scaled residuals (targets.evaluate); stage 2 + agent rows, v3"
# (name, lo, hi): the box each fitted parameter stays in.
STAGE1_SPACE = (("c_tg", 0.5, 1.0), ("t_slip", 0.02, 2.0), ("h0", 0.0, 0.6), ("h1", 0.0, 0.6),
                ("h2", 0.0, 0.3), ("q_fb", 0.0, 1.0), ("q_rec", 0.0, 1.0))
STAGE2_SPACE = (("kappa_delta", 0.0, 1.0), ("eta_ground", 0.0, 1.0), ("kappa_rec", 0.0, 1.0),
                ("eta_val", 0.0, 1.0), ("eta_risk", 0.0, 1.0), ("eta_value", 0.0, 1.0),
                ("eta_in", 0.0, 1.0), ("pi_we", 0.0, 0.8), ("pi_dep", 0.0, 0.8))
STAGE2_METHODS = ("Agent-Replan", *gilp_targets.HYBRIDS)
STAGE3_METHODS = ("Agent-Replan", "Hybrid-Full", *gilp_targets.GILPS)


@dataclasses.dataclass(frozen=True)
class CalibrationBudget:
    """How much simulation a calibration spends.

    Attributes:
      name: preset name.
      tasks: val tasks per benchmark.
      seeds: episode seeds per task.
      sobol1, nm1: stage-1 Sobol points and Nelder–Mead evaluations.
      sobol2, nm2: the same for stage 2.
      token_prompts: prompts rendered for the token model (the spec asks for ≥ 2,000).
      ood_tasks: test-OOD tasks per benchmark for the stage-3 OOD check (0: not evaluated).
      batch: parameter sets simulated together (Sobol points, the initial simplex): one wide
        batch keeps an accelerator busy where one set's episodes would not.
    """

    name: str
    tasks: int
    seeds: int
    sobol1: int
    nm1: int
    sobol2: int
    nm2: int
    token_prompts: int = 2000
    ood_tasks: int = 0
    batch: int = 8

    def validate(self) -> None:
        for field in ("tasks", "seeds", "token_prompts", "batch"):
            if getattr(self, field) < 1:
                raise ValueError(f"calibration budget {field} must be positive "
                                 f"(got {getattr(self, field)})")
        for field in ("sobol1", "nm1", "sobol2", "nm2", "ood_tasks"):
            if getattr(self, field) < 0:
                raise ValueError(f"calibration budget {field} must be non-negative")

    def with_evals(self, evals: int) -> CalibrationBudget:
        """Every fitted stage gets `evals` evaluations: a quarter Sobol, the rest Nelder–Mead."""
        if evals < 1:
            raise ValueError(f"--evals must be positive (got {evals})")
        sobol = evals // 4
        return dataclasses.replace(self, sobol1=sobol, nm1=evals - sobol, sobol2=sobol,
                                   nm2=evals - sobol)


BUDGETS = {
    "smoke": CalibrationBudget("smoke", tasks=2, seeds=1, sobol1=1, nm1=2, sobol2=0, nm2=1,
                               token_prompts=400),
    "quick": CalibrationBudget("quick", tasks=4, seeds=1, sobol1=2, nm1=4, sobol2=0, nm2=2),
    # What a 2-core CPU fits in about half an hour: stage 1 searched on 24 val tasks x 2 seeds
    # per benchmark, stage 2 evaluated at its start point only.
    "standard": CalibrationBudget("standard", tasks=24, seeds=2, sobol1=24, nm1=60, sobol2=0,
                                  nm2=0, ood_tasks=8),
    # What one GPU fits in about twenty minutes (an interrupted run resumes from its journal):
    # the whole val split with two seeds, 128 Sobol points + 100 Nelder-Mead steps for stage 1,
    # a smaller search for the five-method stage 2.
    "gpu": CalibrationBudget("gpu", tasks=100, seeds=2, sobol1=128, nm1=100, sobol2=8, nm2=16,
                             ood_tasks=40, batch=32),
    "paper": CalibrationBudget("paper", tasks=100, seeds=8, sobol1=256, nm1=200, sobol2=64,
                               nm2=200, ood_tasks=40, batch=32),
}


def get_budget(profile: str, evals: int | None = None) -> CalibrationBudget:
    if profile not in BUDGETS:
        raise ValueError(f"unknown profile {profile!r} (choose from {', '.join(BUDGETS)})")
    budget = BUDGETS[profile]
    return budget if evals is None else budget.with_evals(evals)


@dataclasses.dataclass
class SimSetup:
    """What every evaluation runs on (fixed for the whole calibration: common random numbers).

    Attributes:
      tasks: `{bench: stacked val tasks}`.
      models: `{bench: backbone}` (None entries for stage 1 / --from-real).
      seeds: episode seeds.
      root_key: typed root key.
      ood_tasks: `{bench: stacked test-OOD tasks}` for the stage-3 check (may be empty).
      task_ids: `{bench: ids}` written to events (None: 0..T-1).
      cfg: static simulator configuration (tests use a short value horizon).
    """

    tasks: dict
    models: dict
    seeds: tuple[int, ...]
    root_key: jax.Array
    ood_tasks: dict = dataclasses.field(default_factory=dict)
    task_ids: dict = dataclasses.field(default_factory=dict)
    cfg: config.GilpConfig = config.GilpConfig()


def simulate_sweep(setup: SimSetup, methods: Sequence[str], params_sets: Sequence[SimParams],
                   ood: bool = False) -> list[dict[str, dict]]:
    """`metrics.summarise` of the methods pooled over benchmarks, one dict per parameter set
    (one `run_simulated_sweep` call per benchmark and split). With `ood`, test-OOD episodes are
    summarised apart as "M (ood)"."""
    rows = [[] for _ in params_sets]
    ood_rows = [[] for _ in params_sets]
    for bench, tasks in setup.tasks.items():
        rules = registry.get(bench)
        sweep = run_simulated_sweep(methods, rules, setup.models.get(bench), tasks, setup.seeds,
                                    setup.root_key, params_sets, setup.cfg,
                                    task_ids=setup.task_ids.get(bench))
        for p, runs in enumerate(sweep):
            for run in runs:
                rows[p] += records_to_events(run, "id")
        if ood and bench in setup.ood_tasks:
            sweep = run_simulated_sweep(methods, rules, setup.models.get(bench),
                                        setup.ood_tasks[bench], setup.seeds, setup.root_key,
                                        params_sets, setup.cfg)
            for p, runs in enumerate(sweep):
                for run in runs:
                    ood_rows[p] += records_to_events(run, "ood")
    out = []
    for id_rows, o_rows in zip(rows, ood_rows):
        summary = metrics.summarise(id_rows)
        for method, s in metrics.summarise(o_rows).items():
            summary[f"{method} (ood)"] = s
        out.append(summary)
    return out


def simulate(setup: SimSetup, methods: Sequence[str], params: SimParams,
             ood: bool = False) -> dict[str, dict]:
    """`simulate_sweep` of one parameter set."""
    return simulate_sweep(setup, methods, [params], ood)[0]


# --- stage objectives ----------------------------------------------------------------------------

class StageObjective:
    """`params -> (objective, residual rows, summaries)` of one stage; `many(sets)` evaluates
    several parameter sets in one batched simulation."""

    def __init__(self, setup: SimSetup, methods: Sequence[str], targets: list[gilp_targets.Target]):
        self.setup, self.methods, self.targets = setup, list(methods), targets

    def many(self, params_sets: Sequence[SimParams]) -> list[tuple[float, list[dict], dict]]:
        out = []
        for summaries in simulate_sweep(self.setup, self.methods, params_sets):
            value, rows = gilp_targets.evaluate(self.targets, summaries)
            out.append((value, rows, summaries))
        return out

    def __call__(self, params: SimParams) -> tuple[float, list[dict], dict]:
        return self.many([params])[0]


def stage_objective(setup: SimSetup, methods: Sequence[str],
                    targets: list[gilp_targets.Target]) -> StageObjective:
    """The objective of one stage (`StageObjective`)."""
    return StageObjective(setup, methods, targets)


def agent_objective(setup: SimSetup, targets: list[gilp_targets.Target] | None = None) -> StageObjective:
    """Stage 1's objective: Agent-Replan (no backbone) against `targets` (default the paper's,
    `TG.agent_targets()`), horizon buckets without a task of `setup.tasks` dropped."""
    horizons = np.concatenate([np.asarray(t["horizon"]) for t in setup.tasks.values()])
    targets = gilp_targets.agent_targets() if targets is None else targets
    return stage_objective(dataclasses.replace(setup, models={}), ["Agent-Replan"],
                           drop_empty_buckets(targets, horizons))


def model_digest(model) -> str:
    """SHA-256 of a backbone's array leaves: a retrained checkpoint is a different journal."""
    import hashlib

    import equinox as eqx
    digest = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array)):
        digest.update(np.ascontiguousarray(np.asarray(leaf)).tobytes())
    return digest.hexdigest()


def stage2_targets(agent_rows: list[gilp_targets.Target]) -> list[gilp_targets.Target]:
    """Stage 2's rows: the Hybrid targets plus Agent-Replan's stage-1 rows (as stage 2)."""
    return gilp_targets.hybrid_targets() + [t._replace(stage=2) for t in agent_rows]


def drop_empty_buckets(targets: list[gilp_targets.Target], horizons: np.ndarray) -> list[gilp_targets.Target]:
    """Bucket-SR rows whose bucket holds none of the tasks get weight 0 (reported as n/a):
    the val split's ID horizons never exceed 10, so SR(H>10) cannot be fitted on it."""
    out = []
    for t in targets:
        if t.metric.startswith("sr@"):
            lo, hi = config.HORIZON_BUCKETS[config.HORIZON_BUCKET_NAMES.index(t.metric[3:])]
            if not np.any((horizons >= lo) & (horizons <= hi)):
                t = t._replace(weight=0.0, note=(t.note + "; no val task in this bucket").lstrip("; "))
        out.append(t)
    return out


# --- the token model ---------------------------------------------------------------------------

def fit_tokens(task_sets: Mapping[str, Mapping[str, np.ndarray]], n_prompts: int,
               tokenizer: Callable[[str], float] = token_model.char_tokens, seed: int = 0) -> dict:
    """The token model on `n_prompts` rendered prompts: the pooled fit (its coefficients go
    into the parameters) and one fit per benchmark (the formula has no benchmark term, and
    prompts of different benchmarks spend different tokens per node; `load_params(path, bench)`
    applies a benchmark's own coefficients)."""
    samples = token_model.render_all(task_sets, n_prompts, seed, tokenizer)
    fit = token_model.fit_token_model(samples)
    per_bench, coefs_per_bench = {}, {}
    benches = np.asarray(samples.bench)
    for bench in task_sets:
        keep = benches == bench
        part = token_model.TokenSamples(*(getattr(samples, f)[keep] for f in
                                 ("call_type", "n_real", "n_cands", "n_rows", "history",
                                  "tokens")), bench=tuple(benches[keep]))
        bench_fit = token_model.fit_token_model(part)
        per_bench[bench], coefs_per_bench[bench] = bench_fit.r2, bench_fit.coefs
    return {"coefs": fit.coefs, "r2": fit.r2, "rmse": fit.rmse, "prompts": fit.n,
            "mean_tokens": fit.mean_tokens, "r2_per_bench": per_bench,
            "coefs_per_bench": coefs_per_bench}


# --- orchestration ------------------------------------------------------------------------------

def _val_tasks(work: Path, benches: Sequence[str], count: int, split: str = "val") -> dict:
    from bsjax.gilp.training import workdir
    return {b: workdir.tasks(Path(work), b, split, count) for b in benches}


def run_meta(budget: CalibrationBudget, benches, seconds: float, **extra) -> dict:
    """The `meta` block of a calibration document: budget, benchmarks, sizes, seconds, extras."""
    return {"budget": dataclasses.asdict(budget), "benchmarks": list(benches),
            "tasks_per_bench": budget.tasks, "seeds": budget.seeds,
            "seconds": round(seconds, 2), **extra}


def _search(stage: int, stages: Sequence[int], sobol: int, nm: int) -> tuple[int, int]:
    """(Sobol points, Nelder–Mead evaluations) of a stage: none for a stage not searched."""
    return (sobol, nm) if stage in stages else (0, 0)


def calibrate(work: str | Path, out: str | Path, benches: Sequence[str],
              budget: CalibrationBudget, backbone: str = "MPNN", profile: str = "quick",
              models: Mapping | None = None, tokenizer: Callable[[str], float] = token_model.char_tokens,
              run_seed: int = 0, cfg: config.GilpConfig = config.GilpConfig(),
              initial: SimParams | None = None, stages: Sequence[int] = (1, 2),
              log: Log = lambda line: None) -> dict:
    """The full calibration (token model, stages 1-3); writes `gilp_sim_params.json` and
    `CALIBRATION_RESIDUALS.md` under `out` and returns the result document.

    Args:
      work: GILP work directory (val tasks; trained checkpoints unless `models` is given).
      out: output directory.
      benches: benchmarks to pool.
      budget: `CalibrationBudget`.
      backbone, profile: which checkpoints to load (`workdir.load_backbone`).
      models: `{bench: model}` overriding the checkpoints (tests).
      tokenizer: text -> tokens for the token model (default len/4).
      run_seed: root key of every evaluation (common random numbers).
      cfg: static simulator configuration (value horizon, skeleton size).
      initial: the search's start point (default: the spec's initial values); its token-model
        coefficients are replaced by the fresh fit.
      stages: the stages searched; a stage left out keeps `initial`'s values (it is evaluated once,
        for its residual rows), e.g. `(2,)` refits the skeleton parameters of an earlier fit and
        `()` checks a parameter set against every target and band without fitting.
      log: progress lines.
    """
    from bsjax.gilp.training import workdir
    budget.validate()
    if not set(stages) <= {1, 2}:
        raise ValueError(f"stages must be a subset of 1,2 (got {list(stages)})")
    start = time.perf_counter()
    if models is None:
        prof = profiles.get_profile(profile)
        models = {b: workdir.load_backbone(Path(work), b, backbone, prof) for b in benches}
    tasks = _val_tasks(work, benches, budget.tasks)
    ood = _val_tasks(work, benches, budget.ood_tasks, "test_ood") if budget.ood_tasks else {}
    setup = SimSetup(tasks=tasks, models=dict(models), seeds=tuple(range(budget.seeds)),
                     root_key=jax.random.key(run_seed), ood_tasks=ood, cfg=cfg)

    log(f"token model: rendering {budget.token_prompts} prompts")
    tokens = fit_tokens(tasks, budget.token_prompts, tokenizer)
    log(f"token model: R² {tokens['r2']:.4f} on {tokens['prompts']} prompts")
    params = (initial if initial is not None else SimParams()).replace(**tokens["coefs"])

    # What an evaluation depends on (not the search sizes: a re-run with a longer or shorter
    # search replays whatever points the two share).
    journal = Journal(Path(out) / JOURNAL_FILE, {
        "tasks": budget.tasks, "seeds": budget.seeds, "token_prompts": budget.token_prompts,
        "benchmarks": list(benches), "backbone": backbone,
        "models": {b: model_digest(m) for b, m in sorted(dict(models).items())},
        "profile": profile, "run_seed": run_seed, "cfg": repr(cfg), "objective": OBJECTIVE})
    objective1 = agent_objective(setup)
    targets1 = objective1.targets
    stage1 = fit_stage(1, objective1, params, STAGE1_SPACE,
                       *_search(1, stages, budget.sobol1, budget.nm1),
                       log=log, batch=budget.batch, journal=journal)
    params = with_values(params, stage1.values)
    # Stage 2 fits the hallucination type mix π, which Agent-Replan shares: its stage-1 rows
    # stay in the objective so that π cannot move it out of its bands (bsjax choice; without
    # them a GPU fit left Agent-Replan's re-checked SR 0.007 over its band).
    stage2 = fit_stage(2, stage_objective(setup, STAGE2_METHODS, stage2_targets(targets1)),
                       params, STAGE2_SPACE, *_search(2, stages, budget.sobol2, budget.nm2),
                       log=log, batch=budget.batch, journal=journal)
    params = with_values(params, stage2.values)

    log("stage 3: GILP and its ablations (predictions)")
    t3 = time.perf_counter()
    summaries3 = simulate(setup, STAGE3_METHODS, params, ood=bool(ood))
    _, rows3 = gilp_targets.evaluate(gilp_targets.gilp_checks(bool(ood)), summaries3)
    rows3 += gilp_targets.relation_checks(summaries3)
    # The fitted bands are re-checked on the stage-3 run (same episodes, final parameters).
    _, recheck = gilp_targets.evaluate(
        [
            t._replace(stage=3, weight=0.0)
            for t in targets1 + gilp_targets.hybrid_targets()
            if t.band is not None and t.method in summaries3
        ],
        summaries3,
    )
    stage3_seconds = time.perf_counter() - t3
    doc = residuals.document(
        params,
        tokens,
        [stage1, stage2],
        rows3,
        recheck,
        summaries3,
        run_meta(
            budget,
            benches,
            time.perf_counter() - start,
            backbone=backbone,
            stages=list(stages),
            initial=initial is not None,
            profile=profile,
            run_seed=run_seed,
            ood_evaluated=bool(ood),
            stage3_seconds=round(stage3_seconds, 2),
        ),
    )
    residuals.write_outputs(Path(out), doc, PARAMS_FILE, RESIDUALS_FILE)
    log(f"wrote {Path(out) / PARAMS_FILE} and {Path(out) / RESIDUALS_FILE}")
    return doc


__all__ = [
    "BUDGETS",
    "LOCAL_PARAMS_FILE",
    "PARAMS_FILE",
    "CalibrationBudget",
    "Journal",
    "SimSetup",
    "StageObjective",
    "StageResult",
    "agent_objective",
    "calibrate",
    "fit_stage",
    "fit_tokens",
    "get_budget",
    "model_digest",
    "run_meta",
    "simulate",
    "simulate_sweep",
    "stage2_targets",
    "stage_objective",
    "with_values",
]
