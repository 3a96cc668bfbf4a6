"""L4: reply parsing and guards, the Ollama path against a real HTTP server on loopback, faults
that must become counted fallbacks, and τ = 0 equal to MRA with revision off."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bsjax.battleship.harness.experiment import run
from bsjax.battleship.harness.run_config import RunConfig
from bsjax.battleship.llm import revision
from bsjax.core.llm.backends import LLMError, OllamaBackend
from bsjax.core.llm.server import OllamaAPIServer

PREVIEW = {"revisionKind": "cluster_closeout_bias", "policyMode": "closeout", "coarseBudget": 6,
           "localBudget": 2, "lateBudget": 4, "salvageStartTurn": 15, "exploitThreshold": 0.5}


def test_valid_reply_with_defaults_from_the_preview():
    proposal = revision.parse_reply('{"revisionKind": "late_diffuse_reprobe", "lateBudget": 5.4}',
                                    PREVIEW)
    assert proposal.kind == revision.KINDS.index("late_diffuse_reprobe")
    assert proposal.budgets == (6, 2, 5) and proposal.salvage_start_turn == 15
    assert proposal.exploit_threshold == 0.5


def test_json_inside_prose_is_extracted():
    text = 'Sure! {"revisionKind": "coarse_roi_collapse", "coarseBudget": 5} hope this helps'
    assert revision.parse_reply(text, PREVIEW).budgets == (5, 2, 4)


@pytest.mark.parametrize("reply, reason", [
    ("no json here", "not_json"),
    ("[1, 2]", "not_json"),
    ('{"revisionKind": "teleport"}', "unknown_kind"),
    ('{"coarseBudget": 3}', "unknown_kind"),
    ('{"revisionKind": "cluster_closeout_bias", "localBudget": -1}', "out_of_range"),
    ('{"revisionKind": "cluster_closeout_bias", "coarseBudget": 10, "lateBudget": 6}',
     "budget_over_15"),
    ('{"revisionKind": "cluster_closeout_bias", "salvageStartTurn": 41}', "out_of_range"),
    ('{"revisionKind": "cluster_closeout_bias", "exploitThreshold": 1.5}', "out_of_range"),
    ('{"revisionKind": "cluster_closeout_bias", "exploitThreshold": "high"}', "bad_number"),
])
def test_invalid_replies_are_refused_with_a_reason(reply, reason):
    with pytest.raises(revision.InvalidReply) as err:
        revision.parse_reply(reply, PREVIEW)
    assert err.value.reason == reason


def test_ollama_backend_talks_to_a_real_http_server():
    seen = []

    def responder(system, user):
        seen.append((system, json.loads(user)))
        return json.dumps({"revisionKind": "cluster_closeout_bias"})

    with OllamaAPIServer(responder) as server:
        backend = OllamaBackend(host=server.url, model="gemma3:270m", timeout=5, retries=0)
        state = {"turnNumber": 20}
        reply = backend.chat(revision.SYSTEM_PROMPT, revision.user_prompt(state, PREVIEW))
    assert json.loads(reply)["revisionKind"] == "cluster_closeout_bias"
    assert "JSON only" in seen[0][0] and seen[0][1]["symbolicPreview"] == PREVIEW


@pytest.mark.parametrize("responder, timeout", [
    (lambda s, u: (500, "internal error"), 5),
    (lambda s, u: "", 5),
    (lambda s, u: time.sleep(3) or "{}", 0.5),
])
def test_transport_faults_raise_llm_error(responder, timeout):
    with OllamaAPIServer(responder) as server:
        backend = OllamaBackend(host=server.url, timeout=timeout, retries=1)
        with pytest.raises(LLMError):
            backend.chat("s", "u")


def test_closed_port_raises_llm_error():
    with pytest.raises(LLMError):
        OllamaBackend(host="http://127.0.0.1:9", timeout=1, retries=0).chat("s", "u")


# Two games of 32 particles: the shapes of the other suites' small runs (one compile each).
SMALL = dict(sampler="particles", particles=32, boards="B01,B02", seeds=1)


def _rows(out: Path):
    return [json.loads(line) for line in (out / "games.jsonl").read_text().splitlines()]


def test_tau_zero_is_mra_with_revision_off(tmp_path):
    off = run(RunConfig(agent="mra", revision="off", **SMALL), tmp_path / "off")
    llm = run(RunConfig(agent="mra-llm", tau=0.0, llm="none", **SMALL), tmp_path / "llm")
    keys = ("board", "seed", "shots", "hits", "questions", "f1", "won", "turns")
    assert [[r[k] for k in keys] for r in _rows(tmp_path / "off")] == \
           [[r[k] for k in keys] for r in _rows(tmp_path / "llm")]
    assert llm["llm_calls"] == 0 and off["avg_f1"] == llm["avg_f1"]


FAULTS = [  # (reply, the fallback reason it must be counted under; None = a valid reply)
    ("not json at all", "not_json"),
    ('{"revisionKind": "teleport"}', "unknown_kind"),
    ('{"revisionKind": "cluster_closeout_bias", "coarseBudget": 14, "lateBudget": 9}',
     "budget_over_15"),
    ('{"revisionKind": "cluster_closeout_bias", "exploitThreshold": 7}', "out_of_range"),
    ('{"revisionKind": "cluster_closeout_bias", "localBudget": -2}', "out_of_range"),
    ('{"revisionKind": "late_diffuse_reprobe"}', None),
]


def test_every_invalid_reply_becomes_a_counted_fallback_and_the_run_completes(tmp_path):
    served = []
    order = itertools.cycle(range(len(FAULTS)))

    def responder(system, user):
        index = next(order)
        served.append(FAULTS[index][1])
        return FAULTS[index][0]

    with OllamaAPIServer(responder) as server:
        summary = run(RunConfig(agent="mra-llm", tau=1.0, llm="ollama", llm_host=server.url,
                                llm_timeout=5, **SMALL), tmp_path / "run")
    assert summary["games"] == 2
    # HTTP 200 replies are never retried: one served reply per request.
    expected: dict[str, int] = {}
    for reason in served:
        if reason is not None:
            expected[reason] = expected.get(reason, 0) + 1
    assert summary["llm_calls"] == len(served) > 0
    assert summary["fallback_reasons"] == expected
    assert summary["fallbacks"] == sum(expected.values())
    rows = _rows(tmp_path / "run")
    assert sum(r["llm_calls"] for r in rows) == summary["llm_calls"]
    assert sum(r["fallbacks"] for r in rows) == summary["fallbacks"]


@pytest.mark.parametrize("fault", ["closed_port", "http_500", "empty_reply"])
def test_transport_faults_make_every_revision_a_fallback(tmp_path, fault):
    def go(host):
        return run(RunConfig(agent="mra-llm", tau=1.0, llm="ollama", llm_host=host,
                             llm_timeout=2, **SMALL), tmp_path / "run")

    if fault == "closed_port":
        summary = go("http://127.0.0.1:9")
    else:
        reply = (500, "internal error") if fault == "http_500" else ""
        with OllamaAPIServer(lambda s, u: reply) as server:
            summary = go(server.url)
    assert summary["games"] == 2
    assert summary["llm_calls"] > 0 and summary["fallbacks"] == summary["llm_calls"]
    assert summary["fallback_reasons"] == {"transport": summary["llm_calls"]}


def test_local_model_behind_the_ollama_api():
    """The embedded Gemma model served over the Ollama chat API, called by the ollama client."""
    from bsjax.core.llm.backends import LocalBackend
    local = LocalBackend(max_tokens=8)
    direct = local.chat("Answer with one word.", "Say yes.")
    assert isinstance(direct, str) and direct.strip()
    with OllamaAPIServer(local.chat) as server:
        reply = OllamaBackend(host=server.url, timeout=120, retries=0).chat(
            "Answer with one word.", "Say yes.")
    assert reply.strip()


def test_local_model_follows_a_per_call_schema():
    """The llama.cpp grammar built from a call's schema forces a small model's action into that
    call's candidate list (what `gilp real --schema` relies on)."""
    from bsjax.core.llm.backends import LocalBackend
    local = LocalBackend(max_tokens=24)
    schema = {"type": "object", "required": ["selected_action"], "additionalProperties": False,
              "properties": {"selected_action": {"type": "string",
                                                 "enum": ["retry(node_7)", "wait()"]}}}
    reply = local.complete("Reply in JSON.", "Pick an action: fly or swim?", {"num_predict": 24},
                           format=schema)
    assert json.loads(reply.content)["selected_action"] in ("retry(node_7)", "wait()")


