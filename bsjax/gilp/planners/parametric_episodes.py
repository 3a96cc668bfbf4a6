"""Episodes of the parametric planners in the true environment (docs/gilp/spec.md §4.1, §6.1, §8) and
their conversion to event rows.

`run_parametric` runs every (task, seed) episode of Parametric-WM-MPC or Parametric-WM-MCTS:
- one jitted function per (method, benchmark, configs, chunk size): a `lax.scan` over `B_MAX`
  steps whose body vmaps one step over the episodes of a chunk; a step in which no episode of the
  chunk is alive is skipped with a (batch-level) `lax.cond`, and finished, dead-end or
  budget-exhausted episodes are masked as no-ops (their state is kept and their step records
  `alive = False`);
- episodes are task-major (task 0 seeds..., task 1 seeds...) and split into chunks of
  `episode_chunk` (default 256), the last one padded by repeating its last episode;
- keys come from `bsjax.gilp.keys`: step t of (bench, task, seed) uses
  `env_key(root, bench, task, seed, t)` for the environment (common random numbers across
  methods) and `agent_key(...)` for the planner;
- planners read only `common.observe(g)`; the true graph is used for the environment step, the
  support of the true transition (hallucination flags) and ρ*.

The result is a dict of host arrays (`Records`, below); `records_to_events` turns it into event
rows that pass `bsjax.gilp.events.validate_row`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bsjax.gilp import config, keys
from bsjax.gilp.envs import common, registry
from bsjax.gilp.envs.common import Bench
from bsjax.gilp.events import atoms_from_codes
from bsjax.gilp.llm.prompts import action_str
from bsjax.gilp.planners import imagination, parametric
from bsjax.gilp.types import Graph, graph_from_np

GRAPH_FIELDS = imagination.GRAPH_FIELDS
DECIMALS = 6  # rho_hat / rho_star are rounded in event rows (stable JSON)


class ParametricStep(NamedTuple):
    """One step of one episode (a vmap / scan adds `[E, B_MAX]` in front).

    Attributes:
      alive: `[]` bool the episode was running at the step's start (the step has an event row).
      action: `[3]` int32 executed action (kind, i, j).
      slot: `[]` int32 its candidate slot.
      valid: `[]` bool the action was valid in the true state.
      failed: `[]` bool the failure branch was realised.
      atom_mask: `[N]` bool nodes with a committed atom (imagined status ≠ observed status).
      atom_status: `[N]` int8 the imagined status (meaningful where `atom_mask`).
      halluc: `[N]` bool the atom's status is outside `common.support` of the true transition.
      stochastic_miss: `[N]` bool the atom is the success-branch status but the failure branch
        was realised (and changed that node).
      rho_hat: `[]` float32 `sigmoid(risk_logit)` of the executed action.
      rho_star: `[]` float32 true risk ρ*(G_t, a_t).
      bad_outcome: `[]` bool invalid ∨ failed ∨ d*(G_{t+1}) > d*(G_t).
      done: `[]` bool the episode ended after this step (success, dead end or budget).
      success: `[]` bool every goal node COMPLETED after the step.
      dead_end: `[]` bool d*(G_{t+1}) = UNSOLV.
      env_key: `[2]` uint32 `key_data` of the environment key used (common-random-number audit).
    """

    alive: jax.Array
    action: jax.Array
    slot: jax.Array
    valid: jax.Array
    failed: jax.Array
    atom_mask: jax.Array
    atom_status: jax.Array
    halluc: jax.Array
    stochastic_miss: jax.Array
    rho_hat: jax.Array
    rho_star: jax.Array
    bad_outcome: jax.Array
    done: jax.Array
    success: jax.Array
    dead_end: jax.Array
    env_key: jax.Array


def committed_atoms(bench: Bench, g_obs: Graph, action: jax.Array, out: parametric.BackboneOut
                    ) -> tuple[jax.Array, jax.Array]:
    """`([N] bool mask, [N] int8 status)`: the decoded backbone delta of an action as atoms, i.e.
    the real nodes whose imagined status differs from the observed one (none when the backbone
    predicts the action invalid)."""
    imagined = imagination.imagine(bench, g_obs, action, out)
    return (imagined.status != g_obs.status) & g_obs.nmask, imagined.status


def _empty_steps(episodes: int, root_key: jax.Array) -> ParametricStep:
    """All-zero `ParametricStep` records `[E, ...]` for a step no episode of the chunk is alive in
    (`alive = False` everywhere)."""
    n = config.N_MAX
    zeros = lambda shape, dtype: jnp.zeros((episodes, *shape), dtype)  # noqa: E731
    key_data = jax.random.key_data(root_key)
    return ParametricStep(
        alive=zeros((), bool), action=zeros((3,), jnp.int32), slot=zeros((), jnp.int32),
        valid=zeros((), bool), failed=zeros((), bool), atom_mask=zeros((n,), bool),
        atom_status=zeros((n,), jnp.int8), halluc=zeros((n,), bool),
        stochastic_miss=zeros((n,), bool), rho_hat=zeros((), jnp.float32),
        rho_star=zeros((), jnp.float32), bad_outcome=zeros((), bool), done=zeros((), bool),
        success=zeros((), bool), dead_end=zeros((), bool), env_key=zeros(key_data.shape, key_data.dtype))


def make_episode_fn(
    method: str,
    bench: Bench,
    cfg: config.GilpConfig = config.GilpConfig(),
    params: config.ParametricConfig = config.ParametricConfig(),
    sizes: imagination.Sizes = None,
):
    """The pure (unjitted) chunk function
    `fn(model, root_key, task_ids [E], seeds [E], g0: Graph [E]) -> ParametricStep [E, B_MAX]`.

    `sizes` is the planners' optional static `(n_nodes, n_actions)` cut (`I.planning_sizes`).
    `run_parametric` jits it once per (method, bench, cfg, params, sizes) with `eqx.filter_jit`;
    tests wrap it in `chex.assert_max_traces`.
    """
    plan = parametric.make_planner(method, bench, cfg, params, sizes)
    bench_id = keys.bench_index(bench)

    def one_step(model, root_key, g: Graph, alive, task, seed, t):
        """One step of one episode: `(next graph, record, still alive)`."""
        obs = common.observe(g)
        k_env = keys.env_key(root_key, bench_id, task, seed, t)
        k_agent = keys.agent_key(root_key, bench_id, task, seed, t)
        acts, _ = imagination.planning_candidates(bench, obs, None if sizes is None else sizes[1])
        planned = plan(model, k_agent, obs, g.budget - g.t)
        action = acts[planned.slot]
        out = imagination.take(planned.root, planned.slot)
        atom_mask, atom_status = committed_atoms(bench, obs, action, out)
        support = common.support(bench, g, action)
        on_support = jnp.take_along_axis(support, atom_status.astype(jnp.int32)[:, None], 1)[:, 0]
        g_succ, _, _ = bench.branches(g, action)
        g_next, info = common.step(bench, k_env, g, action)
        dead_end = info.dstar_after >= config.UNSOLV
        done = info.done | dead_end | (g_next.t >= g.budget)
        record = ParametricStep(
            alive=alive,
            action=action.astype(jnp.int32),
            slot=planned.slot,
            valid=info.valid,
            failed=info.failed,
            atom_mask=atom_mask,
            atom_status=atom_status,
            halluc=atom_mask & ~on_support,
            stochastic_miss=(
                atom_mask & info.failed & (atom_status == g_succ.status) & (g_succ.status != g_next.status)
            ),
            rho_hat=jax.nn.sigmoid(out.risk_logit).astype(jnp.float32),
            rho_star=common.rho_star(bench, g, action).astype(jnp.float32),
            bad_outcome=~info.valid | info.failed | (info.dstar_after > info.dstar_before),
            done=done,
            success=info.done,
            dead_end=dead_end,
            env_key=jax.random.key_data(k_env),
        )
        return common.select_graph(alive, g_next, g), record, alive & ~done

    def run_chunk(model, root_key, task_ids, seeds, g0: Graph) -> ParametricStep:
        step_all = jax.vmap(one_step, in_axes=(None, None, 0, 0, 0, 0, None))
        alive0 = jax.vmap(lambda g: ~common.goals_done(g) & (bench.dstar(g) < config.UNSOLV))(g0)

        def body(carry, t):
            g, alive = carry

            def live(_):
                return step_all(model, root_key, g, alive, task_ids, seeds, t)

            def idle(_):
                return g, _empty_steps(alive.shape[0], root_key), alive

            g, record, alive = jax.lax.cond(jnp.any(alive), live, idle, None)
            return (g, alive), record

        _, records = jax.lax.scan(body, (g0, alive0), jnp.arange(config.B_MAX, dtype=jnp.int32))
        return jax.tree_util.tree_map(lambda x: jnp.swapaxes(x, 0, 1), records)

    return run_chunk


@functools.cache
def _jitted_episode_fn(
    method: str,
    bench: Bench,
    cfg: config.GilpConfig,
    params: config.ParametricConfig,
    sizes: imagination.Sizes,
):
    return eqx.filter_jit(make_episode_fn(method, bench, cfg, params, sizes))


def run_parametric(
    method: str,
    bench: Bench | str,
    model,
    tasks: dict[str, np.ndarray],
    seeds: Sequence[int],
    root_key: jax.Array,
    cfg: config.GilpConfig = config.GilpConfig(),
    *,
    params: config.ParametricConfig = config.ParametricConfig(),
    episode_chunk: int | None = None,
    task_ids: Sequence[int] | None = None,
    compact: bool = True,
    episode_fn=None,
) -> dict[str, np.ndarray]:
    """Run every (task, seed) episode of a parametric planner in the true environment.

    Args:
      method: `Parametric-WM-MPC` or `Parametric-WM-MCTS` (or `mpc` / `mcts`).
      bench: the benchmark (`Bench` or name).
      model: a trained backbone (any `model(graph_inputs(g), action) -> BackboneOut` pytree).
      tasks: stacked task arrays `[T, ...]` (as from `generate.load_split` / `generate_split`).
      seeds: episode seeds, e.g. `range(8)`.
      root_key: typed root key (`jax.random.key(...)`); not consumed, streams derive by fold_in.
      cfg: static GILP configuration (γ).
      params: planner settings (M, K, simulations, ...).
      episode_chunk: episodes per jitted call (default `params.episode_chunk`; a run with fewer
        episodes uses one chunk of exactly that many).
      task_ids: the task index of each row of `tasks` within its split (default 0..T−1); it
        enters the key derivation and the event rows.
      compact: run the backbone on the node and candidate slots the tasks actually use
        (`I.planning_sizes`, rounded up) instead of all N_MAX / A_MAX. Backbones are
        padding-invariant, so this changes outputs only by float rounding; it is several times
        faster on small tasks (MPNN cost grows with N²·A).
      episode_fn: optional jitted chunk function to use instead of the cached
        `eqx.filter_jit(make_episode_fn(method, bench, cfg, params, sizes))` (tests pass a
        trace-counted one built with the same arguments).
    Returns:
      `Records`: host arrays over episodes E = T·S (task-major): `task` `[E]` (task id),
      `task_row` `[E]` (row of `tasks`), `seed` `[E]`, `H` `[E]`, `budget` `[E]`, and every
      `ParametricStep` field with shape `[E, B_MAX, ...]`.
    """
    method = parametric.canonical_method(method)
    bench = registry.get(bench) if isinstance(bench, str) else bench
    n_tasks = len(tasks["status"])
    ids = np.arange(n_tasks) if task_ids is None else np.asarray(task_ids)
    if ids.shape != (n_tasks,):
        raise ValueError(f"task_ids has shape {ids.shape}, expected ({n_tasks},)")
    seeds = np.asarray(list(seeds), np.int32)
    rows = np.repeat(np.arange(n_tasks), len(seeds))
    ep_seeds = np.tile(seeds, n_tasks)
    total = len(rows)
    chunk = min(episode_chunk or params.episode_chunk, max(total, 1))
    sizes = imagination.planning_sizes(bench, tasks) if compact else None
    fn = episode_fn or _jitted_episode_fn(method, bench, cfg, params, sizes)
    parts = []
    for start in range(0, total, chunk):
        index = np.minimum(np.arange(start, start + chunk), total - 1)
        g0 = graph_from_np({name: np.asarray(tasks[name])[rows[index]] for name in GRAPH_FIELDS})
        out = fn(model, root_key, jnp.asarray(ids[rows[index]], jnp.int32), jnp.asarray(ep_seeds[index]), g0)
        keep = min(chunk, total - start)
        parts.append(jax.tree_util.tree_map(lambda x: np.asarray(x)[:keep], jax.device_get(out)))
    records = {
        name: np.concatenate([getattr(p, name) for p in parts]) if parts else np.zeros(0)
        for name in ParametricStep._fields
    }
    records.update(
        task=ids[rows].astype(np.int64),
        task_row=rows.astype(np.int64),
        seed=ep_seeds.astype(np.int64),
        H=np.asarray(tasks["horizon"])[rows].astype(np.int64),
        budget=np.asarray(tasks["budget"])[rows].astype(np.int64),
    )
    return records


def _split_label(split: str) -> str:
    return "ood" if split in ("ood", "test_ood") else "id"


def records_to_events(
    records: dict[str, np.ndarray],
    method: str,
    bench: Bench | str,
    split: str,
    tasks: dict[str, np.ndarray] | None = None,
) -> list[dict]:
    """Event rows (spec §6.1, `bsjax.gilp.events`) of parametric-planner records.

    One row per executed step, episodes in record order. Parametric rows have no LLM calls
    (calls = tokens = 0), draft atoms = committed atoms = the decoded backbone delta of the
    executed action, no gate (cons, cons_after, rho_eff = null; corrected, risk_fired = false)
    and no belief (live_false_atoms, live_atoms = null, so PD is undefined).

    Args:
      records: the output of `run_parametric`.
      method: the method label to write (e.g. `Parametric-WM-MPC`, or a variant label).
      bench: benchmark (`Bench` or name).
      split: `id` / `ood`, or a split name (`test_ood` -> `ood`; train / val / test_id -> `id`).
      tasks: the task arrays the records were run on; when given, H is read from them (and must
        agree with the records).
    """
    bench_name = bench if isinstance(bench, str) else bench.name
    label = _split_label(split)
    horizons = np.asarray(records["H"])
    if tasks is not None:
        from_tasks = np.asarray(tasks["horizon"])[np.asarray(records["task_row"])]
        if not np.array_equal(from_tasks, horizons):
            raise ValueError("records_to_events: the tasks' horizons disagree with the records")
    rows = []
    alive = np.asarray(records["alive"], bool)
    for e in range(alive.shape[0]):
        for t in np.flatnonzero(alive[e]):
            mask = np.asarray(records["atom_mask"][e, t], bool)
            nodes = np.flatnonzero(mask)
            atoms = atoms_from_codes(nodes, np.asarray(records["atom_status"][e, t])[nodes])
            flags = [int(x) for x in np.asarray(records["halluc"][e, t])[nodes]]
            misses = [int(x) for x in np.asarray(records["stochastic_miss"][e, t])[nodes]]
            rows.append(
                {
                    "method": method,
                    "bench": bench_name,
                    "task": int(records["task"][e]),
                    "split": label,
                    "H": int(horizons[e]),
                    "seed": int(records["seed"][e]),
                    "t": int(t),
                    "action": action_str(bench_name, records["action"][e, t]),
                    "valid": bool(records["valid"][e, t]),
                    "calls": 0,
                    "tok_in": 0,
                    "tok_out": 0,
                    "draft_atoms": atoms,
                    "committed_atoms": [list(a) for a in atoms],
                    "halluc_draft": flags,
                    "halluc_committed": list(flags),
                    "cons": None,
                    "cons_after": None,
                    "corrected": False,
                    "rho_hat": round(float(records["rho_hat"][e, t]), DECIMALS),
                    "rho_eff": None,
                    "risk_fired": False,
                    "rho_star": round(float(records["rho_star"][e, t]), DECIMALS),
                    "bad_outcome": bool(records["bad_outcome"][e, t]),
                    "live_false_atoms": None,
                    "live_atoms": None,
                    "parse_fail": False,
                    "fallback": False,
                    "done": bool(records["done"][e, t]),
                    "success": bool(records["success"][e, t]),
                    "dead_end": bool(records["dead_end"][e, t]),
                    "stochastic_miss": misses,
                }
            )
    return rows


__all__ = ["ParametricStep", "committed_atoms", "make_episode_fn", "records_to_events", "run_parametric"]
