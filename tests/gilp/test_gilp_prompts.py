"""GILP prompts and serialisation (docs/gilp/spec.md §4.5, §5.1, App. A/B): golden renders of the three
serialisations and of the agent, GILP/Hybrid, correction and risk-gate prompts on a hand-built
TaskGraph-like and a ResourceAlloc-like graph."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bsjax.gilp import config
from bsjax.gilp.llm import prompts
from bsjax.gilp.llm import serialise as gilp_serialise
from bsjax.gilp.planners import gate
from bsjax.gilp.types import ancestor_closure_np


def taskgraph_graph():
    """0 (completed) -> 1 (pending, d = 2, φ = 1), 0 -> 2 (failed); 1, 2 -> 3 (goal, φ = 2);
    2 -> 4 -> 5 (distractors). Slot 6 is padding."""
    n = 7
    g = {"status": np.array([2, 0, 3, 0, 0, 0, 0], np.int8),
         "ntype": np.zeros(n, np.int8),
         "goal": np.array([0, 0, 0, 1, 0, 0, 0], bool),
         "attr": np.zeros((n, 8), np.float32),
         "etype": np.full((n, n), -1, np.int8),
         "hidden": np.zeros((n, 5), np.int8),
         "nmask": np.array([1, 1, 1, 1, 1, 1, 0], bool)}
    g["attr"][1] = [1, 0.5, 0, 0, 0, 0, 0, 0]
    g["attr"][3, 1] = 1.0
    for u, v in [(0, 1), (0, 2), (1, 3), (2, 3), (2, 4), (4, 5)]:
        g["etype"][u, v] = config.DEPENDS_ON
    return g


def resource_graph():
    """Resource 0 (capacity 2, load 1) runs job 2 and serves goal jobs 3 (pending) and 4 (failed);
    resource 1 is the escalation resource e*. Slot 5 is padding."""
    n = 6
    g = {"status": np.array([1, 0, 1, 0, 3, 0], np.int8),
         "ntype": np.array([2, 2, 3, 3, 3, 0], np.int8),
         "goal": np.array([0, 0, 0, 1, 1, 0], bool),
         "attr": np.zeros((n, 8), np.float32),
         "etype": np.full((n, n), -1, np.int8),
         "hidden": np.zeros((n, 5), np.int8),
         "nmask": np.array([1, 1, 1, 1, 1, 0], bool)}
    g["attr"][0, :2] = [2 / 3, 1 / 3]
    g["attr"][1, :3] = [1 / 3, 0, 1]
    g["etype"][0, 2] = config.ASSIGNED
    g["etype"][0, 3] = config.CAN_SERVE
    g["etype"][0, 4] = config.CAN_SERVE
    return g


TG_ACTS = np.array([[0, 1, -1], [0, 3, -1], [1, 5, -1], [2, 2, -1], [-1, -1, -1]], np.int32)
TG_AMASK = np.array([1, 1, 1, 1, 0], bool)
RA_ACTS = np.array([[0, 0, 3], [0, 1, 4], [1, 0, -1], [2, 4, -1]], np.int32)
RA_AMASK = np.ones(4, bool)


def tg_skeleton(graph):
    """Backbone outputs for the four TaskGraph candidates, rows chosen by `gate.skeleton_rows`
    with k = 2 and Û by `gate.affected_entities`."""
    values = np.array([0.59, 0.2, 0.41, 0.28, 0.0])
    risks = np.array([0.11, 0.35, 0.08, 0.71, 0.0])
    p_valid = np.array([0.88, 0.1, 0.71, 0.4, 0.0])
    pred = np.tile(graph["status"], (5, 1))
    pred[0, 1] = config.ACTIVE      # execute(node_1): pending -> active (duration 2)
    pred[2, 5] = config.SKIPPED     # skip(node_5)
    pred[3, 2] = config.ACTIVE      # retry(node_2): failed -> active
    dirs = (pred != graph["status"][None, :]).astype(np.int8)
    anc = ancestor_closure_np(graph["etype"], graph["nmask"])
    affected, flag = gate.affected_entities(dirs, graph["etype"], graph["goal"], anc, graph["nmask"])
    rows = gate.skeleton_rows(values, risks, TG_AMASK, k=2)
    return prompts.skeleton_from_arrays(graph, "taskgraph", TG_ACTS, np.asarray(rows), p_valid, values,
                                  risks, pred, np.asarray(affected), np.asarray(flag))


def tg_context(**kw):
    graph = taskgraph_graph()
    history = ["t=0: execute(node_0) -> valid; you predicted node_0: completed",
               "t=1: retry(node_2) -> invalid; you predicted node_2: active",
               prompts.history_line(2, "execute(node_2)", True, [(2, config.FAILED)]),
               prompts.history_line(3, None, False, [])]
    return prompts.PromptContext(graph, "taskgraph", TG_ACTS, TG_AMASK, history=history, **kw)


def ra_context(**kw):
    return prompts.PromptContext(resource_graph(), "resourcealloc", RA_ACTS, RA_AMASK, **kw)


def ra_skeleton(graph):
    """Two rows: assign(node_0,node_3) (job 3 starts; resource 0 is already active) and an
    invalid-looking assign(node_1,node_4) with no predicted change."""
    p_valid, values, risks = np.array([0.93, 0.12]), np.array([0.62, 0.1]), np.array([0.05, 0.9])
    pred = np.tile(graph["status"], (2, 1))
    pred[0, 3] = config.ACTIVE
    dirs = (pred != graph["status"][None, :]).astype(np.int8)
    anc = ancestor_closure_np(graph["etype"], graph["nmask"])
    affected, flag = gate.affected_entities(dirs, graph["etype"], graph["goal"], anc, graph["nmask"])
    return prompts.skeleton_from_arrays(graph, "resourcealloc", RA_ACTS, np.array([0, 1, -1]), p_valid,
                                  values, risks, pred, np.asarray(affected), np.asarray(flag))


def lines(*rows: str) -> str:
    return "\n".join(rows)


HEADER = (
    "## Parametric World-Model Skeleton",
    "These predictions come from a small trained world model. Use them to ground the state changes "
    "you imagine, and do not contradict them without explicit reasoning from the state.")

TG_STATE_JSON = (
    '{"columns": ["id","type","status","goal","in","attrs"], "rows": [',
    '[0,"subtask","completed",false,[],{"duration":1,"fragility":"low"}],',
    '[1,"subtask","pending",false,[[0,"depends_on"]],{"duration":2,"fragility":"medium"}],',
    '[2,"subtask","failed",false,[[0,"depends_on"]],{"duration":1,"fragility":"low"}],',
    '[3,"subtask","pending",true,[[1,"depends_on"],[2,"depends_on"]],{"duration":1,"fragility":"high"}],',
    '[4,"subtask","pending",false,[[2,"depends_on"]],{"duration":1,"fragility":"low"}],',
    '[5,"subtask","pending",false,[[4,"depends_on"]],{"duration":1,"fragility":"low"}]',
    ']}')

TG_STATE_MD = (
    "- [x] node_0 (subtask, completed) {duration: 1, fragility: low}",
    "- [ ] node_1 (subtask, pending) needs: node_0 {duration: 2, fragility: medium}",
    "- [ ] node_2 (subtask, failed) needs: node_0 {duration: 1, fragility: low}",
    "- [ ] node_3 (subtask, pending) needs: node_1, node_2 {duration: 1, fragility: high} [GOAL]",
    "- [ ] node_4 (subtask, pending) needs: node_2 {duration: 1, fragility: low}",
    "- [ ] node_5 (subtask, pending) needs: node_4 {duration: 1, fragility: low}")

TG_STATE_NESTED = {"node_0": {
    "type": "subtask", "status": "completed", "goal": False,
    "attrs": {"duration": 1, "fragility": "low"},
    "children": {
        "node_1": {"edge": "depends_on", "type": "subtask", "status": "pending", "goal": False,
                   "attrs": {"duration": 2, "fragility": "medium"},
                   "children": {"node_3": {"edge": "depends_on", "type": "subtask",
                                           "status": "pending", "goal": True,
                                           "attrs": {"duration": 1, "fragility": "high"}}}},
        "node_2": {"edge": "depends_on", "type": "subtask", "status": "failed", "goal": False,
                   "attrs": {"duration": 1, "fragility": "low"},
                   "children": {
                       "node_3": "see above",
                       "node_4": {"edge": "depends_on", "type": "subtask", "status": "pending",
                                  "goal": False, "attrs": {"duration": 1, "fragility": "low"},
                                  "children": {"node_5": {
                                      "edge": "depends_on", "type": "subtask",
                                      "status": "pending", "goal": False,
                                      "attrs": {"duration": 1, "fragility": "low"}}}}}}}}}

RA_STATE_JSON = (
    '{"columns": ["id","type","status","goal","in","attrs"], "rows": [',
    '[0,"resource","active",false,[],{"capacity":2,"load":1,"escalation":false}],',
    '[1,"resource","pending",false,[],{"capacity":1,"load":0,"escalation":true}],',
    '[2,"job","active",false,[[0,"assigned"]],{"home":0,"assigned_to":0}],',
    '[3,"job","pending",true,[[0,"can_serve"]],{"home":0,"assigned_to":null}],',
    '[4,"job","failed",true,[[0,"can_serve"]],{"home":0,"assigned_to":null}]',
    ']}')

RA_STATE_MD = (
    "- [ ] node_0 (resource, active) {capacity: 2, load: 1, escalation: no}",
    "- [ ] node_1 (resource, pending) {capacity: 1, load: 0, escalation: yes}",
    "- [ ] node_2 (job, active) {home: node_0, assigned_to: node_0}",
    "- [ ] node_3 (job, pending) {home: node_0, assigned_to: none} [GOAL]",
    "- [ ] node_4 (job, failed) {home: node_0, assigned_to: none} [GOAL]")

RA_STATE_NESTED = {
    "node_0": {"type": "resource", "status": "active", "goal": False,
               "attrs": {"capacity": 2, "load": 1, "escalation": False},
               "children": {
                   "node_2": {"edge": "assigned", "type": "job", "status": "active", "goal": False,
                              "attrs": {"home": 0, "assigned_to": 0}},
                   "node_3": {"edge": "can_serve", "type": "job", "status": "pending", "goal": True,
                              "attrs": {"home": 0, "assigned_to": None}},
                   "node_4": {"edge": "can_serve", "type": "job", "status": "failed", "goal": True,
                              "attrs": {"home": 0, "assigned_to": None}}}},
    "node_1": {"type": "resource", "status": "pending", "goal": False,
               "attrs": {"capacity": 1, "load": 0, "escalation": True}}}

RESPONSE_FORMAT = (
    "Return JSON with exactly these keys:",
    '"selected_action": one candidate written as in the list, e.g. "execute(node_3)";',
    '"imagined_next_state": {"changed_nodes": [ids], "node_<id>_new_status": "<status>" for each '
    "changed id};",
    '"reasoning": one or two sentences;',
    '"confidence": a number between 0 and 1.',
    "Statuses: pending, active, completed, failed, skipped.")

TG_HISTORY = (
    "## Recent Steps",
    "t=1: retry(node_2) -> invalid; you predicted node_2: active",
    "t=2: execute(node_2) -> valid; you predicted node_2: failed",
    "t=3: no action (unparseable reply) -> invalid; you predicted no change")

TG_CANDIDATES = (
    "## Candidate Actions",
    "You must select exactly one:",
    "0: execute(node_1)",
    "1: execute(node_3)",
    "2: skip(node_5)",
    "3: retry(node_2)")

TG_SKELETON_FULL = HEADER + (
    "execute(node_1): p_valid = 0.88 | value = 0.59 | risk = 0.11",
    "  predicted delta: node_1: pending→active",
    "  affected entities: [node_1, node_3, GOAL]",
    "skip(node_5): p_valid = 0.71 | value = 0.41 | risk = 0.08",
    "  predicted delta: node_5: pending→skipped",
    "  affected entities: [node_5]",
    "retry(node_2): p_valid = 0.40 | value = 0.28 | risk = 0.71 [HIGH RISK]",
    "  predicted delta: node_2: failed→active",
    "  affected entities: [node_2, node_3, node_4, GOAL]",
    "execute(node_3): p_valid = 0.10 | value = 0.20 | risk = 0.35",
    "  predicted delta: no change",
    "  affected entities: []")

RA_HEAD = (("## Current World State",) + RA_STATE_JSON
           + ("## Goal", "Complete all nodes marked [GOAL]. Current progress: 0/2 completed.")
           + HEADER + (
               "assign(node_0,node_3): p_valid = 0.93 | value = 0.62 | risk = 0.05",
               "  predicted delta: node_3: pending→active",
               "  affected entities: [node_3, GOAL]",
               "assign(node_1,node_4): p_valid = 0.12 | value = 0.10 | risk = 0.90 [HIGH RISK]",
               "  predicted delta: no change",
               "  affected entities: []",
               "## Recent Steps",
               "t=0: release(node_0) -> invalid; you predicted node_2: completed"))

RA_CANDIDATES = (
    "## Candidate Actions",
    "You must select exactly one:",
    "0: assign(node_0,node_3)",
    "1: assign(node_1,node_4)",
    "2: release(node_0)",
    "3: escalate(node_4)")


# --- serialisation -----------------------------------------------------------------------------

def test_json_table_golden():
    assert gilp_serialise.serialise(taskgraph_graph()) == lines(*TG_STATE_JSON)
    assert gilp_serialise.serialise(resource_graph(), "json_table") == lines(*RA_STATE_JSON)
    table = json.loads(gilp_serialise.json_table(taskgraph_graph()))
    assert table["columns"] == ["id", "type", "status", "goal", "in", "attrs"]
    assert [row[0] for row in table["rows"]] == [0, 1, 2, 3, 4, 5]


def test_markdown_golden():
    assert gilp_serialise.serialise(taskgraph_graph(), "markdown") == lines(*TG_STATE_MD)
    assert gilp_serialise.serialise(resource_graph(), "markdown") == lines(*RA_STATE_MD)


def test_nested_golden():
    assert gilp_serialise.serialise(taskgraph_graph(), "nested") == json.dumps(TG_STATE_NESTED)
    assert gilp_serialise.serialise(resource_graph(), "nested") == json.dumps(RA_STATE_NESTED)


@pytest.mark.parametrize("fmt", gilp_serialise.FORMATS)
def test_serialisation_ignores_hidden_and_padding(fmt):
    for make in (taskgraph_graph, resource_graph):
        graph = make()
        base = gilp_serialise.serialise(graph, fmt)
        graph["hidden"][:] = 1  # hidden fields are never read
        assert gilp_serialise.serialise(graph, fmt) == base
        n = graph["status"].shape[0]
        padded = {k: np.asarray(v) for k, v in make().items()}
        for key in ("status", "ntype", "goal", "nmask"):
            padded[key] = np.concatenate([padded[key], np.zeros(4, padded[key].dtype)])
        padded["attr"] = np.concatenate([padded["attr"], np.zeros((4, 8), np.float32)])
        etype = np.full((n + 4, n + 4), -1, np.int8)
        etype[:n, :n] = padded["etype"]
        padded["etype"] = etype
        padded.pop("hidden")
        assert gilp_serialise.serialise(padded, fmt) == base


def test_serialise_tool_and_component_attrs():
    n = 3
    graph = {"status": np.array([2, 1, 3], np.int8), "ntype": np.array([1, 1, 4], np.int8),
             "goal": np.array([0, 1, 0], bool), "attr": np.zeros((n, 8), np.float32),
             "etype": np.full((n, n), -1, np.int8), "nmask": np.ones(n, bool)}
    graph["attr"][0, [0, 1]] = [0.0, 1]       # search, flakiness low
    graph["attr"][1, [0, 4]] = [1.0, 1]       # compute, flakiness high
    graph["attr"][2, 0] = 2 / 6               # component depth 2
    graph["etype"][0, 1] = config.DATA_JSON
    graph["etype"][0, 2] = config.PROPAGATES
    assert gilp_serialise.markdown(graph) == lines(
        "- [x] node_0 (tool, completed) {category: search, flakiness: low}",
        "- [ ] node_1 (tool, active) needs: node_0 {category: compute, flakiness: high} [GOAL]",
        "- [ ] node_2 (component, failed) upstream: node_0 {depth: 2}")
    assert json.loads(gilp_serialise.json_table(graph))["rows"][1] == [
        1, "tool", "active", True, [[0, "data_json"]], {"category": "compute", "flakiness": "high"}]
    with pytest.raises(ValueError):
        gilp_serialise.serialise(graph, "yaml")


# --- actions, history ----------------------------------------------------------------------------

def test_action_strings_and_candidates():
    assert prompts.action_str("taskgraph", (0, 3, -1)) == "execute(node_3)"
    assert prompts.action_str("resourcealloc", (0, 2, 7)) == "assign(node_2,node_7)"
    assert prompts.action_str("repairflow", np.array([2, 11, -1])) == "isolate(node_11)"
    names, slots = prompts.candidate_list("resourcealloc", RA_ACTS, np.array([1, 0, 1, 1], bool))
    assert names == ["assign(node_0,node_3)", "release(node_0)", "escalate(node_4)"]
    assert slots == [0, 2, 3]


def test_history_lines_and_progress():
    assert prompts.history_line(4, "execute(node_3)", True, [(3, config.COMPLETED)]) == (
        "t=4: execute(node_3) -> valid; you predicted node_3: completed")
    assert prompts.history_line(5, "skip(node_1)", False, [(1, 4), (2, prompts.UNKNOWN)]) == (
        "t=5: skip(node_1) -> invalid; you predicted node_1: skipped, node_2: unknown")
    graph = taskgraph_graph()
    assert prompts.goal_progress(graph) == (0, 1)
    graph["status"][3] = config.COMPLETED
    assert prompts.goal_progress(graph) == (1, 1)
    assert prompts.changes(np.array([0, 1, 2]), np.array([1, 1, 0]), np.array([1, 1, 0], bool)) == [(0, 1)]


# --- prompts -------------------------------------------------------------------------------------

def test_system_prompt_and_response_format():
    assert prompts.SYSTEM_PROMPT == lines(
        "You are the planning agent for a multi-step task whose world state is a typed graph. "
        "Consider how the candidate actions would change the current state and choose the one "
        "action that moves the task closest to its goal. Reply with a single JSON object and no "
        "other text.",
        "Rules:",
        "- Claim a state change only when the current state, the chosen action, or the backbone "
        "skeleton (if one is given) supports it.",
        "- Never treat a node as completed without evidence, for example satisfied dependencies or "
        "a met precondition.",
        "- If the skeleton flags an action as high-risk, prefer another one unless you can justify "
        "it.")
    assert prompts.RESPONSE_FORMAT == lines(*RESPONSE_FORMAT)
    schema = json.loads(json.dumps(prompts.RESPONSE_SCHEMA))
    assert schema["required"] == ["selected_action", "imagined_next_state", "reasoning",
                                  "confidence"]
    state = schema["properties"]["imagined_next_state"]
    assert state["additionalProperties"]["enum"] == list(config.STATUS_NAMES)
    # Node ids are slots 0..N_MAX-1, at most N_MAX of them (a bounded grammar for small models).
    assert state["properties"]["changed_nodes"] == {
        "type": "array", "maxItems": config.N_MAX,
        "items": {"type": "integer", "minimum": 0, "maximum": config.N_MAX - 1}}


def test_agent_prompt_golden_taskgraph():
    expected = lines(
        "## Current World State", *TG_STATE_JSON,
        "## Goal", "Complete all nodes marked [GOAL]. Current progress: 0/1 completed.",
        *TG_HISTORY, *TG_CANDIDATES,
        "## Required Response Format", *RESPONSE_FORMAT)
    ctx = tg_context()
    assert prompts.agent_prompt(ctx) == expected
    # The agent-only prompt never shows a skeleton, even when one is attached.
    assert prompts.agent_prompt(tg_context(skeleton=tg_skeleton(taskgraph_graph()))) == expected
    assert prompts.user_prompt(ctx) == expected


def test_agent_prompt_golden_resource_markdown():
    expected = lines(
        "## Current World State", *RA_STATE_MD,
        "## Goal", "Complete all nodes marked [GOAL]. Current progress: 0/2 completed.",
        "## Recent Steps", "(none yet)", *RA_CANDIDATES,
        "## Required Response Format", *RESPONSE_FORMAT)
    assert prompts.agent_prompt(ra_context(fmt="markdown")) == expected


def test_gilp_prompt_golden_taskgraph():
    ctx = tg_context(skeleton=tg_skeleton(taskgraph_graph()))
    expected = lines(
        "## Current World State", *TG_STATE_JSON,
        "## Goal", "Complete all nodes marked [GOAL]. Current progress: 0/1 completed.",
        *TG_SKELETON_FULL, *TG_HISTORY, *TG_CANDIDATES,
        "## Required Response Format", *RESPONSE_FORMAT)
    assert prompts.gilp_prompt(ctx) == expected
    assert prompts.user_prompt(ctx) == expected


@pytest.mark.parametrize("fields, rows", [
    ("validity", ("execute(node_1): p_valid = 0.88", "skip(node_5): p_valid = 0.71",
                  "retry(node_2): p_valid = 0.40", "execute(node_3): p_valid = 0.10")),
    ("value", ("execute(node_1): value = 0.59", "skip(node_5): value = 0.41",
               "retry(node_2): value = 0.28", "execute(node_3): value = 0.20")),
    ("risk", ("execute(node_1): risk = 0.11", "skip(node_5): risk = 0.08",
              "retry(node_2): risk = 0.71 [HIGH RISK]", "execute(node_3): risk = 0.35")),
    ("delta", ("execute(node_1):", "  predicted delta: node_1: pending→active",
               "  affected entities: [node_1, node_3, GOAL]",
               "skip(node_5):", "  predicted delta: node_5: pending→skipped",
               "  affected entities: [node_5]",
               "retry(node_2):", "  predicted delta: node_2: failed→active",
               "  affected entities: [node_2, node_3, node_4, GOAL]",
               "execute(node_3):", "  predicted delta: no change", "  affected entities: []")),
    ("full", TG_SKELETON_FULL[2:]),
])
def test_skeleton_variants_golden(fields, rows):
    skeleton = tg_skeleton(taskgraph_graph())
    assert prompts.render_skeleton(skeleton, fields) == lines(*HEADER, *rows)
    ctx = tg_context(skeleton=skeleton, fields=fields)
    assert lines(*HEADER, *rows) in prompts.gilp_prompt(ctx)


def test_method_variants_and_high_risk_threshold():
    assert prompts.METHOD_VARIANT == {"Hybrid-ValidityOnly": "validity", "Hybrid-DeltaOnly": "delta",
                                "Hybrid-RiskOnly": "risk", "Hybrid-ValueOnly": "value",
                                "Hybrid-Full": "full"}
    row = prompts.SkeletonRow("execute(node_1)", 0.5, 0.0, 0.65, (), (), False)
    assert prompts.render_skeleton([row], "risk").endswith("execute(node_1): risk = 0.65")
    assert prompts.render_skeleton([row._replace(risk=0.651)], "risk").endswith("[HIGH RISK]")
    assert prompts.render_skeleton([row._replace(risk=0.5)], "risk", rho_th=0.4).endswith("[HIGH RISK]")
    assert prompts.render_skeleton([row._replace(value=-0.05)], "value").endswith("value = -0.05")


def test_correction_prompt_golden_resource():
    graph = resource_graph()
    ctx = ra_context(skeleton=ra_skeleton(graph),
                     history=[prompts.history_line(0, "release(node_0)", False, [(2, config.COMPLETED)])])
    imagined = np.array([1, 0, 1, config.COMPLETED, 3, 0])
    backbone = np.array([1, 0, 1, config.ACTIVE, 3, 0])
    changed = np.array([0, 0, 0, 1, 0, 0], bool)
    found = gate.discrepancies(imagined, backbone, changed, changed)
    prompt = prompts.correction_prompt(ctx, "assign(node_0,node_3)", [(3, config.COMPLETED)],
                                 [(3, config.ACTIVE)], found, ["resource node_0 is at capacity (2/2)"])
    assert prompt == lines(
        *RA_HEAD, *RA_CANDIDATES,
        "## Backbone Consistency Check FAILED",
        "The state transition you imagined disagrees with the parametric world model. "
        "Please revise it.",
        "Previous action: assign(node_0,node_3)",
        "Your imagined next state: node_3: completed",
        "Backbone prediction: node_3: active",
        "Discrepancies:",
        "- Node 3: backbone predicts active but you imagined completed.",
        "- resource node_0 is at capacity (2/2)",
        "Revise selected_action and/or imagined_next_state so they agree with the backbone. If "
        "you think the backbone is wrong, give explicit reasoning from the state.",
        "## Revised Response Format", *RESPONSE_FORMAT)


def test_correction_block_no_change_and_tau0_agreement():
    block = prompts.correction_block("execute(node_3)", [(3, config.COMPLETED)], [],
                               ["Node 3: backbone predicts pending but you imagined completed."])
    assert "Backbone prediction: no change" in block.splitlines()
    assert block.startswith("## Backbone Consistency Check FAILED")
    assert prompts.correction_block(
        "execute(node_1)", [(1, config.ACTIVE)], [(1, config.ACTIVE)], []
    ) == lines(
        "## Backbone Consistency Check",
        "The parametric world model agrees with the set of nodes you expect to change.",
        "Previous action: execute(node_1)",
        "Your imagined next state: node_1: active",
        "Backbone prediction: node_1: active",
        "Confirm your reply or revise selected_action and/or imagined_next_state.",
    )


def test_risk_prompt_golden_resource():
    graph = resource_graph()
    ctx = ra_context(
        skeleton=ra_skeleton(graph),
        history=[prompts.history_line(0, "release(node_0)", False, [(2, config.COMPLETED)])],
    )
    prompt = prompts.risk_prompt(
        ctx,
        "escalate(node_4)",
        0.7,
        ["node_4 is failed, not pending", "x"],
        [("assign(node_0,node_3)", 0.05), ("release(node_0)", 0.1)],
    )
    assert prompt == lines(
        *RA_HEAD,
        "## High-Risk Action Warning",
        "The parametric world model predicts a high failure risk for your selected action:",
        "- Selected action: escalate(node_4) --- predicted risk = 0.70",
        "- Risk factors: node_4 is failed, not pending; x",
        "Choose one of these lower-risk alternatives instead:",
        "0: assign(node_0,node_3) [risk = 0.05]",
        "1: release(node_0) [risk = 0.10]",
        "## Response Format",
        *RESPONSE_FORMAT,
    )
    assert "## Candidate Actions" not in prompt  # a bare index refers to L_t only
    fallback = prompts.risk_block("retry(node_2)", 1.0, [], [("skip(node_5)", 0.08)])
    assert (
        "- Risk factors: the backbone predicts this action is invalid or likely to fail"
        in fallback.splitlines()
    )


def test_reparse_prompt():
    ctx = tg_context(skeleton=tg_skeleton(taskgraph_graph()))
    prompt = prompts.reparse_prompt(ctx)
    assert prompt.endswith(
        lines(
            *TG_CANDIDATES,
            "## Invalid Reply",
            "Your previous reply was not valid JSON with a selected_action from the candidate list. "
            "Reply again with a single JSON object.",
            "## Required Response Format",
            *RESPONSE_FORMAT,
        )
    )


def test_prompt_formats_switch_serialisation():
    for fmt, state in (("markdown", lines(*TG_STATE_MD)), ("nested", json.dumps(TG_STATE_NESTED))):
        prompt = prompts.agent_prompt(tg_context(fmt=fmt))
        assert prompt.startswith("## Current World State\n" + state + "\n## Goal\n")
