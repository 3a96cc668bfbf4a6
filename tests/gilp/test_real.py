"""The real-LLM path of GILP (bsjax.gilp.real.episode, bsjax.gilp.llm.driver) against a scripted Ollama-API
server on loopback (bsjax.core.llm.server): Agent-Replan and GILP episodes, the consistency and risk
gates firing on scripted drafts that contradict a perfect-label backbone, faults becoming counted
fallbacks, the call cache replaying a run byte for byte, token accounting, resume and the T7 task
selection. The embedded local model is not run here (too slow)."""

from __future__ import annotations

import json
import re
import threading
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

from bsjax.core.llm.backends import OllamaBackend
from bsjax.core.llm.call_cache import CallCache
from bsjax.core.llm.server import OllamaAPIServer
from bsjax.gilp import config, events, metrics
from bsjax.gilp.backbones.features import GraphInputs
from bsjax.gilp.backbones.layers import BackboneOut
from bsjax.gilp.envs import common, registry
from bsjax.gilp.llm.driver import GILP_OPTIONS, GilpDriver, make_gilp_backend
from bsjax.gilp.llm.prompts import RESPONSE_SCHEMA
from bsjax.gilp.real import episode as real
from bsjax.gilp.real import runs as real_runs
from bsjax.gilp.real import tasks as real_tasks
from bsjax.gilp.types import Graph

BENCH = "taskgraph"


# --- a perfect-label backbone shim (labels from the true rules; value from d*) ----------------------

def _graph_from_inputs(inputs: GraphInputs) -> Graph:
    x, nmask = inputs.node_x, inputs.nmask
    n = x.shape[0]
    etype = inputs.etype.astype(jnp.int8)
    adj = jnp.isin(etype, jnp.asarray(config.STRUCTURAL_EDGE_TYPES)) & nmask[:, None] & nmask[None, :]
    reach = adj | jnp.diag(nmask)
    for _ in range(5):  # 2^5 > N_MAX: transitive closure by squaring
        reach = reach | ((reach.astype(jnp.int32) @ reach.astype(jnp.int32)) > 0)
    zero = jnp.int32(0)
    return Graph(status=jnp.argmax(x[:, 0:5], -1).astype(jnp.int8),
                 ntype=jnp.argmax(x[:, 5:10], -1).astype(jnp.int8), goal=x[:, 10] > 0.5,
                 attr=x[:, 11:19], etype=etype, anc=reach,
                 hidden=jnp.zeros((n, config.N_HIDDEN), jnp.int8), nmask=nmask, t=zero, budget=zero,
                 horizon=zero)


class PerfectBackbone(eqx.Module):
    """`model(graph_inputs(g), a)` with the true validity, modal delta and ρ* of the rules."""

    bench: object = eqx.field(static=True)

    def __call__(self, inputs: GraphInputs, action) -> BackboneOut:
        g = _graph_from_inputs(inputs)
        b = self.bench
        valid = b.valid(g, action)
        g_next = common.modal(b, g, action)
        delta = jnp.where(valid, common.direction(g.status, g_next.status), 0)
        d_after = b.dstar(g_next)
        done = common.goals_done(g_next)
        risk = jnp.clip(common.rho_star(b, g, action), 1e-3, 1 - 1e-3)
        value = done.astype(jnp.float32) - 0.1 * jnp.minimum(d_after, 30) - 0.05 * ~valid
        sign = lambda c: jnp.where(c, 8.0, -8.0)  # noqa: E731
        return BackboneOut(valid_logit=sign(valid),
                           delta_logits=jax.nn.one_hot(delta + 1, 3) * 16.0 - 8.0,
                           reward=jnp.float32(0.0), done_logit=sign(done),
                           risk_logit=jnp.log(risk) - jnp.log1p(-risk), value=value)


MODEL = PerfectBackbone(registry.get(BENCH))


# --- a scripted TaskGraph agent behind the Ollama API -------------------------------------------------

def _state(user: str) -> list:
    block = user.split("## Current World State\n", 1)[1].split("\n## Goal", 1)[0]
    return json.loads(block)["rows"]  # [id, type, status, goal, in, attrs]


