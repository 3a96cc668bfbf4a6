"""The real-LLM episode loop of GILP (docs/gilp/spec.md §4.1, §4.2, §4.5–§4.7, §5.1, §6.1, §7 T7).

Host-side, like a Battleship turn (docs/conventions.md §3.1): per step, the host renders prompts
from host copies, calls the LLM through `bsjax.gilp.llm.driver`, runs the pure gate functions
(`planners.gate`, on the host's CPU device; both in `real_phases.decide`), and then makes ONE
jitted call that executes the chosen action in the true environment, scores the next state's
candidates with the backbone (Phase 1, `planners.skeleton.score_candidates`) and computes the
step's small summaries (supports of every call's action on the *true* graph, ρ*, outcome, the
observed next graph); ONE `jax.device_get` brings those summaries to the host. No
`pure_callback`; the LLM is called between jitted steps.

Methods are configs (`bsjax.gilp.methods`): Agent-Replan (no backbone, agent-only prompt),
Hybrid-* (skeleton fields, no gates; the draft's consistency is logged passively) and GILP with
its ablations (`MethodConfig.correct`, `double_rho`, `risk_gate`). Parse failures (and
fallbacks) execute as no-op invalid actions; GILP first spends its single correction on a
re-prompt (§4.6 step 2).

Event rows (`bsjax.gilp.events`) carry tokens and calls, the gate fields, draft and committed
atoms with hallucination flags from `common.support` on the true graph, `halluc_calls`,
`stochastic_miss`, and `live_atoms`, the real-path PD proxy of §6.2: a committed hallucinated atom
(v, s̃) of step u is live at the start of step t > u iff t − u ≤ W = 3 (it is still in the
"Recent Steps" window), v's true status at t is not s̃, and no output of a step in (u, t) was
consistent with v's true status — a committed atom on v equal to v's true status after that step,
or an executed valid action with v as an argument that would be invalid were v in status s̃ (for an
`unknown` claim: any valid action on v).

Each episode has a wall-clock cap: when it is exceeded after a step, the episode ends there with
`done = true, success = false, timeout = true` (reported, never dropped). Runs of many episodes,
with resume and their summaries, are `bsjax.gilp.real.runs` (wall times are kept out of the events
so that a rerun from the call cache reproduces the events byte for byte).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bsjax.core.llm.call_cache import REFERENCE_PRICE, cost_usd
from bsjax.gilp import config, events, keys
from bsjax.gilp.envs import common, registry
from bsjax.gilp.llm import prompts
from bsjax.gilp.llm.driver import GilpDriver
from bsjax.gilp.methods import MethodConfig, get_method
from bsjax.gilp.planners.skeleton import score_candidates
from bsjax.gilp.real.phases import decide
from bsjax.gilp.real.tasks import TaskRef
from bsjax.gilp.types import Graph, graph_from_np

UNKNOWN = prompts.UNKNOWN
WINDOW = prompts.HISTORY_WINDOW
# Action slots whose support a step computes: the executed action, then every call's action.
SUPPORT_SLOTS = 6
NOOP = np.array([-1, 0, -1], np.int32)
OBS_FIELDS = ("status", "ntype", "goal", "attr", "etype", "anc", "nmask", "t", "budget",
              "horizon")


# --- device side: one jitted call per step --------------------------------------------------------

def _phase1(model, bench, g_obs: Graph, k: int, uses_backbone: bool) -> dict:
    if uses_backbone:
        return score_candidates(model, bench, g_obs, k)._asdict()
    acts, amask = bench.candidates(g_obs)
    return {"acts": acts, "amask": amask}


def _observed(g: Graph) -> dict:
    return {name: getattr(g, name) for name in OBS_FIELDS}


@eqx.filter_jit
def _start(model, bench, g: Graph, k: int, uses_backbone: bool) -> dict:
    """The first state's summary: the observed graph and its Phase-1 scores."""
    g_obs = common.observe(g)
    return {"obs": _observed(g_obs), "phase1": _phase1(model, bench, g_obs, k, uses_backbone)}


