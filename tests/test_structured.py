"""The one structured-output path: per-call schemas (revision, LM-only), the uniform policy, the
call cache keyed by the schema and replaying a resumed run, the local model's prompt and prefix
reuse, the Ollama path with the schema enforced by `serve-ollama`, bad LLM flags, and progress."""

from __future__ import annotations

import io
import json
import math
import socket
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from bsjax import cli
from bsjax.battleship.harness.batch import LLMEvent
from bsjax.battleship.harness.experiment import run
from bsjax.battleship.harness.run_config import RunConfig
from bsjax.battleship.llm import revision
from bsjax.core.llm import uniform
from bsjax.core.llm.backends import Completion, UniformBackend
from bsjax.core.llm.call_cache import CallCache
from bsjax.core.llm.local_prompt import split_prompt
from bsjax.core.llm.server import OllamaAPIServer
from bsjax.core.llm.structured import Call, LLMClient
from bsjax.core.progress import GameProgress

# Two games of 32 particles: the shapes of the other suites' small runs (one compile each).
SMALL = dict(sampler="particles", particles=32, boards="B01,B02", seeds=1)


def _preview(coarse, local, late, salvage=16, threshold=0.55):
    return {"revisionKind": "cluster_closeout_bias", "policyMode": "closeout",
            "coarseBudget": coarse, "localBudget": local, "lateBudget": late,
            "salvageStartTurn": salvage, "exploitThreshold": threshold}


# --- the revision schema ------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.tuples(st.integers(0, 12), st.integers(0, 12), st.integers(0, 12)),
       st.integers(0, 2**32 - 1))
def test_every_reply_the_revision_schema_admits_passes_the_guards(budgets, seed):
    preview = _preview(*budgets)
    schema = revision.response_schema(preview)
    caps = [max(schema["properties"][k]["enum"]) for k in revision.BUDGET_KEYS]
    assert sum(caps) <= revision.TOTAL_BUDGET
    if sum(budgets) <= revision.TOTAL_BUDGET:  # the preview itself is always a legal reply
        assert all(b <= c for b, c in zip(budgets, caps))
    # The extreme reply (every cap) and a uniform draw both pass the guards.
    extreme = {"revisionKind": "late_diffuse_reprobe", "salvageStartTurn": 40,
               "exploitThreshold": 1.0, **dict(zip(revision.BUDGET_KEYS, caps))}
    revision.parse_reply(json.dumps(extreme), preview)
    proposal = revision.parse_reply(uniform.reply(seed, "s", "u", schema), preview)
    assert proposal.kind in range(len(revision.KINDS))


def test_revision_schema_shape():
    schema = revision.response_schema(_preview(6, 2, 4))
    props = schema["properties"]
    assert schema["required"] == list(props) and schema["additionalProperties"] is False
    assert props["revisionKind"]["enum"] == list(revision.KINDS)
    assert [max(props[k]["enum"]) for k in revision.BUDGET_KEYS] == [7, 3, 5]
    assert props["salvageStartTurn"]["enum"] == list(range(1, 41))
    assert props["exploitThreshold"]["enum"][:3] == [0.0, 0.05, 0.1]
    assert "policyMode" not in props  # the runtime writes the mode of the chosen kind
    # A preview over the total (the symbolic path does not check it) is scaled under 15.
    assert revision.budget_caps([10, 6, 4]) == (7, 4, 3)


# --- the uniform policy -------------------------------------------------------------------------

def test_uniform_sampler_is_uniform_and_stays_in_the_schema():
    schema = {"type": "object", "required": ["k", "n", "x", "b", "a"],
              "properties": {"k": {"enum": ["a", "b", "c"]},
                             "n": {"type": "integer", "minimum": 2, "maximum": 5},
                             "x": {"type": "number", "minimum": 0, "maximum": 1},
                             "b": {"type": "boolean"},
                             "a": {"type": "array", "maxItems": 2, "items": {"enum": [1, 2]}},
                             "optional": {"type": "string"}}}
    rng = np.random.default_rng(0)
    draws = [uniform.sample(rng, schema) for _ in range(3000)]
    assert all(set(d) == {"k", "n", "x", "b", "a"} for d in draws)
    counts = np.bincount([("a", "b", "c").index(d["k"]) for d in draws], minlength=3)
    # Each of 3 values ~1000 times: a chi-square test at 3000 draws (99.9% quantile, 2 dof).
    assert ((counts - 1000) ** 2 / 1000).sum() < 13.8
    assert {d["n"] for d in draws} == {2, 3, 4, 5} and all(0 <= d["x"] <= 1 for d in draws)
    assert {len(d["a"]) for d in draws} == {0, 1, 2}
    with pytest.raises(uniform.SchemaError):
        uniform.sample(rng, {"type": "integer"})


