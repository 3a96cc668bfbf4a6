"""L1 beliefs: samplers over ship placements behind one interface.

Every sampler is a frozen dataclass (static config) with
  `init(key, obs, game_seed) -> state`, `update(key, state, obs) -> state`,
  `hit_probability(state) -> [C] float32`, `weighted_particles(state) -> ([P, S], [P])`,
all written for ONE game and vmapped over games by the harness.
"""

from __future__ import annotations

from bsjax.battleship.config import GameConfig


def make_sampler(name: str, config: GameConfig, particles: int = 500, reference_rng: bool = False,
                 sweeps: int = 4, mh_kernel: str = "auto", prior: str = "proposal"):
    """The sampler called `name` (chain, exact, importance, particles) with `particles` samples;
    `sweeps` (MH sweeps per observation) applies to the particle sampler only, `mh_kernel`
    (how the MH moves run: `mh_kernel.MODES`) to the particles and the chain, `prior` (the
    prior its weights target: `importance.PRIORS`) to the importance sampler. `exact`
    (`belief.enumerated`) scores every placement and draws `particles` posterior samples; it
    raises ValueError for a config it cannot serve (`enumerated.unsupported`)."""
    if name == "chain":
        from bsjax.battleship.belief.chain import ChainSampler
        return ChainSampler(config, n_samples=particles, reference_rng=reference_rng,
                            mh_kernel=mh_kernel)
    if name == "exact":
        from bsjax.battleship.belief.enumerated import ExactSampler
        return ExactSampler(config, n_particles=particles)
    if name == "importance":
        from bsjax.battleship.belief.importance import ImportanceSampler
        return ImportanceSampler(config, n_particles=particles, prior=prior)
    if name == "particles":
        from bsjax.battleship.belief.particles import ParticleSampler
        return ParticleSampler(config, n_particles=particles, sweeps=sweeps, mh_kernel=mh_kernel)
    raise ValueError(f"unknown sampler {name!r} (choose from chain, exact, importance, particles)")