def _valid_if(bench, g: Graph, a, noop) -> jax.Array:
    """`[2, 5]` bool: would `a` be valid were its arg1 / arg2 in each status (others as they are)."""
    def one(node, present, s):
        node = jnp.clip(node, 0, g.status.shape[0] - 1)
        alt = g.replace(status=g.status.at[node].set(s.astype(g.status.dtype)))
        return present & ~noop & bench.valid(alt, a)
    statuses = jnp.arange(config.N_STATUS)
    return jnp.stack([jax.vmap(lambda s: one(a[1], a[1] >= 0, s))(statuses),
                      jax.vmap(lambda s: one(a[2], a[2] >= 0, s))(statuses)])


@eqx.filter_jit
def _transition(model, bench, g: Graph, root, task, seed, act, noop, call_acts, call_noop,
                k: int, uses_backbone: bool):
    """Execute one step in the true environment and summarise it.

    Args:
      g: the true graph G_t (on device).
      root, task, seed: the run's root key and the episode's ids (env key of §4.1).
      act, noop: `[3]` executed action and whether the step is a no-op (parse failure).
      call_acts, call_noop: `[SUPPORT_SLOTS, 3]` actions whose support is needed (row 0 is the
        executed action, then each call's action) and which of them are no-ops.
    Returns:
      `(g_next, summary)`: the summary dict is what the host fetches.
    """
    key = keys.env_key(root, bench.name, task, seed, g.t)
    g_step, info = common.step(bench, key, g, act)
    g_next = common.select_graph(noop, common.advance(g, g), g_step)
    valid = info.valid & ~noop
    failed = info.failed & ~noop
    d_before = info.dstar_before
    d_after = jnp.where(noop, d_before, info.dstar_after)
    g_succ, _, _ = bench.branches(g, act)
    noop_support = jax.nn.one_hot(g.status.astype(jnp.int32), config.N_STATUS, dtype=bool)
    supports = jax.vmap(lambda a, n: jnp.where(n, noop_support, common.support(bench, g, a)))(
        call_acts, call_noop)
    rho_star = jnp.where(noop, 1.0, common.rho_star(bench, g, act))
    g_obs = common.observe(g_next)
    summary = {
        "valid": valid, "failed": failed, "done": common.goals_done(g_next),
        "dstar_before": d_before, "dstar_after": d_after,
        "succ_status": jnp.where(noop, g.status, g_succ.status),
        "supports": supports, "rho_star": rho_star,
        "valid_if": _valid_if(bench, g, act, noop),
        "obs": _observed(g_obs),
        "phase1": _phase1(model, bench, g_obs, k, uses_backbone),
    }
    return g_next, summary


# --- host side -----------------------------------------------------------------------------------

def _status_name(code: int) -> str:
    return config.STATUS_NAMES[code] if 0 <= code < config.N_STATUS else "unknown"


def _atoms_json(atoms) -> list[list]:
    return [[int(v), _status_name(int(s))] for v, s in atoms]


def _flags(atoms, support: np.ndarray, status: np.ndarray) -> list[int]:
    """Hallucination flag per atom (spec §6.2): outside the support of the true transition; an
    `unknown` atom iff v cannot change at all."""
    out = []
    for v, s in atoms:
        if s == UNKNOWN or not 0 <= s < config.N_STATUS:
            others = np.delete(support[v], int(status[v]))
            out.append(int(not others.any()))
        else:
            out.append(int(not support[v, s]))
    return out


def _round(x) -> float | None:
    return None if x is None else round(float(x), 6)


@dataclasses.dataclass(frozen=True)
class RealConfig:
    """Settings of the real-LLM loop.

    Attributes:
      root_seed: root of the PRNG streams (`keys.env_key(jax.random.key(root_seed), ...)`).
      wall_cap_s: per-episode wall-clock cap (seconds); the episode is reported as `timeout`.
      fmt: state serialisation format (`json_table`, `markdown`, `nested`).
      record_wall: also write `wall_s` into the event rows (breaks byte-equal reruns).
    """

    root_seed: int = 0
    wall_cap_s: float = 1800.0
    fmt: str = "json_table"
    record_wall: bool = False