def test_uniform_backend_is_a_function_of_seed_and_call():
    schema = revision.response_schema(_preview(6, 2, 4))
    one = UniformBackend(seed=3).complete("s", "u", None, schema).content
    assert one == UniformBackend(seed=3).complete("s", "u", None, schema).content
    others = {UniformBackend(seed=s).complete("s", "u", None, schema).content for s in range(20)}
    assert len(others) > 15
    with pytest.raises(Exception, match="JSON Schema"):
        UniformBackend().complete("s", "u", None, "json")


# --- the client: cache keyed by the format ------------------------------------------------------

class _Counting:
    name, model = "counting", "m"

    def __init__(self):
        self.calls = []

    def complete(self, system, user, options=None, format=None):
        self.calls.append(format)
        return Completion('{"action": "shoot A1"}', 10, 3)


def test_cache_key_includes_the_schema_and_replays(tmp_path):
    backend = _Counting()
    client = LLMClient(backend, CallCache(tmp_path / "calls.jsonl"), {"temperature": 0.0})
    first = client.ask(Call("s", "u", {"enum": [1]}))
    again = client.ask(Call("s", "u", {"enum": [1]}))
    other = client.ask(Call("s", "u", {"enum": [2]}))
    assert not first.cached and again.cached and not other.cached
    assert again.text == first.text and (again.tokens_in, again.tokens_out) == (10, 3)
    assert backend.calls == [{"enum": [1]}, {"enum": [2]}]
    reopened = LLMClient(backend, CallCache(tmp_path / "calls.jsonl"), {"temperature": 0.0})
    assert reopened.ask(Call("s", "u", {"enum": [2]})).cached
    assert not reopened.ask(Call("s", "u", "json")).cached
    order = []
    answers = reopened.ask_all([Call("a", "b", "json"), Call("c", "d", "json")],
                               lambda i, a: order.append(i))
    assert order == [0, 1] and all(a.ok for a in answers)


def test_transport_errors_are_answers_not_exceptions_and_are_not_cached(tmp_path):
    from bsjax.core.llm.backends import NoBackend
    client = LLMClient(NoBackend(), CallCache(tmp_path / "calls.jsonl"))
    answer = client.ask(Call("s", "u", {"enum": [1]}))
    assert not answer.ok and "no LLM backend" in answer.error
    assert len(client.cache) == 0


# --- runs: the schema sent, resume replays from the cache ---------------------------------------

def _recording_server(reply: str):
    seen = []

    def responder(system, user, request):
        seen.append(request)
        return reply

    return OllamaAPIServer(responder, with_request=True), seen


def test_b6_schema_call_through_ollama_and_resume_replays_from_the_cache(tmp_path):
    reply = json.dumps({"revisionKind": "late_diffuse_reprobe", "coarseBudget": 5,
                        "localBudget": 2, "lateBudget": 5, "salvageStartTurn": 14,
                        "exploitThreshold": 0.5})
    server, seen = _recording_server(reply)
    cfg = RunConfig(agent="mra-llm", tau=1.0, llm="ollama", llm_timeout=5, **SMALL)
    with server:
        cfg = RunConfig(**{**cfg.__dict__, "llm_host": server.url})
        first = run(cfg, tmp_path / "run")
        assert first["llm_calls"] == len(seen) > 0 and first["fallbacks"] == 0
        assert first["llm_choices"] == {"late_diffuse_reprobe": len(seen)}
        for request in seen:  # each call's own schema as Ollama's structured-output format
            props = request["format"]["properties"]
            assert props["revisionKind"]["enum"] == list(revision.KINDS)
            assert request["options"] == {"temperature": 0.0, "num_predict": 128}
            user = json.loads(request["messages"][1]["content"])  # compact JSON
            assert "\n" not in request["messages"][1]["content"] and "symbolicPreview" in user
        # Interrupt: the last game's row and events are lost; the resume asks no new call.
        out = tmp_path / "run"
        rows = (out / "games.jsonl").read_text().splitlines()
        (out / "games.jsonl").write_text("\n".join(rows[:-1]) + "\n")
        n_before = len(seen)
        resumed = run(cfg, out, resume=True)
    assert len(seen) == n_before and resumed["played_now"] == 1
    assert resumed["llm_cached"] > 0
    keys = ("board", "seed", "shots", "hits", "questions", "f1", "won", "llm_calls")
    again = [json.loads(line) for line in (out / "games.jsonl").read_text().splitlines()]
    assert [[r[k] for k in keys] for r in again] == [[json.loads(r)[k] for k in keys]
                                                     for r in rows]


# --- the embedded model -------------------------------------------------------------------------