RECORDED_REPLIES = Path(__file__).parent / "data" / "local-replies.jsonl"


# The GILP step is the longest call (1,403 prompt tokens, 65 replied): it replays under -m slow.
@pytest.mark.parametrize("callers", [
    ("mra-llm revision", "lm-only captain"),
    pytest.param(("gilp real step",), marks=pytest.mark.slow),
])
def test_local_model_replays_the_recorded_replies(callers):
    """Calls recorded from bsjax's callers (an MRA-LLM revision, two LM-only captain turns, a
    GILP step) with their replies as committed runs made them: the embedded model answers each
    with the same text and token counts, in one process, one call after another (the system
    prefix's KV cells reused)."""
    from bsjax.core.llm.backends import LocalBackend
    local = LocalBackend()
    rows = [json.loads(line) for line in RECORDED_REPLIES.read_text().splitlines()]
    rows = [row for row in rows if row["caller"] in callers]
    assert rows
    for row in rows:
        reply = local.complete(row["system"], row["user"], row["options"], row["format"])
        assert (reply.content, reply.tokens_in, reply.tokens_out) \
            == (row["reply"], row["tokens_in"], row["tokens_out"]), row["caller"]
    if "lm-only captain" in callers:
        assert local.prefix_reuses >= 1  # the two captain turns share their system prefix