@dataclasses.dataclass
class _StepLog:
    """What later steps need about an executed step (for the live-atom proxy)."""

    committed: list            # [(v, s)] committed atoms
    halluc: list               # flags aligned with committed
    status_after: np.ndarray   # true statuses after the step
    act: np.ndarray            # executed action triple (NOOP for a no-op)
    valid: bool
    valid_if: np.ndarray       # [2, 5]


def live_atoms(logs: Sequence[_StepLog], t: int, status_now: np.ndarray,
               window: int = WINDOW) -> list[list]:
    """The real-path live false atoms at the start of step t (module docstring), sorted."""
    live = set()
    for u in range(max(0, t - window), t):
        for (v, s), flag in zip(logs[u].committed, logs[u].halluc):
            if not flag or (s != UNKNOWN and int(status_now[v]) == s):
                continue
            recovered = False
            for w in range(u + 1, t):
                log = logs[w]
                if any(v2 == v and s2 == int(log.status_after[v]) for v2, s2 in log.committed):
                    recovered = True
                elif log.valid:
                    for role, arg in enumerate((int(log.act[1]), int(log.act[2]))):
                        if arg == v and (s == UNKNOWN or not log.valid_if[role, s]):
                            recovered = True
                if recovered:
                    break
            if not recovered:
                live.add((int(v), int(s)))
    return _atoms_json(sorted(live))


def _slot_str(bench: str, acts: np.ndarray, slot: int | None) -> str | None:
    return None if slot is None else prompts.action_str(bench, acts[slot])


def _context(method: MethodConfig, task: TaskRef, graph: dict, p1: dict, history: list[str],
             cfg: RealConfig) -> prompts.PromptContext:
    skeleton = None
    if method.skeleton:
        skeleton = prompts.skeleton_from_arrays(graph, task.bench, p1["acts"], p1["rows"],
                                          p1["p_valid"], p1["value"], p1["risk"],
                                          p1["pred_status"], p1["affected"],
                                          p1["affected_goal"])
    return prompts.PromptContext(graph=graph, bench=task.bench, acts=p1["acts"], amask=p1["amask"],
                           history=list(history), skeleton=skeleton,
                           fields=method.variant or "full", fmt=cfg.fmt, rho_th=method.rho_th)


