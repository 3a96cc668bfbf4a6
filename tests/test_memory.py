"""`--batch-size auto`: device memory per game from XLA's analysis of the compiled turn loop, a
batch that fits, and games identical to those of a fixed batch size."""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import pytest

from bsjax.battleship.harness import experiment, memory, run_config
from bsjax.battleship.harness.run_config import RunConfig
from bsjax.core.errors import UsageError


def _player(**overrides):
    cfg = RunConfig(**{"boards": "B01,B02", "seeds": 2, "particles": 64, **overrides})
    game_config, _ = run_config.validate(cfg)
    return run_config.make_player(cfg, game_config)


def test_memory_per_game_grows_with_the_particles_and_not_with_the_probe():
    small, large = _player(), _player(particles=256)
    per_game = memory.bytes_per_game(small, probe=4)
    # The particles (P × ships int32, weights, targets) are in every game's share.
    assert memory.bytes_per_game(large, probe=4) - per_game >= (256 - 64) * 4 * 6
    # Per game, not per batch: a probe twice as large gives about the same share.
    assert 0.5 <= memory.bytes_per_game(small, probe=8) / per_game <= 1.05


def test_lm_only_captains_are_measured_on_their_host_turn():
    # At least a game's state (the truth, the observations, the counters) passes through the
    # host-decided turn, so its share cannot be smaller than that state.
    player = _player(agent="lm-only")
    state = jax.eval_shape(player.init_one, jax.random.key(0), player.default_params(),
                           jax.ShapeDtypeStruct((player.config.n_ships,), jnp.int32),
                           jax.ShapeDtypeStruct((), jnp.int32))
    state_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state))
    assert memory.bytes_per_game(player, probe=4) >= state_bytes


def test_auto_batch_fits_the_free_memory_and_the_games(monkeypatch):
    player = _player()
    per_game = memory.bytes_per_game(player, probe=4)
    monkeypatch.setattr(memory, "bytes_per_game", lambda p: per_game)
    # Room for exactly 10 games per device in half the free memory.
    monkeypatch.setattr(memory, "free_device_bytes", lambda d: 20 * per_game)
    assert memory.auto_batch_size(player, 1000).batch_size == 10
    assert memory.auto_batch_size(player, 1000, devices=4).batch_size == 40
    assert memory.auto_batch_size(player, 7).batch_size == 7     # never more than the games
    assert memory.auto_batch_size(player, 7, devices=4).batch_size == 8  # whole slices
    # On a CPU, at most CPU_GAMES_PER_CORE a core, however much memory is free.
    monkeypatch.setattr(memory, "free_device_bytes", lambda d: 10**6 * per_game)
    cap = memory.CPU_GAMES_PER_CORE * (os.cpu_count() or 1)
    decided = memory.auto_batch_size(player, 10**6)
    assert decided.batch_size == cap and decided.platform == "cpu"
    assert "MiB per game" in decided.describe()
    # On an accelerator, at most the largest batch whose compile was measured.
    gpu = type("Device", (), {"platform": "gpu"})()
    monkeypatch.setattr(memory.jax, "local_devices", lambda: [gpu])
    decided = memory.auto_batch_size(player, 10**6)
    assert decided.batch_size == memory.MAX_GAMES_PER_DEVICE and decided.platform == "gpu"
    assert memory.auto_batch_size(player, 10**6, devices=2).batch_size == \
        2 * memory.MAX_GAMES_PER_DEVICE


def test_auto_batch_plays_the_same_games_as_a_fixed_batch(tmp_path, capsys):
    # The batch size is placement, never results; the random captain (no belief) compiles fast.
    base = RunConfig(agent="random", boards="B01,B02,B03", seeds=2)
    experiment.run(RunConfig(**{**base.__dict__, "batch_size": 2}), tmp_path / "fixed")
    experiment.run(RunConfig(**{**base.__dict__, "batch_size": "auto"}), tmp_path / "auto")
    assert "--batch-size auto: batch size 6" in capsys.readouterr().err

    def games(run):
        return [json.loads(line) for line in (tmp_path / run / "games.jsonl").read_text().splitlines()]

    fields = ("board", "seed", "f1", "won", "shots", "hits", "questions")
    assert ([{k: g[k] for k in fields} for g in games("fixed")]
            == [{k: g[k] for k in fields} for g in games("auto")])


@pytest.mark.parametrize("value", ["many", "0", "-3", ""])
def test_bad_batch_sizes_are_refused(value):
    with pytest.raises(UsageError, match="batch-size"):
        run_config.validate(RunConfig(batch_size=value if value in ("many", "") else int(value)))
