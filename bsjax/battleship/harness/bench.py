"""Throughput measurement: games/s in steady state, compile excluded, results blocked on.

`bench` plays one batch of G games to compile and warm up (its time is discarded; the compile
part is reported as `compile_seconds`), then times `repeats` further batches of the same shape
and reports the median. Each timed batch ends with a `device_get` of every result, so the clock
stops only when the device is done.

`load_rows` and `markdown_table` read and summarise the JSON lines that
`benchmarks/throughput.py` writes.
"""

from __future__ import annotations

import datetime
import inspect
import json
import statistics
import time
from pathlib import Path

import jax

from bsjax.battleship.harness import experiment, run_config
from bsjax.battleship.harness.loop import BatchRunner


def _runner_options(cfg: run_config.RunConfig) -> dict:
    """`devices=` for the BatchRunner when the config asks for a device count and the runner
    can shard (both arrived together; older trees have neither), and `reuse=False`: the compile
    is part of the measurement, never an earlier runner's executable."""
    accepts = inspect.signature(BatchRunner).parameters
    options = {"reuse": False} if "reuse" in accepts else {}
    devices = getattr(cfg, "devices", None)
    if devices is not None and "devices" in accepts:
        options["devices"] = devices
    return options


def bench(cfg: run_config.RunConfig, games: int, repeats: int = 1,
          profile_dir: str | Path | None = None, profile_python: bool = True) -> dict:
    """Play `games` games (boards of the suite, cycled) as one batch, after a warm-up batch.

    Returns one row: the configuration, the device, `compile_seconds`, the median `seconds` of
    the timed batches, `games_per_second`, `turns` (turn steps of the batch, i.e. the longest
    game) and `ms_per_turn` (seconds per batched turn step). With `profile_dir`, one more
    batch runs under JAX's profiler afterwards (`_profile`), outside the timing; without
    `profile_python` its trace leaves out the Python calls (smaller, for large batches).
    """
    game_config, boards = run_config.validate(cfg)
    seeds_needed = -(-games // len(boards))
    with experiment.x64_context(cfg):
        player = run_config.make_player(cfg, game_config)
        specs = experiment.game_list(boards, max(seeds_needed, 1),
                                     params=run_config.run_params(cfg, player))
        specs = sorted(specs, key=lambda g: (g.seed_index, g.board_id))[:games]
        runner = BatchRunner(player, games, **_runner_options(cfg))
        runner.play(specs, cfg.run_seed + 1)  # compile + warm-up (results discarded)
        times, turns = [], []
        for r in range(max(1, repeats)):
            start = time.perf_counter()
            result = runner.play(specs, cfg.run_seed + 2 + r)  # blocks on device_get of results
            times.append(time.perf_counter() - start)
            turns.append(int(result.turns.max()))
        profile_error = None
        if profile_dir is not None:
            try:
                _profile(runner, specs, cfg.run_seed + 2, Path(profile_dir), profile_python)
            except Exception as err:  # noqa: BLE001 — the timing stands without its trace
                profile_error = f"{type(err).__name__}: {str(err).strip()[:300]}"
    seconds = statistics.median(times)
    turn_steps = int(statistics.median(turns))
    sharding = getattr(runner, "sharding", None)
    sampler = run_config.sampler_name(cfg)
    return {
        "agent": cfg.agent, "sampler": sampler,
        "rng": cfg.rng, "protocol": cfg.protocol, "games": games,
        "particles": cfg.particles if sampler is not None else None,
        "batch_size": getattr(runner, "batch_size", games),  # padded to whole device slices
        "steps_per_turn": getattr(runner, "steps", 1),        # play.games_per_step
        "device": str(jax.devices()[0]), "platform": jax.default_backend(),
        "devices": sharding.num_devices if sharding is not None else 1,
        "local_devices": jax.local_device_count(),
        "jax": jax.__version__, "x64": cfg.reference_rng,
        "compile_seconds": round(runner.compile_seconds, 3), "seconds": round(seconds, 6),
        "games_per_second": round(games / seconds, 4), "turns": turn_steps,
        "ms_per_turn": round(1000 * seconds / max(turn_steps, 1), 3),
        "repeats": len(times), "all_seconds": [round(t, 6) for t in times],
        "timestamp": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    } | ({"prior": cfg.prior} if sampler == "importance" else {}) | (
        {"params": cfg.params} if cfg.params else {}) | (
        {"profile_error": profile_error} if profile_error else {})


def _profile(runner: BatchRunner, specs, run_seed: int, profile_dir: Path,
             python: bool = True) -> None:
    """One more batch (the first timed batch's games) under JAX's profiler, its trace in
    `profile_dir` (`bsjax.core.profile` reads it), and the compiled turn loop's HLO beside it
    as `turn-loop.hlo.txt` (to name each kernel's source lines)."""
    profile_dir.mkdir(parents=True, exist_ok=True)
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = int(python)
    with jax.profiler.trace(str(profile_dir), create_perfetto_trace=True,
                            profiler_options=options):
        runner.play(specs, run_seed)
    compiled = getattr(runner, "_turns", None)
    if hasattr(compiled, "as_text"):
        (profile_dir / "turn-loop.hlo.txt").write_text(compiled.as_text())


# ---------------------------------------------------------------------------------------------
# Reading and summarising benchmark JSON lines.

def load_rows(path: str | Path) -> list[dict]:
    """The rows of a throughput JSONL file (blank and torn lines skipped)."""
    rows = []
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by an interrupted run
        if isinstance(row, dict) and "games" in row and "games_per_second" in row:
            rows.append(row)
    return rows


def series_key(row: dict) -> tuple:
    """What one line of a plot (one row of a table) stands for. An importance belief with
    another prior than its proposal is a sampler of its own ("importance, uniform prior")."""
    sampler = row.get("sampler")
    if sampler and row.get("prior", "proposal") != "proposal":
        sampler = f"{sampler}, {row['prior']} prior"
    return (row["agent"], sampler, row.get("particles") if sampler else None,
            row.get("device", "?"), row.get("devices", 1))


def series(rows: list[dict]) -> dict[tuple, dict[int, dict]]:
    """{series_key: {games: row}}; a later row for the same point replaces an earlier one."""
    out: dict[tuple, dict[int, dict]] = {}
    for row in rows:
        out.setdefault(series_key(row), {})[int(row["games"])] = row
    return out


def series_label(key: tuple, with_device: bool = False) -> str:
    agent, sampler, particles, device, devices = key
    label = agent if sampler is None else f"{agent} / {sampler}"
    if particles is not None:
        label += f" P={particles}"
    if with_device:
        label += f" [{device}" + (f" ×{devices}" if devices and devices > 1 else "") + "]"
    return label


def several_devices(keys) -> bool:
    """Whether the rows come from more than one device setup (then labels name it)."""
    return len({(k[3], k[4]) for k in keys}) > 1


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def markdown_table(rows: list[dict], metric: str = "games_per_second") -> str:
    """A Markdown table: one row per agent/sampler/particles (and device setup when several),
    one column per batch size, cells `metric` (games/s or ms per turn), then compile seconds
    (min–max over the batch sizes)."""
    if not rows:
        return "(no measurements)\n"
    by_series = series(rows)
    sizes = sorted({int(r["games"]) for r in rows})
    with_device = several_devices(by_series)
    head = ["agent", "sampler", "particles"] + (["device"] if with_device else [])
    head += [f"G = {g}" for g in sizes] + ["compile (s)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in by_series:  # in the order first measured
        points = by_series[key]
        agent, sampler, particles, device, devices = key
        cells = [agent, f"`{sampler}`" if sampler else "–", str(particles) if particles else "–"]
        if with_device:
            cells.append(f"{device}" + (f" ×{devices}" if devices and devices > 1 else ""))
        for g in sizes:
            row = points.get(g)
            cells.append(_fmt(row[metric]) if row is not None and metric in row else "")
        compiles = [r["compile_seconds"] for r in points.values() if "compile_seconds" in r]
        lo, hi = (min(compiles), max(compiles)) if compiles else (None, None)
        cells.append("" if lo is None else f"{lo:.1f}" if round(lo, 1) == round(hi, 1)
                     else f"{lo:.1f}–{hi:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    last = rows[-1]
    unit = "games/s" if metric == "games_per_second" else metric.replace("_", " ")
    devices = last.get("devices") or 1
    setup = f"{last.get('device', '?')}" + (f" ×{devices}" if devices > 1 else "")
    caption = (f"{unit} at batch size G; steady state, compile excluded "
               f"({last.get('platform', '?')}, {setup}, jax {last.get('jax', '?')}, "
               f"protocol {last.get('protocol', '?')})")
    return caption + "\n\n" + "\n".join(lines) + "\n"
