"""The real-LLM episode loop of GILP (spec/gilp.md §4.1, §4.2, §4.5–§4.7, §5.1, §6.1, §7 T7).

Host-side, as DESIGN.md's "one turn": per step, the host renders prompts from host copies, calls
the LLM through `bsjax.llm.gilp_driver`, runs the pure gate functions (`planners.gate`, on the
host's CPU device), and then makes ONE jitted call that executes the chosen action in the true
environment, scores the next state's candidates with the backbone (Phase 1,
`planners.skeleton.score_candidates`) and computes the step's small summaries (supports of every
call's action on the *true* graph, ρ*, outcome, the observed next graph); ONE `jax.device_get`
brings those summaries to the host. No `pure_callback`; the LLM is called between jitted steps.

Methods are configs (`bsjax.gilp.methods`): Agent-Replan (no backbone, agent-only prompt),
Hybrid-* (skeleton fields, no gates; the draft's consistency is logged passively) and GILP with
its ablations (`MethodConfig.gate`). Parse failures (and fallbacks) execute as no-op invalid
actions; GILP first spends its single correction on a re-prompt (§4.6 step 2).

Event rows (`bsjax.gilp.events`) carry tokens and calls, the gate fields, draft and committed
atoms with hallucination flags from `common.support` on the true graph, `halluc_calls`,
`stochastic_miss`, and `live_atoms`, the real-path PD proxy of §6.2: a committed hallucinated atom
(v, s̃) of step u is live at the start of step t > u iff t − u ≤ W = 3 (it is still in the
"Recent Steps" window), v's true status at t is not s̃, and no output of a step in (u, t) was
consistent with v's true status — a committed atom on v equal to v's true status after that step,
or an executed valid action with v as an argument that would be invalid were v in status s̃ (for an
`unknown` claim: any valid action on v).

Each episode has a wall-clock cap: when it is exceeded after a step, the episode ends there with
`done = true, success = false, timeout = true` (reported, never dropped). `run_real` appends whole
episodes to an `events.jsonl` and skips the episodes already complete in it (resume); per-episode
timing and driver counters go to a sidecar `episodes.jsonl` (wall times are kept out of the events
so that a rerun from the call cache reproduces the events byte for byte).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bsjax.gilp import config as C
from bsjax.gilp import events as E
from bsjax.gilp import keys as K
from bsjax.gilp.envs import common, registry
from bsjax.gilp.methods import MethodConfig, get_method
from bsjax.gilp.planners import gate
from bsjax.gilp.planners.skeleton import score_candidates
from bsjax.gilp.types import Graph, graph_from_np
from bsjax.llm import gilp_prompts as P
from bsjax.llm.call_cache import REFERENCE_PRICE, cost_usd
from bsjax.llm.gilp_driver import Correction, GilpDriver, LLMReply, RiskAlert
from bsjax.llm.gilp_parse import change_mask, imagined_status

UNKNOWN = P.UNKNOWN
WINDOW = P.HISTORY_WINDOW
# Action slots whose support a step computes: the executed action, then every call's action.
SUPPORT_SLOTS = 6
NOOP = np.array([-1, 0, -1], np.int32)
SIDECAR = "episodes.jsonl"
T7_N, T7_H = 20, (3, 8)
OBS_FIELDS = ("status", "ntype", "goal", "attr", "etype", "anc", "nmask", "t", "budget",
              "horizon")


# --- tasks ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TaskRef:
    """One task of an evaluation.

    Attributes:
      bench: benchmark name.
      source: the generated split it comes from (`test_id`, `test_ood`, `val`).
      index: its index in that split.
      task: the event rows' task id: the index for test splits, `SPLIT_OFFSET["val"] + index`
        for val tasks (so a val fill never collides with a test-ID task of the same index).
      split: the event rows' split (`id` or `ood`; val tasks are `id`).
      H: oracle horizon.
      arrays: the task's padded host arrays (not compared or hashed).
    """

    bench: str
    source: str
    index: int
    task: int
    split: str
    H: int
    arrays: dict = dataclasses.field(compare=False, hash=False, repr=False)


def _task_id(source: str, index: int) -> int:
    return C.SPLIT_OFFSET["val"] + index if source == "val" else index


def task_refs(bench: str, source: str, arrays: Mapping[str, np.ndarray],
              indices: Sequence[int] | None = None) -> list[TaskRef]:
    """TaskRefs for tasks of a stacked split (`pipeline.tasks` / `generate.load_split`)."""
    count = len(arrays["status"])
    indices = range(count) if indices is None else indices
    split = "ood" if source == "test_ood" else "id"
    return [TaskRef(bench, source, int(i), _task_id(source, int(i)), split,
                    int(arrays["horizon"][i]), {k: np.asarray(v[i]) for k, v in arrays.items()})
            for i in indices]


def t7_tasks(work, bench: str, n: int = T7_N, h_range: tuple[int, int] = T7_H,
             pool: int | None = None, val_pool: int | None = None) -> list[TaskRef]:
    """Table 7's task selection (§7 T7): the first `n` test-ID tasks by index with H in
    `h_range` (inclusive), filled from the val split (first by index) if fewer qualify.

    Args:
      work: GILP work directory (`pipeline.tasks` generates missing splits there).
      bench: benchmark name.
      n: tasks per benchmark (20).
      h_range: inclusive horizon range ([3, 8]).
      pool, val_pool: how many test-ID / val tasks to look through (default: whole splits).
    """
    from bsjax.gilp import pipeline
    lo, hi = h_range
    out: list[TaskRef] = []
    for source, size in (("test_id", pool or C.SPLIT_SIZES["test_id"]),
                         ("val", val_pool or C.SPLIT_SIZES["val"])):
        if len(out) >= n:
            break
        arrays = pipeline.tasks(Path(work), bench, source, size)
        keep = [i for i in range(len(arrays["horizon"])) if lo <= int(arrays["horizon"][i]) <= hi]
        out += task_refs(bench, source, arrays, keep[:n - len(out)])
    return out


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
    statuses = jnp.arange(C.N_STATUS)
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
    key = K.env_key(root, bench.name, task, seed, g.t)
    g_step, info = common.step(bench, key, g, act)
    g_next = common.select_graph(noop, common.advance(g, g), g_step)
    valid = info.valid & ~noop
    failed = info.failed & ~noop
    d_before = info.dstar_before
    d_after = jnp.where(noop, d_before, info.dstar_after)
    g_succ, _, _ = bench.branches(g, act)
    noop_support = jax.nn.one_hot(g.status.astype(jnp.int32), C.N_STATUS, dtype=bool)
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

@contextlib.contextmanager
def _on_host():
    """Run the pure gate functions on the host CPU device (no accelerator round trip)."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield


def _status_name(code: int) -> str:
    return C.STATUS_NAMES[code] if 0 <= code < C.N_STATUS else "unknown"


def _atoms_json(atoms) -> list[list]:
    return [[int(v), _status_name(int(s))] for v, s in atoms]


def _flags(atoms, support: np.ndarray, status: np.ndarray) -> list[int]:
    """Hallucination flag per atom (spec §6.2): outside the support of the true transition; an
    `unknown` atom iff v cannot change at all."""
    out = []
    for v, s in atoms:
        if s == UNKNOWN or not 0 <= s < C.N_STATUS:
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
    return None if slot is None else P.action_str(bench, acts[slot])


def decide(method: MethodConfig, driver: GilpDriver, ctx: P.PromptContext, p1: dict,
           graph: dict, bench) -> dict:
    """One step's LLM phases (2-4) on the host; returns the calls and the committed choice.

    Returns a dict with `calls` (LLMReply list in order), `draft` (the Phase-2 draft, after a
    parse re-prompt) and its index in `calls`, the `final` reply, `cons`,
    `cons_after`, `corrected`, `rho_hat`, `rho_eff`, `risk_fired`, `risk_gate_empty` and
    `action` (the executed candidate slot or None) and `committed` atoms.
    """
    status = np.asarray(graph["status"])
    nmask = np.asarray(graph["nmask"], bool)
    n = len(status)
    acts = p1["acts"]
    calls: list[LLMReply] = []
    out = {"cons": None, "cons_after": None, "corrected": False, "rho_hat": None,
           "rho_eff": None, "risk_fired": False, "risk_gate_empty": False}
    flags = method.gate
    draft = driver.draft(ctx)
    calls.append(draft)
    draft_index, used = 0, 0
    if method.gated and draft.action is None and used < method.max_corrections:
        used += 1
        draft = driver.reparse(ctx)
        calls.append(draft)
        draft_index = 1
    final = draft
    if draft.action is not None and method.uses_backbone:
        slot = draft.action
        s_mask = change_mask(n, draft.atoms)
        with _on_host():
            cons = float(gate.jaccard(s_mask, p1["changed"][slot]))
        out["cons"], out["rho_hat"] = cons, float(p1["risk"][slot])
        if method.gated:
            with _on_host():
                issue, double = gate.gate_decision(flags, cons, used, method.max_corrections,
                                                   method.tau_low, method.tau_high)
                issue, double = bool(issue), bool(double)
            if issue:
                used += 1
                out["corrected"] = True
                pred = p1["pred_status"][slot]
                lines = gate.discrepancies(imagined_status(status, draft.atoms), pred, s_mask,
                                           p1["changed"][slot])
                backbone_atoms = P.changes(status, pred, nmask)
                explain = bench.explain(graph, tuple(int(x) for x in acts[slot]))
                revised = driver.revise(ctx, Correction(P.action_str(bench.name, acts[slot]),
                                                        draft.atoms, backbone_atoms, lines,
                                                        explain))
                calls.append(revised)
                if revised.action is not None:
                    final = revised
                slot = final.action
                with _on_host():
                    cons_after = float(gate.jaccard(change_mask(n, final.atoms),
                                                    p1["changed"][slot]))
                    double = bool(gate.after_correction(flags, cons_after, method.tau_high))
                out["cons_after"] = cons_after
                out["rho_hat"] = float(p1["risk"][slot])
            with _on_host():
                rho_eff = float(gate.rho_eff(out["rho_hat"], double))
            out["rho_eff"] = rho_eff
            if flags.risk_gate and rho_eff > method.rho_th:
                with _on_host():
                    subset = np.asarray(gate.low_risk_subset(
                        p1["value"], p1["risk"], p1["p_valid"], p1["amask"], slot, method.rho_th,
                        k=method.skeleton_k))
                members = [int(a) for a in np.flatnonzero(subset)]
                members.sort(key=lambda a: (-float(p1["value"][a]), a))
                if members:
                    alert = RiskAlert(P.action_str(bench.name, acts[slot]), rho_eff,
                                      bench.explain(graph, tuple(int(x) for x in acts[slot])),
                                      members, [(P.action_str(bench.name, acts[a]),
                                                 float(p1["risk"][a])) for a in members])
                    escalated = driver.escalate(ctx, alert)
                    calls.append(escalated)
                    out["risk_fired"] = True
                    if escalated.action is not None:
                        final = escalated
                    else:  # argmax_{L_t} Ĵ_K, with no imagined delta of its own
                        final = escalated._replace(action=members[0], atoms=[])
                else:
                    out["risk_gate_empty"] = True
    out.update(calls=calls, draft=draft, draft_index=draft_index, final=final,
               action=final.action, committed=list(final.atoms))
    return out


