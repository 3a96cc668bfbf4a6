"""The behavioural LLM simulator (docs/gilp/spec.md §5.2, §4.6-§4.8, §6.1, §8): hallucination types on
hand-built states, the p_h formula, the noiseless agent = the observable oracle, gate detection
with a perfect-label backbone, the ablation behaviours, determinism, no information leak, event
rows, retracing, and a smoke run of the hybrid methods with an untrained MPNN."""

from __future__ import annotations

import dataclasses
import re

import chex
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bsjax.gilp import config as gilp_config
from bsjax.gilp import events, keys, methods, metrics, types
from bsjax.gilp.backbones import BackboneOut, make_backbone
from bsjax.gilp.backbones.features import GraphInputs
from bsjax.gilp.behaviour import agent as sim_agent
from bsjax.gilp.behaviour import hallucinate as gilp_hallucinate
from bsjax.gilp.behaviour import params as sim_params
from bsjax.gilp.behaviour import run as behaviour_run
from bsjax.gilp.behaviour.records import StepRecord
from bsjax.gilp.data import generate
from bsjax.gilp.envs import common, registry
from bsjax.gilp.envs.common import Bench
from bsjax.gilp.planners import skeleton
from bsjax.gilp.types import Graph, graph_from_np

P, A, CO, F, S = (
    gilp_config.PENDING,
    gilp_config.ACTIVE,
    gilp_config.COMPLETED,
    gilp_config.FAILED,
    gilp_config.SKIPPED,
)
TG = registry.get("taskgraph")
# J_K with K = 1 keeps the compiled functions of these tests small; the default config (K = 4)
# runs in the smoke tests.
CFG = gilp_config.GilpConfig(value_horizon=1)
AGENT = methods.get_method("Agent-Replan")
GILP = methods.get_method("GILP")


@pytest.fixture(autouse=True)
def _key_reuse():
    with jax.debug_key_reuse(True):
        yield


def _tasks(bench: str, count: int, split: str = "val", start: int = 0) -> dict:
    return generate.stack_tasks(
        [generate.generate_task(bench, split, i) for i in range(start, start + count)]
    )


TG_TASKS = _tasks("taskgraph", 4)


# --- a perfect-label backbone (test shim) ------------------------------------------------------


def _closure(etype: jax.Array, nmask: jax.Array) -> jax.Array:
    """Ancestor-or-self closure over the structural edge types (5 squarings cover N = 24)."""
    structural = jnp.isin(etype, jnp.asarray(gilp_config.STRUCTURAL_EDGE_TYPES))
    reach = (structural & nmask[:, None] & nmask[None, :]) | jnp.diag(nmask)
    for _ in range(5):
        reach = reach | ((reach.astype(jnp.int32) @ reach.astype(jnp.int32)) > 0)
    return reach


class PerfectBackbone(eqx.Module):
    """Returns the exact modal labels of `common.labels` for the graph its inputs describe."""

    bench: Bench = eqx.field(static=True)

    def __call__(self, inputs: GraphInputs, action: jax.Array) -> BackboneOut:
        x, n = inputs.node_x, inputs.nmask.shape[0]
        g = Graph(
            status=jnp.argmax(x[:, 0:5], -1).astype(jnp.int8),
            ntype=jnp.argmax(x[:, 5:10], -1).astype(jnp.int8),
            goal=x[:, 10] > 0.5,
            attr=x[:, 11:19],
            etype=inputs.etype.astype(jnp.int8),
            anc=_closure(inputs.etype, inputs.nmask),
            hidden=jnp.zeros((n, 5), jnp.int8),
            nmask=inputs.nmask,
            t=jnp.int32(0),
            budget=jnp.int32(0),
            horizon=jnp.int32(0),
        )
        lab = common.labels(self.bench, g, action, horizon=CFG.value_horizon)
        big = 12.0
        risk = jnp.clip(lab["risk"], 1e-4, 1 - 1e-4)
        return BackboneOut(
            valid_logit=jnp.where(lab["valid"], big, -big),
            delta_logits=(2.0 * jax.nn.one_hot(lab["delta"].astype(jnp.int32) + 1, 3) - 1.0) * big,
            reward=lab["reward"],
            done_logit=jnp.where(lab["done"], big, -big),
            risk_logit=jnp.log(risk) - jnp.log1p(-risk),
            value=lab["value"],
        )


PERFECT = PerfectBackbone(TG)