def test_local_engine_faults_are_llm_errors_and_the_next_call_recovers(monkeypatch):
    """A prompt longer than the context and a grammar llama.cpp cannot parse surface as LLMError
    (a counted fallback, not a crash); the call after them is answered as from a fresh model."""
    from bsjax.core.llm import gbnf
    from bsjax.core.llm.backends import LocalBackend
    schema = {"type": "object", "required": ["pick"], "additionalProperties": False,
              "properties": {"pick": {"enum": ["fly", "swim"]}}}
    local = LocalBackend(n_ctx=512, max_tokens=12)
    expected = LocalBackend(n_ctx=512, max_tokens=12).complete(
        "Reply in JSON.", "Fly or swim?", None, schema).content
    with pytest.raises(LLMError, match="context"):
        local.complete("Reply in JSON.", "word " * 600, None, schema)
    monkeypatch.setattr(gbnf, "grammar_for", lambda schema: "root ::= undefined-rule")
    with pytest.raises(LLMError, match="llama.cpp"):
        local.complete("Reply in JSON.", "Fly or swim?", None, schema)
    monkeypatch.undo()
    assert local.complete("Reply in JSON.", "Fly or swim?", None, schema).content == expected


def test_local_engine_ignores_proxy_settings(monkeypatch):
    """The engine's loopback port is reached directly even where the environment names an HTTP
    proxy (one that refuses every connection here)."""
    from bsjax.core.llm.backends import LocalBackend
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    assert LocalBackend(n_ctx=256).count_tokens("Fly or swim?") == 4


