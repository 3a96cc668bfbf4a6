"""The profiler trace reader (`bsjax.core.profile`): busy time against brute force, a GPU-shaped
trace, a real CPU trace of a known program, `bench(profile_dir=)` naming a batch's kernels by
their source lines, the host's dispatches per batch, and `benchmarks/gpu_profile.py`."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from jax import lax

from bsjax.battleship.harness import bench
from bsjax.battleship.harness.run_config import RunConfig
from bsjax.core import hlo, profile

ROOT = Path(__file__).resolve().parent.parent


def _write_trace(log_dir: Path, events: list[dict]) -> None:
    run = log_dir / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    (run / "perfetto_trace.json.gz").write_bytes(
        gzip.compress(json.dumps({"traceEvents": events}).encode()))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 40)), min_size=1, max_size=30))
def test_busy_time_is_the_union_of_the_kernels_intervals(intervals):
    kernels = sorted(({"op": "k", "ts": float(t), "dur": float(d)} for t, d in intervals),
                     key=lambda k: k["ts"])
    covered = np.zeros(241, bool)  # brute force on a unit grid: integer starts and lengths
    for t, d in intervals:
        covered[t:t + d] = True
    summary = profile.busy_summary(kernels)
    assert summary["busy_us"] == covered.sum()
    assert summary["span_us"] == max(t + d for t, d in intervals) - min(t for t, _ in intervals)
    assert summary["busy_us"] <= min(summary["span_us"], summary["kernel_us"])
    table = profile.op_table(kernels)
    assert table[0]["launches"] == len(intervals)


def test_a_gpu_trace_counts_the_stream_kernels_only(tmp_path):
    meta = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:GPU:0"}},
            {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/host:CPU"}},
            {"ph": "M", "pid": 1, "tid": 7, "name": "thread_name",
             "args": {"name": "Stream #14(Compute)"}},
            {"ph": "M", "pid": 1, "tid": 8, "name": "thread_name", "args": {"name": "Launch"}},
            {"ph": "M", "pid": 2, "tid": 9, "name": "thread_name", "args": {"name": "python3"}}]
    kernel = {"ph": "X", "pid": 1, "tid": 7}
    events = meta + [
        {**kernel, "ts": 0, "dur": 10, "name": "fusion_3", "args": {"hlo_op": "command_buffer_1"}},
        {**kernel, "ts": 30, "dur": 10, "name": "mh_sweeps", "args": {"hlo_op": "custom-call.2"}},
        {**kernel, "ts": 50, "dur": 30, "name": "fusion_3", "args": {"hlo_op": "command_buffer_1"}},
        {"ph": "X", "pid": 1, "tid": 8, "ts": 0, "dur": 99, "name": "cuLaunchKernel"},
        {"ph": "X", "pid": 2, "tid": 9, "ts": 0, "dur": 99,
         "name": "CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice"}]
    _write_trace(tmp_path, events)
    kernels = profile.read_trace(tmp_path)
    assert [k["op"] for k in kernels] == ["fusion_3", "mh_sweeps", "fusion_3"]
    assert kernels[0]["hlo_op"] == "command_buffer_1"
    table = profile.op_table(kernels)
    assert [(r["op"], r["launches"], r["total_us"], r["share"]) for r in table] == [
        ("fusion_3", 2, 40.0, 0.8), ("mh_sweeps", 1, 10.0, 0.2)]
    assert profile.busy_summary(kernels) == {"kernels": 3, "span_us": 80.0, "busy_us": 50.0,
                                             "kernel_us": 50.0, "busy_share": 0.625}
    assert profile.gap_table(kernels) == [
        {"before": "fusion_3", "after": "mh_sweeps", "gaps": 1, "total_us": 20.0, "median_us": 20.0},
        {"before": "mh_sweeps", "after": "fusion_3", "gaps": 1, "total_us": 10.0, "median_us": 10.0}]
    assert profile.dispatches(tmp_path) == 1


def test_a_gap_follows_the_kernel_that_ended_last():
    """Where kernels overlap, the idle time after them is the latest end's, not the last
    start's: a long kernel, a short one inside it, then a gap."""
    kernels = [{"op": "long", "ts": 0.0, "dur": 100.0}, {"op": "short", "ts": 10.0, "dur": 10.0},
               {"op": "next", "ts": 150.0, "dur": 5.0}]
    assert profile.gap_table(kernels) == [
        {"before": "long", "after": "next", "gaps": 1, "total_us": 50.0, "median_us": 50.0}]


def test_a_cpu_trace_of_a_loop_has_its_body_ops_and_not_the_loop(tmp_path):
    program = jax.jit(lambda x: lax.fori_loop(0, 6, lambda i, y: jnp.cumsum(jnp.sin(y)), x))
    x = jnp.ones(4096)
    program(x).block_until_ready()
    with jax.profiler.trace(str(tmp_path), create_perfetto_trace=True):
        program(x).block_until_ready()
    kernels = profile.read_trace(tmp_path)
    ops = {k["op"] for k in kernels}
    assert kernels and not any(op.startswith(("while", "end: ")) for op in ops), ops
    assert max(r["launches"] for r in profile.op_table(kernels)) >= 6  # once per iteration
    assert profile.dispatches(tmp_path) == 1


def test_bench_profiles_a_batch_and_names_its_kernels_source_lines(tmp_path):
    cfg = RunConfig(agent="greedy", particles=50, boards="B01")
    row = bench.bench(cfg, 2, profile_dir=tmp_path)
    assert "profile_error" not in row and row["games_per_second"] > 0
    kernels = profile.read_trace(tmp_path)
    sources = hlo.instruction_sources((tmp_path / "turn-loop.hlo.txt").read_text())
    named = [sources[r["op"]] for r in profile.op_table(kernels) if r["op"] in sources]
    assert any(chain[0].startswith("bsjax/battleship/belief/") for chain in named), named[:5]
    # The host runs a handful of programs per batch (keys, belief, agent state, zeros, the
    # turn loop, the summary, the run key), not one per eager conversion.
    assert profile.dispatches(tmp_path) <= 8


def test_gpu_profile_writes_a_point_and_its_kernels(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_profile.py"),
                           "--agent", "random", "--games", "2", "--top", "3",
                           "--no-python-trace", "--out",
                           str(tmp_path), "--tag", "t"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert rows[0]["row"] == "point" and rows[0]["games"] == 2 and rows[0]["kernels"] > 0
    assert 1 <= rows[0]["dispatches_per_batch"] <= 8  # counted without the Python tracer too
    kinds = [r["row"] for r in rows[1:]]
    assert kinds.count("op") == 3 and 1 <= kinds.count("gap") <= 3, kinds


def test_gpu_profile_refuses_bad_input_and_writes_nothing(tmp_path):
    for argv in (["--games", "0"], ["--games", "x"], ["--agent", "nobody"], ["--top", "-1"]):
        done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_profile.py"),
                               *argv, "--out", str(tmp_path / "out")], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 2, (argv, done.stderr[-500:])
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert not (tmp_path / "out").exists()