# --- hallucination types and p_h ---------------------------------------------------------------


def _chain_graph() -> Graph:
    """0 -> 1 -> 2 -> 3 and 1 -> 4 (depends_on); node 0 COMPLETED, the rest PENDING."""
    arrays = types.empty_graph_np()
    arrays["nmask"][:5] = True
    arrays["status"][:5] = [CO, P, P, P, P]
    arrays["goal"][3] = True
    for u, v in ((0, 1), (1, 2), (2, 3), (1, 4)):
        arrays["etype"][u, v] = gilp_config.DEPENDS_ON
    arrays["anc"] = types.ancestor_closure_np(arrays["etype"], arrays["nmask"])
    return graph_from_np(arrays)


def _claims(**atoms) -> jnp.ndarray:
    claim = np.full(gilp_config.N_MAX, -1, np.int8)
    for v, s in atoms.items():
        claim[int(v[1:])] = s
    return jnp.asarray(claim)


@jax.jit
def _all_types(key, claim, view, target):
    u = jax.random.uniform(key, (gilp_hallucinate.ATOM_DRAWS,))
    return jnp.stack([gilp_hallucinate.add_atom(u, i, claim, view.status, view, target) for i in range(4)])


def test_hallucination_types_on_hand_built_state():
    g = _chain_graph()
    base = _claims(n1=CO)  # execute(node_1): node_1 -> completed
    neighbours_of_1 = {0, 2, 4}
    for seed in range(12):
        fc, we, dep, val = np.asarray(_all_types(jax.random.key(seed), base, g, jnp.int32(1)))
        # fc: the target keeps its atom; one neighbour not already COMPLETED is claimed COMPLETED.
        added = set(np.flatnonzero(fc >= 0)) - {1}
        assert fc[1] == CO and len(added) == 1
        (v,) = added
        assert v in neighbours_of_1 - {0} and fc[v] == CO
        # we: the target's atom moves to a neighbour, the target's own atom is removed.
        assert we[1] == -1 and set(np.flatnonzero(we >= 0)) <= neighbours_of_1
        (w,) = np.flatnonzero(we >= 0)
        assert we[w] == CO and w != 0  # node_0 already believed COMPLETED
        # dep: 1-2 out-neighbours of node_1 (nodes 2, 4) claimed ACTIVE or COMPLETED.
        claimed = set(np.flatnonzero(dep >= 0)) - {1}
        assert dep[1] == CO and 1 <= len(claimed) <= 2 and claimed <= {2, 4}
        assert all(dep[u] in (A, CO) for u in claimed)
        # val: only the target's status changes, to something other than the claim and belief.
        assert set(np.flatnonzero(val >= 0)) == {1} and val[1] not in (CO, P)


def test_hallucination_without_target_atom_and_fallbacks():
    g = _chain_graph()
    empty = _claims()
    for seed in range(6):
        fc, we, dep, val = np.asarray(_all_types(jax.random.key(seed), empty, g, jnp.int32(3)))
        assert (we == -1).all() and (val == -1).all()  # nothing to move or re-value
        assert set(np.flatnonzero(fc >= 0)) == {2} and fc[2] == CO  # node_3's only neighbour
        # node_3 has no out-neighbours: dep falls back to its neighbours (node_2).
        assert set(np.flatnonzero(dep >= 0)) == {2} and dep[2] in (A, CO)


def test_hallucinate_event_and_atom_count():
    g = _chain_graph()
    base = _claims(n1=CO)
    action = jnp.asarray([0, 1, -1], jnp.int32)
    params = sim_params.default_params(pi_fc=0.0, pi_we=0.0, pi_dep=0.0, pi_val=1.0, p_two=0.0)
    run = jax.jit(
        jax.vmap(
            lambda k, p_h: gilp_hallucinate.hallucinate(k, base, g.status, g, action, p_h, params),
            in_axes=(0, None),
        )
    )
    keys_ = jax.random.split(jax.random.key(0), 400)
    claims, event = run(keys_, jnp.float32(0.0))
    assert not np.asarray(event).any() and (np.asarray(claims) == np.asarray(base)).all()
    claims, event = run(jax.random.split(jax.random.key(1), 400), jnp.float32(0.5))
    event, claims = np.asarray(event), np.asarray(claims)
    assert 0.4 < event.mean() < 0.6
    assert (claims[event, 1] != CO).all() and (claims[~event, 1] == CO).all()


