"""Compiling a batch's turn loop for an accelerator that is not there (deviceless XLA).

XLA compiles a JAX program for an NVIDIA H100 or a TPU on a CPU-only machine when the
accelerator's compiler plugin is installed (`make gpu-check` installs it into `.venv-aot`):
the whole pipeline runs (HLO passes, fusion, buffer assignment, code generation) against a
described device. That gives, without the hardware, three of the four things that set a batch's
speed there — the compile time, the kernel launches per game-turn (`bsjax.core.hlo`) and the
memory per game — but not the run time. Without autotuning (no device to time kernels on) a
real GPU host may compile more slowly and pick other matrix kernels.

`JAX_PLATFORMS=cpu` must be set before JAX is imported (the CUDA plugin then skips its runtime
check but keeps its compile-only topology); `benchmarks/gpu_check.py` does it.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

from bsjax.battleship.harness.play import (
    compiler_options,
    play_turns,
    record_shapes,
    step_multiple,
    steps_per_turn,
)
from bsjax.battleship.harness.player import Player
from bsjax.core import hlo

# An H100 SXM 80 GB as XLA's GPU compiler needs it described (compute capability 9.0, 132 SMs,
# its memory and caches; a CUDA runtime version is required by recent XLA).
H100 = """
gpu_device_info {
  cuda_compute_capability { major: 9 minor: 0 }
  core_count: 132
  fpus_per_core: 128
  threads_per_block_limit: 1024
  threads_per_warp: 32
  threads_per_core_limit: 2048
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
  shared_memory_per_block: 49152
  shared_memory_per_block_optin: 232448
  shared_memory_per_core: 233472
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: 3352320000000
  l2_cache_size: 52428800
  clock_rate_ghz: 1.98
  device_memory_size: 84929347584
}
platform_name: "CUDA"
dnn_version_info { major: 9 minor: 7 }
runtime_version { major: 12 minor: 8 patch: 0 }
device_description_str: "NVIDIA H100 80GB HBM3"
"""
H100_MEMORY = 84929347584
TARGETS = ("h100", "tpu-v5e-2x2")


@functools.cache
def mesh(target: str) -> jax.sharding.Mesh:
    """A mesh of compile-only devices of `target` (`TARGETS`), games along its one axis."""
    from jax.experimental import topologies
    if target == "h100":
        topology = topologies.get_topology_desc(platform="cuda", target_config=H100,
                                                topology="1x1x1")
    elif target == "tpu-v5e-2x2":
        topology = topologies.get_topology_desc(topology_name="v5e:2x2", platform="tpu")
    else:
        raise ValueError(f"unknown target {target!r} (choose from {', '.join(TARGETS)})")
    return topologies.make_mesh(topology, (len(topology.devices),), ("games",))


def _games_first(tree, sharding):
    return jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding), tree)


def compile_turn_loop(player: Player, games: int, target: str = "h100",
                      sources: bool = False) -> dict:
    """Compile `player`'s turn loop (`play.play_turns`) for `games` games on `target`, sharded
    over its devices; nothing runs. Returns compile seconds, kernel launches per game-turn
    (nested loops by their trip counts; GPU only), collectives per turn (all-reduces between the
    devices: each is a synchronisation of every device, every turn), and XLA's memory figures
    (bytes, per device and per game). With `sources`, also `launch_sources`: each launch of a
    turn with its source lines (`hlo.loop_launches`), to see which code a kernel is."""
    for field in ("mh_kernel", "layout"):
        if getattr(player.sampler, field, None) == "auto":
            # Traced on this host's CPU, compiled for `target`: the sampler's kernel (or layout)
            # is chosen when the program is lowered, as "auto" does on the device itself.
            player = dataclasses.replace(
                player, sampler=dataclasses.replace(player.sampler, **{field: "lowering"}))
    grid = mesh(target)
    devices = grid.devices.size
    player = player.sharded(devices)
    platform = grid.devices.flat[0].platform
    per_device = step_multiple(-(-games // devices), platform, player.sampler)
    games = per_device * devices
    steps = steps_per_turn(per_device, platform, player.sampler)
    shard = NamedSharding(grid, PartitionSpec("games"))
    one = NamedSharding(grid, PartitionSpec())
    key = jax.random.key(0)
    keys = jax.ShapeDtypeStruct((games,), key.dtype, sharding=shard)
    params = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct((games, *jnp.shape(x)), jnp.result_type(x),
                                       sharding=shard), player.default_params())
    truths = jax.ShapeDtypeStruct((games, player.config.n_ships), jnp.int32, sharding=shard)
    seeds = jax.ShapeDtypeStruct((games,), jnp.int32, sharding=shard)
    states, carries = jax.eval_shape(jax.vmap(player.init_one), keys, params, truths, seeds)
    states, carries = _games_first(states, shard), _games_first(carries, shard)
    buffer = _games_first(record_shapes(player, keys, params, states, carries), shard)
    real = jax.ShapeDtypeStruct((games,), jnp.bool_, sharding=shard)
    turn = jax.ShapeDtypeStruct((), jnp.int32, sharding=one)
    jax.clear_caches()
    loop = jax.jit(functools.partial(play_turns, player, steps=steps), donate_argnums=(4,),
                   out_shardings=(shard, shard, shard, one, shard),
                   compiler_options=compiler_options())
    lowered = loop.lower(keys, params, states, carries, buffer, turn, real)
    start = time.perf_counter()
    compiled = lowered.compile()
    seconds = time.perf_counter() - start
    text = compiled.as_text()
    counts = hlo.launch_counts(text)
    memory = compiled.memory_analysis()
    used = (memory.argument_size_in_bytes + memory.output_size_in_bytes
            + memory.temp_size_in_bytes - memory.alias_size_in_bytes)
    gpu = target == "h100"  # a TPU runs one program per step: it has no kernels to launch
    return {"target": target, "devices": devices, "games": games, "steps_per_turn": steps,
            "compile_seconds": round(seconds, 3),
            "launches_per_turn": counts["outer_per_iteration"] if gpu else None,
            # A TPU's loops do not state their trip counts: GPU only.
            "data_dependent_loops_per_turn": counts["data_dependent_loops"] if gpu else None,
            "collectives_per_turn": counts["collectives_per_iteration"],
            "kib_accessed_per_game_turn": (round(counts["bytes_per_iteration"] / games / 1024, 1)
                                           if gpu else None),
            "bytes_per_device": int(used), "temp_bytes": int(memory.temp_size_in_bytes),
            "kib_per_game": round(used * devices / games / 1024, 1),
            **({"launch_sources": [[name, kind, list(chain)]
                                   for name, kind, chain in hlo.loop_launches(text)]}
               if sources else {})}


__all__ = ["H100", "H100_MEMORY", "TARGETS", "compile_turn_loop", "mesh"]
