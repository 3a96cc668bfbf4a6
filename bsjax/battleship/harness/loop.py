"""The batched game loop: functions written for one game, vmapped over G games, finished games
masked. The only place (with `harness.experiment`) that moves data between device and host.
What a batch is (its games, keys, mesh and result) is `harness.batch`.
"""

from __future__ import annotations

import collections
import functools
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from bsjax.battleship.game import bitboard, questions, rules
from bsjax.battleship.harness.batch import (
    BatchResult,
    GameSpec,
    game_sharding,
    seed_words,
    stack_params,
    start_keys,
)
from bsjax.battleship.harness.initial import BatchInit
from bsjax.battleship.harness.play import (
    compiler_options,
    empty_records,
    play_turns,
    record_shapes,
    records_by_turn,
    step_multiple,
    steps_per_turn,
)
from bsjax.battleship.harness.player import Player
from bsjax.battleship.types import Action

# Executables of earlier runners, by `BatchRunner._program_key`: in a notebook (or a study, or a
# test session) a second `bsjax.play` of the same agent, sampler and batch shape starts at once.
# A handful of programs: each holds its compiled code and nothing of a batch's data.
_COMPILED: collections.OrderedDict = collections.OrderedDict()
_COMPILED_MAX = 8


@functools.cache
def _fold_keys(sharding):
    """`fold_in(keys[g], i)` for every game, jitted once per mesh (not once per runner)."""
    fold = jax.vmap(jax.random.fold_in, in_axes=(0, None))
    return jax.jit(fold) if sharding is None else jax.jit(fold, out_shardings=sharding)


@functools.lru_cache(maxsize=16)
def _zeros_program(treedef, leaves: tuple, sharding):
    """A jitted `() -> zeros` of the pytree `treedef` with `(shape, dtype)` leaves: a records
    buffer in one dispatch, compiled once per shapes and mesh."""
    def zeros():
        return empty_records(jax.tree.unflatten(
            treedef, [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in leaves]))
    return jax.jit(zeros) if sharding is None else jax.jit(zeros, out_shardings=sharding)


@functools.cache
def _summary_program(config):
    """What the host reads of a finished batch's states, in one program: shots, hits,
    questions, turns, won and ship cells, each `[G]`."""
    return jax.jit(lambda s: (s.shots, s.hits, s.questions, s.turn, s.won,
                              rules.n_ship_cells(config, s)))


