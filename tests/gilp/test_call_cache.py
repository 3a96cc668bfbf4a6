"""Token/cost accounting and the content-hash LLM call cache (docs/gilp/spec.md §5.1, §8)."""

from __future__ import annotations

import threading

import pytest

from bsjax.core.llm.call_cache import PRICES, CallCache, Price, approx_tokens, call_key, cost_usd, price_of

MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}]
OPTIONS = {"temperature": 0.0, "seed": 42, "num_predict": 512}


def test_price_table_and_cost():
    assert PRICES["gpt-4o-mini"] == Price(0.15, 0.60)
    assert PRICES["claude-3-haiku"] == Price(0.25, 1.25)
    assert PRICES["gemini-1.5-flash"] == Price(0.075, 0.30)
    assert PRICES["local"] == Price(0.0, 0.0)
    assert cost_usd(1_000_000, 0, "gpt-4o-mini") == pytest.approx(0.15)
    assert cost_usd(0, 1_000_000, "gpt-4o-mini") == pytest.approx(0.60)
    assert cost_usd(2_000, 500, "claude-3-haiku") == pytest.approx((2_000 * 0.25 + 500 * 1.25) / 1e6)
    assert cost_usd(10**9, 10**9, "local") == 0.0
    assert cost_usd(1_000, 1_000, (1.0, 2.0)) == pytest.approx(0.003)
    # $/1k tasks at ~2.85k tokens per task (Table 7, GILP) is of the order of the paper's
    # $1.06 per 1k GILP tasks at GPT-4o-mini prices (Table 8 [rev]).
    assert 0.4 < 1000 * cost_usd(2_400, 450, "gpt-4o-mini") < 1.2
    with pytest.raises(KeyError):
        price_of("gpt-5")


def test_approx_tokens():
    assert approx_tokens("") == 0 and approx_tokens("abcd") == 1 and approx_tokens("abcde") == 2


def test_key_is_content_hash():
    key = call_key("ollama", "m", MESSAGES, OPTIONS)
    assert len(key) == 64 and key == call_key("ollama", "m", MESSAGES, dict(reversed(OPTIONS.items())))
    assert key != call_key("local", "m", MESSAGES, OPTIONS)
    assert key != call_key("ollama", "m2", MESSAGES, OPTIONS)
    assert key != call_key("ollama", "m", MESSAGES[:1], OPTIONS)
    assert key != call_key("ollama", "m", MESSAGES, {**OPTIONS, "seed": 1})
    assert call_key("ollama", "m", MESSAGES, None) == call_key("ollama", "m", MESSAGES, {})
    assert CallCache.key("a", "b", [], None) == call_key("a", "b", [], None)


def test_cache_round_trip_and_reload(tmp_path):
    path = tmp_path / "sub" / "calls.jsonl"
    cache = CallCache(path)
    key = call_key("ollama", "m", MESSAGES, OPTIONS)
    assert cache.get(key) is None and cache.misses == 1
    record = {"reply": '{"selected_action": "execute(node_3)"}', "tokens_in": 812, "tokens_out": 41}
    cache.put(key, record)
    assert key in cache and len(cache) == 1 and cache.get(key) == record and cache.hits == 1
    reloaded = CallCache(path)
    assert reloaded.get(key) == record
    # A later line for the same key wins; a truncated last line is skipped.
    reloaded.put(key, {**record, "tokens_out": 42})
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"key": "abc", "reply": "cut sho')
    again = CallCache(path)
    assert len(again) == 1 and again.get(key)["tokens_out"] == 42
    memory = CallCache()
    memory.put("k", {"reply": "x"})
    assert memory.get("k") == {"reply": "x"} and memory.path is None


def test_get_or_call_calls_once_and_skips_errors(tmp_path):
    cache = CallCache(tmp_path / "calls.jsonl")
    calls = []

    def call():
        calls.append(1)
        return {"reply": "r", "tokens_in": 3, "tokens_out": 1}

    first = cache.get_or_call("local", "gemma", MESSAGES, OPTIONS, call)
    second = cache.get_or_call("local", "gemma", MESSAGES, OPTIONS, call)
    assert first == second and len(calls) == 1

    def broken():
        raise TimeoutError("transport")

    with pytest.raises(TimeoutError):
        cache.get_or_call("local", "gemma", [{"role": "user", "content": "other"}], OPTIONS, broken)
    assert len(CallCache(tmp_path / "calls.jsonl")) == 1


def test_cache_threads(tmp_path):
    cache = CallCache(tmp_path / "calls.jsonl")
    threads = [threading.Thread(target=lambda i=i: cache.put(f"k{i}", {"reply": str(i)}))
               for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(CallCache(tmp_path / "calls.jsonl")) == 16