def _context(method: MethodConfig, task: TaskRef, graph: dict, p1: dict, history: list[str],
             cfg: RealConfig) -> P.PromptContext:
    skeleton = None
    if method.skeleton:
        skeleton = P.skeleton_from_arrays(graph, task.bench, p1["acts"], p1["rows"],
                                          p1["p_valid"], p1["value"], p1["risk"],
                                          p1["pred_status"], p1["affected"],
                                          p1["affected_goal"])
    return P.PromptContext(graph=graph, bench=task.bench, acts=p1["acts"], amask=p1["amask"],
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
        dead_end = int(out["dstar_after"]) >= C.UNSOLV and not success
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
        rows.append(E.validate_row(row))
        logs.append(_StepLog(list(committed), halluc_committed, status_after, act, valid,
                             np.asarray(out["valid_if"])))
        history.append(P.history_line(t, action, valid, committed))
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


# --- runs with resume ------------------------------------------------------------------------------

def _complete_keys(path: Path) -> set[tuple]:
    """Episode keys complete in an events file; incomplete episodes and torn lines are removed
    from the file (rewritten atomically) so that appending whole episodes keeps it valid."""
    if not path.exists():
        return set()
    lines = path.read_text().splitlines()
    parsed = []
    for line in lines:
        try:
            row = json.loads(line)
            parsed.append((line, row, E.episode_key(row)))
        except (ValueError, KeyError, TypeError):
            parsed.append((line, None, None))
    by_key: dict[tuple, list[dict]] = {}
    for _, row, key in parsed:
        if key is not None:
            by_key.setdefault(key, []).append(row)
    complete = set()
    for key, rows in by_key.items():
        ts = sorted(r.get("t", -1) for r in rows)
        last = max(rows, key=lambda r: r.get("t", -1))
        if ts == list(range(len(rows))) and last.get("done") \
                and not any(r.get("done") for r in rows if r is not last):
            complete.add(key)
    keep = [line for line, _, key in parsed if key in complete]
    if len(keep) != len(lines):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(line + "\n" for line in keep))
        os.replace(tmp, path)
    return complete