def test_gemma_prompt_carries_the_system_text():
    prefix, rest = split_prompt("Be brief.", "Say yes.")
    assert prefix == "<start_of_turn>user\nBe brief.\n\n"
    assert rest == "Say yes.<end_of_turn>\n<start_of_turn>model\n"


def test_local_replies_do_not_depend_on_earlier_calls():
    """The system prefix's KV state is reused, and every call starts from the same state: a
    reply is the same from a fresh model and after other calls."""
    from bsjax.core.llm.backends import LocalBackend
    schema = revision.response_schema(_preview(6, 2, 4))
    user = revision.user_prompt({"turnNumber": 12, "modelConfidence": 0.4},
                                _preview(6, 2, 4), compact=True)
    warm = LocalBackend()
    warm.complete(revision.SCHEMA_SYSTEM_PROMPT, user.replace("12", "30"), None, schema)
    reply = warm.complete(revision.SCHEMA_SYSTEM_PROMPT, user, None, schema)
    assert warm.prefix_reuses >= 1
    fresh = LocalBackend().complete(revision.SCHEMA_SYSTEM_PROMPT, user, None, schema)
    assert reply.content == fresh.content
    revision.parse_reply(reply.content, _preview(6, 2, 4))  # admitted by the schema: valid


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_serve_ollama_enforces_the_schema_for_the_ollama_client(tmp_path):
    """The Ollama client path end to end: the `bsjax serve-ollama` command serves the embedded
    model over HTTP on loopback and decodes under each request's schema; B6 through `--llm
    ollama` gets 0 fallbacks."""
    from bsjax.core.llm.backends import OllamaBackend
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "bsjax.cli", "serve-ollama", "--port",
                               str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        banner = server.stdout.readline()
        assert f"127.0.0.1:{port}" in banner, banner
        url = f"http://127.0.0.1:{port}"
        client = OllamaBackend(host=url, timeout=120, retries=0)
        schema = {"type": "object", "required": ["answer"], "additionalProperties": False,
                  "properties": {"answer": {"type": "string", "enum": ["left", "right"]}}}
        reply = client.complete("Reply in JSON.", "Write a poem about the sea.",
                                {"num_predict": 16}, schema)
        assert json.loads(reply.content)["answer"] in ("left", "right")
        summary = run(RunConfig(agent="mra-llm", tau=1.0, llm="ollama", llm_host=url,
                                llm_timeout=120, **SMALL), tmp_path / "b6")
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert summary["llm_calls"] > 0 and summary["fallbacks"] == 0
    assert summary["llm_fallback_rate"] == 0.0 and sum(summary["llm_choices"].values()) \
        == summary["llm_calls"]


# --- bad LLM flags ------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--llm-host", "::::", "--llm", "ollama"], "--llm-host"),
    (["--llm-host", "http://127.0.0.1:99999", "--llm", "ollama"], "port"),
    (["--llm-host", "http://127.0.0.1:11434"], "is for --llm ollama"),
    (["--model", "", "--llm", "ollama"], "--model"),
    (["--model", "gemma 3", "--llm", "ollama"], "--model"),
    (["--run-seed", "99999999999999999999"], "--run-seed must lie"),
    (["--run-seed", "-1"], "--run-seed must lie"),
    (["--llm", "gpt"], "unknown --llm"),
    (["--llm-format", "yaml"], "unknown --llm-format"),
    (["--llm", "uniform", "--llm-format", "free"], "needs --llm-format schema"),
    (["--llm-timeout", "0"], "--llm-timeout"),
    (["--llm-timeout", "nan"], "--llm-timeout"),
])
def test_bad_llm_flags_are_one_line_and_write_nothing(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    code = cli.main(["play", "--agent", "mra-llm", "--boards", "B01", "--seeds", "1", *argv,
                     "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1
    assert "Traceback" not in err and not out.exists()


# --- progress -----------------------------------------------------------------------------------

def test_progress_reports_llm_calls_while_they_run():
    buffer = io.StringIO()
    progress = GameProgress("B6", delay=0.0, every=0.0,
                            console=Console(file=buffer, force_terminal=False, width=200))
    progress.start(54)
    progress.update(0, turn=7)
    for ok in (True, False, True):
        progress.llm_event(LLMEvent(0, 7, ok, "ok" if ok else "not_json", 0.5, "closeout"))
    progress.stop()
    lines = buffer.getvalue().splitlines()
    assert lines and all(line.startswith("B6: ") for line in lines)
    assert "turn 7" in lines[-1] and "LLM 3 calls" in lines[-1] and "1 fallbacks" in lines[-1]
    rate = float(lines[-1].split("calls (")[1].split("/s")[0])
    assert rate > 0 and math.isfinite(rate)
