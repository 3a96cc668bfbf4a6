"""The LM-only captain: prompt content, the reference parser, fallbacks, and a run driven by a
scripted Ollama-API server on loopback."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from bsjax.harness.experiment import RunConfig, run
from bsjax.llm import lm_only
from bsjax.llm.server import OllamaAPIServer


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
    def __init__(self, replies):
        self.replies = iter(replies)

    def chat(self, system, user):
        return next(self.replies)


def test_captain_fallbacks_are_random_unrevealed_cells():
    captain = lm_only.LMOnlyCaptain(_Scripted(["shoot A1", "gibberish", "question nope",
                                                "question row:B", "question row:B"]), [64964])
    hits, misses = np.zeros(64, bool), np.zeros(64, bool)
    misses[0] = True
    decisions = [captain.decide(0, hits, misses, t, 40, 15) for t in range(5)]
    assert [d.reason for d in decisions] == ["invalid_cell", "unparsed", "unknown_question", "ok",
                                            "unknown_question"]
    for d in decisions[:3] + decisions[4:]:
        assert d.fallback and d.kind == 0 and not misses[d.cell]
    assert decisions[3].kind == 1 and decisions[3].question == 1
    no_questions = lm_only.LMOnlyCaptain(_Scripted(["question row:B"]), [1])
    assert no_questions.decide(0, hits, misses, 0, 40, 0).reason == "no_questions"


def test_lm_only_run_through_the_ollama_path(tmp_path):
    replies = itertools.cycle(["question row:F", "shoot F2", "shoot F3", "nonsense", "shoot F4"])
    with OllamaAPIServer(lambda s, u: next(replies)) as server:
        summary = run(RunConfig(agent="lm-only", llm="ollama", llm_host=server.url,
                                boards="B01", seeds=1), tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "games.jsonl").read_text().splitlines()]
    assert summary["games"] == 1 and rows[0]["turns"] == summary["llm_calls"]
    assert summary["llm_rate"] == 1.0
    assert summary["avg_questions"] == 1.0        # row:F asked once; repeats fall back
    assert 0 < summary["fallbacks"] < summary["llm_calls"]
