"""Experiments: suites × boards × seeds for one agent, results on disk, resume.

A run directory holds `run.json` (config, versions, device), `games.jsonl` (one row per game,
appended as each batch finishes), `events.jsonl` (per-turn records) and `summary.json`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import jax
import numpy as np

from bsjax import agents as agents_lib
from bsjax import belief as belief_lib
from bsjax.config import GameConfig, protocol
from bsjax.game import suites
from bsjax.game.suites import BoardError
from bsjax.harness.loop import BatchRunner, GameSpec, Player
from bsjax.report import stats
from bsjax.report.files import read_jsonl


class UsageError(ValueError):
    """Bad user input: reported as one line on stderr with exit code 2, nothing written."""


SAMPLERS = ("chain", "importance", "particles")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything that determines a run's results (written to run.json)."""

    agent: str = "greedy"
    protocol: str = "paper"
    suite: str | None = None           # default: the protocol's own suite
    boards: str = "all"                # "all" or "B01,B02"
    board_file: str | None = None
    seeds: int = 3
    sampler: str = "particles"
    rng: str = "jax"
    particles: int = 500
    tau: float | None = None           # None: the agent's own default (MRA 0.72)
    revision: str = "on"               # MRA: on | off
    variant: str = "paper"             # MRA: paper | improved
    run_seed: int = 0
    random_boards: int = 18
    batch_size: int = 512
    llm: str = "local"                 # L4 backend: ollama | local | none
    llm_host: str | None = None        # Ollama server, e.g. http://127.0.0.1:11434
    model: str | None = None           # Ollama model name
    llm_timeout: float = 30.0
    devices: int | None = None         # local devices to shard games over (None: all)

    @property
    def suite_name(self) -> str:
        if self.board_file:
            return "file"
        return self.suite or ("synthetic" if self.protocol == "paper" else "grand")

    @property
    def reference_rng(self) -> bool:
        return self.rng == "reference"


def validate(cfg: RunConfig) -> tuple[GameConfig, list[suites.Board]]:
    """Check a RunConfig; return the game config and the boards. Raises UsageError."""
    try:
        game_config = protocol(cfg.protocol)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if cfg.agent not in agents_lib.AGENTS:
        raise UsageError(f"unknown agent {cfg.agent!r} (choose from {', '.join(agents_lib.AGENTS)})")
    if cfg.sampler not in SAMPLERS:
        raise UsageError(f"unknown sampler {cfg.sampler!r} (choose from {', '.join(SAMPLERS)})")
    if cfg.rng not in ("jax", "reference"):
        raise UsageError(f"unknown rng {cfg.rng!r} (choose from jax, reference)")
    if cfg.reference_rng and (cfg.sampler != "chain" or cfg.protocol != "paper"):
        raise UsageError("--rng reference reproduces the reference chain: it needs "
                         "--sampler chain and --protocol paper")
    if cfg.particles < 1:
        raise UsageError(f"--particles must be at least 1 (got {cfg.particles})")
    if cfg.seeds < 0:
        raise UsageError(f"--seeds must be >= 0 (got {cfg.seeds})")
    if cfg.tau is not None and not 0.0 <= cfg.tau <= 1.0:
        raise UsageError(f"--tau must lie in [0, 1] (got {cfg.tau})")
    if cfg.revision not in ("on", "off"):
        raise UsageError(f"--revision must be on or off (got {cfg.revision!r})")
    if cfg.variant not in ("paper", "improved"):
        raise UsageError(f"--variant must be paper or improved (got {cfg.variant!r})")
    if cfg.llm not in ("ollama", "local", "none"):
        raise UsageError(f"unknown --llm {cfg.llm!r} (choose from ollama, local, none)")
    if cfg.llm_timeout <= 0:
        raise UsageError(f"--llm-timeout must be positive (got {cfg.llm_timeout})")
    if cfg.batch_size < 1:
        raise UsageError(f"--batch-size must be at least 1 (got {cfg.batch_size})")
    if cfg.devices is not None:
        local = jax.local_device_count()
        if not 1 <= cfg.devices <= local:
            raise UsageError(f"--devices must lie in 1..{local} on this host (got {cfg.devices})")
    try:
        if cfg.board_file:
            path = Path(cfg.board_file)
            if not path.is_file():
                raise UsageError(f"board file not found: {cfg.board_file}")
            board = suites.parse_board_text(path.read_text(), path.stem)
            if game_config.fleet is not None and board.ship_lengths != game_config.fleet:
                raise UsageError(f"{path.name}: ship lengths {board.ship_lengths} do not match the "
                                 f"{cfg.protocol} fleet {game_config.fleet}")
            all_boards = [board]
        else:
            if cfg.suite_name not in ("synthetic", "grand", "random"):
                raise UsageError(f"unknown suite {cfg.suite_name!r} (choose from synthetic, "
                                 "grand, random)")
            if cfg.suite_name == "grand" and game_config.fleet is not None:
                raise UsageError("the grand suite has its own fleets: use --protocol grand")
            all_boards = suites.suite(cfg.suite_name, game_config, cfg.random_boards,
                                      cfg.run_seed)
    except (BoardError, UnicodeDecodeError) as err:
        raise UsageError(str(err).splitlines()[0]) from None
    if cfg.boards != "all" and not cfg.board_file:
        wanted = [b.strip() for b in cfg.boards.split(",") if b.strip()]
        known = {b.board_id: b for b in all_boards}
        unknown = [b for b in wanted if b not in known]
        if unknown or not wanted:
            raise UsageError(f"unknown board(s) {', '.join(unknown) or cfg.boards!r} in suite "
                             f"{cfg.suite_name}")
        all_boards = [known[b] for b in wanted]
    return game_config, all_boards


