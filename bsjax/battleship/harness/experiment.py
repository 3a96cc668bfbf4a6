"""Experiments: suites × boards × seeds for one agent, results on disk, resume.

A run directory holds `run.json` (config, versions, device), `games.jsonl` (one row per game,
appended as each batch finishes), `events.jsonl` (per-turn records) and `summary.json`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import platform
import sys
import time
from pathlib import Path

import jax

from bsjax.battleship import agents as agents_lib
from bsjax.battleship.config import GameConfig
from bsjax.battleship.game import suites
from bsjax.battleship.harness import events as events_lib
from bsjax.battleship.harness import llm_setup, memory, rundir, summaries
from bsjax.battleship.harness.batch import GameSpec
from bsjax.battleship.harness.loop import BatchRunner
from bsjax.battleship.harness.run_config import (
    RunConfig,
    make_player,
    result_identity,
    run_params,
    sampler_name,
    structure_identity,
    validate,
)
from bsjax.battleship.harness.summaries import summarize_llm_events
from bsjax.core.errors import UsageError
from bsjax.core.files import LOCK_NAME, command_line, read_jsonl, write_text_atomic, writer_lock


def game_list(boards: list[suites.Board], seeds: int, first_seed: int = 0,
              params=None) -> list[GameSpec]:
    """Boards outer, seed indices `first_seed .. first_seed + seeds - 1` inner (the reference run
    order), each with the agent's `params` (None: its defaults). A game depends on its board,
    seed index and params only, so disjoint index ranges are disjoint games (held-out seeds for
    a study tuned on others)."""
    return [GameSpec(b.board_id, s, suites.hash_seed(b.board_id, s), b.spans, params)
            for b in boards for s in range(first_seed, first_seed + seeds)]


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
        meta = rundir.read_run_file(run_json)
        if result_identity(meta.get("config", {})) != result_identity(dataclasses.asdict(cfg)):
            raise UsageError(f"{out} holds a run with a different configuration; cannot resume")
        rundir.read_rows(out / "events.jsonl", rundir.EVENT_FIELDS)  # damage refused up front
        rundir.check_parts(out / "events")
        return rundir.read_games(out / "games.jsonl", meta.get("games"))
    if out.exists() and any(p.name != LOCK_NAME for p in out.iterdir()):
        raise UsageError(f"{out} exists and is not a bsjax run directory")
    return []



def run(cfg: RunConfig, out: Path, resume: bool = False, progress=None) -> dict:
    """Play every game of `cfg`, writing results to `out`. Returns the summary dict.

    Validation happens before anything is written; an interrupted run resumes from games.jsonl
    without losing or repeating games. (The commands also refuse a setting the run would
    ignore, `check_applies`; from Python a config may carry settings for other agents.)
    """
    return run_group([cfg], [out], resume, progress)[0]


@dataclasses.dataclass
class _RunPlan:
    """One run of a group: its config, directory, games and what is done."""

    cfg: RunConfig
    out: Path
    games: list[GameSpec]
    done_rows: list[dict]
    todo: list[GameSpec]
    columnar: bool = False   # turn events as Parquet parts (`harness.events`)
    played: int = 0
    play_seconds: float = 0.0
    wall_seconds: float = 0.0


def groupable(cfgs: list[RunConfig]) -> bool:
    """Whether runs can be played as one batch of one compiled program: the same structure
    (`structure_identity`), and no LLM (each LLM run keeps its own host path and call cache)."""
    return (len({structure_identity(c) for c in cfgs}) == 1
            and all(llm_setup.uses_llm(agents_lib.AGENTS[c.agent]) is None for c in cfgs))


def run_group(cfgs: list[RunConfig], outs: list[Path], resume: bool = False,
              progress=None) -> list[dict]:
    """Play several runs whose configs differ only in params (`PARAM_FIELDS`) as one batch of
    one compiled program, each into its own run directory. Returns their summaries.

    Every game is the game its run plays alone (a game depends on its board, seed, params and
    the run seed, never on its batch); each run's directory holds its own games, events and
    summary (its wall and play seconds are its share of the group's, by games played).
    """
    if len(cfgs) > 1 and not groupable(cfgs):
        raise ValueError("runs of a group must differ only in params and call no LLM")
    # A game's floats may differ in the last place with the batch's size (XLA's reductions
    # are not batch-invariant), so a group plays batches of the size each run would play
    # alone: every run's games are then those of its own `bsjax play`, bit for bit.
    plans = []
    for cfg, out in zip(cfgs, outs):
        game_config, boards = validate(cfg)
        games = local_games(game_list(boards, cfg.seeds, cfg.first_seed))
        out = local_out_dir(out)
        _prepare_local_dir(out, cfg, resume)  # refuse before anything is written
        plans.append(_RunPlan(cfg, out, games, [], []))
    with contextlib.ExitStack() as locks, _writing(plans):
        for plan in plans:
            # One writer per directory; what is done is read again under the lock.
            locks.enter_context(writer_lock(plan.out, command_line()))
            plan.done_rows = _prepare_local_dir(plan.out, plan.cfg, resume)
            done_keys = {(r["board"], r["seed"]) for r in plan.done_rows}
            plan.todo = [g for g in plan.games if (g.board_id, g.seed_index) not in done_keys]
            if not (plan.out / "run.json").exists():
                write_text_atomic(plan.out / "run.json", json.dumps(
                    {"config": dataclasses.asdict(plan.cfg), "versions": _versions(),
                     "created": datetime.datetime.now().isoformat(timespec="seconds"),
                     "games": len(plan.games)}, indent=2))
            rundir.rewrite_clean(plan.out, plan.done_rows)
            plan.columnar = events_lib.is_columnar(plan.out, plan.cfg.events, len(plan.games))
        return _play_group(cfgs, plans, game_config, progress)


@contextlib.contextmanager
def _writing(plans: list[_RunPlan]):
    """Turn a failed write (a full disk, a lost mount) into one line that says what was kept:
    the files stay resumable (a game counts only once its row is complete)."""
    try:
        yield
    except OSError as err:
        kept = sum(len(p.done_rows) for p in plans)
        total = sum(len(p.games) for p in plans)
        where = err.filename or ", ".join(str(p.out) for p in plans)
        raise UsageError(f"cannot write {where}: {err.strerror or err}; the games written before "
                         f"it are kept (at least {kept} of {total}), and the run resumes with "
                         "--resume once it can write") from None


def _play_group(cfgs: list[RunConfig], plans: list[_RunPlan], game_config: GameConfig,
                progress) -> list[dict]:
    """Play the group's games (the directories are locked and clean); returns the summaries."""
    first = cfgs[0]
    start = time.perf_counter()
    compile_seconds = 0.0
    todo = [(i, g) for i, plan in enumerate(plans) for g in plan.todo]
    with x64_context(first):
        batch = (max(1, min(first.batch_size, len(plans[0].games))) if first.batch_size != "auto"
                 else 1)
        runner = None
        if todo:
            player = make_player(first, game_config)
            params = [run_params(plan.cfg, player) for plan in plans]
            todo = [(i, dataclasses.replace(g, params=params[i])) for i, g in todo]
            if first.batch_size == "auto":
                decided = memory.auto_batch_size(player, max(len(p.todo) for p in plans),
                                                 first.devices or jax.local_device_count())
                batch = decided.batch_size
                print(f"--batch-size auto: {decided.describe()}", file=sys.stderr)
            monitor = getattr(progress, "llm_event", None)
            reviser, captain = llm_setup.make_llm_hosts(first, player, plans[0].out, monitor,
                                                        games_at_once=min(batch, len(todo)))
            runner = BatchRunner(player, batch, reviser, captain, devices=first.devices)
            batch = runner.batch_size  # rounded up to whole slices per device
        done = sum(len(plan.done_rows) for plan in plans)
        if progress is not None:
            progress.start(sum(len(plan.games) for plan in plans), done)
        for lo in range(0, len(todo), batch):
            chunk = todo[lo:lo + batch]
            on_turn = (lambda turn, n_done, base=done: progress.update(base + n_done, turn + 1)
                       ) if progress is not None else None
            batch_start = time.perf_counter()
            result = runner.play([g for _, g in chunk], first.run_seed, on_turn)
            # Wall time (compile and LLM calls included) shared over the batch's games, so the
            # table's wall time survives interruptions and resumes.
            wall = (time.perf_counter() - batch_start) / len(chunk)
            for i, plan in enumerate(plans):
                mine = [k for k, (j, _) in enumerate(chunk) if j == i]
                if not mine:
                    continue
                mine_games, mine_result = [chunk[k][1] for k in mine], result.select(mine)
                rows = rundir.game_rows(plan.cfg, sampler_name(plan.cfg), mine_games,
                                        mine_result)
                for row in rows:
                    row["wall_seconds"] = round(wall, 4)
                rundir.write_batch(plan.out, plan.columnar, rows, mine_games, mine_result)
                plan.done_rows.extend(rows)
                plan.played += len(mine)
                plan.play_seconds += result.seconds * len(mine) / len(chunk)
            done += len(chunk)
        if runner is not None:
            compile_seconds = runner.compile_seconds
    if progress is not None:
        progress.stop()
    total = time.perf_counter() - start
    return [_finish(plan, total * plan.played / max(len(todo), 1), compile_seconds)
            for plan in plans]


def _finish(plan: _RunPlan, seconds: float, compile_seconds: float) -> dict:
    """Write and return a run's summary.json."""
    cfg, out = plan.cfg, plan.out
    summary = summaries.summarize(plan.done_rows)
    summary.update(summarize_llm_events(read_jsonl(out / "events.jsonl")))
    summary.update({
        "llm": cfg.llm if llm_setup.uses_llm(agents_lib.AGENTS[cfg.agent]) else None,
        "agent": cfg.agent, "protocol": cfg.protocol, "suite": cfg.suite_name,
        "sampler": sampler_name(cfg), "rng": cfg.rng,
        "particles": cfg.particles, "played_now": plan.played,
        "seconds": seconds,
        "compile_seconds": compile_seconds,
        "games_per_second": plan.played / plan.play_seconds if plan.play_seconds > 0 else 0.0,
        "device": _versions()["device"],
    })
    if plan.played == 0 and (out / "summary.json").is_file():
        # A resume with nothing left to play keeps the timing of the run that played the games.
        previous = json.loads((out / "summary.json").read_text())
        summary.update({name: previous[name] for name in
                        ("seconds", "compile_seconds", "games_per_second") if name in previous})
    write_text_atomic(out / "summary.json", json.dumps(summary, indent=2))
    return summary
