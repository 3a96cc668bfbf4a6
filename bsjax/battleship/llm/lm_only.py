"""The LM-only captain: the LLM picks every action from an ASCII board.

No posterior, no EIG, no decision rule. The prompt states the TRUE fleet (four ships, lengths 5,
4, 3, 2; 14 cells) and that shots are exact while answers may be flipped with ε = 0.1 — the
published prompt's fleet bug (three ships of lengths 2, 3, 4) is documented, not reproduced.

Two call shapes:
- `schema` (default): the reply is `{"action": "shoot E5"}` or `{"action": "question row:C"}`,
  constrained by `response_schema`: one of this turn's unrevealed cells or, while questions
  remain, one of the templates still unasked. The prompt lists just those templates, by id.
- `free`: the published one-line reply (`shoot E5` / `question row:C`) with the templates listed
  as `id — text`, no constraint.

Either reply goes through the tolerant line parser; invalid replies fall back to a uniformly
random unrevealed cell and are counted by reason.
"""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np

from bsjax.battleship.game import questions
from bsjax.battleship.game.refrng import SeededRandom
from bsjax.core.llm.structured import Answer, Call

SYSTEM_PROMPT = (
    "You are the captain in Collaborative Battleship on an 8x8 grid (rows A-H, columns 1-8). "
    "Hidden on the board are four ships of lengths 5, 4, 3 and 2 (14 ship cells); ships are "
    "straight and may touch. Your goal is to hit every ship cell in as few shots as possible. "
    "Each turn you either SHOOT one cell or ASK one region question from the provided list. You "
    "have at most 40 shots and 15 questions, and each question can be asked at most once. Shot "
    "results are exact; answers to questions may be flipped with probability 0.1. Reply with "
    "exactly one line: `shoot <CELL>` (e.g. `shoot E5`) or `question <QUESTION_ID>` (e.g. "
    "`question row:C`). No commentary."
)

SCHEMA_SYSTEM_PROMPT = SYSTEM_PROMPT.replace(
    "Reply with exactly one line: `shoot <CELL>` (e.g. `shoot E5`) or `question <QUESTION_ID>` "
    "(e.g. `question row:C`). No commentary.",
    'Reply with one JSON object: {"action": "shoot <CELL>"} (e.g. "shoot E5") or '
    '{"action": "question <QUESTION_ID>"} (e.g. "question row:C").')
ROWS = "ABCDEFGH"

_SHOOT = re.compile(r"shoot\s+([A-Ha-h])\s*(\d)")
_QUESTION = re.compile(r"question\s+([A-Za-z0-9:_\-]+)")


@dataclasses.dataclass
class Decision:
    """kind 0 shoot / 1 ask; cell or template index; whether it fell back, and why."""

    kind: int
    cell: int
    question: int
    fallback: bool
    reason: str


def board_ascii(hits: np.ndarray, misses: np.ndarray) -> str:
    """`X` hit, `O` miss, `-` unknown; a header of column numbers and row letters."""
    lines = ["  " + " ".join(str(c + 1) for c in range(8))]
    for r in range(8):
        row = ["X" if hits[r * 8 + c] else "O" if misses[r * 8 + c] else "-" for c in range(8)]
        lines.append(f"{'ABCDEFGH'[r]} " + " ".join(row))
    return "\n".join(lines)


def cell_name(cell: int) -> str:
    return f"{ROWS[cell // 8]}{cell % 8 + 1}"


def legal_actions(unknown: np.ndarray, questions_left: int, asked: set[int]) -> list[str]:
    """This turn's legal replies: `shoot CELL` for every unrevealed cell (ascending), then
    `question ID` for every unasked template (catalog order) while questions remain."""
    actions = [f"shoot {cell_name(int(c))}" for c in np.flatnonzero(unknown)]
    if questions_left > 0:
        actions += [f"question {t.qid}" for t in questions.CATALOG if t.index not in asked]
    return actions


def response_schema(actions: list[str]) -> dict:
    """The JSON Schema of one LM-only turn: `{"action": one of the legal actions}`."""
    return {"type": "object", "properties": {"action": {"type": "string", "enum": actions}},
            "required": ["action"], "additionalProperties": False}


def grouped_questions(templates) -> str:
    """The templates' ids grouped by family, one line each (`row:A B C`): a third of the
    tokens of listing every id with its text."""
    families: dict[str, list[str]] = {}
    for t in templates:
        family, value = t.qid.split(":", 1)
        families.setdefault(family, []).append(value)
    return ("Questions you may ask, as `question FAMILY:VALUE` (each asks whether any ship lies "
            "in that region; answers may be flipped with probability 0.1):\n"
            + "\n".join(f"{family}:{' '.join(values)}" for family, values in families.items()))


def user_prompt(hits, misses, turn: int, shots_left: int, questions_left: int,
                qa_log: list[tuple[int, bool]], asked: set[int], compact: bool = False) -> str:
    """The turn's prompt: board, status, past Q&A, the questions left and the reply format.
    `compact` (the schema call) lists the unasked templates by id on one line."""
    sections = [board_ascii(hits, misses),
                f"Turn {turn}. Shots remaining: {shots_left}. Questions remaining: "
                f"{questions_left}. Hits: {int(hits.sum())} / 14 ship cells. Misses: "
                f"{int(misses.sum())}."]
    if qa_log:
        sections.append("Past questions (answers may be flipped with probability 0.1):\n" + "\n".join(
            f"{questions.CATALOG[q].text} -> {'yes' if a else 'no'}" for q, a in qa_log))
    if questions_left > 0:
        unasked = [t for t in questions.CATALOG if t.index not in asked][:96]
        sections.append(grouped_questions(unasked) if compact else
                        "Questions you may ask:\n" + "\n".join(f"{t.qid} — {t.text}"
                                                                for t in unasked))
    else:
        sections.append("The question budget is exhausted: you must shoot.")
    sections.append('Reply with JSON: {"action": "shoot <CELL>"} or '
                    '{"action": "question <QUESTION_ID>"}.' if compact else
                    "Reply with one line: `shoot <CELL>` or `question <QUESTION_ID>`.")
    return "\n\n".join(sections)


