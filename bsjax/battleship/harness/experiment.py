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
from bsjax.battleship import belief as belief_lib
from bsjax.battleship.belief import mh_kernel
from bsjax.battleship.config import GameConfig, protocol
from bsjax.battleship.game import suites
from bsjax.battleship.game.suites import BoardError
from bsjax.battleship.harness import events as events_lib
from bsjax.battleship.harness import llm_setup, memory, rundir, summaries
from bsjax.battleship.harness import params as params_lib
from bsjax.battleship.harness.loop import BatchRunner, GameSpec, Player
from bsjax.battleship.harness.summaries import summarize_llm_events
from bsjax.battleship.runtime import presets as presets_lib
from bsjax.core.errors import UsageError
from bsjax.core.files import LOCK_NAME, command_line, read_jsonl, write_text_atomic, writer_lock

SAMPLERS = ("chain", "exact", "importance", "particles")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything that determines a run's results (written to run.json)."""

    agent: str = "greedy"
    protocol: str = "paper"
    suite: str | None = None           # default: the protocol's own suite
    boards: str = "all"                # "all" or "B01,B02"
    board_file: str | None = None
    seeds: int = 3
    first_seed: int = 0                # seed indices first_seed .. first_seed + seeds - 1
    sampler: str = "particles"
    rng: str = "jax"
    particles: int = 500
    sweeps: int = 4                    # particles sampler: MH sweeps per observation
    mh_kernel: str = "auto"            # particles sampler: auto | xla | pallas | interpret
    tau: float | None = None           # None: the agent's own default (MRA 0.72)
    revision: str = "on"               # MRA: on | off
    cooldown: int = 3                  # MRA: turns after a revision before the gate may reopen
    min_delta: float = 0.01            # MRA: δ_min, the preview Δ a revision must beat
    presets: str = "all"               # MRA: the revision presets the gate may apply ("all", a,b)
    answer_noise: float | None = None  # the belief's modelled answer noise ε (None: the protocol's)
    variant: str = "paper"             # MRA: paper | improved
    run_seed: int = 0
    random_boards: int = 18
    batch_size: int | str = 512        # games per batch, or "auto" (from device memory)
    llm: str = "local"                 # LLM backend: local | ollama | uniform | none
    llm_host: str | None = None        # Ollama server, e.g. http://127.0.0.1:11434
    model: str | None = None           # Ollama model name
    llm_timeout: float = 30.0
    llm_format: str = "schema"         # schema (per-call JSON Schema) | free (published call)
    devices: int | None = None         # local devices to shard games over (None: all)
    verbose: bool = False              # llama.cpp's own log lines
    events: str = "auto"               # turn events: jsonl | parquet | auto (parquet past 2,000 games)

    @property
    def suite_name(self) -> str:
        if self.board_file:
            return "file"
        return self.suite or ("synthetic" if self.protocol == "paper" else "grand")

    @property
    def reference_rng(self) -> bool:
        return self.rng == "reference"


