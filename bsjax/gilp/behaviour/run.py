"""Run simulated methods over tasks × seeds (docs/gilp/spec.md §4.1, §8); `records_to_events`
(`behaviour.run_events`, re-exported here) turns a run into event rows (§6.1).

One jitted function covers a chunk of episodes: a `lax.scan` over B_MAX steps of `sim_step`
vmapped over the (task, seed) episodes (finished episodes are masked no-ops). Episodes are
task-major (task 0 seeds..., task 1 seeds...) and split into fixed-size chunks (`episode_chunk`,
default 64 on a CPU and 1024 on an accelerator; the last chunk is padded by repeating its last
episode, so a run compiles once per (method, benchmark, config, chunk size)).

Keys come from `bsjax.gilp.keys` (env_key / agent_key): common random numbers across methods.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.gilp import config
from bsjax.gilp import keys as gilp_keys
from bsjax.gilp.behaviour.agent import StepKeys, init_state, sim_step
from bsjax.gilp.behaviour.params import SimParams
from bsjax.gilp.behaviour.run_events import SimRun, records_to_events
from bsjax.gilp.envs.common import Bench
from bsjax.gilp.methods import MethodConfig, get_method, stack_flags
from bsjax.gilp.types import Graph, graph_from_np

EPISODE_CHUNK = 64        # episodes per compiled call on a CPU
EPISODE_CHUNK_ACCELERATOR = 1024  # on a GPU/TPU, where a wide batch is what keeps it busy


def default_episode_chunk() -> int:
    """`EPISODE_CHUNK` on a CPU backend, `EPISODE_CHUNK_ACCELERATOR` otherwise."""
    return EPISODE_CHUNK if jax.default_backend() == "cpu" else EPISODE_CHUNK_ACCELERATOR


def batched_episodes(method: MethodConfig | None, bench: Bench, cfg: config.GilpConfig = config.GilpConfig(),
                     sizes: tuple[int, int] | None = None):
    """The un-jitted batch function `(root, params, model, g0 [E], task [E], seed [E]) ->
    (final SimState [E], StepRecord [E, B_MAX, ...])`: a `lax.scan` over the B_MAX steps of
    `jax.vmap(sim_step)` over the E episodes. `params` is one `SimParams` of scalars, or one
    with `[E]` leaves (a parameter set per episode).

    With `method=None` the function takes a seventh argument, `flags`: `MethodFlags` with an
    `[E]` axis (one LLM method per episode, traced), so one compile serves every LLM method.
    `sizes` is an optional static slot cut (`sim_step`).

    Finished episodes are masked no-ops inside `sim_step`; once every episode of the batch has
    finished, a batch-level `lax.cond` skips the remaining steps' work (records of skipped steps
    are inactive), which gives the same records as stepping them. Jit it, or wrap it in
    `chex.assert_max_traces` first.
    """
    def run(root, params, model, g0, task, seed, flags=None):
        # Scalar parameters are shared by the batch; `[E]` leaves give each episode its own
        # set (a calibration sweep), decided from the shapes at trace time.
        per_episode = jnp.ndim(params.c_tg) == 1
        step = jax.vmap(lambda keys, state, params, model, flags: sim_step(
            keys, state, method if flags is None else flags, params, model, bench, cfg, sizes),
            in_axes=(0, 0, 0 if per_episode else None, None, 0))
        states = jax.vmap(lambda g: init_state(bench, g))(g0)
        steps = jnp.arange(config.B_MAX)
        per_step = lambda fn: jax.vmap(  # noqa: E731
            lambda t: jax.vmap(lambda i, s: fn(root, bench.name, i, s, t))(task, seed))(steps)
        env, agent = per_step(gilp_keys.env_key), per_step(gilp_keys.agent_key)         # [B_MAX, E] keys
        blank = jax.eval_shape(
            lambda st: step(StepKeys(env[0], agent[0]), st, params, model, flags)[1], states)

        def body(states, step_keys):
            def go(states):
                return step(StepKeys(*step_keys), states, params, model, flags)

            def skip(states):
                return states, jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), blank)

            return jax.lax.cond(jnp.any(states.alive), go, skip, states)

        final, records = jax.lax.scan(body, states, (env, agent))
        return final, jax.tree_util.tree_map(lambda x: jnp.swapaxes(x, 0, 1), records)

    return run


@functools.cache
def episode_fn(method: MethodConfig | None, bench: Bench, cfg: config.GilpConfig = config.GilpConfig(),
               sizes: tuple[int, int] | None = None):
    """`jax.jit(batched_episodes(...))`, cached per (method, benchmark, config, slot cut);
    `method=None` gives the traced-flags function shared by every LLM method."""
    return jax.jit(batched_episodes(method, bench, cfg, sizes))


def slot_cut(bench: Bench, graphs: Graph, compact: bool) -> tuple[int, int] | None:
    """The static `(n_nodes, n_actions)` cut covering every real node and candidate of the
    tasks (`imagination.planning_sizes`), or None when `compact` is off. MPNN-style backbones
    cost O(N²·A) per step, so small tasks run several times faster cut."""
    if not compact:
        return None
    from bsjax.gilp.planners.imagination import GRAPH_FIELDS, planning_sizes
    return planning_sizes(bench, {name: np.asarray(getattr(graphs, name)) for name in GRAPH_FIELDS})


def chunk_size(total: int, episode_chunk: int | None = None) -> int:
    """Episodes per compiled call: the next power of two ≥ `total`, at most `episode_chunk`, so
    runs of similar size reuse a compile when their slot cut (`slot_cut`) is the same too (a
    benchmark's ID and OOD splits usually differ in it, so each compiles once)."""
    episode_chunk = default_episode_chunk() if episode_chunk is None else episode_chunk
    return min(int(episode_chunk), 1 << max(0, int(total) - 1).bit_length())


def _as_graph(tasks) -> Graph:
    return tasks if isinstance(tasks, Graph) else graph_from_np(tasks)


def _episodes(tasks, seeds: Sequence[int], task_ids: Sequence[int] | None):
    """`(graphs, ids [T], task_index [T·S], seed_of [T·S])`: task-major episodes."""
    graphs = _as_graph(tasks)
    n_tasks = int(graphs.status.shape[0])
    seeds = np.asarray(list(seeds), np.int32)
    ids = np.arange(n_tasks) if task_ids is None else np.asarray(list(task_ids))
    if len(ids) != n_tasks:
        raise ValueError(f"task_ids has {len(ids)} entries for {n_tasks} tasks")
    if n_tasks == 0 or len(seeds) == 0:
        raise ValueError("no episodes to run (no tasks or no seeds)")
    return graphs, ids, np.repeat(np.arange(n_tasks), len(seeds)), np.tile(seeds, n_tasks)


@jax.jit
def _take(tree, index: jax.Array):
    """Rows `index` of every leaf of `tree` (one dispatch for a whole pytree)."""
    return jax.tree_util.tree_map(lambda x: x[index], tree)


def _chunked(fn, root_key, params, model, graphs, ids, task_index, seed_of, flags,
             episode_chunk: int | None, param_index: np.ndarray | None = None):
    """Run `fn` over the episodes in fixed-size chunks (the last one padded by repeating its
    last episode); returns `(host records [E, B_MAX, ...], chunk seconds)`. With `param_index`
    (`[E]`), `params` holds `[P]` stacked sets and episode e runs under set `param_index[e]`."""
    total = len(task_index)
    chunk = chunk_size(total, episode_chunk)
    parts, chunk_seconds = [], []
    # Per-episode tables go to the device once; each chunk then sends one index vector and
    # gathers in one dispatch, instead of one transfer per leaf per chunk.
    if param_index is not None:
        params = jax.device_put(params)
        param_index = jax.device_put(np.asarray(param_index, np.int32))
    if flags is not None:
        flags = jax.device_put(flags)
    for lo in range(0, total, chunk):
        tick = time.perf_counter()
        sel = np.arange(lo, lo + chunk).clip(max=total - 1)
        g0 = jax.tree_util.tree_map(lambda x: x[task_index[sel]], graphs)
        device_sel = jnp.asarray(sel, jnp.int32)
        chunk_params = params if param_index is None else _take(params, param_index[device_sel])
        args = (root_key, chunk_params, model, g0, jnp.asarray(ids[task_index[sel]], jnp.int32),
                jnp.asarray(seed_of[sel], jnp.int32))
        if flags is not None:
            args += (_take(flags, device_sel),)
        _, rec = fn(*args)
        keep = min(chunk, total - lo)
        parts.append(jax.tree_util.tree_map(lambda x: np.asarray(x)[:keep], jax.device_get(rec)))
        chunk_seconds.append(time.perf_counter() - tick)
    return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *parts), chunk_seconds