def make_player(cfg: RunConfig, game_config: GameConfig) -> Player:
    options = {"revision": cfg.revision == "on", "variant": cfg.variant}
    if cfg.tau is not None:
        options["tau"] = cfg.tau
    agent = agents_lib.make_agent(cfg.agent, game_config, **options)
    sampler = None
    if agent.needs_belief:
        sampler = belief_lib.make_sampler(cfg.sampler, game_config, cfg.particles,
                                          cfg.reference_rng)
    return Player(game_config, agent, sampler, cfg.reference_rng)


def _backend(cfg: RunConfig):
    """The configured LLM backend; an unusable one never stops a run: it is replaced by `none`,
    so every request falls back and is counted."""
    from bsjax.llm.backends import LLMError, NoBackend, make_backend
    try:
        return make_backend(cfg.llm, cfg.llm_host, cfg.model, cfg.llm_timeout)
    except LLMError as err:
        print(f"bsjax: warning: LLM backend unavailable ({err}); every LLM turn falls back",
              file=sys.stderr)
        return NoBackend()


def make_reviser(cfg: RunConfig, player: Player):
    """The L4 host step for agents whose gate asks an LLM (None otherwise)."""
    if not getattr(player.agent, "llm", False):
        return None
    from bsjax.harness.llm_host import RevisionHost
    return RevisionHost(_backend(cfg), player.agent.presets, player.agent.tau)


def make_captain_factory(cfg: RunConfig, player: Player):
    """Host-deciding captains (LM-only): a factory of per-batch captains, or None."""
    if not getattr(player.agent, "host_decides", False):
        return None
    from bsjax.llm.lm_only import LMOnlyCaptain
    backend = _backend(cfg)
    improved = getattr(player.agent, "variant", "paper") == "improved"
    return lambda seeds: LMOnlyCaptain(backend, seeds, reference_rng=not improved,
                                       case_insensitive=improved)


def game_list(boards: list[suites.Board], seeds: int) -> list[GameSpec]:
    """Boards outer, seed indices inner (the reference run order)."""
    return [GameSpec(b.board_id, s, suites.hash_seed(b.board_id, s), b.spans)
            for b in boards for s in range(seeds)]


def x64_context(cfg: RunConfig):
    """Bit-exact reference runs need float64 (the reference sums log-likelihoods in float64)."""
    return jax.enable_x64(True) if cfg.reference_rng else contextlib.nullcontext()


def _versions() -> dict:
    return {"jax": jax.__version__, "python": platform.python_version(),
            "device": str(jax.devices()[0]), "platform": jax.default_backend(),
            "local_devices": jax.local_device_count()}


