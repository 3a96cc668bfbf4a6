"""What a run is: `RunConfig`, its validation, and what it decides.

A `RunConfig` holds every setting that determines a run's results (it is written to
`run.json`). This module checks one (`validate`, `check_applies`), builds its static structure
(`make_player`) and params (`run_params`), and says which of its fields decide results
(`result_identity`, for resume) and which are traced params (`PARAM_FIELDS`, for grouping).
`harness.experiment` plays it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path

import jax

from bsjax.battleship import agents as agents_lib
from bsjax.battleship import belief as belief_lib
from bsjax.battleship.belief import mh_kernel
from bsjax.battleship.belief.importance import PRIORS
from bsjax.battleship.config import GameConfig, protocol
from bsjax.battleship.game import suites
from bsjax.battleship.game.suites import BoardError
from bsjax.battleship.harness import events as events_lib
from bsjax.battleship.harness import llm_setup
from bsjax.battleship.harness import params as params_lib
from bsjax.battleship.harness.player import Player
from bsjax.battleship.runtime import presets as presets_lib
from bsjax.core.errors import UsageError

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
    prior: str = "proposal"            # importance sampler: proposal | uniform
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
    # Any other agent or belief param by name, as `bsjax.play(params=...)` takes it (`gamma`,
    # `margin`, `policy.budgets`, `evidence_scale`): traced, so runs that differ only in them
    # share one compiled program. CLI: --set NAME=VALUE.
    params: dict = dataclasses.field(default_factory=dict, hash=False)  # a dict: not hashed

    def __post_init__(self):
        object.__setattr__(self, "params", normalize_params(self.params))

    @property
    def suite_name(self) -> str:
        if self.board_file:
            return "file"
        return self.suite or ("synthetic" if self.protocol == "paper" else "grand")

    @property
    def reference_rng(self) -> bool:
        return self.rng == "reference"


MAX_RUN_SEED = 2**32 - 1


def _param_value(name: str, value):
    """A params value as JSON keeps it: a finite number, a flag, a word, or a list of them."""
    if isinstance(value, (list, tuple)):
        return [_param_value(name, v) for v in value]
    if isinstance(value, bool) or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and math.isfinite(value):
        return value
    raise UsageError(f"params: {name} takes a finite number, a flag, a word or a list of them "
                     f"(got {value!r})")


def normalize_params(params) -> dict:
    """`params` as a RunConfig holds them: names in sorted order, lists for sequences (so that
    a config and its run.json compare equal). Raises UsageError."""
    if not isinstance(params, Mapping):
        raise UsageError(f"params must map names to values (got {params!r})")
    for name in params:
        if not isinstance(name, str) or not name:
            raise UsageError(f"params: names must be non-empty strings (got {name!r})")
    return {name: _param_value(name, params[name]) for name in sorted(params)}


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
    if cfg.prior not in PRIORS:
        raise UsageError(f"unknown --prior {cfg.prior!r} (choose from {', '.join(PRIORS)})")
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
    for name in cfg.params:
        if name in PARAM_FIELDS:
            raise UsageError(f"params: set {name} with --{name.replace('_', '-')}, not in params")
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
    if cfg.params:
        try:
            run_params(cfg, make_player(cfg, game_config))
        except ValueError as err:
            raise UsageError(f"params: {err}") from None
    return game_config, all_boards


# RunConfig fields that are agent params (traced, not compiled in): runs that differ only in them
# share one compiled program, and a study plays such rows as one batch (`harness.study`).
PARAM_FIELDS = ("tau", "revision", "cooldown", "min_delta", "presets", "answer_noise", "params")


_AGENT_PARAMS = ("tau", "revision", "cooldown", "min_delta", "presets")
_BELIEF_FIELDS = ("sampler", "particles", "sweeps", "mh_kernel", "prior", "rng", "answer_noise")


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
        elif name == "prior" and cfg.sampler != "importance":
            why = f"the {cfg.sampler} sampler has no proposal to correct"
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
                                          mh_kernel=cfg.mh_kernel, prior=cfg.prior)
    return Player(game_config, agent, sampler, cfg.reference_rng)


def run_params(cfg: RunConfig, player: Player):
    """One game's params under `cfg` (host arrays): the defaults with the `PARAM_FIELDS` the
    player has, then `cfg.params`. A field the agent has no param for (τ for greedy) is left
    out; a name in `cfg.params` it has not raises ValueError."""
    defaults = jax.device_get(player.default_params())
    values = {"revision": cfg.revision, "cooldown": cfg.cooldown, "min_delta": cfg.min_delta,
              "presets": cfg.presets, "tau": cfg.tau, "answer_noise": cfg.answer_noise}
    known = params_lib.names(defaults)
    values = {k: v for k, v in values.items() if v is not None and k in known}
    return params_lib.with_values(player, {**values, **cfg.params}, defaults)


def structure_identity(cfg: RunConfig) -> tuple:
    """A run's config without its params: runs with equal identities play the same games with
    one compiled program (a group, `run_group`)."""
    skip = set(PARAM_FIELDS) | {"verbose", "events"}
    return tuple((k, v) for k, v in sorted(dataclasses.asdict(cfg).items()) if k not in skip)


# Fields that change where games are played or how their events are stored, never their results:
# a run may resume with other values. (Not the batch size: a game's last float may depend on the
# compiled program's batch shape, so a resume keeps it.)
PLACEMENT_FIELDS = ("devices", "verbose", "events")


# The LLM settings decide results only for agents that call an LLM.
LLM_FIELDS = ("llm", "llm_host", "model", "llm_timeout", "llm_format")
# What runs written before a field existed did: the published free call.
LEGACY_FIELDS = {"llm_format": "free"}


def result_identity(config: dict) -> dict:
    """The fields that decide a run's results (a resume must match them)."""
    full = {**dataclasses.asdict(RunConfig()), **LEGACY_FIELDS, **config}
    agent = agents_lib.AGENTS.get(full.get("agent"))
    ignored = set(PLACEMENT_FIELDS)
    if agent is None or llm_setup.uses_llm(agent) is None:
        ignored |= set(LLM_FIELDS)
    return {k: v for k, v in full.items() if k not in ignored}


def sampler_name(cfg: RunConfig) -> str | None:
    """The run's sampler, or None when its agent keeps no belief."""
    return cfg.sampler if agents_lib.AGENTS[cfg.agent].needs_belief else None