def _good_action(rows) -> tuple[str, int]:
    status = {r[0]: r[2] for r in rows}
    parents = {r[0]: [u for u, _ in r[4]] for r in rows}
    need, stack = set(), [r[0] for r in rows if r[3]]
    while stack:
        v = stack.pop()
        if v not in need:
            need.add(v)
            stack += parents[v]
    for v in sorted(need):
        if status[v] == "failed":
            return "retry", v
    for v in sorted(need):
        if status[v] in ("pending", "active") and all(status[u] == "completed" for u in parents[v]):
            return "execute", v
    return "execute", min(need)


def _reply(action: str, atoms: dict[int, str], confidence: float = 0.8) -> str:
    state = {"changed_nodes": sorted(atoms)} | {f"node_{v}_new_status": s for v, s in atoms.items()}
    return json.dumps({"selected_action": action, "imagined_next_state": state,
                       "reasoning": "scripted", "confidence": confidence})


class ScriptedAgent:
    """Answers every GILP prompt kind. Drafts contradict the backbone by `mode`:
    - `wrong_entity`: a good action, but the claimed change is put on another node (cons = 0);
    - `invalid`: retry of a node that has not failed (invalid, ρ* = 1), claimed active.
    Corrections adopt the backbone's prediction; the risk gate takes alternative 0.
    """

    def __init__(self, mode: str = "wrong_entity", usage: tuple[int, int] | None = None):
        self.mode, self.usage = mode, usage
        self.lock = threading.Lock()
        self.kinds: list[str] = []

    def _answer(self, user: str) -> tuple[str, str]:
        if "## High-Risk Action Warning" in user:
            return "escalate", _reply("0", {})
        if "## Backbone Consistency Check" in user:
            action = re.search(r"Previous action: (\S+)", user).group(1)
            pred = re.search(r"Backbone prediction: (.*)", user).group(1)
            atoms = {int(v): s for v, s in re.findall(r"node_(\d+): (\w+)", pred)}
            return "revise", _reply(action, atoms, 0.9)
        kind = "reparse" if "## Invalid Reply" in user else "draft"
        rows = _state(user)
        name, v = _good_action(rows)
        if self.mode == "invalid":
            target = next(r[0] for r in rows if r[2] != "failed")
            return kind, _reply(f"retry(node_{target})", {target: "active"})
        other = next((r[0] for r in rows if r[0] != v and r[2] == "pending"),
                     next(r[0] for r in rows if r[0] != v))
        return kind, _reply(f"{name}(node_{v})", {other: "completed"})

    def __call__(self, system: str, user: str):
        kind, text = self._answer(user)
        with self.lock:
            self.kinds.append(kind)
        if self.usage is None:
            return text
        return {"content": text, "prompt_eval_count": self.usage[0], "eval_count": self.usage[1]}


# --- fixtures --------------------------------------------------------------------------------------

@pytest.fixture(scope="module", autouse=True)
def _key_reuse_checked():
    """Every episode runs with key-reuse checking (each step's environment key is consumed once);
    module-wide, so the jitted step compiles once."""
    with jax.debug_key_reuse(True):
        yield


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("gilp_work")


@pytest.fixture(scope="module")
def tasks(work):
    return real_tasks.t7_tasks(work, BENCH, n=2, pool=2, val_pool=1)


def _driver(url: str, cache: CallCache | None = None, timeout: float = 5.0) -> GilpDriver:
    return GilpDriver(OllamaBackend(host=url, timeout=timeout, retries=0), cache)


def _run(responder, tasks, methods=("Agent-Replan", "GILP"), out=None, cache=None, cfg=None,
         url=None, timeout=5.0):
    cfg = cfg or real.RealConfig()
    if url is not None:
        driver = _driver(url, cache, timeout)
        rows = [r for t in tasks for m in methods
                for r in real.run_episode(m, t, driver, MODEL, cfg=cfg)[0]]
        return rows, driver
    with OllamaAPIServer(responder) as server:
        driver = _driver(server.url, cache, timeout)
        if out is not None:
            result = real_runs.run_real(out, methods, tasks, driver, MODEL, cfg=cfg)
            return result, driver
        rows = [r for t in tasks for m in methods
                for r in real.run_episode(m, t, driver, MODEL, cfg=cfg)[0]]
    return rows, driver


def _episodes(rows, method):
    return [ep for ep in events.group_episodes(rows) if ep[0]["method"] == method]


# --- tests -----------------------------------------------------------------------------------------