@pytest.mark.parametrize(
    "k, live, delta, expected",
    [
        (1, 0, False, 0.14),
        (10, 0, False, 0.24),
        (20, 0, False, 0.24),
        (5, 0, False, 0.14 + 0.10 * 4 / 9),
        (1, 3, False, 0.14 + 0.09),
        (1, 0, True, 0.14 * 0.65),
        (10, 2, True, (0.24 + 0.06) * 0.65),
        (1, 40, False, 0.95),
    ],
)
def test_p_halluc_formula(k, live, delta, expected):
    p = float(gilp_hallucinate.p_halluc(jnp.int32(k), jnp.int32(live), delta, sim_params.SimParams()))
    assert p == pytest.approx(expected, abs=1e-6)


def test_params_json_roundtrip(tmp_path):
    params = sim_params.default_params(h0=0.2, c_tg=0.8)
    path = sim_params.save_params(tmp_path, params, residuals={"sr": 0.01})
    assert path.name == sim_params.PARAMS_FILE
    assert sim_params.to_dict(sim_params.load_params(path)) == sim_params.to_dict(params)
    assert sim_params.SimParams().q_rec == 0.25 and sim_params.SimParams().beta == 0.93
    with pytest.raises(ValueError):
        sim_params.default_params(nope=1.0)


def test_the_shipped_calibrated_preset(tmp_path, monkeypatch):
    """`calibrated` (package data) loads by name, per benchmark with that benchmark's token
    coefficients, and records what it was checked on: the whole val split, Agent-Replan's SR, HSR,
    IAR and p_err(10) and Hybrid-Full's SR and HSR inside their acceptance bands."""
    import json

    doc = json.loads(sim_params.preset_path("calibrated").read_text())
    assert sim_params.to_dict(sim_params.load_params("calibrated")) == pytest.approx(doc["params"])
    per_bench = doc["residuals"]["token_model"]["coefs_per_bench"]
    assert set(per_bench) == set(gilp_config.BENCHMARKS)
    for bench, coefs in per_bench.items():
        loaded = sim_params.load_params("calibrated", bench)
        assert {k: getattr(loaded, k) for k in coefs} == pytest.approx(coefs)
    assert doc["meta"]["tasks_per_bench"] == 100 and doc["meta"]["provenance"]
    passed = {(r["method"], r["metric"]): r["pass"] for r in doc["residuals"]["band_recheck"]}
    for row in [
        ("Agent-Replan", "sr"),
        ("Agent-Replan", "hsr"),
        ("Agent-Replan", "iar"),
        ("Agent-Replan", "p_err@10"),
        ("Hybrid-Full", "sr"),
        ("Hybrid-Full", "hsr"),
    ]:
        assert passed[row], row
    with pytest.raises(ValueError, match="unknown simulator parameter preset"):
        sim_params.preset_path("nope")
    # What `gilp run|paper --params calibrated` and `calibrate --start calibrated` load.
    from bsjax.gilp.cli.main import load_sim_params

    by_bench = load_sim_params("calibrated", list(gilp_config.BENCHMARKS))
    assert by_bench["toolchain"].tok_a_n == pytest.approx(per_bench["toolchain"]["tok_a_n"])
    # A parameter file on disk of the same name wins over the preset; a directory without one
    # (an unfinished `calibrate --out calibrated`) does not.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "calibrated").mkdir()
    assert sim_params.load_params("calibrated").c_tg == pytest.approx(doc["params"]["c_tg"])
    sim_params.save_params(tmp_path / "calibrated", sim_params.default_params(c_tg=0.5))
    assert sim_params.load_params("calibrated").c_tg == 0.5


# --- methods and phase 1 -----------------------------------------------------------------------


def test_method_registry():
    assert len(methods.METHOD_NAMES) == 13
    assert methods.get_method("NoBackbone") is AGENT
    assert methods.get_method("Oracle").kind == "oracle"
    full = methods.get_method("Hybrid-Full")
    assert full.fields == methods.SKELETON_FIELDS and not full.gated and full.variant == "full"
    assert methods.get_method("Hybrid-DeltaOnly").fields == ("delta",)
    assert GILP.correct == "band" and methods.get_method("GILP-tau0").correct == "always"
    assert methods.get_method("Parametric-WM-MCTS").parametric == "mcts"
    assert len({hash(m) for m in methods.METHODS.values()}) == 13
    with pytest.raises(ValueError):
        methods.get_method("GILP-Verifier")
    sweep = methods.with_tau_low(GILP, 0.25)
    assert sweep.tau_low == 0.25 and sweep.name != GILP.name and hash(sweep) != hash(GILP)


