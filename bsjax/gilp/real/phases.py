"""One step's LLM phases of the real-LLM loop (docs/gilp/spec.md §4.6 phases 2-4), on the host: the
draft (with GILP's re-prompt after an unparseable one), the Jaccard consistency gate and its
correction call, the risk gate and its escalation call. The gates are the simulator's own
(`planners.gate.consistency_gate` and `risk_gate`, with the method's `MethodFlags`), run on the
host's CPU device; the LLM is called through `GilpDriver`."""

from __future__ import annotations

import contextlib

import jax
import numpy as np

from bsjax.gilp.llm import prompts
from bsjax.gilp.llm.driver import Correction, GilpDriver, LLMReply, RiskAlert
from bsjax.gilp.llm.parse import change_mask, imagined_status
from bsjax.gilp.methods import MethodConfig, method_flags
from bsjax.gilp.planners import gate


@contextlib.contextmanager
def _on_host():
    """Run the pure gate functions on the host CPU device (no accelerator round trip)."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield



def decide(method: MethodConfig, driver: GilpDriver, ctx: prompts.PromptContext, p1: dict,
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
    flags = method_flags(method) if method.gated else None
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
            with _on_host():  # the simulator's gate (`planners.gate`), on this step's values
                phase3 = gate.consistency_gate(flags, cons, used)
            cons_after = float("nan")
            if bool(phase3.issue):
                used += 1
                out["corrected"] = True
                pred = p1["pred_status"][slot]
                lines = gate.discrepancies(imagined_status(status, draft.atoms), pred, s_mask,
                                           p1["changed"][slot])
                backbone_atoms = prompts.changes(status, pred, nmask)
                explain = bench.explain(graph, tuple(int(x) for x in acts[slot]))
                revised = driver.revise(ctx, Correction(prompts.action_str(bench.name, acts[slot]),
                                                        draft.atoms, backbone_atoms, lines,
                                                        explain))
                calls.append(revised)
                if revised.action is not None:
                    final = revised
                slot = final.action
                with _on_host():
                    cons_after = float(gate.jaccard(change_mask(n, final.atoms),
                                                    p1["changed"][slot]))
                out["cons_after"] = cons_after
                out["rho_hat"] = float(p1["risk"][slot])
            with _on_host():
                phase4 = gate.risk_gate(flags, phase3, cons_after, out["rho_hat"], p1["value"],
                                        p1["risk"], p1["p_valid"], p1["amask"], slot,
                                        k=method.skeleton_k)
            rho_eff = float(phase4.rho_eff)
            out["rho_eff"] = rho_eff
            if bool(phase4.high):
                members = [int(a) for a in np.flatnonzero(np.asarray(phase4.subset))]
                members.sort(key=lambda a: (-float(p1["value"][a]), a))
                if members:
                    alert = RiskAlert(prompts.action_str(bench.name, acts[slot]), rho_eff,
                                      bench.explain(graph, tuple(int(x) for x in acts[slot])),
                                      members, [(prompts.action_str(bench.name, acts[a]),
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