def test_t7_selection_takes_first_tasks_in_range_and_fills_from_val(work):
    picked = real_tasks.t7_tasks(work, BENCH, n=3, pool=2, val_pool=2)
    assert [(t.source, t.index) for t in picked] == [("test_id", 0), ("test_id", 1), ("val", 0)]
    assert all(3 <= t.H <= 8 and t.split == "id" for t in picked)
    assert picked[2].task == config.SPLIT_OFFSET["val"] and picked[0].task == 0
    assert len({(t.split, t.task) for t in picked}) == 3  # a val fill never collides


def test_agent_and_gilp_episodes_correct_the_contradicting_draft(tasks):
    agent = ScriptedAgent("wrong_entity", usage=(1000, 40))
    rows, driver = _run(agent, tasks)
    for row in rows:
        events.validate_row(row)
    agent_eps, gilp_eps = _episodes(rows, "Agent-Replan"), _episodes(rows, "GILP")
    assert len(agent_eps) == len(gilp_eps) == len(tasks)
    agent_rows = [r for ep in agent_eps for r in ep]
    gilp_rows = [r for ep in gilp_eps for r in ep]
    # Agent-Replan: one call per step, no gate fields, every committed claim is hallucinated.
    assert all(r["calls"] == 1 and r["cons"] is None and not r["corrected"] for r in agent_rows)
    assert metrics.hsr(agent_eps)["hsr"] == 1.0
    # GILP: each wrong-entity draft (cons = 0 < τ_low) triggers exactly one correction call,
    # whose revision adopts the backbone's atoms (cons_after = 1, no hallucination).
    assert all(r["corrected"] and r["cons"] == 0.0 and r["cons_after"] == 1.0 for r in gilp_rows)
    assert all(r["calls"] == 2 and sum(r["halluc_committed"]) == 0 for r in gilp_rows)
    assert all(sum(r["halluc_draft"]) == len(r["draft_atoms"]) > 0 for r in gilp_rows)
    assert metrics.hsr(gilp_eps)["hsr"] == 0.0 and metrics.hsr(gilp_eps, "draft")["hsr"] == 1.0
    # The scripted agent picks good actions: both arms solve the tasks.
    assert all(ep[-1]["success"] for ep in agent_eps + gilp_eps)
    # Tokens come from prompt_eval_count / eval_count.
    assert all(r["tok_in"] == 1000 * r["calls"] and r["tok_out"] == 40 * r["calls"] for r in rows)
    assert driver.stats.calls == sum(r["calls"] for r in rows) == len(agent.kinds)
    assert driver.stats.fallbacks == driver.stats.json_failures == 0
    # The PD proxy: an uncorrected false claim stays live while in the window and unrecovered.
    assert any(r["live_atoms"] for r in agent_rows)
    assert all(not r["live_atoms"] for r in gilp_rows)
    assert metrics.propagation_depth(agent_eps)["pd"] > 0


def test_risk_gate_replaces_an_invalid_action(tasks):
    agent = ScriptedAgent("invalid")
    rows, _ = _run(agent, tasks[:1], methods=("GILP",))
    first = rows[0]
    # retry of a non-failed node: the backbone predicts no change (cons = 0) -> correction; the
    # revision agrees (cons_after = 1) but ρ̂ = 1 > ρ_th -> risk gate with L_t, alternative 0.
    assert first["corrected"] and first["cons_after"] == 1.0 and first["rho_hat"] > 0.65
    assert first["risk_fired"] and first["calls"] == 3 and first["valid"]
    assert first["action"].startswith("execute(")
    assert first["draft_atoms"] and first["halluc_draft"] == [1]
    assert agent.kinds[:3] == ["draft", "revise", "escalate"]
    assert rows[-1]["success"]
    # Token accounting without usage fields falls back to ⌈len/4⌉ per call.
    assert all(r["tok_in"] > 100 * r["calls"] for r in rows)