def _resolve(method) -> MethodConfig:
    method = method if isinstance(method, MethodConfig) else get_method(method)
    if method.parametric is not None:
        raise ValueError(f"{method.name} is a parametric planner; run it with "
                         "bsjax.gilp.planners.parametric")
    return method


def stack_params(params_sets: Sequence[SimParams]) -> SimParams:
    """`[P]` float32 leaves from P parameter sets (a sweep's argument to `_chunked`)."""
    return jax.tree_util.tree_map(lambda *xs: np.asarray(xs, np.float32), *params_sets)


def _sweep_records(fn, root_key, params_sets, model, graphs, ids, task_index, seed_of, flags,
                   episode_chunk):
    """Records of the episodes under every parameter set, set-major (`[P·E, B_MAX, ...]`), and
    the chunk seconds. One set runs with scalar parameters (the single-run program)."""
    if len(params_sets) == 1:
        return _chunked(fn, root_key, params_sets[0], model, graphs, ids, task_index, seed_of,
                        flags, episode_chunk)
    count, per_set = len(params_sets), len(task_index)
    if flags is not None:
        flags = jax.tree_util.tree_map(lambda x: np.tile(np.asarray(x), (count,) + (1,) * (
            np.ndim(x) - 1)), flags)
    return _chunked(fn, root_key, stack_params(params_sets), model, graphs, ids,
                    np.tile(task_index, count), np.tile(seed_of, count), flags, episode_chunk,
                    param_index=np.repeat(np.arange(count), per_set))


