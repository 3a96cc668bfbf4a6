"""Games/s of every agent × sampler on one accelerator, inside a time budget (`make gpu-bench`).

The points are measured in order of what they answer, each appended to OUT/TAG.jsonl the moment
it is taken, and OUT/TAG.png is drawn at the end (or after an interrupt), so a budget or a kill
that cuts the run short still leaves every point measured so far:

1. greedy / particles at G = 1, 54, 4,096, 16,384, 65,536 (a single game's speed and the peak);
2. WMA, MRA, bayes, wma-reflective and lookahead / particles at G = 54 and 65,536 (the
   planners at scale), and bayes at 65,536 in four steps of 16,384 games
   (`BSJAX_GAMES_PER_STEP`; in one step its compile did not finish on one H200);
3. the MCMC chain at G = 1 and 54 (its thousands of dependent steps per refresh);
4. the look-ahead compiled with and without XLA's GPU autotuning (WMA at 4,096, level 0 and 4:
   compile s and games/s, see `BSJAX_GPU_AUTOTUNE_LEVEL`);
5. the remaining sizes of every agent × sampler, the importance and exact beliefs, random;
6. greedy past 65,536 games while memory lasts (the largest batch that fits).

Before each point the script estimates its cost from the points already measured (compile time
of the same agent and sampler, batch time scaled by G) and skips it when the budget is short, so
the run ends on time. A point that fails (out of memory, say) is a row with `error`, not a stop.
Points of 16,384 games and more (`--isolate-from`) run in a child process stopped after
`--point-timeout-s`: a compile that runs for minutes (bayes at 65,536 games on one H200 did)
costs that point, not the rest of the budget. JAX's preallocation of device memory is off
(`XLA_PYTHON_CLIENT_PREALLOCATE=false`, unless set), so the parent leaves the children room.

    python benchmarks/gpu_bench.py                      # the whole plan, 420 s budget
    python benchmarks/gpu_bench.py --budget-s 120 --out /tmp/bench --tag quick
    python benchmarks/gpu_bench.py --plot-only --tag gpu-nvidia-h100-80gb-hbm3

It runs on a CPU too (tiny `--games`, for trying it out); its figures mean something on a GPU.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

# Large points run in child processes (`--isolate-from`): the parent must not hold most of the
# device's memory from its first use, as JAX's default preallocation does.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import pandas as pd  # noqa: E402
import provenance  # benchmarks/ is on sys.path when this file is run
import throughput

from bsjax.battleship.harness import api, bench, play
from bsjax.battleship.harness.run_config import RunConfig, validate
from bsjax.core.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
PLANNERS = ("wma", "mra", "bayes", "wma-reflective", "lookahead")
SIZES = (1, 54, 4096, 16384, 65536)
PEAK_SIZES = (131072, 262144)


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None




def plan(sizes: tuple[int, ...] = SIZES, peak_sizes: tuple[int, ...] = PEAK_SIZES) -> list[dict]:
    """The points in order of priority: dicts of agent, sampler, games, autotune level, MH
    kernel and games per step (None: the runner's default). Sizes not in `sizes` are left out,
    except the peak search."""
    small, large = [g for g in sizes if g <= 54], [g for g in sizes if g > 54]
    points: list[dict] = []

    def add(agent, sampler, games, autotune=None, kernel=None, step=None):
        point = {"agent": agent, "sampler": sampler, "games": games, "autotune": autotune,
                 "mh_kernel": kernel, "step": step}
        if point not in points:
            points.append(point)

    for g in sizes:
        add("greedy", "particles", g)
    for agent in PLANNERS:
        for g in ([max(small)] if small else []) + ([max(large)] if large else []):
            add(agent, "particles", g)
    if large and max(large) >= 4 * 4096:
        add("bayes", "particles", max(large), step=max(large) // 4)
    for g in small:
        add("greedy", "chain", g)
    mid = [g for g in large if g != max(large)] or large
    if mid:
        add("wma", "particles", mid[0], autotune=0)
        add("wma", "particles", mid[0], autotune=4)
    # The XLA MH loops beside the fused kernels (which `auto` runs on a GPU).
    for g in ([min(sizes)] if sizes else []) + ([max(small)] if small else []) + large[-1:]:
        add("greedy", "particles", g, kernel="xla")
    for g in small[-1:]:
        add("greedy", "chain", g, kernel="xla")
    for agent in PLANNERS:
        for g in sizes:
            add(agent, "particles", g)
    for agent in ("greedy",) + PLANNERS:
        for g in small:
            add(agent, "chain", g)
        for g in sizes:
            add(agent, "importance", g)
    for g in sizes:
        add("random", "particles", g)
    for g in small:
        add("greedy", "exact", g)
        add("bayes", "exact", g)
    for g in peak_sizes:
        add("greedy", "particles", g)
    return points


IDENTITY_CASES = (  # (agent, play() options): the kernel test's games, on the device
    ("mra", {"boards": "B01,B07,B13", "seeds": 2, "particles": 200}),
    ("greedy", {"boards": "B01,B07", "seeds": 2, "sampler": "chain", "particles": 100}),
)


def identity_checks(kernel_mode: str, csv_path: Path) -> tuple[list[dict], bool]:
    """Whether the fused MH kernels play the XLA loops' games on this device, game for game.

    Returns a row per case and whether every case ran (if the kernel fails here, the benchmark
    falls back to the XLA loops). Also writes 54 greedy games (each board × 3 seeds) under
    both modes to `csv_path`, to set beside the same games played on another platform."""
    rows, ran = [], True
    for agent, options in IDENTITY_CASES:
        row = {"check": "kernel-identity", "agent": agent, "kernel": kernel_mode, **options}
        try:
            loop = api.play(agent, mh_kernel="xla", progress=False, **options)
            fused = api.play(agent, mh_kernel=kernel_mode, progress=False, **options)
            a, b = loop.to_pandas(), fused.to_pandas()
            row.update(games=len(a), equal_games=bool(a.equals(b)),
                       equal_turns=bool(loop.turns_frame().equals(fused.turns_frame())),
                       differing_games=int((a.ne(b).any(axis=1)).sum()))
        except Exception as err:  # noqa: BLE001 — a kernel that fails here is a finding
            row["error"] = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:300]}"
            ran = False
        rows.append(row)
    frames = []
    for mode in ("xla",) + ((kernel_mode,) if ran else ()):
        try:
            frame = api.play("greedy", seeds=3, mh_kernel=mode, progress=False).to_pandas()
        except Exception:  # noqa: BLE001 — reported by the rows above
            continue
        frames.append(frame.assign(mh_kernel=mode, device=_device_name()))
    if frames:
        pd.concat(frames).to_csv(csv_path, index=False)
    return rows, ran


def _series(point: dict) -> tuple:
    return point["agent"], point["sampler"]


def estimate_seconds(point: dict, rows: list[dict]) -> float:
    """Seconds `point` will take: its series' compile time plus a warm-up and a timed batch at
    the rate of its nearest measured size (games/s no better than there when G grows). With
    nothing measured for the series, a guess of 30 s."""
    same = [r for r in rows if "error" not in r and (r["agent"], r["sampler"]) == _series(point)]
    if not same:
        return 30.0
    compile_s = max(r["compile_seconds"] for r in same)
    nearest = min(same, key=lambda r: abs(r["games"] - point["games"]))
    batch_s = nearest["seconds"] * max(1.0, point["games"] / nearest["games"])
    return compile_s + 2 * batch_s


def measure_point(point: dict, particles: int, protocol: str, stamp: dict,
                  kernel: str = "auto") -> dict:
    """One point: `bench.bench` under the point's autotune level and MH kernel mode (`kernel`
    unless the point names one), with the device's memory."""
    sampler = point["sampler"]
    kernel = point.get("mh_kernel") or kernel
    cfg = RunConfig(agent=point["agent"], sampler=sampler, particles=particles,
                    protocol=protocol, mh_kernel=kernel)
    previous = os.environ.get(play.AUTOTUNE_VARIABLE)
    previous_step = os.environ.get(play.STEP_VARIABLE)
    if point["autotune"] is not None:
        os.environ[play.AUTOTUNE_VARIABLE] = str(point["autotune"])
    if point.get("step") is not None:
        os.environ[play.STEP_VARIABLE] = str(point["step"])
    try:
        validate(cfg)
        # Cheap points get three timed batches (the median is kept); large ones one.
        repeats = 3 if point["games"] <= 54 else 1
        row = bench.bench(cfg, point["games"], repeats=repeats)
    except UsageError:
        raise
    except Exception as err:  # noqa: BLE001 — an out-of-memory point is a row, not a stop
        row = {"agent": point["agent"], "sampler": sampler, "games": point["games"],
               "particles": particles, "protocol": protocol, "device": str(jax.devices()[0]),
               "error": f"{type(err).__name__}: {str(err).strip().splitlines()[0][:300]}"}
    finally:
        for name, value in ((play.AUTOTUNE_VARIABLE, previous),
                            (play.STEP_VARIABLE, previous_step)):
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    row["mh_kernel"] = kernel
    row["autotune_level"] = int(os.environ.get(play.AUTOTUNE_VARIABLE, "0")
                                if point["autotune"] is None else point["autotune"])
    row["games_per_step"] = point.get("step")
    stats = jax.devices()[0].memory_stats() or {}
    if "peak_bytes_in_use" in stats:
        row["device_peak_gib_so_far"] = round(stats["peak_bytes_in_use"] / 2**30, 3)
    row.update(stamp)
    return row


