"""Captain policies: static structures (frozen dataclasses) with traced params.

Each has `default_params()`, `init_state(params)` and `decide(key, params, view, sampler, belief,
state)` (and, for the reflective runtime, `observe`); see `agents.base`.
"""

import dataclasses

from bsjax.battleship.agents.basic import GreedyAgent, RandomAgent
from bsjax.battleship.agents.bayes import BayesAgent, BayesParams
from bsjax.battleship.agents.lm_only import LMOnlyAgent
from bsjax.battleship.agents.lookahead import LookaheadAgent, LookaheadParams
from bsjax.battleship.agents.mra import MRAAgent, MRALLMAgent, MRAParams
from bsjax.battleship.agents.wma import WMAAgent, WMAParams
from bsjax.battleship.agents.wma_reflective import WMAReflectiveAgent

AGENTS = {"random": RandomAgent, "greedy": GreedyAgent, "wma": WMAAgent, "bayes": BayesAgent,
          "lookahead": LookaheadAgent, "mra": MRAAgent, "mra-llm": MRALLMAgent,
          "lm-only": LMOnlyAgent, "wma-reflective": WMAReflectiveAgent}
BUILT_IN = frozenset(AGENTS)


def register_agent(cls=None, name: str | None = None, replace: bool = False):
    """Make an agent class playable by name everywhere (`bsjax.play`, `bsjax.run`, bench).

    The class needs `name`, `needs_belief`, `default_params()`, `init_state(params)` and
    `decide(...)` (subclass `agents.base.Agent`). A built-in name is refused unless `replace`
    is given; registering a name of your own again replaces it (a notebook cell run twice).
    Returns the class, so it works as a decorator (also as `@register_agent(name="x")`).
    """
    def register(cls):
        key = name or cls.name
        if key in BUILT_IN and not replace and AGENTS.get(key) is not cls:
            raise ValueError(f"{key!r} is a built-in agent: give the class another name, or "
                             "pass replace=True to replace it")
        AGENTS[key] = cls
        return cls
    return register if cls is None else register(cls)


def structure_options(cls) -> set[str]:
    """The constructor options of an agent class besides its config (its static structure)."""
    return {f.name for f in dataclasses.fields(cls)} - {"config"}


def make_agent(name: str, config, **options):
    """The agent `name` for `config` with structure `options` (e.g. `variant`, `rule`).

    Raises ValueError for an unknown name or an option the class does not take; values a study
    varies (τ, cooldown, budgets, weights) are params, not options: see `default_params()`.
    """
    if name not in AGENTS:
        raise ValueError(f"unknown agent {name!r} (choose from {', '.join(AGENTS)})")
    cls = AGENTS[name]
    unknown = sorted(set(options) - structure_options(cls))
    if unknown:
        known = ", ".join(sorted(structure_options(cls))) or "none"
        raise ValueError(f"agent {name!r} takes no option {', '.join(map(repr, unknown))} "
                         f"(its options: {known}; values such as tau are params)")
    return cls(config, **options)


__all__ = ["AGENTS", "BUILT_IN", "BayesAgent", "BayesParams", "GreedyAgent", "LMOnlyAgent",
           "LookaheadAgent", "LookaheadParams", "MRAAgent", "MRALLMAgent", "MRAParams",
           "RandomAgent", "WMAAgent", "WMAParams", "WMAReflectiveAgent", "make_agent",
           "register_agent", "structure_options"]
