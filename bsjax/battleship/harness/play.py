"""A batch of games played inside the graph: one `lax.while_loop` over turns.

The loop stops when every game is done or when a game asks the host for something (an L4
revision request): an agent that never needs the host plays its whole batch in one dispatch, an
L4 agent returns to the host only on the turns where its gate opened. Turn records are written
into a preallocated buffer, games first (`[G, T, ...]`), so one sharding over games serves every
array of the loop.

`play_batch` plays a batch in memory, no run directory (the core of `bsjax.play`);
`harness.loop.BatchRunner` builds runs, resume and sharding on `play_turns`.
"""

from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np

from bsjax.battleship.types import GameState, TurnRecord

AUTOTUNE_VARIABLE = "BSJAX_GPU_AUTOTUNE_LEVEL"


def compiler_options() -> dict:
    """XLA options of the turn loop's compile: the GPU autotuning level.

    XLA's GPU compiler times candidate kernels for every matrix product while it compiles; for
    the look-ahead's batched products that search made a WMA batch of 16,384 games compile for
    minutes. Level 0 (bsjax's default) keeps XLA's own choice of kernel, so compile time does not
    grow with the batch; `BSJAX_GPU_AUTOTUNE_LEVEL=1..4` turns the search back on (XLA's
    default is 4). Ignored by other backends.
    """
    value = os.environ.get(AUTOTUNE_VARIABLE, "0")
    if value not in {"0", "1", "2", "3", "4"}:
        raise ValueError(f"{AUTOTUNE_VARIABLE} must be 0, 1, 2, 3 or 4 (got {value!r})")
    return {"xla_gpu_autotune_level": int(value)}


def turn_keys(keys: jax.Array, turn: jax.Array) -> jax.Array:
    """`[G]` keys of one turn: the game's base key folded with the turn index."""
    return jax.vmap(jax.random.fold_in, in_axes=(0, None))(keys, turn)


@functools.lru_cache(maxsize=32)
def batch_turn(player):
    """`jax.jit(jax.vmap(player.turn_one))`, one per player: `record_shapes` traces a turn to
    find the records' shapes, and `play_turns` replays that trace (`_replay`) instead of
    tracing the turn again."""
    return jax.jit(jax.vmap(player.turn_one))


def _replay(fn, *args):
    """`fn(*args)` inside a trace, from `fn`'s cached trace for these argument types: its
    equations are bound again with their own source lines (the program is the one tracing
    `fn` anew gives), without running its Python again."""
    traced = fn.trace(*args)
    out = jax.core.eval_jaxpr(traced.jaxpr.jaxpr, traced.jaxpr.consts,
                              *jax.tree.leaves(args))
    return jax.tree.unflatten(jax.tree.structure(traced.out_info), out)


def record_shapes(player, keys: jax.Array, params, states: GameState, carries) -> TurnRecord:
    """Shapes of the records of a whole game, each leaf `[G, T, ...]` (`jax.ShapeDtypeStruct`).

    Found by tracing a turn, which `play_turns` then reuses (`batch_turn`)."""
    turn_fn = batch_turn(player)
    shapes = jax.eval_shape(turn_fn, keys, params, states, carries)[2]
    turns = player.config.max_turns
    return jax.tree.map(
        lambda s: jax.ShapeDtypeStruct((s.shape[0], turns, *s.shape[1:]), s.dtype), shapes)


def empty_records(shapes: TurnRecord) -> TurnRecord:
    """A zero buffer of `record_shapes`."""
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)


def record_buffer(player, keys: jax.Array, params, states: GameState, carries) -> TurnRecord:
    """Zeros shaped like the records of a whole game: each leaf `[G, T, ...]`."""
    return empty_records(record_shapes(player, keys, params, states, carries))


# The fewest fields of an agent state that `play_turns` carries packed into words.
PACKED_STATE_FIELDS = 8

STEP_VARIABLE = "BSJAX_GAMES_PER_STEP"
# A TPU's compiled turn grows with the games a chip holds, and its compile time with it: at 4,096
# games a chip the look-ahead compiled in 76 s, MRA in 51 s. A turn there plays a chip's games in
# steps of at most this many, one compiled step looped over (18 s and 23 s in steps of 256).
TPU_GAMES_PER_STEP = 256