MAX_RUN_SEED = 2**32 - 1


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
    if cfg.sampler == "exact" and agents_lib.AGENTS[cfg.agent].needs_belief:
        from bsjax.battleship.belief.enumerated import unsupported
        why = unsupported(game_config)
        if why is not None:
            raise UsageError(f"--sampler exact with --protocol {cfg.protocol}: {why}")
    if cfg.rng not in ("jax", "reference"):
        raise UsageError(f"unknown rng {cfg.rng!r} (choose from jax, reference)")
    if cfg.reference_rng and (cfg.sampler != "chain" or cfg.protocol != "paper"):
        raise UsageError("--rng reference reproduces the reference chain: it needs "
                         "--sampler chain and --protocol paper")
    if cfg.particles < 1:
        raise UsageError(f"--particles must be at least 1 (got {cfg.particles})")
    if cfg.mh_kernel not in mh_kernel.MODES:
        raise UsageError(f"unknown --mh-kernel {cfg.mh_kernel!r} "
                         f"(choose from {', '.join(mh_kernel.MODES)})")
    if cfg.mh_kernel == "pallas" and jax.default_backend() != "gpu":
        raise UsageError(f"--mh-kernel pallas compiles for a CUDA GPU, and this backend is "
                         f"{jax.default_backend()}: use auto, xla or interpret")
    if cfg.seeds < 0:
        raise UsageError(f"--seeds must be >= 0 (got {cfg.seeds})")
    if cfg.first_seed < 0:
        raise UsageError(f"--first-seed must be >= 0 (got {cfg.first_seed})")
    if cfg.tau is not None and not 0.0 <= cfg.tau <= 1.0:
        raise UsageError(f"--tau must lie in [0, 1] (got {cfg.tau})")
    if cfg.answer_noise is not None and not 0.0 <= cfg.answer_noise <= 1.0:
        raise UsageError(f"--answer-noise must lie in [0, 1] (got {cfg.answer_noise})")
    if not 0 <= cfg.cooldown <= 100:
        raise UsageError(f"--cooldown must lie in 0..100 (got {cfg.cooldown})")
    if not 0.0 <= cfg.min_delta <= 1.0:
        raise UsageError(f"--min-delta must lie in [0, 1] (got {cfg.min_delta})")
    try:
        chosen = presets_lib.choose(cfg.presets)
    except ValueError as err:
        raise UsageError(f"--presets: {err}") from None
    if chosen != presets_lib.PAPER_PRESETS and cfg.agent not in ("mra", "wma-reflective"):
        raise UsageError(f"--presets applies to the symbolic runtime (mra, wma-reflective), "
                         f"not {cfg.agent!r}: an LLM revision may choose any preset")
    if cfg.revision not in ("on", "off"):
        raise UsageError(f"--revision must be on or off (got {cfg.revision!r})")
    if cfg.events not in events_lib.FORMATS:
        raise UsageError(f"--events must be one of {', '.join(events_lib.FORMATS)} "
                         f"(got {cfg.events!r})")
    if cfg.variant not in ("paper", "improved"):
        raise UsageError(f"--variant must be paper or improved (got {cfg.variant!r})")
    llm_setup.validate_llm(cfg)
    if isinstance(cfg.run_seed, bool) or not isinstance(cfg.run_seed, int) \
            or not 0 <= cfg.run_seed <= MAX_RUN_SEED:
        raise UsageError(f"--run-seed must lie in 0..{MAX_RUN_SEED} (got {cfg.run_seed})")
    if cfg.batch_size != "auto" and (isinstance(cfg.batch_size, str) or cfg.batch_size < 1):
        raise UsageError(f"--batch-size must be a positive integer or auto "
                         f"(got {cfg.batch_size!r})")
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


# RunConfig fields that are agent params (traced, not compiled in): runs that differ only in them
# share one compiled program, and a study plays such rows as one batch (`harness.study`).
PARAM_FIELDS = ("tau", "revision", "cooldown", "min_delta", "presets", "answer_noise")


_AGENT_PARAMS = ("tau", "revision", "cooldown", "min_delta", "presets")
_BELIEF_FIELDS = ("sampler", "particles", "sweeps", "mh_kernel", "rng", "answer_noise")


def check_applies(cfg: RunConfig, fields: list[str] | None = None) -> None:
    """Refuse settings the run would ignore: `fields` (by default every field set away from its
    default) that the agent, its belief, the suite or the board file do not read, so that
    `run.json` never records something that was not played. Raises UsageError."""
    defaults = RunConfig()
    if fields is None:
        fields = [f.name for f in dataclasses.fields(cfg)
                  if getattr(cfg, f.name) != getattr(defaults, f.name)]
    cls = agents_lib.AGENTS[cfg.agent]
    agent = None
    for name in fields:
        flag = "--" + name.replace("_", "-")
        why = None
        if name in _AGENT_PARAMS:
            agent = agent or agents_lib.make_agent(cfg.agent, protocol(cfg.protocol))
            if not hasattr(agent.default_params(), name):
                why = f"agent {cfg.agent!r} has no such param"
        elif name == "variant" and "variant" not in agents_lib.structure_options(cls):
            why = f"agent {cfg.agent!r} has no variants"
        elif name in _BELIEF_FIELDS and not cls.needs_belief:
            why = f"agent {cfg.agent!r} keeps no belief"
        elif name == "sweeps" and cfg.sampler != "particles":
            why = f"the {cfg.sampler} sampler makes no sweeps"
        elif name == "mh_kernel" and cfg.sampler in ("importance", "exact"):
            why = f"the {cfg.sampler} sampler makes no MH moves"
        elif name == "mh_kernel" and cfg.reference_rng:
            why = "the reference streams always run the XLA loops"
        elif name == "random_boards" and cfg.suite_name != "random":
            why = f"the suite is {cfg.suite_name!r}, not random"
        elif name == "boards" and cfg.board_file and cfg.boards != "all":
            why = "--board-file gives the board"
        elif name in LLM_FIELDS and llm_setup.uses_llm(cls) is None:
            why = f"agent {cfg.agent!r} calls no LLM"
        if why is not None:
            raise UsageError(f"{flag} does not apply: {why}")


