"""Backbone training data (docs/gilp/spec.md §3.5): behaviour-policy trajectories and their labels.

For every task, `episodes` rollouts with the behaviour policy (w.p. 1 − ε the oracle action, else a
uniform candidate, valid or not), with sampled stochastic outcomes. Every visited state yields the
taken action plus `extra_candidates` uniform counterfactual candidates, each labelled on its modal
outcome by `envs.common.labels`. Samples carry the observed graph (hidden fields zeroed), so
nothing downstream can read privileged state.

Rollouts are one `lax.scan` over `B_MAX` steps vmapped over episodes; labels are one jitted vmap
over fixed-size chunks of samples (the last chunk padded), so each compiles once per benchmark.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.gilp import config
from bsjax.gilp.envs import common
from bsjax.gilp.envs.common import Bench
from bsjax.gilp.types import Graph, graph_from_np

GRAPH_FIELDS = ("status", "ntype", "goal", "attr", "etype", "anc", "nmask")
LABEL_FIELDS = ("valid", "delta", "reward", "done", "risk", "value", "next_status")
LABEL_CHUNK = 256


def _uniform_index(key: jax.Array, amask: jax.Array, shape: tuple[int, ...] = ()) -> jax.Array:
    """Uniform candidate slot(s) among the real ones (with replacement)."""
    logits = jnp.where(amask, 0.0, -jnp.inf)
    return jax.random.categorical(key, logits, shape=shape)


@functools.cache
def _rollout_fn(bench: Bench, oracle_prob: float, extra: int):
    """jit(vmap(one episode)) for a benchmark; see `rollouts`."""

    def episode(key: jax.Array, g0: Graph):
        def body(carry, key_t):
            g, alive = carry
            k_policy, k_uniform, k_extra, k_env = jax.random.split(key_t, 4)
            acts, amask = bench.candidates(g)
            uniform = acts[_uniform_index(k_uniform, amask)]
            action = jnp.where(jax.random.uniform(k_policy) < oracle_prob,
                               common.oracle_action(bench, g), uniform)
            extras = acts[_uniform_index(k_extra, amask, (extra,))]
            g_next, info = common.step(bench, k_env, g, action)
            finished = info.done | (g_next.t >= g.budget) | (info.dstar_after >= config.UNSOLV)
            record = (g, action, extras, alive)
            g_next = common.select_graph(alive, g_next, g)
            return (g_next, alive & ~finished), record

        alive0 = ~common.goals_done(g0) & (bench.dstar(g0) < config.UNSOLV)
        _, records = jax.lax.scan(body, (g0, alive0), jax.random.split(key, config.B_MAX))
        return records

    return jax.jit(jax.vmap(episode))


def rollouts(bench: Bench, tasks: dict[str, np.ndarray], episodes: int = 2, epsilon: float = 0.3,
             extra_candidates: int = 3, seed: int = 0) -> dict[str, np.ndarray]:
    """Behaviour-policy trajectories over every task, flattened to unlabelled samples.

    Args:
      tasks: stacked task arrays `[T, ...]` (as loaded by `generate.load_split`).
      episodes: rollouts per task. epsilon: probability of a uniform candidate.
      extra_candidates: counterfactual candidates labelled per visited state.
    Returns:
      host arrays over samples S: the full graph fields (hidden included, for labelling), `action`
      `[S, 3]`, `taken` `[S]` (the executed action, not a counterfactual), `episode` `[S]` and
      `step` `[S]` (trajectory position of the state).
    """
    count = len(tasks["status"])
    graphs = graph_from_np(tasks)  # batched [T, ...]
    # Episode e of task i: task-major order, one key per (task, episode).
    task_ids = np.repeat(np.arange(count), episodes)
    episode_ids = np.tile(np.arange(episodes), count)
    root = jax.random.key(seed)
    keys = jax.vmap(lambda i, e: jax.random.fold_in(jax.random.fold_in(root, i), e))(
        jnp.asarray(task_ids), jnp.asarray(episode_ids))
    g0 = jax.tree_util.tree_map(lambda x: x[task_ids], graphs)
    run = _rollout_fn(bench, 1.0 - epsilon, extra_candidates)
    states, actions, extras, alive = jax.device_get(run(keys, g0))
    alive = np.asarray(alive)                                   # [E, B]
    ep_index, step_index = np.nonzero(alive)
    parts = {name: np.asarray(getattr(states, name))[ep_index, step_index]
             for name in (*GRAPH_FIELDS, "hidden", "t", "budget", "horizon")}
    n_states = len(ep_index)
    all_actions = np.concatenate([np.asarray(actions)[ep_index, step_index][:, None],
                                  np.asarray(extras)[ep_index, step_index]], axis=1)  # [n, 1+x, 3]
    per_state = all_actions.shape[1]
    samples = {name: np.repeat(value, per_state, axis=0) for name, value in parts.items()}
    samples["action"] = all_actions.reshape(n_states * per_state, 3).astype(np.int32)
    samples["taken"] = np.tile(np.arange(per_state) == 0, n_states)
    samples["episode"] = np.repeat(ep_index.astype(np.int32), per_state)
    samples["step"] = np.repeat(step_index.astype(np.int32), per_state)
    return samples


@functools.cache
def _label_fn(bench: Bench, horizon: int, gamma: float):
    return jax.jit(jax.vmap(lambda g, a: common.labels(bench, g, a, horizon, gamma)))


def label(bench: Bench, samples: dict[str, np.ndarray], cfg: config.GilpConfig = config.GilpConfig(),
          progress=None) -> dict[str, np.ndarray]:
    """Add the modal-outcome labels of `envs.common.labels` to every sample, then zero `hidden`.

    Labels are computed in chunks of `LABEL_CHUNK` (the last one padded by repetition).
    """
    fn = _label_fn(bench, cfg.value_horizon, cfg.gamma)
    total = len(samples["action"])
    out = {name: [] for name in LABEL_FIELDS}
    for start in range(0, total, LABEL_CHUNK):
        index = np.arange(start, start + LABEL_CHUNK).clip(max=total - 1)
        chunk = {name: samples[name][index] for name in
                 (*GRAPH_FIELDS, "hidden", "t", "budget", "horizon")}
        result = jax.device_get(fn(graph_from_np(chunk), jnp.asarray(samples["action"][index])))
        keep = min(LABEL_CHUNK, total - start)
        for name in LABEL_FIELDS:
            out[name].append(np.asarray(result[name])[:keep])
        if progress is not None:
            progress(keep)
    labelled = dict(samples)
    labelled.update({name: np.concatenate(parts) for name, parts in out.items()})
    labelled["hidden"] = np.zeros_like(samples["hidden"])  # the backbone never sees it
    return labelled


def build(bench: Bench, tasks: dict[str, np.ndarray], seed: int = 0, episodes: int = 2,
          epsilon: float = 0.3, extra_candidates: int = 3, cfg: config.GilpConfig = config.GilpConfig(),
          progress=None) -> dict[str, np.ndarray]:
    """Rollouts and labels: the labelled sample set of one benchmark split."""
    return label(bench, rollouts(bench, tasks, episodes, epsilon, extra_candidates, seed), cfg,
                 progress)


def windows(samples: dict[str, np.ndarray], length: int = 3) -> dict[str, np.ndarray]:
    """ErrorAware's windows: `[W, length, ...]` runs of consecutive executed transitions of one
    trajectory (the `taken` samples at steps t, t+1, ..., of one episode)."""
    taken = np.flatnonzero(samples["taken"])
    episode, step = samples["episode"][taken], samples["step"][taken]
    order = np.lexsort((step, episode))
    taken, episode, step = taken[order], episode[order], step[order]
    starts = [i for i in range(len(taken) - length + 1)
              if episode[i + length - 1] == episode[i] and step[i + length - 1] == step[i] + length - 1]
    index = (np.asarray(starts, np.int64)[:, None] + np.arange(length)[None, :]).reshape(-1, length)
    rows = taken[index] if len(starts) else np.zeros((0, length), np.int64)
    fields = (*GRAPH_FIELDS, "action", "delta")
    return {name: samples[name][rows] for name in fields}
