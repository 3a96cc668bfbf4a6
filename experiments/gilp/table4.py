"""Table 4 and F4 on their own: every backbone's planners (standalone Parametric-WM-MPC and
Hybrid-Full with that backbone as skeleton provider) on the test split, beside the backbone
metrics of its checkpoints. It is the "table4" stage of `bsjax gilp paper --profile full`, run
alone with a chosen number of seeds (the full plan's 8 seeds x 6 backbones is GPU work).

    python experiments/gilp/table4.py --work .gilpwork --params PARAMS.json --seeds 2 --out DIR

Resumable: each backbone's run directory is continued (`bsjax.gilp.evaluation.paper.table4_runs`).
Several processes may run different `--backbones` into the same DIR at once (each then writes a
table of its own backbones); `--render-only` afterwards builds the table of every backbone that
has a finished run under DIR/backbones/ from their summary.json files, running nothing.
Writes DIR/backbones.json, DIR/table_4.md|csv and DIR/f4_backbones.png.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from bsjax.core import files
from bsjax.gilp import config, profiles
from bsjax.gilp.behaviour.params import load_params
from bsjax.gilp.evaluation import paper
from bsjax.gilp.report import figures as gilp_figures
from bsjax.gilp.report import table_format
from bsjax.gilp.report import tables as gilp_tables


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--params", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--backbones", default=",".join(profiles.ALL_BACKBONES))
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--render-only", action="store_true",
                        help="tabulate the finished runs under OUT/backbones/, run nothing")
    args = parser.parse_args(argv)
    work, out = Path(args.work), Path(args.out)
    profile = profiles.get_profile(args.profile)
    names = [n for n in args.backbones.split(",") if n]
    if args.render_only:
        names = [n for n in names if (out / "backbones" / n / "summary.json").exists()]
        if not names:
            print(f"table4.py: error: no finished backbone run under {out}/backbones/",
                  file=sys.stderr)
            return 2
    benches = list(config.BENCHMARKS)
    params = {b: load_params(args.params, b) for b in benches}
    plan = dataclasses.replace(profile, backbones=tuple(names), table4_backbones=tuple(names),
                               calibrate=None, tau_lows=(), sweep_tasks=0, sweep_seeds=0)
    log = lambda line: print(f"[{time.perf_counter() - start:6.0f} s] {line}",  # noqa: E731
                             file=sys.stderr, flush=True)
    start = time.perf_counter()
    trained = paper.train_all(work, benches, plan, log)  # loads the existing checkpoints
    if args.render_only:
        runs = {n: json.loads((out / "backbones" / n / "summary.json").read_text()) for n in names}
    else:
        runs = paper.table4_runs(out, work, names, benches, profile, params, seeds=args.seeds,
                                 log=log)
    backbones = paper.backbone_table(trained, runs)
    files.write_json_atomic(out / "backbones.json", backbones)
    table_format.write_table(gilp_tables.table4(backbones), out)
    gilp_figures.f4_backbones(backbones, out / gilp_figures.FILES["f4"])
    log(f"wrote {out}/table_4.md and {gilp_figures.FILES['f4']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
