"""A batch's host side: programs dispatched per batch and the batch's wall time, small G.

At small batches on a GPU a batch's time is mostly the host's: each program it dispatches costs
more than most of a turn's kernels. This plays one compiled batch `--repeats` times (median
wall time of `BatchRunner.play`, everything from the games' specs to host arrays), then once
under JAX's profiler to count the programs the host ran (`bsjax.core.profile.dispatches`), and
appends one JSON line per point to `--out`:

    python benchmarks/host_dispatches.py --agent greedy --games 1,54
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import jax
import provenance  # benchmarks/ is on sys.path when this file is run

from bsjax.battleship.harness import experiment, run_config
from bsjax.battleship.harness.loop import BatchRunner
from bsjax.battleship.harness.run_config import RunConfig
from bsjax.core import profile
from bsjax.core.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent


def measure(cfg: RunConfig, games: int, repeats: int) -> dict:
    """One point. Written against `BatchRunner` alone, not `bench.bench(profile_dir=)`, so the
    same script measures older trees (checked out under `bsjax/battleship`) side by side."""
    game_config, boards = run_config.validate(cfg)
    player = run_config.make_player(cfg, game_config)
    specs = experiment.game_list(boards, max(-(-games // len(boards)), 1),
                                 params=run_config.run_params(cfg, player))
    specs = sorted(specs, key=lambda g: (g.seed_index, g.board_id))[:games]
    runner = BatchRunner(player, games)
    runner.play(specs, cfg.run_seed + 1)  # compile and warm up
    times = []
    for r in range(repeats):
        start = time.perf_counter()
        runner.play(specs, cfg.run_seed + 2 + r)
        times.append(time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as trace:
        with jax.profiler.trace(trace, create_perfetto_trace=True):
            runner.play(specs, cfg.run_seed + 2)
        programs = profile.dispatches(trace)
    return {"agent": cfg.agent, "sampler": cfg.sampler, "particles": cfg.particles,
            "games": games, "dispatches_per_batch": programs,
            "median_ms": round(1000 * statistics.median(times), 3),
            "all_ms": [round(1000 * t, 3) for t in times], "platform": jax.default_backend(),
            "jax": jax.__version__}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agent", default="greedy")
    p.add_argument("--sampler", default="particles")
    p.add_argument("--particles", type=int, default=500)
    p.add_argument("--games", default="1,54")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" /
                                         "cpu-2core-host-dispatches.jsonl"),
                   help="JSON lines appended here ('-': stdout only)")
    args = p.parse_args(argv)
    try:
        sizes = [int(x) for x in args.games.split(",") if x.strip()]
        if not sizes or min(sizes) < 1 or args.repeats < 1:
            raise ValueError
    except ValueError:
        print(f"host-dispatches: error: --games takes whole numbers ≥ 1 and --repeats ≥ 1 "
              f"(got {args.games!r}, {args.repeats})", file=sys.stderr)
        return 2
    cfg = RunConfig(agent=args.agent, sampler=args.sampler, particles=args.particles)
    try:
        run_config.validate(cfg)
    except UsageError as err:
        print(f"host-dispatches: error: {err}", file=sys.stderr)
        return 2
    stamp = {"commit": provenance.commit(), "host": platform.node()}
    for games in sizes:
        row = measure(cfg, games, args.repeats) | stamp
        line = json.dumps(row)
        print(line)
        if args.out != "-":
            with open(args.out, "a") as fh:
                fh.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
