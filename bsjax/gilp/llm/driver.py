"""The real-LLM driver of GILP (docs/gilp/spec.md §5, §5.1): `draft`, `reparse`, `revise` and
`escalate` build the prompts of `gilp_prompts`, call a backend through the shared structured-output
path (`structured.LLMClient`: the per-call format and the content-hash `CallCache`), and parse the
reply with `gilp_parse`.

Every call is one system + one user message at temperature 0, seed 42, at most 512 output tokens,
in JSON mode (Ollama: `format="json"` with `options={"temperature": 0.0, "seed": 42,
"num_predict": 512, "num_ctx": 8192}`; embedded llama.cpp: `n_ctx=8192, seed=42`). A call never
raises: a timeout or transport error (`LLMError`) becomes a *fallback* reply with no action, which
counts as a parse failure; the caller then takes its invalid-action / no-op path.

Token accounting per call: the backend's usage fields (`prompt_eval_count` / `eval_count`, or
llama.cpp's `usage`), else the model's own tokenizer where the backend has one (`count_tokens`),
else `⌈len/4⌉`. A fallback call bills 0 tokens. Replies (not transport errors) are cached by the
SHA-256 of (backend, model, messages, options, format), so a rerun against the same cache file makes no
backend call and replays every reply exactly.

The driver counts calls, backend calls, cache hits, JSON failures (no JSON object in the reply,
or a fallback), parse failures (any reply without a usable action, fallbacks included), fallbacks,
tokens and backend seconds (`DriverStats`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from bsjax.core.llm.backends import LocalBackend, NoBackend, OllamaBackend
from bsjax.core.llm.call_cache import CallCache, cost_usd
from bsjax.core.llm.structured import FREE, JSON_OBJECT, Call, LLMClient
from bsjax.gilp.llm import prompts
from bsjax.gilp.llm.parse import parse_reply

# Spec §5.1 "Backends" (App. A.6).
GILP_OPTIONS = {"temperature": 0.0, "seed": 42, "num_predict": 512, "num_ctx": 8192}
CALL_KINDS = ("draft", "reparse", "revise", "escalate")
JSON_REASONS = ("not_json", "transport")


class LLMReply(NamedTuple):
    """One driver call's outcome (the spec's `Reply` plus bookkeeping).

    Attributes:
      call: `draft`, `reparse`, `revise` or `escalate`.
      action: the selected candidate *slot* (index into the context's `acts`), or None
        (PARSE_FAIL: unparseable, not a candidate, or a fallback).
      atoms: imagined atoms `[(v, status code)]`, status 5 = unknown; no-op claims dropped.
      confidence: in [0, 1].
      tokens_in, tokens_out: tokens billed for the call.
      latency_s: wall seconds of the call (a cache hit is near 0).
      fallback: a timeout / transport error replaced the reply.
      parse_ok: the reply named a usable candidate.
      reason: `ok`, a `gilp_parse` reason (`not_json`, `no_action`, `bad_action`,
        `not_candidate`), or `transport`.
      cached: the reply came from the call cache.
      text: the raw reply ("" for a fallback).
      usage: where the token counts came from: `backend`, `tokenizer`, `approx` or `none`.
    """

    call: str
    action: int | None
    atoms: list
    confidence: float
    tokens_in: int
    tokens_out: int
    latency_s: float
    fallback: bool
    parse_ok: bool
    reason: str
    cached: bool
    text: str = ""
    usage: str = "backend"

    @property
    def parse_fail(self) -> bool:
        return not self.parse_ok

    @property
    def json_fail(self) -> bool:
        """No JSON object could be read (fallbacks included)."""
        return self.fallback or self.reason in JSON_REASONS


class Correction(NamedTuple):
    """What the Phase-3 correction prompt shows (App. A.4).

    Attributes:
      action: the drafted action as rendered.
      imagined: the draft's atoms `[(v, status)]`.
      backbone: the backbone's decoded atoms for that action.
      lines: discrepancy lines from `gate.discrepancies`.
      explain: observable explanation lines from `bench.explain`.
    """

    action: str
    imagined: Sequence
    backbone: Sequence
    lines: Sequence[str]
    explain: Sequence[str] = ()


class RiskAlert(NamedTuple):
    """What the Phase-4 risk-gate prompt shows (App. A.5).

    Attributes:
      action: the selected action as rendered.
      rho: its effective risk ρ_eff.
      explain: observable risk factors.
      slots: candidate slots of the low-risk subset `L_t`, in the order offered.
      alternatives: `(action string, ρ̂)` per slot, same order.
    """

    action: str
    rho: float
    explain: Sequence[str]
    slots: Sequence[int]
    alternatives: Sequence[tuple[str, float]]


@dataclasses.dataclass
class DriverStats:
    """Counters over every call a driver made."""

    calls: int = 0
    backend_calls: int = 0
    cache_hits: int = 0
    json_failures: int = 0
    parse_failures: int = 0
    fallbacks: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    backend_seconds: float = 0.0
    by_call: dict = dataclasses.field(default_factory=lambda: dict.fromkeys(CALL_KINDS, 0))

    def add(self, reply: LLMReply) -> None:
        self.calls += 1
        self.cache_hits += reply.cached
        self.backend_calls += not reply.cached
        self.json_failures += reply.json_fail
        self.parse_failures += reply.parse_fail
        self.fallbacks += reply.fallback
        self.tokens_in += reply.tokens_in
        self.tokens_out += reply.tokens_out
        if not reply.cached:
            self.backend_seconds += reply.latency_s
        self.by_call[reply.call] = self.by_call.get(reply.call, 0) + 1

    def snapshot(self) -> dict:
        out = dataclasses.asdict(self)
        out["by_call"] = dict(self.by_call)
        return out

    def since(self, before: dict) -> dict:
        """Counter differences since a `snapshot()`."""
        now = self.snapshot()
        out = {k: now[k] - before[k] for k in now if k != "by_call"}
        out["by_call"] = {k: now["by_call"].get(k, 0) - before["by_call"].get(k, 0)
                          for k in now["by_call"]}
        return out

    def seconds_per_call(self) -> float | None:
        return self.backend_seconds / self.backend_calls if self.backend_calls else None


def make_gilp_backend(kind: str, host: str | None = None, model: str | None = None,
                      timeout: float = 120.0, retries: int = 1, json_mode: bool = True,
                      model_path: str | None = None, n_threads: int | None = None,
                      schema: bool = False):
    """A backend with the GILP settings of §5.1.

    Args:
      kind: `ollama`, `local` (embedded llama.cpp, the bundled Gemma 3 270M GGUF) or `none`.
      host, model: Ollama server and model name.
      timeout, retries: per-call HTTP timeout (s) and retries (Ollama).
      json_mode: Ollama `format="json"` / llama.cpp `response_format={"type": "json_object"}`
        (grammar-constrained; slower on a CPU). Without it the parser extracts the JSON object.
      model_path: a GGUF file for `local` (default: the bundled model).
      n_threads: llama.cpp threads for `local` (default: the backend's).
      schema: constrain replies by the response JSON Schema (Ollama structured outputs / a
        llama.cpp grammar), built per call by the driver (`gilp_prompts.response_schema`): the
        action one of that call's candidates, the imagined state over the graph's real nodes.
        Off by default (plain JSON mode, §5.1).
    """
    extra = {"schema": prompts.RESPONSE_SCHEMA} if schema else {}
    if kind == "ollama":
        return OllamaBackend(host=host or "http://127.0.0.1:11434", model=model or "gemma3:270m",
                             timeout=timeout, retries=retries, json_mode=json_mode, **extra)
    if kind == "local":
        if n_threads:
            extra["n_threads"] = int(n_threads)
        # One context: GILP's calls come one at a time, each with all the threads.
        extra["workers"] = 1
        return LocalBackend(model_path=model_path, n_ctx=GILP_OPTIONS["num_ctx"],
                            max_tokens=GILP_OPTIONS["num_predict"], seed=GILP_OPTIONS["seed"],
                            json_mode=json_mode, **extra)
    if kind == "none":
        return NoBackend()
    raise ValueError(f"unknown LLM backend {kind!r} (choose from ollama, local, none)")


class GilpDriver:
    """The real-LLM agent of GILP: one backend, one call cache, counters.

    Args:
      backend: an object with `complete(system, user, options, format) -> Completion` (or only
        `chat(system, user) -> str`), a `name` and a `model`.
      cache: a `CallCache` (in memory when None).
      options: model options sent with every call (default `GILP_OPTIONS`).
      price: price row of the backend (`call_cache.PRICES` key or (in, out) per MTok).
    """

    def __init__(self, backend, cache: CallCache | None = None, options: dict | None = None,
                 price="local"):
        self.backend = backend
        self.cache = cache if cache is not None else CallCache()
        self.options = dict(GILP_OPTIONS if options is None else options)
        self.client = LLMClient(backend, self.cache, self.options)
        self.price = price
        self.stats = DriverStats()

    # -- the interface of §5 -----------------------------------------------------------------

    def draft(self, ctx: prompts.PromptContext) -> LLMReply:
        """Phase 2 (or the only call of Agent-Replan / Hybrid): the agent-only prompt when the
        context has no skeleton, else the GILP / Hybrid prompt."""
        return self._ask("draft", ctx, prompts.user_prompt(ctx))

    def reparse(self, ctx: prompts.PromptContext) -> LLMReply:
        """GILP's re-prompt after an unparseable draft (§4.6 step 2)."""
        return self._ask("reparse", ctx, prompts.reparse_prompt(ctx))

    def revise(self, ctx: prompts.PromptContext, discrepancies: Correction) -> LLMReply:
        """Phase 3b: the correction prompt (App. A.4)."""
        c = discrepancies
        return self._ask("revise", ctx, prompts.correction_prompt(ctx, c.action, c.imagined, c.backbone,
                                                            c.lines, c.explain))

    def escalate(self, ctx: prompts.PromptContext, low_risk: RiskAlert) -> LLMReply:
        """Phase 4: the risk-gate prompt offering only `L_t` (App. A.5); the reply must name one
        of them (a bare index refers to that list)."""
        r = low_risk
        user = prompts.risk_prompt(ctx, r.action, r.rho, r.explain, r.alternatives)
        return self._ask("escalate", ctx, user, [a for a, _ in r.alternatives], list(r.slots))

    # -- plumbing -----------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.client.name

    @property
    def model(self) -> str:
        return self.client.model

    @property
    def constrained(self) -> bool:
        """Whether replies are schema-constrained (the backend was made with `schema=True`)."""
        return getattr(self.backend, "schema", None) is not None

    def _format(self, schema: dict | None = None) -> dict | str:
        """This call's reply format: its schema when constrained, else JSON mode or free text."""
        if self.constrained:
            return self.backend.schema if schema is None else schema
        return JSON_OBJECT if getattr(self.backend, "json_mode", False) else FREE

    def _cache_options(self, schema: dict | None = None) -> dict:
        return self.client.cache_options(self._format(schema))

    def complete(self, user: str, system: str = prompts.SYSTEM_PROMPT,
                 schema: dict | None = None) -> tuple[dict | None, bool, float]:
        """One cached call through the shared structured path (`structured.LLMClient`):
        `(record | None on a transport error, cached, seconds)`; `schema` replaces a constrained
        backend's JSON Schema for this call (and keys the cache)."""
        answer = self.client.ask(Call(system, user, self._format(schema)))
        return (answer.record() if answer.ok else None), answer.cached, answer.seconds

    def _ask(self, call: str, ctx: prompts.PromptContext, user: str,
             candidates: list[str] | None = None, slots: list[int] | None = None) -> LLMReply:
        if candidates is None:
            candidates, slots = ctx.candidates()
        schema = None
        if self.constrained:  # this call's candidates and the graph's real nodes
            nodes = np.flatnonzero(np.asarray(ctx.graph["nmask"], bool))
            schema = prompts.response_schema(candidates, nodes.tolist())
        record, cached, seconds = self.complete(user, schema=schema)
        if record is None:
            reply = LLMReply(call, None, [], 0.5, 0, 0, seconds, True, False, "transport", False,
                             "", "none")
        else:
            parsed = parse_reply(record["reply"], candidates, np.asarray(ctx.graph["status"]),
                                 np.asarray(ctx.graph["nmask"], bool))
            action = slots[parsed.action_index] if parsed.action_index is not None else None
            reply = LLMReply(call, action, [(int(v), int(s)) for v, s in parsed.atoms],
                             float(parsed.confidence), int(record["tokens_in"]),
                             int(record["tokens_out"]), seconds, False, parsed.parse_ok,
                             parsed.reason, cached, record["reply"],
                             record.get("usage", "backend"))
        self.stats.add(reply)
        return reply

    def cost(self, tokens_in: int, tokens_out: int, price=None) -> float:
        """USD at this driver's price row (or `price`)."""
        return cost_usd(tokens_in, tokens_out, self.price if price is None else price)


__all__ = ["CALL_KINDS", "Correction", "DriverStats", "GILP_OPTIONS", "GilpDriver", "LLMReply",
           "RiskAlert", "make_gilp_backend"]
