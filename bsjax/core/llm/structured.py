"""One structured-output path for every LLM call: MRA-LLM's revision, the LM-only captain's
action and GILP's phases all go through `LLMClient`.

A `Call` is one system + one user message and the reply's *format*: the JSON Schema of that
call's legal choices (built per call by the caller), `"json"` (any JSON object) or `""` (free
text, the published call shape). The backend enforces the format — the local model decodes under
a llama.cpp grammar, Ollama receives it as structured-output `format`, the uniform policy draws
from it — and the caller's tolerant parser and guards stay behind it as the second line of
defence, counting every fallback by reason.

Replies are cached by the SHA-256 of (backend, model, messages, options, format) (`CallCache`),
so a re-run or a resumed run replays its replies instead of asking again; the format is part of
the key, so the same prompt under another schema is another call. Transport errors are never
cached. `ask_all` schedules a batch of calls over the backend's `parallel` workers; the embedded
model shares its threads among the calls in flight, so two cores are never oversubscribed
(`benchmarks/llm_latency.py` measures the alternatives).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from collections.abc import Callable, Sequence

from bsjax.core.errors import LLMTimeout
from bsjax.core.llm.backends import Completion, LLMError
from bsjax.core.llm.call_cache import CallCache, approx_tokens

FREE = ""            # free text: no constraint
JSON_OBJECT = "json"  # any JSON object


@dataclasses.dataclass(frozen=True)
class Call:
    """One request: messages and the reply's format (a JSON Schema, "json" or "")."""

    system: str
    user: str
    format: dict | str = FREE

    @property
    def messages(self) -> list[dict]:
        return [{"role": "system", "content": self.system},
                {"role": "user", "content": self.user}]