def test_method_variants_by_name():
    """`NAME[key=value,...]` is the registry method with other thresholds, everywhere a name
    goes (CLI lists included: commas inside the brackets stay)."""
    variant = methods.get_method(" GILP[tau_low=0.5, rho_th=0.4] ")
    assert variant == dataclasses.replace(GILP, name="GILP[tau_low=0.5,rho_th=0.4]", tau_low=0.5, rho_th=0.4)
    assert methods.get_method(variant.name) == variant  # the name round-trips
    # One config, one name: keys in THRESHOLD_KEYS order, numbers that read back exactly.
    assert methods.get_method("GILP[rho_th=0.4,tau_low=0.5]") == variant
    odd = methods.get_method("GILP[tau_low=0.1234567891]")
    assert methods.get_method(odd.name) == odd and odd.tau_low == 0.1234567891
    assert methods.get_method("GILP[tau_low=0.25]") == methods.with_tau_low(GILP, 0.25)
    assert methods.get_method("Hybrid-Full[skeleton_k=2]").skeleton_k == 2
    assert methods.split_methods("Agent-Replan, GILP[tau_low=0.5,rho_th=0.4],Oracle,") == [
        "Agent-Replan",
        "GILP[tau_low=0.5,rho_th=0.4]",
        "Oracle",
    ]
    for bad, message in [
        ("GILP[tau_low]", "expected key=value"),
        ("GILP[beta=1]", "expected key=value"),
        ("GILP[tau_low=0.2,tau_low=0.3]", "tau_low given twice"),
        ("GILP[skeleton_k=two]", "not an integer"),
        ("GILP[tau_low=0.9]", "tau_low <= tau_high"),
        ("GILP[rho_th=1.5]", "0 <= rho_th <= 1"),
        ("Hybrid-Full[tau_low=0.5]", "no consistency gate"),
        ("Agent-Replan[rho_th=0.5]", "no thresholds"),
        ("Parametric-WM-MPC[skeleton_k=2]", "no thresholds"),
        ("Chess[rho_th=0.5]", "unknown GILP method 'Chess'"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            methods.get_method(bad)


def test_score_candidates_never_reads_hidden_and_is_consistent():
    rf = registry.get("repairflow")
    tasks = _tasks("repairflow", 1, split="test_ood")
    g = graph_from_np({k: v[0] for k, v in tasks.items()})
    model = make_backbone("GCN", jax.random.key(1))
    ph1 = skeleton.score_candidates_jit(model, rf, g)
    scrambled = skeleton.score_candidates_jit(model, rf, g.replace(hidden=jnp.ones_like(g.hidden)))
    for a, b in zip(ph1, scrambled):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    amask, rows = np.asarray(ph1.amask), np.asarray(ph1.rows)
    assert (rows[:4] >= 0).all() and amask[rows[rows >= 0]].all()
    assert int(ph1.in_skeleton.sum()) == int((rows >= 0).sum())
    status = np.asarray(g.status)
    changed, pred = np.asarray(ph1.changed), np.asarray(ph1.pred_status)
    assert (pred[~changed] == np.broadcast_to(status, pred.shape)[~changed]).all()
    assert not changed[~amask].any() and (np.asarray(ph1.p_valid)[~amask] == 0).all()


# --- Agent-Replan episodes (one compiled function shared by several tests) ---------------------

AGENT_FN = jax.jit(chex.assert_max_traces(behaviour_run.batched_episodes(AGENT, TG, CFG), n=1))


def _episodes(fn, tasks: dict, seeds=(0, 1), root=0, params=None, model=None):
    graphs = graph_from_np(tasks)
    count = graphs.status.shape[0]
    task = jnp.repeat(jnp.arange(count), len(seeds))
    g0 = jax.tree_util.tree_map(lambda x: x[task], graphs)
    seed = jnp.tile(jnp.asarray(seeds), count)
    params = sim_params.SimParams() if params is None else params
    return fn(jax.random.key(root), params, model, g0, task, seed), task, seed


@jax.jit
def _oracle_obs_rollout(root, g0, task, seed):
    """Reference: the observable oracle on the true state with the same environment keys."""

    def one(g0, task, seed):
        def body(carry, t):
            g, alive = carry
            a = common.oracle_obs_action(TG, common.observe(g))
            g_next, info = common.step(TG, keys.env_key(root, "taskgraph", task, seed, t), g, a)
            done = info.done | (g_next.t >= g.budget) | (info.dstar_after >= gilp_config.UNSOLV)
            return (common.select_graph(alive, g_next, g), alive & ~done), (a, alive, info.done)

        return jax.lax.scan(body, (g0, jnp.bool_(True)), jnp.arange(gilp_config.B_MAX))[1]

    return jax.vmap(one)(g0, task, seed)


def test_noiseless_agent_is_the_observable_oracle():
    params = sim_params.default_params(h0=0.0, h1=0.0, h2=0.0, c_tg=1.0, p_parse=0.0, q_fb=1.0, q_rec=1.0)
    (_, rec), task, seed = _episodes(AGENT_FN, TG_TASKS, params=params)
    g0 = jax.tree_util.tree_map(lambda x: x[task], graph_from_np(TG_TASKS))
    ref_action, ref_alive, ref_done = _oracle_obs_rollout(jax.random.key(0), g0, task, seed)
    np.testing.assert_array_equal(np.asarray(rec.active), np.asarray(ref_alive))
    active = np.asarray(rec.active)
    np.testing.assert_array_equal(np.asarray(rec.action)[active], np.asarray(ref_action)[active])
    np.testing.assert_array_equal(np.asarray(rec.success)[active], np.asarray(ref_done)[active])
    run = _as_run(rec, task, seed, TG_TASKS)
    rows = behaviour_run.records_to_events(run)
    assert metrics.hsr(rows)["hsr"] == 0.0
    assert metrics.invalid_action_rate(rows) == 0.0
    assert all(r["live_false_atoms"] == 0 for r in rows)


def _as_run(rec, task, seed, tasks, method="Agent-Replan", kind="llm"):
    task = np.asarray(task)
    return behaviour_run.SimRun(
        method=method,
        bench="taskgraph",
        kind=kind,
        task=task,
        task_index=task,
        seed=np.asarray(seed),
        H=np.asarray(tasks["horizon"])[task],
        records=jax.tree_util.tree_map(np.asarray, rec),
        seconds=0.0,
    )


def test_determinism_events_and_single_trace():
    (_, rec1), task, seed = _episodes(AGENT_FN, TG_TASKS)
    (_, rec2), _, _ = _episodes(AGENT_FN, TG_TASKS)
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), rec1, rec2
    )
    (_, rec3), _, _ = _episodes(AGENT_FN, TG_TASKS, root=1)
    assert not all(
        np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
        for a, b in zip(jax.tree_util.tree_leaves(rec1), jax.tree_util.tree_leaves(rec3))
    )
    # Other tasks of the same shapes: no retrace (assert_max_traces(n=1) would raise).
    _episodes(AGENT_FN, _tasks("taskgraph", 4, start=4))
    # Event rows validate, group into complete episodes and feed every metric.
    rows = behaviour_run.records_to_events(_as_run(rec1, task, seed, TG_TASKS))
    for row in rows:
        events.validate_row(row)
    episodes = events.group_episodes(rows)
    assert len(episodes) == 8
    assert all(ep[-1]["done"] for ep in episodes)
    summary = metrics.summarise(rows)["Agent-Replan"]
    assert summary["episodes"] == 8 and summary["calls_step"] >= 1.0
    assert summary["pd"] is None or summary["pd"] >= 0.0
    assert events.dumps_row(rows[0]) == events.dumps_row(
        behaviour_run.records_to_events(_as_run(rec2, task, seed, TG_TASKS))[0]
    )


