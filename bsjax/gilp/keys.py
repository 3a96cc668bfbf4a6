"""Per-episode PRNG streams of the GILP episode loop (docs/gilp/spec.md §4.1, §8 "Determinism").

Every planner derives its keys here, so that all methods share **common random numbers**: the
environment key of step t of episode (bench, task, seed) is

    env_key = fold_in(fold_in(fold_in(fold_in(root, bench_id), task), seed), t)

whatever the method, so two methods that take the same action in the same state see the same
outcome. The agent side (MCTS tie-break noise, the simulated LLM's events, ...) draws from a
separate stream,

    agent_key = fold_in(fold_in(episode_key, AGENT_STREAM), t),

where `episode_key = fold_in(fold_in(fold_in(root, bench_id), task), seed)`. Environment keys
fold the step index `t < B_MAX` straight into `episode_key`; the agent stream first folds in
`AGENT_STREAM`, a constant far above any step index, so no agent key is ever an environment key
and a method's agent draws never shift the environment stream.

All functions are pure and jittable; `bench`, `task`, `seed` and `t` may be Python ints or traced
int arrays (vmap them over episodes). `fold_in` does not consume its input key, so the same root
can derive any number of streams; each derived key is meant to be consumed once.
"""

from __future__ import annotations

import numbers

import jax

from bsjax.gilp import config

# Folded into the episode key before the step index to separate the agent stream (> B_MAX).
AGENT_STREAM = 0x5A17  # 23063


def bench_index(bench) -> int:
    """`config.BENCH_ID` of a benchmark given by name, `Bench`, or already as its int id."""
    if isinstance(bench, numbers.Integral):
        return int(bench)
    return config.BENCH_ID[getattr(bench, "name", bench)]


def episode_key(root: jax.Array, bench, task, seed) -> jax.Array:
    """`fold_in(fold_in(fold_in(root, bench_id), task), seed)`: the base of one episode's streams.

    Args:
      root: typed PRNG key (`jax.random.key(...)`), the run's root; not consumed.
      bench: benchmark name, `Bench` or int id (`config.BENCH_ID`).
      task: task index within its split (`[]` int).
      seed: episode seed (`[]` int).
    """
    key = jax.random.fold_in(root, bench_index(bench))
    return jax.random.fold_in(jax.random.fold_in(key, task), seed)


def env_key(root: jax.Array, bench, task, seed, t) -> jax.Array:
    """The environment key of step `t` (common random numbers across methods, spec §4.1)."""
    return jax.random.fold_in(episode_key(root, bench, task, seed), t)


def agent_key(root: jax.Array, bench, task, seed, t) -> jax.Array:
    """The agent-side key of step `t`, on a stream disjoint from `env_key`."""
    base = jax.random.fold_in(episode_key(root, bench, task, seed), AGENT_STREAM)
    return jax.random.fold_in(base, t)


__all__ = ["AGENT_STREAM", "agent_key", "bench_index", "env_key", "episode_key"]