def default_out_dir(prefix: str) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"{prefix}-{stamp}"


def local_out_dir(out: Path) -> Path:
    """This process's run directory: `out` itself, or `out/process-K-of-N` in a multi-process
    (`jax.distributed`) run, where each process plays every N-th game into its own directory
    and reports read them back as one run."""
    world = jax.process_count()
    return out if world == 1 else out / f"process-{jax.process_index()}-of-{world}"


def local_games(games: list[GameSpec]) -> list[GameSpec]:
    """The games this process plays (all of them unless the run spans several processes)."""
    return games[jax.process_index()::jax.process_count()]


def prepare_out_dir(out: Path, cfg: RunConfig, resume: bool) -> list[dict]:
    """Check the run directory; return the rows already done (resume). Writes nothing."""
    return _prepare_local_dir(local_out_dir(out), cfg, resume)


def _prepare_local_dir(out: Path, cfg: RunConfig, resume: bool) -> list[dict]:
    run_json = out / "run.json"
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a directory")
    if run_json.exists():
        if not resume:
            raise UsageError(f"{out} already holds a run: pass --resume or choose another --out")
        try:
            previous = json.loads(run_json.read_text()).get("config", {})
        except (json.JSONDecodeError, AttributeError):
            raise UsageError(f"{run_json} is not a valid run file; cannot resume") from None
        if _identity(previous) != _identity(dataclasses.asdict(cfg)):
            raise UsageError(f"{out} holds a run with a different configuration; cannot resume")
        return read_jsonl(out / "games.jsonl", stop_at_torn=True)
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} exists and is not a bsjax run directory")
    return []


# Fields that change how games are batched or placed, never their results: a run may resume
# with other values.
PLACEMENT_FIELDS = ("devices", "batch_size")


def _identity(config: dict) -> dict:
    return {k: v for k, v in config.items() if k not in PLACEMENT_FIELDS}


def _append_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("a") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _rewrite_clean(out: Path, rows: list[dict]) -> None:
    """Make the files agree with the finished games after an interruption: drop a torn last line
    of games.jsonl and every event of a game that has no row (it will be replayed)."""
    games = out / "games.jsonl"
    if games.exists():
        games.write_text("".join(json.dumps(r) + "\n" for r in rows))
    events = out / "events.jsonl"
    if events.exists():
        done = {(r["board"], r["seed"]) for r in rows}
        kept = [e for e in read_jsonl(events) if (e["board"], e["seed"]) in done]
        events.write_text("".join(json.dumps(e) + "\n" for e in kept))



def _sampler_name(cfg: RunConfig) -> str | None:
    return cfg.sampler if agents_lib.AGENTS[cfg.agent].needs_belief else None


def _plain(value):
    """A JSON-ready Python scalar."""
    value = np.asarray(value)
    if value.dtype == bool:
        return bool(value)
    if np.issubdtype(value.dtype, np.integer):
        return int(value)
    return round(float(value), 6)


def game_rows(cfg: RunConfig, games: list[GameSpec], result) -> tuple[list[dict], list[dict]]:
    rows, events = [], []
    for i, g in enumerate(games):
        cells = int(result.ship_cells[i])
        shots, hits = int(result.shots[i]), int(result.hits[i])
        rows.append({
            "board": g.board_id, "seed": g.seed_index, "game_seed": g.game_seed,
            "agent": cfg.agent, "sampler": _sampler_name(cfg),
            "protocol": cfg.protocol, "shots": shots, "hits": hits,
            "questions": int(result.questions[i]),
            "f1": 2 * hits / (shots + cells) if hits else 0.0,
            "won": bool(result.won[i]), "turns": int(result.turns[i]), "ship_cells": cells,
            "llm_calls": int(result.llm_calls[i]) if result.llm_calls is not None else 0,
            "fallbacks": int(result.fallbacks[i]) if result.fallbacks is not None else 0,
        })
        rec = result.records
        for t in range(rec["active"].shape[0]):
            if not rec["active"][t, i]:
                continue
            events.append({
                "board": g.board_id, "seed": g.seed_index, "turn": t,
                "kind": "question" if rec["kind"][t, i] == 1 else "shot",
                "cell": int(rec["cell"][t, i]), "question_id": int(rec["question_id"][t, i]),
                "outcome": bool(rec["outcome"][t, i]),
                "p": round(float(rec["hit_probability"][t, i]), 6),
                "llm": bool(rec["llm_request"][t, i]),
                **{name: _plain(value[t, i]) for name, value in rec["extras"].items()},
            })
    for e in result.llm_events:
        g = games[e.game]
        events.append({"board": g.board_id, "seed": g.seed_index, "turn": int(e.turn) - 1,
                       "kind": "llm", "ok": e.ok, "reason": e.reason,
                       "latency": round(e.latency, 4), "detail": e.kind, "source": e.source})
    return rows, events


