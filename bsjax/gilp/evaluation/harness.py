"""The GILP evaluation driver: methods × benchmarks × test splits → event files → tables
(docs/gilp/spec.md §4.1, §6, §7).

A run directory holds:

    OUT/run.json                              the configuration (profile, backbone, seeds, methods)
    OUT/events/METHOD__BENCH__SPLIT.jsonl      per-step event rows of one unit (written whole)
    OUT/summary.json                          metrics per method (pooled) and per benchmark/split
    OUT/table_N.md, OUT/table_N.csv           the spec's tables, rebuilt from the events alone

A unit (one method on one benchmark's split) is simulated in one jitted call and written
atomically, so an interrupted run loses at most the unit in flight and `--resume` skips every
unit already on disk. The same seed and config give byte-identical event files.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import jax

from bsjax.core import files
from bsjax.gilp import events, metrics, profiles
from bsjax.gilp.behaviour.params import params_digest, params_for
from bsjax.gilp.envs import registry
from bsjax.gilp.methods import get_method
from bsjax.gilp.training import workdir

EVAL_SPLITS = ("test_id", "test_ood")


def unit_path(out: Path, method: str, bench: str, split: str) -> Path:
    return Path(out) / "events" / f"{method}__{bench}__{split}.jsonl"


def config_changes(run_json: Path, config: dict) -> list[str]:
    """Keys of `config` whose value differs from the run recorded in `run_json` (none when there
    is no record): a resume under another configuration would mix two runs."""
    if not Path(run_json).is_file():
        return []
    previous = json.loads(Path(run_json).read_text())
    return sorted(k for k in config if previous.get(k) != config[k])


def eval_tasks(work: Path, bench: str, split: str, profile: profiles.Profile):
    n_id, n_ood = profile.test_tasks
    return workdir.tasks(work, bench, split, n_id if split == "test_id" else n_ood)


def run_unit(method_name: str, bench: str, split: str, tasks, model, seeds: Sequence[int],
             root_key: jax.Array, params=None) -> tuple[list[dict], float]:
    """Event rows of one method on one split's tasks (simulated agent or parametric planner)."""
    return run_units([method_name], bench, split, tasks, model, seeds, root_key, params)[
        get_method(method_name).name]


def run_units(method_names: Sequence[str], bench: str, split: str, tasks, model,
              seeds: Sequence[int], root_key: jax.Array, params=None, planner=None
              ) -> dict[str, tuple[list[dict], float]]:
    """Event rows and seconds of several methods on one split's tasks. The simulated LLM methods
    share one compiled simulator (`run_simulated_many`); parametric planners run one by one with
    `planner` settings (`ParametricConfig`, default the spec's)."""
    from bsjax.gilp.behaviour import run as behaviour_run
    rules = registry.get(bench)
    methods = [get_method(m) for m in method_names]
    out = {}
    simulated = [m for m in methods if m.parametric is None]
    if simulated:
        start = time.perf_counter()
        needs = any(m.uses_backbone for m in simulated)
        runs = behaviour_run.run_simulated_many(simulated, rules, model if needs else None, tasks,
                                          list(seeds), root_key, params)
        seconds = (time.perf_counter() - start) / len(simulated)
        for m, run in zip(simulated, runs):
            out[m.name] = (behaviour_run.records_to_events(run, "ood" if split == "test_ood" else "id"),
                           seconds)
    for m in methods:
        if m.parametric is not None:
            from bsjax.gilp.planners import parametric_episodes
            start = time.perf_counter()
            kw = {} if planner is None else {"params": planner}
            records = parametric_episodes.run_parametric(
                m.name, rules, model, tasks, list(seeds), root_key, **kw
            )
            out[m.name] = (
                parametric_episodes.records_to_events(records, m.name, rules, split, tasks),
                time.perf_counter() - start,
            )
    return out