_DROP_ENGINES = """
import os, sys
os.sched_setaffinity(0, {int(sys.argv[1])})
from bsjax.core.llm.backends import local_model_path
from bsjax.core.llm.local_llama import Engine
for _ in range(2):
    Engine(str(local_model_path()), n_ctx=256, n_threads=1)  # made and dropped, never asked
print("stopped")
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="pins processes to one CPU (Linux)")
def test_an_engine_dropped_as_soon_as_it_is_made_stops():
    """An engine's task loop starts after its constructor returns; one dropped before the loop
    ran would wait for it forever. Made and dropped on a CPU shared with two busy processes
    (which delays the loop's start: without the guard, the second drop never returned), two
    engines stop, in a child process so that a hang is a failure."""
    cpu = min(os.sched_getaffinity(0))
    busy = f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    hogs = [subprocess.Popen([sys.executable, "-c", busy]) for _ in range(2)]
    try:
        child = subprocess.run([sys.executable, "-c", _DROP_ENGINES, str(cpu)],
                               capture_output=True, text=True, timeout=60)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert child.returncode == 0 and child.stdout.strip() == "stopped", child.stderr[-400:]


class _FakeEngine:
    """A stand-in for one llama.cpp engine: records how many threads run at once."""

    running = 0
    peak = 0
    lock = threading.Lock()

    def __init__(self, threads: int, log: list):
        self.threads, self.log = threads, log

    def complete(self, system, user, fmt, max_tokens, temperature=0.0, seed=0):
        cls = _FakeEngine
        with cls.lock:
            cls.running += self.threads
            cls.peak = max(cls.peak, cls.running)
            self.log.append(self.threads)
        time.sleep(0.05)
        with cls.lock:
            cls.running -= self.threads
        return f"reply to {user}", 1, 1


def _scheduled_backend(workers: int):
    """A LocalBackend whose engines are `_FakeEngine`s (the scheduler alone, no model)."""
    from bsjax.core.llm import backends, local_prompt
    log: list[int] = []
    original = local_prompt.PromptModel
    local_prompt.PromptModel = lambda path, n_ctx, threads, verbose: _FakeEngine(threads, log)
    try:
        backend = backends.LocalBackend(model_path="unused.gguf", n_threads=1, workers=workers)
    finally:
        local_prompt.PromptModel = original
    return backend, log


def test_engines_answer_side_by_side_and_never_more_at_once_than_there_are():
    """Calls submitted together run on the free engines side by side, each call on one engine;
    with one engine they queue."""
    from concurrent.futures import ThreadPoolExecutor
    for workers in (1, 2):
        backend, log = _scheduled_backend(workers)
        assert backend.parallel == workers
        _FakeEngine.running = _FakeEngine.peak = 0
        with ThreadPoolExecutor(max_workers=4) as pool:
            replies = list(pool.map(lambda i: backend.complete("s", f"call {i}").content,
                                    range(8)))
        assert replies == [f"reply to call {i}" for i in range(8)]
        assert _FakeEngine.peak == workers and len(log) == 8


def test_a_batch_of_games_gets_two_engines_on_half_the_threads_each(monkeypatch):
    """`make_backend("local", concurrent=True)` (games played in batches): two one-thread
    engines for two threads; one call at a time gets one engine with all of them."""
    from bsjax.core.llm import backends, local_prompt
    monkeypatch.setenv("BSJAX_LLM_THREADS", "2")
    monkeypatch.setattr(backends, "local_model_path", lambda: "unused.gguf")
    monkeypatch.setattr(local_prompt, "PromptModel",
                        lambda path, n_ctx, threads, verbose: _FakeEngine(threads, []))
    batched = backends.make_backend("local", concurrent=True)
    assert [m.threads for m in batched._models] == [1, 1]
    assert [m.threads for m in backends.make_backend("local")._models] == [2]
    monkeypatch.setenv("BSJAX_LLM_THREADS", "1")
    assert [m.threads for m in backends.make_backend("local", concurrent=True)._models] == [1]


def test_the_engine_is_built_without_avx512_or_amx_code():
    """llama.cpp builds that use AVX-512 or AMX crash on some CPUs; the engine's build reports
    the instruction sets it was compiled for (on this CPU too, which may have both)."""
    import xllamacpp
    info = xllamacpp.get_system_info()
    assert "AVX2 = 1" in info
    assert "AVX512" not in info and "AMX" not in info
