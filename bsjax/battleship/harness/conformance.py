"""The conformance check every captain must pass (pgx's `api_test`, jumanji's
`check_env_does_not_smoke`): a few games played turn by turn through the compiled turn, with
every turn checked against the environment's contract.

    report = check_agent("wma")                    # raises ConformanceError on a failure
    report = check_agent(MyAgent(PAPER), sampler="particles", raise_on_failure=False)

The checks:
- **legal**: every action of a running game is legal in the view it was chosen from
  (`game.env.Env.is_legal`: a shot at a cell not shot before, a question while one is left);
- **finished**: a turn leaves a finished game as it was: its state, belief and agent state;
- **traces**: the turn function is traced once for the whole run (no retrace per turn);
- **finite**: every float of every turn record, and every hit probability, is finite;
- **keys**: nothing reuses a random key (the run is traced and run under
  `jax.debug_key_reuse(True)`, which raises on a reuse).

Host-deciding captains (LM-only) are driven by the uniform LLM backend (a legal reply drawn
uniformly from each call's JSON Schema), so their host path is checked too; gate requests of an
L4 agent are left unanswered (its in-graph part is what is checked).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.battleship import agents as agents_lib
from bsjax.battleship import belief as belief_lib
from bsjax.battleship.config import PAPER, GameConfig
from bsjax.battleship.game import suites
from bsjax.battleship.harness.initial import BatchInit
from bsjax.battleship.harness.player import Player
from bsjax.battleship.types import Action

CHECKS = ("legal", "finished", "traces", "finite", "keys")


def _forward_transposed_keys() -> None:
    """JAX's key-reuse checker has no rule for `transpose`, a pure re-indexing that it should
    forward as it does `reshape`; without one, every vmapped `lax.scan` over keys (the batched
    scan moves the keys' batch axis) reads as a reuse. Register the forwarding rule."""
    try:
        from jax import lax
        from jax.experimental.key_reuse import _core
    except ImportError:  # a JAX without the checker's internals: nothing to register
        return
    _core.key_reuse_signatures.setdefault(lax.transpose_p,
                                          _core.KeyReuseSignature(_core.Forward(0, 0)))


class ConformanceError(AssertionError):
    """A captain broke the contract; the message names the check, the game and the turn."""


@dataclasses.dataclass
class ConformanceReport:
    """What `check_agent` saw.

    Attributes:
      agent, sampler: the names checked.
      games, turns: games played and turns of the longest game.
      actions: actions taken by running games; illegal: of which illegal.
      traces: traces of the turn function.
      failures: check name -> the first failure's description (empty when every check passed).
    """

    agent: str
    sampler: str | None
    games: int
    turns: int
    actions: int
    illegal: int
    traces: int
    failures: dict[str, str]

    @property
    def passed(self) -> bool:
        return not self.failures

    def row(self) -> dict:
        """One table row: every check's verdict and the counts."""
        return {"agent": self.agent, "sampler": self.sampler, "games": self.games,
                "turns": self.turns, "actions": self.actions, "illegal": self.illegal,
                "traced": self.traces,
                **{check: "fail" if check in self.failures else "pass" for check in CHECKS}}


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def _host_actions(config: GameConfig, captain, states, n: int) -> Action:
    """The LM-only captain's actions for every game (finished ones: a placeholder shot)."""
    from bsjax.battleship.game import bitboard, questions
    hit_bits, miss_bits, shots, asked, turns, done = jax.device_get(
        (states.obs.hit_bits, states.obs.miss_bits, states.shots, states.questions,
         states.turn, states.done))
    hits = bitboard.unpack_np(np.asarray(hit_bits), config.n_cells)
    misses = bitboard.unpack_np(np.asarray(miss_bits), config.n_cells)
    kinds, cells = np.zeros(n, np.int32), np.zeros(n, np.int32)
    templates = np.full(n, -1, np.int32)
    live = [g for g in range(n) if not done[g]]
    decisions, _ = captain.decide(live, hits, misses, turns, config.max_shots - np.asarray(shots),
                                  config.max_questions - np.asarray(asked))
    for g, decision in zip(live, decisions):
        kinds[g], templates[g] = decision.kind, decision.question
        cells[g] = decision.cell if decision.kind == 0 else 0
    bits = questions.catalog_bits()[np.maximum(templates, 0)]
    bits[templates < 0] = 0
    return Action(jnp.asarray(kinds), jnp.asarray(cells), jnp.asarray(templates),
                  jnp.asarray(bits, jnp.uint32))


def check_agent(agent, sampler: str | None = "particles", config: GameConfig = PAPER,
                boards: int = 3, seeds: int = 2, particles: int = 64, params=None,
                raise_on_failure: bool = True, seed: int = 0) -> ConformanceReport:
    """Play `boards` × `seeds` games of `agent` turn by turn and check every turn (see module).

    Args:
      agent: a registered agent name or an agent instance (its structure).
      sampler: the belief's sampler name (ignored by agents that need no belief).
      config: the protocol; the games are the first boards of its suite.
      particles: the sampler's particles (small: the check is about the contract, not skill).
      params: one game's `PlayParams` for every game (the player's defaults by default).
      raise_on_failure: raise `ConformanceError` on the first failed check (else report it).
      seed: the run seed of the games' keys.

    Returns:
      The `ConformanceReport`.
    """
    if isinstance(agent, str):
        agent = agents_lib.make_agent(agent, config)
    belief = None
    if agent.needs_belief and sampler is not None:
        belief = belief_lib.make_sampler(sampler, config, particles)
    player = Player(config, agent, belief)
    env = player.env
    board_list = suites.suite("synthetic" if config.fleet is not None else "grand", config)
    games = [(b, s) for b in board_list[:boards] for s in range(seeds)]
    n = len(games)
    one = player.default_params() if params is None else params
    game_params = jax.tree.map(lambda x: jnp.stack([jnp.asarray(x)] * n), one)
    truths = jnp.asarray([b.spans for b, _ in games], jnp.int32)
    game_seeds = jnp.asarray([suites.hash_seed(b.board_id, s) for b, s in games], jnp.int32)

    failures: dict[str, str] = {}
    traces = 0
    _forward_transposed_keys()

    def counted(fn):
        def traced(*args):
            nonlocal traces
            traces += 1  # runs once per trace, never per call of the compiled function
            return fn(*args)
        return jax.jit(jax.vmap(traced))

    turn_fn, act_fn = counted(player.turn_one), counted(player.act_one)
    observe_fn = jax.jit(jax.vmap(env.observe))
    legal_fn = jax.jit(jax.vmap(env.is_legal))
    hit_probability_fn = (jax.jit(jax.vmap(player.sampler.hit_probability))
                          if player.sampler is not None else None)
    captain = None
    if agent.host_decides:
        from bsjax.battleship.harness.llm_host import CaptainHost
        from bsjax.core.llm.backends import UniformBackend
        from bsjax.core.llm.structured import LLMClient
        captain = CaptainHost(LLMClient(UniformBackend(seed)), reference_rng=False)
        captain.start([int(s) for s in np.asarray(game_seeds)])

    max_turns, turns_played, actions, illegal = config.max_turns, 0, 0, 0
    try:
        with jax.debug_key_reuse(True):
            keys = jax.random.split(jax.random.key(seed), (n, max_turns + 1))
            init = BatchInit(player)  # the belief's program is shared by every agent checked
            init_args = (keys[:, max_turns], game_params, truths, game_seeds)
            init.compile(*jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype),
                                       init_args))  # shapes only: no key is consumed
            states, carries = init(*init_args)
            for t in range(max_turns):
                before = jax.device_get((states, carries))
                view = observe_fn(states)
                if captain is not None:
                    action = _host_actions(config, captain, states, n)
                    states, carries, record = act_fn(keys[:, t], game_params, states, carries,
                                                     action)
                    outcomes = np.asarray(jax.device_get(record.outcome))
                    for g in range(n):
                        if not before[0].done[g] and int(action.kind[g]) == 1:
                            captain.record_answer(g, bool(outcomes[g]))
                else:
                    states, carries, record = turn_fn(keys[:, t], game_params, states, carries)
                taken = Action(record.kind, record.cell, record.question_id,
                               jnp.zeros((n, config.n_words), jnp.uint32))
                active = np.asarray(record.active)
                legal = np.asarray(legal_fn(view, taken))
                actions += int(active.sum())
                illegal += int((active & ~legal).sum())
                if np.any(active & ~legal) and "legal" not in failures:
                    g = _first(active & ~legal)[0]
                    what = (f"shot at cell {int(record.cell[g])}" if int(record.kind[g]) == 0
                            else f"question {int(record.question_id[g])}")
                    failures["legal"] = f"game {g}, turn {t}: illegal {what}"
                after = jax.device_get((states, carries))
                finished = np.asarray(before[0].done)
                if finished.any() and "finished" not in failures:
                    for leaf_before, leaf_after in zip(jax.tree.leaves(before),
                                                       jax.tree.leaves(after)):
                        a, b = np.asarray(leaf_before), np.asarray(leaf_after)
                        same = np.all((a == b) | (np.isnan(a) & np.isnan(b)) if
                                      np.issubdtype(a.dtype, np.floating) else a == b,
                                      axis=tuple(range(1, a.ndim)))
                        if np.any(finished & ~same):
                            failures["finished"] = (f"game {_first(finished & ~same)[0]}, "
                                                    f"turn {t}: a finished game changed")
                            break
                floats = [np.asarray(x) for x in jax.tree.leaves(jax.device_get(record))
                          if np.issubdtype(np.asarray(x).dtype, np.floating)]
                if hit_probability_fn is not None:
                    floats.append(np.asarray(hit_probability_fn(carries[0])))
                if any(not np.all(np.isfinite(x)) for x in floats) and "finite" not in failures:
                    failures["finite"] = f"turn {t}: a record or hit probability is not finite"
                turns_played = t + 1
                if bool(np.all(np.asarray(states.done))):
                    break
    except jax.errors.KeyReuseError as err:
        failures["keys"] = str(err).splitlines()[0]
    if traces > 1:
        failures["traces"] = f"the turn function was traced {traces} times"
    report = ConformanceReport(agent.name, belief.name if belief is not None else None, n,
                               turns_played, actions, illegal, traces, failures)
    if raise_on_failure and failures:
        check, what = next(iter(failures.items()))
        raise ConformanceError(f"{agent.name}: check {check!r} failed: {what}")
    return report


__all__ = ["CHECKS", "ConformanceError", "ConformanceReport", "check_agent"]