def games_per_step(platform: str, sampler=None) -> int | None:
    """The most games of a device one step of a turn plays on `platform`: `BSJAX_GAMES_PER_STEP`
    where set (on every platform), else on a TPU the sampler's `tpu_games_per_step` where it
    has one (the importance sampler's fresh draw compiles slowly in larger steps), else
    `TPU_GAMES_PER_STEP`, and no limit (None) elsewhere. Larger steps compile more slowly on a
    TPU; smaller ones cost a GPU launches (docs/throughput.md)."""
    value = os.environ.get(STEP_VARIABLE)
    if value is None:
        if platform != "tpu":
            return None
        return getattr(sampler, "tpu_games_per_step", TPU_GAMES_PER_STEP)
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{STEP_VARIABLE} must be a positive whole number of games (got {value!r})")
    return int(value)


def _fewest_steps(games_per_device: int, platform: str, sampler) -> int:
    most = games_per_step(platform, sampler)
    return 1 if most is None else -(-games_per_device // most)


def steps_per_turn(games_per_device: int, platform: str, sampler=None) -> int:
    """The steps a turn plays a device's games in (`play_turns(steps=...)`): the fewest steps of
    at most `games_per_step(platform, sampler)` games that divide the device's games evenly (1
    where no count up to twice the fewest does: `step_multiple` pads a batch so that one does)."""
    fewest = _fewest_steps(games_per_device, platform, sampler)
    return next((steps for steps in range(fewest, 2 * fewest + 1)
                 if games_per_device % steps == 0), 1)


def step_multiple(games_per_device: int, platform: str, sampler=None) -> int:
    """`games_per_device` rounded up so that `steps_per_turn` splits it into its fewest steps."""
    fewest = _fewest_steps(games_per_device, platform, sampler)
    return -(-games_per_device // fewest) * fewest


def _in_steps(steps: int, games: int):
    """(split, merge): a games-first leaf `[G, ...]` as `[steps, G / steps, ...]` and back, step
    s holding games s, s + steps, s + 2·steps, ... so that each device's block of games stays
    on the device (for `steps` dividing the games of a device)."""
    def split(x):
        return jnp.moveaxis(x.reshape(games // steps, steps, *x.shape[1:]), 1, 0)

    def merge(x):
        return jnp.moveaxis(x, 0, 1).reshape(games, *x.shape[2:])

    return split, merge


def play_turns(player, keys: jax.Array, params, states: GameState, carries, buffer: TurnRecord,
               turn: jax.Array, real: jax.Array, stop_on_request: bool = True, steps: int = 1):
    """Play turns from `turn` until every game is done, the turn limit, or (with
    `stop_on_request`) a turn on which a real game raised `llm_request`.

    Args:
      keys: `[G]` per-game base keys (turn t uses `fold_in(key, t)`, as one turn at a time does).
      params: the agent's params, each leaf `[G, ...]` (games may differ).
      states, carries: the games' `GameState` and (belief, agent state), each leaf `[G, ...]`.
      buffer: the records so far, each leaf `[G, T, ...]`; turn t is written at `[:, t]`.
      turn: `[]` int32 the next turn to play.
      real: `[G]` bool false for padding copies, whose requests never stop the loop.
      steps: a turn plays the games in this many slices of G / steps, one after another, with
        one compiled turn of G / steps games (`steps_per_turn`); the same games (each game's
        turn is its own), smaller programs and temporaries.

    Returns:
      (states, carries, buffer, turn, requests): turn is one past the last turn played;
      requests `[G]` bool the real games that asked for the host on that turn.
    """
    games = real.shape[0]
    if games % steps:
        raise ValueError(f"{games} games do not split into {steps} steps")
    turn_fn = functools.partial(_replay, batch_turn(player))
    max_turns = player.config.max_turns

    def in_body(states, turn, requests):
        # Decided at the end of the body, not in the loop's condition: it fuses with the
        # body's last kernels, and the condition launches none (a GPU's launches per turn).
        if not stop_on_request:
            return (turn < max_turns) & ~jnp.all(states.done)
        # Both tests as one reduction (each was a kernel, two at large batches, where a GPU
        # reduces a long vector in two passes): 2 where a game asks for the host, else 1 where
        # it still plays. Going on is "some game plays and none asks".
        return (turn < max_turns) & (_asks_or_plays(states, requests) == 1)

    def in_condition(states, turn, requests):
        # One reduction, so one all-reduce between the chips a turn, not one per test.
        return (turn < max_turns) & (_asks_or_plays(states, requests) == 1)

    # A TPU has no launches to save, and its compiler stalled (minutes, growing with the batch)
    # on the test computed in the body: wma-reflective beyond 256 games a chip with the one
    # reduction, WMA at 1,024 a chip with two. There the loop's condition does the test.
    def going(states, turn, requests):
        return jax.lax.platform_dependent(states, turn, requests,
                                          tpu=lambda *_: jnp.bool_(True), default=in_body)

    def condition(carry):
        states, _, _, turn, requests, flag = carry
        return jax.lax.platform_dependent(states, turn, requests, flag,
                                          tpu=lambda s, t, r, _: in_condition(s, t, r),
                                          default=lambda *args: args[-1])

    def play(keys, params, states, belief, agent_words, turn, real):
        """One turn of these games: states, belief, agent words, packed record, requests."""
        states, (belief, agent_state), record = turn_fn(
            turn_keys(keys, turn), params, states, (belief, unpack_agent(agent_words)))
        return (states, belief, pack_agent(agent_state), pack(record),
                record.llm_request & real)

    def body(carry):
        states, (belief, agent_words), words, turn, _, _ = carry
        if steps == 1:
            states, belief, agent_words, record, requests = play(
                keys, params, states, belief, agent_words, turn, real)
            # One write per turn, not one per field; a dynamic update (turn < max_turns ≤ T),
            # not a scatter, whose bounds test became a kernel of its own at large batches.
            words = jax.lax.dynamic_update_index_in_dim(words, record, turn, axis=1)
        else:
            states, belief, agent_words, words, requests = jax.lax.fori_loop(
                0, steps, functools.partial(one_step, turn),
                (states, belief, agent_words, words, jnp.zeros_like(real)))
        return (states, (belief, agent_words), words, turn + 1, requests,
                going(states, turn + 1, requests))

    def one_step(turn, step, carry):
        """The turn of step `step`'s games, written back in place (each leaf `[steps, ...]`)."""
        states, belief, agent_words, words, requests = carry
        take = functools.partial(jax.tree.map,
                                 lambda x: jax.lax.dynamic_index_in_dim(x, step, keepdims=False))

        def put(whole, part):
            return jax.tree.map(
                lambda x, y: jax.lax.dynamic_update_index_in_dim(x, y, step, 0), whole, part)

        new_states, new_belief, new_words, record, asks = play(
            take(keys), take(params), take(states), take(belief), take(agent_words), turn,
            take(real))
        words = jax.tree.map(
            lambda w, r: jax.lax.dynamic_update_slice(
                w, r[None, :, None], (step, 0, turn) + (0,) * (r.ndim - 1)), words, record)
        return (put(states, new_states), put(belief, new_belief), put(agent_words, new_words),
                words, put(requests, asks))

    pack, unpack = record_packing(buffer)
    # An agent state of many fields crosses turns as one array of words: on a GPU, keeping a
    # finished game's state is then one kernel, not one per field where XLA fuses none of them
    # (at one game, whose `[1]` arrays its fusion treats as scalars: MRA's turn 71 launches,
    # 55 packed). A state of a few fields stays as it is: packed, WMA's three cost launches.
    belief, agent_state = carries
    pack_agent, unpack_agent = ((lambda x: x), (lambda x: x))
    if len(jax.tree.leaves(agent_state)) >= PACKED_STATE_FIELDS:
        pack_agent, unpack_agent = word_packing(agent_state, lead=1)
    split, merge = (_in_steps(steps, games) if steps > 1
                    else ((lambda x: x), (lambda x: x)))
    # From here on (the loop's body too) every games-first leaf is `[steps, G / steps, ...]`.
    keys, params, states, belief, agent_words, words, real = jax.tree.map(
        split, (keys, params, states, belief, pack_agent(agent_state), pack(buffer), real))
    turn = jnp.asarray(turn, jnp.int32)
    requests = jnp.zeros_like(real)
    start = (states, (belief, agent_words), words, turn, requests,
             going(states, turn, requests))
    states, (belief, agent_words), words, turn, requests, _ = jax.lax.while_loop(
        condition, body, start)
    states, belief, agent_words, words, requests = jax.tree.map(
        merge, (states, belief, agent_words, words, requests))
    return states, (belief, unpack_agent(agent_words)), unpack(words), turn, requests


def _asks_or_plays(states: GameState, requests: jax.Array) -> jax.Array:
    """`[]` int32: 2 where a game asks for the host, else 1 where a game still plays, else 0."""
    return jnp.max(jnp.where(requests, 2, (~states.done).astype(jnp.int32)))


def record_packing(buffer: TurnRecord):
    """(pack, unpack): a record's fields as one array of 32-bit words and back, bit for bit.

    pack maps leaves `[G, *batch, ...]` to `[G, *batch, R]` uint32 (floats and ints bitcast,
    bools as 0/1), so the turn loop writes a turn's record with one kernel instead of one per
    field (on a GPU, one launch each). Records holding 64-bit values (float64 reference runs)
    are left as they are: pack and unpack are then the identity."""
    return word_packing(buffer, lead=2)                # [G, T] of the buffer


def word_packing(example, lead: int):
    """(pack, unpack): the leaves of pytrees shaped like `example` as one array of 32-bit words
    and back, bit for bit (floats and ints bitcast, bools as 0/1).

    `example`'s leaves are `[*B, ...]` with `lead` batch dimensions B; pack takes a tree of the
    same structure whose leaves have any batch dimensions (`[*B', ...]`, the same trailing
    shapes) to `[*B', R]` uint32, and unpack takes it back. The identity where a leaf is not 32
    bits wide (float64 reference runs) or there are no leaves."""
    leaves, tree = jax.tree.flatten(example)
    if not leaves or not all(leaf.dtype == jnp.bool_ or leaf.dtype.itemsize == 4
                             for leaf in leaves):
        return (lambda values: values), (lambda words: words)
    trailing = [leaf.shape[lead:] for leaf in leaves]
    sizes = [int(np.prod(shape, dtype=int)) for shape in trailing]

    def pack(values):
        words = []
        for leaf, shape, size in zip(jax.tree.leaves(values), trailing, sizes):
            flat = leaf.reshape(*leaf.shape[:leaf.ndim - len(shape)], size)
            words.append(flat.astype(jnp.uint32) if leaf.dtype == jnp.bool_
                         else jax.lax.bitcast_convert_type(flat, jnp.uint32))
        return jnp.concatenate(words, axis=-1)

    def unpack(words):
        out, start = [], 0
        for leaf, shape, size in zip(leaves, trailing, sizes):
            flat = words[..., start:start + size].reshape(*words.shape[:-1], *shape)
            out.append(flat != 0 if leaf.dtype == jnp.bool_
                       else jax.lax.bitcast_convert_type(flat, leaf.dtype))
            start += size
        return jax.tree.unflatten(tree, out)

    return pack, unpack


def records_by_turn(buffer: TurnRecord, turns_played: int) -> TurnRecord:
    """The played turns of a games-first buffer as host arrays `[T, G, ...]`. Sliced on the
    host: a device slice would compile once per distinct number of turns."""
    return jax.tree.map(lambda b: np.swapaxes(np.asarray(b)[:, :turns_played], 0, 1),
                        jax.device_get(buffer))


def play_batch(key: jax.Array, player, params, truths: jax.Array, game_seeds: jax.Array
               ) -> tuple[GameState, TurnRecord]:
    """Play a batch of games to the end, in memory: the compiled core of `bsjax.play`.

    Args:
      key: `[G]` per-game base keys (`harness.batch.game_keys` gives the keys a run uses, so the
        games equal those of `bsjax play` with the same run seed).
      player: a `harness.player.Player` whose agent never needs the host (not MRA-LLM, not
        LM-only: those need an LLM between turns; use `bsjax.run`).
      params: the agent's params, each leaf `[G, ...]`.
      truths: `[G, S]` int32 span ids of the hidden ships.
      game_seeds: `[G]` int32 board seeds.

    Returns:
      (final states, records): each record leaf a host array `[T, G, ...]` for the T turns
      played.
    """
    if player.agent.host_decides or player.agent.llm:
        raise ValueError(f"agent {player.agent.name!r} asks the host between turns; play it with "
                         "bsjax.run (it answers the LLM calls)")
    init, turns = _compiled(player)
    states, carries = init(turn_keys(key, 1 << 20), params, truths, game_seeds)
    states, buffer, turn = turns(key, params, states, carries)
    return states, records_by_turn(buffer, int(turn))


@functools.lru_cache(maxsize=16)
def _compiled(player):
    """`play_batch`'s jitted init and turn loop, kept per player (a frozen, hashable
    configuration), so a notebook that plays batch after batch compiles (and traces a turn for
    the record buffer's shapes) once per batch shape."""

    def turns(key, params, states, carries):
        buffer = record_buffer(player, key, params, states, carries)
        real = jnp.ones(key.shape[0], bool)
        steps = steps_per_turn(key.shape[0], jax.default_backend(), player.sampler)
        states, _, buffer, turn, _ = play_turns(player, key, params, states, carries, buffer, 0,
                                                real, stop_on_request=False, steps=steps)
        return states, buffer, turn

    return jax.jit(jax.vmap(player.init_one)), jax.jit(turns, compiler_options=compiler_options())


__all__ = ["AUTOTUNE_VARIABLE", "STEP_VARIABLE", "TPU_GAMES_PER_STEP", "compiler_options",
           "empty_records", "games_per_step", "play_batch", "play_turns", "record_buffer",
           "record_packing", "record_shapes", "records_by_turn", "step_multiple",
           "steps_per_turn", "turn_keys", "word_packing"]
