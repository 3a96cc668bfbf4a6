"""The LM-only captain: prompt content, the per-turn schema of legal actions, the reference
parser, fallbacks, runs driven by a scripted Ollama-API server on loopback, and the uniform
policy."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from bsjax.battleship.game import questions
from bsjax.battleship.harness.experiment import run
from bsjax.battleship.harness.run_config import RunConfig
from bsjax.battleship.llm import lm_only
from bsjax.core.llm.server import OllamaAPIServer
from bsjax.core.llm.structured import LLMClient


def test_prompt_states_the_true_fleet_and_exact_shots():
    assert "lengths 5, 4, 3 and 2" in lm_only.SYSTEM_PROMPT
    assert "14 ship cells" in lm_only.SYSTEM_PROMPT and "exact" in lm_only.SYSTEM_PROMPT
    hits, misses = np.zeros(64, bool), np.zeros(64, bool)
    hits[36], misses[0] = True, True
    prompt = lm_only.user_prompt(hits, misses, 2, 38, 14, [(0, True)], {0})
    board = prompt.split("\n\n")[0].splitlines()
    assert board[1] == "A O - - - - - - -" and board[5] == "E - - - - X - - -"
    assert "Is there a ship in row A? -> yes" in prompt
    assert "row:A —" not in prompt and "row:B — Is there a ship in row B?" in prompt
    exhausted = lm_only.user_prompt(hits, misses, 2, 38, 0, [], set())
    assert "budget is exhausted" in exhausted


@pytest.mark.parametrize("reply, expected", [
    ("shoot E5", ("shoot", "E", 5)),
    ("```\n**shoot e5**\n```", ("shoot", "E", 5)),
    ("I think... \nquestion row:C", ("question", "row:C")),
    ("SHOOT E5", None),                    # quirk 24: lower-case keywords only
    ("1 2 3 4", None),
])
def test_reference_parser(reply, expected):
    assert lm_only.parse_action(reply) == expected


def test_improved_parser_is_case_insensitive():
    assert lm_only.parse_action("SHOOT E5", case_insensitive=True) == ("shoot", "E", 5)
    assert lm_only.parse_action("QUESTION Row:C", case_insensitive=True) == ("question", "Row:C")


def test_template_matching_order():
    assert lm_only.match_template("row:C", set()) == 2
    assert lm_only.match_template("ROW:c", set()) == 2
    assert lm_only.match_template("is there a ship in row c?", set()) == 2
    assert lm_only.match_template("row:C", {2}) is None


class _Scripted:
    name, model = "scripted", "scripted"

    def __init__(self, replies):
        self.replies = iter(replies)
        self.formats = []

    def complete(self, system, user, options=None, format=None):
        from bsjax.core.llm.backends import Completion
        self.formats.append(format)
        return Completion(next(self.replies))


def test_captain_fallbacks_are_random_unrevealed_cells():
    captain = lm_only.LMOnlyCaptain([64964], schema=False)
    client = LLMClient(_Scripted(["shoot A1", "gibberish", "question nope", "question row:B",
                                  "question row:B"]))
    hits, misses = np.zeros(64, bool), np.zeros(64, bool)
    misses[0] = True
    decisions = [captain.decide(client, 0, hits, misses, t, 40, 15) for t in range(5)]
    assert [d.reason for d in decisions] == ["invalid_cell", "unparsed", "unknown_question", "ok",
                                            "unknown_question"]
    for d in decisions[:3] + decisions[4:]:
        assert d.fallback and d.kind == 0 and not misses[d.cell]
    assert decisions[3].kind == 1 and decisions[3].question == 1
    assert client.backend.formats == [""] * 5  # the published call: no constraint
    no_questions = lm_only.LMOnlyCaptain([1], schema=False)
    assert no_questions.decide(LLMClient(_Scripted(["question row:B"])), 0, hits, misses, 0, 40,
                               0).reason == "no_questions"


def test_schema_lists_exactly_this_turns_legal_actions():
    hits, misses = np.zeros(64, bool), np.zeros(64, bool)
    hits[9], misses[0] = True, True                      # B2 hit, A1 miss
    captain = lm_only.LMOnlyCaptain([7])
    captain.asked[0] = {0, 8}                             # row:A and column:1 asked
    call = captain.call(0, hits, misses, 3, 38, 13)
    actions = call.format["properties"]["action"]["enum"]
    shots = [a for a in actions if a.startswith("shoot ")]
    asked = [a for a in actions if a.startswith("question ")]
    assert len(shots) == 62 and "shoot A1" not in shots and "shoot B2" not in shots
    assert shots[:2] == ["shoot A2", "shoot A3"] and shots[-1] == "shoot H8"
    assert len(asked) == 81 and "question row:A" not in asked and "question row:B" in asked
    assert call.format["required"] == ["action"] and not call.format["additionalProperties"]
    # The prompt lists only what the schema allows: the unasked ids, grouped by family.
    assert "row:B C D E F G H" in call.user and "column:2 3 4 5 6 7 8" in call.user
    assert "row:A" not in call.user.split("Questions you may ask", 1)[1]
    assert '{"action": "shoot <CELL>"}' in call.user and call.system.startswith("You are")
    assert '{"action":' in call.system and "exactly one line" not in call.system
    # No questions left: shots only.
    spent = captain.call(0, hits, misses, 30, 10, 0).format["properties"]["action"]["enum"]
    assert spent == shots and "budget is exhausted" in captain.call(0, hits, misses, 30, 10,
                                                                     0).user


def test_json_replies_under_the_schema_resolve_to_actions():
    captain = lm_only.LMOnlyCaptain([3])
    client = LLMClient(_Scripted(['{"action": "shoot C4"}', '{ "action": "question row:D"}',
                                  '{"action": "question row:D"}']))
    hits, misses = np.zeros(64, bool), np.zeros(64, bool)
    shot = captain.decide(client, 0, hits, misses, 0, 40, 15)
    ask = captain.decide(client, 0, hits, misses, 1, 39, 15)
    again = captain.decide(client, 0, hits, misses, 2, 39, 14)  # asked already: a fallback
    assert (shot.kind, shot.cell, shot.fallback) == (0, 2 * 8 + 3, False)
    assert (ask.kind, ask.question, ask.fallback) == (1, questions.CATALOG[3].index, False)
    assert again.fallback and again.reason == "unknown_question"
    assert isinstance(client.backend.formats[0], dict)


def test_uniform_policy_plays_only_legal_actions(tmp_path):
    summary = run(RunConfig(agent="lm-only", llm="uniform", boards="B01,B02", seeds=1),
                  tmp_path / "run")
    assert summary["games"] == 2 and summary["llm_calls"] > 0
    assert summary["fallbacks"] == 0 and summary["llm_rate"] == 1.0
    assert 0 < summary["avg_questions"] <= 15
    assert not (tmp_path / "run" / "calls.jsonl").exists()  # a policy, not a model: no cache
    again = run(RunConfig(agent="lm-only", llm="uniform", boards="B01,B02", seeds=1),
                tmp_path / "again")
    assert again["avg_f1"] == summary["avg_f1"] and again["llm_choices"] == summary["llm_choices"]


def test_lm_only_run_through_the_ollama_path(tmp_path):
    replies = itertools.cycle(["question row:F", "shoot F2", "shoot F3", "nonsense", "shoot F4"])
    with OllamaAPIServer(lambda s, u: next(replies)) as server:
        summary = run(RunConfig(agent="lm-only", llm="ollama", llm_host=server.url,
                                llm_format="free", boards="B01", seeds=1), tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "games.jsonl").read_text().splitlines()]
    assert summary["games"] == 1 and rows[0]["turns"] == summary["llm_calls"]
    assert summary["llm_rate"] == 1.0
    assert summary["avg_questions"] == 1.0        # row:F asked once; repeats fall back
    assert 0 < summary["fallbacks"] < summary["llm_calls"]