def measure_isolated(point: dict, particles: int, protocol: str, stamp: dict, kernel: str,
                     timeout_s: float) -> dict:
    """`measure_point` in a child process stopped after `timeout_s`: a compile that runs for
    minutes (XLA's slow-compile alarm; nothing in-process can interrupt it) costs one point,
    not the rest of the budget."""
    job = {"point": point, "particles": particles, "protocol": protocol, "stamp": stamp,
           "kernel": kernel}
    try:
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--one-point",
                               json.dumps(job)], capture_output=True, text=True,
                              timeout=timeout_s)
        lines = done.stdout.strip().splitlines()
        if done.returncode == 0 and lines:
            return json.loads(lines[-1])
        reason = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        error = f"child process failed: {reason[:300]}"
    except subprocess.TimeoutExpired:
        error = f"not finished in {timeout_s:g} s (stopped)"
    return {"agent": point["agent"], "sampler": point["sampler"], "games": point["games"],
            "particles": particles, "protocol": protocol, "mh_kernel": point.get("mh_kernel")
            or kernel, "error": error, **stamp}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _device_name() -> str:
    device = jax.devices()[0]
    return getattr(device, "device_kind", None) or str(device)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget-s", type=float, default=420.0,
                   help="stop starting points after this many seconds (default %(default)s)")
    p.add_argument("--games", default=",".join(map(str, SIZES)),
                   help="batch sizes G (default %(default)s)")
    p.add_argument("--peak", default=",".join(map(str, PEAK_SIZES)),
                   help="greedy sizes past the grid, tried last ('' for none; default %(default)s)")
    p.add_argument("--particles", type=int, default=500)
    p.add_argument("--protocol", default="paper", choices=("paper", "grand"))
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"), help="output folder")
    p.add_argument("--tag", default=None,
                   help="file stem (default gpu-<device kind>, e.g. gpu-nvidia-h100-80gb-hbm3)")
    p.add_argument("--plot-only", action="store_true", help="redraw OUT/TAG.png; measure nothing")
    p.add_argument("--no-identity", action="store_true",
                   help="skip the first step: the fused kernels' games against the XLA loops'")
    p.add_argument("--isolate-from", type=int, default=16384,
                   help="points of at least this many games run in a child process, stopped "
                        "after --point-timeout-s (default %(default)s)")
    p.add_argument("--point-timeout-s", type=float, default=150.0,
                   help="the most an isolated point may take (default %(default)s)")
    p.add_argument("--one-point", default=None, help=argparse.SUPPRESS)  # a child's job
    return p.parse_args(argv)


