"""Can reflection pay? Tune L3's reflective runtime on training seeds, confirm on held-out seeds.

1. Search: on seed indices `[0, --train-seeds)` of every board, MRA with revision on at every
   setting of the grid (τ × cooldown × δ_min), and MRA with revision off, all on the same games.
   Then, at the grid's best setting, every proper subset of the paper's presets (which patches
   the gate may apply; `--preset-sets`). Each setting is scored by its mean paired ΔF1 against
   revision off; the best of those that revise at all (a gate that never opens replays revision
   off) is chosen.
2. Confirm: the chosen setting and revision off on the held-out seed indices
   `[--held-out-first, --held-out-first + --held-out-seeds)`, which never overlap the training
   ones (checked before anything runs): paired ΔF1 (bootstrap 95% CI) and Δcompletion
   (McNemar's exact test), and the smallest ΔF1 the held-out games could have detected (80%
   power, two-sided α = 0.05: 2.80 × the standard error of the paired difference).

Every setting is an ordinary run directory under OUT/search/ or OUT/confirm/ (resumable:
rerunning continues where it stopped); OUT/search.csv, OUT/confirm.json and OUT/README.md hold
the results.

    python experiments/battleship/reflection_search.py --out experiments/battleship/reflection-search
    python experiments/battleship/reflection_search.py --taus 0.72,1.0 --cooldowns 3 \\
        --train-seeds 2 --held-out-first 2 --held-out-seeds 2 --out /tmp/quick     # a smoke run
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import itertools
import json
import math
import sys
from pathlib import Path

import numpy as np

from bsjax.battleship.harness import experiment, summaries
from bsjax.battleship.harness.run_config import RunConfig
from bsjax.battleship.runtime.presets import KINDS
from bsjax.core.files import read_run_jsonl, write_json_atomic, write_text_atomic

Z_POWER = 1.959964 + 0.841621  # two-sided α = 0.05, power 0.8


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--taus", default="0.6,0.72,0.85,1.0", help="τ values (comma list)")
    p.add_argument("--cooldowns", default="1,3,6", help="cooldown turns (comma list)")
    p.add_argument("--min-deltas", default="0.01", help="δ_min values (comma list)")
    p.add_argument("--preset-sets", default="subsets",
                   help="preset subsets searched at the grid's best setting, separated by ';' "
                        "(each a comma list of kinds); subsets: every proper subset; none: skip")
    p.add_argument("--train-seeds", type=int, default=100, help="training seed indices 0..N-1")
    p.add_argument("--held-out-first", type=int, default=100, help="first held-out seed index")
    p.add_argument("--held-out-seeds", type=int, default=300, help="held-out seed indices")
    p.add_argument("--boards", default="all", help="all, or a list such as B01,B02")
    p.add_argument("--sampler", default="particles")
    p.add_argument("--particles", type=int, default=500)
    p.add_argument("--run-seed", type=int, default=0)
    p.add_argument("--batch-size", default="auto", help="games per batch, or auto")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    try:
        args.taus, args.min_deltas = _floats(args.taus), _floats(args.min_deltas)
        args.cooldowns = _ints(args.cooldowns)
        args.preset_sets = preset_sets(args.preset_sets)
    except ValueError as err:
        p.error(str(err))
    try:
        check_disjoint((0, args.train_seeds),
                       (args.held_out_first, args.held_out_first + args.held_out_seeds))
    except ValueError as err:
        p.error(str(err))
    return args


def check_disjoint(train: tuple[int, int], held_out: tuple[int, int]) -> None:
    """Refuse training and confirmation seed ranges `[lo, hi)` that are empty or overlap."""
    (a, b), (c, d) = train, held_out
    if a < 0 or c < 0 or b <= a or d <= c:
        raise ValueError(f"empty or negative seed range: training {train}, held-out {held_out}")
    if a < d and c < b:
        raise ValueError(f"training seeds [{a}, {b}) and held-out seeds [{c}, {d}) overlap: "
                         "a setting tuned on a game cannot be confirmed on it")


def preset_sets(text: str) -> list[str]:
    """The `--preset-sets` argument as RunConfig `presets` values. Raises ValueError."""
    if text == "none":
        return []
    if text == "subsets":
        return [",".join(c) for n in range(1, len(KINDS))
                for c in itertools.combinations(KINDS, n)]
    sets = [part.strip() for part in text.split(";") if part.strip()]
    for part in sets:
        unknown = [k for k in part.split(",") if k.strip() not in KINDS]
        if unknown:
            raise ValueError(f"unknown preset(s) {', '.join(unknown)} in --preset-sets")
    return sets


@dataclasses.dataclass(frozen=True)
class Setting:
    tau: float
    cooldown: int
    min_delta: float
    presets: str = "all"

    @property
    def id(self) -> str:
        name = f"tau={self.tau:g}_cooldown={self.cooldown}_mindelta={self.min_delta:g}"
        return name if self.presets == "all" else f"{name}_presets={self.presets.replace(',', '+')}"

    def config(self, base: RunConfig) -> RunConfig:
        return dataclasses.replace(base, revision="on", tau=self.tau, cooldown=self.cooldown,
                                   min_delta=self.min_delta, presets=self.presets)


def _base(args, seeds: int, first_seed: int) -> RunConfig:
    return RunConfig(agent="mra", sampler=args.sampler, particles=args.particles, seeds=seeds,
                     boards=args.boards,
                     first_seed=first_seed, run_seed=args.run_seed,
                     batch_size=args.batch_size if args.batch_size == "auto"
                     else int(args.batch_size))


def _play(cfg: RunConfig, out: Path) -> list[dict]:
    """Run (or resume) one setting; its game rows."""
    experiment.run(cfg, out, resume=True)
    return read_run_jsonl(out, "games.jsonl")


def _outcome(game: dict) -> tuple:
    return game["shots"], game["hits"], game["questions"], game["won"]


def same_games(rows: list[dict], other: list[dict]) -> bool:
    """Whether two runs played every shared game identically (a gate that never opened)."""
    return all(_outcome(a) == _outcome(b) for a, b in summaries.paired_games(rows, other))


def compare(on: list[dict], off: list[dict]) -> dict:
    """Revision on against off over the games both played: `summaries.compare_paired` (ΔF1 with
    its bootstrap CI, the discordant completions, McNemar's p), both rows' means, and the
    smallest ΔF1 these pairs could detect."""
    pairs = summaries.paired_games(on, off)
    differences = np.array([float(a["f1"]) - float(b["f1"]) for a, b in pairs])
    se = (float(differences.std(ddof=1) / math.sqrt(len(differences)))
          if len(differences) > 1 else float("nan"))
    return {**summaries.compare_paired(on, off),
            "f1_on": float(np.mean([float(a["f1"]) for a, _ in pairs])),
            "f1_off": float(np.mean([float(b["f1"]) for _, b in pairs])),
            "completed_on": sum(bool(a["won"]) for a, _ in pairs),
            "completed_off": sum(bool(b["won"]) for _, b in pairs),
            "detectable_delta_f1": Z_POWER * se}


def search(settings: list[Setting], train: RunConfig, off: list[dict], out: Path,
           stage: str) -> list[dict]:
    """Play each setting on the training seeds; one row per setting, scored against `off`."""
    rows = []
    for i, setting in enumerate(settings, 1):
        games = _play(setting.config(train), out / "search" / setting.id)
        # A setting whose gate never opens plays revision off's games exactly: not a policy.
        row = {**dataclasses.asdict(setting), "stage": stage, **compare(games, off),
               "revises": not same_games(games, off)}
        rows.append(row)
        print(f"[{stage} {i}/{len(settings)}] {setting.id}: ΔF1 {row['delta_f1']:+.4f} "
              f"[{row['delta_f1_low']:+.4f}, {row['delta_f1_high']:+.4f}]", file=sys.stderr)
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    grid = [Setting(t, c, d) for t in args.taus for c in args.cooldowns for d in args.min_deltas]
    train = _base(args, args.train_seeds, 0)
    off = _play(dataclasses.replace(train, revision="off"), out / "search" / "revision-off")
    rows = search(grid, train, off, out, "grid")
    revising = [r for r in rows if r["revises"]]
    if revising and args.preset_sets:
        # Stage 2, a coordinate step: which presets the gate may apply, at the grid's best.
        best = max(revising, key=lambda r: r["delta_f1"])
        subsets = [Setting(best["tau"], best["cooldown"], best["min_delta"], presets)
                   for presets in args.preset_sets]
        rows += search(subsets, train, off, out, "presets")
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(rows[0])
    writer.writerows([f"{v:.6g}" if isinstance(v, float) else v for v in r.values()] for r in rows)
    write_text_atomic(out / "search.csv", table.getvalue())
    revising = [r for r in rows if r["revises"]]
    if not revising:
        print("no setting of the grid ever revised on the training seeds", file=sys.stderr)
        return 1
    best = max(revising, key=lambda r: r["delta_f1"])
    chosen = Setting(best["tau"], best["cooldown"], best["min_delta"], best["presets"])

    held = _base(args, args.held_out_seeds, args.held_out_first)
    confirm_off = _play(dataclasses.replace(held, revision="off"), out / "confirm" / "revision-off")
    confirm_on = _play(chosen.config(held), out / "confirm" / chosen.id)
    result = {"chosen": dataclasses.asdict(chosen), "training": best,
              "held_out": compare(confirm_on, confirm_off),
              "train_seeds": [0, args.train_seeds],
              "held_out_seeds": [args.held_out_first, args.held_out_first + args.held_out_seeds],
              "grid_size": len(grid), "preset_sets": len(rows) - len(grid),
              "command": " ".join(["python"] + sys.argv)}
    write_json_atomic(out / "confirm.json", result)
    h = result["held_out"]
    verdict = ("reflection pays: the held-out ΔF1 CI excludes zero on the positive side"
               if h["delta_f1_low"] > 0 else
               "no net-positive reflection policy confirmed on the held-out seeds")
    print(json.dumps(result, indent=2))
    print(f"{chosen.id}: held-out ΔF1 {h['delta_f1']:+.4f} [{h['delta_f1_low']:+.4f}, "
          f"{h['delta_f1_high']:+.4f}] over {h['n_paired']} games; smallest detectable "
          f"{h['detectable_delta_f1']:.4f}; {verdict}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