def run_real(out: str | Path, methods: Sequence[str | MethodConfig], tasks: Sequence[TaskRef],
             driver: GilpDriver, models: Mapping[str, object] | object | None = None,
             seed: int = 0, cfg: RealConfig = RealConfig(),
             log: Callable[[str], None] | None = None) -> dict:
    """Run every (task, method) episode not already complete in `out` (an events.jsonl path, or
    a directory that gets one), appending each finished episode's rows in one write; then its
    sidecar row to `episodes.jsonl` beside it.

    Args:
      out: events file or run directory.
      methods: LLM methods (names or configs).
      tasks: the tasks, run task-major in this order.
      driver: the LLM driver.
      models: a backbone, or `{bench: backbone}`; may be None for Agent-Replan only.
      seed: episode seed s.
      cfg: loop settings.
      log: progress sink (one line per episode), e.g. `print` to stderr.
    Returns:
      `{"events": path, "run": n, "skipped": n, "episodes": [sidecar rows of this call]}`.
    """
    path = Path(out)
    if path.is_dir() or path.suffix != ".jsonl":
        path = path / E.EVENTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    done_keys = _complete_keys(path)
    sidecar = path.with_name(SIDECAR)
    methods = [get_method(m) if isinstance(m, str) else m for m in methods]
    ran, skipped, infos = 0, 0, []
    for task in tasks:
        for method in methods:
            key = (method.name, task.bench, task.split, task.task, int(seed))
            if key in done_keys:
                skipped += 1
                continue
            model = models.get(task.bench) if isinstance(models, Mapping) else models
            rows, info = run_episode(method, task, driver, model, seed, cfg)
            E.write_events(path, rows, append=True)
            with sidecar.open("a") as f:
                f.write(json.dumps(info) + "\n")
            done_keys.add(key)
            ran += 1
            infos.append(info)
            if log is not None:
                log(f"{method.name} {task.bench}/{task.source}[{task.index}] H={task.H}: "
                    f"{'success' if info['success'] else 'fail'} in {info['steps']} steps, "
                    f"{info['calls']} calls, {info['wall_s']:.1f}s"
                    + (" (timeout)" if info["timeout"] else ""))
    return {"events": str(path), "run": ran, "skipped": skipped, "episodes": infos}


def read_real_run(events_path: str | Path) -> tuple[list[dict], list[dict]]:
    """`(event rows, sidecar episode rows)` of a real run's `events.jsonl` (a directory means
    its `events.jsonl`); a missing sidecar gives no episode rows."""
    path = Path(events_path)
    path = path / E.EVENTS_FILE if path.is_dir() else path
    side_path = path.with_name(SIDECAR)
    side = [json.loads(line) for line in side_path.read_text().splitlines()
            if line.strip()] if side_path.exists() else []
    return E.read_events(path), side


def summarise_real(events_path: str | Path) -> dict[str, dict]:
    """`summarise_real_rows` of a real run's files."""
    return summarise_real_rows(*read_real_run(events_path))


def summarise_real_rows(rows: list[dict], side: list[dict]) -> dict[str, dict]:
    """Per method: n, SR, HSR (committed, draft), calls/step, correction and risk-gate rates,
    JSON-fail rate per call, fallbacks, timeouts, tokens per task, $ per task at the driver's
    price row and at GPT-4o-mini prices, and backend seconds per call (JSON-fail rate, $ per task
    and seconds come from the sidecar rows `side`)."""
    from bsjax.gilp import metrics
    out = {}
    for method, s in metrics.summarise(rows).items():
        mine = [r for r in side if r["method"] == method]
        calls = sum(r["calls"] for r in mine)
        backend = sum(r["backend_calls"] for r in mine)
        out[method] = {
            "n": s["episodes"], "sr": s["sr"], "sr_ci": s["sr_ci"], "hsr": s["hsr"],
            "hsr_ci": s["hsr_ci"], "hsr_draft": s["hsr_draft"], "steps": s["steps"],
            "calls_step": s["calls_step"], "corr_rate": s["corr_rate"],
            "risk_rate": s["risk_rate"], "parse_fail_rate": s["parse_fail_rate"],
            "json_fail_rate": (sum(r["json_failures"] for r in mine) / calls) if calls else None,
            "fallbacks": s["fallbacks"], "timeouts": s["timeouts"], "tok_task": s["tok_task"],
            "usd_task": (sum(r["usd"] for r in mine) / len(mine)) if mine else None,
            "usd_task_gpt4o_mini": (sum(r["usd_gpt4o_mini"] for r in mine) / len(mine))
            if mine else None,
            "usd_1k_gpt4o_mini": s["usd_1k"],
            "sec_per_call": (sum(r["backend_seconds"] for r in mine) / backend) if backend
            else None,
            "calls": calls, "backend_calls": backend,
        }
    return out


# --- command line ----------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bsjax.gilp.real ...` is `bsjax gilp real ...` (`bsjax.gilp.cli_real`)."""
    from bsjax.cli import main as bsjax_main
    return bsjax_main(["gilp", "real", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
