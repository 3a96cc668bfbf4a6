"""`bsjax gilp real`: the real-LLM validation of docs/gilp/spec.md §7 T7 (Agent-Replan vs GILP on 20
tasks per benchmark with H in [3, 8]) through `bsjax.core.llm` — the embedded local model by default,
an Ollama server by name. Episodes append to OUT/events.jsonl and a rerun skips the finished ones
(resume); replies are cached in OUT/calls.jsonl. Writes OUT/table_7.md + .csv and prints a JSON
summary (`--json`: as the last line)."""

from __future__ import annotations

import argparse
import itertools
import json
import time

from bsjax.core import checks
from bsjax.core.errors import UsageError
from bsjax.core.progress import GameProgress
from bsjax.gilp import profiles

DEFAULT_METHODS = "Agent-Replan,GILP"
LLM_KINDS = ("local", "ollama", "none")
MAX_TIMEOUT = 3600.0         # --timeout: seconds per call
MAX_WALL_CAP = 86400.0       # --wall-cap: seconds per episode
MAX_THREADS = 1024           # --threads


def _llm_methods(text: str) -> list:
    """`--methods` as configs (`cli.parse_methods`), LLM methods only."""
    from bsjax.gilp.cli.args import parse_methods
    from bsjax.gilp.methods import get_method
    methods = [get_method(name) for name in parse_methods(text)]
    not_llm = [m.name for m in methods if not m.llm]
    if not methods or not_llm:
        raise UsageError("--methods takes LLM methods (e.g. Agent-Replan,GILP)"
                         + (f"; not an LLM method: {', '.join(not_llm)}" if not_llm else ""))
    return methods


def wants_schema(args) -> bool:
    """`--schema` / `--no-schema`, else on for the local model only."""
    return args.llm == "local" if args.schema is None else bool(args.schema)


def cmd_real(args) -> int:
    """Run (or resume) a T7 real-LLM run and write its table."""
    from bsjax.core.llm.call_cache import CallCache
    from bsjax.gilp.cli.args import parse_backbones, parse_benchmarks
    from bsjax.gilp.evaluation.harness import config_changes
    from bsjax.gilp.llm.driver import GilpDriver, make_gilp_backend
    from bsjax.gilp.real import episode as real
    from bsjax.gilp.real import runs as real_runs
    from bsjax.gilp.real import tasks as real_tasks
    from bsjax.gilp.report import real_table
    from bsjax.gilp.training import workdir
    benches, methods = parse_benchmarks(args.bench), _llm_methods(args.methods)
    if args.llm not in LLM_KINDS:
        raise UsageError(f"unknown LLM backend {args.llm!r} (choose from {', '.join(LLM_KINDS)})")
    backbone = parse_backbones(args.backbone)
    if len(backbone) != 1:
        raise UsageError("--backbone takes one backbone")
    _check_real_flags(args)
    try:
        profile = profiles.get_profile(args.profile)
    except ValueError as err:
        raise UsageError(str(err)) from None
    work = checks.input_dir(args.work, "--work")
    out = checks.writable_dir(args.out, "--out")
    models = {}
    if any(m.uses_backbone for m in methods):
        try:  # every checkpoint is loaded before anything is written
            models = {b: workdir.load_backbone(work, b, backbone[0], profile) for b in benches}
        except FileNotFoundError as err:
            raise UsageError(str(err)) from None
    schema = wants_schema(args)
    try:
        backend = make_gilp_backend(args.llm, args.llm_host, args.model, args.timeout,
                                    json_mode=not args.no_json_mode, n_threads=args.threads,
                                    schema=schema)
    except ValueError as err:
        raise UsageError(str(err)) from None
    # What decides an episode's replies: a resume under other settings would mix two runs.
    settings = {"llm": args.llm, "model": str(getattr(backend, "model", "")),
                "json_mode": not args.no_json_mode, "schema": schema,
                "backbone": backbone[0], "profile": profile.name}
    run_json = out / "run.json"
    changed = config_changes(run_json, settings)
    if changed:
        raise UsageError(f"{out} holds a run with other settings ({', '.join(changed)}); "
                         "use a new --out")
    out.mkdir(parents=True, exist_ok=True)
    if not run_json.is_file():  # a directory from before settings were recorded is adopted
        run_json.write_text(json.dumps(settings, indent=1) + "\n")
    driver = GilpDriver(backend, CallCache(out / "calls.jsonl"))
    start = time.perf_counter()
    # Task i of every benchmark before task i + 1 of any: a run stopped part-way (hours on a
    # CPU) leaves every benchmark with about as many tasks, both arms each.
    per_bench = [real_tasks.t7_tasks(work, bench, args.tasks) for bench in benches]
    tasks = [t for group in itertools.zip_longest(*per_bench) for t in group if t is not None]
    events = out / "events.jsonl"
    planned = {(m.name, t.bench, t.split, t.task, 0) for t in tasks for m in methods}
    total, done = len(planned), [len(planned & real_runs.complete_keys(events, repair=False))]
    progress = GameProgress("episodes", delay=0.0)
    progress.start(total, done[0])
    progress.update(done[0])  # shown now, not after the first episode (minutes on a CPU)

    def episode_done(line: str) -> None:
        done[0] += 1
        progress.log(line)
        progress.update(done[0])

    try:
        real_runs.run_real(out, methods, tasks, driver, models or None,
                           cfg=real.RealConfig(wall_cap_s=args.wall_cap), log=episode_done)
    finally:
        progress.stop()
    result = {**real_table.report_real(out),
              "llm": {"backend": args.llm, "model": getattr(backend, "model", None)},
              "seconds": round(time.perf_counter() - start, 2)}
    if args.json:
        print(json.dumps(result, default=float))
    else:
        print((out / "table_7.md").read_text())
        print(f"-> {out} ({result['seconds']:.0f} s)")
    return 0