# --- GILP's gates with a perfect-label backbone (agent phase on real TaskGraph states) ---------

GATE_PARAMS = dict(
    c_tg=1.0,
    h0=1.0,
    h1=0.0,
    h2=0.0,
    kappa_delta=0.0,
    p_two=0.0,
    p_parse=0.0,
    eta_ground=0.0,
    eta_in=0.0,
    eta_value=0.0,
    eta_val=0.0,
    eta_risk=0.0,
)
TG_STATES = graph_from_np(TG_TASKS)


# GILP-NoRiskGate has GILP's Phase 3 exactly; the detection tests run it.
ABLATIONS = ("GILP-NoRiskGate", "GILP-NoCorrGate", "GILP-tau0")


def _agent_phase_fn(names):
    """One jitted function: for each method, vmap over states of vmap over keys of the agent phase
    with the perfect backbone, plus the draft's base atoms and its hallucination flags (from the
    true support). The methods' flags are traced and vmapped (`methods.stack_flags`, the
    one-compile path of `run_simulated_many`): one trace for all of them. Returns
    {name: outputs}."""

    def one(flags, key, g, params):
        out = sim_agent.agent_phase(key, g, g.status, flags, params, PERFECT, TG, CFG)
        a = out.acts[out.draft_index]
        modal = common.modal(TG, common.observe(g), a).status
        supp = common.support(TG, g, a)
        keep = (
            "draft",
            "committed",
            "cons",
            "cons_after",
            "corrected",
            "risk_fired",
            "event",
            "rho_hat",
            "rho_eff",
            "parsed",
        )
        return {
            **{k: getattr(out, k) for k in keep},
            "base": jnp.where(modal != g.status, modal, -1),
            "draft_halluc": sim_agent.hallucinated(out.draft, supp),
        }

    def run(key_data, states, params, flags):
        # Every method gets the same keys (wrapped afresh from raw data: no key reuse).
        def method(f):
            return jax.vmap(jax.vmap(lambda k, g: one(f, k, g, params), in_axes=(0, None)))(
                jax.random.wrap_key_data(key_data), states)
        outputs = jax.vmap(method)(flags)
        return {name: jax.tree_util.tree_map(lambda x, i=i: x[i], outputs)
                for i, name in enumerate(names)}

    flags = methods.stack_flags([methods.get_method(name) for name in names])
    compiled = jax.jit(run)
    return lambda key_data, states, params: compiled(key_data, states, params, flags)