class BatchRunner:
    """Compiles the init and turn functions of a Player for a batch size, and plays batches.

    With several devices the batch is sharded over games (`game_sharding`): games never talk to
    each other, so each device plays its slice and the results equal a one-device run.
    `steps` splits each turn into that many slices of games played one after another (the same
    games; `play.play_turns`); by default slices of at most `play.games_per_step` games a
    device: 256 on a TPU, whose compile time grows with the games a chip holds, and all of them
    elsewhere, unless `BSJAX_GAMES_PER_STEP` says otherwise.
    """

    def __init__(self, player: Player, batch_size: int, reviser=None, captain=None,
                 devices: int | None = None, reuse: bool = True, steps: int | None = None):
        self.sharding = game_sharding(devices)
        n_devices = self.sharding.num_devices if self.sharding is not None else 1
        self.player = player = player.sharded(n_devices)
        platform = (self.sharding.mesh.devices.flat[0] if self.sharding is not None
                    else jax.local_devices()[0]).platform
        per_device = -(-batch_size // n_devices)  # whole slices per device
        if steps is None:
            per_device = step_multiple(per_device, platform, player.sampler)
            steps = steps_per_turn(per_device, platform, player.sampler)
        elif steps < 1 or per_device % steps:
            raise ValueError(f"steps must be a positive divisor of the {per_device} games a "
                             f"device holds, got {steps}")
        self.batch_size = per_device * n_devices
        self.steps = steps
        self.reviser = reviser  # L4: answers LLM revision requests between turns
        self.captain = captain  # host-deciding captains (LM-only): a `llm_host.CaptainHost`
        # Reuse another runner's executables for the same player and batch (`_COMPILED`); off
        # where compile time is the measurement (`bench`).
        self.reuse = reuse
        # Outputs pinned to the game mesh, so every turn's inputs arrive sharded as compiled.
        jit = (jax.jit if self.sharding is None
               else lambda f: jax.jit(f, out_shardings=self.sharding))
        # The first states and beliefs; the belief's program is shared by every agent.
        self._init = BatchInit(player, self.sharding, reuse)
        # Turns run in the graph until a game needs the host (`play.play_turns`); the buffer of
        # records is donated, so each segment writes in place.
        self._turns = jax.jit(functools.partial(play_turns, player, steps=steps),
                              donate_argnums=(4,),
                              compiler_options=compiler_options(), **self._shardings())
        self._act = jit(jax.vmap(player.act_one))
        self._fold = _fold_keys(self.sharding)
        self._start = start_keys(self.sharding)
        self._summary = _summary_program(player.config)
        self.compile_seconds = 0.0
        self._compiled = False
        self._record_shapes = None  # found once: tracing a turn costs as much as a compile step

    def _empty_records(self, keys, params, states, carries):
        """A zero records buffer, placed on the game mesh: one compiled program, not an eager
        `zeros` per leaf (each a dispatch, which a GPU pays for at small batches)."""
        if self._record_shapes is None:
            self._record_shapes = record_shapes(self.player, keys, params, states, carries)
        leaves, treedef = jax.tree.flatten(self._record_shapes)
        return _zeros_program(treedef, tuple((x.shape, str(x.dtype)) for x in leaves),
                              self.sharding)()

    def _shardings(self) -> dict:
        """`out_shardings` of `play_turns`: every array games-first, the turn counter replicated."""
        if self.sharding is None:
            return {}
        replicated = NamedSharding(self.sharding.mesh, PartitionSpec())
        return {"out_shardings": (self.sharding, self.sharding, self.sharding, replicated,
                                  self.sharding)}

    def _place(self, tree):
        """Put a games-leading pytree on the game mesh (a no-op on one device)."""
        return tree if self.sharding is None else jax.device_put(tree, self.sharding)

    def _compile(self, keys, params, truths, seeds):
        key = self._program_key(keys, params, truths, seeds) if self.reuse else None
        if key in _COMPILED:
            _COMPILED.move_to_end(key)
            self._init, step, self._record_shapes = _COMPILED[key]
            if self.captain is not None:
                self._act = step
            else:
                self._turns = step
            self._compiled = True  # compile_seconds stays 0: nothing was compiled
            return
        start = time.perf_counter()
        # The init's output shapes, not its outputs: running it here would count the work of a
        # batch's initial belief as compile time.
        states, carries = self._init.compile(keys, params, truths, seeds)
        turn_keys = self._fold(keys, 0)
        if self.captain is not None:
            actions = self._place(self._host_actions(np.zeros(keys.shape[0], np.int32),
                                                     np.zeros(keys.shape[0], np.int32),
                                                     np.full(keys.shape[0], -1)))
            self._act = self._act.lower(turn_keys, params, states, carries, actions).compile()
        else:
            buffer = self._empty_records(keys, params, states, carries)
            real = self._place(jnp.ones(keys.shape[0], bool))
            self._turns = self._turns.lower(keys, params, states, carries, buffer, jnp.int32(0),
                                            real).compile()
        self.compile_seconds = time.perf_counter() - start
        self._compiled = True
        if key is not None:
            _COMPILED[key] = (self._init,
                              self._act if self.captain is not None else self._turns,
                              self._record_shapes)
            while len(_COMPILED) > _COMPILED_MAX:
                _COMPILED.popitem(last=False)

    def _program_key(self, keys, params, truths, seeds) -> tuple:
        """What the executables depend on: the player (frozen, compared by value), the mesh,
        whether a host captain acts, the arguments' shapes and dtypes, and the global flags
        that change a trace (float64, the compiler options)."""
        avals = tuple((x.shape, str(x.dtype))
                      for x in jax.tree.leaves((keys, params, truths, seeds)))
        return (self.player, self.sharding, self.steps, self.captain is not None,
                jax.tree.structure(params), avals, bool(jax.config.jax_enable_x64),
                tuple(sorted(compiler_options().items())))

    def play(self, games: list[GameSpec], run_seed: int,
             on_turn: Callable[[int, int], None] | None = None) -> BatchResult:
        """Play up to `batch_size` games (padded with copies of the last game, then dropped),
        each with its own params (`GameSpec.params`; the agent's defaults where None).

        `on_turn(turn, games done)` is called after every turn."""
        n = len(games)
        padded = games + [games[-1]] * (self.batch_size - n)
        # Host arrays first, then one transfer and one program for the keys: at small batches a
        # GPU's time is dispatches, and eager conversions cost one each.
        seeds = np.asarray([g.game_seed for g in padded], np.int64)
        words = seed_words(seeds, [g.seed_index for g in padded])
        truths, seeds_j, params = jax.device_put(
            (np.asarray([g.spans for g in padded], np.int32), seeds.astype(np.int32),
             stack_params(self.player, padded)), self.sharding)
        keys, init_keys = self._start(jax.random.key(run_seed), *words)
        if not self._compiled:
            self._compile(keys, params, truths, seeds_j)
        start = time.perf_counter()
        states, carries = self._init(init_keys, params, truths, seeds_j)
        llm_calls, fallbacks = np.zeros(n, np.int32), np.zeros(n, np.int32)
        llm_events, llm_seconds = [], 0.0
        if self.captain is not None:
            self.captain.start([g.game_seed for g in games])
            states, records = self._play_host_turns(keys, params, states, carries, n, on_turn,
                                                    llm_calls, fallbacks, llm_events)
            llm_seconds, dispatches = self._captain_seconds, 0
        else:
            states, records, llm_seconds, dispatches = self._play_in_graph(
                keys, params, states, carries, n, on_turn, llm_calls, fallbacks, llm_events)
        host = jax.device_get(self._summary(states))
        stacked = jax.device_get(records)
        seconds = time.perf_counter() - start
        shots, hits, questions, turns, won, cells = (np.asarray(x)[:n] for x in host)
        rec = {name: np.asarray(value)[:, :n] for name, value in stacked._asdict().items()
               if name != "extras"}
        rec["extras"] = {name: np.asarray(value)[:, :n] for name, value in stacked.extras.items()}
        return BatchResult(shots, hits, questions, turns, won, cells, rec, seconds, llm_calls,
                           fallbacks, llm_events, llm_seconds, dispatches)

    def _count(self, events, llm_calls, fallbacks, llm_events) -> None:
        for event in events:
            llm_calls[event.game] += 1
            fallbacks[event.game] += int(not event.ok)
        llm_events.extend(events)

    def _play_in_graph(self, keys, params, states, carries, n, on_turn, llm_calls, fallbacks,
                       llm_events):
        """Segments of turns in the graph (`play_turns`), the host answering L4 requests between
        them. Returns (states, records `[T, G, ...]`, LLM seconds, dispatches of the loop)."""
        size = keys.shape[0]
        buffer = self._empty_records(keys, params, states, carries)
        real = jax.device_put(np.arange(size) < n, self.sharding)
        turn, llm_seconds, dispatches = 0, 0.0, 0
        while True:
            states, carries, buffer, turn_out, requests = self._turns(
                keys, params, states, carries, buffer, np.int32(turn), real)
            dispatches += 1
            # One transfer per segment: what the host needs to answer the requests.
            turn, done, requests, turns, asked = jax.device_get(
                (turn_out, states.done, requests, states.turn, states.questions))
            turn, done, requests = int(turn), np.asarray(done), np.asarray(requests)
            if self.reviser is not None and requests.any():
                llm_start = time.perf_counter()
                carries, events = self.reviser.step(
                    carries, params.agent, requests, np.asarray(turns),
                    self.player.config.max_questions - np.asarray(asked))
                carries = self._place(carries)  # the host patch may leave the mesh
                llm_seconds += time.perf_counter() - llm_start
                self._count(events, llm_calls, fallbacks, llm_events)
            if on_turn is not None:
                on_turn(turn - 1, int(done[:n].sum()))
            if done.all() or turn >= self.player.config.max_turns:
                return states, records_by_turn(buffer, turn), llm_seconds, dispatches

    def _play_host_turns(self, keys, params, states, carries, n, on_turn, llm_calls, fallbacks,
                         llm_events):
        """Every turn decided on the host (LM-only). Returns (states, records `[T, G, ...]`)."""
        captain, records, self._captain_seconds = self.captain, [], 0.0
        for turn in range(self.player.config.max_turns):
            llm_start = time.perf_counter()
            states, carries, record, events = self._host_turn(
                captain, self._fold(keys, turn), params, states, carries, n)
            self._captain_seconds += time.perf_counter() - llm_start
            self._count(events, llm_calls, fallbacks, llm_events)
            records.append(record)
            done = np.asarray(jax.device_get(states.done))
            if on_turn is not None:
                on_turn(turn, int(done[:n].sum()))
            if done.all():
                break
        return states, jax.tree.map(lambda *xs: jnp.stack(xs), *records)

    def _host_actions(self, kinds, cells, templates) -> Action:
        bits = questions.catalog_bits()[np.maximum(templates, 0)]
        bits[templates < 0] = 0
        return Action(kind=jnp.asarray(kinds, jnp.int32), cell=jnp.asarray(cells, jnp.int32),
                      question_id=jnp.asarray(templates, jnp.int32),
                      question_bits=jnp.asarray(bits, jnp.uint32))

    def _host_turn(self, captain, keys, params, states, carries, n: int):
        """One turn chosen on the host for every live game (`llm_host.CaptainHost`)."""
        cfg = self.player.config
        hit_bits, miss_bits, shots, asked, turns, done = jax.device_get(
            (states.obs.hit_bits, states.obs.miss_bits, states.shots, states.questions,
             states.turn, states.done))
        hits = bitboard.unpack_np(np.asarray(hit_bits), cfg.n_cells)
        misses = bitboard.unpack_np(np.asarray(miss_bits), cfg.n_cells)
        size = hits.shape[0]
        kinds, cells = np.zeros(size, np.int32), np.zeros(size, np.int32)
        templates = np.full(size, -1, np.int32)
        for g in range(size):  # finished games and padding: any unknown cell, never the LLM
            unknown = np.flatnonzero(~(hits[g] | misses[g]))
            cells[g] = unknown[0] if len(unknown) else 0
        live = [g for g in range(n) if not done[g]]
        decisions, events = captain.decide(live, hits, misses, turns,
                                           cfg.max_shots - np.asarray(shots),
                                           cfg.max_questions - np.asarray(asked))
        for g, decision in zip(live, decisions):
            kinds[g], templates[g] = decision.kind, decision.question
            if decision.kind == 0:
                cells[g] = decision.cell
        states, carries, record = self._act(keys, params, states, carries,
                                            self._place(self._host_actions(kinds, cells,
                                                                           templates)))
        outcomes = np.asarray(jax.device_get(record.outcome))
        for g in live:
            if kinds[g] == 1:
                captain.record_answer(g, bool(outcomes[g]))
        return states, carries, record, events
