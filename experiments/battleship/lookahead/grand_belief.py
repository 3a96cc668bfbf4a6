"""Is bayes limited by its belief on Grand et al.'s protocol? Calibration, prior, size; and
questions chosen by what the next shot leaves unknown.

    python experiments/battleship/lookahead/grand_belief.py            # seeds 0-11, 216 games

Grand's boards (colour and sunk feedback, noiseless answers), bayes, training seed indices
0-11, every row paired with bayes (importance belief, P = 1,000, its proposal as the prior,
modelled answer noise ε = 0.1). The levers:

- `prior`: the importance weights corrected to the uniform prior over labelled placements
  (`--prior uniform`), or to the prior the suite's boards were drawn from (Grand's
  `FastSampler` run on an empty board without a ship tracker: ship 1, 2, 3, 4 in turn, each a
  uniform span of any length among those that do not overlap the ships before it), each at
  ε = 0.1 and 0.01 (the environment's answers are noiseless);
- `particles`: P = 8,000 and 32,000 particles instead of 1,000, at ε = 0.1 and 0.01;
- `unsunk`: the evidence of a ship hit and not sunk, which the proposal leaves out (as Grand's
  does): such a ship cannot be exactly its revealed cells, else it would have been reported sunk;
  at ε = 0.1 and 0.01;
- `conditional`: the question scored by the information it leaves after the next shot's outcome,
  Σ_o P(o) EIG(question | o), o the miss or the colour hit at bayes's MAP cell, mixed with
  bayes's EIG: (1 − μ) EIG + μ EIG(· | o) (μ = 1: the conditional information alone). Bayes
  asks and shoots in turn; a question whose answer the next shot would give anyway is worth less.

Each row also keeps its shots' hit probabilities, so the table shows how well calibrated each
belief is (hit rate against p). Writes `grand-belief-216-games.csv.gz`,
`grand-belief-216-shots.csv.gz` and `grand-belief-216-table.md` beside this file;
`--table-only` rebuilds the table.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import time
from unittest import mock

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from grand_levers import lever_cli  # the script beside this one

from bsjax.battleship import belief as belief_lib
from bsjax.battleship.agents import bayes
from bsjax.battleship.belief.importance import ImportanceSampler, span_words
from bsjax.battleship.config import GRAND
from bsjax.battleship.game import bitboard
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.harness import api
from bsjax.battleship.planning import scoring, sim
from bsjax.core import fastpath
from bsjax.core.stats import paired_bootstrap

HERE = pathlib.Path(__file__).parent
GAMES = HERE / "grand-belief-216-games.csv.gz"
SHOTS = HERE / "grand-belief-216-shots.csv.gz"
TABLE = HERE / "grand-belief-216-table.md"
SEEDS = 12
SETUP = dict(protocol="grand", sampler="importance", particles=1000, boards="all", seeds=SEEDS,
             batch_size=54, progress=False)
BASE = ("bayes", "proposal, answer_noise 0.1")
BINS = (0.0, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0)


@dataclasses.dataclass(frozen=True)
class GeneratorPrior(ImportanceSampler):
    """The importance belief weighted to the prior of Grand's suite: the proposal's probability
    divided out (`prior="uniform"`), then the generator's multiplied in,
    Π_k 1 / |spans of any length that do not overlap ships 1..k−1|."""

    prior: str = "uniform"

    def _draw(self, key, obs, answers):
        state = super()._draw(key, obs, answers)
        overlap, _, every = (jnp.asarray(t) for t in span_words(self.config))

        def log_generator(spans):                                              # [S] -> []
            blocked = jnp.zeros_like(every)
            total = jnp.float32(0.0)
            for ship in range(self.config.n_ships):  # static: the suite's ship order
                free = jnp.sum(jnp.bitwise_count(every & ~blocked), dtype=jnp.int32)
                total = total - jnp.log(free.astype(jnp.float32))
                blocked = blocked | overlap[spans[ship]]
            return total

        log_prior = jax.vmap(log_generator)(state.spans)
        return state.replace(log_weights=state.log_weights + log_prior)


@dataclasses.dataclass(frozen=True)
class UnsunkEvidence(ImportanceSampler):
    """The importance belief whose ships hit and not sunk take no span equal to their revealed
    cells (`belief.exact`'s `unsunk_evidence`)."""

    def _base_masks(self, obs):
        bits = jnp.asarray(spans_lib.table_for(self.config).bits)                # [N, W]
        exact = ~bitboard.any_set(bits[None, :, :] ^ obs.colour_bits[:, None, :])  # [S, N]
        return super()._base_masks(obs) & (obs.sunk[:, None] | ~exact)


def _binary_entropy(p):
    p = jnp.clip(p, 1e-7, 1.0 - 1e-7)
    return -(p * jnp.log2(p) + (1.0 - p) * jnp.log2(1.0 - p))


@chex.dataclass(frozen=True)
class ConditionalParams:
    """bayes's params and μ `[]` float32, the weight of the information left after the next
    shot's outcome (0: bayes)."""

    gamma: chex.Array
    scoring: dict
    mix: chex.Array


@dataclasses.dataclass(frozen=True)
class ConditionalAgent(bayes.BayesAgent):
    """bayes whose question maximises (1 − μ) EIG + μ Σ_o P(o) EIG(· | o), o the outcome (miss,
    or a hit of ship k) of bayes's next shot; Bayes-D's test and the shot are bayes's."""

    name = "bayes-conditional"

    def default_params(self) -> ConditionalParams:
        base = super().default_params()
        return ConditionalParams(gamma=base.gamma, scoring=base.scoring, mix=jnp.float32(0.0))

    def decide(self, key, params, view, sampler, belief, state):
        del key
        cfg = self.config
        turn = scoring.summarize_turn(cfg, view, sampler, belief)
        spans, _ = sampler.weighted_particles(belief)                           # [P, S]
        parts, cell, eps = turn.parts, turn.best, turn.answers.epsilon
        regions, template = bayes.candidate_regions(cfg, turn.hit_cells, turn.unknown)
        answers = sim.answers(regions, parts).astype(jnp.float32)               # [K, P]
        valid = bitboard.any_set(regions) & ~bayes.already_asked(regions, view)
        covers = jnp.asarray(spans_lib.table_for(cfg).cells, bool)[spans, cell]  # [P, S]
        outcome = jnp.where(jnp.any(covers, 1), 1 + jnp.argmax(covers, 1), 0)   # [P]
        mass = ((outcome[:, None] == jnp.arange(cfg.n_ships + 1)[None, :])
                * parts.weights[:, None])                                        # [P, O]
        p_outcome = jnp.sum(mass, axis=0)                                        # [O]
        p_yes_given = (answers @ mass) / jnp.maximum(p_outcome, 1e-9)[None, :]    # [K, O]

        def channel(p_yes):
            return _binary_entropy(eps + (1.0 - 2.0 * eps) * p_yes) - _binary_entropy(eps)

        left = jnp.sum(p_outcome[None, :] * channel(p_yes_given), axis=1)
        gain = (1.0 - params.mix) * channel(answers @ parts.weights) + params.mix * left
        best_q = fastpath.first_argmax(jnp.where(valid, gain, -jnp.inf))
        action, p_cell = bayes.ask_or_shoot(cfg, view, turn, regions, template, valid, best_q,
                                            params.gamma)
        return action, p_cell, state


LEVERS = ("prior", "particles", "unsunk", "conditional")


def _with_sampler(cls):
    """`api.play` builds its sampler by name: `cls` is swapped in for the importance sampler of
    these games only."""
    make = belief_lib.make_sampler

    def make_sampler(name, config, particles=500, *args, **kwargs):
        if name == "importance":
            return cls(config, n_particles=particles)
        return make(name, config, particles, *args, **kwargs)

    return mock.patch.object(api.belief_lib, "make_sampler", make_sampler)


def _shots(results, grid_keys) -> pd.DataFrame:
    turns = results.turns_frame()
    shots = turns[turns.kind == 0]
    return shots[[*grid_keys, "board", "seed", "turn", "hit_probability", "outcome"]].rename(
        columns={"hit_probability": "p", "outcome": "hit"}).round({"p": 5})


def play(levers=LEVERS) -> None:
    """The games and shots of `levers` (and bayes's) to GAMES and SHOTS, replacing theirs."""
    games, shots = [], []

    def sweep(lever, agent, grid, label, context=None, **belief):
        start = time.time()
        with context or contextlib.nullcontext():
            results = api.play(agent, params=grid, **{**SETUP, **belief})
        keys = list(grid)
        frame, shot = results.to_pandas(), _shots(results, keys)
        wall = round(time.time() - start)
        for values, g in frame.groupby(keys, sort=False):
            values = values if isinstance(values, tuple) else (values,)
            name = label(*values)
            games.append(g.drop(columns=keys).assign(lever=lever, setting=name, wall_s=wall))
            match = np.logical_and.reduce([np.isclose(shot[k], v) for k, v in zip(keys, values)])
            shots.append(shot[match].drop(columns=keys).assign(lever=lever, setting=name))

    noise = {"answer_noise": [0.1, 0.01]}
    sweep("bayes", "bayes", noise, lambda e: f"proposal, answer_noise {e:g}")
    if "prior" in levers:
        sweep("prior", "bayes", noise, lambda e: f"uniform, answer_noise {e:g}", prior="uniform")
        sweep("prior", "bayes", noise, lambda e: f"generator, answer_noise {e:g}",
              context=_with_sampler(GeneratorPrior))
    if "particles" in levers:
        for particles in (8000, 32000):
            sweep("particles", "bayes", noise,
                  lambda e, n=particles: f"P = {n:,}, answer_noise {e:g}", particles=particles)
    if "unsunk" in levers:
        sweep("unsunk", "bayes", noise, lambda e: f"unsunk evidence, answer_noise {e:g}",
              context=_with_sampler(UnsunkEvidence))
    if "conditional" in levers:
        sweep("conditional", ConditionalAgent(GRAND), {"mix": [0.2, 1.0]},
              lambda m: f"mu {m:g}")
    _merge(GAMES, pd.concat(games), levers)
    _merge(SHOTS, pd.concat(shots), levers)


def _merge(path: pathlib.Path, new: pd.DataFrame, levers) -> None:
    if path.exists():  # the other levers' rows stay
        kept = pd.read_csv(path)
        new = pd.concat([kept[~kept.lever.isin((*levers, "bayes"))], new])
    new.to_csv(path, index=False)


def table() -> str:
    """The paired table of GAMES and the calibration of SHOTS."""
    order = {lever: i for i, lever in enumerate(("bayes", *LEVERS))}
    games, shots = (pd.read_csv(path).sort_values("lever", key=lambda s: s.map(order),
                                                  kind="stable") for path in (GAMES, SHOTS))
    key = ["board", "seed"]
    base = games[(games.lever == BASE[0]) & (games.setting == BASE[1])].set_index(key).sort_index()
    n_games = len(base)
    lines = [f"Grand protocol, bayes, training seeds 0-{SEEDS - 1}, {n_games} paired games; "
             f"bayes is the importance belief with P = 1,000, its proposal as the prior and "
             f"answer_noise 0.1", "",
             "| lever | setting | F1 | completion | shots | questions | ΔF1 vs bayes [95% CI] "
             "| misses a game: expected from p / played | wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for (lever, setting), g in games.groupby(["lever", "setting"], sort=False):
        g = g.set_index(key).sort_index()
        assert g.index.equals(base.index)
        delta = paired_bootstrap(g.f1.to_numpy(), base.f1.to_numpy())
        s = shots[(shots.lever == lever) & (shots.setting == setting)]
        expected, played = (1.0 - s.p).sum() / n_games, (~s.hit.astype(bool)).sum() / n_games
        lines.append(f"| {lever} | {setting} | {g.f1.mean():.4f} | {g.won.mean():.1%} "
                     f"| {g.shots.mean():.2f} | {g.questions.mean():.2f} "
                     f"| {delta.mean:+.4f} [{delta.low:+.4f}, {delta.high:+.4f}] "
                     f"| {expected:.2f} / {played:.2f} | {g.wall_s.iloc[0]} |")
    labels = [f"{lo:g}–{hi:g}" for lo, hi in zip(BINS[:-1], BINS[1:])]
    lines += ["", "Calibration: the hit rate of the shots whose p (the belief's hit probability "
              "of the cell shot) fell in each bin, and the shots in it", "",
              "| lever | setting | " + " | ".join(f"p {b}" for b in labels) + " |",
              "|---|---|" + "---|" * len(labels)]
    for (lever, setting), s in shots.groupby(["lever", "setting"], sort=False):
        if lever == "conditional":
            continue
        bins = pd.cut(s.p, BINS, labels=labels, include_lowest=True)
        cells = [f"{g.mean():.2f} ({len(g)})" if len(g) else "–"
                 for _, g in s.hit.astype(bool).groupby(bins, observed=False)]
        lines.append(f"| {lever} | {setting} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    lever_cli(__doc__, LEVERS, play, table, TABLE)


if __name__ == "__main__":
    main()
