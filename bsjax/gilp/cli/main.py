"""`bsjax gilp ...`: the graph-planning domain's commands (docs/gilp/spec.md §7, §8).

Bad input gives one line on stderr and exit code 2 before anything is written; `--json` prints
one JSON object as the last stdout line; progress goes to stderr.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from bsjax.core import checks
from bsjax.core.errors import UsageError
from bsjax.core.progress import GameProgress
from bsjax.gilp import config as gilp_config
from bsjax.gilp import profiles
from bsjax.gilp.cli.args import (
    load_sim_params,
    parse_backbones,
    parse_benchmarks,
    parse_methods,
    parse_splits,
)

DEFAULT_WORK = Path("results/gilp")
DEFAULT_TASK_DIR = DEFAULT_WORK / "tasks"
MAX_TASKS = 100_000   # --count: tasks per split (the spec's largest split holds 500)
MAX_SEEDS = 1_000     # --seeds: seeds per task (the paper profile runs 8)
MAX_JOBS = 64         # --jobs: training processes at once


def cmd_generate(args) -> int:
    """Generate (or, with --resume, complete) the task splits as checksummed .npz files."""
    from bsjax.gilp.data import generate
    benches, splits = parse_benchmarks(args.bench), parse_splits(args.splits)
    if args.count is not None:
        checks.int_in(args.count, "--count", 1, MAX_TASKS)
    out = checks.writable_dir(args.out, "--out")
    if out.exists() and not args.resume and any(out.glob("*.npz")):
        raise UsageError(f"{out} already holds task files (use --resume to keep them or a new --out)")
    jobs = [(b, s) for b in benches for s in splits]
    sizes = {(b, s): args.count or gilp_config.SPLIT_SIZES[s] for b, s in jobs}
    if args.resume:  # a kept split must be the one asked for: never overwritten silently
        for bench, split in jobs:
            path = out / f"{bench}_{split}.npz"
            try:
                count = generate.load_split(path)[1]["count"] if path.exists() else None
            except generate.TaskFileError:
                count = None  # a damaged file is regenerated
            if count is not None and count != sizes[(bench, split)]:
                raise UsageError(f"{path} holds {count} tasks, not the {sizes[(bench, split)]} "
                                 "asked for: resume with the same --count, or use a new --out")
    progress = GameProgress("tasks")
    progress.start(sum(sizes.values()))
    done, written, start = 0, {}, time.perf_counter()
    for bench, split in jobs:
        path = out / f"{bench}_{split}.npz"
        if args.resume and path.exists():
            try:
                _, manifest = generate.load_split(path)
                if manifest["count"] == sizes[(bench, split)]:
                    done += sizes[(bench, split)]
                    written[f"{bench}/{split}"] = manifest["sha256"]
                    progress.update(done)
                    continue
            except generate.TaskFileError:
                pass  # regenerate a damaged file

        def tick():
            nonlocal done
            done += 1
            progress.update(done)
        arrays, manifest = generate.generate_split(bench, split, sizes[(bench, split)], tick)
        generate.save_split(out, arrays, manifest)
        written[f"{bench}/{split}"] = manifest["sha256"]
    progress.stop()
    summary = {"out": str(out), "splits": written, "tasks": done,
               "seconds": round(time.perf_counter() - start, 2)}
    print(json.dumps(summary) if args.json else
          f"{done} tasks in {summary['seconds']} s -> {out}")
    return 0


def _profile(name: str):
    try:
        return profiles.get_profile(name)
    except ValueError as err:
        raise UsageError(str(err)) from None


def cmd_train(args) -> int:
    """Train backbones (per benchmark × architecture) and measure them on held-out transitions."""
    import sys

    from bsjax.gilp.training import workdir
    benches, backbones = parse_benchmarks(args.bench), parse_backbones(args.backbone)
    profile = _profile(args.profile)
    checks.int_in(args.seed, "--seed", 0, checks.MAX_SEED)
    checks.int_in(args.jobs, "--jobs", 1, MAX_JOBS)
    work, rows, start = checks.writable_dir(args.work, "--work"), [], time.perf_counter()
    if args.jobs > 1 and len(backbones) > 1:
        for bench in benches:
            print(f"[data {bench} / {profile.name}]", file=sys.stderr)
            workdir.build_data(work, bench, profile)
        _train_in_processes(args, benches, backbones, args.jobs)
    for bench in benches:
        for backbone in backbones:
            print(f"[{bench} / {backbone} / {profile.name}]", file=sys.stderr)
            rows.append(workdir.train(work, bench, backbone, profile, args.seed,
                                       log=lambda line: print("  " + line, file=sys.stderr)))
    table = {f"{r['bench']}/{r['backbone']}": {
        "params": r["params"], "trans_acc": r["metrics"]["pooled"]["trans_acc"],
        "delta_acc": r["metrics"]["pooled"]["delta_acc_all"],
        "delta_acc_changed": r["metrics"]["pooled"]["delta_acc_changed"],
        "valid_acc": r["metrics"]["pooled"]["valid_acc"], "train_seconds": r["train_seconds"],
        "steps_per_second": r["steps_per_second"]} for r in rows}
    if args.json:
        print(json.dumps({"backbones": table, "seconds": round(time.perf_counter() - start, 2)}))
    else:
        print(f"{'benchmark/backbone':28} {'params':>7} {'TransAcc':>8} {'DeltaAcc':>8} "
              f"{'ValidAcc':>8} {'train s':>8}")
        for name, r in table.items():
            print(f"{name:28} {r['params']:>7} {r['trans_acc']:>8.3f} {r['delta_acc']:>8.3f} "
                  f"{r['valid_acc']:>8.3f} {r['train_seconds']:>8.1f}")
    return 0


def _train_in_processes(args, benches: list[str], backbones: list[str], jobs: int) -> None:
    """Train the backbones in `jobs` child processes (`bsjax gilp train --backbone NAME`), each
    with its share of the accelerator's memory; the data is already built, so the children only
    read it, and the parent then loads their summaries."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false",
               XLA_PYTHON_CLIENT_MEM_FRACTION=f"{0.9 / jobs:.3f}")
    queue, running, failed = list(backbones), [], []
    while queue or running:
        while queue and len(running) < jobs:
            name = queue.pop(0)
            command = [sys.executable, "-c", "import sys; from bsjax.cli import main; sys.exit(main())",
                       "gilp", "train",
                       "--bench", ",".join(benches), "--backbone", name, "--profile",
                       args.profile, "--seed", str(args.seed), "--work", str(args.work)]
            log = open(Path(args.work) / f"train_{name}_{args.profile}.log", "w")
            print(f"[start {name}: log {log.name}]", file=sys.stderr)
            running.append((name, subprocess.Popen(command, env=env, stdout=log, stderr=log), log))
        time.sleep(1.0)
        for item in [r for r in running if r[1].poll() is not None]:
            running.remove(item)
            item[2].close()
            if item[1].returncode != 0:
                failed.append(item[0])
    if failed:
        raise RuntimeError(f"training failed for {', '.join(failed)} (see their logs in {args.work})")


