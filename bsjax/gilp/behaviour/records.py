"""What one simulated step produces, for one episode: the agent side's outcome
(`AgentOutcome`, events 1-4 and 7) and the step's log record (`StepRecord`, docs/gilp/spec.md
§6.1), which `run_events.records_to_events` turns into `bsjax.gilp.events` rows."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class AgentOutcome(NamedTuple):
    """Events 1-4 and 7 of one step of one episode, the agent side (what `agent_phase` returns);
    A candidate slots, N = N_MAX nodes; `[]` unless said.

    Attributes:
      acts: `[A, 3]` int32 the candidate actions; amask: `[A]` bool the real ones.
      index, draft_index: int32 the executed candidate and the draft's.
      draft, revised, committed: `[N]` int8 claims of the draft, of the reply after a
        correction and of the committed output (-1: no claim).
      event: bool a hallucination event fired in the draft; slip: the draft's choice slipped.
      parsed: bool the draft parsed (after GILP's re-prompt); parse_fail: the first draft call
        did not parse; reprompt: GILP re-prompted; fail2: the re-prompt did not parse either.
      corrected, corr_fail: bool a correction call was made; its reply did not parse.
      risk_fired, risk_empty, risk_fail: bool the escalation call was made; the risk gate was
        high with an empty L_t; the escalation reply did not parse.
      cons, cons_after, rho_hat, rho_eff: float32 the gate's values (NaN: none).
      n_rows: int32 skeleton rows shown; live_count: int32 live false beliefs.
      confidence: float32 the draft's confidence ẑ.
    """

    acts: jax.Array
    amask: jax.Array
    index: jax.Array
    draft_index: jax.Array
    draft: jax.Array
    revised: jax.Array
    committed: jax.Array
    event: jax.Array
    slip: jax.Array
    parsed: jax.Array
    parse_fail: jax.Array
    reprompt: jax.Array
    fail2: jax.Array
    corrected: jax.Array
    corr_fail: jax.Array
    risk_fired: jax.Array
    risk_empty: jax.Array
    risk_fail: jax.Array
    cons: jax.Array
    cons_after: jax.Array
    rho_hat: jax.Array
    rho_eff: jax.Array
    n_rows: jax.Array
    live_count: jax.Array
    confidence: jax.Array

    @classmethod
    def oracle(cls, n_nodes: int) -> AgentOutcome:
        """The Oracle's: no call, no claim, no gate."""
        no, none = jnp.bool_(False), jnp.full((n_nodes,), -1, jnp.int8)
        nan = jnp.float32(jnp.nan)
        return cls(acts=jnp.zeros((1, 3), jnp.int32), amask=jnp.zeros((1,), bool),
                   index=jnp.int32(0), draft_index=jnp.int32(0), draft=none, revised=none,
                   committed=none, event=no, slip=no, parsed=jnp.bool_(True), parse_fail=no,
                   reprompt=no, fail2=no, corrected=no, corr_fail=no, risk_fired=no,
                   risk_empty=no, risk_fail=no, cons=nan, cons_after=nan, rho_hat=nan,
                   rho_eff=nan, n_rows=jnp.int32(0), live_count=jnp.int32(0), confidence=nan)


class StepRecord(NamedTuple):
    """What one step logs (spec §6.1), for one episode; N = N_MAX. NaN marks a null float.

    Attributes:
      active: `[]` bool the step was executed (False for the masked steps after the end).
      t: `[]` int32 0-based step index.
      action: `[3]` int32 executed action; (-1, -1, -1) for a parse-failure no-op.
      noop: `[]` bool no action (unparseable reply).
      valid: `[]` bool the executed action was valid.
      calls, tok_in, tok_out: `[]` int32 LLM calls and tokens of the step.
      draft, committed: `[N]` int8 claims of the Phase-2 draft and of the committed output.
      halluc_draft, halluc_committed: `[N]` bool the claim is outside the true support.
      stochastic_miss: `[N]` bool a committed claim matched the success branch but the failure
        branch was realised.
      cons, cons_after: `[]` float32 Jaccard consistency of the draft / revised reply (NaN: none).
      corrected: `[]` bool a correction call was made.
      rho_hat, rho_eff: `[]` float32 backbone risk of the selected action, after gating (NaN: none).
      risk_fired, risk_gate_empty: `[]` bool the risk-gate call was made / L_t was empty.
      rho_star: `[]` float32 true risk ρ*(G_t, a_t).
      bad_outcome: `[]` bool invalid ∨ failure branch ∨ d* increased.
      live_false: `[]` int32 |F_t| at the step's start (-1: no belief).
      live: `[N]` int8 the believed status of each live false atom at the step's start, else -1.
      parse_fail: `[]` bool some call of the step returned an unparseable reply.
      done, success, dead_end: `[]` bool episode end flags after the step.
      halluc_event: `[]` bool a hallucination event fired in the draft.
      slip: `[]` bool the draft's choice slipped.
      confidence: `[]` float32 the draft's confidence ẑ (logged, unused).
    """

    active: jax.Array
    t: jax.Array
    action: jax.Array
    noop: jax.Array
    valid: jax.Array
    calls: jax.Array
    tok_in: jax.Array
    tok_out: jax.Array
    draft: jax.Array
    committed: jax.Array
    halluc_draft: jax.Array
    halluc_committed: jax.Array
    stochastic_miss: jax.Array
    cons: jax.Array
    cons_after: jax.Array
    corrected: jax.Array
    rho_hat: jax.Array
    rho_eff: jax.Array
    risk_fired: jax.Array
    risk_gate_empty: jax.Array
    rho_star: jax.Array
    bad_outcome: jax.Array
    live_false: jax.Array
    live: jax.Array
    parse_fail: jax.Array
    done: jax.Array
    success: jax.Array
    dead_end: jax.Array
    halluc_event: jax.Array
    slip: jax.Array
    confidence: jax.Array


__all__ = ["AgentOutcome", "StepRecord"]
