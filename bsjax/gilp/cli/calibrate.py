"""`bsjax gilp calibrate`: fit the behavioural simulator's parameters (docs/gilp/spec.md §5.2).

Bad input gives one line on stderr and exit code 2 before anything is written; `--json` prints
one JSON object as the last stdout line; progress goes to stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bsjax.core import checks
from bsjax.core.errors import UsageError
from bsjax.gilp import profiles

DEFAULT_WORK = Path("results/gilp")
MAX_EVALS = 100_000  # --evals: the paper budget runs 456 a stage


def _budget(profile: str, evals: int | None):
    from bsjax.gilp.behaviour import calibrate as cal
    if evals is not None:
        checks.int_in(evals, "--evals", 1, MAX_EVALS)
    try:
        budget = cal.get_budget(profile, evals)
        budget.validate()
    except ValueError as err:
        raise UsageError(str(err)) from None
    return budget


def _stages(text: str) -> tuple[int, ...]:
    if text.strip() == "none":
        return ()
    try:
        stages = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        stages = ()
    if not stages or not set(stages) <= {1, 2}:
        raise UsageError(f"--stages takes 1,2, 1, 2 or none (got {text!r})")
    return stages


def cmd_calibrate(args) -> int:
    """Run the calibration (or, with --from-real, the stage-1 refit to a real run)."""
    from bsjax.gilp.behaviour import calibrate as cal
    from bsjax.gilp.cli.args import load_sim_params, parse_backbones, parse_benchmarks
    from bsjax.gilp.training import workdir
    benches = parse_benchmarks(args.bench)
    checks.nonempty(args.budget, "--budget")
    budget = _budget(args.budget or args.profile, args.evals)
    backbone = parse_backbones(args.backbone)
    if len(backbone) != 1:
        raise UsageError("--backbone takes one backbone for a calibration")
    for flag, value in (("--out", args.out), ("--from-real", args.from_real),
                        ("--start", args.start)):
        checks.nonempty(value, flag)
    work = checks.input_dir(args.work, "--work")
    out = checks.writable_dir(Path(args.out) if args.out else work / "calibration", "--out")
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    stages = _stages(args.stages)
    initial = None if args.start is None else load_sim_params(args.start)
    if args.from_real and (initial is not None or stages != (1, 2)):
        raise UsageError("--start and --stages do not apply to --from-real (it refits stage 1)")
    if args.from_real:
        run = Path(args.from_real)
        if not (run / "events.jsonl").is_file():
            raise UsageError(f"{run} is not a real-path run directory (no events.jsonl)")
        base = None
        if (out / cal.PARAMS_FILE).is_file():  # refit on top of the paper-calibrated set
            from bsjax.gilp.behaviour.params import load_params
            base = load_params(out / cal.PARAMS_FILE)
        try:
            from bsjax.gilp.behaviour.calibrate_real import calibrate_from_real
            doc = calibrate_from_real(work, out, run, budget, base=base, log=log)
        except UnicodeDecodeError as err:
            raise UsageError(f"{run}: a file there is not UTF-8 text ({err.reason})") from None
        except ValueError as err:
            raise UsageError(str(err)) from None
        params_file = out / cal.LOCAL_PARAMS_FILE
    else:
        try:
            profile = profiles.get_profile(args.profile)
        except ValueError as err:
            raise UsageError(str(err)) from None
        try:  # load every checkpoint before anything is written
            models = {b: workdir.load_backbone(work, b, backbone[0], profile) for b in benches}
        except FileNotFoundError as err:
            raise UsageError(str(err)) from None
        doc = cal.calibrate(work, out, benches, budget, backbone[0], args.profile, models=models,
                            initial=initial, stages=stages, log=log)
        params_file = out / cal.PARAMS_FILE
    _print(doc, params_file, args.json)
    return 0


def _print(doc: dict, params_file: Path, as_json: bool) -> None:
    meta = doc["meta"]
    objectives = {f"stage{i}": meta[f"stage{i}"]["objective"] for i in (1, 2)
                  if f"stage{i}" in meta}
    if as_json:
        print(json.dumps({"params_file": str(params_file), "params": doc["params"],
                          "objectives": objectives, "residuals": doc["rows"],
                          "band_recheck": doc["band_recheck"],
                          "token_r2": (doc["token_model"] or {}).get("r2"),
                          "seconds": meta["seconds"]}, default=float))
        return
    for name, value in objectives.items():
        print(f"{name}: objective {value:.5f}")
    # One verdict per (method, metric): the latest check wins (stage 2 re-fits Agent-Replan's
    # rows, and the stage-3 re-check holds every fitted band at the final parameters).
    latest = {(r["method"], r["metric"]): r for r in doc["rows"] + doc["band_recheck"]
              if r["pass"] is not None}
    bands = list(latest.values())
    failed = [f"{r['method']} {r['metric']}" for r in bands if not r["pass"]]
    print(f"bands: {len(bands) - len(failed)}/{len(bands)} pass"
          + (f" (failed: {'; '.join(failed)})" if failed else ""))
    print(f"-> {params_file} ({meta['seconds']} s)")


def add_calibrate_parser(gsub) -> None:
    """Register `bsjax gilp calibrate` on the `gilp` subparsers."""
    cal = gsub.add_parser("calibrate", help="fit the behavioural simulator's parameters")
    cal.add_argument("--bench", default="all", help="all, or e.g. taskgraph,toolchain")
    cal.add_argument("--profile", default="quick",
                     help="smoke | quick | paper: the checkpoints (and the budget, unless --budget)")
    cal.add_argument("--budget", default=None,
                     help="smoke | quick | standard | gpu | paper: how much to simulate (default: the "
                          "profile's)")
    cal.add_argument("--work", default=str(DEFAULT_WORK), help="GILP work directory")
    cal.add_argument("--out", default=None, help="output directory (default WORK/calibration)")
    cal.add_argument("--backbone", default="MPNN", help="the trained backbone (default MPNN)")
    cal.add_argument("--from-real", default=None, metavar="RUN",
                     help="refit stage 1 to a real-path run (writes gilp_sim_params.local.json)")
    cal.add_argument("--evals", type=int, default=None,
                     help="evaluations per fitted stage (overrides the profile)")
    cal.add_argument("--start", default=None, metavar="PARAMS",
                     help="start the search from this parameter file, or calibrated (default: the "
                          "spec's initial values)")
    cal.add_argument("--stages", default="1,2",
                     help="stages searched: 1,2 (default), 1, 2 or none; a stage left out keeps "
                          "the start's values, e.g. --stages 2 --start P refits stage 2 of P and "
                          "--stages none --start P checks P against the bands")
    cal.add_argument("--json", action="store_true")
    cal.set_defaults(func=cmd_calibrate)


__all__ = ["add_calibrate_parser", "cmd_calibrate"]
