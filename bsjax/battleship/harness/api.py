"""`bsjax.play`: the front door. Play an agent on named boards (or given truths), at one set of
params or a sweep of them, in memory, and get arrays back.

    res = bsjax.play("wma", boards="B01,B02", seeds=2)
    res = bsjax.play("mra", boards="B01,B02", seeds=2, params={"tau": [0.5, 0.7, 0.9]})
    res.f1            # [3, 4]: params x games
    res.to_pandas()   # one row per point and game

Every point of a sweep plays the same games (the same boards, seeds and keys), so points are
paired game by game, and all of them run as one batch of one compiled program: params are
traced. No file is written; `bsjax.run` and the CLI add run directories on top.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bsjax.battleship import agents as agents_lib
from bsjax.battleship import belief as belief_lib
from bsjax.battleship.game import spans as spans_lib
from bsjax.battleship.game import suites
from bsjax.battleship.harness import experiment, llm_setup, run_config
from bsjax.battleship.harness import params as params_lib
from bsjax.battleship.harness.batch import GameSpec
from bsjax.battleship.harness.loop import BatchRunner
from bsjax.battleship.harness.player import Player
from bsjax.battleship.harness.results import Results, f1_scores
from bsjax.core.errors import UsageError
from bsjax.core.progress import GameProgress


def _truth_boards(truths, config) -> list[suites.Board]:
    """Boards from `[B, S]` span ids, checked against the span table and the fleet."""
    truths = np.asarray(truths)
    if truths.ndim != 2 or truths.shape[1] != config.n_ships or truths.shape[0] < 1:
        raise UsageError(f"truths must be [boards, {config.n_ships}] span ids (got shape "
                         f"{truths.shape})")
    table = spans_lib.table_for(config)
    if not np.issubdtype(truths.dtype, np.integer) or truths.min() < 0 \
            or truths.max() >= table.n_spans:
        raise UsageError(f"truths must be span ids in 0..{table.n_spans - 1}")
    boards = []
    for i, spans in enumerate(truths.tolist()):
        cells = table.cells[spans]                                          # [S, C]
        if np.any(cells.sum(axis=0) > 1):
            raise UsageError(f"truth {i}: ships overlap")
        lengths = tuple(int(x) for x in table.length[spans])
        if config.fleet is not None and lengths != config.fleet:
            raise UsageError(f"truth {i}: ship lengths {lengths} are not the fleet "
                             f"{config.fleet}")
        grid = np.zeros(config.n_cells, np.int32)
        for ship, row in enumerate(cells):
            grid[row] = ship + 1
        boards.append(suites.Board(f"T{i:04d}", tuple(spans),
                                   grid.reshape(config.rows, config.cols).astype(np.int8)))
    return boards


def play(agent: str | agents_lib.Agent, boards: str = "all", seeds: int = 1,
         params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None, *,
         protocol: str = "paper",
         suite: str | None = None, truths=None, sampler: str = "particles",
         particles: int = 500, sweeps: int = 4, mh_kernel: str = "auto", prior: str = "proposal",
         rng: str = "jax",
         run_seed: int = 0,
         first_seed: int = 0, rule=None, variant: str | None = None, llm: str = "local",
         batch_size: int | None = None, devices: int | None = None,
         progress: bool = True) -> Results:
    """Play `agent` on every board × seed at every point of `params`, in memory.

    Args:
      agent: a registered name (`bsjax.battleship.agents.AGENTS`) or an agent instance.
      boards: "all" or board ids such as "B01,B02" of the protocol's suite (or `suite`).
      seeds: seed indices per board (`first_seed` .. `first_seed + seeds - 1`).
      params: param name -> value, or a list of values (a sweep axis; several lists make a
        grid): names as in `agent.default_params()` (`tau`, `cooldown`, `revision`,
        `presets`, `policy.budgets`, a scoring rule's own names, ...) and the belief's
        `answer_noise` (the modelled ε) and `evidence_scale` (κ). Or a list of such mappings
        without axes: one point each, in that order (a random search's points), e.g.
        `[{"gamma": 0.9}, {"gamma": 0.95, "answer_noise": 0.05}]`.
      protocol, suite, sampler, particles, sweeps, mh_kernel, prior, rng, run_seed: as
        `bsjax play`'s flags.
      truths: `[B, S]` span ids of your own boards (named T0000, ...) instead of `boards`.
      rule: a `planning.scoring.ScoringRule` for an agent that scores questions (by name only).
      variant: "paper" or "improved" for agents that have variants (by name only).
      llm: the LLM backend of agents that call one (local, ollama, uniform, none; as `--llm`).
      batch_size: games per compiled batch; points × games fill the batches. By default the
        games of one point (at most 512), so that every point plays exactly the games of a
        single-point call (a game's floats may differ in the last place with the batch size;
        on a GPU, a larger size fills the device better).
      devices: local devices to shard each batch over (all by default).
      progress: a progress line on stderr.

    Returns:
      `Results` with `[R, G]` arrays (R points, G games). Raises `UsageError` (a ValueError)
      for bad input, before anything is played.
    """
    if isinstance(agent, str):
        name, structure = agent, {}
        if rule is not None:
            structure["rule"] = rule
        if variant is not None:
            structure["variant"] = variant
    else:
        if rule is not None or variant is not None:
            raise UsageError("rule and variant apply to an agent given by name; an agent "
                             "instance already has its structure")
        name, structure = agent.name, None
    cfg = run_config.RunConfig(agent=name if name in agents_lib.AGENTS else "greedy",
                               protocol=protocol, suite=suite, boards=boards, seeds=seeds,
                               first_seed=first_seed, sampler=sampler, rng=rng,
                               particles=particles, sweeps=sweeps, mh_kernel=mh_kernel,
                               prior=prior,
                               run_seed=run_seed, llm=llm,
                               devices=devices)
    if isinstance(agent, str) and name not in agents_lib.AGENTS:
        raise UsageError(f"unknown agent {name!r} (choose from {', '.join(agents_lib.AGENTS)})")
    game_config, board_list = run_config.validate(cfg)
    if truths is not None:
        if boards != "all" or suite is not None:
            raise UsageError("give truths or boards/suite, not both")
        board_list = _truth_boards(truths, game_config)
    if batch_size is not None and (isinstance(batch_size, bool) or batch_size < 1):
        raise UsageError(f"batch_size must be a positive integer (got {batch_size!r})")
    with experiment.x64_context(cfg):
        try:
            instance = (agents_lib.make_agent(name, game_config, **structure)
                        if structure is not None else agent)
            if getattr(instance, "config", game_config) != game_config:
                raise ValueError(f"the agent was built for protocol {instance.config.name!r}, "
                                 f"not {protocol!r}")
            belief = (belief_lib.make_sampler(sampler, game_config, particles,
                                              cfg.reference_rng, sweeps=sweeps,
                                              mh_kernel=mh_kernel, prior=prior)
                      if instance.needs_belief else None)
            player = Player(game_config, instance, belief, cfg.reference_rng)
            points, trees = params_lib.grid(player, params)
        except ValueError as err:
            raise UsageError(str(err)) from None
        games = experiment.game_list(board_list, seeds, first_seed)
        specs = [dataclasses.replace(g, params=tree) for tree in trees for g in games]
        size = min(batch_size or 512, len(specs) if batch_size else len(games))
        reviser, captain = llm_setup.make_llm_hosts(cfg, player, games_at_once=size)
        runner = BatchRunner(player, size, reviser, captain, devices=devices)
        bar = GameProgress(label=name) if progress else None
        if bar is not None:
            bar.start(len(specs))
        results, seconds = [], 0.0
        for lo in range(0, len(specs), runner.batch_size):
            chunk = specs[lo:lo + runner.batch_size]
            done = lo
            on_turn = ((lambda turn, n, base=done: bar.update(base + n, turn + 1))
                       if bar is not None else None)
            result = runner.play(chunk, run_seed, on_turn)
            results.append(result)
            seconds += result.seconds
        if bar is not None:
            bar.stop()
    return _assemble(name, belief, protocol, points, trees, games, results, runner, seconds,
                     game_config.max_turns)


def _assemble(name, belief, protocol, points, trees, games: list[GameSpec], results, runner,
              seconds, max_turns) -> Results:
    """`[R, G]` arrays and `[R, G, T]` records from the batches, in spec order."""
    shape = (len(points), len(games))

    def cat(field):
        return np.concatenate([np.asarray(getattr(r, field)) for r in results]).reshape(shape)

    def records(pick):
        out = {}
        for key in pick(results[0].records):
            padded = []
            for r in results:
                value = np.asarray(pick(r.records)[key])                # [T, B, ...]
                pad = [(0, max_turns - value.shape[0])] + [(0, 0)] * (value.ndim - 1)
                padded.append(np.pad(value, pad))
            stacked = np.concatenate(padded, axis=1)                     # [T, R*G, ...]
            out[key] = np.moveaxis(stacked, 0, 1).reshape(*shape, max_turns,
                                                          *stacked.shape[2:])
        return out

    turn_records = records(lambda rec: {k: v for k, v in rec.items() if k != "extras"})
    turn_records.update(records(lambda rec: rec["extras"]))
    hits, shots = cat("hits"), cat("shots")
    return Results(
        agent=name, sampler=belief.name if belief is not None else None, protocol=protocol,
        points=points, params=trees, boards=[g.board_id for g in games],
        seeds=[g.seed_index for g in games], f1=f1_scores(hits, shots, cat("ship_cells")),
        won=cat("won"), shots=shots, hits=hits, questions=cat("questions"), turns=cat("turns"),
        llm_calls=cat("llm_calls"), fallbacks=cat("fallbacks"), records=turn_records,
        compile_seconds=runner.compile_seconds, seconds=seconds)


__all__ = ["play"]