def cmd_run(args) -> int:
    """Evaluate methods on the test splits with the behavioural simulator / parametric planners."""
    import sys

    from bsjax.gilp.evaluation import harness
    benches, methods = parse_benchmarks(args.bench), parse_methods(args.methods)
    backbone = parse_backbones(args.backbone)
    if len(backbone) != 1:
        raise UsageError("--backbone takes one backbone for a run")
    profile = _profile(args.profile)
    if args.seeds is not None:
        checks.int_in(args.seeds, "--seeds", 1, MAX_SEEDS)
    checks.int_in(args.run_seed, "--run-seed", 0, checks.MAX_SEED)
    checks.nonempty(args.params, "--params")
    checks.nonempty(args.out, "--out")
    checks.input_dir(args.work, "--work")
    out = Path(args.out) if args.out else Path("results") / f"gilp-run-{time.strftime('%Y%m%d-%H%M%S')}"
    checks.writable_dir(out, "--out")
    if out.exists() and any(out.iterdir()) and not args.resume:
        raise UsageError(f"{out} is not empty (use --resume to continue it, or a new --out)")
    params = load_sim_params(args.params, benches) if args.params else None
    try:
        summary = harness.run(out, Path(args.work), methods, benches, profile, backbone[0],
                              args.seeds, args.run_seed, params, args.resume,
                              progress=lambda line: print(line, file=sys.stderr))
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(str(err)) from None
    _print_summary(summary, out, args.json)
    return 0


def _print_summary(summary: dict, out: Path, as_json: bool) -> None:
    from bsjax.gilp.evaluation.harness import method_json
    methods = {m: method_json(stats) for m, stats in summary["pooled"].items()}
    if as_json:
        print(json.dumps({"out": str(out), "methods": methods}, default=float))
        return
    print((out / "table_1.md").read_text())
    print(f"-> {out}")


