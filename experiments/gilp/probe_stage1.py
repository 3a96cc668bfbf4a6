"""Stage-1 probes: Agent-Replan's calibration objective and acceptance bands at a few hand
nudges of a parameter file, simulated together in one batch (common random numbers).

    python experiments/gilp/probe_stage1.py --work .gilpwork --params PARAMS.json \
        --probes '[{}, {"t_slip": 0.3}, {"t_slip": 0.33, "h1": 0.04}]'

`{}` is the file itself (its objective equals `bsjax gilp calibrate --stages none`'s stage-1
objective on the same tasks and seeds). One JSON line per probe on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax

from bsjax.gilp import config
from bsjax.gilp.behaviour import calibrate as cal
from bsjax.gilp.behaviour import search
from bsjax.gilp.behaviour.params import load_params


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--params", required=True)
    parser.add_argument("--probes", required=True, help="JSON list of {name: value} nudges")
    parser.add_argument("--tasks", type=int, default=100, help="val tasks per benchmark")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--run-seed", type=int, default=0)
    args = parser.parse_args(argv)
    base = load_params(args.params)
    probes = json.loads(args.probes)
    tasks = cal._val_tasks(Path(args.work), list(config.BENCHMARKS), args.tasks)
    setup = cal.SimSetup(tasks=tasks, models={}, seeds=tuple(range(args.seeds)),
                         root_key=jax.random.key(args.run_seed))
    objective = cal.agent_objective(setup)  # the objective `gilp calibrate` fits in stage 1
    start = time.perf_counter()
    results = objective.many([search.with_values(base, probe) for probe in probes])
    for probe, (value, rows, _) in zip(probes, results):
        bands = {r["metric"]: [round(r["value"], 4), r["pass"]] for r in rows if r.get("band")}
        print(json.dumps({"probe": probe, "objective": round(value, 3), "bands": bands}))
    print(f"{len(probes)} probes in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
