"""bsjax: agent-harness decomposition in JAX, on two domains.

- `bsjax.battleship`: noisy Collaborative Battleship — belief, planning, reflection and LLM layers.
- `bsjax.gilp`: graph planning with small trained world models (GILP).
- `bsjax.core`: what both share — errors, results files, progress, statistics, LLM backends.

The names below are the Battleship domain's public surface (protocol presets, the world, the
samplers, the agents and the experiment runner). They are imported on first use, so that
`import bsjax.gilp` does not load the Battleship harness (nor JAX programs it does not need).
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "AGENTS": "bsjax.battleship.agents",
    "GreedyAgent": "bsjax.battleship.agents",
    "RandomAgent": "bsjax.battleship.agents",
    "make_agent": "bsjax.battleship.agents",
    "make_sampler": "bsjax.battleship.belief",
    "GRAND": "bsjax.battleship.config",
    "PAPER": "bsjax.battleship.config",
    "GameConfig": "bsjax.battleship.config",
    "protocol": "bsjax.battleship.config",
    "rules": "bsjax.battleship.game",
    "suites": "bsjax.battleship.game",
    "RunConfig": "bsjax.battleship.harness.experiment",
    "run": "bsjax.battleship.harness.experiment",
    "play": "bsjax.battleship.harness.api",
    "Results": "bsjax.battleship.harness.results",
    "load_run": "bsjax.battleship.harness.results",
    "check_agent": "bsjax.battleship.harness.conformance",
    "Env": "bsjax.battleship.game.env",
    "register_agent": "bsjax.battleship.agents",
    "scoring_rule": "bsjax.battleship.planning.scoring",
    "QuestionFeatures": "bsjax.battleship.planning.scoring",
    "UsageError": "bsjax.core.errors",
    "Action": "bsjax.battleship.types",
    "GameState": "bsjax.battleship.types",
    "Observations": "bsjax.battleship.types",
    "TurnRecord": "bsjax.battleship.types",
    "View": "bsjax.battleship.types",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'bsjax' has no attribute {name!r}")
    module = importlib.import_module(_EXPORTS[name])
    value = getattr(module, name) if hasattr(module, name) else \
        importlib.import_module(f"{_EXPORTS[name]}.{name}")
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