def _params_sets(params) -> list[SimParams]:
    if params is None:
        return [SimParams()]
    sets = [params] if isinstance(params, SimParams) else list(params)
    if not sets:
        raise ValueError("no parameter sets to run")
    return sets


def _split_runs(method: MethodConfig, bench: Bench, graphs, ids, task_index, seed_of, records,
                count: int, seconds: float, chunk_seconds=()) -> list[SimRun]:
    """`count` consecutive equal blocks of `records` as one `SimRun` each."""
    per = len(task_index)
    return [SimRun(method=method.name, bench=bench.name, kind=method.kind,
                   task=ids[task_index].astype(np.int64), task_index=task_index, seed=seed_of,
                   H=np.asarray(graphs.horizon)[task_index].astype(np.int64),
                   records=jax.tree_util.tree_map(lambda x: x[i * per:(i + 1) * per], records),
                   seconds=seconds, chunk_seconds=tuple(chunk_seconds))
            for i in range(count)]


def _run_static(method: MethodConfig, bench: Bench, model, tasks, seeds, root_key, params_sets,
                cfg, task_ids, episode_chunk, compact) -> list[SimRun]:
    """One method compiled alone, under each parameter set: one `SimRun` per set."""
    if method.uses_backbone and model is None:
        raise ValueError(f"{method.name} needs a backbone model")
    graphs, ids, task_index, seed_of = _episodes(tasks, seeds, task_ids)
    cfg = dataclasses.replace(cfg, skeleton_k=method.skeleton_k)  # the method's k is static
    fn = episode_fn(method, bench, cfg, slot_cut(bench, graphs, compact))
    model = model if method.uses_backbone else None
    start = time.perf_counter()
    records, chunk_seconds = _sweep_records(fn, root_key, params_sets, model, graphs, ids,
                                            task_index, seed_of, None, episode_chunk)
    return _split_runs(method, bench, graphs, ids, task_index, seed_of, records,
                       len(params_sets), (time.perf_counter() - start) / len(params_sets),
                       chunk_seconds)


def run_simulated(method_name: str | MethodConfig, bench: Bench, model, tasks, seeds: Sequence[int],
                  root_key: jax.Array, params: SimParams | None = None,
                  cfg: config.GilpConfig = config.GilpConfig(), task_ids: Sequence[int] | None = None,
                  episode_chunk: int | None = None, compact: bool = True) -> SimRun:
    """Simulate one method on every (task, seed) episode, compiled for that method alone.

    Args:
      method_name: a method of the registry (an LLM method or "Oracle"), or a `MethodConfig`
        (e.g. a τ_low sweep point).
      bench: the benchmark's rules.
      model: the trained backbone (ignored by methods without one; may be None for them).
      tasks: stacked task arrays `[T, ...]` (`generate.load_split`) or a batched `Graph`.
      seeds: episode seeds (the sim protocol uses 0..7).
      root_key: typed root key of the run (`jax.random.key(...)`).
      params: simulator parameters (default: the spec's initial values).
      cfg: static configuration (J_K horizon and discount).
      task_ids: ids folded into the keys and written to events (default 0..T-1: the index
        within the split).
      episode_chunk: at most this many episodes per compiled call (`chunk_size`; default
        `default_episode_chunk()`).
      compact: cut node and candidate slots to what the tasks use (`slot_cut`).
    Returns:
      `SimRun` with host records `[E, B_MAX, ...]`, E = T·len(seeds).
    """
    return _run_static(_resolve(method_name), bench, model, tasks, seeds, root_key,
                       _params_sets(params), cfg, task_ids, episode_chunk, compact)[0]


