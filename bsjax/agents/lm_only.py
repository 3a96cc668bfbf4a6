"""The LM-only captain's place in the agent registry: its decisions are made on the host by
`bsjax.llm.lm_only.LMOnlyCaptain`, driven by `bsjax.harness.llm_host.CaptainHost`; nothing of it
is traced."""

from __future__ import annotations

import dataclasses

from bsjax.config import GameConfig


@dataclasses.dataclass(frozen=True)
class LMOnlyAgent:
    """An LLM every turn (paper-protocol §10.2); `variant="improved"` parses case-insensitively."""

    config: GameConfig
    variant: str = "paper"

    name = "lm-only"
    needs_belief = False
    host_decides = True

    def init_state(self):
        return ()

    def decide(self, key, view, sampler, belief, state):
        raise NotImplementedError("the LM-only captain decides on the host (harness.loop)")
