"""How much could a one-step policy improvement of bayes gain on Grand et al.'s protocol?

    python experiments/battleship/lookahead/grand_advantage.py               # seed 0, 18 games
    python experiments/battleship/lookahead/grand_advantage.py --seeds 1,2   # more seeds
    python experiments/battleship/lookahead/grand_advantage.py --improve     # play the improvement
    python experiments/battleship/lookahead/grand_advantage.py --diversity   # boards drawn, seed 0

bayes (importance belief, P = 1,000) plays its own games. At every decision the script also
values, by rollouts, the actions bayes could have taken instead: its three most likely cells and
its three best-scored questions (while questions are left). Each candidate is taken on N = 32
boards and each board is played to its end by bayes, with the same keys for every candidate
(common random numbers). A candidate's value is the mean final F1 of its rollouts. The boards
are drawn (`--boards`) from a fresh importance draw of 32,768 particles (`fresh`, the default)
or from the belief's own 1,000 particles (`belief`, as in `grand_rollouts.py`), both reweighted
to ε = 0.01; late in a game the belief's own particles hold only a few distinct boards
(`--diversity` counts them).

The advantage of the best candidate over bayes's own action is cross-fitted: the best is chosen
on half of the boards and measured against bayes's action on the other half, and the two
halves' estimates are averaged, so choosing the best does not bias it upwards. Summed over a
game's decisions it estimates, to first order (the performance-difference identity along
the trajectory played), how much F1 the captain that takes the best candidate at every
decision would add to that game. The in-sample maximum (chosen and measured on the same
boards) is reported beside it as an upper-biased figure.

With `--improve` the script plays that improved captain itself, on bayes's keys: at every
decision it takes the candidate with the largest mean gain over bayes's action on all 32
boards, if that gain exceeds Z = 1 standard error of the paired differences, else bayes's.
Seeds from 100 on are held out (the table reports them apart).

Writes, beside this file, one row per decision and one file per board source and seed (so seeds
can be played by separate processes): `grand-advantage-<boards>-s<seed>.csv.gz` (bayes's games)
or `grand-improved-<boards>-s<seed>.csv.gz` (`--improve`); `grand-advantage-diversity.csv.gz`;
and `grand-advantage-table.md`, which `--table-only` rebuilds.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from grand_rollouts import PARAMS, PLAYER, act, init, posterior_boards, turn  # beside this
from grand_rollouts import play_game as play_rollouts_game

from bsjax.battleship.agents import bayes
from bsjax.battleship.belief.base import answer_model
from bsjax.battleship.belief.importance import normalised_weights
from bsjax.battleship.config import GRAND
from bsjax.battleship.game import bitboard, rules, suites
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.planning import scoring, sim
from bsjax.battleship.planning.scoring import summarize_turn
from bsjax.battleship.types import ASK, SHOOT, Action
from bsjax.core.stats import paired_bootstrap

HERE = pathlib.Path(__file__).parent
DECISIONS = "grand-advantage-{boards}-s{seed}.csv.gz"
IMPROVED = "grand-improved-{boards}-s{seed}.csv.gz"
DIVERSITY = "grand-advantage-diversity.csv.gz"
BOARDS = ("belief", "fresh")
FRESH_PARTICLES, SHARP = 32_768, 0.01
FRESH = dataclasses.replace(PLAYER.sampler, n_particles=FRESH_PARTICLES)
TABLE = HERE / "grand-advantage-table.md"
N_SHOTS, N_QUESTIONS, N_ROLLOUTS = 3, 3, 32
Z = 1.0  # the improved captain leaves bayes only for a gain of Z standard errors
KINDS = ("bayes",) + ("shot",) * N_SHOTS + ("question",) * N_QUESTIONS


@jax.jit
def fresh_boards(key, state):
    """`[N, S]` spans drawn from a fresh importance draw of FRESH_PARTICLES particles weighted
    at ε = SHARP: near-uniform over the boards consistent with every observation, where the
    belief's own 1,000 particles hold only a handful of those late in a game."""
    k_draw, k_pick = jax.random.split(key)
    draw = FRESH.init(k_draw, state.obs, jnp.int32(0), answer_model(GRAND, epsilon=SHARP))
    weights = normalised_weights(draw.log_weights, draw.valid)
    return draw.spans[jax.random.choice(k_pick, FRESH_PARTICLES, (N_ROLLOUTS,), p=weights)]


