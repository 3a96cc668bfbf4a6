"""Captain policies: frozen dataclasses with `init_state()` and
`decide(key, view, sampler, belief, state)` (and, for the reflective runtime, `observe`)."""

import dataclasses

from bsjax.battleship.agents.basic import GreedyAgent, RandomAgent, best_shot
from bsjax.battleship.agents.bayes import BayesAgent
from bsjax.battleship.agents.lm_only import LMOnlyAgent
from bsjax.battleship.agents.mra import MRAAgent, MRALLMAgent
from bsjax.battleship.agents.wma import WMAAgent
from bsjax.battleship.agents.wma_reflective import WMAReflectiveAgent

AGENTS = {"random": RandomAgent, "greedy": GreedyAgent, "wma": WMAAgent, "bayes": BayesAgent,
          "mra": MRAAgent, "mra-llm": MRALLMAgent, "lm-only": LMOnlyAgent,
          "wma-reflective": WMAReflectiveAgent}


def register_agent(cls, name: str | None = None):
    """Make an agent class playable by name everywhere (`bsjax.run`, `RunConfig`, bench).

    The class needs `name`, `needs_belief`, `init_state()` and `decide(...)`, e.g. a subclass of
    `WMAAgent` with its own `score_questions`. Returns the class, so it works as a decorator.
    """
    AGENTS[name or cls.name] = cls
    return cls


def make_agent(name: str, config, **options):
    """The agent `name` for `config`; options the agent class does not take are ignored."""
    if name not in AGENTS:
        raise ValueError(f"unknown agent {name!r} (choose from {', '.join(AGENTS)})")
    cls = AGENTS[name]
    fields = {f.name for f in dataclasses.fields(cls)}
    return cls(config, **{k: v for k, v in options.items() if k in fields})


__all__ = ["AGENTS", "BayesAgent", "GreedyAgent", "LMOnlyAgent", "MRAAgent", "MRALLMAgent",
           "RandomAgent", "WMAAgent", "WMAReflectiveAgent", "best_shot", "make_agent",
           "register_agent"]