@pytest.mark.parametrize("fault", ["malformed", "http500", "timeout", "closed"])
def test_faults_become_counted_fallbacks(tasks, fault):
    task = tasks[:1]
    cfg = real.RealConfig(wall_cap_s=0.6 if fault == "timeout" else 1800.0)
    if fault == "closed":
        rows, driver = _run(None, task, url="http://127.0.0.1:9", timeout=1.0)
    else:
        responder = {"malformed": lambda s, u: "this is { not json",
                     "http500": lambda s, u: (500, "boom"),
                     "timeout": lambda s, u: time.sleep(0.5) or "{}"}[fault]
        rows, driver = _run(responder, task, cfg=cfg, timeout=0.25)
    for row in rows:
        events.validate_row(row)
    assert all(r["action"] is None and not r["valid"] and r["parse_fail"] for r in rows)
    gilp = [r for r in rows if r["method"] == "GILP"]
    assert all(r["calls"] == 2 for r in gilp)  # the draft and the parse re-prompt
    transport = fault != "malformed"
    assert all(r["fallback"] == transport for r in rows)
    assert driver.stats.fallbacks == (driver.stats.calls if transport else 0)
    assert driver.stats.json_failures == driver.stats.parse_failures == driver.stats.calls
    assert all(r["tok_in"] == 0 for r in rows) if transport else all(r["tok_in"] > 0 for r in rows)
    eps = events.group_episodes(rows)
    assert len(eps) == 2 and all(not ep[-1]["success"] for ep in eps)
    if fault == "timeout":
        assert all(ep[-1]["timeout"] and ep[-1]["done"] for ep in eps)
        assert all(len(ep) < int(task[0].arrays["budget"]) for ep in eps)
    else:
        assert all(len(ep) == int(task[0].arrays["budget"]) for ep in eps)


def test_call_cache_replays_a_run_byte_for_byte_and_resume_skips(tasks, tmp_path):
    cache_path = tmp_path / "calls.jsonl"
    first = ScriptedAgent("wrong_entity", usage=(700, 30))
    result, driver = _run(first, tasks[:1], out=tmp_path / "a", cache=CallCache(cache_path))
    assert result["run"] == 2 and driver.stats.backend_calls == len(first.kinds) > 0
    # A rerun into a new directory from the same cache makes no backend call at all.
    second = ScriptedAgent("wrong_entity", usage=(700, 30))
    result, driver = _run(second, tasks[:1], out=tmp_path / "b", cache=CallCache(cache_path))
    assert second.kinds == [] and driver.stats.backend_calls == 0
    assert driver.stats.cache_hits == driver.stats.calls > 0
    a, b = (tmp_path / d / "events.jsonl" for d in ("a", "b"))
    assert a.read_bytes() == b.read_bytes()
    # Resume: finished episodes are skipped, new ones appended; a torn tail is dropped first.
    with b.open("a") as f:
        f.write('{"method": "GILP", "bench": "taskgr')
    third = ScriptedAgent("wrong_entity", usage=(700, 30))
    result, _ = _run(third, tasks, out=b, cache=CallCache(cache_path))
    assert result["skipped"] == 2 and result["run"] == 2 * (len(tasks) - 1)
    rows = events.read_events(b)
    eps = events.group_episodes(rows)
    assert len(eps) == 2 * len(tasks)
    assert b.read_bytes().startswith(a.read_bytes())
    side = [json.loads(x) for x in (tmp_path / "b" / real_runs.SIDECAR).read_text().splitlines()]
    assert len(side) == 2 * len(tasks) and all(s["calls"] > 0 for s in side)
    summary = real_runs.summarise_real(b)
    assert set(summary) == {"Agent-Replan", "GILP"} and summary["GILP"]["json_fail_rate"] == 0.0


def test_driver_sends_the_gilp_options_and_json_format(tasks):
    """One system + one user message per call, format="json", the §5.1 options; the skeleton only
    in the GILP prompt."""
    agent = ScriptedAgent()
    users = []

    def responder(system, user):
        users.append(user)
        return agent(system, user)

    with OllamaAPIServer(responder) as server:
        backend = OllamaBackend(host=server.url, timeout=5, retries=0)
        sent, original = [], backend._client.chat

        def spy(**kwargs):
            sent.append(kwargs)
            return original(**kwargs)

        backend._client.chat = spy
        driver = GilpDriver(backend)
        rows = real.run_episode("Agent-Replan", tasks[0], driver)[0]
        n_agent = len(users)
        real.run_episode("GILP", tasks[0], driver, MODEL)
    assert sent and all(c["format"] == "json" and c["options"] == GILP_OPTIONS for c in sent)
    assert all([m["role"] for m in c["messages"]] == ["system", "user"] for c in sent)
    assert n_agent == len(rows)
    assert not any("## Parametric World-Model Skeleton" in u for u in users[:n_agent])
    assert all("## Parametric World-Model Skeleton" in u for u in users[n_agent:])


