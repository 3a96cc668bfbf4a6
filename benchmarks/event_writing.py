"""Host seconds to write a run's per-turn events, per million event rows: JSON lines against
columnar Parquet parts, next to the time the batch took to play.

Plays one real batch (MRA, the agent with the widest trace), then writes its events again and
again into a temporary run directory in each format (`harness.events`), and prints one JSON line
per format: rows written, host seconds, seconds per million rows, and that cost as a share of
the batch's play time.

    python benchmarks/event_writing.py --games 512 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import jax

from bsjax.battleship.harness import events as events_lib
from bsjax.battleship.harness import experiment, run_config, rundir
from bsjax.battleship.harness.loop import BatchRunner
from bsjax.battleship.harness.run_config import RunConfig


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--games", type=int, default=512)
    parser.add_argument("--particles", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    cfg = RunConfig(agent="mra", seeds=-(-args.games // 18), particles=args.particles)
    game_config, boards = run_config.validate(cfg)
    player = run_config.make_player(cfg, game_config)
    games = experiment.game_list(boards, cfg.seeds, params=run_config.run_params(cfg, player))
    games = games[:args.games]
    runner = BatchRunner(player, len(games))
    runner.play(games, 0)                               # compile and warm up
    start = time.perf_counter()
    result = runner.play(games, 1)
    play_seconds = time.perf_counter() - start
    rows = rundir.game_rows(cfg, "particles", games, result)

    out = []
    for fmt in ("jsonl", "parquet"):
        with tempfile.TemporaryDirectory() as tmp:
            run_dir = Path(tmp)
            start = time.perf_counter()
            for _ in range(args.repeats):
                rundir.write_batch(run_dir, fmt == "parquet", rows, games, result)
            seconds = (time.perf_counter() - start) / args.repeats
            n_rows = len(events_lib.turn_columns(games, result)["turn"])
            size = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
        out.append({"format": fmt, "games": len(games), "event_rows": n_rows,
                    "seconds_per_batch": round(seconds, 4),
                    "seconds_per_million_rows": round(seconds / n_rows * 1e6, 3),
                    "share_of_batch_play": round(seconds / play_seconds, 4),
                    "bytes_per_row": round(size / (n_rows * args.repeats), 1),
                    "play_seconds": round(play_seconds, 3), "particles": args.particles,
                    "jax": jax.__version__, "python": platform.python_version(),
                    "device": str(jax.devices()[0])})
        print(json.dumps(out[-1]), flush=True)
    return out


if __name__ == "__main__":
    main()
