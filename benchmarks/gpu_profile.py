"""Where one agent's batch spends its device time: kernels by source line, and the gaps.

For each batch size G: `bench.bench` (compile s, games/s), then one more batch under JAX's
profiler. The device's kernels are summed by name (XLA names a fusion's kernel after its
instruction) and given their source lines (from the compiled turn loop's stack frames), and the
device's busy share
of the batch's span is reported: near 1 the batch is the kernels' arithmetic and memory
traffic, far below 1 it is launch and host overhead between kernels (a GPU at small G).

One JSON line per point (`"row": "point"`), one per kernel of its `--top` most expensive
(`"row": "op"`) and one per pair of kernels with the `--top` most idle time between them
(`"row": "gap"`: a pair that recurs once a turn is a round trip through the host), appended to
OUT/TAG.jsonl. `--xla-flags` is appended to `XLA_FLAGS` before JAX
starts (a process's flags are fixed at its first device use), so compare flag settings with
one invocation each:

    python benchmarks/gpu_profile.py --agent greedy --games 1,54,65536
    python benchmarks/gpu_profile.py --agent greedy --games 1 --label while-graphs \\
        --xla-flags=--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL,WHILE,CONDITIONAL

It runs on a CPU too (the ops of XLA's CPU thread); its figures mean something on a GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agent", default="greedy")
    p.add_argument("--sampler", default="particles")
    p.add_argument("--particles", type=int, default=500)
    p.add_argument("--protocol", default="paper", choices=("paper", "grand"))
    p.add_argument("--mh-kernel", default="auto", choices=("auto", "xla", "pallas", "interpret"))
    p.add_argument("--games", default="1,54", help="batch sizes G (default %(default)s)")
    p.add_argument("--xla-flags", default="", help="appended to XLA_FLAGS for this process")
    p.add_argument("--label", default="default", help="names this setting in the rows")
    p.add_argument("--top", type=int, default=25, help="ops written per point (default 25)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"), help="output folder")
    p.add_argument("--tag", default=None, help="file stem (default profile-<platform>)")
    p.add_argument("--no-python-trace", action="store_true",
                   help="leave Python calls out of the trace (smaller; for large batches)")
    p.add_argument("--keep-trace", action="store_true",
                   help="copy each point's perfetto trace to OUT/TAG-LABEL-AGENT-G.json.gz")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        sizes = [int(x) for x in args.games.split(",") if x.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        print(f"gpu-profile: error: --games takes whole numbers ≥ 1 (got {args.games!r})",
              file=sys.stderr)
        return 2
    if args.top < 0:
        print(f"gpu-profile: error: --top must be ≥ 0 (got {args.top})", file=sys.stderr)
        return 2
    if args.xla_flags:  # before JAX reads them
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + args.xla_flags).strip()
    import json
    import platform
    import shutil
    import tempfile

    import jax
    import provenance  # benchmarks/ is on sys.path when this file is run

    from bsjax.battleship.harness import bench
    from bsjax.battleship.harness.run_config import RunConfig, validate
    from bsjax.core import hlo, profile
    from bsjax.core.errors import UsageError

    cfg = RunConfig(agent=args.agent, sampler=args.sampler, particles=args.particles,
                    protocol=args.protocol, mh_kernel=args.mh_kernel)
    try:
        validate(cfg)
    except UsageError as err:
        print(f"gpu-profile: error: {err}", file=sys.stderr)
        return 2
    tag = args.tag or f"profile-{jax.default_backend()}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = jax.devices()[0]
    stamp = {"commit": provenance.commit(), "host": platform.node(), "jax": jax.__version__,
             "device_kind": getattr(device, "device_kind", str(device)),
             "label": args.label, "xla_flags": args.xla_flags, "agent": args.agent,
             "sampler": args.sampler, "particles": args.particles, "mh_kernel": args.mh_kernel}
    with (out / f"{tag}.jsonl").open("a") as fh:
        for games in sizes:
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    row = bench.bench(cfg, games, repeats=3 if games <= 54 else 1,
                                      profile_dir=tmp, profile_python=not args.no_python_trace)
                    kernels = [] if "profile_error" in row else profile.read_trace(tmp)
                    programs = 0 if "profile_error" in row else profile.dispatches(tmp)
                except Exception as err:  # noqa: BLE001 — a failed point is a row, not a stop
                    message = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:300]}"
                    fh.write(json.dumps({"row": "point", **stamp, "games": games,
                                         "error": message}) + "\n")
                    fh.flush()
                    print(f"{args.label} {args.agent} G={games}: {message}", file=sys.stderr,
                          flush=True)
                    continue
                hlo_file = Path(tmp) / "turn-loop.hlo.txt"
                sources = hlo.instruction_sources(hlo_file.read_text()) if hlo_file.is_file() \
                    else {}
                # A GPU kernel is its instruction's name with "." as "_" (fusion.3: fusion_3).
                sources |= {name.replace(".", "_"): chain for name, chain in sources.items()}
                if args.keep_trace and kernels:
                    shutil.copy(profile.trace_file(tmp),
                                out / f"{tag}-{args.label}-{args.agent}-{games}.json.gz")
            turns = max(row["turns"], 1)
            busy = profile.busy_summary(kernels)
            point = {"row": "point", **stamp, "games": games,
                     "compile_seconds": row["compile_seconds"],
                     "games_per_second": row["games_per_second"], "turns": row["turns"],
                     "ms_per_turn": row["ms_per_turn"], "dispatches_per_batch": programs,
                     "kernels_per_turn": round(busy["kernels"] / turns, 2),
                     "busy_us_per_turn": round(busy["busy_us"] / turns, 2),
                     "span_us_per_turn": round(busy["span_us"] / turns, 2), **busy,
                     **({"profile_error": row["profile_error"]} if "profile_error" in row else {})}
            fh.write(json.dumps(point) + "\n")
            for gap in profile.gap_table(kernels)[:args.top]:
                fh.write(json.dumps({"row": "gap", "label": args.label, "agent": args.agent,
                                     "games": games, **gap,
                                     "gaps_per_turn": round(gap["gaps"] / turns, 2)}) + "\n")
            for op in profile.op_table(kernels)[:args.top]:
                fh.write(json.dumps({"row": "op", "label": args.label, "agent": args.agent,
                                     "games": games, **op,
                                     "launches_per_turn": round(op["launches"] / turns, 2),
                                     "source": list(sources.get(op["op"], ())[:4])}) + "\n")
            fh.flush()
            print(f"{args.label} {args.agent} G={games}: {row['games_per_second']:.1f} games/s, "
                  f"{row['ms_per_turn']:.3f} ms/turn, {point['kernels_per_turn']} kernels/turn, "
                  f"busy {busy['busy_share']:.0%}, compile {row['compile_seconds']:.1f} s",
                  file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