def make_player(cfg: RunConfig, game_config: GameConfig) -> Player:
    """The run's static structure: its agent (with its variant, where it has one) and sampler."""
    cls = agents_lib.AGENTS[cfg.agent]
    structure = {"variant": cfg.variant} if "variant" in agents_lib.structure_options(cls) else {}
    agent = agents_lib.make_agent(cfg.agent, game_config, **structure)
    sampler = None
    if agent.needs_belief:
        sampler = belief_lib.make_sampler(cfg.sampler, game_config, cfg.particles,
                                          cfg.reference_rng, sweeps=cfg.sweeps,
                                          mh_kernel=cfg.mh_kernel)
    return Player(game_config, agent, sampler, cfg.reference_rng)


def run_params(cfg: RunConfig, player: Player):
    """One game's params under `cfg` (host arrays): the defaults with the `PARAM_FIELDS` the
    player has. A field the agent has no param for (τ for greedy) is left out."""
    defaults = jax.device_get(player.default_params())
    values = {"revision": cfg.revision, "cooldown": cfg.cooldown, "min_delta": cfg.min_delta,
              "presets": cfg.presets, "tau": cfg.tau, "answer_noise": cfg.answer_noise}
    known = params_lib.names(defaults)
    return params_lib.with_values(player, {k: v for k, v in values.items()
                                           if v is not None and k in known}, defaults)


def structure_identity(cfg: RunConfig) -> tuple:
    """A run's config without its params: runs with equal identities play the same games with
    one compiled program (a group, `run_group`)."""
    skip = set(PARAM_FIELDS) | {"verbose", "events"}
    return tuple((k, v) for k, v in sorted(dataclasses.asdict(cfg).items()) if k not in skip)


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
        if _identity(meta.get("config", {})) != _identity(dataclasses.asdict(cfg)):
            raise UsageError(f"{out} holds a run with a different configuration; cannot resume")
        rundir.read_rows(out / "events.jsonl", rundir.EVENT_FIELDS)  # damage refused up front
        rundir.check_parts(out / "events")
        return rundir.read_games(out / "games.jsonl", meta.get("games"))
    if out.exists() and any(p.name != LOCK_NAME for p in out.iterdir()):
        raise UsageError(f"{out} exists and is not a bsjax run directory")
    return []


# Fields that change where games are played or how their events are stored, never their results:
# a run may resume with other values. (Not the batch size: a game's last float may depend on the
# compiled program's batch shape, so a resume keeps it.)
PLACEMENT_FIELDS = ("devices", "verbose", "events")


# The LLM settings decide results only for agents that call an LLM.
LLM_FIELDS = ("llm", "llm_host", "model", "llm_timeout", "llm_format")
# What runs written before a field existed did: the published free call.
LEGACY_FIELDS = {"llm_format": "free"}


def _identity(config: dict) -> dict:
    """The fields that decide a run's results (a resume must match them)."""
    full = {**dataclasses.asdict(RunConfig()), **LEGACY_FIELDS, **config}
    agent = agents_lib.AGENTS.get(full.get("agent"))
    ignored = set(PLACEMENT_FIELDS)
    if agent is None or llm_setup.uses_llm(agent) is None:
        ignored |= set(LLM_FIELDS)
    return {k: v for k, v in full.items() if k not in ignored}


def _sampler_name(cfg: RunConfig) -> str | None:
    return cfg.sampler if agents_lib.AGENTS[cfg.agent].needs_belief else None


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
                rows = rundir.game_rows(plan.cfg, _sampler_name(plan.cfg), mine_games,
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
        "sampler": _sampler_name(cfg), "rng": cfg.rng,
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
