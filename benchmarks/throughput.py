"""Throughput suite: agents × samplers × particle counts × batch sizes.

Each measurement (`bsjax.battleship.harness.bench.bench`: steady state after a warm-up batch, compile time
recorded apart, median of `--repeats` timed batches, blocked on the results) is appended as one
JSON line to OUT/TAG.jsonl the moment it is taken; at the end OUT/TAG.png shows games/s against
batch size (log-log, one line per agent/sampler/particles) beside compile seconds.

    python benchmarks/throughput.py                        # the full grid (long)
    python benchmarks/throughput.py --agents greedy --samplers particles --sizes 1,54 \\
        --particles 100,500 --tag quick
    python benchmarks/throughput.py --plot-only --markdown # redraw OUT/TAG.png, print a table

Agents without a belief (random, lm-only) are measured once per batch size, whatever the
samplers and particle counts. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bsjax.battleship import agents as agents_lib  # noqa: E402
from bsjax.battleship.harness import bench  # noqa: E402
from bsjax.battleship.harness.run_config import RunConfig, validate  # noqa: E402
from bsjax.core.errors import UsageError  # noqa: E402

HAS_DEVICES = "devices" in {f.name for f in dataclasses.fields(RunConfig)}


def _ints(text: str, option: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{option} takes positive integers such as 1,54,512 (got {text!r})") from None
    if not values or any(v < 1 for v in values):
        raise UsageError(f"{option} takes positive integers (got {text!r})")
    return values


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", default="greedy,wma,mra", help="comma list (default %(default)s)")
    p.add_argument("--samplers", default="chain,particles", help="comma list (default %(default)s)")
    p.add_argument("--sizes", default="1,54,512,4096", help="batch sizes G (default %(default)s)")
    p.add_argument("--particles", default="500",
                   help="particle / chain-sample counts, comma list (default %(default)s)")
    p.add_argument("--repeats", type=int, default=1, help="timed batches per point; the median "
                   "is reported (default %(default)s)")
    p.add_argument("--protocol", default="paper", help="paper | grand (default %(default)s)")
    p.add_argument("--devices", type=int, default=None,
                   help="local devices to shard each batch over (default: what RunConfig does)")
    p.add_argument("--out", default="benchmarks/results", help="output folder (default %(default)s)")
    p.add_argument("--tag", default="throughput", help="file stem: OUT/TAG.jsonl, OUT/TAG.png")
    p.add_argument("--overwrite", action="store_true",
                   help="start OUT/TAG.jsonl afresh instead of appending to it")
    p.add_argument("--plot-only", action="store_true",
                   help="measure nothing: redraw OUT/TAG.png from OUT/TAG.jsonl")
    p.add_argument("--markdown", action="store_true",
                   help="print a Markdown table of OUT/TAG.jsonl to stdout at the end")
    return p.parse_args(argv)


def build_grid(args: argparse.Namespace) -> list[tuple[RunConfig, int]]:
    """Every (config, batch size) to measure, in order; checks each config before anything runs."""
    agents = _names(args.agents)
    samplers = _names(args.samplers)
    particles = _ints(args.particles, "--particles")
    sizes = _ints(args.sizes, "--sizes")
    if not agents or not samplers:
        raise UsageError("--agents and --samplers need at least one name each")
    if args.repeats < 1:
        raise UsageError(f"--repeats must be at least 1 (got {args.repeats})")
    extra = {}
    if args.devices is not None:
        if HAS_DEVICES:
            extra["devices"] = args.devices
        else:
            print("throughput: warning: this RunConfig has no `devices` field; --devices ignored",
                  file=sys.stderr)
    grid = []
    for agent in agents:
        needs_belief = agent not in agents_lib.AGENTS or agents_lib.AGENTS[agent].needs_belief
        for sampler in samplers if needs_belief else samplers[:1]:
            for count in particles if needs_belief else particles[:1]:
                cfg = RunConfig(agent=agent, sampler=sampler, particles=count,
                                protocol=args.protocol, **extra)
                validate(cfg)  # raises UsageError on a bad name before any measurement
                grid.extend((cfg, size) for size in sizes)
    return grid


def _style_maps(keys):
    agents = list(dict.fromkeys(k[0] for k in keys))
    samplers = list(dict.fromkeys(k[1] for k in keys))
    particles = list(dict.fromkeys(k[2] for k in keys))
    colors = plt.get_cmap("tab10").colors
    styles, markers = ["-", "--", ":", "-."], ["o", "s", "^", "D", "v", "P", "X"]
    return (lambda k: colors[agents.index(k[0]) % len(colors)],
            lambda k: styles[samplers.index(k[1]) % len(styles)],
            lambda k: markers[particles.index(k[2]) % len(markers)])


def plot(rows: list[dict], path: Path) -> None:
    """games/s against batch size (log-log) and compile seconds against batch size."""
    by_series = bench.series(rows)
    with_device = bench.several_devices(by_series)
    color, style, marker = _style_maps(list(by_series))
    fig, (ax, ax_c) = plt.subplots(1, 2, figsize=(13, 5), layout="constrained",
                                   gridspec_kw={"width_ratios": [3, 2]})
    for key, points in by_series.items():
        sizes = sorted(points)
        kw = dict(color=color(key), linestyle=style(key), marker=marker(key))
        ax.plot(sizes, [points[g]["games_per_second"] for g in sizes],
                label=bench.series_label(key, with_device), **kw)
        ax_c.plot(sizes, [points[g].get("compile_seconds", float("nan")) for g in sizes], **kw)
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    measured = sorted({int(r["games"]) for r in rows})
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(measured))  # the measured G
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("games per batch (G)")
    ax.set_ylabel("games / s (steady state)")
    ax.set_title("throughput")
    ax.grid(True, which="both", alpha=0.3)
    ax_c.set_xscale("log")
    ax_c.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(measured))
    ax_c.xaxis.set_major_formatter(plain)
    ax_c.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax_c.set_ylim(bottom=0)
    ax_c.set_xlabel("games per batch (G)")
    ax_c.set_ylabel("compile seconds")
    ax_c.set_title("compile time (init + turn step)")
    ax_c.grid(True, which="both", alpha=0.3)
    last = rows[-1]
    devices = last.get("devices", 1)
    fig.suptitle(f"bsjax throughput on {last.get('device', '?')}"
                 + (f" ×{devices}" if devices and devices > 1 else "")
                 + f" ({last.get('platform', '?')}, jax {last.get('jax', '?')}, "
                 f"protocol {last.get('protocol', '?')})")
    fig.legend(loc="outside right upper", fontsize="small")
    fig.savefig(path, dpi=120)
    plt.close(fig)


def measure(grid: list[tuple[RunConfig, int]], jsonl: Path, repeats: int) -> None:
    """Run the grid, appending each row to `jsonl` as soon as it is measured."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    console = Console(stderr=True)
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console) as progress, jsonl.open("a") as fh:
        task = progress.add_task("throughput", total=len(grid))
        for cfg, size in grid:
            name = _label(cfg)
            progress.update(task, description=f"{name} G={size}")
            row = bench.bench(cfg, size, repeats=repeats)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            progress.console.print(
                f"{name} G={size}: {row['games_per_second']:.2f} games/s "
                f"({row['ms_per_turn']:.1f} ms/turn over {row['turns']} turns, compile "
                f"{row['compile_seconds']:.1f} s, {row['device']} ×{row['devices']})",
                highlight=False, soft_wrap=True)
            progress.advance(task)