def _sizes(text: str, option: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"{option} takes a comma list of whole numbers (got {text!r})") from None
    if any(g < 1 for g in sizes):
        raise UsageError(f"{option}: batch sizes must be at least 1 (got {text!r})")
    return sizes


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.one_point is not None:  # a child of measure_isolated: one row on stdout
        job = json.loads(args.one_point)
        row = measure_point(job["point"], job["particles"], job["protocol"], job["stamp"],
                            job["kernel"])
        print(json.dumps(row), flush=True)
        return 0
    try:
        sizes, peak = _sizes(args.games, "--games"), _sizes(args.peak, "--peak")
        if not sizes:
            raise UsageError("--games needs at least one batch size")
        if args.budget_s <= 0:
            raise UsageError(f"--budget-s must be positive (got {args.budget_s})")
        if args.point_timeout_s <= 0:
            raise UsageError(f"--point-timeout-s must be positive (got {args.point_timeout_s})")
        if args.isolate_from < 1:
            raise UsageError(f"--isolate-from must be at least 1 (got {args.isolate_from})")
        tag = args.tag or "gpu-" + _slug(_device_name())
        if "/" in tag or not tag:
            raise UsageError(f"--tag must be a plain file stem (got {tag!r})")
    except UsageError as err:
        print(f"gpu-bench: error: {err}", file=sys.stderr)
        return 2
    out = Path(args.out)
    jsonl, png = out / f"{tag}.jsonl", out / f"{tag}.png"
    status = 0
    if not args.plot_only:
        stamp = {"commit": provenance.commit(), "host": platform.node(),
                 "python": platform.python_version(), "jaxlib": _version("jaxlib"),
                 "device_kind": _device_name(),
                 "command": "benchmarks/gpu_bench.py " + " ".join(argv or sys.argv[1:])}
        out.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        rows: list[dict] = []
        points = plan(sizes, peak)
        print(f"gpu-bench: {len(points)} points on {_device_name()} "
              f"({jax.default_backend()}, jax {jax.__version__}), budget {args.budget_s:.0f} s",
              file=sys.stderr, flush=True)
        kernel = "auto"
        try:
            with jsonl.open("a") as fh:
                if not args.no_identity:
                    mode = "interpret" if jax.default_backend() == "cpu" else "pallas"
                    checks, ran = identity_checks(mode, out / f"{tag}-games.csv")
                    for row in checks:
                        row.update(stamp, elapsed_s=round(time.perf_counter() - start, 1))
                        fh.write(json.dumps(row) + "\n")
                        print(f"identity {row['agent']} {mode} vs xla: "
                              + (row["error"] if "error" in row else
                                 f"{row['games']} games, games equal {row['equal_games']}, "
                                 f"turns equal {row['equal_turns']}"), file=sys.stderr, flush=True)
                    fh.flush()
                    if not ran:
                        kernel = "xla"
                        print("gpu-bench: the fused kernel failed here; measuring the XLA loops",
                              file=sys.stderr, flush=True)
                for i, point in enumerate(points, 1):
                    left = args.budget_s - (time.perf_counter() - start)
                    label = (f"[{i}/{len(points)}] {point['agent']} / {point['sampler']} "
                             f"G={point['games']}"
                             + ("" if point["autotune"] is None else f" autotune={point['autotune']}")
                             + ("" if point["mh_kernel"] is None else f" {point['mh_kernel']}")
                             + ("" if point.get("step") is None else f" step={point['step']}"))
                    if point["games"] in peak and any(
                            "error" in r and r["agent"] == "greedy" for r in rows):
                        print(f"{label}: skipped (a larger greedy batch already failed)",
                              file=sys.stderr, flush=True)
                        continue
                    if estimate_seconds(point, rows) > left:
                        print(f"{label}: skipped ({left:.0f} s of budget left)",
                              file=sys.stderr, flush=True)
                        continue
                    if point["games"] >= args.isolate_from:
                        row = measure_isolated(point, args.particles, args.protocol, stamp, kernel,
                                               min(left, args.point_timeout_s))
                    else:
                        row = measure_point(point, args.particles, args.protocol, stamp, kernel)
                    row["elapsed_s"] = round(time.perf_counter() - start, 1)
                    rows.append(row)
                    fh.write(json.dumps(row) + "\n")
                    fh.flush()
                    if "error" in row:
                        print(f"{label}: {row['error']}", file=sys.stderr, flush=True)
                    else:
                        print(f"{label}: {row['games_per_second']:.1f} games/s, "
                              f"{row['ms_per_turn']:.2f} ms/turn, compile "
                              f"{row['compile_seconds']:.1f} s", file=sys.stderr, flush=True)
                    gc.collect()
        except KeyboardInterrupt:
            print("gpu-bench: interrupted; plotting the rows measured so far", file=sys.stderr)
            status = 130
    if not jsonl.is_file():
        print(f"gpu-bench: error: {jsonl} not found", file=sys.stderr)
        return 2
    # The plot shows the defaults: XLA's own kernels (autotune 0), the MH kernel `auto` picks,
    # one step a turn.
    measured = [r for r in bench.load_rows(jsonl) if "error" not in r
                and r.get("autotune_level", 0) == 0 and r.get("mh_kernel", "auto") != "xla"
                and r.get("games_per_step") is None]
    if measured:  # titled and labelled with the device's kind ("NVIDIA H200"), not "cuda:0"
        throughput.plot([dict(r, device=r.get("device_kind", r["device"])) for r in measured], png)
        print(f"gpu-bench: {len(measured)} rows in {jsonl}; plot {png}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
