"""Compile every agent × sampler's turn loop for an H100 on this machine, no GPU needed.

One JSON line per (agent, sampler, G): compile seconds, kernel launches per game-turn (nested
loops by their trip counts), loops of data-dependent trip count per turn, KiB its launches read
and write per game-turn (an upper bound), collectives per turn, XLA's bytes per device and KiB
per game, with versions, commit and host. `--target tpu-v5e-2x2` compiles for a TPU instead
(`make tpu-check`; no launches to count). Nothing runs: see `bsjax/battleship/harness/aot.py`
for what these figures predict and what they cannot (run time). `make gpu-check` installs the
compiler plugin into `.venv-aot` and runs this script.

    JAX_PLATFORMS=cpu .venv-aot/bin/python benchmarks/gpu_check.py --games 54,4096

`--timeout-s S` compiles each point in a child process and writes an error row for one that
has not finished after S seconds (XLA's compile cannot be stopped from Python otherwise).
`--sources --out -` also prints each launch of a turn with the source lines it comes from
(`bsjax.core.hlo.loop_launches`): which code each kernel is, when a launch count moves.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")       # before JAX is imported: see aot.py
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import platform  # noqa: E402
import queue as queue_lib  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import provenance  # noqa: E402  (benchmarks/ is on sys.path when this file is run)

from bsjax.battleship.harness import aot, run_config  # noqa: E402
from bsjax.battleship.harness.run_config import RunConfig  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ("random", "greedy", "wma", "bayes", "mra", "wma-reflective", "lookahead")
SAMPLERS = ("particles", "chain", "importance")
OUT = {"h100": ROOT / "benchmarks" / "results" / "h100-aot.jsonl",
       "tpu-v5e-2x2": ROOT / "benchmarks" / "results" / "tpu-v5e-aot.jsonl"}




def _compile(cfg: RunConfig, games: int, target: str, sources: bool) -> dict:
    """One point's report, or an error row: one failed point must not stop the table."""
    try:
        game_config, _ = run_config.validate(cfg)
        player = run_config.make_player(cfg, game_config)
        return aot.compile_turn_loop(player, games, target, sources)
    except Exception as err:  # noqa: BLE001
        return {"target": target, "games": games,
                "error": f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"}


def _child(queue, *point) -> None:
    queue.put(_compile(*point))


def compile_point(cfg: RunConfig, games: int, target: str, sources: bool,
                  timeout_s: float | None) -> dict:
    """`_compile` here, or in a child process stopped after `timeout_s` (XLA's compile cannot
    be interrupted from Python: a stalled one would hold the whole table)."""
    if timeout_s is None:
        return _compile(cfg, games, target, sources)
    context = multiprocessing.get_context("spawn")   # a fresh JAX in the child, not a fork
    queue = context.Queue()
    child = context.Process(target=_child, args=(queue, cfg, games, target, sources))
    child.start()
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:   # polled at least once a second, and at the deadline, not up to 1 s past it
                return queue.get(timeout=max(0.01, min(1.0, deadline - time.monotonic())))
            except queue_lib.Empty:
                if not child.is_alive() and queue.empty():
                    error = f"the compiling process exited with code {child.exitcode}"
                elif time.monotonic() > deadline:
                    error = f"compile not finished after {timeout_s:g} s (stopped)"
                else:
                    continue
                return {"target": target, "games": games, "error": error}
    finally:
        child.terminate()
        child.join()


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--samplers", default=",".join(SAMPLERS))
    parser.add_argument("--games", default="1,54,4096,16384,65536")
    parser.add_argument("--target", default="h100", choices=aot.TARGETS)
    parser.add_argument("--particles", type=int, default=500)
    parser.add_argument("--sources", action="store_true",
                        help="print each launch of a turn with its source lines (not written)")
    parser.add_argument("--out", default=None,
                        help="JSON lines appended here ('-': stdout only; default: the "
                             "target's file in benchmarks/results, "
                             + ", ".join(p.name for p in OUT.values()) + ")")
    parser.add_argument("--timeout-s", type=float, default=None,
                        help="compile each point in a child process and give up on it after "
                             "this many seconds (an error row; default: in this process, no "
                             "limit)")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = str(OUT[args.target])
    if args.timeout_s is not None and not args.timeout_s > 0:
        parser.error("--timeout-s must be positive")
    stamp = {"commit": provenance.commit(), "host": platform.node(), "cpu": platform.processor() or
             platform.machine(), "jax": jax.__version__, "python": platform.python_version(),
             "date": datetime.date.today().isoformat()}
    effort = jax.config.jax_exec_time_optimization_effort
    if effort:  # JAX_EXEC_TIME_OPTIMIZATION_EFFORT: less compile time for slower code (-1..1)
        stamp["exec_time_optimization_effort"] = effort
    rows = []
    for agent in args.agents.split(","):
        samplers = [None] if agent == "random" else args.samplers.split(",")
        for sampler in samplers:
            cfg = RunConfig(agent=agent, sampler=sampler or "particles", particles=args.particles)
            for games in (int(g) for g in args.games.split(",")):
                report = compile_point(cfg, games, args.target, args.sources, args.timeout_s)
                for name, kind, chain in report.pop("launch_sources", []):
                    print(f"  {name:36s} {kind[:44]:44s} {' <- '.join(chain[:3])}")
                row = {"agent": agent, "sampler": sampler, "particles": args.particles,
                       **report, **stamp}
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.out != "-":
                    with open(args.out, "a") as fh:
                        fh.write(json.dumps(row) + "\n")
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
