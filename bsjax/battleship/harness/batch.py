"""What a batch is, on the host: its games (`GameSpec`), their keys, the mesh its games are
sharded over, and what comes back (`BatchResult`, `LLMEvent`). `harness.loop.BatchRunner` plays
batches of these.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from bsjax.battleship.harness.player import Player


@dataclasses.dataclass(frozen=True)
class GameSpec:
    """One game to play (host data): its board, seed and the agent's params (None: defaults).

    Games of one batch may have different params (rows of a study, points of a sweep): params
    are traced, so they share the batch's compiled program."""

    board_id: str
    seed_index: int
    game_seed: int
    spans: tuple[int, ...]
    params: object = None


def stack_params(player: Player, games: list[GameSpec]):
    """`[G]`-leading host arrays of the games' params (`player.default_params()` where None).

    The games of a batch share a few params objects (a study's row, a sweep's points), so each
    distinct object is stacked once and gathered by game: stacking every game's copy cost 0.3 s
    (greedy) to 0.7 s (MRA) a batch of 65,536 games on the host, as much as a GPU's turns."""
    default = None
    distinct, slot_of, index = [], {}, np.empty(len(games), np.intp)
    for k, g in enumerate(games):
        params = g.params
        if params is None:
            if default is None:
                default = jax.device_get(player.default_params())
            params = default
        slot = slot_of.get(id(params))  # the objects live in `games`: ids stay unique
        if slot is None:
            slot = slot_of[id(params)] = len(distinct)
            distinct.append(params)
        index[k] = slot
    stacked = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *distinct)
    return jax.tree.map(lambda a: a[index], stacked)


def game_keys(run_seed: int, game_seeds: np.ndarray, seed_indices: np.ndarray) -> jax.Array:
    """Per-game base keys from the run seed, the game seed and the seed index.

    Keys depend only on the game, never on its batch, so a resumed or sharded run plays each
    game exactly as an uninterrupted one does.
    """
    return start_keys(None)(jax.random.key(run_seed), *seed_words(game_seeds, seed_indices))[0]


def seed_words(game_seeds, seed_indices) -> tuple[np.ndarray, np.ndarray]:
    """The games' seeds and seed indices as the `uint32` words `fold_in` takes (wrapping)."""
    return (np.asarray(game_seeds).astype(np.uint32), np.asarray(seed_indices).astype(np.uint32))


@functools.cache
def start_keys(sharding):
    """`(run key, game seeds [G], seed indices [G]) -> (keys [G], init keys [G])`, one program:
    the base keys of `game_keys` and the keys of the games' first beliefs."""
    def start(base, game_seeds, seed_indices):
        per_game = jax.vmap(lambda s, i: jax.random.fold_in(jax.random.fold_in(base, s), i))
        keys = per_game(game_seeds, seed_indices)
        return keys, jax.vmap(jax.random.fold_in, in_axes=(0, None))(keys, 1 << 20)
    return jax.jit(start) if sharding is None else jax.jit(start, out_shardings=sharding)


@dataclasses.dataclass
class LLMEvent:
    """One LLM call answered between turns (a revision request or an LM-only turn).

    `latency` is the call's wall seconds (near 0 when replayed from the call cache), `backend_s`
    the backend's own seconds for the reply (replayed from the cache on a hit); `kind` is the
    detail: the chosen revision kind, the captain's action, or the fault."""

    game: int
    turn: int
    ok: bool
    reason: str
    latency: float
    kind: str
    source: str = "revision"   # "revision" (MRA-LLM gate) or "captain" (LM-only turn)
    cached: bool = False
    tokens_in: int = 0
    tokens_out: int = 0
    backend_s: float = 0.0


@dataclasses.dataclass
class BatchResult:
    """Host copies of a finished batch."""

    shots: np.ndarray
    hits: np.ndarray
    questions: np.ndarray
    turns: np.ndarray
    won: np.ndarray
    ship_cells: np.ndarray
    records: dict[str, np.ndarray]  # each `[T, G]`
    seconds: float
    llm_calls: np.ndarray = None      # `[G]` LLM requests answered per game
    fallbacks: np.ndarray = None      # `[G]` of which fell back to the symbolic preset
    llm_events: list = dataclasses.field(default_factory=list)
    llm_seconds: float = 0.0
    dispatches: int = 0               # compiled calls of the turn loop (1 for an LLM-free batch)

    def select(self, games: list[int]) -> BatchResult:
        """The result of the batch's `games` only (indices into it), in that order."""
        index = np.asarray(games, int)
        where = {g: k for k, g in enumerate(games)}
        pick = lambda x: None if x is None else np.asarray(x)[index]  # noqa: E731
        records = {name: value[:, index] for name, value in self.records.items()
                   if name != "extras"}
        records["extras"] = {name: value[:, index]
                             for name, value in self.records["extras"].items()}
        events = [dataclasses.replace(e, game=where[e.game]) for e in self.llm_events
                  if e.game in where]
        return BatchResult(pick(self.shots), pick(self.hits), pick(self.questions),
                           pick(self.turns), pick(self.won), pick(self.ship_cells), records,
                           self.seconds, pick(self.llm_calls), pick(self.fallbacks), events,
                           self.llm_seconds, self.dispatches)


def game_sharding(devices: int | None = None) -> NamedSharding | None:
    """A 1-D mesh over the games axis on the first `devices` local devices (all by default).

    None for a single device: the batch then stays where JAX puts it. Every array of a batch has
    games as its leading axis, so one sharding serves every leaf of every pytree.
    """
    local = jax.local_devices()
    if devices is not None and not 1 <= devices <= len(local):
        raise ValueError(f"--devices must lie in 1..{len(local)} (this host has {len(local)} "
                         f"{local[0].platform} device(s)), got {devices}")
    chosen = local[:devices] if devices else local
    if len(chosen) == 1:
        return None
    mesh = jax.sharding.Mesh(np.asarray(chosen), ("games",))
    return NamedSharding(mesh, PartitionSpec("games"))


__all__ = ["BatchResult", "GameSpec", "LLMEvent", "game_keys", "game_sharding", "seed_words",
           "stack_params", "start_keys"]
