"""The turn loop in the graph: `play_batch` in memory equals the harness's batches, an LLM-free batch is
one dispatch, an L4 batch returns to the host only on the turns where a gate opened.

(B1–B5 exact with the reference streams through the same loop: tests/test_reference.py.)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsjax.battleship.harness import llm_setup, run_config
from bsjax.battleship.harness.batch import game_keys
from bsjax.battleship.harness.experiment import game_list
from bsjax.battleship.harness.loop import BatchRunner
from bsjax.battleship.harness.play import play_batch
from bsjax.battleship.harness.run_config import RunConfig


def _setup(**overrides):
    cfg = RunConfig(**{"boards": "B01,B02", "seeds": 2, "particles": 32, **overrides})
    game_config, boards = run_config.validate(cfg)
    return cfg, run_config.make_player(cfg, game_config), game_list(boards, cfg.seeds)


def _params(player, games: int):
    return jax.tree.map(lambda x: jnp.stack([x] * games), player.default_params())


@pytest.mark.parametrize("agent", ["greedy", "wma"])
def test_play_in_memory_equals_the_harness_batch(agent):
    cfg, player, games = _setup(agent=agent)
    result = BatchRunner(player, len(games)).play(games, cfg.run_seed)
    assert result.dispatches == 1  # no host round trip until every game is done

    seeds = np.asarray([g.game_seed for g in games], np.int64)
    keys = game_keys(cfg.run_seed, seeds, np.asarray([g.seed_index for g in games]))
    truths = jnp.asarray([g.spans for g in games], jnp.int32)
    states, records = play_batch(keys, player, _params(player, len(games)), truths,
                                 jnp.asarray(seeds.astype(np.int32)))
    states, records = jax.device_get((states, records))
    np.testing.assert_array_equal(states.shots, result.shots)
    np.testing.assert_array_equal(states.won, result.won)
    np.testing.assert_array_equal(states.turn, result.turns)
    for name in ("active", "kind", "cell", "question_id", "outcome", "hit_probability"):
        np.testing.assert_array_equal(getattr(records, name), result.records[name], err_msg=name)
    assert records.kind.shape == (int(result.turns.max()), len(games))


def test_an_l4_batch_returns_to_the_host_only_when_a_gate_opens():
    cfg, player, games = _setup(agent="mra-llm", tau=1.0, llm="uniform")
    reviser, _ = llm_setup.make_llm_hosts(cfg, player)
    result = BatchRunner(player, len(games), reviser).play(games, cfg.run_seed)
    request_turns = int(result.records["llm_request"].any(axis=1).sum())
    assert request_turns > 0 and len(result.llm_events) >= request_turns
    # Each dispatch but the last ends on a turn with a request; the last ends with every game
    # done (on a request turn too, when the last request came on the final turn).
    assert result.dispatches - 1 <= request_turns <= result.dispatches


def test_a_turn_played_in_steps_plays_the_same_games():
    """A turn played in slices of the batch, one after another (a TPU's turn, `steps`), plays
    the games of the one-slice turn: an L4 agent, whose packed state, requests and returns to
    the host cross the slices, with the games of each slice interleaved."""
    cfg, player, games = _setup(agent="mra-llm", tau=1.0, llm="uniform")
    results = []
    for steps in (1, 2):
        reviser, _ = llm_setup.make_llm_hosts(cfg, player)
        runner = BatchRunner(player, len(games), reviser, steps=steps, reuse=False)
        assert runner.steps == steps
        results.append(runner.play(games, cfg.run_seed))
    whole, stepped = results
    assert whole.dispatches > 1 and stepped.dispatches == whole.dispatches
    for name in ("shots", "hits", "questions", "turns", "won", "llm_calls"):
        np.testing.assert_array_equal(getattr(stepped, name), getattr(whole, name), err_msg=name)
    jax.tree.map(np.testing.assert_array_equal, stepped.records, whole.records)
    with pytest.raises(ValueError, match="positive divisor of the 4 games"):
        BatchRunner(player, len(games), steps=3)
    # BSJAX_GAMES_PER_STEP steps a turn on any platform: 5 games in steps of at most 2 are
    # padded to 6, three steps of 2.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BSJAX_GAMES_PER_STEP", "2")
        runner = BatchRunner(player, 5)
        assert (runner.batch_size, runner.steps) == (6, 3)


@given(st.integers(1, 200_000), st.sampled_from([None, "1", "100", "1024"]),
       st.sampled_from(["particles", "importance", None]))
@settings(max_examples=300, deadline=None)
def test_a_turn_steps_through_at_most_its_step_of_games(games_per_device, step_setting,
                                                        sampler_name):
    from bsjax.battleship.belief import make_sampler
    from bsjax.battleship.config import PAPER
    from bsjax.battleship.harness import play
    sampler = sampler_name and make_sampler(sampler_name, PAPER, 100, False)
    tpu_step = 128 if sampler_name == "importance" else play.TPU_GAMES_PER_STEP
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(play.STEP_VARIABLE, raising=False)
        if step_setting is not None:
            patch.setenv(play.STEP_VARIABLE, step_setting)
        for platform in ("cpu", "gpu", "tpu"):
            most = play.games_per_step(platform, sampler)
            if step_setting is None and platform != "tpu":   # unset: one step but on a TPU
                assert most is None
                assert play.step_multiple(games_per_device, platform, sampler) == games_per_device
                assert play.steps_per_turn(games_per_device, platform, sampler) == 1
                continue
            # A TPU's own step: the sampler's where it has one (the importance sampler's 128).
            assert most == (tpu_step if step_setting is None else int(step_setting))
            padded = play.step_multiple(games_per_device, platform, sampler)
            steps = play.steps_per_turn(padded, platform, sampler)
            assert padded % steps == 0 and padded // steps <= most
            assert steps == -(-games_per_device // most)                   # the fewest steps
            assert games_per_device <= padded < games_per_device + steps   # under one a step
            # Unpadded, a count is played in steps that divide it, or in one step where none
            # near the fewest does (a prime), never in steps of a game (unless asked for).
            unpadded = play.steps_per_turn(games_per_device, platform, sampler)
            assert games_per_device % unpadded == 0 and unpadded <= 2 * steps
            if most > 1:
                assert play.steps_per_turn(1_000_003, platform, sampler) == 1


def test_play_refuses_agents_that_need_the_host():
    cfg, player, games = _setup(agent="mra-llm", tau=1.0, llm="uniform")
    keys = game_keys(0, np.zeros(1, np.int64), np.zeros(1, np.int64))
    with pytest.raises(ValueError, match="asks the host"):
        play_batch(keys, player, _params(player, 1), jnp.asarray([games[0].spans], jnp.int32),
                   jnp.zeros(1, jnp.int32))


def test_play_compiles_once_per_player_and_batch_shape():
    """A notebook playing batch after batch reuses the compiled turn loop (no retrace)."""
    from bsjax.battleship.harness.play import _compiled

    cfg, player, games = _setup(agent="greedy")
    seeds = np.asarray([g.game_seed for g in games], np.int64)
    truths = jnp.asarray([g.spans for g in games], jnp.int32)
    for run_seed in (0, 1):
        keys = game_keys(run_seed, seeds, np.asarray([g.seed_index for g in games]))
        play_batch(keys, player, _params(player, len(games)), truths,
                   jnp.asarray(seeds.astype(np.int32)))
    init, turns = _compiled(player)
    assert init._cache_size() == 1 and turns._cache_size() == 1


def test_records_pack_into_words_and_back_bit_for_bit():
    from bsjax.battleship.harness.play import record_packing
    rng = np.random.default_rng(0)
    floats = rng.normal(size=(3, 5)).astype(np.float32)
    floats[0, 0], floats[1, 1], floats[2, 2] = np.nan, -0.0, np.inf
    buffer = {"f": jnp.asarray(floats), "i": jnp.asarray(rng.integers(-5, 5, (3, 5)), jnp.int32),
              "b": jnp.asarray(rng.random((3, 5)) < 0.5),
              "v": jnp.asarray(rng.integers(0, 2**32, (3, 5, 4), dtype=np.uint32))}
    pack, unpack = record_packing(buffer)
    words = pack(buffer)
    assert words.shape == (3, 5, 1 + 1 + 1 + 4) and words.dtype == jnp.uint32
    back = unpack(words)
    for name in buffer:
        assert back[name].dtype == buffer[name].dtype
        np.testing.assert_array_equal(np.asarray(back[name]).view(np.uint8),
                                      np.asarray(buffer[name]).view(np.uint8))
    one_turn = jax.tree.map(lambda x: x[:, 2], buffer)
    np.testing.assert_array_equal(pack(one_turn), words[:, 2])
    with jax.enable_x64(True):  # 64-bit records are written as they are
        wide = {"d": jnp.zeros((2, 3), jnp.float64)}
        pack, unpack = record_packing(wide)
        assert pack(wide) is wide and unpack(wide) is wide


def test_word_packing_takes_any_batch_dimensions_and_leaves_an_empty_state_alone():
    from bsjax.battleship.harness.play import word_packing
    state = {"f": jnp.asarray([[1.5, -2.0], [0.0, 3.0]], jnp.float32),
             "i": jnp.asarray([7, -1], jnp.int32), "b": jnp.asarray([[True], [False]])}
    pack, unpack = word_packing(state, lead=1)
    words = pack(state)
    assert words.shape == (2, 2 + 1 + 1) and words.dtype == jnp.uint32
    jax.tree.map(np.testing.assert_array_equal, unpack(words), state)
    one_game = jax.tree.map(lambda x: x[1], state)          # no batch dimension at all
    np.testing.assert_array_equal(pack(one_game), words[1])
    pack, unpack = word_packing((), lead=1)
    assert pack(()) == () and unpack(()) == ()


def test_the_turn_loop_carries_the_agent_state_as_words_and_back_bit_for_bit():
    # MRA's reflective record (float, int and bool fields) crosses the turn loop's iterations
    # packed into words (`play_turns`); the loop's games equal the same turns taken one at a
    # time with the record as it is, every field bit for bit.
    from bsjax.battleship.harness.play import batch_turn, play_turns, record_buffer, turn_keys
    cfg, player, games = _setup(agent="mra")
    seeds = np.asarray([g.game_seed for g in games], np.int64)
    keys = game_keys(cfg.run_seed, seeds, np.asarray([g.seed_index for g in games]))
    params = _params(player, len(games))
    truths = jnp.asarray([g.spans for g in games], jnp.int32)
    init = jax.jit(jax.vmap(player.init_one))  # compiled: op by op it dispatches every MH step
    states, carries = init(turn_keys(keys, 1 << 20), params, truths,
                           jnp.asarray(seeds.astype(np.int32)))
    buffer = record_buffer(player, keys, params, states, carries)
    looped, loop_carries, records, turns, _ = play_turns(
        player, keys, params, states, carries, buffer, 0, jnp.ones(len(games), bool),
        stop_on_request=False)
    turn_fn = batch_turn(player)
    for turn in range(int(turns)):
        states, carries, record = turn_fn(turn_keys(keys, turn), params, states, carries)
        jax.tree.map(lambda whole, one: np.testing.assert_array_equal(whole[:, turn], one),
                     records, record)
    assert bool(states.done.all())
    for got, want in zip(jax.tree.leaves((looped, loop_carries)),
                         jax.tree.leaves((states, carries))):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got).view(np.uint8),
                                      np.asarray(want).view(np.uint8))


def test_the_gpu_autotuning_level_is_checked(monkeypatch):
    from bsjax.battleship.harness import play
    monkeypatch.delenv(play.AUTOTUNE_VARIABLE, raising=False)
    assert play.compiler_options() == {"xla_gpu_autotune_level": 0}
    monkeypatch.setenv(play.AUTOTUNE_VARIABLE, "4")
    assert play.compiler_options() == {"xla_gpu_autotune_level": 4}
    monkeypatch.setenv(play.AUTOTUNE_VARIABLE, "fast")
    with pytest.raises(ValueError, match="must be 0, 1, 2, 3 or 4"):
        play.compiler_options()


def test_agents_with_one_belief_share_its_compiled_init_and_get_init_ones_values():
    """The first belief is compiled once for every agent on the same sampler and batch
    (`harness.initial`), and the two programs give `vmap(init_one)`'s states and carries."""
    runners = {}
    for agent in ("greedy", "wma"):
        cfg, player, games = _setup(agent=agent, seeds=3)
        runners[agent] = BatchRunner(player, len(games))
        runners[agent].play(games, cfg.run_seed)
    assert runners["greedy"]._init._belief is runners["wma"]._init._belief
    assert isinstance(runners["wma"]._init._belief, jax.stages.Compiled)
    # Where compile time is the measurement (`bench`), the belief is compiled anew.
    fresh = BatchRunner(player, len(games), reuse=False)
    fresh.play(games, cfg.run_seed)
    assert fresh._init._belief is not runners["wma"]._init._belief

    seeds = np.asarray([g.game_seed for g in games], np.int64)
    keys = game_keys(cfg.run_seed, seeds, np.asarray([g.seed_index for g in games]))
    args = (keys, _params(player, len(games)), jnp.asarray([g.spans for g in games], jnp.int32),
            jnp.asarray(seeds.astype(np.int32)))
    split = runners["wma"]._init(*args)
    whole = jax.jit(jax.vmap(player.init_one))(*args)
    assert jax.tree.structure(split) == jax.tree.structure(whole)
    for a, b in zip(jax.tree.leaves(split), jax.tree.leaves(whole)):
        a, b = (jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x
                for x in (a, b))
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_runner_traces_one_turn_once():
    """The records' shapes and the turn loop come from one trace of the turn (`batch_turn`)."""
    from bsjax.battleship.harness import play

    cfg, player, games = _setup(agent="greedy", seeds=3)
    traces = []
    real_turn = player.turn_one

    def counted(self, *args):
        traces.append(1)
        return real_turn(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(player), "turn_one", counted)
        play.batch_turn.cache_clear()
        BatchRunner(player, len(games), reuse=False).play(games, cfg.run_seed)
    play.batch_turn.cache_clear()
    assert len(traces) == 1


_STACK_PLAYER = run_config.make_player(
    RunConfig(agent="mra", particles=20), run_config.validate(RunConfig(agent="mra"))[0])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=40))
def test_stacked_params_equal_each_games_own_params_stacked(choices):
    """`stack_params` stacks each distinct params object once and gathers it by game: the
    arrays equal stacking every game's own params (None: the player's defaults)."""
    import dataclasses

    from bsjax.battleship.harness.batch import GameSpec, stack_params

    player = _STACK_PLAYER
    base = jax.device_get(player.default_params())
    scaled = [jax.tree.map(lambda x, k=k: np.asarray(x) * (k + 2), base.agent) for k in range(3)]
    points = [None] + [dataclasses.replace(base, agent=agent) for agent in scaled]
    games = [GameSpec("B01", i, i, (0, 1, 2, 3, 4), points[c]) for i, c in enumerate(choices)]
    expected = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]),
                            *[base if g.params is None else g.params for g in games])
    got = stack_params(player, games)
    assert jax.tree.structure(got) == jax.tree.structure(expected)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)

