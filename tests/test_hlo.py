"""The kernel-launch counter (`bsjax.core.hlo`) on programs whose launches are known, and the
deviceless H100 compile of a turn loop when the compiler plugin is installed (`make gpu-check`;
skipped otherwise), and the TPU's when libtpu is (`make tpu-check`)."""

from __future__ import annotations

import importlib.util

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from bsjax.core import hlo

HLO = """HloModule m

%inner_body (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %p = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[8] get-tuple-element(%p), index=1
  %one = s32[] constant(1)
  %j = s32[] add(%i, %one)
  %y = f32[8] fusion(%x), kind=kLoop, calls=%f1
  ROOT %t = (s32[], f32[8]) tuple(%j, %y)
}

%inner_cond (p: (s32[], f32[8])) -> pred[] {
  %p = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(5)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%outer_body (q: (s32[], f32[8])) -> (s32[], f32[8]) {
  %q = (s32[], f32[8]) parameter(0)
  %a = f32[8] fusion(%q), kind=kLoop, calls=%f2
  %b = f32[8] custom-call(%a), custom_call_target="x"
  %c = f32[8] copy(%b)
  %w = (s32[], f32[8]) while(%q), condition=%inner_cond, body=%inner_body, TRIP
  %s = f32[8] all-reduce(%c), to_apply=%sum
  ROOT %r = (s32[], f32[8]) tuple(%q, %s)
}

%outer_cond (q: (s32[], f32[8])) -> pred[] {
  %q = (s32[], f32[8]) parameter(0)
  ROOT %d = pred[] fusion(%q), kind=kLoop, calls=%f3
}

ENTRY %main (x: f32[8]) -> (s32[], f32[8]) {
  %x = f32[8] parameter(0)
  %z = s32[] constant(0)
  %init = (s32[], f32[8]) tuple(%z, %x)
  %pre = f32[8] fusion(%x), kind=kLoop, calls=%f4
  ROOT %loop = (s32[], f32[8]) while(%init), condition=%outer_cond, body=%outer_body
}
""".replace("TRIP", 'backend_config={"known_trip_count":{"n":"5"}}')


def test_launches_per_iteration_count_nested_loops_by_their_trip_counts():
    counts = hlo.launch_counts(HLO)
    (turn,) = counts["loops"]
    assert turn.trip_count is None and turn.own == 3             # fusion, custom-call, cond
    (inner,) = turn.loops
    # inner: its body's unfused add and fusion, its condition's compare; 5 times
    assert inner.trip_count == 5 and inner.per_iteration == 3
    assert counts["outer_per_iteration"] == turn.per_iteration == 3 + 5 * 3
    assert counts["collectives_per_iteration"] == 1              # the all-reduce, not a launch
    assert counts["entry"] == 1 + 18                             # the pre-loop fusion + one turn
    assert counts["data_dependent_loops"] == 0                   # the inner loop's count is known
    # Bytes of one turn: fusion %a reads the (s32, f32[8]) tuple (36) and writes 32; the custom
    # call 32 + 32; the inner loop 5 x (add 4+4+4, fusion 32+32, compare 4+4+1); the outer
    # condition's fusion 36 + 1. The copy and the all-reduce launch no kernel.
    assert counts["bytes_per_iteration"] == turn.bytes_per_iteration == (
        68 + 64 + 5 * (12 + 64 + 9) + 37)


def test_a_compiled_cpu_loop_counts_its_scans():
    def program(x):
        def turn(carry):
            i, y = carry
            y = lax.fori_loop(0, 7, lambda j, v: jnp.sin(v) * 2 + j, y)
            return i + 1, jnp.cumsum(y) * 0.5
        return lax.while_loop(lambda c: jnp.sum(c[1]) < 1e9, turn, (0, x))

    text = jax.jit(program).lower(jnp.ones(1000)).compile().as_text()
    counts = hlo.launch_counts(text)
    (turn,) = counts["loops"]
    (scan,) = turn.loops
    assert turn.trip_count is None and scan.trip_count == 7
    assert counts["outer_per_iteration"] == turn.own + 7 * scan.per_iteration > 7
    assert counts["data_dependent_loops"] == 0


def test_each_launch_of_a_turn_names_its_source_lines():
    def program(x):
        def turn(carry):
            i, y = carry
            return i + 1, jnp.cumsum(jnp.sin(y)) * 0.5  # the turn's own kernels
        return lax.while_loop(lambda c: jnp.sum(c[1]) < 1e9, turn, (0, x))

    text = jax.jit(program).lower(jnp.ones(1000)).compile().as_text()
    launches = hlo.loop_launches(text)
    assert len(launches) == hlo.launch_counts(text)["outer_per_iteration"]
    line = program.__code__.co_firstlineno + 3
    sources = [chain for _, _, chain in launches]
    assert any(chain and f"test_hlo.py:{line} (" in chain[0]
               and chain[0].endswith("program.<locals>.turn)") for chain in sources), sources
    assert all(name and kind for name, kind, _ in launches)
    frames = hlo.source_frames(text)
    assert frames and all(chain for chain in frames.values())
    assert hlo.source_frames("HloModule m") == {} and hlo.loop_launches(HLO) != []


