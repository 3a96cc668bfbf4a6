"""The L4 host step: answer the games whose revision gate asked for an LLM, between jitted turns.

For the games that asked, the host builds prompts from host copies of their records, calls the
backend concurrently, parses and guards the replies, and applies the results through one jitted,
vmapped patch: a valid reply becomes an LLM revision; a transport error, an invalid reply or a
guard failure becomes the symbolic preset with a counted fallback. Nothing here can crash a run.
"""

from __future__ import annotations

import concurrent.futures
import time

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.agents.mra import apply_revision
from bsjax.harness.loop import LLMEvent
from bsjax.llm import revision as revision_lib
from bsjax.llm.backends import LLMError
from bsjax.runtime.record import ReflectiveRecord


def _apply_one(presets, record: ReflectiveRecord, request, kind, budgets, salvage, exploit,
               valid) -> ReflectiveRecord:
    llm_policy = record.policy.replace(budgets=budgets, salvage_start_turn=salvage,
                                       exploit_threshold=exploit, mode=kind + 1)
    record = apply_revision(presets, record, request & valid, kind, policy=llm_policy,
                            from_llm=True)
    record = apply_revision(presets, record, request & ~valid, record.next_kind, fallback=True)
    return record.replace(llm_request=jnp.bool_(False))


class RevisionHost:
    """Answers LLM revision requests for a batch. `workers` concurrent calls."""

    def __init__(self, backend, presets, tau: float, workers: int = 4):
        self.backend, self.presets, self.tau = backend, presets, tau
        self.workers = workers
        self._apply = jax.jit(jax.vmap(lambda *args: _apply_one(presets, *args)))

    def _ask(self, game: int, record: dict) -> tuple[int, revision_lib.Proposal | None, LLMEvent]:
        state, preview = revision_lib.host_state(record, self.tau)
        start = time.perf_counter()
        try:
            reply = self.backend.chat(revision_lib.SYSTEM_PROMPT,
                                      revision_lib.user_prompt(state, preview))
            proposal = revision_lib.parse_reply(reply, preview)
            event = LLMEvent(game, state["turnNumber"], True, "ok",
                             time.perf_counter() - start, revision_lib.KINDS[proposal.kind])
            return game, proposal, event
        except LLMError as err:
            reason = "transport"
            detail = str(err)
        except revision_lib.InvalidReply as err:
            reason, detail = err.reason, str(err)
        except Exception as err:  # a misbehaving backend must not crash the run
            reason, detail = "error", f"{type(err).__name__}: {err}"
        return game, None, LLMEvent(game, state["turnNumber"], False, reason,
                                    time.perf_counter() - start, detail[:80])

    def step(self, carries, requests: np.ndarray, turns: np.ndarray, questions_left: np.ndarray):
        """Answer every request of the batch; returns (new carries, list of LLMEvent)."""
        belief, record = carries
        host = jax.device_get(record)
        games = np.flatnonzero(requests)
        confidence = np.maximum(0.0, 1.0 - (host.pred_error_ema + host.calibration_error_ema) / 2)
        records = {int(g): {
            "turn": turns[g], "confidence": confidence[g],
            "pred_error_ema": host.pred_error_ema[g],
            "calibration_error_ema": host.calibration_error_ema[g],
            "frontier_count": host.frontier_count[g], "largest_cluster": host.largest_cluster[g],
            "best_hit_prob": host.best_hit_prob[g],
            "best_question_value": host.best_question_value[g],
            "questions_left": questions_left[g], "policy_mode": host.policy.mode[g],
            "question_mode": host.question_mode[g], "next_kind": host.next_kind[g],
            "preview_budgets": host.preview_policy.budgets[g],
            "preview_salvage_start_turn": host.preview_policy.salvage_start_turn[g],
            "preview_exploit_threshold": host.preview_policy.exploit_threshold[g],
        } for g in games}
        n = requests.shape[0]
        kind = np.zeros(n, np.int32)
        budgets = np.asarray(host.policy.budgets, np.int32).copy()
        salvage = np.asarray(host.policy.salvage_start_turn, np.int32).copy()
        exploit = np.asarray(host.policy.exploit_threshold, np.float32).copy()
        valid = np.zeros(n, bool)
        events = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=self.workers) as pool:
            for game, proposal, event in pool.map(lambda g: self._ask(g, records[g]),
                                                  [int(g) for g in games]):
                events.append(event)
                if proposal is not None:
                    kind[game], budgets[game] = proposal.kind, proposal.budgets
                    salvage[game], exploit[game] = proposal.salvage_start_turn, \
                        proposal.exploit_threshold
                    valid[game] = True
        record = self._apply(record, jnp.asarray(requests), jnp.asarray(kind),
                             jnp.asarray(budgets), jnp.asarray(salvage), jnp.asarray(exploit),
                             jnp.asarray(valid))
        return (belief, record), events
