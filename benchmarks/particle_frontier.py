"""The particle sampler's frontier: greedy's F1 and completion against games/s, over particles P
and MH sweeps per observation.

Every point plays the same games (the 18 synthetic boards × `--seeds` seed indices, one run
seed), so differences between points are paired: each point is compared with the reference
point (`--reference`, the shipped default) by a paired bootstrap of ΔF1 and McNemar's exact test
of Δcompletion. Speed is `bsjax bench`'s steady-state games/s at G = `--bench-games`.

Each point is appended to OUT/TAG.jsonl as soon as it is measured (a rerun skips the points
already there, so an interrupted run resumes); at the end OUT/TAG.md holds the table and the
chosen setting, OUT/TAG.png F1 against games/s.

    python benchmarks/particle_frontier.py                                   # 540 games a point
    python benchmarks/particle_frontier.py --particles 250,500 --sweeps 2,4 --seeds 3   # quick

The choice: the fastest point whose mean F1 lies inside the reference point's 95% interval of the
mean (normal approximation over games).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import sys
import time
from pathlib import Path

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import provenance  # noqa: E402  (benchmarks/ is on sys.path when this file is run)

from bsjax.battleship.game import rules  # noqa: E402
from bsjax.battleship.harness import bench, experiment, run_config  # noqa: E402
from bsjax.battleship.harness.loop import BatchRunner  # noqa: E402
from bsjax.core.stats import mcnemar_exact, paired_bootstrap, wilson_interval  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--particles", default="100,250,500,1000", help="P values (comma list)")
    p.add_argument("--sweeps", default="1,2,4", help="MH sweeps per observation (comma list)")
    p.add_argument("--seeds", type=int, default=30, help="seed indices per board (default 30)")
    p.add_argument("--reference", default="500x4", help="the default point, PxSWEEPS")
    p.add_argument("--bench-games", type=int, default=54, help="G of the games/s measurement")
    p.add_argument("--repeats", type=int, default=3, help="timed batches per games/s (median)")
    p.add_argument("--run-seed", type=int, default=0)
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument("--tag", default="particle-frontier")
    args = p.parse_args(argv)
    args.particles = [int(x) for x in args.particles.split(",")]
    args.sweeps = [int(x) for x in args.sweeps.split(",")]
    if min(args.particles + args.sweeps) < 1 or args.seeds < 1 or args.bench_games < 1:
        p.error("particles, sweeps, seeds and bench games must be positive")
    return args




def measure_point(particles: int, sweeps: int, seeds: int, bench_games: int, repeats: int,
                  run_seed: int) -> dict:
    """Play the games of one point (stats) and time it at G = bench_games (speed)."""
    cfg = run_config.RunConfig(agent="greedy", sampler="particles", particles=particles,
                               sweeps=sweeps, seeds=seeds, run_seed=run_seed)
    game_config, boards = run_config.validate(cfg)
    specs = experiment.game_list(boards, seeds)
    start = time.perf_counter()
    result = BatchRunner(run_config.make_player(cfg, game_config), len(specs)).play(
        specs, run_seed)
    play_seconds = time.perf_counter() - start
    speed = bench.bench(cfg, bench_games, repeats=repeats)
    f1 = np.asarray(rules.f1_score(result.shots, result.hits, result.ship_cells))
    return {
        "particles": particles, "sweeps": sweeps, "games": len(specs),
        "games_id": [f"{g.board_id}/{g.seed_index}" for g in specs],
        "f1": [round(float(x), 6) for x in f1], "won": [bool(x) for x in result.won],
        "play_seconds": round(play_seconds, 2),
        "games_per_second": speed["games_per_second"], "ms_per_turn": speed["ms_per_turn"],
        "compile_seconds": speed["compile_seconds"], "bench_games": bench_games,
        "device": speed["device"], "jax": jax.__version__, "python": platform.python_version(),
        "bsjax_commit": provenance.commit(), "command": " ".join(["python"] + sys.argv),
        "timestamp": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def summarise(rows: list[dict], reference: tuple[int, int]) -> tuple[list[dict], dict | None]:
    """Per point: F1 mean and 95% CI, completion with Wilson CI, paired Δ against the reference;
    and the chosen point (fastest whose mean F1 is inside the reference's CI)."""
    ref = next((r for r in rows if (r["particles"], r["sweeps"]) == reference), None)
    out = []
    for r in rows:
        f1, won = np.asarray(r["f1"]), np.asarray(r["won"])
        half = 1.959964 * f1.std(ddof=1) / math.sqrt(len(f1))
        lo, hi = wilson_interval(int(won.sum()), len(won))
        row = {"particles": r["particles"], "sweeps": r["sweeps"], "games": len(f1),
               "f1": float(f1.mean()), "f1_low": float(f1.mean() - half),
               "f1_high": float(f1.mean() + half), "completed": int(won.sum()),
               "completion": float(won.mean()), "completion_low": lo, "completion_high": hi,
               "games_per_second": r["games_per_second"], "compile_seconds": r["compile_seconds"]}
        if ref is not None and r["games_id"] == ref["games_id"]:
            mean, d_lo, d_hi = paired_bootstrap(f1, np.asarray(ref["f1"]))
            test = mcnemar_exact(won, np.asarray(ref["won"]))
            row.update(delta_f1=mean, delta_f1_low=d_lo, delta_f1_high=d_hi,
                       only_point_completed=test.only_a, only_reference_completed=test.only_b,
                       mcnemar_p=test.p_value)
        out.append(row)
    ref_row = next((s for s in out if (s["particles"], s["sweeps"]) == reference), None)
    if ref_row is None:
        return out, None
    inside = [s for s in out if ref_row["f1_low"] <= s["f1"] <= ref_row["f1_high"]]
    return out, max(inside, key=lambda s: s["games_per_second"])


def markdown(summary: list[dict], chosen: dict | None, reference: tuple[int, int],
             rows: list[dict]) -> str:
    last = rows[-1]
    lines = [
        "# The particle sampler's frontier (greedy, paper protocol)", "",
        f"{summary[0]['games']} games per point (18 boards × {summary[0]['games'] // 18} seed "
        f"indices, the same games at every point); games/s steady at G = {last['bench_games']} "
        f"(median of the timed batches, compile excluded) on `{last['device']}`, jax "
        f"{last['jax']}, bsjax {last['bsjax_commit']}. Δ columns: paired against P = "
        f"{reference[0]}, {reference[1]} sweeps (bootstrap 95% CI of ΔF1; McNemar's exact p of "
        "Δcompletion, with the games only one of the two completed).", "",
        f"Command: `{last['command']}`", "",
        "| P | sweeps | F1 [95% CI] | ΔF1 [95% CI] | completed [Wilson 95%] | only point / only "
        "ref. | McNemar p | games/s | compile (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in sorted(summary, key=lambda s: (s["particles"], s["sweeps"])):
        delta = (f"{s['delta_f1']:+.4f} [{s['delta_f1_low']:+.4f}, {s['delta_f1_high']:+.4f}]"
                 if "delta_f1" in s else "")
        pair = (f"{s['only_point_completed']} / {s['only_reference_completed']}"
                if "delta_f1" in s else "")
        p_value = f"{s['mcnemar_p']:.3g}" if "mcnemar_p" in s else ""
        lines.append(
            f"| {s['particles']} | {s['sweeps']} | {s['f1']:.4f} [{s['f1_low']:.4f}, "
            f"{s['f1_high']:.4f}] | {delta} | {s['completed']}/{s['games']} = "
            f"{100 * s['completion']:.1f}% [{100 * s['completion_low']:.1f}, "
            f"{100 * s['completion_high']:.1f}] | {pair} | {p_value} | "
            f"{s['games_per_second']:.1f} | {s['compile_seconds']:.1f} |")
    if chosen is not None:
        lines += ["", f"Fastest point whose mean F1 lies inside the reference's 95% CI: "
                  f"**P = {chosen['particles']}, {chosen['sweeps']} sweeps** "
                  f"({chosen['games_per_second']:.1f} games/s, F1 {chosen['f1']:.4f})."]
    return "\n".join(lines) + "\n"


def plot(summary: list[dict], chosen: dict | None, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for sweeps in sorted({s["sweeps"] for s in summary}):
        points = sorted((s for s in summary if s["sweeps"] == sweeps),
                        key=lambda s: s["games_per_second"])
        x = [s["games_per_second"] for s in points]
        y = [s["f1"] for s in points]
        err = [[s["f1"] - s["f1_low"] for s in points], [s["f1_high"] - s["f1"] for s in points]]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=f"{sweeps} sweeps")
        for s in points:
            ax.annotate(f"P={s['particles']}", (s["games_per_second"], s["f1"]),
                        textcoords="offset points", xytext=(4, 4), fontsize=7)
    if chosen is not None:
        ax.scatter([chosen["games_per_second"]], [chosen["f1"]], s=160, facecolors="none",
                   edgecolors="black", label="chosen")
    ax.set_xscale("log")
    ax.set_xlabel("games/s (steady state)")
    ax.set_ylabel("mean F1 (95% CI)")
    ax.set_title("greedy + particles: F1 against speed")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / f"{args.tag}.jsonl"
    rows = [json.loads(x) for x in jsonl.read_text().splitlines() if x.strip()] \
        if jsonl.exists() else []
    done = {(r["particles"], r["sweeps"], r["games"]) for r in rows}
    n_games = 18 * args.seeds
    todo = [(p, s) for p in args.particles for s in args.sweeps if (p, s, n_games) not in done]
    for i, (particles, sweeps) in enumerate(todo, 1):
        row = measure_point(particles, sweeps, args.seeds, args.bench_games, args.repeats,
                            args.run_seed)
        with jsonl.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        rows.append(row)
        print(f"[{i}/{len(todo)}] P={particles} sweeps={sweeps}: F1 {np.mean(row['f1']):.4f}, "
              f"{row['games_per_second']:.1f} games/s, compile {row['compile_seconds']:.1f} s",
              file=sys.stderr)
    rows = [r for r in rows if r["games"] == n_games]
    reference = tuple(int(x) for x in args.reference.split("x"))
    summary, chosen = summarise(rows, reference)
    (out / f"{args.tag}.md").write_text(markdown(summary, chosen, reference, rows))
    plot(summary, chosen, out / f"{args.tag}.png")
    print((out / f"{args.tag}.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