def _report_real(out: Path, as_json: bool) -> int:
    """`gilp report` of a `gilp real` run (T7): its table and summary.json from the finished
    episodes, also while the run is still going."""
    from bsjax.gilp.report import real_table
    try:
        summary = real_table.report_real(out)
    except (ValueError, KeyError, TypeError) as err:
        raise UsageError(f"cannot report {out}: {err}") from None
    if as_json:
        print(json.dumps({"out": str(out), **summary}, default=float))
    else:
        print((out / "table_7.md").read_text())
        print(f"-> {out}")
    return 0


def cmd_report(args) -> int:
    """Rebuild summary.json and the tables of a GILP run from its event files."""
    from bsjax.gilp.evaluation import harness
    out = Path(checks.nonempty(args.run_dir, "the run directory"))
    if not (out / "events").is_dir() and (out / "events.jsonl").is_file():
        return _report_real(out, args.json)
    if not (out / "events").is_dir():
        raise UsageError(f"{out} is not a GILP run directory (no events/ or events.jsonl)")
    try:
        summary = harness.report(out)
    except UnicodeDecodeError as err:
        raise UsageError(f"cannot report {out}: a file there is not UTF-8 text ({err.reason})") \
            from None
    except ValueError as err:
        raise UsageError(str(err)) from None
    _print_summary(summary, out, args.json)
    return 0


# `bsjax gilp paper`'s settings: a config file's [paper] table may set any of them.
PAPER_SETTINGS = {"profile": "quick", "bench": "all", "work": str(DEFAULT_WORK), "out": None,
                  "params": None, "run_seed": 0}


def paper_settings(args) -> dict:
    """The flags of `gilp paper` merged over `--config`'s [paper] table over the defaults."""
    settings = dict(PAPER_SETTINGS)
    if args.config is not None:
        import tomllib
        path = Path(checks.nonempty(args.config, "--config"))
        if path.is_dir():
            raise UsageError(f"--config {path} is a directory, not a TOML file")
        try:
            table = tomllib.loads(path.read_text()).get("paper", {})
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
            raise UsageError(f"cannot read config {path}: {str(err).splitlines()[0]}") from None
        if not isinstance(table, dict):
            raise UsageError(f"config {path}: [paper] must be a table (got {table!r})")
        table = {key.replace("-", "_"): value for key, value in table.items()}
        unknown = sorted(set(table) - set(PAPER_SETTINGS))
        if unknown:
            raise UsageError(f"config {path}: unknown [paper] key(s) {', '.join(unknown)} "
                             f"(known: {', '.join(PAPER_SETTINGS)})")
        if isinstance(table.get("bench"), list):
            table["bench"] = ",".join(map(str, table["bench"]))
        for key, value in table.items():
            want = int if key == "run_seed" else str
            if not isinstance(value, want) or isinstance(value, bool):
                raise UsageError(f"config {path}: [paper] {key} must be a {want.__name__}")
        settings.update(table)
    settings.update({key: getattr(args, key) for key in PAPER_SETTINGS
                     if getattr(args, key) is not None})
    for key in ("profile", "bench", "work", "out", "params"):
        checks.nonempty(settings[key], "--" + key)
    checks.int_in(settings["run_seed"], "--run-seed", 0, checks.MAX_SEED)
    return settings


def cmd_paper(args) -> int:
    """The whole GILP pipeline (bsjax.gilp.evaluation.paper): tables, figures and a JSON summary."""
    import argparse
    import sys

    from bsjax.gilp.evaluation import paper
    args = argparse.Namespace(**{**vars(args), **paper_settings(args)})
    try:
        plan = profiles.get_profile(args.profile)
    except ValueError as err:
        raise UsageError(str(err)) from None
    benches = parse_benchmarks(args.bench)
    out = Path(args.out) if args.out else Path("results") / f"gilp-paper-{args.profile}"
    checks.writable_dir(out, "--out")
    checks.writable_dir(args.work, "--work")
    if (out / "plan.json").exists() and not args.resume:
        raise UsageError(f"{out} already holds a GILP paper run (use --resume or a new --out)")
    if out.exists() and any(out.iterdir()) and not (out / "plan.json").exists():
        raise UsageError(f"{out} is not empty and holds no GILP paper run (use a new --out)")
    if args.params is not None:
        load_sim_params(args.params)
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    try:
        result = paper.run_paper(out, Path(args.work), plan, benches, args.run_seed, args.params,
                                 args.resume, log=say)
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(str(err)) from None
    if args.json:
        print(json.dumps(result, default=float))
    else:
        print((out / "table_1.md").read_text())
        print(f"-> {out} ({result['seconds']:.0f} s)")
    return 0


