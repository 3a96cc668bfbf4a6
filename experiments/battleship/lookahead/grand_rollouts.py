"""Rollouts of bayes over posterior-sampled boards, on Grand et al.'s protocol: does a one-step
policy improvement of bayes's ask-or-shoot decision gain?

    python experiments/battleship/lookahead/grand_rollouts.py            # seeds 0-2, 54 games

Each game is played twice from the same keys, by bayes (importance belief, P = 1,000) and by
the rollout captain: bayes, except that whenever bayes would shoot while a question is left,
N = 32 boards are drawn from the belief (its particles reweighted to a near-noiseless answer
model, ε = 0.01, which is about calibrated on Grand's boards: `grand-belief-216-table.md`), and
each is played to its end twice by bayes, once after asking bayes's question now and once
after taking bayes's shot, with the same keys on both branches. If asking saves shots by more
than 1.5 standard errors of the mean paired difference, the captain asks.

The games are played one at a time on the host (the rollouts of a decision are one vmapped,
jitted program over the N boards); the keys are this script's own, so bayes's games here are
not the harness's. Writes `grand-rollouts-54-games.csv` and `grand-rollouts-54-table.md`
beside this file; `--table-only` rebuilds the table.
"""

from __future__ import annotations

import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from grand_levers import table_cli  # the script beside this one

from bsjax.battleship.belief.importance import normalised_weights
from bsjax.battleship.config import GRAND
from bsjax.battleship.game import rules, suites
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.harness import run_config
from bsjax.battleship.harness.run_config import RunConfig
from bsjax.battleship.types import ASK, SHOOT
from bsjax.core.stats import paired_bootstrap

HERE = pathlib.Path(__file__).parent
GAMES, TABLE = HERE / "grand-rollouts-54-games.csv", HERE / "grand-rollouts-54-table.md"
SEEDS, N_BOARDS, Z, SHARP = 3, 32, 1.5, 0.01

PLAYER = run_config.make_player(RunConfig(agent="bayes", protocol="grand",
                                          sampler="importance", particles=1000), GRAND)
PARAMS = PLAYER.default_params()
init = jax.jit(PLAYER.init_one)
turn = jax.jit(PLAYER.turn_one)
act = jax.jit(PLAYER.act_one)


@jax.jit
def bayes_action(key, state, carry):
    belief, agent_state = carry
    action, _, _ = PLAYER.agent.decide(key, PARAMS.agent, PLAYER.env.observe(state),
                                       PLAYER.sampler, belief, agent_state)
    return action


@jax.jit
def posterior_boards(key, state, belief):
    """`[N, S]` spans drawn from the belief's particles, reweighted from the modelled ε to SHARP
    (a particle's weight tells how many answers it contradicts)."""
    answers = belief.answers
    asked = state.obs.n_questions.astype(jnp.float32)
    log_w = jnp.where(belief.valid, belief.log_weights, 0.0)
    contradicted = (asked * answers.log_match - log_w) / (answers.log_match - answers.log_mismatch)
    sharp = -contradicted * jnp.log((1.0 - SHARP) / SHARP)
    weights = normalised_weights(jnp.where(belief.valid, sharp, -jnp.inf), belief.valid)
    return belief.spans[jax.random.choice(key, weights.shape[0], (N_BOARDS,), p=weights)]


@jax.jit
def rollout_shots(key, state, carry, action, boards):
    """`[N]` shots bayes takes to finish each of `boards` as the truth, after `action`."""
    def one(k, spans):
        truth = state.replace(truth_spans=spans,
                              truth_bits=spans_lib.board_bits(GRAND, spans[None])[0])
        k_act, k_turns = jax.random.split(k)
        game, game_carry, _ = PLAYER.act_one(k_act, PARAMS, truth, carry, action)

        def body(i, game_and_carry):
            return PLAYER.turn_one(jax.random.fold_in(k_turns, i), PARAMS, *game_and_carry)[:2]

        game, _ = jax.lax.fori_loop(0, GRAND.max_turns, body, (game, game_carry))
        return game.shots
    return jax.vmap(one)(jax.random.split(key, N_BOARDS), boards)


def play_game(board, index: int, key, rollouts: bool) -> dict:
    state, carry = init(jax.random.fold_in(key, 1 << 20), PARAMS,
                        jnp.asarray(board.spans, jnp.int32), jnp.int32(index))
    switches = 0
    for t in range(GRAND.max_turns):
        k = jax.random.fold_in(key, t)
        if rollouts and bool(PLAYER.env.observe(state).can_ask):
            action = bayes_action(jax.random.fold_in(k, 7), state, carry)
            if int(action.kind) == SHOOT:
                boards = posterior_boards(jax.random.fold_in(k, 8), state, carry[0])
                ask = action._replace(kind=jnp.int32(ASK))
                same = jax.random.fold_in(k, 9)  # common random numbers on both branches
                saved = np.asarray(rollout_shots(same, state, carry, ask, boards)
                                   - rollout_shots(same, state, carry, action, boards), float)
                if saved.mean() < -Z * saved.std(ddof=1) / np.sqrt(saved.size):
                    state, carry, _ = act(k, PARAMS, state, carry, ask)
                    switches += 1
                    if bool(state.done):
                        break
                    continue
        state, carry, _ = turn(k, PARAMS, state, carry)
        if bool(state.done):
            break
    return {"f1": float(rules.f1_score(state.shots, state.hits,
                                       rules.n_ship_cells(GRAND, state))),
            "won": bool(state.won), "shots": int(state.shots),
            "questions": int(state.questions), "switches": switches}


def play() -> None:
    rows, start = [], time.time()
    for seed in range(SEEDS):
        for index, board in enumerate(suites.grand_suite()):
            key = jax.random.key(10_000 * seed + index)
            for captain in ("bayes", "rollouts"):
                rows.append({"board": board.board_id, "seed": seed, "captain": captain,
                             **play_game(board, index, key, captain == "rollouts")})
            print(f"seed {seed} {board.board_id}: F1 {rows[-2]['f1']:.3f} / {rows[-1]['f1']:.3f}"
                  f" ({time.time() - start:.0f} s)", flush=True)
    frame = pd.DataFrame(rows)
    frame.to_csv(GAMES, index=False)


def table() -> str:
    games = pd.read_csv(GAMES)
    bayes = games[games.captain == "bayes"].set_index(["board", "seed"]).sort_index()
    lines = [f"Grand protocol, importance belief P = 1000, seeds 0-{SEEDS - 1}, {len(bayes)} paired "
             f"games (this script's keys); rollouts: N = {N_BOARDS} boards a decision, ask when "
             f"asking saves shots by more than {Z} standard errors", "",
             "| captain | F1 | completion | shots | questions | asks in place of bayes's shot "
             "| ΔF1 vs bayes [95% CI] |", "|---|---|---|---|---|---|---|"]
    for captain, g in games.groupby("captain", sort=False):
        g = g.set_index(["board", "seed"]).sort_index()
        delta = paired_bootstrap(g.f1.to_numpy(), bayes.f1.to_numpy())
        lines.append(f"| {captain} | {g.f1.mean():.4f} | {g.won.mean():.1%} | "
                     f"{g.shots.mean():.2f} | {g.questions.mean():.2f} | "
                     f"{g.switches.mean():.2f} | {delta.mean:+.4f} [{delta.low:+.4f}, "
                     f"{delta.high:+.4f}] |")
    return "\n".join(lines) + "\n"


def main() -> None:
    table_cli(__doc__, play, table, TABLE)


if __name__ == "__main__":
    main()
