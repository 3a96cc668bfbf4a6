"""bsjax: noisy Collaborative Battleship in JAX — belief, planning, reflection and LLM layers.

The public surface: protocol presets, the world, the samplers, the agents and the experiment
runner. Everything numeric is a pure function of ONE game, vmapped over games by the harness.
"""

from bsjax.agents import AGENTS, GreedyAgent, RandomAgent, make_agent
from bsjax.belief import make_sampler
from bsjax.config import GRAND, PAPER, GameConfig, protocol
from bsjax.game import rules, suites
from bsjax.harness.experiment import RunConfig, UsageError, run
from bsjax.types import Action, GameState, Observations, TurnRecord, View

__version__ = "0.1.0"

__all__ = [
    "AGENTS", "Action", "GRAND", "GameConfig", "GameState", "GreedyAgent", "Observations",
    "PAPER", "RandomAgent", "RunConfig", "TurnRecord", "UsageError", "View", "make_agent",
    "make_sampler", "protocol", "rules", "run", "suites",
]