PHASE_FN = _agent_phase_fn(ABLATIONS)
N_KEYS = 48


def _phase(params, seed=0, name="GILP-NoRiskGate"):
    keys_ = jax.random.split(jax.random.key(seed), (TG_STATES.status.shape[0], N_KEYS))
    out = PHASE_FN(jax.random.key_data(keys_), TG_STATES, params)
    return jax.tree_util.tree_map(np.asarray, out if name is None else out[name])


def _type_params(kind: str):
    mix = {name: float(name == f"pi_{kind}") for name in ("pi_fc", "pi_we", "pi_dep", "pi_val")}
    return sim_params.default_params(**GATE_PARAMS, **mix)


def test_gate_detects_wrong_entity_and_false_completion_but_not_wrong_value():
    for kind in ("we", "fc", "val"):
        out = _phase(_type_params(kind))
        touched = out["event"] & (out["draft"] != out["base"]).any(-1)  # an atom was added/moved
        assert touched.sum() >= 20, kind
        assert out["draft_halluc"][touched].any(-1).mean() > 0.7, kind
        cons, corrected = out["cons"][touched], out["corrected"][touched]
        if kind == "we":  # the change-set moved: cons = 0 < τ_low, a correction is issued
            assert (cons < 0.30).all() and corrected.all()
        elif kind == "fc":  # an extra node: S ⊋ Ŝ, so cons ≤ 1/2 < τ_high (flagged, ρ̂ doubled)
            assert (cons <= 0.5 + 1e-6).all() and (cons < 0.70).all()
            flagged = ~corrected
            np.testing.assert_allclose(
                out["rho_eff"][touched][flagged],
                np.minimum(1.0, 2.0 * out["rho_hat"][touched][flagged]),
                rtol=1e-6,
            )
        else:  # same change-set, other status: Jaccard cannot see it
            assert (cons == 1.0).all() and not corrected.any()
    # With no hallucination at all the perfect backbone always agrees.
    clean = _phase(sim_params.default_params(**{**GATE_PARAMS, "h0": 0.0}))
    assert (clean["cons"] == 1.0).all() and not clean["corrected"].any()


def test_revision_adopts_the_backbone_atoms():
    out = _phase(
        sim_params.default_params(**GATE_PARAMS, beta=1.0, pi_fc=0.0, pi_we=1.0, pi_dep=0.0, pi_val=0.0)
    )
    fixed = out["corrected"]
    assert fixed.sum() >= 20
    # An aligned revision of a valid draft commits exactly the true (perfect backbone) delta.
    np.testing.assert_array_equal(out["committed"][fixed], out["base"][fixed])
    assert (out["cons_after"][fixed] == 1.0).all()


