"""The flags every Battleship game command shares, and what they build: the RunConfig fields as
flags (`GAME_FLAGS`), the output directory, and joining a multi-process run.

Every check raises `UsageError` before anything is written (`bsjax.cli.main` turns it into one
line on stderr and exit code 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path

from bsjax.core import checks
from bsjax.core.errors import UsageError

# RunConfig fields as flags: (flag, type, help). Defaults are None, meaning "the RunConfig (or
# experiment file) default", so an explicit flag can override an experiment file.
GAME_FLAGS = (
    ("--agent", str, "random | greedy | wma | bayes | lookahead | mra | mra-llm | lm-only (default greedy)"),
    ("--protocol", str, "paper | grand (default paper)"),
    ("--suite", str, "synthetic | grand | random (default: the protocol's own suite)"),
    ("--boards", str, "all, or a list such as B01,B02 (default all)"),
    ("--board-file", str, "a board in the Grand text format"),
    ("--seeds", int, "seed indices per board (default 3)"),
    ("--first-seed", int, "first seed index: plays indices FIRST .. FIRST + SEEDS - 1 (default 0); "
     "disjoint ranges are disjoint games, e.g. tuning and held-out seeds"),
    ("--sampler", str, "chain | exact (every placement, fixed fleets only) | importance | "
     "particles (default particles)"),
    ("--rng", str, "jax | reference (bit-exact reference chain; default jax)"),
    ("--particles", int, "samples / particles per game (default 500)"),
    ("--sweeps", int, "particles sampler: MH sweeps (one move per ship) per observation "
     "(default 4)"),
    ("--mh-kernel", str, "particles and chain samplers: how the MH moves run: auto (one fused "
     "kernel on a CUDA GPU, XLA loops elsewhere) | xla | pallas | interpret (the fused kernel "
     "in Pallas's interpreter: slow, any backend) | lowering (chosen when the program is "
     "lowered); every choice plays the same games (default auto)"),
    ("--prior", str, "importance sampler: the prior its weights target: proposal (its "
     "sequential proposal, as Grand et al.'s FastSampler) | uniform (every placement alike: "
     "the weights corrected by the proposal's probability) (default proposal)"),
    ("--tau", float, "confidence threshold in [0, 1] (default: the agent's; MRA 0.72)"),
    ("--revision", str, "MRA symbolic revision: on | off (default on)"),
    ("--cooldown", int, "MRA: turns after a revision before the gate may reopen (default 3)"),
    ("--min-delta", float, "MRA: the preview Δ a revision must beat, δ_min (default 0.01)"),
    ("--presets", str, "MRA: revision presets the gate may apply: all, or kinds such as "
     "coarse_roi_collapse,cluster_closeout_bias (default all)"),
    ("--variant", str, "MRA: paper (faithful) | improved (default paper)"),
    ("--answer-noise", float, "the belief's modelled answer noise ε in [0, 1] (default: the "
     "protocol's, 0.1); the spotter's own noise is the protocol's"),
    ("--run-seed", int, "base seed of the JAX keys (default 0)"),
    ("--llm", str, "LLM of mra-llm and lm-only: local (embedded Gemma 3 270M) | ollama | "
     "uniform (a uniformly random legal reply: the null baseline) | none (default local)"),
    ("--llm-host", str, "Ollama server URL (default http://127.0.0.1:11434)"),
    ("--model", str, "Ollama model name (default gemma3:270m), e.g. gemma3:4b"),
    ("--llm-timeout", float, "seconds per LLM call (default 30)"),
    ("--llm-format", str, "schema: each reply constrained by a JSON Schema of that call's legal "
     "choices | free: the published unconstrained call (default schema)"),
    ("--random-boards", int, "boards of the random suite (default 18)"),
    ("--batch-size", checks.batch_size, "games per compiled batch, or auto: as many as fill half "
     "the free device memory (on a CPU at most 32 a core, on an accelerator at most 65,536 a "
     "device) (default 512)"),
    ("--devices", int, "shard each batch over the first N local devices (default: all)"),
    ("--events", str, "turn events as jsonl (events.jsonl) | parquet (events/part-*.parquet) | "
     "auto: parquet for runs of more than 2,000 games (default auto)"),
)
# A study's rows choose these themselves.
ROW_FLAGS = ("--agent", "--tau", "--revision")


def add_game_args(p: argparse.ArgumentParser, with_out: bool = True,
                   exclude: tuple[str, ...] = ()) -> None:
    for flag, kind, text in GAME_FLAGS:
        if flag not in exclude:
            p.add_argument(flag, type=kind, default=None, help=text)
    p.add_argument("--verbose", action="store_const", const=True, default=None,
                   help="show llama.cpp's own log lines (the local model)")
    if "--set" not in exclude:
        p.add_argument("--set", action="append", default=None, metavar="NAME=VALUE",
                       help="set one of the agent's (or belief's) params by name, as "
                       "bsjax.play(params=...) names them, e.g. --set gamma=0.9 --set "
                       "margin=0.1; VALUE is JSON (a number, true/false, a list) or a word; "
                       "repeat for more")
    if with_out:
        p.add_argument("--out", default=None, help="output directory (default results/CMD-TIME)")
        p.add_argument("--resume", action="store_true", help="continue an interrupted run")
        p.add_argument("--distributed", action="store_true",
                       help="multi-process run via jax.distributed.initialize: each process "
                       "plays every N-th game into OUT/process-K-of-N (see README)")
        p.add_argument("--coordinator", default=None,
                       help="with --distributed: HOST:PORT of process 0 (default: detected "
                       "from the cluster environment or JAX_COORDINATOR_ADDRESS)")
        p.add_argument("--num-processes", type=int, default=None)
        p.add_argument("--process-id", type=int, default=None)
        p.add_argument("--connect-timeout", type=float, default=None,
                       help="with --distributed: seconds to wait for every process to connect "
                       "before giving up with one line (default 120)")
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")


def overrides(args) -> dict:
    """The RunConfig fields given on the command line (`--set` pairs as `params`)."""
    fields = [flag[2:].replace("-", "_") for flag, _, _ in GAME_FLAGS] + ["verbose"]
    given = {f: getattr(args, f) for f in fields if getattr(args, f, None) is not None}
    if getattr(args, "set", None):
        given["params"] = parse_set(args.set)
    return given


def parse_set(pairs: list[str]) -> dict:
    """`--set NAME=VALUE` pairs as a params dict: VALUE read as JSON, else kept as a word."""
    params = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip()
        if not sep or not name or not text.strip():
            raise UsageError(f"--set takes NAME=VALUE, e.g. --set gamma=0.9 (got {pair!r})")
        if name in params:
            raise UsageError(f"--set {name} given twice")
        try:
            params[name] = json.loads(text)
        except json.JSONDecodeError:
            params[name] = text.strip()
    return params


def init_distributed(args) -> None:
    """Join a multi-process run (before any JAX computation)."""
    if not getattr(args, "distributed", False):
        if any(getattr(args, f, None) is not None
               for f in ("coordinator", "num_processes", "process_id", "connect_timeout")):
            raise UsageError("--coordinator/--num-processes/--process-id/--connect-timeout need "
                             "--distributed")
        return
    import jax
    if not args.out:
        raise UsageError("--distributed needs --out (a directory every process can reach)")
    if args.num_processes is not None and args.num_processes < 1:
        raise UsageError(f"--num-processes must be at least 1 (got {args.num_processes})")
    if args.process_id is not None and not 0 <= args.process_id < (args.num_processes or 1 << 30):
        bounds = f"lie in 0..{args.num_processes - 1}" if args.num_processes else "be at least 0"
        raise UsageError(f"--process-id must {bounds} (got {args.process_id})")
    if args.coordinator is not None:
        host, _, port = args.coordinator.rpartition(":")
        if not host.strip() or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"--coordinator takes HOST:PORT with a port in 1..65535 "
                             f"(got {args.coordinator!r})")
    timeout = 120.0 if args.connect_timeout is None else args.connect_timeout
    if not 0 < timeout <= 3600:
        raise UsageError(f"--connect-timeout must lie in (0, 3600] seconds (got {timeout})")
    # JAX aborts the process (a native check failure) when its own wait runs out; a watchdog
    # ends it first with one line.
    connected = threading.Event()

    def watchdog() -> None:
        if not connected.wait(timeout):
            print(f"bsjax: error: the distributed run did not connect within {timeout:g} s "
                  f"(coordinator {args.coordinator or 'from the environment'}); every process "
                  "must start with the same --num-processes and --coordinator",
                  file=sys.stderr, flush=True)
            os._exit(2)

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id,
                                   initialization_timeout=int(timeout) + 60)
    except (RuntimeError, ValueError) as err:
        raise UsageError(f"jax.distributed.initialize failed: {str(err).splitlines()[0]}") \
            from None
    finally:
        connected.set()


def out_dir(args, prefix: str) -> Path:
    """--out (default results/PREFIX-TIME), checked to be a directory this process can write."""
    from bsjax.battleship.harness import experiment
    checks.nonempty(args.out, "--out")
    out = Path(args.out) if args.out else experiment.default_out_dir(prefix)
    return checks.writable_dir(out, "--out")


def config_from_flags(args):
    from bsjax.battleship.harness.run_config import RunConfig
    return RunConfig(**overrides(args))