@jax.jit
def candidates(state, carry) -> Action:
    """`[1 + N_SHOTS + N_QUESTIONS]` actions: bayes's own, its most likely cells, its best-scored
    questions. A question that cannot be asked is replaced by bayes's action (a duplicate, which
    common random numbers value exactly as bayes's)."""
    belief, agent_state = carry
    view = PLAYER.env.observe(state)
    agent = PLAYER.agent
    summary = summarize_turn(GRAND, view, PLAYER.sampler, belief)
    own, _ = agent.act(PARAMS.agent, view, summary)
    regions, template = bayes.candidate_regions(GRAND, summary.hit_cells, summary.unknown)
    p_yes = sim.answers(regions, summary.parts).astype(jnp.float32) @ summary.parts.weights
    valid = bitboard.any_set(regions) & ~bayes.already_asked(regions, view)
    features = scoring.region_features(GRAND, summary, regions, p_yes,
                                       coarse=summary.hits == 0)
    gain = jnp.where(valid, agent.rule(features, PARAMS.agent.scoring), -jnp.inf)
    _, best_q = jax.lax.top_k(gain, N_QUESTIONS)
    _, best_cells = jax.lax.top_k(jnp.where(summary.unknown, summary.p, -1.0), N_SHOTS)
    askable = view.can_ask & jnp.isfinite(gain[best_q])

    def pick(use, new, old):
        return jnp.where(use.reshape(use.shape + (1,) * (new.ndim - 1)), new, old)

    n_q = N_QUESTIONS
    kind = jnp.concatenate([own.kind[None], jnp.full(N_SHOTS, SHOOT, jnp.int32),
                            pick(askable, jnp.full(n_q, ASK, jnp.int32), own.kind[None])])
    cell = jnp.concatenate([own.cell[None], best_cells.astype(jnp.int32),
                            pick(askable, jnp.full(n_q, summary.best, jnp.int32), own.cell[None])])
    qid = jnp.concatenate([own.question_id[None], jnp.full(N_SHOTS, -1, jnp.int32),
                           pick(askable, template[best_q], own.question_id[None])])
    qbits = jnp.concatenate([own.question_bits[None],
                             jnp.zeros((N_SHOTS,) + own.question_bits.shape, jnp.uint32),
                             pick(askable, regions[best_q], own.question_bits[None])])
    return Action(kind=kind, cell=cell, question_id=qid, question_bits=qbits)


@jax.jit
def rollout_f1(key, state, carry, actions: Action, boards):
    """`[C, N]` final F1 of bayes finishing each of `boards` (`[N, S]` spans) as the truth after
    each of the C `actions`; the keys depend on the board only (common random numbers)."""
    keys = jax.random.split(key, boards.shape[0])

    def one(action, k, spans):
        truth = state.replace(truth_spans=spans,
                              truth_bits=spans_lib.board_bits(GRAND, spans[None])[0])
        k_act, k_turns = jax.random.split(k)
        game, game_carry, _ = PLAYER.act_one(k_act, PARAMS, truth, carry, action)

        def unfinished(loop):
            return ~loop[1].done & (loop[0] < GRAND.max_turns)

        def body(loop):
            i, g, c = loop
            g, c = PLAYER.turn_one(jax.random.fold_in(k_turns, i), PARAMS, g, c)[:2]
            return i + 1, g, c

        _, game, _ = jax.lax.while_loop(unfinished, body, (jnp.int32(0), game, game_carry))
        return rules.f1_score(game.shots, game.hits, rules.n_ship_cells(GRAND, game))

    over_boards = jax.vmap(one, in_axes=(None, 0, 0))
    return jax.vmap(over_boards, in_axes=(0, None, None))(actions, keys, boards)


def advantages(values: np.ndarray) -> dict:
    """Cross-fitted and in-sample advantage of the best candidate over candidate 0 (bayes),
    from `[C, N]` rollout values."""
    half = values.shape[1] // 2
    a, b = values[:, :half].mean(1), values[:, half:].mean(1)
    best_a, best_b = int(np.argmax(a)), int(np.argmax(b))   # ties go to bayes (index 0)
    crossfit = 0.5 * ((b[best_a] - b[0]) + (a[best_b] - a[0]))
    means = values.mean(1)
    best = int(np.argmax(means))
    return {"crossfit": crossfit, "in_sample": means[best] - means[0], "best": KINDS[best],
            "spread": float(means.max() - means.min())}


def improved_choice(values: np.ndarray) -> int:
    """The candidate the improved captain takes from `[C, N]` rollout values: the one with the
    largest mean gain over bayes's action, if that gain exceeds Z standard errors of its paired
    differences, else bayes's own (0)."""
    diffs = values - values[:1]
    mean = diffs.mean(1)
    se = diffs.std(1, ddof=1) / np.sqrt(diffs.shape[1])
    # A passing gain is > 0 = bayes's own, so bayes (index 0) wins when none passes.
    return int(np.argmax(np.where(mean > Z * se, mean, 0.0)))


