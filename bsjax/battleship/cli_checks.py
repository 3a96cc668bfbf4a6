"""Input checks of the Battleship commands (`bsjax play/paper/sweep/report/bench/h2h/lens`).

Every check raises `UsageError` with a one-line reason (reported as `bsjax: error: ...`, exit code
2) and writes nothing, so an entry point runs them all before its first write. The checks shared
with the other commands (counts, paths, hosts) are in `bsjax.core.checks`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from pathlib import Path

from bsjax.battleship.harness import rundir
from bsjax.battleship.harness.run_config import RunConfig
from bsjax.core.checks import int_in, nonempty, read_toml, safe_dir_name, unique
from bsjax.core.errors import UsageError

# Bounds of the Battleship game commands' counts: far above any run of the paper (30 seeds, 1000
# particles, 500 random boards, 512 games a batch), low enough that a typo fails at once instead of
# filling memory or overflowing an int32 after the run directory is written.
MAX_SEEDS = 100_000
MAX_PARTICLES = 1_000_000
MAX_SWEEPS = 1_000
MAX_RANDOM_BOARDS = 100_000
MAX_BATCH_SIZE = 1_000_000
MAX_BENCH_GAMES = 1_000_000
MAX_REPEATS = 10_000


# --- run configurations -------------------------------------------------------------------------

_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _types_ok(value, allowed: tuple) -> bool:
    if value is None:
        return type(None) in allowed
    if isinstance(value, bool):
        return bool in allowed
    if isinstance(value, int) and float in allowed:  # a TOML `tau = 1`
        return True
    return isinstance(value, tuple(t for t in allowed if t is not type(None)))


def check_run_config(cfg: RunConfig, where: str = "") -> RunConfig:
    """The fields' types (an experiment file can hold anything) and the count bounds; the rest
    is `run_config.validate`'s. `where` prefixes the message (e.g. "row B1: ")."""
    hints = typing.get_type_hints(type(cfg))
    for field in dataclasses.fields(cfg):
        value = getattr(cfg, field.name)
        allowed = typing.get_args(hints[field.name]) or (hints[field.name],)
        if not _types_ok(value, allowed):
            kinds = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in allowed
                                if t is not type(None))
            raise UsageError(f"{where}{_flag(field.name)} must be {kinds} (got {value!r})")
    try:
        int_in(cfg.seeds, "--seeds", 1, MAX_SEEDS)
        int_in(cfg.first_seed, "--first-seed", 0, MAX_SEEDS)
        int_in(cfg.particles, "--particles", 1, MAX_PARTICLES)
        int_in(cfg.sweeps, "--sweeps", 1, MAX_SWEEPS)
        int_in(cfg.random_boards, "--random-boards", 1, MAX_RANDOM_BOARDS)
        if cfg.batch_size != "auto":
            int_in(cfg.batch_size, "--batch-size", 1, MAX_BATCH_SIZE)
        for name in ("suite", "board_file", "boards"):
            nonempty(getattr(cfg, name), _flag(name))
        if cfg.boards != "all" and not cfg.board_file:
            unique((b.strip() for b in cfg.boards.split(",") if b.strip()), "--boards")
        if cfg.board_file is not None:
            _check_text_file(Path(cfg.board_file), "--board-file")
    except UsageError as err:
        raise UsageError(f"{where}{err}") from None
    return cfg


def _check_text_file(path: Path, flag: str) -> None:
    """A file given by `flag` that exists is a UTF-8 text file (a missing one is reported by the
    code that reads it)."""
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a directory, not a file")
    if path.is_file():
        try:
            path.read_text()
        except (OSError, UnicodeDecodeError) as err:
            raise UsageError(f"{flag} {path} cannot be read as text "
                             f"({getattr(err, 'reason', None) or err})") from None


def check_study(study) -> None:
    """A study's row ids (directory names) and every active row's config."""
    check_run_config(study.base)
    for row in study.rows:
        safe_dir_name(row.id, "a row id")
    for row in study.active_rows():
        try:
            config = row.config(study.base)
        except TypeError as err:
            raise UsageError(f"row {row.id}: {err}") from None
        check_run_config(config, f"row {row.id}: ")


# --- experiment files and sweeps ----------------------------------------------------------------

def _expect(value, kind, where: str, json_file: bool = False):
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        names = {dict: "a JSON object" if json_file else "a table", list: "a list",
                 str: "a string", bool: "true or false"}
        raise UsageError(f"{where} must be {names.get(kind, kind.__name__)} (got {value!r})")
    return value


# What an experiment file may hold: its tables (spelled as a user writes them) and their keys.
TOML_TABLES = {"experiment": "[experiment]", "base": "[base]", "rows": "[[rows]]",
               "sweep": "[sweep]"}
EXPERIMENT_KEYS = {"kind": "kind", "title": "title", "baseline": "baseline"}
SWEEP_KEYS = {"param": "param", "values": "values"}


def _known(table: dict, allowed: dict[str, str], where: str, what: str) -> None:
    """Every key of `table` is one of `allowed`; else one line with the nearest valid name (a
    misspelt `[[rows]]` would otherwise run the built-in table)."""
    import difflib
    for key in table:
        if key not in allowed:
            near = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.5)
            hint = f"; did you mean {allowed[near[0]]}?" if near else ""
            names = ", ".join(allowed.values())
            raise UsageError(f"{where} unknown {what} {key!r}{hint} (valid: {names})")