def test_ablation_behaviours():
    params = sim_params.default_params(h0=0.5, c_tg=0.6, p_parse=0.0)
    out = _phase(params, seed=3, name=None)
    band = out["GILP-NoRiskGate"]  # GILP's Phase 3: corrects iff cons < τ_low
    assert band["corrected"].any() and not band["corrected"].all()
    np.testing.assert_array_equal(band["corrected"], band["cons"] < 0.30)
    # NoRiskGate: Phase 4 never fires.
    assert not band["risk_fired"].any()
    # NoCorrGate: never corrects, never doubles ρ̂ (Phase 4 still runs).
    never = out["GILP-NoCorrGate"]
    assert not never["corrected"].any() and np.isnan(never["cons_after"]).all()
    np.testing.assert_array_equal(never["rho_eff"], never["rho_hat"])
    assert never["risk_fired"].any()
    # tau0: a correction call on every (parsed) step.
    assert out["GILP-tau0"]["corrected"].all()


# --- no information leak -----------------------------------------------------------------------


def test_agent_reads_only_the_observable_state():
    """RepairFlow OOD tasks carry hidden faults and latent faults: scrambling every hidden field
    changes nothing the simulated agent (choice, imagined delta) produces. (Phase 1 zeroes
    `hidden` itself: see test_score_candidates_never_reads_hidden.)"""
    rf = registry.get("repairflow")
    tasks = _tasks("repairflow", 3, split="test_ood")
    g = graph_from_np(tasks)
    scrambled = g.replace(
        hidden=jnp.asarray(np.random.default_rng(0).integers(0, 2, size=tasks["hidden"].shape), jnp.int8)
    )
    params = sim_params.default_params(h0=0.5, c_tg=0.5)

    def one(key, g):
        out = sim_agent.agent_phase(key, g, g.status, AGENT, params, None, rf, CFG)
        return {k: getattr(out, k) for k in ("index", "draft", "committed", "slip", "event")}

    fn = jax.jit(jax.vmap(jax.vmap(one, in_axes=(0, None))))
    a = fn(jax.random.split(jax.random.key(5), (3, 32)), g)
    b = fn(jax.random.split(jax.random.key(5), (3, 32)), scrambled)
    for name in a:
        np.testing.assert_array_equal(np.asarray(a[name]), np.asarray(b[name]), err_msg=name)


# --- smoke: the hybrid methods with an untrained MPNN ------------------------------------------

SMOKE_METHODS = ("Agent-Replan", "Hybrid-Full", "GILP")


def _smoke(bench_name: str):
    bench = registry.get(bench_name)
    tasks = _tasks(bench_name, 4)
    model = make_backbone("MPNN", jax.random.key(0))
    rows = []
    for name in SMOKE_METHODS:
        run = behaviour_run.run_simulated(name, bench, model, tasks, seeds=(0, 1), root_key=jax.random.key(0))
        assert run.records.active.shape == (8, gilp_config.B_MAX)
        rows += behaviour_run.records_to_events(run)
    for row in rows:
        events.validate_row(row)
    summary = metrics.summarise(rows)
    assert list(summary) == list(SMOKE_METHODS)
    assert all(s["episodes"] == 8 for s in summary.values())
    assert summary["Agent-Replan"]["calls_step"] >= 1.0
    assert summary["GILP"]["calls_step"] >= summary["Hybrid-Full"]["calls_step"]
    return summary


@pytest.mark.slow
@pytest.mark.parametrize("bench_name", gilp_config.BENCHMARKS)
def test_smoke_every_benchmark(bench_name):
    _smoke(bench_name)


def test_traced_flags_and_slot_cuts_give_the_per_method_events():
    """One compiled simulator for several methods (traced flags), with the slot cut, plays the
    same events as a method's own compile on full-size slots. (The flags do not depend on the
    backbone: the cheapest one to compile serves.)"""
    model = make_backbone("MLP", jax.random.key(0))
    root = jax.random.key(5)
    # A method's skeleton k is static: GILP-k1 gets its own compile, not GILP's k = 4.
    k1 = dataclasses.replace(GILP, name="GILP-k1", skeleton_k=1)
    many = behaviour_run.run_simulated_many([k1, "Hybrid-Full", "GILP"], TG, model, TG_TASKS, (0, 1),
                                            root, cfg=CFG)
    alone = behaviour_run.run_simulated("GILP", TG, model, TG_TASKS, (0, 1), root, cfg=CFG, compact=False)
    assert behaviour_run.slot_cut(TG, graph_from_np(TG_TASKS), True) != (gilp_config.N_MAX, gilp_config.A_MAX)
    assert [r.method for r in many] == ["GILP-k1", "Hybrid-Full", "GILP"]  # the order given
    assert behaviour_run.records_to_events(many[2]) == behaviour_run.records_to_events(alone)
    assert behaviour_run.records_to_events(many[1]) != behaviour_run.records_to_events(alone)
    gilp_rows = [{**r, "method": "GILP-k1"} for r in behaviour_run.records_to_events(many[2])]
    assert behaviour_run.records_to_events(many[0]) != gilp_rows