def _bench_and_profile(parser, backbone_help: str) -> None:
    """The --bench, --backbone and --profile flags of `train` and `run`."""
    parser.add_argument("--bench", default="all", help="all, or e.g. taskgraph,toolchain")
    parser.add_argument("--backbone", default="MPNN", help=backbone_help)
    parser.add_argument("--profile", default="quick", help="smoke | quick | paper (default quick)")


def add_parser(sub) -> None:
    """Register `bsjax gilp` and its subcommands on the top-level subparsers."""
    gilp = sub.add_parser("gilp", help="graph planning with trained world models (GILP)")
    gsub = gilp.add_subparsers(dest="gilp_command", required=True, parser_class=type(gilp))
    gen = gsub.add_parser("generate", help="generate the benchmark task splits (.npz + manifest)")
    gen.add_argument("--bench", default="all", help="all, or e.g. taskgraph,toolchain")
    gen.add_argument("--splits", default="all", help="all, or e.g. train,val,test_id,test_ood")
    gen.add_argument("--count", type=int, default=None,
                     help="tasks per split (default: the spec's 500/100/60/40)")
    gen.add_argument("--out", default=str(DEFAULT_TASK_DIR), help="task directory")
    gen.add_argument("--resume", action="store_true", help="keep splits already written")
    gen.add_argument("--json", action="store_true")
    gen.set_defaults(func=cmd_generate)
    tr = gsub.add_parser("train", help="train backbones and measure them on held-out transitions")
    _bench_and_profile(tr, "all, or e.g. MLP,MPNN (default MPNN)")
    tr.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    tr.add_argument("--jobs", type=int, default=1,
                    help="train this many backbones at once in child processes (a GPU's use)")
    tr.add_argument("--work", default=str(DEFAULT_WORK), help="GILP work directory")
    tr.add_argument("--json", action="store_true")
    tr.set_defaults(func=cmd_train)
    rn = gsub.add_parser("run", help="evaluate methods on the test splits (simulated agent)")
    rn.add_argument("--methods", default="all",
                    help="all, or e.g. Agent-Replan,GILP; NAME[key=value,...] for a method with "
                    "other thresholds, e.g. 'GILP[tau_low=0.5]' (quoted in the shell)")
    _bench_and_profile(rn, "the trained backbone (default MPNN)")
    rn.add_argument("--seeds", type=int, default=None, help="seeds per task (default: profile)")
    rn.add_argument("--run-seed", type=int, default=0, help="root key of the run (default 0)")
    rn.add_argument("--params", default=None,
                    help="simulator parameters: a gilp_sim_params.json file, or calibrated "
                         "(the shipped fit)")
    rn.add_argument("--work", default=str(DEFAULT_WORK), help="GILP work directory")
    rn.add_argument("--out", default=None, help="run directory (default results/gilp-run-TIME)")
    rn.add_argument("--resume", action="store_true", help="continue an interrupted run")
    rn.add_argument("--json", action="store_true")
    rn.set_defaults(func=cmd_run)
    from bsjax.gilp.cli.calibrate import add_calibrate_parser
    from bsjax.gilp.cli.real import add_real_parser
    add_calibrate_parser(gsub)
    add_real_parser(gsub)
    pp = gsub.add_parser("paper", help="the whole pipeline: train, evaluate, tables, figures")
    pp.add_argument("--config", default=None,
                    help="TOML file whose [paper] table sets these flags (flags given win)")
    pp.add_argument("--profile", default=None, help="quick | full | smoke (default quick)")
    pp.add_argument("--bench", default=None, help="all, or e.g. taskgraph,toolchain")
    pp.add_argument("--work", default=None, help=f"GILP work directory (default {DEFAULT_WORK})")
    pp.add_argument("--out", default=None, help="run directory (default results/gilp-paper-PROFILE)")
    pp.add_argument("--params", default=None,
                    help="simulator parameters instead of calibrating (a file, or calibrated)")
    pp.add_argument("--run-seed", type=int, default=None, help="root key of the run (default 0)")
    pp.add_argument("--resume", action="store_true", help="continue an interrupted run")
    pp.add_argument("--json", action="store_true", help="print the result JSON as the last line")
    pp.set_defaults(func=cmd_paper)
    rp = gsub.add_parser("report", help="rebuild the tables of a GILP run (gilp run, or "
                         "gilp real: T7) from its events")
    rp.add_argument("run_dir")
    rp.add_argument("--json", action="store_true")
    rp.set_defaults(func=cmd_report)


__all__ = ["add_parser", "cmd_generate", "cmd_train", "parse_benchmarks", "parse_backbones",
           "parse_splits"]
