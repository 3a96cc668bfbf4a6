"""How many games fit in a batch: device memory per game, and `--batch-size auto`.

The memory a batch needs is read from XLA itself: the turn loop (`play.play_turns`, or the
LM-only captains' single turn) is lowered and compiled for a small probe batch, and its
`memory_analysis()` gives the bytes of its arguments, outputs and temporaries. Divided by the
probe's games this overestimates a game's share slightly (the few constants count in), which is
the safe side. `auto_batch_size` then fills a fraction of the free memory of each device.

On a CPU memory is rarely the limit: the batch is capped at `CPU_GAMES_PER_CORE` games per core,
around where measured throughput stops growing (larger CPU batches only run slower, their working
set falling out of cache). On an accelerator it is capped at `MAX_GAMES_PER_DEVICE`, the largest
batch whose compile has been measured (`make gpu-check`: every agent's turn loop compiles for an
H100 on a CPU in at most 28 s up to 65,536 games); a particle game needs 60–300 KiB, so a large
GPU would otherwise be filled with batches no compile was ever checked at. On a real GPU the
compile can take longer than that deviceless one: bayes's at 65,536 games did not finish in
four minutes on an H200 (docs/throughput.md), so give bayes an explicit `--batch-size` there.
"""

from __future__ import annotations

import dataclasses
import functools
import os

import jax
import jax.numpy as jnp

from bsjax.battleship.harness.play import play_turns, record_buffer
from bsjax.battleship.types import Action

PROBE_GAMES = 8
MEMORY_FRACTION = 0.5       # of the free device memory; XLA and the host transfers need the rest
CPU_GAMES_PER_CORE = 32
MAX_GAMES_PER_DEVICE = 65_536


@dataclasses.dataclass(frozen=True)
class BatchMemory:
    """What `auto_batch_size` decided and why.

    Attributes: batch_size games per batch; bytes_per_game device memory of one game;
    free_bytes free memory per device; devices the batch is sharded over; platform.
    """

    batch_size: int
    bytes_per_game: int
    free_bytes: int
    devices: int
    platform: str

    def describe(self) -> str:
        return (f"batch size {self.batch_size} ({self.bytes_per_game / 2**20:.2f} MiB per game, "
                f"{self.free_bytes / 2**30:.1f} GiB free on each of {self.devices} "
                f"{self.platform} device(s))")


def bytes_per_game(player, probe: int = PROBE_GAMES) -> int:
    """Device bytes one game of a batch needs (arguments, outputs and temporaries of the compiled
    turn function at `probe` games, divided by `probe`). Compiles once; plays nothing."""
    keys = jax.random.split(jax.random.key(0), probe)
    truths = jax.ShapeDtypeStruct((probe, player.config.n_ships), jnp.int32)
    seeds = jax.ShapeDtypeStruct((probe,), jnp.int32)
    params = jax.tree.map(lambda x: jax.ShapeDtypeStruct((probe, *jnp.shape(x)), jnp.result_type(x)),
                          player.default_params())
    states, carries = jax.eval_shape(jax.vmap(player.init_one), keys, params, truths, seeds)
    if player.agent.host_decides:
        index = jax.ShapeDtypeStruct((probe,), jnp.int32)
        actions = Action(index, index, index,
                         jax.ShapeDtypeStruct((probe, player.config.n_words), jnp.uint32))
        lowered = jax.jit(jax.vmap(player.act_one)).lower(keys, params, states, carries, actions)
    else:
        buffer = jax.eval_shape(functools.partial(record_buffer, player), keys, params, states,
                                carries)
        real = jax.ShapeDtypeStruct((probe,), jnp.bool_)
        lowered = jax.jit(functools.partial(play_turns, player), donate_argnums=(4,)).lower(
            keys, params, states, carries, buffer, jax.ShapeDtypeStruct((), jnp.int32), real)
    analysis = lowered.compile().memory_analysis()
    total = (analysis.argument_size_in_bytes + analysis.output_size_in_bytes
             + analysis.temp_size_in_bytes - analysis.alias_size_in_bytes)
    return max(1, -(-int(total) // probe))


def free_device_bytes(device: jax.Device) -> int:
    """Free memory of a device: the allocator's limit minus its use on an accelerator, the
    host's available physical memory on a CPU (whose device reports no memory statistics)."""
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def auto_batch_size(player, n_games: int, devices: int = 1) -> BatchMemory:
    """The batch size for `n_games` games on the first `devices` local devices: as many games as
    fill `MEMORY_FRACTION` of each device's free memory, at most `n_games`, a whole number of
    games per device, at most `MAX_GAMES_PER_DEVICE` per device, and on a CPU at most
    `CPU_GAMES_PER_CORE` per core."""
    device = jax.local_devices()[0]
    per_game = bytes_per_game(player)
    free = free_device_bytes(device)
    per_device = min(int(MEMORY_FRACTION * free) // per_game, MAX_GAMES_PER_DEVICE)
    if device.platform == "cpu":
        per_device = min(per_device, CPU_GAMES_PER_CORE * (os.cpu_count() or 1))
    wanted = -(-n_games // devices)
    batch = max(1, min(per_device, wanted)) * devices
    return BatchMemory(batch, per_game, free, devices, device.platform)


__all__ = ["MAX_GAMES_PER_DEVICE", "BatchMemory", "auto_batch_size", "bytes_per_game", "free_device_bytes"]