# The static-path sweep below runs by default; this traced-flags one compiles the MPNN
# simulator twice more and runs under -m slow.
@pytest.mark.slow
def test_traced_flags_sweep_equals_run_simulated_many_per_set():
    """A sweep over parameter sets (per-episode SimParams, one compile) equals
    run_simulated_many under each set; a chunk of 32 runs the 3 x 16 episodes in two calls, the
    last one padded."""
    model = make_backbone("MPNN", jax.random.key(0))
    root = jax.random.key(5)
    many = behaviour_run.run_simulated_many(["Hybrid-Full", "GILP"], TG, model, TG_TASKS, (0, 1), root,
                                            cfg=CFG)
    sweep = behaviour_run.run_simulated_sweep(
        ["Hybrid-Full", "GILP"], TG, model, TG_TASKS, (0, 1), root, SWEEP_SETS, CFG, episode_chunk=32
    )
    assert len(sweep) == len(SWEEP_SETS)
    for p, params in enumerate(SWEEP_SETS):
        reference = (
            many
            if p == 0
            else behaviour_run.run_simulated_many(
                ["Hybrid-Full", "GILP"], TG, model, TG_TASKS, (0, 1), root, params, CFG
            )
        )
        for got, want in zip(sweep[p], reference, strict=True):
            _assert_same_run(got, want, f"set {p}")
    _assert_sets_differ([runs[1] for runs in sweep])


# --- parameter sweeps: every set in the same compiled calls, equal to separate runs -----------

SWEEP_SETS = (
    sim_params.SimParams(),
    sim_params.default_params(h0=0.4, c_tg=0.7, eta_ground=0.9),
    sim_params.default_params(q_rec=0.0, t_slip=1.5, h2=0.2, kappa_delta=0.9),
)


def _assert_same_run(got: behaviour_run.SimRun, want: behaviour_run.SimRun, what: str) -> None:
    assert (got.method, got.bench, got.kind) == (want.method, want.bench, want.kind), what
    for name in ("task", "task_index", "seed", "H"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=what)
    assert got.records.active.shape == want.records.active.shape, what
    for name in StepRecord._fields:
        a, b = getattr(got.records, name), getattr(want.records, name)
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), (
            f"{what} ({got.method}): StepRecord.{name} differs"
        )


def _assert_sets_differ(runs: list[behaviour_run.SimRun]) -> None:
    """The sets play different episodes, so a set matched with another's records would fail."""
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            assert not all(
                np.array_equal(a, b, equal_nan=True)
                for a, b in zip(
                    jax.tree_util.tree_leaves(runs[i].records), jax.tree_util.tree_leaves(runs[j].records)
                )
            ), (i, j)


def test_sweep_equals_separate_runs_set_by_set():
    """run_simulated_sweep (Agent-Replan compiled alone, the Oracle run once for all sets) gives
    each set the records of its own run_simulated call, bit for bit. A chunk of 8 splits the
    3 x 6 episodes across set boundaries (and pads the last chunk)."""
    tasks = _tasks("taskgraph", 3)
    root = jax.random.key(0)
    sweep = behaviour_run.run_simulated_sweep(
        ["Agent-Replan", "Oracle"], TG, None, tasks, (0, 1), root, SWEEP_SETS, CFG, episode_chunk=8
    )
    assert len(sweep) == len(SWEEP_SETS)
    assert all([r.method for r in runs] == ["Agent-Replan", "Oracle"] for runs in sweep)
    for p, params in enumerate(SWEEP_SETS):
        for runs_index, name in enumerate(("Agent-Replan", "Oracle")):
            alone = behaviour_run.run_simulated(name, TG, None, tasks, (0, 1), root, params, CFG)
            _assert_same_run(sweep[p][runs_index], alone, f"set {p}")
    _assert_sets_differ([runs[0] for runs in sweep])