def run_episode(method: MethodConfig | str, task: TaskRef, driver: GilpDriver, model=None,
                seed: int = 0, cfg: RealConfig = RealConfig()) -> tuple[list[dict], dict]:
    """One episode of a real-LLM method on one task.

    Args:
      method: a `MethodConfig` (or its name); LLM methods only.
      task: the task.
      driver: the LLM driver (backend, call cache, counters).
      model: the trained backbone of `task.bench` (unused by Agent-Replan).
      seed: the episode seed s of §4.1 (environment key stream).
      cfg: loop settings.
    Returns:
      `(rows, info)`: the validated event rows, and a sidecar dict (wall seconds, driver
      counter differences, cost, timeout).
    """
    method = get_method(method) if isinstance(method, str) else method
    if not method.llm:
        raise ValueError(f"{method.name} is not an LLM method")
    if method.uses_backbone and model is None:
        raise ValueError(f"{method.name} needs a backbone")
    bench = registry.get(task.bench)
    model = model if method.uses_backbone else None
    k, ub = method.skeleton_k, method.uses_backbone
    root = jax.random.key(cfg.root_seed)
    g = graph_from_np(task.arrays)
    budget = int(task.arrays["budget"])
    before = driver.stats.snapshot()
    start = time.perf_counter()
    summary = jax.device_get(_start(model, bench, g, k, ub))
    graph, p1 = summary["obs"], summary["phase1"]
    history: list[str] = []
    logs: list[_StepLog] = []
    rows: list[dict] = []
    timeout = False
    for t in range(budget):
        step_start = time.perf_counter()
        status = np.asarray(graph["status"])
        live = live_atoms(logs, t, status)
        ctx = _context(method, task, graph, p1, history, cfg)
        d = decide(method, driver, ctx, p1, graph, bench)
        calls = d["calls"]
        slot = d["action"]
        act = NOOP if slot is None else np.asarray(p1["acts"][slot], np.int32)
        call_acts = np.tile(NOOP, (SUPPORT_SLOTS, 1))
        call_noop = np.ones(SUPPORT_SLOTS, bool)
        for row_i, a in enumerate([slot] + [c.action for c in calls][:SUPPORT_SLOTS - 1]):
            if a is not None:
                call_acts[row_i], call_noop[row_i] = p1["acts"][a], False
        g, out = _transition(model, bench, g, root, np.int32(task.task), np.int32(seed), act,
                             np.bool_(slot is None), call_acts, call_noop, k, ub)
        out = jax.device_get(out)
        supports = np.asarray(out["supports"])
        draft, committed = d["draft"], d["committed"]
        draft_row = 1 + d["draft_index"]
        halluc_draft = _flags(draft.atoms, supports[draft_row], status)
        halluc_committed = _flags(committed, supports[0], status)
        halluc_calls = [_flags(c.atoms, supports[1 + i], status) if i + 1 < SUPPORT_SLOTS else []
                        for i, c in enumerate(calls)]
        status_after = np.asarray(out["obs"]["status"])
        succ = np.asarray(out["succ_status"])
        failed = bool(out["failed"])
        miss = [int(failed and s != UNKNOWN and s == int(succ[v]) and s != int(status_after[v]))
                for v, s in committed]
        valid = bool(out["valid"])
        success = bool(out["done"])
        dead_end = int(out["dstar_after"]) >= config.UNSOLV and not success
        done = success or dead_end or t + 1 >= budget
        wall = time.perf_counter() - start
        if not done and wall > cfg.wall_cap_s:
            timeout = done = True
        bad = (not valid) or failed or int(out["dstar_after"]) > int(out["dstar_before"])
        action = _slot_str(task.bench, p1["acts"], slot)
        row = {
            "method": method.name, "bench": task.bench, "task": task.task, "split": task.split,
            "H": task.H, "seed": int(seed), "t": t, "action": action, "valid": valid,
            "calls": len(calls), "tok_in": sum(c.tokens_in for c in calls),
            "tok_out": sum(c.tokens_out for c in calls),
            "draft_atoms": _atoms_json(draft.atoms), "committed_atoms": _atoms_json(committed),
            "halluc_draft": halluc_draft, "halluc_committed": halluc_committed,
            "cons": _round(d["cons"]), "cons_after": _round(d["cons_after"]),
            "corrected": d["corrected"], "rho_hat": _round(d["rho_hat"]),
            "rho_eff": _round(d["rho_eff"]), "risk_fired": d["risk_fired"],
            "rho_star": _round(min(1.0, max(0.0, float(out["rho_star"])))), "bad_outcome": bad,
            "live_false_atoms": len(live), "parse_fail": any(c.parse_fail for c in calls),
            "fallback": any(c.fallback for c in calls), "done": done, "success": success,
            "dead_end": dead_end, "live_atoms": live, "halluc_calls": halluc_calls,
            "stochastic_miss": miss, "risk_gate_empty": d["risk_gate_empty"],
            "timeout": timeout,
        }
        if cfg.record_wall:
            row["wall_s"] = round(time.perf_counter() - step_start, 4)
        rows.append(events.validate_row(row))
        logs.append(_StepLog(list(committed), halluc_committed, status_after, act, valid,
                             np.asarray(out["valid_if"])))
        history.append(prompts.history_line(t, action, valid, committed))
        graph, p1 = out["obs"], out["phase1"]
        if done:
            break
    delta = driver.stats.since(before)
    info = {"method": method.name, "bench": task.bench, "split": task.split, "task": task.task,
            "seed": int(seed), "H": task.H, "source": task.source, "index": task.index,
            "steps": len(rows), "success": rows[-1]["success"], "timeout": timeout,
            "wall_s": round(time.perf_counter() - start, 3), **{k_: v for k_, v in delta.items()},
            "usd": cost_usd(delta["tokens_in"], delta["tokens_out"], driver.price),
            "usd_gpt4o_mini": cost_usd(delta["tokens_in"], delta["tokens_out"], REFERENCE_PRICE)}
    return rows, info