def run(
    out: Path,
    work: Path,
    methods: Sequence[str],
    benches: Sequence[str],
    profile: profiles.Profile,
    backbone: str = "MPNN",
    seeds: int | None = None,
    run_seed: int = 0,
    params=None,
    resume: bool = False,
    progress: Callable[[str], None] | None = None,
    planner=None,
) -> dict:
    """Evaluate `methods` on the test splits of `benches`; returns the summary (also written).

    Backbone checkpoints must exist (`bsjax gilp train`); a missing one raises FileNotFoundError
    before anything is written. `planner` overrides the parametric planners' settings
    (`ParametricConfig`; recorded in run.json).
    """
    out, work = Path(out), Path(work)
    seeds = profile.seeds if seeds is None else seeds
    needs_backbone = any(get_method(m).uses_backbone for m in methods)
    models = {
        b: workdir.load_backbone(work, b, backbone, profile) if needs_backbone else None for b in benches
    }
    config = {
        "profile": profile.name,
        "backbone": backbone,
        "seeds": seeds,
        "run_seed": run_seed,
        "methods": list(methods),
        "benches": list(benches),
        "work": str(work),
        "planner": None if planner is None else dataclasses.asdict(planner),
        "params": params_digest(params),
    }
    out.mkdir(parents=True, exist_ok=True)
    run_json = out / "run.json"
    if resume and config_changes(run_json, config):
        raise ValueError(f"{out} holds a run with another configuration; use a new --out")
    run_json.write_text(json.dumps(config, indent=1) + "\n")
    root = jax.random.key(run_seed)
    wall = {}
    for bench in benches:
        for split in EVAL_SPLITS:
            todo = [m for m in methods if not (resume and unit_path(out, m, bench, split).exists())]
            if not todo:
                continue
            tasks = eval_tasks(work, bench, split, profile)
            units = run_units(
                todo,
                bench,
                split,
                tasks,
                models[bench],
                range(seeds),
                root,
                params_for(params, bench),
                planner,
            )
            for method in todo:
                rows, seconds = units[get_method(method).name]
                files.write_atomic(
                    unit_path(out, method, bench, split), lambda tmp: events.write_events(tmp, rows)
                )
                wall[f"{method}/{bench}/{split}"] = {
                    "seconds": round(seconds, 3),
                    "episodes": len({(r["task"], r["seed"]) for r in rows}),
                }
                if progress is not None:
                    progress(f"{method} / {bench} / {split}: {len(rows)} steps in {seconds:.1f} s")
    return report(out, wall)


# The JSON names of a method's headline metrics (the issue's) -> `metrics.summarise_method` keys.
JSON_METRICS = {
    "sr": "sr",
    "sr_ci": "sr_ci",
    "sr_h10": "sr_h10",
    "hsr": "hsr",
    "hsr_draft": "hsr_draft",
    "iar": "iar",
    "pd": "pd",
    "rwf": "rwf",
    "calls_per_step": "calls_step",
    "tok_task": "tok_task",
    "episodes": "episodes",
}


def method_json(stats: dict) -> dict:
    """A method's headline metrics under their JSON names (`--json` of `run` and `paper`)."""
    return {name: stats.get(key) for name, key in JSON_METRICS.items()}


def load_events(out: Path) -> list[dict]:
    rows = []
    for path in sorted((Path(out) / "events").glob("*.jsonl")):
        rows.extend(events.read_events(path))
    return rows


def wall_per_task(wall: dict) -> dict[str, float]:
    """Seconds per episode by method from the per-unit wall times (this run's units only)."""
    totals: dict[str, list[float]] = {}
    for key, unit in wall.items():
        seconds, episodes = totals.setdefault(key.split("/")[0], [0.0, 0])
        totals[key.split("/")[0]] = [seconds + unit["seconds"], episodes + unit["episodes"]]
    return {m: round(s / max(n, 1), 5) for m, (s, n) in totals.items()}


def report(out: Path, wall: dict | None = None) -> dict:
    """Rebuild summary.json and the tables from the event files of a run."""
    from bsjax.gilp.report import tables

    out = Path(out)
    rows = load_events(out)
    if not rows:
        raise ValueError(f"{out} holds no GILP event files")
    summary = {
        "pooled": metrics.summarise(rows),
        "by_benchmark": metrics.by_benchmark(rows),
        "by_split": metrics.by_split(rows),
    }
    previous = out / "summary.json"
    if previous.exists():  # units run before a resume keep their wall times
        wall = {**json.loads(previous.read_text()).get("wall", {}), **(wall or {})}
    summary["wall"] = {**(wall or {})}
    summary["wall_per_task"] = wall_per_task(summary["wall"])
    files.write_json_atomic(out / "summary.json", summary)
    tables.write_tables(summary["pooled"], out, wall=summary["wall_per_task"])
    return summary


__all__ = ["EVAL_SPLITS", "run", "run_unit", "run_units", "report", "load_events", "unit_path"]