def _label(cfg: RunConfig) -> str:
    if agents_lib.AGENTS[cfg.agent].needs_belief:
        return bench.series_label((cfg.agent, cfg.sampler, cfg.particles, "", 1))
    return bench.series_label((cfg.agent, None, None, "", 1))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    if not args.tag or "/" in args.tag:
        print(f"throughput: error: --tag must be a plain file stem (got {args.tag!r})",
              file=sys.stderr)
        return 2
    jsonl, png = out / f"{args.tag}.jsonl", out / f"{args.tag}.png"
    status = 0
    try:
        if not args.plot_only:
            grid = build_grid(args)
            out.mkdir(parents=True, exist_ok=True)
            if args.overwrite:
                jsonl.write_text("")
            try:
                measure(grid, jsonl, args.repeats)
            except KeyboardInterrupt:  # the rows so far are on disk: still draw them
                print("throughput: interrupted; plotting the rows measured so far",
                      file=sys.stderr)
                status = 130
        if not jsonl.is_file():
            raise UsageError(f"{jsonl} not found")
        rows = bench.load_rows(jsonl)
        if not rows:
            raise UsageError(f"{jsonl} holds no measurements")
    except UsageError as err:
        print(f"throughput: error: {err}", file=sys.stderr)
        return 2
    plot(rows, png)
    print(f"throughput: {len(rows)} rows in {jsonl}; plot {png}", file=sys.stderr)
    if args.markdown:
        print(bench.markdown_table(rows), end="")
    return status


if __name__ == "__main__":
    sys.exit(main())
