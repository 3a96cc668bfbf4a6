"""Multi-device: a batch sharded over 4 virtual CPU devices plays exactly the one-device games."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

from bsjax import cli

SCRIPT = textwrap.dedent("""
    import json, sys, tempfile
    from pathlib import Path
    import jax
    from bsjax.harness import experiment
    assert jax.local_device_count() == 4, jax.devices()
    out = {}
    for name, extra in json.loads(sys.argv[1]).items():
        for devices in (1, 4):
            run_dir = Path(tempfile.mkdtemp()) / "run"
            # 5 games on 4 devices: the batch is padded to 8, two games per device.
            cfg = experiment.RunConfig(boards="B01,B04,B17", seeds=2, particles=48,
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


def test_four_devices_play_the_one_device_games():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(CASES)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for name in CASES:
        rows_1, events_1 = out[f"{name}/1"]
        rows_4, events_4 = out[f"{name}/4"]
        assert len(rows_1.splitlines()) == 6
        assert rows_4 == rows_1, name
        assert _without_latency(events_4) == _without_latency(events_1), name
    llm_events = [json.loads(line) for line in out["mra-llm/4"][1].splitlines()
                  if '"kind": "llm"' in line]
    assert llm_events and all(not e["ok"] for e in llm_events)  # the sharded host path ran


def test_devices_beyond_this_host_is_a_usage_error(tmp_path, capsys):
    code = cli.main(["play", "--boards", "B01", "--seeds", "1", "--devices", "64",
                     "--out", str(tmp_path / "run")])
    assert code == 2
    assert "--devices must lie in" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
