"""Multi-device and multi-process runs play exactly the one-device games."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from bsjax import cli

SCRIPT = textwrap.dedent("""
    import json, sys, tempfile
    from pathlib import Path
    import jax
    from bsjax.battleship.harness import experiment, run_config
    assert jax.local_device_count() == 4, jax.devices()
    out = {}
    for name, extra in json.loads(sys.argv[1]).items():
        for devices in (1, 4):
            run_dir = Path(tempfile.mkdtemp()) / "run"
            # 5 games on 4 devices: the batch is padded to 8, two games per device.
            cfg = run_config.RunConfig(boards="B01,B04,B17", seeds=2, particles=48,
                                       batch_size=5, devices=devices, **extra)
            experiment.run(cfg, run_dir)
            out[f"{name}/{devices}"] = [(run_dir / "games.jsonl").read_text(),
                                        (run_dir / "events.jsonl").read_text()]
    print(json.dumps(out))
""")

CASES = {
    "greedy-reference": {"agent": "greedy", "sampler": "chain", "rng": "reference"},
    "mra-llm": {"agent": "mra-llm", "tau": 1.0, "llm": "none"},   # host patches between turns
    "lm-only": {"agent": "lm-only", "llm": "none"},               # host-chosen actions
}


def _without_latency(events: str) -> list[str]:
    """Event lines without wall-clock latencies; sorted, since a file is written batch by batch
    and the device count changes the batching (5 games: batches of 5 + 1, or one padded 8)."""
    return sorted(re.sub(r'"latency": [0-9.e-]+', "", events).splitlines())


def _without_wall_time(rows: str) -> str:
    """Game rows without the per-batch wall time, which is the one field a rerun may change."""
    return re.sub(r', "wall_seconds": [0-9.e-]+', "", rows)


# MRA-LLM by default: it shards the device-side game and patches it from the host between turns;
# the other two cases under -m slow.
@pytest.mark.parametrize("name", ["mra-llm", pytest.param("greedy-reference", marks=pytest.mark.slow),
                                  pytest.param("lm-only", marks=pytest.mark.slow)])
def test_four_devices_play_the_one_device_games(name):
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4"
    env = dict(os.environ, XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps({name: CASES[name]})],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    rows_1, events_1 = out[f"{name}/1"]
    rows_4, events_4 = out[f"{name}/4"]
    assert len(rows_1.splitlines()) == 6
    assert _without_wall_time(rows_4) == _without_wall_time(rows_1), name
    assert _without_latency(events_4) == _without_latency(events_1), name
    if name == "mra-llm":
        llm_events = [json.loads(line) for line in events_4.splitlines()
                      if '"kind": "llm"' in line]
        assert llm_events and all(not e["ok"] for e in llm_events)  # the sharded host path ran


def test_devices_beyond_this_host_is_a_usage_error(tmp_path, capsys):
    code = cli.main(["play", "--boards", "B01", "--seeds", "1", "--devices", "64",
                     "--out", str(tmp_path / "run")])
    assert code == 2
    assert "--devices must lie in" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def _free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_processes_play_the_one_process_games(tmp_path):
    """`--distributed`: two processes joined by jax.distributed each play every other game into
    OUT/process-K-of-2; the merged run equals a one-process run game for game."""
    from bsjax.battleship.report import tables
    from bsjax.core import files
    bsjax = [sys.executable, "-m", "bsjax.cli"]
    games = ["--boards", "B01,B04,B17", "--seeds", "1", "--particles", "32"]
    port = _free_port()
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    procs = [subprocess.Popen([*bsjax, "play", *games, "--distributed", "--coordinator",
                               f"127.0.0.1:{port}", "--num-processes", "2", "--process-id",
                               str(k), "--out", str(tmp_path / "dist")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
    single = subprocess.run([*bsjax, "play", *games, "--out", str(tmp_path / "single")],
                            env=env, capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr[-2000:]
    parts = files.run_parts(tmp_path / "dist")
    assert [p.name for p in parts] == ["process-0-of-2", "process-1-of-2"]
    assert [len(files.read_jsonl(p / "games.jsonl")) for p in parts] == [2, 1]

    def results(run_dir):
        rows = files.read_run_jsonl(run_dir, "games.jsonl")
        return sorted((r["board"], r["seed"], r["shots"], r["hits"], r["questions"], r["f1"])
                      for r in rows)
    assert results(tmp_path / "dist") == results(tmp_path / "single")
    merged = tables.table(tables.load(tmp_path / "dist"))[0]
    assert merged["games"] == 3 and merged["status"] == "ok"


def test_a_sharded_player_pools_the_chains_repair_per_device():
    """`Player.sharded`: the chain's repair search pools within each device's games; other
    samplers, and one device, are left as they are."""
    from bsjax.battleship.harness import run_config

    def player(sampler):
        cfg = run_config.RunConfig(agent="greedy", sampler=sampler)
        return run_config.make_player(cfg, run_config.validate(cfg)[0])

    chain = player("chain")
    assert chain.sampler.repair_groups == 1
    assert chain.sharded(4).sampler.repair_groups == 4
    assert chain.sharded(4).agent == chain.agent and chain.sharded(1) == chain
    particles = player("particles")
    assert particles.sharded(4) == particles
