"""Levers for bayes on Grand et al.'s protocol, on training seeds, paired with bayes.

    python experiments/battleship/lookahead/grand_levers.py            # seeds 0-11, 216 games

Grand's boards (colour and sunk feedback, noiseless answers), importance belief with
P = 1,000, training seed indices 0-11. Every lever is played on the same games as bayes:

- `answer_noise`: the ε of the captain's answer model (bayes's 0.1 is Grand's), lower because
  the environment's answers are noiseless, and higher (a less confident belief asks more; one
  compiled sweep);
- `probe`: a question about the one cell bayes is about to shoot ("is there a ship at D4?"),
  asked instead of the shot when its hit probability is below θ and a question is left; a
  noiseless answer turns a possible miss into a question;
- `pool`: bayes's candidate questions widened by every axis-aligned rectangle of at most 9
  cells (751 regions), or by every rectangle (1,296), on top of its DSL pool of 339;
- `lines`: the pool widened by each hit cell's horizontal and vertical unshot neighbours, within
  1 or 2 cells (two regions a hit cell and reach: "is the ship at D4 horizontal?", roughly);
  the misses next to a wounded ship are the largest class of bayes's (`grand-misses.md`);
- `gamma_noise`: bayes's γ (0.97, 1.0, 1.03) crossed with the answer model's ε (0.1, 0.001);
- `pressure`: γ moved by the questions left per ship cell still unhit, ρ:
  γ + β (ρ − 1.2), β from −0.05 to 0.2 (β = 0 is bayes; 1.2 is about 15 questions over a
  board's 12.6 cells);
- `phase`: one γ while a ship is hit and not yet sunk, another while none is (questions
  asked while a ship is wounded find cells that shots near it would find anyway);
- `hit_gain`: questions scored by EIG + λ (E[max p | answer] − max p), the gain of the next
  shot's hit probability added to the information (λ = 1000: the gain alone; λ of ±0.01 and
  ±0.1: a small nudge either way among questions of about the same information);
- `shot_info`: bayes's shot moved to the unshot cell of the largest p + κ I, with I the
  colour information of a hit there (p H(colour | hit)) or, `full`, the whole outcome's
  (H_b(p) + p H(colour | hit)): on Grand's boards a hit tells which ship it is;
- `questions`: the question budget raised from 15 to 25, 40 and 64, at γ 0.95 and 1.0 (not a
  captain for Grand's game, which allows 15: how much more questions would be worth).

Writes `grand-levers-216-games.csv.gz` and `grand-levers-216-table.md` beside this file
(ΔF1 by `bsjax.core.stats.paired_bootstrap`); `--table-only` rebuilds the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import time
from unittest import mock

import chex
import jax.numpy as jnp
import numpy as np
import pandas as pd

from bsjax.battleship import config
from bsjax.battleship.agents import bayes
from bsjax.battleship.config import GRAND
from bsjax.battleship.game import bitboard
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.harness import api
from bsjax.battleship.planning import eig, scoring
from bsjax.battleship.types import ASK, SHOOT, Action
from bsjax.core.stats import paired_bootstrap

HERE = pathlib.Path(__file__).parent
GAMES, TABLE = HERE / "grand-levers-216-games.csv.gz", HERE / "grand-levers-216-table.md"
SEEDS = 12
SETUP = dict(protocol="grand", sampler="importance", particles=1000, boards="all", seeds=SEEDS,
             batch_size=54, progress=False)


@chex.dataclass(frozen=True)
class ProbeParams:
    """bayes's params and θ `[]` float32: probe a shot's cell when its p is below θ."""

    gamma: chex.Array
    scoring: dict
    probe: chex.Array


@dataclasses.dataclass(frozen=True)
class ProbeAgent(bayes.BayesAgent):
    """bayes, but a shot whose hit probability is below `probe` becomes a question about its
    cell while questions are left (bayes's own questions are kept)."""

    name = "bayes-probe"

    def default_params(self) -> ProbeParams:
        base = super().default_params()
        return ProbeParams(gamma=base.gamma, scoring=base.scoring, probe=jnp.float32(0.0))

    def decide(self, key, params, view, sampler, belief, state):
        action, p_cell, state = super().decide(
            key, bayes.BayesParams(gamma=params.gamma, scoring=params.scoring), view, sampler,
            belief, state)
        cell_bits = bitboard.single(action.cell, self.config.n_words)
        probe = ((action.kind == SHOOT) & (p_cell < params.probe) & view.can_ask
                 & ~bayes.already_asked(cell_bits[None], view)[0])
        return Action(kind=jnp.where(probe, ASK, action.kind).astype(jnp.int32),
                      cell=action.cell, question_id=jnp.where(probe, -1, action.question_id),
                      question_bits=jnp.where(probe, cell_bits, action.question_bits)
                      ), p_cell, state


def rectangles(max_cells: int) -> np.ndarray:
    """`[R, W]` uint32: every axis-aligned rectangle of the 8 × 8 board of at most `max_cells`."""
    masks = []
    for r0 in range(8):
        for r1 in range(r0, 8):
            for c0 in range(8):
                for c1 in range(c0, 8):
                    if (r1 - r0 + 1) * (c1 - c0 + 1) <= max_cells:
                        mask = np.zeros((8, 8), bool)
                        mask[r0:r1 + 1, c0:c1 + 1] = True
                        masks.append(mask.ravel())
    return bitboard.pack_np(np.array(masks))


def widened_pool(extra):
    """bayes's `candidate_regions` with the `[R, W]` regions `extra(hit_cells, unknown)`
    appended (template index -1)."""
    dsl = bayes.candidate_regions

    def pool(config, hit_cells, unknown):
        regions, template = dsl(config, hit_cells, unknown)
        more = extra(hit_cells, unknown)
        return (jnp.concatenate([regions, more]),
                jnp.concatenate([template, jnp.full(more.shape[0], -1, jnp.int32)]))
    return pool


@dataclasses.dataclass(frozen=True)
class WidePoolAgent(bayes.BayesAgent):
    """bayes whose candidate questions also hold every rectangle of at most `max_cells` cells
    (a static field: each pool is its own program)."""

    max_cells: int = 9
    name = "bayes-wide-pool"

    def decide(self, key, params, view, sampler, belief, state):
        # bayes's decide reads the module's pool function when it is traced.
        fixed = jnp.asarray(rectangles(self.max_cells))
        with mock.patch.object(bayes, "candidate_regions", widened_pool(lambda *_: fixed)):
            return super().decide(key, params, view, sampler, belief, state)


def line_masks(rows: int, cols: int, reach: int) -> np.ndarray:
    """`[2 C, C]` bool: for each anchor cell, the cells within `reach` of it along its row, then
    along its column (the anchor left out)."""
    masks = np.zeros((2, rows * cols, rows * cols), bool)
    for row in range(rows):
        for col in range(cols):
            for step in [s * d for d in range(1, reach + 1) for s in (-1, 1)]:
                if 0 <= col + step < cols:
                    masks[0, row * cols + col, row * cols + col + step] = True
                if 0 <= row + step < rows:
                    masks[1, row * cols + col, (row + step) * cols + col] = True
    return masks.reshape(-1, rows * cols)


@dataclasses.dataclass(frozen=True)
class LinesAgent(bayes.BayesAgent):
    """bayes whose candidate questions also hold, for every hit cell, its unshot neighbours along
    its row and along its column within `reach` (a static field)."""

    reach: int = 1
    name = "bayes-lines"

    def decide(self, key, params, view, sampler, belief, state):
        masks = np.concatenate([line_masks(self.config.rows, self.config.cols, r)
                                for r in range(1, self.reach + 1)])               # [R, C]
        anchors = np.arange(masks.shape[0]) % self.config.n_cells

        def lines(hit_cells, unknown):
            return bitboard.pack(jnp.asarray(masks) & unknown[None, :] & hit_cells[anchors][:, None])

        with mock.patch.object(bayes, "candidate_regions", widened_pool(lines)):
            return super().decide(key, params, view, sampler, belief, state)


@chex.dataclass(frozen=True)
class PressureParams:
    """bayes's params, β `[]` float32 and ρ0 `[]` float32: γ + β (ρ − ρ0) is the turn's γ."""

    gamma: chex.Array
    scoring: dict
    beta: chex.Array
    rho0: chex.Array


def questions_per_unhit_cell(config, view) -> jnp.ndarray:
    """ρ `[]` float32: the questions left per ship cell not yet hit (at least one cell)."""
    hits = jnp.sum(bitboard.unpack(view.obs.hit_bits, config.n_cells), dtype=jnp.int32)
    unhit = jnp.maximum(jnp.sum(view.obs.ship_lengths) - hits, 1).astype(jnp.float32)
    return view.questions_left.astype(jnp.float32) / unhit


@dataclasses.dataclass(frozen=True)
class PressureAgent(bayes.BayesAgent):
    """bayes whose ask threshold moves with ρ, the questions left per ship cell not yet hit:
    more eager with questions to spare, more sparing when they run short."""

    name = "bayes-pressure"

    def default_params(self) -> PressureParams:
        base = super().default_params()
        return PressureParams(gamma=base.gamma, scoring=base.scoring, beta=jnp.float32(0.0),
                              rho0=jnp.float32(1.2))

    def decide(self, key, params, view, sampler, belief, state):
        gamma = params.gamma + params.beta * (questions_per_unhit_cell(self.config, view)
                                              - params.rho0)
        return super().decide(key, bayes.BayesParams(gamma=gamma, scoring=params.scoring), view,
                              sampler, belief, state)


@chex.dataclass(frozen=True)
class PhaseParams:
    """bayes's params (γ: no ship wounded) and γ_wounded `[]` float32: a ship hit, not sunk."""

    gamma: chex.Array
    scoring: dict
    gamma_wounded: chex.Array


@dataclasses.dataclass(frozen=True)
class PhaseAgent(bayes.BayesAgent):
    """bayes with its ask threshold γ_wounded while a ship is hit and not yet sunk."""

    name = "bayes-phase"

    def default_params(self) -> PhaseParams:
        base = super().default_params()
        return PhaseParams(gamma=base.gamma, scoring=base.scoring, gamma_wounded=base.gamma)

    def decide(self, key, params, view, sampler, belief, state):
        wounded = jnp.any(bitboard.any_set(view.obs.colour_bits) & ~view.obs.sunk)
        gamma = jnp.where(wounded, params.gamma_wounded, params.gamma)
        return super().decide(key, bayes.BayesParams(gamma=gamma, scoring=params.scoring), view,
                              sampler, belief, state)


@chex.dataclass(frozen=True)
class ShotInfoParams:
    """bayes's params, κ `[]` float32 the weight of a shot's information and full `[]` float32
    (> 0: the whole outcome's entropy; else the colour's alone)."""

    gamma: chex.Array
    scoring: dict
    kappa: chex.Array
    full: chex.Array


def entropy_bits(probabilities: jnp.ndarray, axis: int = 0) -> jnp.ndarray:
    """Σ −q log2 q over `axis`, 0 log 0 = 0."""
    safe = jnp.where(probabilities > 0, probabilities, 1.0)
    return -jnp.sum(probabilities * jnp.log2(safe), axis=axis)


@dataclasses.dataclass(frozen=True)
class ShotInfoAgent(bayes.BayesAgent):
    """bayes whose shot goes to the unshot cell of the largest p + κ I (κ = 0: bayes's MAP cell);
    its questions are bayes's."""

    name = "bayes-shot-info"

    def default_params(self) -> ShotInfoParams:
        base = super().default_params()
        return ShotInfoParams(gamma=base.gamma, scoring=base.scoring, kappa=jnp.float32(0.0),
                              full=jnp.float32(0.0))

    def decide(self, key, params, view, sampler, belief, state):
        action, p_cell, state = super().decide(
            key, bayes.BayesParams(gamma=params.gamma, scoring=params.scoring), view, sampler,
            belief, state)
        spans, weights = sampler.weighted_particles(belief)                  # [P, S], [P]
        ship_cells = jnp.asarray(spans_lib.table_for(self.config).cells)[spans]   # [P, S, C]
        by_ship = jnp.einsum("p,psc->sc", weights / jnp.sum(weights),
                             ship_cells.astype(jnp.float32))                  # [S, C]
        p = jnp.sum(by_ship, axis=0)
        colour = p * entropy_bits(by_ship / jnp.maximum(p, 1e-9))
        info = jnp.where(params.full > 0, eig.binary_entropy(p) + colour, colour)
        cell = jnp.argmax(jnp.where(view.legal_shots, p + params.kappa * info, -jnp.inf))
        cell = jnp.where(action.kind == SHOOT, cell, action.cell).astype(jnp.int32)
        return action._replace(cell=cell), p_cell, state


@scoring.scoring_rule(lam=0.0)
def information_and_hit_gain(q: scoring.QuestionFeatures, params) -> jnp.ndarray:
    """EIG + λ (E_a[max p | a] − max p now): `[K]` values."""
    after = q.p_yes * q.best_after[:, 0] + (1.0 - q.p_yes) * q.best_after[:, 1]
    gain = after - jnp.max(jnp.where(q.unknown, q.p, 0.0))
    return eig.expected_information_gain(q.p_yes, q.epsilon) + params["lam"] * gain


LEVERS = ("answer_noise", "probe", "pool", "lines", "gamma_noise", "pressure", "phase",
          "hit_gain", "shot_info", "questions")


def play(levers=LEVERS) -> None:
    """The games (and wall seconds) of `levers` to GAMES, replacing theirs already there."""
    frames = []

    def add(lever, value, frame, start):
        frames.append(frame.assign(lever=lever, value=value, wall_s=round(time.time() - start)))

    if "answer_noise" in levers:
        start = time.time()
        sweep = api.play("bayes", params={"answer_noise": [0.1, 0.03, 0.01, 0.001, 0.15, 0.2,
                                                          0.3]},
                         **SETUP).to_pandas()
        for value, frame in sweep.groupby("answer_noise"):
            add("answer_noise", value, frame.drop(columns="answer_noise"), start)
    if "probe" in levers:
        start = time.time()
        probes = api.play(ProbeAgent(GRAND), params={"probe": [0.45, 0.6]}, **SETUP).to_pandas()
        for value, frame in probes.groupby("probe"):
            add("probe", value, frame.drop(columns="probe"), start)
    if "pool" in levers:
        for cells in (9, 64):
            start = time.time()
            frame = api.play(WidePoolAgent(GRAND, max_cells=cells), **SETUP).to_pandas()
            add("pool: rectangles up to cells", cells, frame, start)
    if "lines" in levers:
        for reach in (1, 2):
            start = time.time()
            frame = api.play(LinesAgent(GRAND, reach=reach), **SETUP).to_pandas()
            add("lines: reach", reach, frame, start)
    if "gamma_noise" in levers:
        start = time.time()
        sweep = api.play("bayes", params={"answer_noise": [0.1, 0.001],
                                          "gamma": [0.97, 1.0, 1.03]}, **SETUP).to_pandas()
        for (noise, gamma), frame in sweep.groupby(["answer_noise", "gamma"]):
            add(f"gamma_noise: answer_noise {noise:g}, gamma", gamma,
                frame.drop(columns=["answer_noise", "gamma"]), start)
    if "pressure" in levers:
        start = time.time()
        sweep = api.play(PressureAgent(GRAND), params={"beta": [-0.05, 0.05, 0.1, 0.2]},
                         **SETUP).to_pandas()
        for value, frame in sweep.groupby("beta"):
            add("pressure: beta", value, frame.drop(columns="beta"), start)
    if "phase" in levers:
        start = time.time()
        sweep = api.play(PhaseAgent(GRAND), params={"gamma": [0.95, 1.0],
                                                    "gamma_wounded": [0.85, 0.9, 0.95, 1.0]},
                         **SETUP).to_pandas()
        for (gamma, wounded), frame in sweep.groupby(["gamma", "gamma_wounded"]):
            if not (np.isclose(gamma, 0.95) and np.isclose(wounded, 0.95)):  # bayes
                add(f"phase: gamma {gamma:g}, gamma_wounded", wounded,
                    frame.drop(columns=["gamma", "gamma_wounded"]), start)
    if "hit_gain" in levers:
        start = time.time()
        sweep = api.play(bayes.BayesAgent(GRAND, rule=information_and_hit_gain),
                         params={"lam": [0.5, 2.0, 8.0, 1000.0, -0.1, -0.01, 0.01, 0.1]},
                         **SETUP).to_pandas()
        for value, frame in sweep.groupby("lam"):
            add("hit_gain: lambda", value, frame.drop(columns="lam"), start)
    if "shot_info" in levers:
        start = time.time()
        sweep = api.play(ShotInfoAgent(GRAND), params={"kappa": [0.02, 0.05, 0.15, 0.4],
                                                      "full": [0.0, 1.0]}, **SETUP).to_pandas()
        for (full, kappa), frame in sweep.groupby(["full", "kappa"]):
            add(f"shot_info: {'outcome' if full else 'colour'}, kappa", kappa,
                frame.drop(columns=["kappa", "full"]), start)
    if "questions" in levers:
        for budget in (25, 40, 64):
            start = time.time()
            grand = dataclasses.replace(GRAND, max_questions=budget)
            # The harness builds its game from the protocol's name: the raised budget is
            # swapped in for these games only.
            with mock.patch.dict(config.PROTOCOLS, {"grand": grand}):
                sweep = api.play(bayes.BayesAgent(grand), params={"gamma": [0.95, 1.0]},
                                 **SETUP).to_pandas()
            for gamma, frame in sweep.groupby("gamma"):
                add(f"questions: budget {budget}, gamma", gamma, frame.drop(columns="gamma"), start)
    if GAMES.exists():  # the other levers' games stay
        kept = pd.read_csv(GAMES)
        frames.insert(0, kept[~kept.lever.str.split(":").str[0].isin(levers)])
    pd.concat(frames).to_csv(GAMES, index=False)


def table() -> str:
    """The paired table of GAMES (bayes: answer_noise 0.1), the levers in `LEVERS` order."""
    order = {lever: i for i, lever in enumerate(LEVERS)}
    games = pd.read_csv(GAMES)
    games = games.sort_values("lever", key=lambda s: s.str.split(":").str[0].map(order),
                              kind="stable")
    key = ["board", "seed"]
    base = games[(games.lever == "answer_noise") & np.isclose(games.value, 0.1)]
    base = base.set_index(key).sort_index()
    lines = [f"Grand protocol, importance belief P = 1000, training seeds 0-{SEEDS - 1}, "
             f"{len(base)} paired games; bayes is answer_noise 0.1", "",
             "| lever | value | F1 | completion | shots | questions | ΔF1 vs bayes [95% CI] "
             "| wall s |", "|---|---|---|---|---|---|---|---|"]
    for (lever, value), g in games.groupby(["lever", "value"], sort=False):
        g = g.set_index(key).sort_index()
        assert g.index.equals(base.index)
        delta = paired_bootstrap(g.f1.to_numpy(), base.f1.to_numpy())
        lines.append(f"| {lever} | {value:g} | {g.f1.mean():.4f} | {g.won.mean():.1%} "
                     f"| {g.shots.mean():.2f} | {g.questions.mean():.2f} "
                     f"| {delta.mean:+.4f} [{delta.low:+.4f}, {delta.high:+.4f}] "
                     f"| {g.wall_s.iloc[0]} |")
    return "\n".join(lines) + "\n"


def table_cli(doc: str, play_all, make_table, table_path: pathlib.Path) -> None:
    """The command line of a script with one table: play (unless `--table-only`), then write
    and print the table."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--table-only", action="store_true",
                        help="rebuild the table from the committed games; play nothing")
    if not parser.parse_args().table_only:
        play_all()
    table_path.write_text(make_table())
    print(table_path.read_text(), end="")


def lever_cli(doc: str, levers, play_levers, make_table, table_path: pathlib.Path) -> None:
    """The command line of a lever script: play some `levers` (the others' games stay), then
    write and print the table."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--table-only", action="store_true",
                        help="rebuild the table from the committed games")
    parser.add_argument("--levers", default=",".join(levers),
                        help=f"play only these of {', '.join(levers)} (the others' games stay)")
    args = parser.parse_args()
    chosen = tuple(args.levers.split(","))
    if not set(chosen) <= set(levers):
        raise SystemExit(f"--levers takes some of {', '.join(levers)}")
    if not args.table_only:
        play_levers(chosen)
    table_path.write_text(make_table())
    print(table_path.read_text(), end="")


def main() -> None:
    lever_cli(__doc__, LEVERS, play, table, TABLE)


if __name__ == "__main__":
    main()
