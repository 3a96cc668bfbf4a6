"""Table 5b on its own: GILP on the whole val split at each τ_low of the full plan, with a chosen
number of seeds (the protocol's 8 is GPU work). It is the "tau_sweep" stage of
`bsjax gilp paper --profile full`, run alone.

    python experiments/gilp/tau_sweep.py --work .gilpwork --params calibrated --seeds 8 --out DIR

Writes DIR/tau_sweep.json, DIR/table_5b.md|csv and DIR/tau_sweep_settings.json; a finished sweep
is read back, not re-run, and one made with other settings is refused (exit 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from bsjax.gilp import config, profiles
from bsjax.gilp.behaviour.params import load_params
from bsjax.gilp.evaluation import paper
from bsjax.gilp.report import table_format, tables


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--params", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=100, help="val tasks per benchmark")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    benches = list(config.BENCHMARKS)
    params = {b: load_params(args.params, b) for b in benches}
    plan = dataclasses.replace(profiles.get_profile("full"), sweep_seeds=args.seeds,
                               sweep_tasks=args.tasks)
    start = time.perf_counter()
    log = lambda line: print(f"[{time.perf_counter() - start:6.0f} s] {line}",  # noqa: E731
                             file=sys.stderr, flush=True)
    # paper.tau_sweep reads a finished sweep back whatever its size: refuse one made otherwise.
    settings = {"seeds": args.seeds, "tasks": args.tasks, "params": args.params}
    settings_path = out / "tau_sweep_settings.json"
    if (out / "tau_sweep.json").exists() and settings_path.exists() \
            and json.loads(settings_path.read_text()) != settings:
        print(f"tau_sweep.py: error: {out} holds a sweep made with other settings "
              f"({settings_path.read_text().strip()})", file=sys.stderr)
        return 2
    sweep = paper.tau_sweep(out, Path(args.work), benches, plan, params, 0, log)
    settings_path.write_text(json.dumps(settings) + "\n")
    table_format.write_table(tables.table5b(sweep), out)
    log(f"wrote {out}/tau_sweep.json and table_5b.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