@dataclasses.dataclass(frozen=True)
class Answer:
    """The outcome of one call.

    Attributes:
      text: the reply, or None when the backend failed (`error` says why).
      tokens_in, tokens_out: tokens billed (0 for a failure).
      usage: where the counts came from: `backend`, `tokenizer`, `approx` or `none`.
      latency_s: the backend's seconds for the reply (replayed from the cache on a hit).
      seconds: wall seconds of this ask (near 0 for a cache hit).
      cached: the reply came from the call cache.
      error: "" or what went wrong.
      fault: "" for a reply; else `timeout` (the backend's timeout ran out), `oversized` (a
        reply longer than the call's cap, `reply_cap`) or `transport` (any other failure).
    """

    text: str | None
    tokens_in: int = 0
    tokens_out: int = 0
    usage: str = "none"
    latency_s: float = 0.0
    seconds: float = 0.0
    cached: bool = False
    error: str = ""
    fault: str = ""

    @property
    def ok(self) -> bool:
        return self.text is not None

    def record(self) -> dict:
        """The cached record of a reply."""
        return {"reply": self.text, "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                "usage": self.usage, "latency_s": round(self.latency_s, 4)}


# A reply may be this many times the longest legal reply under its schema (whitespace, key
# order), plus a margin; a call without a schema (the published free call) gets FREE_CAP bytes.
CAP_FACTOR, CAP_MARGIN, FREE_CAP = 4, 1024, 64 * 1024


def longest_reply(schema) -> int:
    """An upper bound on the length in bytes of a compact JSON value `schema` accepts (enums,
    bounded numbers, booleans, objects of those, arrays up to maxItems); free strings count
    their maxLength (or 256)."""
    import json
    if not isinstance(schema, dict):
        return 256
    if "const" in schema:
        return len(json.dumps(schema["const"]))
    if "enum" in schema:
        return max((len(json.dumps(v)) for v in schema["enum"]), default=2)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return max((longest_reply(b) for b in schema[key]), default=2)
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        return 2 + sum(len(json.dumps(k)) + 2 + longest_reply(v) for k, v in properties.items())
    if kind == "array":
        return 2 + int(schema.get("maxItems", 64)) * (longest_reply(schema.get("items", {})) + 2)
    if kind == "integer":
        bounds = [schema.get("minimum", -10**18), schema.get("maximum", 10**18)]
        return max(len(str(int(b))) for b in bounds)
    if kind == "number":
        return 32
    if kind == "boolean":
        return 5
    if kind == "string":
        return 2 + int(schema.get("maxLength", 256)) * 6   # \uXXXX escapes at worst
    return 256


def reply_cap(fmt) -> int:
    """The largest reply accepted for a call of format `fmt` (a JSON Schema, or none)."""
    if isinstance(fmt, dict):
        return CAP_FACTOR * longest_reply(fmt) + CAP_MARGIN
    return FREE_CAP


class LLMClient:
    """A backend, its call cache and the model options sent with every call.

    Args:
      backend: an object with `complete(system, user, options, format) -> Completion`, a `name`
        and a `model` (`bsjax.core.llm.backends`).
      cache: a `CallCache`; None keeps no cache (every call asks the backend).
      options: model options sent with every call (temperature, seed, num_predict, ...).
    """

    def __init__(self, backend, cache: CallCache | None = None, options: dict | None = None):
        self.backend = backend
        self.cache = cache
        self.options = dict(options or {})

    @property
    def name(self) -> str:
        return str(getattr(self.backend, "name", type(self.backend).__name__))

    @property
    def model(self) -> str:
        return str(getattr(self.backend, "model", ""))

    @property
    def parallel(self) -> int:
        return max(1, int(getattr(self.backend, "parallel", 1)))

    def cache_options(self, fmt: dict | str) -> dict:
        """What keys the cache besides the backend, model and messages."""
        return {"options": self.options, "format": fmt}

    def key(self, call: Call) -> str:
        return CallCache.key(self.name, self.model, call.messages, self.cache_options(call.format))

    def _count(self, text: str) -> tuple[int, str]:
        counter = getattr(self.backend, "count_tokens", None)
        if counter is not None:
            try:
                return int(counter(text)), "tokenizer"
            except Exception:  # noqa: BLE001 — fall back to the length rule
                pass
        return approx_tokens(text), "approx"

    def _backend_answer(self, call: Call) -> Answer:
        start = time.perf_counter()
        complete = getattr(self.backend, "complete", None)
        if complete is not None:
            reply = complete(call.system, call.user, self.options or None, call.format)
        else:  # a chat-only backend
            reply = Completion(self.backend.chat(call.system, call.user))
        latency = time.perf_counter() - start
        usage, tokens_in, tokens_out = "backend", reply.tokens_in, reply.tokens_out
        if tokens_in is None:
            tokens_in, usage = self._count(call.system + "\n" + call.user)
        if tokens_out is None:
            tokens_out, usage = self._count(reply.content)
        return Answer(reply.content, int(tokens_in), int(tokens_out), usage, latency, latency)

    def ask(self, call: Call) -> Answer:
        """One call through the cache; never raises (a failure is an Answer with `text=None`)."""
        start = time.perf_counter()
        key = self.key(call) if self.cache is not None else None
        record = self.cache.get(key) if self.cache is not None else None
        if record is not None:
            return Answer(record["reply"], int(record.get("tokens_in", 0)),
                          int(record.get("tokens_out", 0)), record.get("usage", "backend"),
                          float(record.get("latency_s", 0.0)), time.perf_counter() - start, True)
        try:
            answer = self._backend_answer(call)
        except LLMError as err:
            return Answer(None, seconds=time.perf_counter() - start, error=str(err) or "LLMError",
                          fault="timeout" if isinstance(err, LLMTimeout) else "transport")
        except Exception as err:  # noqa: BLE001 — a misbehaving backend must not crash the run
            return Answer(None, seconds=time.perf_counter() - start,
                          error=f"{type(err).__name__}: {err}", fault="transport")
        cap = reply_cap(call.format)
        size = len(answer.text.encode("utf-8"))
        if size > cap:  # never cached, never parsed: a counted fallback
            return Answer(None, seconds=time.perf_counter() - start, fault="oversized",
                          error=f"a reply of {size} bytes, over the cap of {cap}")
        if self.cache is not None:
            self.cache.put(key, answer.record())
        return dataclasses.replace(answer, seconds=time.perf_counter() - start)

    def ask_all(self, calls: Sequence[Call],
                on_answer: Callable[[int, Answer], None] | None = None) -> list[Answer]:
        """Every call of a batch, in order; `on_answer(i, answer)` as each one arrives. Runs on
        the backend's `parallel` workers (one: the calls queue)."""
        answers: list[Answer | None] = [None] * len(calls)

        def one(i: int) -> None:
            answers[i] = self.ask(calls[i])
            if on_answer is not None:
                on_answer(i, answers[i])

        workers = min(self.parallel, len(calls))
        if workers <= 1:
            for i in range(len(calls)):
                one(i)
            return answers
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(one, range(len(calls))))
        return answers


__all__ = ["Answer", "Call", "FREE", "JSON_OBJECT", "LLMClient"]
