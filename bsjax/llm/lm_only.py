"""The LM-only captain (paper-protocol §10.2): the LLM picks every action from an ASCII board.

No posterior, no EIG, no decision rule. The prompt states the TRUE fleet (four ships, lengths 5,
4, 3, 2; 14 cells) and that shots are exact while answers may be flipped with ε = 0.1 — the
reference prompt's fleet bug is documented, not reproduced. Invalid replies fall back to a
uniformly random unrevealed cell and are counted.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from bsjax.game import questions
from bsjax.game.refrng import SeededRandom
from bsjax.llm.backends import LLMError

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


def user_prompt(hits, misses, turn: int, shots_left: int, questions_left: int,
                qa_log: list[tuple[int, bool]], asked: set[int]) -> str:
    sections = [board_ascii(hits, misses),
                f"Turn {turn}. Shots remaining: {shots_left}. Questions remaining: "
                f"{questions_left}. Hits: {int(hits.sum())} / 14 ship cells. Misses: "
                f"{int(misses.sum())}."]
    if qa_log:
        sections.append("Past questions (answers may be flipped with probability 0.1):\n" + "\n".join(
            f"{questions.CATALOG[q].text} -> {'yes' if a else 'no'}" for q, a in qa_log))
    if questions_left > 0:
        unasked = [t for t in questions.CATALOG if t.index not in asked][:96]
        sections.append("Questions you may ask:\n" + "\n".join(f"{t.qid} — {t.text}"
                                                               for t in unasked))
    else:
        sections.append("The question budget is exhausted: you must shoot.")
    sections.append("Reply with one line: `shoot <CELL>` or `question <QUESTION_ID>`.")
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


class LMOnlyCaptain:
    """Host-side captain for one batch; keeps each game's asked set, Q&A log and fallback RNG."""

    def __init__(self, backend, game_seeds: list[int], reference_rng: bool = True,
                 case_insensitive: bool = False):
        self.backend = backend
        self.case_insensitive = case_insensitive
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

    def decide(self, game: int, hits, misses, turn, shots_left, questions_left) -> Decision:
        unknown = ~(hits | misses)
        prompt = user_prompt(hits, misses, turn, shots_left, questions_left, self.qa_log[game],
                             self.asked[game])
        try:
            reply = self.backend.chat(SYSTEM_PROMPT, prompt)
        except LLMError:
            return Decision(0, self._random_cell(game, unknown), -1, True, "transport")
        parsed = parse_action(reply, self.case_insensitive)
        if parsed is None:
            return Decision(0, self._random_cell(game, unknown), -1, True, "unparsed")
        if parsed[0] == "shoot":
            _, row, col = parsed
            cell = "ABCDEFGH".index(row) * 8 + col - 1
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
