"""A roofline for greedy + particles: the work of one game-turn, the rate achieved, the bound.

Work per game-turn, from the sampler's configuration and XLA's own cost analysis of each piece
compiled for one game (a while loop's body is counted once by XLA, so the pieces are compiled
apart and multiplied by their trip counts):

- `sweeps × ships × P` single-ship MH steps (the rejuvenation), one `log_target` each, with
  the hash of the step's random words;
- one reweight (P `log_target`s, the ESS, a possible resample);
- one `hit_probability` (`[P] @ [P, C]`) and the greedy argmax.

The measured rate is `bsjax bench`'s steady-state ms per batched turn at G games, so
game-turns/s = G / (ms per turn). Achieved operations/s and bytes/s follow, against the device's
peak: on a CPU, cores × clock × 32-bit SIMD lanes × 2 vector pipes (the clock and the widest
vector extension read from /proc/cpuinfo); on a GPU, the vendor's figures for the card
(`GPU_PEAKS`). Writes one JSON line to OUT/roofline.jsonl and prints a Markdown summary.

    python benchmarks/roofline.py --games 54
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import sys
from pathlib import Path

import jax
import jax.numpy as jnp

from bsjax.battleship.belief import constraints
from bsjax.battleship.harness import bench, run_config
from bsjax.core import fastpath

# Peak (int32/fp32 vector operations per second, bytes per second) of cards by device kind.
GPU_PEAKS = {
    "H100": (67e12, 3.35e12),   # SXM: 67 TFLOP/s FP32 (non-tensor), 3.35 TB/s HBM3
    "H200": (67e12, 4.8e12),
    "A100": (19.5e12, 2.0e12),
}


def cpu_peak() -> tuple[float, float, str]:
    """(operations/s, bytes/s, description) of this CPU. Memory bandwidth is not readable from
    the OS; a DDR4/DDR5 server channel pair is assumed (~40 GB/s per socket share of 2 cores)."""
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    mhz = [float(x) for x in re.findall(r"cpu MHz\s*:\s*([\d.]+)", text)] or [2500.0]
    lanes = 16 if " avx512f" in text else 8 if " avx2" in text else 4
    cores = os.cpu_count() or 1
    ops = cores * max(mhz) * 1e6 * lanes * 2
    return ops, 40e9, (f"{cores} cores × {max(mhz) / 1000:.2f} GHz × {lanes} lanes × 2 pipes")


def _cost(fn, *args) -> tuple[float, float]:
    """(XLA flops, XLA bytes accessed) of `fn` compiled for these arguments."""
    analysis = jax.jit(fn).lower(*args).compile().cost_analysis()
    if isinstance(analysis, list):  # older JAX returns one dict per computation
        analysis = analysis[0]
    return float(analysis.get("flops", 0.0)), float(analysis.get("bytes accessed", 0.0))


def work_per_game_turn(particles: int, sweeps: int) -> dict:
    """XLA's count of operations and bytes of one game-turn, piece by piece."""
    cfg = run_config.RunConfig(agent="greedy", sampler="particles", particles=particles,
                               sweeps=sweeps)
    game_config, boards = run_config.validate(cfg)
    player = run_config.make_player(cfg, game_config)
    sampler = player.sampler
    key = jax.random.key(0)
    truth = jnp.asarray(boards[0].spans, jnp.int32)
    state = player.env.init(truth, jnp.int32(1))
    belief = sampler.init(key, state.obs, jnp.int32(1))
    obs = state.obs
    n_ships = game_config.n_ships
    evidence = constraints.answer_evidence(game_config, obs)
    shape = (sweeps * game_config.n_ships, particles, 4)

    words = jnp.zeros(shape[1:], jnp.uint32)
    step = jax.vmap(lambda w, s, t: sampler._mh_step(w, s, t, obs, evidence))
    move_flops, move_bytes = _cost(step, words, belief.spans, belief.log_target)
    # The step's random words, hashed in the step (`fastpath.bits_row`).
    hash_flops, hash_bytes = _cost(lambda i: fastpath.bits_row(key, shape, i), jnp.int32(1))
    step_flops, step_bytes = move_flops + hash_flops, move_bytes + hash_bytes
    reweight_flops, reweight_bytes = _cost(lambda k, b: sampler._reweight(k, b, obs, evidence),
                                           key, belief)
    decide_flops, decide_bytes = _cost(
        lambda b: player.agent.decide(key, player.default_params().agent,
                                      player.env.observe(state), sampler, b, ())[0],
        belief)
    steps = sweeps * n_ships  # vmapped over the P particles
    return {
        "particles": particles, "sweeps": sweeps, "ships": n_ships,
        "mh_steps": steps * particles,
        "flops": steps * step_flops + reweight_flops + decide_flops,
        "bytes": steps * step_bytes + reweight_bytes + decide_bytes,
        "flops_per_mh_step": step_flops / particles, "bytes_per_mh_step": step_bytes / particles,
        "hash_flops_per_mh_step": hash_flops / particles,
        "reweight_flops": reweight_flops, "decide_flops": decide_flops,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--games", type=int, default=54, help="batch size G of the measurement")
    p.add_argument("--particles", type=int, default=500)
    p.add_argument("--sweeps", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default="benchmarks/results")
    args = p.parse_args(argv)
    work = work_per_game_turn(args.particles, args.sweeps)
    cfg = run_config.RunConfig(agent="greedy", sampler="particles", particles=args.particles,
                               sweeps=args.sweeps)
    row = bench.bench(cfg, args.games, repeats=args.repeats)
    game_turns = args.games / (row["ms_per_turn"] / 1000)
    device = jax.devices()[0]
    if device.platform == "cpu":
        peak_ops, peak_bytes, peak_text = cpu_peak()
    else:
        kind = next((k for k in GPU_PEAKS if k in device.device_kind), None)
        peak_ops, peak_bytes = GPU_PEAKS.get(kind, (float("nan"), float("nan")))
        peak_text = f"{device.device_kind} (vendor figures)"
    achieved_ops, achieved_bytes = game_turns * work["flops"], game_turns * work["bytes"]
    result = {
        **work, "games": args.games, "ms_per_turn": row["ms_per_turn"],
        "games_per_second": row["games_per_second"], "game_turns_per_second": game_turns,
        "mh_steps_per_second": game_turns * work["mh_steps"],
        "achieved_ops": achieved_ops, "achieved_bytes": achieved_bytes,
        "peak_ops": peak_ops, "peak_bytes": peak_bytes, "peak": peak_text,
        "bound_game_turns_per_second": min(peak_ops / work["flops"], peak_bytes / work["bytes"]),
        "device": str(device), "platform": device.platform, "jax": jax.__version__,
        "python": platform.python_version(), "command": " ".join(["python"] + sys.argv),
        "timestamp": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "roofline.jsonl").open("a") as fh:
        fh.write(json.dumps(result) + "\n")
    cores = os.cpu_count() or 1
    lines = [
        ("MH steps per game-turn", f"{work['mh_steps']:,} ({args.sweeps} sweeps × "
         f"{work['ships']} ships × P = {args.particles})"),
        ("XLA operations per game-turn", f"{work['flops'] / 1e6:.2f} M "
         f"({work['flops_per_mh_step']:.0f} per MH step)"),
        ("XLA bytes accessed per game-turn", f"{work['bytes'] / 1e6:.2f} MB "
         f"({work['bytes_per_mh_step']:.0f} per MH step)"),
        (f"measured at G = {args.games}", f"{row['ms_per_turn']:.2f} ms per batched turn, "
         f"{row['games_per_second']:.1f} games/s"),
        ("game-turns/s", f"{game_turns:,.0f} ({game_turns / cores:,.0f} per core) on {device}"),
        ("MH steps/s", f"{result['mh_steps_per_second'] / 1e6:.1f} M"),
        ("achieved", f"{achieved_ops / 1e9:.1f} G op/s, {achieved_bytes / 1e9:.1f} GB/s"),
        ("peak", f"{peak_ops / 1e9:.0f} G op/s, {peak_bytes / 1e9:.0f} GB/s ({peak_text})"),
        ("fraction of peak", f"{achieved_ops / peak_ops:.1%} of op/s, "
         f"{achieved_bytes / peak_bytes:.1%} of bytes/s"),
        ("roofline bound", f"{result['bound_game_turns_per_second']:,.0f} game-turns/s"),
    ]
    print("| quantity | value |\n|---|---|")
    for name, value in lines:
        print(f"| {name} | {value} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
