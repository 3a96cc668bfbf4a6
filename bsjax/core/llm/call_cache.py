"""Token and cost accounting and a content-hash call cache for the real-LLM path
(docs/gilp/spec.md §5.1 "Backends", "Token accounting and cost"; §8 "Determinism").

- `PRICES`: USD per million tokens (in, out) for the paper's APIs and local models (§1.2 Table 8).
- `cost_usd(tokens_in, tokens_out, price)`.
- `CallCache`: replies keyed by the SHA-256 of (backend, model, messages, options), stored as JSON
  lines on disk and reloaded on open, so a real-LLM run can be replayed exactly.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from pathlib import Path
from typing import NamedTuple


class Price(NamedTuple):
    """USD per million input and output tokens."""

    p_in: float
    p_out: float


PRICES = {
    "gpt-4o-mini": Price(0.15, 0.60),
    "claude-3-haiku": Price(0.25, 1.25),
    "gemini-1.5-flash": Price(0.075, 0.30),
    "local": Price(0.0, 0.0),
}
REFERENCE_PRICE = "gpt-4o-mini"  # local runs also report cost at these prices (bsjax choice)


def price_of(price: str | Price | tuple[float, float]) -> Price:
    """A `Price` from a `PRICES` key or an (in, out) pair; raises KeyError for an unknown name."""
    if isinstance(price, str):
        return PRICES[price]
    return Price(float(price[0]), float(price[1]))


def cost_usd(tokens_in, tokens_out, price: str | Price | tuple[float, float]) -> float:
    """`(T_in·p_in + T_out·p_out)·10⁻⁶` USD; token counts may be totals over many calls."""
    p = price_of(price)
    return (float(tokens_in) * p.p_in + float(tokens_out) * p.p_out) * 1e-6


def approx_tokens(text: str) -> int:
    """Token count when neither the backend nor a tokenizer gives one: ⌈len/4⌉ (§5.2)."""
    return int(math.ceil(len(text or "") / 4))


def call_key(backend: str, model: str, messages, options: dict | None = None) -> str:
    """SHA-256 hex digest of the canonical JSON of (backend, model, messages, options)."""
    payload = {"backend": backend, "model": model, "messages": messages, "options": options or {}}
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CallCache:
    """Content-hash cache of LLM calls, one JSON object per line: `{"key": ..., **record}`.

    A record is whatever the caller stores (typically `reply`, `tokens_in`, `tokens_out`). With
    `path=None` the cache lives in memory only. Unreadable lines (a write cut short) are skipped on
    load; a later line for the same key wins. Thread-safe.
    """

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._data: dict[str, dict] = {}
        self.hits = 0
        self.misses = 0
        if self.path is not None and self.path.exists():
            self._load()

    def _load(self) -> None:
        with open(self.path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict) and isinstance(row.get("key"), str):
                    key = row.pop("key")
                    self._data[key] = row

    key = staticmethod(call_key)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def get(self, key: str) -> dict | None:
        """The stored record (a copy), or None; counts hits and misses."""
        with self._lock:
            row = self._data.get(key)
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
            return dict(row)

    def put(self, key: str, record: dict) -> None:
        """Store a JSON-serialisable record and append it to the file."""
        line = json.dumps({"key": key, **record}, ensure_ascii=False)
        with self._lock:
            self._data[key] = dict(record)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a", encoding="utf-8") as handle:
                    handle.write(line + "\n")

    def get_or_call(self, backend: str, model: str, messages, options: dict | None, call) -> dict:
        """The cached record for this request, or `call()`'s record, stored first. `call` returns a
        dict; exceptions propagate and nothing is stored (transport errors are not cached)."""
        key = call_key(backend, model, messages, options)
        cached = self.get(key)
        if cached is not None:
            return cached
        record = call()
        self.put(key, record)
        return dict(record)
