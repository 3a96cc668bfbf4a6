"""A batch's first game states and beliefs, compiled once per belief and shared by every agent.

`Player.init_one` is the game, its first belief and the agent's first state. The belief is the
costly part to compile (a sampler's first draw from the prior: on a CPU, about 40% of what a new
agent costs to compile) and does not depend on the agent, so `BatchInit` splits it in two
programs: the game and belief (`Player.init_belief_one`), compiled once per (game config,
sampler, rng mode, mesh, shapes) and kept for the process, and the agent's first state (small).
The rows of a study, or the agents of a notebook, then compile the belief once. The two programs
give `init_one`'s values: same key, same draws.
"""

from __future__ import annotations

import collections

import jax

from bsjax.battleship.harness.player import Player, PlayParams

# Compiled belief programs by (game config, sampler, rng mode, mesh, argument shapes, x64): a
# handful, each holding compiled code and no data.
_BELIEFS: collections.OrderedDict = collections.OrderedDict()
_BELIEFS_MAX = 8


def _jit(sharding):
    return jax.jit if sharding is None else (lambda f: jax.jit(f, out_shardings=sharding))


def _avals(tree) -> tuple:
    return (jax.tree.structure(tree),
            tuple((x.shape, str(x.dtype)) for x in jax.tree.leaves(tree)))


class BatchInit:
    """`jax.vmap(player.init_one)` over a batch as two compiled programs (module docstring).

    `compile(...)` compiles both for the batch's shapes (the belief's program is reused when an
    earlier runner compiled it, unless `reuse` is off) and returns the shapes of `(states,
    carries)`; calling it compiled runs them: `(keys [G], params [G, ...], truths [G, S],
    seeds [G]) -> (states, (beliefs, agent states))`, each leaf `[G, ...]`.
    """

    def __init__(self, player: Player, sharding=None, reuse: bool = True):
        self.player = player
        self.sharding = sharding
        self.reuse = reuse  # off: compile the belief anew (where compile time is measured)
        self._belief = None
        self._agent = None

    def compile(self, keys: jax.Array, params: PlayParams, truths: jax.Array,
                seeds: jax.Array):
        player, jit = self.player, _jit(self.sharding)
        key = (player.config, player.sampler, player.reference_rng, self.sharding,
               _avals((keys, params.answers, truths, seeds)), bool(jax.config.jax_enable_x64))
        if key in _BELIEFS and self.reuse:
            _BELIEFS.move_to_end(key)
        else:
            _BELIEFS[key] = jit(jax.vmap(player.init_belief_one)).lower(
                keys, params.answers, truths, seeds).compile()
            while len(_BELIEFS) > _BELIEFS_MAX:
                _BELIEFS.popitem(last=False)
        self._belief = _BELIEFS[key]
        agent_init = jax.vmap(player.agent.init_state, axis_size=keys.shape[0])
        self._agent = jit(agent_init).lower(params.agent).compile()
        states, beliefs = self._belief.out_info
        return states, (beliefs, self._agent.out_info)

    def __call__(self, keys: jax.Array, params: PlayParams, truths: jax.Array,
                 seeds: jax.Array):
        if self._belief is None:
            raise RuntimeError("BatchInit.compile(...) first")
        states, beliefs = self._belief(keys, params.answers, truths, seeds)
        return states, (beliefs, self._agent(params.agent))


__all__ = ["BatchInit"]
