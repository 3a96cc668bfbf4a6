"""The LLM host steps, between jitted turns: MRA-LLM's revision requests and the LM-only
captain's turns.

Both build one `structured.Call` per game that needs the LLM (its JSON Schema from that game's
legal choices), ask them all through the run's `LLMClient` (call cache, scheduling), parse and
guard each reply, and report every call as an `LLMEvent` to an optional monitor (live progress)
as it arrives. A transport error, an invalid reply or a guard failure is a counted fallback:
the symbolic preset for a revision, a random unrevealed cell for the captain. Nothing here can
crash a run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.battleship.agents.mra import apply_revision
from bsjax.battleship.game import questions
from bsjax.battleship.harness.batch import LLMEvent
from bsjax.battleship.llm import revision as revision_lib
from bsjax.battleship.llm.lm_only import LMOnlyCaptain, cell_name
from bsjax.battleship.runtime.record import ReflectiveRecord
from bsjax.core.llm.structured import Answer, Call, LLMClient

Monitor = Callable[[LLMEvent], None]


def _apply_one(presets, record: ReflectiveRecord, cooldown, request, kind, budgets, salvage,
               exploit, valid) -> ReflectiveRecord:
    llm_policy = record.policy.replace(budgets=budgets, salvage_start_turn=salvage,
                                       exploit_threshold=exploit, mode=kind + 1)
    record = apply_revision(presets, record, request & valid, kind, policy=llm_policy,
                            from_llm=True, cooldown=cooldown)
    record = apply_revision(presets, record, request & ~valid, record.next_kind, fallback=True,
                            cooldown=cooldown)
    return record.replace(llm_request=jnp.bool_(False))


@functools.cache
def _batched_apply(presets: tuple):
    """`_apply_one` vmapped over games and jitted once per preset table (not once per host: a
    notebook's second L4 run reuses it)."""
    return jax.jit(jax.vmap(functools.partial(_apply_one, presets)))


def _event(game: int, turn: int, answer: Answer, ok: bool, reason: str, detail: str,
           source: str) -> LLMEvent:
    return LLMEvent(game, turn, ok, reason, answer.seconds, detail, source, answer.cached,
                    answer.tokens_in, answer.tokens_out, answer.latency_s)


class RevisionHost:
    """Answers MRA-LLM's revision requests for a batch.

    Each game's confidence threshold (shown in the prompt) and cooldown come from its params.

    Args:
      client: the run's `LLMClient`.
      presets: the agent's preset table.
      schema: constrain each reply by `revision.response_schema` (else the published free call).
      monitor: called with each call's `LLMEvent` as it arrives.
    """

    def __init__(self, client: LLMClient, presets, schema: bool = True,
                 monitor: Monitor | None = None):
        self.client, self.presets = client, presets
        self.schema, self.monitor = schema, monitor
        self._apply = _batched_apply(presets)

    def call(self, record: dict, tau: float) -> tuple[Call, dict, dict]:
        """One game's request: (call, prompt state, symbolic preview)."""
        state, preview = revision_lib.host_state(record, tau)
        if not self.schema:
            return (Call(revision_lib.SYSTEM_PROMPT, revision_lib.user_prompt(state, preview)),
                    state, preview)
        user = revision_lib.user_prompt(state, preview, compact=True)
        return (Call(revision_lib.SCHEMA_SYSTEM_PROMPT, user,
                     revision_lib.response_schema(preview)), state, preview)

    @staticmethod
    def resolve(game: int, answer: Answer, state: dict, preview: dict):
        """(Proposal or None, LLMEvent) for one answer."""
        turn = state["turnNumber"]
        if not answer.ok:
            return None, _event(game, turn, answer, False, answer.fault or "transport",
                                answer.error[:80], "revision")
        try:
            proposal = revision_lib.parse_reply(answer.text, preview)
        except revision_lib.InvalidReply as err:
            return None, _event(game, turn, answer, False, err.reason, str(err)[:80], "revision")
        return proposal, _event(game, turn, answer, True, "ok",
                                revision_lib.KINDS[proposal.kind], "revision")

    def step(self, carries, params, requests: np.ndarray, turns: np.ndarray,
             questions_left: np.ndarray):
        """Answer every request of the batch (`params`: the games' `MRAParams`, leaves `[G]`);
        returns (new carries, list of LLMEvent)."""
        belief, record = carries
        host, tau = jax.device_get((record, params.tau))
        games = [int(g) for g in np.flatnonzero(requests)]
        confidence = np.maximum(0.0, 1.0 - (host.pred_error_ema + host.calibration_error_ema) / 2)
        requests_of = [self.call({
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
        }, float(tau[g])) for g in games]
        n = requests.shape[0]
        kind = np.zeros(n, np.int32)
        budgets = np.asarray(host.policy.budgets, np.int32).copy()
        salvage = np.asarray(host.policy.salvage_start_turn, np.int32).copy()
        exploit = np.asarray(host.policy.exploit_threshold, np.float32).copy()
        valid = np.zeros(n, bool)
        events: list[LLMEvent | None] = [None] * len(games)

        def arrived(i: int, answer: Answer) -> None:
            game = games[i]
            _, state, preview = requests_of[i]
            proposal, events[i] = self.resolve(game, answer, state, preview)
            if proposal is not None:
                kind[game], budgets[game] = proposal.kind, proposal.budgets
                salvage[game] = proposal.salvage_start_turn
                exploit[game] = proposal.exploit_threshold
                valid[game] = True
            if self.monitor is not None:
                self.monitor(events[i])

        self.client.ask_all([c for c, _, _ in requests_of], arrived)
        record = self._apply(record, params.cooldown, jnp.asarray(requests), jnp.asarray(kind),
                             jnp.asarray(budgets), jnp.asarray(salvage), jnp.asarray(exploit),
                             jnp.asarray(valid))
        return (belief, record), events


class CaptainHost:
    """The LM-only captain's turns for a batch: one call per live game per turn.

    Args:
      client: the run's `LLMClient`.
      reference_rng: fallback cells from the reference's strategy RNG (paper mode).
      case_insensitive: the improved variant's parser.
      schema: constrain each reply to that turn's legal actions (else the published free call).
      monitor: called with each call's `LLMEvent` as it arrives.
    """

    def __init__(self, client: LLMClient, reference_rng: bool = True,
                 case_insensitive: bool = False, schema: bool = True,
                 monitor: Monitor | None = None):
        self.client, self.monitor = client, monitor
        self.options = dict(reference_rng=reference_rng, case_insensitive=case_insensitive,
                            schema=schema)
        self.captain: LMOnlyCaptain | None = None

    def start(self, game_seeds: list[int]) -> None:
        """A new batch: fresh asked sets, Q&A logs and fallback RNGs."""
        self.captain = LMOnlyCaptain(game_seeds, **self.options)

    def decide(self, live: list[int], hits, misses, turns, shots_left, questions_left):
        """Decisions and LLMEvents of the live games (`[G, C]` hits/misses, `[G]` counters)."""
        captain = self.captain
        calls = [captain.call(g, hits[g], misses[g], int(turns[g]), int(shots_left[g]),
                              int(questions_left[g])) for g in live]
        decisions, events = [None] * len(live), [None] * len(live)

        def arrived(i: int, answer: Answer) -> None:
            g = live[i]
            decision = captain.resolve(g, answer, hits[g], misses[g], int(questions_left[g]))
            action = (f"question {questions.CATALOG[decision.question].qid}" if decision.kind else
                      f"shoot {cell_name(decision.cell)}")
            decisions[i] = decision
            events[i] = _event(g, int(turns[g]) + 1, answer, not decision.fallback,
                               decision.reason, action, "captain")
            if self.monitor is not None:
                self.monitor(events[i])

        self.client.ask_all(calls, arrived)
        return decisions, events

    def record_answer(self, game: int, answer: bool) -> None:
        self.captain.record_answer(game, answer)


__all__ = ["CaptainHost", "RevisionHost"]
