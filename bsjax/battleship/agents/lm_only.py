"""The LM-only captain (docs/battleship/protocol.md §10.2): an LLM chooses every action on the host.

Its decisions are made by `bsjax.battleship.llm.lm_only.LMOnlyCaptain`, driven between compiled
turns by `bsjax.battleship.harness.llm_host.CaptainHost`; the compiled turn only applies them.
"""

from __future__ import annotations

import dataclasses

from bsjax.battleship.agents.base import HostCaptain
from bsjax.battleship.config import GameConfig


@dataclasses.dataclass(frozen=True)
class LMOnlyAgent(HostCaptain):
    """An LLM every turn; `variant="improved"` parses case-insensitively."""

    config: GameConfig
    variant: str = "paper"

    name = "lm-only"
    needs_belief = False

    def init_state(self, params):
        return ()