def start(board, index: int, seed: int):
    """The key, first state and carry of a game, as `grand_rollouts.play_game` makes them (with
    `rollouts=False` it plays bayes's game on these keys)."""
    key = jax.random.key(10_000 * seed + index)
    state, carry = init(jax.random.fold_in(key, 1 << 20), PARAMS,
                        jnp.asarray(board.spans, jnp.int32), jnp.int32(index))
    return key, state, carry


def play_game(board, index: int, seed: int, boards_from: str,
              improve: bool = False) -> tuple[dict, list[dict]]:
    """One game of bayes (or, with `improve`, of the captain that takes the best candidate),
    with every decision's rollout values summarised. Same keys as bayes's game: the two
    captains play the same game until their first different choice."""
    key, state, carry = start(board, index, seed)
    rows = []
    for t in range(GRAND.max_turns):
        k = jax.random.fold_in(key, t)
        actions = candidates(state, carry)
        k_boards = jax.random.fold_in(k, 8)
        boards = (posterior_boards(k_boards, state, carry[0]) if boards_from == "belief"
                  else fresh_boards(k_boards, state))
        values = np.asarray(rollout_f1(jax.random.fold_in(k, 9), state, carry, actions, boards))
        choice = improved_choice(values) if improve else 0
        rows.append({"board": board.board_id, "seed": seed, "turn": t,
                     "bayes_asks": int(actions.kind[0]) == ASK,
                     "can_ask": bool(PLAYER.env.observe(state).can_ask),
                     "choice": KINDS[choice], **advantages(values)})
        if choice:
            state, carry = act(k, PARAMS, state, carry,
                               jax.tree.map(lambda x, i=choice: x[i], actions))[:2]
        else:
            state, carry = turn(k, PARAMS, state, carry)[:2]
        if bool(state.done):
            break
    f1 = float(rules.f1_score(state.shots, state.hits, rules.n_ship_cells(GRAND, state)))
    return {"board": board.board_id, "seed": seed, "f1": f1}, rows


def diversity(seed: int) -> None:
    """Along bayes's games: how many distinct boards the 32 drawn for a decision hold, from the
    belief's own particles and from the fresh draw (no rollouts)."""
    rows = []
    for index, board in enumerate(suites.grand_suite()):
        key, state, carry = start(board, index, seed)
        for t in range(GRAND.max_turns):
            k = jax.random.fold_in(key, t)
            k_boards = jax.random.fold_in(k, 8)
            row = {"board": board.board_id, "seed": seed, "turn": t,
                   "questions": int(state.questions)}
            for name, drawn in (("belief", posterior_boards(k_boards, state, carry[0])),
                                ("fresh", fresh_boards(k_boards, state))):
                row[name] = len({tuple(b) for b in np.asarray(drawn).tolist()})
            rows.append(row)
            state, carry = turn(k, PARAMS, state, carry)[:2]
            if bool(state.done):
                break
    pd.DataFrame(rows).to_csv(HERE / DIVERSITY, index=False)


def play(seeds: list[int], boards_from: str, improve: bool) -> None:
    files = (IMPROVED if improve else DECISIONS).replace("{boards}", boards_from)
    done = [seed for seed in seeds if (HERE / files.format(seed=seed)).exists()]
    if done:
        raise SystemExit(f"seeds {done} are played already ({files.format(seed=done[0])})")
    start = time.time()
    for seed in seeds:
        rows = []
        for index, board in enumerate(suites.grand_suite()):
            game, decisions = play_game(board, index, seed, boards_from, improve)
            bayes_game = (play_rollouts_game(board, index, start(board, index, seed)[0],
                                             rollouts=False)["f1"] if improve else game["f1"])
            rows += [{**d, "f1": game["f1"], "bayes_f1": bayes_game} for d in decisions]
            gain = sum(d["crossfit"] for d in decisions)
            print(f"seed {seed} {board.board_id}: F1 {game['f1']:.3f}, {len(decisions)} "
                  f"decisions, Σ advantage {gain:+.4f} ({time.time() - start:.0f} s)", flush=True)
        pd.DataFrame(rows).to_csv(HERE / files.format(seed=seed), index=False)


def read(files: str, boards_from: str) -> pd.DataFrame:
    paths = sorted(HERE.glob(files.format(boards=boards_from, seed="*")))
    return pd.concat([pd.read_csv(f) for f in paths]) if paths else pd.DataFrame()


