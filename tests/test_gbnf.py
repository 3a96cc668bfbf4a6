"""JSON Schema → GBNF (`bsjax.core.llm.gbnf`): the grammar layout replies are decoded under.

What the engine does with a grammar is tested against recorded replies (tests/test_llm.py); these
tests pin the layout itself, which decides where a reply may put spaces, and the fallbacks.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bsjax.battleship.llm import lm_only
from bsjax.core.llm import gbnf
from bsjax.gilp.llm.prompts import response_schema


def rules(grammar: str) -> dict[str, str]:
    return dict(line.split(" ::= ", 1) for line in grammar.strip().splitlines())


def test_an_enum_value_is_the_bare_literal_and_an_object_ends_in_a_space():
    schema = {"type": "object", "required": ["action"], "additionalProperties": False,
              "properties": {"action": {"enum": ["shoot A1", "question row:B"]}}}
    assert rules(gbnf.from_schema(schema)) == {
        "root": '"{" space root-action-kv "}" space',
        "root-action": r'"\"shoot A1\"" | "\"question row:B\""',
        "root-action-kv": r'"\"action\"" space ":" space root-action',
        "space": '" "?',
    }


def test_required_keys_keep_the_schemas_order_and_optional_ones_follow_in_order():
    schema = {"type": "object", "required": ["b", "a"], "additionalProperties": False,
              "properties": {"a": {"type": "integer"}, "x": {"enum": [1]}, "b": {"enum": [2]},
                             "y": {"enum": [3]}}}
    got = rules(gbnf.from_schema(schema))
    # a before b (the properties' order), then x and/or y, each at most once, x first
    assert got["root"] == ('"{" space root-a-kv "," space root-b-kv ( "," space '
                           '( root-x-kv root-x-rest | root-y-kv ) )? "}" space')
    assert got["root-x-rest"] == '( "," space root-y-kv )?'
    assert got["integer"] == '( "-"? integral-part ) space'


def test_additional_properties_schema_allows_more_pairs_and_absent_allows_none():
    open_state = {"type": "object", "required": ["n"], "properties": {"n": {"enum": [0]}},
                  "additionalProperties": {"type": "string", "enum": ["failed"]}}
    got = rules(gbnf.from_schema(open_state))
    assert "root-additional-kvs" in got["root"]
    assert got["root-additional-kv"] == 'string ":" space root-additional-value'
    closed = {"type": "object", "required": ["n"], "properties": {"n": {"enum": [0]}}}
    assert rules(gbnf.from_schema(closed))["root"] == '"{" space root-n-kv "}" space'


def test_lengths_and_item_counts_bound_the_repetitions():
    got = rules(gbnf.from_schema(response_schema(["execute(node_3)"], [0, 3, 5])))
    assert got["root-reasoning"] == r'"\"" char{0,300} "\"" space'
    assert got["root-imagined-next-state-changed-nodes"] == (
        '"[" space ( root-imagined-next-state-changed-nodes-item ( "," space '
        'root-imagined-next-state-changed-nodes-item ){0,2} )? "]" space')
    two_to_four = {"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 4}
    assert rules(gbnf.from_schema(two_to_four))["root"] == \
        '"[" space boolean ( "," space boolean ){1,3} "]" space'


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "x+"}}},
    {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}},
    {"type": "array"},
    {"enum": []},
    {"type": "object", "required": ["missing"], "properties": {}},
])
def test_unsupported_schemas_fall_back_to_any_json_object(schema):
    with pytest.raises(gbnf.UnsupportedSchema):
        gbnf.from_schema(schema)
    assert gbnf.grammar_for(schema) == gbnf.JSON_OBJECT
    assert gbnf.grammar_for(None) == gbnf.JSON_OBJECT


@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=8, unique=True))
def test_every_enum_member_is_one_alternative_of_its_rule(values):
    """Quotes, backslashes and newlines in a member are escaped; each member is one literal."""
    grammar = gbnf.from_schema({"type": "object", "required": ["v"],
                                "properties": {"v": {"enum": values}}})
    body = rules(grammar)["root-v"]
    literals = re.findall(r'"((?:[^"\\]|\\.)*)"', body)
    unescaped = [re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r"}.get(m.group(1), m.group(1)),
                        lit) for lit in literals]
    assert [__import__("json").loads(text) for text in unescaped] == values


def test_the_schemas_bsjax_sends_convert():
    for schema in (lm_only.response_schema(["shoot A1", "question row:B"]),
                   response_schema(), response_schema(["wait()"], [1, 2])):
        assert gbnf.grammar_for(schema) != gbnf.JSON_OBJECT