def parse_action(reply: str, case_insensitive: bool = False):
    """The first line naming an action: ("shoot", row, digit) or ("question", id), else None.

    Paper mode matches the lower-case keywords only (quirk 24); `case_insensitive` fixes it."""
    for line in (reply or "").strip().splitlines():
        line = line.strip().strip("`*").strip()
        probe = line.lower() if case_insensitive else line
        shot = _SHOOT.search(probe)
        if shot:
            return "shoot", shot.group(1).upper(), int(shot.group(2))
        question = _QUESTION.search(probe)
        if question:
            start = question.start(1)
            return "question", line[start:start + len(question.group(1))]
    return None


def match_template(name: str, asked: set[int]) -> int | None:
    """An unasked template by exact id, then case-insensitive id, then case-insensitive text."""
    unasked = [t for t in questions.CATALOG if t.index not in asked]
    for test in (lambda t: t.qid == name, lambda t: t.qid.lower() == name.lower(),
                 lambda t: t.text.lower() == name.lower()):
        for t in unasked:
            if test(t):
                return t.index
    return None


def reply_action(text: str) -> str:
    """The action text of a reply: the `action` of a JSON object, else the whole text."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, dict) and isinstance(value.get("action"), str):
        return value["action"]
    return text


class LMOnlyCaptain:
    """Host-side captain for one batch; keeps each game's asked set, Q&A log and fallback RNG.

    Each turn, for every live game: `call(...)` builds the request, the host asks the LLM for all
    of them at once, and `resolve(...)` turns each answer into a Decision. `schema=False` is the
    published free-text call.
    """

    def __init__(self, game_seeds: list[int], reference_rng: bool = True,
                 case_insensitive: bool = False, schema: bool = True):
        self.case_insensitive = case_insensitive
        self.schema = schema
        self.asked = [set() for _ in game_seeds]
        self.qa_log: list[list[tuple[int, bool]]] = [[] for _ in game_seeds]
        self.pending: list[int | None] = [None for _ in game_seeds]
        # The strategy RNG: SeededRandom(gameSeed) in paper-faithful mode.
        self.rng = [SeededRandom(s) if reference_rng else np.random.default_rng(s)
                    for s in game_seeds]

    def record_answer(self, game: int, answer: bool) -> None:
        if self.pending[game] is not None:
            self.qa_log[game].append((self.pending[game], bool(answer)))
            self.pending[game] = None

    def _random_cell(self, game: int, unknown: np.ndarray) -> int:
        cells = np.flatnonzero(unknown)
        rng = self.rng[game]
        k = rng.next_int(len(cells)) if isinstance(rng, SeededRandom) else int(
            rng.integers(len(cells)))
        return int(cells[k])

    def call(self, game: int, hits, misses, turn, shots_left, questions_left) -> Call:
        """This game's request for this turn (its schema lists the legal actions)."""
        prompt = user_prompt(hits, misses, turn, shots_left, questions_left, self.qa_log[game],
                             self.asked[game], compact=self.schema)
        if not self.schema:
            return Call(SYSTEM_PROMPT, prompt)
        actions = legal_actions(~(hits | misses), questions_left, self.asked[game])
        return Call(SCHEMA_SYSTEM_PROMPT, prompt, response_schema(actions))

    def resolve(self, game: int, answer: Answer, hits, misses, questions_left) -> Decision:
        """The action of an answer, or a counted fallback to a random unrevealed cell."""
        unknown = ~(hits | misses)
        if not answer.ok:
            return Decision(0, self._random_cell(game, unknown), -1, True,
                            answer.fault or "transport")
        parsed = parse_action(reply_action(answer.text), self.case_insensitive)
        if parsed is None:
            return Decision(0, self._random_cell(game, unknown), -1, True, "unparsed")
        if parsed[0] == "shoot":
            _, row, col = parsed
            cell = ROWS.index(row) * 8 + col - 1
            if not 1 <= col <= 8 or not unknown[cell]:
                return Decision(0, self._random_cell(game, unknown), -1, True, "invalid_cell")
            return Decision(0, cell, -1, False, "ok")
        if questions_left <= 0:
            return Decision(0, self._random_cell(game, unknown), -1, True, "no_questions")
        template = match_template(parsed[1], self.asked[game])
        if template is None:
            return Decision(0, self._random_cell(game, unknown), -1, True, "unknown_question")
        self.asked[game].add(template)
        self.pending[game] = template
        return Decision(1, -1, template, False, "ok")

    def decide(self, client, game: int, hits, misses, turn, shots_left,
               questions_left) -> Decision:
        """One game's turn through `client` (a `structured.LLMClient`)."""
        answer = client.ask(self.call(game, hits, misses, turn, shots_left, questions_left))
        return self.resolve(game, answer, hits, misses, questions_left)