def test_structured_output_schema_is_opt_in():
    """`schema=True` sends the response JSON Schema as Ollama's `format=` and keys the cache."""
    with OllamaAPIServer(lambda system, user: _reply("execute(node_0)", {})) as server:
        plain = make_gilp_backend("ollama", server.url, retries=0)
        strict = make_gilp_backend("ollama", server.url, retries=0, schema=True)
        sent = []
        for backend in (plain, strict):
            original = backend._client.chat
            backend._client.chat = lambda _o=original, **kw: sent.append(kw["format"]) or _o(**kw)
            backend.complete("s", "u", GILP_OPTIONS)
        assert sent == ["json", RESPONSE_SCHEMA]
        keys = {GilpDriver(b)._cache_options()["format"] == RESPONSE_SCHEMA for b in (plain, strict)}
        assert keys == {False, True}


def test_constrained_replies_take_this_calls_candidates(tasks):
    """With `schema=True` every call's schema limits `selected_action` to the candidates of that
    prompt (the risk gate's to its low-risk list) and the imagined state to the real nodes."""
    agent, sent = ScriptedAgent("invalid"), []
    with OllamaAPIServer(agent) as server:
        backend = make_gilp_backend("ollama", server.url, retries=0, schema=True)
        original = backend._client.chat

        def spy(**kwargs):
            sent.append((kwargs["format"], kwargs["messages"][1]["content"]))
            return original(**kwargs)

        backend._client.chat = spy
        driver = GilpDriver(backend)
        rows = [r for m in ("Agent-Replan", "GILP")
                for r in real.run_episode(m, tasks[0], driver, MODEL)[0]]
    assert any(r["risk_fired"] for r in rows) and len(sent) == sum(r["calls"] for r in rows)
    for schema, user in sent:
        props = schema["properties"]
        if "## High-Risk Action Warning" in user:
            offered = re.findall(r"^\d+: (\S+) \[risk", user.split("## High-Risk", 1)[1], re.M)
        else:
            offered = re.findall(r"^\d+: (\S+)$", user.split("## Candidate Actions", 1)[1], re.M)
        assert offered and props["selected_action"]["enum"] == offered
        ids = sorted(row[0] for row in _state(user))
        state = props["imagined_next_state"]
        assert state["properties"]["changed_nodes"]["items"]["enum"] == ids
        assert set(state["properties"]) == {"changed_nodes"} | {f"node_{v}_new_status" for v in ids}
        assert state["additionalProperties"] is False
    # The schema keys the cache: the same prompt under another schema is another call.
    first = driver.cache.key(driver.name, driver.model, [], driver._cache_options(sent[0][0]))
    assert first != driver.cache.key(driver.name, driver.model, [], driver._cache_options())


def test_hybrids_and_ablations_differ_only_by_config(tasks):
    methods = ("Hybrid-DeltaOnly", "Hybrid-Full", "GILP-NoCorrGate", "GILP-tau1", "GILP-tau0",
               "GILP-NoRiskGate")
    rows, _ = _run(ScriptedAgent("wrong_entity"), tasks[:1], methods=methods)
    for row in rows:
        events.validate_row(row)
    by = {m: [r for r in rows if r["method"] == m] for m in methods}
    for m in ("Hybrid-DeltaOnly", "Hybrid-Full"):  # gateless: cons logged passively, 1 call
        assert all(r["calls"] == 1 and r["cons"] == 0.0 and r["rho_eff"] is None
                   and not r["corrected"] and not r["risk_fired"] for r in by[m])
    for m in ("GILP-NoCorrGate", "GILP-tau1"):  # never correct
        assert all(not r["corrected"] and r["cons_after"] is None for r in by[m])
    # tau1 doubles ρ̂ below τ_high; NoCorrGate never does.
    assert all(r["rho_eff"] == r["rho_hat"] for r in by["GILP-NoCorrGate"])
    assert all(r["rho_eff"] == pytest.approx(min(1.0, 2 * r["rho_hat"]), abs=1e-5)
               for r in by["GILP-tau1"])
    assert all(r["corrected"] for r in by["GILP-tau0"] + by["GILP-NoRiskGate"])
    assert not any(r["risk_fired"] for r in by["GILP-NoRiskGate"])


