"""Static game configuration: frozen, hashable, closed over by `jit`, never traced."""

from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class GameConfig:
    """Rules of one protocol.

    Attributes:
      name: protocol name (`paper`, `grand`, or a test name).
      rows, cols: board shape.
      n_ships: ships per board (4 in both protocols).
      fleet: ship lengths in fleet order when every board has the same fleet (paper: 5, 4, 3, 2);
        `None` when each board brings its own fleet (grand: the ship tracker's lengths).
      ship_lengths: every length a ship may have (spans are built for these).
      max_shots, max_questions: budgets; a question uses a turn, not a shot.
      epsilon: the answer-noise rate of the captain's model.
      env_noise: whether the environment flips answers with probability `epsilon`.
      evidence_scale: kappa of the tempered likelihood (0.8 in the paper; 1.0 gives the plain
        (1 - eps) / eps channel of Grand et al.).
      reveal_colour: hits reveal which ship was hit (grand).
      sunk_feedback: the ship tracker names a ship once it is sunk (grand).
    """

    name: str = "paper"
    rows: int = 8
    cols: int = 8
    n_ships: int = 4
    fleet: tuple[int, ...] | None = (5, 4, 3, 2)
    ship_lengths: tuple[int, ...] = (2, 3, 4, 5)
    max_shots: int = 40
    max_questions: int = 15
    epsilon: float = 0.1
    env_noise: bool = True
    evidence_scale: float = 0.8
    reveal_colour: bool = False
    sunk_feedback: bool = False

    @property
    def n_cells(self) -> int:
        return self.rows * self.cols

    @property
    def n_words(self) -> int:
        """uint32 words of a bitboard."""
        return max(1, math.ceil(self.n_cells / 32))

    @property
    def max_ship_cells(self) -> int:
        """The most ship cells a board can have (the fleet's, else every ship at the longest
        length): a bound on the hit cells."""
        cells = sum(self.fleet) if self.fleet else self.n_ships * max(self.ship_lengths)
        return min(cells, self.n_cells)

    @property
    def max_turns(self) -> int:
        return self.max_shots + self.max_questions

    def answer_likelihood(self) -> tuple[float, float]:
        """(L(match), L(mismatch)) of the captain's answer model, computed as the reference does."""
        clamp = lambda x: min(max(x, 1e-10), 1 - 1e-10)  # noqa: E731
        eps = self.epsilon
        if eps <= 0:
            return 1.0, 1e-10
        eps = clamp(eps)
        kappa = self.evidence_scale
        match = clamp(0.5 + ((1 - eps) - 0.5) * kappa)
        mismatch = clamp(0.5 + (eps - 0.5) * kappa)
        return match, mismatch

    def log_answer_likelihood(self) -> tuple[float, float]:
        """Natural logs of `answer_likelihood`, floored at ln(1e-10) as the reference does."""
        match, mismatch = self.answer_likelihood()
        return math.log(max(match, 1e-10)), math.log(max(mismatch, 1e-10))


PAPER = GameConfig()
GRAND = GameConfig(
    name="grand",
    fleet=None,
    env_noise=False,
    evidence_scale=1.0,
    reveal_colour=True,
    sunk_feedback=True,
)
PROTOCOLS = {"paper": PAPER, "grand": GRAND}


def protocol(name: str) -> GameConfig:
    """The preset of a protocol name; raises ValueError for an unknown one."""
    if name not in PROTOCOLS:
        raise ValueError(f"unknown protocol {name!r} (choose from {', '.join(PROTOCOLS)})")
    return PROTOCOLS[name]
