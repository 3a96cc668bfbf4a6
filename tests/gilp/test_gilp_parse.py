"""The tolerant GILP reply parser (docs/gilp/spec.md §5.1 "Parsing"): malformed replies, fenced blocks,
trailing prose, synonyms, bare indices, out-of-list actions, nested maps, confidence clipping, and
a fuzz check that it never raises."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bsjax.gilp import config
from bsjax.gilp.llm.parse import (
    UNKNOWN,
    Reply,
    canonical_action,
    change_mask,
    imagined_status,
    load_object,
    parse_reply,
    parse_status,
)

CANDIDATES = ["execute(node_1)", "execute(node_3)", "skip(node_5)", "retry(node_2)"]
RA_CANDIDATES = ["assign(node_0,node_3)", "assign(node_1,node_4)", "release(node_0)",
                 "escalate(node_4)"]
STATUS = np.array([2, 0, 3, 0, 0, 0, 0], np.int8)   # node 6 is padding
NMASK = np.array([1, 1, 1, 1, 1, 1, 0], bool)


def reply(obj, **kw) -> str:
    return json.dumps(obj, **kw)


def parse(text, candidates=CANDIDATES, **kw):
    return parse_reply(text, candidates, kw.pop("status", STATUS), kw.pop("nmask", NMASK))


def test_clean_reply():
    text = reply({"selected_action": "execute(node_3)",
                  "imagined_next_state": {"changed_nodes": [3], "node_3_new_status": "completed"},
                  "reasoning": "deps done", "confidence": 0.8})
    out = parse(text)
    assert out == Reply(1, [(3, config.COMPLETED)], 0.8, True, "ok", 0)


@pytest.mark.parametrize("text", [
    'Here is my answer:\n```json\n{"selected_action": "skip(node_5)", "confidence": 0.4}\n```\nDone.',
    '```\n{"selected_action": "skip(node_5)", "confidence": 0.4}\n```',
    '```JSON {"selected_action": "skip(node_5)", "confidence": 0.4}```',
    'Sure! {"selected_action": "skip(node_5)", "confidence": 0.4} Hope this helps.',
    '{"selected_action": "skip(node_5)",\n "confidence": 0.4}\n\nI chose to skip the distractor.',
    # A raw newline inside a string (Gemma 3 270M writes them; strict JSON forbids them).
    '{"selected_action": "skip(node_5)", "reasoning": "one or two sentences;\n" ,"confidence": 0.4}',
])
def test_extraction(text):
    out = parse(text)
    assert (out.action_index, out.confidence, out.parse_ok, out.reason) == (2, 0.4, True, "ok")


def test_first_fenced_block_wins():
    text = ('```json\n{"selected_action": "execute(node_1)"}\n```\nor maybe\n'
            '```json\n{"selected_action": "skip(node_5)"}\n```')
    assert parse(text).action_index == 0


@pytest.mark.parametrize("text", ["", "   ", "not json at all", "{", "}{", '{"selected_action": ',
                                  "[1, 2, 3]", '"execute(node_3)"', "null", "```json\n```",
                                  "{'selected_action': 'execute(node_3)'}", None, 17])
def test_malformed_is_parse_fail(text):
    out = parse(text)
    assert out.action_index is None and not out.parse_ok
    assert out.reason == "not_json" and out.atoms == [] and out.confidence == 0.5


def test_missing_and_bad_action():
    out = parse(reply({"imagined_next_state": {"changed_nodes": [1]}}))
    assert (out.action_index, out.parse_ok, out.reason) == (None, False, "no_action")
    assert out.atoms == [(1, UNKNOWN)]  # atoms are still read for the record
    for bad in ({"x": 1}, ["execute(node_1)"], True, "execute node 3", "execute(3)", ""):
        out = parse(reply({"selected_action": bad}))
        assert out.action_index is None and out.reason == "bad_action", bad


@pytest.mark.parametrize("action", ["retry(node_1)", "execute(node_9)", "isolate(node_1)",
                                    "execute(node_1,node_2)", "assign(node_0,node_3)"])
def test_out_of_list_action(action):
    out = parse(reply({"selected_action": action, "confidence": 0.9}))
    assert (out.action_index, out.parse_ok, out.reason) == (None, False, "not_candidate")
    assert out.confidence == 0.9


@pytest.mark.parametrize("action, index", [
    ("execute(node_3)", 1), ("EXECUTE(NODE_3)", 1), ("Execute( node3 )", 1), (" skip(node_5) ", 2),
    ("`retry(node_2)`", 3), ("2: skip(node_5)", 2), ("1. execute(node_3)", 1),
    (0, 0), (3, 3), ("3", 3), (" 2 ", 2), (1.0, 1), (4, None), (-1, None), ("7", None),
])
def test_action_forms_and_bare_indices(action, index):
    out = parse(reply({"selected_action": action}))
    assert out.action_index == index
    assert out.parse_ok == (index is not None)


def test_two_argument_actions():
    for text, index in (("assign(node_1,node_4)", 1), ("assign(node_1, node_4)", 1),
                        ("Assign(node1 , node4)", 1), ("assign(node_4,node_1)", None),
                        ("release(node_0)", 2)):
        assert parse(reply({"selected_action": text}), RA_CANDIDATES).action_index == index
    assert canonical_action("assign( node_2 ,node_7 )") == "assign(node_2,node_7)"
    assert canonical_action("assign(node_2)") == "assign(node_2)"
    assert canonical_action("assign(node_2,)") is None


@pytest.mark.parametrize(
    "word, code",
    [
        ("completed", config.COMPLETED),
        ("done", config.COMPLETED),
        ("complete", config.COMPLETED),
        ("finished", config.COMPLETED),
        ("Done", config.COMPLETED),
        ("running", config.ACTIVE),
        ("in_progress", config.ACTIVE),
        ("in progress", config.ACTIVE),
        ("In-Progress", config.ACTIVE),
        ("started", config.ACTIVE),
        ("active", config.ACTIVE),
        ("error", config.FAILED),
        ("failed", config.FAILED),
        ("skip", config.SKIPPED),
        ("skipped", config.SKIPPED),
        ("waiting", config.PENDING),
        ("pending", config.PENDING),
        (" PENDING ", config.PENDING),
        ("unknown", UNKNOWN),
        ("blocked", UNKNOWN),
        ("", UNKNOWN),
        (None, UNKNOWN),
        (3, UNKNOWN),
    ],
)
def test_status_synonyms(word, code):
    assert parse_status(word) == code


def test_atoms_from_all_sources():
    state = {
        "changed_nodes": [1, "node_4", "5", {"id": 2, "new_status": "running"}],
        "node_1_new_status": "running",
        "NODE_3_NEW_STATUS": "done",
        "new_status": {"4": "complete", "node_5": "error"},
    }
    out = parse(reply({"selected_action": 0, "imagined_next_state": state}))
    assert out.atoms == [
        (1, config.ACTIVE),
        (2, config.ACTIVE),
        (3, config.COMPLETED),
        (4, config.COMPLETED),
        (5, config.FAILED),
    ]


def test_changed_node_without_status_is_unknown():
    out = parse(
        reply(
            {
                "selected_action": 0,
                "imagined_next_state": {"changed_nodes": [3, 4], "node_4_new_status": "??"},
            }
        )
    )
    assert out.atoms == [(3, UNKNOWN), (4, UNKNOWN)]
    out = parse(reply({"selected_action": 0, "imagined_next_state": [1, "node_3"]}))
    assert out.atoms == [(1, UNKNOWN), (3, UNKNOWN)]


def test_no_op_atoms_dropped_and_bad_ids():
    state = {
        "changed_nodes": [0, 1, 6, 9, -2],
        "node_0_new_status": "completed",  # 0 already is
        "node_1_new_status": "pending",
        "node_2_new_status": "failed",  # no-ops
        "node_3_new_status": "active",
        "node_6_new_status": "active",
    }  # 6 is padding
    out = parse(reply({"selected_action": 0, "imagined_next_state": state}))
    assert out.atoms == [(3, config.ACTIVE)]
    assert out.dropped == 3  # node 6 (padding), node 9 and node -2 (no such nodes)
    # Without the current state nothing is filtered.
    out = parse_reply(reply({"selected_action": 0, "imagined_next_state": state}), CANDIDATES)
    assert [v for v, _ in out.atoms] == [0, 1, 2, 3, 6, 9]


def test_imagined_state_not_an_object():
    for state in ("node_3 completes", 7, None, {"changed_nodes": "node_3"}):
        out = parse(reply({"selected_action": 1, "imagined_next_state": state}))
        assert out.parse_ok
    out = parse(reply({"selected_action": 1, "imagined_next_state": {"changed_nodes": "node_3"}}))
    assert out.atoms == [(3, UNKNOWN)]


@pytest.mark.parametrize(
    "value, expected",
    [
        (0.8, 0.8),
        (1.7, 1.0),
        (-0.2, 0.0),
        (0, 0.0),
        (1, 1.0),
        ("0.35", 0.35),
        ("high", 0.5),
        (None, 0.5),
        (True, 0.5),
        ([0.9], 0.5),
        ({"p": 1}, 0.5),
        ("nan", 0.5),
        ("inf", 0.5),
        (1e400, 0.5),
    ],
)
def test_confidence_clipping(value, expected):
    out = parse(reply({"selected_action": 0, "confidence": value}))
    assert out.confidence == pytest.approx(expected)
    assert parse(reply({"selected_action": 0})).confidence == 0.5


def test_load_object_and_helpers():
    assert load_object('x {"a": {"b": 1}} y') == {"a": {"b": 1}}
    assert load_object("[[" * 10_000) is None  # deep nesting does not raise
    status = imagined_status(STATUS, [(1, config.ACTIVE), (3, UNKNOWN)])
    np.testing.assert_array_equal(status, [2, 1, 3, 5, 0, 0, 0])
    np.testing.assert_array_equal(change_mask(7, [(1, config.ACTIVE), (3, UNKNOWN)]), [0, 1, 0, 1, 0, 0, 0])


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-10, 30)
    | st.floats(allow_nan=True)
    | st.sampled_from(["execute(node_3)", "node_3", "done", "3", "skip", "assign(node_1,node_4)"])
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "selected_action",
                    "imagined_next_state",
                    "changed_nodes",
                    "node_3_new_status",
                    "new_status",
                    "confidence",
                    "3",
                    "node_2",
                ]
            )
            | st.text(max_size=8),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_fuzz_text_never_raises(text):
    out = parse(text)
    assert isinstance(out, Reply)
    assert 0.0 <= out.confidence <= 1.0
    assert out.action_index is None or 0 <= out.action_index < len(CANDIDATES)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json_values, st.sampled_from(["{}", "```json\n{}\n```", "prose {} prose", "{}}"]))
def test_fuzz_json_never_raises(value, wrapper):
    text = wrapper.replace("{}", json.dumps(value, allow_nan=True))
    for status, nmask in ((STATUS, NMASK), (None, None)):
        out = parse_reply(text, CANDIDATES, status, nmask)
        assert 0.0 <= out.confidence <= 1.0
        assert all(isinstance(v, int) and 0 <= s <= UNKNOWN for v, s in out.atoms)
        if status is not None:
            assert all(0 <= v < 6 and s != STATUS[v] for v, s in out.atoms)