# --- bsjax gilp real ---------------------------------------------------------------------------------

def test_cli_real_runs_resumes_and_writes_table_7(work, tmp_path, capsys):
    from bsjax import cli
    out = tmp_path / "real"
    with OllamaAPIServer(ScriptedAgent()) as server:
        argv = ["gilp", "real", "--bench", f"{BENCH},repairflow", "--tasks", "2",
                "--methods", "Agent-Replan",
                "--llm", "ollama", "--llm-host", server.url, "--work", str(work), "--out",
                str(out), "--json"]
        assert cli.main(argv) == 0
        captured = capsys.readouterr()
        first = json.loads(captured.out.strip().splitlines()[-1])
        # One line per episode above a bar of episodes done (rich, stderr).
        assert captured.err.count("Agent-Replan ") == 4 and "4/4" in captured.err
        lines = (out / "events.jsonl").read_text()
        assert cli.main(argv) == 0                       # resume: every episode is done
        again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        # A resume whose replies would be decoded otherwise is refused, nothing written.
        assert cli.main([*argv, "--schema"]) == 2
        assert "other settings (schema)" in capsys.readouterr().err
    assert (out / "events.jsonl").read_text() == lines
    assert json.loads((out / "run.json").read_text())["schema"] is False
    assert again["methods"] == first["methods"] and set(first["methods"]) == {"Agent-Replan"}
    assert first["by_benchmark"][BENCH]["Agent-Replan"]["n"] == 2
    assert f"| {BENCH} | 2/0 |" in (out / "table_7.md").read_text()   # n agent / n GILP
    # `gilp report` rebuilds the same table and summary from the events alone.
    table = (out / "table_7.md").read_text()
    (out / "table_7.md").unlink()
    assert cli.main(["gilp", "report", str(out), "--json"]) == 0
    reported = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert reported["methods"] == first["methods"]
    assert reported["by_benchmark"] == json.loads(json.dumps(first["by_benchmark"]))
    assert (out / "table_7.md").read_text() == table
    assert json.loads((out / "summary.json").read_text())["methods"] == first["methods"]
    # Task-major across benchmarks: a run stopped part-way covers every benchmark alike.
    starts = [json.loads(r) for r in lines.splitlines()]
    order = [(r["bench"], r["task"]) for r in starts if r["t"] == 0]
    assert [b for b, _ in order] == [BENCH, "repairflow", BENCH, "repairflow"]


@pytest.mark.parametrize("content", ["", '{"not": "an event"}\n'])
def test_cli_report_of_an_unfinished_or_malformed_real_run_is_exit_2(tmp_path, capsys, content):
    from bsjax import cli
    (tmp_path / "events.jsonl").write_text(content)
    assert cli.main(["gilp", "report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("bsjax: error: cannot report") and len(err.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl"]


@pytest.mark.parametrize("flags, expected", [
    ([], True), (["--llm", "ollama"], False), (["--llm", "ollama", "--schema"], True),
    (["--no-schema"], False)])
def test_cli_real_constrains_the_local_model_by_default(flags, expected):
    import argparse

    from bsjax.gilp.cli.real import add_real_arguments, wants_schema
    parser = argparse.ArgumentParser()
    add_real_arguments(parser)
    assert wants_schema(parser.parse_args(["--out", "x", *flags])) is expected


@pytest.mark.parametrize("flags, message", [
    (["--methods", "Oracle"], "not an LLM method: Oracle"),
    (["--methods", "Chess-Master"], "unknown GILP method 'Chess-Master'"),
    (["--methods", "GILP[tau_low=2]"], "bad method variant"),
    (["--bench", "chess"], "unknown benchmark"),
    (["--tasks", "0"], "--tasks must be positive"),
    (["--llm", "gpt9"], "unknown LLM backend"),
    (["--methods", "GILP"], "checkpoint"),          # no trained backbone in the work dir
])
def test_cli_real_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, flags,
                                                                  message):
    from bsjax import cli
    out, work = tmp_path / "out", tmp_path / "w"
    argv = ["gilp", "real", "--bench", BENCH, "--work", str(work), "--out", str(out), *flags]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists() and not work.exists()