def run_simulated_many(methods: Sequence[str | MethodConfig], bench: Bench, model, tasks,
                       seeds: Sequence[int], root_key: jax.Array, params: SimParams | None = None,
                       cfg: config.GilpConfig = config.GilpConfig(), task_ids: Sequence[int] | None = None,
                       episode_chunk: int | None = None, compact: bool = True) -> list[SimRun]:
    """Simulate several methods on the same episodes with one compiled function (per skeleton
    size `skeleton_k`, a static shape).

    LLM methods run together through the traced-flags simulator (their episodes are stacked
    method-major and chunked; every method sees the same common random numbers), so adding a
    method costs run time, not a compile. The Oracle row runs on its own static path. The
    records equal `run_simulated`'s method by method (same keys, same rules); `SimRun.seconds`
    is the shared wall time split by episode count.

    Args: as `run_simulated`, with `methods` a list; `model` is required when any method uses
      the backbone (the LLM methods then all run with Phase 1 computed and masked by flag).
    Returns:
      one `SimRun` per method, in the order given.
    """
    return run_simulated_sweep(methods, bench, model, tasks, seeds, root_key,
                               _params_sets(params), cfg, task_ids, episode_chunk, compact)[0]


def run_simulated_sweep(methods: Sequence[str | MethodConfig], bench: Bench, model, tasks,
                        seeds: Sequence[int], root_key: jax.Array,
                        params_sets: Sequence[SimParams], cfg: config.GilpConfig = config.GilpConfig(),
                        task_ids: Sequence[int] | None = None, episode_chunk: int | None = None,
                        compact: bool = True) -> list[list[SimRun]]:
    """`run_simulated_many` under each of several parameter sets, batched: the episodes of
    every set run in the same compiled calls (each episode carries its own parameters, and
    every set sees the same common random numbers), so a calibration's Sobol points cost one
    wide batch instead of P narrow ones. Records equal separate runs set by set.

    Returns:
      `runs[p][m]`: the `SimRun` of method m under parameter set p.
    """
    resolved = [_resolve(m) for m in methods]
    if not resolved:
        raise ValueError("no methods to run")
    if any(m.uses_backbone for m in resolved) and model is None:
        raise ValueError("a backbone model is needed for " + ", ".join(
            m.name for m in resolved if m.uses_backbone))
    params_sets = _params_sets(params_sets)
    count = len(params_sets)
    llm = [m for m in resolved if m.llm]
    # The skeleton's k is a static shape: methods that share it share one compiled simulator.
    by_k: dict[int, list[MethodConfig]] = {}
    for m in llm:
        by_k.setdefault(m.skeleton_k, []).append(m)
    runs: dict[str, list[SimRun]] = {}
    for group in by_k.values():
        if model is None or len(group) < 2:  # nothing to share: the per-method compile is smaller
            for m in group:
                runs[m.name] = _run_static(m, bench, model, tasks, seeds, root_key, params_sets,
                                           cfg, task_ids, episode_chunk, compact)
        else:
            runs.update(_run_shared(group, bench, model, tasks, seeds, root_key, params_sets,
                                    dataclasses.replace(cfg, skeleton_k=group[0].skeleton_k),
                                    task_ids, episode_chunk, compact))
    for m in resolved:
        if not m.llm:  # the Oracle ignores the agent's parameters: run it once for every set
            runs[m.name] = _run_static(m, bench, None, tasks, seeds, root_key, params_sets[:1],
                                       cfg, task_ids, episode_chunk, compact) * count
    return [[runs[m.name][p] for m in resolved] for p in range(count)]


def _run_shared(llm: list[MethodConfig], bench: Bench, model, tasks, seeds, root_key,
                params_sets: list[SimParams], cfg: config.GilpConfig, task_ids, episode_chunk,
                compact) -> dict[str, list[SimRun]]:
    """LLM methods through one traced-flags simulator, every parameter set in the same calls:
    `{method: [SimRun per set]}`."""
    count = len(params_sets)
    graphs, ids, task_index, seed_of = _episodes(tasks, seeds, task_ids)
    flags = stack_flags(llm)
    which = np.repeat(np.arange(len(llm)), len(task_index))
    episode_flags = jax.tree_util.tree_map(lambda x: x[which], flags)
    start = time.perf_counter()
    fn = episode_fn(None, bench, cfg, slot_cut(bench, graphs, compact))
    records, _ = _sweep_records(fn, root_key, params_sets, model, graphs, ids,
                                np.tile(task_index, len(llm)), np.tile(seed_of, len(llm)),
                                episode_flags, episode_chunk)
    seconds = (time.perf_counter() - start) / (len(llm) * count)
    # Set-major, then method-major: block (p, i) is method i under parameter set p.
    blocks = _split_runs(llm[0], bench, graphs, ids, task_index, seed_of, records,
                         count * len(llm), seconds)
    return {m.name: [blocks[p * len(llm) + i]._replace(method=m.name, kind=m.kind)
                     for p in range(count)] for i, m in enumerate(llm)}


__all__ = ["EPISODE_CHUNK", "EPISODE_CHUNK_ACCELERATOR", "SimRun", "batched_episodes", "chunk_size",
           "default_episode_chunk", "episode_fn", "records_to_events", "run_simulated",
           "run_simulated_many", "run_simulated_sweep", "slot_cut", "stack_params"]
