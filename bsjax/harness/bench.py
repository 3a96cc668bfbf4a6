"""Throughput measurement: games/s in steady state, compile excluded, `block_until_ready`."""

from __future__ import annotations

import statistics
import time

import jax

from bsjax.harness import experiment
from bsjax.harness.loop import BatchRunner


def bench(cfg: experiment.RunConfig, games: int, repeats: int = 1) -> dict:
    """Play `games` games (boards of the suite, cycled) as one batch, after a warm-up batch."""
    game_config, boards = experiment.validate(cfg)
    seeds_needed = -(-games // len(boards))
    specs = experiment.game_list(boards, max(seeds_needed, 1))
    specs = sorted(specs, key=lambda g: (g.seed_index, g.board_id))[:games]
    with experiment.x64_context(cfg):
        runner = BatchRunner(experiment.make_player(cfg, game_config), games)
        runner.play(specs, cfg.run_seed + 1)  # compile + warm-up (results discarded)
        times = []
        for r in range(max(1, repeats)):
            start = time.perf_counter()
            result = runner.play(specs, cfg.run_seed + 2 + r)  # blocks on device_get of results
            times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    return {
        "agent": cfg.agent, "sampler": experiment._sampler_name(cfg),
        "rng": cfg.rng, "protocol": cfg.protocol, "games": games, "particles": cfg.particles,
        "device": str(jax.devices()[0]), "platform": jax.default_backend(),
        "jax": jax.__version__, "x64": cfg.reference_rng,
        "compile_seconds": round(runner.compile_seconds, 3), "seconds": round(seconds, 4),
        "games_per_second": games / seconds, "turns": int(result.turns.max()),
    }