def test_a_data_dependent_loop_inside_the_turn_is_reported():
    def program(x):
        def turn(carry):
            i, y = carry
            y = lax.while_loop(lambda v: jnp.max(v) < 100.0, lambda v: v * 2.0 + 1.0, y)
            return i + 1, jnp.cumsum(y) * 1e-3
        return lax.while_loop(lambda c: jnp.sum(c[1]) < 1e9, turn, (0, x))

    counts = hlo.launch_counts(jax.jit(program).lower(jnp.ones(1000)).compile().as_text())
    assert counts["data_dependent_loops"] == 1


needs_plugin = pytest.mark.skipif(
    importlib.util.find_spec("jax_cuda12_plugin") is None,
    reason="the CUDA compiler plugin is not installed (make gpu-check)")


def _compile_reports(agents, games: int, target: str = "h100", particles: int = 500,
                     **config) -> dict:
    """{agent: `aot.compile_turn_loop`'s report} of each agent's turn loop compiled for
    `target`, in a fresh process (JAX_PLATFORMS must be set before JAX is imported), with the
    default TPU step."""
    import json
    import subprocess
    import sys
    code = ("import os, json; os.environ['JAX_PLATFORMS'] = 'cpu'\n"
            "os.environ.pop('BSJAX_GAMES_PER_STEP', None)\n"
            "from bsjax.battleship.harness import aot, run_config\n"
            "out = {}\n"
            f"for agent in {list(agents)!r}:\n"
            f"    cfg = run_config.RunConfig(agent=agent, particles={particles}, **{config!r})\n"
            "    player = run_config.make_player(cfg, run_config.validate(cfg)[0])\n"
            f"    out[agent] = aot.compile_turn_loop(player, {games}, {target!r})\n"
            "    assert out[agent]['kib_per_game'] > 0, out[agent]\n"
            "print(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _launches_on_an_h100(agents, games: int, particles: int = 500) -> dict:
    """{agent: (launches per game-turn, data-dependent loops per turn)} on the H100 target."""
    return {agent: (report["launches_per_turn"], report["data_dependent_loops_per_turn"])
            for agent, report in _compile_reports(agents, games, particles=particles).items()}


@needs_plugin
def test_a_turn_loop_compiles_for_an_h100_without_a_gpu():
    assert _launches_on_an_h100(["greedy"], 8, particles=32)["greedy"][0] > 10


# Launches per game-turn on the H100 target at G = 1 and 54 (see docs/throughput.md): the fused
# MH kernel, the turn body's fusions, the agent's state carried as one array of words (one
# game's `[1]` arrays fuse with nothing) and the look-ahead's pick as one reduction keep them
# here; a change that splits them fails this. No turn has a loop whose trip count depends on the
# data (the hit-cluster labelling is unrolled to its bound on an accelerator): each would be a
# host round trip per round.
LAUNCH_BUDGETS = {"greedy": 30, "wma": 60, "bayes": 60, "mra": 60, "wma-reflective": 60,
                  "lookahead": 60}


@needs_plugin
@pytest.mark.parametrize("games", [1, 54])
def test_turns_stay_within_their_launch_budgets_on_an_h100(games):
    launches = _launches_on_an_h100(sorted(LAUNCH_BUDGETS), games)
    assert all(launches[a][0] <= LAUNCH_BUDGETS[a] for a in LAUNCH_BUDGETS), launches
    assert all(launches[a][1] == 0 for a in LAUNCH_BUDGETS), launches


@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                    reason="libtpu is not installed (make tpu-check)")
def test_a_tpu_turn_loop_plays_a_chips_games_in_steps_with_one_all_reduce():
    # 2,048 games on four chips are 512 a chip: two steps of 256, and the loop's two tests
    # (every game done, a game asking for the host) are one all-reduce a turn, for an agent
    # that never asks (greedy) as for one that does (MRA-LLM).
    reports = _compile_reports(["greedy", "mra-llm"], 2048, "tpu-v5e-2x2", particles=32,
                               llm="uniform")
    for report in reports.values():
        assert report["games"] == 2048 and report["steps_per_turn"] == 2, report
        assert report["collectives_per_turn"] == 1, report


@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                    reason="libtpu is not installed (make tpu-check)")
def test_the_chain_and_the_importance_belief_fit_a_tpu():
    # The chain: a repair pooled per chip, samples stored samples-last. Its turn's all-reduces are
    # the loop's test and a repair's two loops (11 when the pool spanned the chips), and a game
    # needs tens of KiB (over 600 when `[N, S]` samples padded S = 4 to 128-wide tiles).
    chain = _compile_reports(["greedy"], 2048, "tpu-v5e-2x2", sampler="chain")["greedy"]
    assert chain["collectives_per_turn"] == 3, chain
    assert chain["kib_per_game"] < 120, chain
    # The importance belief plays a chip's 512 games in steps of 128 (`tpu_games_per_step`).
    importance = _compile_reports(["greedy"], 2048, "tpu-v5e-2x2",
                                  sampler="importance")["greedy"]
    assert importance["steps_per_turn"] == 4 and importance["collectives_per_turn"] == 1, importance