def run(cfg: RunConfig, out: Path, resume: bool = False, progress=None) -> dict:
    """Play every game of `cfg`, writing results to `out`. Returns the summary dict.

    Validation happens before anything is written; an interrupted run resumes from games.jsonl
    without losing or repeating games.
    """
    game_config, boards = validate(cfg)
    games = local_games(game_list(boards, cfg.seeds))
    out = local_out_dir(out)
    done_rows = _prepare_local_dir(out, cfg, resume)
    done_keys = {(r["board"], r["seed"]) for r in done_rows}
    todo = [g for g in games if (g.board_id, g.seed_index) not in done_keys]

    out.mkdir(parents=True, exist_ok=True)
    if not (out / "run.json").exists():
        (out / "run.json").write_text(json.dumps(
            {"config": dataclasses.asdict(cfg), "versions": _versions(),
             "created": datetime.datetime.now().isoformat(timespec="seconds"),
             "games": len(games)}, indent=2))
    _rewrite_clean(out, done_rows)

    start = time.perf_counter()
    compile_seconds, play_seconds = 0.0, 0.0
    with x64_context(cfg):
        batch = max(1, min(cfg.batch_size, len(games)))
        runner = None
        if todo:
            player = make_player(cfg, game_config)
            runner = BatchRunner(player, batch, make_reviser(cfg, player),
                                 make_captain_factory(cfg, player), devices=cfg.devices)
            batch = runner.batch_size  # rounded up to whole slices per device
        if progress is not None:
            progress.start(len(games), len(done_rows))
        for lo in range(0, len(todo), batch):
            chunk = todo[lo:lo + batch]
            on_turn = (lambda _t, n_done, base=len(done_rows): progress.update(base + n_done)
                       ) if progress is not None else None
            batch_start = time.perf_counter()
            result = runner.play(chunk, cfg.run_seed, on_turn)
            rows, events = game_rows(cfg, chunk, result)
            # Wall time (compile and LLM calls included) shared over the batch's games, so the
            # table's wall time survives interruptions and resumes.
            for row in rows:
                row["wall_seconds"] = round((time.perf_counter() - batch_start) / len(chunk), 4)
            # Events first: a game counts as done only once its row is written after them.
            _append_jsonl(out / "events.jsonl", events)
            _append_jsonl(out / "games.jsonl", rows)
            done_rows.extend(rows)
            play_seconds += result.seconds
        if runner is not None:
            compile_seconds = runner.compile_seconds
    if progress is not None:
        progress.stop()
    played = len(todo)
    summary = stats.summarize(done_rows)
    llm_events = [e for e in read_jsonl(out / "events.jsonl") if e.get("kind") == "llm"]
    reasons: dict[str, int] = {}
    for e in llm_events:
        if not e["ok"]:
            reasons[e["reason"]] = reasons.get(e["reason"], 0) + 1
    summary.update({
        "fallback_reasons": reasons,
        "llm_latency_mean": (sum(e["latency"] for e in llm_events) / len(llm_events)
                             if llm_events else 0.0),
        "agent": cfg.agent, "protocol": cfg.protocol, "suite": cfg.suite_name,
        "sampler": _sampler_name(cfg), "rng": cfg.rng,
        "particles": cfg.particles, "played_now": played,
        "seconds": time.perf_counter() - start,
        "compile_seconds": compile_seconds,
        "games_per_second": played / play_seconds if play_seconds > 0 else 0.0,
        "device": _versions()["device"],
    })
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
