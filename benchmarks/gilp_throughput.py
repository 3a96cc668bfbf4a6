"""GILP throughput: backbone training steps per second and simulated episodes per second.

    .venv/bin/python benchmarks/gilp_throughput.py --what train --profile paper --work WORK
    .venv/bin/python benchmarks/gilp_throughput.py --what sim --profile paper --work WORK

`train`: for each (benchmark, backbone), two epochs of the real training loop (`train.fit`, the
on-device epoch scan) on the profile's labelled train set; the first epoch includes the compile,
the second is the steady rate. The row also extrapolates the profile's full training time
(`epochs × steps per epoch / steady steps/s`, plus the compile), which is how the paper
profile's CPU training time is stated without training 24 models for hours.

`sim`: the 11 simulated LLM methods of the registry in one compiled simulator
(`run_simulated_many`) on a benchmark's test-ID split with the profile's MPNN checkpoint: a
first call (compile included), then a timed second call on the same episodes.

One JSON line per measurement goes to `OUT/TAG.jsonl`; `--markdown` prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax

from bsjax.gilp import config as gilp_config
from bsjax.gilp import profiles
from bsjax.gilp.backbones import BACKBONES, canonical_name, make_backbone
from bsjax.gilp.data import dataset
from bsjax.gilp.envs import registry
from bsjax.gilp.methods import METHODS
from bsjax.gilp.training import train as train_lib
from bsjax.gilp.training import workdir

SIM_METHODS = tuple(name for name, m in METHODS.items() if m.llm)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--what", default="train,sim", help="train, sim, or both (comma list)")
    p.add_argument("--bench", default="taskgraph", help="comma list of benchmarks, or all")
    p.add_argument("--backbones", default="all", help="comma list of backbones, or all")
    p.add_argument("--profile", default="paper", help="smoke | quick | paper: data and epochs")
    p.add_argument("--work", default="results/gilp", help="GILP work directory")
    p.add_argument("--tasks", type=int, default=None,
                   help="sim: test-ID tasks (default: the profile's)")
    p.add_argument("--out", default="benchmarks/results", help="output folder")
    p.add_argument("--tag", default="gilp_throughput", help="file stem of OUT/TAG.jsonl")
    p.add_argument("--markdown", action="store_true", help="print the Markdown table at the end")
    args = p.parse_args(argv)
    args.what = [w for w in args.what.split(",") if w]
    if not args.what or not set(args.what) <= {"train", "sim"}:
        p.error(f"--what takes train and/or sim (got {','.join(args.what)})")
    args.bench = list(gilp_config.BENCHMARKS) if args.bench == "all" else args.bench.split(",")
    unknown = [b for b in args.bench if b not in gilp_config.BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmark(s) {', '.join(unknown)}")
    try:
        args.backbones = (list(BACKBONES) if args.backbones == "all"
                          else [canonical_name(b) for b in args.backbones.split(",")])
        args.profile = profiles.get_profile(args.profile)
    except (KeyError, ValueError) as err:
        p.error(str(err).strip("'\""))
    if args.tasks is not None and args.tasks < 1:
        p.error("--tasks must be positive")
    return args


def _base_row(kind: str) -> dict:
    return {"kind": kind, "backend": jax.default_backend(), "device": str(jax.devices()[0]),
            "jax": jax.__version__}


def measure_training(work: Path, bench: str, backbone: str, profile) -> dict:
    """Two epochs of `train.fit` on the profile's train set; the second is the steady rate."""
    data = workdir.labelled(work, bench, "train", profile, profile.train_tasks)
    windows = dataset.windows(data) if backbone == "ErrorAware" else None
    config = train_lib.TrainConfig(epochs=2)
    model = make_backbone(backbone, jax.random.key(config.seed))
    _, history = train_lib.fit(model, data, config=config, windows=windows,
                               decode=registry.get(bench).decode)
    first, steady = history
    steps_per_second = steady["steps"] / steady["seconds"]
    compile_seconds = max(first["seconds"] - steady["seconds"], 0.0)
    return {**_base_row("train"), "bench": bench, "backbone": backbone, "profile": profile.name,
            "samples": len(data["action"]), "steps_per_epoch": steady["steps"],
            "first_epoch_s": round(first["seconds"], 2), "steady_epoch_s": round(
                steady["seconds"], 2), "steps_per_second": round(steps_per_second, 1),
            "epochs": profile.epochs, "est_train_s": round(
                compile_seconds + profile.epochs * steady["steps"] / steps_per_second, 1)}


def measure_sim(work: Path, bench: str, profile, tasks: int | None) -> dict:
    """The LLM methods in one compiled simulator: first call, then a timed second call."""
    from bsjax.gilp.behaviour.run import run_simulated_many
    count = profile.test_tasks[0] if tasks is None else tasks
    task_arrays = workdir.tasks(work, bench, "test_id", count)
    model = workdir.load_backbone(work, bench, "MPNN", profile)
    seeds = range(profile.seeds)
    timings = []
    for _ in range(2):
        start = time.perf_counter()
        runs = run_simulated_many(SIM_METHODS, registry.get(bench), model, task_arrays, seeds,
                                  jax.random.key(0))
        timings.append(time.perf_counter() - start)
    episodes = sum(len(run.task) for run in runs)
    return {**_base_row("sim"), "bench": bench, "profile": profile.name, "methods": len(runs),
            "episodes": episodes, "first_call_s": round(timings[0], 2),
            "steady_s": round(timings[1], 2),
            "episodes_per_second": round(episodes / timings[1], 1)}


def markdown(rows: list[dict]) -> str:
    lines = []
    train = [r for r in rows if r["kind"] == "train"]
    if train:
        lines += ["| backend | benchmark | backbone | samples | steps/epoch | steps/s | first "
                  "epoch (s) | est. full training (s) |", "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['backend']} | {r['bench']} | {r['backbone']} | {r['samples']} | "
                  f"{r['steps_per_epoch']} | {r['steps_per_second']} | {r['first_epoch_s']} | "
                  f"{r['est_train_s']} ({r['epochs']} epochs) |" for r in train]
    sim = [r for r in rows if r["kind"] == "sim"]
    if sim:
        lines += ["", "| backend | benchmark | methods | episodes | first call (s) | steady (s) | "
                  "episodes/s |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['backend']} | {r['bench']} | {r['methods']} | {r['episodes']} | "
                  f"{r['first_call_s']} | {r['steady_s']} | {r['episodes_per_second']} |"
                  for r in sim]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work, out = Path(args.work), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / f"{args.tag}.jsonl"
    rows = []
    jobs = [("train", b, n) for b in args.bench for n in args.backbones if "train" in args.what]
    jobs += [("sim", b, None) for b in args.bench if "sim" in args.what]
    from rich.progress import Progress
    with Progress(transient=True) as progress:
        bar = progress.add_task("measuring", total=len(jobs))
        for kind, bench, backbone in jobs:
            progress.update(bar, description=f"{kind} {bench} {backbone or ''}")
            try:
                row = (measure_training(work, bench, backbone, args.profile) if kind == "train"
                       else measure_sim(work, bench, args.profile, args.tasks))
            except FileNotFoundError as err:  # sim needs the profile's trained MPNN
                print(f"gilp_throughput: error: {err}", file=sys.stderr)
                return 2
            with jsonl.open("a") as f:
                f.write(json.dumps(row) + "\n")
            rows.append(row)
            progress.advance(bar)
    print(f"-> {jsonl} ({len(rows)} rows)", file=sys.stderr)
    if args.markdown:
        print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