def per_game(decisions: pd.DataFrame) -> pd.DataFrame:
    return decisions.groupby(["board", "seed"]).agg(
        f1=("f1", "first"), bayes_f1=("bayes_f1", "first"), crossfit=("crossfit", "sum"),
        in_sample=("in_sample", "sum"),
        left=("choice", lambda c: (c != "bayes").sum()))


def table() -> str:
    lines = ["bayes on Grand's protocol, importance belief P = 1000, this script's keys. "
             f"Candidates at each decision: bayes's action, its {N_SHOTS} most likely "
             f"cells, its {N_QUESTIONS} best-scored questions; {N_ROLLOUTS} rollouts each, on "
             "boards drawn from the belief's own particles (`belief`) or from a fresh draw of "
             f"{FRESH_PARTICLES:,} (`fresh`), both weighted at ε = {SHARP}.", "",
             "Σ over a game's decisions of the best candidate's advantage over bayes's action "
             "(F1), per game:", "",
             "| boards | along the games of | games | decisions | cross-fitted [95% CI] | in "
             "sample (biased upwards) |", "|---|---|---|---|---|---|"]
    for boards_from in BOARDS:
        for files, captain in ((DECISIONS, "bayes"), (IMPROVED, "the improved captain")):
            d = read(files, boards_from)
            if not len(d):
                continue
            games = per_game(d)
            cross = paired_bootstrap(games.crossfit.to_numpy(), np.zeros(len(games)))
            lines.append(f"| {boards_from} | {captain} | {len(games)} | {len(d)} | "
                         f"{cross.text()} | "
                         f"{games.in_sample.mean():+.4f} |")
    if (HERE / DIVERSITY).exists():
        div = pd.read_csv(HERE / DIVERSITY)
        bands = pd.cut(div.questions, [-1, 4, 9, 14, 15], labels=["0-4", "5-9", "10-14", "15"])
        lines += ["", f"Distinct boards among the {N_ROLLOUTS} drawn for a decision, along bayes's "
                  f"games of seed {div.seed.iloc[0]}, by questions asked so far (mean):", "",
                  "| questions asked | decisions | belief | fresh |", "|---|---|---|---|"]
        for band, part in div.groupby(bands, observed=True):
            lines.append(f"| {band} | {len(part)} | {part.belief.mean():.1f} | "
                         f"{part.fresh.mean():.1f} |")
    lines += ["", f"The improved captain plays: it takes the best candidate when its paired gain "
              f"over bayes's action on all {N_ROLLOUTS} rollouts exceeds {Z} standard error, on "
              "the keys of bayes's games (paired by board and seed):", "",
              "| boards | seeds | games | bayes's F1 | improved F1 | decisions it leaves bayes, "
              "a game | ΔF1 vs bayes [95% CI] |", "|---|---|---|---|---|---|---|"]
    for boards_from in BOARDS:
        improved = read(IMPROVED, boards_from)
        if not len(improved):
            continue
        parts = [("held out" if held_out else "training", part)
                 for held_out, part in improved.groupby(improved.seed >= 100)]
        if len(parts) > 1:
            parts.append(("all", improved))
        for kind, part in parts:
            played = per_game(part)
            delta = paired_bootstrap(played.f1.to_numpy(), played.bayes_f1.to_numpy())
            seeds = ", ".join(map(str, sorted(part.seed.unique())))
            lines.append(f"| {boards_from} | {seeds} ({kind}) | {len(played)} | "
                         f"{played.bayes_f1.mean():.4f} | {played.f1.mean():.4f} | "
                         f"{played.left.mean():.2f} | {delta.text()} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0", help="comma-separated seed indices (training)")
    parser.add_argument("--boards", choices=BOARDS, default="fresh",
                        help="draw the rollouts' boards from the belief's own particles or from "
                             "a fresh, larger draw (default)")
    parser.add_argument("--improve", action="store_true",
                        help="play the captain that takes the best candidate, not bayes")
    parser.add_argument("--diversity", action="store_true",
                        help="count the distinct boards drawn along bayes's games of the first "
                             "seed (no rollouts), then write the table")
    parser.add_argument("--table-only", action="store_true",
                        help="rebuild the table from the committed decisions; play nothing")
    args = parser.parse_args()
    if args.diversity:
        diversity(int(args.seeds.split(",")[0]))
    elif not args.table_only:
        play([int(s) for s in args.seeds.split(",")], args.boards, args.improve)
    TABLE.write_text(table())
    print(TABLE.read_text(), end="")


if __name__ == "__main__":
    main()
