"""Captain policies. Each agent is a frozen dataclass with `decide(key, view, sampler, belief)`."""

from bsjax.agents.basic import GreedyAgent, RandomAgent, best_shot
from bsjax.agents.bayes import BayesAgent
from bsjax.agents.wma import WMAAgent

AGENTS = {"random": RandomAgent, "greedy": GreedyAgent, "wma": WMAAgent, "bayes": BayesAgent}


def register_agent(cls, name: str | None = None):
    """Make an agent class playable by name everywhere (`bsjax.run`, `RunConfig`, bench).

    The class needs `name`, `needs_belief`, `init_state()` and `decide(...)`, e.g. a subclass of
    `WMAAgent` with its own `score_questions`. Returns the class, so it works as a decorator.
    """
    AGENTS[name or cls.name] = cls
    return cls


def make_agent(name: str, config):
    if name not in AGENTS:
        raise ValueError(f"unknown agent {name!r} (choose from {', '.join(AGENTS)})")
    return AGENTS[name](config)


__all__ = ["AGENTS", "BayesAgent", "GreedyAgent", "RandomAgent", "WMAAgent", "best_shot", "make_agent",
           "register_agent"]