def _check_real_flags(args) -> None:
    """The numeric flags and the Ollama flags of `gilp real`; raises UsageError."""
    from bsjax.core.llm.backends import check_host, check_model
    from bsjax.gilp import config
    for flag, value in (("--tasks", args.tasks), ("--timeout", args.timeout),
                        ("--wall-cap", args.wall_cap)):
        if value <= 0:
            raise UsageError(f"{flag} must be positive (got {value})")
    most = config.SPLIT_SIZES["test_id"] + config.SPLIT_SIZES["val"]  # where `t7_tasks` looks
    checks.int_in(args.tasks, "--tasks", 1, most)
    checks.positive_float(args.timeout, "--timeout", MAX_TIMEOUT)
    checks.positive_float(args.wall_cap, "--wall-cap", MAX_WALL_CAP)
    if args.threads is not None:
        checks.int_in(args.threads, "--threads", 1, MAX_THREADS)
    for flag, value, check in (("--llm-host", args.llm_host, check_host),
                               ("--model", args.model, check_model)):
        if value is None:
            continue
        if args.llm != "ollama":
            raise UsageError(f"{flag} is for --llm ollama (the backend here is {args.llm})")
        try:
            check(value)
        except ValueError as err:
            raise UsageError(str(err)) from None


def add_real_arguments(parser) -> None:
    """The flags of `bsjax gilp real` (also `python -m bsjax.gilp.real.episode`)."""
    parser.add_argument("--bench", default="all", help="all, or e.g. taskgraph,toolchain")
    parser.add_argument("--tasks", type=int, default=20, help="tasks per benchmark (T7: 20)")
    parser.add_argument("--methods", default=DEFAULT_METHODS,
                        help="LLM methods (T7: the default); NAME[key=value,...] for other "
                        "thresholds, quoted in the shell")
    parser.add_argument("--llm", default="local", help="local (embedded) | ollama | none")
    parser.add_argument("--llm-host", default=None, help="Ollama server URL")
    parser.add_argument("--model", default=None, help="Ollama model name (default gemma3:270m)")
    parser.add_argument("--no-json-mode", action="store_true",
                        help="no JSON-mode constraint (with --no-schema: no constraint at all); "
                        "the parser extracts the JSON object")
    parser.add_argument("--schema", action=argparse.BooleanOptionalAction, default=None,
                        help="constrain each reply by a JSON Schema (structured outputs): the "
                        "action one of that call's candidates, the imagined state over real "
                        "nodes (default: on for --llm local, whose small model otherwise names "
                        "no candidate; off for ollama, plain JSON mode as in §5.1)")
    parser.add_argument("--timeout", type=float, default=120.0, help="per-call timeout (s)")
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (local)")
    parser.add_argument("--wall-cap", type=float, default=1800.0, help="per-episode cap (s)")
    parser.add_argument("--work", default="results/gilp", help="GILP work directory")
    parser.add_argument("--profile", default="quick", help="the backbone checkpoints' profile")
    parser.add_argument("--backbone", default="MPNN", help="GILP's backbone (default MPNN)")
    parser.add_argument("--out", required=True, help="run directory (events, calls, table_7)")
    parser.add_argument("--json", action="store_true", help="print the result JSON last")


def add_real_parser(gsub) -> None:
    """Register `bsjax gilp real` on the `gilp` subparsers."""
    parser = gsub.add_parser("real", help="T7: real-LLM validation (Agent-Replan vs GILP)")
    add_real_arguments(parser)
    parser.set_defaults(func=cmd_real)


__all__ = ["add_real_arguments", "add_real_parser", "cmd_real", "wants_schema"]