def check_experiment_file(path) -> None:
    """The shape of an experiment file (`bsjax paper/sweep --config`) before
    `study.load_toml` reads it: tables are tables, row ids strings, sweep values scalars."""
    data = read_toml(path, "--config")
    name = Path(path).name
    _known(data, TOML_TABLES, f"{name}:", "table")
    meta = _expect(data.get("experiment", {}), dict, f"{name}: [experiment]")
    _known(meta, EXPERIMENT_KEYS, f"{name}: [experiment]", "key")
    if isinstance(data.get("sweep", {}), dict):
        _known(data.get("sweep", {}), SWEEP_KEYS, f"{name}: [sweep]", "key")
    for key in ("kind", "title", "baseline"):
        if key in meta:
            _expect(meta[key], str, f"{name}: [experiment] {key}")
    _expect(data.get("base", {}), dict, f"{name}: [base]")
    for i, row in enumerate(_expect(data.get("rows", []), list, f"{name}: rows")):
        _expect(row, dict, f"{name}: row {i + 1}")
        if "id" in row:
            safe_dir_name(row["id"], f"{name}: row {i + 1} id")
        for key in ("label", "layer"):
            if key in row:
                _expect(row[key], str, f"{name}: row {i + 1} {key}")
        if "needs_llm" in row:
            _expect(row["needs_llm"], bool, f"{name}: row {i + 1} needs_llm")
    sweep = _expect(data.get("sweep", {}), dict, f"{name}: [sweep]")
    if "param" in sweep:
        _expect(sweep["param"], str, f"{name}: [sweep] param")
    if "values" in sweep:
        values = sweep["values"]
        if isinstance(values, list):
            for value in values:
                if isinstance(value, (list, dict, bool)):
                    raise UsageError(f"{name}: [sweep] values must be numbers or strings "
                                     f"(got {value!r})")
        elif not isinstance(values, str):
            raise UsageError(f"{name}: [sweep] values must be a string or a list (got {values!r})")
        if isinstance(sweep.get("param"), str):
            check_sweep_values(sweep["param"], values)


def _finite(text, param: str, integral: bool) -> float | None:
    """`text` as a finite number (a whole one if `integral`); None if it is no number at all
    (`study.parse_values` reports that)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(value):
        raise UsageError(f"{param}: {text!r} is not a finite number")
    if integral and not value.is_integer():
        raise UsageError(f"{param} takes whole numbers (got {text!r})")
    return value


def check_sweep_values(param: str, spec) -> None:
    """What `study.parse_values` lets through or crashes on: a range or a value that is not
    finite, a range of too many values, a fraction for an integer field. The rest (names, empty
    lists, repeats) is its own."""
    field = {f.name: f for f in dataclasses.fields(RunConfig)}.get(param)
    if field is None:
        return
    default = getattr(RunConfig(), param)
    kind = float if param in ("tau", "answer_noise") else type(default)
    if kind not in (int, float) or isinstance(default, bool):
        return
    integral = kind is int
    if isinstance(spec, str) and ":" in spec:
        parts = spec.split(":")
        if len(parts) != 3:
            return
        lo, hi, step = (_finite(p.strip(), param, integral) for p in parts)
        if None not in (lo, hi, step) and step > 0 and hi >= lo \
                and not (hi - lo) / step <= 1000:
            raise UsageError(f"{param}={spec} gives more than 1000 values")
        return
    items = spec if isinstance(spec, list) else [x.strip() for x in str(spec).split(",")]
    for item in items:
        if str(item).strip():
            _finite(item, param, integral)


# --- result files (report, lens, h2h) -----------------------------------------------------------

def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UsageError(f"{path} is not a valid JSON file ({str(err).splitlines()[0]})") from None


def check_run_files(path) -> None:
    """The files `bsjax report`, `lens` and `h2h` read from a run directory (or a multi-process
    run's `process-K-of-N` parts), or from a study directory and its runs."""
    from bsjax.core.files import run_parts
    nonempty(str(path), "the run directory")
    root = Path(path)
    runs = [root]
    if (root / "study.json").is_file():
        study = _read_json(root / "study.json")
        where = f"{root / 'study.json'}"
        _expect(study, dict, where, True)
        _expect(study.get("kind"), str, f"{where}: kind", True)
        _expect(study.get("base"), dict, f"{where}: base", True)
        _expect(study["base"].get("protocol"), str, f"{where}: base protocol", True)
        if study.get("baseline") is not None:
            _expect(study["baseline"], str, f"{where}: baseline", True)
        runs = []
        for row in _expect(study.get("rows"), list, f"{where}: rows", True):
            _expect(row, dict, f"{where}: a row", True)
            safe_dir_name(row.get("id"), f"{where}: row id")
            _expect(row.get("overrides"), dict, f"{where}: row {row['id']} overrides", True)
            runs.append(root / "runs" / row["id"])
    for run in runs:
        for part in run_parts(run):
            games = None
            if (part / "run.json").is_file():
                games = rundir.read_run_file(part / "run.json").get("games")
            rundir.read_games(part / "games.jsonl", games or None)
            rundir.read_rows(part / "events.jsonl", rundir.EVENT_FIELDS)
            rundir.check_parts(part / "events")


__all__ = ["check_experiment_file", "check_run_config", "check_run_files", "check_study",
           "check_sweep_values"]
